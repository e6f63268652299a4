//! Forged ACKs, NAKs and responses at the requester: out of its window
//! (a PSN never sent), in its window from another host, and in its window
//! but of a kind that does not fit the request at that PSN. None of them
//! may complete, fail or retry anything (rxe `rxe_comp.c` check_psn,
//! check_ack; `docs/security.md`).

use proto::rc::{QpState, SendOp, WcStatus};
use proto::wire::{nak_code, Opcode};

use crate::forge::{ack_at, atomic_ack_at, from_ip, read_response_at, STRANGER};
use crate::support::{psn, rdma_wr, read_wr, write_wr, Pair, IOVA_A};

/// NAK remote access error: the syndrome that fails a request and the QP.
const NAK_ACCESS: u8 = 0x60 | nak_code::REMOTE_ACCESS_ERROR;
const ACK: u8 = 0x1F;

/// A pair after one WRITE went through, with B's ACK of it kept as the
/// attacker's template; then WRITEs `wr_id` 1 and 2 (16 bytes each at
/// offsets 0 and 64) sent by A and held back. Returns the ACK and A's
/// held frames.
fn held_writes(p: &mut Pair) -> (Vec<u8>, Vec<Vec<u8>>) {
    p.a.post_send(p.qa, write_wr(p, 100, 8, 512)).unwrap();
    let f = p.tx_a();
    p.deliver_b(&f);
    let ack = p.tx_b().remove(0);
    p.deliver_a(std::slice::from_ref(&ack));
    assert_eq!(p.wcs_a().len(), 1);
    for (id, off) in [(1, 0), (2, 64)] {
        p.a.mr_write(p.mr_a.lkey, IOVA_A + off, &[id as u8; 16])
            .unwrap();
        p.a.post_send(p.qa, write_wr(p, id, 16, off)).unwrap();
    }
    let held = p.tx_a();
    assert_eq!(held.len(), 2);
    (ack, held)
}

/// Nothing of A's requester moved: the two WRITEs (and what was posted
/// after them: `outstanding` requests in all) outstanding, no completion,
/// the QP in RTS, its memory as written.
fn untouched(p: &mut Pair, outstanding: usize) {
    assert!(p.wcs_a().is_empty());
    assert_eq!(p.a.qp(p.qa).unwrap().outstanding_send_wrs(), outstanding);
    assert_eq!(p.a.qp_state(p.qa), Some(QpState::Rts));
    assert_eq!(p.read_a(IOVA_A, 16), [1u8; 16]);
    assert_eq!(p.read_a(IOVA_A + 64, 16), [2u8; 16]);
    assert_eq!(p.a.counters().completer_retry_err, 0);
}

/// The held WRITEs delivered: both complete, once each.
fn finish(p: &mut Pair, held: &[Vec<u8>]) {
    p.deliver_b(held);
    p.settle();
    let wcs = p.wcs_a();
    let ids: Vec<u64> = wcs.iter().map(|w| w.wr_id).collect();
    assert_eq!(ids, [1, 2], "{wcs:?}");
    assert!(wcs.iter().all(|w| w.status == WcStatus::Success));
}

#[test]
fn out_of_window_acks_and_naks_change_nothing() {
    let mut p = Pair::default_pair();
    let (ack, held) = held_writes(&mut p);
    let next = psn(&held[1]) + 1; // one past the last PSN sent
                                  // An ACK or NAK for a PSN never sent, just past the window and far
                                  // ahead (but still "after" in 24-bit order).
    for (at, syndrome) in [
        (next, ACK),
        (next + 1000, ACK),
        (next, NAK_ACCESS),
        (next + 0x7F_0000, NAK_ACCESS),
    ] {
        p.deliver_a(&[ack_at(&ack, at & 0xFF_FFFF, syndrome)]);
    }
    assert_eq!(p.a.counters().dropped_unsent_psn, 4);
    // Before the window: the ACK of the first WRITE again, a NAK for it.
    p.deliver_a(&[ack_at(&ack, psn(&ack), NAK_ACCESS)]);
    p.deliver_a(&[ack_at(&ack, psn(&ack).wrapping_sub(5000) & 0xFF_FFFF, ACK)]);
    assert_eq!(p.a.counters().duplicate_response, 2);
    untouched(&mut p, 2);
    assert!(p.tx_a().is_empty(), "no retransmission");
    finish(&mut p, &held);
}

#[test]
fn in_window_acks_and_naks_from_another_host_change_nothing() {
    let mut p = Pair::default_pair();
    let (ack, held) = held_writes(&mut p);
    let last = psn(&held[1]);
    for syndrome in [ACK, NAK_ACCESS, 0x60 | nak_code::PSN_SEQUENCE_ERROR] {
        p.deliver_a(&[from_ip(&ack_at(&ack, last, syndrome), STRANGER)]);
    }
    assert_eq!(p.a.counters().dropped_wrong_peer, 3);
    untouched(&mut p, 2);
    assert!(
        p.tx_a().is_empty(),
        "a forged sequence NAK retransmits nothing"
    );
    finish(&mut p, &held);
}

#[test]
fn a_response_of_the_wrong_kind_in_the_window_acknowledges_nothing() {
    // The hostile-peer probe: an ATOMIC ACKNOWLEDGE at a WRITE's PSN (the
    // second of two) used to complete the first WRITE before it was
    // dropped. Also a READ response at a WRITE's PSN.
    let mut p = Pair::default_pair();
    let (ack, held) = held_writes(&mut p);
    let second = psn(&held[1]);
    p.deliver_a(&[atomic_ack_at(&ack, second, 0xDEAD_BEEF)]);
    p.deliver_a(&[read_response_at(
        &ack,
        Opcode::ReadRespOnly,
        second,
        &[9u8; 16],
    )]);
    p.deliver_a(&[read_response_at(
        &ack,
        Opcode::ReadRespMiddle,
        second,
        &[9u8; 1024],
    )]);
    assert_eq!(p.a.counters().dropped_bad_response, 3);
    untouched(&mut p, 2);
    finish(&mut p, &held);
}

#[test]
fn a_read_response_that_does_not_fit_its_read_is_dropped_before_acknowledging() {
    // A WRITE, then a READ of 2 KiB (two response PSNs at MTU 1024).
    let mut p = Pair::default_pair();
    let (ack, _) = held_writes(&mut p);
    p.a.post_send(p.qa, read_wr(&p, 3, 2048, 4096)).unwrap();
    let req = p.tx_a();
    let r = psn(&req[0]);
    for forged in [
        // the first response packet with the wrong length
        read_response_at(&ack, Opcode::ReadRespFirst, r, &[7u8; 100]),
        // the first PSN marked as the last
        read_response_at(&ack, Opcode::ReadRespLast, r, &[7u8; 1024]),
        // MIDDLE at the READ's last PSN (ONLY there is a resumed READ's
        // answer and fits)
        read_response_at(&ack, Opcode::ReadRespMiddle, r + 1, &[7u8; 1024]),
        // a READ response carrying a NAK in its AETH
        crate::support::rewrite(
            &read_response_at(&ack, Opcode::ReadRespFirst, r, &[7u8; 1024]),
            |h| h.aeth.as_mut().unwrap().syndrome = NAK_ACCESS,
        ),
        // an atomic ACK at the READ's PSN
        atomic_ack_at(&ack, r, 1),
    ] {
        p.deliver_a(&[forged]);
    }
    assert_eq!(p.a.counters().dropped_bad_response, 5);
    untouched(&mut p, 3);
    assert_eq!(p.read_a(IOVA_A + 4096, 2048), vec![0u8; 2048]);
}

#[test]
fn an_atomic_ack_lands_only_for_the_atomic_at_its_psn() {
    let mut p = Pair::default_pair();
    let (ack, held) = held_writes(&mut p);
    let mut fa = rdma_wr(&p, 4, SendOp::FetchAdd, 8, 256);
    fa.compare_add = 1;
    p.a.post_send(p.qa, fa).unwrap();
    let atomic = p.tx_a();
    let at = psn(&atomic[0]);
    // At the atomic's PSN + 1 (never sent) and at a WRITE's: refused.
    p.deliver_a(&[atomic_ack_at(&ack, at + 1, 7)]);
    p.deliver_a(&[atomic_ack_at(&ack, psn(&held[0]), 7)]);
    let c = p.a.counters();
    assert_eq!((c.dropped_unsent_psn, c.dropped_bad_response), (1, 1));
    assert_eq!(p.read_a(IOVA_A + 256, 8), [0u8; 8]);
    assert!(p.wcs_a().is_empty());
    assert_eq!(p.a.qp(p.qa).unwrap().outstanding_send_wrs(), 3);
}
