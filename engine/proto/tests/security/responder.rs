//! Attacks on the responder's memory: guessing an R_Key (ReDMArk's key
//! guessing), and replaying old READ and atomic requests to make the
//! responder send or execute them again (rxe answers duplicates only from
//! its responder resources, `max_dest_rd_atomic` of them).

use proto::endpoint::ConnectOptions;
use proto::rc::{QpState, SendOp, WcStatus};
use proto::wire::Opcode;

use crate::support::{
    opcode, opts, psn, rdma_wr, read_wr, rewrite, write_wr, Pair, IOVA_A, IOVA_B,
};

#[test]
fn a_wrong_r_key_is_refused_writes_nothing_and_ends_the_qp() {
    for delta in [1u32, 0x100, 0x8000_0000] {
        let mut p = Pair::default_pair();
        p.a.mr_write(p.mr_a.lkey, IOVA_A, &[5u8; 64]).unwrap();
        let mut wr = write_wr(&p, 1, 64, 0);
        wr.rkey = p.mr_b.rkey ^ delta;
        p.a.post_send(p.qa, wr).unwrap();
        p.settle();
        assert_eq!(p.read_b(IOVA_B, 64), vec![0u8; 64]);
        assert_eq!(p.b.counters().naks_sent, 1);
        assert_eq!(p.b.qp_state(p.qb), Some(QpState::Error));
        let wc = p.wcs_a();
        assert_eq!(wc[0].status, WcStatus::RemoteAccessError);
    }
}

/// The R_Keys the old scheme (`index << 8 | generation`) gives the first
/// regions of a device, and the L_Key.
fn predictable_keys() -> Vec<u32> {
    (1u32..16)
        .flat_map(|index| (0u32..256).map(move |g| index << 8 | g))
        .chain(0..256)
        .collect()
}

#[test]
fn r_keys_of_a_fresh_device_are_not_guessable() {
    // Fresh pairs: the first region of each side. A guesser who knows the
    // allocation scheme tries the first keys it would hand out.
    let guesses = predictable_keys();
    let mut seen = Vec::new();
    // Each fresh device draws its own secret (the engine's from the OS
    // CSPRNG); here sixteen distinct ones.
    let fresh = |i: u64| Pair::seeded(opts(), opts(), [i, !i], [i ^ 0x5eed, i.rotate_left(17)]);
    for i in 0..16u64 {
        let p = fresh(i);
        assert_ne!(p.mr_b.rkey, p.mr_b.lkey, "L_Key and R_Key differ");
        assert!(!guesses.contains(&p.mr_b.rkey), "{:#x}", p.mr_b.rkey);
        assert!(!seen.contains(&p.mr_b.rkey), "keys repeat across devices");
        seen.push(p.mr_b.rkey);
    }
    // Over the wire: the usual first keys land nowhere on a fresh device.
    for (i, guess) in [0x0000_0001, 0x0000_0100, 0x0000_0101, 0x0000_0000]
        .into_iter()
        .enumerate()
    {
        let mut p = fresh(100 + i as u64);
        p.a.mr_write(p.mr_a.lkey, IOVA_A, &[5u8; 64]).unwrap();
        let mut wr = write_wr(&p, 1, 64, 0);
        wr.rkey = guess;
        p.a.post_send(p.qa, wr).unwrap();
        p.settle();
        assert_eq!(p.read_b(IOVA_B, 64), vec![0u8; 64], "key {guess:#x}");
    }
}

/// B's responder keeps `rd` responder resources.
fn pair_with_resources(rd: u8) -> Pair {
    let b = ConnectOptions {
        max_dest_rd_atomic: rd,
        ..opts()
    };
    Pair::new(opts(), b)
}

/// A's READ `wr_id` of 4 KiB at `off`, run to completion; returns the
/// request frame.
fn read_once(p: &mut Pair, wr_id: u64, off: u64) -> Vec<u8> {
    p.a.post_send(p.qa, read_wr(p, wr_id, 4096, off)).unwrap();
    let req = p.tx_a();
    assert_eq!(opcode(&req[0]), Opcode::ReadRequest);
    p.deliver_b(&req);
    p.settle();
    assert_eq!(p.wcs_a()[0].status, WcStatus::Success);
    req[0].clone()
}

#[test]
fn an_old_read_replayed_outside_the_responder_resources_is_dropped() {
    let mut p = pair_with_resources(2);
    let pattern: Vec<u8> = (0..16384u32).map(|i| (i % 253) as u8).collect();
    p.b.mr_write(p.mr_b.lkey, IOVA_B, &pattern).unwrap();
    let first = read_once(&mut p, 1, 0);
    let _ = read_once(&mut p, 2, 4096);
    let third = read_once(&mut p, 3, 8192);
    let a_before = p.read_a(IOVA_A, 16384);
    let sent = p.b.counters().sent_pkts;

    // READ 1 is no longer among B's two resources: dropped, nothing sent.
    p.deliver_b(std::slice::from_ref(&first));
    assert!(p.tx_b().is_empty());
    assert_eq!(p.b.counters().dropped_duplicate_rd_atomic, 1);
    // An old PSN with a READ it never was (same key, 64 KiB), and READ 3's
    // PSN asking for more than READ 3 read, or another key.
    let big = rewrite(&third, |h| h.reth.as_mut().unwrap().dma_len = 65536);
    let shifted = rewrite(&third, |h| h.reth.as_mut().unwrap().va += 4096);
    let other_key = rewrite(&third, |h| h.reth.as_mut().unwrap().rkey ^= 1);
    let older = rewrite(&first, |h| h.bth.psn = (h.bth.psn + 0xFF_F000) & 0xFF_FFFF);
    p.deliver_b(&[big, shifted, other_key, older]);
    assert!(p.tx_b().is_empty());
    assert_eq!(p.b.counters().dropped_duplicate_rd_atomic, 5);
    assert_eq!(p.b.counters().sent_pkts, sent);

    // READ 3, still a resource, is answered again (rxe's rule); A drops
    // the answers as duplicates and its memory does not change.
    p.deliver_b(&[third]);
    let again = p.tx_b();
    assert_eq!(again.len(), 4);
    p.deliver_a(&again);
    assert_eq!(p.a.counters().duplicate_response, 4);
    assert_eq!(p.read_a(IOVA_A, 16384), a_before);
    assert!(p.wcs_a().is_empty());
    assert_eq!(p.read_b(IOVA_B, 16384), pattern);
}

#[test]
fn an_old_atomic_replayed_outside_the_responder_resources_is_not_executed() {
    let mut p = pair_with_resources(1);
    p.b.mr_write(p.mr_b.lkey, IOVA_B + 256, &10u64.to_le_bytes())
        .unwrap();
    let mut fa = rdma_wr(&p, 1, SendOp::FetchAdd, 8, 256);
    fa.compare_add = 5;
    p.a.post_send(p.qa, fa).unwrap();
    let atomic = p.tx_a();
    p.deliver_b(&atomic);
    p.settle();
    assert_eq!(p.read_b(IOVA_B + 256, 8), 15u64.to_le_bytes());
    // Still the one resource: replayed from the saved value, not executed.
    p.deliver_b(&atomic);
    let replay = p.tx_b();
    assert_eq!(replay.len(), 1);
    assert_eq!(opcode(&replay[0]), Opcode::AtomicAcknowledge);
    assert_eq!(p.read_b(IOVA_B + 256, 8), 15u64.to_le_bytes());
    // A READ takes the resource; the atomic again is dropped.
    let _ = read_once(&mut p, 2, 0);
    p.deliver_b(&atomic);
    assert!(p.tx_b().is_empty());
    assert_eq!(p.b.counters().dropped_duplicate_rd_atomic, 1);
    assert_eq!(p.read_b(IOVA_B + 256, 8), 15u64.to_le_bytes());
    assert_eq!(psn(&atomic[0]), psn(&replay[0]));
}
