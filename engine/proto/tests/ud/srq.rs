//! UD QPs on a shared receive queue (rxe allows an SRQ for UD): each
//! datagram takes the SRQ's head, whatever QP it is for; a receive of
//! one SGE gets the GRH area and the payload as a QP's own receive does,
//! a receive of an SGE list gets them scattered across its pieces in
//! order; an empty SRQ drops the datagram (class D, counted); a receive
//! too short, or one whose piece names no region, completes with a
//! local QP operation error and the QP goes to ERROR and reports its last
//! WQE; the QP has no receive queue of its own.

use core::net::{IpAddr, Ipv4Addr};

use crate::support::*;

use proto::endpoint::AsyncEvent;
use proto::rc::{QpState, RecvWr, Sge, SrqAttr, VerbsError, WcOpcode, WcStatus};
use proto::time::Instant;

const QKEY: u32 = 0x1111_2222;
const GRH: usize = 40;

fn ip(x: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(10, 0, 0, x))
}

#[test]
fn ud_qps_on_an_srq_take_its_receives_one_sge_or_a_list() {
    let mut a = node(0xA, ip(1));
    let mut b = node(0xB, ip(2));
    let qa = ud_qp(&mut a, QKEY, 7);
    let srq =
        b.ep.create_srq(
            0,
            SrqAttr {
                max_wr: 8,
                max_sge: 4,
                srq_limit: 0,
            },
        )
        .unwrap();
    let on_srq = |n: &mut Node| {
        let q =
            n.ep.create_ud_qp(
                0,
                proto::rc::QpInitAttr {
                    srq: Some(srq),
                    ..init(n, 16)
                },
            )
            .unwrap();
        up(&mut n.ep, q, QKEY, 9);
        q
    };
    let (q1, q2) = (on_srq(&mut b), on_srq(&mut b));
    assert_eq!(b.ep.srq(srq).unwrap().qps(), 2);
    let ah = ah_to(&mut a, &b);
    // Its own receive queue: refused (rxe's provider: EINVAL).
    let own = RecvWr {
        wr_id: 1,
        sge: Sge {
            lkey: b.mr.lkey,
            addr: IOVA,
            length: 100,
        },
    };
    assert!(matches!(
        b.ep.post_ud_recv(q1, own),
        Err(VerbsError::InvalidArgument(_))
    ));
    // WQE 10: the GRH area and 100 bytes in one piece, 500 bytes 1000
    // bytes further on; WQE 11: one SGE at slot 1.
    let lkey = b.mr.lkey;
    let list = [
        Sge {
            lkey,
            addr: IOVA,
            length: (GRH + 100) as u32,
        },
        Sge {
            lkey,
            addr: IOVA + 1140,
            length: 500,
        },
    ];
    b.ep.post_srq_recv_sgl(srq, 10, &list).unwrap();
    b.ep.post_srq_recv(
        srq,
        RecvWr {
            wr_id: 11,
            sge: Sge {
                lkey,
                addr: IOVA + SLOT,
                length: 1000,
            },
        },
    )
    .unwrap();
    let before = region(&b, 0, 2000);
    // 300 bytes to q2 take WQE 10; 200 bytes to q1 take WQE 11.
    a.ep.post_ud_send(qa, send_wr(&a, 1, 0, 300, ah, q2, QKEY))
        .unwrap();
    a.ep.post_ud_send(qa, send_wr(&a, 2, 4096, 200, ah, q1, QKEY))
        .unwrap();
    for f in frames(&mut a) {
        b.ep.handle_packet(Instant::ZERO, &f);
    }
    let w = completions(&mut b);
    assert_eq!(
        w.iter()
            .map(|w| (w.qpn, w.wr_id, w.status, w.opcode, w.byte_len))
            .collect::<Vec<_>>(),
        [
            (
                q2,
                10,
                WcStatus::Success,
                WcOpcode::Recv,
                (GRH + 300) as u32
            ),
            (
                q1,
                11,
                WcStatus::Success,
                WcOpcode::Recv,
                (GRH + 200) as u32
            )
        ]
    );
    assert_eq!(w[0].ud.unwrap().src_qp, qa);
    // WQE 10: 20 zero bytes and the IPv4 header, then the payload across
    // both pieces; the 1000 bytes between them untouched.
    let got = region(&b, 0, 1640);
    assert_eq!(got[..20], [0u8; 20]);
    assert_eq!(got[20], 0x45, "the IPv4 header");
    let sent = region(&a, 0, 300);
    assert_eq!(got[GRH..GRH + 100], sent[..100]);
    assert_eq!(got[140..1140], before[140..1140], "the gap");
    assert_eq!(got[1140..1340], sent[100..300]);
    assert_eq!(got[1340..1640], before[1340..1640], "past the message");
    // WQE 11: the GRH area then 200 bytes.
    let got = region(&b, SLOT, GRH + 200);
    assert_eq!(got[GRH..], region(&a, 4096, 200)[..]);
    // Empty: dropped and counted, nothing answered.
    a.ep.post_ud_send(qa, send_wr(&a, 3, 0, 10, ah, q1, QKEY))
        .unwrap();
    for f in frames(&mut a) {
        b.ep.handle_packet(Instant::ZERO, &f);
    }
    assert!(completions(&mut b).is_empty());
    assert_eq!(b.ep.qp_counters(q1).unwrap().dropped_no_receive, 1);
    // Too short for the GRH area and the payload: a local QP operation
    // error, the QP to ERROR, nothing written; q2 goes on.
    b.ep.post_srq_recv_sgl(srq, 12, &list[..1]).unwrap();
    let before = region(&b, 0, 400);
    a.ep.post_ud_send(qa, send_wr(&a, 4, 0, 300, ah, q1, QKEY))
        .unwrap();
    for f in frames(&mut a) {
        b.ep.handle_packet(Instant::ZERO, &f);
    }
    let w = completions(&mut b);
    assert_eq!(
        (w[0].wr_id, w[0].status),
        (12, WcStatus::LocalQpOperationError)
    );
    assert_eq!(b.ep.qp_state(q1), Some(QpState::Error));
    assert_eq!(region(&b, 0, 400), before);
    assert_eq!(b.ep.qp_state(q2), Some(QpState::Rts));
    // q1's error is its last WQE (IBA 10.3.1), reported once.
    assert_eq!(
        b.ep.poll_event(),
        Some(AsyncEvent::QpLastWqeReached { qpn: q1 })
    );
    assert_eq!(b.ep.poll_event(), None);
    // A list whose second piece names no region is posted, as rxe
    // (`rxe_post_srq_recv` -> `rxe_post_one_recv` looks at no key); a
    // datagram into it fills the first piece with the GRH area and fails
    // at the second (rxe_resp.c `execute` -> `copy_data`:
    // `RESPST_ERR_MALFORMED_WQE`): a local QP operation error, q2 to
    // ERROR, nothing else written.
    let bad_list = [
        Sge {
            lkey,
            addr: IOVA + 2 * SLOT,
            length: GRH as u32,
        },
        Sge {
            lkey: lkey ^ 0x5A5A_0000,
            addr: IOVA + 2 * SLOT + 1000,
            length: 500,
        },
    ];
    b.ep.post_srq_recv_sgl(srq, 13, &bad_list).unwrap();
    let before = region(&b, 0, MR_LEN);
    a.ep.post_ud_send(qa, send_wr(&a, 5, 0, 100, ah, q2, QKEY))
        .unwrap();
    let f = frames(&mut a);
    assert_eq!(f.len(), 1);
    b.ep.handle_packet(Instant::ZERO, &f[0]);
    let w = completions(&mut b);
    assert_eq!(
        w.iter()
            .map(|w| (w.qpn, w.wr_id, w.status))
            .collect::<Vec<_>>(),
        [(q2, 13, WcStatus::LocalQpOperationError)]
    );
    assert_eq!(b.ep.qp_state(q2), Some(QpState::Error));
    let mut want = before;
    let at = 2 * SLOT as usize;
    want[at..at + 20].fill(0);
    want[at + 20..at + GRH].copy_from_slice(&f[0][14..34]);
    assert!(region(&b, 0, MR_LEN) == want, "only the GRH area landed");
    assert_eq!(
        b.ep.poll_event(),
        Some(AsyncEvent::QpLastWqeReached { qpn: q2 })
    );
    // The SRQ is busy while they use it.
    assert_eq!(b.ep.destroy_srq(srq), Err(VerbsError::Busy));
    b.ep.destroy_qp(q1).unwrap();
    b.ep.destroy_qp(q2).unwrap();
    b.ep.destroy_srq(srq).unwrap();
}
