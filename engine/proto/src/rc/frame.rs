//! Per-QP header template: the Ethernet/IP/UDP/BTH fields that are the same
//! for every packet a QP sends, filled once when the QP reaches RTR.

use core::net::IpAddr;

use super::attr::QpAttr;
use super::psn::Psn;
use crate::wire::{
    BthRepr, Ecn, EthRepr, HeaderTemplate, IpRepr, Opcode, RoceFrameView, RoceHeaders, UdpRepr,
    ROCE_V2_UDP_PORT,
};

/// Headers of one QP's packets, minus opcode, PSN and extension headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameTemplate {
    pub eth: EthRepr,
    pub ip: IpRepr,
    pub udp: UdpRepr,
    pub pkey: u16,
    pub dest_qp: u32,
    /// `eth`, `ip` and `udp` pre-emitted, for [`crate::wire::emit_templated`].
    pub wire: HeaderTemplate,
}

impl FrameTemplate {
    /// The template of a QP with attributes `attr` (peer address, VLAN,
    /// UDP source port, traffic class, hop limit, P_Key, destination QP) on
    /// the endpoint `local_mac` / `local_ip`; `None` when the two IP
    /// addresses are not of the same family.
    pub fn new(local_mac: [u8; 6], local_ip: IpAddr, attr: &QpAttr) -> Option<FrameTemplate> {
        let QpAttr {
            remote,
            udp_src_port,
            dscp,
            ecn,
            hop_limit,
            pkey,
            dest_qpn,
            ..
        } = *attr;
        let ip = match (local_ip, remote.ip) {
            (IpAddr::V4(src), IpAddr::V4(dst)) => IpRepr::V4 {
                src,
                dst,
                dscp,
                ecn,
                ttl: hop_limit,
                ident: 0,
                dont_fragment: true,
            },
            (IpAddr::V6(src), IpAddr::V6(dst)) => IpRepr::V6 {
                src,
                dst,
                dscp,
                ecn,
                flow_label: 0,
                hop_limit,
            },
            _ => return None,
        };
        let eth = EthRepr {
            dst: remote.mac,
            src: local_mac,
            vlan: remote.vlan,
        };
        let udp = UdpRepr {
            src_port: udp_src_port,
            dst_port: ROCE_V2_UDP_PORT,
        };
        Some(FrameTemplate {
            eth,
            ip,
            udp,
            pkey,
            dest_qp: dest_qpn & Psn::MASK,
            wire: HeaderTemplate::new(&eth, &ip, &udp),
        })
    }

    /// The BTH of one packet (pad count filled in at emit).
    #[inline]
    pub fn bth(&self, opcode: Opcode, psn: Psn, ack_req: bool) -> BthRepr {
        BthRepr {
            opcode,
            solicited: false,
            mig_req: false,
            pad_count: 0,
            pkey: self.pkey,
            fecn: false,
            becn: false,
            dest_qp: self.dest_qp,
            ack_req,
            psn: psn.value(),
        }
    }

    /// Headers for one packet: no extension headers yet.
    #[inline]
    pub fn headers(&self, opcode: Opcode, psn: Psn, ack_req: bool) -> RoceHeaders {
        RoceHeaders {
            eth: self.eth,
            ip: self.ip,
            udp: self.udp,
            bth: self.bth(opcode, psn, ack_req),
            reth: None,
            aeth: None,
            atomic_eth: None,
            atomic_ack_eth: None,
            immdt: None,
            ieth: None,
        }
    }

    /// Whether a received frame comes from this QP's peer to us (IP
    /// addresses swapped with respect to what we send; reads only the two
    /// addresses from the frame bytes).
    #[inline(always)]
    pub fn is_from_peer_view(&self, f: &RoceFrameView<'_>) -> bool {
        match &self.ip {
            IpRepr::V4 { src, dst, .. } => f.ipv4_addrs() == Some((*dst, *src)),
            IpRepr::V6 { src, dst, .. } => f.ipv6_addrs() == Some((*dst, *src)),
        }
    }

    /// The same headers with the IP ECN / DSCP replaced (CNPs are not
    /// ECN-capable and carry their own DSCP).
    pub fn with_traffic_class(mut h: RoceHeaders, dscp: u8, ecn: Ecn) -> RoceHeaders {
        match &mut h.ip {
            IpRepr::V4 {
                dscp: d, ecn: e, ..
            }
            | IpRepr::V6 {
                dscp: d, ecn: e, ..
            } => {
                *d = dscp;
                *e = ecn;
            }
        }
        h
    }
}

/// Opcode classes the transport needs (kept here so the RC code does not
/// depend on helper methods the wire layer may rename).
pub mod class {
    use crate::wire::Opcode;

    /// Request opcodes (handled by the responder).
    #[inline]
    pub const fn is_request(op: Opcode) -> bool {
        (op as u8) <= 0x0C
            || matches!(
                op,
                Opcode::CompareSwap | Opcode::FetchAdd | Opcode::SendLastInv | Opcode::SendOnlyInv
            )
    }

    /// Response opcodes (handled by the completer).
    #[inline]
    pub const fn is_response(op: Opcode) -> bool {
        matches!(
            op,
            Opcode::ReadRespFirst
                | Opcode::ReadRespMiddle
                | Opcode::ReadRespLast
                | Opcode::ReadRespOnly
                | Opcode::Acknowledge
                | Opcode::AtomicAcknowledge
        )
    }
}
