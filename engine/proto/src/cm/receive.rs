//! Received MADs: each handler is the kernel's cm_*_handler (cm.c) for
//! one attribute. A MAD is matched to a connection by the comm IDs it
//! carries (cm.c's cm_acquire_id: our local ID and the peer's, the peer's
//! 0 while unknown) and never changes another connection; every MAD ends
//! in exactly one counter ([`super::CmCounters::received_accounted`]).

use super::agent::{ack_timeout, CmAgent};
use super::config::{MadAddress, Transport};
use super::conn::{Conn, State};
use super::event::{CmEvent, PrivateData, RepInfo, ReqInfo, SidrReqInfo};
use super::mad::{
    msg_code, rej_reason, sidr_status, AttrId, Drep, Dreq, MadHeader, Mra, Rej, Rep, Req, Rtu,
    SidrRep, SidrReq, MAD_SIZE,
};
use super::timing::iba_time;
use super::ConnId;
use crate::time::Instant;

/// Where a received MAD ended (one counter each).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rx {
    Accepted,
    Malformed,
    Unmatched,
    Duplicate,
    Stale,
    BacklogRefused,
    HalfOpenRefused,
    ConnectionsRefused,
    NoListener,
    Unsupported,
}

impl CmAgent {
    /// A MAD received on QP 1 from `from`. Anything that is not a CM MAD
    /// this core handles (short, wrong base or class version, class,
    /// method, attribute) is a counted drop (`malformed`); a MAD for no
    /// connection is counted (`unmatched`) and answered only where cm.c
    /// answers (a DREQ gets a DREP; a REQ for no listener a REJ).
    pub fn handle_mad(&mut self, now: Instant, from: &MadAddress, mad: &[u8]) {
        self.counters.mads_received += 1;
        let attr = match MadHeader::new_checked(mad).and_then(|h| h.check_cm()) {
            Ok(a) => a,
            Err(_) => {
                self.counters.malformed += 1;
                return;
            }
        };
        let mut m = [0u8; MAD_SIZE];
        m.copy_from_slice(&mad[..MAD_SIZE]);
        let rx = match attr {
            AttrId::Req => self.on_req(now, from, &m),
            AttrId::Mra => self.on_mra(now, &m),
            AttrId::Rej => self.on_rej(now, &m),
            AttrId::Rep => self.on_rep(now, &m),
            AttrId::Rtu => self.on_rtu(&m),
            AttrId::Dreq => self.on_dreq(from, &m),
            AttrId::Drep => self.on_drep(now, &m),
            AttrId::SidrReq => self.on_sidr_req(from, &m),
            AttrId::SidrRep => self.on_sidr_rep(&m),
            AttrId::ClassPortInfo | AttrId::Lap | AttrId::Apr => Rx::Unsupported,
        };
        let c = &mut self.counters;
        match rx {
            Rx::Accepted => c.accepted_mads += 1,
            Rx::Malformed => c.malformed += 1,
            Rx::Unmatched => c.unmatched += 1,
            Rx::Duplicate => c.duplicates += 1,
            Rx::Stale => c.stale += 1,
            Rx::BacklogRefused => c.backlog_refused += 1,
            Rx::HalfOpenRefused => c.half_open_refused += 1,
            Rx::ConnectionsRefused => c.connections_refused += 1,
            Rx::NoListener => c.no_listener += 1,
            Rx::Unsupported => c.unsupported += 1,
        }
    }

    /// cm.c's cm_acquire_id: the connection with local ID `local` whose
    /// remote ID is `remote` (0 while the peer's is unknown).
    fn acquire(&self, local: u32, remote: u32) -> Option<ConnId> {
        self.conns
            .get(&local)
            .filter(|c| c.remote_comm_id == remote)
            .map(|c| c.id)
    }

    /// cm.c's cm_issue_rej: a REJ answering a MAD no connection takes,
    /// with the IDs of the MAD swapped and its TID.
    fn issue_rej(
        &mut self,
        to: &MadAddress,
        tid: u64,
        local: u32,
        remote: u32,
        reason: u16,
        what: u8,
    ) {
        let mut m = [0u8; MAD_SIZE];
        if let Ok(mut h) = MadHeader::new_checked(&mut m[..]) {
            h.fill_cm(tid, AttrId::Rej);
        }
        if let Ok(mut r) = Rej::new_checked(&mut m[..]) {
            r.set_local_comm_id(local);
            r.set_remote_comm_id(remote);
            r.set_message_rejected(what);
            r.set_reason(reason);
        }
        self.counters.rejects_sent += 1;
        self.queue(*to, m);
    }

    /// REQ (cm.c's cm_req_handler / cm_match_req; IBA 12.9.6.1).
    fn on_req(&mut self, now: Instant, from: &MadAddress, m: &[u8; MAD_SIZE]) -> Rx {
        let Ok(req) = Req::new_checked(&m[..]) else {
            return Rx::Unmatched;
        };
        let tid = req.header().transaction_id();
        let remote_id = req.local_comm_id();
        let guid = req.local_ca_guid();
        if remote_id == 0 {
            // IBA 12.6.5: 0 is no communication ID (and our "unknown").
            return Rx::Malformed;
        }

        // A REQ seen before (same peer comm ID and CA GUID): cm_dup_req_handler.
        if let Some(&cid) = self.remote_ids.get(&(remote_id, guid)) {
            match self.conns.get(&cid).map(|c| c.state) {
                Some(State::MraReqSent) => {
                    let mad = self.format_mra(cid, msg_code::REQ);
                    self.queue_to_conn(cid, mad);
                }
                Some(State::Timewait) => self.send_rej(cid, rej_reason::STALE_CONNECTION, &[], &[]),
                _ => {}
            }
            return Rx::Duplicate;
        }

        // Its QPN is one of a connection we hold: stale (IBA 12.9.8.3.1).
        // REJ the REQ, and disconnect the old connection as cm.c does.
        if let Some(&old) = self.remote_qpns.get(&(req.local_qpn(), guid)) {
            self.issue_rej(
                from,
                tid,
                0,
                remote_id,
                rej_reason::STALE_CONNECTION,
                msg_code::REQ,
            );
            self.dreq_stale(now, old);
            return Rx::Stale;
        }

        let sid = req.service_id();
        let Some((&lid, l)) = self.listeners.iter().find(|(_, l)| l.service_id == sid) else {
            self.issue_rej(
                from,
                tid,
                0,
                remote_id,
                rej_reason::INVALID_SERVICE_ID,
                msg_code::REQ,
            );
            return Rx::NoListener;
        };
        let backlog_full = l.pending >= l.backlog;

        let transport = if req.extended_transport_type() == 0 {
            Transport::from_code(req.transport_service_type())
        } else {
            None
        };
        let Some(transport) = transport else {
            self.issue_rej(
                from,
                tid,
                0,
                remote_id,
                rej_reason::INVALID_TRANSPORT_TYPE,
                msg_code::REQ,
            );
            return Rx::Unsupported;
        };
        if self.half_open >= self.config.max_half_open {
            self.issue_rej(
                from,
                tid,
                0,
                remote_id,
                rej_reason::NO_RESOURCES,
                msg_code::REQ,
            );
            return Rx::HalfOpenRefused;
        }
        if backlog_full {
            // ucma's backlog: the REQ event is refused (-ENOMEM), cm.c then
            // drops the REQ without a REJ; the active side retries.
            return Rx::BacklogRefused;
        }
        if self.conns.len() >= self.config.max_connections {
            self.issue_rej(
                from,
                tid,
                0,
                remote_id,
                rej_reason::NO_RESOURCES,
                msg_code::REQ,
            );
            return Rx::ConnectionsRefused;
        }

        let id = self.alloc_comm_id();
        let remote_qpn = req.local_qpn();
        let info = ReqInfo {
            peer: *from,
            service_id: sid,
            remote_comm_id: remote_id,
            remote_qpn,
            starting_psn: req.starting_psn(),
            responder_resources: req.responder_resources(),
            initiator_depth: req.initiator_depth(),
            retry_count: req.retry_count(),
            rnr_retry_count: req.rnr_retry_count(),
            path_mtu: req.path_mtu(),
            transport,
            srq: req.srq(),
            flow_control: req.end_to_end_flow_control(),
            remote_ca_guid: guid,
            primary_local_gid: req.primary_local_gid(),
            primary_remote_gid: req.primary_remote_gid(),
            traffic_class: req.primary_traffic_class(),
            hop_limit: req.primary_hop_limit(),
            flow_label: req.primary_flow_label(),
            local_ack_timeout: req.primary_local_ack_timeout(),
            remote_cm_response_timeout: req.remote_cm_response_timeout(),
            max_cm_retries: req.max_cm_retries(),
            private_data: PrivateData::new(req.private_data()),
        };
        let conn = Conn {
            id,
            // Entered through set_state below, which counts it.
            state: State::Timewait,
            passive: true,
            listener: Some(lid),
            peer: *from,
            remote_comm_id: remote_id,
            remote_ca_guid: guid,
            remote_qpn,
            local_qpn: 0,
            service_id: sid,
            tid,
            // Our REP and DREQ wait the active side's CM response time.
            timeout: iba_time(req.local_cm_response_timeout()),
            max_cm_retries: req.max_cm_retries(),
            retry: None,
            timewait_end: None,
            service_timeout: 0,
            private_data: PrivateData::EMPTY,
            destroyed: false,
            scheduled: None,
        };
        self.conns.insert(id, conn);
        self.set_state(id, State::ReqRcvd);
        self.remote_ids.insert((remote_id, guid), id);
        self.remote_qpns.insert((remote_qpn, guid), id);
        self.emit(
            id,
            CmEvent::ReqReceived {
                listener: lid,
                conn: id,
                req: info,
            },
        );
        Rx::Accepted
    }

    /// cm.c sends a DREQ on an established connection a stale REQ / REP
    /// names (ib_send_cm_dreq: only when established).
    fn dreq_stale(&mut self, now: Instant, old: ConnId) {
        let Some(c) = self.conns.get(&old) else {
            return;
        };
        if c.state != State::Established {
            return;
        }
        let (timeout, retries) = (c.timeout, c.max_cm_retries);
        let tid = self.form_tid(old);
        if let Some(c) = self.conns.get_mut(&old) {
            c.tid = tid;
        }
        let mad = self.format_dreq(old, &[]);
        self.set_state(old, State::DreqSent);
        self.send_with_retry(now, old, mad, timeout, retries);
    }

    /// MRA (cm.c's cm_mra_handler): the REQ or REP waits the service
    /// timeout plus the path's ACK timeout longer.
    fn on_mra(&mut self, now: Instant, m: &[u8; MAD_SIZE]) -> Rx {
        let Ok(mra) = Mra::new_checked(&m[..]) else {
            return Rx::Unmatched;
        };
        let what = mra.message_mraed();
        let found = match what {
            msg_code::REQ => self.acquire(mra.remote_comm_id(), 0),
            msg_code::REP | msg_code::OTHER => {
                self.acquire(mra.remote_comm_id(), mra.local_comm_id())
            }
            _ => None,
        };
        let Some(cid) = found else {
            return Rx::Unmatched;
        };
        let wait = iba_time(mra.service_timeout())
            + iba_time(ack_timeout(
                self.config.ack_delay,
                self.config.packet_life_time,
            ));
        let state = self.conns[&cid].state;
        let next = match (state, what) {
            (State::ReqSent, msg_code::REQ) => State::MraReqRcvd,
            (State::RepSent, msg_code::REP) => State::MraRepRcvd,
            (State::MraReqRcvd | State::MraRepRcvd, _) => return Rx::Duplicate,
            _ => return Rx::Unmatched,
        };
        self.set_state(cid, next);
        if let Some(r) = self.conns.get_mut(&cid).and_then(|c| c.retry.as_mut()) {
            r.interval = wait;
            r.deadline = now + wait;
        }
        self.sync_timer(cid);
        self.counters.mras_received += 1;
        Rx::Accepted
    }

    /// REJ (cm.c's cm_acquire_rejected_id / cm_rej_handler).
    fn on_rej(&mut self, now: Instant, m: &[u8; MAD_SIZE]) -> Rx {
        let Ok(rej) = Rej::new_checked(&m[..]) else {
            return Rx::Unmatched;
        };
        let reason = rej.reason();
        let found = if reason == rej_reason::TIMEOUT {
            // The ARI names the rejecting CA (IBA 12.6.7.2).
            let ari = rej.ari();
            if ari.len() < 8 {
                None
            } else {
                let mut g = [0u8; 8];
                g.copy_from_slice(&ari[..8]);
                self.remote_ids
                    .get(&(rej.local_comm_id(), u64::from_be_bytes(g)))
                    .copied()
            }
        } else if rej.message_rejected() == msg_code::REQ {
            self.acquire(rej.remote_comm_id(), 0)
        } else {
            self.acquire(rej.remote_comm_id(), rej.local_comm_id())
        };
        let Some(cid) = found else {
            return Rx::Unmatched;
        };
        let state = self.conns[&cid].state;
        match state {
            State::ReqSent
            | State::MraReqRcvd
            | State::RepSent
            | State::MraRepRcvd
            | State::ReqRcvd
            | State::MraReqSent => {
                self.cancel_retry(cid);
                self.emit_rejected(cid, reason, rej.private_data());
                if reason == rej_reason::STALE_CONNECTION {
                    self.enter_timewait(now, cid);
                } else {
                    self.remove_conn(cid);
                }
            }
            State::DreqSent | State::RepRcvd | State::MraRepSent | State::Established => {
                self.emit_rejected(cid, reason, rej.private_data());
                self.enter_timewait(now, cid);
            }
            _ => return Rx::Unmatched,
        }
        self.counters.rejects_received += 1;
        Rx::Accepted
    }

    fn emit_rejected(&mut self, conn: ConnId, reason: u16, pd: &[u8]) {
        self.emit(
            conn,
            CmEvent::Rejected {
                conn,
                reason,
                private_data: PrivateData::new(pd),
            },
        );
    }

    /// REP (cm.c's cm_rep_handler and cm_dup_rep_handler).
    fn on_rep(&mut self, now: Instant, m: &[u8; MAD_SIZE]) -> Rx {
        let Ok(rep) = Rep::new_checked(&m[..]) else {
            return Rx::Unmatched;
        };
        let local = rep.remote_comm_id();
        let remote = rep.local_comm_id();
        let Some(cid) = self.acquire(local, 0) else {
            // A REP for a connection that has its REP already: the RTU
            // (or MRA) was lost, resend it (IBA 12.9.6.2).
            let Some(cid) = self.acquire(local, remote) else {
                return Rx::Unmatched;
            };
            match self.conns[&cid].state {
                // cm.c resends the RTU in ESTABLISHED only; a DREQ we sent
                // right after the RTU may be lost as well, so the RTU goes
                // again in DREQ_SENT too: the passive side then reaches
                // ESTABLISHED and takes the DREQ, instead of timing out
                // its REP while we close.
                State::Established | State::DreqSent if !self.conns[&cid].passive => {
                    let mad = self.format_rtu(cid);
                    self.queue_to_conn(cid, mad);
                }
                State::MraRepSent => {
                    let mad = self.format_mra(cid, msg_code::REP);
                    self.queue_to_conn(cid, mad);
                }
                _ => {}
            }
            return Rx::Duplicate;
        };
        if !matches!(self.conns[&cid].state, State::ReqSent | State::MraReqRcvd) {
            return Rx::Unmatched;
        }
        let guid = rep.local_ca_guid();
        let qpn = rep.local_qpn();
        if self.remote_ids.contains_key(&(remote, guid)) {
            return Rx::Duplicate;
        }
        if let Some(&old) = self.remote_qpns.get(&(qpn, guid)) {
            let tid = rep.header().transaction_id();
            let peer = self.conns[&cid].peer;
            self.issue_rej(
                &peer,
                tid,
                local,
                remote,
                rej_reason::STALE_CONNECTION,
                msg_code::REP,
            );
            self.dreq_stale(now, old);
            return Rx::Stale;
        }
        if let Some(c) = self.conns.get_mut(&cid) {
            c.remote_comm_id = remote;
            c.remote_ca_guid = guid;
            c.remote_qpn = qpn;
        }
        self.cancel_retry(cid);
        self.remote_ids.insert((remote, guid), cid);
        self.remote_qpns.insert((qpn, guid), cid);
        self.set_state(cid, State::RepRcvd);
        let info = RepInfo {
            remote_comm_id: remote,
            remote_qpn: qpn,
            starting_psn: rep.starting_psn(),
            responder_resources: rep.responder_resources(),
            initiator_depth: rep.initiator_depth(),
            rnr_retry_count: rep.rnr_retry_count(),
            srq: rep.srq(),
            flow_control: rep.end_to_end_flow_control(),
            failover: rep.failover_accepted(),
            target_ack_delay: rep.target_ack_delay(),
            remote_ca_guid: guid,
            private_data: PrivateData::new(rep.private_data()),
        };
        self.emit(
            cid,
            CmEvent::RepReceived {
                conn: cid,
                rep: info,
            },
        );
        Rx::Accepted
    }

    /// RTU (cm.c's cm_rtu_handler).
    fn on_rtu(&mut self, m: &[u8; MAD_SIZE]) -> Rx {
        let Ok(rtu) = Rtu::new_checked(&m[..]) else {
            return Rx::Unmatched;
        };
        let Some(cid) = self.acquire(rtu.remote_comm_id(), rtu.local_comm_id()) else {
            return Rx::Unmatched;
        };
        match self.conns[&cid].state {
            State::RepSent | State::MraRepRcvd => {
                self.cancel_retry(cid);
                self.set_state(cid, State::Established);
                self.counters.established += 1;
                self.emit(cid, CmEvent::Established { conn: cid });
                Rx::Accepted
            }
            _ => Rx::Duplicate,
        }
    }

    /// DREQ (cm.c's cm_dreq_handler). A DREQ for no connection gets a
    /// DREP (cm_issue_drep): the peer's DREP was lost after we forgot it.
    fn on_dreq(&mut self, from: &MadAddress, m: &[u8; MAD_SIZE]) -> Rx {
        let Ok(dreq) = Dreq::new_checked(&m[..]) else {
            return Rx::Unmatched;
        };
        let tid = dreq.header().transaction_id();
        let Some(cid) = self.acquire(dreq.remote_comm_id(), dreq.local_comm_id()) else {
            let mut d = [0u8; MAD_SIZE];
            if let Ok(mut h) = MadHeader::new_checked(&mut d[..]) {
                h.fill_cm(tid, AttrId::Drep);
            }
            if let Ok(mut r) = Drep::new_checked(&mut d[..]) {
                r.set_local_comm_id(dreq.remote_comm_id());
                r.set_remote_comm_id(dreq.local_comm_id());
            }
            self.queue(*from, d);
            return Rx::Unmatched;
        };
        let c = &self.conns[&cid];
        if c.local_qpn != dreq.remote_qpn() {
            return Rx::Unmatched;
        }
        match c.state {
            State::RepSent | State::MraRepRcvd | State::DreqSent | State::Established => {
                self.cancel_retry(cid);
            }
            State::Timewait => {
                let mad = self.format_drep(cid, tid);
                self.queue_to_conn(cid, mad);
                return Rx::Duplicate;
            }
            State::DreqRcvd => return Rx::Duplicate,
            _ => return Rx::Unmatched,
        }
        if let Some(c) = self.conns.get_mut(&cid) {
            c.tid = tid;
        }
        self.set_state(cid, State::DreqRcvd);
        self.emit(
            cid,
            CmEvent::DisconnectRequested {
                conn: cid,
                private_data: PrivateData::new(dreq.private_data()),
            },
        );
        Rx::Accepted
    }

    /// DREP (cm.c's cm_drep_handler).
    fn on_drep(&mut self, now: Instant, m: &[u8; MAD_SIZE]) -> Rx {
        let Ok(drep) = Drep::new_checked(&m[..]) else {
            return Rx::Unmatched;
        };
        let Some(cid) = self.acquire(drep.remote_comm_id(), drep.local_comm_id()) else {
            return Rx::Unmatched;
        };
        match self.conns[&cid].state {
            State::DreqSent | State::DreqRcvd => {
                self.enter_timewait(now, cid);
                self.emit(cid, CmEvent::Disconnected { conn: cid });
                Rx::Accepted
            }
            State::Timewait => Rx::Duplicate,
            _ => Rx::Unmatched,
        }
    }

    /// SIDR_REQ (cm.c's cm_sidr_req_handler): duplicates dropped, no
    /// listener answered with status 1 "service ID not supported".
    fn on_sidr_req(&mut self, from: &MadAddress, m: &[u8; MAD_SIZE]) -> Rx {
        let Ok(req) = SidrReq::new_checked(&m[..]) else {
            return Rx::Unmatched;
        };
        let tid = req.header().transaction_id();
        let request_id = req.request_id();
        if self.remote_sidr.contains_key(&(request_id, from.gid)) {
            return Rx::Duplicate;
        }
        let sid = req.service_id();
        let listener = self
            .listeners
            .iter()
            .find(|(_, l)| l.service_id == sid)
            .map(|(&id, _)| id);
        let Some(lid) = listener else {
            let mut d = [0u8; MAD_SIZE];
            if let Ok(mut h) = MadHeader::new_checked(&mut d[..]) {
                h.fill_cm(tid, AttrId::SidrRep);
            }
            if let Ok(mut r) = SidrRep::new_checked(&mut d[..]) {
                r.set_request_id(request_id);
                r.set_status(sidr_status::UNSUPPORTED);
                r.set_service_id(sid);
            }
            self.queue(*from, d);
            return Rx::NoListener;
        };
        if self.conns.len() >= self.config.max_connections {
            return Rx::ConnectionsRefused;
        }
        let id = self.alloc_comm_id();
        self.conns.insert(
            id,
            Conn {
                id,
                state: State::SidrReqRcvd,
                passive: true,
                listener: Some(lid),
                peer: *from,
                remote_comm_id: request_id,
                remote_ca_guid: 0,
                remote_qpn: 0,
                local_qpn: 0,
                service_id: sid,
                tid,
                timeout: iba_time(0),
                max_cm_retries: 0,
                retry: None,
                timewait_end: None,
                service_timeout: 0,
                private_data: PrivateData::EMPTY,
                destroyed: false,
                scheduled: None,
            },
        );
        self.remote_sidr.insert((request_id, from.gid), id);
        let info = SidrReqInfo {
            peer: *from,
            service_id: sid,
            request_id,
            pkey: req.partition_key(),
            private_data: PrivateData::new(req.private_data()),
        };
        self.emit(
            id,
            CmEvent::SidrReqReceived {
                listener: lid,
                conn: id,
                req: info,
            },
        );
        Rx::Accepted
    }

    /// SIDR_REP (cm.c's cm_sidr_rep_handler).
    fn on_sidr_rep(&mut self, m: &[u8; MAD_SIZE]) -> Rx {
        let Ok(rep) = SidrRep::new_checked(&m[..]) else {
            return Rx::Unmatched;
        };
        let Some(cid) = self.acquire(rep.request_id(), 0) else {
            return Rx::Unmatched;
        };
        if self.conns[&cid].state != State::SidrReqSent {
            return Rx::Unmatched;
        }
        self.emit(
            cid,
            CmEvent::SidrRepReceived {
                conn: cid,
                status: rep.status(),
                qpn: rep.qpn(),
                qkey: rep.qkey(),
                private_data: PrivateData::new(rep.private_data()),
            },
        );
        self.remove_conn(cid);
        Rx::Accepted
    }
}
