//! The CM agent: every connection of one port, as the Linux kernel's
//! `drivers/infiniband/core/cm.c` runs them (IBA 12.9 state diagrams).
//!
//! The consumer's calls (`connect`, `accept`, ...) are in this file; the
//! received-MAD handlers in `receive.rs`, the timers in `timers.rs`, the
//! message formats in `format.rs`.

use std::collections::{BTreeSet, HashMap, VecDeque};

use super::config::{AcceptParams, CmConfig, ConnectParams, MadAddress};
use super::conn::{Conn, Retry, State};
use super::counters::CmCounters;
use super::error::CmError;
use super::event::{CmEvent, PrivateData};
use super::mad::{
    msg_code, rej_reason, sidr_status, DREP_PRIVATE_DATA, DREQ_PRIVATE_DATA, MAD_SIZE,
    REJ_PRIVATE_DATA, REP_PRIVATE_DATA, REQ_PRIVATE_DATA, RTU_PRIVATE_DATA, SIDR_REP_PRIVATE_DATA,
    SIDR_REQ_PRIVATE_DATA,
};
use super::timing::iba_time;
use super::{ConnId, ListenerId};
use crate::time::Instant;

/// The kernel's (ucma's) default and maximum listen backlog: a backlog of
/// 0 means this one.
pub const MAX_BACKLOG: u32 = 1024;

/// A listener (the kernel's listening cm_id).
#[derive(Debug, Clone)]
pub(crate) struct Listener {
    pub(crate) service_id: u64,
    pub(crate) backlog: u32,
    /// REQs received and not accepted / rejected yet.
    pub(crate) pending: u32,
}

/// Every connection of one port (one GSI, QP 1), sans-IO.
#[derive(Debug)]
pub struct CmAgent {
    pub(crate) config: CmConfig,
    pub(crate) counters: CmCounters,
    pub(crate) conns: HashMap<ConnId, Conn>,
    pub(crate) listeners: HashMap<ListenerId, Listener>,
    next_listener: ListenerId,
    next_comm_id: u32,
    /// (remote comm ID, remote CA GUID) -> connection: duplicate REQs and
    /// REPs (cm.c's remote_id_table).
    pub(crate) remote_ids: HashMap<(u32, u64), ConnId>,
    /// (remote QPN, remote CA GUID) -> connection: stale connections
    /// (cm.c's remote_qpn_table; left when timewait starts).
    pub(crate) remote_qpns: HashMap<(u32, u64), ConnId>,
    /// (request ID, peer GID) -> received SIDR request: duplicates.
    pub(crate) remote_sidr: HashMap<(u32, [u8; 16]), ConnId>,
    /// Passive connections between REQ and RTU.
    pub(crate) half_open: usize,
    /// Every connection's next deadline: `poll_timeout` without a scan.
    pub(crate) timers: BTreeSet<(Instant, ConnId)>,
    tx: VecDeque<(MadAddress, [u8; MAD_SIZE])>,
    events: VecDeque<CmEvent>,
}

/// The REQ's timeout (cm.c's cm_send_req): the round trip (twice the
/// packet life time) plus the peer's CM response time.
pub(crate) fn req_timeout(
    packet_life_time: u8,
    remote_cm_response_timeout: u8,
) -> core::time::Duration {
    iba_time(packet_life_time) * 2 + iba_time(remote_cm_response_timeout)
}

/// The local ACK timeout of a path (cm.c's cm_ack_timeout): the packet
/// life time plus one, then the CA's ACK delay accounted for.
pub(crate) fn ack_timeout(ca_ack_delay: u8, packet_life_time: u8) -> u8 {
    let mut t = packet_life_time.saturating_add(1);
    if t >= ca_ack_delay {
        t += u8::from(ca_ack_delay >= t - 1);
    } else {
        t = ca_ack_delay + u8::from(t >= ca_ack_delay.saturating_sub(1));
    }
    t.min(31)
}

impl CmAgent {
    /// An agent with no listener and no connection.
    pub fn new(config: CmConfig) -> CmAgent {
        let first = config.first_comm_id;
        CmAgent {
            config,
            counters: CmCounters::default(),
            conns: HashMap::new(),
            listeners: HashMap::new(),
            next_listener: 1,
            next_comm_id: first,
            remote_ids: HashMap::new(),
            remote_qpns: HashMap::new(),
            remote_sidr: HashMap::new(),
            half_open: 0,
            timers: BTreeSet::new(),
            tx: VecDeque::new(),
            events: VecDeque::new(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &CmConfig {
        &self.config
    }

    /// Connections (and SIDR requests) the agent holds, timewait included.
    pub fn connection_count(&self) -> usize {
        self.conns.len()
    }

    /// Passive connections between REQ and RTU.
    pub fn half_open_count(&self) -> usize {
        self.half_open
    }

    /// MADs waiting for `poll_transmit`.
    pub fn pending_transmits(&self) -> usize {
        self.tx.len()
    }

    /// The service IDs listened on now, in no order (a port shared with
    /// other agents publishes them: [`super::mad_owner`]).
    pub fn service_ids(&self) -> impl Iterator<Item = u64> + '_ {
        self.listeners.values().map(|l| l.service_id)
    }

    /// Listens on `service_id`: REQs and SIDR_REQs for it become
    /// `ReqReceived` / `SidrReqReceived`. At most `backlog` REQs wait for
    /// the consumer's accept / reject (0: the kernel's default, 1024);
    /// beyond, a REQ is dropped as the kernel drops it (the active side
    /// retries) and counted in `backlog_refused`.
    pub fn listen(&mut self, service_id: u64, backlog: u32) -> Result<ListenerId, CmError> {
        if self.listeners.values().any(|l| l.service_id == service_id) {
            return Err(CmError::AddressInUse);
        }
        let backlog = if backlog == 0 || backlog > MAX_BACKLOG {
            MAX_BACKLOG
        } else {
            backlog
        };
        let id = self.next_listener;
        self.next_listener = self.next_listener.wrapping_add(1).max(1);
        self.listeners.insert(
            id,
            Listener {
                service_id,
                backlog,
                pending: 0,
            },
        );
        Ok(id)
    }

    /// Stops listening (connections already received stay).
    pub fn unlisten(&mut self, listener: ListenerId) {
        self.listeners.remove(&listener);
    }

    /// Active side: sends a REQ (IBA 12.6.5; the kernel's cm_format_req
    /// for a RoCE path).
    pub fn connect(&mut self, now: Instant, p: &ConnectParams) -> Result<ConnId, CmError> {
        if p.private_data.len() > REQ_PRIVATE_DATA {
            return Err(CmError::PrivateDataTooLong);
        }
        if !(1..=5).contains(&p.path_mtu) {
            return Err(CmError::InvalidArgument(
                "path_mtu must be 1..5 (256..4096)",
            ));
        }
        if p.local_qpn > 0x00FF_FFFF || p.local_qpn < 2 {
            return Err(CmError::InvalidArgument(
                "local_qpn must be a 24-bit QPN above 1",
            ));
        }
        if p.local_cm_response_timeout > 31 || p.remote_cm_response_timeout > 31 {
            return Err(CmError::InvalidArgument("CM response timeouts are 5 bits"));
        }
        if p.max_cm_retries > 15 || p.retry_count > 7 || p.rnr_retry_count > 7 {
            return Err(CmError::InvalidArgument(
                "max_cm_retries is 4 bits, retry counts 3",
            ));
        }
        if self.conns.len() >= self.config.max_connections {
            return Err(CmError::TooManyConnections);
        }
        let id = self.alloc_comm_id();
        let tid = self.form_tid(id);
        let timeout = req_timeout(self.config.packet_life_time, p.remote_cm_response_timeout);
        let mad = self.format_req(id, tid, p);
        let conn = Conn {
            id,
            state: State::ReqSent,
            passive: false,
            listener: None,
            peer: p.peer,
            remote_comm_id: 0,
            remote_ca_guid: 0,
            remote_qpn: 0,
            local_qpn: p.local_qpn,
            service_id: p.service_id,
            tid,
            timeout,
            max_cm_retries: p.max_cm_retries,
            retry: None,
            timewait_end: None,
            service_timeout: 0,
            private_data: PrivateData::EMPTY,
            destroyed: false,
            scheduled: None,
        };
        self.conns.insert(id, conn);
        self.send_with_retry(now, id, mad, timeout, p.max_cm_retries);
        Ok(id)
    }

    /// Passive side: answers a REQ with a REP (IBA 12.6.8); the REP is
    /// resent until the RTU (or `establish`) or its retries run out.
    pub fn accept(&mut self, now: Instant, conn: ConnId, p: &AcceptParams) -> Result<(), CmError> {
        if p.private_data.len() > REP_PRIVATE_DATA {
            return Err(CmError::PrivateDataTooLong);
        }
        if p.local_qpn > 0x00FF_FFFF || p.local_qpn < 2 {
            return Err(CmError::InvalidArgument(
                "local_qpn must be a 24-bit QPN above 1",
            ));
        }
        if p.rnr_retry_count > 7 {
            return Err(CmError::InvalidArgument("rnr_retry_count is 3 bits"));
        }
        let c = self.live_conn(conn)?;
        if !matches!(c.state, State::ReqRcvd | State::MraReqSent) {
            return Err(CmError::InvalidState);
        }
        let (tid, timeout, retries) = (c.tid, c.timeout, c.max_cm_retries);
        let mad = self.format_rep(conn, tid, p);
        if let Some(c) = self.conns.get_mut(&conn) {
            c.local_qpn = p.local_qpn;
        }
        self.set_state(conn, State::RepSent);
        self.send_with_retry(now, conn, mad, timeout, retries);
        Ok(())
    }

    /// Sends a REJ (IBA 12.6.7; the kernel's ib_send_cm_rej) before the
    /// connection is established. The connection is gone afterwards (in
    /// timewait first if our REP was out).
    pub fn reject(
        &mut self,
        now: Instant,
        conn: ConnId,
        reason: u16,
        private_data: &[u8],
    ) -> Result<(), CmError> {
        if private_data.len() > REJ_PRIVATE_DATA {
            return Err(CmError::PrivateDataTooLong);
        }
        let c = self.live_conn(conn)?;
        match c.state {
            State::ReqSent
            | State::MraReqRcvd
            | State::ReqRcvd
            | State::MraReqSent
            | State::RepRcvd
            | State::MraRepSent => {
                self.send_rej(conn, reason, &[], private_data);
                self.remove_conn(conn);
            }
            State::RepSent | State::MraRepRcvd => {
                self.send_rej(conn, reason, &[], private_data);
                self.enter_timewait(now, conn);
            }
            _ => return Err(CmError::InvalidState),
        }
        Ok(())
    }

    /// Sends an MRA for the received REQ or REP (IBA 12.6.6): the peer
    /// waits `4.096 us * 2^service_timeout` longer.
    pub fn send_mra(
        &mut self,
        now: Instant,
        conn: ConnId,
        service_timeout: u8,
    ) -> Result<(), CmError> {
        let _ = now;
        if service_timeout > 31 {
            return Err(CmError::InvalidArgument("service_timeout is 5 bits"));
        }
        let c = self.live_conn(conn)?;
        let (next, what) = match c.state {
            State::ReqRcvd => (State::MraReqSent, msg_code::REQ),
            State::RepRcvd => (State::MraRepSent, msg_code::REP),
            _ => return Err(CmError::InvalidState),
        };
        if let Some(c) = self.conns.get_mut(&conn) {
            c.service_timeout = service_timeout;
            c.private_data = PrivateData::EMPTY;
        }
        self.set_state(conn, next);
        let mad = self.format_mra(conn, what);
        self.queue_to_conn(conn, mad);
        Ok(())
    }

    /// Active side: sends the RTU after `RepReceived` (IBA 12.6.9); the
    /// connection is established (an `Established` event follows).
    pub fn send_rtu(
        &mut self,
        now: Instant,
        conn: ConnId,
        private_data: &[u8],
    ) -> Result<(), CmError> {
        let _ = now;
        if private_data.len() > RTU_PRIVATE_DATA {
            return Err(CmError::PrivateDataTooLong);
        }
        let c = self.live_conn(conn)?;
        if !matches!(c.state, State::RepRcvd | State::MraRepSent) {
            return Err(CmError::InvalidState);
        }
        if let Some(c) = self.conns.get_mut(&conn) {
            c.private_data = PrivateData::new(private_data);
        }
        self.set_state(conn, State::Established);
        self.counters.established += 1;
        let mad = self.format_rtu(conn);
        self.queue_to_conn(conn, mad);
        self.emit(conn, CmEvent::Established { conn });
        Ok(())
    }

    /// Passive side: data arrived before the RTU (IBA 12.6.5 "communication
    /// established"): established now, the REP is not resent. `Ok` if
    /// already established.
    pub fn establish(&mut self, now: Instant, conn: ConnId) -> Result<(), CmError> {
        let _ = now;
        let c = self.live_conn(conn)?;
        match c.state {
            State::RepSent | State::MraRepRcvd => {
                self.cancel_retry(conn);
                self.set_state(conn, State::Established);
                self.counters.established += 1;
                self.emit(conn, CmEvent::Established { conn });
                Ok(())
            }
            State::Established => Ok(()),
            _ => Err(CmError::InvalidState),
        }
    }

    /// Sends a DREQ (IBA 12.6.10) when established (resent until the DREP
    /// or its retries run out: `Disconnected` then), or the DREP after a
    /// `DisconnectRequested` (timewait follows). `Ok` and nothing sent if a
    /// DREQ is already out or the connection is in timewait.
    pub fn disconnect(
        &mut self,
        now: Instant,
        conn: ConnId,
        private_data: &[u8],
    ) -> Result<(), CmError> {
        let c = self.live_conn(conn)?;
        match c.state {
            State::Established => {
                if private_data.len() > DREQ_PRIVATE_DATA {
                    return Err(CmError::PrivateDataTooLong);
                }
                let (timeout, retries) = (c.timeout, c.max_cm_retries);
                let tid = self.form_tid(conn);
                if let Some(c) = self.conns.get_mut(&conn) {
                    c.tid = tid;
                }
                let mad = self.format_dreq(conn, private_data);
                self.set_state(conn, State::DreqSent);
                self.send_with_retry(now, conn, mad, timeout, retries);
                Ok(())
            }
            State::DreqRcvd => {
                if private_data.len() > DREP_PRIVATE_DATA {
                    return Err(CmError::PrivateDataTooLong);
                }
                if let Some(c) = self.conns.get_mut(&conn) {
                    c.private_data = PrivateData::new(private_data);
                }
                let tid = self.conns[&conn].tid;
                let mad = self.format_drep(conn, tid);
                self.queue_to_conn(conn, mad);
                self.enter_timewait(now, conn);
                Ok(())
            }
            State::DreqSent | State::Timewait => Ok(()),
            _ => Err(CmError::InvalidState),
        }
    }

    /// Sends a SIDR_REQ (IBA 12.11.1): resent every `4.096 us * 2^timeout`
    /// at most `retries` times; `SidrRepReceived` or `SidrUnreachable`
    /// ends it.
    pub fn sidr_request(
        &mut self,
        now: Instant,
        service_id: u64,
        peer: MadAddress,
        private_data: &[u8],
        timeout: u8,
        retries: u8,
    ) -> Result<ConnId, CmError> {
        if private_data.len() > SIDR_REQ_PRIVATE_DATA {
            return Err(CmError::PrivateDataTooLong);
        }
        if timeout > 31 {
            return Err(CmError::InvalidArgument("timeout is an exponent up to 31"));
        }
        if self.conns.len() >= self.config.max_connections {
            return Err(CmError::TooManyConnections);
        }
        let id = self.alloc_comm_id();
        let tid = self.form_tid(id);
        let interval = iba_time(timeout);
        self.conns.insert(
            id,
            Conn {
                id,
                state: State::SidrReqSent,
                passive: false,
                listener: None,
                peer,
                remote_comm_id: 0,
                remote_ca_guid: 0,
                remote_qpn: 0,
                local_qpn: 0,
                service_id,
                tid,
                timeout: interval,
                max_cm_retries: retries,
                retry: None,
                timewait_end: None,
                service_timeout: 0,
                private_data: PrivateData::EMPTY,
                destroyed: false,
                scheduled: None,
            },
        );
        let mad = self.format_sidr_req(id, tid, service_id, private_data);
        self.send_with_retry(now, id, mad, interval, retries);
        Ok(id)
    }

    /// Answers a SIDR_REQ (IBA 12.11.2); the request is gone afterwards.
    pub fn sidr_reply(
        &mut self,
        now: Instant,
        conn: ConnId,
        status: u8,
        qpn: u32,
        qkey: u32,
        private_data: &[u8],
    ) -> Result<(), CmError> {
        let _ = now;
        if private_data.len() > SIDR_REP_PRIVATE_DATA {
            return Err(CmError::PrivateDataTooLong);
        }
        if qpn > 0x00FF_FFFF {
            return Err(CmError::InvalidArgument("qpn is 24 bits"));
        }
        let c = self.live_conn(conn)?;
        if c.state != State::SidrReqRcvd {
            return Err(CmError::InvalidState);
        }
        let mad = self.format_sidr_rep(conn, status, qpn, qkey, private_data);
        self.queue_to_conn(conn, mad);
        self.remove_conn(conn);
        Ok(())
    }

    /// The consumer dropped the connection (the kernel's cm_destroy_id):
    /// sends what its state asks (REJ "timeout" for our REQ, REJ "consumer
    /// defined" for a REQ / REP not answered, one DREQ if established, the
    /// DREP if a DREQ came, SIDR_REP "rejected" for a SIDR_REQ), then no
    /// more events for it; it stays in timewait as cm.c keeps it. Unknown
    /// or gone connections are ignored.
    pub fn destroy(&mut self, now: Instant, conn: ConnId) {
        let Some(c) = self.conns.get(&conn) else {
            return;
        };
        if c.destroyed {
            return;
        }
        match c.state {
            State::SidrReqSent => self.remove_conn(conn),
            State::SidrReqRcvd => {
                let mad = self.format_sidr_rep(conn, sidr_status::REJECT, 0, 0, &[]);
                self.queue_to_conn(conn, mad);
                self.remove_conn(conn);
            }
            State::ReqSent | State::MraReqRcvd => {
                let guid = self.config.ca_guid.to_be_bytes();
                self.send_rej(conn, rej_reason::TIMEOUT, &guid, &[]);
                self.remove_conn(conn);
            }
            State::ReqRcvd | State::MraReqSent | State::RepRcvd | State::MraRepSent => {
                self.send_rej(conn, rej_reason::CONSUMER_DEFINED, &[], &[]);
                self.remove_conn(conn);
            }
            State::RepSent | State::MraRepRcvd => {
                self.send_rej(conn, rej_reason::CONSUMER_DEFINED, &[], &[]);
                self.enter_timewait(now, conn);
            }
            State::Established => {
                let tid = self.form_tid(conn);
                if let Some(c) = self.conns.get_mut(&conn) {
                    c.tid = tid;
                }
                let mad = self.format_dreq(conn, &[]);
                self.queue_to_conn(conn, mad);
                self.enter_timewait(now, conn);
            }
            State::DreqSent => self.enter_timewait(now, conn),
            State::DreqRcvd => {
                // cm_destroy_id sends the DREP without private data.
                if let Some(c) = self.conns.get_mut(&conn) {
                    c.private_data = PrivateData::EMPTY;
                }
                let tid = self.conns[&conn].tid;
                let mad = self.format_drep(conn, tid);
                self.queue_to_conn(conn, mad);
                self.enter_timewait(now, conn);
            }
            State::Timewait => {}
        }
        if let Some(c) = self.conns.get_mut(&conn) {
            c.destroyed = true;
        }
    }

    /// The next MAD to send on QP 1, written into `buf`, and whom to.
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut [u8; MAD_SIZE]) -> Option<MadAddress> {
        let _ = now;
        let (to, mad) = self.tx.pop_front()?;
        buf.copy_from_slice(&mad);
        self.counters.mads_sent += 1;
        Some(to)
    }

    /// The next event.
    pub fn poll_event(&mut self) -> Option<CmEvent> {
        self.events.pop_front()
    }

    /// When `handle_timeout` next has work.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.timers.first().map(|&(t, _)| t)
    }

    /// The counters.
    pub fn counters(&self) -> &CmCounters {
        &self.counters
    }

    /// The connection's CM state name (for tools and tests), `None` if gone.
    pub fn state_name(&self, conn: ConnId) -> Option<&'static str> {
        self.conns.get(&conn).map(|c| c.state.name())
    }

    /// The peer's communication ID of a connection (0 while unknown; a
    /// received SIDR request's request ID), `None` if gone.
    pub fn remote_comm_id(&self, conn: ConnId) -> Option<u32> {
        self.conns.get(&conn).map(|c| c.remote_comm_id)
    }

    /// Connection IDs the agent holds (timewait included), in no order.
    pub fn connection_ids(&self) -> impl Iterator<Item = ConnId> + '_ {
        self.conns.keys().copied()
    }

    /// Checks the agent's own bookkeeping against its connections (for
    /// tests and the fuzz target): the timer set holds every deadline and
    /// nothing else, the half-open and backlog counts are the connections'
    /// states, the lookup tables point at connections with those IDs.
    pub fn check_invariants(&self) -> Result<(), &'static str> {
        let want: BTreeSet<(Instant, ConnId)> = self
            .conns
            .values()
            .filter_map(|c| c.deadline().map(|d| (d, c.id)))
            .collect();
        if want != self.timers {
            return Err("timer set differs from the connections' deadlines");
        }
        let half_open = self
            .conns
            .values()
            .filter(|c| c.passive && c.state.is_half_open_passive())
            .count();
        if half_open != self.half_open {
            return Err("half-open count differs from the connections' states");
        }
        for (id, l) in &self.listeners {
            let pending = self
                .conns
                .values()
                .filter(|c| c.passive && c.listener == Some(*id) && c.state.is_pending_accept())
                .count();
            if pending != l.pending as usize {
                return Err("a listener's backlog count differs from its connections");
            }
        }
        for (&(rid, guid), id) in &self.remote_ids {
            if !self
                .conns
                .get(id)
                .is_some_and(|c| c.remote_comm_id == rid && c.remote_ca_guid == guid)
            {
                return Err("remote ID table names a connection without that ID");
            }
        }
        for (&(qpn, guid), id) in &self.remote_qpns {
            if !self
                .conns
                .get(id)
                .is_some_and(|c| c.remote_qpn == qpn && c.remote_ca_guid == guid)
            {
                return Err("remote QPN table names a connection without that QPN");
            }
        }
        Ok(())
    }

    // ---- helpers shared by the calls, the handlers and the timers ----

    /// A connection the consumer still owns.
    pub(crate) fn live_conn(&self, conn: ConnId) -> Result<&Conn, CmError> {
        match self.conns.get(&conn) {
            Some(c) if !c.destroyed => Ok(c),
            _ => Err(CmError::UnknownConn),
        }
    }

    /// The next free local communication ID (never 0: 0 means "unknown"
    /// in REJ and MRA).
    /// With [`CmConfig::comm_id_prefix`], the ID's top byte is the
    /// prefix and the low 24 bits count.
    pub(crate) fn alloc_comm_id(&mut self) -> ConnId {
        loop {
            let mut id = self.next_comm_id;
            self.next_comm_id = self.next_comm_id.wrapping_add(1);
            if let Some(p) = self.config.comm_id_prefix {
                id = (u32::from(p) << 24) | (id & 0x00ff_ffff);
            }
            if id != 0 && !self.conns.contains_key(&id) {
                return id;
            }
        }
    }

    /// The transaction ID of a MAD sequence this connection starts (REQ,
    /// DREQ, SIDR_REQ): cm.c's cm_form_tid, the agent's high 32 bits and
    /// the local communication ID. Answers (REP, RTU, MRA, REJ, DREP,
    /// SIDR_REP) reuse the TID of the MAD they answer; retries reuse theirs.
    pub(crate) fn form_tid(&self, id: ConnId) -> u64 {
        (u64::from(self.config.tid_seed) << 32) | u64::from(id)
    }

    /// Moves a connection to `next`, keeping the half-open and backlog
    /// counts.
    pub(crate) fn set_state(&mut self, conn: ConnId, next: State) {
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        let prev = c.state;
        c.state = next;
        let passive = c.passive;
        let listener = c.listener;
        if passive {
            match (prev.is_half_open_passive(), next.is_half_open_passive()) {
                (true, false) => self.half_open = self.half_open.saturating_sub(1),
                (false, true) => self.half_open += 1,
                _ => {}
            }
            if let Some(l) = listener.and_then(|l| self.listeners.get_mut(&l)) {
                match (prev.is_pending_accept(), next.is_pending_accept()) {
                    (true, false) => l.pending = l.pending.saturating_sub(1),
                    (false, true) => l.pending += 1,
                    _ => {}
                }
            }
        }
    }

    /// Forgets a connection (the kernel's cm_reset_to_idle, then the
    /// consumer's destroy).
    pub(crate) fn remove_conn(&mut self, conn: ConnId) {
        let Some(c) = self.conns.get(&conn) else {
            return;
        };
        let (passive, listener, state) = (c.passive, c.listener, c.state);
        let (rid, rguid, rqpn, gid) =
            (c.remote_comm_id, c.remote_ca_guid, c.remote_qpn, c.peer.gid);
        if passive {
            if state.is_half_open_passive() {
                self.half_open = self.half_open.saturating_sub(1);
            }
            if state.is_pending_accept() {
                if let Some(l) = listener.and_then(|l| self.listeners.get_mut(&l)) {
                    l.pending = l.pending.saturating_sub(1);
                }
            }
        }
        if self.remote_ids.get(&(rid, rguid)) == Some(&conn) {
            self.remote_ids.remove(&(rid, rguid));
        }
        if self.remote_qpns.get(&(rqpn, rguid)) == Some(&conn) {
            self.remote_qpns.remove(&(rqpn, rguid));
        }
        if self.remote_sidr.get(&(rid, gid)) == Some(&conn) {
            self.remote_sidr.remove(&(rid, gid));
        }
        if let Some(t) = self.conns.get(&conn).and_then(|c| c.scheduled) {
            self.timers.remove(&(t, conn));
        }
        self.conns.remove(&conn);
    }

    /// Timewait (IBA 12.9.7; cm.c's cm_enter_timewait): no retransmission;
    /// the QPN leaves the stale table; `TimewaitExit` when it ends.
    pub(crate) fn enter_timewait(&mut self, now: Instant, conn: ConnId) {
        self.set_state(conn, State::Timewait);
        let end = now + self.config.timewait;
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        c.retry = None;
        c.timewait_end = Some(end);
        let key = (c.remote_qpn, c.remote_ca_guid);
        if self.remote_qpns.get(&key) == Some(&conn) {
            self.remote_qpns.remove(&key);
        }
        self.counters.timewaits += 1;
        self.sync_timer(conn);
    }

    /// Puts the connection's current deadline in the timer set (after any
    /// change of its retry or timewait).
    pub(crate) fn sync_timer(&mut self, conn: ConnId) {
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        let now = c.deadline();
        if c.scheduled == now {
            return;
        }
        if let Some(t) = c.scheduled {
            self.timers.remove(&(t, conn));
        }
        if let Some(t) = now {
            self.timers.insert((t, conn));
        }
        c.scheduled = now;
    }

    /// Stops retransmitting (the kernel's ib_cancel_mad).
    pub(crate) fn cancel_retry(&mut self, conn: ConnId) {
        if let Some(c) = self.conns.get_mut(&conn) {
            c.retry = None;
        }
        self.sync_timer(conn);
    }

    /// Sends `mad` to the connection's peer and resends it every
    /// `interval`, `retries` times, until answered.
    pub(crate) fn send_with_retry(
        &mut self,
        now: Instant,
        conn: ConnId,
        mad: [u8; MAD_SIZE],
        interval: core::time::Duration,
        retries: u8,
    ) {
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        c.retry = Some(Retry {
            mad,
            deadline: now + interval,
            interval,
            retries_left: retries,
        });
        let peer = c.peer;
        self.sync_timer(conn);
        self.queue(peer, mad);
    }

    /// Queues a MAD to the connection's peer.
    pub(crate) fn queue_to_conn(&mut self, conn: ConnId, mad: [u8; MAD_SIZE]) {
        if let Some(c) = self.conns.get(&conn) {
            let peer = c.peer;
            self.queue(peer, mad);
        }
    }

    /// Queues a MAD (a counted drop when the queue is full).
    pub(crate) fn queue(&mut self, to: MadAddress, mad: [u8; MAD_SIZE]) {
        if self.tx.len() >= self.config.max_tx_queue {
            self.counters.tx_dropped += 1;
            return;
        }
        self.tx.push_back((to, mad));
    }

    /// Reports an event about a connection already removed (the caller
    /// checked it was not destroyed).
    pub(crate) fn emit_gone(&mut self, ev: CmEvent) {
        if self.events.len() >= self.config.max_events {
            self.counters.events_dropped += 1;
            return;
        }
        self.events.push_back(ev);
    }

    /// Reports an event about `conn` unless the consumer destroyed it.
    pub(crate) fn emit(&mut self, conn: ConnId, ev: CmEvent) {
        if self.conns.get(&conn).is_some_and(|c| c.destroyed) {
            return;
        }
        if self.events.len() >= self.config.max_events {
            self.counters.events_dropped += 1;
            return;
        }
        self.events.push_back(ev);
    }

    /// Sends a REJ for this connection (cm.c's cm_format_rej) and counts it.
    pub(crate) fn send_rej(&mut self, conn: ConnId, reason: u16, ari: &[u8], private_data: &[u8]) {
        let mad = self.format_rej(conn, reason, ari, private_data);
        self.counters.rejects_sent += 1;
        self.queue_to_conn(conn, mad);
    }
}
