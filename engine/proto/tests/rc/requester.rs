//! Requester: segmentation, AckReq, outstanding bounds, READ PSN span, UDP
//! source ports. Driven packet by packet.

use crate::support::*;

use proto::rc::{Mtu, SendOp, SendWr, Sge, WcOpcode, WcStatus};
use proto::wire::Opcode;

#[test]
fn write_is_segmented_by_path_mtu_with_reth_on_first_and_ackreq_on_last() {
    let mut p = Pair::new(opts_mtu(Mtu::Mtu1024), opts_mtu(Mtu::Mtu1024));
    let data = bytes(2500, 3);
    p.a.mr_write(p.mr_a.lkey, IOVA_A, &data).unwrap();
    p.a.post_send(p.qa, write_wr(&p, 1, 2500, 0)).unwrap();
    let f = p.tx_a();
    assert_eq!(f.len(), 3);
    let ops: Vec<_> = f.iter().map(|x| opcode(x)).collect();
    assert_eq!(
        ops,
        [Opcode::WriteFirst, Opcode::WriteMiddle, Opcode::WriteLast]
    );
    let h: Vec<_> = f.iter().map(|x| hdr(x)).collect();
    assert_eq!(h[0].reth.unwrap().dma_len, 2500);
    assert_eq!(h[0].reth.unwrap().va, IOVA_B);
    assert!(h[1].reth.is_none() && h[2].reth.is_none());
    assert_eq!(payload(&f[0]).len(), 1024);
    assert_eq!(payload(&f[1]).len(), 1024);
    assert_eq!(payload(&f[2]), &data[2048..]);
    assert_eq!(
        [h[0].bth.ack_req, h[1].bth.ack_req, h[2].bth.ack_req],
        [false, false, true]
    );
    assert_eq!(h[1].bth.psn, h[0].bth.psn + 1);
    assert_eq!(h[0].bth.dest_qp, p.qb);
    assert!(h[0].udp.src_port >= 0xC000);
    assert_eq!(h[0].udp.dst_port, 4791);
    // Responder places the bytes and one ACK completes the request.
    p.deliver_b(&f);
    let acks = p.tx_b();
    assert_eq!(acks.len(), 1);
    assert_eq!(opcode(&acks[0]), Opcode::Acknowledge);
    assert_eq!(psn(&acks[0]), h[2].bth.psn);
    p.deliver_a(&acks);
    assert_eq!(p.read_b(IOVA_B, 2500), data);
    let wc = p.wcs_a();
    assert_eq!(wc.len(), 1);
    assert_eq!(
        (wc[0].wr_id, wc[0].status, wc[0].opcode, wc[0].byte_len),
        (1, WcStatus::Success, WcOpcode::Write, 2500)
    );
    // An unsignaled request completes silently.
    let mut wr = write_wr(&p, 2, 8, 0);
    wr.signaled = false;
    p.a.post_send(p.qa, wr).unwrap();
    p.settle();
    assert!(p.wcs_a().is_empty());
    assert_eq!(p.a.qp(p.qa).unwrap().outstanding_send_wrs(), 0);
}

#[test]
fn zero_length_send_is_one_send_only_packet() {
    let mut p = Pair::default_pair();
    p.b.post_recv(p.qb, recv_wr_b(&p, 9, 64)).unwrap();
    let mut wr = send_wr_a(&p, 5, SendOp::SendWithImm, 0);
    wr.imm = 0xDEAD_BEEF;
    p.a.post_send(p.qa, wr).unwrap();
    let f = p.tx_a();
    assert_eq!(f.len(), 1);
    assert_eq!(opcode(&f[0]), Opcode::SendOnlyImm);
    assert_eq!(hdr(&f[0]).immdt, Some(0xDEAD_BEEF));
    p.deliver_b(&f);
    let wc = p.wcs_b();
    assert_eq!(wc.len(), 1);
    assert_eq!(
        (
            wc[0].wr_id,
            wc[0].status,
            wc[0].opcode,
            wc[0].byte_len,
            wc[0].imm
        ),
        (9, WcStatus::Success, WcOpcode::Recv, 0, Some(0xDEAD_BEEF))
    );
}

/// Indices of the frames with AckReq set.
fn ack_requests(frames: &[Vec<u8>]) -> Vec<usize> {
    frames
        .iter()
        .enumerate()
        .filter(|(_, x)| hdr(x).bth.ack_req)
        .map(|(i, _)| i)
        .collect()
}

#[test]
fn a_stream_of_small_messages_asks_for_an_ack_every_16_packets_and_at_its_end() {
    let mut p = Pair::default_pair();
    for i in 0..40 {
        p.a.post_send(p.qa, write_wr(&p, i, 64, 64 * i)).unwrap();
    }
    let f = p.tx_a();
    assert_eq!(f.len(), 40);
    assert_eq!(ack_requests(&f), [15, 31, 39]);
    // One coalesced ACK covers them all and completes every request.
    p.deliver_b(&f);
    let acks = p.tx_b();
    assert_eq!(acks.len(), 1);
    assert_eq!(psn(&acks[0]), psn(&f[39]));
    p.deliver_a(&acks);
    let wcs = p.wcs_a();
    assert_eq!(wcs.len(), 40);
    assert!(wcs.iter().all(|w| w.status == WcStatus::Success));
    // A message posted alone (nothing queued behind it) always asks.
    p.a.post_send(p.qa, write_wr(&p, 40, 64, 0)).unwrap();
    let g = p.tx_a();
    assert_eq!(ack_requests(&g), [0]);
}

#[test]
fn a_slow_stream_asks_for_an_ack_within_a_sixteenth_of_the_ack_timeout() {
    // opts(): timeout 8 = 4.096 us * 2^8 = 1.05 ms; a sixteenth is 65.5 us.
    let mut p = Pair::default_pair();
    for i in 0..4 {
        p.a.post_send(p.qa, write_wr(&p, i, 64, 64 * i)).unwrap();
    }
    let mut buf = vec![0u8; 9000];
    let mut frame_at = |p: &mut Pair, us: u64| {
        let now = p.now + std::time::Duration::from_micros(us);
        let n = p.a.poll_transmit(now, &mut buf).expect("a frame is due");
        buf[..n].to_vec()
    };
    let f = [
        frame_at(&mut p, 0),
        frame_at(&mut p, 40),
        frame_at(&mut p, 70),
        frame_at(&mut p, 80),
    ];
    // 70 us after the start: due; the last one: the send queue drains.
    assert_eq!(ack_requests(&f), [2, 3]);
}

#[test]
fn outstanding_psns_are_bounded_and_ackreq_every_64_packets() {
    let mut p = Pair::new(opts_mtu(Mtu::Mtu256), opts_mtu(Mtu::Mtu256));
    p.a.post_send(p.qa, write_wr(&p, 1, 256 * 200, 0)).unwrap();
    let f = p.tx_a();
    assert_eq!(f.len(), 128, "rxe's cap of 128 outstanding PSNs");
    let acked: Vec<usize> = f
        .iter()
        .enumerate()
        .filter(|(_, x)| hdr(x).bth.ack_req)
        .map(|(i, _)| i)
        .collect();
    assert_eq!(acked, [63, 127]);
    // Deliver and ACK: the window opens and the rest (72 packets) follows.
    p.deliver_b(&f);
    let acks = p.tx_b();
    assert_eq!(acks.len(), 1, "ACKs are coalesced");
    p.deliver_a(&acks);
    let g = p.tx_a();
    assert_eq!(g.len(), 72);
    assert!(hdr(g.last().unwrap()).bth.ack_req);
    assert_eq!(opcode(g.last().unwrap()), Opcode::WriteLast);
}

#[test]
fn read_consumes_one_psn_per_response_packet() {
    let mut p = Pair::default_pair();
    let mut rd = send_wr_a(&p, 1, SendOp::Read, 3000);
    rd.remote_addr = IOVA_B;
    rd.rkey = p.mr_b.rkey;
    p.a.post_send(p.qa, rd).unwrap();
    p.a.post_send(p.qa, write_wr(&p, 2, 10, 8192)).unwrap();
    let f = p.tx_a();
    assert_eq!(f.len(), 2);
    assert_eq!(opcode(&f[0]), Opcode::ReadRequest);
    assert_eq!(hdr(&f[0]).reth.unwrap().dma_len, 3000);
    assert_eq!(psn(&f[1]), (psn(&f[0]) + 3) & 0xFF_FFFF);
}

#[test]
fn read_and_atomic_requests_are_bounded_by_max_rd_atomic() {
    let mut o = opts();
    o.max_rd_atomic = 2;
    let mut p = Pair::new(o, opts());
    for i in 0..3 {
        let mut rd = SendWr::new(
            i,
            SendOp::Read,
            Sge {
                lkey: p.mr_a.lkey,
                addr: IOVA_A + i * 64,
                length: 64,
            },
        );
        rd.remote_addr = IOVA_B;
        rd.rkey = p.mr_b.rkey;
        rd.signaled = true;
        p.a.post_send(p.qa, rd).unwrap();
    }
    let f = p.tx_a();
    assert_eq!(f.len(), 2);
    p.deliver_b(&f);
    let r = p.tx_b();
    assert_eq!(r.len(), 2);
    assert!(r.iter().all(|x| opcode(x) == Opcode::ReadRespOnly));
    p.deliver_a(&r);
    assert_eq!(p.wcs_a().len(), 2);
    assert_eq!(p.tx_a().len(), 1);
}

#[test]
fn qps_get_distinct_udp_source_ports() {
    let mut p = Pair::default_pair();
    let cq = p.a.create_cq(16);
    let q2 =
        p.a.create_qp(proto::rc::QpInitAttr {
            send_cq: cq,
            recv_cq: cq,
            ..Default::default()
        })
        .unwrap();
    p.a.connect(
        q2,
        &proto::endpoint::RemoteQp {
            qpn: p.qb,
            psn: 0,
            mac: MAC_B,
            ip: "10.0.0.2".parse().unwrap(),
        },
        &opts(),
    )
    .unwrap();
    let s1 = p.a.qp(p.qa).unwrap().attr().udp_src_port;
    let s2 = p.a.qp(q2).unwrap().attr().udp_src_port;
    assert!(s1 >= 0xC000 && s2 >= 0xC000);
    assert_ne!(s1, s2);
}

#[test]
fn ipv6_endpoints_talk_roce_v2_over_ipv6() {
    use proto::endpoint::EndpointConfig;
    use proto::rc::{Access, QpInitAttr};
    let (ip_a, ip_b): (std::net::IpAddr, std::net::IpAddr) =
        ("fd00::a".parse().unwrap(), "fd00::b".parse().unwrap());
    let (
        Side {
            ep: mut a,
            qpn: qa,
            cq: ca,
        },
        Side { ep: mut b, .. },
    ) = connect_endpoints(
        EndpointConfig {
            local_mac: MAC_A,
            local_ip: ip_a,
            ..Default::default()
        },
        EndpointConfig {
            local_mac: MAC_B,
            local_ip: ip_b,
            ..Default::default()
        },
        8,
        QpInitAttr::default(),
        &opts(),
        &opts(),
    );
    let ka = a
        .reg_mr(Box::new(vec![7u8; 3000]), 0, Access::LOCAL_WRITE)
        .unwrap();
    let kb = b
        .reg_mr(Box::new(vec![0u8; 3000]), 0, Access::REMOTE_WRITE)
        .unwrap();
    let mut wr = SendWr::new(
        1,
        SendOp::Write,
        Sge {
            lkey: ka.lkey,
            addr: 0,
            length: 3000,
        },
    );
    wr.rkey = kb.rkey;
    a.post_send(qa, wr).unwrap();
    let now = proto::time::Instant::ZERO;
    let f = drain(&mut a, now);
    assert!(matches!(hdr(&f[0]).ip, proto::wire::IpRepr::V6 { .. }));
    for x in &f {
        b.handle_packet(now, x);
    }
    for x in drain(&mut b, now) {
        a.handle_packet(now, &x);
    }
    assert_eq!(drain_cq(&mut a, ca)[0].status, WcStatus::Success);
    let mut got = vec![0u8; 3000];
    b.mr_read(kb.lkey, 0, &mut got).unwrap();
    assert_eq!(got, vec![7u8; 3000]);
}

#[test]
fn send_longer_than_the_receive_buffer_fails_both_sides() {
    let mut p = Pair::default_pair();
    p.b.post_recv(p.qb, recv_wr_b(&p, 4, 10)).unwrap();
    p.a.post_send(p.qa, send_wr_a(&p, 1, SendOp::Send, 11))
        .unwrap();
    p.settle();
    assert_eq!(p.wcs_b()[0].status, WcStatus::LocalLengthError);
    assert_eq!(p.wcs_a()[0].status, WcStatus::RemoteInvalidRequest);
    assert_eq!(p.read_b(IOVA_B, 16), [0u8; 16], "nothing placed");
}
