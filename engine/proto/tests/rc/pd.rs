//! Protection domains (IBA 10.2.3; rxe `lookup_mr`, `mr->pd != pd`): a
//! memory key works only through a QP of its region's PD. An R_Key of
//! another PD is NAKed remote access error, as an unknown R_Key; a receive
//! whose buffer is of another PD when a SEND lands completes with a local
//! protection error and the sender sees a remote operational error; a
//! request whose own buffer is of another PD completes with a local
//! protection error, and only it: those before it complete, those after
//! are flushed. The pair's QPs and regions are in PD 0 unless a test says
//! otherwise; `set_mr_pd` moves a region as `ibv_rereg_mr` with
//! `IBV_REREG_MR_CHANGE_PD` does.

use core::net::{IpAddr, Ipv4Addr};

use crate::support::remote_ops::{post_remote, RemoteOp};
use crate::support::*;

use proto::endpoint::{Endpoint, EndpointConfig, RemoteQp};
use proto::rc::{Access, QpAttr, QpAttrMask, QpInitAttr, QpState, SendOp, Sge, WcStatus};
use proto::time::Instant;
use proto::wire::Opcode;

/// Bytes moved by a WRITE or READ: three packets at the default MTU.
const LEN: usize = 3000;

/// A PD none of the pair's QPs is in.
const OTHER_PD: u32 = 1;

/// The default pair, A's region starting with `bytes(LEN, 1)` and B's with
/// `bytes(LEN, 2)`.
fn pair() -> Pair {
    let mut p = Pair::default_pair();
    p.a.mr_write(p.mr_a.lkey, IOVA_A, &bytes(LEN, 1)).unwrap();
    p.b.mr_write(p.mr_b.lkey, IOVA_B, &bytes(LEN, 2)).unwrap();
    p
}

/// `(wr_id, status)` of each completion.
fn outcomes(wcs: &[proto::rc::WorkCompletion]) -> Vec<(u64, WcStatus)> {
    wcs.iter().map(|w| (w.wr_id, w.status)).collect()
}

#[test]
fn an_rkey_of_another_pd_is_a_nak_remote_access_error_as_an_unknown_one() {
    for op in RemoteOp::ALL {
        let what = format!("{op:?}");
        let mut p = pair();
        assert_eq!(p.b.set_mr_pd(p.mr_b.lkey, OTHER_PD), Ok(0));
        let f = post_remote(&mut p, op, LEN as u32);
        // NAK remote access error.
        let n = refused_by_b(&mut p, &f, 0x62, &what);
        let c = p.b.qp_counters(p.qb).unwrap();
        assert_eq!((c.naks_sent, c.qp_access_violation), (1, 0), "{what}");
        assert_eq!(p.read_b(IOVA_B, LEN), bytes(LEN, 2), "{what}: B untouched");
        if op == RemoteOp::WriteWithImm {
            assert_eq!(
                outcomes(&p.wcs_b()),
                [(7, WcStatus::Flushed)],
                "{what}: the receive is flushed, not consumed"
            );
        }
        p.deliver_a(&n);
        assert_eq!(
            outcomes(&p.wcs_a()),
            [(1, WcStatus::RemoteAccessError)],
            "{what}"
        );
        assert_eq!(p.read_a(IOVA_A, LEN), bytes(LEN, 1), "{what}: A untouched");
        assert_eq!(p.a.qp_state(p.qa), Some(QpState::Error), "{what}");
    }
}

#[test]
fn a_region_moved_out_of_the_pd_mid_write_refuses_the_next_packet() {
    // Every packet of a WRITE is checked as it is placed, with the QP's PD.
    let mut p = pair();
    let f = post_remote(&mut p, RemoteOp::Write, LEN as u32);
    assert_eq!(f.len(), 3);
    p.deliver_b(&f[..1]);
    p.b.set_mr_pd(p.mr_b.lkey, OTHER_PD).unwrap();
    let n = refused_by_b(&mut p, &f[1..], 0x62, "the second packet");
    let mut want = bytes(LEN, 1);
    want[1024..].copy_from_slice(&bytes(LEN, 2)[1024..]);
    assert_eq!(p.read_b(IOVA_B, LEN), want, "only the first packet landed");
    p.deliver_a(&n);
    assert_eq!(outcomes(&p.wcs_a()), [(1, WcStatus::RemoteAccessError)]);
}

#[test]
fn a_read_source_moved_out_of_the_pd_after_acceptance_is_a_nak_not_a_response() {
    let mut p = pair();
    let f = post_remote(&mut p, RemoteOp::Read, LEN as u32);
    p.deliver_b(&f);
    p.b.set_mr_pd(p.mr_b.lkey, OTHER_PD).unwrap();
    let n = p.tx_b();
    assert_eq!(n.len(), 1, "no response packet, one NAK");
    assert_eq!(
        (opcode(&n[0]), syndrome(&n[0])),
        (Opcode::Acknowledge, 0x62)
    );
    assert_eq!(p.b.qp_state(p.qb), Some(QpState::Error));
    p.deliver_a(&n);
    assert_eq!(outcomes(&p.wcs_a()), [(1, WcStatus::RemoteAccessError)]);
    assert_eq!(p.read_a(IOVA_A, LEN), bytes(LEN, 1));
}

/// A SEND from A (wr_id 1, `len` bytes) into receive 9 of B, whose
/// region is in another PD: B's receive completes with a local QP
/// operation error (rxe_resp.c `RESPST_ERR_MALFORMED_WQE`) and B NAKs remote operational error; A's request completes with
/// a remote operational error ("Remote operation error" in verbs).
fn assert_send_refused_by_the_receive(p: &mut Pair, len: u32) {
    p.a.post_send(p.qa, send_wr_a(p, 1, SendOp::Send, len))
        .unwrap();
    let f = p.tx_a();
    // NAK remote operational error.
    let n = refused_by_b(p, &f, 0x63, "SEND into a receive of another PD");
    assert_eq!(outcomes(&p.wcs_b()), [(9, WcStatus::LocalQpOperationError)]);
    assert_eq!(p.b.qp_counters(p.qb).unwrap().naks_sent, 1);
    assert_eq!(p.read_b(IOVA_B, LEN), bytes(LEN, 2), "B untouched");
    p.deliver_a(&n);
    assert_eq!(
        outcomes(&p.wcs_a()),
        [(1, WcStatus::RemoteOperationalError)]
    );
    assert_eq!(p.a.qp_state(p.qa), Some(QpState::Error));
}

#[test]
fn a_receive_in_another_pd_is_posted_and_the_send_into_it_is_a_nak_remote_operational_error() {
    // As rxe, the post takes the receive (key, range and rights are
    // fine); the PD is compared when the SEND's bytes would land.
    let mut p = pair();
    p.b.set_mr_pd(p.mr_b.lkey, OTHER_PD).unwrap();
    p.b.post_recv(p.qb, recv_wr_b(&p, 9, LEN as u32)).unwrap();
    assert_send_refused_by_the_receive(&mut p, LEN as u32);

    // Posted while the region was in the QP's PD, moved before the SEND.
    let mut p = pair();
    p.b.post_recv(p.qb, recv_wr_b(&p, 9, LEN as u32)).unwrap();
    p.b.set_mr_pd(p.mr_b.lkey, OTHER_PD).unwrap();
    assert_send_refused_by_the_receive(&mut p, 64);
}

/// A's region moved out of its QP's PD after A posted a `op` request
/// (wr_id 1): the request completes with an error and A's QP goes to
/// error: a local QP operation error for a SEND or WRITE, whose packet
/// cannot be built (rxe_req.c `finish_packet`: `copy_data`'s `-EINVAL`),
/// a local protection error for a READ or atomic, whose answer cannot be
/// placed (rxe_comp.c `do_read`/`do_atomic`).
#[test]
fn a_request_whose_own_buffer_is_in_another_pd_completes_with_a_local_error() {
    // SEND and WRITE read the buffer to build their packets: nothing is sent.
    for op in [SendOp::Send, SendOp::Write] {
        let mut p = pair();
        p.b.post_recv(p.qb, recv_wr_b(&p, 9, LEN as u32)).unwrap();
        p.a.set_mr_pd(p.mr_a.lkey, OTHER_PD).unwrap();
        p.a.post_send(p.qa, rdma_wr(&p, 1, op, LEN as u32, 0))
            .unwrap();
        assert!(p.tx_a().is_empty(), "{op:?}: nothing sent");
        assert_eq!(
            outcomes(&p.wcs_a()),
            [(1, WcStatus::LocalQpOperationError)],
            "{op:?}"
        );
        assert_eq!(p.a.qp_state(p.qa), Some(QpState::Error), "{op:?}");
        assert_eq!(p.read_b(IOVA_B, LEN), bytes(LEN, 2), "{op:?}");
        assert_eq!(p.b.qp_state(p.qb), Some(QpState::Rts), "{op:?}");
    }
    // READ and atomics write it when the answer comes: B answers, A's
    // buffer keeps its bytes.
    for op in [RemoteOp::Read, RemoteOp::FetchAdd, RemoteOp::CompareSwap] {
        let mut p = pair();
        let f = post_remote(&mut p, op, LEN as u32);
        p.a.set_mr_pd(p.mr_a.lkey, OTHER_PD).unwrap();
        p.deliver_b(&f);
        let n = p.tx_b();
        p.deliver_a(&n);
        assert_eq!(
            outcomes(&p.wcs_a()),
            [(1, WcStatus::LocalProtectionError)],
            "{op:?}"
        );
        assert_eq!(p.a.qp_state(p.qa), Some(QpState::Error), "{op:?}");
        assert_eq!(p.read_a(IOVA_A, LEN), bytes(LEN, 1), "{op:?}");
        assert_eq!(p.b.qp_state(p.qb), Some(QpState::Rts), "{op:?}");
    }
}

#[test]
fn only_the_request_in_another_pd_fails_those_before_complete_those_after_are_flushed() {
    // The middle request's buffer is a region of another PD; the ones
    // before it are sent and acknowledged, whatever they are.
    for first in [SendOp::Write, SendOp::Read, SendOp::Send] {
        for (first_len, middle) in [(64, SendOp::Send), (LEN as u32, SendOp::Write)] {
            let what = format!("{first:?} of {first_len}, then {middle:?}");
            let mut p = pair();
            let other =
                p.a.reg_mr_in(OTHER_PD, Box::new(vec![7u8; 64]), 0x9000, Access::ALL)
                    .unwrap();
            p.b.post_recv(p.qb, recv_wr_b(&p, 9, LEN as u32)).unwrap();
            p.b.post_recv(p.qb, recv_wr_b(&p, 10, LEN as u32)).unwrap();
            let mut before = rdma_wr(&p, 1, first, first_len, 0);
            before.signaled = false;
            p.a.post_send(p.qa, before).unwrap();
            let mut bad = rdma_wr(&p, 2, middle, 64, 0);
            bad.local = Sge {
                lkey: other.lkey,
                addr: 0x9000,
                length: 64,
            };
            p.a.post_send(p.qa, bad).unwrap();
            p.a.post_send(p.qa, write_wr(&p, 3, 64, LEN as u64))
                .unwrap();
            p.settle();
            // Unsignaled but failed neither: the first completes silently.
            assert_eq!(
                outcomes(&p.wcs_a()),
                [(2, WcStatus::LocalQpOperationError), (3, WcStatus::Flushed)],
                "{what}"
            );
            assert_eq!(p.a.qp_state(p.qa), Some(QpState::Error), "{what}");
            // The first request ran, byte-exact; nothing of the others.
            let n = first_len as usize;
            match first {
                SendOp::Write => {
                    assert_eq!(p.read_b(IOVA_B, n), bytes(LEN, 1)[..n], "{what}")
                }
                SendOp::Read => {
                    assert_eq!(p.read_a(IOVA_A, n), bytes(LEN, 2)[..n], "{what}")
                }
                _ => {
                    assert_eq!(p.read_b(IOVA_B, n), bytes(LEN, 1)[..n], "{what}");
                    assert_eq!(
                        outcomes(&p.wcs_b()),
                        [(9, WcStatus::Success)],
                        "{what}: one receive consumed"
                    );
                }
            }
            assert_eq!(
                p.read_b(IOVA_B + LEN as u64, 64),
                vec![0u8; 64],
                "{what}: the last request never ran"
            );
            assert_eq!(p.b.qp_state(p.qb), Some(QpState::Rts), "{what}");
        }
    }
}

#[test]
fn the_request_before_a_failed_one_asks_for_its_ack_again() {
    // Two WRITEs streamed: the first's packet did not ask for an ACK (a
    // request was queued behind it). The second's buffer is of another
    // PD: the first's packet goes again asking, so the first completes
    // without waiting for the ACK timeout.
    let mut p = pair();
    let other =
        p.a.reg_mr_in(OTHER_PD, Box::new(vec![0u8; 64]), 0x9000, Access::ALL)
            .unwrap();
    p.a.post_send(p.qa, write_wr(&p, 1, 64, 0)).unwrap();
    let mut bad = write_wr(&p, 2, 64, 64);
    bad.local = Sge {
        lkey: other.lkey,
        addr: 0x9000,
        length: 64,
    };
    p.a.post_send(p.qa, bad).unwrap();
    let f = p.tx_a();
    assert_eq!(f.len(), 2);
    assert_eq!(psn(&f[0]), psn(&f[1]), "the same packet twice");
    assert!(!hdr(&f[0]).bth.ack_req && hdr(&f[1]).bth.ack_req);
    p.deliver_b(&f);
    let n = p.tx_b();
    assert_eq!(n.len(), 1);
    assert_eq!(syndrome(&n[0]) & 0xE0, 0, "an ACK");
    p.deliver_a(&n);
    assert!(p.tx_a().is_empty());
    assert_eq!(p.now, Instant::ZERO, "no timer ran");
    assert_eq!(
        outcomes(&p.wcs_a()),
        [(1, WcStatus::Success), (2, WcStatus::LocalQpOperationError)]
    );
    assert_eq!(p.a.qp_state(p.qa), Some(QpState::Error));
    let want = [&bytes(LEN, 1)[..64], &bytes(LEN, 2)[64..128]].concat();
    assert!(p.read_b(IOVA_B, 128) == want, "only the first WRITE landed");
}

/// Back to RESET and connected again, both sides (the pyverbs test's
/// `restate_qps`), their CQs drained.
fn restate(p: &mut Pair) {
    for (ep, qpn) in [(&mut p.a, p.qa), (&mut p.b, p.qb)] {
        let reset = QpAttr {
            state: QpState::Reset,
            ..QpAttr::default()
        };
        ep.modify_qp(qpn, &reset, QpAttrMask::STATE).unwrap();
    }
    p.a.connect(
        p.qa,
        &RemoteQp {
            qpn: p.qb,
            psn: 0,
            mac: MAC_B,
            ip: ip(2),
        },
        &opts(),
    )
    .unwrap();
    p.b.connect(
        p.qb,
        &RemoteQp {
            qpn: p.qa,
            psn: 0,
            mac: MAC_A,
            ip: ip(1),
        },
        &opts(),
    )
    .unwrap();
    p.wcs_a();
    p.wcs_b();
}

/// A SEND of `data` from A into a receive of B, run to the end: both
/// complete and B holds the bytes.
fn send_through(p: &mut Pair, data: &[u8]) {
    p.a.mr_write(p.mr_a.lkey, IOVA_A, data).unwrap();
    p.b.post_recv(p.qb, recv_wr_b(p, 9, LEN as u32)).unwrap();
    p.a.post_send(p.qa, send_wr_a(p, 1, SendOp::Send, data.len() as u32))
        .unwrap();
    p.settle();
    assert_eq!(outcomes(&p.wcs_a()), [(1, WcStatus::Success)]);
    assert_eq!(outcomes(&p.wcs_b()), [(9, WcStatus::Success)]);
    assert_eq!(p.read_b(IOVA_B, data.len()), data);
}

#[test]
fn a_region_reregistered_into_another_pd_fails_sends_into_it_and_works_again_moved_back() {
    // rdma-core's test_mr_rereg_pd: traffic, the receiver's region to a
    // new PD (the SEND fails with a remote operational error), the QPs
    // restated and the region back (the SEND completes).
    let mut p = pair();
    send_through(&mut p, &bytes(1000, 3));
    assert_eq!(p.b.set_mr_pd(p.mr_b.lkey, OTHER_PD), Ok(0));
    // A reregistration keeps the region's PD.
    let old =
        p.b.rereg_mr(
            p.mr_b.lkey,
            Box::new(vec![0u8; MR_LEN]),
            IOVA_B,
            Access::ALL,
        )
        .unwrap();
    assert_eq!(old.len(), MR_LEN);
    p.b.mr_write(p.mr_b.lkey, IOVA_B, &bytes(LEN, 2)).unwrap();
    p.b.post_recv(p.qb, recv_wr_b(&p, 9, LEN as u32)).unwrap();
    assert_send_refused_by_the_receive(&mut p, 1000);
    restate(&mut p);
    assert_eq!(p.b.set_mr_pd(p.mr_b.lkey, 0), Ok(OTHER_PD));
    send_through(&mut p, &bytes(1000, 4));
    // An unknown key names no region to move.
    assert!(p.b.set_mr_pd(p.mr_b.rkey, 3).is_err());
    assert!(p.b.set_mr_pd(p.mr_b.lkey ^ 1, 3).is_err());
}

fn ip(last: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(10, 0, 0, last))
}

/// Two endpoints whose QPs are in protection domain `pd` (created with
/// `create_qp_in`), each with a 1 MiB region in `pd`, connected.
fn pair_in_pd(pd: u32) -> Pair {
    let side = |mac, last| {
        let mut ep = Endpoint::new(EndpointConfig {
            local_mac: mac,
            local_ip: ip(last),
            ..Default::default()
        });
        let cq = ep.create_cq(1024);
        let init = QpInitAttr {
            send_cq: cq,
            recv_cq: cq,
            max_send_wr: 64,
            max_recv_wr: 64,
            sq_sig_all: false,
            srq: None,
        };
        let qpn = ep.create_qp_in(pd, init).unwrap();
        assert_eq!(ep.qp(qpn).unwrap().pd(), pd);
        Side { ep, qpn, cq }
    };
    let (mut a, mut b) = (side(MAC_A, 1), side(MAC_B, 2));
    let to = |qpn, mac, last| RemoteQp {
        qpn,
        psn: 0,
        mac,
        ip: ip(last),
    };
    a.ep.connect(a.qpn, &to(b.qpn, MAC_B, 2), &opts()).unwrap();
    b.ep.connect(b.qpn, &to(a.qpn, MAC_A, 1), &opts()).unwrap();
    Pair::with_regions(a, b, pd)
}

#[test]
fn qps_and_regions_of_one_pd_work_together_and_pd_0_is_another_domain() {
    let pd = 0xBEEF;
    let mut p = pair_in_pd(pd);
    p.a.mr_write(p.mr_a.lkey, IOVA_A, &bytes(LEN, 1)).unwrap();
    p.b.mr_write(p.mr_b.lkey, IOVA_B + 4096, &bytes(LEN, 2))
        .unwrap();
    send_through(&mut p, &bytes(LEN, 5));
    p.a.mr_write(p.mr_a.lkey, IOVA_A + 8192, &bytes(LEN, 1))
        .unwrap();
    p.a.post_send(p.qa, write_wr(&p, 2, LEN as u32, 8192))
        .unwrap();
    p.a.post_send(p.qa, read_wr(&p, 3, LEN as u32, 4096))
        .unwrap();
    p.settle();
    assert_eq!(
        outcomes(&p.wcs_a()),
        [(2, WcStatus::Success), (3, WcStatus::Success)]
    );
    assert!(
        p.read_b(IOVA_B + 8192, LEN) == bytes(LEN, 1),
        "WRITE byte-exact"
    );
    assert!(
        p.read_a(IOVA_A + 4096, LEN) == bytes(LEN, 2),
        "READ byte-exact"
    );

    // A region registered without a PD is in PD 0: not this QP's.
    let zero =
        p.b.reg_mr(Box::new(vec![0u8; 64]), 0x9000, Access::ALL)
            .unwrap();
    let mut wr = write_wr(&p, 4, 64, 0);
    wr.rkey = zero.rkey;
    wr.remote_addr = 0x9000;
    p.a.post_send(p.qa, wr).unwrap();
    p.settle();
    assert_eq!(outcomes(&p.wcs_a()), [(4, WcStatus::RemoteAccessError)]);
    let mut v = [1u8; 64];
    p.b.mr_read(zero.lkey, 0x9000, &mut v).unwrap();
    assert_eq!(v, [0u8; 64]);
}
