//! Requester: turns send work requests into request packets.
//!
//! Rules (`docs/reliable-connection.md`, "Go-back-N"):
//! - segmentation by path MTU (`docs/wire-format.md`, "RC opcodes"):
//!   FIRST/MIDDLE carry exactly PMTU bytes, LAST 1..PMTU, ONLY 0..PMTU; a
//!   READ consumes ceil(len / PMTU) PSNs (at least 1);
//! - AckReq every [`ACK_REQ_EVERY`] packets of long messages (rxe uses 64),
//!   on the packet that fills the outstanding window, and on the last packet
//!   of a message when no other request is queued behind it (the send queue
//!   drains: its completions must not wait). While more requests are queued
//!   behind a message, its last packet asks for an ACK only every
//!   [`ACK_REQ_STREAM`] packets or when a sixteenth of the ACK timeout has
//!   passed since the last AckReq: rxe's rule ("AckReq on the last
//!   packet of each message") relaxed for streams of small
//!   messages, where it made the responder send an ACK for every second or
//!   third packet. The responder still ACKs every AckReq (coalescing), and
//!   every request eventually gets one: the send queue's last message, the
//!   window, or the time bound;
//! - at most [`MAX_OUTSTANDING_PSNS`] PSNs outstanding (rxe's cap of 128), and
//!   at most `max_rd_atomic` READ/atomic requests in flight;
//! - a new message (its first packet never sent before) also waits while
//!   the endpoint's QPs together have their in-flight limit outstanding
//!   and the message does not fit the room left (`EndpointConfig::
//!   max_inflight_packets`, `TxContext::inflight`), once the QP's last
//!   packet asked for an ACK; a message whose next one would not fit asks
//!   for one on its last packet. Retransmissions and the rest of a begun
//!   message never wait;
//! - go-back-N rebuilds packets from the work request and the cursor
//!   (`cur`, `cur_pkt`): nothing is stored per packet. A READ resumed in the
//!   middle is a new READ request for the remaining bytes at the resume PSN.
//!
//! The completer (ACK/NAK/response handling, retries, timers) lives in
//! `completer.rs` as more methods on [`Requester`].

use std::collections::VecDeque;

use super::attr::QpAttr;
use super::context::{InflightRoom, TxContext};
use super::counters::QpCounters;
use super::cq::CompletionSink;
use super::mr::{MrTable, QpScope};
use super::psn::Psn;
use super::sgl::{DataKind, WqeData};
use super::timer::{Timer, TimerTable};
use super::wqe::{SendOp, SendWr, Sge, WcStatus};
use crate::time::Instant;
use crate::wire::{emit_frame, emit_templated, AtomicEthRepr, Opcode, RethRepr};

/// Largest number of PSNs a requester leaves unacknowledged (rxe: 128).
pub const MAX_OUTSTANDING_PSNS: u32 = 128;
/// AckReq at least every this many packets of one message (rxe: 64).
pub const ACK_REQ_EVERY: u32 = 64;
/// While more requests are queued behind a message, its last packet
/// carries AckReq only if this many packets went out since the last AckReq
/// (or the time bound of [`Requester::poll_transmit`] has passed).
pub const ACK_REQ_STREAM: u32 = 16;
/// Largest message (1 GiB): keeps a READ's PSN span far below 2^23.
pub const MAX_MESSAGE_LEN: u32 = 1 << 30;

/// One posted send work request and its progress.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SendWqe {
    pub wr: SendWr,
    /// Where its data is: `wr.local`, or a list or inline bytes in the
    /// QP's arenas (`wr.local.length` is then their total; [`Self::data`]).
    pub kind: DataKind,
    /// PSN of its first packet (assigned at post time: PSNs are contiguous).
    pub first_psn: Psn,
    /// Packets (PSNs) it consumes.
    pub npkts: u32,
    /// READ: response packets received and placed, in order.
    pub resp_pkts: u32,
    /// It failed at the requester, with this status: its local buffer
    /// could not be read when a packet of it was built (the L_Key unknown
    /// or of another PD, the range or rights gone: a local protection
    /// error), or, a local operation, it was refused (a bind: MW bind
    /// error; a LOCAL_INV: local QP operation error). Nothing more of it
    /// or after it is sent, and it completes with that status once every
    /// request before it has completed (rxe: `wqe_state_error`, completed
    /// in order by the completer).
    pub error: Option<WcStatus>,
    /// A local operation (BIND_MW, LOCAL_INV) that the requester has
    /// executed: it completes once every request before it has (rxe:
    /// `wqe_state_done`), and is never executed again, a go-back-N rewind
    /// notwithstanding.
    pub executed: bool,
}

impl SendWqe {
    /// Where its data is (see [`DataKind`]).
    #[inline(always)]
    pub fn data(&self) -> WqeData {
        WqeData::unpack(self.kind, &self.wr.local)
    }

    /// One past its last PSN.
    #[inline]
    pub fn end_psn(&self) -> Psn {
        self.first_psn.add(self.npkts)
    }

    /// `psn` is one of its PSNs.
    #[inline]
    pub fn contains(&self, psn: Psn) -> bool {
        psn.in_window(self.first_psn, self.npkts)
    }
}

/// Packets a message of `len` bytes takes at path MTU `mtu` (at least 1).
#[inline]
pub fn packets_for(len: u32, mtu: u32) -> u32 {
    len.div_ceil(mtu).max(1)
}

/// The local buffer of the request at the cursor cannot be read (see
/// [`Requester::failed_at_cursor`]).
struct LocalBufferFailed;

/// What the requester did in one `poll_transmit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TxOutcome {
    /// Wrote a frame of this many bytes.
    Sent(usize),
    /// Nothing to send now.
    Idle,
    /// The oldest request failed at the requester (its local buffer
    /// cannot be read, or a local operation was refused): it completes
    /// with this status and the QP goes to error.
    Fatal(WcStatus),
}

/// Requester and completer state of one QP (the send queue and its cursor).
#[derive(Debug)]
pub struct Requester {
    pub(crate) wqes: VecDeque<SendWqe>,
    pub(crate) max_wr: usize,
    /// PSN the next posted request gets.
    pub(crate) tail_psn: Psn,
    /// Index in `wqes` of the request being transmitted.
    pub(crate) cur: usize,
    /// Next packet index within `wqes[cur]`.
    pub(crate) cur_pkt: u32,
    /// PSN of the next packet to transmit.
    pub(crate) send_psn: Psn,
    /// One past the highest PSN ever transmitted.
    pub(crate) max_sent_psn: Psn,
    /// Oldest PSN not yet acknowledged.
    pub(crate) acked_psn: Psn,
    /// READ/atomic requests transmitted and not completed.
    pub(crate) rd_atomic_sent: u32,
    /// Packets since the last one with AckReq.
    pub(crate) since_ack_req: u32,
    /// When the last packet with AckReq went out.
    pub(crate) last_ack_req_at: Instant,
    /// Timeout / sequence-error retries left before "retry exceeded".
    pub(crate) retry_left: u8,
    /// RNR retries left (unused when rnr_retry is 7 = infinite).
    pub(crate) rnr_left: u8,
    /// Set when go-back-N rewound to this PSN and nothing progressed since:
    /// a second NAK / gap for the same PSN is stale and must not rewind again.
    pub(crate) rewound_at: Option<Psn>,
    /// Retransmit and RNR timers.
    pub(crate) timers: TimerTable,
    /// The last `poll_transmit` had a packet never sent before ready and
    /// the endpoint's in-flight limit held it back (set here, cleared by
    /// `Qp::poll_transmit` before each call).
    pub(crate) held_by_inflight_limit: bool,
}

impl Requester {
    /// An empty send queue for `max_wr` requests. Its memory grows as
    /// requests are posted (doubling, up to `max_wr`; posts, not packets,
    /// allocate, and only until the queue has once been that deep), so an
    /// idle QP holds no send queue (`docs/architecture.md`, "QP limits").
    pub fn new(max_wr: usize) -> Requester {
        Requester {
            wqes: VecDeque::new(),
            max_wr,
            tail_psn: Psn::new(0),
            cur: 0,
            cur_pkt: 0,
            send_psn: Psn::new(0),
            max_sent_psn: Psn::new(0),
            acked_psn: Psn::new(0),
            rd_atomic_sent: 0,
            since_ack_req: 0,
            last_ack_req_at: Instant::from_nanos(0),
            retry_left: 0,
            rnr_left: 0,
            rewound_at: None,
            timers: TimerTable::default(),
            held_by_inflight_limit: false,
        }
    }

    /// Back to the state of [`Requester::new`] (a QP moved to RESET),
    /// keeping the send queue's memory.
    pub(crate) fn reset(&mut self) {
        let mut wqes = std::mem::take(&mut self.wqes);
        wqes.clear();
        *self = Requester::new(self.max_wr);
        self.wqes = wqes;
    }

    /// Start sending at `sq_psn` with fresh retry budgets (RTR -> RTS).
    pub(crate) fn start(&mut self, sq_psn: Psn, attr: &QpAttr) {
        self.wqes.clear();
        self.tail_psn = sq_psn;
        self.send_psn = sq_psn;
        self.max_sent_psn = sq_psn;
        self.acked_psn = sq_psn;
        self.cur = 0;
        self.cur_pkt = 0;
        self.rd_atomic_sent = 0;
        self.since_ack_req = 0;
        self.rewound_at = None;
        self.timers = TimerTable::default();
        self.reset_budgets(attr);
    }

    /// Refill retry budgets after forward progress.
    #[inline]
    pub(crate) fn reset_budgets(&mut self, attr: &QpAttr) {
        self.retry_left = attr.retry_cnt;
        self.rnr_left = attr.rnr_retry;
    }

    /// Requests posted and not completed.
    pub fn outstanding_wrs(&self) -> usize {
        self.wqes.len()
    }

    /// Whether the send queue holds `max_wr` requests.
    #[inline]
    pub(crate) fn is_full(&self) -> bool {
        self.wqes.len() >= self.max_wr
    }

    /// Queue a request (validated by the caller) whose data `data` says
    /// where it is. `false` when full.
    pub(crate) fn post(&mut self, mut wr: SendWr, data: WqeData, mtu: u32) -> bool {
        if self.is_full() {
            return false;
        }
        let npkts = if wr.opcode.is_atomic() {
            1
        } else if wr.opcode == SendOp::AtomicWrite {
            // One packet, its 8 bytes in the request itself (rxe
            // `wr_atomic_write`: no SGE).
            wr.local = Sge::default();
            1
        } else if wr.opcode.is_local() {
            // A local operation takes no PSN (rxe: no packet).
            0
        } else {
            packets_for(wr.local.length, mtu)
        };
        let first_psn = self.tail_psn;
        self.tail_psn = first_psn.add(npkts);
        let kind = data.pack(&mut wr.local);
        self.wqes.push_back(SendWqe {
            wr,
            kind,
            first_psn,
            npkts,
            resp_pkts: 0,
            error: None,
            executed: false,
        });
        true
    }

    /// Whether there is a request packet to send (ignoring rate limits),
    /// a local operation to execute, or a request that failed at the
    /// requester has become the oldest ([`Self::poll_transmit`] then fails
    /// it).
    pub(crate) fn has_work(&self, attr: &QpAttr) -> bool {
        if self.timers.is_armed(Timer::Rnr) || self.cur >= self.wqes.len() {
            return false;
        }
        let wqe = &self.wqes[self.cur];
        if wqe.error.is_some() {
            return self.cur == 0;
        }
        if wqe.wr.opcode.is_local() {
            return true;
        }
        if self.send_psn.diff(self.acked_psn) >= MAX_OUTSTANDING_PSNS as i32 {
            return false;
        }
        !(wqe.wr.opcode.takes_responder_resource()
            && self.rd_atomic_sent >= u32::from(attr.max_rd_atomic))
    }

    /// Whether the last packet of the current message (`wqes[cur]`) asks
    /// for an ACK: always when no request is queued behind it (or only one
    /// that failed at the requester, or a local operation, which completes
    /// only after this message has); otherwise
    /// every [`ACK_REQ_STREAM`] packets, or once a sixteenth of the ACK
    /// timeout has passed since the last AckReq (a paced, slow stream must
    /// not run into its own retransmit timer).
    #[inline]
    fn last_packet_wants_ack(&self, now: Instant, attr: &QpAttr) -> bool {
        // A request behind that failed is not sent, and a local operation
        // waits for this message's ACK to complete: the queue ends here.
        self.wqes
            .get(self.cur + 1)
            .is_none_or(|n| n.error.is_some() || n.wr.opcode.is_local())
            || self.since_ack_req + 1 >= ACK_REQ_STREAM
            || attr
                .ack_timeout()
                .is_some_and(|t| now.saturating_duration_since(self.last_ack_req_at) >= t / 16)
    }

    /// Packets outstanding, as the endpoint's in-flight limit counts them:
    /// from the oldest unacknowledged PSN up to the highest sent, or to the
    /// end of the message being sent if that is further (a begun message
    /// goes whole, so it holds its room from its first packet on). A READ
    /// counts its response packets; go-back-N resending changes nothing.
    #[inline]
    pub(crate) fn inflight_packets(&self) -> u32 {
        let mut end = self.max_sent_psn;
        if self.cur_pkt > 0 {
            if let Some(w) = self.wqes.get(self.cur) {
                if w.end_psn().after(end) {
                    end = w.end_psn();
                }
            }
        }
        end.diff(self.acked_psn).max(0) as u32
    }

    /// Whether the message at the cursor may start under `room` (true when
    /// there is none, or it has begun).
    #[inline]
    pub(crate) fn next_message_fits(&self, room: InflightRoom) -> bool {
        self.cur_pkt > 0 || self.wqes.get(self.cur).is_none_or(|w| room.admits(w.npkts))
    }

    /// The request at the cursor failed with `status`: its local buffer
    /// cannot be read, or it is a local operation that was refused. The
    /// oldest request fails now ([`TxOutcome::Fatal`]). A later one is
    /// marked and waits, nothing after it sent, until the requests before
    /// it complete (or fail), so that only it fails with that status and
    /// the ones before it keep their own outcome.
    /// Their completion needs an ACK, and the last packet sent may not
    /// have asked for one (a stream asks every [`ACK_REQ_STREAM`]
    /// packets) with nothing after it to ask: when the request before is
    /// a SEND or WRITE, its last packet goes again (`None`: the caller
    /// builds it), and asks, since the marked request now ends the queue
    /// ([`Self::last_packet_wants_ack`]); a READ or atomic gets its
    /// response anyway.
    #[cold]
    fn failed_at_cursor(&mut self, status: WcStatus) -> Option<TxOutcome> {
        if self.cur == 0 {
            return Some(TxOutcome::Fatal(status));
        }
        if let Some(w) = self.wqes.get_mut(self.cur) {
            w.error = Some(status);
        }
        let prev = self.wqes[self.cur - 1];
        if self.since_ack_req == 0 || prev.wr.opcode.takes_responder_resource() {
            return Some(TxOutcome::Idle);
        }
        self.cur -= 1;
        self.cur_pkt = prev.npkts - 1;
        self.send_psn = prev.end_psn().sub(1);
        None
    }

    /// Emit the next request packet into `buf`.
    pub(crate) fn poll_transmit(&mut self, cx: &mut TxContext<'_>, buf: &mut [u8]) -> TxOutcome {
        // Each pass marks one more request whose buffer failed (or
        // emits): at most as many passes as requests.
        loop {
            match self.emit_next(cx, buf) {
                Ok(outcome) => return outcome,
                // rxe_req.c: `finish_packet` fails when `copy_data` cannot
                // read the buffer (rxe_mr.c: `lookup_mr` finds no region
                // of the key in the QP's PD, or `mr_check_range` refuses
                // the range: both `-EINVAL`), and only `-EFAULT` is
                // IB_WC_LOC_PROT_ERR: the request completes with
                // IB_WC_LOC_QP_OP_ERR and the QP goes to error.
                Err(LocalBufferFailed) => {
                    if let Some(outcome) = self.failed_at_cursor(WcStatus::LocalQpOperationError) {
                        return outcome;
                    }
                }
            }
        }
    }

    /// Emit the packet at the cursor into `buf`, or say that the local
    /// buffer of the request at the cursor cannot be read.
    #[inline(always)]
    fn emit_next(
        &mut self,
        cx: &mut TxContext<'_>,
        buf: &mut [u8],
    ) -> Result<TxOutcome, LocalBufferFailed> {
        let (now, attr, tpl, mrs) = (cx.now, cx.attr, cx.tpl, cx.mrs);
        if !self.has_work(attr) {
            return Ok(TxOutcome::Idle);
        }
        let mtu = attr.path_mtu.bytes();
        let wqe = self.wqes[self.cur];
        if let Some(status) = wqe.error {
            // has_work: it is the oldest request; the QP fails it.
            return Ok(TxOutcome::Fatal(status));
        }
        let wr = &wqe.wr;
        let k = self.cur_pkt;
        let psn = wqe.first_psn.add(k);
        // The endpoint's in-flight limit holds back a new message, never a
        // retransmission (what frees the limit) nor the rest of a message
        // begun; and only once every packet sent has asked for an ACK (the
        // last one did: ACKs are cumulative), or the QP would wait for an
        // ACK that nothing asked for. Otherwise the message goes, and its
        // last packet asks (below).
        if k == 0
            && !cx.uc
            && !psn.before(self.max_sent_psn)
            && self.since_ack_req == 0
            && !cx.inflight.admits(wqe.npkts)
        {
            self.held_by_inflight_limit = true;
            return Ok(TxOutcome::Idle);
        }
        let last = k + 1 == wqe.npkts;
        let outstanding = self.send_psn.diff(self.acked_psn) as u32;
        let window_full = outstanding + 1 >= MAX_OUTSTANDING_PSNS;

        // Per packet: the BTH and extension headers; the fixed headers come
        // from the QP's pre-emitted template (`wire::emit_templated`).
        let (bth, reth, immdt, atomic, ieth, local_off, len) = match wr.opcode {
            SendOp::Send
            | SendOp::SendWithImm
            | SendOp::SendWithInv
            | SendOp::Write
            | SendOp::WriteWithImm => {
                let off = k * mtu;
                let len = (wr.local.length - off).min(mtu);
                let is_send = matches!(
                    wr.opcode,
                    SendOp::Send | SendOp::SendWithImm | SendOp::SendWithInv
                );
                let imm = matches!(wr.opcode, SendOp::SendWithImm | SendOp::WriteWithImm);
                // SEND with invalidate: its LAST/ONLY packet carries the
                // R_Key in an IETH (IBTA 9.4.1.1.2; rxe next_opcode_rc).
                let inv = wr.opcode == SendOp::SendWithInv;
                let only = wqe.npkts == 1;
                let opcode = match (is_send, only, k == 0, last, imm) {
                    (true, true, _, _, _) if inv => Opcode::SendOnlyInv,
                    (true, false, false, true, _) if inv => Opcode::SendLastInv,
                    (true, true, _, _, false) => Opcode::SendOnly,
                    (true, true, _, _, true) => Opcode::SendOnlyImm,
                    (true, false, true, _, _) => Opcode::SendFirst,
                    (true, false, false, false, _) => Opcode::SendMiddle,
                    (true, false, false, true, false) => Opcode::SendLast,
                    (true, false, false, true, true) => Opcode::SendLastImm,
                    (false, true, _, _, false) => Opcode::WriteOnly,
                    (false, true, _, _, true) => Opcode::WriteOnlyImm,
                    (false, false, true, _, _) => Opcode::WriteFirst,
                    (false, false, false, false, _) => Opcode::WriteMiddle,
                    (false, false, false, true, false) => Opcode::WriteLast,
                    (false, false, false, true, true) => Opcode::WriteLastImm,
                };
                // A message whose next one would not fit the in-flight
                // room ends with an AckReq: the QP may have to wait for it.
                let next_waits = || {
                    self.wqes
                        .get(self.cur + 1)
                        .is_some_and(|n| !cx.inflight.admits(n.npkts + 1))
                };
                // UC: UC's opcodes (IBA 9.2 table 38), and no AckReq: no
                // ACK ever comes (rxe sets it for RC only since 2023).
                let (opcode, ack_req) = if cx.uc {
                    (opcode.to_uc().unwrap_or(opcode), false)
                } else {
                    (
                        opcode,
                        window_full
                            || self.since_ack_req + 1 >= ACK_REQ_EVERY
                            || (last && (self.last_packet_wants_ack(now, attr) || next_waits())),
                    )
                };
                let reth = (!is_send && k == 0).then_some(RethRepr {
                    va: wr.remote_addr,
                    rkey: wr.rkey,
                    dma_len: wr.local.length,
                });
                let immdt = (imm && last).then_some(wr.imm);
                let ieth = (inv && last).then_some(wr.imm);
                (
                    tpl.bth(opcode, psn, ack_req),
                    reth,
                    immdt,
                    None,
                    ieth,
                    off,
                    len,
                )
            }
            SendOp::Read => {
                // Resuming mid-READ: ask for the bytes not yet received, from
                // the resume PSN on (rxe req_retry does the same).
                let off = k * mtu;
                let reth = RethRepr {
                    va: wr.remote_addr.wrapping_add(u64::from(off)),
                    rkey: wr.rkey,
                    dma_len: wr.local.length - off,
                };
                let bth = tpl.bth(Opcode::ReadRequest, psn, true);
                (bth, Some(reth), None, None, None, 0, 0)
            }
            SendOp::CompareSwap | SendOp::FetchAdd => {
                let opcode = if wr.opcode == SendOp::CompareSwap {
                    Opcode::CompareSwap
                } else {
                    Opcode::FetchAdd
                };
                let (swap_add, compare) = if wr.opcode == SendOp::CompareSwap {
                    (wr.swap, wr.compare_add)
                } else {
                    (wr.compare_add, 0)
                };
                let atomic = AtomicEthRepr {
                    va: wr.remote_addr,
                    rkey: wr.rkey,
                    swap_add,
                    compare,
                };
                (
                    tpl.bth(opcode, psn, true),
                    None,
                    None,
                    Some(atomic),
                    None,
                    0,
                    0,
                )
            }
            // ATOMIC WRITE (IBA 1.5 9.4.8; rxe `next_opcode_rc` ->
            // IB_OPCODE_RC_ATOMIC_WRITE, `finish_packet` copies the 8
            // bytes): BTH + RETH (length 8) + the 8 bytes, AckReq set (it
            // ends its message, and its answer is a READ response).
            SendOp::AtomicWrite => {
                let reth = RethRepr {
                    va: wr.remote_addr,
                    rkey: wr.rkey,
                    dma_len: 8,
                };
                (
                    tpl.bth(Opcode::AtomicWrite, psn, true),
                    Some(reth),
                    None,
                    None,
                    None,
                    0,
                    8,
                )
            }
            // Executed before packets are built (`Self::run_local_ops`).
            SendOp::BindMw | SendOp::LocalInv => return Ok(TxOutcome::Idle),
        };

        let flen = tpl.wire.frame_len(bth.opcode, len as usize);
        if flen > buf.len() {
            cx.counters.rest().tx_buffer_too_small += 1;
            return Ok(TxOutcome::Idle);
        }
        if !cx.cc.may_send(now, flen) {
            return Ok(TxOutcome::Idle);
        }
        let atomic_write_value;
        let payload: &[u8] = if len == 0 {
            &[]
        } else if wr.opcode == SendOp::AtomicWrite {
            atomic_write_value = wr.atomic_write_value();
            &atomic_write_value
        } else {
            match wqe.data() {
                // The L_Key must be of a region of the QP's PD (rxe
                // copy_data -> lookup_mr); post_send checked key, range
                // and rights only, and the region may have moved since.
                WqeData::One => match mrs.slice(
                    cx.pd,
                    wr.local.lkey,
                    wr.local.addr.wrapping_add(u64::from(local_off)),
                    len as usize,
                    super::mr::Access::NONE,
                ) {
                    Ok(p) => p,
                    Err(_) => return Err(LocalBufferFailed),
                },
                // Gathered from the list, every piece checked as one SGE
                // is (rxe copy_data walks the SGEs the same way).
                WqeData::List { slot, n } => match cx.sgl.as_deref_mut() {
                    Some(sgl) => sgl
                        .gather_send(mrs, cx.pd, slot, n, local_off, len)
                        .ok_or(LocalBufferFailed)?,
                    None => return Err(LocalBufferFailed),
                },
                // Copied at post time: no key to check.
                WqeData::Inline { slot } => match cx.sgl.as_deref() {
                    Some(sgl) => sgl
                        .inline_bytes(slot, local_off, len)
                        .ok_or(LocalBufferFailed)?,
                    None => return Err(LocalBufferFailed),
                },
            }
        };
        let emitted = match (atomic, ieth) {
            (None, None) => emit_templated(
                cx.copy_crc,
                &tpl.wire,
                &bth,
                reth.as_ref(),
                immdt,
                None,
                payload,
                buf,
            ),
            // The AtomicETH and the IETH are not in the templated path.
            _ => {
                let mut h = tpl.headers(bth.opcode, psn, bth.ack_req);
                h.atomic_eth = atomic;
                h.ieth = ieth;
                emit_frame(&h, payload, buf)
            }
        };
        let written = match emitted {
            Ok(n) => n,
            Err(_) => {
                cx.counters.rest().tx_buffer_too_small += 1;
                return Ok(TxOutcome::Idle);
            }
        };
        cx.cc.on_sent(now, written);
        cx.counters.sent_pkts += 1;
        if psn.before(self.max_sent_psn) {
            cx.counters.rest().retransmitted_packets += 1;
        }
        if bth.ack_req {
            self.since_ack_req = 0;
            self.last_ack_req_at = now;
        } else {
            self.since_ack_req += 1;
        }

        // Advance the cursor.
        if wr.opcode.takes_responder_resource() {
            self.rd_atomic_sent += 1;
            self.send_psn = wqe.end_psn();
            self.cur += 1;
            self.cur_pkt = 0;
        } else {
            self.send_psn = psn.add(1);
            self.cur_pkt += 1;
            if self.cur_pkt == wqe.npkts {
                self.cur += 1;
                self.cur_pkt = 0;
            }
        }
        if self.send_psn.after(self.max_sent_psn) {
            self.max_sent_psn = self.send_psn;
        }
        if cx.uc {
            // Nothing to wait for: what left is as good as acknowledged
            // (the window of MAX_OUTSTANDING_PSNS never fills), and no
            // timer runs.
            self.acked_psn = self.send_psn;
            return Ok(TxOutcome::Sent(written));
        }
        if !self.timers.is_armed(Timer::Retransmit) {
            if let Some(t) = attr.ack_timeout() {
                self.timers.set(Timer::Retransmit, now + t);
            }
        }
        Ok(TxOutcome::Sent(written))
    }

    /// Execute the local operations (BIND_MW, LOCAL_INV) the cursor has
    /// reached, in order, and move past them (rxe `rxe_do_local_ops`,
    /// reached in send-queue order by `rxe_requester`): a bind through
    /// [`MrTable::bind_window`], a LOCAL_INV through
    /// [`MrTable::invalidate_window`], both as the QP `qp`. One that is
    /// executed completes once every request before it has ([`Self::
    /// complete_executed_front`]); one that is refused fails as a request
    /// whose buffer failed does (MW bind error, local QP operation error;
    /// [`Self::failed_at_cursor`]). `Err(status)`: the oldest request
    /// failed, the QP must fail it and go to error.
    pub(crate) fn run_local_ops(
        &mut self,
        mrs: &mut MrTable,
        qp: QpScope,
        sink: &mut CompletionSink<'_>,
        counters: &mut QpCounters,
    ) -> Result<(), WcStatus> {
        if self.timers.is_armed(Timer::Rnr) {
            return Ok(());
        }
        while let Some(w) = self.wqes.get(self.cur) {
            if !w.wr.opcode.is_local() || w.error.is_some() || self.cur_pkt != 0 {
                break;
            }
            if !w.executed {
                let done = match w.wr.opcode {
                    SendOp::BindMw => mrs
                        .bind_window(qp, &w.wr.mw_bind())
                        .map(drop)
                        .map_err(|_| WcStatus::MwBindError),
                    _ => mrs
                        .invalidate_window(qp, w.wr.imm, false)
                        .map_err(|_| WcStatus::LocalQpOperationError),
                };
                if let Err(status) = done {
                    match self.failed_at_cursor(status) {
                        Some(TxOutcome::Fatal(s)) => return Err(s),
                        _ => break,
                    }
                }
                self.wqes[self.cur].executed = true;
            }
            self.cur += 1;
        }
        self.complete_executed_front(sink, counters);
        Ok(())
    }
}
