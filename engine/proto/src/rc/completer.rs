//! Completer: handles ACKs, NAKs, READ responses and atomic ACKs for the
//! requester; runs go-back-N retries, the local ACK timeout, the RNR wait,
//! retry budgets and error completions.
//!
//! Rules (`docs/reliable-connection.md`, "PSN arithmetic", "Go-back-N"):
//! - a response is checked against the request at its PSN before it
//!   changes anything ([`Requester::check_response`]): a PSN never sent,
//!   or a kind that does not fit that request (an atomic ACK at a SEND's
//!   PSN), is dropped and counted without acknowledging anything;
//! - an ACK/NAK for PSN n acknowledges every PSN before it (cumulative); a
//!   READ response or atomic ACK also acknowledges the requests before it;
//! - NAK PSN sequence error: go-back-N from the NAK'd PSN;
//! - local ACK timeout (4.096 us * 2^timeout, 0 = none): go-back-N from the
//!   oldest unacknowledged PSN;
//! - implied NAK: an ACK or response whose PSN skips past a READ/atomic that
//!   still waits for its response: go-back-N from that request;
//! - retry_cnt bounds consecutive timeout/sequence-error retries (refilled on
//!   progress; 7 = infinite as in rxe); exhausted -> "retry exceeded" and the
//!   QP goes to error;
//! - RNR NAK: wait the RNR timer, then resend from the NAK'd PSN, bounded by
//!   rnr_retry (7 = infinite).
//!
//! Reference behaviour: Linux rxe `rxe_comp.c` (check_psn, check_ack,
//! do_read, do_atomic, COMPST_ERROR_RETRY, rnr_nak_timer).

use super::attr::{rnr_delay, QpAttr};
use super::context::RxContext;
use super::counters::QpCounters;
use super::cq::CompletionSink;
use super::mr::Access;
use super::psn::Psn;
use super::requester::{Requester, SendWqe};
use super::sgl::{scatter, QpSgl, WqeData};
use super::timer::Timer;
use super::wqe::{SendOp, WcOpcode, WcStatus, WorkCompletion};
use crate::time::Instant;
use crate::wire::{nak_code, Opcode, RoceFrameView, Syndrome};

/// The syndrome of a received ACK/NAK, decoded by [`Syndrome::from_u8`];
/// `None` when reserved: bit 7 set or type 010 (IBTA Vol. 1, 9.3.5, AETH).
#[inline]
fn ack_syndrome(raw: u8) -> Option<Syndrome> {
    match Syndrome::from_u8(raw) {
        _ if raw & 0x80 != 0 => None,
        Syndrome::Reserved(_) => None,
        s => Some(s),
    }
}

/// A response [`Requester::check_response`] accepted, decoded once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Response {
    /// ACK, NAK or RNR NAK (the syndrome says which).
    Ack(Syndrome),
    /// A READ response packet that fits its place in the READ.
    Read,
    /// The atomic ACK of the atomic at its PSN, with the original value.
    Atomic { orig: u64 },
    /// The answer to the ATOMIC WRITE at its PSN: an RDMA READ RESPONSE
    /// ONLY without payload whose AETH says ACK (IBA 1.5 9.4.8; rxe
    /// `acknowledge` -> `send_read_response_ack`).
    AtomicWrite,
}

/// Why [`Requester::check_response`] refused a response; nothing changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unfit {
    /// Before `acked_psn` (`duplicate_response`).
    Duplicate,
    /// At or after `max_sent_psn`: never sent (`dropped_unsent_psn`).
    Unsent,
    /// Does not fit the request at its PSN (`dropped_bad_response`).
    Kind,
    /// An ACK whose AETH syndrome is reserved (`dropped_malformed`).
    Malformed,
}

/// The requester must go to the error state (its failing request has
/// already been completed with an error status).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Fatal;

impl Requester {
    /// Complete and pop the front request with `status`.
    fn complete_front(
        &mut self,
        status: WcStatus,
        sink: &mut CompletionSink<'_>,
        counters: &mut QpCounters,
    ) {
        let Some(w) = self.wqes.pop_front() else {
            return;
        };
        if w.wr.opcode.takes_responder_resource() && self.cur > 0 {
            self.rd_atomic_sent = self.rd_atomic_sent.saturating_sub(1);
        }
        if self.cur > 0 {
            self.cur -= 1;
        } else {
            // The cursor was inside (or at) the popped request after a
            // rewind: move it to the start of the next one.
            self.cur_pkt = 0;
            self.send_psn = w.end_psn();
        }
        // A local operation takes no PSN: nothing more is acknowledged.
        if status == WcStatus::Success && w.npkts > 0 {
            self.acked_psn = w.end_psn();
        }
        if status != WcStatus::Success || w.wr.signaled || sink.sq_sig_all {
            // rxe make_send_cqe: `dma.length`, 8 for an atomic and for an
            // ATOMIC WRITE (`wr_atomic_write`).
            let byte_len = if w.wr.opcode.is_atomic() || w.wr.opcode == SendOp::AtomicWrite {
                8
            } else {
                w.wr.local.length
            };
            sink.push(
                WorkCompletion {
                    wr_id: w.wr.wr_id,
                    qpn: sink.qpn,
                    status,
                    opcode: WcOpcode::of_send(w.wr.opcode),
                    byte_len,
                    imm: None,
                    invalidated_rkey: None,
                    ud: None,
                },
                counters,
            );
        }
    }

    /// Complete the executed local operations at the front of the send
    /// queue: every request before them has completed (rxe completes a
    /// `wqe_state_done` local operation in order, `rxe_completer`).
    pub(crate) fn complete_executed_front(
        &mut self,
        sink: &mut CompletionSink<'_>,
        counters: &mut QpCounters,
    ) -> bool {
        let mut any = false;
        while self
            .wqes
            .front()
            .is_some_and(|w| w.executed && w.error.is_none())
        {
            self.complete_front(WcStatus::Success, sink, counters);
            any = true;
        }
        any
    }

    /// UC: complete, in order, every request whose last packet has left
    /// (those before the cursor) and the local operations executed behind
    /// them (IBA 9.7.5.1: a UC request is complete once sent; rxe
    /// `update_wqe_state` marks it done, its completer completes it).
    pub(crate) fn complete_sent(
        &mut self,
        sink: &mut CompletionSink<'_>,
        counters: &mut QpCounters,
    ) {
        while self.cur > 0 && self.wqes.front().is_some_and(|w| w.error.is_none()) {
            self.complete_front(WcStatus::Success, sink, counters);
        }
        self.complete_executed_front(sink, counters);
    }

    /// Fail the front request with `status`; the QP must go to error.
    pub(crate) fn fail_front(
        &mut self,
        status: WcStatus,
        sink: &mut CompletionSink<'_>,
        counters: &mut QpCounters,
    ) -> Fatal {
        self.complete_front(status, sink, counters);
        Fatal
    }

    /// Acknowledge every PSN before `upto`. Returns (progress, implied NAK).
    fn acknowledge(
        &mut self,
        upto: Psn,
        sink: &mut CompletionSink<'_>,
        counters: &mut QpCounters,
    ) -> (bool, bool) {
        let mut progressed = self.complete_executed_front(sink, counters);
        while let Some(front) = self.wqes.front() {
            if front.wr.opcode.is_local() {
                // Executed: it completes now, the requests before it
                // have; not yet: the cursor has not reached it.
                if self.complete_executed_front(sink, counters) {
                    progressed = true;
                    continue;
                }
                break;
            }
            if !front.first_psn.before(upto) {
                break;
            }
            // An ATOMIC WRITE is not here: a later ACK proves it executed
            // (the responder takes requests in PSN order), its answer
            // carries nothing, and it completes as a WRITE does (rxe
            // check_psn: only WR_ATOMIC_OR_READ_MASK is retried).
            if front.wr.opcode.is_read_or_atomic() {
                if front.contains(upto) {
                    // A response inside this READ: handled by the caller.
                    break;
                }
                // Rule: implied NAK, the response for this READ/atomic was
                // skipped over.
                return (progressed, true);
            }
            if front.end_psn().diff(upto) <= 0 {
                self.complete_front(WcStatus::Success, sink, counters);
                progressed = true;
                continue;
            }
            // Partial acknowledgement inside a multi-packet message.
            if upto.after(self.acked_psn) {
                self.acked_psn = upto;
                progressed = true;
            }
            break;
        }
        (progressed, false)
    }

    /// After progress: refill budgets, restart or stop the ACK timer, keep
    /// the cursor at or after the acknowledged point.
    fn on_progress(&mut self, now: Instant, attr: &QpAttr) {
        self.reset_budgets(attr);
        self.rewound_at = None;
        if self.cur == 0 && self.send_psn.before(self.acked_psn) {
            if let Some(front) = self.wqes.front() {
                self.send_psn = self.acked_psn;
                self.cur_pkt = self.acked_psn.diff(front.first_psn).max(0) as u32;
            }
        }
        if self.acked_psn.before(self.max_sent_psn) {
            match attr.ack_timeout() {
                Some(t) => self.timers.set(Timer::Retransmit, now + t),
                None => self.timers.clear(Timer::Retransmit),
            }
        } else {
            self.timers.clear(Timer::Retransmit);
        }
    }

    /// Go-back-N to the oldest unacknowledged PSN. `forced` (timeout) always
    /// rewinds; a NAK/gap-triggered retry for the PSN we already rewound to
    /// is stale and ignored.
    fn go_back_n(
        &mut self,
        forced: bool,
        sink: &mut CompletionSink<'_>,
        counters: &mut QpCounters,
    ) -> Result<(), Fatal> {
        if !forced && self.rewound_at == Some(self.acked_psn) {
            return Ok(());
        }
        if self.wqes.is_empty() {
            return Ok(());
        }
        if self.retry_left == 0 {
            counters.rest().retry_exceeded_err += 1;
            return Err(self.fail_front(WcStatus::RetryExceeded, sink, counters));
        }
        // retry_cnt 7 = infinite, as in rxe (rxe_comp.c: "if (retry_cnt != 7)
        // retry_cnt--"); see QpAttr::retry_cnt.
        if self.retry_left != 7 {
            self.retry_left -= 1;
        }
        counters.rest().completer_retry_err += 1;
        self.rewind();
        Ok(())
    }

    /// Move the cursor back to `acked_psn` (rebuild from the work request).
    fn rewind(&mut self) {
        self.cur = 0;
        self.cur_pkt = match self.wqes.front() {
            Some(f) => self.acked_psn.diff(f.first_psn).max(0) as u32,
            None => 0,
        };
        self.send_psn = self.acked_psn;
        self.rd_atomic_sent = 0;
        self.since_ack_req = 0;
        self.rewound_at = Some(self.acked_psn);
        self.timers.clear(Timer::Retransmit);
    }

    /// The request a response names: the send work request whose PSNs
    /// hold `psn`. Scans from the oldest and stops at the first request
    /// that starts after `psn`, so the cost is the number of requests the
    /// response acknowledges.
    fn wqe_at(&self, psn: Psn) -> Option<&SendWqe> {
        self.wqes
            .iter()
            .take_while(|w| !w.first_psn.after(psn))
            .find(|w| w.contains(psn))
    }

    /// Check a response against what this requester sent, before it may
    /// change anything (rxe `rxe_comp.c`: check_psn, then check_ack):
    /// - its PSN must lie in `[acked_psn, max_sent_psn)`: one never sent
    ///   cannot be a real answer (a forged or stale "ghost" ACK), one
    ///   before `acked_psn` is a duplicate;
    /// - its kind must fit the request at that PSN (rxe check_ack's
    ///   "check operation validity"): a READ response only for a READ,
    ///   with the payload and the FIRST/MIDDLE vs LAST/ONLY position that
    ///   PSN of the READ has; an atomic ACK only at an atomic's PSN; the
    ///   AETH of a READ response or atomic ACK must say ACK; an ACK whose
    ///   syndrome is reserved is malformed. rxe goes to the error state on a
    ///   mismatch; here it is dropped and counted, since completing or
    ///   failing earlier requests on a packet that does not fit would let
    ///   anyone who can aim a packet at the QP do it.
    ///
    /// Only an accepted response acknowledges the requests before it.
    #[inline]
    fn check_response(
        &self,
        psn: Psn,
        frame: &RoceFrameView<'_>,
        mtu: u32,
    ) -> Result<Response, Unfit> {
        if !psn.before(self.max_sent_psn) {
            return Err(Unfit::Unsent);
        }
        if psn.before(self.acked_psn) {
            return Err(Unfit::Duplicate);
        }
        let w = self.wqe_at(psn).ok_or(Unfit::Unsent)?;
        // FIRST/LAST/ONLY READ responses, atomic ACKs and ACKs carry an
        // AETH (the parser checked it is there); READ MIDDLE has none.
        let syndrome = frame.aeth().map(|a| ack_syndrome(a.syndrome));
        let says_ack = matches!(syndrome, None | Some(Some(Syndrome::Ack { .. })));
        match frame.opcode() {
            Opcode::Acknowledge => match syndrome {
                Some(Some(s)) => Ok(Response::Ack(s)),
                _ => Err(Unfit::Malformed),
            },
            // The answer to an ATOMIC WRITE: READ RESPONSE ONLY at its PSN,
            // no payload, AETH ACK (rxe check_ack: RDMA_READ_RESPONSE_ONLY
            // for an IB_WR_ATOMIC_WRITE goes to COMPST_WRITE_SEND).
            Opcode::ReadRespOnly if w.wr.opcode == SendOp::AtomicWrite => {
                if w.first_psn != psn || !says_ack || !frame.payload().is_empty() {
                    return Err(Unfit::Kind);
                }
                Ok(Response::AtomicWrite)
            }
            op @ (Opcode::ReadRespFirst
            | Opcode::ReadRespMiddle
            | Opcode::ReadRespLast
            | Opcode::ReadRespOnly) => {
                if w.wr.opcode != SendOp::Read || !says_ack {
                    return Err(Unfit::Kind);
                }
                // psn is inside the READ, so the offset is below its
                // length (at most 1 GiB): no overflow.
                let off = psn.diff(w.first_psn) as u32 * mtu;
                let remaining = w.wr.local.length - off.min(w.wr.local.length);
                let last = remaining <= mtu;
                let ends = matches!(op, Opcode::ReadRespLast | Opcode::ReadRespOnly);
                if frame.payload().len() != remaining.min(mtu) as usize || ends != last {
                    return Err(Unfit::Kind);
                }
                Ok(Response::Read)
            }
            Opcode::AtomicAcknowledge => {
                if !w.wr.opcode.is_atomic() || w.first_psn != psn || !says_ack {
                    return Err(Unfit::Kind);
                }
                let ack = frame.atomic_ack_eth().ok_or(Unfit::Kind)?;
                Ok(Response::Atomic { orig: ack.orig })
            }
            _ => Err(Unfit::Kind),
        }
    }

    /// Handle an ACK, NAK, READ response or atomic ACK for this QP:
    /// [`Self::check_response`] first, then the requests before it are
    /// acknowledged, then what the response itself says.
    pub(crate) fn handle_response(
        &mut self,
        frame: &RoceFrameView<'_>,
        cx: &mut RxContext<'_>,
    ) -> Result<(), Fatal> {
        let (now, attr) = (cx.now, cx.attr);
        let (sink, counters) = (&mut cx.sink, &mut *cx.counters);
        let psn = Psn::new(frame.psn());
        let response = match self.check_response(psn, frame, attr.path_mtu.bytes()) {
            Ok(r) => r,
            Err(Unfit::Duplicate) => {
                counters.rest().duplicate_response += 1;
                return Ok(());
            }
            Err(Unfit::Unsent) => {
                counters.rest().dropped_unsent_psn += 1;
                return Ok(());
            }
            Err(Unfit::Kind) => {
                counters.rest().dropped_bad_response += 1;
                return Ok(());
            }
            Err(Unfit::Malformed) => {
                counters.rest().dropped_malformed += 1;
                return Ok(());
            }
        };
        // An ACK for PSN n acknowledges n and every PSN before it; a NAK or
        // RNR NAK for n, a READ response or an atomic ACK acknowledges the
        // PSNs before n.
        let upto = match response {
            Response::Ack(Syndrome::Ack { .. }) => psn.add(1),
            _ => psn,
        };
        let (progressed, implied) = self.acknowledge(upto, sink, counters);
        if progressed {
            self.on_progress(now, attr);
        }
        if implied {
            return self.go_back_n(false, sink, counters);
        }
        match response {
            Response::Ack(syndrome) => match syndrome {
                Syndrome::RnrNak { timer } => self.on_rnr_nak(timer, cx),
                Syndrome::Nak(nak_code::PSN_SEQUENCE_ERROR) => {
                    counters.rest().rcvd_seq_err += 1;
                    self.go_back_n(false, sink, counters)
                }
                Syndrome::Nak(nak_code::REMOTE_ACCESS_ERROR) => {
                    Err(self.fail_front(WcStatus::RemoteAccessError, sink, counters))
                }
                Syndrome::Nak(nak_code::REMOTE_OPERATIONAL_ERROR) => {
                    Err(self.fail_front(WcStatus::RemoteOperationalError, sink, counters))
                }
                // Invalid request, invalid RD request and undefined codes.
                Syndrome::Nak(_) => {
                    Err(self.fail_front(WcStatus::RemoteInvalidRequest, sink, counters))
                }
                Syndrome::Ack { .. } | Syndrome::Reserved(_) => Ok(()),
            },
            Response::Read => self.on_read_response(psn, frame.payload(), cx),
            // Everything before it is acknowledged: the ATOMIC WRITE is the
            // front request, and completes as a WRITE does (rxe
            // COMPST_WRITE_SEND).
            Response::AtomicWrite => {
                if self.wqes.front().is_none_or(|f| f.first_psn != psn) {
                    counters.rest().dropped_bad_response += 1;
                    return Ok(());
                }
                self.complete_front(WcStatus::Success, sink, counters);
                self.on_progress(now, attr);
                Ok(())
            }
            Response::Atomic { orig } => {
                // check_response saw the atomic at this PSN, and everything
                // before it is acknowledged: it is the front request.
                let Some(front) = self.wqes.front().copied() else {
                    counters.rest().dropped_bad_response += 1;
                    return Ok(());
                };
                // Atomic results land little-endian, as MrTable::atomic stores them.
                // Through the QP's PD, as every local key (rxe lookup_mr).
                if !place_local(
                    cx.mrs,
                    cx.pd,
                    cx.sgl.as_deref(),
                    &front,
                    0,
                    &orig.to_le_bytes(),
                ) {
                    return Err(self.fail_front(WcStatus::LocalProtectionError, sink, counters));
                }
                self.complete_front(WcStatus::Success, sink, counters);
                self.on_progress(now, attr);
                Ok(())
            }
        }
    }

    /// A READ response packet for the front request, whose kind, length
    /// and position [`Self::check_response`] checked.
    fn on_read_response(
        &mut self,
        psn: Psn,
        payload: &[u8],
        cx: &mut RxContext<'_>,
    ) -> Result<(), Fatal> {
        let (now, attr, mrs, pd, sgl) = (cx.now, cx.attr, &mut *cx.mrs, cx.pd, cx.sgl.as_deref());
        let (sink, counters) = (&mut cx.sink, &mut *cx.counters);
        // Everything before the READ is acknowledged: it is the front.
        let Some(front) = self.wqes.front().copied() else {
            counters.rest().dropped_bad_response += 1;
            return Ok(());
        };
        let expected = front.first_psn.add(front.resp_pkts);
        let d = psn.diff(expected);
        if d < 0 {
            counters.rest().duplicate_response += 1;
            return Ok(());
        }
        if d > 0 {
            // A response packet is missing: retry from the first missing one.
            return self.go_back_n(false, sink, counters);
        }
        let off = front.resp_pkts * attr.path_mtu.bytes();
        if !payload.is_empty() && !place_local(mrs, pd, sgl, &front, off, payload) {
            return Err(self.fail_front(WcStatus::LocalProtectionError, sink, counters));
        }
        if let Some(f) = self.wqes.front_mut() {
            f.resp_pkts += 1;
        }
        self.acked_psn = psn.add(1);
        if front.resp_pkts + 1 == front.npkts {
            self.complete_front(WcStatus::Success, sink, counters);
        }
        self.on_progress(now, attr);
        Ok(())
    }

    /// An RNR NAK carrying RNR timer code `timer_code`.
    fn on_rnr_nak(&mut self, timer_code: u8, cx: &mut RxContext<'_>) -> Result<(), Fatal> {
        let (now, attr) = (cx.now, cx.attr);
        let (sink, counters) = (&mut cx.sink, &mut *cx.counters);
        counters.rest().rcvd_rnr_err += 1;
        if self.timers.is_armed(Timer::Rnr) {
            // Already waiting (a duplicate RNR NAK).
            return Ok(());
        }
        if attr.rnr_retry != 7 {
            if self.rnr_left == 0 {
                counters.rest().retry_rnr_exceeded_err += 1;
                return Err(self.fail_front(WcStatus::RnrRetryExceeded, sink, counters));
            }
            self.rnr_left -= 1;
        }
        self.rewind();
        self.timers.set(Timer::Rnr, now + rnr_delay(timer_code));
        Ok(())
    }

    /// Run expired timers. Returns `Err(Fatal)` when retries are exhausted.
    pub(crate) fn handle_timeout(
        &mut self,
        now: Instant,
        sink: &mut CompletionSink<'_>,
        counters: &mut QpCounters,
    ) -> Result<(), Fatal> {
        // RNR wait over: the cursor already points at the NAK'd PSN.
        self.timers.take_expired(Timer::Rnr, now);
        if self.timers.take_expired(Timer::Retransmit, now)
            && self.acked_psn.before(self.max_sent_psn)
        {
            counters.rest().timeouts += 1;
            return self.go_back_n(true, sink, counters);
        }
        Ok(())
    }

    /// Flush every request with `Flushed` (after the failing one, if any,
    /// has been completed with its error).
    pub(crate) fn flush(&mut self, sink: &mut CompletionSink<'_>, counters: &mut QpCounters) {
        while !self.wqes.is_empty() {
            self.complete_front(WcStatus::Flushed, sink, counters);
        }
        self.timers = Default::default();
        self.cur = 0;
        self.cur_pkt = 0;
        self.rd_atomic_sent = 0;
    }
}

/// Write `data` at message offset `off` of the local buffer of the send
/// request `w` (a READ's response bytes, an atomic's original value):
/// its one SGE, or its SGE list (scattered across the entries, rxe
/// copy_data), each through its L_Key in the QP's PD `pd` with
/// LOCAL_WRITE. `false` when some piece cannot be written.
fn place_local(
    mrs: &mut super::mr::MrTable,
    pd: u32,
    sgl: Option<&QpSgl>,
    w: &SendWqe,
    off: u32,
    data: &[u8],
) -> bool {
    match w.data() {
        WqeData::List { slot, n } => {
            sgl.is_some_and(|s| scatter(mrs, pd, s.send_list(slot, n), off, data))
        }
        // A READ or atomic is never inline (post_send refuses it).
        WqeData::Inline { .. } => false,
        WqeData::One => mrs
            .write(
                pd,
                w.wr.local.lkey,
                w.wr.local.addr.wrapping_add(u64::from(off)),
                data,
                Access::LOCAL_WRITE,
            )
            .is_ok(),
    }
}
