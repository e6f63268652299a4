//! A queue pair: state, attributes, and the glue between its requester,
//! completer and responder.

use super::attr::{
    self, access_flags_allowed, default_udp_src_port, transition_requires, QpAttr, QpAttrMask,
    QpState,
};
use super::congestion::QpCongestion;
use super::context::{InflightRoom, RxContext, TxContext};
use super::counters::{Counters, QpCounters};
use super::cq::{CompletionSink, Cq};
use super::error::VerbsError;
use super::frame::{class, FrameTemplate};
use super::mr::{MrTable, QpScope};
use super::psn::Psn;
use super::requester::{Requester, TxOutcome, MAX_MESSAGE_LEN};
use super::responder::Responder;
use super::sgl::{QpSgl, SgeCaps, WqeData};
use super::srq::Srq;
use super::wqe::{RecvWr, SendOp, SendWr, Sge, WcOpcode, WcStatus, WorkCompletion};
use crate::time::Instant;
use crate::wire::crc32::CopyCrc;
use crate::wire::{emit_frame, Ecn, Opcode, RoceFrameView};
use core::net::IpAddr;

/// Creation attributes of a QP (`ibv_qp_init_attr`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpInitAttr {
    /// CQ for send completions.
    pub send_cq: u32,
    /// CQ for receive completions (may equal `send_cq`).
    pub recv_cq: u32,
    /// Send queue depth.
    pub max_send_wr: u32,
    /// Receive queue depth.
    pub max_recv_wr: u32,
    /// Every send request completes, as if `signaled` were always set.
    pub sq_sig_all: bool,
    /// The shared receive queue (an id from `Endpoint::create_srq`) the
    /// QP takes its receives from instead of a receive queue of its own
    /// (`ibv_qp_init_attr.srq`); `max_recv_wr` is then ignored.
    pub srq: Option<u32>,
}

impl Default for QpInitAttr {
    fn default() -> Self {
        QpInitAttr {
            send_cq: 0,
            recv_cq: 0,
            max_send_wr: 128,
            max_recv_wr: 128,
            sq_sig_all: false,
            srq: None,
        }
    }
}

/// What a QP keeps of its [`QpInitAttr`]: where its completions go and
/// its SRQ (the depths of its queues are its requester's and responder's).
/// 20 bytes, as `QpInitAttr` was before it had an SRQ: the QP keeps its
/// size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct QpQueues {
    pub(crate) send_cq: u32,
    pub(crate) recv_cq: u32,
    pub(crate) srq: Option<u32>,
    pub(crate) sq_sig_all: bool,
}

impl From<QpInitAttr> for QpQueues {
    fn from(a: QpInitAttr) -> QpQueues {
        QpQueues {
            send_cq: a.send_cq,
            recv_cq: a.recv_cq,
            srq: a.srq,
            sq_sig_all: a.sq_sig_all,
        }
    }
}

/// The service of a connected QP (IBA 9.7: both are connected, one peer
/// QP each): Reliable Connection, or Unreliable Connection (IBA 9.7.5.1,
/// 9.8.3: no ACK, no retransmission; a message is lost whole or arrives
/// whole). A UC QP is this same [`Qp`]: its requester completes a request
/// once its last packet has left, its responder never answers
/// (`rc/uc.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[repr(u8)]
pub enum Transport {
    /// Reliable Connection (`IBV_QPT_RC`).
    #[default]
    Rc,
    /// Unreliable Connection (`IBV_QPT_UC`).
    Uc,
}

/// One RC (or UC: [`Transport`]) queue pair.
///
/// In declaration order (`repr(C)`), which is the order a received packet
/// reads it: number and state, the header template (the peer check), the
/// responder, congestion control, the requester, and last the counters
/// it keeps inline (32 bytes of its last line, read by the statistics'
/// sum; the rest of them allocated at their first count: [`QpCounters`]).
/// Aligned to a cache line, so that its 576 bytes are 9 whole lines.
/// With tens of thousands of QPs a packet finds its QP out of the caches;
/// the receive step prefetches all of it up to the counters, and the
/// counters, as two ranges (`endpoint/qp_table.rs`). Left to the
/// compiler, which orders fields by their alignment, what one packet
/// reads spread over more lines: with `examples/qp_scale_probe 65536 6
/// [req] shuffled` (both builds prefetching the first 384 bytes), 410
/// against 304 ns a packet for the responder, 440 against 363 for the
/// requester (`docs/design/qp-layout.md`).
#[derive(Debug)]
#[repr(C, align(64))]
pub struct Qp {
    pub(crate) qpn: u32,
    /// A first send PSN drawn when the QP was created (the endpoint's
    /// `initial_psn`).
    pub(crate) initial_psn: u32,
    /// Its protection domain (verbs: the PD it was created in): the
    /// memory keys it may use are those of regions of this PD.
    pub(crate) pd: u32,
    /// Alternates the responder and the requester on the wire.
    responder_turn: bool,
    /// A lone pending ACK let one request packet go first (see
    /// `poll_transmit`); cleared when the responder sends.
    ack_yielded: bool,
    /// RC or UC (in the padding before `init`).
    pub(crate) transport: Transport,
    pub(crate) init: QpQueues,
    pub(crate) attr: QpAttr,
    pub(crate) tpl: Option<FrameTemplate>,
    pub(crate) resp: Responder,
    pub(crate) cc: QpCongestion,
    pub(crate) req: Requester,
    /// Its SGE-list and inline-data arenas, if it was made for more than
    /// one SGE a request or for inline data ([`Qp::set_sge_caps`]).
    pub(crate) sgl: Option<Box<QpSgl>>,
    pub(crate) counters: QpCounters,
}

impl Qp {
    /// Where the requester's completions go: the send CQ.
    fn send_sink<'c>(&self, cqs: &'c mut [Cq]) -> CompletionSink<'c> {
        CompletionSink {
            cq: cqs.get_mut(self.init.send_cq as usize),
            qpn: self.qpn,
            sq_sig_all: self.init.sq_sig_all,
        }
    }

    /// Where the responder's completions go: the receive CQ.
    fn recv_sink<'c>(&self, cqs: &'c mut [Cq]) -> CompletionSink<'c> {
        CompletionSink {
            cq: cqs.get_mut(self.init.recv_cq as usize),
            qpn: self.qpn,
            sq_sig_all: false,
        }
    }

    /// A QP in RESET.
    #[cfg(test)]
    pub(crate) fn new(qpn: u32, init: QpInitAttr) -> Qp {
        Self::with_congestion(qpn, init, QpCongestion::new())
    }

    /// A QP in RESET with congestion-control state `cc`.
    pub(crate) fn with_congestion(qpn: u32, init: QpInitAttr, cc: QpCongestion) -> Qp {
        Qp {
            qpn,
            attr: QpAttr::default(),
            init: init.into(),
            req: Requester::new(init.max_send_wr as usize),
            resp: Responder::new(init.max_recv_wr as usize),
            sgl: None,
            cc,
            counters: QpCounters::default(),
            tpl: None,
            responder_turn: true,
            ack_yielded: false,
            transport: Transport::Rc,
            initial_psn: 0,
            pd: 0,
        }
    }

    /// The first send PSN drawn for this QP when it was created.
    pub fn initial_psn(&self) -> u32 {
        self.initial_psn
    }

    /// The QP number.
    pub fn qpn(&self) -> u32 {
        self.qpn
    }

    /// Its protection domain.
    pub fn pd(&self) -> u32 {
        self.pd
    }

    /// RC or UC.
    pub fn transport(&self) -> Transport {
        self.transport
    }

    /// The QP's state.
    pub fn state(&self) -> QpState {
        self.attr.state
    }

    /// Current attributes.
    pub fn attr(&self) -> &QpAttr {
        &self.attr
    }

    /// Send requests posted and not yet completed.
    pub fn outstanding_send_wrs(&self) -> usize {
        self.req.outstanding_wrs()
    }

    /// The shared receive queue it takes its receives from, if any.
    pub fn srq(&self) -> Option<u32> {
        self.init.srq
    }

    /// Receive requests posted and not yet consumed.
    pub fn posted_recv_wrs(&self) -> usize {
        self.resp.rq.len()
    }

    /// Counters of this QP.
    pub fn counters(&self) -> Counters {
        self.counters.snapshot()
    }

    /// The QP's congestion-control state (hook for `engine::cc`).
    pub fn congestion(&mut self) -> &mut QpCongestion {
        &mut self.cc
    }

    /// Apply `attr` fields selected by `mask`, following the verbs state machine.
    pub(crate) fn modify(
        &mut self,
        attr: &QpAttr,
        mask: QpAttrMask,
        local_mac: [u8; 6],
        local_ip: IpAddr,
        cqs: &mut [Cq],
    ) -> Result<(), VerbsError> {
        let cur = self.attr.state;
        let target = if mask.contains(QpAttrMask::STATE) {
            attr.state
        } else {
            cur
        };
        let required = transition_requires(cur, target).ok_or(VerbsError::InvalidTransition)?;
        if !mask.contains(required) {
            return Err(VerbsError::MissingAttribute);
        }
        attr::validate(attr, mask).map_err(VerbsError::InvalidArgument)?;
        if self.transport == Transport::Uc {
            super::uc::check_modify(cur, target, mask)?;
        }
        if mask.contains(QpAttrMask::PATH_MTU) && matches!(cur, QpState::Rts) {
            return Err(VerbsError::InvalidArgument(
                "path_mtu can only change before RTS",
            ));
        }
        if mask.contains(QpAttrMask::ACCESS_FLAGS) && !access_flags_allowed(cur, target) {
            return Err(VerbsError::InvalidArgument(
                "access flags are set in RESET->INIT, INIT->INIT, INIT->RTR, RTR->RTS or RTS->RTS only",
            ));
        }
        let mut new = self.attr;
        macro_rules! take {
            ($bit:ident, $($f:ident),+) => {
                if mask.contains(QpAttrMask::$bit) { $(new.$f = attr.$f;)+ }
            };
        }
        take!(PATH_MTU, path_mtu);
        take!(TIMEOUT, timeout);
        take!(RETRY_CNT, retry_cnt);
        take!(RNR_RETRY, rnr_retry);
        take!(MIN_RNR_TIMER, min_rnr_timer);
        take!(MAX_QP_RD_ATOMIC, max_rd_atomic);
        take!(MAX_DEST_RD_ATOMIC, max_dest_rd_atomic);
        take!(SQ_PSN, sq_psn);
        take!(RQ_PSN, rq_psn);
        take!(DEST_QPN, dest_qpn);
        take!(AV, remote);
        take!(UDP_SRC_PORT, udp_src_port);
        take!(TRAFFIC_CLASS, dscp, ecn);
        take!(PKEY, pkey);
        take!(HOP_LIMIT, hop_limit);
        take!(ACCESS_FLAGS, access);
        if new.udp_src_port == 0 {
            new.udp_src_port = default_udp_src_port(self.qpn);
        }
        let tpl = if matches!(target, QpState::Rtr | QpState::Rts) {
            Some(FrameTemplate::new(local_mac, local_ip, &new).ok_or(
                VerbsError::InvalidArgument(
                    "remote IP must be the same family (IPv4/IPv6) as the endpoint's",
                ),
            )?)
        } else {
            self.tpl
        };
        // Everything checked: apply.
        new.state = target;
        self.attr = new;
        self.tpl = tpl;
        match (cur, target) {
            (_, QpState::Reset) => {
                // As new, but the queues keep the memory they have: a
                // QP reset and connected again allocates nothing on its
                // first posts.
                self.req.reset();
                self.resp.reset();
                self.cc.reset();
                self.tpl = None;
            }
            (QpState::Error, QpState::Error) => {}
            (_, QpState::Error) => self.enter_error(cqs),
            (QpState::Init, QpState::Rtr) => self.resp.start(Psn::new(new.rq_psn), &new),
            (QpState::Rtr, QpState::Rts) => self.req.start(Psn::new(new.sq_psn), &new),
            (QpState::Rts, QpState::Rts) => self.req.reset_budgets(&new),
            _ => {}
        }
        Ok(())
    }

    /// Move to ERROR: fail/flush every outstanding request and receive.
    pub(crate) fn enter_error(&mut self, cqs: &mut [Cq]) {
        self.attr.state = QpState::Error;
        let mut s = self.send_sink(cqs);
        self.req.flush(&mut s, &mut self.counters);
        let mut s = self.recv_sink(cqs);
        self.resp.flush(&mut s, &mut self.counters);
        // A QP on an SRQ: no WQE of the SRQ will complete on it any more,
        // the one it held flushed with it (IBA 10.3.1, "Last WQE
        // Reached", 11.6.3: the affiliated asynchronous event of a QP on
        // an SRQ).
        if self.init.srq.is_some() {
            self.resp.last_wqe_reached = true;
        }
    }

    /// The QP, on an SRQ, went to the error state since the last
    /// [`Qp::take_last_wqe_reached`].
    pub(crate) fn last_wqe_reached(&self) -> bool {
        self.resp.last_wqe_reached
    }

    /// Whether it did, then not again until it next enters the error
    /// state.
    pub(crate) fn take_last_wqe_reached(&mut self) -> bool {
        std::mem::take(&mut self.resp.last_wqe_reached)
    }

    /// Post a send request (checked: state, opcode, lengths, an atomic's
    /// alignment: rxe `validate_send_wr`). The local key is not looked at
    /// here: rxe reads or writes the buffer through it only when the
    /// request runs (rxe_req.c `finish_packet` -> rxe_mr.c `copy_data`,
    /// whose `lookup_mr` checks key, PD and state, and `mr_check_range`
    /// the range), so an unknown key, one of another PD or a range out
    /// of the region is accepted and fails the request then: a SEND or
    /// WRITE with a local QP operation error when its packet is built
    /// (`Requester::poll_transmit`; rxe: `copy_data` returns `-EINVAL`,
    /// `IB_WC_LOC_QP_OP_ERR`), a READ or atomic with a local protection
    /// error when its response is placed (the completer; rxe_comp.c
    /// `do_read`/`do_atomic`: `IB_WC_LOC_PROT_ERR`); the QP then goes to
    /// ERROR.
    pub(crate) fn post_send(&mut self, wr: SendWr, cqs: &mut [Cq]) -> Result<(), VerbsError> {
        self.check_transport_op(wr.opcode)?;
        if !self.send_state_admits(&wr, cqs)? {
            return Ok(());
        }
        if wr.local.length > MAX_MESSAGE_LEN {
            return Err(VerbsError::InvalidArgument("message longer than 1 GiB"));
        }
        self.send_checks(&wr)?;
        if !self.req.post(wr, WqeData::One, self.attr.path_mtu.bytes()) {
            return Err(VerbsError::QueueFull);
        }
        Ok(())
    }

    /// The QP's scatter/gather capacities (one SGE each way and no
    /// inline data unless [`crate::endpoint::Endpoint::set_qp_sge_caps`] said
    /// otherwise).
    pub fn sge_caps(&self) -> SgeCaps {
        self.sgl
            .as_ref()
            .map_or_else(SgeCaps::default, |s| s.caps())
    }

    /// Give the QP, in RESET, the scatter/gather capacities `caps`
    /// (checked against [`super::MAX_SGE`] and [`super::MAX_INLINE_DATA`]
    /// by the caller): its arenas are made now, filled as lists and inline
    /// data are posted.
    pub(crate) fn set_sge_caps(&mut self, caps: SgeCaps) -> Result<(), VerbsError> {
        if self.attr.state != QpState::Reset {
            return Err(VerbsError::InvalidState);
        }
        self.sgl = caps.needs_arena().then(|| {
            Box::new(QpSgl::new(
                caps,
                self.req.max_wr as u32,
                self.resp.max_recv_wr,
            ))
        });
        Ok(())
    }

    /// Post a send request whose data is gathered from the SGE list
    /// `sges` (rxe `post_one_send`): more entries than the QP was made for
    /// is `InvalidArgument` (rxe `EINVAL`), the request's length is their
    /// total, and no entry's key is looked at before the request runs (as
    /// [`Qp::post_send`]: a bad entry anywhere fails the request then). A
    /// list of one entry (or none) is [`Qp::post_send`] with that entry
    /// (or a zero-length one).
    pub(crate) fn post_send_sgl(
        &mut self,
        mut wr: SendWr,
        sges: &[Sge],
        cqs: &mut [Cq],
    ) -> Result<(), VerbsError> {
        self.check_transport_op(wr.opcode)?;
        if sges.len() as u64 > u64::from(self.sge_caps().max_send_sge.max(1)) {
            return Err(VerbsError::InvalidArgument(
                "more SGEs than the QP's max_send_sge",
            ));
        }
        if sges.len() <= 1 {
            wr.local = sges.first().copied().unwrap_or_default();
            return self.post_send(wr, cqs);
        }
        if !self.send_state_admits(&wr, cqs)? {
            return Ok(());
        }
        let total: u64 = sges.iter().map(|s| u64::from(s.length)).sum();
        if total > u64::from(MAX_MESSAGE_LEN) {
            return Err(VerbsError::InvalidArgument("message longer than 1 GiB"));
        }
        wr.local = Sge {
            lkey: 0,
            addr: 0,
            length: total as u32,
        };
        self.send_checks(&wr)?;
        if self.req.is_full() {
            return Err(VerbsError::QueueFull);
        }
        // sge_caps allowed more than one: the arenas are there.
        let Some(sgl) = self.sgl.as_deref_mut() else {
            return Err(VerbsError::InvalidArgument("the QP holds no SGE lists"));
        };
        let data = sgl.put_send(sges);
        self.req.post(wr, data, self.attr.path_mtu.bytes());
        Ok(())
    }

    /// Post a send request carrying `data` inline (`IBV_SEND_INLINE`):
    /// the bytes are copied now, no key is checked, and the caller may
    /// reuse its buffer at once. SEND, SEND with immediate, WRITE and
    /// WRITE with immediate only; at most the QP's `max_inline_data` bytes
    /// (rxe `validate_send_wr`: more is `EINVAL`).
    pub(crate) fn post_send_inline(
        &mut self,
        mut wr: SendWr,
        data: &[u8],
        cqs: &mut [Cq],
    ) -> Result<(), VerbsError> {
        if !matches!(
            wr.opcode,
            SendOp::Send | SendOp::SendWithImm | SendOp::Write | SendOp::WriteWithImm
        ) {
            return Err(VerbsError::InvalidArgument(
                "inline data is for SEND and WRITE only",
            ));
        }
        if data.len() as u64 > u64::from(self.sge_caps().max_inline_data) {
            return Err(VerbsError::InvalidArgument(
                "more inline data than the QP's max_inline_data",
            ));
        }
        if data.is_empty() {
            wr.local = Sge::default();
            return self.post_send(wr, cqs);
        }
        if !self.send_state_admits(&wr, cqs)? {
            return Ok(());
        }
        if self.req.is_full() {
            return Err(VerbsError::QueueFull);
        }
        let Some(sgl) = self.sgl.as_deref_mut() else {
            return Err(VerbsError::InvalidArgument("the QP holds no inline data"));
        };
        wr.local = Sge {
            lkey: 0,
            addr: 0,
            length: data.len() as u32,
        };
        let slot = sgl.put_inline(data);
        self.req.post(wr, slot, self.attr.path_mtu.bytes());
        Ok(())
    }

    /// The operations the QP's service has (rxe `validate_send_wr`,
    /// `wr_opcode_mask`: `EINVAL` otherwise): UC sends SEND, SEND with
    /// immediate, RDMA WRITE and WRITE with immediate (IBA 9.7.5.1, table
    /// 38), and runs the local operations (BIND_MW, LOCAL_INV) as RC does;
    /// no READ, atomic or SEND with invalidate.
    #[inline(always)]
    fn check_transport_op(&self, op: SendOp) -> Result<(), VerbsError> {
        if self.transport == Transport::Uc && !super::uc::send_op_allowed(op) {
            return Err(VerbsError::InvalidArgument(
                "UC sends SEND and RDMA WRITE (with or without immediate) only",
            ));
        }
        Ok(())
    }

    /// The checks of a send request's own fields (atomics: an 8-byte
    /// local buffer, an aligned remote address; rxe `validate_send_wr`).
    #[inline]
    fn send_checks(&self, wr: &SendWr) -> Result<(), VerbsError> {
        if wr.opcode.is_atomic() {
            if wr.local.length < 8 {
                return Err(VerbsError::InvalidArgument(
                    "atomic needs an 8-byte local buffer",
                ));
            }
            if !wr.remote_addr.is_multiple_of(8) {
                return Err(VerbsError::InvalidArgument(
                    "atomic remote address must be 8-byte aligned",
                ));
            }
        }
        Ok(())
    }

    /// Whether the QP's state lets a send request in: RTS does; in ERROR
    /// it completes as flushed at once (`Ok(false)`); otherwise
    /// `InvalidState`.
    #[inline]
    fn send_state_admits(&mut self, wr: &SendWr, cqs: &mut [Cq]) -> Result<bool, VerbsError> {
        match self.attr.state {
            QpState::Error => {
                // Verbs: work posted to a QP in error completes as flushed.
                let wc = WorkCompletion {
                    wr_id: wr.wr_id,
                    qpn: self.qpn,
                    status: WcStatus::Flushed,
                    opcode: WcOpcode::of_send(wr.opcode),
                    byte_len: 0,
                    imm: None,
                    invalidated_rkey: None,
                    ud: None,
                };
                if let Some(cq) = cqs.get_mut(self.init.send_cq as usize) {
                    if !cq.push(wc) {
                        self.counters.rest().cq_overflow += 1;
                    }
                }
                Ok(false)
            }
            QpState::Rts => Ok(true),
            _ => Err(VerbsError::InvalidState),
        }
    }

    /// Post a receive request (checked: state). Its buffer is not looked
    /// at here, as rxe (rdma-core providers/rxe/rxe.c
    /// `rxe_post_one_recv` checks the queue and `num_sge`, no key): an
    /// unknown key, one of another PD, a range out of its region or a
    /// region without LOCAL_WRITE is accepted, and fails when a message
    /// lands in it (`Responder::execute_send`; rxe_resp.c `send_data_in`
    /// -> rxe_mr.c `copy_data`: `RESPST_ERR_MALFORMED_WQE`, class A: the
    /// receive completes with a local QP operation error, NAK remote
    /// operational error, QP to error). A message of no bytes touches no
    /// buffer and succeeds (`copy_data` of length 0).
    pub(crate) fn post_recv(&mut self, wr: RecvWr, cqs: &mut [Cq]) -> Result<(), VerbsError> {
        if !self.recv_state_admits(&wr, cqs)? {
            return Ok(());
        }
        if !self.resp.post_recv(wr, WqeData::One) {
            return Err(VerbsError::QueueFull);
        }
        Ok(())
    }

    /// Post a receive request whose buffer is the SGE list `sges` (rxe
    /// `rxe_post_one_recv`): more entries than the QP was made for is
    /// `InvalidArgument` (rxe `EINVAL`); no entry's key is looked at (as
    /// [`Qp::post_recv`]: a bad entry fails the receive when a message
    /// reaches it, the bytes before it having landed, as rxe `copy_data`
    /// walks the list); an incoming message is scattered across them in
    /// order, and one longer than their total completes the receive with
    /// a local length error. One entry or none is [`Qp::post_recv`].
    pub(crate) fn post_recv_sgl(
        &mut self,
        wr_id: u64,
        sges: &[Sge],
        cqs: &mut [Cq],
    ) -> Result<(), VerbsError> {
        if sges.len() as u64 > u64::from(self.sge_caps().max_recv_sge.max(1)) {
            return Err(VerbsError::InvalidArgument(
                "more SGEs than the QP's max_recv_sge",
            ));
        }
        if sges.len() <= 1 {
            let sge = sges.first().copied().unwrap_or_default();
            return self.post_recv(RecvWr { wr_id, sge }, cqs);
        }
        let total: u64 = sges.iter().map(|s| u64::from(s.length)).sum();
        let wr = RecvWr {
            wr_id,
            sge: Sge {
                lkey: 0,
                addr: 0,
                length: total.min(u64::from(u32::MAX)) as u32,
            },
        };
        if !self.recv_state_admits(&wr, cqs)? {
            return Ok(());
        }
        if self.resp.is_full() {
            return Err(VerbsError::QueueFull);
        }
        let Some(sgl) = self.sgl.as_deref_mut() else {
            return Err(VerbsError::InvalidArgument("the QP holds no SGE lists"));
        };
        let data = sgl.put_recv(sges);
        self.resp.post_recv(wr, data);
        Ok(())
    }

    /// Whether the QP's state lets a receive request in: RESET does not
    /// (`InvalidState`); in ERROR it completes as flushed at once
    /// (`Ok(false)`). A QP on a shared receive queue takes none
    /// (`InvalidArgument`: rxe's provider, whose QP then has no receive
    /// queue, answers EINVAL).
    #[inline]
    fn recv_state_admits(&mut self, wr: &RecvWr, cqs: &mut [Cq]) -> Result<bool, VerbsError> {
        if self.init.srq.is_some() {
            return Err(VerbsError::InvalidArgument(
                "the QP takes its receives from a shared receive queue: post them there",
            ));
        }
        match self.attr.state {
            QpState::Reset => Err(VerbsError::InvalidState),
            QpState::Error => {
                let wc = WorkCompletion {
                    wr_id: wr.wr_id,
                    qpn: self.qpn,
                    status: WcStatus::Flushed,
                    opcode: WcOpcode::Recv,
                    byte_len: 0,
                    imm: None,
                    invalidated_rkey: None,
                    ud: None,
                };
                if let Some(cq) = cqs.get_mut(self.init.recv_cq as usize) {
                    if !cq.push(wc) {
                        self.counters.rest().cq_overflow += 1;
                    }
                }
                Ok(false)
            }
            _ => Ok(true),
        }
    }

    /// A parsed RoCE packet addressed to this QP; `srq` is its shared
    /// receive queue (that of `init.srq`), if it was created on one.
    // Inlined into its one caller (Endpoint::handle_packet): the peer check
    // then reads the addresses the parse just produced instead of reloading
    // them from the frame struct on the stack with loads that straddle two
    // stores (a store-forwarding stall, ~65% of this function by perf).
    #[inline(always)]
    pub(crate) fn handle_packet(
        &mut self,
        now: Instant,
        frame: &RoceFrameView<'_>,
        mrs: &mut MrTable,
        cqs: &mut [Cq],
        srq: Option<&mut Srq>,
    ) {
        let state = self.attr.state;
        if !matches!(state, QpState::Rtr | QpState::Rts) {
            self.counters.rest().dropped_malformed += 1;
            return;
        }
        // rxe hdr_check: only the connected peer (check_addr) with the
        // QP's P_Key (check_keys); counted when refused (frame.rs).
        if !self.admit(frame) {
            return;
        }
        self.counters.rcvd_pkts += 1;
        let ecn = frame.ecn();
        if ecn == Ecn::Ce {
            self.counters.rest().np_ecn_marked_roce_packets += 1;
        }
        self.cc.on_packet_received(now, ecn);
        // Requests go to the responder, which completes to the receive CQ;
        // responses (in RTS only) to the completer, to the send CQ.
        let op = frame.opcode();
        let result = if self.transport == Transport::Uc {
            // UC: requests only, UC opcodes only (rxe check_type: an RC
            // packet, or an ACK, at a UC QP is dropped); never answered.
            if op.is_uc() {
                let mut cx = RxContext {
                    now,
                    attr: &self.attr,
                    mrs,
                    pd: self.pd,
                    sink: self.recv_sink(cqs),
                    counters: &mut self.counters,
                    sgl: self.sgl.as_deref_mut(),
                    srq,
                };
                self.resp.handle_uc_request(frame, &mut cx)
            } else {
                self.counters.rest().dropped_malformed += 1;
                Ok(())
            }
        } else if class::is_request(op) {
            let mut cx = RxContext {
                now,
                attr: &self.attr,
                mrs,
                pd: self.pd,
                sink: self.recv_sink(cqs),
                counters: &mut self.counters,
                sgl: self.sgl.as_deref_mut(),
                srq,
            };
            self.resp.handle_request(frame, &mut cx)
        } else if class::is_response(op) && state == QpState::Rts {
            let mut cx = RxContext {
                now,
                attr: &self.attr,
                mrs,
                pd: self.pd,
                sink: self.send_sink(cqs),
                counters: &mut self.counters,
                sgl: self.sgl.as_deref_mut(),
                srq: None,
            };
            self.req.handle_response(frame, &mut cx)
        } else {
            self.counters.rest().dropped_malformed += 1;
            Ok(())
        };
        if result.is_err() {
            self.enter_error(cqs);
        }
    }

    /// Whether this QP has a frame to send now (ignoring rate limits).
    pub(crate) fn wants_to_send(&self) -> bool {
        match self.attr.state {
            QpState::Rts => self.resp.has_work() || self.req.has_work(&self.attr),
            QpState::Rtr | QpState::Error => self.resp.has_work(),
            _ => false,
        }
    }

    /// Whether `poll_transmit` could produce a frame now or later without
    /// another call into this QP: work queued (even if rate limited) or a
    /// CNP pending. When false, `poll_transmit` returns `None` and changes
    /// nothing.
    pub(crate) fn may_transmit(&self) -> bool {
        self.wants_to_send() || self.cc.has_cnp_pending()
    }

    /// Request packets this QP has outstanding, counted against the
    /// endpoint's in-flight limit: its requester's while it sends (RTS),
    /// none in any other state (an errored QP's are flushed, never acked).
    #[inline]
    pub(crate) fn inflight_packets(&self) -> u32 {
        // A UC QP has nothing outstanding: no packet of it is ever acked.
        if self.attr.state == QpState::Rts && self.transport == Transport::Rc {
            self.req.inflight_packets()
        } else {
            0
        }
    }

    /// Whether the requester's next message would fit `room` (true when
    /// it has none: nothing then waits for room).
    #[inline]
    pub(crate) fn next_message_fits(&self, room: InflightRoom) -> bool {
        self.req.next_message_fits(room)
    }

    /// The last `poll_transmit` found a new request packet ready and the
    /// in-flight limit held it back.
    #[inline]
    pub(crate) fn held_by_inflight_limit(&self) -> bool {
        self.req.held_by_inflight_limit
    }

    /// Emit this QP's next frame (CNP, answer or request) into `buf`; a new
    /// message only if it fits `inflight` (the endpoint's in-flight limit);
    /// payloads are copied and CRCed by `copy_crc`.
    pub(crate) fn poll_transmit(
        &mut self,
        now: Instant,
        copy_crc: CopyCrc,
        inflight: InflightRoom,
        mrs: &mut MrTable,
        cqs: &mut [Cq],
        buf: &mut [u8],
    ) -> Option<usize> {
        let state = self.attr.state;
        self.req.held_by_inflight_limit = false;
        if state == QpState::Rts && self.req.has_work(&self.attr) {
            // The local operations the cursor has reached run first: they
            // take no packet, and may be all there is to do.
            let qp = QpScope {
                pd: self.pd,
                qpn: self.qpn,
            };
            let failed = {
                let mut s = self.send_sink(cqs);
                self.req
                    .run_local_ops(mrs, qp, &mut s, &mut self.counters)
                    .err()
            };
            if let Some(status) = failed {
                let mut s = self.send_sink(cqs);
                self.req.fail_front(status, &mut s, &mut self.counters);
                self.enter_error(cqs);
            }
        }
        // Borrowed, not copied: the template is ~200 bytes.
        let tpl = self.tpl.as_ref()?;
        if !matches!(state, QpState::Rtr | QpState::Rts | QpState::Error) {
            return None;
        }
        if state != QpState::Error && self.cc.poll_cnp(now) {
            // CNP (`docs/congestion.md`, "CNP"): opcode 0x81 to the sender's QP,
            // BECN=1, PSN 0, 16 zero bytes, own DSCP, not ECN-capable.
            let mut h = FrameTemplate::with_traffic_class(
                tpl.headers(Opcode::Cnp, Psn::new(0), false),
                self.cc.cnp_dscp(),
                Ecn::NotEct,
            );
            h.bth.becn = true;
            if let Ok(n) = emit_frame(&h, &[0u8; 16], buf) {
                self.counters.sent_pkts += 1;
                self.counters.rest().np_cnp_sent += 1;
                return Some(n);
            }
        }
        // A lone ACK lets one ready request packet go first: in a request/
        // answer exchange the answer and the ACK of the request leave in one
        // TX batch, and the peer, waiting for the answer, then gets it
        // without first receiving the ACK. The ACK follows that packet
        // (it yields once, so streaming cannot starve it).
        if self.responder_turn
            && !self.ack_yielded
            && state == QpState::Rts
            && self.resp.only_ack_pending()
            && self.req.has_work(&self.attr)
        {
            self.responder_turn = false;
            self.ack_yielded = true;
        }
        let mut cx = TxContext {
            now,
            copy_crc,
            attr: &self.attr,
            tpl,
            mrs,
            pd: self.pd,
            qpn: self.qpn,
            cc: &mut self.cc,
            counters: &mut self.counters,
            inflight,
            sgl: self.sgl.as_deref_mut(),
            uc: self.transport == Transport::Uc,
        };
        for _ in 0..2 {
            if self.responder_turn {
                if self.resp.has_work() {
                    match self.resp.poll_transmit(&mut cx, buf) {
                        Ok(Some(n)) => {
                            self.responder_turn = false;
                            self.ack_yielded = false;
                            return Some(n);
                        }
                        Ok(None) => {}
                        Err(_) => {
                            self.enter_error(cqs);
                            return self.poll_transmit(now, copy_crc, inflight, mrs, cqs, buf);
                        }
                    }
                }
            } else if self.attr.state == QpState::Rts {
                match self.req.poll_transmit(&mut cx, buf) {
                    TxOutcome::Sent(n) => {
                        self.responder_turn = true;
                        if self.transport == Transport::Uc {
                            // UC: a request is done once its last packet
                            // has left (IBA 9.7.5.1; rxe update_wqe_state).
                            let mut s = self.send_sink(cqs);
                            self.req.complete_sent(&mut s, &mut self.counters);
                        }
                        return Some(n);
                    }
                    TxOutcome::Idle => {}
                    TxOutcome::Fatal(status) => {
                        let mut s = self.send_sink(cqs);
                        self.req.fail_front(status, &mut s, &mut self.counters);
                        self.enter_error(cqs);
                        return self.poll_transmit(now, copy_crc, inflight, mrs, cqs, buf);
                    }
                }
            }
            self.responder_turn = !self.responder_turn;
        }
        None
    }

    /// Earliest deadline of this QP (timers, and the rate limiter when it
    /// holds back a packet).
    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        let mut t = self.cc.poll_timeout();
        let mut fold = |x: Option<Instant>| {
            if let Some(x) = x {
                t = Some(t.map_or(x, |t| t.min(x)));
            }
        };
        if self.attr.state == QpState::Rts {
            fold(self.req.timers.earliest());
            if self.req.has_work(&self.attr) || self.resp.has_work() {
                fold(self.cc.next_send_time());
            }
        }
        t
    }

    /// Run timers due at `now`.
    pub(crate) fn handle_timeout(&mut self, now: Instant, cqs: &mut [Cq]) {
        self.cc.handle_timeout(now);
        if self.attr.state == QpState::Rts {
            let mut s = self.send_sink(cqs);
            if self
                .req
                .handle_timeout(now, &mut s, &mut self.counters)
                .is_err()
            {
                self.enter_error(cqs);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The memory per QP that `docs/architecture.md` states ("The QP
    /// itself is 576 bytes") and that an endpoint of 65,536 QPs holds
    /// 65,536 times over: a field that makes the QP grow must update it.
    #[cfg(target_pointer_width = "64")]
    #[test]
    fn a_qp_takes_9_cache_lines() {
        assert_eq!(core::mem::size_of::<Qp>(), 9 * 64);
        assert_eq!(core::mem::align_of::<Qp>(), 64);
        // The counters it keeps inline come last, in its last line (the
        // receive step's two prefetch ranges meet there).
        let at = core::mem::offset_of!(Qp, counters);
        assert_eq!(core::mem::size_of::<QpCounters>(), 32);
        assert!(at >= 8 * 64 && at + 32 <= 9 * 64, "counters at {at}");
        // Neither its DCQCN state nor the rest of its counters is in it
        // until first used.
        let qp = Qp::new(0x11, QpInitAttr::default());
        assert!(qp.cc.reaction_point().is_none());
        assert!(!qp.counters.has_rest());
    }
}
