//! The endpoint: one sans-IO entry point for a RoCE v2 node.
//!
//! # API (for the datapath and congestion-control work)
//!
//! ```text
//! let mut ep = Endpoint::new(EndpointConfig { local_mac, local_ip, ..Default::default() });
//! // memory
//! let keys: MrKeys = ep.reg_mr(Box::new(vec![0u8; n]), iova, Access::LOCAL_WRITE | Access::REMOTE_WRITE)?;
//! ep.mr_write(keys.lkey, iova, b"bytes")?;  ep.mr_read(keys.lkey, iova, &mut out)?;
//! ep.dereg_mr(keys.lkey)?;                 // -> Box<dyn RegionMemory>
//! // protection domains (any number; reg_mr and create_qp use PD 0): a QP
//! // uses only the keys of regions of its own PD
//! let keys = ep.reg_mr_in(pd, Box::new(vec![0u8; n]), iova, access)?;
//! let qpn = ep.create_qp_in(pd, init)?;
//! ep.set_mr_pd(keys.lkey, other_pd)?;      // ibv_rereg_mr with IBV_REREG_MR_CHANGE_PD
//! // completion queues and queue pairs
//! let cq = ep.create_cq(4096);
//! let qpn = ep.create_qp(QpInitAttr { send_cq: cq, recv_cq: cq, max_send_wr: 256, max_recv_wr: 256, sq_sig_all: false, srq: None })?;
//! ep.modify_qp(qpn, &QpAttr { state: QpState::Init, access: Access::REMOTE_WRITE, ..Default::default() }, QpAttrMask::STATE | QpAttrMask::ACCESS_FLAGS)?;
//! ep.modify_qp(qpn, &rtr_attr, QpAttrMask::STATE | QpAttrMask::DEST_QPN | QpAttrMask::RQ_PSN | QpAttrMask::AV | ...)?;
//! ep.modify_qp(qpn, &rts_attr, QpAttrMask::STATE | QpAttrMask::SQ_PSN | QpAttrMask::TIMEOUT | ...)?;
//! // (or `ep.connect(qpn, &RemoteQp { .. }, &ConnectOptions { .. })` for all three steps)
//! ep.post_recv(qpn, RecvWr { wr_id, sge })?;
//! ep.post_send(qpn, SendWr { wr_id, opcode: SendOp::Write, local: Sge { lkey, addr, length }, remote_addr, rkey, .. })?;
//! // shared receive queues: QPs created with `srq: Some(srq)` take their receives from it
//! let srq = ep.create_srq(pd, SrqAttr { max_wr: 1024, max_sge: 1, srq_limit: 0 })?;
//! ep.post_srq_recv(srq, RecvWr { wr_id, sge })?;
//! ep.modify_srq(srq, &SrqAttr { srq_limit: 16, ..Default::default() }, SrqAttrMask::LIMIT)?;
//! while let Some(AsyncEvent::SrqLimitReached { srq }) = ep.poll_event() { /* post more */ }
//! // Unreliable Datagram (`crate::ud`, `docs/unreliable-datagram.md`)
//! let ah = ep.create_ah(pd, &AhAttr { remote: RemoteAddress { mac, ip, ..Default::default() }, ..Default::default() })?;
//! let ud = ep.create_ud_qp(pd, init)?;               // or create_ud_qp_numbered(pd, 1, init): the GSI
//! ep.modify_ud_qp(ud, &UdQpAttr { state: QpState::Init, qkey, ..Default::default() }, UdQpAttrMask::STATE | UdQpAttrMask::PKEY_INDEX | UdQpAttrMask::PORT | UdQpAttrMask::QKEY)?;
//! // ... RTR (STATE), RTS (STATE | SQ_PSN)
//! ep.post_ud_recv(ud, RecvWr { wr_id, sge })?;       // 40 bytes of GRH area, then the message
//! ep.post_ud_send(ud, UdSendWr::new(wr_id, sge, ah, remote_qpn, remote_qkey))?;
//! // sans-IO loop
//! ep.handle_packet(now, &rx_frame);                  // whole Ethernet frame
//! while let Some(n) = ep.poll_transmit(now, &mut tx_buf) { send(&tx_buf[..n]) }
//! ep.poll_timeout();                                 // next deadline, sleep until then
//! ep.handle_timeout(now);
//! let n = ep.poll_cq(cq, &mut wcs);                  // work completions
//! ep.counters(); ep.qp_counters(qpn);                // rxe-named counters
//! ```
//!
//! Congestion-control hooks: see [`crate::cc::QpCongestion`]
//! (one per QP, reachable with [`Endpoint::qp_congestion`]): it sees the
//! ECN field of each accepted packet, is asked "may I send N bytes now"
//! before each data packet, contributes to `poll_timeout`, and can request
//! CNPs. CNPs received are routed to it by destination QP.
//!
//! Nothing here reads a clock, touches a socket, spawns a thread or uses
//! `unsafe`; no heap allocation per packet.

mod config;
mod qp_table;
mod qpn_index;

pub use self::config::{
    ConnectOptions, EndpointConfig, QpnRange, RemoteQp, DEFAULT_MAX_INFLIGHT_PACKETS, DEFAULT_SEED,
    MAX_QPS_PER_ENGINE,
};

use self::qp_table::QpTable;
use std::sync::Arc;

use crate::cc::{QpCcConfig, QpCongestion};
use crate::rc::{
    Access, Counters, Cq, MrKeys, MrTable, MwType, Qp, QpAttr, QpAttrMask, QpInitAttr, QpState,
    RecvWr, RegionMemory, RemoteAddress, Rng, SendWr, Sge, SgeCaps, Srq, SrqAttr, SrqAttrMask,
    Transport, VerbsError, WorkCompletion, RC_ONLY,
};
use crate::time::Instant;
use crate::ud::{AhAttr, AhTable, UdQp, UdQpAttr, UdQpAttrMask, UdQps, UdSendWr, GSI_QPN};
use crate::wire::{
    parse_frame_view, peek_dest_qp, peek_remote_access, peek_request, Opcode, ParseError,
    PeekedRequest,
};

/// What [`Endpoint::receive`] did with a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Received {
    /// A valid packet for QP `qpn` of this endpoint, handled (which may
    /// still mean the QP dropped it as a duplicate or out of sequence, and
    /// counted that).
    Delivered { qpn: u32 },
    /// Not a valid RoCE v2 packet (malformed, bad ICRC): counted, dropped.
    Dropped,
    /// A valid packet for QP `qpn`, which this endpoint does not hold:
    /// neither counted nor handled.
    NotHere { qpn: u32 },
}

/// An asynchronous event of the endpoint (verbs `ibv_get_async_event`),
/// taken with [`Endpoint::poll_event`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AsyncEvent {
    /// Shared receive queue `srq` holds fewer receives than its armed
    /// limit; the limit is disarmed (`IBV_EVENT_SRQ_LIMIT_REACHED`, IBA
    /// 11.5.2.4).
    SrqLimitReached { srq: u32 },
    /// QP `qpn`, created on a shared receive queue, went to the error
    /// state: it will take no more of the SRQ's WQEs, and the one it held
    /// was flushed (`IBV_EVENT_QP_LAST_WQE_REACHED`, IBA 10.3.1 and
    /// 11.6.3). Once each time the
    /// QP enters the error state.
    QpLastWqeReached { qpn: u32 },
}

/// Lowest QP number handed out (QPN 0 and 1 are special in InfiniBand;
/// 2..=0x10 are left free as rxe does). Numbers are drawn at random from
/// `FIRST_QPN..=MAX_QPN`.
pub const FIRST_QPN: u32 = 0x11;

/// Highest QP number (24 bits).
pub const MAX_QPN: u32 = 0xFF_FFFF;

/// Draws before [`Endpoint::create_qp`] stops drawing random numbers and
/// takes the next free number after the last draw (only a nearly full
/// number space gets there).
const QPN_DRAWS: u32 = 64;

/// The bytes each QP takes in its endpoint's slot array: the QP
/// ([`crate::rc::Qp`], 576 bytes) and its schedule entry, 640 on x86-64
/// (`docs/architecture.md`, "QP limits"). An endpoint reserves address
/// space for `max_qps` slots (up to 65,536) when it is made.
pub const QP_SLOT_BYTES: usize = core::mem::size_of::<qp_table::Slot>();

/// How many frames ahead of [`Endpoint::receive`] a receiver with many
/// QPs asks for the lookup of a frame's QP ([`Endpoint::qp_index_hint`]).
pub const PREFETCH_FAR: u32 = 8;
/// The most bytes of a request's payload memory that the receive step
/// prefetches with its QP ([`Endpoint::qp_state_hint`]): two lines. The
/// CPU's own prefetchers follow a longer payload once its first lines are
/// read.
pub const PAYLOAD_PREFETCH_BYTES: usize = 128;
/// How many frames ahead it asks for the QP's state
/// ([`Endpoint::qp_state_hint`]); by then stage one's line has come.
pub const PREFETCH_NEAR: u32 = 4;

/// Memory the endpoint is about to read, for a receiver to prefetch: an
/// address and a length in bytes. A hint only: nothing reads it through
/// this, and the range may be stale as soon as the endpoint changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryRange {
    pub addr: usize,
    pub len: usize,
}

impl MemoryRange {
    /// No memory: nothing to prefetch.
    pub const EMPTY: MemoryRange = MemoryRange { addr: 0, len: 0 };

    /// The memory of `b`.
    #[inline]
    pub(crate) fn of_bytes(b: &[u8]) -> MemoryRange {
        MemoryRange {
            addr: b.as_ptr() as usize,
            len: b.len(),
        }
    }

    /// The memory of `*v`.
    #[inline]
    pub(crate) fn of<T>(v: &T) -> MemoryRange {
        MemoryRange {
            addr: v as *const T as usize,
            len: std::mem::size_of::<T>(),
        }
    }
}

/// A RoCE v2 endpoint: memory regions, CQs, QPs, and the sans-IO loop.
pub struct Endpoint {
    config: EndpointConfig,
    mrs: MrTable,
    cqs: Vec<Cq>,
    /// QPs by number, the ready list and the timer heap (`qp_table.rs`).
    qps: QpTable,
    /// Shared receive queues by id (`rc/srq.rs`); ids are reused.
    srqs: Vec<Option<Srq>>,
    /// The QPs created on an SRQ (their `QpLastWqeReached` events).
    srq_qps: Vec<u32>,
    /// QP numbers and initial PSNs, from `config.seed`.
    rng: Rng,
    /// Endpoint-level drops (frames that reached no QP).
    counters: Counters,
    /// What every QP's congestion state reads of `config.cc`, shared.
    qp_cc: Arc<QpCcConfig>,
    /// The UD QPs (`crate::ud`), in the same QP number space.
    ud: UdQps,
    /// Address handles, for the UD sends.
    ahs: AhTable,
    /// Whether the UD QPs go first at the next `poll_transmit` (RC and
    /// UD take turns while both have frames).
    ud_turn: bool,
}

impl Endpoint {
    /// A new endpoint with no QPs.
    pub fn new(config: EndpointConfig) -> Endpoint {
        let [k0, k1] = config.seed;
        Endpoint {
            // The key permutation and the number generator get different
            // keys derived from the one seed.
            mrs: MrTable::with_seed([k0 ^ 0x6b65_7973, k1]),
            cqs: Vec::new(),
            srqs: Vec::new(),
            srq_qps: Vec::new(),
            qps: QpTable::with_capacity(config.max_qps, config.max_inflight_packets),
            rng: Rng::new([k0, k1 ^ 0x7170_6e73]),
            counters: Counters::default(),
            qp_cc: Arc::new(QpCcConfig::new(&config.cc)),
            ud: UdQps::default(),
            ahs: AhTable::default(),
            ud_turn: false,
            config,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &EndpointConfig {
        &self.config
    }

    // ---- memory ----

    /// Register `memory` at `iova` with `access` rights, in protection
    /// domain 0 (that of [`Endpoint::create_qp`]'s QPs).
    pub fn reg_mr(
        &mut self,
        memory: Box<dyn RegionMemory>,
        iova: u64,
        access: Access,
    ) -> Result<MrKeys, VerbsError> {
        self.reg_mr_in(0, memory, iova, access)
    }

    /// Register `memory` at `iova` with `access` rights in protection
    /// domain `pd` (verbs `ibv_reg_mr(pd, ...)`): its keys work only
    /// through QPs of `pd` ([`Endpoint::create_qp_in`]). A PD is any
    /// number the caller chooses; the endpoint keeps no list of them.
    pub fn reg_mr_in(
        &mut self,
        pd: u32,
        memory: Box<dyn RegionMemory>,
        iova: u64,
        access: Access,
    ) -> Result<MrKeys, VerbsError> {
        self.mrs
            .register_in(pd, memory, iova, access)
            .ok_or(VerbsError::ResourceExhausted)
    }

    /// Register `memory` under keys another endpoint's [`Endpoint::reg_mr`]
    /// chose (see [`MrTable::register_at`]): the queues of one device
    /// register each region in every queue's endpoint under one key, so a
    /// QP accepts the device's keys whichever queue it lives on.
    pub fn reg_mr_at(
        &mut self,
        memory: Box<dyn RegionMemory>,
        iova: u64,
        access: Access,
        keys: MrKeys,
    ) -> Result<MrKeys, VerbsError> {
        self.mrs
            .register_at(memory, iova, access, keys)
            .ok_or(VerbsError::ResourceExhausted)
    }

    /// Reregister a region in place, keys and protection domain kept
    /// (`ibv_rereg_mr`); the old memory comes back.
    pub fn rereg_mr(
        &mut self,
        lkey: u32,
        memory: Box<dyn RegionMemory>,
        iova: u64,
        access: Access,
    ) -> Result<Box<dyn RegionMemory>, VerbsError> {
        self.mrs
            .reregister(lkey, memory, iova, access)
            .ok_or(VerbsError::LocalProtection)
    }

    /// Move a region into protection domain `pd`, keys kept (`ibv_rereg_mr`
    /// with `IBV_REREG_MR_CHANGE_PD`): from then on its keys work only
    /// through QPs of `pd`, and a QP of its old PD that uses them fails as
    /// with an unknown key. Returns the PD it was in.
    pub fn set_mr_pd(&mut self, lkey: u32, pd: u32) -> Result<u32, VerbsError> {
        self.mrs.set_pd(lkey, pd).ok_or(VerbsError::LocalProtection)
    }

    /// Deregister a region and get its memory back. Refused while memory
    /// windows are bound to it (rxe `rxe_dereg_mr`: `-EINVAL`).
    pub fn dereg_mr(&mut self, lkey: u32) -> Result<Box<dyn RegionMemory>, VerbsError> {
        if self.mrs.bound_windows(lkey) > 0 {
            return Err(VerbsError::InvalidArgument(
                "memory windows are bound to the region",
            ));
        }
        self.mrs.deregister(lkey).ok_or(VerbsError::LocalProtection)
    }

    /// Allocate a memory window of `kind` in protection domain `pd`
    /// (`ibv_alloc_mw`; see [`MrTable::alloc_window`]). Returns its
    /// R_Key.
    pub fn alloc_mw(&mut self, pd: u32, kind: MwType) -> Result<u32, VerbsError> {
        self.mrs
            .alloc_window(pd, kind)
            .ok_or(VerbsError::ResourceExhausted)
    }

    /// Free the memory window that `rkey` names (`ibv_dealloc_mw`; any
    /// key byte): from then on an access through its keys is refused.
    pub fn dealloc_mw(&mut self, rkey: u32) -> Result<(), VerbsError> {
        self.mrs
            .dealloc_window(rkey)
            .map_err(|_| VerbsError::InvalidArgument("no memory window has this key"))
    }

    /// The current R_Key and type of the memory window `rkey` names (any
    /// key byte).
    pub fn mw(&self, rkey: u32) -> Option<(u32, MwType)> {
        self.mrs.window(rkey)
    }

    /// Copy bytes out of a region (local access, bounds-checked; the
    /// application reaches its regions of every PD).
    pub fn mr_read(&self, lkey: u32, iova: u64, out: &mut [u8]) -> Result<(), VerbsError> {
        self.mrs
            .read(lkey, iova, out)
            .map_err(|_| VerbsError::LocalProtection)
    }

    /// Copy bytes out of a region as a QP of protection domain `pd` reads
    /// them (rxe `copy_data`: `lookup_mr` with the QP's PD, then
    /// `mr_check_range`): a key of a region of another PD is refused too.
    pub fn mr_read_in(
        &self,
        pd: u32,
        lkey: u32,
        iova: u64,
        out: &mut [u8],
    ) -> Result<(), VerbsError> {
        let src = self
            .mrs
            .slice(pd, lkey, iova, out.len(), Access::NONE)
            .map_err(|_| VerbsError::LocalProtection)?;
        out.copy_from_slice(src);
        Ok(())
    }

    /// Copy bytes into a region (local access, bounds-checked, any PD).
    pub fn mr_write(&mut self, lkey: u32, iova: u64, data: &[u8]) -> Result<(), VerbsError> {
        self.mrs
            .write_any_pd(lkey, iova, data)
            .map_err(|_| VerbsError::LocalProtection)
    }

    /// Copy bytes into a region as a QP of protection domain `pd` writes
    /// a receive's bytes (rxe `copy_data` into a receive: `lookup_mr` with
    /// the QP's PD and LOCAL_WRITE, then `mr_check_range`): a key of a
    /// region of another PD, or of one without LOCAL_WRITE, is refused.
    pub fn mr_write_in(
        &mut self,
        pd: u32,
        lkey: u32,
        iova: u64,
        data: &[u8],
    ) -> Result<(), VerbsError> {
        self.mrs
            .write(pd, lkey, iova, data, Access::LOCAL_WRITE)
            .map_err(|_| VerbsError::LocalProtection)
    }

    /// Borrow `len` bytes of a region (local access, bounds-checked, any PD).
    pub fn mr_slice(&self, lkey: u32, iova: u64, len: usize) -> Result<&[u8], VerbsError> {
        self.mrs
            .slice_any_pd(lkey, iova, len)
            .map_err(|_| VerbsError::LocalProtection)
    }

    // ---- CQs and QPs ----

    /// Create a completion queue holding `capacity` completions; returns its id.
    pub fn create_cq(&mut self, capacity: usize) -> u32 {
        self.cqs.push(Cq::new(capacity));
        (self.cqs.len() - 1) as u32
    }

    /// Completions waiting in CQ `cq`.
    pub fn cq_len(&self, cq: u32) -> Option<usize> {
        self.cqs.get(cq as usize).map(Cq::len)
    }

    /// Gives CQ `cq` room for `capacity` completions; refused while more
    /// than that wait in it.
    pub fn resize_cq(&mut self, cq: u32, capacity: usize) -> Result<(), VerbsError> {
        let c = self.cqs.get_mut(cq as usize).ok_or(VerbsError::UnknownCq)?;
        if c.resize(capacity) {
            Ok(())
        } else {
            Err(VerbsError::InvalidArgument(
                "more completions wait in the CQ than the new size holds",
            ))
        }
    }

    /// Create an RC QP in RESET, in protection domain 0 (that of
    /// [`Endpoint::reg_mr`]'s regions); returns its QP number, drawn at
    /// random (from the endpoint's seed) among the free numbers of
    /// `FIRST_QPN..=MAX_QPN`.
    pub fn create_qp(&mut self, init: QpInitAttr) -> Result<u32, VerbsError> {
        self.create_qp_in(0, init)
    }

    /// [`Endpoint::create_qp`] in protection domain `pd` (verbs
    /// `ibv_create_qp(pd, ...)`): the QP uses only the keys of regions of
    /// `pd` ([`Endpoint::reg_mr_in`]), its own buffers' L_Keys and the
    /// R_Keys its peer names alike.
    pub fn create_qp_in(&mut self, pd: u32, init: QpInitAttr) -> Result<u32, VerbsError> {
        self.create_connected_qp(pd, init, Transport::Rc)
    }

    /// [`Endpoint::create_qp_in`] for a UC QP (verbs `IBV_QPT_UC`): the
    /// same QP numbers and table, the Unreliable Connection service
    /// (`rc/uc.rs`).
    pub fn create_uc_qp_in(&mut self, pd: u32, init: QpInitAttr) -> Result<u32, VerbsError> {
        self.create_connected_qp(pd, init, Transport::Uc)
    }

    fn create_connected_qp(
        &mut self,
        pd: u32,
        init: QpInitAttr,
        transport: Transport,
    ) -> Result<u32, VerbsError> {
        self.check_init(&init)?;
        self.check_room()?;
        let qpn = self.draw_free_qpn()?;
        self.place_new_qp(pd, qpn, init, transport)
    }

    /// A free QP number of the endpoint's range (`config.qpns`, by
    /// default `FIRST_QPN..=MAX_QPN`), drawn at random (RC, UC and UD QPs
    /// share the numbers): up to `QPN_DRAWS` draws, then, the range nearly
    /// full, the next free number after the last draw.
    fn draw_free_qpn(&mut self) -> Result<u32, VerbsError> {
        let range = self.qpn_range();
        let (first, span) = (range.first, range.last - range.first + 1);
        let mut qpn = first;
        for _ in 0..QPN_DRAWS {
            qpn = first + self.rng.next_u24() % span;
            if self.qpn_unused(qpn) {
                return Ok(qpn);
            }
        }
        (1..span)
            .map(|k| first + (qpn - first + k) % span)
            .find(|&q| self.qpn_unused(q))
            .ok_or(VerbsError::ResourceExhausted)
    }

    /// The QP numbers this endpoint gives (`config.qpns`, clamped to
    /// `FIRST_QPN..=MAX_QPN`; the whole space if nothing of it is left).
    fn qpn_range(&self) -> QpnRange {
        self.config.qpns.clamped().unwrap_or(QpnRange::ALL)
    }

    /// Create an RC QP in RESET under a number chosen by the caller (a
    /// device that numbers QPs across all its queues' endpoints), in
    /// protection domain 0. The number must be in `FIRST_QPN..=MAX_QPN`
    /// and not in use here.
    pub fn create_qp_numbered(&mut self, qpn: u32, init: QpInitAttr) -> Result<u32, VerbsError> {
        self.check_init(&init)?;
        self.check_free(qpn)?;
        self.check_room()?;
        self.place_new_qp(0, qpn, init, Transport::Rc)
    }

    fn check_init(&self, init: &QpInitAttr) -> Result<(), VerbsError> {
        if init.send_cq as usize >= self.cqs.len() || init.recv_cq as usize >= self.cqs.len() {
            return Err(VerbsError::UnknownCq);
        }
        if let Some(srq) = init.srq {
            self.srq(srq).ok_or(VerbsError::UnknownSrq)?;
        }
        // A QP on an SRQ has no receive queue: its max_recv_wr is ignored
        // (rxe rxe_qp_chk_cap checks it only without an SRQ).
        let recv_ok = init.srq.is_some() || (1..=1 << 16).contains(&init.max_recv_wr);
        if init.max_send_wr == 0 || init.max_send_wr > 1 << 16 || !recv_ok {
            return Err(VerbsError::InvalidArgument(
                "max_send_wr and max_recv_wr must be 1..=65536",
            ));
        }
        Ok(())
    }

    /// Room for one more QP (`config.max_qps`).
    fn check_room(&self) -> Result<(), VerbsError> {
        if self.qps.len() + self.ud.len() >= self.config.max_qps as usize {
            return Err(VerbsError::ResourceExhausted);
        }
        Ok(())
    }

    /// `qpn` is a valid number and free here.
    fn check_free(&self, qpn: u32) -> Result<(), VerbsError> {
        if !self.qpn_range().contains(qpn) {
            return Err(VerbsError::InvalidArgument("QP number out of range"));
        }
        if !self.qpn_unused(qpn) {
            return Err(VerbsError::InvalidArgument("QP number in use"));
        }
        Ok(())
    }

    fn place_new_qp(
        &mut self,
        pd: u32,
        qpn: u32,
        init: QpInitAttr,
        transport: Transport,
    ) -> Result<u32, VerbsError> {
        let cc = QpCongestion::with_shared(self.qp_cc.clone());
        // A QP on an SRQ has no receive queue; its receive arena holds the
        // one SRQ list a message takes.
        let init = match init.srq {
            Some(_) => QpInitAttr {
                max_recv_wr: 1,
                ..init
            },
            None => init,
        };
        let mut qp = Qp::with_congestion(qpn, init, cc);
        qp.transport = transport;
        qp.pd = pd;
        qp.initial_psn = self.rng.next_u24();
        // Data packets are marked as the endpoint says unless a
        // modify_qp with TRAFFIC_CLASS (or connect) sets otherwise.
        qp.attr.dscp = self.config.cc.marking.data_dscp;
        qp.attr.ecn = self.config.cc.marking.data_ecn;
        if let Some(s) = init.srq.and_then(|s| self.srq_mut(s)) {
            s.attach();
            // Room for the list of the SRQ receive a message takes (one
            // at a time: `rc/srq.rs`).
            let max_recv_sge = s.attr().max_sge;
            if max_recv_sge > 1 {
                let caps = SgeCaps {
                    max_recv_sge,
                    ..SgeCaps::default()
                };
                qp.set_sge_caps(caps)?;
            }
        }
        if init.srq.is_some() {
            self.srq_qps.push(qpn);
        }
        self.qps.insert(qp);
        Ok(qpn)
    }

    /// A first send PSN for QP `qpn`, drawn at random when it was created
    /// (give it to the peer and pass it as [`ConnectOptions::sq_psn`]).
    pub fn initial_psn(&self, qpn: u32) -> Option<u32> {
        self.qps.get(qpn).map(|q| q.initial_psn)
    }

    /// Take a QP out of this endpoint, whole (its work queues, PSNs,
    /// timers, counters and congestion state), to hand it to another
    /// endpoint with [`Endpoint::insert_qp`]: how a device moves a QP to
    /// the queue its packets arrive on. Its completion queue ids stay as
    /// they were, so the endpoint it moves to must have the same CQs.
    ///
    /// A QP created on a shared receive queue stays with its SRQ: `None`.
    pub fn take_qp(&mut self, qpn: u32) -> Option<Box<Qp>> {
        if self.qps.get(qpn)?.srq().is_some() {
            return None;
        }
        self.qps.remove(qpn).map(Box::new)
    }

    /// Put a QP taken from another endpoint ([`Endpoint::take_qp`]) here,
    /// under its number; gives it back if the number is taken or out of
    /// range here, or the endpoint is full. Its timers and pending
    /// transmissions resume at the next `poll_timeout` / `poll_transmit`.
    pub fn insert_qp(&mut self, qp: Box<Qp>) -> Result<(), Box<Qp>> {
        if self.check_free(qp.qpn).is_err() || self.check_room().is_err() || qp.srq().is_some() {
            return Err(qp);
        }
        self.qps.insert(*qp);
        Ok(())
    }

    /// Whether QP `qpn` (RC or UD) lives in this endpoint.
    pub fn has_qp(&self, qpn: u32) -> bool {
        self.qps.slot(qpn).is_some() || self.ud.contains(qpn)
    }

    /// Number of QPs (RC and UD) in this endpoint.
    pub fn qp_count(&self) -> usize {
        self.qps.len() + self.ud.len()
    }

    /// Number of memory regions registered in this endpoint.
    pub fn region_count(&self) -> usize {
        self.mrs.region_count()
    }

    /// Destroy a QP (its outstanding work is dropped without completions).
    pub fn destroy_qp(&mut self, qpn: u32) -> Result<(), VerbsError> {
        let Some(qp) = self.qps.remove(qpn) else {
            return self.destroy_ud_qp(qpn);
        };
        if let Some(s) = qp.srq().and_then(|s| self.srq_mut(s)) {
            s.detach();
            self.srq_qps.retain(|&q| q != qpn);
        }
        // Its type 2 windows are free: the number may come back.
        self.mrs.release_windows_of(qpn);
        // The device's counters keep what the QP counted (as rxe's).
        qp.counters.add_to(&mut self.counters);
        Ok(())
    }

    /// Run `f` on QP `qpn` (which then may have work: it joins the ready
    /// list) and bring its timer up to date.
    #[inline]
    fn with_qp<R>(
        &mut self,
        qpn: u32,
        f: impl FnOnce(&mut Qp, &MrTable, &mut Vec<Cq>) -> Result<R, VerbsError>,
    ) -> Result<R, VerbsError> {
        let (i, qp) = self.qps.touch(qpn).ok_or(VerbsError::UnknownQp)?;
        let r = f(qp, &self.mrs, &mut self.cqs);
        self.qps.schedule(i);
        r
    }

    /// A QP, for inspection.
    pub fn qp(&self, qpn: u32) -> Option<&Qp> {
        self.qps.get(qpn)
    }

    /// Modify a QP: attributes selected by `mask`, state transitions as in verbs.
    pub fn modify_qp(
        &mut self,
        qpn: u32,
        attr: &QpAttr,
        mask: QpAttrMask,
    ) -> Result<(), VerbsError> {
        let (mac, ip) = (self.config.local_mac, self.config.local_ip);
        self.with_qp(qpn, |qp, _, cqs| qp.modify(attr, mask, mac, ip, cqs))
    }

    /// RESET -> INIT -> RTR -> RTS in one call, with `remote` learned out of
    /// band; the access flags are set at INIT.
    pub fn connect(
        &mut self,
        qpn: u32,
        remote: &RemoteQp,
        opts: &ConnectOptions,
    ) -> Result<(), VerbsError> {
        let attr = QpAttr {
            state: QpState::Init,
            path_mtu: opts.path_mtu,
            timeout: opts.timeout,
            retry_cnt: opts.retry_cnt,
            rnr_retry: opts.rnr_retry,
            min_rnr_timer: opts.min_rnr_timer,
            max_rd_atomic: opts.max_rd_atomic,
            max_dest_rd_atomic: opts.max_dest_rd_atomic,
            sq_psn: opts.sq_psn,
            rq_psn: remote.psn,
            dest_qpn: remote.qpn,
            remote: RemoteAddress {
                mac: remote.mac,
                ip: remote.ip,
                vlan: opts.vlan,
                ..RemoteAddress::default()
            },
            udp_src_port: opts.udp_src_port,
            dscp: opts.dscp.unwrap_or(self.config.cc.marking.data_dscp),
            ecn: opts.ecn.unwrap_or(self.config.cc.marking.data_ecn),
            access: opts.access,
            ..QpAttr::default()
        };
        // A UC QP takes none of RC's own attributes (rc/uc.rs).
        let uc = self.qp(qpn).map(Qp::transport) == Some(Transport::Uc);
        let rc_only = |m: QpAttrMask| if uc { QpAttrMask(m.0 & !RC_ONLY.0) } else { m };
        self.modify_qp(qpn, &attr, QpAttrMask::STATE | QpAttrMask::ACCESS_FLAGS)?;
        let rtr = QpAttr {
            state: QpState::Rtr,
            ..attr
        };
        self.modify_qp(
            qpn,
            &rtr,
            rc_only(
                QpAttrMask::STATE
                    | QpAttrMask::PATH_MTU
                    | QpAttrMask::DEST_QPN
                    | QpAttrMask::RQ_PSN
                    | QpAttrMask::AV
                    | QpAttrMask::MAX_DEST_RD_ATOMIC
                    | QpAttrMask::MIN_RNR_TIMER
                    | QpAttrMask::UDP_SRC_PORT
                    | QpAttrMask::TRAFFIC_CLASS,
            ),
        )?;
        let rts = QpAttr {
            state: QpState::Rts,
            ..attr
        };
        self.modify_qp(
            qpn,
            &rts,
            rc_only(
                QpAttrMask::STATE
                    | QpAttrMask::SQ_PSN
                    | QpAttrMask::TIMEOUT
                    | QpAttrMask::RETRY_CNT
                    | QpAttrMask::RNR_RETRY
                    | QpAttrMask::MAX_QP_RD_ATOMIC,
            ),
        )
    }

    /// State of a QP.
    pub fn qp_state(&self, qpn: u32) -> Option<QpState> {
        self.qp(qpn)
            .map(Qp::state)
            .or_else(|| self.ud.get(qpn).map(UdQp::state))
    }

    /// Post a send work request.
    pub fn post_send(&mut self, qpn: u32, wr: SendWr) -> Result<(), VerbsError> {
        self.with_qp(qpn, |qp, _, cqs| qp.post_send(wr, cqs))
    }

    /// Post a receive work request.
    pub fn post_recv(&mut self, qpn: u32, wr: RecvWr) -> Result<(), VerbsError> {
        self.with_qp(qpn, |qp, _, cqs| qp.post_recv(wr, cqs))
    }

    /// Give QP `qpn`, in RESET, room for more than one SGE a work request
    /// and for inline data (verbs `ibv_qp_cap`'s `max_send_sge`,
    /// `max_recv_sge`, `max_inline_data`; rxe's bounds [`crate::rc::MAX_SGE`]
    /// and [`crate::rc::MAX_INLINE_DATA`], beyond is `InvalidArgument`). A QP is made
    /// with one SGE each way and no inline data.
    pub fn set_qp_sge_caps(&mut self, qpn: u32, caps: SgeCaps) -> Result<(), VerbsError> {
        if !caps.is_valid() {
            return Err(VerbsError::InvalidArgument(
                "max_send_sge/max_recv_sge above 32 or max_inline_data above 512",
            ));
        }
        // A QP on an SRQ keeps room for the SRQ's lists (rc/srq.rs).
        let srq_sge = self
            .qps
            .get(qpn)
            .and_then(|q| q.srq())
            .and_then(|s| self.srq(s))
            .map_or(0, |s| s.attr().max_sge);
        let caps = SgeCaps {
            max_recv_sge: caps.max_recv_sge.max(srq_sge),
            ..caps
        };
        self.with_qp(qpn, |qp, _, _| qp.set_sge_caps(caps))
    }

    /// Post a send work request whose data is gathered from `sges`, up to
    /// the QP's `max_send_sge` of them (`wr.local` is ignored; the
    /// request's length is their total).
    pub fn post_send_sgl(&mut self, qpn: u32, wr: SendWr, sges: &[Sge]) -> Result<(), VerbsError> {
        self.with_qp(qpn, |qp, _, cqs| qp.post_send_sgl(wr, sges, cqs))
    }

    /// Post a SEND or WRITE (with or without immediate) carrying `data`
    /// inline, up to the QP's `max_inline_data` bytes: copied now, so the
    /// caller's buffer is free at once (`wr.local` is ignored).
    pub fn post_send_inline(
        &mut self,
        qpn: u32,
        wr: SendWr,
        data: &[u8],
    ) -> Result<(), VerbsError> {
        self.with_qp(qpn, |qp, _, cqs| qp.post_send_inline(wr, data, cqs))
    }

    /// Post a receive work request whose buffer is the list `sges`, up to
    /// the QP's `max_recv_sge` of them (none: only zero-length messages
    /// fit).
    pub fn post_recv_sgl(&mut self, qpn: u32, wr_id: u64, sges: &[Sge]) -> Result<(), VerbsError> {
        self.with_qp(qpn, |qp, _, cqs| qp.post_recv_sgl(wr_id, sges, cqs))
    }

    // ---- shared receive queues (rc/srq.rs) ----

    /// Create a shared receive queue in protection domain `pd`
    /// (`ibv_create_srq`): `attr.max_wr` receives of up to `attr.max_sge`
    /// entries, its limit armed at `attr.srq_limit` (0: disarmed). Returns
    /// its id; [`Endpoint::query_srq`] tells what it holds. At most
    /// [`crate::rc::MAX_SRQS`] at once.
    pub fn create_srq(&mut self, pd: u32, attr: SrqAttr) -> Result<u32, VerbsError> {
        let srq = Srq::new(pd, attr).map_err(|e| VerbsError::InvalidArgument(e.what()))?;
        let id = match self.srqs.iter().position(Option::is_none) {
            Some(i) => i,
            None if self.srqs.len() >= crate::rc::MAX_SRQS as usize => {
                return Err(VerbsError::ResourceExhausted)
            }
            None => {
                self.srqs.push(None);
                self.srqs.len() - 1
            }
        };
        self.srqs[id] = Some(srq);
        Ok(id as u32)
    }

    /// Arm its limit (`SrqAttrMask::LIMIT`) and/or resize it
    /// (`SrqAttrMask::MAX_WR`) (`ibv_modify_srq`; see `rc/srq.rs`).
    pub fn modify_srq(
        &mut self,
        srq: u32,
        attr: &SrqAttr,
        mask: SrqAttrMask,
    ) -> Result<(), VerbsError> {
        self.srq_mut(srq)
            .ok_or(VerbsError::UnknownSrq)?
            .modify(attr, mask)
            .map_err(|e| VerbsError::InvalidArgument(e.what()))
    }

    /// Its attributes now (`ibv_query_srq`).
    pub fn query_srq(&self, srq: u32) -> Result<SrqAttr, VerbsError> {
        self.srq(srq).map(Srq::attr).ok_or(VerbsError::UnknownSrq)
    }

    /// Destroy it (`ibv_destroy_srq`): refused while a QP created on it
    /// lives ([`VerbsError::Busy`]); the receives it holds go with it.
    pub fn destroy_srq(&mut self, srq: u32) -> Result<(), VerbsError> {
        let s = self.srq(srq).ok_or(VerbsError::UnknownSrq)?;
        if s.qps() > 0 {
            return Err(VerbsError::Busy);
        }
        self.srqs[srq as usize] = None;
        Ok(())
    }

    /// Post a receive to it (`ibv_post_srq_recv`). Its buffer is not
    /// looked at, as a QP's receive's is not (rxe): the QP that takes it
    /// writes through its own PD, and a key that does not work there
    /// fails the receive when a message lands. Any QP on it may take it,
    /// whatever their states.
    pub fn post_srq_recv(&mut self, srq: u32, wr: RecvWr) -> Result<(), VerbsError> {
        self.srqs
            .get_mut(srq as usize)
            .and_then(Option::as_mut)
            .ok_or(VerbsError::UnknownSrq)?
            .post_checked(wr)
    }

    /// Post a receive whose buffer is the SGE list `sges` to it, up to
    /// its `max_sge` entries (more: `InvalidArgument`), none of whose
    /// keys is looked at (as [`Endpoint::post_srq_recv`]); the receive's
    /// length is their total.
    pub fn post_srq_recv_sgl(
        &mut self,
        srq: u32,
        wr_id: u64,
        sges: &[Sge],
    ) -> Result<(), VerbsError> {
        self.srqs
            .get_mut(srq as usize)
            .and_then(Option::as_mut)
            .ok_or(VerbsError::UnknownSrq)?
            .post_list_checked(wr_id, sges)
    }

    /// A shared receive queue, for inspection.
    pub fn srq(&self, srq: u32) -> Option<&Srq> {
        self.srqs.get(srq as usize)?.as_ref()
    }

    fn srq_mut(&mut self, srq: u32) -> Option<&mut Srq> {
        self.srqs.get_mut(srq as usize)?.as_mut()
    }

    /// The next asynchronous event, if any: an SRQ whose limit was
    /// reached, or a QP on an SRQ that went to the error state, since the
    /// last look (each reported once).
    pub fn poll_event(&mut self) -> Option<AsyncEvent> {
        if let Some(i) = self
            .srqs
            .iter_mut()
            .position(|s| s.as_mut().is_some_and(Srq::take_limit_event))
        {
            return Some(AsyncEvent::SrqLimitReached { srq: i as u32 });
        }
        let Endpoint {
            srq_qps, qps, ud, ..
        } = self;
        let qpn = *srq_qps.iter().find(|&&q| {
            qps.get(q).is_some_and(Qp::last_wqe_reached)
                || ud.get(q).is_some_and(|u| u.last_wqe_reached)
        })?;
        match ud.get_mut(qpn) {
            Some(u) => u.last_wqe_reached = false,
            None => {
                qps.touch(qpn)?.1.take_last_wqe_reached();
            }
        }
        Some(AsyncEvent::QpLastWqeReached { qpn })
    }

    /// Move up to `out.len()` completions of `cq` into `out`; returns how many.
    pub fn poll_cq(&mut self, cq: u32, out: &mut [WorkCompletion]) -> usize {
        match self.cqs.get_mut(cq as usize) {
            Some(c) => c.poll(out),
            None => 0,
        }
    }

    /// Take one completion of `cq`.
    pub fn poll_completion(&mut self, cq: u32) -> Option<WorkCompletion> {
        self.cqs.get_mut(cq as usize)?.pop()
    }

    // ---- sans-IO ----

    /// Feed one received Ethernet frame. Anything that is not a valid RoCE v2
    /// packet for one of our QPs is counted and dropped.
    pub fn handle_packet(&mut self, now: Instant, frame: &[u8]) {
        if let Received::NotHere { .. } = self.receive(now, frame) {
            self.note_unknown_qp();
        }
    }

    /// Like [`Endpoint::handle_packet`], but a valid packet for a QP this
    /// endpoint does not hold is neither counted nor dropped here: it comes
    /// back as [`Received::NotHere`] so that the caller (a device with one
    /// endpoint per queue) can hand it to the endpoint that holds the QP,
    /// or count it with [`Endpoint::note_unknown_qp`].
    #[inline]
    pub fn receive(&mut self, now: Instant, frame: &[u8]) -> Received {
        // The borrowed view: headers are read from the frame bytes as the
        // QP needs them, never copied into an owned `RoceHeaders`.
        let f = match parse_frame_view(frame) {
            Ok(f) => f,
            Err(ParseError::BadIcrc { .. }) => {
                self.counters.dropped_bad_icrc += 1;
                return Received::Dropped;
            }
            Err(_) => {
                self.counters.dropped_malformed += 1;
                return Received::Dropped;
            }
        };
        let qpn = f.dest_qp();
        if f.opcode().is_ud() {
            return self.receive_ud(qpn, &f);
        }
        let Some((i, qp)) = self.qps.touch(qpn) else {
            if self.ud.contains(qpn) {
                // rxe check_type: an RC packet (or CNP) for a UD QP.
                self.counters.dropped_malformed += 1;
                return Received::Delivered { qpn };
            }
            return Received::NotHere { qpn };
        };
        if f.opcode() == Opcode::Cnp {
            // Checked as any packet of the QP (rc/congestion.rs).
            qp.handle_cnp(now, &f);
        } else {
            let srq = match qp.srq() {
                None => None,
                Some(s) => self.srqs.get_mut(s as usize).and_then(Option::as_mut),
            };
            qp.handle_packet(now, &f, &mut self.mrs, &mut self.cqs, srq);
        }
        self.qps.schedule(i);
        Received::Delivered { qpn }
    }

    /// The QP a received frame is for, found from its headers alone: no
    /// ICRC, no peer check, nothing counted or changed ([`peek_dest_qp`]).
    /// For a receiver that prefetches the QP's state a few frames ahead of
    /// [`Endpoint::receive`]: with thousands of QPs each frame finds its QP
    /// out of the caches, and received in no particular order the hardware
    /// cannot guess which (the engine's driver does, `driver::prefetch_qp`).
    #[inline]
    pub fn qp_hint(&self, frame: &[u8]) -> Option<&Qp> {
        self.qps.get(peek_dest_qp(frame)?)
    }

    /// Stage one of prefetching a received frame's QP, [`PREFETCH_FAR`]
    /// frames ahead of [`Endpoint::receive`]: where the lookup of its QP
    /// number reads (the bucket of the number index). Found from the
    /// frame's headers alone ([`peek_dest_qp`]); nothing of the endpoint is
    /// read.
    #[inline]
    pub fn qp_index_hint(&self, frame: &[u8]) -> Option<MemoryRange> {
        self.qps.index_range(peek_dest_qp(frame)?)
    }

    /// Stage two, [`PREFETCH_NEAR`] frames ahead: the QP's slot, its state
    /// (its counters included) and its schedule entry in one range, located
    /// through the index (which stage one brought into the caches) but not
    /// read. Done in one stage, the lookup reads the QP to find it (its
    /// slot is an `Option`) and waits for both misses in turn before it
    /// can even ask for the rest: with `examples/qp_scale_probe 65536 N
    /// shuffled`, the QP's first line and its schedule entry were most of
    /// the responder's time when the lookup was one stage.
    ///
    /// The second range is the memory of the request's payload (the first
    /// [`PAYLOAD_PREFETCH_BYTES`] of it): where a WRITE FIRST or ONLY
    /// places its bytes, what a READ request reads, an atomic's 8 bytes,
    /// as the frame's RETH or AtomicETH names them and the region allows;
    /// empty for any other frame. The QP's lookup and the responder's
    /// checks come later, as for the slot. Measured with
    /// `examples/qp_scale_probe 65536 N shuffled`: the WRITEs' region
    /// stays in the caches with one QP and
    /// not with 65,536 QPs, whose state pushes it out
    /// (`docs/design/qp-layout.md`, "The payload's memory").
    #[inline]
    pub fn qp_state_hint(&self, frame: &[u8]) -> Option<[MemoryRange; 2]> {
        let peeked = peek_request(frame)?;
        let slot = self.qps.state_range(peeked.dest_qp)?;
        let payload = self.payload_hint(frame, &peeked);
        Some([slot, payload.unwrap_or(MemoryRange::EMPTY)])
    }

    /// The memory a request frame's payload goes to or comes from (see
    /// [`Endpoint::qp_state_hint`]).
    #[inline]
    fn payload_hint(&self, frame: &[u8], peeked: &PeekedRequest) -> Option<MemoryRange> {
        let (op, rkey, va, len) = peek_remote_access(frame, peeked)?;
        let need = match op {
            Opcode::ReadRequest => Access::REMOTE_READ,
            Opcode::CompareSwap | Opcode::FetchAdd => Access::REMOTE_ATOMIC,
            _ => Access::REMOTE_WRITE,
        };
        let len = len.min(PAYLOAD_PREFETCH_BYTES as u64) as usize;
        self.mrs.range_hint(rkey, va, len, need)
    }

    /// [`Endpoint::qp_index_hint`] for QP `qpn`: for a driver that takes
    /// the application's posts in a batch and prefetches the QP of each a
    /// few posts ahead.
    #[inline]
    pub fn qpn_index_hint(&self, qpn: u32) -> Option<MemoryRange> {
        self.qps.index_range(qpn)
    }

    /// The memory a send request's data comes from (SEND and WRITE, with
    /// or without immediate: the first [`PAYLOAD_PREFETCH_BYTES`] of its
    /// scatter/gather entry, as the region allows); empty for the others
    /// (a READ's and an atomic's entry is written when the answer comes).
    /// For a driver that prefetches a post's QP a few posts ahead: the
    /// transmit copies the data into the frame.
    #[inline]
    pub fn send_payload_hint(&self, wr: &SendWr) -> MemoryRange {
        if wr.opcode.is_read_or_atomic() || wr.local.length == 0 {
            return MemoryRange::EMPTY;
        }
        let len = (wr.local.length as usize).min(PAYLOAD_PREFETCH_BYTES);
        self.mrs
            .range_hint(wr.local.lkey, wr.local.addr, len, Access::NONE)
            .unwrap_or(MemoryRange::EMPTY)
    }

    /// [`Endpoint::qp_state_hint`] for QP `qpn` (as
    /// [`Endpoint::qpn_index_hint`]).
    #[inline]
    pub fn qpn_state_hint(&self, qpn: u32) -> Option<MemoryRange> {
        self.qps.state_range(qpn)
    }

    /// Count a frame for a QP that no endpoint of the device holds
    /// (`dropped_unknown_qp`); see [`Endpoint::receive`].
    pub fn note_unknown_qp(&mut self) {
        self.counters.dropped_unknown_qp += 1;
    }

    /// Write the next frame to send into `buf` (a whole Ethernet frame) and
    /// return its length, or `None` when nothing is due now. QPs take turns
    /// (round robin over the ready list: only QPs that may have work are
    /// visited).
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<usize> {
        // RC and UD take turns while both have frames to send.
        let ud_waits = self.ud.wants_to_send();
        if ud_waits {
            self.ud_turn = !self.ud_turn;
            if self.ud_turn {
                if let Some(n) = self.transmit_ud(buf) {
                    return Some(n);
                }
            }
        }
        let (mrs, cqs) = (&mut self.mrs, &mut self.cqs);
        let copy_crc = self.config.copy_crc;
        let rc = self.qps.transmit(now, |qp, room| {
            qp.poll_transmit(now, copy_crc, room, mrs, cqs, buf)
        });
        if rc.is_some() || !ud_waits {
            return rc;
        }
        self.transmit_ud(buf)
    }

    /// Request packets this endpoint's QPs have outstanding together, as
    /// counted against [`EndpointConfig::max_inflight_packets`].
    pub fn inflight_packets(&self) -> u64 {
        self.qps.inflight()
    }

    /// Whether some QP has a frame ready (ignoring rate limits). Ready-list
    /// entries of QPs with nothing left to send are dropped on the way
    /// (`QpTable::any_ready`), so asking costs each such entry once.
    pub fn has_pending_transmit(&mut self) -> bool {
        self.ud.wants_to_send() || self.qps.any_ready(Qp::wants_to_send)
    }

    /// The earliest time `handle_timeout` (or a rate-limited `poll_transmit`)
    /// has work; `None` when nothing is scheduled. One look at the timer
    /// heap, whatever the number of QPs. It may be earlier than needed (a
    /// deadline that moved later): `handle_timeout` then does nothing.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.qps.next_deadline()
    }

    /// Run every timer due at `now` (ACK timeouts, RNR waits, congestion
    /// control): only QPs whose deadline has come are visited. Returns
    /// whether some QP's timers ran: `false` when the due heap entries
    /// were only stale ones (deadlines that had moved later or gone),
    /// which are dropped, so a driver can go back to sleep.
    pub fn handle_timeout(&mut self, now: Instant) -> bool {
        let cqs = &mut self.cqs;
        let mut ran = false;
        self.qps.expire(now, |qp| {
            qp.handle_timeout(now, cqs);
            ran = true;
        });
        ran
    }

    // ---- counters and hooks ----

    /// Sum of every QP's counters plus the endpoint's own drops.
    pub fn counters(&self) -> Counters {
        let mut c = self.counters;
        c.accumulate(&self.qps.counters());
        c.accumulate(&self.ud.counters());
        for cq in &self.cqs {
            c.cq_overflow += cq.overflows;
        }
        c
    }

    /// Counters of one QP.
    pub fn qp_counters(&self, qpn: u32) -> Option<Counters> {
        self.qp(qpn)
            .map(Qp::counters)
            .or_else(|| self.ud.get(qpn).map(UdQp::counters))
    }

    /// The congestion-control state of one QP.
    /// (The QP joins the ready list, whose visit re-arms its timer.)
    pub fn qp_congestion(&mut self, qpn: u32) -> Option<&mut QpCongestion> {
        self.qps.touch(qpn).map(|(_, q)| &mut q.cc)
    }

    /// Current DCQCN rate of every QP, `(qpn, bit/s)` (the line rate while
    /// a QP is not limited, or with DCQCN off), in a stable order. Its
    /// exact length is known up front: taking the first few QPs and
    /// counting the rest costs the few, not every QP.
    pub fn qp_rates(&self) -> impl ExactSizeIterator<Item = (u32, f64)> + '_ {
        self.qps.iter().map(|q| (q.qpn, q.cc.rate_bps()))
    }

    /// QP numbers of every QP.
    pub fn qpns(&self) -> impl ExactSizeIterator<Item = u32> + '_ {
        self.qps.iter().map(|q| q.qpn)
    }

    // ---- Unreliable Datagram (`crate::ud`) ----

    /// `qpn` is held by no QP here, RC or UD.
    #[inline]
    fn qpn_unused(&self, qpn: u32) -> bool {
        self.qps.slot(qpn).is_none() && !self.ud.contains(qpn)
    }

    /// Make an address handle in protection domain `pd` (verbs
    /// `ibv_create_ah`): where UD sends that name it go. Its IP must be of
    /// the endpoint's family. Returns its number.
    pub fn create_ah(&mut self, pd: u32, attr: &AhAttr) -> Result<u32, VerbsError> {
        self.ahs.create(pd, attr, self.config.local_ip)
    }

    /// [`Endpoint::create_ah`] under a number the caller chooses: a device
    /// whose queues each run an endpoint makes each handle in all of them
    /// under one number, so that a UD QP finds it wherever it lives.
    pub fn create_ah_numbered(
        &mut self,
        ah: u32,
        pd: u32,
        attr: &AhAttr,
    ) -> Result<u32, VerbsError> {
        self.ahs.create_at(ah, pd, attr, self.config.local_ip)
    }

    /// Destroy an address handle (`ibv_destroy_ah`). A send already posted
    /// with it and not yet sent then fails with a local QP operation error.
    pub fn destroy_ah(&mut self, ah: u32) -> Result<(), VerbsError> {
        self.ahs.destroy(ah)
    }

    /// An address handle's attributes and protection domain.
    pub fn ah(&self, ah: u32) -> Option<(u32, &AhAttr)> {
        self.ahs.get(ah)
    }

    /// Create a UD QP in RESET in protection domain `pd`, numbered at
    /// random among the free numbers of `FIRST_QPN..=MAX_QPN` (shared with
    /// the RC QPs, and counted against `max_qps` with them).
    pub fn create_ud_qp(&mut self, pd: u32, init: QpInitAttr) -> Result<u32, VerbsError> {
        self.check_init(&init)?;
        self.check_room()?;
        let qpn = self.draw_free_qpn()?;
        Ok(self.place_ud_qp(pd, qpn, init))
    }

    /// Create a UD QP in RESET under a number the caller chooses: one of
    /// `FIRST_QPN..=MAX_QPN` (a device numbering QPs across its queues'
    /// endpoints), or [`GSI_QPN`] (QP 1, the General Services Interface a
    /// connection manager runs, whose Q_Key is always
    /// [`crate::ud::GSI_QKEY`]).
    pub fn create_ud_qp_numbered(
        &mut self,
        pd: u32,
        qpn: u32,
        init: QpInitAttr,
    ) -> Result<u32, VerbsError> {
        if init.srq.is_some() {
            return Err(VerbsError::InvalidArgument(
                "a UD QP takes no shared receive queue here",
            ));
        }
        self.check_init(&init)?;
        if qpn == GSI_QPN {
            if !self.qpn_unused(qpn) {
                return Err(VerbsError::InvalidArgument("QP number in use"));
            }
        } else {
            self.check_free(qpn)?;
        }
        self.check_room()?;
        Ok(self.place_ud_qp(pd, qpn, init))
    }

    fn place_ud_qp(&mut self, pd: u32, qpn: u32, init: QpInitAttr) -> u32 {
        // On an SRQ (rxe allows it for UD): it takes the SRQ's receives
        // (`ud/receive.rs`) and holds no receive queue.
        let init = match init.srq {
            Some(s) => {
                if let Some(s) = self.srq_mut(s) {
                    s.attach();
                }
                self.srq_qps.push(qpn);
                QpInitAttr {
                    max_recv_wr: 1,
                    ..init
                }
            }
            None => init,
        };
        let mut qp = UdQp::new(qpn, pd, init);
        // A first send PSN drawn as an RC QP's is (RTS sets the real one).
        qp.psn = self.rng.next_u24();
        self.ud.insert(qp);
        qpn
    }

    /// Whether `qpn` is a UD QP of this endpoint.
    pub fn is_ud_qp(&self, qpn: u32) -> bool {
        self.ud.contains(qpn)
    }

    /// A UD QP, for inspection.
    pub fn ud_qp(&self, qpn: u32) -> Option<&UdQp> {
        self.ud.get(qpn)
    }

    /// Every UD QP's number, in no particular order.
    pub fn ud_qpns(&self) -> impl ExactSizeIterator<Item = u32> + '_ {
        self.ud.qpns()
    }

    /// Modify a UD QP (`ibv_modify_qp` for `IBV_QPT_UD`): attributes
    /// selected by `mask`, transitions as IBA 11.2.4.2 gives them for UD
    /// (`crate::ud`'s `qp.rs`).
    pub fn modify_ud_qp(
        &mut self,
        qpn: u32,
        attr: &UdQpAttr,
        mask: UdQpAttrMask,
    ) -> Result<(), VerbsError> {
        let qp = self.ud.get_mut(qpn).ok_or(VerbsError::UnknownQp)?;
        let r = qp.modify(attr, mask, &mut self.cqs);
        self.ud.schedule(qpn);
        r
    }

    /// Post a UD send: one datagram to the address handle, QP and Q_Key
    /// the request names.
    pub fn post_ud_send(&mut self, qpn: u32, wr: UdSendWr) -> Result<(), VerbsError> {
        let qp = self.ud.get_mut(qpn).ok_or(VerbsError::UnknownQp)?;
        let r = qp.post_send(wr, &self.ahs, &mut self.cqs);
        self.ud.schedule(qpn);
        r
    }

    /// Post a receive to a UD QP: its buffer gets the 40-byte GRH area
    /// and then the message ([`crate::ud::GRH_LEN`]).
    pub fn post_ud_recv(&mut self, qpn: u32, wr: RecvWr) -> Result<(), VerbsError> {
        let qp = self.ud.get_mut(qpn).ok_or(VerbsError::UnknownQp)?;
        qp.post_recv(wr, &mut self.cqs)
    }

    /// Destroy a UD QP (its outstanding work is dropped without
    /// completions; the endpoint's counters keep what it counted).
    pub fn destroy_ud_qp(&mut self, qpn: u32) -> Result<(), VerbsError> {
        let qp = self.ud.remove(qpn).ok_or(VerbsError::UnknownQp)?;
        if let Some(s) = qp.init.srq.and_then(|s| self.srq_mut(s)) {
            s.detach();
            self.srq_qps.retain(|&q| q != qpn);
        }
        self.counters.accumulate(&qp.counters());
        Ok(())
    }

    /// A valid frame with a UD opcode: to its UD QP (rxe check_type: a
    /// UD packet for an RC QP is dropped, counted as malformed).
    fn receive_ud(&mut self, qpn: u32, f: &crate::wire::RoceFrameView<'_>) -> Received {
        // UD has no peer to check, but a datagram must be addressed to
        // this endpoint's IP (rxe gets only what the kernel routes to
        // its address).
        let to_us = match self.config.local_ip {
            core::net::IpAddr::V4(ip) => f.ipv4_addrs().is_some_and(|(_, dst)| dst == ip),
            core::net::IpAddr::V6(ip) => f.ipv6_addrs().is_some_and(|(_, dst)| dst == ip),
        };
        if !to_us && self.has_qp(qpn) {
            self.counters.dropped_wrong_peer += 1;
            return Received::Delivered { qpn };
        }
        if self
            .ud
            .receive(qpn, f, &mut self.mrs, &mut self.cqs, &mut self.srqs)
            .is_some()
        {
            return Received::Delivered { qpn };
        }
        if self.qps.slot(qpn).is_some() {
            self.counters.dropped_malformed += 1;
            return Received::Delivered { qpn };
        }
        Received::NotHere { qpn }
    }

    /// The next UD datagram, if one waits.
    fn transmit_ud(&mut self, buf: &mut [u8]) -> Option<usize> {
        let ctx = crate::ud::SendContext {
            local_mac: self.config.local_mac,
            local_ip: self.config.local_ip,
            ahs: &self.ahs,
            mrs: &self.mrs,
        };
        self.ud.transmit(&ctx, &mut self.cqs, buf)
    }
}
