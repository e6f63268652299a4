//! Responder: executes incoming requests in PSN order and answers them.
//!
//! Rules (roce-v2-notes.md, "Responder"; reference: Linux rxe `rxe_resp.c`):
//! - expects ePSN; in order: execute, advance ePSN, ACK when AckReq is set,
//!   coalesced (one queued ACK is updated instead of queueing another);
//! - out of sequence (PSN > ePSN): one NAK PSN sequence error, then silent
//!   until an in-order packet arrives (rxe's `sent_psn_nak`);
//! - duplicate (PSN < ePSN): SEND/WRITE are not re-executed, only re-ACKed;
//!   a duplicate READ is re-executed from memory; a duplicate atomic replays
//!   the saved result, never re-executes;
//! - protection: unknown R_Key, range outside the region, or missing rights
//!   -> NAK remote access error and the QP goes to error; nothing is written
//!   outside a registered region (every access goes through `MrTable`);
//! - a SEND (or WRITE with immediate) that finds no posted receive gets an
//!   RNR NAK, never a silent drop;
//! - MSN counts completed inbound messages (24-bit).
//!
//! Answers leave in PSN order through one queue: NAKs, READ responses and
//! atomic ACKs in `out`, then at most one coalesced ACK (`ack_pending`)
//! logically behind them, so an ACK can never overtake a READ response.
//! Keeping the coalesced ACK out of the `VecDeque` makes the common case
//! (an in-order packet with AckReq) one store.

use std::collections::VecDeque;

use super::attr::QpAttr;
use super::completer::{syndrome, Fatal};
use super::congestion::QpCongestion;
use super::counters::Counters;
use super::cq::Cq;
use super::frame::FrameTemplate;
use super::mr::{Access, AccessError, MrTable};
use super::psn::Psn;
use super::requester::packets_for;
use super::wqe::{RecvWr, WcOpcode, WcStatus, WorkCompletion};
use crate::time::Instant;
use crate::wire::{emit_frame, emit_templated, AtomicAckEthRepr, Opcode, RethRepr, RoceFrameView};

/// One answer waiting to be sent, in PSN order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Answer {
    /// ACK, RNR NAK or NAK (the syndrome says which) for `psn`.
    Ack { psn: Psn, syndrome: u8, msn: u32 },
    /// Atomic ACK carrying the original value.
    AtomicAck { psn: Psn, orig: u64, msn: u32 },
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

/// A multi-packet message being received.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum InProgress {
    None,
    Send {
        wr: RecvWr,
        offset: u32,
    },
    Write {
        va: u64,
        rkey: u32,
        total: u32,
        offset: u32,
    },
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
    pub(crate) rq: VecDeque<RecvWr>,
    pub(crate) max_recv_wr: usize,
    in_progress: InProgress,
    pub(crate) out: VecDeque<Answer>,
    /// The coalesced ACK (PSN, MSN), queued after everything in `out`
    /// (notes "Responder": one ACK may cover many packets). Every push to
    /// `out` moves it into `out` first, so the order is kept.
    ack_pending: Option<(Psn, u32)>,
    /// Most answers queued (`out` plus the pending ACK).
    out_cap: usize,
    /// Saved atomic results for replay: (PSN, original value), a ring.
    atomic_replay: Vec<(Psn, u64)>,
    atomic_next: usize,
}

impl Responder {
    /// A responder with `max_recv_wr` receive slots.
    pub fn new(max_recv_wr: usize) -> Responder {
        Responder {
            e_psn: Psn::new(0),
            msn: 0,
            nak_sent: false,
            rq: VecDeque::with_capacity(max_recv_wr),
            max_recv_wr,
            in_progress: InProgress::None,
            out: VecDeque::new(),
            ack_pending: None,
            out_cap: 0,
            atomic_replay: Vec::new(),
            atomic_next: 0,
        }
    }

    /// Start expecting `rq_psn` (INIT -> RTR); sizes the answer queue from
    /// `max_dest_rd_atomic`.
    pub(crate) fn start(&mut self, rq_psn: Psn, attr: &QpAttr) {
        self.e_psn = rq_psn;
        self.msn = 0;
        self.nak_sent = false;
        self.in_progress = InProgress::None;
        let rd = usize::from(attr.max_dest_rd_atomic.max(1));
        self.out_cap = 2 * rd + 4;
        self.out = VecDeque::with_capacity(self.out_cap + 1);
        self.ack_pending = None;
        self.atomic_replay = Vec::with_capacity(rd);
        self.atomic_next = 0;
    }

    /// Queue a receive. `false` when full.
    pub(crate) fn post_recv(&mut self, wr: RecvWr) -> bool {
        if self.rq.len() >= self.max_recv_wr {
            return false;
        }
        self.rq.push_back(wr);
        true
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
                syndrome: syndrome::ACK,
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
    fn nak_fatal(&mut self, code: u8, counters: &mut Counters) -> Fatal {
        // May exceed out_cap by one: the QP is going to error anyway.
        self.push(Answer::Ack {
            psn: self.e_psn,
            syndrome: code,
            msn: self.msn,
        });
        counters.naks_sent += 1;
        Fatal
    }

    fn complete_recv(cq: &mut Option<&mut Cq>, wc: WorkCompletion, counters: &mut Counters) {
        if let Some(cq) = cq.as_deref_mut() {
            if !cq.push(wc) {
                counters.cq_overflow += 1;
            }
        }
    }

    /// Execute or answer one request packet.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn handle_request(
        &mut self,
        frame: &RoceFrameView<'_>,
        attr: &QpAttr,
        mrs: &mut MrTable,
        recv_cq: &mut Option<&mut Cq>,
        qpn: u32,
        counters: &mut Counters,
    ) -> Result<(), Fatal> {
        let op = frame.opcode();
        let psn = Psn::new(frame.psn());
        let payload = frame.payload();
        let d = psn.diff(self.e_psn);
        if d > 0 {
            // Out of sequence: one NAK per gap (rxe sent_psn_nak).
            counters.out_of_seq_request += 1;
            if !self.nak_sent && self.queued() < self.out_cap {
                self.push(Answer::Ack {
                    psn: self.e_psn,
                    syndrome: syndrome::NAK_PSN_SEQ,
                    msn: self.msn,
                });
                self.nak_sent = true;
                counters.naks_sent += 1;
            }
            return Ok(());
        }
        if d < 0 {
            counters.duplicate_request += 1;
            self.duplicate(frame, psn, attr, mrs, counters);
            return Ok(());
        }
        if self.queued() >= self.out_cap {
            // No room to answer: drop, the requester will retransmit.
            counters.dropped_busy += 1;
            return Ok(());
        }

        // Opcode sequence (rxe check_op_seq): a FIRST opens a message that
        // only MIDDLE/LAST of the same kind may continue.
        let seq_ok = match self.in_progress {
            InProgress::None => matches!(
                op,
                Opcode::SendFirst
                    | Opcode::SendOnly
                    | Opcode::SendOnlyImm
                    | Opcode::WriteFirst
                    | Opcode::WriteOnly
                    | Opcode::WriteOnlyImm
                    | Opcode::ReadRequest
                    | Opcode::CompareSwap
                    | Opcode::FetchAdd
            ),
            InProgress::Send { .. } => matches!(
                op,
                Opcode::SendMiddle | Opcode::SendLast | Opcode::SendLastImm
            ),
            InProgress::Write { .. } => matches!(
                op,
                Opcode::WriteMiddle | Opcode::WriteLast | Opcode::WriteLastImm
            ),
        };
        if !seq_ok {
            return Err(self.nak_fatal(syndrome::NAK_INVALID_REQUEST, counters));
        }
        // Payload length rules (notes, "Segmentation").
        let mtu = attr.path_mtu.bytes() as usize;
        let len_ok = match op {
            Opcode::SendFirst | Opcode::SendMiddle | Opcode::WriteFirst | Opcode::WriteMiddle => {
                payload.len() == mtu
            }
            Opcode::SendLast | Opcode::SendLastImm | Opcode::WriteLast | Opcode::WriteLastImm => {
                (1..=mtu).contains(&payload.len())
            }
            Opcode::SendOnly | Opcode::SendOnlyImm | Opcode::WriteOnly | Opcode::WriteOnlyImm => {
                payload.len() <= mtu
            }
            _ => payload.is_empty(),
        };
        if !len_ok {
            return Err(self.nak_fatal(syndrome::NAK_INVALID_REQUEST, counters));
        }

        match op {
            Opcode::SendFirst
            | Opcode::SendOnly
            | Opcode::SendOnlyImm
            | Opcode::SendMiddle
            | Opcode::SendLast
            | Opcode::SendLastImm => {
                let (wr, offset) = match self.in_progress {
                    InProgress::Send { wr, offset } => (wr, offset),
                    _ => match self.rq.pop_front() {
                        Some(wr) => (wr, 0),
                        None => {
                            self.rnr_nak(attr, counters);
                            return Ok(());
                        }
                    },
                };
                let end = offset as usize + payload.len();
                if end > wr.sge.length as usize {
                    Self::complete_recv(
                        recv_cq,
                        recv_wc(wr, qpn, WcStatus::LocalLengthError, end as u32, None),
                        counters,
                    );
                    self.in_progress = InProgress::None;
                    return Err(self.nak_fatal(syndrome::NAK_INVALID_REQUEST, counters));
                }
                if !payload.is_empty()
                    && mrs
                        .write(
                            wr.sge.lkey,
                            wr.sge.addr.wrapping_add(u64::from(offset)),
                            payload,
                            Access::LOCAL_WRITE,
                        )
                        .is_err()
                {
                    Self::complete_recv(
                        recv_cq,
                        recv_wc(wr, qpn, WcStatus::LocalProtectionError, 0, None),
                        counters,
                    );
                    self.in_progress = InProgress::None;
                    return Err(self.nak_fatal(syndrome::NAK_REMOTE_OPERATIONAL, counters));
                }
                if matches!(
                    op,
                    Opcode::SendLast | Opcode::SendLastImm | Opcode::SendOnly | Opcode::SendOnlyImm
                ) {
                    self.in_progress = InProgress::None;
                    self.msn = (self.msn + 1) & Psn::MASK;
                    let imm = if matches!(op, Opcode::SendLastImm | Opcode::SendOnlyImm) {
                        frame.immdt()
                    } else {
                        None
                    };
                    let mut wc = recv_wc(wr, qpn, WcStatus::Success, end as u32, imm);
                    wc.opcode = WcOpcode::Recv;
                    Self::complete_recv(recv_cq, wc, counters);
                } else {
                    self.in_progress = InProgress::Send {
                        wr,
                        offset: end as u32,
                    };
                }
            }
            Opcode::WriteFirst
            | Opcode::WriteOnly
            | Opcode::WriteOnlyImm
            | Opcode::WriteMiddle
            | Opcode::WriteLast
            | Opcode::WriteLastImm => {
                let with_imm = matches!(op, Opcode::WriteOnlyImm | Opcode::WriteLastImm);
                if with_imm && self.rq.is_empty() {
                    // WRITE with immediate consumes a receive (checked before
                    // placing anything, so the retry finds the same state).
                    self.rnr_nak(attr, counters);
                    return Ok(());
                }
                // `placed`: the first packet's payload is already written
                // (through the same lookup that checked the RETH range).
                let (va, rkey, total, offset, placed) = match self.in_progress {
                    InProgress::Write {
                        va,
                        rkey,
                        total,
                        offset,
                    } => (va, rkey, total, offset, false),
                    _ => {
                        let Some(reth) = frame.reth() else {
                            return Err(self.nak_fatal(syndrome::NAK_INVALID_REQUEST, counters));
                        };
                        if reth.dma_len == 0 {
                            // Zero-length: the R_Key is not validated (IBTA
                            // C9-88; rxe the same), nothing is placed.
                            (reth.va, reth.rkey, 0, 0, false)
                        } else {
                            // Protection (notes "Responder"): key, the whole
                            // RETH range and REMOTE_WRITE checked in one
                            // lookup, which also yields where to place.
                            let Ok(dst) = mrs.slice_mut(
                                reth.rkey,
                                reth.va,
                                reth.dma_len as usize,
                                Access::REMOTE_WRITE,
                            ) else {
                                return Err(self.nak_fatal(syndrome::NAK_REMOTE_ACCESS, counters));
                            };
                            let Some(dst) = dst.get_mut(..payload.len()) else {
                                // More payload than the RETH announced.
                                return Err(self.nak_fatal(syndrome::NAK_INVALID_REQUEST, counters));
                            };
                            dst.copy_from_slice(payload);
                            (reth.va, reth.rkey, reth.dma_len, 0, true)
                        }
                    }
                };
                let end = offset as u64 + payload.len() as u64;
                if end > u64::from(total) {
                    self.in_progress = InProgress::None;
                    return Err(self.nak_fatal(syndrome::NAK_INVALID_REQUEST, counters));
                }
                if !placed && !payload.is_empty() {
                    if let Err(e) = mrs.write(
                        rkey,
                        va.wrapping_add(u64::from(offset)),
                        payload,
                        Access::REMOTE_WRITE,
                    ) {
                        self.in_progress = InProgress::None;
                        let _: AccessError = e;
                        return Err(self.nak_fatal(syndrome::NAK_REMOTE_ACCESS, counters));
                    }
                }
                let end = end as u32;
                if matches!(
                    op,
                    Opcode::WriteLast
                        | Opcode::WriteLastImm
                        | Opcode::WriteOnly
                        | Opcode::WriteOnlyImm
                ) {
                    self.in_progress = InProgress::None;
                    if end != total {
                        return Err(self.nak_fatal(syndrome::NAK_INVALID_REQUEST, counters));
                    }
                    self.msn = (self.msn + 1) & Psn::MASK;
                    if with_imm {
                        if let Some(wr) = self.rq.pop_front() {
                            let mut wc = recv_wc(wr, qpn, WcStatus::Success, total, frame.immdt());
                            wc.opcode = WcOpcode::RecvRdmaWithImm;
                            Self::complete_recv(recv_cq, wc, counters);
                        }
                    }
                } else {
                    self.in_progress = InProgress::Write {
                        va,
                        rkey,
                        total,
                        offset: end,
                    };
                }
            }
            Opcode::ReadRequest => {
                let Some(reth) = frame.reth() else {
                    return Err(self.nak_fatal(syndrome::NAK_INVALID_REQUEST, counters));
                };
                if reth.dma_len > super::requester::MAX_MESSAGE_LEN {
                    return Err(self.nak_fatal(syndrome::NAK_INVALID_REQUEST, counters));
                }
                let reads = self
                    .out
                    .iter()
                    .filter(|a| matches!(a, Answer::Read { .. } | Answer::AtomicAck { .. }))
                    .count();
                if reads >= usize::from(attr.max_dest_rd_atomic) {
                    // All READ/atomic resources busy: drop without executing,
                    // the requester retransmits.
                    counters.dropped_busy += 1;
                    return Ok(());
                }
                if !reth_access_allowed(mrs, &reth, Access::REMOTE_READ) {
                    return Err(self.nak_fatal(syndrome::NAK_REMOTE_ACCESS, counters));
                }
                self.msn = (self.msn + 1) & Psn::MASK;
                self.push(Answer::Read {
                    psn,
                    va: reth.va,
                    rkey: reth.rkey,
                    remaining: reth.dma_len,
                    first: true,
                    msn: self.msn,
                });
                // A READ consumes one PSN per response packet.
                self.e_psn = psn.add(packets_for(reth.dma_len, mtu as u32));
                self.nak_sent = false;
                return Ok(());
            }
            Opcode::CompareSwap | Opcode::FetchAdd => {
                let Some(a) = frame.atomic_eth() else {
                    return Err(self.nak_fatal(syndrome::NAK_INVALID_REQUEST, counters));
                };
                let compare = (op == Opcode::CompareSwap).then_some(a.compare);
                let orig = match mrs.atomic(a.rkey, a.va, compare, a.swap_add) {
                    Ok(v) => v,
                    Err(AccessError::Misaligned) => {
                        return Err(self.nak_fatal(syndrome::NAK_INVALID_REQUEST, counters))
                    }
                    Err(_) => return Err(self.nak_fatal(syndrome::NAK_REMOTE_ACCESS, counters)),
                };
                self.save_atomic(psn, orig);
                self.msn = (self.msn + 1) & Psn::MASK;
                self.push(Answer::AtomicAck {
                    psn,
                    orig,
                    msn: self.msn,
                });
                self.e_psn = psn.add(1);
                self.nak_sent = false;
                return Ok(());
            }
            _ => return Err(self.nak_fatal(syndrome::NAK_INVALID_REQUEST, counters)),
        }
        self.e_psn = psn.add(1);
        self.nak_sent = false;
        if frame.ack_req() {
            self.ack(psn);
        }
        Ok(())
    }

    /// RNR NAK for the current ePSN (nothing executed, ePSN unchanged).
    fn rnr_nak(&mut self, attr: &QpAttr, counters: &mut Counters) {
        counters.send_rnr_err += 1;
        // The packet is in order (a retry after an earlier RNR NAK too), so
        // it always gets its RNR NAK; the rest of its burst arrives out of
        // sequence and stays silent (nak_sent).
        self.push(Answer::Ack {
            psn: self.e_psn,
            syndrome: syndrome::RNR_NAK | (attr.min_rnr_timer & 0x1F),
            msn: self.msn,
        });
        self.nak_sent = true;
    }

    fn save_atomic(&mut self, psn: Psn, orig: u64) {
        let cap = self.atomic_replay.capacity().max(1);
        if self.atomic_replay.len() < cap {
            self.atomic_replay.push((psn, orig));
        } else {
            self.atomic_replay[self.atomic_next % cap] = (psn, orig);
            self.atomic_next = (self.atomic_next + 1) % cap;
        }
    }

    /// A request with PSN before ePSN.
    fn duplicate(
        &mut self,
        frame: &RoceFrameView<'_>,
        psn: Psn,
        attr: &QpAttr,
        mrs: &MrTable,
        counters: &mut Counters,
    ) {
        if self.queued() >= self.out_cap {
            return;
        }
        match frame.opcode() {
            Opcode::ReadRequest => {
                // Re-execute from memory (rxe: duplicate READ re-reads).
                let Some(reth) = frame.reth() else { return };
                let span = packets_for(reth.dma_len, attr.path_mtu.bytes());
                if psn.add(span).after(self.e_psn) {
                    // Claims PSNs we have not reached: not a real duplicate.
                    counters.dropped_malformed += 1;
                    return;
                }
                if !reth_access_allowed(mrs, &reth, Access::REMOTE_READ) {
                    counters.dropped_malformed += 1;
                    return;
                }
                self.push(Answer::Read {
                    psn,
                    va: reth.va,
                    rkey: reth.rkey,
                    remaining: reth.dma_len,
                    first: true,
                    msn: self.msn,
                });
            }
            Opcode::CompareSwap | Opcode::FetchAdd => {
                // Never re-execute: replay the saved result if we still have it.
                if let Some(&(_, orig)) = self.atomic_replay.iter().find(|(p, _)| *p == psn) {
                    self.push(Answer::AtomicAck {
                        psn,
                        orig,
                        msn: self.msn,
                    });
                }
            }
            _ => {
                // SEND/WRITE: re-ACK what we have, never re-execute (C9-105).
                if frame.ack_req() {
                    self.ack(self.e_psn.sub(1));
                }
            }
        }
    }

    /// Emit the next answer into `buf`. Returns the frame length, or `None`
    /// when nothing can be sent now. `Err(Fatal)` when a READ source became
    /// inaccessible (the NAK is queued in place of the response).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn poll_transmit(
        &mut self,
        now: Instant,
        attr: &QpAttr,
        tpl: &FrameTemplate,
        mrs: &MrTable,
        cc: &mut QpCongestion,
        counters: &mut Counters,
        buf: &mut [u8],
    ) -> Result<Option<usize>, Fatal> {
        // The pending ACK goes once `out` is empty (it is behind it).
        let (answer, pending) = match self.out.front() {
            Some(a) => (*a, false),
            None => match self.ack_pending {
                Some((psn, msn)) => (
                    Answer::Ack {
                        psn,
                        syndrome: syndrome::ACK,
                        msn,
                    },
                    true,
                ),
                None => return Ok(None),
            },
        };
        let aeth = |syndrome, msn| crate::wire::AethRepr {
            syndrome,
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
                let n = match emit_templated(&tpl.wire, &bth, None, None, Some(&a), &[], buf) {
                    Ok(n) => n,
                    Err(_) => {
                        counters.tx_buffer_too_small += 1;
                        return Ok(None);
                    }
                };
                if pending {
                    self.ack_pending = None;
                } else {
                    self.out.pop_front();
                }
                counters.sent_pkts += 1;
                if syndrome::kind(s) == 0 {
                    counters.acks_sent += 1;
                }
                Ok(Some(n))
            }
            Answer::AtomicAck { psn, orig, msn } => {
                let mut h = tpl.headers(Opcode::AtomicAcknowledge, psn, false);
                h.aeth = Some(aeth(syndrome::ACK, msn));
                h.atomic_ack_eth = Some(AtomicAckEthRepr { orig });
                let n = match emit_frame(&h, &[], buf) {
                    Ok(n) => n,
                    Err(_) => {
                        counters.tx_buffer_too_small += 1;
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
                let a = (opcode != Opcode::ReadRespMiddle).then(|| aeth(syndrome::ACK, msn));
                let flen = tpl.wire.frame_len(opcode, len as usize);
                if flen > buf.len() {
                    counters.tx_buffer_too_small += 1;
                    return Ok(None);
                }
                if !cc.may_send(now, flen) {
                    return Ok(None);
                }
                let payload: &[u8] = if len == 0 {
                    &[]
                } else {
                    match mrs.slice(rkey, va, len as usize, Access::REMOTE_READ) {
                        Ok(p) => p,
                        Err(_) => {
                            // The region went away under an accepted READ.
                            self.out.clear();
                            self.ack_pending = None;
                            self.out.push_back(Answer::Ack {
                                psn,
                                syndrome: syndrome::NAK_REMOTE_ACCESS,
                                msn,
                            });
                            counters.naks_sent += 1;
                            return Err(Fatal);
                        }
                    }
                };
                let n = match emit_templated(&tpl.wire, &bth, None, None, a.as_ref(), payload, buf)
                {
                    Ok(n) => n,
                    Err(_) => {
                        counters.tx_buffer_too_small += 1;
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
    pub(crate) fn flush(
        &mut self,
        recv_cq: &mut Option<&mut Cq>,
        qpn: u32,
        counters: &mut Counters,
    ) {
        if let InProgress::Send { wr, .. } = self.in_progress {
            Self::complete_recv(
                recv_cq,
                recv_wc(wr, qpn, WcStatus::Flushed, 0, None),
                counters,
            );
        }
        self.in_progress = InProgress::None;
        while let Some(wr) = self.rq.pop_front() {
            Self::complete_recv(
                recv_cq,
                recv_wc(wr, qpn, WcStatus::Flushed, 0, None),
                counters,
            );
        }
        // Keep only NAKs already queued: they tell the peer why we failed.
        self.ack_pending = None;
        self.out
            .retain(|a| matches!(a, Answer::Ack { syndrome: s, .. } if syndrome::kind(*s) == 3));
    }
}

fn recv_wc(
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
    }
}

/// Whether the RETH's R_Key, range and rights allow `need`. A zero-length
/// WRITE or READ does not validate the R_Key (IBTA C9-88; rxe the same).
fn reth_access_allowed(mrs: &MrTable, reth: &RethRepr, need: Access) -> bool {
    reth.dma_len == 0
        || mrs
            .check(reth.rkey, reth.va, u64::from(reth.dma_len), need)
            .is_ok()
}
