//! Unpredictable numbers from a caller's secret seed, sans-IO: the core
//! never reads the OS's randomness itself. The engine seeds every endpoint
//! from the OS CSPRNG (`getrandom`); the simulator and the tests pass their
//! own seed, so a seeded run stays reproducible.
//!
//! - [`Rng`]: SipHash-2-4 (a keyed PRF) in counter mode, for QP numbers
//!   and initial PSNs;
//! - [`KeyPermutation`]: a keyed permutation of the 32-bit values (a
//!   Feistel network whose round function is SipHash), applied to a
//!   counter: memory keys that look random but never repeat until the
//!   counter wraps (2^32 keys, 2^31 registrations, since each takes an
//!   L_Key and a different R_Key).

/// Hashes a number that a peer cannot choose into (QP numbers, memory
/// keys: a packet can only look them up), for `HashMap` indexes: a
/// 64x64->128-bit multiply folded, so every input bit reaches both the
/// bucket bits and the tag bits.
#[derive(Default)]
pub(crate) struct NumberHasher(u64);

impl core::hash::Hasher for NumberHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u32(u32::from(b));
        }
    }
    #[inline]
    fn write_u32(&mut self, v: u32) {
        // 64 x 64 bits: the product fits in 128 bits (no overflow).
        let p = u128::from(self.0 ^ u64::from(v)) * u128::from(0x9E37_79B9_7F4A_7C15_u64);
        self.0 = (p as u64) ^ ((p >> 64) as u64);
    }
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

/// A `HashMap` keyed by such numbers.
pub(crate) type NumberMap<V> =
    std::collections::HashMap<u32, V, core::hash::BuildHasherDefault<NumberHasher>>;

/// A 128-bit secret that seeds an endpoint's [`Rng`] and key permutation.
pub type Seed = [u64; 2];

/// SipHash-2-4 of one 64-bit word under key `k` (the reference algorithm
/// for an 8-byte message: one block, then the length block).
#[inline]
pub(crate) fn siphash(k: Seed, m: u64) -> u64 {
    let mut v = [
        k[0] ^ 0x736f_6d65_7073_6575,
        k[1] ^ 0x646f_7261_6e64_6f6d,
        k[0] ^ 0x6c79_6765_6e65_7261,
        k[1] ^ 0x7465_6462_7974_6573,
    ];
    #[inline(always)]
    fn round(v: &mut [u64; 4]) {
        v[0] = v[0].wrapping_add(v[1]);
        v[1] = v[1].rotate_left(13) ^ v[0];
        v[0] = v[0].rotate_left(32);
        v[2] = v[2].wrapping_add(v[3]);
        v[3] = v[3].rotate_left(16) ^ v[2];
        v[0] = v[0].wrapping_add(v[3]);
        v[3] = v[3].rotate_left(21) ^ v[0];
        v[2] = v[2].wrapping_add(v[1]);
        v[1] = v[1].rotate_left(17) ^ v[2];
        v[2] = v[2].rotate_left(32);
    }
    for block in [m, 8u64 << 56] {
        v[3] ^= block;
        round(&mut v);
        round(&mut v);
        v[0] ^= block;
    }
    v[2] ^= 0xff;
    for _ in 0..4 {
        round(&mut v);
    }
    v[0] ^ v[1] ^ v[2] ^ v[3]
}

/// SipHash-2-4 in counter mode: 64 unpredictable bits per call for whoever
/// does not know the seed.
#[derive(Debug, Clone)]
pub struct Rng {
    key: Seed,
    counter: u64,
}

impl Rng {
    /// A generator keyed by `seed`.
    pub fn new(seed: Seed) -> Rng {
        Rng {
            key: seed,
            counter: 0,
        }
    }

    /// The next 64 bits.
    pub fn next_u64(&mut self) -> u64 {
        self.counter = self.counter.wrapping_add(1);
        siphash(self.key, self.counter)
    }

    /// A value in the 24-bit space of PSNs and QP numbers.
    pub fn next_u24(&mut self) -> u32 {
        (self.next_u64() & 0xFF_FFFF) as u32
    }
}

/// A secret permutation of the 32-bit values (8 Feistel rounds over 16-bit
/// halves, SipHash as the round function).
#[derive(Debug, Clone)]
pub struct KeyPermutation {
    key: Seed,
}

const FEISTEL_ROUNDS: u64 = 8;

impl KeyPermutation {
    /// The permutation keyed by `key`.
    pub fn new(key: Seed) -> KeyPermutation {
        KeyPermutation { key }
    }

    /// The image of `x`: distinct inputs give distinct outputs.
    pub fn apply(&self, x: u32) -> u32 {
        let (mut l, mut r) = (x >> 16, x & 0xFFFF);
        for i in 0..FEISTEL_ROUNDS {
            let f = (siphash(self.key, (i << 32) | u64::from(r)) & 0xFFFF) as u32;
            (l, r) = (r, l ^ f);
        }
        (l << 16) | r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression (found by `fuzz/`'s `pair` target under overflow checks):
    /// the index hasher multiplied a 64-bit state by a 128-bit constant,
    /// which overflows u128. Any state and input must hash without
    /// overflow; checked here with checked arithmetic, whatever the build.
    #[test]
    fn number_hasher_never_overflows() {
        use core::hash::Hasher;
        for state in [0u64, 1, u64::MAX, 0x8000_0000_0000_0000] {
            for v in [0u32, 1, 0xff_ffff, u32::MAX] {
                let x = u128::from(state ^ u64::from(v));
                let p = x.checked_mul(u128::from(0x9E37_79B9_7F4A_7C15_u64));
                let p = p.expect("64 x 64 bits fit in 128");
                let mut h = NumberHasher(state);
                h.write_u32(v);
                assert_eq!(h.finish(), (p as u64) ^ ((p >> 64) as u64));
            }
        }
    }

    #[test]
    #[allow(deprecated)]
    fn siphash_matches_the_reference() {
        use std::hash::{Hasher, SipHasher};
        for (k, m) in [
            ([0, 0], 0u64),
            ([1, 2], 0xdead_beef),
            ([u64::MAX, 7], 1 << 63),
        ] {
            let mut h = SipHasher::new_with_keys(k[0], k[1]);
            h.write_u64(m);
            assert_eq!(siphash(k, m), h.finish());
        }
    }

    #[test]
    fn the_permutation_is_one_to_one_and_keyed() {
        let p = KeyPermutation::new([3, 4]);
        let q = KeyPermutation::new([3, 5]);
        let mut seen = std::collections::HashSet::new();
        for x in 0..100_000u32 {
            assert!(seen.insert(p.apply(x)), "{x} collides");
        }
        assert_ne!(p.apply(1), q.apply(1));
        let mut r = Rng::new([1, 1]);
        assert_ne!(r.next_u64(), r.next_u64());
        assert!(r.next_u24() < 1 << 24);
    }
}
