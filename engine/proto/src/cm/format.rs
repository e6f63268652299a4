//! The MADs the agent sends, formatted as the kernel's cm_format_* do.

use super::agent::{ack_timeout, CmAgent};
use super::config::{AcceptParams, ConnectParams};
use super::conn::State;
use super::mad::{
    msg_code, AttrId, Drep, Dreq, MadHeader, Mra, Rej, Rep, Req, Rtu, SidrRep, SidrReq, MAD_SIZE,
    PERMISSIVE_LID,
};
use super::ConnId;

/// A zeroed MAD with a CM Send header.
fn blank(tid: u64, attr: AttrId) -> [u8; MAD_SIZE] {
    let mut m = [0u8; MAD_SIZE];
    if let Ok(mut h) = MadHeader::new_checked(&mut m[..]) {
        h.fill_cm(tid, attr);
    }
    m
}

impl CmAgent {
    /// REQ (IBA 12.6.5; cm.c's cm_format_req for a RoCE v2 path: LIDs
    /// permissive when the path is routed (hop limit above 1), subnet
    /// local otherwise, no alternate path, local ACK timeout from the
    /// packet life time and the CA's ACK delay).
    pub(crate) fn format_req(&self, id: ConnId, tid: u64, p: &ConnectParams) -> [u8; MAD_SIZE] {
        let mut m = blank(tid, AttrId::Req);
        if let Ok(mut r) = Req::new_checked(&mut m[..]) {
            r.set_local_comm_id(id);
            r.set_service_id(p.service_id);
            r.set_local_ca_guid(self.config.ca_guid);
            r.set_local_qpn(p.local_qpn);
            r.set_responder_resources(p.responder_resources);
            r.set_initiator_depth(p.initiator_depth);
            r.set_remote_cm_response_timeout(p.remote_cm_response_timeout);
            r.set_transport_service_type(p.transport.code());
            r.set_end_to_end_flow_control(p.flow_control);
            r.set_starting_psn(p.starting_psn);
            r.set_local_cm_response_timeout(p.local_cm_response_timeout);
            r.set_retry_count(p.retry_count);
            r.set_partition_key(self.config.pkey);
            r.set_path_mtu(p.path_mtu);
            r.set_rnr_retry_count(p.rnr_retry_count);
            r.set_max_cm_retries(p.max_cm_retries);
            r.set_srq(p.srq);
            let routed = p.hop_limit > 1;
            let lid = if routed { PERMISSIVE_LID } else { 0 };
            r.set_primary_local_lid(lid);
            r.set_primary_remote_lid(lid);
            r.set_primary_local_gid(self.config.local_gid);
            r.set_primary_remote_gid(p.peer.gid);
            r.set_primary_flow_label(p.flow_label);
            r.set_primary_packet_rate(self.config.packet_rate);
            r.set_primary_traffic_class(p.traffic_class);
            r.set_primary_hop_limit(p.hop_limit);
            r.set_primary_sl(0);
            r.set_primary_subnet_local(!routed);
            r.set_primary_local_ack_timeout(ack_timeout(
                self.config.ack_delay,
                self.config.packet_life_time,
            ));
            let _ = r.set_private_data(p.private_data);
        }
        m
    }

    /// REP (IBA 12.6.8; cm.c's cm_format_rep).
    pub(crate) fn format_rep(&self, conn: ConnId, tid: u64, p: &AcceptParams) -> [u8; MAD_SIZE] {
        let mut m = blank(tid, AttrId::Rep);
        let remote = self.conns.get(&conn).map_or(0, |c| c.remote_comm_id);
        if let Ok(mut r) = Rep::new_checked(&mut m[..]) {
            r.set_local_comm_id(conn);
            r.set_remote_comm_id(remote);
            r.set_local_qpn(p.local_qpn);
            r.set_starting_psn(p.starting_psn);
            r.set_responder_resources(p.responder_resources);
            r.set_initiator_depth(p.initiator_depth);
            r.set_target_ack_delay(self.config.ack_delay.min(31));
            // cm.c writes the consumer's value as is (rdma_cm: 0).
            r.set_failover_accepted(u8::from(p.failover_accepted));
            r.set_end_to_end_flow_control(p.flow_control);
            r.set_rnr_retry_count(p.rnr_retry_count);
            r.set_srq(p.srq);
            r.set_local_ca_guid(self.config.ca_guid);
            let _ = r.set_private_data(p.private_data);
        }
        m
    }

    /// RTU (IBA 12.6.9) with the private data the consumer gave.
    pub(crate) fn format_rtu(&self, conn: ConnId) -> [u8; MAD_SIZE] {
        let Some(c) = self.conns.get(&conn) else {
            return [0; MAD_SIZE];
        };
        let mut m = blank(c.tid, AttrId::Rtu);
        if let Ok(mut r) = Rtu::new_checked(&mut m[..]) {
            r.set_local_comm_id(conn);
            r.set_remote_comm_id(c.remote_comm_id);
            let _ = r.set_private_data(c.private_data.as_slice());
        }
        m
    }

    /// MRA (IBA 12.6.6) of the REQ or REP (`what`).
    pub(crate) fn format_mra(&self, conn: ConnId, what: u8) -> [u8; MAD_SIZE] {
        let Some(c) = self.conns.get(&conn) else {
            return [0; MAD_SIZE];
        };
        let mut m = blank(c.tid, AttrId::Mra);
        if let Ok(mut r) = Mra::new_checked(&mut m[..]) {
            r.set_local_comm_id(conn);
            r.set_remote_comm_id(c.remote_comm_id);
            r.set_message_mraed(what);
            r.set_service_timeout(c.service_timeout);
            let _ = r.set_private_data(c.private_data.as_slice());
        }
        m
    }

    /// REJ (IBA 12.6.7; cm.c's cm_format_rej): our comm ID is 0 while the
    /// REQ is only received; "message rejected" says REQ, REP or other by
    /// state.
    pub(crate) fn format_rej(
        &self,
        conn: ConnId,
        reason: u16,
        ari: &[u8],
        private_data: &[u8],
    ) -> [u8; MAD_SIZE] {
        let Some(c) = self.conns.get(&conn) else {
            return [0; MAD_SIZE];
        };
        let mut m = blank(c.tid, AttrId::Rej);
        if let Ok(mut r) = Rej::new_checked(&mut m[..]) {
            r.set_remote_comm_id(c.remote_comm_id);
            let (local, what) = match c.state {
                State::ReqRcvd => (0, msg_code::REQ),
                State::MraReqSent => (conn, msg_code::REQ),
                State::RepRcvd | State::MraRepSent => (conn, msg_code::REP),
                _ => (conn, msg_code::OTHER),
            };
            r.set_local_comm_id(local);
            r.set_message_rejected(what);
            r.set_reason(reason);
            let _ = r.set_ari(ari);
            let _ = r.set_private_data(private_data);
        }
        m
    }

    /// DREQ (IBA 12.6.10) with the connection's current TID.
    pub(crate) fn format_dreq(&self, conn: ConnId, private_data: &[u8]) -> [u8; MAD_SIZE] {
        let Some(c) = self.conns.get(&conn) else {
            return [0; MAD_SIZE];
        };
        let mut m = blank(c.tid, AttrId::Dreq);
        if let Ok(mut r) = Dreq::new_checked(&mut m[..]) {
            r.set_local_comm_id(conn);
            r.set_remote_comm_id(c.remote_comm_id);
            r.set_remote_qpn(c.remote_qpn);
            let _ = r.set_private_data(private_data);
        }
        m
    }

    /// DREP (IBA 12.6.11) answering the DREQ of transaction `tid`.
    pub(crate) fn format_drep(&self, conn: ConnId, tid: u64) -> [u8; MAD_SIZE] {
        let Some(c) = self.conns.get(&conn) else {
            return [0; MAD_SIZE];
        };
        let mut m = blank(tid, AttrId::Drep);
        if let Ok(mut r) = Drep::new_checked(&mut m[..]) {
            r.set_local_comm_id(conn);
            r.set_remote_comm_id(c.remote_comm_id);
            let _ = r.set_private_data(c.private_data.as_slice());
        }
        m
    }

    /// SIDR_REQ (IBA 12.11.1): the request ID is our comm ID.
    pub(crate) fn format_sidr_req(
        &self,
        id: ConnId,
        tid: u64,
        service_id: u64,
        private_data: &[u8],
    ) -> [u8; MAD_SIZE] {
        let mut m = blank(tid, AttrId::SidrReq);
        if let Ok(mut r) = SidrReq::new_checked(&mut m[..]) {
            r.set_request_id(id);
            r.set_partition_key(self.config.pkey);
            r.set_service_id(service_id);
            let _ = r.set_private_data(private_data);
        }
        m
    }

    /// SIDR_REP (IBA 12.11.2) answering a received SIDR_REQ.
    pub(crate) fn format_sidr_rep(
        &self,
        conn: ConnId,
        status: u8,
        qpn: u32,
        qkey: u32,
        private_data: &[u8],
    ) -> [u8; MAD_SIZE] {
        let Some(c) = self.conns.get(&conn) else {
            return [0; MAD_SIZE];
        };
        let mut m = blank(c.tid, AttrId::SidrRep);
        if let Ok(mut r) = SidrRep::new_checked(&mut m[..]) {
            r.set_request_id(c.remote_comm_id);
            r.set_status(status);
            r.set_qpn(qpn);
            r.set_service_id(c.service_id);
            r.set_qkey(qkey);
            let _ = r.set_private_data(private_data);
        }
        m
    }
}
