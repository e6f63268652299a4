//! Per-QP header template: the Ethernet/IP/UDP/BTH fields that are the same
//! for every packet a QP sends, filled once when the QP reaches RTR.

use core::net::IpAddr;

use super::attr::QpAttr;
use super::psn::Psn;
use super::qp::Qp;
use crate::wire::{
    BthRepr, Ecn, EthRepr, HeaderTemplate, IpRepr, Opcode, RoceFrameView, RoceHeaders, UdpRepr,
    ROCE_V2_UDP_PORT,
};

/// Headers of one QP's packets, minus opcode, PSN and extension headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameTemplate {
    pub pkey: u16,
    pub dest_qp: u32,
    /// The peer's UDP source port, when the QP checks it
    /// ([`super::RemoteAddress::udp_src_port`]).
    pub peer_udp_src_port: Option<u16>,
    /// The Ethernet, IP and UDP headers, pre-emitted for
    /// [`crate::wire::emit_templated`]; the only copy a QP keeps of them
    /// ([`HeaderTemplate::reprs`] reads them back for the other emits).
    pub wire: HeaderTemplate,
}

/// Why a received packet was refused before the QP's roles saw it: rxe's
/// `hdr_check` (`rxe_recv.c`) for a connected QP, which runs
/// `check_addr` and then `check_keys`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    /// Not from the QP's peer: IP pair (rxe `check_addr`), or the UDP
    /// source port when the QP knows the peer's.
    WrongPeer,
    /// P_Key does not match the QP's (rxe `check_keys`, `bad_pkey_cntr`).
    BadPkey,
}

/// Whether two P_Keys match (IBTA Vol. 1, 9.2.7 "Partition key" and
/// chapter 10.9 "Partitioning"; rxe `pkey_match` in `rxe_recv.c`): the same 15-bit key, not the invalid
/// key 0, and at least one of the two a full member (bit 15).
#[inline(always)]
pub const fn pkey_match(a: u16, b: u16) -> bool {
    (a & 0x7FFF) != 0 && (a & 0x7FFF) == (b & 0x7FFF) && (a & 0x8000 | b & 0x8000) != 0
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
            pkey,
            dest_qp: dest_qpn & Psn::MASK,
            peer_udp_src_port: remote.udp_src_port,
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

    /// Headers for one packet: no extension headers yet. For the packets
    /// that do not go through [`crate::wire::emit_templated`] (CNPs,
    /// atomics): the Ethernet, IP and UDP headers are read back from the
    /// template's bytes.
    #[inline]
    pub fn headers(&self, opcode: Opcode, psn: Psn, ack_req: bool) -> RoceHeaders {
        let (eth, ip, udp) = self.wire.reprs();
        RoceHeaders {
            eth,
            ip,
            udp,
            bth: self.bth(opcode, psn, ack_req),
            reth: None,
            aeth: None,
            atomic_eth: None,
            atomic_ack_eth: None,
            immdt: None,
            ieth: None,
            deth: None,
        }
    }

    /// Whether a received frame comes from this QP's peer to us (IP
    /// addresses swapped with respect to what we send; reads only the two
    /// addresses from the frame bytes).
    #[inline(always)]
    pub fn is_from_peer_view(&self, f: &RoceFrameView<'_>) -> bool {
        self.wire.is_reply(f)
    }

    /// The header checks of a packet for this QP, in rxe's `hdr_check`
    /// order: from the peer (IP pair swapped, rxe `check_addr`; the UDP
    /// source port too when known), then the P_Key against the QP's (rxe
    /// `check_keys`, which drops a mismatch silently and counts it in the
    /// port's `bad_pkey_cntr`). Reads only those fields from the frame
    /// bytes.
    #[inline(always)]
    pub(crate) fn admit(&self, f: &RoceFrameView<'_>) -> Result<(), Refused> {
        if !self.is_from_peer_view(f) {
            return Err(Refused::WrongPeer);
        }
        if self
            .peer_udp_src_port
            .is_some_and(|p| p != f.udp_src_port())
        {
            return Err(Refused::WrongPeer);
        }
        if !pkey_match(f.pkey(), self.pkey) {
            return Err(Refused::BadPkey);
        }
        Ok(())
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

impl Qp {
    /// Whether a packet addressed to this QP passes the header checks
    /// ([`FrameTemplate::admit`]); a refused one is counted
    /// (`dropped_wrong_peer`, `dropped_bad_pkey`) and nothing else of the
    /// QP changes. A QP without a template (not yet connected) has no
    /// peer: everything is refused as from the wrong peer.
    #[inline(always)]
    pub(crate) fn admit(&mut self, f: &RoceFrameView<'_>) -> bool {
        let verdict = match &self.tpl {
            Some(t) => t.admit(f),
            None => Err(Refused::WrongPeer),
        };
        match verdict {
            Ok(()) => true,
            Err(Refused::WrongPeer) => {
                self.counters.rest().dropped_wrong_peer += 1;
                false
            }
            Err(Refused::BadPkey) => {
                self.counters.rest().dropped_bad_pkey += 1;
                false
            }
        }
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
                Opcode::CompareSwap
                    | Opcode::FetchAdd
                    | Opcode::SendLastInv
                    | Opcode::SendOnlyInv
                    | Opcode::AtomicWrite
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
