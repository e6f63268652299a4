//! Shared receive queues (SRQs): one queue of receive work requests that
//! any number of RC QPs take their receives from (IBA 10.2.9.5, 11.2.3).
//!
//! Rules (reference: Linux rxe `rxe_srq.c`, `get_srq_wqe` in `rxe_resp.c`,
//! rdma-core `providers/rxe/rxe.c`):
//! - created with `max_wr` in `1..=MAX_SRQ_WR` and `max_sge` in
//!   `1..=MAX_SRQ_SGE` (0 taken as 1; rxe `RXE_MAX_SRQ_SGE`), else refused (rxe
//!   `rxe_srq_chk_init`: `-EINVAL`); a nonzero `srq_limit` at creation
//!   arms the limit, unchecked (rxe `rxe_srq_from_init` keeps it as
//!   given);
//! - a QP created on an SRQ has no receive queue of its own: posting a
//!   receive to the QP is refused (rxe's provider: the QP has no
//!   `rq.queue`, `EINVAL`);
//! - a receive carries up to `max_sge` SGEs (rxe's provider: more is
//!   `EINVAL`), each checked as a QP's receive's; a list is kept in the
//!   SRQ's arena (`max_wr` x `max_sge` entries, made at the first list
//!   posted), in the slot of its place in the ring: the queue is FIFO and
//!   holds at most `max_wr` WQEs, so a slot is free again before it comes
//!   round. When a QP takes a list WQE it copies the list into its own
//!   receive arena (`rc/sgl.rs`, one slot: a QP receives one message at a
//!   time), so the SRQ's slot is free at once, and the QP scatters
//!   packets across it as across a list of its own receive queue;
//! - the responder takes the WQE at the head of the SRQ when the first
//!   packet of a SEND (or a WRITE with immediate) executes, and the QP
//!   holds that one WQE until the message's last packet: messages of one
//!   QP take WQEs in their order, and interleaved messages of several QPs
//!   each keep theirs (`rc/responder.rs`, `InProgress::Send`);
//! - an empty SRQ answers as an empty receive queue does: RNR NAK, nothing
//!   executed (IBA 9.7.5.2.8), counted here too ([`SrqCounters`]);
//! - the limit (IBA 11.5.2.4, "SRQ Limit Reached"): while armed (a nonzero
//!   `srq_limit`), the WQE taken that leaves fewer than `srq_limit`
//!   posted raises one [`SrqLimitReached`](crate::endpoint::AsyncEvent)
//!   and disarms it (`srq_limit` reads 0 again) until `modify_srq` arms
//!   it anew (rxe `get_srq_wqe`);
//! - `modify_srq`: `IBV_SRQ_LIMIT` up to the queue's `max_wr` (rxe
//!   `rxe_srq_chk_attr`: beyond, `-EINVAL`); `IBV_SRQ_MAX_WR` resizes the
//!   queue (rxe `rxe_queue_resize`), refused beyond [`MAX_SRQ_WR`], below
//!   an armed limit, or below the WQEs posted now;
//! - destroying an SRQ that a QP still uses is refused (`-EBUSY`, the
//!   kernel's `ib_destroy_srq_user`);
//! - a QP that goes to the error state flushes what it took (a message in
//!   progress) but not the SRQ: its WQEs stay for the other QPs (rxe
//!   `flush_recv_queue` returns early for a QP on an SRQ).

use std::collections::VecDeque;

use super::error::VerbsError;
use super::responder::RecvWqe;
use super::sgl::WqeData;
use super::wqe::{RecvWr, Sge};

/// Most SRQs an endpoint holds.
pub const MAX_SRQS: u32 = 1 << 12;

/// Most WQEs an SRQ holds (as a QP's receive queue: `1 << 16`).
pub const MAX_SRQ_WR: u32 = 1 << 16;

/// Most scatter/gather entries an SRQ's receive carries (rxe
/// `RXE_MAX_SRQ_SGE`).
pub const MAX_SRQ_SGE: u32 = 27;

/// Attributes of an SRQ (`ibv_srq_attr`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SrqAttr {
    /// WQEs the queue holds.
    pub max_wr: u32,
    /// Scatter/gather entries a WQE may carry.
    pub max_sge: u32,
    /// The limit: 0 disarmed, else the count of posted WQEs below which
    /// the SRQ reports [`crate::endpoint::AsyncEvent::SrqLimitReached`].
    pub srq_limit: u32,
}

/// Which attributes `modify_srq` changes (`ibv_srq_attr_mask`; the bits
/// are verbs' `IBV_SRQ_MAX_WR` and `IBV_SRQ_LIMIT`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SrqAttrMask(pub u32);

impl SrqAttrMask {
    /// Resize the queue to `max_wr`.
    pub const MAX_WR: SrqAttrMask = SrqAttrMask(1);
    /// Arm the limit at `srq_limit` (0 disarms).
    pub const LIMIT: SrqAttrMask = SrqAttrMask(2);

    pub fn contains(self, other: SrqAttrMask) -> bool {
        self.0 & other.0 == other.0
    }
}

impl core::ops::BitOr for SrqAttrMask {
    type Output = SrqAttrMask;
    fn bitor(self, rhs: SrqAttrMask) -> SrqAttrMask {
        SrqAttrMask(self.0 | rhs.0)
    }
}

/// What an SRQ counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SrqCounters {
    /// Receive WQEs posted.
    pub posted: u64,
    /// WQEs QPs took (one per SEND or WRITE with immediate).
    pub taken: u64,
    /// RNR NAKs its QPs sent because it was empty.
    pub rnr_naks: u64,
    /// Limit events raised.
    pub limit_events: u64,
}

/// Why an SRQ refused its creation or a change (each an `EINVAL` in rxe).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SrqError {
    /// `max_wr` 0 or beyond [`MAX_SRQ_WR`].
    MaxWr,
    /// `max_sge` beyond [`MAX_SRQ_SGE`].
    MaxSge,
    /// `srq_limit` beyond the queue's `max_wr`.
    Limit,
    /// A new `max_wr` below the armed limit or the WQEs posted now.
    WouldDrop,
    /// A receive with more SGEs than the SRQ's `max_sge`.
    TooManySges,
}

impl SrqError {
    /// What it means, for [`super::VerbsError::InvalidArgument`].
    pub const fn what(self) -> &'static str {
        match self {
            SrqError::MaxWr => "SRQ max_wr must be 1..=65536",
            SrqError::MaxSge => "SRQ max_sge beyond the device's",
            SrqError::Limit => "SRQ limit beyond its max_wr",
            SrqError::WouldDrop => "SRQ max_wr below its limit or the receives posted",
            SrqError::TooManySges => "more SGEs than the SRQ's max_sge",
        }
    }
}

/// One shared receive queue.
#[derive(Debug)]
pub struct Srq {
    /// The protection domain it was created in.
    pd: u32,
    /// Posted WQEs: one SGE in the request, or a list at a slot of
    /// `lists` (`WqeData::List`, its total in `wr.sge.length`).
    wqes: VecDeque<RecvWqe>,
    /// `max_wr` x `max_sge` SGEs once a list was posted (see the module).
    lists: Vec<Sge>,
    /// The slot of the next list posted.
    list_next: u32,
    max_wr: u32,
    max_sge: u32,
    /// 0: disarmed.
    limit: u32,
    /// The limit was reached and not yet reported.
    limit_event: bool,
    /// QPs created on it (a destroy is refused while any is).
    qps: u32,
    counters: SrqCounters,
}

impl Srq {
    /// An empty SRQ (checked as rxe `rxe_srq_chk_init`).
    pub(crate) fn new(pd: u32, attr: SrqAttr) -> Result<Srq, SrqError> {
        if attr.max_wr == 0 || attr.max_wr > MAX_SRQ_WR {
            return Err(SrqError::MaxWr);
        }
        if attr.max_sge > MAX_SRQ_SGE {
            return Err(SrqError::MaxSge);
        }
        // The limit is taken as given, unchecked (rxe rxe_srq_from_init).
        Ok(Srq {
            pd,
            // Grows as receives are posted, as a QP's receive queue.
            wqes: VecDeque::new(),
            lists: Vec::new(),
            list_next: 0,
            max_wr: attr.max_wr,
            max_sge: attr.max_sge.max(1),
            limit: attr.srq_limit,
            limit_event: false,
            qps: 0,
            counters: SrqCounters::default(),
        })
    }

    /// Its protection domain.
    pub fn pd(&self) -> u32 {
        self.pd
    }

    /// Its attributes now (`ibv_query_srq`): `srq_limit` reads 0 once the
    /// limit fired.
    pub fn attr(&self) -> SrqAttr {
        SrqAttr {
            max_wr: self.max_wr,
            max_sge: self.max_sge,
            srq_limit: self.limit,
        }
    }

    /// WQEs posted and not taken.
    pub fn posted(&self) -> usize {
        self.wqes.len()
    }

    /// QPs created on it and not destroyed.
    pub fn qps(&self) -> u32 {
        self.qps
    }

    /// What it counted.
    pub fn counters(&self) -> SrqCounters {
        self.counters
    }

    /// Change the limit and/or the size (checked as rxe
    /// `rxe_srq_chk_attr`, all before anything changes).
    pub(crate) fn modify(&mut self, attr: &SrqAttr, mask: SrqAttrMask) -> Result<(), SrqError> {
        let mut max_wr = self.max_wr;
        if mask.contains(SrqAttrMask::MAX_WR) {
            if attr.max_wr == 0 || attr.max_wr > MAX_SRQ_WR {
                return Err(SrqError::MaxWr);
            }
            if (self.limit != 0 && attr.max_wr < self.limit)
                || (attr.max_wr as usize) < self.wqes.len()
            {
                return Err(SrqError::WouldDrop);
            }
            max_wr = attr.max_wr;
        }
        if mask.contains(SrqAttrMask::LIMIT) && attr.srq_limit > max_wr {
            return Err(SrqError::Limit);
        }
        if max_wr != self.max_wr {
            self.resize_lists(max_wr);
        }
        self.max_wr = max_wr;
        if mask.contains(SrqAttrMask::LIMIT) {
            // Armed (or disarmed with 0); a pending report of the old
            // limit still goes out.
            self.limit = attr.srq_limit;
        }
        Ok(())
    }

    /// Give the list arena `max_wr` slots (a resize, cold): the lists
    /// posted move to the slots `0..`, in queue order, and the ring goes
    /// on after them.
    fn resize_lists(&mut self, max_wr: u32) {
        if self.lists.is_empty() {
            return;
        }
        let per = self.max_sge as usize;
        let mut lists = vec![Sge::default(); max_wr as usize * per];
        let mut next = 0u32;
        for w in self.wqes.iter_mut() {
            if let WqeData::List { slot, n } = w.data() {
                let (from, to) = (slot as usize * per, next as usize * per);
                lists[to..to + n as usize].copy_from_slice(&self.lists[from..from + n as usize]);
                *w = RecvWqe::new(w.wr, WqeData::List { slot: next, n });
                next += 1;
            }
        }
        self.lists = lists;
        self.list_next = next % max_wr;
    }

    /// Queue a receive of one SGE. `false` when full.
    pub(crate) fn post(&mut self, wr: RecvWr) -> bool {
        if self.wqes.len() >= self.max_wr as usize {
            return false;
        }
        self.wqes.push_back(RecvWqe::new(wr, WqeData::One));
        self.counters.posted += 1;
        true
    }

    /// Queue a receive whose buffer is the list `sges` (at most
    /// `max_sge`, the caller checked; more than one), `total` bytes in
    /// all, into the next slot of the list arena. `false` when full.
    fn post_list(&mut self, wr_id: u64, sges: &[Sge], total: u32) -> bool {
        if self.wqes.len() >= self.max_wr as usize {
            return false;
        }
        let per = self.max_sge as usize;
        if self.lists.is_empty() {
            self.lists = vec![Sge::default(); self.max_wr as usize * per];
        }
        let slot = self.list_next;
        self.list_next = (slot + 1) % self.max_wr;
        let at = slot as usize * per;
        self.lists[at..at + sges.len()].copy_from_slice(sges);
        let wr = RecvWr {
            wr_id,
            sge: Sge {
                lkey: 0,
                addr: 0,
                length: total,
            },
        };
        let n = sges.len() as u32;
        self.wqes
            .push_back(RecvWqe::new(wr, WqeData::List { slot, n }));
        self.counters.posted += 1;
        true
    }

    /// Queue a receive. Its buffer is not looked at, as `Qp::post_recv`
    /// and rxe (rdma-core providers/rxe/rxe.c `rxe_post_srq_recv` ->
    /// `rxe_post_one_recv`: the queue and `num_sge`, no key): the QP that
    /// takes it writes through its own PD when a message lands, and a
    /// key that does not work there fails the receive then (rxe_resp.c
    /// `send_data_in`: `RESPST_ERR_MALFORMED_WQE`).
    pub(crate) fn post_checked(&mut self, wr: RecvWr) -> Result<(), VerbsError> {
        if !self.post(wr) {
            return Err(VerbsError::QueueFull);
        }
        Ok(())
    }

    /// Check a receive whose buffer is the list `sges` (rxe's provider
    /// `rxe_post_srq_recv`: more than `max_sge` entries is `EINVAL`; no
    /// entry's key is looked at, as [`Srq::post_checked`]; its length is
    /// their total) and queue it. A list of one entry or none is one SGE.
    pub(crate) fn post_list_checked(&mut self, wr_id: u64, sges: &[Sge]) -> Result<(), VerbsError> {
        if sges.len() as u64 > u64::from(self.max_sge) {
            return Err(VerbsError::InvalidArgument(SrqError::TooManySges.what()));
        }
        if sges.len() <= 1 {
            let sge = sges.first().copied().unwrap_or_default();
            return self.post_checked(RecvWr { wr_id, sge });
        }
        let total: u64 = sges.iter().map(|s| u64::from(s.length)).sum();
        let total = total.min(u64::from(u32::MAX)) as u32;
        if !self.post_list(wr_id, sges, total) {
            return Err(VerbsError::QueueFull);
        }
        Ok(())
    }

    /// Whether a receive is posted.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.wqes.is_empty()
    }

    /// Take the receive at the head for a QP's new message (rxe
    /// `get_srq_wqe`), with its SGE list if it has one (empty otherwise;
    /// the slot is free once the caller copied it): if the limit is
    /// armed and fewer than it stay posted, the limit fires once and
    /// disarms (IBA 11.5.2.4).
    #[inline]
    pub(crate) fn take(&mut self) -> Option<(RecvWqe, &[Sge])> {
        let wr = self.wqes.pop_front()?;
        self.counters.taken += 1;
        if self.limit != 0 && self.wqes.len() < self.limit as usize {
            self.limit = 0;
            self.limit_event = true;
            self.counters.limit_events += 1;
        }
        let list = match wr.data() {
            WqeData::List { slot, n } => {
                let at = slot as usize * self.max_sge as usize;
                self.lists.get(at..at + n as usize).unwrap_or(&[])
            }
            _ => &[],
        };
        Some((wr, list))
    }

    /// A QP found it empty and answered RNR NAK.
    pub(crate) fn note_rnr(&mut self) {
        self.counters.rnr_naks += 1;
    }

    /// The limit fired since the last call (reported once).
    pub(crate) fn take_limit_event(&mut self) -> bool {
        std::mem::take(&mut self.limit_event)
    }

    pub(crate) fn attach(&mut self) {
        self.qps += 1;
    }

    pub(crate) fn detach(&mut self) {
        self.qps = self.qps.saturating_sub(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rc::Sge;

    fn wr(id: u64) -> RecvWr {
        RecvWr {
            wr_id: id,
            sge: Sge::default(),
        }
    }

    fn id(s: &mut Srq) -> Option<u64> {
        s.take().map(|(w, _)| w.wr.wr_id)
    }

    fn attr(max_wr: u32, limit: u32) -> SrqAttr {
        SrqAttr {
            max_wr,
            max_sge: 1,
            srq_limit: limit,
        }
    }

    #[test]
    fn creation_checks_as_rxe() {
        assert_eq!(Srq::new(0, attr(0, 0)).err(), Some(SrqError::MaxWr));
        assert_eq!(
            Srq::new(0, attr(MAX_SRQ_WR + 1, 0)).err(),
            Some(SrqError::MaxWr)
        );
        assert_eq!(
            Srq::new(
                0,
                SrqAttr {
                    max_sge: MAX_SRQ_SGE + 1,
                    ..attr(4, 0)
                }
            )
            .err(),
            Some(SrqError::MaxSge)
        );
        // The limit is not checked at creation (rxe).
        assert_eq!(Srq::new(0, attr(4, 5)).unwrap().attr(), attr(4, 5));
        let s = Srq::new(
            7,
            SrqAttr {
                max_sge: 0,
                ..attr(4, 2)
            },
        )
        .unwrap();
        assert_eq!(s.attr(), attr(4, 2));
        assert_eq!(s.pd(), 7);
    }

    #[test]
    fn fifo_full_and_limit_fires_once_below_it() {
        let mut s = Srq::new(0, attr(4, 0)).unwrap();
        for i in 0..4 {
            assert!(s.post(wr(i)));
        }
        assert!(!s.post(wr(9)), "full");
        s.modify(&attr(0, 2), SrqAttrMask::LIMIT).unwrap();
        assert_eq!(id(&mut s), Some(0)); // 3 left
        assert_eq!(id(&mut s), Some(1)); // 2 left: not below 2
        assert!(!s.take_limit_event());
        assert_eq!(id(&mut s), Some(2)); // 1 left: fires
        assert!(s.take_limit_event());
        assert!(!s.take_limit_event(), "reported once");
        assert_eq!(s.attr().srq_limit, 0, "disarmed");
        assert_eq!(id(&mut s), Some(3));
        assert!(!s.take_limit_event());
        assert!(s.take().is_none());
        assert_eq!(s.counters().limit_events, 1);
        assert_eq!(s.counters().taken, 4);
    }

    #[test]
    fn modify_checks_before_changing() {
        let mut s = Srq::new(0, attr(8, 0)).unwrap();
        for i in 0..5 {
            assert!(s.post(wr(i)));
        }
        assert_eq!(
            s.modify(&attr(0, 9), SrqAttrMask::LIMIT),
            Err(SrqError::Limit)
        );
        assert_eq!(
            s.modify(&attr(4, 0), SrqAttrMask::MAX_WR),
            Err(SrqError::WouldDrop)
        );
        s.modify(&attr(6, 6), SrqAttrMask::LIMIT).unwrap();
        assert_eq!(
            s.modify(&attr(5, 0), SrqAttrMask::MAX_WR),
            Err(SrqError::WouldDrop),
            "below the armed limit"
        );
        // Both at once: the limit is checked against the new size.
        assert_eq!(
            s.modify(&attr(7, 8), SrqAttrMask::MAX_WR | SrqAttrMask::LIMIT),
            Err(SrqError::Limit)
        );
        assert_eq!(s.attr(), attr(8, 6), "nothing changed");
        s.modify(&attr(16, 10), SrqAttrMask::MAX_WR | SrqAttrMask::LIMIT)
            .unwrap();
        assert_eq!(s.attr(), attr(16, 10));
        assert_eq!(s.posted(), 5);
    }
}
