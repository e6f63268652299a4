//! The flat model of scatter/gather lists the `rc` and `sim` tests check
//! against: a send list's bytes are its entries' bytes concatenated; a
//! receive list takes a message's bytes in order, entry after entry.
//! Lists are drawn at random (lengths from 0, boundaries anywhere,
//! entries spread over a region with gaps between them).

#![allow(dead_code)]

use proto::rc::Sge;

/// A small deterministic generator (SplitMix64).
pub struct Rand(pub u64);

impl Rand {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n` > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// `n` lengths summing to `total`, boundaries at random (some of them
/// zero-length when boundaries coincide).
pub fn split(r: &mut Rand, total: u32, n: usize) -> Vec<u32> {
    assert!(n >= 1);
    let mut cuts: Vec<u32> = (0..n - 1)
        .map(|_| r.below(u64::from(total) + 1) as u32)
        .collect();
    cuts.push(0);
    cuts.push(total);
    cuts.sort_unstable();
    cuts.windows(2).map(|w| w[1] - w[0]).collect()
}

/// Entries of `lens` bytes in the region of `lkey` at `iova`, laid out
/// from `*cursor` (an offset in the region) with a gap of 0..64 bytes
/// before each; advances `*cursor`.
pub fn place(r: &mut Rand, lkey: u32, iova: u64, cursor: &mut u64, lens: &[u32]) -> Vec<Sge> {
    lens.iter()
        .map(|&length| {
            *cursor += r.below(64);
            let s = Sge {
                lkey,
                addr: iova + *cursor,
                length,
            };
            *cursor += u64::from(length);
            s
        })
        .collect()
}

/// The bytes the list `sges` names in `image`, a region at `iova`,
/// concatenated.
pub fn gather(image: &[u8], iova: u64, sges: &[Sge]) -> Vec<u8> {
    let mut v = Vec::new();
    for s in sges {
        let at = (s.addr - iova) as usize;
        v.extend_from_slice(&image[at..at + s.length as usize]);
    }
    v
}

/// `data` written into `image` (a region at `iova`) across `sges`, in
/// order.
pub fn scatter(image: &mut [u8], iova: u64, sges: &[Sge], data: &[u8]) {
    let mut done = 0;
    for s in sges {
        if done == data.len() {
            break;
        }
        let at = (s.addr - iova) as usize;
        let take = (s.length as usize).min(data.len() - done);
        image[at..at + take].copy_from_slice(&data[done..done + take]);
        done += take;
    }
    assert_eq!(done, data.len(), "the list holds the data");
}

/// `len` bytes of a pattern that differs per `seed`.
pub fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| ((i * 7 + i / 251) % 256) as u8 ^ seed.wrapping_mul(0x3D))
        .collect()
}
