//! Link impairments: loss, reordering, duplication and corruption.
//!
//! Corruption flips one bit in a byte the ICRC covers (IP addresses, UDP
//! ports, BTH other than its masked byte 4, extension headers, payload, the
//! ICRC itself), so the receiver's ICRC check must catch every corrupted
//! frame; a corrupted frame that is accepted is a bug the simulator exposes.

use super::rng::SplitMix64;
use core::time::Duration;

/// Probabilities (0..=1) of each impairment, applied per frame.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Impairments {
    /// Frame dropped.
    pub loss: f64,
    /// Frame delayed by up to `reorder_delay` extra, so later frames overtake it.
    pub reorder: f64,
    /// Largest extra delay of a reordered frame.
    pub reorder_delay: Duration,
    /// Frame delivered twice.
    pub duplicate: f64,
    /// One bit of the frame flipped (in ICRC-covered bytes).
    pub corrupt: f64,
}

/// What the impairments decided for one frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Fate {
    pub drop: bool,
    pub extra_delay: Duration,
    pub duplicate: bool,
    pub corrupt: bool,
}

impl Impairments {
    /// No impairment at all.
    pub const NONE: Impairments = Impairments {
        loss: 0.0,
        reorder: 0.0,
        reorder_delay: Duration::ZERO,
        duplicate: 0.0,
        corrupt: 0.0,
    };

    /// Decide the fate of one frame.
    pub fn decide(&self, rng: &mut SplitMix64) -> Fate {
        let mut f = Fate {
            drop: rng.chance(self.loss),
            ..Fate::default()
        };
        if f.drop {
            return f;
        }
        if rng.chance(self.reorder) && !self.reorder_delay.is_zero() {
            f.extra_delay =
                Duration::from_nanos(1 + rng.below(self.reorder_delay.as_nanos() as u64));
        }
        f.duplicate = rng.chance(self.duplicate);
        f.corrupt = rng.chance(self.corrupt);
        f
    }
}

/// Flip one bit of `frame` in a byte covered by the ICRC (and not masked as
/// variant). Returns the byte offset flipped, or `None` if the frame is too
/// short to be RoCE.
pub fn corrupt_covered_bit(frame: &mut [u8], rng: &mut SplitMix64) -> Option<usize> {
    if frame.len() < 14 {
        return None;
    }
    let (ip, ip_len) = match u16::from_be_bytes([frame[12], frame[13]]) {
        0x86DD => (14usize, 40usize),
        _ => (14usize, 20usize),
    };
    let udp = ip + ip_len;
    let bth = udp + 8;
    // Covered and not variant: IPv4 from the source address (offset 12) /
    // IPv6 from the source address (offset 8); skip the UDP checksum
    // (udp+6, udp+7) and BTH byte 4.
    let start = ip + if ip_len == 20 { 12 } else { 8 };
    if frame.len() <= bth + 12 {
        return None;
    }
    loop {
        let off = start + rng.below((frame.len() - start) as u64) as usize;
        if off == udp + 6 || off == udp + 7 || off == bth + 4 {
            continue;
        }
        frame[off] ^= 1 << rng.below(8);
        return Some(off);
    }
}
