//! 24-bit packet sequence numbers with wrap-aware ordering.
//!
//! Rule (`docs/reliable-connection.md`, "PSN arithmetic"): PSNs are 24-bit
//! and wrap; compare with the sign of `((a - b) << 8) as i32`. Relative to a
//! reference PSN, the 2^23 PSNs below it are "before" and the 2^23 - 1 above
//! are "after".

use core::cmp::Ordering;
use core::fmt;

/// A 24-bit packet sequence number.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Psn(u32);

impl Psn {
    /// Mask of the 24 significant bits.
    pub const MASK: u32 = 0x00FF_FFFF;

    /// A PSN from the low 24 bits of `v`.
    #[inline]
    pub const fn new(v: u32) -> Psn {
        Psn(v & Self::MASK)
    }

    /// The 24-bit value.
    #[inline]
    pub const fn value(self) -> u32 {
        self.0
    }

    /// `self + n`, modulo 2^24.
    #[inline]
    pub const fn add(self, n: u32) -> Psn {
        Psn(self.0.wrapping_add(n) & Self::MASK)
    }

    /// `self - n`, modulo 2^24.
    #[inline]
    pub const fn sub(self, n: u32) -> Psn {
        Psn(self.0.wrapping_sub(n) & Self::MASK)
    }

    /// Signed distance `self - other` in (-2^23, 2^23], the rule of
    /// `docs/reliable-connection.md`, "PSN arithmetic":
    /// the sign of `((a - b) << 8) as i32`, shifted back down.
    #[inline]
    pub const fn diff(self, other: Psn) -> i32 {
        ((self.0.wrapping_sub(other.0) << 8) as i32) >> 8
    }

    /// Wrap-aware comparison of two PSNs.
    #[inline]
    pub fn cmp_wrapping(self, other: Psn) -> Ordering {
        self.diff(other).cmp(&0)
    }

    /// `self` is strictly before `other`.
    #[inline]
    pub const fn before(self, other: Psn) -> bool {
        self.diff(other) < 0
    }

    /// `self` is strictly after `other`.
    #[inline]
    pub const fn after(self, other: Psn) -> bool {
        self.diff(other) > 0
    }

    /// `start <= self < start + len` (wrap-aware).
    #[inline]
    pub const fn in_window(self, start: Psn, len: u32) -> bool {
        (self.0.wrapping_sub(start.0) & Self::MASK) < len
    }
}

impl fmt::Debug for Psn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Psn({:#08x})", self.0)
    }
}

impl fmt::Display for Psn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn add_wraps_at_2_pow_24() {
        assert_eq!(Psn::new(0xFF_FFFF).add(1), Psn::new(0));
        assert_eq!(Psn::new(0xFF_FFFE).add(5).value(), 3);
        assert_eq!(Psn::new(2).sub(3).value(), 0xFF_FFFF);
        assert_eq!(Psn::new(0x1_000_005).value(), 5);
    }

    #[test]
    fn ordering_is_wrap_aware() {
        let a = Psn::new(0xFF_FFF0);
        let b = Psn::new(0x10);
        assert!(a.before(b));
        assert!(b.after(a));
        assert_eq!(b.diff(a), 0x20);
        assert_eq!(a.diff(b), -0x20);
        assert_eq!(a.cmp_wrapping(a), Ordering::Equal);
        // Exactly half the space away: 2^23 counts as "after" from below.
        let c = Psn::new(0x80_0000);
        assert_eq!(c.diff(Psn::new(0)), -0x80_0000);
        assert_eq!(Psn::new(0x7F_FFFF).diff(Psn::new(0)), 0x7F_FFFF);
    }

    #[test]
    fn window_membership_across_wrap() {
        let start = Psn::new(0xFF_FFFE);
        assert!(start.in_window(start, 1));
        assert!(Psn::new(1).in_window(start, 4));
        assert!(!Psn::new(2).in_window(start, 4));
        assert!(!Psn::new(0xFF_FFFD).in_window(start, 4));
    }
}
