//! The QPs of one endpoint, and the two schedules that keep the cost of a
//! packet independent of how many QPs there are (`docs/architecture.md`,
//! "QP limits"):
//!
//! - a slab of QPs with a hash index by QP number (`qpn_index.rs`): O(1)
//!   lookup for any number of the 24-bit space, one bucket load, no scan;
//! - the *ready list*: the QPs that may have a frame to send, in
//!   round-robin order. A QP joins it on every call that can give it work
//!   (packet, post, modify, timer) and leaves it when `poll_transmit` finds
//!   it with nothing to send, so `poll_transmit` visits only QPs with work;
//! - the *timer heap*: one entry per QP deadline, earliest first, so
//!   `poll_timeout` is one peek and `handle_timeout` visits only the QPs
//!   whose deadline has come. Entries are lazy (as Linux's `mod_timer` on a
//!   retransmit timer that only moves later): a deadline that moves later
//!   keeps its entry, which then fires early, finds nothing due and
//!   re-arms at the QP's real deadline; only a deadline that moves earlier
//!   pushes a new entry. A packet then costs one `Qp::poll_timeout` and a
//!   comparison, and a heap operation only when a timer is first armed;
//! - the *in-flight limit* (`EndpointConfig::max_inflight_packets`): the
//!   request packets all QPs have outstanding, kept as a sum that each QP's
//!   visit brings up to date. While it is reached, a QP whose next packet
//!   is a new one (not a retransmission) leaves the ready list for the
//!   *waiting list*; as ACKs free room the oldest waiting QP is served
//!   first, and new messages of ready QPs wait behind the list. A receiver
//!   ring that overflows costs go-back-N a window per QP: with thousands
//!   of QPs sending at once, nothing bounded the burst, and the
//!   retransmissions overflowed it again (`loopback --qps 4096` stalled).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use super::qpn_index::QpnIndex;
use super::MemoryRange;
use crate::rc::{Counters, InflightRoom, Qp};
use crate::time::Instant;

/// What the schedules keep per slot beside the QP ([`Slot::meta`]).
#[derive(Default)]
struct Meta {
    /// The deadline of this slot's live entry in the timer heap.
    deadline: Option<Instant>,
    /// In the ready list.
    ready: bool,
    /// In the waiting list (held back by the in-flight limit).
    waiting: bool,
    /// The QP's outstanding request packets as last added into
    /// [`QpTable::inflight`].
    inflight: u32,
}

/// A slot of the table: the QP and, in the line after its last, its
/// schedule entry (640 bytes, 10 cache lines: the QP's 9 and the entry's
/// 24 bytes). Every packet and every post reads both, and the receive
/// step's prefetch asks for the slot as one range
/// ([`QpTable::state_range`]).
///
/// The schedule entries are not a dense array of their own (24 bytes a
/// slot, 1.5 MiB for 65,536 QPs), though marking a QP ready would then
/// touch no line of its state: with tens of thousands of active QPs that
/// array is out of the caches too, and each packet would reach two places
/// in memory instead of one. Alternating runs of
/// `examples/qp_scale_probe 65536 4 [req] shuffled`, builds with the array
/// and with this slot, medians in ns a packet: responder 181.4 to 179.1,
/// requester 243.3 to 232.6 (`docs/design/qp-layout.md`).
#[derive(Default)]
#[repr(C)]
pub(super) struct Slot {
    qp: Option<Qp>,
    meta: Meta,
}

/// The sum of every QP's counters, kept so that reading the endpoint's
/// counters (the driver does every few milliseconds) costs the same with
/// 1 or 65,536 active QPs.
///
/// `sum` holds the counters of every slot but `open`, the slot handed out
/// last. Handing out a QP (or putting one in or taking one out) first
/// puts the counters of the slot handed out before back into `sum`, as
/// they are now, then takes the new slot's counters out of it before
/// anything can change them: a look adds only the open slot's. The
/// counters this reads are those of the QP just handled (in the caches)
/// and those of the QP about to be (its stage-two prefetch covers them).
/// Leaving out of `sum` every slot marked since the last look, and reading
/// each of their counters at the look, would cost one cold line per QP
/// marked since the last look with 65,536 active QPs, paid in one go by
/// the engine loop (`docs/architecture.md`, "The statistics' sum over
/// active QPs").
#[derive(Default)]
struct CounterSum {
    sum: Counters,
    open: Option<u32>,
}

/// The most slots [`QpTable::with_capacity`] reserves ahead: an engine's
/// default limit ([`super::config::MAX_QPS_PER_ENGINE`]). A table grows
/// past it as a `Vec` does.
const RESERVED_SLOTS: usize = 1 << 16;

/// The QPs of a [`QpTable`], in slot order ([`QpTable::iter`]).
pub(super) struct Iter<'a> {
    slots: std::slice::Iter<'a, Slot>,
    left: usize,
}

impl<'a> Iterator for Iter<'a> {
    type Item = &'a Qp;

    #[inline]
    fn next(&mut self) -> Option<&'a Qp> {
        if self.left == 0 {
            return None;
        }
        let qp = self.slots.find_map(|s| s.qp.as_ref())?;
        self.left -= 1;
        Some(qp)
    }

    #[inline]
    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl ExactSizeIterator for Iter<'_> {}

/// QPs by slot, their index by number, the ready list and the timer heap.
#[derive(Default)]
pub(super) struct QpTable {
    /// The QPs and their schedule entries, by slot.
    slots: Vec<Slot>,
    free: Vec<u32>,
    by_qpn: QpnIndex,
    ready: VecDeque<u32>,
    /// QPs held back by the in-flight limit, in the order they were.
    waiting: VecDeque<u32>,
    /// Outstanding request packets of all QPs (the sum of `Meta::inflight`).
    inflight: u64,
    /// Most outstanding request packets before new ones wait; 0: no limit.
    inflight_limit: u32,
    /// Times a QP's new request packet waited for the in-flight limit
    /// (counter `tx_inflight_waits`). Counted here, for the endpoint, not
    /// in the QP: with thousands of QPs starting at once most of them
    /// wait once, and a QP that counted it would allocate its other
    /// counters (`QpCounters::rest`) on the transmit path, 65,536 times
    /// in `roce-xdp sim --qps 65536`.
    inflight_waits: u64,
    timers: BinaryHeap<Reverse<(Instant, u32)>>,
    counters: CounterSum,
}

impl QpTable {
    /// A table with its slot arrays and its number index reserved for
    /// `max_qps` QPs (at most [`RESERVED_SLOTS`]): creating QPs up to there
    /// never moves the QPs already made nor rehashes the index. Reserved
    /// address space only: the pages of a slot are touched when a QP takes
    /// it.
    ///
    /// `inflight_limit`: most request packets outstanding over all QPs
    /// before new ones wait (0: no limit).
    pub fn with_capacity(max_qps: u32, inflight_limit: u32) -> QpTable {
        let n = (max_qps as usize).min(RESERVED_SLOTS);
        let mut t = QpTable {
            inflight_limit,
            ..QpTable::default()
        };
        t.slots.reserve_exact(n);
        t.by_qpn = QpnIndex::with_capacity(n);
        t
    }

    /// QPs held.
    pub fn len(&self) -> usize {
        self.by_qpn.len()
    }

    /// The slot of QP `qpn`.
    #[inline]
    pub fn slot(&self, qpn: u32) -> Option<usize> {
        self.by_qpn.get(qpn).map(|i| i as usize)
    }

    #[inline]
    pub fn get(&self, qpn: u32) -> Option<&Qp> {
        self.slots[self.slot(qpn)?].qp.as_ref()
    }

    /// Where a packet for QP `qpn` first reads: the bucket of the number
    /// index (stage one of a receiver's prefetch).
    #[inline]
    pub fn index_range(&self, qpn: u32) -> Option<MemoryRange> {
        self.by_qpn.home_range(qpn)
    }

    /// What a packet or a post for QP `qpn` reads once the index gave its
    /// slot: the whole slot, the QP and its schedule entry ([`Slot`];
    /// stage two; the index is read, the slot is not). The QP lays out the
    /// state a received packet reads first (`rc/qp.rs`), so that nothing of it
    /// waits for memory after the lookup. Measured with
    /// `examples/qp_scale_probe 65536 6 [req] shuffled` (64 B WRITEs, QP
    /// state in huge pages, alternating runs of each build, median of the
    /// runs' median pass, ns a packet): prefetching its first 384 bytes
    /// gave responder 351, requester 364; 448 bytes 303, 362; all 576
    /// bytes before the counters 280, 337.
    ///
    /// The QP's last line holds the 32 bytes of counters it keeps inline
    /// ([`crate::rc::QpCounters`]; the rest, allocated once one of them
    /// counted, is not prefetched): with many active QPs the packet's QP
    /// is, as a rule, not the one handed out last, and handing it out reads
    /// them ([`CounterSum`]). Prefetching the counters measured 225
    /// against 284 ns a packet with the sum, 215 against 264 without it
    /// (`examples/qp_scale_probe 65536 3 shuffled [snapshot]`, builds with
    /// and without, eight alternating runs each, median of 16 passes). They
    /// are part of the slot's one range: the slot ends in their line.
    #[inline]
    pub fn state_range(&self, qpn: u32) -> Option<MemoryRange> {
        Some(MemoryRange::of(self.slots.get(self.slot(qpn)?)?))
    }

    /// QP `qpn`, noted as possibly having work (it joins the ready list).
    #[inline]
    pub fn touch(&mut self, qpn: u32) -> Option<(usize, &mut Qp)> {
        let i = self.slot(qpn)?;
        self.mark_ready(i);
        Some((i, self.hand_out(i)?))
    }

    /// Put `qp` in a free slot (the caller checked that its number is free).
    pub fn insert(&mut self, qp: Qp) {
        let qpn = qp.qpn();
        let i = match self.free.pop() {
            // A stale ready-list entry of the slot's previous QP may
            // remain (`ready` is kept): it serves the new one.
            Some(i) => i as usize,
            None => {
                self.slots.push(Slot::default());
                self.slots.len() - 1
            }
        };
        // Opened while empty: the slot holds nothing in the sum, and a
        // look or the next slot opened adds the new QP's counters (a QP
        // moved in from another queue brings them along).
        self.open_counters(i);
        self.slots[i].qp = Some(qp);
        self.slots[i].meta.deadline = None;
        self.by_qpn.insert(qpn, i as u32);
        self.mark_ready(i);
        self.schedule(i);
    }

    /// Take QP `qpn` out; its ready-list and heap entries go stale.
    pub fn remove(&mut self, qpn: u32) -> Option<Qp> {
        let i = self.by_qpn.remove(qpn)? as usize;
        let s = &mut self.slots[i].meta;
        s.deadline = None;
        // Its outstanding packets go with it (into another endpoint); its
        // waiting-list entry, if any, goes stale.
        self.inflight -= u64::from(std::mem::take(&mut s.inflight));
        s.waiting = false;
        // Its counters leave the sum with it (into another endpoint's).
        self.open_counters(i);
        let qp = self.slots[i].qp.take();
        self.free.push(i as u32);
        qp
    }

    /// Slot `i`'s QP, to be changed: its counters opened first
    /// ([`QpTable::open_counters`]). Every `&mut Qp` the table gives out
    /// comes from here.
    #[inline]
    fn hand_out(&mut self, i: usize) -> Option<&mut Qp> {
        self.open_counters(i);
        self.slots[i].qp.as_mut()
    }

    /// Slot `i`'s counters may change: called before its QP is handed
    /// out ([`QpTable::hand_out`]), put in or taken out. Slot `i` becomes
    /// the open one ([`CounterSum`]).
    #[inline]
    fn open_counters(&mut self, i: usize) {
        let c = &mut self.counters;
        let i = i as u32;
        if c.open == Some(i) {
            return;
        }
        if let Some(j) = c.open.replace(i) {
            if let Some(qp) = &self.slots[j as usize].qp {
                qp.counters.add_to(&mut c.sum);
            }
        }
        if let Some(qp) = &self.slots[i as usize].qp {
            qp.counters.take_from(&mut c.sum);
        }
    }

    /// The sum of every QP's counters.
    pub fn counters(&self) -> Counters {
        let mut c = self.counters.sum;
        if let Some(qp) = self
            .counters
            .open
            .and_then(|j| self.slots[j as usize].qp.as_ref())
        {
            qp.counters.add_to(&mut c);
        }
        c.tx_inflight_waits += self.inflight_waits;
        c
    }

    #[inline]
    fn mark_ready(&mut self, i: usize) {
        let s = &mut self.slots[i].meta;
        if !s.ready {
            s.ready = true;
            self.ready.push_back(i as u32);
        }
    }

    /// Bring slot `i`'s heap entry up to date with its QP's deadline;
    /// returns that deadline.
    #[inline]
    pub fn schedule(&mut self, i: usize) -> Option<Instant> {
        self.account(i);
        let d = self.slots[i].qp.as_ref()?.poll_timeout()?;
        let s = &mut self.slots[i].meta;
        if s.deadline.is_none_or(|t| d < t) {
            s.deadline = Some(d);
            self.timers.push(Reverse((d, i as u32)));
        }
        Some(d)
    }

    /// Bring [`QpTable::inflight`] up to date with slot `i`'s QP.
    #[inline]
    fn account(&mut self, i: usize) {
        let now = self.slots[i].qp.as_ref().map_or(0, Qp::inflight_packets);
        let s = &mut self.slots[i].meta;
        if now != s.inflight {
            self.inflight = self.inflight - u64::from(s.inflight) + u64::from(now);
            s.inflight = now;
        }
    }

    /// The room left under the in-flight limit.
    #[inline]
    fn room(&self) -> InflightRoom {
        if self.inflight_limit == 0 {
            return InflightRoom::UNLIMITED;
        }
        let limit = u64::from(self.inflight_limit);
        InflightRoom {
            room: limit.saturating_sub(self.inflight) as u32,
            limit: self.inflight_limit,
        }
    }

    /// Request packets outstanding over all QPs.
    pub fn inflight(&self) -> u64 {
        self.inflight
    }

    /// The room ready-list QPs get for new messages: none while QPs wait
    /// (they are first in line), else what is left.
    #[inline]
    fn room_for_ready(&self) -> InflightRoom {
        let room = self.room();
        if self.waiting.is_empty() {
            room
        } else {
            InflightRoom { room: 0, ..room }
        }
    }

    /// The oldest waiting QP, served first with the room left: `Some` with
    /// what `f` sent, or `None` when no waiting QP could send (the oldest's
    /// message does not fit yet, or none waits). A QP that sent, or had
    /// nothing left to send, stops waiting; one whose message still does
    /// not fit stays first, so room is never handed to a QP that cannot use
    /// it (no churn between the lists).
    fn serve_waiting(
        &mut self,
        f: &mut impl FnMut(&mut Qp, InflightRoom) -> Option<usize>,
    ) -> Option<usize> {
        loop {
            let room = self.room();
            if room.room == 0 {
                return None;
            }
            let i = self.front_waiting()?;
            let qp = self.hand_out(i)?; // a held slot (front_waiting)
            let sent = f(qp, room);
            if sent.is_none() && qp.held_by_inflight_limit() {
                return None;
            }
            self.waiting.pop_front();
            self.slots[i].meta.waiting = false;
            self.schedule(i);
            // The rest of its message (and what else it has) from the
            // ready list.
            self.mark_ready(i);
            if sent.is_some() {
                return sent;
            }
        }
    }

    /// The slot of the oldest waiting QP, after dropping the stale entries
    /// in front of it (a QP that left while it waited).
    fn front_waiting(&mut self) -> Option<usize> {
        while let Some(&i) = self.waiting.front() {
            let i = i as usize;
            if self.slots[i].meta.waiting && self.slots[i].qp.is_some() {
                return Some(i);
            }
            self.waiting.pop_front();
        }
        None
    }

    /// Every QP, in slot order; its exact length is known without a walk
    /// (so a caller that takes the first few and counts the rest, as the
    /// driver's statistics do, costs what it takes).
    pub fn iter(&self) -> Iter<'_> {
        Iter {
            slots: self.slots.iter(),
            left: self.len(),
        }
    }

    /// The earliest deadline in the heap (maybe one that has moved later:
    /// `handle_timeout` then finds nothing due and re-arms).
    #[inline]
    pub fn next_deadline(&self) -> Option<Instant> {
        self.timers.peek().map(|Reverse((t, _))| *t)
    }

    /// Run `f` (the QP's timers) on every QP whose deadline has come: its
    /// heap entry due at `now` and its own deadline too (an entry whose
    /// deadline moved later finds nothing due and is re-armed, unvisited).
    /// A QP visited joins the ready list; each is re-armed at its next
    /// deadline.
    pub fn expire(&mut self, now: Instant, mut f: impl FnMut(&mut Qp)) {
        while let Some(&Reverse((t, i))) = self.timers.peek() {
            if t > now {
                break;
            }
            self.timers.pop();
            let i = i as usize;
            let s = &mut self.slots[i].meta;
            if s.deadline != Some(t) {
                continue; // superseded by an earlier entry, or the QP is gone
            }
            s.deadline = None;
            let Some(qp) = self.slots[i].qp.as_ref() else {
                continue;
            };
            if qp.poll_timeout().is_some_and(|d| d <= now) {
                self.mark_ready(i);
                if let Some(qp) = self.hand_out(i) {
                    f(qp);
                }
            }
            // Timers may end the QP's sending (retries exhausted: error).
            self.account(i);
            // A deadline still due means the QP can send now: the ready
            // list has it, and `poll_transmit` re-arms it.
            if let Some(d) = self.slots[i].qp.as_ref().and_then(Qp::poll_timeout) {
                if d > now {
                    self.schedule(i);
                }
            }
        }
    }

    /// QPs whose heap entry is due at `now` join the ready list (a QP held
    /// back by its rate limit may send once its retry time has come, with
    /// or without a `handle_timeout` first); visiting them re-arms them.
    fn promote_due(&mut self, now: Instant) {
        while let Some(&Reverse((t, i))) = self.timers.peek() {
            if t > now {
                break;
            }
            self.timers.pop();
            let s = &mut self.slots[i as usize].meta;
            if s.deadline == Some(t) {
                s.deadline = None;
                if self.slots[i as usize].qp.is_some() {
                    self.mark_ready(i as usize);
                }
            }
        }
    }

    /// Offer the ready QPs, in round-robin order, to `f` until one returns
    /// a frame length. Each ready QP is visited at most once per call.
    /// A QP that sent stays ready (at the back); one with nothing to send
    /// leaves the list: for good when `may_transmit` is false, and until
    /// its deadline when it is held back (rate limit) with one set.
    pub fn transmit(
        &mut self,
        now: Instant,
        mut f: impl FnMut(&mut Qp, InflightRoom) -> Option<usize>,
    ) -> Option<usize> {
        self.promote_due(now);
        if let Some(len) = self.serve_waiting(&mut f) {
            return Some(len);
        }
        for _ in 0..self.ready.len() {
            let i = self.ready.pop_front()? as usize;
            let room = self.room_for_ready();
            let waiting = self.slots[i].meta.waiting;
            let Some(qp) = self.hand_out(i) else {
                self.slots[i].meta.ready = false;
                continue;
            };
            let sent = f(qp, room);
            let may = qp.may_transmit();
            let held = sent.is_none() && qp.held_by_inflight_limit();
            if held && !waiting {
                self.inflight_waits += 1;
            }
            if let Some(len) = sent {
                self.ready.push_back(i as u32);
                self.schedule(i);
                return Some(len);
            }
            let d = self.schedule(i);
            if held {
                // Served from the waiting list when ACKs free room.
                self.slots[i].meta.ready = false;
                if !std::mem::replace(&mut self.slots[i].meta.waiting, true) {
                    self.waiting.push_back(i as u32);
                }
                continue;
            }
            if may && d.is_none_or(|d| d <= now) {
                self.ready.push_back(i as u32);
            } else {
                self.slots[i].meta.ready = false;
            }
        }
        None
    }

    /// Whether some ready QP has a frame to send (`wants`, ignoring rate
    /// limits). The ready QPs at the front of the list that cannot send at
    /// all (`may_transmit` false: nothing queued, no CNP) leave it on the
    /// way, as a `transmit` visit would make them, so a caller that asks
    /// before every event (the simulator, a driver before it sleeps) costs
    /// each stale entry once, not once per question: asked while 65,536
    /// QPs were ready after their ACKs, the question walked them all.
    pub fn any_ready(&mut self, mut wants: impl FnMut(&Qp) -> bool) -> bool {
        // The oldest waiting QP, if its message fits now.
        let room = self.room();
        if let Some(i) = self.front_waiting() {
            if self.slots[i]
                .qp
                .as_ref()
                .is_some_and(|q| q.next_message_fits(room))
            {
                return true;
            }
        }
        while let Some(&i) = self.ready.front() {
            let i = i as usize;
            match self.slots[i].qp.as_ref() {
                Some(qp) if wants(qp) => return true,
                Some(qp) if qp.may_transmit() => break,
                _ => {
                    self.ready.pop_front();
                    self.slots[i].meta.ready = false;
                    self.schedule(i);
                }
            }
        }
        // Past a QP that may send only a CNP (rare): look at the rest.
        self.ready
            .iter()
            .any(|&i| self.slots[i as usize].qp.as_ref().is_some_and(&mut wants))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rc::QpInitAttr;

    /// The slot size `docs/architecture.md` states ("QP limits"): the QP's
    /// 9 lines and one for its schedule entry, the QP first (the receive
    /// step's prefetch range starts at the QP).
    #[cfg(target_pointer_width = "64")]
    #[test]
    fn a_slot_is_the_qp_then_its_schedule_entry_in_10_lines() {
        assert_eq!(core::mem::size_of::<Slot>(), 10 * 64);
        assert_eq!(core::mem::offset_of!(Slot, qp), 0);
        assert_eq!(core::mem::offset_of!(Slot, meta), 9 * 64);
        assert_eq!(super::super::QP_SLOT_BYTES, 10 * 64);
    }

    fn brute_force(t: &QpTable) -> Counters {
        let mut c = Counters::default();
        for q in t.iter() {
            q.counters.add_to(&mut c);
        }
        c
    }

    #[test]
    fn the_counter_sum_follows_touched_inserted_and_removed_qps() {
        let mut t = QpTable::default();
        for qpn in [0x100, 0x200, 0x300] {
            t.insert(Qp::new(qpn, QpInitAttr::default()));
        }
        assert_eq!(t.counters(), Counters::default());
        t.touch(0x200).unwrap().1.counters.sent_pkts += 5;
        t.touch(0x300).unwrap().1.counters.rcvd_pkts += 2;
        assert_eq!(t.counters(), brute_force(&t));
        assert_eq!(t.counters().sent_pkts, 5);
        // Untouched since: the same sum, from the cache.
        assert_eq!(t.counters(), brute_force(&t));
        t.touch(0x200).unwrap().1.counters.sent_pkts += 1;
        let moved = t.remove(0x300).unwrap();
        assert_eq!(t.counters(), brute_force(&t));
        assert_eq!((t.counters().sent_pkts, t.counters().rcvd_pkts), (6, 0));
        // A QP moved in brings its counters along, into a reused slot.
        t.insert(moved);
        assert_eq!(t.counters().rcvd_pkts, 2);
        assert_eq!(t.counters(), brute_force(&t));
    }

    /// Every way a QP's counters can change between two sums (a touch, a
    /// visit of `transmit`, a QP taken out or moved in, to a fresh or a
    /// reused slot), in a seeded random order, with sums taken in between:
    /// each sum equals the brute-force sum of the QPs held.
    #[test]
    fn the_counter_sum_stays_exact_under_random_changes() {
        let mut rng = crate::sim::SplitMix64::new(0xC0_0A7E);
        let mut t = QpTable::with_capacity(64, 0);
        let mut held: Vec<u32> = Vec::new();
        let mut out: Vec<Qp> = Vec::new();
        let mut next_qpn = 0x100;
        for step in 0..20_000 {
            match rng.below(8) {
                0 => {
                    // A new QP, or one moved back in with its counters.
                    let qp = match out.pop() {
                        Some(qp) if rng.chance(0.5) => qp,
                        _ => {
                            next_qpn += 1;
                            let mut qp = Qp::new(next_qpn, QpInitAttr::default());
                            qp.counters.rcvd_pkts = rng.below(100);
                            qp
                        }
                    };
                    held.push(qp.qpn());
                    t.insert(qp);
                }
                1 if !held.is_empty() => {
                    let qpn = held.swap_remove(rng.below(held.len() as u64) as usize);
                    out.push(t.remove(qpn).unwrap());
                }
                2..=4 if !held.is_empty() => {
                    let qpn = held[rng.below(held.len() as u64) as usize];
                    let c = &mut t.touch(qpn).unwrap().1.counters;
                    c.sent_pkts += rng.below(5);
                    // Some QPs count only inline counters (their rest is
                    // never allocated), others the rest too.
                    if qpn.is_multiple_of(2) {
                        c.rest().naks_sent += 1;
                    }
                }
                5 => {
                    // A visit that counts what it sent, whatever the QP.
                    let _ = t.transmit(Instant::ZERO, |qp, _| {
                        qp.counters.sent_pkts += 1;
                        qp.counters.rest().rp_cnp_ignored += 3;
                        Some(1)
                    });
                }
                _ => {
                    assert_eq!(t.counters(), brute_force(&t), "step {step}");
                }
            }
        }
        assert_eq!(t.counters(), brute_force(&t));
        assert!(t.counters().sent_pkts > 0 && !out.is_empty());
    }
}
