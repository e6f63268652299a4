//! ATOMIC WRITE over seeded links that lose, reorder, duplicate and
//! corrupt both ways: every request completes, each word holds exactly
//! what its last ATOMIC WRITE stored, and no duplicate or retransmission
//! is ever applied a second time (rxe `duplicate_request` answers it from
//! the responder resource, `atomic_write_reply` returns before writing).
//!
//! "Never applied twice" is made observable: each round writes every
//! word [`PER_WORD`] times with different values, the rounds write the
//! same words again with new values, and B's application overwrites half
//! the words between rounds; a late duplicate (the links duplicate and
//! reorder) or a retransmission that wrote again would leave an older
//! value behind.

use core::time::Duration;

use proto::rc::{Access, SendWr, WcStatus};
use proto::time::Instant;

use crate::lossy_pair::{connect, impaired, pattern, poll, Side, A, B};

const WORDS: u64 = 6;
/// ATOMIC WRITEs to each word in one round.
const PER_WORD: u64 = 3;
const ROUNDS: u64 = 4;
const IOVA_B: u64 = 0x20_0000;
const REGION: usize = 4096;
const SEEDS: std::ops::RangeInclusive<u64> = 1..=24;

/// The 8 bytes the `k`th write of round `round` stores in word `w`.
fn value(round: u64, k: u64, w: u64, seed: u64) -> [u8; 8] {
    ((seed << 48) ^ (round << 32) ^ (k << 24) ^ (w << 8) ^ 0xA5).to_be_bytes()
}

/// Where word `w` is in B's region: 8-byte aligned, 64 bytes apart.
fn at(w: u64) -> u64 {
    IOVA_B + 64 * w
}

#[test]
fn atomic_writes_under_loss_complete_and_are_applied_exactly_once() {
    let (mut impaired_frames, mut duplicates) = (0, 0);
    for seed in SEEDS {
        let pair = connect(
            seed,
            true,
            (WORDS * PER_WORD) as u32,
            Side {
                pd: 0,
                access: Access::NONE,
            },
            Side {
                pd: 0,
                access: Access::REMOTE_WRITE,
            },
        );
        let (mut sim, qa, qb, cq_a) = (pair.sim, pair.qa, pair.qb, pair.cq_a);
        let initial = pattern(2, REGION);
        let kb = sim
            .endpoint(B)
            .reg_mr(Box::new(initial.clone()), IOVA_B, Access::ALL)
            .unwrap();
        let mut expected = initial.clone();
        let deadline = |sim: &proto::sim::Simulator| sim.now() + Duration::from_secs(5);
        for round in 0..ROUNDS {
            let n = WORDS * PER_WORD;
            for i in 0..n {
                let (k, w) = (i / WORDS, i % WORDS);
                let v = value(round, k, w, seed);
                let wr = SendWr::atomic_write(round * n + i, at(w), kb.rkey, v);
                sim.endpoint(A).post_send(qa, wr).unwrap();
            }
            let mut wa = Vec::new();
            let end = deadline(&sim);
            let done = sim.run_until(end, |sim| {
                poll(sim, A, cq_a, &mut wa);
                wa.len() == n as usize
            });
            assert!(done, "seed {seed} round {round}: {wa:?}");
            let want: Vec<_> = (0..n).map(|i| (round * n + i, WcStatus::Success)).collect();
            assert_eq!(wa, want, "seed {seed} round {round}");
            for w in 0..WORDS {
                let o = (at(w) - IOVA_B) as usize;
                expected[o..o + 8].copy_from_slice(&value(round, PER_WORD - 1, w, seed));
            }
            // Let every retransmission and duplicate of this round reach
            // B, then B's application overwrites half the words: a
            // duplicate applied later would show.
            let quiet = sim.now() + Duration::from_millis(50);
            while sim.now() < quiet && sim.step() {}
            let mut region = vec![0u8; REGION];
            sim.endpoint(B)
                .mr_read(kb.lkey, IOVA_B, &mut region)
                .unwrap();
            assert!(region == expected, "seed {seed} round {round}: B's bytes");
            for w in (0..WORDS).step_by(2) {
                let mine = [round as u8 ^ 0x3C; 8];
                sim.endpoint(B).mr_write(kb.lkey, at(w), &mine).unwrap();
                let o = (at(w) - IOVA_B) as usize;
                expected[o..o + 8].copy_from_slice(&mine);
            }
        }
        // Anything still on the wire arrives; nothing changes B's bytes.
        let end = Instant::ZERO + Duration::from_secs(60);
        while sim.now() < end && sim.step() {}
        let mut region = vec![0u8; REGION];
        sim.endpoint(B)
            .mr_read(kb.lkey, IOVA_B, &mut region)
            .unwrap();
        assert!(region == expected, "seed {seed}: B's bytes at the end");
        let c = sim.endpoint(B).qp_counters(qb).unwrap();
        duplicates += c.duplicate_request;
        impaired_frames += impaired(&sim, A) + impaired(&sim, B);
    }
    assert!(impaired_frames > 0, "the links lost or corrupted frames");
    assert!(duplicates > 0, "B saw duplicates (and wrote none of them)");
}
