//! What the engine threads of one device share so that every QP works
//! whichever queue RSS delivers its packets to (`docs/multi-queue.md`):
//!
//! - QP numbers, allocated across the whole device (never per queue),
//!   drawn at random from the 24-bit space under a secret from the OS
//!   CSPRNG, a freed number held back until [`QUARANTINE`] more have been
//!   freed;
//! - the directory: which queue's endpoint holds each QP number now, and
//!   whether the QP is *homed* (it lives on the queue its packets arrive
//!   on, learned from its first packet);
//! - every queue's [`Shared`] state, whose hand-off inbox takes frames,
//!   QPs and posts from the other queues' engine threads;
//! - a fixed pool of frame buffers for handed-off frames, so that a hand-off
//!   allocates nothing and a full pool or inbox drops (counted), never
//!   blocks.
//!
//! The rules (what each engine thread does with them) are in `thread.rs`.

use std::collections::VecDeque;
use std::sync::atomic::{fence, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crossbeam_queue::ArrayQueue;

use crate::endpoint::QpnRange;
use crate::io::MAX_PACKET;
use crate::rc::{Rng, Seed, VerbsError};

use super::shared::{FrameBuf, Handoff, Shared};

/// One directory entry per QP number: `IN_USE`, maybe `HOMED`, and the
/// holding queue in the low 16 bits; a quarantined number (freed, not yet
/// reissued) has neither bit.
const IN_USE: u32 = 1 << 31;
const HOMED: u32 = 1 << 30;
const QUARANTINED: u32 = 1 << 29;
const QUEUE_MASK: u32 = 0xFFFF;

/// Freed QP numbers held back from reuse: a number comes back only after
/// this many others have been freed (and then only if drawn again).
pub(crate) const QUARANTINE: usize = 4096;

/// Frame buffers per queue in the hand-off pool.
const BUFFERS_PER_QUEUE: usize = 128;

/// A secret from the OS CSPRNG. Without one the device could not promise
/// unpredictable numbers, so failing to get one is fatal.
pub(crate) fn os_seed() -> Seed {
    let k0 = getrandom::u64().expect("the OS random number generator (getrandom) failed");
    let k1 = getrandom::u64().expect("the OS random number generator (getrandom) failed");
    [k0, k1]
}

/// The numbers' allocator: draws, and the quarantine of freed numbers.
struct QpnAllocator {
    rng: Rng,
    live: usize,
    limit: usize,
    freed: VecDeque<u32>,
    /// Freed numbers held back ([`QUARANTINE`], less for a small range).
    quarantine: usize,
}

/// QP number -> entry, for any number of the 24-bit space: open
/// addressing with linear probing in a fixed table of `(qpn << 32) |
/// entry` words (0 = empty). Lookups (one per packet) take no lock: the
/// writers, serialized by the allocator's mutex, make the version odd
/// while they move words (insert, backward-shift delete), and a reader
/// that saw it change retries. Entry updates in place are compare-and-swap
/// of the whole word, so one cannot land on a word that moved.
struct QpnIndex {
    words: Box<[AtomicU64]>,
    mask: usize,
    version: AtomicU64,
}

impl QpnIndex {
    fn new(capacity: usize) -> QpnIndex {
        let size = (capacity * 2).next_power_of_two().max(64);
        QpnIndex {
            words: (0..size).map(|_| AtomicU64::new(0)).collect(),
            mask: size - 1,
            version: AtomicU64::new(0),
        }
    }

    #[inline]
    fn home(&self, qpn: u32) -> usize {
        (u64::from(qpn).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40) as usize & self.mask
    }

    /// The word of `qpn` and where it is.
    #[inline]
    fn find(&self, qpn: u32) -> Option<(usize, u64)> {
        loop {
            let v0 = self.version.load(Ordering::Acquire);
            if v0 & 1 == 0 {
                let found = self.probe(qpn);
                fence(Ordering::Acquire);
                if self.version.load(Ordering::Relaxed) == v0 {
                    return found;
                }
            }
            std::hint::spin_loop();
        }
    }

    #[inline]
    fn probe(&self, qpn: u32) -> Option<(usize, u64)> {
        let mut i = self.home(qpn);
        loop {
            let w = self.words[i].load(Ordering::Acquire);
            if w == 0 {
                return None;
            }
            if (w >> 32) as u32 == qpn {
                return Some((i, w));
            }
            i = (i + 1) & self.mask;
        }
    }

    #[inline]
    fn entry(&self, qpn: u32) -> u32 {
        self.find(qpn).map_or(0, |(_, w)| w as u32)
    }

    /// Writers only (under the allocator's lock): run `f` with readers
    /// told to retry.
    fn write<R>(&self, f: impl FnOnce(&Self) -> R) -> R {
        self.version.fetch_add(1, Ordering::AcqRel);
        fence(Ordering::Release);
        let r = f(self);
        self.version.fetch_add(1, Ordering::Release);
        r
    }

    /// Insert or replace `qpn`'s entry (writers only).
    fn set(&self, qpn: u32, entry: u32) {
        let word = (u64::from(qpn) << 32) | u64::from(entry);
        self.write(|t| {
            let mut i = t.home(qpn);
            loop {
                let w = t.words[i].load(Ordering::Relaxed);
                if w == 0 || (w >> 32) as u32 == qpn {
                    t.words[i].store(word, Ordering::Release);
                    return;
                }
                i = (i + 1) & t.mask;
            }
        });
    }

    /// Remove `qpn` (writers only): backward-shift deletion, no tombstones.
    fn remove(&self, qpn: u32) {
        let Some((mut hole, _)) = self.probe(qpn) else {
            return;
        };
        self.write(|t| {
            t.words[hole].store(0, Ordering::Release);
            let mut i = (hole + 1) & t.mask;
            loop {
                let w = t.words[i].load(Ordering::Relaxed);
                if w == 0 {
                    return;
                }
                let home = t.home((w >> 32) as u32);
                // Move `w` into the hole if its probe path passes the hole.
                let dist_hole = hole.wrapping_sub(home) & t.mask;
                let dist_i = i.wrapping_sub(home) & t.mask;
                if dist_hole < dist_i {
                    t.words[hole].store(w, Ordering::Release);
                    t.words[i].store(0, Ordering::Release);
                    hole = i;
                }
                i = (i + 1) & t.mask;
            }
        });
    }

    /// Compare-and-swap `qpn`'s entry from what `f` is given to what it
    /// returns (lock-free: fails harmlessly if the word moved meanwhile).
    fn update(&self, qpn: u32, f: impl Fn(u32) -> Option<u32>) {
        for _ in 0..4 {
            let Some((i, w)) = self.find(qpn) else { return };
            let Some(new) = f(w as u32) else { return };
            let nw = (w & !0xFFFF_FFFF) | u64::from(new);
            if self.words[i]
                .compare_exchange(w, nw, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                return;
            }
        }
    }
}

/// The device-wide state the engine threads of one device share.
pub(crate) struct Directory {
    queues: Vec<Arc<Shared>>,
    index: QpnIndex,
    qpns: Mutex<QpnAllocator>,
    /// The QP numbers drawn from (all of them, or an attached device's
    /// block: `crate::attach`).
    range: QpnRange,
    pool: ArrayQueue<Box<[u8]>>,
}

impl Directory {
    /// The directory of a device whose queues share `queues` (queue i at
    /// index i), each holding at most `max_qps_per_queue` QPs.
    /// QP numbers are drawn from `range` only (all of them, or an attached
    /// device's block).
    pub(crate) fn in_range(
        queues: Vec<Arc<Shared>>,
        max_qps_per_queue: u32,
        range: QpnRange,
    ) -> Directory {
        Directory::with_seed(queues, max_qps_per_queue, os_seed(), range)
    }

    fn with_seed(
        queues: Vec<Arc<Shared>>,
        max_qps_per_queue: u32,
        seed: Seed,
        range: QpnRange,
    ) -> Directory {
        let range = range.clamped().unwrap_or(QpnRange::ALL);
        // One queue never hands anything off: no pool.
        let buffers = if queues.len() > 1 {
            queues.len() * BUFFERS_PER_QUEUE
        } else {
            0
        };
        let pool = ArrayQueue::new(buffers.max(1));
        for _ in 0..buffers {
            let _ = pool.push(vec![0u8; MAX_PACKET].into_boxed_slice());
        }
        let space = (range.last - range.first + 1) as usize;
        // Room for the quarantine, which a small range shares.
        let quarantine = QUARANTINE.min(space / 2);
        let limit = (queues.len().max(1) * max_qps_per_queue as usize).min(space - quarantine);
        Directory {
            queues,
            index: QpnIndex::new(limit + QUARANTINE),
            qpns: Mutex::new(QpnAllocator {
                rng: Rng::new(seed),
                live: 0,
                limit,
                freed: VecDeque::new(),
                quarantine,
            }),
            range,
            pool,
        }
    }

    /// Number of queues.
    pub(crate) fn queue_count(&self) -> u32 {
        self.queues.len() as u32
    }

    /// Queue `q`'s shared state.
    pub(crate) fn queue(&self, q: u32) -> Option<&Arc<Shared>> {
        self.queues.get(q as usize)
    }

    /// A fresh QP number, held by queue `queue` (not yet homed): drawn at
    /// random among the numbers neither in use nor quarantined.
    pub(crate) fn allocate_qpn(&self, queue: u32) -> Result<u32, VerbsError> {
        let mut a = self.qpns.lock().unwrap_or_else(|e| e.into_inner());
        if a.live >= a.limit {
            return Err(VerbsError::ResourceExhausted);
        }
        // At most `limit + QUARANTINE` of the 2^24 numbers are taken, so a
        // draw hits a free one with probability near 1 (and ends).
        let (first, span) = (self.range.first, self.range.last - self.range.first + 1);
        let qpn = loop {
            let q = first + a.rng.next_u24() % span;
            if self.index.entry(q) == 0 {
                break q;
            }
        };
        self.index.set(qpn, IN_USE | queue);
        a.live += 1;
        Ok(qpn)
    }

    /// QP numbers in use (allocated and not freed), across the device.
    pub(crate) fn live_qps(&self) -> usize {
        self.qpns.lock().unwrap_or_else(|e| e.into_inner()).live
    }

    /// A first send PSN for a new QP, from the device's secret.
    pub(crate) fn draw_psn(&self) -> u32 {
        let mut a = self.qpns.lock().unwrap_or_else(|e| e.into_inner());
        a.rng.next_u24()
    }

    /// Gives `qpn` back (its QP was destroyed or never created): from now
    /// on its packets are unknown-QP drops, and the number is quarantined.
    pub(crate) fn free_qpn(&self, qpn: u32) {
        let mut a = self.qpns.lock().unwrap_or_else(|e| e.into_inner());
        if self.index.entry(qpn) & IN_USE == 0 {
            return;
        }
        self.index.set(qpn, QUARANTINED);
        a.live -= 1;
        a.freed.push_back(qpn);
        if a.freed.len() > a.quarantine {
            if let Some(old) = a.freed.pop_front() {
                self.index.remove(old);
            }
        }
    }

    /// The queue whose endpoint holds `qpn` (or is about to: a QP in
    /// transit is already listed under the queue it moves to), if any.
    #[inline]
    pub(crate) fn owner(&self, qpn: u32) -> Option<u32> {
        let v = self.index.entry(qpn);
        (v & IN_USE != 0).then_some(v & QUEUE_MASK)
    }

    /// Whether `qpn` is homed: it has received a packet on the queue that
    /// holds it, or moved to the queue its packets arrive on.
    pub(crate) fn is_homed(&self, qpn: u32) -> bool {
        self.index.entry(qpn) & HOMED != 0
    }

    /// Queue `queue` received a packet for `qpn` itself, on its own RX ring:
    /// if it holds the QP and the QP is not homed yet, it is homed here.
    /// One lock-free lookup per packet.
    #[inline]
    pub(crate) fn note_direct(&self, qpn: u32, queue: u32) {
        let v = self.index.entry(qpn);
        if v & HOMED == 0 && v & IN_USE != 0 && v & QUEUE_MASK == queue {
            self.index.update(qpn, |v| {
                (v & IN_USE != 0 && v & HOMED == 0).then_some(v | HOMED)
            });
        }
    }

    /// Lists `qpn` under queue `to`, homed (the QP moves there).
    pub(crate) fn set_home(&self, qpn: u32, to: u32) {
        let _a = self.qpns.lock().unwrap_or_else(|e| e.into_inner());
        if self.index.entry(qpn) & IN_USE != 0 {
            self.index.set(qpn, IN_USE | HOMED | to);
        }
    }

    /// Copies `frame`, received on queue `from`, into a pooled buffer and
    /// queues it for queue `to`; false (and nothing queued) when no buffer
    /// is free or `to`'s inbox is full.
    pub(crate) fn hand_off_frame(&self, from: u32, to: u32, frame: &[u8]) -> bool {
        let Some(target) = self.queue(to) else {
            return false;
        };
        if frame.len() > MAX_PACKET {
            return false;
        }
        let Some(mut buf) = self.pool.pop() else {
            return false;
        };
        buf[..frame.len()].copy_from_slice(frame);
        let fb = FrameBuf {
            buf,
            len: frame.len(),
            from,
        };
        match target.hand_off(Handoff::Frame(fb)) {
            Ok(()) => true,
            Err(Handoff::Frame(fb)) => {
                self.recycle(fb);
                false
            }
            Err(_) => false,
        }
    }

    /// Returns a handed-off frame's buffer to the pool.
    pub(crate) fn recycle(&self, fb: FrameBuf) {
        let _ = self.pool.push(fb.buf);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::endpoint::{FIRST_QPN, MAX_QPN};

    fn directory(queues: u32, max_qps: u32) -> Directory {
        let shared = (0..queues)
            .map(|_| Arc::new(Shared::new(16).unwrap()))
            .collect();
        Directory::with_seed(shared, max_qps, [1, 2], QpnRange::ALL)
    }

    #[test]
    fn qp_numbers_are_random_unique_and_not_reused_at_once() {
        let d = directory(4, 2);
        let a = d.allocate_qpn(0).unwrap();
        let b = d.allocate_qpn(3).unwrap();
        assert_ne!(a, b);
        assert!((FIRST_QPN..=MAX_QPN).contains(&a));
        assert_eq!((d.owner(a), d.owner(b)), (Some(0), Some(3)));
        d.free_qpn(a);
        assert_eq!(d.owner(a), None);
        // 4 queues x 2: seven more fit (one was freed), then the device is full.
        let more: Vec<u32> = (0..7).map(|q| d.allocate_qpn(q % 4).unwrap()).collect();
        assert!(!more.contains(&a), "{more:?}");
        assert_eq!(d.allocate_qpn(0), Err(VerbsError::ResourceExhausted));
    }

    #[test]
    fn a_freed_number_stays_quarantined_while_many_others_come_and_go() {
        let d = directory(1, 4);
        let first = d.allocate_qpn(0).unwrap();
        d.free_qpn(first);
        for _ in 0..QUARANTINE {
            let q = d.allocate_qpn(0).unwrap();
            assert_ne!(q, first);
            d.free_qpn(q);
        }
        // The index still finds every live number after the deletions.
        let live: Vec<u32> = (0..4).map(|_| d.allocate_qpn(0).unwrap()).collect();
        assert!(live.iter().all(|&q| d.owner(q) == Some(0)));
    }

    #[test]
    fn a_qp_is_homed_by_a_packet_on_its_own_queue_or_by_moving() {
        let d = directory(2, 4);
        let a = d.allocate_qpn(0).unwrap();
        d.note_direct(a, 1); // another queue's packet does not home it
        assert!(!d.is_homed(a));
        d.note_direct(a, 0);
        assert!(d.is_homed(a));
        let b = d.allocate_qpn(0).unwrap();
        d.set_home(b, 1);
        assert_eq!(d.owner(b), Some(1));
        assert!(d.is_homed(b));
        // A freed number is neither held nor homed.
        d.free_qpn(b);
        d.set_home(b, 0);
        assert_eq!(d.owner(b), None);
        assert!(!d.is_homed(b));
        // Numbers nobody was given are nobody's.
        assert_eq!(d.owner(0), None);
        assert_eq!(d.owner(MAX_QPN + 1), None);
    }

    #[test]
    fn a_full_inbox_or_pool_refuses_a_hand_off_and_loses_no_buffer() {
        let d = directory(2, 4);
        let frame = [7u8; 100];
        let mut queued = 0;
        while d.hand_off_frame(0, 1, &frame) {
            queued += 1;
        }
        // Queue 1's inbox holds 16 (the test's depth); the pool has more.
        assert_eq!(queued, 16);
        assert_eq!(d.pool.len(), 2 * BUFFERS_PER_QUEUE - 16);
        // Taking them gives the frames back, and their buffers to the pool.
        let inbox = d.queue(1).unwrap();
        while let Some(h) = inbox.take_handoff() {
            let Handoff::Frame(fb) = h else {
                panic!("only frames were queued")
            };
            assert_eq!((fb.frame(), fb.from), (&frame[..], 0));
            d.recycle(fb);
        }
        assert_eq!(d.pool.len(), 2 * BUFFERS_PER_QUEUE);
        // Too long a frame, or no such queue: refused.
        assert!(!d.hand_off_frame(0, 1, &vec![0u8; MAX_PACKET + 1]));
        assert!(!d.hand_off_frame(0, 9, &frame));
    }
}
