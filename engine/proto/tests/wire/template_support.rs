//! Shared by the tests of the templated transmit path (`wire::template`):
//! headers for every templated opcode and the byte-for-byte comparison
//! with `emit_frame`, for a given copy + CRC function.
//! `engine/tests/wire_copy_crc.rs` includes this file too (by path), to
//! run the comparison with the datapath's copy + CRC.

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use proto::wire::crc32::CopyCrc;
use proto::wire::{
    emit_frame, emit_templated, pad_for, parse_frame, AethRepr, BthRepr, Ecn, EthRepr,
    HeaderTemplate, IpRepr, Opcode, RethRepr, RoceHeaders, UdpRepr, VlanTag, ROCE_V2_UDP_PORT,
};

/// The payload sizes every templated opcode is tried with: each pad, and
/// the edges of one and of a full PMTU.
pub const SIZES: [usize; 17] = [
    0, 1, 2, 3, 4, 5, 63, 64, 65, 255, 256, 257, 1023, 1024, 2049, 4093, 4096,
];

/// The opcodes `emit_templated` builds: all but the atomics, the
/// SEND with invalidate, the UD SENDs and CNP (those go through
/// `emit_frame`).
pub fn templated_opcodes() -> impl Iterator<Item = Opcode> {
    Opcode::ALL.into_iter().filter(|op| {
        !op.has_atomic_eth()
            && !op.has_atomic_ack_eth()
            && !op.has_ieth()
            && !op.has_deth()
            && *op != Opcode::Cnp
    })
}

pub fn headers(ip: IpAddr, vlan: bool, op: Opcode, psn: u32, seed: u32) -> RoceHeaders {
    let ecn = [Ecn::NotEct, Ecn::Ect1, Ecn::Ect0, Ecn::Ce][(seed % 4) as usize];
    let ip = match ip {
        IpAddr::V4(src) => IpRepr::V4 {
            src,
            dst: Ipv4Addr::new(192, 168, (seed >> 8) as u8, seed as u8),
            dscp: (seed % 64) as u8,
            ecn,
            ttl: (seed % 255) as u8 + 1,
            ident: 0,
            dont_fragment: true,
        },
        IpAddr::V6(src) => IpRepr::V6 {
            src,
            dst: Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, seed as u16, 2),
            dscp: (seed % 64) as u8,
            ecn,
            flow_label: 0,
            hop_limit: (seed % 255) as u8 + 1,
        },
    };
    RoceHeaders {
        eth: EthRepr {
            dst: [2, 0, 0, 0, 0, seed as u8],
            src: [2, 0, 0, 0, 1, 2],
            vlan: vlan.then_some(VlanTag {
                pcp: 3,
                dei: false,
                vid: 100,
            }),
        },
        ip,
        udp: UdpRepr {
            src_port: 0xC000 | (seed as u16 & 0x3FFF),
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
            dest_qp: 0x12_3456 ^ seed,
            ack_req: seed.is_multiple_of(3),
            psn,
        },
        reth: op.has_reth().then_some(RethRepr {
            va: 0x1_0000_0000 + u64::from(seed),
            rkey: 0xABCD_0000 | seed,
            dma_len: 65536,
        }),
        aeth: op.has_aeth().then_some(AethRepr {
            syndrome: [0x1F, 0x00, 0x61, 0x63][(seed % 4) as usize],
            msn: seed & 0xFF_FFFF,
        }),
        atomic_eth: None,
        atomic_ack_eth: None,
        immdt: op.has_immdt().then_some(0xDEAD_0000 ^ seed),
        ieth: None,
        deth: None,
    }
}

/// The template path writes the same bytes as `emit_frame` (which the
/// Scapy/tshark vectors and rxe captures check) for every request and
/// response opcode without AtomicETH / AtomicAckETH / IETH, IPv4 and IPv6, with and without a VLAN tag,
/// payloads 0..=4096 bytes (every pad), PSNs across the 24-bit wrap,
/// into a buffer holding the previous packet's bytes; `sizes` are the
/// payload sizes tried.
pub fn check_templated_equals_emit_frame(copy_crc: CopyCrc, sizes: &[usize]) {
    // Requests, READ responses and ACK: 19 RC opcodes (ATOMIC WRITE
    // included) and UC's 12.
    assert_eq!(templated_opcodes().count(), 31);
    let payload: Vec<u8> = (0..4096u32).map(|i| (i * 7 + 1) as u8).collect();
    let mut a = vec![0xA5u8; 4200];
    let mut b = vec![0x3Cu8; 4200];
    let mut seed = 1u32;
    let mut checked = 0;
    for ip in [
        IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
        IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1)),
    ] {
        for vlan in [false, true] {
            for op in templated_opcodes() {
                for &n in sizes {
                    if !op.has_payload() && n > 0 {
                        continue;
                    }
                    seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12345) >> 8;
                    let psn = [0, 1, 0x7F_FFFF, 0xFF_FFFF, seed & 0xFF_FFFF][seed as usize % 5];
                    let h = headers(ip, vlan, op, psn, seed);
                    let p = &payload[seed as usize % 7..][..n.min(4096 - 6)];
                    let want = emit_frame(&h, p, &mut a).unwrap();
                    let t = HeaderTemplate::new(&h.eth, &h.ip, &h.udp);
                    assert_eq!(t.reprs(), (h.eth, h.ip, h.udp), "read back");
                    assert_eq!(t.frame_len(op, p.len()), want);
                    let got = emit_templated(
                        copy_crc,
                        &t,
                        &h.bth,
                        h.reth.as_ref(),
                        h.immdt,
                        h.aeth.as_ref(),
                        p,
                        &mut b,
                    )
                    .unwrap();
                    assert_eq!(got, want, "{op:?} {n} B");
                    assert_eq!(&b[..got], &a[..want], "{op:?} {n} B psn {psn:#x}");
                    // FIRST/MIDDLE with a pad do not parse (BadPad),
                    // though both emits agree on their bytes.
                    let mid = matches!(
                        op.rc_equivalent(),
                        Opcode::SendFirst
                            | Opcode::SendMiddle
                            | Opcode::WriteFirst
                            | Opcode::WriteMiddle
                            | Opcode::ReadRespFirst
                            | Opcode::ReadRespMiddle
                    );
                    if !mid || pad_for(p.len()) == 0 {
                        parse_frame(&b[..got]).unwrap();
                    }
                    checked += 1;
                }
            }
        }
    }
    assert!(checked >= 36 * sizes.len(), "{checked}");
}
