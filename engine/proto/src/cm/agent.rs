//! The CM agent: every connection of one port.

use super::config::{AcceptParams, CmConfig, ConnectParams, MadAddress};
use super::counters::CmCounters;
use super::error::CmError;
use super::event::CmEvent;
use super::{ConnId, ListenerId};
use crate::time::Instant;

/// Every connection of one port (one GSI, QP 1), sans-IO.
#[derive(Debug)]
pub struct CmAgent {
    config: CmConfig,
    counters: CmCounters,
}

impl CmAgent {
    /// An agent with no listener and no connection.
    pub fn new(config: CmConfig) -> CmAgent {
        CmAgent {
            config,
            counters: CmCounters::default(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &CmConfig {
        &self.config
    }

    /// Listens on `service_id`: REQs and SIDR_REQs for it become
    /// `ReqReceived` / `SidrReqReceived`. At most `backlog` REQs wait for
    /// the consumer's accept / reject; beyond, a REQ is rejected.
    pub fn listen(&mut self, service_id: u64, backlog: u32) -> Result<ListenerId, CmError> {
        let _ = (service_id, backlog);
        unimplemented!()
    }

    /// Stops listening (connections already received stay).
    pub fn unlisten(&mut self, listener: ListenerId) {
        let _ = listener;
        unimplemented!()
    }

    /// Active side: sends a REQ.
    pub fn connect(&mut self, now: Instant, p: &ConnectParams) -> Result<ConnId, CmError> {
        let _ = (now, p);
        unimplemented!()
    }

    /// Passive side: answers a REQ with a REP.
    pub fn accept(&mut self, now: Instant, conn: ConnId, p: &AcceptParams) -> Result<(), CmError> {
        let _ = (now, conn, p);
        unimplemented!()
    }

    /// Sends a REJ (either side, before establishment).
    pub fn reject(
        &mut self,
        now: Instant,
        conn: ConnId,
        reason: u16,
        private_data: &[u8],
    ) -> Result<(), CmError> {
        let _ = (now, conn, reason, private_data);
        unimplemented!()
    }

    /// Sends an MRA for the received REQ or REP.
    pub fn send_mra(
        &mut self,
        now: Instant,
        conn: ConnId,
        service_timeout: u8,
    ) -> Result<(), CmError> {
        let _ = (now, conn, service_timeout);
        unimplemented!()
    }

    /// Active side: sends the RTU after `RepReceived`.
    pub fn send_rtu(
        &mut self,
        now: Instant,
        conn: ConnId,
        private_data: &[u8],
    ) -> Result<(), CmError> {
        let _ = (now, conn, private_data);
        unimplemented!()
    }

    /// Passive side: first data arrived before the RTU (IBA 12.6.5).
    pub fn establish(&mut self, now: Instant, conn: ConnId) -> Result<(), CmError> {
        let _ = (now, conn);
        unimplemented!()
    }

    /// Sends a DREQ, or the DREP after a DREQ.
    pub fn disconnect(
        &mut self,
        now: Instant,
        conn: ConnId,
        private_data: &[u8],
    ) -> Result<(), CmError> {
        let _ = (now, conn, private_data);
        unimplemented!()
    }

    /// Sends a SIDR_REQ.
    pub fn sidr_request(
        &mut self,
        now: Instant,
        service_id: u64,
        peer: MadAddress,
        private_data: &[u8],
        timeout: u8,
        retries: u8,
    ) -> Result<ConnId, CmError> {
        let _ = (now, service_id, peer, private_data, timeout, retries);
        unimplemented!()
    }

    /// Answers a SIDR_REQ.
    pub fn sidr_reply(
        &mut self,
        now: Instant,
        conn: ConnId,
        status: u8,
        qpn: u32,
        qkey: u32,
        private_data: &[u8],
    ) -> Result<(), CmError> {
        let _ = (now, conn, status, qpn, qkey, private_data);
        unimplemented!()
    }

    /// The consumer dropped the connection: sends what ib_destroy_cm_id
    /// sends (REJ / DREQ / DREP), then no more events for it.
    pub fn destroy(&mut self, now: Instant, conn: ConnId) {
        let _ = (now, conn);
        unimplemented!()
    }

    /// A MAD received on QP 1. Anything malformed is a counted drop.
    pub fn handle_mad(&mut self, now: Instant, from: &MadAddress, mad: &[u8]) {
        let _ = (now, from, mad);
        unimplemented!()
    }

    /// The next MAD to send on QP 1, written into `buf`, and whom to.
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut [u8; 256]) -> Option<MadAddress> {
        let _ = (now, buf);
        unimplemented!()
    }

    /// The next event.
    pub fn poll_event(&mut self) -> Option<CmEvent> {
        unimplemented!()
    }

    /// When `handle_timeout` next has work.
    pub fn poll_timeout(&self) -> Option<Instant> {
        unimplemented!()
    }

    /// Runs the timers due at `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        let _ = now;
        unimplemented!()
    }

    /// The counters.
    pub fn counters(&self) -> &CmCounters {
        &self.counters
    }
}
