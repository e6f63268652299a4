//! Completer: go-back-N on NAK, timeout and implied NAK; mid-message
//! retransmission rebuilt from the work request; RNR waits; retry budgets;
//! error completions and flush; PSN wrap at 2^24. Driven packet by packet.

use crate::support::*;

use core::time::Duration;
use proto::endpoint::ConnectOptions;
use proto::rc::{Mtu, QpState, SendOp, WcStatus};
use proto::wire::Opcode;

#[test]
fn nak_sequence_error_resends_from_the_naked_psn_mid_message() {
    let mut p = Pair::new(opts_mtu(Mtu::Mtu256), opts_mtu(Mtu::Mtu256));
    let data = bytes(256 * 5, 7);
    p.a.mr_write(p.mr_a.lkey, IOVA_A, &data).unwrap();
    p.a.post_send(p.qa, write_wr(&p, 1, 256 * 5, 0)).unwrap();
    let f = p.tx_a();
    assert_eq!(f.len(), 5);
    let first = psn(&f[0]);
    // Packet 2 is lost; 3 and 4 arrive out of sequence.
    p.deliver_b(&[f[0].clone(), f[1].clone(), f[3].clone(), f[4].clone()]);
    let naks = p.tx_b();
    assert_eq!(naks.len(), 1, "one NAK per gap");
    assert_eq!(syndrome(&naks[0]), 0x60);
    assert_eq!(psn(&naks[0]), first + 2);
    assert_eq!(p.b.qp_counters(p.qb).unwrap().out_of_seq_request, 2);
    p.deliver_a(&naks);
    // Go-back-N from PSN first+2, rebuilt from the work request: a MIDDLE
    // (no RETH) carrying bytes 512..768, then the LAST.
    let r = p.tx_a();
    assert_eq!(r.len(), 3);
    assert_eq!(psn(&r[0]), first + 2);
    assert_eq!(opcode(&r[0]), Opcode::WriteMiddle);
    assert!(hdr(&r[0]).reth.is_none());
    assert_eq!(payload(&r[0]), &data[512..768]);
    assert_eq!(opcode(&r[2]), Opcode::WriteLast);
    let c = p.a.qp_counters(p.qa).unwrap();
    assert_eq!((c.rcvd_seq_err, c.retransmitted_packets), (1, 3));
    p.deliver_b(&r);
    p.settle();
    assert_eq!(p.read_b(IOVA_B, data.len()), data);
    let wc = p.wcs_a();
    assert_eq!(wc.len(), 1);
    assert_eq!(wc[0].status, WcStatus::Success);
}

#[test]
fn ack_timeout_resends_from_the_oldest_unacked_psn_and_completes_once() {
    let mut p = Pair::default_pair();
    p.a.post_send(p.qa, write_wr(&p, 1, 100, 0)).unwrap();
    p.a.post_send(p.qa, write_wr(&p, 2, 100, 128)).unwrap();
    let f = p.tx_a();
    assert_eq!(f.len(), 2);
    p.deliver_b(&f);
    let lost_acks = p.tx_b();
    assert_eq!(lost_acks.len(), 1);
    // The ACK is lost. Nothing happens before the timeout...
    let deadline = p.a.poll_timeout().unwrap();
    assert_eq!(deadline.as_nanos(), 4096 << 8, "timeout 8 = 4.096 us * 2^8");
    p.advance(Duration::from_nanos((4096 << 8) - 1));
    assert!(p.tx_a().is_empty());
    // ...then both requests are sent again from the oldest unacked PSN.
    p.fire_a_timer();
    let r = p.tx_a();
    assert_eq!(r.len(), 2);
    assert_eq!(psn(&r[0]), psn(&f[0]));
    assert_eq!(p.a.qp_counters(p.qa).unwrap().timeouts, 1);
    // The responder sees duplicates: re-ACKs, does not re-execute.
    p.deliver_b(&r);
    assert_eq!(p.b.qp_counters(p.qb).unwrap().duplicate_request, 2);
    p.settle();
    let wc = p.wcs_a();
    assert_eq!(wc.iter().map(|w| w.wr_id).collect::<Vec<_>>(), [1, 2]);
    // A late copy of the first ACK changes nothing.
    p.deliver_a(&lost_acks);
    assert!(p.wcs_a().is_empty());
}

#[test]
fn retry_exhaustion_completes_with_retry_exceeded_flushes_the_rest_and_errors_the_qp() {
    let mut p = Pair::new(
        ConnectOptions {
            retry_cnt: 2,
            ..opts()
        },
        opts(),
    );
    p.a.post_send(p.qa, write_wr(&p, 1, 10, 0)).unwrap();
    p.a.post_send(p.qa, write_wr(&p, 2, 10, 64)).unwrap();
    p.b.post_recv(p.qb, recv_wr_b(&p, 77, 8)).unwrap();
    // Everything A sends is lost: initial send + 2 retries, then give up.
    for round in 0..3 {
        assert_eq!(p.tx_a().len(), 2, "round {round}");
        p.fire_a_timer();
    }
    assert!(p.tx_a().is_empty());
    let wc = p.wcs_a();
    assert_eq!(wc.len(), 2);
    assert_eq!((wc[0].wr_id, wc[0].status), (1, WcStatus::RetryExceeded));
    assert_eq!((wc[1].wr_id, wc[1].status), (2, WcStatus::Flushed));
    assert_eq!(p.a.qp_state(p.qa), Some(QpState::Error));
    let c = p.a.qp_counters(p.qa).unwrap();
    assert_eq!(
        (c.retry_exceeded_err, c.timeouts, c.completer_retry_err),
        (1, 3, 2)
    );
    // New work on a QP in error is flushed at once.
    p.a.post_send(p.qa, write_wr(&p, 3, 10, 0)).unwrap();
    assert_eq!(p.wcs_a()[0].status, WcStatus::Flushed);
    assert_eq!(p.a.poll_timeout(), None);
}

#[test]
fn rnr_nak_waits_the_rnr_timer_then_resends() {
    let mut p = Pair::new(
        opts(),
        ConnectOptions {
            min_rnr_timer: 4,
            ..opts()
        },
    ); // 40 us
    p.a.post_send(p.qa, send_wr_a(&p, 1, SendOp::Send, 100))
        .unwrap();
    let f = p.tx_a();
    p.deliver_b(&f);
    let rnr = p.tx_b();
    assert_eq!(rnr.len(), 1);
    assert_eq!(
        syndrome(&rnr[0]),
        0x20 | 4,
        "RNR NAK with the responder's min_rnr_timer"
    );
    assert_eq!(p.b.qp_counters(p.qb).unwrap().send_rnr_err, 1);
    p.deliver_a(&rnr);
    assert_eq!(p.a.qp_counters(p.qa).unwrap().rcvd_rnr_err, 1);
    // Waits: nothing before 40 us.
    p.advance(Duration::from_micros(39));
    assert!(p.tx_a().is_empty());
    p.b.post_recv(p.qb, recv_wr_b(&p, 5, 100)).unwrap();
    p.advance(Duration::from_micros(1));
    let r = p.tx_a();
    assert_eq!(r.len(), 1);
    assert_eq!(psn(&r[0]), psn(&f[0]));
    p.deliver_b(&r);
    p.settle();
    assert_eq!(p.wcs_a()[0].status, WcStatus::Success);
    assert_eq!(p.wcs_b()[0].wr_id, 5);
}

#[test]
fn rnr_retry_exhaustion_completes_with_rnr_retry_exceeded() {
    let mut p = Pair::new(
        ConnectOptions {
            rnr_retry: 1,
            ..opts()
        },
        opts(),
    );
    p.a.post_send(p.qa, send_wr_a(&p, 1, SendOp::Send, 10))
        .unwrap();
    for _ in 0..2 {
        let f = p.tx_a();
        assert_eq!(f.len(), 1);
        p.deliver_b(&f);
        let n = p.tx_b();
        p.deliver_a(&n);
        if p.a.qp_state(p.qa) == Some(QpState::Error) {
            break;
        }
        p.advance(Duration::from_micros(10));
    }
    let wc = p.wcs_a();
    assert_eq!(wc[0].status, WcStatus::RnrRetryExceeded);
    assert_eq!(p.a.qp_counters(p.qa).unwrap().retry_rnr_exceeded_err, 1);
    assert_eq!(p.a.qp_state(p.qa), Some(QpState::Error));
}

#[test]
fn ack_skipping_a_read_is_an_implied_nak_and_the_read_is_resent() {
    let mut p = Pair::default_pair();
    let src = bytes(100, 9);
    p.b.mr_write(p.mr_b.lkey, IOVA_B, &src).unwrap();
    p.a.post_send(p.qa, read_wr(&p, 1, 100, 0)).unwrap();
    p.a.post_send(p.qa, write_wr(&p, 2, 10, 4096)).unwrap();
    let f = p.tx_a();
    assert_eq!(f.len(), 2);
    p.deliver_b(&f);
    let r = p.tx_b();
    assert_eq!(
        r.iter().map(|x| opcode(x)).collect::<Vec<_>>(),
        [Opcode::ReadRespOnly, Opcode::Acknowledge]
    );
    // The READ response is lost; the ACK of the later WRITE arrives.
    p.deliver_a(&r[1..]);
    let again = p.tx_a();
    assert_eq!(opcode(&again[0]), Opcode::ReadRequest);
    assert_eq!(psn(&again[0]), psn(&f[0]));
    assert_eq!(p.a.qp_counters(p.qa).unwrap().completer_retry_err, 1);
    p.deliver_b(&again);
    p.settle();
    let wc = p.wcs_a();
    assert_eq!(
        wc.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(),
        [(1, WcStatus::Success), (2, WcStatus::Success)]
    );
    assert_eq!(p.read_a(IOVA_A, 100), src);
}

#[test]
fn lost_read_response_is_requested_again_from_the_missing_packet() {
    let mut p = Pair::new(opts_mtu(Mtu::Mtu256), opts_mtu(Mtu::Mtu256));
    let src = bytes(256 * 4, 1);
    p.b.mr_write(p.mr_b.lkey, IOVA_B, &src).unwrap();
    p.a.post_send(p.qa, read_wr(&p, 1, 1024, 0)).unwrap();
    let f = p.tx_a();
    p.deliver_b(&f);
    let r = p.tx_b();
    assert_eq!(r.len(), 4);
    assert_eq!(opcode(&r[0]), Opcode::ReadRespFirst);
    assert_eq!(opcode(&r[1]), Opcode::ReadRespMiddle);
    assert_eq!(opcode(&r[3]), Opcode::ReadRespLast);
    // Response 1 lost: 2 reveals the gap.
    p.deliver_a(&[r[0].clone(), r[2].clone(), r[3].clone()]);
    let again = p.tx_a();
    assert_eq!(again.len(), 1);
    let h = hdr(&again[0]);
    assert_eq!(h.bth.opcode, Opcode::ReadRequest);
    assert_eq!(h.bth.psn, psn(&f[0]) + 1, "resume at the first missing PSN");
    let reth = h.reth.unwrap();
    assert_eq!(
        (reth.va, reth.dma_len),
        (IOVA_B + 256, 768),
        "only the bytes not yet received"
    );
    p.deliver_b(&again);
    let r2 = p.tx_b();
    assert_eq!(r2.len(), 3);
    assert_eq!(psn(&r2[0]), psn(&f[0]) + 1);
    p.deliver_a(&r2);
    assert_eq!(p.wcs_a()[0].status, WcStatus::Success);
    assert_eq!(p.read_a(IOVA_A, 1024), src);
    assert_eq!(p.b.qp_counters(p.qb).unwrap().duplicate_request, 1);
}

#[test]
fn psns_wrap_at_2_pow_24_with_loss_across_the_wrap() {
    let o = ConnectOptions {
        sq_psn: 0xFF_FFFE,
        ..opts_mtu(Mtu::Mtu256)
    };
    let mut p = Pair::new(o, opts_mtu(Mtu::Mtu256));
    let data = bytes(256 * 6, 4);
    p.a.mr_write(p.mr_a.lkey, IOVA_A, &data).unwrap();
    p.a.post_send(p.qa, write_wr(&p, 1, data.len() as u32, 0))
        .unwrap();
    let f = p.tx_a();
    let psns: Vec<u32> = f.iter().map(|x| psn(x)).collect();
    assert_eq!(psns, [0xFF_FFFE, 0xFF_FFFF, 0, 1, 2, 3]);
    // Lose PSN 0 (just after the wrap).
    p.deliver_b(&[f[0].clone(), f[1].clone(), f[3].clone()]);
    let nak = p.tx_b();
    assert_eq!((psn(&nak[0]), syndrome(&nak[0])), (0, 0x60));
    p.deliver_a(&nak);
    let r = p.tx_a();
    assert_eq!(r.iter().map(|x| psn(x)).collect::<Vec<_>>(), [0, 1, 2, 3]);
    p.deliver_b(&r);
    p.settle();
    assert_eq!(p.read_b(IOVA_B, data.len()), data);
    assert_eq!(p.wcs_a()[0].status, WcStatus::Success);
    // A stale duplicate from before the wrap is a duplicate, not "ahead".
    p.deliver_b(&f[..1]);
    assert_eq!(p.b.qp_counters(p.qb).unwrap().duplicate_request, 1);
}

#[test]
fn duplicate_and_stale_naks_do_not_rewind_twice() {
    let mut p = Pair::new(opts_mtu(Mtu::Mtu256), opts_mtu(Mtu::Mtu256));
    p.a.post_send(p.qa, write_wr(&p, 1, 256 * 4, 0)).unwrap();
    let f = p.tx_a();
    p.deliver_b(&[f[0].clone(), f[2].clone()]);
    let nak = p.tx_b();
    assert_eq!(nak.len(), 1);
    p.deliver_a(&nak);
    assert_eq!(p.tx_a().len(), 3);
    // The same NAK again (duplicated on the wire): ignored.
    p.deliver_a(&nak);
    assert!(p.tx_a().is_empty());
    assert_eq!(p.a.qp_counters(p.qa).unwrap().completer_retry_err, 1);
}

#[test]
fn an_ack_with_a_reserved_syndrome_is_a_counted_drop() {
    // AETH syndrome bit 7 is reserved, and so is type 010.
    let mut p = Pair::default_pair();
    p.a.post_send(p.qa, write_wr(&p, 1, 10, 0)).unwrap();
    let f = p.tx_a();
    p.deliver_b(&f);
    let ack = p.tx_b();
    assert_eq!(syndrome(&ack[0]), 0x1F);
    for s in [0x9F, 0x5F] {
        let forged = rewrite(&ack[0], |h| h.aeth.as_mut().unwrap().syndrome = s);
        p.deliver_a(&[forged]);
    }
    assert_eq!(p.a.qp_counters(p.qa).unwrap().dropped_malformed, 2);
    assert!(p.wcs_a().is_empty());
    p.deliver_a(&ack);
    assert_eq!(p.wcs_a()[0].status, WcStatus::Success);
}

/// The timer heap is lazy: an ACK that disarms the retransmit timer leaves
/// its entry, which falls due with nothing to do. `handle_timeout` says so
/// (a driver must not take it for progress and spin) and drops the entry,
/// so the next `poll_timeout` no longer reports it.
#[test]
fn a_stale_deadline_runs_no_timer_and_is_dropped() {
    let mut p = Pair::default_pair();
    p.a.post_send(p.qa, write_wr(&p, 1, 100, 0)).unwrap();
    let f = p.tx_a();
    let stale = p.a.poll_timeout().expect("retransmit timer armed");
    p.deliver_b(&f);
    p.settle();
    assert_eq!(p.wcs_a().len(), 1);
    // Acknowledged: nothing is due, but the heap entry is still there.
    assert_eq!(p.a.poll_timeout(), Some(stale));
    assert!(!p.a.handle_timeout(stale), "no timer ran");
    assert_eq!(p.a.poll_timeout(), None);
    assert_eq!(p.a.qp_counters(p.qa).unwrap().timeouts, 0);
    assert!(p.tx_a().is_empty());
    // A timer that does fire says so.
    p.a.post_send(p.qa, write_wr(&p, 2, 100, 0)).unwrap();
    assert_eq!(p.tx_a().len(), 1);
    let t = p.a.poll_timeout().unwrap();
    // The endpoint's sum, taken before the timer runs, then after: it
    // follows what the timer counted on the QP.
    assert_eq!(p.a.counters().timeouts, 0);
    assert!(p.a.handle_timeout(t), "the retransmit timer ran");
    assert_eq!(p.a.qp_counters(p.qa).unwrap().timeouts, 1);
    assert_eq!(p.a.counters().timeouts, 1);
}
