//! Receiving datagrams: rxe's checks for a UD QP (`rxe_recv.c`:
//! `check_type`, the state, `check_keys` with the Q_Key; no peer address
//! check, UD has no peer) and its responder for UD (`rxe_resp.c`:
//! `check_resource` takes the next receive or drops the message,
//! `check_length`, `execute` copies the network header into the first 40
//! bytes of the buffer and the payload after it, `do_complete`).

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::qp::{UdQp, DEFAULT_PKEY, GRH_LEN};
use crate::rc::{
    pkey_match, scatter, Access, Cq, MrTable, QpState, RecvWr, Srq, WcOpcode, WcStatus, WqeData,
};
use crate::wire::RoceFrameView;

/// The network header a UD message came with (verbs
/// `ibv_wc.wc_flags`' network header type; rxe's `RDMA_NETWORK_IPV4` /
/// `RDMA_NETWORK_IPV6`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum NetworkHeader {
    /// RoCE v2 over IPv4: the GRH area holds 20 zero bytes, then the IPv4
    /// header.
    #[default]
    Ipv4,
    /// RoCE v2 over IPv6: the GRH area holds the IPv6 header.
    Ipv6,
}

/// Who sent a datagram: what a UD receive completion adds
/// ([`crate::rc::WorkCompletion::ud`]), enough to answer it
/// (`ibv_create_ah_from_wc`: the source GID, and the MAC that a verbs
/// layer without neighbour resolution needs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct UdSource {
    /// The sending QP (the DETH's source QP; `ibv_wc.src_qp`).
    pub src_qp: u32,
    /// The source GID: the IPv6 source address, or the IPv4 one mapped
    /// (`::ffff:a.b.c.d`, RoCE v2's GID of an IPv4 address).
    pub sgid: [u8; 16],
    /// IPv4 or IPv6.
    pub network: NetworkHeader,
    /// The Ethernet source address (kernel `ib_wc.smac`).
    pub smac: [u8; 6],
}

impl UdSource {
    /// The source IP address.
    pub fn src_ip(&self) -> IpAddr {
        let v6 = Ipv6Addr::from(self.sgid);
        match self.network {
            NetworkHeader::Ipv4 => IpAddr::V4(v6.to_ipv4_mapped().unwrap_or(Ipv4Addr::UNSPECIFIED)),
            NetworkHeader::Ipv6 => IpAddr::V6(v6),
        }
    }
}

/// What [`UdQp::receive`] did with a datagram, for the endpoint's
/// bookkeeping (every drop is counted in the QP's counters).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Received {
    /// Placed and completed (or completed with an error).
    Completed,
    /// Dropped and counted.
    Dropped,
}

impl UdQp {
    /// A valid RoCE v2 frame with a UD opcode for this QP.
    pub(crate) fn receive(
        &mut self,
        f: &RoceFrameView<'_>,
        mrs: &mut MrTable,
        cqs: &mut [Cq],
        srq: Option<&mut Srq>,
    ) -> Received {
        // rxe hdr_check: a request needs RTR or RTS.
        if !matches!(self.attr.state, QpState::Rtr | QpState::Rts) {
            self.counters.dropped_malformed += 1;
            return Received::Dropped;
        }
        // check_keys: the P_Key (IBA 9.6.1.1 / 10.9.3, rxe `pkey_match`
        // against the one table entry), then the Q_Key (IBA 10.2.5,
        // C10-15; QP 1 wants the GSI's).
        if !pkey_match(f.pkey(), DEFAULT_PKEY) {
            self.counters.dropped_bad_pkey += 1;
            return Received::Dropped;
        }
        let Some(deth) = f.deth() else {
            self.counters.dropped_malformed += 1;
            return Received::Dropped;
        };
        if deth.qkey != self.qkey() {
            self.counters.dropped_bad_qkey += 1;
            return Received::Dropped;
        }
        self.counters.rcvd_pkts += 1;
        // check_resource: no receive posted is class D on UD (IBA
        // 9.7.5.2.8; rxe RESPST_ERR_RNR for UD): the message is dropped.
        // A QP on a shared receive queue takes the SRQ's head (rxe
        // get_srq_wqe; `rc/srq.rs`).
        let posted = srq
            .as_deref()
            .map_or(!self.rq.is_empty(), |s| !s.is_empty());
        if !posted {
            self.counters.dropped_no_receive += 1;
            return Received::Dropped;
        }
        // check_length: an ONLY packet longer than the MTU is class D too.
        let payload = f.payload();
        if payload.len() > self.attr.mtu.bytes() as usize {
            self.counters.dropped_malformed += 1;
            return Received::Dropped;
        }
        if let Some(s) = srq {
            return self.receive_into_srq_wqe(f, payload, mrs, cqs, s);
        }
        let Some(wr) = self.rq.pop_front() else {
            return Received::Dropped;
        };
        // execute: the GRH area, then the payload. A buffer too small for
        // both (rxe copy_data: -EINVAL, RESPST_ERR_MALFORMED_WQE) or a
        // key that does not work completes with a local QP operation error
        // and moves the QP to ERROR (class A).
        let need = GRH_LEN + payload.len();
        if wr.sge.length as usize >= need {
            if let Ok(dst) =
                mrs.slice_mut(self.pd, wr.sge.lkey, wr.sge.addr, need, Access::LOCAL_WRITE)
            {
                let (grh, data) = dst.split_at_mut(GRH_LEN);
                fill_grh(f, grh);
                data.copy_from_slice(payload);
                self.complete_received(f, wr, need, cqs);
                return Received::Completed;
            }
            // The key does not work in this QP's PD, its region lacks
            // LOCAL_WRITE, or the range leaves the region: rxe_resp.c
            // `execute` copies the GRH area and then the payload, each
            // through rxe_mr.c `copy_data` (`lookup_mr` then
            // `mr_check_range` on the bytes copied), so the GRH area lands
            // when its 40 bytes lie in the region and the payload's copy
            // is what fails.
            let mut grh = [0u8; GRH_LEN];
            fill_grh(f, &mut grh);
            scatter(mrs, self.pd, core::slice::from_ref(&wr.sge), 0, &grh);
        }
        self.malformed_receive(wr.wr_id, cqs)
    }

    /// A receive whose buffer refused the datagram (rxe_resp.c
    /// `send_data_in`: `RESPST_ERR_MALFORMED_WQE`, class A for all QP
    /// types): it completes with a local QP operation error and the QP
    /// goes to ERROR.
    #[cold]
    fn malformed_receive(&mut self, wr_id: u64, cqs: &mut [Cq]) -> Received {
        let wc = self.wc(wr_id, WcStatus::LocalQpOperationError, WcOpcode::Recv);
        self.complete(self.init.recv_cq, wc, cqs);
        self.flush(cqs);
        Received::Completed
    }

    /// The datagram into the WQE at the head of the SRQ `srq`: its one
    /// SGE or its SGE list, scattered in order (rxe copy_data), the GRH
    /// area first. Too small, or a piece that refuses the bytes: the
    /// receive completes with a local QP operation error and the QP goes
    /// to ERROR (class A), as with a receive of its own.
    #[cold]
    fn receive_into_srq_wqe(
        &mut self,
        f: &RoceFrameView<'_>,
        payload: &[u8],
        mrs: &mut MrTable,
        cqs: &mut [Cq],
        srq: &mut Srq,
    ) -> Received {
        let Some((wqe, list)) = srq.take() else {
            return Received::Dropped;
        };
        let wr = wqe.wr;
        let need = GRH_LEN + payload.len();
        let mut grh = [0u8; GRH_LEN];
        fill_grh(f, &mut grh);
        // The GRH area, then the payload, each scattered as rxe
        // `copy_data` does: the pieces before one that refuses its bytes
        // have landed.
        let sges = match wqe.data() {
            WqeData::List { .. } => list,
            _ => core::slice::from_ref(&wr.sge),
        };
        let placed = wr.sge.length as usize >= need
            && scatter(mrs, self.pd, sges, 0, &grh)
            && scatter(mrs, self.pd, sges, GRH_LEN as u32, payload);
        if !placed {
            return self.malformed_receive(wr.wr_id, cqs);
        }
        self.complete_received(f, wr, need, cqs);
        Received::Completed
    }

    /// Complete the receive `wr` that took `byte_len` bytes of `f`.
    fn complete_received(
        &mut self,
        f: &RoceFrameView<'_>,
        wr: RecvWr,
        byte_len: usize,
        cqs: &mut [Cq],
    ) {
        let Some(deth) = f.deth() else {
            return;
        };
        let (network, sgid) = match (f.ipv4_addrs(), f.ipv6_addrs()) {
            (Some((src, _)), _) => (NetworkHeader::Ipv4, src.to_ipv6_mapped().octets()),
            (_, Some((src, _))) => (NetworkHeader::Ipv6, src.octets()),
            _ => (NetworkHeader::Ipv4, [0; 16]),
        };
        let mut wc = self.wc(wr.wr_id, WcStatus::Success, WcOpcode::Recv);
        wc.byte_len = byte_len as u32;
        wc.imm = f.immdt();
        wc.ud = Some(UdSource {
            src_qp: deth.src_qp,
            sgid,
            network,
            smac: f.src_mac(),
        });
        self.complete(self.init.recv_cq, wc, cqs);
    }

    /// Post a receive (checked: state, room). Its buffer is not looked
    /// at, as rxe (rdma-core providers/rxe/rxe.c `rxe_post_one_recv`
    /// checks the queue and `num_sge`, no key): a key unknown or of
    /// another PD, a range out of its region or a region without
    /// LOCAL_WRITE fails the receive when a datagram lands in it
    /// ([`UdQp::malformed_receive`]).
    pub(crate) fn post_recv(
        &mut self,
        wr: crate::rc::RecvWr,
        cqs: &mut [Cq],
    ) -> Result<(), crate::rc::VerbsError> {
        use crate::rc::VerbsError;
        if self.init.srq.is_some() {
            // rxe's provider: a QP on an SRQ has no receive queue.
            return Err(VerbsError::InvalidArgument(
                "the QP takes its receives from a shared receive queue: post them there",
            ));
        }
        match self.attr.state {
            QpState::Reset => return Err(VerbsError::InvalidState),
            QpState::Error => {
                let wc = self.wc(wr.wr_id, WcStatus::Flushed, WcOpcode::Recv);
                self.complete(self.init.recv_cq, wc, cqs);
                return Ok(());
            }
            _ => {}
        }
        if self.rq.len() >= self.init.max_recv_wr as usize {
            return Err(VerbsError::QueueFull);
        }
        self.rq.push_back(wr);
        Ok(())
    }
}

/// The 40-byte GRH area of a UD receive (rxe `union rdma_network_hdr`):
/// over IPv4, 20 reserved zero bytes and the IPv4 header; over IPv6, the
/// IPv6 header (its 40 bytes have the GRH's layout).
fn fill_grh(f: &RoceFrameView<'_>, grh: &mut [u8]) {
    let ip = f.ip_header();
    grh[..GRH_LEN - ip.len()].fill(0);
    grh[GRH_LEN - ip.len()..].copy_from_slice(ip);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rc::WorkCompletion;

    /// The sender's details keep a completion within one cache line
    /// (40 bytes without them).
    #[test]
    fn a_completion_fits_a_cache_line() {
        assert_eq!(core::mem::size_of::<UdSource>(), 28);
        assert!(core::mem::size_of::<WorkCompletion>() <= 64);
    }

    #[test]
    fn the_source_ip_comes_back_from_the_gid() {
        let v4 = UdSource {
            sgid: Ipv4Addr::new(10, 0, 0, 7).to_ipv6_mapped().octets(),
            network: NetworkHeader::Ipv4,
            ..UdSource::default()
        };
        assert_eq!(v4.src_ip(), IpAddr::V4(Ipv4Addr::new(10, 0, 0, 7)));
        let v6 = UdSource {
            sgid: Ipv6Addr::LOCALHOST.octets(),
            network: NetworkHeader::Ipv6,
            ..UdSource::default()
        };
        assert_eq!(v6.src_ip(), IpAddr::V6(Ipv6Addr::LOCALHOST));
    }
}
