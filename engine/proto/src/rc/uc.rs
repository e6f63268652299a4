//! The Unreliable Connection service (IBA 9.7.5.1, 9.8.3; reference: Linux
//! rxe `rxe_req.c`, `rxe_resp.c`, their `IB_QPT_UC` cases): a connected
//! QP whose requester and responder are RC's, with these rules.
//!
//! - Operations (IBA 9.2 table 38): SEND, SEND with immediate, RDMA WRITE
//!   and WRITE with immediate, with the UC opcodes (0x20-0x2B) and RC's
//!   header layout; BIND_MW and LOCAL_INV run locally as on RC. A READ,
//!   an atomic or a SEND with invalidate is refused at post (rxe
//!   `validate_send_wr`: `EINVAL`).
//! - Requester: a request completes once its last packet has left; no
//!   AckReq, no ACK, no retransmission, no timer, no RNR; nothing counts
//!   against the endpoint's in-flight limit (`Qp::poll_transmit`,
//!   `Requester::complete_sent`).
//! - Responder: never answers (no ACK, no NAK). Packets are taken in PSN
//!   order ([`Responder::handle_uc_request`]):
//!   - a packet at the expected PSN goes on;
//!   - a packet after it (a gap: packets were lost) drops the message in
//!     progress and every packet up to the next FIRST or ONLY, which
//!     starts a new message at its own PSN whatever came before (IBA
//!     9.7.5.1's UC PSN rule; rxe `check_psn`, `resp.drop_msg`);
//!   - a packet before it (a duplicate, or a straggler of a message taken
//!     or dropped) is dropped and changes nothing: a message is never
//!     executed twice. rxe takes an old FIRST/ONLY as a new message; this
//!     responder does not;
//!   - a MIDDLE/LAST outside a message of its kind, or a FIRST/ONLY in
//!     the middle of one, drops the message in progress (rxe
//!     `check_op_seq`, class D1); a FIRST/ONLY then starts its own;
//!   - a SEND that opens a message, or a WRITE with immediate, with no
//!     receive posted: the message is dropped (IBA class D, no RNR; rxe
//!     `RESPST_ERR_RNR` for UC), counted in `dropped_no_receive`;
//!   - a WRITE without REMOTE_WRITE in the QP's access flags, a bad
//!     R_Key, range or right (rxe `RESPST_ERR_RKEY_VIOLATION`, UC without
//!     SRQ: class E), a bad length (rxe `RESPST_ERR_LENGTH`, class D) or
//!     a SEND longer than its receive: the message is dropped silently,
//!     the QP stays; a bad R_Key also counts `uc_rkey_violations`;
//!   - a receive buffer that refuses the bytes (its L_Key gone): the
//!     receive completes with a local protection error and the QP goes to
//!     error, as on RC (class A), without a NAK.
//!
//!   A dropped SEND gives its receive back, at the head of the queue, as
//!   posted (rxe `do_class_d1e_error` resets the WQE's DMA state): the
//!   next message lands in it from its first byte; whatever the dropped
//!   one wrote there is overwritten or left, never completed. The bytes a
//!   dropped WRITE placed stay where they are (they were inside a range
//!   its R_Key allowed). Every message dropped counts once in
//!   `uc_messages_dropped` (a message lost whole on the wire is not seen,
//!   not counted).
//!
//!   A UC QP may take its receives from a shared receive queue (the
//!   kernel, and rxe, allow one for any QP type but XRC's): a SEND or a
//!   WRITE with immediate takes the SRQ's head (`rc/srq.rs`). An SRQ's
//!   receive cannot go back to it: a message dropped after taking one
//!   (its LAST missing, or longer than the receive) completes it with
//!   `RemoteInvalidRequest` and the QP stays (rxe `do_class_d1e_error`
//!   and `RESPST_ERR_LENGTH` for a QP on an SRQ: class E).
//! - Attributes (IBA 11.2.4.2, the kernel's `qp_state_table` for UC):
//!   INIT->RTR needs the address vector, path MTU, destination QP and
//!   RQ PSN; RTR->RTS the SQ PSN; the timeout, retry counts, RNR timer
//!   and READ/atomic depths are RC's only and refused on UC.

use super::attr::{QpAttrMask, QpState};
use super::completer::Fatal;
use super::context::RxContext;
use super::error::VerbsError;
use super::mr::QpScope;
use super::psn::Psn;
use super::responder::{
    check_length, check_op_valid, recv_wc, InProgress, RecvWqe, Request, RespError, Responder,
};
use super::sgl::WqeData;
use super::wqe::{RecvWr, SendOp, Sge, WcStatus};
use crate::wire::RoceFrameView;

/// The attributes only RC has (IBA 11.2.4.2: absent from UC's rows).
pub(crate) const RC_ONLY: QpAttrMask = QpAttrMask(
    QpAttrMask::TIMEOUT.0
        | QpAttrMask::RETRY_CNT.0
        | QpAttrMask::RNR_RETRY.0
        | QpAttrMask::MIN_RNR_TIMER.0
        | QpAttrMask::MAX_QP_RD_ATOMIC.0
        | QpAttrMask::MAX_DEST_RD_ATOMIC.0,
);

/// UC's rows of the modify table on top of RC's (checked by `Qp::modify`
/// first): INIT->RTR also needs the path MTU; RC's own attributes are
/// `InvalidArgument` (the kernel's `ib_modify_qp_is_ok`: `EINVAL`).
pub(crate) fn check_modify(from: QpState, to: QpState, mask: QpAttrMask) -> Result<(), VerbsError> {
    if mask.0 & RC_ONLY.0 != 0 {
        return Err(VerbsError::InvalidArgument(
            "timeout, retry counts, RNR timer and READ/atomic depths are RC attributes",
        ));
    }
    if (from, to) == (QpState::Init, QpState::Rtr) && !mask.contains(QpAttrMask::PATH_MTU) {
        return Err(VerbsError::MissingAttribute);
    }
    Ok(())
}

/// Whether a UC QP takes a send request of `op` (see the module notes).
pub(crate) const fn send_op_allowed(op: SendOp) -> bool {
    matches!(
        op,
        SendOp::Send
            | SendOp::SendWithImm
            | SendOp::Write
            | SendOp::WriteWithImm
            | SendOp::BindMw
            | SendOp::LocalInv
    )
}

impl Responder {
    /// One UC request packet (see the module notes): the PSN rule, then
    /// RC's stages without the answers ([`Self::process_uc`]); whatever
    /// stops the packet drops its message ([`Self::uc_error`]).
    /// `Err(Fatal)`: the QP goes to error (a receive buffer refused).
    pub(crate) fn handle_uc_request(
        &mut self,
        frame: &RoceFrameView<'_>,
        cx: &mut RxContext<'_>,
    ) -> Result<(), Fatal> {
        let psn = Psn::new(frame.psn());
        let op = frame.opcode();
        let starts = op.is_first() || op.is_only();
        match psn.diff(self.e_psn) {
            // Behind: a duplicate or a straggler; never executed again.
            d if d < 0 => {
                cx.counters.rest().duplicate_request += 1;
                return Ok(());
            }
            d => {
                if d > 0 {
                    cx.counters.rest().out_of_seq_request += 1;
                }
                if (d > 0 || self.uc_dropping) && !starts {
                    self.drop_uc_message(cx);
                    return Ok(());
                }
            }
        }
        if starts {
            // A new message begins here: one still in progress lost its
            // LAST (rxe check_op_seq -> class D1).
            if !matches!(self.in_progress, InProgress::None) {
                cx.counters.rest().uc_messages_dropped += 1;
                self.give_back_receive(cx);
            }
            self.uc_dropping = false;
        }
        match self.process_uc(psn, frame, cx) {
            Ok(()) => Ok(()),
            Err(e) => self.uc_error(e, cx),
        }
    }

    /// RC's stages for a UC packet (rxe `rxe_responder` with `qp_type`
    /// UC): opcode sequence, the QP's access flags, length, a receive,
    /// R_Key, then execution; completes the receive a message consumed
    /// and expects the next PSN. Nothing is answered.
    #[inline(always)]
    fn process_uc(
        &mut self,
        psn: Psn,
        frame: &RoceFrameView<'_>,
        cx: &mut RxContext<'_>,
    ) -> Result<(), RespError> {
        let payload = frame.payload();
        let req = self.check_op_seq(frame)?;
        check_op_valid(&req, cx.attr.access)?;
        check_length(&req, payload.len(), cx.attr.path_mtu.bytes())?;
        self.check_resource(&req, cx.attr, cx.srq.as_deref())?;
        let qpn = cx.sink.qpn;
        let completed = match req {
            Request::Send { last, imm, .. } => {
                // The receive a FIRST/ONLY takes, to give back if the
                // message does not fit it.
                let taken = match self.in_progress {
                    InProgress::None => self.rq.front().copied(),
                    _ => None,
                };
                match self.execute_send(last, imm, None, payload, cx) {
                    // On an SRQ the WQE cannot go back: it completes with
                    // a remote invalid request error and the QP stays
                    // (class E; rxe RESPST_ERR_LENGTH for a UC QP on an
                    // SRQ).
                    Err(RespError::RecvTooShort { wr, .. }) if cx.srq.is_some() => {
                        self.in_progress = InProgress::None;
                        let wc = recv_wc(wr, qpn, WcStatus::RemoteInvalidRequest, 0, None);
                        cx.sink.push(wc, cx.counters);
                        return Err(RespError::Length);
                    }
                    Err(RespError::RecvTooShort { .. }) => {
                        if let Some(w) = taken {
                            self.rq.push_front(w);
                        }
                        return Err(RespError::Length);
                    }
                    r => r?,
                }
            }
            Request::Write { reth, last, imm } => {
                let qp = QpScope { pd: cx.pd, qpn };
                let target = self.check_rkey_write(reth, payload.len(), cx.mrs, qp)?;
                self.execute_write(target, last, imm, payload, qpn, cx.srq.as_deref_mut())?
            }
            // check_op_seq decodes UC opcodes as SENDs and WRITEs only.
            Request::Read(_) | Request::Atomic { .. } | Request::AtomicWrite(_) => {
                return Err(RespError::Unsupported)
            }
        };
        if let Some(wc) = completed {
            cx.sink.push(wc, cx.counters);
        }
        self.advance(psn.add(1));
        Ok(())
    }

    /// What stopped a UC packet: its message is dropped, silently, and
    /// the QP stays; but a receive buffer that refused the bytes fails the
    /// receive and the QP (class A, as on RC, without the NAK: rxe_resp.c
    /// `RESPST_ERR_MALFORMED_WQE` is "All, Class A", the receive
    /// completing with IB_WC_LOC_QP_OP_ERR; `acknowledge` sends nothing
    /// on UC).
    #[cold]
    #[inline(never)]
    fn uc_error(&mut self, e: RespError, cx: &mut RxContext<'_>) -> Result<(), Fatal> {
        let counters = &mut *cx.counters;
        match e {
            RespError::MalformedWqe { wr } => {
                let wc = recv_wc(wr, cx.sink.qpn, WcStatus::LocalQpOperationError, 0, None);
                cx.sink.push(wc, counters);
                self.in_progress = InProgress::None;
                return Err(Fatal);
            }
            RespError::ReceiverNotReady => counters.rest().dropped_no_receive += 1,
            RespError::RkeyViolation => counters.rest().uc_rkey_violations += 1,
            _ => {}
        }
        self.drop_uc_message(cx);
        Ok(())
    }

    /// Drop the message in progress (or the one whose packets are
    /// arriving) and every packet up to the next FIRST or ONLY; counted
    /// once per message.
    fn drop_uc_message(&mut self, cx: &mut RxContext<'_>) {
        if !self.uc_dropping {
            cx.counters.rest().uc_messages_dropped += 1;
            self.uc_dropping = true;
        }
        self.give_back_receive(cx);
    }

    /// End the message in progress; a SEND's receive goes back to the head
    /// of the queue as it was posted (rxe `do_class_d1e_error`, class D1).
    /// On an SRQ it cannot go back: it completes with a remote invalid
    /// request error (class E, the same rxe function for a QP on an SRQ).
    fn give_back_receive(&mut self, cx: &mut RxContext<'_>) {
        let wqe = match core::mem::replace(&mut self.in_progress, InProgress::None) {
            InProgress::Send { wr, .. } => RecvWqe::new(wr, WqeData::One),
            InProgress::SendList {
                wr_id,
                slot,
                n,
                length,
                ..
            } => RecvWqe::new(
                RecvWr {
                    wr_id,
                    sge: Sge {
                        lkey: 0,
                        addr: 0,
                        length,
                    },
                },
                WqeData::List { slot, n },
            ),
            InProgress::Write { .. } | InProgress::None => return,
        };
        if cx.srq.is_some() {
            let wc = recv_wc(wqe.wr, cx.sink.qpn, WcStatus::RemoteInvalidRequest, 0, None);
            cx.sink.push(wc, cx.counters);
            return;
        }
        self.rq.push_front(wqe);
    }
}
