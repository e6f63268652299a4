//! One connection's record (the kernel's cm_id_private) and its states
//! (IBA 12.9.6 figures 92..94; the kernel's enum ib_cm_state).

use core::time::Duration;

use super::config::MadAddress;
use super::event::PrivateData;
use super::mad::MAD_SIZE;
use super::{ConnId, ListenerId};
use crate::time::Instant;

/// A connection's CM state (IBA 12.9.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum State {
    /// Active: REQ sent, waiting for REP / REJ / MRA.
    ReqSent,
    /// Active: the passive side MRAed our REQ.
    MraReqRcvd,
    /// Passive: REQ received, the consumer has not answered.
    ReqRcvd,
    /// Passive: we MRAed the REQ.
    MraReqSent,
    /// Active: REP received, the consumer has not sent the RTU.
    RepRcvd,
    /// Active: we MRAed the REP.
    MraRepSent,
    /// Passive: REP sent, waiting for the RTU.
    RepSent,
    /// Passive: the active side MRAed our REP.
    MraRepRcvd,
    /// Both: connected.
    Established,
    /// DREQ sent, waiting for the DREP.
    DreqSent,
    /// DREQ received, the consumer has not sent the DREP.
    DreqRcvd,
    /// Closed; the comm ID and QPN wait out the timewait.
    Timewait,
    /// SIDR_REQ sent.
    SidrReqSent,
    /// SIDR_REQ received, the consumer has not answered.
    SidrReqRcvd,
}

impl State {
    /// Passive connections that count against `max_half_open` (IBA
    /// 12.9.8.1: REQ received, no RTU yet).
    pub(crate) fn is_half_open_passive(self) -> bool {
        matches!(
            self,
            State::ReqRcvd | State::MraReqSent | State::RepSent | State::MraRepRcvd
        )
    }

    /// Passive connections the consumer has not accepted or rejected
    /// (count against the listener's backlog).
    pub(crate) fn is_pending_accept(self) -> bool {
        matches!(self, State::ReqRcvd | State::MraReqSent)
    }
}

/// The MAD a connection retransmits until answered (the kernel's
/// cm_id_priv->msg with the MAD layer's retry timer).
#[derive(Debug, Clone)]
pub(crate) struct Retry {
    /// The MAD as first sent (retransmitted as is: same TID).
    pub(crate) mad: [u8; MAD_SIZE],
    /// When it is sent again (or given up).
    pub(crate) deadline: Instant,
    /// The wait between sends.
    pub(crate) interval: Duration,
    /// Sends still allowed after the pending one times out.
    pub(crate) retries_left: u8,
}

/// One connection (or SIDR request).
#[derive(Debug, Clone)]
pub(crate) struct Conn {
    pub(crate) id: ConnId,
    pub(crate) state: State,
    /// The passive side of this connection (REQ / SIDR_REQ received).
    pub(crate) passive: bool,
    /// The listener a passive connection came in on.
    pub(crate) listener: Option<ListenerId>,
    /// The peer's GSI.
    pub(crate) peer: MadAddress,
    /// The peer's communication ID (0 until known: the kernel's remote_id).
    pub(crate) remote_comm_id: u32,
    /// The peer's CA GUID (0 until known).
    pub(crate) remote_ca_guid: u64,
    /// The peer's QPN (0 until known).
    pub(crate) remote_qpn: u32,
    /// Our QPN.
    pub(crate) local_qpn: u32,
    pub(crate) service_id: u64,
    /// The TID of the current MAD sequence (REQ's, or DREQ's, ...).
    pub(crate) tid: u64,
    /// Our CM response timeout for REP / DREQ retries (the kernel's
    /// timeout_ms) and how many.
    pub(crate) timeout: Duration,
    pub(crate) max_cm_retries: u8,
    /// The pending retransmission, if any.
    pub(crate) retry: Option<Retry>,
    /// When timewait ends (state Timewait only).
    pub(crate) timewait_end: Option<Instant>,
    /// The MRA's service timeout, to resend it.
    pub(crate) service_timeout: u8,
    /// The last private data we sent in an MRA / RTU / DREP, to resend it
    /// (the kernel's cm_id_priv->private_data).
    pub(crate) private_data: PrivateData,
    /// The consumer destroyed it: no more events; it only finishes
    /// timewait.
    pub(crate) destroyed: bool,
    /// The deadline the agent's timer set holds for it (kept equal to
    /// `deadline()` by `CmAgent::sync_timer`).
    pub(crate) scheduled: Option<Instant>,
}

impl Conn {
    /// The next instant this connection has timer work.
    pub(crate) fn deadline(&self) -> Option<Instant> {
        match (&self.retry, self.timewait_end) {
            (Some(r), Some(t)) => Some(r.deadline.min(t)),
            (Some(r), None) => Some(r.deadline),
            (None, t) => t,
        }
    }
}

impl State {
    /// The kernel's name of the state (IB_CM_*), for tools and tests.
    pub(crate) fn name(self) -> &'static str {
        match self {
            State::ReqSent => "REQ_SENT",
            State::MraReqRcvd => "MRA_REQ_RCVD",
            State::ReqRcvd => "REQ_RCVD",
            State::MraReqSent => "MRA_REQ_SENT",
            State::RepRcvd => "REP_RCVD",
            State::MraRepSent => "MRA_REP_SENT",
            State::RepSent => "REP_SENT",
            State::MraRepRcvd => "MRA_REP_RCVD",
            State::Established => "ESTABLISHED",
            State::DreqSent => "DREQ_SENT",
            State::DreqRcvd => "DREQ_RCVD",
            State::Timewait => "TIMEWAIT",
            State::SidrReqSent => "SIDR_REQ_SENT",
            State::SidrReqRcvd => "SIDR_REQ_RCVD",
        }
    }
}
