//! What the consumer gives the CM agent: its configuration and the
//! parameters of connect / accept.

use core::time::Duration;

use super::mad::{DEFAULT_PKEY, GSI_QKEY, GSI_QPN};

/// The agent's configuration (one port, one GSI).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CmConfig {
    /// The port's GID the MADs leave from (REQ's primary local port GID).
    pub local_gid: [u8; 16],
    /// REQ's / REP's Local CA GUID, and the REJ "timeout" ARI.
    pub ca_guid: u64,
    /// Passive connections not yet established (REQ received, no RTU):
    /// beyond it a new REQ is rejected with reason 3 "no resources",
    /// nothing reaches the consumer, `half_open_refused` counts it.
    pub max_half_open: usize,
    /// How long a closed connection's comm ID / QPN stays in timewait
    /// (IBA 12.9.7). cm.c waits the path's local ACK timeout: on RoCE
    /// `cm_ack_timeout(ack delay, 16)` = 17, 4.096 us * 2^17 = 537 ms, the
    /// default.
    pub timewait: Duration,
    /// Connections (of any state, timewait included) the agent holds at
    /// most: beyond it `connect` fails and REQs are rejected "no resources".
    pub max_connections: usize,
    /// Packet life time exponent of the path (IBA 12.7.20; the kernel's
    /// rdma_cm uses CMA_IBOE_PACKET_LIFETIME 16 on RoCE). REQ's and REP's
    /// timeouts add it twice (the round trip), as cm.c does.
    pub packet_life_time: u8,
    /// The partition key the REQ / SIDR_REQ carry.
    pub pkey: u16,
    /// The first local communication ID (the kernel starts at a random
    /// one; tests and the simulator pick one per agent).
    pub first_comm_id: u32,
    /// The top byte every local communication ID (and SIDR request ID)
    /// keeps, when several agents share one port's QP 1: the service that
    /// switches their MADs finds an answer's agent by it ([`super::mad_owner`];
    /// docs/shared-engine.md). None: the whole 32-bit space.
    pub comm_id_prefix: Option<u8>,
    /// Seed of the transaction IDs (high 32 bits; the low 32 count).
    pub tid_seed: u32,
    /// The CA's ACK delay exponent (REP's Target ACK Delay; rxe's
    /// local_ca_ack_delay is 15).
    pub ack_delay: u8,
    /// REQ's primary packet rate (IB rate enum; 7 = 40 Gb/s).
    pub packet_rate: u8,
    /// MADs waiting in `poll_transmit`'s queue at most; beyond, a MAD is
    /// dropped (and retransmitted by its timer if it has one), counted in
    /// `tx_dropped`.
    pub max_tx_queue: usize,
    /// Undelivered events kept at most; beyond, an event is dropped and
    /// counted in `events_dropped`.
    pub max_events: usize,
}

impl Default for CmConfig {
    fn default() -> Self {
        CmConfig {
            local_gid: [0; 16],
            ca_guid: 0,
            max_half_open: 1024,
            timewait: Duration::from_nanos(4096 << 17),
            max_connections: 65_536,
            packet_life_time: 16,
            pkey: DEFAULT_PKEY,
            first_comm_id: 1,
            comm_id_prefix: None,
            tid_seed: 0,
            ack_delay: 15,
            packet_rate: 7,
            max_tx_queue: 4096,
            max_events: 65_536,
        }
    }
}

/// Whom a MAD came from or goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MadAddress {
    /// The peer port's GID (RoCE v2: its IP as a GID).
    pub gid: [u8; 16],
    /// The peer's QP: the GSI, 1.
    pub qpn: u32,
    /// The Q_Key: the GSI's 0x80010000.
    pub qkey: u32,
    /// The P_Key index the MAD uses.
    pub pkey_index: u16,
}

impl MadAddress {
    /// The GSI (QP 1, Q_Key 0x80010000, P_Key index 0) of the port `gid`.
    pub fn gsi(gid: [u8; 16]) -> MadAddress {
        MadAddress {
            gid,
            qpn: GSI_QPN,
            qkey: GSI_QKEY,
            pkey_index: 0,
        }
    }
}

/// The transport service of a connection (REQ's Transport Service Type).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Transport {
    /// Reliable Connection (type 0).
    #[default]
    Rc,
    /// Unreliable Connection (type 1).
    Uc,
}

impl Transport {
    /// REQ's Transport Service Type code (IBA 12.6.5).
    pub fn code(self) -> u8 {
        match self {
            Transport::Rc => 0,
            Transport::Uc => 1,
        }
    }

    /// The transport of a code; RD (2) and reserved codes are `None`.
    pub fn from_code(c: u8) -> Option<Transport> {
        match c {
            0 => Some(Transport::Rc),
            1 => Some(Transport::Uc),
            _ => None,
        }
    }
}

/// What `rdma_connect` knows: the REQ's contents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectParams<'a> {
    /// The service to connect to (`ip::service_id`).
    pub service_id: u64,
    /// The peer's GSI (its GID; QP 1).
    pub peer: MadAddress,
    /// Our QP.
    pub local_qpn: u32,
    /// The REQ's / REP's Starting PSN: the PSN this side *receives* from
    /// (its receive queue's), as the kernel's cm.c sets them (the passive
    /// side sends from the REQ's, the active side from the REP's).
    pub starting_psn: u32,
    /// RC or UC.
    pub transport: Transport,
    /// RDMA READ / atomic requests we accept at once.
    pub responder_resources: u8,
    /// RDMA READ / atomic requests we issue at once.
    pub initiator_depth: u8,
    /// Transport retries (3 bits).
    pub retry_count: u8,
    /// RNR retries (3 bits; 7 = infinite).
    pub rnr_retry_count: u8,
    /// Path MTU (IB enum 1..5: 256..4096).
    pub path_mtu: u8,
    /// Our QP takes its receives from an SRQ.
    pub srq: bool,
    /// End-to-end flow control (IBA 9.7.7.2).
    pub flow_control: bool,
    /// Primary path traffic class.
    pub traffic_class: u8,
    /// Primary path hop limit.
    pub hop_limit: u8,
    /// Primary path flow label (20 bits).
    pub flow_label: u32,
    /// How long we take to answer (IBA 12.7.20 exponent; 20 as rdma_cm).
    pub local_cm_response_timeout: u8,
    /// How long we wait for the peer's answer (exponent; 20 as rdma_cm).
    pub remote_cm_response_timeout: u8,
    /// REQ retransmissions before giving up (4 bits; 15 as rdma_cm).
    pub max_cm_retries: u8,
    /// Up to 92 bytes; the IP CM header first (the caller puts it there).
    pub private_data: &'a [u8],
}

impl Default for ConnectParams<'_> {
    fn default() -> Self {
        ConnectParams {
            service_id: 0,
            peer: MadAddress::gsi([0; 16]),
            local_qpn: 0,
            starting_psn: 0,
            transport: Transport::Rc,
            responder_resources: 0,
            initiator_depth: 0,
            retry_count: 7,
            rnr_retry_count: 7,
            path_mtu: 3,
            srq: false,
            flow_control: true,
            traffic_class: 0,
            hop_limit: 64,
            flow_label: 0,
            local_cm_response_timeout: 20,
            remote_cm_response_timeout: 20,
            max_cm_retries: 15,
            private_data: &[],
        }
    }
}

/// What `rdma_accept` knows: the REP's contents.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AcceptParams<'a> {
    /// Our QP.
    pub local_qpn: u32,
    /// The REQ's / REP's Starting PSN: the PSN this side *receives* from
    /// (its receive queue's), as the kernel's cm.c sets them (the passive
    /// side sends from the REQ's, the active side from the REP's).
    pub starting_psn: u32,
    /// RDMA READ / atomic requests we accept at once.
    pub responder_resources: u8,
    /// RDMA READ / atomic requests we issue at once.
    pub initiator_depth: u8,
    /// RNR retries (3 bits).
    pub rnr_retry_count: u8,
    /// Our QP takes its receives from an SRQ.
    pub srq: bool,
    /// End-to-end flow control.
    pub flow_control: bool,
    /// REP's Failover Accepted code, written as is as cm.c does: `false`
    /// is 0 (what rdma_cm sends), `true` is 1.
    pub failover_accepted: bool,
    /// Up to 196 bytes.
    pub private_data: &'a [u8],
}
