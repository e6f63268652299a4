//! The endpoint's UD QPs by number, and the ones with sends waiting
//! (taken in turn by [`UdQps::transmit`]).

use std::collections::VecDeque;

use super::qp::UdQp;
use super::receive::Received;
use super::send::{SendContext, Sent};
use crate::rc::{Counters, Cq, MrTable, NumberMap};
use crate::wire::RoceFrameView;

/// The UD QPs of one endpoint.
#[derive(Debug, Default)]
pub struct UdQps {
    /// By number, hashed as the RC QPs' index is (no per-process random
    /// state: the same posts and frames give the same runs).
    qps: NumberMap<UdQp>,
    /// QPs that may have a send waiting, each once (`UdQp::queued`).
    ready: VecDeque<u32>,
}

impl UdQps {
    /// Number of UD QPs.
    pub fn len(&self) -> usize {
        self.qps.len()
    }

    /// No UD QP.
    pub fn is_empty(&self) -> bool {
        self.qps.is_empty()
    }

    /// Whether `qpn` is one of them.
    #[inline]
    pub fn contains(&self, qpn: u32) -> bool {
        !self.qps.is_empty() && self.qps.contains_key(&qpn)
    }

    /// The QP `qpn`.
    pub fn get(&self, qpn: u32) -> Option<&UdQp> {
        self.qps.get(&qpn)
    }

    pub(crate) fn get_mut(&mut self, qpn: u32) -> Option<&mut UdQp> {
        self.qps.get_mut(&qpn)
    }

    /// Every UD QP's number, in no particular order.
    pub fn qpns(&self) -> impl ExactSizeIterator<Item = u32> + '_ {
        self.qps.keys().copied()
    }

    pub(crate) fn insert(&mut self, qp: UdQp) {
        // Room in the ready list for every QP: queuing never allocates.
        self.ready.reserve(1);
        self.qps.insert(qp.qpn, qp);
    }

    pub(crate) fn remove(&mut self, qpn: u32) -> Option<UdQp> {
        // Its ready-list entry, if any, is skipped when reached.
        self.qps.remove(&qpn)
    }

    /// Put `qpn` on the ready list if it has a send waiting and is not on
    /// it yet.
    pub(crate) fn schedule(&mut self, qpn: u32) {
        if let Some(qp) = self.qps.get_mut(&qpn) {
            if !qp.queued && qp.wants_to_send() {
                qp.queued = true;
                self.ready.push_back(qpn);
            }
        }
    }

    /// Whether some UD QP may have a frame to send.
    #[inline(always)]
    pub fn wants_to_send(&self) -> bool {
        !self.ready.is_empty()
    }

    /// Write the next datagram into `buf`: QPs take turns, one packet
    /// each. Sends that complete without a packet (too long, failed) are
    /// done on the way.
    pub(crate) fn transmit(
        &mut self,
        ctx: &SendContext<'_>,
        cqs: &mut [Cq],
        buf: &mut [u8],
    ) -> Option<usize> {
        // Each QP at most once per call for a frame, however many of its
        // sends complete without one.
        let mut visits = self.ready.len();
        while visits > 0 {
            visits -= 1;
            let qpn = self.ready.pop_front()?;
            let Some(qp) = self.qps.get_mut(&qpn) else {
                continue;
            };
            let mut sent = qp.transmit(ctx, cqs, buf);
            while sent == Sent::NoFrame {
                sent = qp.transmit(ctx, cqs, buf);
            }
            qp.queued = false;
            if sent == Sent::BufferTooSmall {
                // Kept at the head of the list: the next call retries it.
                qp.queued = true;
                self.ready.push_front(qpn);
                return None;
            }
            if qp.wants_to_send() {
                qp.queued = true;
                self.ready.push_back(qpn);
            }
            if let Sent::Frame(n) = sent {
                return Some(n);
            }
        }
        None
    }

    /// Hand a UD frame to QP `qpn`; `None` when it is not here.
    pub(crate) fn receive(
        &mut self,
        qpn: u32,
        f: &RoceFrameView<'_>,
        mrs: &mut MrTable,
        cqs: &mut [Cq],
        srqs: &mut [Option<crate::rc::Srq>],
    ) -> Option<bool> {
        let qp = self.qps.get_mut(&qpn)?;
        // A QP on a shared receive queue takes its receives from it.
        let srq = qp.init.srq.and_then(|s| srqs.get_mut(s as usize)?.as_mut());
        Some(qp.receive(f, mrs, cqs, srq) == Received::Completed)
    }

    /// The sum of every UD QP's counters.
    pub fn counters(&self) -> Counters {
        let mut c = Counters::default();
        for q in self.qps.values() {
            c.accumulate(&q.counters);
        }
        c
    }
}
