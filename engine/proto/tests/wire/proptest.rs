//! Property tests: the parser never panics on any byte string (random, or a
//! valid frame with random mutations / truncations), and emit-then-parse is
//! the identity on arbitrary header values.

use core::net::{Ipv4Addr, Ipv6Addr};

use proptest::prelude::*;
use proto::wire::{
    emit_frame, frame_len, parse_frame, parse_frame_lenient, parse_frame_unchecked_icrc, pcap,
    peek_dest_qp, peek_remote_access, peek_request, AethRepr, AtomicAckEthRepr, AtomicEthRepr,
    BthRepr, DethRepr, Ecn, EthRepr, IpRepr, Opcode, ParseError, RethRepr, RoceHeaders, UdpRepr,
    VlanTag, ROCE_V2_UDP_PORT,
};

fn ecn() -> impl Strategy<Value = Ecn> {
    prop_oneof![
        Just(Ecn::NotEct),
        Just(Ecn::Ect0),
        Just(Ecn::Ect1),
        Just(Ecn::Ce)
    ]
}

fn ip() -> impl Strategy<Value = IpRepr> {
    prop_oneof![
        (
            any::<u32>(),
            any::<u32>(),
            0u8..64,
            ecn(),
            any::<u8>(),
            any::<u16>(),
            any::<bool>()
        )
            .prop_map(|(s, d, dscp, ecn, ttl, ident, df)| IpRepr::V4 {
                src: Ipv4Addr::from(s),
                dst: Ipv4Addr::from(d),
                dscp,
                ecn,
                ttl,
                ident,
                dont_fragment: df
            }),
        (
            any::<u128>(),
            any::<u128>(),
            0u8..64,
            ecn(),
            0u32..(1 << 20),
            any::<u8>()
        )
            .prop_map(|(s, d, dscp, ecn, fl, hl)| IpRepr::V6 {
                src: Ipv6Addr::from(s),
                dst: Ipv6Addr::from(d),
                dscp,
                ecn,
                flow_label: fl,
                hop_limit: hl
            }),
    ]
}

prop_compose! {
    fn headers()(
        op in prop::sample::select(Opcode::ALL.to_vec()),
        dst in any::<[u8; 6]>(), src in any::<[u8; 6]>(),
        vlan in prop::option::of((0u8..8, any::<bool>(), 0u16..4096)),
        ip in ip(),
        sport in any::<u16>(),
        flags in any::<[bool; 6]>(),
        pkey in any::<u16>(), qp in 0u32..(1 << 24), psn in 0u32..(1 << 24),
        reth in any::<(u64, u32, u32)>(),
        aeth in any::<(u8, u32)>(),
        atomic in any::<(u64, u32, u64, u64)>(),
        orig in any::<u64>(), imm in any::<u32>(),
    ) -> RoceHeaders {
        RoceHeaders {
            eth: EthRepr { dst, src, vlan: vlan.map(|(pcp, dei, vid)| VlanTag { pcp, dei, vid }) },
            ip,
            udp: UdpRepr { src_port: sport, dst_port: ROCE_V2_UDP_PORT },
            bth: BthRepr {
                opcode: op, solicited: flags[0], mig_req: flags[1], pad_count: 0, pkey,
                fecn: flags[2], becn: flags[3], dest_qp: qp, ack_req: flags[4], psn,
            },
            reth: op.has_reth().then_some(RethRepr { va: reth.0, rkey: reth.1, dma_len: reth.2 }),
            aeth: op.has_aeth().then_some(AethRepr { syndrome: aeth.0, msn: aeth.1 & 0xFF_FFFF }),
            atomic_eth: op.has_atomic_eth().then_some(AtomicEthRepr {
                va: atomic.0, rkey: atomic.1, swap_add: atomic.2, compare: atomic.3,
            }),
            atomic_ack_eth: op.has_atomic_ack_eth().then_some(AtomicAckEthRepr { orig }),
            immdt: op.has_immdt().then_some(imm),
            ieth: op.has_ieth().then_some(imm ^ 0x5555_5555),
            deth: op.has_deth().then_some(DethRepr {
                qkey: imm.rotate_left(7),
                src_qp: imm & 0xFF_FFFF,
            }),
        }
    }
}

fn payload_for(op: Opcode, len: usize) -> Vec<u8> {
    if op == Opcode::Cnp || !op.has_payload() {
        Vec::new()
    } else if op.is_first() || op.is_middle() {
        vec![0xA5; len.next_multiple_of(4)]
    } else {
        (0..len).map(|i| i as u8).collect()
    }
}

fn check_no_panic(bytes: &[u8]) {
    let strict = parse_frame(bytes);
    let lenient = parse_frame_lenient(bytes);
    let unchecked = parse_frame_unchecked_icrc(bytes);
    // The three entry points agree on structure.
    match (&strict, &lenient, &unchecked) {
        (Ok(a), Ok((b, computed)), Ok(c)) => {
            assert_eq!(a, b);
            assert_eq!(a, c);
            assert_eq!(a.icrc, *computed);
        }
        (Err(ParseError::BadIcrc { carried, computed }), Ok((b, c2)), Ok(_)) => {
            assert_eq!(b.icrc, *carried);
            assert_eq!(c2, computed);
        }
        (Err(e), Err(e2), Err(e3)) => {
            assert_eq!(e, e2);
            assert_eq!(e, e3);
        }
        other => panic!("entry points disagree: {other:?}"),
    }
    // The receive path's hint (it reads fewer fields than the parser)
    // names the QP of every frame the parser takes.
    let hint = peek_dest_qp(bytes);
    if let Ok(f) = &unchecked {
        assert_eq!(hint, Some(f.headers.bth.dest_qp));
    }
    // And the remote memory it names: a frame's RETH or AtomicETH as the
    // parser reads them.
    let access = peek_request(bytes).and_then(|p| peek_remote_access(bytes, &p));
    if let Ok(f) = &unchecked {
        let op = f.headers.bth.opcode;
        let named = match (f.headers.reth, f.headers.atomic_eth) {
            (Some(r), _) => Some((op, r.rkey, r.va)),
            (None, Some(a)) => Some((op, a.rkey, a.va)),
            (None, None) => None,
        };
        assert_eq!(access.map(|(op, rkey, va, _)| (op, rkey, va)), named);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
        check_no_panic(&bytes);
        if let Ok(reader) = pcap::Reader::new(&bytes) {
            let _ = reader.count();
        }
    }

    #[test]
    fn arbitrary_bytes_behind_a_roce_prefix_never_panic(
        tail in prop::collection::vec(any::<u8>(), 0..200),
        v6 in any::<bool>(),
    ) {
        // Ethernet + IP + UDP/4791 headers with random lengths follow.
        let mut f = vec![0u8; 12];
        if v6 {
            f.extend_from_slice(&[0x86, 0xDD, 0x60, 0, 0, 0]);
            f.extend_from_slice(tail.get(..2).unwrap_or(&[0, 40]));
            f.extend_from_slice(&[17, 64]);
            f.extend_from_slice(&[0u8; 32]);
        } else {
            f.extend_from_slice(&[0x08, 0x00, 0x45, 0]);
            f.extend_from_slice(tail.get(..2).unwrap_or(&[0, 60]));
            f.extend_from_slice(&[0, 0, 0, 0, 64, 17, 0, 0]);
            f.extend_from_slice(&[0u8; 8]);
        }
        f.extend_from_slice(&[0xC0, 0x00, 0x12, 0xB7]);
        f.extend_from_slice(&tail);
        check_no_panic(&f);
    }

    #[test]
    fn mutated_valid_frames_never_panic(
        h in headers(),
        len in 0usize..300,
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
        cut in any::<prop::sample::Index>(),
        truncate in any::<bool>(),
    ) {
        let payload = payload_for(h.bth.opcode, len);
        let mut buf = vec![0u8; frame_len(&h, payload.len())];
        let n = emit_frame(&h, &payload, &mut buf).unwrap();
        buf.truncate(n);
        for (at, value) in &edits {
            let i = at.index(buf.len());
            buf[i] = *value;
        }
        if truncate {
            buf.truncate(cut.index(buf.len() + 1));
        }
        check_no_panic(&buf);
    }

    #[test]
    fn emit_then_parse_is_identity(h in headers(), len in 0usize..600) {
        let payload = payload_for(h.bth.opcode, len);
        let mut buf = vec![0u8; frame_len(&h, payload.len())];
        let n = emit_frame(&h, &payload, &mut buf).unwrap();
        prop_assert_eq!(n, buf.len());
        let f = parse_frame(&buf).unwrap();
        let mut expect = h;
        expect.bth.pad_count = f.pad;
        prop_assert_eq!(f.headers, expect);
        if h.bth.opcode == Opcode::Cnp {
            prop_assert_eq!(f.payload, &[0u8; 16][..]);
        } else {
            prop_assert_eq!(f.payload, &payload[..]);
            prop_assert_eq!((payload.len() + f.pad as usize) % 4, 0);
        }
    }

    #[test]
    fn any_single_bit_flip_in_an_invariant_byte_is_caught(h in headers(), len in 0usize..100, bit in 0u32..8, at in any::<prop::sample::Index>()) {
        let payload = payload_for(h.bth.opcode, len);
        let mut buf = vec![0u8; frame_len(&h, payload.len())];
        emit_frame(&h, &payload, &mut buf).unwrap();
        // Flip a bit somewhere after the UDP header (BTH onwards, ICRC
        // included) except BTH byte 4 (FECN/BECN/resv6, masked).
        let l2 = h.eth.header_len();
        let bth_at = l2 + h.ip.header_len() + 8;
        let i = bth_at + at.index(buf.len() - bth_at);
        prop_assume!(i != bth_at + 4);
        buf[i] ^= 1 << bit;
        prop_assert!(parse_frame(&buf).is_err());
    }
}
