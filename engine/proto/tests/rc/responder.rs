//! Responder: ePSN, one NAK per gap, duplicates (re-ACK, READ re-read,
//! atomic replay), ACK coalescing, MSN, RNR, R_Key/range/rights checks that
//! never touch a byte outside the region, and robustness to garbage.

use crate::support::*;

use proto::rc::{Access, MrKeys, Mtu, QpState, RecvWr, SendOp, SendWr, Sge, WcStatus};
use proto::sim::SplitMix64;
use proto::wire::{Opcode, RethRepr};

#[test]
fn one_nak_per_gap_then_silent_until_in_order_again() {
    let mut p = Pair::new(opts_mtu(Mtu::Mtu256), opts_mtu(Mtu::Mtu256));
    p.a.post_send(p.qa, write_wr(&p, 1, 256 * 10, 0)).unwrap();
    let f = p.tx_a();
    assert_eq!(f.len(), 10);
    // Gap at 1: packets 2..=5 arrive, one NAK only.
    p.deliver_b(&[f[0].clone()]);
    p.deliver_b(&f[2..6]);
    let n = p.tx_b();
    assert_eq!(n.len(), 1);
    assert_eq!((psn(&n[0]), syndrome(&n[0])), (psn(&f[1]), 0x60));
    p.deliver_b(&f[6..8]);
    assert!(p.tx_b().is_empty(), "silent while the gap persists");
    // In order again (1), then a new gap (3 missing) earns a new NAK.
    p.deliver_b(&[f[1].clone(), f[2].clone(), f[4].clone()]);
    let n2 = p.tx_b();
    assert_eq!(n2.len(), 1);
    assert_eq!((psn(&n2[0]), syndrome(&n2[0])), (psn(&f[3]), 0x60));
    let c = p.b.qp_counters(p.qb).unwrap();
    assert_eq!((c.naks_sent, c.out_of_seq_request), (2, 7));
}

#[test]
fn duplicate_write_is_re_acked_never_re_executed() {
    let mut p = Pair::default_pair();
    p.a.mr_write(p.mr_a.lkey, IOVA_A, &[1u8; 16]).unwrap();
    p.a.post_send(p.qa, write_wr(&p, 1, 16, 0)).unwrap();
    let f = p.tx_a();
    p.deliver_b(&f);
    assert_eq!(p.tx_b().len(), 1);
    // The application changes the bytes; a duplicate must not overwrite them.
    p.b.mr_write(p.mr_b.lkey, IOVA_B, &[9u8; 16]).unwrap();
    p.deliver_b(&f);
    let ack = p.tx_b();
    assert_eq!(ack.len(), 1, "duplicate re-ACKed");
    assert_eq!(
        (opcode(&ack[0]), psn(&ack[0]), syndrome(&ack[0])),
        (Opcode::Acknowledge, psn(&f[0]), 0x1F)
    );
    assert_eq!(p.read_b(IOVA_B, 16), [9u8; 16]);
    assert_eq!(p.b.qp_counters(p.qb).unwrap().duplicate_request, 1);
}

#[test]
fn duplicate_read_is_re_executed_from_memory() {
    let mut p = Pair::default_pair();
    p.b.mr_write(p.mr_b.lkey, IOVA_B, &[1u8; 32]).unwrap();
    let mut rd = send_wr_a(&p, 1, SendOp::Read, 32);
    rd.remote_addr = IOVA_B;
    rd.rkey = p.mr_b.rkey;
    p.a.post_send(p.qa, rd).unwrap();
    let req = p.tx_a();
    p.deliver_b(&req);
    let r1 = p.tx_b();
    assert_eq!(payload(&r1[0]), [1u8; 32]);
    p.b.mr_write(p.mr_b.lkey, IOVA_B, &[2u8; 32]).unwrap();
    p.deliver_b(&req);
    let r2 = p.tx_b();
    assert_eq!(r2.len(), 1);
    assert_eq!(psn(&r2[0]), psn(&r1[0]));
    assert_eq!(payload(&r2[0]), [2u8; 32], "re-read, not replayed");
}

#[test]
fn duplicate_atomic_replays_the_saved_result_and_executes_once() {
    let mut p = Pair::default_pair();
    p.b.mr_write(p.mr_b.lkey, IOVA_B, &40u64.to_le_bytes())
        .unwrap();
    let mut wr = send_wr_a(&p, 1, SendOp::FetchAdd, 8);
    wr.remote_addr = IOVA_B;
    wr.rkey = p.mr_b.rkey;
    wr.compare_add = 2;
    p.a.post_send(p.qa, wr).unwrap();
    let req = p.tx_a();
    assert_eq!(opcode(&req[0]), Opcode::FetchAdd);
    p.deliver_b(&req);
    let r1 = p.tx_b();
    p.deliver_b(&req);
    p.deliver_b(&req);
    let r2 = p.tx_b();
    assert_eq!(r2.len(), 2);
    for r in r1.iter().chain(&r2) {
        assert_eq!(opcode(r), Opcode::AtomicAcknowledge);
        assert_eq!(hdr(r).atomic_ack_eth.unwrap().orig, 40);
    }
    assert_eq!(
        p.read_b(IOVA_B, 8),
        42u64.to_le_bytes(),
        "executed exactly once"
    );
    p.deliver_a(&r1);
    p.deliver_a(&r2);
    let wc = p.wcs_a();
    assert_eq!(wc.len(), 1);
    assert_eq!(p.read_a(IOVA_A, 8), 40u64.to_le_bytes());
}

#[test]
fn compare_and_swap_swaps_only_on_match() {
    let mut p = Pair::default_pair();
    p.b.mr_write(p.mr_b.lkey, IOVA_B, &5u64.to_le_bytes())
        .unwrap();
    for (i, (cmp, swap)) in [(4u64, 100u64), (5, 6)].into_iter().enumerate() {
        let mut wr = SendWr::new(
            i as u64,
            SendOp::CompareSwap,
            Sge {
                lkey: p.mr_a.lkey,
                addr: IOVA_A + 8 * i as u64,
                length: 8,
            },
        );
        wr.remote_addr = IOVA_B;
        wr.rkey = p.mr_b.rkey;
        wr.compare_add = cmp;
        wr.swap = swap;
        p.a.post_send(p.qa, wr).unwrap();
    }
    p.settle();
    assert_eq!(
        p.read_a(IOVA_A, 16),
        [5u64.to_le_bytes(), 5u64.to_le_bytes()].concat()
    );
    assert_eq!(p.read_b(IOVA_B, 8), 6u64.to_le_bytes());
}

#[test]
fn acks_are_coalesced_and_carry_the_msn() {
    let mut p = Pair::default_pair();
    for i in 0..10 {
        p.a.post_send(p.qa, write_wr(&p, i, 8, 8 * i)).unwrap();
    }
    let f = p.tx_a();
    assert_eq!(f.len(), 10);
    // AckReq on the last one only (nine were followed by queued requests).
    let asked: Vec<bool> = f.iter().map(|x| hdr(x).bth.ack_req).collect();
    assert_eq!(asked, [[false; 9].as_slice(), &[true]].concat());
    p.deliver_b(&f);
    let acks = p.tx_b();
    assert_eq!(acks.len(), 1, "one ACK covers all ten");
    let aeth = hdr(&acks[0]).aeth.unwrap();
    assert_eq!(psn(&acks[0]), psn(&f[9]));
    assert_eq!(aeth.msn, 10);
    p.deliver_a(&acks);
    assert_eq!(p.wcs_a().len(), 10);
    assert_eq!(p.b.qp_counters(p.qb).unwrap().acks_sent, 1);
}

#[test]
fn send_without_posted_receive_gets_rnr_nak_not_a_silent_drop() {
    let mut p = Pair::default_pair();
    p.a.post_send(p.qa, send_wr_a(&p, 1, SendOp::Send, 4))
        .unwrap();
    let f = p.tx_a();
    p.deliver_b(&f);
    let n = p.tx_b();
    assert_eq!(n.len(), 1);
    assert_eq!(syndrome(&n[0]) & 0xE0, 0x20);
}

#[test]
fn multi_packet_send_lands_in_the_receive_buffer_with_immediate() {
    let mut p = Pair::new(opts_mtu(Mtu::Mtu512), opts_mtu(Mtu::Mtu512));
    let data = bytes(1300, 2);
    p.a.mr_write(p.mr_a.lkey, IOVA_A, &data).unwrap();
    p.b.post_recv(
        p.qb,
        RecvWr {
            wr_id: 3,
            sge: Sge {
                lkey: p.mr_b.lkey,
                addr: IOVA_B + 100,
                length: 2000,
            },
        },
    )
    .unwrap();
    let mut wr = send_wr_a(&p, 1, SendOp::SendWithImm, 1300);
    wr.imm = 77;
    p.a.post_send(p.qa, wr).unwrap();
    let f = p.tx_a();
    assert_eq!(
        f.iter().map(|x| opcode(x)).collect::<Vec<_>>(),
        [Opcode::SendFirst, Opcode::SendMiddle, Opcode::SendLastImm]
    );
    p.deliver_b(&f);
    let wc = p.wcs_b();
    assert_eq!(
        (wc[0].wr_id, wc[0].byte_len, wc[0].imm),
        (3, 1300, Some(77))
    );
    assert_eq!(p.read_b(IOVA_B + 100, 1300), data);
}

#[test]
fn write_with_immediate_consumes_a_receive() {
    let mut p = Pair::default_pair();
    p.b.post_recv(p.qb, recv_wr_b(&p, 8, 0)).unwrap();
    let mut wr = write_wr(&p, 1, 64, 256);
    wr.opcode = SendOp::WriteWithImm;
    wr.imm = 0x1234;
    p.a.post_send(p.qa, wr).unwrap();
    p.settle();
    let wc = p.wcs_b();
    assert_eq!(wc.len(), 1);
    assert_eq!(
        (wc[0].wr_id, wc[0].opcode, wc[0].byte_len, wc[0].imm),
        (8, proto::rc::WcOpcode::RecvRdmaWithImm, 64, Some(0x1234))
    );
}

/// A responder region of 64 bytes between two guard regions; returns the
/// pair and the region's rkey, iova.
fn guarded_pair(access: Access) -> (Pair, u32, u64) {
    let (p, k, va) = guarded_pair_keys(access);
    (p, k.rkey, va)
}

/// [`guarded_pair`] with both keys (the test reads the region back with its L_Key).
fn guarded_pair_keys(access: Access) -> (Pair, MrKeys, u64) {
    let mut p = Pair::default_pair();
    let k = p.b.reg_mr(Box::new(vec![0u8; 64]), 0x9000, access).unwrap();
    (p, k, 0x9000)
}

fn assert_access_nak(p: &mut Pair, frames: Vec<Vec<u8>>) {
    p.deliver_b(&frames);
    let n = p.tx_b();
    assert_eq!(n.len(), 1);
    assert_eq!(syndrome(&n[0]), 0x62, "NAK remote access error");
    assert_eq!(p.b.qp_state(p.qb), Some(QpState::Error));
    p.deliver_a(&n);
    let wc = p.wcs_a();
    assert_eq!(wc[0].status, WcStatus::RemoteAccessError);
    assert_eq!(p.a.qp_state(p.qa), Some(QpState::Error));
}

#[test]
fn write_with_unknown_rkey_is_naked_and_touches_nothing() {
    let (mut p, rkey, va) = guarded_pair(Access::ALL);
    p.a.mr_write(p.mr_a.lkey, IOVA_A, &[0xAA; 32]).unwrap();
    let mut wr = write_wr(&p, 1, 32, 0);
    wr.rkey = rkey ^ 0x100;
    wr.remote_addr = va;
    p.a.post_send(p.qa, wr).unwrap();
    let f = p.tx_a();
    assert_access_nak(&mut p, f);
    assert!(p.read_b(IOVA_B, 4096).iter().all(|&b| b == 0));
}

#[test]
fn write_one_byte_past_the_region_is_naked_and_touches_nothing() {
    let (mut p, keys, va) = guarded_pair_keys(Access::ALL);
    let rkey = keys.rkey;
    p.a.mr_write(p.mr_a.lkey, IOVA_A, &[0xAA; 32]).unwrap();
    let mut wr = write_wr(&p, 1, 32, 0);
    wr.rkey = rkey;
    wr.remote_addr = va + 33;
    p.a.post_send(p.qa, wr).unwrap();
    let f = p.tx_a();
    assert_access_nak(&mut p, f);
    let mut region = [0u8; 64];
    p.b.mr_read(keys.lkey, va, &mut region).unwrap();
    assert_eq!(region, [0u8; 64]);
}

#[test]
fn middle_packet_cannot_escape_the_range_the_first_packet_checked() {
    // A forged WRITE_FIRST announcing 256 bytes followed by more packets
    // than announced: the extra bytes are refused, nothing lands past 256.
    let mut p = Pair::new(opts_mtu(Mtu::Mtu256), opts_mtu(Mtu::Mtu256));
    p.a.mr_write(p.mr_a.lkey, IOVA_A, &[0xAB; 1024]).unwrap();
    p.a.post_send(p.qa, write_wr(&p, 1, 1024, 0)).unwrap();
    let f = p.tx_a();
    let forged_first = rewrite(&f[0], |h| {
        h.reth = Some(RethRepr {
            dma_len: 256,
            ..h.reth.unwrap()
        })
    });
    p.deliver_b(&[forged_first, f[1].clone()]);
    let n = p.tx_b();
    assert_eq!(syndrome(n.last().unwrap()), 0x61, "NAK invalid request");
    assert!(p.read_b(IOVA_B + 256, 1024).iter().all(|&b| b == 0));
    assert_eq!(p.b.qp_state(p.qb), Some(QpState::Error));
}

#[test]
fn read_without_remote_read_right_is_naked() {
    let (mut p, rkey, va) = guarded_pair(Access::REMOTE_WRITE);
    let mut rd = send_wr_a(&p, 1, SendOp::Read, 8);
    rd.remote_addr = va;
    rd.rkey = rkey;
    p.a.post_send(p.qa, rd).unwrap();
    let f = p.tx_a();
    assert_access_nak(&mut p, f);
}

#[test]
fn atomic_without_remote_atomic_right_is_naked_and_memory_unchanged() {
    let (mut p, keys, va) = guarded_pair_keys(Access::REMOTE_WRITE | Access::REMOTE_READ);
    let rkey = keys.rkey;
    let mut wr = send_wr_a(&p, 1, SendOp::FetchAdd, 8);
    wr.remote_addr = va;
    wr.rkey = rkey;
    wr.compare_add = 1;
    p.a.post_send(p.qa, wr).unwrap();
    let f = p.tx_a();
    assert_access_nak(&mut p, f);
    let mut v = [0u8; 8];
    p.b.mr_read(keys.lkey, va, &mut v).unwrap();
    assert_eq!(v, [0u8; 8]);
}

#[test]
fn bad_icrc_and_unknown_qp_are_counted_drops() {
    let mut p = Pair::default_pair();
    p.a.post_send(p.qa, write_wr(&p, 1, 16, 0)).unwrap();
    let f = p.tx_a();
    let mut bad = f[0].clone();
    let n = bad.len();
    bad[n - 10] ^= 0x01;
    p.deliver_b(&[bad]);
    assert_eq!(p.b.counters().dropped_bad_icrc, 1);
    let other = rewrite(&f[0], |h| h.bth.dest_qp = 0x5555);
    p.deliver_b(&[other]);
    assert_eq!(p.b.counters().dropped_unknown_qp, 1);
    assert!(p.tx_b().is_empty());
    assert_eq!(p.read_b(IOVA_B, 16), [0u8; 16]);
}

#[test]
fn garbage_and_mutated_frames_never_panic() {
    let mut p = Pair::default_pair();
    let mut rng = SplitMix64::new(42);
    p.a.mr_write(p.mr_a.lkey, IOVA_A, &bytes(4096, 0)).unwrap();
    let mut samples = Vec::new();
    for (i, op) in [SendOp::Write, SendOp::Read, SendOp::Send, SendOp::FetchAdd]
        .into_iter()
        .enumerate()
    {
        let mut wr = write_wr(
            &p,
            i as u64,
            if op == SendOp::FetchAdd { 8 } else { 3000 },
            0,
        );
        wr.opcode = op;
        p.a.post_send(p.qa, wr).unwrap();
    }
    samples.extend(p.tx_a());
    for _ in 0..20_000 {
        let base = &samples[rng.below(samples.len() as u64) as usize];
        let mut f = base.clone();
        match rng.below(4) {
            0 => f.truncate(rng.below(f.len() as u64) as usize),
            1 => {
                let i = rng.below(f.len() as u64) as usize;
                f[i] ^= 1 << rng.below(8);
            }
            2 => {
                // Valid ICRC, random header fields.
                let v = rng.next_u64();
                f = rewrite(base, |h| {
                    h.bth.psn = (v as u32) & 0xFF_FFFF;
                    if let Some(r) = h.reth.as_mut() {
                        r.va = v.rotate_left(7);
                        r.dma_len = (v >> 40) as u32;
                        r.rkey = p.mr_b.rkey;
                    }
                    h.bth.ack_req = v & 1 == 1;
                });
            }
            _ => f = (0..rng.below(200)).map(|_| rng.next_u64() as u8).collect(),
        }
        p.b.handle_packet(p.now, &f);
        p.a.handle_packet(p.now, &f);
        let _ = p.tx_b();
        let _ = p.tx_a();
    }
}

#[test]
fn packets_from_another_host_are_dropped() {
    let mut p = Pair::default_pair();
    p.a.mr_write(p.mr_a.lkey, IOVA_A, &[5u8; 16]).unwrap();
    p.a.post_send(p.qa, write_wr(&p, 1, 16, 0)).unwrap();
    let f = p.tx_a();
    let spoofed = rewrite(&f[0], |h| {
        if let proto::wire::IpRepr::V4 { src, .. } = &mut h.ip {
            *src = "10.0.0.99".parse().unwrap();
        }
    });
    p.deliver_b(&[spoofed]);
    assert_eq!(p.b.counters().dropped_wrong_peer, 1);
    assert!(p.tx_b().is_empty());
    assert_eq!(p.read_b(IOVA_B, 16), [0u8; 16]);
    p.deliver_b(&f);
    assert_eq!(p.read_b(IOVA_B, 16), [5u8; 16]);
}

/// Re-emit `frame` with its payload replaced (ICRC recomputed).
fn with_payload(frame: &[u8], payload: &[u8]) -> Vec<u8> {
    let h = hdr(frame);
    let mut buf = vec![0u8; 9000];
    let n = proto::wire::emit_frame(&h, payload, &mut buf).unwrap();
    buf.truncate(n);
    buf
}

/// B's only answer is a NAK with `code`, and B's QP is in error.
fn assert_fatal_nak(p: &mut Pair, code: u8) {
    let n = p.tx_b();
    assert_eq!(n.len(), 1);
    assert_eq!(opcode(&n[0]), Opcode::Acknowledge);
    assert_eq!(syndrome(&n[0]), 0x60 | code);
    assert_eq!(p.b.qp_state(p.qb), Some(QpState::Error));
    assert_eq!(p.b.qp_counters(p.qb).unwrap().naks_sent, 1);
}

#[test]
fn a_middle_packet_without_its_first_is_a_nak_invalid_request() {
    // Opcode sequence: a WRITE_MIDDLE at the expected PSN, with no
    // WRITE_FIRST before it, opens no message.
    let mut p = Pair::new(opts_mtu(Mtu::Mtu256), opts_mtu(Mtu::Mtu256));
    p.a.mr_write(p.mr_a.lkey, IOVA_A, &[0xCD; 768]).unwrap();
    p.a.post_send(p.qa, write_wr(&p, 1, 768, 0)).unwrap();
    let f = p.tx_a();
    assert_eq!(opcode(&f[1]), Opcode::WriteMiddle);
    let first_psn = psn(&f[0]);
    p.deliver_b(&[rewrite(&f[1], |h| h.bth.psn = first_psn)]);
    assert_fatal_nak(&mut p, 1);
    assert!(p.read_b(IOVA_B, 768).iter().all(|&b| b == 0));
}

#[test]
fn a_first_packet_shorter_than_the_path_mtu_is_a_nak_invalid_request() {
    // Length: FIRST and MIDDLE packets carry exactly the path MTU.
    let mut p = Pair::new(opts_mtu(Mtu::Mtu256), opts_mtu(Mtu::Mtu256));
    p.a.post_send(p.qa, write_wr(&p, 1, 512, 0)).unwrap();
    let f = p.tx_a();
    assert_eq!(opcode(&f[0]), Opcode::WriteFirst);
    p.deliver_b(&[with_payload(&f[0], &[0xEE; 200])]);
    assert_fatal_nak(&mut p, 1);
    assert!(p.read_b(IOVA_B, 512).iter().all(|&b| b == 0));
}

#[test]
fn a_misaligned_atomic_is_a_nak_invalid_request_and_memory_unchanged() {
    let mut p = Pair::default_pair();
    p.b.mr_write(p.mr_b.lkey, IOVA_B + 8, &5u64.to_le_bytes())
        .unwrap();
    let mut wr = rdma_wr(&p, 1, SendOp::FetchAdd, 8, 8);
    wr.compare_add = 1;
    p.a.post_send(p.qa, wr).unwrap();
    let f = p.tx_a();
    // post_send refuses a misaligned address; the frame is forged.
    let forged = rewrite(&f[0], |h| {
        let a = h.atomic_eth.as_mut().unwrap();
        a.va += 4;
    });
    p.deliver_b(&[forged]);
    assert_fatal_nak(&mut p, 1);
    assert_eq!(p.read_b(IOVA_B + 8, 8), 5u64.to_le_bytes());
}

#[test]
fn a_receive_buffer_gone_from_its_region_fails_both_sides_with_remote_operational_error() {
    // The receive was valid when posted; its region is deregistered before
    // the SEND arrives: the receive completes with a local QP operation
    // error (rxe_resp.c `RESPST_ERR_MALFORMED_WQE`), NAK remote operational error, and the sender's request
    // completes with a remote operational error.
    let mut p = Pair::default_pair();
    p.b.post_recv(p.qb, recv_wr_b(&p, 9, 64)).unwrap();
    assert!(p.b.dereg_mr(p.mr_b.lkey).is_ok());
    p.a.post_send(p.qa, send_wr_a(&p, 1, SendOp::Send, 64))
        .unwrap();
    let f = p.tx_a();
    p.deliver_b(&f);
    let wb = p.wcs_b();
    assert_eq!(
        (wb[0].wr_id, wb[0].status),
        (9, WcStatus::LocalQpOperationError)
    );
    let n = p.tx_b();
    assert_eq!(syndrome(&n[0]), 0x63, "NAK remote operational error");
    assert_eq!(p.b.qp_state(p.qb), Some(QpState::Error));
    p.deliver_a(&n);
    let wa = p.wcs_a();
    assert_eq!(
        (wa[0].wr_id, wa[0].status),
        (1, WcStatus::RemoteOperationalError)
    );
    assert_eq!(p.a.qp_state(p.qa), Some(QpState::Error));
}

#[test]
fn reads_beyond_max_dest_rd_atomic_are_dropped_unexecuted_and_retried() {
    let b_opts = proto::endpoint::ConnectOptions {
        max_dest_rd_atomic: 1,
        ..opts()
    };
    let mut p = Pair::new(opts(), b_opts);
    let src = bytes(200, 3);
    p.b.mr_write(p.mr_b.lkey, IOVA_B, &src).unwrap();
    p.a.post_send(p.qa, read_wr(&p, 1, 100, 0)).unwrap();
    p.a.post_send(p.qa, read_wr(&p, 2, 100, 100)).unwrap();
    let f = p.tx_a();
    assert_eq!(f.len(), 2);
    // Both arrive before B answers: its one READ slot is taken by the
    // first, the second is dropped without an answer.
    p.deliver_b(&f);
    assert_eq!(p.b.qp_counters(p.qb).unwrap().dropped_busy, 1);
    let r = p.tx_b();
    assert_eq!(r.len(), 1);
    assert_eq!(opcode(&r[0]), Opcode::ReadRespOnly);
    p.deliver_a(&r);
    assert_eq!(p.wcs_a().iter().map(|w| w.wr_id).collect::<Vec<_>>(), [1]);
    // A's ACK timeout sends the second again; now it is answered.
    p.fire_a_timer();
    p.settle();
    let wc = p.wcs_a();
    assert_eq!((wc[0].wr_id, wc[0].status), (2, WcStatus::Success));
    assert_eq!(p.read_a(IOVA_A, 200), src);
}

/// `Endpoint::qp_hint`, `qp_index_hint` and `qp_state_hint`, the receive
/// path's early looks (the driver prefetches the QP with them): the QP a
/// frame is for, from its
/// headers alone, even with a bad ICRC; nothing for a QP the endpoint does
/// not hold or a frame that is not RoCE; and it changes nothing (the frame
/// is then handled as if never looked at).
#[test]
fn qp_hint_names_the_frames_qp_and_changes_nothing() {
    let mut p = Pair::default_pair();
    p.a.post_send(p.qa, write_wr(&p, 0, 8, 0)).unwrap();
    let f = p.tx_a();
    assert_eq!(f.len(), 1);
    let before = p.b.counters();
    assert_eq!(p.b.qp_hint(&f[0]).map(|q| q.qpn()), Some(p.qb));
    assert_eq!(proto::wire::peek_dest_qp(&f[0]), Some(p.qb));
    // A bad ICRC: still the QP (receive() will drop it).
    let mut bad = f[0].clone();
    let n = bad.len();
    bad[n - 1] ^= 0xFF;
    assert_eq!(p.b.qp_hint(&bad).map(|q| q.qpn()), Some(p.qb));
    // A QP this endpoint does not hold (BTH destination QP, bytes 47-49),
    // and frames that are not RoCE v2.
    let mut other = f[0].clone();
    let unheld = (p.qb + 1000) & 0xFF_FFFF;
    other[47..50].copy_from_slice(&unheld.to_be_bytes()[1..]);
    assert_eq!(proto::wire::peek_dest_qp(&other), Some(unheld));
    assert!(p.b.qp_hint(&other).is_none());
    assert!(p.b.qp_hint(&f[0][..20]).is_none());
    assert!(p.b.qp_hint(&[]).is_none());
    let mut udp = f[0].clone();
    udp[36..38].copy_from_slice(&9999u16.to_be_bytes()); // UDP dst port
    assert!(p.b.qp_hint(&udp).is_none());
    // The two prefetch stages: the index bucket, then the QP's slot (all
    // of the QP, from its start: its inline counters are in its last
    // line; then its schedule entry) and the memory the WRITE's payload
    // goes to; none for a frame that is not RoCE or whose QP is not held
    // (stage one names a bucket whatever the number: it reads nothing to
    // know).
    let qp_at = p.b.qp_hint(&f[0]).map(|q| q as *const _ as usize);
    let [slot, payload] = p.b.qp_state_hint(&f[0]).expect("stage two");
    assert_eq!(Some(slot.addr), qp_at);
    assert!(
        slot.len > std::mem::size_of::<proto::rc::Qp>(),
        "the QP and its schedule entry"
    );
    let target = p.b.mr_slice(p.mr_b.lkey, IOVA_B, 8).unwrap();
    assert_eq!((payload.addr, payload.len), (target.as_ptr() as usize, 8));
    // A post's stage two: the same slot.
    assert_eq!(p.b.qpn_state_hint(p.qb), Some(slot));
    // A WRITE whose R_Key names no region of B: no payload range (the
    // responder will NAK it).
    let mut bad_key = f[0].clone();
    bad_key[62..66].copy_from_slice(&(p.mr_b.rkey ^ 1).to_be_bytes()); // RETH R_Key
    let [_, none] = p.b.qp_state_hint(&bad_key).expect("stage two");
    assert_eq!(none, proto::endpoint::MemoryRange::EMPTY);
    assert!(p.b.qp_index_hint(&f[0]).is_some_and(|r| r.len == 8));
    assert!(p.b.qp_state_hint(&other).is_none());
    assert!(p.b.qp_index_hint(&udp).is_none() && p.b.qp_state_hint(&udp).is_none());
    assert!(p.b.qp_index_hint(&[]).is_none() && p.b.qp_state_hint(&[]).is_none());
    assert_eq!(p.b.counters(), before, "looking counts nothing");
    p.deliver_b(&f);
    assert_eq!(p.tx_b().len(), 1, "the frame is handled as usual: its ACK");
    assert_eq!(p.b.counters().rcvd_pkts, before.rcvd_pkts + 1);
}
