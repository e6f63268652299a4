//! The responder QP's access flags (`ConnectOptions::access`, verbs
//! `qp_access_flags`) over seeded lossy links: when B's QP lacks the
//! right an operation needs, A's first request completes
//! `RemoteAccessError` and every other one `Flushed`, B counts one
//! refusal and no byte moves, however the requests were lost, reordered,
//! duplicated or corrupted on the way; with the right granted (and no
//! other), every message completes, byte-exact, under loss both ways.
//!
//! A QP in error answers nothing (rxe the same), so the refusal's one NAK
//! must arrive: in the refused runs B's link reorders and duplicates but
//! does not lose; A's loses, reorders, duplicates and corrupts.

use core::time::Duration;

use proto::rc::{Access, QpState, RecvWr, SendOp, SendWr, Sge, WcStatus};
use proto::time::Instant;

use crate::lossy_pair::{connect, impaired, pattern, poll, Side, A, B};
const MESSAGES: u64 = 8;
/// Bytes of a WRITE or READ: three packets at MTU 1024.
const SIZE: u32 = 3000;
const SLOT: u64 = 4096;
const IOVA_A: u64 = 0x10_0000;
const IOVA_B: u64 = 0x20_0000;
const REGION: usize = (SLOT * MESSAGES) as usize;
const SEEDS: std::ops::RangeInclusive<u64> = 1..=6;
const OPS: [SendOp; 5] = [
    SendOp::Write,
    SendOp::WriteWithImm,
    SendOp::Read,
    SendOp::FetchAdd,
    SendOp::CompareSwap,
];

/// The right B's QP must grant for `op`.
fn needs(op: SendOp) -> Access {
    match op {
        SendOp::Read => Access::REMOTE_READ,
        SendOp::FetchAdd | SendOp::CompareSwap => Access::REMOTE_ATOMIC,
        _ => Access::REMOTE_WRITE,
    }
}

/// A's initial bytes, and B's: what each region holds before the run.
fn initial(side: u8) -> Vec<u8> {
    pattern(side, REGION)
}

/// Message `m`'s 8-byte word in B's initial region (what an atomic sees).
fn word(m: u64) -> u64 {
    let b = initial(2);
    let at = (m * SLOT) as usize;
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

struct Outcome {
    /// A's completions, `(wr_id, status)`, in the order they came.
    a: Vec<(u64, WcStatus)>,
    /// B's completions (receives of WRITEs with immediate).
    b: Vec<(u64, WcStatus)>,
    region_a: Vec<u8>,
    region_b: Vec<u8>,
    b_state: Option<QpState>,
    b_refused: u64,
    /// Frames the links lost or corrupted (A's link, B's link).
    impaired: (u64, u64),
}

/// `MESSAGES` of `op` from A to B, B's QP granting `grant`; message `m`
/// works on slot `m` of both regions. Runs until A has every completion
/// (and B every receive's, for WRITE with immediate), then until the
/// network is quiet.
fn run(op: SendOp, grant: Access, seed: u64, b_lossy: bool) -> Outcome {
    let pair = connect(
        seed,
        b_lossy,
        MESSAGES as u32,
        Side {
            pd: 0,
            access: Access::NONE,
        },
        Side {
            pd: 0,
            access: grant,
        },
    );
    let (mut sim, qa, qb, cq_a, cq_b) = (pair.sim, pair.qa, pair.qb, pair.cq_a, pair.cq_b);
    // The regions grant every right: only the QP's flags decide.
    let ka = sim
        .endpoint(A)
        .reg_mr(Box::new(initial(1)), IOVA_A, Access::ALL)
        .unwrap();
    let kb = sim
        .endpoint(B)
        .reg_mr(Box::new(initial(2)), IOVA_B, Access::ALL)
        .unwrap();
    for m in 0..MESSAGES {
        if op == SendOp::WriteWithImm {
            let sge = Sge {
                lkey: kb.lkey,
                addr: IOVA_B,
                length: 0,
            };
            sim.endpoint(B)
                .post_recv(qb, RecvWr { wr_id: m, sge })
                .unwrap();
        }
        let atomic = op.is_atomic();
        let local = Sge {
            lkey: ka.lkey,
            addr: IOVA_A + m * SLOT,
            length: if atomic { 8 } else { SIZE },
        };
        let mut wr = SendWr::new(m, op, local);
        wr.remote_addr = IOVA_B + m * SLOT;
        wr.rkey = kb.rkey;
        wr.imm = m as u32;
        // FETCH_ADD adds 1; COMPARE_SWAP matches the word and swaps it.
        wr.compare_add = if op == SendOp::FetchAdd { 1 } else { word(m) };
        wr.swap = !word(m);
        sim.endpoint(A).post_send(qa, wr).unwrap();
    }
    let (mut wa, mut wb) = (Vec::new(), Vec::new());
    let want_b = if op == SendOp::WriteWithImm {
        MESSAGES as usize
    } else {
        0
    };
    let deadline = Instant::ZERO + Duration::from_secs(10);
    let done = sim.run_until(deadline, |sim| {
        poll(sim, A, cq_a, &mut wa);
        poll(sim, B, cq_b, &mut wb);
        wa.len() == MESSAGES as usize && wb.len() == want_b
    });
    assert!(
        done,
        "{op:?} granting {grant:?}, seed {seed}: A {wa:?} B {wb:?}"
    );
    // Let the requests still on the wire (retransmissions, duplicates)
    // reach B too.
    while sim.now() < deadline && sim.step() {}
    poll(&mut sim, A, cq_a, &mut wa);
    poll(&mut sim, B, cq_b, &mut wb);
    let mut region_a = vec![0u8; REGION];
    let mut region_b = vec![0u8; REGION];
    sim.endpoint(A)
        .mr_read(ka.lkey, IOVA_A, &mut region_a)
        .unwrap();
    sim.endpoint(B)
        .mr_read(kb.lkey, IOVA_B, &mut region_b)
        .unwrap();
    Outcome {
        a: wa,
        b: wb,
        region_a,
        region_b,
        b_state: sim.endpoint(B).qp_state(qb),
        b_refused: sim.endpoint(B).counters().qp_access_violation,
        impaired: (impaired(&sim, A), impaired(&sim, B)),
    }
}

#[test]
fn a_qp_lacking_the_right_fails_the_requests_under_loss_and_moves_no_byte() {
    let mut impaired = 0;
    for op in OPS {
        // Every other right, not the one needed.
        let grant = [
            Access::REMOTE_WRITE,
            Access::REMOTE_READ,
            Access::REMOTE_ATOMIC,
        ]
        .into_iter()
        .filter(|&r| r != needs(op))
        .fold(Access::LOCAL_WRITE, |a, r| a | r);
        for seed in SEEDS {
            let what = format!("{op:?} granting {grant:?}, seed {seed}");
            let o = run(op, grant, seed, false);
            let mut want = vec![(0, WcStatus::RemoteAccessError)];
            want.extend((1..MESSAGES).map(|m| (m, WcStatus::Flushed)));
            assert_eq!(o.a, want, "{what}");
            let flushed: Vec<_> = (0..MESSAGES).map(|m| (m, WcStatus::Flushed)).collect();
            if op == SendOp::WriteWithImm {
                assert_eq!(o.b, flushed, "{what}: B's receives");
            } else {
                assert!(o.b.is_empty(), "{what}");
            }
            assert_eq!(o.b_state, Some(QpState::Error), "{what}");
            assert_eq!(o.b_refused, 1, "{what}");
            assert!(o.region_b == initial(2), "{what}: B's region changed");
            assert!(o.region_a == initial(1), "{what}: A's region changed");
            assert_eq!(o.impaired.1, 0, "{what}: B's link loses nothing");
            impaired += o.impaired.0;
        }
    }
    assert!(impaired > 0, "the runs lost or corrupted requests");
}

#[test]
fn a_qp_granting_only_the_right_completes_everything_byte_exact_under_loss() {
    let mut impaired = (0, 0);
    for op in OPS {
        for seed in SEEDS {
            let what = format!("{op:?} granting {:?}, seed {seed}", needs(op));
            let o = run(op, needs(op), seed, true);
            let ok: Vec<_> = (0..MESSAGES).map(|m| (m, WcStatus::Success)).collect();
            assert_eq!(o.a, ok, "{what}");
            if op == SendOp::WriteWithImm {
                assert_eq!(o.b, ok, "{what}: B's receives");
            }
            assert_eq!(o.b_state, Some(QpState::Rts), "{what}");
            assert_eq!(o.b_refused, 0, "{what}");
            let (mut want_a, mut want_b) = (initial(1), initial(2));
            for m in 0..MESSAGES {
                let at = (m * SLOT) as usize;
                match op {
                    SendOp::Read => {
                        let n = SIZE as usize;
                        want_a[at..at + n].copy_from_slice(&initial(2)[at..at + n]);
                    }
                    SendOp::FetchAdd | SendOp::CompareSwap => {
                        want_a[at..at + 8].copy_from_slice(&word(m).to_le_bytes());
                        let new = if op == SendOp::FetchAdd {
                            word(m).wrapping_add(1)
                        } else {
                            !word(m)
                        };
                        want_b[at..at + 8].copy_from_slice(&new.to_le_bytes());
                    }
                    _ => {
                        let n = SIZE as usize;
                        want_b[at..at + n].copy_from_slice(&initial(1)[at..at + n]);
                    }
                }
            }
            assert!(o.region_a == want_a, "{what}: A's region");
            assert!(o.region_b == want_b, "{what}: B's region");
            impaired.0 += o.impaired.0;
            impaired.1 += o.impaired.1;
        }
    }
    assert!(
        impaired.0 > 0 && impaired.1 > 0,
        "both links lost or corrupted frames: {impaired:?}"
    );
}
