//! The index from QP number to slot of a [`super::qp_table::QpTable`]: an
//! open-addressing table whose every bucket holds the number and the slot
//! together, in 8 bytes.
//!
//! Why not `HashMap`: its control bytes and its buckets are two arrays, so
//! a lookup whose QP is out of the caches (with thousands of active QPs,
//! every packet's) missed twice, once in each. Here one bucket is one
//! load, and a probe run almost always stays in its cache line (eight
//! buckets a line, at most three quarters of them used). Profiled on
//! `roce-xdp sim --qps 65536` with `perf record`, the two misses were the
//! larger part of the packet path's QP lookup.
//!
//! Linear probing from a multiplicative hash of the number; removal
//! shifts the rest of the run back (no tombstones), so a long-running
//! endpoint that creates and destroys QPs never degrades its probes.
//! Which numbers are in the table is chosen by the endpoint (at random
//! over the 24-bit space), never by a peer: a packet can only look up.

use super::MemoryRange;

/// Bucket value of an empty bucket; a used one holds `(qpn + 1) << 32 | slot`.
const EMPTY: u64 = 0;
/// The fewest buckets of a table that holds anything.
const MIN_BUCKETS: usize = 16;

/// QP number → slot (see the module's documentation).
#[derive(Default)]
pub(super) struct QpnIndex {
    /// A power of two many buckets, or none.
    buckets: Box<[u64]>,
    len: usize,
}

/// The buckets for `n` numbers at most three quarters full.
fn buckets_for(n: usize) -> usize {
    (n.saturating_mul(4) / 3 + 1)
        .next_power_of_two()
        .max(MIN_BUCKETS)
}

impl QpnIndex {
    /// An index with room for `n` numbers before it grows. Its buckets
    /// are zeroed memory from the allocator (address space: the pages are
    /// touched as numbers land in them).
    pub fn with_capacity(n: usize) -> QpnIndex {
        if n == 0 {
            return QpnIndex::default();
        }
        QpnIndex {
            buckets: vec![EMPTY; buckets_for(n)].into_boxed_slice(),
            len: 0,
        }
    }

    /// Numbers held.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    #[inline]
    fn mask(&self) -> usize {
        self.buckets.len().wrapping_sub(1)
    }

    /// The first bucket of `qpn`'s probe run: the top bits of a
    /// multiplicative (Fibonacci) hash, which spreads consecutive numbers
    /// as well as random ones.
    #[inline]
    fn home(&self, qpn: u32) -> usize {
        let h = u64::from(qpn).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let bits = self.buckets.len().trailing_zeros();
        (h >> (64 - bits)) as usize
    }

    #[inline]
    fn tag(qpn: u32) -> u64 {
        (u64::from(qpn) + 1) << 32
    }

    /// The bucket that holds `qpn`, if any.
    #[inline]
    fn find(&self, qpn: u32) -> Option<usize> {
        if self.len == 0 {
            return None;
        }
        let (mask, tag) = (self.mask(), Self::tag(qpn));
        let mut i = self.home(qpn);
        // Ends: at most three quarters of the buckets are used.
        loop {
            let e = self.buckets[i];
            if e == EMPTY {
                return None;
            }
            if e & !0xFFFF_FFFF == tag {
                return Some(i);
            }
            i = (i + 1) & mask;
        }
    }

    /// Where `qpn`'s probe run starts: the bucket a lookup reads first
    /// (the run almost always ends in its cache line), as an address, for
    /// a receiver to prefetch. Nothing is read.
    #[inline]
    pub fn home_range(&self, qpn: u32) -> Option<MemoryRange> {
        if self.buckets.is_empty() {
            return None;
        }
        Some(MemoryRange::of(&self.buckets[self.home(qpn)]))
    }

    /// The slot of `qpn`.
    #[inline]
    pub fn get(&self, qpn: u32) -> Option<u32> {
        self.find(qpn).map(|i| self.buckets[i] as u32)
    }

    /// Maps `qpn` to `slot`; the caller checked that `qpn` is not held.
    pub fn insert(&mut self, qpn: u32, slot: u32) {
        debug_assert!(self.find(qpn).is_none(), "QP number {qpn:#x} indexed twice");
        if (self.len + 1) * 4 > self.buckets.len() * 3 {
            self.grow();
        }
        self.place(Self::tag(qpn) | u64::from(slot));
        self.len += 1;
    }

    /// Puts a used bucket value in the first empty bucket of its run.
    fn place(&mut self, e: u64) {
        let mask = self.mask();
        let mut i = self.home(((e >> 32) - 1) as u32);
        while self.buckets[i] != EMPTY {
            i = (i + 1) & mask;
        }
        self.buckets[i] = e;
    }

    /// Twice the buckets (at least [`MIN_BUCKETS`]), every number placed again.
    fn grow(&mut self) {
        let n = (self.buckets.len() * 2).max(MIN_BUCKETS);
        let old = std::mem::replace(&mut self.buckets, vec![EMPTY; n].into_boxed_slice());
        for e in old.iter().copied().filter(|&e| e != EMPTY) {
            self.place(e);
        }
    }

    /// Removes `qpn`, returning its slot. The buckets after it in its run
    /// move back into the hole where their own run allows, so every held
    /// number stays reachable from its home bucket with no empty bucket
    /// in between.
    pub fn remove(&mut self, qpn: u32) -> Option<u32> {
        let mut hole = self.find(qpn)?;
        let slot = self.buckets[hole] as u32;
        let mask = self.mask();
        let mut j = (hole + 1) & mask;
        loop {
            let e = self.buckets[j];
            if e == EMPTY {
                break;
            }
            let home = self.home(((e >> 32) - 1) as u32);
            // The entry at j may fill the hole if the hole lies on its
            // probe path, from its home up to j (cyclically).
            if (j.wrapping_sub(home) & mask) >= (j.wrapping_sub(hole) & mask) {
                self.buckets[hole] = e;
                hole = j;
            }
            j = (j + 1) & mask;
        }
        self.buckets[hole] = EMPTY;
        self.len -= 1;
        Some(slot)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// A SplitMix64 step: the test's own reproducible numbers.
    fn next(s: &mut u64) -> u64 {
        *s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = *s;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    #[test]
    fn an_empty_index_finds_nothing_and_removes_nothing() {
        let mut x = QpnIndex::default();
        assert_eq!((x.get(0x11), x.remove(0x11), x.len()), (None, None, 0));
        let mut x = QpnIndex::with_capacity(4);
        assert_eq!(
            (x.get(0), x.get(0xFF_FFFF), x.remove(7)),
            (None, None, None)
        );
    }

    #[test]
    fn numbers_at_the_ends_of_the_24_bit_space_and_slot_zero() {
        let mut x = QpnIndex::default();
        for (qpn, slot) in [(0, 3), (1, 0), (0xFF_FFFF, u32::MAX), (0x11, 9)] {
            x.insert(qpn, slot);
        }
        assert_eq!(x.get(0), Some(3));
        assert_eq!(x.get(1), Some(0));
        assert_eq!(x.get(0xFF_FFFF), Some(u32::MAX));
        assert_eq!(x.get(2), None);
        assert_eq!(x.remove(0xFF_FFFF), Some(u32::MAX));
        assert_eq!((x.get(0xFF_FFFF), x.len()), (None, 3));
    }

    /// Random inserts and removes, numbers from a small range so that runs
    /// collide and wrap around the end of the buckets, checked against
    /// `HashMap` after every step: every number held is found with its
    /// slot, every other is not.
    #[test]
    fn follows_a_hash_map_through_random_inserts_and_removes() {
        for (seed, range) in [(1u64, 64u32), (2, 1000), (3, 1 << 24)] {
            let mut s = seed;
            let mut x = QpnIndex::with_capacity(if seed == 2 { 100 } else { 0 });
            let mut model: HashMap<u32, u32> = HashMap::new();
            for step in 0..20_000u32 {
                let qpn = (next(&mut s) % u64::from(range)) as u32;
                let insert = !next(&mut s).is_multiple_of(3);
                if !insert {
                    assert_eq!(x.remove(qpn), model.remove(&qpn));
                } else if let std::collections::hash_map::Entry::Vacant(e) = model.entry(qpn) {
                    x.insert(qpn, step);
                    e.insert(step);
                }
                assert_eq!(x.len(), model.len());
                if step % 97 == 0 || range == 64 {
                    for q in 0..range.min(2048) {
                        assert_eq!(x.get(q), model.get(&q).copied(), "qpn {q} at step {step}");
                    }
                    for (&q, &v) in &model {
                        assert_eq!(x.get(q), Some(v));
                    }
                }
            }
        }
    }

    #[test]
    fn stays_at_most_three_quarters_full_and_reserves_ahead() {
        let mut x = QpnIndex::with_capacity(65_536);
        let reserved = x.buckets.len();
        assert_eq!(reserved, 131_072);
        for q in 0..65_536u32 {
            x.insert(q * 7 + 0x11, q);
        }
        assert_eq!(
            x.buckets.len(),
            reserved,
            "65,536 numbers fit the reservation"
        );
        assert!(x.len * 4 <= x.buckets.len() * 3);
        for q in 0..65_536u32 {
            assert_eq!(x.get(q * 7 + 0x11), Some(q));
        }
    }
}
