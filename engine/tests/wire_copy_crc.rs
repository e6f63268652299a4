//! With the datapath's one-pass copy + CRC installed (`io::copy_crc`, as
//! every AF_XDP socket does), the templated packets the engine sends are
//! byte for byte those of `emit_frame`, whose ICRC the Scapy, tshark and
//! rxe checks vouch for: every payload size from 0 to 4096 bytes, for
//! WRITE, SEND and READ response packets, IPv4 and IPv6, with and without
//! a VLAN tag. (Its own process: the accelerator is process-wide.)

use std::net::{Ipv4Addr, Ipv6Addr};

use engine::io::copy_crc;
use engine::wire::{
    emit_frame, emit_templated, parse_frame, AethRepr, BthRepr, EthRepr, HeaderTemplate, IpRepr,
    Opcode, RethRepr, RoceHeaders, UdpRepr, VlanTag, ROCE_V2_UDP_PORT,
};

fn headers(v6: bool, vlan: bool, op: Opcode, n: u32) -> RoceHeaders {
    let ip = if v6 {
        IpRepr::V6 {
            src: Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1),
            dst: Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2),
            dscp: 26,
            ecn: engine::wire::Ecn::Ect0,
            flow_label: 0,
            hop_limit: 64,
        }
    } else {
        IpRepr::V4 {
            src: Ipv4Addr::new(10, 0, 0, 1),
            dst: Ipv4Addr::new(10, 0, 0, 2),
            dscp: 26,
            ecn: engine::wire::Ecn::Ect1,
            ttl: 64,
            ident: 0,
            dont_fragment: true,
        }
    };
    RoceHeaders {
        eth: EthRepr {
            dst: [2, 0, 0, 0, 0, 2],
            src: [2, 0, 0, 0, 0, 1],
            vlan: vlan.then_some(VlanTag {
                pcp: 3,
                dei: false,
                vid: 100,
            }),
        },
        ip,
        udp: UdpRepr {
            src_port: 0xC000 | (n as u16 & 0x3FFF),
            dst_port: ROCE_V2_UDP_PORT,
        },
        bth: BthRepr {
            opcode: op,
            solicited: false,
            mig_req: false,
            pad_count: 0,
            pkey: 0xFFFF,
            fecn: false,
            becn: false,
            dest_qp: 0x12_3456,
            ack_req: n.is_multiple_of(2),
            psn: n.wrapping_mul(2_654_435_761) & 0xFF_FFFF,
        },
        reth: op.has_reth().then_some(RethRepr {
            va: 0x1_0000_0000 + u64::from(n),
            rkey: 0xABCD_0000,
            dma_len: 65536,
        }),
        aeth: op.has_aeth().then_some(AethRepr {
            syndrome: 0x1F,
            msn: n,
        }),
        atomic_eth: None,
        atomic_ack_eth: None,
        immdt: op.has_immdt().then_some(0xDEAD_0000 ^ n),
        ieth: None,
    }
}

#[test]
fn templated_packets_with_the_one_pass_copy_crc_equal_emit_frame() {
    let accelerated = copy_crc::install();
    eprintln!("one-pass copy + CRC in use: {accelerated}");
    let payload: Vec<u8> = (0..4200u32).map(|i| (i * 31 + 7) as u8).collect();
    let mut a = vec![0xA5u8; 4300];
    let mut b = vec![0x3Cu8; 4300];
    let mut checked = 0;
    for op in [
        Opcode::WriteOnly,
        Opcode::WriteMiddle,
        Opcode::SendLast,
        Opcode::ReadRespOnly,
    ] {
        for v6 in [false, true] {
            for vlan in [false, true] {
                // Every size up to 4096 for one combination, a spread of
                // sizes (around each fold block) for the rest.
                let all = op == Opcode::WriteOnly && !v6 && !vlan;
                for n in 0..=4096u32 {
                    if !all && !n.is_multiple_of(61) && !(250..=260).contains(&n) && n < 4090 {
                        continue;
                    }
                    let h = headers(v6, vlan, op, n);
                    let p = &payload[(n as usize) % 13..][..n as usize];
                    let want = emit_frame(&h, p, &mut a).unwrap();
                    let t = HeaderTemplate::new(&h.eth, &h.ip, &h.udp);
                    let got = emit_templated(
                        &t,
                        &h.bth,
                        h.reth.as_ref(),
                        h.immdt,
                        h.aeth.as_ref(),
                        p,
                        &mut b,
                    )
                    .unwrap();
                    assert_eq!(&b[..got], &a[..want], "{op:?} {n} B v6 {v6} vlan {vlan}");
                    if op != Opcode::WriteMiddle || n.is_multiple_of(4) {
                        parse_frame(&b[..got]).unwrap();
                    }
                    checked += 1;
                }
            }
        }
    }
    assert!(checked > 4500, "{checked}");
}
