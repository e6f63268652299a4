//! ATOMIC WRITE (RC opcode 0x1D, IBA 1.5 9.4.8) packet by packet, as
//! Linux rxe does it: the request is BTH + RETH (length 8) + the 8 bytes
//! with AckReq; the responder needs REMOTE_WRITE (QP and region), exactly
//! 8 bytes, an 8-byte aligned address, stores the bytes once, takes a
//! responder resource and answers an RDMA READ RESPONSE ONLY without
//! payload (rxe `atomic_write_reply`, `send_read_response_ack`); a
//! duplicate is answered again from the resource and never written
//! (rxe `duplicate_request`); the requester completes it with
//! `IBV_WC_ATOMIC_WRITE`, byte_len 8 (rxe `check_ack`: COMPST_WRITE_SEND).

use crate::support::*;

use proto::endpoint::ConnectOptions;
use proto::rc::{Access, QpState, SendWr, WcOpcode, WcStatus};
use proto::wire::Opcode;

const VALUE: [u8; 8] = [0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88];

fn atomic_write(p: &Pair, wr_id: u64, off: u64, value: [u8; 8]) -> SendWr {
    SendWr::atomic_write(wr_id, IOVA_B + off, p.mr_b.rkey, value)
}

#[test]
fn the_request_is_bth_reth_and_the_eight_bytes_and_the_answer_a_read_response_only() {
    let mut p = Pair::default_pair();
    p.b.mr_write(p.mr_b.lkey, IOVA_B, &[0xEE; 24]).unwrap();
    p.a.post_send(p.qa, atomic_write(&p, 7, 8, VALUE)).unwrap();
    let f = p.tx_a();
    assert_eq!(f.len(), 1);
    let h = hdr(&f[0]);
    assert_eq!(h.bth.opcode, Opcode::AtomicWrite);
    assert_eq!(h.bth.opcode.as_u8(), 0x1D);
    assert!(h.bth.ack_req, "an ATOMIC WRITE asks for its answer");
    let reth = h.reth.expect("RETH");
    assert_eq!(
        (reth.va, reth.rkey, reth.dma_len),
        (IOVA_B + 8, p.mr_b.rkey, 8)
    );
    assert!(h.atomic_eth.is_none() && h.aeth.is_none());
    assert_eq!(payload(&f[0]), VALUE);

    p.deliver_b(&f);
    // Stored byte for byte, nothing around it touched.
    assert_eq!(p.read_b(IOVA_B, 24), [[0xEE; 8], VALUE, [0xEE; 8]].concat());
    assert!(p.wcs_b().is_empty(), "no receive consumed");
    let r = p.tx_b();
    assert_eq!(r.len(), 1);
    let rh = hdr(&r[0]);
    assert_eq!(rh.bth.opcode, Opcode::ReadRespOnly);
    assert_eq!(rh.bth.psn, psn(&f[0]));
    assert!(payload(&r[0]).is_empty());
    let aeth = rh.aeth.expect("AETH");
    assert_eq!(aeth.syndrome, 0x1F, "ACK");
    assert_eq!(aeth.msn, 1, "one message");

    p.deliver_a(&r);
    let wc = p.wcs_a();
    assert_eq!(wc.len(), 1);
    assert_eq!(
        (wc[0].wr_id, wc[0].status, wc[0].opcode, wc[0].byte_len),
        (7, WcStatus::Success, WcOpcode::AtomicWrite, 8)
    );
    assert_eq!(p.a.qp_counters(p.qa).unwrap().dropped_bad_response, 0);
}

#[test]
fn a_duplicate_is_answered_from_the_resource_and_never_written_again() {
    let mut p = Pair::default_pair();
    p.a.post_send(p.qa, atomic_write(&p, 1, 0, VALUE)).unwrap();
    let req = p.tx_a();
    p.deliver_b(&req);
    let r1 = p.tx_b();
    assert_eq!(p.read_b(IOVA_B, 8), VALUE);
    // B's application changes the word; duplicates must not undo it.
    p.b.mr_write(p.mr_b.lkey, IOVA_B, &[9u8; 8]).unwrap();
    p.deliver_b(&req);
    p.deliver_b(&req);
    let r2 = p.tx_b();
    assert_eq!(r2.len(), 2, "each duplicate answered");
    for r in r1.iter().chain(&r2) {
        assert_eq!(opcode(r), Opcode::ReadRespOnly);
        assert_eq!(psn(r), psn(&req[0]));
        assert_eq!(syndrome(r), 0x1F);
        assert!(payload(r).is_empty());
    }
    assert_eq!(p.read_b(IOVA_B, 8), [9u8; 8], "written exactly once");
    let c = p.b.qp_counters(p.qb).unwrap();
    assert_eq!((c.duplicate_request, c.dropped_duplicate_rd_atomic), (2, 0));
    // The requester completes once; the extra answers are duplicates.
    p.deliver_a(&r1);
    p.deliver_a(&r2);
    let wc = p.wcs_a();
    assert_eq!(wc.len(), 1);
    assert_eq!(wc[0].opcode, WcOpcode::AtomicWrite);
    assert_eq!(p.a.qp_counters(p.qa).unwrap().duplicate_response, 2);
}

#[test]
fn a_lost_answer_is_retried_and_replayed_without_a_second_write() {
    let mut p = Pair::default_pair();
    p.a.post_send(p.qa, atomic_write(&p, 1, 0, VALUE)).unwrap();
    let req = p.tx_a();
    p.deliver_b(&req);
    let lost = p.tx_b();
    assert_eq!(lost.len(), 1);
    p.b.mr_write(p.mr_b.lkey, IOVA_B, &[5u8; 8]).unwrap();
    // The answer is lost: A's timer resends the request.
    p.fire_a_timer();
    let again = p.tx_a();
    assert_eq!(again.len(), 1);
    assert_eq!(
        (opcode(&again[0]), psn(&again[0]), payload(&again[0])),
        (Opcode::AtomicWrite, psn(&req[0]), VALUE.to_vec())
    );
    p.deliver_b(&again);
    let r = p.tx_b();
    assert_eq!(r.len(), 1);
    assert_eq!(opcode(&r[0]), Opcode::ReadRespOnly);
    p.deliver_a(&r);
    let wc = p.wcs_a();
    assert_eq!((wc.len(), wc[0].status), (1, WcStatus::Success));
    assert_eq!(p.read_b(IOVA_B, 8), [5u8; 8], "the retry wrote nothing");
}

#[test]
fn a_later_ack_completes_it_when_its_answer_was_lost() {
    // rxe check_psn: only READ and the atomics are retried when a later
    // ACK skips them; the ATOMIC WRITE executed before what follows it.
    let mut p = Pair::default_pair();
    p.a.mr_write(p.mr_a.lkey, IOVA_A + 64, &[0xAB; 16]).unwrap();
    p.a.post_send(p.qa, atomic_write(&p, 1, 0, VALUE)).unwrap();
    p.a.post_send(p.qa, write_wr(&p, 2, 16, 64)).unwrap();
    let f = p.tx_a();
    assert_eq!(f.len(), 2);
    p.deliver_b(&f);
    let r = p.tx_b();
    assert_eq!(r.len(), 2);
    assert_eq!(opcode(&r[0]), Opcode::ReadRespOnly);
    assert_eq!(opcode(&r[1]), Opcode::Acknowledge);
    // Only the WRITE's ACK arrives.
    p.deliver_a(&r[1..]);
    let wc = p.wcs_a();
    let got: Vec<_> = wc.iter().map(|w| (w.wr_id, w.status, w.opcode)).collect();
    assert_eq!(
        got,
        [
            (1, WcStatus::Success, WcOpcode::AtomicWrite),
            (2, WcStatus::Success, WcOpcode::Write)
        ]
    );
    assert_eq!(p.read_b(IOVA_B, 8), VALUE);
    assert_eq!(p.read_b(IOVA_B + 64, 16), [0xAB; 16]);
    assert_eq!(hdr(&r[1]).aeth.unwrap().msn, 2, "two messages");
}

#[test]
fn a_region_without_remote_write_is_a_nak_remote_access_error_and_no_write() {
    let mut p = Pair::default_pair();
    let k =
        p.b.reg_mr(
            Box::new(vec![0u8; 64]),
            0x9000,
            Access::REMOTE_READ | Access::REMOTE_ATOMIC,
        )
        .unwrap();
    p.a.post_send(p.qa, SendWr::atomic_write(1, 0x9000, k.rkey, VALUE))
        .unwrap();
    let f = p.tx_a();
    let n = refused_by_b(&mut p, &f, 0x62, "ATOMIC WRITE without REMOTE_WRITE");
    p.deliver_a(&n);
    let wc = p.wcs_a();
    assert_eq!(
        (wc[0].status, wc[0].opcode),
        (WcStatus::RemoteAccessError, WcOpcode::AtomicWrite)
    );
    let mut v = [0u8; 8];
    p.b.mr_read(k.lkey, 0x9000, &mut v).unwrap();
    assert_eq!(v, [0u8; 8]);
}

#[test]
fn a_qp_without_remote_write_refuses_it_even_granting_atomics() {
    let b_opts = ConnectOptions {
        access: Access::REMOTE_READ | Access::REMOTE_ATOMIC | Access::LOCAL_WRITE,
        ..opts()
    };
    let mut p = Pair::new(opts(), b_opts);
    p.a.post_send(p.qa, atomic_write(&p, 1, 0, VALUE)).unwrap();
    let f = p.tx_a();
    refused_by_b(&mut p, &f, 0x62, "QP without REMOTE_WRITE");
    assert_eq!(p.b.qp_counters(p.qb).unwrap().qp_access_violation, 1);
    assert_eq!(p.read_b(IOVA_B, 8), [0u8; 8]);
}

#[test]
fn a_misaligned_address_is_a_nak_invalid_request_and_no_write() {
    // rxe `rxe_mr_do_atomic_write`: RESPST_ERR_MISALIGNED_ATOMIC. The
    // requester posts it as rxe's provider does (no check at post).
    let mut p = Pair::default_pair();
    p.a.post_send(p.qa, atomic_write(&p, 1, 4, VALUE)).unwrap();
    let f = p.tx_a();
    assert_eq!(hdr(&f[0]).reth.unwrap().va, IOVA_B + 4);
    let n = refused_by_b(&mut p, &f, 0x61, "misaligned ATOMIC WRITE");
    p.deliver_a(&n);
    assert_eq!(p.wcs_a()[0].status, WcStatus::RemoteInvalidRequest);
    assert_eq!(p.a.qp_state(p.qa), Some(QpState::Error));
    assert_eq!(p.read_b(IOVA_B, 16), [0u8; 16]);
}

#[test]
fn a_reth_length_other_than_eight_is_a_nak_invalid_request() {
    // rxe check_rkey: the payload must be the RETH's length; rxe rejects
    // an ATOMIC WRITE of anything but 8 bytes.
    for len in [0u32, 4, 16] {
        let mut p = Pair::default_pair();
        p.a.post_send(p.qa, atomic_write(&p, 1, 0, VALUE)).unwrap();
        let f = p.tx_a();
        let forged = rewrite(&f[0], |h| h.reth.as_mut().unwrap().dma_len = len);
        refused_by_b(&mut p, &[forged], 0x61, &format!("RETH length {len}"));
        assert_eq!(p.read_b(IOVA_B, 8), [0u8; 8], "length {len}");
    }
}

#[test]
fn an_unknown_rkey_is_a_nak_remote_access_error() {
    let mut p = Pair::default_pair();
    let mut wr = atomic_write(&p, 1, 0, VALUE);
    wr.rkey ^= 0x100;
    p.a.post_send(p.qa, wr).unwrap();
    let f = p.tx_a();
    refused_by_b(&mut p, &f, 0x62, "unknown R_Key");
    assert_eq!(p.read_b(IOVA_B, 8), [0u8; 8]);
}

#[test]
fn a_read_response_with_payload_or_at_another_psn_completes_nothing() {
    let mut p = Pair::default_pair();
    p.a.post_send(p.qa, atomic_write(&p, 1, 0, VALUE)).unwrap();
    let f = p.tx_a();
    p.deliver_b(&f);
    let r = p.tx_b();
    // An answer that names no request sent is dropped.
    let ghost = rewrite(&r[0], |h| h.bth.psn = (h.bth.psn + 1) & 0xFF_FFFF);
    p.deliver_a(&[ghost]);
    // A NAK-syndrome READ RESPONSE ONLY does not fit either.
    let nak = rewrite(&r[0], |h| h.aeth.as_mut().unwrap().syndrome = 0x61);
    p.deliver_a(&[nak]);
    assert!(p.wcs_a().is_empty());
    let c = p.a.qp_counters(p.qa).unwrap();
    assert_eq!((c.dropped_unsent_psn, c.dropped_bad_response), (1, 1));
    p.deliver_a(&r);
    assert_eq!(p.wcs_a().len(), 1);
}

#[test]
fn atomic_writes_are_bounded_by_max_rd_atomic() {
    // Each takes a responder resource at B (rxe check_resource), so A
    // keeps at most max_rd_atomic of them unanswered.
    let a_opts = ConnectOptions {
        max_rd_atomic: 2,
        ..opts()
    };
    let mut p = Pair::new(a_opts, opts());
    for i in 0..4u64 {
        let mut v = VALUE;
        v[0] = i as u8;
        p.a.post_send(p.qa, atomic_write(&p, i, 8 * i, v)).unwrap();
    }
    let f = p.tx_a();
    assert_eq!(f.len(), 2);
    p.deliver_b(&f);
    let r = p.tx_b();
    p.deliver_a(&r);
    let f2 = p.tx_a();
    assert_eq!(f2.len(), 2);
    p.deliver_b(&f2);
    p.settle();
    let wc = p.wcs_a();
    assert_eq!(wc.len(), 4);
    for i in 0..4u64 {
        let mut v = VALUE;
        v[0] = i as u8;
        assert_eq!(p.read_b(IOVA_B + 8 * i, 8), v);
    }
}

#[test]
fn uc_refuses_it_at_post() {
    use proto::rc::VerbsError;
    let mut p = crate::uc::uc_pair();
    let wr = SendWr::atomic_write(1, IOVA_B, p.mr_b.rkey, VALUE);
    assert!(matches!(
        p.a.post_send(p.qa, wr),
        Err(VerbsError::InvalidArgument(_))
    ));
}
