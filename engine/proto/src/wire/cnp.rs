//! The RoCE v2 Congestion Notification Packet (`docs/congestion.md`,
//! "CNP"): BTH opcode 0x81, DestQP = the QP of the sender whose
//! packet was marked CE, BECN = 1, PSN 0, then 16 reserved zero bytes, then
//! the ICRC. Sent with its own DSCP (NVIDIA default 48), not ECN-capable.
//!
//! In a parsed [`RoceFrame`](super::RoceFrame) the 16 reserved bytes are the
//! `payload`; [`emit_frame`](super::emit_frame) writes them as zeros when
//! given an empty payload.

use super::bth::{BthRepr, DEFAULT_PKEY};
use super::eth::EthRepr;
use super::frame::RoceHeaders;
use super::ip::{Ecn, IpRepr};
use super::opcode::Opcode;
use super::udp::{UdpRepr, ROCE_V2_UDP_PORT};

/// Bytes of the CNP's reserved field after the BTH.
pub const RESERVED_LEN: usize = 16;
/// The reserved field's content (zeros).
pub const RESERVED: [u8; RESERVED_LEN] = [0; RESERVED_LEN];
/// DSCP NVIDIA NICs use for CNPs by default.
pub const DEFAULT_DSCP: u8 = 48;

/// Headers of a CNP to `dest_qp` over the given L2/L3 path. The IP header's
/// ECN is forced to Not-ECT (CNPs are not ECN-capable); its DSCP is kept.
pub fn cnp_headers(
    eth: EthRepr,
    mut ip: IpRepr,
    src_port: u16,
    dest_qp: u32,
    pkey: u16,
) -> RoceHeaders {
    match &mut ip {
        IpRepr::V4 { ecn, .. } | IpRepr::V6 { ecn, .. } => *ecn = Ecn::NotEct,
    }
    RoceHeaders {
        eth,
        ip,
        udp: UdpRepr {
            src_port,
            dst_port: ROCE_V2_UDP_PORT,
        },
        bth: BthRepr {
            opcode: Opcode::Cnp,
            solicited: false,
            mig_req: false,
            pad_count: 0,
            pkey,
            fecn: false,
            becn: true,
            dest_qp: dest_qp & 0xFF_FFFF,
            ack_req: false,
            psn: 0,
        },
        reth: None,
        aeth: None,
        atomic_eth: None,
        atomic_ack_eth: None,
        immdt: None,
        ieth: None,
        deth: None,
    }
}

/// Headers of the CNP answering a CE-marked packet `marked`: MAC and IP
/// addresses swapped, the same VLAN and P_Key, DSCP `dscp`, TTL/hop limit
/// 64, the same UDP source port (flow entropy), DestQP `sender_qp` (the
/// marked packet's sender, which the receiver knows from its QP context).
pub fn cnp_reply(marked: &RoceHeaders, sender_qp: u32, dscp: u8) -> RoceHeaders {
    let eth = EthRepr {
        dst: marked.eth.src,
        src: marked.eth.dst,
        vlan: marked.eth.vlan,
    };
    let ip = match marked.ip {
        IpRepr::V4 {
            src,
            dst,
            ident,
            dont_fragment,
            ..
        } => IpRepr::V4 {
            src: dst,
            dst: src,
            dscp,
            ecn: Ecn::NotEct,
            ttl: 64,
            ident,
            dont_fragment,
        },
        IpRepr::V6 {
            src,
            dst,
            flow_label,
            ..
        } => IpRepr::V6 {
            src: dst,
            dst: src,
            dscp,
            ecn: Ecn::NotEct,
            flow_label,
            hop_limit: 64,
        },
    };
    cnp_headers(eth, ip, marked.udp.src_port, sender_qp, marked.bth.pkey)
}

/// Default-P_Key CNP headers (convenience for tests and the simulator).
pub fn cnp_headers_default_pkey(
    eth: EthRepr,
    ip: IpRepr,
    src_port: u16,
    dest_qp: u32,
) -> RoceHeaders {
    cnp_headers(eth, ip, src_port, dest_qp, DEFAULT_PKEY)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{emit_frame, parse_frame};
    use core::net::Ipv4Addr;

    #[test]
    fn cnp_round_trips_with_reserved_bytes_as_payload() {
        let ip = IpRepr::V4 {
            src: Ipv4Addr::new(10, 0, 0, 2),
            dst: Ipv4Addr::new(10, 0, 0, 1),
            dscp: DEFAULT_DSCP,
            ecn: Ecn::Ce,
            ttl: 64,
            ident: 0,
            dont_fragment: true,
        };
        let h = cnp_headers(EthRepr::default(), ip, 0xC000, 0x1234, DEFAULT_PKEY);
        assert_eq!(h.ip.ecn(), Ecn::NotEct);
        let mut buf = [0u8; 128];
        let n = emit_frame(&h, &[], &mut buf).unwrap();
        assert_eq!(n, 14 + 20 + 8 + 12 + RESERVED_LEN + 4);
        let f = parse_frame(&buf[..n]).unwrap();
        assert_eq!(f.headers, h);
        assert_eq!(f.payload, &RESERVED);
        assert!(f.headers.bth.becn);

        let reply = cnp_reply(&f.headers, 0x77, 48);
        assert_eq!(reply.bth.dest_qp, 0x77);
        assert_eq!(reply.ip.dscp(), 48);
        match reply.ip {
            IpRepr::V4 { src, dst, .. } => {
                assert_eq!(
                    (src, dst),
                    (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2))
                )
            }
            _ => unreachable!(),
        }
    }
}
