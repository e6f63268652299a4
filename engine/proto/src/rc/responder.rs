//! Responder: executes incoming requests in PSN order and answers them.
//!
//! Rules (`docs/reliable-connection.md`, "Responder"; reference: Linux rxe
//! `rxe_resp.c`):
//! - expects ePSN; in order: execute, advance ePSN, ACK when AckReq is set,
//!   coalesced (one queued ACK is updated instead of queueing another);
//! - out of sequence (PSN > ePSN): one NAK PSN sequence error, then silent
//!   until an in-order packet arrives (rxe's `sent_psn_nak`);
//! - duplicate (PSN < ePSN): SEND/WRITE are not re-executed, only re-ACKed;
//!   a duplicate READ or atomic is answered again only from the responder
//!   resources (rxe's `resp.resources`: the last `max_dest_rd_atomic` READs
//!   and atomics executed): a READ inside one of them is re-executed from
//!   memory, an atomic's saved result is replayed, never re-executed;
//!   anything else is dropped and counted (`dropped_duplicate_rd_atomic`);
//! - the QP's own rights: an RDMA WRITE, READ or atomic that the QP's
//!   access flags (`QpAttr::access`, verbs `qp_access_flags`) do not
//!   enable -> NAK invalid request and the QP goes to error, before any
//!   key is looked at (rxe `check_op_valid`; `qp_access_violation`);
//! - protection: unknown R_Key, an R_Key of a region of another protection
//!   domain than the QP's (rxe `lookup_mr`), range outside the region, or
//!   missing rights -> NAK remote access error and the QP goes to error;
//!   nothing is written outside a registered region (every access goes
//!   through `MrTable`, with the QP's PD);
//! - an R_Key may be a memory window's (rxe `rxe_lookup_mw`): of the QP's
//!   PD, bound, with the right, a type 2 bound through this QP, the
//!   access inside the window's range; a closed window is NAK remote
//!   access error;
//! - SEND with invalidate (IETH): after its bytes land, the type 2 window
//!   it names is invalidated and the receive's completion carries the key;
//!   a key that is no bound type 2 window of this QP completes the receive
//!   with a remote invalid request error, NAK invalid request, the QP goes
//!   to error (rxe RESPST_ERR_INVALIDATE_RKEY);
//! - a receive buffer that cannot be written (its L_Key unknown or of
//!   another PD by the time a SEND lands, or a range the region no longer
//!   holds) -> the receive completes with a local protection error, NAK
//!   remote operational error, the QP goes to error;
//! - a SEND (or WRITE with immediate) that finds no posted receive gets an
//!   RNR NAK, never a silent drop;
//! - a QP created on a shared receive queue takes its receives from it
//!   instead of its own queue (rxe `get_srq_wqe`; `rc/srq.rs`): the
//!   message's first packet takes one, which the message holds to its
//!   last packet; an empty SRQ is RNR NAKed as an empty queue is;
//! - MSN counts completed inbound messages (24-bit).
//!
//! The request path ([`Responder::handle_request`]) runs rxe's stages in
//! rxe's order, one function each: `check_psn`, `check_room` (the answer
//! queue below), `check_op_seq`, `check_op_valid`, `check_length`,
//! `check_resource`, `check_rkey_write` / `check_rkey_read`, then
//! `execute_send`, `execute_write`, `execute_read` or `execute_atomic`.
//! Each returns a `RespError` when the request stops there, and one
//! `match` (`answer_error`) turns it into the AETH syndrome, the QP's
//! state change and the completion.
//!
//! Answers leave in PSN order through one queue: NAKs, READ responses and
//! atomic ACKs in `out`, then at most one coalesced ACK (`ack_pending`)
//! logically behind them, so an ACK can never overtake a READ response.
//! Keeping the coalesced ACK out of the `VecDeque` makes the common case
//! (an in-order packet with AckReq) one store.

use std::collections::VecDeque;

use super::attr::QpAttr;
use super::completer::Fatal;
use super::context::{RxContext, TxContext};
use super::counters::QpCounters;
use super::cq::CompletionSink;
use super::mr::{Access, AccessError, MrTable, QpScope};
use super::psn::Psn;
use super::requester::{packets_for, MAX_MESSAGE_LEN};
use super::sgl::{scatter, DataKind, QpSgl, WqeData};
use super::srq::Srq;
use super::wqe::{RecvWr, WcOpcode, WcStatus, WorkCompletion};
use crate::wire::{
    emit_frame, emit_templated, nak_code, AethRepr, AtomicAckEthRepr, AtomicEthRepr, Opcode,
    RethRepr, RoceFrameView, Syndrome,
};

/// One answer waiting to be sent, in PSN order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Answer {
    /// ACK, RNR NAK or NAK (the syndrome says which) for `psn`.
    Ack {
        psn: Psn,
        syndrome: Syndrome,
        msn: u32,
    },
    /// Atomic ACK carrying the original value.
    AtomicAck { psn: Psn, orig: u64, msn: u32 },
    /// The answer to an ATOMIC WRITE: RDMA READ RESPONSE ONLY without
    /// payload, AETH ACK (IBA 1.5 9.4.8; rxe `acknowledge` ->
    /// `send_read_response_ack`).
    AtomicWriteAck { psn: Psn, msn: u32 },
    /// READ response packets still to send: next PSN, remote address,
    /// remaining bytes, and whether the next packet is the first.
    Read {
        psn: Psn,
        va: u64,
        rkey: u32,
        remaining: u32,
        first: bool,
        msn: u32,
    },
}

impl Answer {
    /// The whole response stream of the READ request `reth` at `psn`.
    fn read(psn: Psn, reth: &RethRepr, msn: u32) -> Answer {
        Answer::Read {
            psn,
            va: reth.va,
            rkey: reth.rkey,
            remaining: reth.dma_len,
            first: true,
            msn,
        }
    }
}

/// One responder resource (rxe `struct resp_res`): a READ or atomic this
/// responder executed, kept so that a duplicate of it can be answered
/// again. The QP keeps the last `max_dest_rd_atomic` of them, reused
/// oldest first (rxe `prepare_next_resource`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Resource {
    /// A READ: its first PSN, the PSNs its responses took, and what it read.
    Read {
        first: Psn,
        npkts: u32,
        va: u64,
        rkey: u32,
        len: u32,
    },
    /// An atomic and the original value it answered.
    Atomic { psn: Psn, orig: u64 },
    /// An ATOMIC WRITE executed (rxe `rxe_prepare_res` with
    /// RXE_ATOMIC_WRITE_MASK: first = last = its PSN); a duplicate is
    /// answered from it, never written again.
    AtomicWrite { psn: Psn },
}

impl Resource {
    /// Whether `psn` is one of the PSNs this resource took (rxe
    /// `find_resource`).
    fn holds(&self, psn: Psn) -> bool {
        match *self {
            Resource::Read { first, npkts, .. } => psn.in_window(first, npkts),
            Resource::Atomic { psn: p, .. } | Resource::AtomicWrite { psn: p } => p == psn,
        }
    }
}

/// A posted receive: the request, and where its buffer is (its one SGE,
/// or a list in the QP's receive arena; `wr.sge.length` is then the
/// list's total).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RecvWqe {
    pub wr: RecvWr,
    kind: DataKind,
}

impl RecvWqe {
    /// `wr` whose buffer `data` says where it is (packed: [`DataKind`]).
    #[inline]
    pub(crate) fn new(mut wr: RecvWr, data: WqeData) -> RecvWqe {
        let kind = data.pack(&mut wr.sge);
        RecvWqe { wr, kind }
    }

    /// Where its buffer is.
    #[inline(always)]
    pub(crate) fn data(&self) -> WqeData {
        WqeData::unpack(self.kind, &self.wr.sge)
    }
}

/// A multi-packet message being received.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum InProgress {
    None,
    Send {
        wr: RecvWr,
        offset: u32,
    },
    /// A SEND into a receive whose buffer is the SGE list `n` entries at
    /// `slot` of the receive arena, `length` bytes in all (kept apart
    /// from `Send` so that the state stays as small as a one-SGE one).
    SendList {
        wr_id: u64,
        slot: u32,
        n: u32,
        length: u32,
        offset: u32,
    },
    Write {
        va: u64,
        rkey: u32,
        total: u32,
        offset: u32,
    },
}

/// Why a request packet stopped before (or while) executing; one of
/// `rxe_resp.c`'s error states each. [`Responder::answer_error`] turns it
/// into the answer, the QP's state change and the completion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum RespError {
    /// PSN after ePSN (rxe RESPST_ERR_PSN_OUT_OF_SEQ).
    OutOfSequence,
    /// PSN before ePSN (rxe RESPST_DUPLICATE_REQUEST).
    Duplicate,
    /// No room in the answer queue, or every READ/atomic slot taken.
    Busy,
    /// No posted receive for a SEND or WRITE with immediate (rxe
    /// RESPST_ERR_RNR).
    ReceiverNotReady,
    /// A MIDDLE/LAST outside its message or a FIRST/ONLY inside one (rxe
    /// RESPST_ERR_MISSING_OPCODE_FIRST / _LAST_C).
    OpSequence,
    /// A request opcode this responder does not execute (rxe
    /// RESPST_ERR_UNSUPPORTED_OPCODE).
    Unsupported,
    /// A WRITE, READ or atomic the QP's access flags do not enable (rxe
    /// check_op_valid).
    QpAccessViolation,
    /// A header the opcode requires is missing.
    Malformed,
    /// Payload length against the path MTU, the RETH length or the
    /// message size limit (rxe RESPST_ERR_LENGTH).
    Length,
    /// Unknown R_Key, an R_Key of another PD, range outside the region,
    /// or missing right (rxe RESPST_ERR_RKEY_VIOLATION).
    RkeyViolation,
    /// Atomic address not 8-byte aligned (rxe
    /// RESPST_ERR_MISALIGNED_ATOMIC).
    MisalignedAtomic,
    /// The SEND is longer than its receive buffer (rxe send_data_in:
    /// -ENOSPC, RESPST_ERR_LENGTH); `byte_len` is where it would end.
    RecvTooShort { wr: RecvWr, byte_len: u32 },
    /// The receive buffer refused the bytes: its L_Key unknown or of
    /// another PD, or its range gone (rxe RESPST_ERR_MALFORMED_WQE).
    MalformedWqe { wr: RecvWr },
    /// A SEND with invalidate named an R_Key that is not a type 2 memory
    /// window bound through this QP (rxe RESPST_ERR_INVALIDATE_RKEY);
    /// `byte_len` is the message's length.
    InvalidateRkey { wr: RecvWr, byte_len: u32 },
}

/// A request packet as [`Responder::check_op_seq`] decodes it.
#[derive(Debug, Clone, Copy)]
pub(super) enum Request {
    /// SEND FIRST/MIDDLE/LAST/ONLY; immediate data, or the R_Key to
    /// invalidate (IETH), on LAST/ONLY.
    Send {
        first: bool,
        last: bool,
        imm: Option<u32>,
        inv: Option<u32>,
    },
    /// RDMA WRITE FIRST/MIDDLE/LAST/ONLY; FIRST and ONLY carry the RETH.
    Write {
        reth: Option<RethRepr>,
        last: bool,
        imm: Option<u32>,
    },
    Read(RethRepr),
    /// Compare-and-swap (`compare`) or fetch-and-add.
    Atomic {
        eth: AtomicEthRepr,
        compare: bool,
    },
    /// ATOMIC WRITE: its RETH; the 8 bytes are the payload.
    AtomicWrite(RethRepr),
}

/// Where a WRITE packet's payload goes (rxe keeps the same in `qp->resp`:
/// va, rkey, resid, mr).
pub(super) struct WriteTarget<'m> {
    va: u64,
    rkey: u32,
    /// The RETH's length.
    total: u32,
    /// Bytes of the message placed before this packet.
    offset: u32,
    place: Placement<'m>,
}

/// How a WRITE packet's payload is placed.
pub(super) enum Placement<'m> {
    /// First packet: into the bytes the R_Key check yielded.
    Checked(&'m mut [u8]),
    /// Later packets: through the region table, which checks key (in the
    /// QP's PD, a window's through its QP), range and rights again.
    Region(&'m mut MrTable, QpScope),
}

/// Responder state of one QP.
#[derive(Debug)]
pub struct Responder {
    /// Expected PSN.
    pub(crate) e_psn: Psn,
    /// Message sequence number (24-bit).
    pub(crate) msn: u32,
    /// A NAK sequence error (or RNR NAK) was sent for the current gap.
    pub(crate) nak_sent: bool,
    /// Posted receives.
    pub(crate) rq: VecDeque<RecvWqe>,
    /// Receive queue depth (u32, with `out_cap`: the QP's 576 bytes).
    pub(crate) max_recv_wr: u32,
    pub(super) in_progress: InProgress,
    /// UC: the message being received was dropped; every packet is
    /// dropped until a FIRST or ONLY (rxe `resp.drop_msg`; `rc/uc.rs`).
    pub(super) uc_dropping: bool,
    /// A QP on an SRQ went to the error state and has not yet reported
    /// its last WQE (`AsyncEvent::QpLastWqeReached`, IBA 10.3.1).
    pub(super) last_wqe_reached: bool,
    pub(crate) out: VecDeque<Answer>,
    /// The coalesced ACK (PSN, MSN), queued after everything in `out`
    /// (`docs/reliable-connection.md`, "Responder": one ACK may cover many
    /// packets). Every push to
    /// `out` moves it into `out` first, so the order is kept.
    ack_pending: Option<(Psn, u32)>,
    /// Most answers queued (`out` plus the pending ACK).
    out_cap: u32,
    /// The responder resources, a ring of `max_dest_rd_atomic` entries
    /// (see [`Resource`]).
    resources: Vec<Resource>,
    /// Next entry of `resources` to reuse once the ring is full.
    res_next: u32,
    /// Entries of the ring: `max_dest_rd_atomic` (at least 1).
    res_cap: u32,
}

impl Responder {
    /// A responder with `max_recv_wr` receive slots.
    pub fn new(max_recv_wr: usize) -> Responder {
        Responder {
            e_psn: Psn::new(0),
            msn: 0,
            nak_sent: false,
            // Grows as receives are posted (as the send queue does), so
            // a QP that never receives a SEND holds no receive queue.
            rq: VecDeque::new(),
            max_recv_wr: max_recv_wr as u32,
            in_progress: InProgress::None,
            uc_dropping: false,
            last_wqe_reached: false,
            out: VecDeque::new(),
            ack_pending: None,
            out_cap: 0,
            resources: Vec::new(),
            res_next: 0,
            res_cap: 1,
        }
    }

    /// Back to the state of [`Responder::new`] (a QP moved to RESET),
    /// keeping the memory of its queues.
    pub(crate) fn reset(&mut self) {
        let (mut rq, mut out, mut resources) = (
            std::mem::take(&mut self.rq),
            std::mem::take(&mut self.out),
            std::mem::take(&mut self.resources),
        );
        rq.clear();
        out.clear();
        resources.clear();
        *self = Responder::new(self.max_recv_wr as usize);
        (self.rq, self.out, self.resources) = (rq, out, resources);
    }

    /// Start expecting `rq_psn` (INIT -> RTR); sizes the answer queue from
    /// `max_dest_rd_atomic`.
    pub(crate) fn start(&mut self, rq_psn: Psn, attr: &QpAttr) {
        self.e_psn = rq_psn;
        self.msn = 0;
        self.nak_sent = false;
        self.in_progress = InProgress::None;
        self.uc_dropping = false;
        let rd = usize::from(attr.max_dest_rd_atomic.max(1));
        self.out_cap = (2 * rd + 4) as u32;
        // The answer queue and the resource ring grow to these bounds on
        // first need, once per QP, and keep their memory (a QP connected
        // again reuses it): a QP that is only written to or sent to holds
        // neither (its ACKs wait in `ack_pending`, which the queue only
        // takes behind a NAK, READ response or atomic answer), not
        // 2 * max_dest_rd_atomic + 4 answers and max_dest_rd_atomic
        // resources (1.7 KB of the 3.1 KB a connected QP held,
        // docs/architecture.md "QP limits").
        self.out.clear();
        self.ack_pending = None;
        self.resources.clear();
        self.res_next = 0;
        self.res_cap = rd as u32;
    }

    /// Queue a receive. `false` when full.
    pub(crate) fn post_recv(&mut self, wr: RecvWr, data: WqeData) -> bool {
        if self.is_full() {
            return false;
        }
        self.rq.push_back(RecvWqe::new(wr, data));
        true
    }

    /// Whether the receive queue holds `max_recv_wr` requests.
    #[inline]
    pub(crate) fn is_full(&self) -> bool {
        // A SEND being received still holds its receive (rxe consumes it
        // at completion): it counts, and a UC message dropped midway
        // can give it back to the queue (`rc/uc.rs`).
        let taken = matches!(
            self.in_progress,
            InProgress::Send { .. } | InProgress::SendList { .. }
        );
        self.rq.len() + usize::from(taken) >= self.max_recv_wr as usize
    }

    /// Whether an answer is waiting.
    pub(crate) fn has_work(&self) -> bool {
        !self.out.is_empty() || self.ack_pending.is_some()
    }

    /// Whether the only answer waiting is an ACK (no READ or atomic
    /// response, no NAK).
    pub(crate) fn only_ack_pending(&self) -> bool {
        self.out.is_empty() && self.ack_pending.is_some()
    }

    /// Answers queued, the pending ACK included.
    #[inline]
    fn queued(&self) -> usize {
        self.out.len() + usize::from(self.ack_pending.is_some())
    }

    /// Queue an answer behind everything queued (the pending ACK first).
    #[inline]
    fn push(&mut self, answer: Answer) {
        if let Some((psn, msn)) = self.ack_pending.take() {
            self.out.push_back(Answer::Ack {
                psn,
                syndrome: Syndrome::ACK_UNLIMITED,
                msn,
            });
        }
        self.out.push_back(answer);
    }

    /// Queue a coalesced ACK for `psn`: it replaces the pending ACK, if
    /// any (a later cumulative ACK covers the earlier one), else it is a
    /// new answer at the back.
    #[inline]
    fn ack(&mut self, psn: Psn) {
        self.ack_pending = Some((psn, self.msn));
    }

    /// Queue a NAK with `code` for the current ePSN and report the error.
    fn nak_fatal(&mut self, code: u8, counters: &mut QpCounters) -> Fatal {
        // May exceed out_cap by one: the QP is going to error anyway.
        self.push(Answer::Ack {
            psn: self.e_psn,
            syndrome: Syndrome::Nak(code),
            msn: self.msn,
        });
        counters.rest().naks_sent += 1;
        Fatal
    }

    /// Execute or answer one request packet: [`Self::process`] runs the
    /// stages, [`Self::answer_error`] turns what stopped it into the answer.
    pub(crate) fn handle_request(
        &mut self,
        frame: &RoceFrameView<'_>,
        cx: &mut RxContext<'_>,
    ) -> Result<(), Fatal> {
        match self.process(frame, cx) {
            Ok(()) => Ok(()),
            Err(e) => self.answer_error(e, frame, cx),
        }
    }

    /// The request path, stage by stage in rxe's order (`rxe_responder`:
    /// check_psn, check_op_seq, check_op_valid, check_length,
    /// check_resource, check_rkey, execute), plus this responder's own
    /// check for room in its answer queue. Each stage passes or says why
    /// the request stops; execution starts once the checks of PSN, opcode,
    /// length, resources and key have passed (a WRITE's LAST/ONLY length
    /// against its RETH is checked after placing, see
    /// [`Self::execute_write`]).
    #[inline(always)]
    fn process(
        &mut self,
        frame: &RoceFrameView<'_>,
        cx: &mut RxContext<'_>,
    ) -> Result<(), RespError> {
        let psn = Psn::new(frame.psn());
        let payload = frame.payload();
        let mtu = cx.attr.path_mtu.bytes();
        self.check_psn(psn)?;
        self.check_room()?;
        let req = self.check_op_seq(frame)?;
        check_op_valid(&req, cx.attr.access)?;
        check_length(&req, payload.len(), mtu)?;
        self.check_resource(&req, cx.attr, cx.srq.as_deref())?;
        self.check_reads_sent(&req)?;
        let qpn = cx.sink.qpn;
        let qp = QpScope { pd: cx.pd, qpn };
        let completed = match req {
            Request::Send { last, imm, inv, .. } => {
                self.execute_send(last, imm, inv, payload, cx)?
            }
            Request::Write { reth, last, imm } => {
                let target = self.check_rkey_write(reth, payload.len(), cx.mrs, qp)?;
                self.execute_write(target, last, imm, payload, qpn, cx.srq.as_deref_mut())?
            }
            Request::Read(reth) => {
                check_rkey_read(&reth, cx.mrs, qp)?;
                self.execute_read(psn, &reth, mtu);
                return Ok(());
            }
            Request::Atomic { eth, compare } => {
                return self.execute_atomic(psn, &eth, compare, cx.mrs, qp)
            }
            Request::AtomicWrite(reth) => {
                return self.execute_atomic_write(psn, &reth, payload, cx.mrs, qp)
            }
        };
        // SEND and WRITE: complete the receive the message consumed (rxe
        // do_complete), expect the next PSN, and ACK if the packet asks for
        // it (rxe acknowledge), coalesced with the pending ACK.
        if let Some(wc) = completed {
            cx.sink.push(wc, cx.counters);
        }
        self.advance(psn.add(1));
        if frame.ack_req() {
            self.ack(psn);
        }
        Ok(())
    }

    /// Check PSN (rxe check_psn; `docs/reliable-connection.md`,
    /// "Responder"): only the expected PSN goes on. A later PSN is a gap,
    /// an earlier one a duplicate (wrap-aware, [`Psn::diff`]).
    ///
    /// rxe clears its "NAK sent for this gap" flag here, on any in-order
    /// packet; this responder clears it when an in-order request executes
    /// ([`Self::advance`]), so an in-order packet that is dropped for want
    /// of room or answered with an RNR NAK does not re-arm the gap's NAK.
    #[inline(always)]
    fn check_psn(&self, psn: Psn) -> Result<(), RespError> {
        match psn.diff(self.e_psn) {
            0 => Ok(()),
            d if d > 0 => Err(RespError::OutOfSequence),
            _ => Err(RespError::Duplicate),
        }
    }

    /// Room for the answer: the answer queue holds at most `out_cap`
    /// entries (sized from `max_dest_rd_atomic`). rxe sends its answers
    /// at once and has no such queue; here a request that could not be
    /// answered is dropped unexecuted and the requester retransmits it.
    #[inline(always)]
    fn check_room(&self) -> Result<(), RespError> {
        if self.queued() >= self.out_cap as usize {
            return Err(RespError::Busy);
        }
        Ok(())
    }

    /// Check opcode sequence and validity (rxe check_op_seq,
    /// check_op_valid; `docs/wire-format.md`, "RC opcodes"): a FIRST opens
    /// a message that only MIDDLE/LAST packets of the same kind may
    /// continue; ONLY, READ and the atomics stand alone. SEND
    /// LAST/ONLY with invalidate end a SEND as SEND LAST/ONLY do, and carry
    /// the R_Key to invalidate. Decodes the packet into a [`Request`].
    #[inline(always)]
    pub(super) fn check_op_seq(&self, frame: &RoceFrameView<'_>) -> Result<Request, RespError> {
        // A UC opcode reads as its RC counterpart (same headers, same
        // place in a message); only a UC QP gets them (`Qp::handle_packet`).
        let op = frame.opcode();
        let op = if op.is_uc() { op.rc_equivalent() } else { op };
        // The extension headers an opcode announces are present in every
        // frame the parser accepted; `Malformed` is never expected.
        let req = match op {
            Opcode::SendFirst | Opcode::SendMiddle => Request::Send {
                first: op == Opcode::SendFirst,
                last: false,
                imm: None,
                inv: None,
            },
            Opcode::SendLast | Opcode::SendLastImm | Opcode::SendOnly | Opcode::SendOnlyImm => {
                Request::Send {
                    first: matches!(op, Opcode::SendOnly | Opcode::SendOnlyImm),
                    last: true,
                    imm: frame.immdt(),
                    inv: None,
                }
            }
            Opcode::SendLastInv | Opcode::SendOnlyInv => Request::Send {
                first: op == Opcode::SendOnlyInv,
                last: true,
                imm: None,
                inv: Some(frame.ieth().ok_or(RespError::Malformed)?),
            },
            Opcode::WriteFirst => Request::Write {
                reth: Some(frame.reth().ok_or(RespError::Malformed)?),
                last: false,
                imm: None,
            },
            Opcode::WriteMiddle => Request::Write {
                reth: None,
                last: false,
                imm: None,
            },
            Opcode::WriteOnly | Opcode::WriteOnlyImm => Request::Write {
                reth: Some(frame.reth().ok_or(RespError::Malformed)?),
                last: true,
                imm: frame.immdt(),
            },
            Opcode::WriteLast | Opcode::WriteLastImm => Request::Write {
                reth: None,
                last: true,
                imm: frame.immdt(),
            },
            Opcode::ReadRequest => Request::Read(frame.reth().ok_or(RespError::Malformed)?),
            Opcode::CompareSwap | Opcode::FetchAdd => Request::Atomic {
                eth: frame.atomic_eth().ok_or(RespError::Malformed)?,
                compare: op == Opcode::CompareSwap,
            },
            Opcode::AtomicWrite => Request::AtomicWrite(frame.reth().ok_or(RespError::Malformed)?),
            _ => return Err(RespError::Unsupported),
        };
        let in_sequence = match (self.in_progress, &req) {
            (InProgress::None, Request::Send { first, .. }) => *first,
            (InProgress::None, Request::Write { reth, .. }) => reth.is_some(),
            (
                InProgress::None,
                Request::Read(_) | Request::Atomic { .. } | Request::AtomicWrite(_),
            ) => true,
            (
                InProgress::Send { .. } | InProgress::SendList { .. },
                Request::Send { first, .. },
            ) => !*first,
            (InProgress::Write { .. }, Request::Write { reth, .. }) => reth.is_none(),
            (
                InProgress::Send { .. } | InProgress::SendList { .. } | InProgress::Write { .. },
                _,
            ) => false,
        };
        if !in_sequence {
            return Err(RespError::OpSequence);
        }
        Ok(req)
    }

    /// Check resources (rxe check_resource): a SEND that opens a message,
    /// and a WRITE with immediate, need a posted receive (checked before
    /// anything is placed, so the retry after the RNR NAK finds the same
    /// state); a READ needs a free READ/atomic slot (`max_dest_rd_atomic`;
    /// atomics are bounded by the answer queue only). The receive is the
    /// SRQ's for a QP created on one.
    #[inline(always)]
    pub(super) fn check_resource(
        &self,
        req: &Request,
        attr: &QpAttr,
        srq: Option<&Srq>,
    ) -> Result<(), RespError> {
        let no_recv = || srq.map_or(self.rq.is_empty(), Srq::is_empty);
        match req {
            Request::Send { .. } if matches!(self.in_progress, InProgress::None) && no_recv() => {
                Err(RespError::ReceiverNotReady)
            }
            Request::Write { imm: Some(_), .. } if no_recv() => Err(RespError::ReceiverNotReady),
            // An ATOMIC WRITE takes a responder resource as a READ does
            // (rxe check_resource: RXE_READ_OR_ATOMIC_MASK |
            // RXE_ATOMIC_WRITE_MASK).
            Request::Read(_) | Request::AtomicWrite(_) if !self.rd_atomic_slot_free(attr) => {
                Err(RespError::Busy)
            }
            _ => Ok(()),
        }
    }

    /// A SEND with invalidate waits until the READ responses queued before
    /// it have left: they are read from memory as they leave, and an
    /// invalidation must not overtake the READs it follows (rxe sends a
    /// READ's whole response before it takes the next request). Until
    /// then it is dropped unexecuted, as a request that finds no room, and
    /// the requester sends it again.
    #[inline(always)]
    fn check_reads_sent(&self, req: &Request) -> Result<(), RespError> {
        match req {
            Request::Send { inv: Some(_), .. }
                if self.out.iter().any(|a| matches!(a, Answer::Read { .. })) =>
            {
                Err(RespError::Busy)
            }
            _ => Ok(()),
        }
    }

    /// Whether fewer than `max_dest_rd_atomic` READ responses and atomic
    /// ACKs wait to be sent: the responder resources a new READ, or a
    /// duplicate READ or atomic answered again, needs one of.
    fn rd_atomic_slot_free(&self, attr: &QpAttr) -> bool {
        let busy = self
            .out
            .iter()
            .filter(|a| {
                matches!(
                    a,
                    Answer::Read { .. } | Answer::AtomicAck { .. } | Answer::AtomicWriteAck { .. }
                )
            })
            .count();
        busy < usize::from(attr.max_dest_rd_atomic)
    }

    /// Check R_Key, range and rights of a WRITE packet (rxe check_rkey;
    /// `docs/reliable-connection.md`, "Responder"). The first packet's
    /// R_Key (of a region of the QP's PD: rxe lookup_mr; or of a memory
    /// window that admits the QP `qp`: rxe lookup_mw), the RETH's
    /// whole range and REMOTE_WRITE are checked in one lookup that also
    /// yields where the bytes go; a zero-length WRITE validates no R_Key
    /// (IBTA C9-88, rxe the same). Every packet must stay inside the
    /// RETH's length (rxe: `resid`).
    #[inline(always)]
    pub(super) fn check_rkey_write<'m>(
        &self,
        reth: Option<RethRepr>,
        len: usize,
        mrs: &'m mut MrTable,
        qp: QpScope,
    ) -> Result<WriteTarget<'m>, RespError> {
        let (va, rkey, total, offset, place) = match (reth, self.in_progress) {
            (
                None,
                InProgress::Write {
                    va,
                    rkey,
                    total,
                    offset,
                },
            ) => (va, rkey, total, offset, Placement::Region(mrs, qp)),
            (Some(reth), _) if reth.dma_len == 0 => {
                (reth.va, reth.rkey, 0, 0, Placement::Region(mrs, qp))
            }
            (Some(reth), _) => {
                let dst = mrs
                    .slice_mut_remote(
                        qp,
                        reth.rkey,
                        reth.va,
                        reth.dma_len as usize,
                        Access::REMOTE_WRITE,
                    )
                    .map_err(|_| RespError::RkeyViolation)?;
                // More payload than the RETH announced.
                let dst = dst.get_mut(..len).ok_or(RespError::Length)?;
                (reth.va, reth.rkey, reth.dma_len, 0, Placement::Checked(dst))
            }
            // check_op_seq lets a continuation through only inside a WRITE.
            (None, _) => return Err(RespError::OpSequence),
        };
        if u64::from(offset) + len as u64 > u64::from(total) {
            return Err(RespError::Length);
        }
        Ok(WriteTarget {
            va,
            rkey,
            total,
            offset,
            place,
        })
    }

    /// Execute a SEND packet (rxe execute + send_data_in): the payload goes
    /// into the message's receive buffer at its offset, through the
    /// receive's L_Key with LOCAL_WRITE, a key of a region of the QP's PD
    /// `pd` (rxe copy_data -> lookup_mr; another PD's key is unknown and
    /// the receive is a malformed WQE); the LAST/ONLY packet counts a
    /// message (MSN) and returns the receive's completion.
    #[inline(always)]
    pub(super) fn execute_send(
        &mut self,
        last: bool,
        imm: Option<u32>,
        inv: Option<u32>,
        payload: &[u8],
        cx: &mut RxContext<'_>,
    ) -> Result<Option<WorkCompletion>, RespError> {
        let (pd, qpn) = (cx.pd, cx.sink.qpn);
        let qp = QpScope { pd, qpn };
        let mrs = &mut *cx.mrs;
        let (wqe, offset) = match self.in_progress {
            InProgress::Send { wr, offset } => (RecvWqe::new(wr, WqeData::One), offset),
            InProgress::SendList {
                wr_id,
                slot,
                n,
                length,
                offset,
            } => (
                RecvWqe::new(
                    RecvWr {
                        wr_id,
                        sge: super::wqe::Sge {
                            lkey: 0,
                            addr: 0,
                            length,
                        },
                    },
                    WqeData::List { slot, n },
                ),
                offset,
            ),
            // check_resource saw a posted receive.
            _ => (
                self.take_recv(cx.srq.as_deref_mut(), cx.sgl.as_deref_mut())
                    .ok_or(RespError::ReceiverNotReady)?,
                0,
            ),
        };
        let wr = wqe.wr;
        // The receive's length is its SGEs' total (rxe send_data_in:
        // -ENOSPC when the message is longer).
        let end = offset as usize + payload.len();
        if end > wr.sge.length as usize {
            return Err(RespError::RecvTooShort {
                wr,
                byte_len: end as u32,
            });
        }
        let placed = payload.is_empty()
            || match wqe.data() {
                WqeData::One => mrs
                    .write(
                        pd,
                        wr.sge.lkey,
                        wr.sge.addr.wrapping_add(u64::from(offset)),
                        payload,
                        Access::LOCAL_WRITE,
                    )
                    .is_ok(),
                // Scattered across the list, each piece checked as one
                // SGE is (rxe copy_data).
                WqeData::List { slot, n } => cx
                    .sgl
                    .as_deref()
                    .is_some_and(|s| scatter(mrs, pd, s.recv_list(slot, n), offset, payload)),
                WqeData::Inline { .. } => false,
            };
        if !placed {
            return Err(RespError::MalformedWqe { wr });
        }
        if !last {
            self.in_progress = match wqe.data() {
                WqeData::List { slot, n } => InProgress::SendList {
                    wr_id: wr.wr_id,
                    slot,
                    n,
                    length: wr.sge.length,
                    offset: end as u32,
                },
                _ => InProgress::Send {
                    wr,
                    offset: end as u32,
                },
            };
            return Ok(None);
        }
        self.in_progress = InProgress::None;
        // SEND with invalidate: after the data, the window of the IETH's
        // R_Key is invalidated (rxe execute -> invalidate_rkey ->
        // rxe_invalidate_mw): a type 2 window bound through this QP
        // (IBA o10-37.2.26 for type 1; rxe does not compare the QP).
        if let Some(rkey) = inv {
            if mrs.invalidate_window(qp, rkey, true).is_err() {
                return Err(RespError::InvalidateRkey {
                    wr,
                    byte_len: end as u32,
                });
            }
        }
        self.msn = (self.msn + 1) & Psn::MASK;
        Ok(Some(WorkCompletion {
            invalidated_rkey: inv,
            ..recv_wc(wr, qpn, WcStatus::Success, end as u32, imm)
        }))
    }

    /// Execute a WRITE packet (rxe execute + write_data_in): place the
    /// payload where [`Self::check_rkey_write`] said; the LAST/ONLY packet
    /// must complete the RETH's length, counts a message (MSN) and, with
    /// immediate, consumes a receive and returns its completion.
    ///
    /// The length of a LAST/ONLY packet is checked after placing (rxe
    /// checks it before): the bytes lie inside the range the R_Key check
    /// allowed, so nothing lands where the peer may not write.
    #[inline(always)]
    pub(super) fn execute_write(
        &mut self,
        t: WriteTarget<'_>,
        last: bool,
        imm: Option<u32>,
        payload: &[u8],
        qpn: u32,
        srq: Option<&mut Srq>,
    ) -> Result<Option<WorkCompletion>, RespError> {
        match t.place {
            Placement::Checked(dst) => dst.copy_from_slice(payload),
            Placement::Region(..) if payload.is_empty() => {}
            Placement::Region(mrs, qp) => mrs
                .write_remote(
                    qp,
                    t.rkey,
                    t.va.wrapping_add(u64::from(t.offset)),
                    payload,
                    Access::REMOTE_WRITE,
                )
                .map_err(|_| RespError::RkeyViolation)?,
        }
        // check_rkey_write bounded it by the RETH's u32 length.
        let end = t.offset + payload.len() as u32;
        if !last {
            self.in_progress = InProgress::Write {
                va: t.va,
                rkey: t.rkey,
                total: t.total,
                offset: end,
            };
            return Ok(None);
        }
        self.in_progress = InProgress::None;
        if end != t.total {
            return Err(RespError::Length);
        }
        self.msn = (self.msn + 1) & Psn::MASK;
        if imm.is_none() {
            return Ok(None);
        }
        // check_resource saw a posted receive.
        // Only its wr_id is used: no list to keep.
        Ok(self.take_recv(srq, None).map(|w| WorkCompletion {
            opcode: WcOpcode::RecvRdmaWithImm,
            ..recv_wc(w.wr, qpn, WcStatus::Success, t.total, imm)
        }))
    }

    /// Execute a READ (rxe execute + read_reply): the MSN counts it when
    /// it is accepted (IBTA C9-148, as rxe); its response packets are
    /// queued behind everything queued, and it consumes one PSN per
    /// response packet.
    #[inline(always)]
    fn execute_read(&mut self, psn: Psn, reth: &RethRepr, mtu: u32) {
        let npkts = packets_for(reth.dma_len, mtu);
        self.save_resource(Resource::Read {
            first: psn,
            npkts,
            va: reth.va,
            rkey: reth.rkey,
            len: reth.dma_len,
        });
        self.msn = (self.msn + 1) & Psn::MASK;
        self.push(Answer::read(psn, reth, self.msn));
        self.advance(psn.add(npkts));
    }

    /// Check R_Key (of a region of the QP's PD, or a window that admits
    /// the QP `qp`), range, rights and
    /// alignment of an atomic and execute it, in one lookup (rxe
    /// check_rkey + atomic_reply): the original value is saved for a
    /// duplicate's replay and answered in an atomic ACK.
    #[inline(always)]
    fn execute_atomic(
        &mut self,
        psn: Psn,
        eth: &AtomicEthRepr,
        compare: bool,
        mrs: &mut MrTable,
        qp: QpScope,
    ) -> Result<(), RespError> {
        let compare = compare.then_some(eth.compare);
        let orig = mrs
            .atomic_remote(qp, eth.rkey, eth.va, compare, eth.swap_add)
            .map_err(|e| match e {
                AccessError::Misaligned => RespError::MisalignedAtomic,
                AccessError::UnknownKey | AccessError::OutOfBounds | AccessError::NotPermitted => {
                    RespError::RkeyViolation
                }
            })?;
        self.save_resource(Resource::Atomic { psn, orig });
        self.msn = (self.msn + 1) & Psn::MASK;
        self.push(Answer::AtomicAck {
            psn,
            orig,
            msn: self.msn,
        });
        self.advance(psn.add(1));
        Ok(())
    }

    /// Execute an ATOMIC WRITE (rxe check_rkey + `atomic_write_reply`):
    /// the R_Key (of a region of the QP's PD, or a window that admits the
    /// QP `qp`) with REMOTE_WRITE over the 8 bytes at the RETH's address,
    /// then the alignment (rxe `rxe_mr_do_atomic_write`: misaligned is
    /// RESPST_ERR_MISALIGNED_ATOMIC, NAK invalid request), then one 8-byte
    /// store of the payload; a responder resource is taken (rxe
    /// `rxe_prepare_res`) so a duplicate is answered without writing
    /// again, MSN counts a message, and the answer is a READ RESPONSE
    /// ONLY without payload. [`check_length`] saw 8 bytes of payload and
    /// a RETH length of 8.
    #[inline(never)]
    fn execute_atomic_write(
        &mut self,
        psn: Psn,
        reth: &RethRepr,
        payload: &[u8],
        mrs: &mut MrTable,
        qp: QpScope,
    ) -> Result<(), RespError> {
        let value: [u8; 8] = payload.try_into().map_err(|_| RespError::Length)?;
        mrs.atomic_write_remote(qp, reth.rkey, reth.va, value)
            .map_err(|e| match e {
                AccessError::Misaligned => RespError::MisalignedAtomic,
                AccessError::UnknownKey | AccessError::OutOfBounds | AccessError::NotPermitted => {
                    RespError::RkeyViolation
                }
            })?;
        self.save_resource(Resource::AtomicWrite { psn });
        self.msn = (self.msn + 1) & Psn::MASK;
        self.push(Answer::AtomicWriteAck { psn, msn: self.msn });
        self.advance(psn.add(1));
        Ok(())
    }

    /// The receive a new message consumes: the head of the QP's receive
    /// queue, or of its SRQ (rxe `get_srq_wqe`). An SRQ receive's SGE
    /// list is copied into the QP's receive arena `sgl` (one message at
    /// a time takes one: `rc/srq.rs`); without room there (a QP made with
    /// fewer receive SGEs than the SRQ's, or for a WRITE with immediate,
    /// which places nothing) its list stays unreadable, and a SEND into it
    /// completes as a malformed WQE, never writing.
    #[inline(always)]
    fn take_recv(&mut self, srq: Option<&mut Srq>, sgl: Option<&mut QpSgl>) -> Option<RecvWqe> {
        let Some(s) = srq else {
            return self.rq.pop_front();
        };
        let (w, list) = s.take()?;
        Some(match (w.data(), sgl) {
            (WqeData::List { .. }, Some(sgl)) if list.len() as u32 <= sgl.caps().max_recv_sge => {
                RecvWqe::new(w.wr, sgl.put_recv(list))
            }
            (WqeData::List { .. }, _) => RecvWqe::new(
                w.wr,
                WqeData::List {
                    slot: u32::MAX,
                    n: 0,
                },
            ),
            _ => w,
        })
    }

    /// An in-order request executed: expect `next`, and the next gap gets
    /// its NAK again.
    #[inline(always)]
    pub(super) fn advance(&mut self, next: Psn) {
        self.e_psn = next;
        self.nak_sent = false;
    }

    /// Why a request stopped, turned into the answer, the QP's state
    /// change and the completion: the one place that decides them (rxe
    /// `rxe_responder`'s error states; the classes are IBTA's as rxe
    /// labels them). `Err(Fatal)`: the QP goes to the error state, which
    /// flushes what is posted (a SEND in progress completes as flushed).
    #[inline(never)]
    #[cold]
    fn answer_error(
        &mut self,
        e: RespError,
        frame: &RoceFrameView<'_>,
        cx: &mut RxContext<'_>,
    ) -> Result<(), Fatal> {
        let counters = &mut *cx.counters;
        match e {
            // Class B: one NAK PSN sequence error per gap (rxe
            // sent_psn_nak), then silence until the gap closes; nothing
            // else changes.
            RespError::OutOfSequence => {
                counters.rest().out_of_seq_request += 1;
                if !self.nak_sent && self.queued() < self.out_cap as usize {
                    self.push(Answer::Ack {
                        psn: self.e_psn,
                        syndrome: Syndrome::Nak(nak_code::PSN_SEQUENCE_ERROR),
                        msn: self.msn,
                    });
                    self.nak_sent = true;
                    counters.rest().naks_sent += 1;
                }
                Ok(())
            }
            RespError::Duplicate => {
                counters.rest().duplicate_request += 1;
                self.duplicate(frame, Psn::new(frame.psn()), cx);
                Ok(())
            }
            // Dropped unexecuted and unanswered: the requester retransmits.
            RespError::Busy => {
                counters.rest().dropped_busy += 1;
                Ok(())
            }
            // Class B: RNR NAK, nothing executed, the QP stays.
            RespError::ReceiverNotReady => {
                if let Some(s) = cx.srq.as_deref_mut() {
                    s.note_rnr();
                }
                self.rnr_nak(cx.attr, counters);
                Ok(())
            }
            // Class C, an access violation: NAK remote access error, QP
            // to error; nothing executed. The QP's rights are access rights
            // as a region's are, and the requester sees the same status as
            // for a region without the right (IBV_WC_REM_ACCESS_ERR). rxe
            // classes it as an unsupported opcode (check_op_valid) and
            // NAKs invalid request instead.
            RespError::QpAccessViolation => {
                counters.rest().qp_access_violation += 1;
                Err(self.nak_fatal(nak_code::REMOTE_ACCESS_ERROR, counters))
            }
            // Class C: NAK invalid request, QP to error.
            RespError::OpSequence
            | RespError::Unsupported
            | RespError::Malformed
            | RespError::Length
            | RespError::MisalignedAtomic => {
                Err(self.nak_fatal(nak_code::INVALID_REQUEST, counters))
            }
            // Class C: NAK remote access error, QP to error; nothing was
            // written.
            RespError::RkeyViolation => {
                Err(self.nak_fatal(nak_code::REMOTE_ACCESS_ERROR, counters))
            }
            // The message does not fit its receive: the receive completes
            // with a local length error, NAK invalid request, QP to error.
            RespError::RecvTooShort { wr, byte_len } => {
                let wc = recv_wc(wr, cx.sink.qpn, WcStatus::LocalLengthError, byte_len, None);
                cx.sink.push(wc, counters);
                self.in_progress = InProgress::None;
                Err(self.nak_fatal(nak_code::INVALID_REQUEST, counters))
            }
            // Class A: the receive's buffer refused the bytes (rxe_resp.c
            // `send_data_in`: `copy_data` failed other than -ENOSPC, i.e.
            // `lookup_mr` found no region of the key in the QP's PD with
            // LOCAL_WRITE, or `mr_check_range` refused the range:
            // `RESPST_ERR_MALFORMED_WQE` -> `do_class_ac_error(qp,
            // AETH_NAK_REM_OP_ERR, IB_WC_LOC_QP_OP_ERR)`): it completes
            // with a local QP operation error, NAK remote operational
            // error (the requester's request completes with a remote
            // operational error), QP to error.
            RespError::MalformedWqe { wr } => {
                let wc = recv_wc(wr, cx.sink.qpn, WcStatus::LocalQpOperationError, 0, None);
                cx.sink.push(wc, counters);
                self.in_progress = InProgress::None;
                Err(self.nak_fatal(nak_code::REMOTE_OPERATIONAL_ERROR, counters))
            }
            // Class J (rxe RESPST_ERR_INVALIDATE_RKEY): the receive
            // completes with a remote invalid request error and the QP
            // goes to error. rxe then ACKs the packet as if it had
            // succeeded; here the requester is told: NAK invalid request
            // (its SEND completes with a remote invalid request error).
            RespError::InvalidateRkey { wr, byte_len } => {
                let wc = recv_wc(
                    wr,
                    cx.sink.qpn,
                    WcStatus::RemoteInvalidRequest,
                    byte_len,
                    None,
                );
                cx.sink.push(wc, counters);
                Err(self.nak_fatal(nak_code::INVALID_REQUEST, counters))
            }
        }
    }

    /// RNR NAK for the current ePSN (nothing executed, ePSN unchanged).
    fn rnr_nak(&mut self, attr: &QpAttr, counters: &mut QpCounters) {
        counters.rest().send_rnr_err += 1;
        // The packet is in order (a retry after an earlier RNR NAK too), so
        // it always gets its RNR NAK; the rest of its burst arrives out of
        // sequence and stays silent (nak_sent).
        self.push(Answer::Ack {
            psn: self.e_psn,
            syndrome: Syndrome::RnrNak {
                timer: attr.min_rnr_timer & 0x1F,
            },
            msn: self.msn,
        });
        self.nak_sent = true;
    }

    /// Keep `res` as a responder resource, in place of the oldest once
    /// `max_dest_rd_atomic` are kept (rxe `prepare_next_resource`).
    fn save_resource(&mut self, res: Resource) {
        let cap = self.res_cap;
        if self.resources.len() < cap as usize {
            self.resources.push(res);
        } else {
            self.resources[(self.res_next % cap) as usize] = res;
            self.res_next = (self.res_next + 1) % cap;
        }
    }

    /// The responder resource holding `psn` (rxe `find_resource`).
    fn find_resource(&self, psn: Psn) -> Option<Resource> {
        self.resources.iter().copied().find(|r| r.holds(psn))
    }

    /// A request with PSN before ePSN (rxe `duplicate_request`; IBTA
    /// C9-105 for SEND/WRITE): a SEND or
    /// WRITE is re-ACKed, never re-executed; a READ or atomic is answered
    /// again only from a responder resource that holds its PSN, as rxe
    /// does ("Class D error, drop the request" otherwise), and only while
    /// a READ/atomic slot is free. Every drop is counted.
    fn duplicate(&mut self, frame: &RoceFrameView<'_>, psn: Psn, cx: &mut RxContext<'_>) {
        let qp = QpScope {
            pd: cx.pd,
            qpn: cx.sink.qpn,
        };
        let (attr, mrs, counters) = (cx.attr, &*cx.mrs, &mut *cx.counters);
        if self.queued() >= self.out_cap as usize {
            counters.rest().dropped_busy += 1;
            return;
        }
        let op = frame.opcode();
        if !matches!(
            op,
            Opcode::ReadRequest | Opcode::CompareSwap | Opcode::FetchAdd | Opcode::AtomicWrite
        ) {
            // SEND/WRITE: re-ACK what we have, never re-execute (C9-105).
            if frame.ack_req() {
                self.ack(self.e_psn.sub(1));
            }
            return;
        }
        if !self.rd_atomic_slot_free(attr) {
            counters.rest().dropped_busy += 1;
            return;
        }
        let answer = match (self.find_resource(psn), frame.reth()) {
            // A READ again, or the tail of it (a requester resuming after
            // a lost response): the same R_Key, a range inside the one
            // read, and response PSNs inside the ones it took (rxe checks
            // key and range; the PSN span keeps the answer behind ePSN).
            (
                Some(Resource::Read {
                    first,
                    npkts,
                    va,
                    rkey,
                    len,
                }),
                Some(reth),
            ) if op == Opcode::ReadRequest
                && reth.rkey == rkey
                && reth.va >= va
                && (reth.va - va)
                    .checked_add(u64::from(reth.dma_len))
                    .is_some_and(|end| end <= u64::from(len))
                && psn.diff(first) as u64
                    + u64::from(packets_for(reth.dma_len, attr.path_mtu.bytes()))
                    <= u64::from(npkts)
                // The region may have gone since (rxe holds a reference).
                && reth_access_allowed(mrs, qp, &reth, Access::REMOTE_READ) =>
            {
                Answer::read(psn, &reth, self.msn)
            }
            // Never write an ATOMIC WRITE twice: answer it again from its
            // resource (rxe duplicate_request: `res->replay`, and
            // atomic_write_reply returns at once to acknowledge).
            (Some(Resource::AtomicWrite { .. }), _) if op == Opcode::AtomicWrite => {
                Answer::AtomicWriteAck { psn, msn: self.msn }
            }
            // Never re-execute an atomic: replay the saved result.
            (Some(Resource::Atomic { orig, .. }), _)
                if matches!(op, Opcode::CompareSwap | Opcode::FetchAdd) =>
            {
                Answer::AtomicAck {
                    psn,
                    orig,
                    msn: self.msn,
                }
            }
            _ => {
                counters.rest().dropped_duplicate_rd_atomic += 1;
                return;
            }
        };
        self.push(answer);
    }

    /// Emit the next answer into `buf`. Returns the frame length, or `None`
    /// when nothing can be sent now. `Err(Fatal)` when a READ source became
    /// inaccessible (the NAK is queued in place of the response).
    pub(crate) fn poll_transmit(
        &mut self,
        cx: &mut TxContext<'_>,
        buf: &mut [u8],
    ) -> Result<Option<usize>, Fatal> {
        let (now, attr, tpl, mrs) = (cx.now, cx.attr, cx.tpl, cx.mrs);
        let qp = QpScope {
            pd: cx.pd,
            qpn: cx.qpn,
        };
        let (cc, counters) = (&mut *cx.cc, &mut *cx.counters);
        // The pending ACK goes once `out` is empty (it is behind it).
        let (answer, pending) = match self.out.front() {
            Some(a) => (*a, false),
            None => match self.ack_pending {
                Some((psn, msn)) => (
                    Answer::Ack {
                        psn,
                        syndrome: Syndrome::ACK_UNLIMITED,
                        msn,
                    },
                    true,
                ),
                None => return Ok(None),
            },
        };
        let aeth = |syndrome: Syndrome, msn: u32| AethRepr {
            syndrome: syndrome.to_u8(),
            msn: msn & Psn::MASK,
        };
        match answer {
            Answer::Ack {
                psn,
                syndrome: s,
                msn,
            } => {
                let bth = tpl.bth(Opcode::Acknowledge, psn, false);
                let a = aeth(s, msn);
                let n = match emit_templated(
                    cx.copy_crc,
                    &tpl.wire,
                    &bth,
                    None,
                    None,
                    Some(&a),
                    &[],
                    buf,
                ) {
                    Ok(n) => n,
                    Err(_) => {
                        counters.rest().tx_buffer_too_small += 1;
                        return Ok(None);
                    }
                };
                if pending {
                    self.ack_pending = None;
                } else {
                    self.out.pop_front();
                }
                counters.sent_pkts += 1;
                if matches!(s, Syndrome::Ack { .. }) {
                    counters.acks_sent += 1;
                }
                Ok(Some(n))
            }
            Answer::AtomicWriteAck { psn, msn } => {
                let bth = tpl.bth(Opcode::ReadRespOnly, psn, false);
                let a = aeth(Syndrome::ACK_UNLIMITED, msn);
                let n = match emit_templated(
                    cx.copy_crc,
                    &tpl.wire,
                    &bth,
                    None,
                    None,
                    Some(&a),
                    &[],
                    buf,
                ) {
                    Ok(n) => n,
                    Err(_) => {
                        counters.rest().tx_buffer_too_small += 1;
                        return Ok(None);
                    }
                };
                self.out.pop_front();
                counters.sent_pkts += 1;
                Ok(Some(n))
            }
            Answer::AtomicAck { psn, orig, msn } => {
                let mut h = tpl.headers(Opcode::AtomicAcknowledge, psn, false);
                h.aeth = Some(aeth(Syndrome::ACK_UNLIMITED, msn));
                h.atomic_ack_eth = Some(AtomicAckEthRepr { orig });
                let n = match emit_frame(&h, &[], buf) {
                    Ok(n) => n,
                    Err(_) => {
                        counters.rest().tx_buffer_too_small += 1;
                        return Ok(None);
                    }
                };
                self.out.pop_front();
                counters.sent_pkts += 1;
                Ok(Some(n))
            }
            Answer::Read {
                psn,
                va,
                rkey,
                remaining,
                first,
                msn,
            } => {
                let mtu = attr.path_mtu.bytes();
                let len = remaining.min(mtu);
                let last = remaining <= mtu;
                let opcode = match (first, last) {
                    (true, true) => Opcode::ReadRespOnly,
                    (true, false) => Opcode::ReadRespFirst,
                    (false, false) => Opcode::ReadRespMiddle,
                    (false, true) => Opcode::ReadRespLast,
                };
                let bth = tpl.bth(opcode, psn, false);
                let a =
                    (opcode != Opcode::ReadRespMiddle).then(|| aeth(Syndrome::ACK_UNLIMITED, msn));
                let flen = tpl.wire.frame_len(opcode, len as usize);
                if flen > buf.len() {
                    counters.rest().tx_buffer_too_small += 1;
                    return Ok(None);
                }
                if !cc.may_send(now, flen) {
                    return Ok(None);
                }
                let payload: &[u8] = if len == 0 {
                    &[]
                } else {
                    match mrs.slice_remote(qp, rkey, va, len as usize, Access::REMOTE_READ) {
                        Ok(p) => p,
                        Err(_) => {
                            // The region went away (or to another PD)
                            // under an accepted READ.
                            self.out.clear();
                            self.ack_pending = None;
                            self.out.push_back(Answer::Ack {
                                psn,
                                syndrome: Syndrome::Nak(nak_code::REMOTE_ACCESS_ERROR),
                                msn,
                            });
                            counters.rest().naks_sent += 1;
                            return Err(Fatal);
                        }
                    }
                };
                let n = match emit_templated(
                    cx.copy_crc,
                    &tpl.wire,
                    &bth,
                    None,
                    None,
                    a.as_ref(),
                    payload,
                    buf,
                ) {
                    Ok(n) => n,
                    Err(_) => {
                        counters.rest().tx_buffer_too_small += 1;
                        return Ok(None);
                    }
                };
                cc.on_sent(now, n);
                counters.sent_pkts += 1;
                if last {
                    self.out.pop_front();
                } else if let Some(Answer::Read {
                    psn: p,
                    va: v,
                    remaining: r,
                    first: f,
                    ..
                }) = self.out.front_mut()
                {
                    *p = psn.add(1);
                    *v = va.wrapping_add(u64::from(len));
                    *r = remaining - len;
                    *f = false;
                }
                Ok(Some(n))
            }
        }
    }

    /// Flush posted receives (QP to error): each completes `Flushed`.
    pub(crate) fn flush(&mut self, sink: &mut CompletionSink<'_>, counters: &mut QpCounters) {
        match self.in_progress {
            InProgress::Send { wr, .. } => {
                sink.push(recv_wc(wr, sink.qpn, WcStatus::Flushed, 0, None), counters);
            }
            InProgress::SendList { wr_id, .. } => {
                let wr = RecvWr {
                    wr_id,
                    sge: Default::default(),
                };
                sink.push(recv_wc(wr, sink.qpn, WcStatus::Flushed, 0, None), counters);
            }
            _ => {}
        }
        self.in_progress = InProgress::None;
        while let Some(w) = self.rq.pop_front() {
            sink.push(
                recv_wc(w.wr, sink.qpn, WcStatus::Flushed, 0, None),
                counters,
            );
        }
        // Keep only NAKs already queued: they tell the peer why we failed.
        self.ack_pending = None;
        self.out.retain(|a| {
            matches!(
                a,
                Answer::Ack {
                    syndrome: Syndrome::Nak(_),
                    ..
                }
            )
        });
    }
}

pub(super) fn recv_wc(
    wr: RecvWr,
    qpn: u32,
    status: WcStatus,
    byte_len: u32,
    imm: Option<u32>,
) -> WorkCompletion {
    WorkCompletion {
        wr_id: wr.wr_id,
        qpn,
        status,
        opcode: WcOpcode::Recv,
        byte_len,
        imm,
        invalidated_rkey: None,
        ud: None,
    }
}

/// Check the QP's access flags (rxe check_op_valid, for RC; hfi1 and qib
/// the same): an RDMA WRITE packet (every packet of the message, with
/// immediate too) needs REMOTE_WRITE in the QP's `qp_access_flags`, a
/// READ REMOTE_READ, an atomic REMOTE_ATOMIC, whatever the region named
/// allows; a SEND needs none. As in rxe this comes before the resource,
/// length and R_Key checks, so a zero-length WRITE or READ is refused too,
/// and a WRITE with immediate is refused rather than RNR NAKed when no
/// receive is posted.
#[inline(always)]
pub(super) fn check_op_valid(req: &Request, access: Access) -> Result<(), RespError> {
    let need = match req {
        Request::Send { .. } => return Ok(()),
        Request::Write { .. } => Access::REMOTE_WRITE,
        Request::Read(_) => Access::REMOTE_READ,
        Request::Atomic { .. } => Access::REMOTE_ATOMIC,
        // rxe check_qp_attr_access: RXE_ATOMIC_WRITE_MASK needs
        // IB_ACCESS_REMOTE_WRITE.
        Request::AtomicWrite(_) => Access::REMOTE_WRITE,
    };
    if !access.contains(need) {
        return Err(RespError::QpAccessViolation);
    }
    Ok(())
}

/// Check length (rxe check_length; `docs/wire-format.md`, "RC opcodes"):
/// FIRST and MIDDLE packets carry exactly the path MTU, LAST 1..=MTU bytes,
/// ONLY 0..=MTU; READ requests and atomics carry none, and a READ asks for
/// at most [`MAX_MESSAGE_LEN`] bytes (rxe: 2^31).
#[inline(always)]
pub(super) fn check_length(req: &Request, len: usize, mtu: u32) -> Result<(), RespError> {
    let mtu = mtu as usize;
    let ok = match *req {
        Request::Send { first, last, .. } => packet_len_ok(first, last, len, mtu),
        Request::Write { reth, last, .. } => packet_len_ok(reth.is_some(), last, len, mtu),
        Request::Read(reth) => len == 0 && reth.dma_len <= MAX_MESSAGE_LEN,
        Request::Atomic { .. } => len == 0,
        // Exactly 8 bytes, and a RETH that says 8 (rxe check_rkey: the
        // payload must equal `resid`, the RETH's length; rxe rejects a
        // non-8-byte ATOMIC WRITE).
        Request::AtomicWrite(reth) => len == 8 && reth.dma_len == 8,
    };
    if !ok {
        return Err(RespError::Length);
    }
    Ok(())
}

/// The payload length rule for the packet that is the first and/or the
/// last of its message.
#[inline(always)]
fn packet_len_ok(first: bool, last: bool, len: usize, mtu: usize) -> bool {
    match (first, last) {
        (_, false) => len == mtu,
        (false, true) => (1..=mtu).contains(&len),
        (true, true) => len <= mtu,
    }
}

/// Check R_Key, range and rights of a READ (rxe check_rkey): REMOTE_READ
/// over the RETH's whole range, in a region of the QP's PD or a window
/// that admits the QP `qp`.
#[inline(always)]
fn check_rkey_read(reth: &RethRepr, mrs: &MrTable, qp: QpScope) -> Result<(), RespError> {
    if !reth_access_allowed(mrs, qp, reth, Access::REMOTE_READ) {
        return Err(RespError::RkeyViolation);
    }
    Ok(())
}

/// Whether the RETH's R_Key (of a region of the QP's PD, or a window
/// that admits the QP `qp`), range and rights allow `need`. A zero-length
/// WRITE or READ does not validate the R_Key (IBTA C9-88; rxe the same).
fn reth_access_allowed(mrs: &MrTable, qp: QpScope, reth: &RethRepr, need: Access) -> bool {
    reth.dma_len == 0
        || mrs
            .check_remote(qp, reth.rkey, reth.va, u64::from(reth.dma_len), need)
            .is_ok()
}
