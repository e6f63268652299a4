//! UD packet by packet: A sends, the test carries (and may rewrite) each
//! frame, B receives. Every byte of the frame and of B's buffer checked.

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use proto::rc::{Access, QpInitAttr, QpState, Sge, VerbsError, WcOpcode, WcStatus};
use proto::time::Instant;
use proto::ud::{NetworkHeader, UdQpAttr, UdQpAttrMask, UdSendOp, GRH_LEN, GSI_QKEY, GSI_QPN};
use proto::wire::{emit_frame, frame_len, parse_frame, Opcode};

use crate::support::*;

const QKEY: u32 = 0x1234_5678;

fn v4(x: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(10, 0, 0, x))
}

fn v6(x: u16) -> IpAddr {
    IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, x))
}

/// A and B over `ip` addresses, a UD QP each in RTS (Q_Key [`QKEY`]),
/// and an address handle on A to B.
fn pair(ip: fn(u8) -> IpAddr) -> (Node, Node, u32, u32, u32) {
    let mut a = node(0xA, ip(1));
    let mut b = node(0xB, ip(2));
    let qa = ud_qp(&mut a, QKEY, 0x00_1000);
    let qb = ud_qp(&mut b, QKEY, 0x77_0000);
    let ah = ah_to(&mut a, &b);
    (a, b, qa, qb, ah)
}

fn v4_of(x: u8) -> IpAddr {
    v4(x)
}

fn v6_of(x: u8) -> IpAddr {
    v6(u16::from(x))
}

#[test]
fn a_send_is_one_ud_send_only_with_rxes_bth_and_deth_bytes() {
    let (mut a, _b, qa, qb, ah) = pair(v4_of);
    a.ep.post_ud_send(qa, send_wr(&a, 1, 0, 37, ah, qb, QKEY))
        .unwrap();
    let f = one_frame(&mut a);
    // Ethernet 14 + IPv4 20 + UDP 8, then the BTH (12) and the DETH (8).
    let bth = &f[42..54];
    let pad = 3; // 37 bytes + 3 = 40
    assert_eq!(bth[0], 0x64, "UD SEND_ONLY");
    assert_eq!(bth[1], pad << 4, "SE 0, M 0, pad 3, TVer 0");
    assert_eq!(&bth[2..4], &[0xFF, 0xFF], "default P_Key");
    assert_eq!(bth[4], 0, "FECN/BECN/reserved");
    assert_eq!(&bth[5..8], &qb.to_be_bytes()[1..], "destination QP");
    assert_eq!(bth[8], 0, "AckReq clear, as rxe sends UD (and UC) packets");
    assert_eq!(&bth[9..12], &[0x00, 0x10, 0x00], "the first PSN");
    let deth = &f[54..62];
    assert_eq!(&deth[..4], &QKEY.to_be_bytes());
    assert_eq!(deth[4], 0, "reserved");
    assert_eq!(&deth[5..8], &qa.to_be_bytes()[1..], "source QP");
    // The payload, the pad, then the ICRC.
    assert_eq!(&f[62..99], &region(&a, 0, 37)[..]);
    assert_eq!(&f[99..102], &[0, 0, 0]);
    assert_eq!(f.len(), 102 + 4);
    let v = view(&f);
    assert_eq!(v.opcode(), Opcode::UdSendOnly);
    assert_eq!(v.deth().map(|d| (d.qkey, d.src_qp)), Some((QKEY, qa)));
    // IPv4: TTL from the address handle's hop limit, DF, UDP 4791.
    assert_eq!(f[14 + 8], 64);
    assert_eq!(f[14 + 6] & 0x40, 0x40);
    assert_eq!(&f[36..38], &[0x12, 0xB7]);
    // A signaled send completes once its packet is out: no ACK on UD.
    let wcs = completions(&mut a);
    assert_eq!(wcs.len(), 1);
    assert_eq!(
        (wcs[0].wr_id, wcs[0].status, wcs[0].opcode, wcs[0].byte_len),
        (1, WcStatus::Success, WcOpcode::Send, 37)
    );
    assert_eq!(wcs[0].ud, None);
    assert_eq!(a.ep.qp_counters(qa).unwrap().sent_pkts, 1);
}

#[test]
fn the_receive_buffer_gets_rxes_ipv4_grh_area_then_the_payload() {
    let (mut a, mut b, qa, qb, ah) = pair(v4_of);
    recv(&mut b, qb, 77, 0, 2048);
    a.ep.post_ud_send(qa, send_wr(&a, 1, 100, 300, ah, qb, QKEY))
        .unwrap();
    let f = one_frame(&mut a);
    b.ep.handle_packet(Instant::ZERO, &f);
    let wcs = completions(&mut b);
    assert_eq!(wcs.len(), 1);
    let wc = wcs[0];
    assert_eq!(
        (wc.wr_id, wc.qpn, wc.status, wc.opcode),
        (77, qb, WcStatus::Success, WcOpcode::Recv)
    );
    assert_eq!(wc.byte_len as usize, GRH_LEN + 300);
    assert_eq!(wc.imm, None);
    let src = wc.ud.expect("a UD receive says who sent it");
    assert_eq!(src.src_qp, qa);
    assert_eq!(src.network, NetworkHeader::Ipv4);
    assert_eq!(src.src_ip(), a.ip);
    assert_eq!(
        src.sgid,
        [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 10, 0, 0, 1]
    );
    assert_eq!(src.smac, a.mac);
    // rxe `union rdma_network_hdr`: 20 zero bytes, the IPv4 header as
    // received, then the payload.
    let got = region(&b, 0, GRH_LEN + 300 + 8);
    assert_eq!(&got[..20], &[0u8; 20]);
    assert_eq!(&got[20..40], &f[14..34]);
    assert_eq!(&got[40..340], &region(&a, 100, 300)[..]);
    // Past the message, the buffer is as it was.
    let before = node(0xB, b.ip);
    assert_eq!(&got[340..], &region(&before, 340, 8)[..]);
    assert_eq!(b.ep.qp_counters(qb).unwrap().rcvd_pkts, 1);
}

#[test]
fn over_ipv6_the_grh_area_is_the_ipv6_header() {
    let (mut a, mut b, qa, qb, ah) = pair(v6_of);
    recv(&mut b, qb, 5, 1, 1024 + 40);
    a.ep.post_ud_send(qa, send_wr(&a, 1, 3, 1024, ah, qb, QKEY))
        .unwrap();
    let f = one_frame(&mut a);
    assert_eq!(f[14] >> 4, 6);
    b.ep.handle_packet(Instant::ZERO, &f);
    let wc = completions(&mut b)[0];
    assert_eq!((wc.status, wc.byte_len), (WcStatus::Success, 1064));
    let src = wc.ud.unwrap();
    assert_eq!((src.network, src.src_ip()), (NetworkHeader::Ipv6, a.ip));
    let got = region(&b, SLOT, 1064);
    assert_eq!(&got[..40], &f[14..54]);
    assert_eq!(&got[40..], &region(&a, 3, 1024)[..]);
}

#[test]
fn send_with_immediate_carries_it_after_the_deth() {
    let (mut a, mut b, qa, qb, ah) = pair(v4_of);
    recv(&mut b, qb, 9, 0, 100);
    let wr = proto::ud::UdSendWr {
        opcode: UdSendOp::SendWithImm,
        imm: 0xDEAD_BEEF,
        solicited: true,
        ..send_wr(&a, 2, 0, 4, ah, qb, QKEY)
    };
    a.ep.post_ud_send(qa, wr).unwrap();
    let f = one_frame(&mut a);
    assert_eq!(f[42], 0x65, "UD SEND_ONLY_WITH_IMMEDIATE");
    assert_eq!(f[43] & 0x80, 0x80, "solicited");
    assert_eq!(
        &f[62..66],
        &0xDEAD_BEEFu32.to_be_bytes(),
        "ImmDt after the DETH"
    );
    assert_eq!(&f[66..70], &region(&a, 0, 4)[..]);
    b.ep.handle_packet(Instant::ZERO, &f);
    let wc = completions(&mut b)[0];
    assert_eq!(
        (wc.status, wc.opcode, wc.byte_len, wc.imm),
        (WcStatus::Success, WcOpcode::Recv, 44, Some(0xDEAD_BEEF))
    );
}

#[test]
fn a_wrong_qkey_is_dropped_and_counted_and_the_receive_stays() {
    let (mut a, mut b, qa, qb, ah) = pair(v4_of);
    recv(&mut b, qb, 1, 0, 100);
    a.ep.post_ud_send(qa, send_wr(&a, 1, 0, 8, ah, qb, QKEY ^ 1))
        .unwrap();
    let f = one_frame(&mut a);
    b.ep.handle_packet(Instant::ZERO, &f);
    assert!(completions(&mut b).is_empty());
    let c = b.ep.qp_counters(qb).unwrap();
    assert_eq!((c.dropped_bad_qkey, c.rcvd_pkts), (1, 0));
    assert_eq!(b.ep.counters().dropped_bad_qkey, 1);
    assert_eq!(b.ep.ud_qp(qb).unwrap().recv_queue_len(), 1);
    // The right key then lands in that receive.
    a.ep.post_ud_send(qa, send_wr(&a, 2, 0, 8, ah, qb, QKEY))
        .unwrap();
    b.ep.handle_packet(Instant::ZERO, &one_frame(&mut a));
    assert_eq!(completions(&mut b)[0].wr_id, 1);
}

#[test]
fn a_qkey_with_the_high_bit_set_sends_the_qps_own() {
    let (mut a, mut b, qa, qb, ah) = pair(v4_of);
    recv(&mut b, qb, 1, 0, 100);
    // A's own Q_Key is QKEY too: IBA 10.2.5.
    a.ep.post_ud_send(qa, send_wr(&a, 1, 0, 8, ah, qb, 0x8000_0000))
        .unwrap();
    let f = one_frame(&mut a);
    assert_eq!(&f[54..58], &QKEY.to_be_bytes());
    b.ep.handle_packet(Instant::ZERO, &f);
    assert_eq!(completions(&mut b).len(), 1);
}

#[test]
fn a_send_longer_than_the_mtu_sends_nothing_and_completes_as_rxe() {
    let (mut a, _b, qa, qb, ah) = pair(v4_of);
    // IBA C10-93.1.1 (rxe_requester): no packet, no error, a PSN used.
    a.ep.post_ud_send(qa, send_wr(&a, 1, 0, 1025, ah, qb, QKEY))
        .unwrap();
    assert!(frames(&mut a).is_empty());
    let wcs = completions(&mut a);
    assert_eq!(wcs.len(), 1);
    assert_eq!((wcs[0].wr_id, wcs[0].status), (1, WcStatus::Success));
    assert_eq!(a.ep.qp_counters(qa).unwrap().ud_send_too_long, 1);
    a.ep.post_ud_send(qa, send_wr(&a, 2, 0, 1024, ah, qb, QKEY))
        .unwrap();
    let f = one_frame(&mut a);
    assert_eq!(view(&f).psn(), 0x00_1001);
    // With the port's MTU raised, the same send goes out.
    let mtu = UdQpAttr {
        mtu: proto::rc::Mtu::Mtu4096,
        ..UdQpAttr::default()
    };
    a.ep.modify_ud_qp(qa, &mtu, UdQpAttrMask::MTU).unwrap();
    a.ep.post_ud_send(qa, send_wr(&a, 3, 0, 4096, ah, qb, QKEY))
        .unwrap();
    assert_eq!(view(&one_frame(&mut a)).payload().len(), 4096);
}

#[test]
fn a_receive_buffer_too_small_for_grh_and_payload_fails_as_rxe() {
    let (mut a, mut b, qa, qb, ah) = pair(v4_of);
    // 40 + 100 bytes needed, 139 posted; a second receive behind it.
    recv(&mut b, qb, 1, 0, 139);
    recv(&mut b, qb, 2, 1, 1000);
    a.ep.post_ud_send(qa, send_wr(&a, 1, 0, 100, ah, qb, QKEY))
        .unwrap();
    b.ep.handle_packet(Instant::ZERO, &one_frame(&mut a));
    // rxe: copy_data's -EINVAL is RESPST_ERR_MALFORMED_WQE: the receive
    // completes with IBV_WC_LOC_QP_OP_ERR and the QP goes to ERROR, which
    // flushes the rest.
    let wcs = completions(&mut b);
    assert_eq!(
        wcs.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(),
        [(1, WcStatus::LocalQpOperationError), (2, WcStatus::Flushed)]
    );
    assert_eq!(b.ep.qp_state(qb), Some(QpState::Error));
    // Exactly 40 + payload fits.
    let (mut a, mut b, qa, qb, ah) = pair(v4_of);
    recv(&mut b, qb, 1, 0, 140);
    a.ep.post_ud_send(qa, send_wr(&a, 1, 0, 100, ah, qb, QKEY))
        .unwrap();
    b.ep.handle_packet(Instant::ZERO, &one_frame(&mut a));
    assert_eq!(completions(&mut b)[0].status, WcStatus::Success);
}

#[test]
fn no_receive_posted_drops_and_counts_without_rnr() {
    let (mut a, mut b, qa, qb, ah) = pair(v4_of);
    for i in 0..3 {
        a.ep.post_ud_send(qa, send_wr(&a, i, 0, 16, ah, qb, QKEY))
            .unwrap();
    }
    for f in frames(&mut a) {
        b.ep.handle_packet(Instant::ZERO, &f);
    }
    assert!(completions(&mut b).is_empty());
    let c = b.ep.qp_counters(qb).unwrap();
    assert_eq!((c.dropped_no_receive, c.rcvd_pkts), (3, 3));
    assert!(frames(&mut b).is_empty(), "no NAK, no ACK on UD");
    assert_eq!(b.ep.qp_state(qb), Some(QpState::Rts));
}

#[test]
fn psns_count_one_per_datagram_and_nothing_is_retransmitted() {
    let (mut a, mut b, qa, qb, ah) = pair(v4_of);
    for i in 0..5 {
        recv(&mut b, qb, i, i, 100);
        a.ep.post_ud_send(qa, send_wr(&a, i, i, 10, ah, qb, QKEY))
            .unwrap();
    }
    let fs = frames(&mut a);
    let psns: Vec<u32> = fs.iter().map(|f| view(f).psn()).collect();
    assert_eq!(psns, (0x1000..0x1005).collect::<Vec<_>>());
    // Out of order and duplicated: UD checks no PSN, each datagram lands
    // in the next receive.
    for i in [4, 1, 1, 0] {
        b.ep.handle_packet(Instant::ZERO, &fs[i]);
    }
    let wcs = completions(&mut b);
    assert_eq!(wcs.len(), 4);
    for (k, (wc, i)) in wcs.iter().zip([4u64, 1, 1, 0]).enumerate() {
        assert_eq!(wc.wr_id, k as u64);
        assert_eq!(
            region(&b, k as u64 * SLOT + 40, 10),
            region(&a, i, 10),
            "receive {k} holds datagram {i}"
        );
    }
    assert!(a.ep.poll_timeout().is_none(), "no timer: nothing to resend");
}

#[test]
fn a_wrong_pkey_is_dropped_and_counted() {
    let (mut a, mut b, qa, qb, ah) = pair(v4_of);
    recv(&mut b, qb, 1, 0, 100);
    a.ep.post_ud_send(qa, send_wr(&a, 1, 0, 8, ah, qb, QKEY))
        .unwrap();
    let f = one_frame(&mut a);
    let mut h = parse_frame(&f).unwrap();
    h.headers.bth.pkey = 0x1234;
    let mut g = vec![0u8; frame_len(&h.headers, 8)];
    emit_frame(&h.headers, h.payload, &mut g).unwrap();
    b.ep.handle_packet(Instant::ZERO, &g);
    assert_eq!(b.ep.qp_counters(qb).unwrap().dropped_bad_pkey, 1);
    // A limited member of the same partition matches the full default.
    h.headers.bth.pkey = 0x7FFF;
    emit_frame(&h.headers, h.payload, &mut g).unwrap();
    b.ep.handle_packet(Instant::ZERO, &g);
    assert_eq!(completions(&mut b).len(), 1);
}

#[test]
fn rc_and_ud_packets_reach_only_their_own_kind_of_qp() {
    let (mut a, mut b, qa, qb, ah) = pair(v4_of);
    // An RC QP on B; a UD datagram to its number is dropped (rxe
    // check_type).
    let rc = b.ep.create_qp(init(&b, 8)).unwrap();
    a.ep.post_ud_send(qa, send_wr(&a, 1, 0, 8, ah, rc, QKEY))
        .unwrap();
    let f = one_frame(&mut a);
    b.ep.handle_packet(Instant::ZERO, &f);
    assert_eq!(b.ep.counters().dropped_malformed, 1);
    assert_eq!(b.ep.counters().dropped_unknown_qp, 0);
    // An RC SEND to the UD QP's number likewise.
    let mut h = parse_frame(&f).unwrap().headers;
    h.bth.opcode = Opcode::SendOnly;
    h.bth.dest_qp = qb;
    h.deth = None;
    let mut g = vec![0u8; frame_len(&h, 8)];
    emit_frame(&h, &[1; 8], &mut g).unwrap();
    recv(&mut b, qb, 1, 0, 100);
    b.ep.handle_packet(Instant::ZERO, &g);
    assert_eq!(b.ep.counters().dropped_malformed, 2);
    assert!(completions(&mut b).is_empty());
    // A datagram to a number nobody holds.
    a.ep.post_ud_send(qa, send_wr(&a, 2, 0, 8, ah, 0xAB_CDEF, QKEY))
        .unwrap();
    b.ep.handle_packet(Instant::ZERO, &one_frame(&mut a));
    assert_eq!(b.ep.counters().dropped_unknown_qp, 1);
}

#[test]
fn ud_qps_share_the_qp_number_space_and_count() {
    let mut a = node(0xA, v4(1));
    let i = init(&a, 4);
    let rc = a.ep.create_qp(i).unwrap();
    let ud = a.ep.create_ud_qp(0, i).unwrap();
    assert_ne!(rc, ud);
    assert_eq!(a.ep.qp_count(), 2);
    assert!(a.ep.has_qp(ud) && a.ep.is_ud_qp(ud) && !a.ep.is_ud_qp(rc));
    assert!(a.ep.create_qp_numbered(ud, i).is_err());
    assert!(a.ep.create_ud_qp_numbered(0, rc, i).is_err());
    assert!(
        a.ep.create_ud_qp_numbered(0, 5, i).is_err(),
        "2..=0x10 stay free"
    );
    assert_eq!(a.ep.qp_state(ud), Some(QpState::Reset));
    a.ep.destroy_qp(ud).unwrap();
    assert_eq!(a.ep.qp_count(), 1);
    assert_eq!(a.ep.destroy_ud_qp(ud), Err(VerbsError::UnknownQp));
    // max_qps counts both kinds.
    let mut small = proto::endpoint::Endpoint::new(proto::endpoint::EndpointConfig {
        max_qps: 2,
        ..proto::endpoint::EndpointConfig::default()
    });
    let cq = small.create_cq(4);
    let i = QpInitAttr {
        send_cq: cq,
        recv_cq: cq,
        ..i
    };
    small.create_qp(i).unwrap();
    small.create_ud_qp(0, i).unwrap();
    assert_eq!(small.create_ud_qp(0, i), Err(VerbsError::ResourceExhausted));
    assert_eq!(small.create_qp(i), Err(VerbsError::ResourceExhausted));
}

#[test]
fn qp_one_is_the_gsi_with_its_well_known_qkey() {
    let mut a = node(0xA, v4(1));
    let mut b = node(0xB, v4(2));
    let i = init(&a, 8);
    let ga = a.ep.create_ud_qp_numbered(0, GSI_QPN, i).unwrap();
    let i = init(&b, 8);
    let gb = b.ep.create_ud_qp_numbered(0, GSI_QPN, i).unwrap();
    assert_eq!((ga, gb), (1, 1));
    assert!(a.ep.create_ud_qp_numbered(0, GSI_QPN, i).is_err());
    // Whatever Q_Key the modify names, QP 1 uses the GSI's.
    up(&mut a.ep, ga, 0x42, 0);
    up(&mut b.ep, gb, 0x43, 0);
    let ah = ah_to(&mut a, &b);
    recv(&mut b, gb, 1, 0, 400);
    a.ep.post_ud_send(ga, send_wr(&a, 1, 0, 256, ah, 1, 0x42))
        .unwrap();
    let f = one_frame(&mut a);
    assert_eq!(view(&f).deth().unwrap().qkey, GSI_QKEY);
    assert_eq!(view(&f).dest_qp(), 1);
    b.ep.handle_packet(Instant::ZERO, &f);
    let wc = completions(&mut b)[0];
    assert_eq!((wc.status, wc.ud.unwrap().src_qp), (WcStatus::Success, 1));
}

#[test]
fn states_gate_sends_and_receives() {
    let mut a = node(0xA, v4(1));
    let mut b = node(0xB, v4(2));
    let qa = ud_qp(&mut a, QKEY, 0);
    let i = init(&b, 8);
    let qb = b.ep.create_ud_qp(0, i).unwrap();
    let ah = ah_to(&mut a, &b);
    // RESET: no receive may be posted; nothing is received.
    let lkey = b.mr.lkey;
    let rwr = proto::rc::RecvWr {
        wr_id: 1,
        sge: Sge {
            lkey,
            addr: IOVA,
            length: 100,
        },
    };
    assert_eq!(b.ep.post_ud_recv(qb, rwr), Err(VerbsError::InvalidState));
    let init_attr = UdQpAttr {
        state: QpState::Init,
        qkey: QKEY,
        ..UdQpAttr::default()
    };
    b.ep.modify_ud_qp(
        qb,
        &init_attr,
        UdQpAttrMask::STATE | UdQpAttrMask::PKEY_INDEX | UdQpAttrMask::PORT | UdQpAttrMask::QKEY,
    )
    .unwrap();
    b.ep.post_ud_recv(qb, rwr).unwrap();
    // INIT: a send is refused, a datagram dropped.
    let wr = send_wr(&b, 1, 0, 8, 0, qa, QKEY);
    assert_eq!(b.ep.post_ud_send(qb, wr), Err(VerbsError::InvalidState));
    a.ep.post_ud_send(qa, send_wr(&a, 1, 0, 8, ah, qb, QKEY))
        .unwrap();
    let f = one_frame(&mut a);
    b.ep.handle_packet(Instant::ZERO, &f);
    assert_eq!(b.ep.qp_counters(qb).unwrap().dropped_malformed, 1);
    // RTR receives.
    let rtr = UdQpAttr {
        state: QpState::Rtr,
        ..init_attr
    };
    b.ep.modify_ud_qp(qb, &rtr, UdQpAttrMask::STATE).unwrap();
    b.ep.handle_packet(Instant::ZERO, &f);
    assert_eq!(completions(&mut b)[0].status, WcStatus::Success);
    // ERROR flushes what is posted and completes later posts as flushed.
    b.ep.post_ud_recv(qb, proto::rc::RecvWr { wr_id: 2, ..rwr })
        .unwrap();
    let err = UdQpAttr {
        state: QpState::Error,
        ..init_attr
    };
    b.ep.modify_ud_qp(qb, &err, UdQpAttrMask::STATE).unwrap();
    b.ep.post_ud_recv(qb, proto::rc::RecvWr { wr_id: 3, ..rwr })
        .unwrap();
    let wcs = completions(&mut b);
    assert_eq!(
        wcs.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(),
        [(2, WcStatus::Flushed), (3, WcStatus::Flushed)]
    );
}

#[test]
fn sends_check_their_address_handle() {
    let (mut a, b, qa, qb, ah) = pair(v4_of);
    let bad_ah = send_wr(&a, 1, 0, 8, ah + 1, qb, QKEY);
    assert!(matches!(
        a.ep.post_ud_send(qa, bad_ah),
        Err(VerbsError::InvalidArgument(_))
    ));
    let other_pd =
        a.ep.create_ah(
            7,
            &proto::ud::AhAttr {
                remote: proto::rc::RemoteAddress {
                    mac: b.mac,
                    ip: b.ip,
                    ..Default::default()
                },
                ..Default::default()
            },
        )
        .unwrap();
    // An address handle of another PD than the QP's is posted and fails
    // when the datagram is built, as rxe: rxe_av.c `rxe_get_av` ("PDs
    // don't match for AH and QP") gives no address vector, rxe_req.c
    // `rxe_requester` completes the request with IB_WC_LOC_QP_OP_ERR and
    // the QP goes to error, flushing the send behind it; nothing is sent.
    a.ep.post_ud_send(qa, send_wr(&a, 1, 0, 8, other_pd, qb, QKEY))
        .unwrap();
    a.ep.post_ud_send(qa, send_wr(&a, 2, 0, 8, ah, qb, QKEY))
        .unwrap();
    assert!(frames(&mut a).is_empty(), "nothing sent");
    assert_eq!(
        completions(&mut a)
            .iter()
            .map(|w| (w.wr_id, w.status))
            .collect::<Vec<_>>(),
        [(1, WcStatus::LocalQpOperationError), (2, WcStatus::Flushed)]
    );
    assert_eq!(a.ep.qp_state(qa), Some(QpState::Error));
    let (mut a, _b, qa, qb, ah) = pair(v4_of);
    // An address handle of the other family is refused at creation.
    assert!(a
        .ep
        .create_ah(
            0,
            &proto::ud::AhAttr {
                remote: proto::rc::RemoteAddress {
                    ip: v6(2),
                    ..Default::default()
                },
                ..Default::default()
            }
        )
        .is_err());
    // An address handle destroyed after the post: rxe_get_av finds no
    // address vector, the send fails and the QP goes to ERROR.
    a.ep.post_ud_send(qa, send_wr(&a, 5, 0, 8, ah, qb, QKEY))
        .unwrap();
    a.ep.post_ud_send(qa, send_wr(&a, 6, 0, 8, ah, qb, QKEY))
        .unwrap();
    a.ep.destroy_ah(ah).unwrap();
    assert!(frames(&mut a).is_empty());
    let wcs = completions(&mut a);
    assert_eq!(
        wcs.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(),
        [(5, WcStatus::LocalQpOperationError), (6, WcStatus::Flushed)]
    );
    assert_eq!(a.ep.qp_state(qa), Some(QpState::Error));
}

#[test]
fn traffic_class_hop_limit_and_vlan_come_from_the_address_handle() {
    let mut a = node(0xA, v4(1));
    let b = node(0xB, v4(2));
    let qa = ud_qp(&mut a, QKEY, 0);
    let ah =
        a.ep.create_ah(
            0,
            &proto::ud::AhAttr {
                remote: proto::rc::RemoteAddress {
                    mac: b.mac,
                    ip: b.ip,
                    vlan: Some(proto::wire::VlanTag {
                        pcp: 5,
                        dei: false,
                        vid: 42,
                    }),
                    udp_src_port: Some(0xC123),
                },
                traffic_class: (26 << 2) | 0b10,
                hop_limit: 9,
                ..Default::default()
            },
        )
        .unwrap();
    a.ep.post_ud_send(qa, send_wr(&a, 1, 0, 8, ah, 0x99, QKEY))
        .unwrap();
    let f = one_frame(&mut a);
    let h = parse_frame(&f).unwrap().headers;
    assert_eq!(h.eth.vlan.map(|v| (v.pcp, v.vid)), Some((5, 42)));
    assert_eq!(h.eth.dst, b.mac);
    match h.ip {
        proto::wire::IpRepr::V4 { dscp, ecn, ttl, .. } => {
            assert_eq!((dscp, ecn.bits(), ttl), (26, 0b10, 9));
        }
        _ => panic!("IPv4 expected"),
    }
    assert_eq!(h.udp.src_port, 0xC123);
}

#[test]
fn a_datagram_for_another_ip_is_dropped_as_not_ours() {
    let (mut a, mut b, qa, qb, _) = pair(v4_of);
    recv(&mut b, qb, 1, 0, 100);
    // An address handle with B's MAC and QP but another IP.
    let elsewhere =
        a.ep.create_ah(
            0,
            &proto::ud::AhAttr {
                remote: proto::rc::RemoteAddress {
                    mac: b.mac,
                    ip: v4(99),
                    ..Default::default()
                },
                ..Default::default()
            },
        )
        .unwrap();
    a.ep.post_ud_send(qa, send_wr(&a, 1, 0, 8, elsewhere, qb, QKEY))
        .unwrap();
    b.ep.handle_packet(Instant::ZERO, &one_frame(&mut a));
    assert!(completions(&mut b).is_empty());
    assert_eq!(b.ep.counters().dropped_wrong_peer, 1);
    assert_eq!(b.ep.ud_qp(qb).unwrap().recv_queue_len(), 1);
}

/// As rxe (`validate_send_wr` looks at no key), a UD send whose buffer
/// cannot be read (its range past the region, its key unknown, or a
/// region of another PD than the QP's) is posted; it fails when its
/// datagram is built (rxe_req.c `finish_packet` -> rxe_mr.c `copy_data`:
/// `-EINVAL`, IB_WC_LOC_QP_OP_ERR), sends nothing, and the QP goes to
/// ERROR, flushing the send behind it. A zero-length send names no
/// buffer, and one longer than the MTU completes without being read
/// (IBA C10-93.1.1, before rxe reads anything).
#[test]
fn a_send_whose_buffer_cannot_be_read_is_posted_and_fails_when_it_runs() {
    for bad in 0..3 {
        let (mut a, _b, qa, qb, ah) = pair(v4_of);
        let other =
            a.ep.reg_mr_in(7, Box::new(vec![0x44u8; 64]), 0x900_0000, Access::ALL)
                .unwrap();
        let mut wr = send_wr(&a, 1, 0, 8, ah, qb, QKEY);
        match bad {
            0 => wr.local.addr = IOVA + MR_LEN as u64 - 4,
            1 => wr.local.lkey ^= 0x5A5A_0000,
            _ => {
                wr.local.lkey = other.lkey;
                wr.local.addr = 0x900_0000;
            }
        }
        a.ep.post_ud_send(qa, wr).unwrap();
        a.ep.post_ud_send(qa, send_wr(&a, 2, 0, 8, ah, qb, QKEY))
            .unwrap();
        assert!(frames(&mut a).is_empty(), "case {bad}: nothing sent");
        let wcs = completions(&mut a);
        assert_eq!(
            wcs.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(),
            [(1, WcStatus::LocalQpOperationError), (2, WcStatus::Flushed)],
            "case {bad}"
        );
        assert_eq!(a.ep.qp_state(qa), Some(QpState::Error), "case {bad}");
    }
    // Zero bytes under a bad key, and more than the MTU (1024) under one:
    // neither is read, both complete.
    let (mut a, _b, qa, qb, ah) = pair(v4_of);
    let mut empty = send_wr(&a, 1, 0, 0, ah, qb, QKEY);
    empty.local.lkey ^= 0x5A5A_0000;
    let mut long = send_wr(&a, 2, 0, 2000, ah, qb, QKEY);
    long.local.lkey ^= 0x5A5A_0000;
    a.ep.post_ud_send(qa, empty).unwrap();
    a.ep.post_ud_send(qa, long).unwrap();
    assert_eq!(frames(&mut a).len(), 1, "the empty datagram");
    let wcs = completions(&mut a);
    assert_eq!(
        wcs.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(),
        [(1, WcStatus::Success), (2, WcStatus::Success)]
    );
    assert_eq!(a.ep.qp_state(qa), Some(QpState::Rts));
}

/// A receive whose buffer cannot take a datagram (a key no region has, a
/// region of another PD, a range leaving its region, a region without
/// LOCAL_WRITE) is posted, as rxe (rdma-core providers/rxe/rxe.c
/// `rxe_post_one_recv` checks the queue and `num_sge`, no key), and fails
/// when a datagram lands in it: rxe_resp.c `execute` copies the GRH area
/// and then the payload through rxe_mr.c `copy_data` (`lookup_mr`, then
/// `mr_check_range` on the bytes copied); a failure is
/// `RESPST_ERR_MALFORMED_WQE`, class A: the receive completes with
/// IBV_WC_LOC_QP_OP_ERR and the QP goes to ERROR, flushing the receive
/// behind it. Nothing lands, except the GRH area when its 40 bytes lie in
/// the region and the payload's do not. A datagram of no payload still
/// copies the GRH area: it fails the same way unless those 40 bytes fit.
#[test]
fn a_receive_with_a_bad_buffer_is_posted_and_fails_when_a_datagram_lands() {
    const OTHER: u64 = 0x900_0000;
    const NO_WRITE: u64 = 0xA00_0000;
    for bad in 0..4 {
        for len in [100u32, 0] {
            let what = format!("case {bad}, {len} bytes");
            let (mut a, mut b, qa, qb, ah) = pair(v4_of);
            let other =
                b.ep.reg_mr_in(7, Box::new(vec![0x33u8; 4096]), OTHER, Access::ALL)
                    .unwrap();
            let no_write =
                b.ep.reg_mr_in(
                    0,
                    Box::new(vec![0x44u8; 4096]),
                    NO_WRITE,
                    Access::REMOTE_READ,
                )
                .unwrap();
            let all = |b: &Node| {
                let mut v = region(b, 0, MR_LEN);
                let mut x = vec![0u8; 4096];
                b.ep.mr_read(other.lkey, OTHER, &mut x).unwrap();
                v.extend_from_slice(&x);
                b.ep.mr_read(no_write.lkey, NO_WRITE, &mut x).unwrap();
                v.extend_from_slice(&x);
                v
            };
            let b0 = all(&b);
            let sge = match bad {
                0 => Sge {
                    lkey: b.mr.lkey ^ 0x5A5A_0000,
                    addr: IOVA,
                    length: 1000,
                },
                1 => Sge {
                    lkey: other.lkey,
                    addr: OTHER,
                    length: 1000,
                },
                // The GRH area's 40 bytes are the region's last.
                2 => Sge {
                    lkey: b.mr.lkey,
                    addr: IOVA + MR_LEN as u64 - GRH_LEN as u64,
                    length: 1000,
                },
                _ => Sge {
                    lkey: no_write.lkey,
                    addr: NO_WRITE,
                    length: 1000,
                },
            };
            b.ep.post_ud_recv(qb, proto::rc::RecvWr { wr_id: 1, sge })
                .unwrap();
            recv(&mut b, qb, 2, 1, 1000);
            a.ep.post_ud_send(qa, send_wr(&a, 1, 0, len, ah, qb, QKEY))
                .unwrap();
            let f = one_frame(&mut a);
            b.ep.handle_packet(Instant::ZERO, &f);
            let wcs = completions(&mut b);
            let mut want = b0.clone();
            if bad == 2 {
                // rxe `union rdma_network_hdr` over IPv4: 20 zero bytes,
                // then the IPv4 header.
                want[MR_LEN - 40..MR_LEN - 20].fill(0);
                want[MR_LEN - 20..MR_LEN].copy_from_slice(&f[14..34]);
            }
            if bad == 2 && len == 0 {
                assert_eq!(
                    wcs.iter()
                        .map(|w| (w.wr_id, w.status, w.byte_len))
                        .collect::<Vec<_>>(),
                    [(1, WcStatus::Success, GRH_LEN as u32)],
                    "{what}"
                );
                assert_eq!(b.ep.qp_state(qb), Some(QpState::Rts), "{what}");
            } else {
                assert_eq!(
                    wcs.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(),
                    [(1, WcStatus::LocalQpOperationError), (2, WcStatus::Flushed)],
                    "{what}"
                );
                assert_eq!(b.ep.qp_state(qb), Some(QpState::Error), "{what}");
            }
            assert!(all(&b) == want, "{what}: B's bytes");
            assert!(frames(&mut b).is_empty(), "{what}: UD answers nothing");
        }
    }
}
