//! [`CmService`]: the RDMA connection manager on a [`Device`]: QP 1 (the
//! GSI) carrying the IB CM's MADs over RoCE v2, the sans-IO
//! [`CmAgent`] deciding what they say, and blocking
//! `connect` / `listen` + `accept` that move an RC QP through
//! INIT / RTR / RTS with what the exchange settles, as rdma_cm does for
//! an `RDMA_PS_TCP` id (IBTA vol 1 ch. 12; annex A11 for the IP CM
//! header at the start of a REQ's private data).
//!
//! The service is driven by whoever calls it ([`CmService::poll`], and
//! every blocking call): MADs that arrive while nobody calls wait in QP
//! 1's receive queue ([`RECV_SLOTS`] of them).

use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, Ipv6Addr};
use std::sync::Arc;
use std::time::Duration;

use proto::cm::mad::rej_reason;
use proto::cm::{
    ip as cm_ip, AcceptParams, CmAgent, CmConfig, CmError, CmEvent, ConnId, ConnectParams,
    ListenerId, MadAddress, Transport,
};

use crate::endpoint::{ConnectOptions, RemoteQp};
use crate::rc::{Access, Mtu, RecvWr, WcStatus, WorkCompletion};
use crate::time::Instant;
use crate::ud::{AhAttr, UdSendWr, GRH_LEN, GSI_QKEY, GSI_QPN};

use super::ud::UdQueuePair;
use super::{AddressHandle, Device, DeviceError, MemoryRegion, QpCaps, QueuePair, SharedCq};

/// MADs QP 1 can receive before anyone polls.
pub const RECV_SLOTS: usize = 64;
/// MADs in flight on QP 1's send queue.
const SEND_SLOTS: usize = 32;
/// A MAD.
const MAD_LEN: usize = 256;
/// Marks a send's work request ID (a receive's is its slot).
const SEND_TAG: u64 = 1 << 63;
/// A receive slot: the GRH area, then the MAD.
const RECV_SLOT: usize = GRH_LEN + MAD_LEN;
/// Events kept for callers that have not asked for them yet.
pub const MAX_EVENTS: usize = 1024;
/// The protection domain of QP 1 and its buffers.
const PD: u32 = 0;

/// Why a connection could not be made.
#[derive(Debug, thiserror::Error)]
pub enum CmServiceError {
    #[error("{0}")]
    Device(#[from] DeviceError),
    #[error("connection manager: {0:?}")]
    Cm(CmError),
    #[error("the peer rejected the connection (reason {reason})")]
    Rejected { reason: u16 },
    #[error("the peer did not answer the connection request (no REP / RTU)")]
    Unreachable,
    #[error("no connection within {0:?}")]
    TimedOut(Duration),
    #[error("{0}")]
    Invalid(&'static str),
}

impl From<CmError> for CmServiceError {
    fn from(e: CmError) -> Self {
        CmServiceError::Cm(e)
    }
}

/// What one side asks of a connection (rdma_cm's `rdma_conn_param`), and
/// the QP settings the exchange does not carry.
#[derive(Debug, Clone)]
pub struct CmParams {
    /// READs / atomics we accept in flight as a responder.
    pub responder_resources: u8,
    /// READs / atomics we keep in flight as a requester.
    pub initiator_depth: u8,
    /// Transport retries the peer's QP makes (REQ), 0..=7.
    pub retry_count: u8,
    /// RNR retries the peer's QP makes, 0..=7 (7: without limit).
    pub rnr_retry_count: u8,
    /// Our path MTU (the smaller of both sides' is used).
    pub path_mtu: Mtu,
    /// The remote operations our QP accepts.
    pub access: Access,
    /// The consumer's private data (after the IP CM header in a REQ).
    pub private_data: Vec<u8>,
    /// How long a blocking call waits.
    pub timeout: Duration,
}

impl Default for CmParams {
    fn default() -> Self {
        CmParams {
            responder_resources: 16,
            initiator_depth: 16,
            retry_count: 7,
            rnr_retry_count: 7,
            path_mtu: Mtu::Mtu1024,
            access: Access::ALL,
            private_data: Vec::new(),
            timeout: Duration::from_secs(10),
        }
    }
}

/// A connection request a listener received (`RDMA_CM_EVENT_CONNECT_REQUEST`).
#[derive(Debug, Clone)]
pub struct Request {
    pub listener: ListenerId,
    pub conn: ConnId,
    pub peer_ip: IpAddr,
    /// The active side's source port (the IP CM header's).
    pub peer_port: u16,
    pub remote_qpn: u32,
    pub starting_psn: u32,
    pub responder_resources: u8,
    pub initiator_depth: u8,
    pub retry_count: u8,
    pub rnr_retry_count: u8,
    pub path_mtu: u8,
    /// The consumer's private data (after the IP CM header).
    pub private_data: Vec<u8>,
}

/// An established connection.
#[derive(Debug, Clone)]
pub struct Connection {
    pub conn: ConnId,
    pub peer_ip: IpAddr,
    pub qpn: u32,
    pub remote_qpn: u32,
    /// The peer's private data (REP's on the active side, REQ's after the
    /// IP CM header on the passive side).
    pub private_data: Vec<u8>,
}

/// What the service counted (`roce-xdp stats`' CM block).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CmServiceCounters {
    pub mads_received: u64,
    pub mads_sent: u64,
    /// Receives completed in error or too short to hold a MAD.
    pub mads_dropped: u64,
    /// MADs the agent had ready while every send slot was busy (sent later).
    pub send_stalls: u64,
    pub connects: u64,
    pub accepts: u64,
    pub established: u64,
    pub rejected: u64,
    pub unreachable: u64,
    pub disconnects: u64,
    /// Events nobody took before [`MAX_EVENTS`] newer ones came.
    pub events_dropped: u64,
}

/// The connection manager of one device queue (see the module docs).
pub struct CmService {
    cq: Arc<SharedCq>,
    queue: u32,
    gsi: UdQueuePair,
    mr: MemoryRegion,
    agent: CmAgent,
    ahs: HashMap<[u8; 16], AddressHandle>,
    macs: HashMap<IpAddr, [u8; 6]>,
    free_send: Vec<usize>,
    origin: std::time::Instant,
    events: VecDeque<CmEvent>,
    counters: CmServiceCounters,
    wcs: Vec<WorkCompletion>,
}

impl std::fmt::Debug for CmService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CmService")
            .field("queue", &self.queue)
            .field("counters", &self.counters)
            .finish_non_exhaustive()
    }
}

/// RoCE v2's GID of an IP address (IPv4 mapped into IPv6).
pub fn gid_of(ip: IpAddr) -> [u8; 16] {
    match ip {
        IpAddr::V4(a) => a.to_ipv6_mapped().octets(),
        IpAddr::V6(a) => a.octets(),
    }
}

/// The IP address of a RoCE v2 GID.
pub fn ip_of(gid: [u8; 16]) -> IpAddr {
    let a = Ipv6Addr::from(gid);
    match a.to_ipv4_mapped() {
        Some(v4) => IpAddr::V4(v4),
        None => IpAddr::V6(a),
    }
}

/// The IB MTU enum (1..=5) of an MTU, as the CM carries it.
fn mtu_code(m: Mtu) -> u8 {
    match m.bytes() {
        256 => 1,
        512 => 2,
        1024 => 3,
        2048 => 4,
        _ => 5,
    }
}

fn mtu_of_code(c: u8) -> Mtu {
    Mtu::from_bytes(128u32 << c.clamp(1, 5)).unwrap_or(Mtu::Mtu1024)
}

impl CmService {
    /// Creates QP 1 on queue `cq.queue()` and posts its receives.
    pub fn new(cq: Arc<SharedCq>) -> Result<CmService, DeviceError> {
        let dev = cq.device().clone();
        let queue = cq.queue();
        let caps = QpCaps {
            max_send_wr: SEND_SLOTS as u32,
            max_recv_wr: RECV_SLOTS as u32,
        };
        let gsi = dev.create_gsi_qp(queue, PD, caps)?;
        let built = (|| {
            gsi.ready(GSI_QKEY, 0)?;
            let mr = dev.register_memory(
                queue,
                RECV_SLOTS * RECV_SLOT + SEND_SLOTS * MAD_LEN,
                Access::LOCAL_WRITE,
            )?;
            for slot in 0..RECV_SLOTS {
                gsi.post_recv(RecvWr {
                    wr_id: slot as u64,
                    sge: mr.sge(slot * RECV_SLOT, RECV_SLOT as u32),
                })?;
            }
            Ok::<_, DeviceError>(mr)
        })();
        let mr = match built {
            Ok(mr) => mr,
            Err(e) => {
                let _ = gsi.destroy();
                return Err(e);
            }
        };
        let local_gid = gid_of(dev.ip());
        let mac = dev.mac();
        let ca_guid = u64::from_be_bytes([
            mac[0] ^ 2,
            mac[1],
            mac[2],
            0xff,
            0xfe,
            mac[3],
            mac[4],
            mac[5],
        ]);
        let agent = CmAgent::new(CmConfig {
            local_gid,
            ca_guid,
            // Attached to a shared engine: the service finds our MADs by
            // this byte (docs/shared-engine.md).
            comm_id_prefix: dev.attachment_slot(),
            ..CmConfig::default()
        });
        // `roce-xdp stats` shows the CM from now on.
        *dev.cm_counters.lock().unwrap_or_else(|e| e.into_inner()) = Some(*agent.counters());
        Ok(CmService {
            cq,
            queue,
            gsi,
            mr,
            agent,
            ahs: HashMap::new(),
            macs: HashMap::new(),
            free_send: (0..SEND_SLOTS).collect(),
            origin: std::time::Instant::now(),
            events: VecDeque::new(),
            counters: CmServiceCounters::default(),
            wcs: vec![WorkCompletion::default(); 32],
        })
    }

    /// The device.
    pub fn device(&self) -> &Arc<Device> {
        self.cq.device()
    }

    /// What the service counted.
    pub fn counters(&self) -> CmServiceCounters {
        self.counters
    }

    /// The agent's own counters.
    pub fn agent_counters(&self) -> &proto::cm::CmCounters {
        self.agent.counters()
    }

    fn now(&self) -> Instant {
        Instant::from_nanos(self.origin.elapsed().as_nanos() as u64)
    }

    /// One round: MADs received handed to the agent, timers run, MADs the
    /// agent has to send posted, events collected (take them with
    /// [`CmService::poll_event`]). Returns whether anything happened.
    pub fn poll(&mut self) -> Result<bool, DeviceError> {
        let mut busy = false;
        let n = self.cq.poll(|qpn| qpn == GSI_QPN, &mut self.wcs[..]);
        for i in 0..n {
            let wc = self.wcs[i];
            busy = true;
            self.completed(&wc)?;
        }
        let now = self.now();
        if self.agent.poll_timeout().is_some_and(|t| t <= now) {
            self.agent.handle_timeout(now);
        }
        busy |= self.transmit(now)?;
        while let Some(e) = self.agent.poll_event() {
            busy = true;
            // Nothing here waits for a QP number to leave timewait (a
            // connection gets a fresh QP); every other event is kept for
            // its caller, the oldest dropped (and counted) beyond a bound.
            if matches!(e, CmEvent::TimewaitExit { .. }) {
                continue;
            }
            if self.events.len() >= MAX_EVENTS {
                self.events.pop_front();
                self.counters.events_dropped += 1;
            }
            self.events.push_back(e);
        }
        if busy {
            // For `roce-xdp stats` (the device's stats source reads it).
            *self
                .cq
                .device()
                .cm_counters
                .lock()
                .unwrap_or_else(|e| e.into_inner()) = Some(*self.agent.counters());
        }
        Ok(busy)
    }

    fn completed(&mut self, wc: &WorkCompletion) -> Result<(), DeviceError> {
        match wc.wr_id & SEND_TAG == 0 {
            true => {
                let slot = wc.wr_id as usize;
                if slot >= RECV_SLOTS {
                    self.counters.mads_dropped += 1;
                    return Ok(());
                }
                let len = (wc.byte_len as usize).saturating_sub(GRH_LEN);
                match (&wc.ud, wc.status) {
                    (Some(src), WcStatus::Success) if len >= MAD_LEN => {
                        let mut mad = [0u8; MAD_LEN];
                        self.mr.read(slot * RECV_SLOT + GRH_LEN, &mut mad);
                        self.counters.mads_received += 1;
                        let from = MadAddress {
                            gid: src.sgid,
                            qpn: src.src_qp,
                            qkey: GSI_QKEY,
                            pkey_index: 0,
                        };
                        let now = self.now();
                        self.agent.handle_mad(now, &from, &mad);
                    }
                    _ => self.counters.mads_dropped += 1,
                }
                if wc.status != WcStatus::Flushed {
                    self.gsi.post_recv(RecvWr {
                        wr_id: slot as u64,
                        sge: self.mr.sge(slot * RECV_SLOT, RECV_SLOT as u32),
                    })?;
                }
            }
            false => {
                // A send: its slot is free again.
                let slot = (wc.wr_id & !SEND_TAG) as usize;
                if slot < SEND_SLOTS && !self.free_send.contains(&slot) {
                    self.free_send.push(slot);
                }
            }
        }
        Ok(())
    }

    fn transmit(&mut self, now: Instant) -> Result<bool, DeviceError> {
        let mut sent = false;
        loop {
            let Some(slot) = self.free_send.pop() else {
                self.counters.send_stalls += 1;
                return Ok(sent);
            };
            let mut buf = [0u8; MAD_LEN];
            let Some(to) = self.agent.poll_transmit(now, &mut buf) else {
                self.free_send.push(slot);
                return Ok(sent);
            };
            let ah = match self.ah_for(to.gid) {
                Ok(ah) => ah,
                Err(e) => {
                    self.free_send.push(slot);
                    return Err(e);
                }
            };
            let at = RECV_SLOTS * RECV_SLOT + slot * MAD_LEN;
            self.mr.write(at, &buf);
            let wr = UdSendWr::new(
                SEND_TAG | slot as u64,
                self.mr.sge(at, MAD_LEN as u32),
                ah,
                to.qpn,
                GSI_QKEY,
            );
            self.gsi.post_send(wr)?;
            self.counters.mads_sent += 1;
            sent = true;
        }
    }

    /// `ip`'s MAC (the kernel's neighbour table, asked once per peer).
    fn mac_of(&mut self, ip: IpAddr) -> Result<[u8; 6], DeviceError> {
        if let Some(mac) = self.macs.get(&ip) {
            return Ok(*mac);
        }
        let mac = self.cq.device().resolve_mac(ip)?;
        self.macs.insert(ip, mac);
        Ok(mac)
    }

    /// The address handle to `gid`'s QP 1 (made on first use).
    fn ah_for(&mut self, gid: [u8; 16]) -> Result<u32, DeviceError> {
        if let Some(ah) = self.ahs.get(&gid) {
            return Ok(ah.id());
        }
        let ip = ip_of(gid);
        let dev = self.cq.device().clone();
        let mac = self.mac_of(ip)?;
        let mut attr = AhAttr::default();
        attr.remote.mac = mac;
        attr.remote.ip = ip;
        let ah = dev.create_ah(PD, attr)?;
        let id = ah.id();
        self.ahs.insert(gid, ah);
        Ok(id)
    }

    /// The next event (after [`CmService::poll`]).
    pub fn poll_event(&mut self) -> Option<CmEvent> {
        self.events.pop_front()
    }

    /// Polls until `pick` takes an event (events it leaves stay queued, in
    /// order) or `timeout` passes.
    fn wait_for<T>(
        &mut self,
        timeout: Duration,
        mut pick: impl FnMut(&CmEvent) -> Option<T>,
    ) -> Result<T, CmServiceError> {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            if let Some(i) = self.events.iter().position(|e| pick(e).is_some()) {
                let e = self.events.remove(i).expect("in range");
                return Ok(pick(&e).expect("picked"));
            }
            if !self.poll()? {
                if std::time::Instant::now() >= deadline {
                    return Err(CmServiceError::TimedOut(timeout));
                }
                std::thread::yield_now();
            }
        }
    }

    /// Listens on `port` of the TCP port space (`rdma_listen` of a bound
    /// `RDMA_PS_TCP` id).
    pub fn listen(&mut self, port: u16, backlog: u32) -> Result<ListenerId, CmServiceError> {
        let l = self
            .agent
            .listen(cm_ip::service_id(cm_ip::PS_TCP, port), backlog)?;
        self.publish_listeners();
        Ok(l)
    }

    /// Stops listening.
    pub fn unlisten(&mut self, listener: ListenerId) {
        self.agent.unlisten(listener);
        self.publish_listeners();
    }

    /// Attached to a shared engine: tells the service which REQs are ours.
    fn publish_listeners(&self) {
        let ids: Vec<u64> = self.agent.service_ids().collect();
        self.device().publish_cm_listeners(&ids);
    }

    /// Connects `qp` (in RESET) to the listener on `peer`:`port`
    /// (`rdma_connect`): sends the REQ, and when the REP comes, moves the
    /// QP to INIT / RTR / RTS with what it says and sends the RTU.
    pub fn connect(
        &mut self,
        qp: &QueuePair,
        peer: IpAddr,
        port: u16,
        src_port: u16,
        p: &CmParams,
    ) -> Result<Connection, CmServiceError> {
        let dev = self.cq.device().clone();
        let mut private = Vec::with_capacity(cm_ip::HEADER_LEN + p.private_data.len());
        let header = cm_ip::IpCmHeader {
            src_port,
            src: dev.ip(),
            dst: peer,
        }
        .to_bytes()
        .map_err(|_| CmServiceError::Invalid("the peer's address family is not the device's"))?;
        private.extend_from_slice(&header);
        private.extend_from_slice(&p.private_data);
        let now = self.now();
        let conn = self.agent.connect(
            now,
            &ConnectParams {
                service_id: cm_ip::service_id(cm_ip::PS_TCP, port),
                peer: MadAddress::gsi(gid_of(peer)),
                local_qpn: qp.qpn(),
                starting_psn: qp.psn(),
                transport: Transport::Rc,
                responder_resources: p.responder_resources,
                initiator_depth: p.initiator_depth,
                retry_count: p.retry_count,
                rnr_retry_count: p.rnr_retry_count,
                path_mtu: mtu_code(p.path_mtu),
                private_data: &private,
                // rdma_cm's: no SRQ, flow control, hop limit 64, CM
                // response timeouts 20, 15 CM retries.
                ..ConnectParams::default()
            },
        )?;
        self.counters.connects += 1;
        self.poll()?;
        enum Answer {
            Rep(Box<proto::cm::RepInfo>),
            Rej(u16),
            Lost,
        }
        let answer = self.wait_for(p.timeout, |e| match e {
            CmEvent::RepReceived { conn: c, rep } if *c == conn => {
                Some(Answer::Rep(Box::new(*rep)))
            }
            CmEvent::Rejected {
                conn: c, reason, ..
            } if *c == conn => Some(Answer::Rej(*reason)),
            CmEvent::Unreachable { conn: c } if *c == conn => Some(Answer::Lost),
            _ => None,
        });
        let rep = match answer {
            Ok(Answer::Rep(rep)) => rep,
            Ok(Answer::Rej(reason)) => {
                self.counters.rejected += 1;
                return Err(CmServiceError::Rejected { reason });
            }
            Ok(Answer::Lost) => {
                self.counters.unreachable += 1;
                return Err(CmServiceError::Unreachable);
            }
            Err(e) => {
                let now = self.now();
                self.agent.destroy(now, conn);
                let _ = self.poll();
                return Err(e);
            }
        };
        // IBA 12.7.1: the REP's responder resources bound our requester's
        // READs in flight; its RNR retry count is what our sends may make.
        // The Starting PSN of a REQ or REP is the PSN its sender receives
        // from (cm.c: the active side sends from the REP's, expects the
        // REQ's, which is ours).
        let opts = ConnectOptions {
            path_mtu: p.path_mtu,
            sq_psn: rep.starting_psn,
            retry_cnt: p.retry_count,
            rnr_retry: rep.rnr_retry_count,
            min_rnr_timer: 1,
            max_rd_atomic: p.initiator_depth.min(rep.responder_resources).max(1),
            max_dest_rd_atomic: p.responder_resources.max(1),
            access: p.access,
            ..ConnectOptions::default()
        };
        let mac = self.mac_of(peer)?;
        if let Err(e) = qp.connect(
            RemoteQp {
                qpn: rep.remote_qpn,
                psn: qp.psn(),
                mac,
                ip: peer,
            },
            opts,
        ) {
            let now = self.now();
            self.agent
                .reject(now, conn, rej_reason::CONSUMER_DEFINED, &[])?;
            let _ = self.poll();
            return Err(e.into());
        }
        let now = self.now();
        self.agent.send_rtu(now, conn, &[])?;
        self.poll()?;
        self.counters.established += 1;
        Ok(Connection {
            conn,
            peer_ip: peer,
            qpn: qp.qpn(),
            remote_qpn: rep.remote_qpn,
            private_data: rep.private_data.as_slice().to_vec(),
        })
    }

    /// Waits for a connection request on any listener (at most `timeout`).
    pub fn get_request(&mut self, timeout: Duration) -> Result<Request, CmServiceError> {
        self.wait_for(timeout, |e| match e {
            CmEvent::ReqReceived {
                listener,
                conn,
                req,
            } => {
                let pd = req.private_data.as_slice();
                let (peer_port, after) = match cm_ip::IpCmHeader::parse(pd) {
                    Ok(h) => (h.src_port, cm_ip::HEADER_LEN.min(pd.len())),
                    Err(_) => (0, 0),
                };
                Some(Request {
                    listener: *listener,
                    conn: *conn,
                    peer_ip: ip_of(req.peer.gid),
                    peer_port,
                    remote_qpn: req.remote_qpn,
                    starting_psn: req.starting_psn,
                    responder_resources: req.responder_resources,
                    initiator_depth: req.initiator_depth,
                    retry_count: req.retry_count,
                    rnr_retry_count: req.rnr_retry_count,
                    path_mtu: req.path_mtu,
                    private_data: pd[after..].to_vec(),
                })
            }
            _ => None,
        })
    }

    /// Accepts `req` on `qp` (in RESET; `rdma_accept`): the QP goes to
    /// INIT / RTR / RTS with what the REQ says, the REP leaves, and the
    /// call returns when the RTU arrives (or the first packet on the QP,
    /// which the caller reports with [`CmService::establish`]).
    pub fn accept(
        &mut self,
        req: &Request,
        qp: &QueuePair,
        p: &CmParams,
    ) -> Result<Connection, CmServiceError> {
        let mtu = if mtu_code(p.path_mtu) <= req.path_mtu {
            p.path_mtu
        } else {
            mtu_of_code(req.path_mtu)
        };
        // rdma_cm's passive side: its responder resources no more than the
        // REQ's initiator depth, and its initiator depth no more than the
        // REQ's responder resources.
        let responder = p.responder_resources.min(req.initiator_depth.max(1));
        let initiator = p.initiator_depth.min(req.responder_resources.max(1));
        // cm.c's passive side sends from the REQ's Starting PSN and
        // expects the REP's (ours).
        let opts = ConnectOptions {
            path_mtu: mtu,
            sq_psn: req.starting_psn,
            retry_cnt: req.retry_count,
            rnr_retry: req.rnr_retry_count,
            min_rnr_timer: 1,
            max_rd_atomic: initiator.max(1),
            max_dest_rd_atomic: responder.max(1),
            access: p.access,
            ..ConnectOptions::default()
        };
        let mac = self.mac_of(req.peer_ip)?;
        if let Err(e) = qp.connect(
            RemoteQp {
                qpn: req.remote_qpn,
                psn: qp.psn(),
                mac,
                ip: req.peer_ip,
            },
            opts,
        ) {
            let now = self.now();
            self.agent
                .reject(now, req.conn, rej_reason::CONSUMER_DEFINED, &[])?;
            let _ = self.poll();
            return Err(e.into());
        }
        let now = self.now();
        self.agent.accept(
            now,
            req.conn,
            &AcceptParams {
                local_qpn: qp.qpn(),
                starting_psn: qp.psn(),
                responder_resources: responder,
                initiator_depth: initiator,
                rnr_retry_count: p.rnr_retry_count,
                srq: false,
                flow_control: true,
                failover_accepted: false,
                private_data: &p.private_data,
            },
        )?;
        self.counters.accepts += 1;
        self.poll()?;
        let conn = req.conn;
        enum Outcome {
            Up,
            Rej(u16),
            Lost,
        }
        match self.wait_for(p.timeout, |e| match e {
            CmEvent::Established { conn: c } if *c == conn => Some(Outcome::Up),
            CmEvent::Rejected {
                conn: c, reason, ..
            } if *c == conn => Some(Outcome::Rej(*reason)),
            CmEvent::Unreachable { conn: c } if *c == conn => Some(Outcome::Lost),
            _ => None,
        })? {
            Outcome::Up => {}
            Outcome::Rej(reason) => {
                self.counters.rejected += 1;
                return Err(CmServiceError::Rejected { reason });
            }
            Outcome::Lost => {
                self.counters.unreachable += 1;
                return Err(CmServiceError::Unreachable);
            }
        }
        self.counters.established += 1;
        Ok(Connection {
            conn,
            peer_ip: req.peer_ip,
            qpn: qp.qpn(),
            remote_qpn: req.remote_qpn,
            private_data: req.private_data.clone(),
        })
    }

    /// Rejects `req` (`rdma_reject`).
    pub fn reject(&mut self, req: &Request, private_data: &[u8]) -> Result<(), CmServiceError> {
        let now = self.now();
        self.agent
            .reject(now, req.conn, rej_reason::CONSUMER_DEFINED, private_data)?;
        self.poll()?;
        Ok(())
    }

    /// Passive side: data arrived on the QP before the RTU (IBA 12.6.5).
    pub fn establish(&mut self, conn: ConnId) -> Result<(), CmServiceError> {
        let now = self.now();
        self.agent.establish(now, conn)?;
        Ok(())
    }

    /// Disconnects (`rdma_disconnect`: DREQ, or DREP after the peer's
    /// DREQ) and waits at most `timeout` for the DREP (or the peer's
    /// DREQ). The QP itself is the caller's to move to ERROR / destroy.
    pub fn disconnect(&mut self, conn: ConnId, timeout: Duration) -> Result<(), CmServiceError> {
        let now = self.now();
        // Whether the peer's DREQ came already.
        let requested = self
            .events
            .iter()
            .position(|e| matches!(e, CmEvent::DisconnectRequested { conn: c, .. } if *c == conn));
        if let Some(i) = requested {
            self.events.remove(i);
        }
        self.agent.disconnect(now, conn, &[])?;
        self.counters.disconnects += 1;
        self.poll()?;
        if requested.is_some() {
            return Ok(());
        }
        let r = self.wait_for(timeout, |e| match e {
            CmEvent::Disconnected { conn: c } | CmEvent::DisconnectRequested { conn: c, .. }
                if *c == conn =>
            {
                Some(())
            }
            _ => None,
        });
        let _ = self.poll();
        r
    }

    /// Waits at most `timeout` for the peer's DREQ on `conn`, then answers
    /// it with the DREP (`RDMA_CM_EVENT_DISCONNECTED`, then
    /// `rdma_disconnect`).
    pub fn await_disconnect(
        &mut self,
        conn: ConnId,
        timeout: Duration,
    ) -> Result<(), CmServiceError> {
        self.wait_for(timeout, |e| match e {
            CmEvent::DisconnectRequested { conn: c, .. } | CmEvent::Disconnected { conn: c }
                if *c == conn =>
            {
                Some(())
            }
            _ => None,
        })?;
        let now = self.now();
        let _ = self.agent.disconnect(now, conn, &[]);
        self.poll()?;
        Ok(())
    }

    /// Forgets `conn` (`rdma_destroy_id`): what the CM sends for it then
    /// (REJ / DREQ) leaves now.
    pub fn destroy(&mut self, conn: ConnId) {
        let now = self.now();
        self.agent.destroy(now, conn);
        let _ = self.poll();
    }

    /// Destroys QP 1 and its address handles.
    pub fn close(self) {
        let dev = self.cq.device().clone();
        let _ = self.gsi.destroy();
        for (_, ah) in self.ahs {
            let _ = dev.destroy_ah(ah);
        }
        let _ = dev.deregister_memory(&self.mr);
    }
}
