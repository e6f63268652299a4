//! Emit-then-parse round trips for every opcode, IPv4/IPv6, with and without
//! an 802.1Q tag, every pad count; and the typed errors of malformed frames.

use core::net::{Ipv4Addr, Ipv6Addr};

use proto::wire::{
    emit_frame, frame_len, parse_frame, AethRepr, AtomicAckEthRepr, AtomicEthRepr, BthRepr,
    DethRepr, Ecn, EmitError, EthRepr, IpRepr, Opcode, ParseError, RethRepr, RoceHeaders, UdpRepr,
    VlanTag, DEFAULT_PKEY, ROCE_V2_UDP_PORT,
};

fn ipv4() -> IpRepr {
    IpRepr::V4 {
        src: Ipv4Addr::new(10, 0, 0, 1),
        dst: Ipv4Addr::new(10, 0, 0, 2),
        dscp: 26,
        ecn: Ecn::Ect0,
        ttl: 64,
        ident: 0x1234,
        dont_fragment: true,
    }
}

fn ipv6() -> IpRepr {
    IpRepr::V6 {
        src: "fd00::1".parse::<Ipv6Addr>().unwrap(),
        dst: "fd00::2".parse::<Ipv6Addr>().unwrap(),
        dscp: 26,
        ecn: Ecn::Ce,
        flow_label: 0xABCDE,
        hop_limit: 63,
    }
}

fn headers(op: Opcode, ip: IpRepr, vlan: Option<VlanTag>) -> RoceHeaders {
    RoceHeaders {
        eth: EthRepr {
            dst: [2, 0, 0, 0, 0, 2],
            src: [2, 0, 0, 0, 0, 1],
            vlan,
        },
        ip,
        udp: UdpRepr {
            src_port: 0xC001,
            dst_port: ROCE_V2_UDP_PORT,
        },
        bth: BthRepr {
            opcode: op,
            solicited: op.is_last() || op.is_only(),
            mig_req: true,
            pad_count: 0,
            pkey: DEFAULT_PKEY,
            fecn: false,
            becn: op == Opcode::Cnp,
            dest_qp: 0x00_12_34,
            ack_req: op.is_request(),
            psn: 0xFF_FFFE,
        },
        reth: op.has_reth().then_some(RethRepr {
            va: 0x1122_3344_5566_7788,
            rkey: 0xCAFE_BABE,
            dma_len: 4096,
        }),
        aeth: op.has_aeth().then_some(AethRepr {
            syndrome: 0x1F,
            msn: 0xAB_CDEF,
        }),
        atomic_eth: op.has_atomic_eth().then_some(AtomicEthRepr {
            va: 0x1000,
            rkey: 7,
            swap_add: 0xDEAD_BEEF_0000_0001,
            compare: 42,
        }),
        atomic_ack_eth: op
            .has_atomic_ack_eth()
            .then_some(AtomicAckEthRepr { orig: u64::MAX - 1 }),
        immdt: op.has_immdt().then_some(0x0102_0304),
        ieth: op.has_ieth().then_some(0x0A0B_0C0D),
        deth: op.has_deth().then_some(DethRepr {
            qkey: 0x1122_3344,
            src_qp: 0x00_5678,
        }),
    }
}

fn payload_lens(op: Opcode) -> Vec<usize> {
    if op == Opcode::Cnp {
        vec![16]
    } else if !op.has_payload() {
        vec![0]
    } else if op.is_first() || op.is_middle() {
        vec![256, 1024]
    } else {
        vec![0, 1, 2, 3, 4, 61, 62, 63, 64, 1024]
    }
}

#[test]
fn every_opcode_round_trips_over_ipv4_ipv6_with_and_without_vlan() {
    let vlans = [
        None,
        Some(VlanTag {
            pcp: 3,
            dei: true,
            vid: 0xFFE,
        }),
    ];
    let mut buf = vec![0u8; 2048];
    let mut count = 0;
    for op in Opcode::ALL {
        for ip in [ipv4(), ipv6()] {
            for vlan in vlans {
                for len in payload_lens(op) {
                    let h = headers(op, ip, vlan);
                    let payload: Vec<u8> = (0..len).map(|i| (i * 13 + 5) as u8).collect();
                    let n = emit_frame(&h, &payload, &mut buf).expect("emit");
                    assert_eq!(n, frame_len(&h, len));
                    let f = parse_frame(&buf[..n])
                        .unwrap_or_else(|e| panic!("{op:?} {len} {ip:?}: {e:?}"));
                    let pad = (4 - len % 4) % 4;
                    let pad = if op == Opcode::Cnp { 0 } else { pad };
                    let mut expect = h;
                    expect.bth.pad_count = pad as u8;
                    assert_eq!(f.headers, expect);
                    assert_eq!(f.payload, &payload[..]);
                    assert_eq!(f.pad as usize, pad);
                    count += 1;
                }
            }
        }
    }
    assert!(count > 150);
}

#[test]
fn cnp_with_empty_payload_writes_sixteen_zero_reserved_bytes() {
    let h = headers(Opcode::Cnp, ipv4(), None);
    let mut buf = [0xAAu8; 128];
    let n = emit_frame(&h, &[], &mut buf).unwrap();
    assert_eq!(n, 14 + 20 + 8 + 12 + 16 + 4);
    let f = parse_frame(&buf[..n]).unwrap();
    assert_eq!(f.payload, &[0u8; 16]);
}

#[test]
fn ipv4_header_checksum_and_udp_length_are_correct() {
    let h = headers(Opcode::SendOnly, ipv4(), None);
    let mut buf = [0u8; 256];
    let n = emit_frame(&h, &[1, 2, 3, 4, 5], &mut buf).unwrap();
    let ip = &buf[14..34];
    // A correct IPv4 header sums to 0xFFFF (checksum of it is 0).
    let mut sum: u32 = ip
        .chunks(2)
        .map(|w| u16::from_be_bytes([w[0], w[1]]) as u32)
        .sum();
    while sum > 0xFFFF {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    assert_eq!(sum, 0xFFFF);
    assert_eq!(u16::from_be_bytes([ip[2], ip[3]]) as usize, n - 14);
    let udp_len = u16::from_be_bytes([buf[38], buf[39]]) as usize;
    assert_eq!(udp_len, n - 14 - 20);
    assert_eq!(&buf[40..42], &[0, 0], "UDP checksum 0 over IPv4 (as rxe)");
}

#[test]
fn ipv6_udp_checksum_verifies() {
    let h = headers(Opcode::WriteOnly, ipv6(), None);
    let mut buf = [0u8; 512];
    let n = emit_frame(&h, &[9u8; 77], &mut buf).unwrap();
    let ip = &buf[14..54];
    let udp = &buf[54..n];
    let mut sum: u64 = 0;
    for w in ip[8..40].chunks(2) {
        sum += u16::from_be_bytes([w[0], w[1]]) as u64;
    }
    sum += udp.len() as u64 + 17;
    for w in udp.chunks(2) {
        sum += (((w[0] as u16) << 8) | *w.get(1).unwrap_or(&0) as u16) as u64;
    }
    while sum > 0xFFFF {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    assert_eq!(sum, 0xFFFF);
    assert_ne!(&udp[6..8], &[0, 0]);
}

#[test]
fn ecn_and_ttl_rewrites_keep_the_icrc_valid() {
    let h = headers(Opcode::SendOnly, ipv4(), None);
    let mut buf = [0u8; 256];
    let n = emit_frame(&h, &[7u8; 32], &mut buf).unwrap();
    buf[15] |= 0b11; // CE
    buf[22] -= 1; // TTL
    buf[14 + 20 + 8 + 4] |= 0x80; // FECN
    let f = parse_frame(&buf[..n]).unwrap();
    match f.headers.ip {
        IpRepr::V4 { ecn, ttl, .. } => {
            assert_eq!(ecn, Ecn::Ce);
            assert_eq!(ttl, 63);
        }
        _ => unreachable!(),
    }
    assert!(f.headers.bth.fecn);
}

#[test]
fn malformed_frames_get_typed_errors() {
    let h = headers(Opcode::SendOnly, ipv4(), None);
    let mut buf = [0u8; 256];
    let n = emit_frame(&h, &[7u8; 30], &mut buf).unwrap();
    let good = buf[..n].to_vec();

    // Truncated anywhere.
    for cut in 0..n {
        assert_eq!(
            parse_frame(&good[..cut]).unwrap_err(),
            ParseError::Truncated,
            "cut {cut}"
        );
    }
    // Payload byte flipped -> bad ICRC.
    let mut f = good.clone();
    f[70] ^= 1;
    assert!(matches!(parse_frame(&f), Err(ParseError::BadIcrc { .. })));
    // Wrong UDP port.
    let mut f = good.clone();
    f[36..38].copy_from_slice(&4792u16.to_be_bytes());
    assert_eq!(parse_frame(&f).unwrap_err(), ParseError::NotRoce);
    // Not IP.
    let mut f = good.clone();
    f[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
    assert_eq!(parse_frame(&f).unwrap_err(), ParseError::NotRoce);
    // Unknown opcode.
    let mut f = good.clone();
    f[42] = 0x15;
    assert_eq!(
        parse_frame(&f).unwrap_err(),
        ParseError::UnsupportedOpcode(0x15)
    );
    // UDP length disagrees with IP length.
    let mut f = good.clone();
    f[38..40].copy_from_slice(&((n - 34 - 4) as u16).to_be_bytes());
    assert_eq!(parse_frame(&f).unwrap_err(), ParseError::LengthMismatch);
    // Payload + pad not a multiple of 4 (IP and UDP lengths one short).
    let mut f = good[..n - 1].to_vec();
    f[16..18].copy_from_slice(&((n - 1 - 14) as u16).to_be_bytes());
    f[38..40].copy_from_slice(&((n - 1 - 34) as u16).to_be_bytes());
    assert_eq!(parse_frame(&f).unwrap_err(), ParseError::BadPad);
    // A pad on a FIRST packet.
    let first = headers(Opcode::SendFirst, ipv4(), None);
    let m = emit_frame(&first, &[0u8; 32], &mut buf).unwrap();
    let mut f = buf[..m].to_vec();
    f[43] |= 1 << 4;
    assert_eq!(parse_frame(&f).unwrap_err(), ParseError::BadPad);
    // An ACK with a payload.
    let ack = headers(Opcode::Acknowledge, ipv4(), None);
    assert_eq!(
        emit_frame(&ack, &[1], &mut buf),
        Err(EmitError::HeadersMismatchOpcode)
    );
    // Headers that do not match the opcode.
    let mut bad = headers(Opcode::SendOnly, ipv4(), None);
    bad.reth = Some(RethRepr::default());
    assert_eq!(
        emit_frame(&bad, &[], &mut buf),
        Err(EmitError::HeadersMismatchOpcode)
    );
    // Small buffer.
    assert_eq!(
        emit_frame(&h, &[0u8; 64], &mut buf[..60]),
        Err(EmitError::BufferTooSmall)
    );
    // Too long.
    let big = vec![0u8; 70_000];
    let mut out = vec![0u8; 80_000];
    assert_eq!(
        emit_frame(&h, &big, &mut out),
        Err(EmitError::PayloadTooLong)
    );
}

#[test]
fn ethernet_padding_after_the_ip_packet_is_ignored() {
    let h = headers(Opcode::Acknowledge, ipv4(), None);
    let mut buf = [0u8; 128];
    let n = emit_frame(&h, &[], &mut buf).unwrap();
    assert_eq!(n, 62);
    let f = parse_frame(&buf[..n + 10]).unwrap();
    assert_eq!(
        f.headers.aeth,
        Some(AethRepr {
            syndrome: 0x1F,
            msn: 0xAB_CDEF
        })
    );
}

#[test]
fn frame_len_saturates_instead_of_overflowing() {
    let h = headers(Opcode::SendOnly, ipv4(), None);
    assert_eq!(frame_len(&h, usize::MAX), usize::MAX);
    assert_eq!(frame_len(&h, 0), 14 + 20 + 8 + 12 + 4);
}
