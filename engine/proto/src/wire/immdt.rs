//! Immediate Data Extended Transport Header (ImmDt), 4 bytes, carried by the
//! `*_WITH_IMMEDIATE` opcodes (IBTA Vol. 1, 9.3.6). Its value is opaque
//! 32 bits; the engine keeps it as the big-endian `u32` on the wire.

use super::bytes::{get32, header_view, set32, Field};

/// Byte ranges of the ImmDt fields.
pub mod field {
    use super::Field;
    pub const IMMEDIATE: Field = 0..4;
}

header_view!(
    /// A view of an ImmDt header.
    ImmDt,
    4
);

impl<T: AsRef<[u8]>> ImmDt<T> {
    /// The immediate data.
    #[inline]
    pub fn immediate(&self) -> u32 {
        get32(self.buffer.as_ref(), field::IMMEDIATE.start)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> ImmDt<T> {
    /// Set the immediate data.
    #[inline]
    pub fn set_immediate(&mut self, value: u32) {
        set32(self.buffer.as_mut(), field::IMMEDIATE.start, value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let mut b = [0u8; 4];
        ImmDt::new_unchecked(&mut b[..]).set_immediate(0xDEAD_BEEF);
        assert_eq!(b, [0xDE, 0xAD, 0xBE, 0xEF]);
        assert_eq!(ImmDt::new_checked(&b[..]).unwrap().immediate(), 0xDEAD_BEEF);
        assert!(ImmDt::new_checked(&b[..3]).is_err());
    }
}
