//! The Unreliable Connection service (`rc/uc.rs`), packet by packet: its
//! opcodes on the wire, requests completed as they leave, a responder
//! that never answers, a lost or misplaced packet that drops its message
//! (and the next message landing in the same receive), bad R_Keys and
//! missing receives dropped and counted, the operations UC refuses and
//! its attributes.

use core::net::{IpAddr, Ipv4Addr};

use proto::endpoint::{ConnectOptions, Endpoint, EndpointConfig, RemoteQp};
use proto::rc::{
    Access, Mtu, QpAttr, QpAttrMask, QpInitAttr, QpState, RecvWr, SendOp, SendWr, Sge, SgeCaps,
    Transport, VerbsError, WcOpcode, WcStatus,
};
use proto::wire::Opcode;

use crate::support::*;

/// A and B with one UC QP each (SGE lists of 4 and 64 bytes of inline
/// data), path MTU 1024, connected; 1 MiB regions with every right.
pub(crate) fn uc_pair() -> Pair {
    let side = |mac, ip: [u8; 4]| {
        let mut ep = Endpoint::new(EndpointConfig {
            local_mac: mac,
            local_ip: IpAddr::V4(Ipv4Addr::from(ip)),
            ..Default::default()
        });
        let cq = ep.create_cq(1024);
        let init = QpInitAttr {
            send_cq: cq,
            recv_cq: cq,
            max_send_wr: 64,
            max_recv_wr: 8,
            sq_sig_all: false,
            srq: None,
        };
        let qpn = ep.create_uc_qp_in(0, init).unwrap();
        assert_eq!(ep.qp(qpn).unwrap().transport(), Transport::Uc);
        ep.set_qp_sge_caps(
            qpn,
            SgeCaps {
                max_send_sge: 4,
                max_recv_sge: 4,
                max_inline_data: 64,
            },
        )
        .unwrap();
        Side { ep, qpn, cq }
    };
    let (mut a, mut b) = (side(MAC_A, [10, 0, 0, 1]), side(MAC_B, [10, 0, 0, 2]));
    let o = ConnectOptions {
        access: Access::ALL,
        path_mtu: Mtu::Mtu1024,
        ..ConnectOptions::default()
    };
    let remote = |s: &Side, mac, ip: [u8; 4]| RemoteQp {
        qpn: s.qpn,
        psn: 0,
        mac,
        ip: IpAddr::V4(Ipv4Addr::from(ip)),
    };
    let (ra, rb) = (
        remote(&a, MAC_A, [10, 0, 0, 1]),
        remote(&b, MAC_B, [10, 0, 0, 2]),
    );
    a.ep.connect(a.qpn, &rb, &o).unwrap();
    b.ep.connect(b.qpn, &ra, &o).unwrap();
    Pair::with_regions(a, b, 0)
}

fn fill_a(p: &mut Pair, off: u64, data: &[u8]) {
    p.a.mr_write(p.mr_a.lkey, IOVA_A + off, data).unwrap();
}

fn recv_b(p: &mut Pair, wr_id: u64, off: u64, len: u32) {
    let wr = RecvWr {
        wr_id,
        sge: Sge {
            lkey: p.mr_b.lkey,
            addr: IOVA_B + off,
            length: len,
        },
    };
    p.b.post_recv(p.qb, wr).unwrap();
}

/// A SEND of `len` bytes at A's offset `off`, signaled.
fn send_a(p: &mut Pair, wr_id: u64, op: SendOp, off: u64, len: u32, imm: u32) {
    let mut wr = SendWr::new(
        wr_id,
        op,
        Sge {
            lkey: p.mr_a.lkey,
            addr: IOVA_A + off,
            length: len,
        },
    );
    wr.imm = imm;
    wr.signaled = true;
    p.a.post_send(p.qa, wr).unwrap();
}

fn write_a(p: &mut Pair, wr_id: u64, op: SendOp, off: u64, len: u32, imm: u32, rkey: u32) {
    let mut wr = rdma_wr(p, wr_id, op, len, off);
    wr.imm = imm;
    wr.rkey = rkey;
    wr.signaled = true;
    p.a.post_send(p.qa, wr).unwrap();
}

fn counters_b(p: &Pair) -> proto::rc::Counters {
    p.b.qp_counters(p.qb).unwrap()
}

#[test]
fn sends_and_writes_go_out_with_uc_opcodes_and_complete_as_they_leave() {
    let mut p = uc_pair();
    let msg = bytes(2500, 3);
    fill_a(&mut p, 0, &msg);
    recv_b(&mut p, 70, 0x8000, 4096);
    recv_b(&mut p, 71, 0x9000, 4096);
    recv_b(&mut p, 72, 0xA000, 16);
    send_a(&mut p, 1, SendOp::Send, 0, 2500, 0);
    send_a(&mut p, 2, SendOp::SendWithImm, 0, 100, 0x1234_5678);
    let rkey = p.mr_b.rkey;
    write_a(&mut p, 3, SendOp::Write, 0, 2500, 0, rkey);
    let rkey = p.mr_b.rkey;
    write_a(&mut p, 4, SendOp::WriteWithImm, 0x100, 8, 0xCAFE, rkey);
    let frames = p.tx_a();
    let ops: Vec<Opcode> = frames.iter().map(|f| opcode(f)).collect();
    assert_eq!(
        ops,
        [
            Opcode::UcSendFirst,
            Opcode::UcSendMiddle,
            Opcode::UcSendLast,
            Opcode::UcSendOnlyImm,
            Opcode::UcWriteFirst,
            Opcode::UcWriteMiddle,
            Opcode::UcWriteLast,
            Opcode::UcWriteOnlyImm,
        ]
    );
    // PSNs are consecutive; no packet asks for an ACK.
    let first = psn(&frames[0]);
    for (k, f) in frames.iter().enumerate() {
        assert_eq!(psn(f), (first + k as u32) & 0xFF_FFFF);
        assert!(!hdr(f).bth.ack_req);
    }
    let reth = hdr(&frames[4]).reth.unwrap();
    assert_eq!(
        (reth.va, reth.rkey, reth.dma_len),
        (IOVA_B, p.mr_b.rkey, 2500)
    );
    assert_eq!(hdr(&frames[3]).immdt, Some(0x1234_5678));
    // Every request completed as its last packet left: no ACK, no timer.
    let wa = p.wcs_a();
    assert_eq!(wa.len(), 4);
    for (wc, (id, op, len)) in wa.iter().zip([
        (1, WcOpcode::Send, 2500),
        (2, WcOpcode::Send, 100),
        (3, WcOpcode::Write, 2500),
        (4, WcOpcode::Write, 8),
    ]) {
        assert_eq!(
            (wc.wr_id, wc.status, wc.opcode, wc.byte_len),
            (id, WcStatus::Success, op, len)
        );
    }
    assert_eq!(p.a.qp(p.qa).unwrap().outstanding_send_wrs(), 0);
    assert_eq!(p.a.inflight_packets(), 0);
    assert_eq!(p.a.poll_timeout(), None, "no retransmit timer on UC");
    // B places everything and answers nothing.
    p.deliver_b(&frames);
    assert!(p.tx_b().is_empty(), "a UC responder never answers");
    let wb = p.wcs_b();
    assert_eq!(wb.len(), 3);
    assert_eq!(
        (wb[0].wr_id, wb[0].byte_len, wb[0].opcode),
        (70, 2500, WcOpcode::Recv)
    );
    assert_eq!(p.read_b(IOVA_B + 0x8000, 2500), msg);
    assert_eq!(
        (wb[1].wr_id, wb[1].byte_len, wb[1].imm),
        (71, 100, Some(0x1234_5678))
    );
    assert_eq!(p.read_b(IOVA_B + 0x9000, 100), msg[..100]);
    assert_eq!(
        (wb[2].wr_id, wb[2].opcode, wb[2].imm),
        (72, WcOpcode::RecvRdmaWithImm, Some(0xCAFE))
    );
    assert_eq!(p.read_b(IOVA_B, 2500), msg);
    assert_eq!(p.read_b(IOVA_B + 0x100, 8), msg[0x100..0x108]);
    let c = counters_b(&p);
    assert_eq!((c.acks_sent, c.naks_sent, c.uc_messages_dropped), (0, 0, 0));
}

#[test]
fn a_psn_gap_drops_the_message_and_the_next_lands_in_the_same_receive() {
    let mut p = uc_pair();
    let (m1, m2) = (bytes(3000, 1), bytes(1500, 9));
    fill_a(&mut p, 0, &m1);
    fill_a(&mut p, 0x4000, &m2);
    recv_b(&mut p, 7, 0, 4096);
    send_a(&mut p, 1, SendOp::Send, 0, 3000, 0);
    send_a(&mut p, 2, SendOp::Send, 0x4000, 1500, 0);
    let f = p.tx_a();
    assert_eq!(f.len(), 5);
    // The first message's MIDDLE is lost: its LAST is after a gap.
    p.deliver_b(&[f[0].clone(), f[2].clone()]);
    assert!(p.wcs_b().is_empty());
    assert_eq!(
        p.b.qp(p.qb).unwrap().posted_recv_wrs(),
        1,
        "receive given back"
    );
    // The next message resynchronises on its FIRST and lands in it.
    p.deliver_b(&f[3..]);
    let wb = p.wcs_b();
    assert_eq!(wb.len(), 1);
    assert_eq!(
        (wb[0].wr_id, wb[0].status, wb[0].byte_len),
        (7, WcStatus::Success, 1500)
    );
    assert_eq!(p.read_b(IOVA_B, 1500), m2);
    assert!(p.tx_b().is_empty());
    let c = counters_b(&p);
    assert_eq!(c.uc_messages_dropped, 1);
    assert_eq!(c.out_of_seq_request, 2, "the LAST, then the FIRST after it");
    assert_eq!(p.b.qp_state(p.qb), Some(QpState::Rts));
    // The lost MIDDLE arriving late changes nothing.
    p.deliver_b(&f[1..2]);
    assert!(p.wcs_b().is_empty());
    assert_eq!(counters_b(&p).duplicate_request, 1);
}

#[test]
fn a_first_inside_a_message_abandons_it_and_starts_its_own() {
    let mut p = uc_pair();
    let (m1, m2) = (bytes(2000, 4), bytes(300, 8));
    fill_a(&mut p, 0, &m1);
    fill_a(&mut p, 0x4000, &m2);
    recv_b(&mut p, 7, 0, 4096);
    recv_b(&mut p, 8, 0x2000, 4096);
    send_a(&mut p, 1, SendOp::Send, 0, 2000, 0);
    send_a(&mut p, 2, SendOp::Send, 0x4000, 300, 0);
    let f = p.tx_a();
    assert_eq!(f.len(), 3);
    // The ONLY of the second message comes at the PSN the first one's
    // LAST should have had: a FIRST/ONLY inside a message.
    let only = rewrite(&f[2], |h| h.bth.psn = psn(&f[1]));
    p.deliver_b(&[f[0].clone(), only]);
    let wb = p.wcs_b();
    assert_eq!(wb.len(), 1);
    assert_eq!(
        (wb[0].wr_id, wb[0].byte_len),
        (7, 300),
        "the first receive, again"
    );
    assert_eq!(p.read_b(IOVA_B, 300), m2);
    assert_eq!(counters_b(&p).uc_messages_dropped, 1);
    // The first message's LAST, now behind the expected PSN, is dropped.
    p.deliver_b(&f[1..2]);
    assert!(p.wcs_b().is_empty());
    assert_eq!(p.b.qp(p.qb).unwrap().posted_recv_wrs(), 1);
    assert!(p.tx_b().is_empty());
}

#[test]
fn a_middle_without_its_first_is_dropped_with_its_message() {
    let mut p = uc_pair();
    let m = bytes(2100, 5);
    fill_a(&mut p, 0, &m);
    recv_b(&mut p, 7, 0, 4096);
    send_a(&mut p, 1, SendOp::Send, 0, 2100, 0);
    send_a(&mut p, 2, SendOp::Send, 0, 10, 0);
    let f = p.tx_a();
    assert_eq!(f.len(), 4);
    // A WRITE MIDDLE at the expected PSN: wrong opcode sequence.
    let forged = rewrite(&f[0], |h| {
        h.bth.opcode = Opcode::UcWriteMiddle;
        h.reth = None;
    });
    p.deliver_b(&[forged]);
    p.deliver_b(&f[1..3]);
    assert!(p.wcs_b().is_empty());
    p.deliver_b(&f[3..]);
    let wb = p.wcs_b();
    assert_eq!((wb.len(), wb[0].wr_id, wb[0].byte_len), (1, 7, 10));
    assert_eq!(p.read_b(IOVA_B, 10), m[..10]);
    assert_eq!(counters_b(&p).uc_messages_dropped, 1);
}

#[test]
fn a_duplicate_never_completes_twice() {
    let mut p = uc_pair();
    fill_a(&mut p, 0, &bytes(3000, 2));
    recv_b(&mut p, 7, 0, 4096);
    recv_b(&mut p, 8, 0x2000, 4096);
    send_a(&mut p, 1, SendOp::SendWithImm, 0, 500, 5);
    send_a(&mut p, 2, SendOp::Send, 0, 3000, 0);
    let f = p.tx_a();
    assert_eq!(f.len(), 4);
    // Every packet twice, and the FIRST again in the middle.
    p.deliver_b(&[
        f[0].clone(),
        f[0].clone(),
        f[1].clone(),
        f[1].clone(),
        f[2].clone(),
        f[1].clone(),
        f[2].clone(),
        f[3].clone(),
        f[3].clone(),
    ]);
    let wb = p.wcs_b();
    assert_eq!(wb.len(), 2);
    assert_eq!((wb[0].wr_id, wb[0].byte_len, wb[0].imm), (7, 500, Some(5)));
    assert_eq!((wb[1].wr_id, wb[1].byte_len), (8, 3000));
    assert_eq!(p.read_b(IOVA_B + 0x2000, 3000), bytes(3000, 2));
    let c = counters_b(&p);
    assert_eq!((c.duplicate_request, c.uc_messages_dropped), (5, 0));
}

#[test]
fn a_message_with_no_receive_is_dropped_without_rnr() {
    let mut p = uc_pair();
    fill_a(&mut p, 0, &bytes(2000, 6));
    send_a(&mut p, 1, SendOp::Send, 0, 2000, 0);
    let rkey = p.mr_b.rkey;
    write_a(&mut p, 2, SendOp::WriteWithImm, 0x10, 16, 1, rkey);
    let f = p.tx_a();
    assert_eq!(p.wcs_a().len(), 2, "completed at A all the same");
    p.deliver_b(&f);
    assert!(p.tx_b().is_empty(), "no RNR NAK");
    assert!(p.wcs_b().is_empty());
    let c = counters_b(&p);
    assert_eq!((c.dropped_no_receive, c.uc_messages_dropped), (2, 2));
    assert_eq!(c.send_rnr_err, 0);
    assert_eq!(p.b.qp_state(p.qb), Some(QpState::Rts));
    // A receive posted now takes the next message.
    recv_b(&mut p, 9, 0, 4096);
    send_a(&mut p, 3, SendOp::Send, 0, 2000, 0);
    let f = p.tx_a();
    p.deliver_b(&f);
    let wb = p.wcs_b();
    assert_eq!((wb.len(), wb[0].wr_id, wb[0].byte_len), (1, 9, 2000));
    assert_eq!(p.read_b(IOVA_B, 2000), bytes(2000, 6));
}

#[test]
fn a_write_with_a_bad_rkey_or_range_is_dropped_silently_and_counted() {
    let mut p = uc_pair();
    let m = bytes(1500, 7);
    fill_a(&mut p, 0, &m);
    let bad = p.mr_b.rkey ^ 0x100;
    write_a(&mut p, 1, SendOp::Write, 0, 1500, 0, bad);
    // Inside the region, but running past its end.
    let mut wr = rdma_wr(&p, 2, SendOp::Write, 1500, 0);
    wr.remote_addr = IOVA_B + MR_LEN as u64 - 100;
    p.a.post_send(p.qa, wr).unwrap();
    let f = p.tx_a();
    assert_eq!(f.len(), 4);
    p.deliver_b(&f);
    assert!(p.tx_b().is_empty(), "no NAK on UC");
    assert_eq!(p.read_b(IOVA_B, 1500), vec![0u8; 1500]);
    assert_eq!(p.read_b(IOVA_B + MR_LEN as u64 - 100, 100), vec![0u8; 100]);
    let c = counters_b(&p);
    assert_eq!((c.uc_rkey_violations, c.uc_messages_dropped), (2, 2));
    assert_eq!(p.b.qp_state(p.qb), Some(QpState::Rts));
    // A good WRITE still lands.
    let rkey = p.mr_b.rkey;
    write_a(&mut p, 3, SendOp::Write, 0, 1500, 0, rkey);
    let f = p.tx_a();
    p.deliver_b(&f);
    assert_eq!(p.read_b(IOVA_B, 1500), m);
    assert!(p.wcs_b().is_empty());
}

#[test]
fn reads_atomics_and_send_with_invalidate_are_refused_at_post() {
    let mut p = uc_pair();
    for op in [
        SendOp::Read,
        SendOp::CompareSwap,
        SendOp::FetchAdd,
        SendOp::SendWithInv,
    ] {
        let wr = rdma_wr(&p, 1, op, 8, 0);
        assert!(
            matches!(p.a.post_send(p.qa, wr), Err(VerbsError::InvalidArgument(_))),
            "{op:?}"
        );
        let sges = [Sge {
            lkey: p.mr_a.lkey,
            addr: IOVA_A,
            length: 8,
        }; 2];
        assert!(
            matches!(
                p.a.post_send_sgl(p.qa, wr, &sges),
                Err(VerbsError::InvalidArgument(_))
            ),
            "{op:?} with a list"
        );
    }
    assert_eq!(p.a.qp(p.qa).unwrap().outstanding_send_wrs(), 0);
    assert!(p.tx_a().is_empty());
    assert_eq!(p.a.qp_state(p.qa), Some(QpState::Rts));
}

#[test]
fn uc_attributes_follow_the_uc_modify_table() {
    let mut ep = Endpoint::new(EndpointConfig::default());
    let cq = ep.create_cq(16);
    let qpn = ep
        .create_uc_qp_in(
            0,
            QpInitAttr {
                send_cq: cq,
                recv_cq: cq,
                ..QpInitAttr::default()
            },
        )
        .unwrap();
    let init = QpAttr {
        state: QpState::Init,
        ..QpAttr::default()
    };
    ep.modify_qp(qpn, &init, QpAttrMask::STATE).unwrap();
    let rtr = QpAttr {
        state: QpState::Rtr,
        dest_qpn: 0x22,
        rq_psn: 5,
        ..QpAttr::default()
    };
    let need = QpAttrMask::STATE | QpAttrMask::AV | QpAttrMask::DEST_QPN | QpAttrMask::RQ_PSN;
    assert_eq!(
        ep.modify_qp(qpn, &rtr, need),
        Err(VerbsError::MissingAttribute),
        "UC's INIT->RTR needs the path MTU"
    );
    for rc_only in [QpAttrMask::MAX_DEST_RD_ATOMIC, QpAttrMask::MIN_RNR_TIMER] {
        let r = ep.modify_qp(qpn, &rtr, need | QpAttrMask::PATH_MTU | rc_only);
        assert!(
            matches!(r, Err(VerbsError::InvalidArgument(_))),
            "{rc_only:?}"
        );
    }
    assert_eq!(ep.qp_state(qpn), Some(QpState::Init));
    ep.modify_qp(qpn, &rtr, need | QpAttrMask::PATH_MTU)
        .unwrap();
    let rts = QpAttr {
        state: QpState::Rts,
        sq_psn: 9,
        ..QpAttr::default()
    };
    for rc_only in [
        QpAttrMask::TIMEOUT,
        QpAttrMask::RETRY_CNT,
        QpAttrMask::RNR_RETRY,
        QpAttrMask::MAX_QP_RD_ATOMIC,
    ] {
        let r = ep.modify_qp(qpn, &rts, QpAttrMask::STATE | QpAttrMask::SQ_PSN | rc_only);
        assert!(
            matches!(r, Err(VerbsError::InvalidArgument(_))),
            "{rc_only:?}"
        );
    }
    assert_eq!(
        ep.modify_qp(qpn, &rts, QpAttrMask::STATE),
        Err(VerbsError::MissingAttribute)
    );
    ep.modify_qp(qpn, &rts, QpAttrMask::STATE | QpAttrMask::SQ_PSN)
        .unwrap();
    assert_eq!(ep.qp_state(qpn), Some(QpState::Rts));
    assert_eq!(ep.qp(qpn).unwrap().attr().sq_psn, 9);
}

#[test]
fn rc_packets_at_a_uc_qp_and_uc_packets_at_an_rc_qp_are_dropped() {
    let mut p = uc_pair();
    fill_a(&mut p, 0, &bytes(64, 1));
    recv_b(&mut p, 7, 0, 4096);
    send_a(&mut p, 1, SendOp::Send, 0, 64, 0);
    let f = p.tx_a();
    let rc = rewrite(&f[0], |h| h.bth.opcode = Opcode::SendOnly);
    p.deliver_b(&[rc]);
    assert!(p.wcs_b().is_empty());
    assert_eq!(counters_b(&p).dropped_malformed, 1);
    p.deliver_b(&f);
    assert_eq!(p.wcs_b().len(), 1);

    // A UC packet at an RC QP.
    let mut rc_pair = Pair::default_pair();
    rc_pair
        .b
        .post_recv(rc_pair.qb, recv_wr_b(&rc_pair, 1, 64))
        .unwrap();
    let w = send_wr_a(&rc_pair, 1, SendOp::Send, 8);
    rc_pair.a.post_send(rc_pair.qa, w).unwrap();
    let f = rc_pair.tx_a();
    let uc = rewrite(&f[0], |h| h.bth.opcode = Opcode::UcSendOnly);
    rc_pair.deliver_b(&[uc]);
    assert!(rc_pair.wcs_b().is_empty());
    assert!(rc_pair.tx_b().is_empty());
    assert_eq!(
        rc_pair.b.qp_counters(rc_pair.qb).unwrap().dropped_malformed,
        1
    );
}

#[test]
fn sge_lists_and_inline_data_work_on_uc_and_a_dropped_send_gives_its_list_back() {
    let mut p = uc_pair();
    let m = bytes(2600, 11);
    fill_a(&mut p, 0, &m);
    // The receive: three pieces of B's region, 3000 bytes in all.
    let pieces = [(0x1000u64, 1000u32), (0x5000, 1000), (0x9000, 1000)];
    let sges: Vec<Sge> = pieces
        .iter()
        .map(|&(off, len)| Sge {
            lkey: p.mr_b.lkey,
            addr: IOVA_B + off,
            length: len,
        })
        .collect();
    p.b.post_recv_sgl(p.qb, 40, &sges).unwrap();
    // The SEND gathered from two pieces of A's region.
    let send = |p: &mut Pair, wr_id| {
        let g = [
            Sge {
                lkey: p.mr_a.lkey,
                addr: IOVA_A,
                length: 1300,
            },
            Sge {
                lkey: p.mr_a.lkey,
                addr: IOVA_A + 1300,
                length: 1300,
            },
        ];
        let mut wr = SendWr::new(wr_id, SendOp::Send, Sge::default());
        wr.signaled = true;
        p.a.post_send_sgl(p.qa, wr, &g).unwrap();
    };
    send(&mut p, 1);
    send(&mut p, 2);
    let f = p.tx_a();
    assert_eq!(f.len(), 6);
    // The first message loses its LAST; the second fills the list.
    p.deliver_b(&f[..2]);
    p.deliver_b(&f[3..]);
    let wb = p.wcs_b();
    assert_eq!((wb.len(), wb[0].wr_id, wb[0].byte_len), (1, 40, 2600));
    let mut got = p.read_b(IOVA_B + 0x1000, 1000);
    got.extend(p.read_b(IOVA_B + 0x5000, 1000));
    got.extend(p.read_b(IOVA_B + 0x9000, 600));
    assert_eq!(got, m);
    assert_eq!(counters_b(&p).uc_messages_dropped, 1);
    // Inline data: a WRITE with immediate of 40 bytes copied at post.
    recv_b(&mut p, 41, 0, 16);
    let mut wr = rdma_wr(&p, 3, SendOp::WriteWithImm, 0, 0x300);
    wr.imm = 77;
    wr.signaled = true;
    let data = bytes(40, 99);
    p.a.post_send_inline(p.qa, wr, &data).unwrap();
    let f = p.tx_a();
    assert_eq!(opcode(&f[0]), Opcode::UcWriteOnlyImm);
    p.deliver_b(&f);
    assert_eq!(p.read_b(IOVA_B + 0x300, 40), data);
    let wb = p.wcs_b();
    assert_eq!((wb[0].wr_id, wb[0].byte_len, wb[0].imm), (41, 40, Some(77)));
}
