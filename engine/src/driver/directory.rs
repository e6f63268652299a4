//! What the engine threads of one device share so that every QP works
//! whichever queue RSS delivers its packets to (`docs/multi-queue.md`):
//!
//! - QP numbers, allocated across the whole device (never per queue);
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
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use crossbeam_queue::ArrayQueue;

use crate::endpoint::FIRST_QPN;
use crate::io::MAX_PACKET;
use crate::rc::VerbsError;

use super::shared::{FrameBuf, Handoff, Shared};

/// One directory entry per QP number: 0 = free; otherwise `IN_USE`, maybe
/// `HOMED`, and the holding queue in the low 16 bits.
const IN_USE: u32 = 1 << 31;
const HOMED: u32 = 1 << 30;
const QUEUE_MASK: u32 = 0xFFFF;

/// Frame buffers per queue in the hand-off pool.
const BUFFERS_PER_QUEUE: usize = 128;

/// Free QP numbers: never-used ones first, then the longest-freed, so that
/// a destroyed QP's number is not reused at once.
struct QpnAllocator {
    next: u32,
    limit: u32,
    freed: VecDeque<u32>,
}

/// The device-wide state the engine threads of one device share.
pub(crate) struct Directory {
    queues: Vec<Arc<Shared>>,
    entries: Box<[AtomicU32]>,
    qpns: Mutex<QpnAllocator>,
    pool: ArrayQueue<Box<[u8]>>,
}

impl Directory {
    /// The directory of a device whose queues share `queues` (queue i at
    /// index i), for at most `max_qps` QPs.
    pub(crate) fn new(queues: Vec<Arc<Shared>>, max_qps: u32) -> Directory {
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
        Directory {
            queues,
            entries: (0..max_qps).map(|_| AtomicU32::new(0)).collect(),
            qpns: Mutex::new(QpnAllocator {
                next: 0,
                limit: max_qps,
                freed: VecDeque::new(),
            }),
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

    fn entry(&self, qpn: u32) -> Option<&AtomicU32> {
        self.entries.get(qpn.checked_sub(FIRST_QPN)? as usize)
    }

    /// A fresh QP number, held by queue `queue` (not yet homed).
    pub(crate) fn allocate_qpn(&self, queue: u32) -> Result<u32, VerbsError> {
        let mut a = self.qpns.lock().unwrap_or_else(|e| e.into_inner());
        // Never-used numbers first, then the longest-freed one.
        let index = if a.next < a.limit {
            a.next += 1;
            a.next - 1
        } else {
            a.freed.pop_front().ok_or(VerbsError::ResourceExhausted)?
        };
        self.entries[index as usize].store(IN_USE | queue, Ordering::SeqCst);
        Ok(FIRST_QPN + index)
    }

    /// Gives `qpn` back (its QP was destroyed or never created): from now
    /// on its packets are unknown-QP drops.
    pub(crate) fn free_qpn(&self, qpn: u32) {
        let Some(e) = self.entry(qpn) else { return };
        if e.swap(0, Ordering::SeqCst) & IN_USE != 0 {
            let mut a = self.qpns.lock().unwrap_or_else(|e| e.into_inner());
            a.freed.push_back(qpn - FIRST_QPN);
        }
    }

    /// The queue whose endpoint holds `qpn` (or is about to: a QP in
    /// transit is already listed under the queue it moves to), if any.
    #[inline]
    pub(crate) fn owner(&self, qpn: u32) -> Option<u32> {
        let v = self.entry(qpn)?.load(Ordering::Acquire);
        (v & IN_USE != 0).then_some(v & QUEUE_MASK)
    }

    /// Whether `qpn` is homed: it has received a packet on the queue that
    /// holds it, or moved to the queue its packets arrive on.
    pub(crate) fn is_homed(&self, qpn: u32) -> bool {
        self.entry(qpn)
            .is_some_and(|e| e.load(Ordering::Acquire) & HOMED != 0)
    }

    /// Queue `queue` received a packet for `qpn` itself, on its own RX ring:
    /// if it holds the QP and the QP is not homed yet, it is homed here.
    /// One relaxed load per packet once homed.
    #[inline]
    pub(crate) fn note_direct(&self, qpn: u32, queue: u32) {
        let Some(e) = self.entry(qpn) else { return };
        let v = e.load(Ordering::Relaxed);
        if v & HOMED == 0 && v & IN_USE != 0 && v & QUEUE_MASK == queue {
            let _ = e.compare_exchange(v, v | HOMED, Ordering::AcqRel, Ordering::Relaxed);
        }
    }

    /// Lists `qpn` under queue `to`, homed (the QP moves there).
    pub(crate) fn set_home(&self, qpn: u32, to: u32) {
        if let Some(e) = self.entry(qpn) {
            let _ = e.fetch_update(Ordering::AcqRel, Ordering::Acquire, |v| {
                (v & IN_USE != 0).then_some(IN_USE | HOMED | to)
            });
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

    fn directory(queues: u32, max_qps: u32) -> Directory {
        let shared = (0..queues)
            .map(|_| Arc::new(Shared::new(16).unwrap()))
            .collect();
        Directory::new(shared, max_qps)
    }

    #[test]
    fn qp_numbers_are_unique_across_queues_and_not_reused_at_once() {
        let d = directory(4, 8);
        let a = d.allocate_qpn(0).unwrap();
        let b = d.allocate_qpn(3).unwrap();
        assert_ne!(a, b);
        assert_eq!((d.owner(a), d.owner(b)), (Some(0), Some(3)));
        d.free_qpn(a);
        assert_eq!(d.owner(a), None);
        // The freed number comes back only after the never-used ones.
        let fresh: Vec<u32> = (0..6).map(|q| d.allocate_qpn(q % 4).unwrap()).collect();
        assert!(!fresh.contains(&a), "{fresh:?}");
        assert_eq!(d.allocate_qpn(1), Ok(a));
        assert_eq!(d.owner(a), Some(1));
        assert_eq!(d.allocate_qpn(0), Err(VerbsError::ResourceExhausted));
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
        // Numbers outside the table are nobody's.
        assert_eq!(d.owner(0), None);
        assert_eq!(d.owner(FIRST_QPN + 4), None);
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
