//! What the CM agent tells the consumer.

use super::config::{MadAddress, Transport};
use super::{ConnId, ListenerId};

/// Private data copied out of a MAD: up to 224 bytes and its length (the
/// whole field of the message, as the kernel passes it up: a MAD does not
/// say how much of it the sender wrote).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct PrivateData {
    bytes: [u8; 224],
    len: u8,
}

impl PrivateData {
    /// No private data.
    pub const EMPTY: PrivateData = PrivateData {
        bytes: [0; 224],
        len: 0,
    };

    /// A copy of `data` (at most 224 bytes are kept).
    pub fn new(data: &[u8]) -> PrivateData {
        let n = data.len().min(224);
        let mut p = PrivateData::EMPTY;
        p.bytes[..n].copy_from_slice(&data[..n]);
        p.len = n as u8;
        p
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }

    /// How many bytes.
    pub fn len(&self) -> usize {
        usize::from(self.len)
    }

    /// No bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Default for PrivateData {
    fn default() -> Self {
        PrivateData::EMPTY
    }
}

impl core::fmt::Debug for PrivateData {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "PrivateData({} bytes)", self.len)
    }
}

/// A received REQ, as the passive side's consumer needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReqInfo {
    /// Whom the REQ came from (its GSI).
    pub peer: MadAddress,
    /// The requested service.
    pub service_id: u64,
    /// The active side's communication ID.
    pub remote_comm_id: u32,
    /// The active side's QP.
    pub remote_qpn: u32,
    /// The active side's starting PSN (our receive queue's expected PSN).
    pub starting_psn: u32,
    /// The active side's responder resources.
    pub responder_resources: u8,
    /// The active side's initiator depth.
    pub initiator_depth: u8,
    /// Transport retries.
    pub retry_count: u8,
    /// RNR retries.
    pub rnr_retry_count: u8,
    /// Path MTU (IB enum).
    pub path_mtu: u8,
    /// RC or UC.
    pub transport: Transport,
    /// The active side uses an SRQ.
    pub srq: bool,
    /// End-to-end flow control.
    pub flow_control: bool,
    /// The active side's CA GUID.
    pub remote_ca_guid: u64,
    /// The primary path's local (active side's) GID.
    pub primary_local_gid: [u8; 16],
    /// The primary path's remote (our) GID.
    pub primary_remote_gid: [u8; 16],
    /// Primary path traffic class.
    pub traffic_class: u8,
    /// Primary path hop limit.
    pub hop_limit: u8,
    /// Primary path flow label.
    pub flow_label: u32,
    /// Primary path local ACK timeout (exponent).
    pub local_ack_timeout: u8,
    /// The active side's CM response timeout (exponent).
    pub remote_cm_response_timeout: u8,
    /// The REQ's max CM retries.
    pub max_cm_retries: u8,
    /// The REQ's 92 bytes of private data (the IP CM header first).
    pub private_data: PrivateData,
}

/// A received REP, as the active side's consumer needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RepInfo {
    /// The passive side's communication ID.
    pub remote_comm_id: u32,
    /// The passive side's QP.
    pub remote_qpn: u32,
    /// The passive side's starting PSN.
    pub starting_psn: u32,
    /// The passive side's responder resources.
    pub responder_resources: u8,
    /// The passive side's initiator depth.
    pub initiator_depth: u8,
    /// RNR retries.
    pub rnr_retry_count: u8,
    /// The passive side uses an SRQ.
    pub srq: bool,
    /// End-to-end flow control.
    pub flow_control: bool,
    /// Failover accepted (REP's 2-bit code).
    pub failover: u8,
    /// Target ACK delay (exponent).
    pub target_ack_delay: u8,
    /// The passive side's CA GUID.
    pub remote_ca_guid: u64,
    /// The REP's 196 bytes of private data.
    pub private_data: PrivateData,
}

/// A received SIDR_REQ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SidrReqInfo {
    /// Whom it came from.
    pub peer: MadAddress,
    /// The requested service.
    pub service_id: u64,
    /// The requester's request ID.
    pub request_id: u32,
    /// The partition key.
    pub pkey: u16,
    /// The SIDR_REQ's 216 bytes of private data.
    pub private_data: PrivateData,
}

/// What happened to a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmEvent {
    /// Passive side: a REQ for a listener; answer with accept / reject
    /// (or send_mra first).
    ReqReceived {
        /// The listener.
        listener: ListenerId,
        /// The new connection.
        conn: ConnId,
        /// The REQ.
        req: ReqInfo,
    },
    /// Active side: the REP; move the QP to RTR/RTS, then `send_rtu`.
    RepReceived {
        /// The connection.
        conn: ConnId,
        /// The REP.
        rep: RepInfo,
    },
    /// Passive: the RTU (or `establish`); active: after `send_rtu`.
    Established {
        /// The connection.
        conn: ConnId,
    },
    /// A REJ ended the connection (either side).
    Rejected {
        /// The connection.
        conn: ConnId,
        /// The REJ's reason (IBA table 112).
        reason: u16,
        /// The REJ's 148 bytes of private data.
        private_data: PrivateData,
    },
    /// REQ or REP retries ran out without an answer.
    Unreachable {
        /// The connection.
        conn: ConnId,
    },
    /// A DREQ arrived: `disconnect` sends the DREP.
    DisconnectRequested {
        /// The connection.
        conn: ConnId,
        /// The DREQ's 220 bytes of private data.
        private_data: PrivateData,
    },
    /// The DREP arrived, or the DREQ's retries ran out.
    Disconnected {
        /// The connection.
        conn: ConnId,
    },
    /// Timewait is over: the QP number can be used again and the
    /// connection is gone.
    TimewaitExit {
        /// The connection.
        conn: ConnId,
    },
    /// A SIDR_REQ for a listener: answer with `sidr_reply`.
    SidrReqReceived {
        /// The listener.
        listener: ListenerId,
        /// The request's handle.
        conn: ConnId,
        /// The SIDR_REQ.
        req: SidrReqInfo,
    },
    /// The SIDR_REP of our SIDR_REQ (the request is gone afterwards).
    SidrRepReceived {
        /// The request.
        conn: ConnId,
        /// Status (IBA table 121; 0 valid).
        status: u8,
        /// The service's QP.
        qpn: u32,
        /// The service's Q_Key.
        qkey: u32,
        /// The SIDR_REP's 136 bytes of private data.
        private_data: PrivateData,
    },
    /// Our SIDR_REQ's retries ran out (the request is gone).
    SidrUnreachable {
        /// The request.
        conn: ConnId,
    },
}

impl CmEvent {
    /// The connection the event is about.
    pub fn conn(&self) -> ConnId {
        match *self {
            CmEvent::ReqReceived { conn, .. }
            | CmEvent::RepReceived { conn, .. }
            | CmEvent::Established { conn }
            | CmEvent::Rejected { conn, .. }
            | CmEvent::Unreachable { conn }
            | CmEvent::DisconnectRequested { conn, .. }
            | CmEvent::Disconnected { conn }
            | CmEvent::TimewaitExit { conn }
            | CmEvent::SidrReqReceived { conn, .. }
            | CmEvent::SidrRepReceived { conn, .. }
            | CmEvent::SidrUnreachable { conn } => conn,
        }
    }
}
