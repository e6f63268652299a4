//! Protection domains over seeded lossy links. A's QP and region are in
//! one PD and B's in another (each endpoint numbers its own); each side
//! also has a region in a PD its QP is not in. A runs a stream of every
//! kind of request; one of them, message `K`, may name a key of the other
//! PD: B's R_Key (NAK remote access error), a receive buffer of B (the
//! receive fails with a local protection error, NAK remote operational
//! error) or A's own buffer (a local protection error). Exactly that
//! request fails with its status, every one before it completes, every
//! one after it is flushed, and no byte moves where it should not,
//! however the requests were lost, reordered, duplicated or corrupted on
//! the way. With every key in its QP's PD, everything completes,
//! byte-exact, under loss both ways.
//!
//! A QP in error answers nothing (rxe the same), so a NAK must arrive:
//! in the runs where B refuses, B's link reorders and duplicates but does
//! not lose.

use core::time::Duration;

use proto::rc::{Access, MrKeys, QpState, RecvWr, SendOp, SendWr, Sge, WcStatus};
use proto::time::Instant;

use crate::lossy_pair::{connect, impaired, pattern, poll, Side, A, B};
const MESSAGES: u64 = 8;
/// The message that may name a key of the other PD.
const K: u64 = 3;
/// Bytes of a SEND, WRITE or READ: three packets at MTU 1024.
const SIZE: u32 = 3000;
const SLOT: u64 = 4096;
const IOVA_A: u64 = 0x10_0000;
const IOVA_B: u64 = 0x20_0000;
/// Where each side's region of the other PD starts.
const IOVA_OTHER: u64 = 0x80_0000;
const REGION: usize = (SLOT * MESSAGES) as usize;
const SEEDS: std::ops::RangeInclusive<u64> = 1..=4;
/// The PDs: A's QP and region, B's, and the one neither QP is in.
const PD_A: u32 = 7;
const PD_B: u32 = 0x5EED;
const PD_OTHER: u32 = 8;
/// The stream's operations, message `m` doing `CYCLE[m % 6]`.
const CYCLE: [SendOp; 6] = [
    SendOp::Send,
    SendOp::Write,
    SendOp::WriteWithImm,
    SendOp::Read,
    SendOp::FetchAdd,
    SendOp::CompareSwap,
];

/// Which key of message `K` is of the other PD.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mismatch {
    /// Every key is in its QP's PD.
    None,
    /// The R_Key it names is of B's region of the other PD.
    RemoteKey,
    /// Its own buffer is A's region of the other PD.
    LocalKey,
    /// The receive it lands in is in B's region of the other PD.
    ReceiveKey,
}

/// A region's initial bytes (`side` 1, 2: A's, B's; 3, 4: their regions
/// of the other PD).
fn initial(side: u8) -> Vec<u8> {
    pattern(side, REGION)
}

/// Message `m`'s 8-byte word in B's initial region (what an atomic sees).
fn word(m: u64) -> u64 {
    let at = (m * SLOT) as usize;
    u64::from_le_bytes(initial(2)[at..at + 8].try_into().unwrap())
}

/// The regions as message `m`'s `op` leaves them when it completes.
fn apply(op: SendOp, m: u64, a: &mut [u8], b: &mut [u8]) {
    let at = (m * SLOT) as usize;
    let n = SIZE as usize;
    match op {
        SendOp::Read => a[at..at + n].copy_from_slice(&initial(2)[at..at + n]),
        SendOp::FetchAdd | SendOp::CompareSwap => {
            a[at..at + 8].copy_from_slice(&word(m).to_le_bytes());
            let new = if op == SendOp::FetchAdd {
                word(m).wrapping_add(1)
            } else {
                !word(m)
            };
            b[at..at + 8].copy_from_slice(&new.to_le_bytes());
        }
        _ => b[at..at + n].copy_from_slice(&initial(1)[at..at + n]),
    }
}

/// Whether `op` consumes a receive at B.
fn receives(op: SendOp) -> bool {
    matches!(op, SendOp::Send | SendOp::WriteWithImm)
}

struct Outcome {
    /// A's completions, `(wr_id, status)`, in the order they came.
    a: Vec<(u64, WcStatus)>,
    /// B's receive completions.
    b: Vec<(u64, WcStatus)>,
    /// A's, B's, A's other and B's other region after the run.
    regions: [Vec<u8>; 4],
    a_state: Option<QpState>,
    b_state: Option<QpState>,
    /// Frames the links lost or corrupted (A's link, B's link).
    impaired: (u64, u64),
}

/// The run's operations: the cycle, message `K` doing `k_op`.
fn ops(k_op: SendOp) -> Vec<SendOp> {
    (0..MESSAGES)
        .map(|m| {
            if m == K {
                k_op
            } else {
                CYCLE[(m % 6) as usize]
            }
        })
        .collect()
}

/// `MESSAGES` requests from A to B, message `m` doing `ops[m]` on slot
/// `m` of both regions, message `K` naming the key `mismatch` says. Runs
/// until A has every completion and B every receive's it will have, then
/// until the network is quiet.
fn run(ops: &[SendOp], mismatch: Mismatch, seed: u64) -> Outcome {
    let b_lossy = matches!(mismatch, Mismatch::None | Mismatch::LocalKey);
    let remote = Access::REMOTE_WRITE | Access::REMOTE_READ | Access::REMOTE_ATOMIC;
    let pair = connect(
        seed,
        b_lossy,
        MESSAGES as u32,
        Side {
            pd: PD_A,
            access: remote,
        },
        Side {
            pd: PD_B,
            access: remote,
        },
    );
    let (mut sim, qa, qb, cq_a, cq_b) = (pair.sim, pair.qa, pair.qb, pair.cq_a, pair.cq_b);
    let mut reg = |node, pd, side, iova| {
        sim.endpoint(node)
            .reg_mr_in(pd, Box::new(initial(side)), iova, Access::ALL)
            .unwrap()
    };
    // Each side's region in its QP's PD, and one in the other PD.
    let (ka, kb) = (reg(A, PD_A, 1, IOVA_A), reg(B, PD_B, 2, IOVA_B));
    let ka_other = reg(A, PD_OTHER, 3, IOVA_OTHER);
    let kb_other = reg(B, PD_OTHER, 4, IOVA_OTHER);
    let at = |m: u64| m * SLOT;
    for (m, &op) in (0..).zip(ops) {
        if receives(op) {
            let (lkey, addr) = if mismatch == Mismatch::ReceiveKey && m == K {
                (kb_other.lkey, IOVA_OTHER + at(m))
            } else {
                (kb.lkey, IOVA_B + at(m))
            };
            let sge = Sge {
                lkey,
                addr,
                length: SIZE,
            };
            sim.endpoint(B)
                .post_recv(qb, RecvWr { wr_id: m, sge })
                .unwrap();
        }
        let (lkey, base) = if mismatch == Mismatch::LocalKey && m == K {
            (ka_other.lkey, IOVA_OTHER)
        } else {
            (ka.lkey, IOVA_A)
        };
        let local = Sge {
            lkey,
            addr: base + at(m),
            length: if op.is_atomic() { 8 } else { SIZE },
        };
        let mut wr = SendWr::new(m, op, local);
        (wr.rkey, wr.remote_addr) = if mismatch == Mismatch::RemoteKey && m == K {
            (kb_other.rkey, IOVA_OTHER + at(m))
        } else {
            (kb.rkey, IOVA_B + at(m))
        };
        wr.imm = m as u32;
        // FETCH_ADD adds 1; COMPARE_SWAP matches the word and swaps it.
        wr.compare_add = if op == SendOp::FetchAdd { 1 } else { word(m) };
        wr.swap = !word(m);
        // The posts check key, range and rights, not the PD.
        sim.endpoint(A).post_send(qa, wr).unwrap();
    }
    let posted_receives = ops.iter().filter(|&&op| receives(op)).count();
    let want_b = match mismatch {
        // B stays connected: the receives after K stay posted.
        Mismatch::LocalKey => ops[..K as usize].iter().filter(|&&o| receives(o)).count(),
        _ => posted_receives,
    };
    let (mut wa, mut wb) = (Vec::new(), Vec::new());
    let deadline = Instant::ZERO + Duration::from_secs(10);
    let done = sim.run_until(deadline, |sim| {
        poll(sim, A, cq_a, &mut wa);
        poll(sim, B, cq_b, &mut wb);
        wa.len() == MESSAGES as usize && wb.len() == want_b
    });
    assert!(done, "{mismatch:?} {ops:?}, seed {seed}: A {wa:?} B {wb:?}");
    // Let what is still on the wire (retransmissions, duplicates) arrive.
    while sim.now() < deadline && sim.step() {}
    poll(&mut sim, A, cq_a, &mut wa);
    poll(&mut sim, B, cq_b, &mut wb);
    let mut read = |node, k: MrKeys, iova| {
        let mut v = vec![0u8; REGION];
        sim.endpoint(node).mr_read(k.lkey, iova, &mut v).unwrap();
        v
    };
    let regions = [
        read(A, ka, IOVA_A),
        read(B, kb, IOVA_B),
        read(A, ka_other, IOVA_OTHER),
        read(B, kb_other, IOVA_OTHER),
    ];
    Outcome {
        a: wa,
        b: wb,
        regions,
        a_state: sim.endpoint(A).qp_state(qa),
        b_state: sim.endpoint(B).qp_state(qb),
        impaired: (impaired(&sim, A), impaired(&sim, B)),
    }
}

#[test]
fn keys_of_the_qps_own_pd_complete_everything_byte_exact_under_loss() {
    let mut impaired = (0, 0);
    for k_op in CYCLE {
        for seed in SEEDS {
            let ops = ops(k_op);
            let what = format!("{ops:?}, seed {seed}");
            let o = run(&ops, Mismatch::None, seed);
            let ok: Vec<_> = (0..MESSAGES).map(|m| (m, WcStatus::Success)).collect();
            assert_eq!(o.a, ok, "{what}");
            let recv_ok: Vec<_> = (0..MESSAGES)
                .filter(|&m| receives(ops[m as usize]))
                .map(|m| (m, WcStatus::Success))
                .collect();
            assert_eq!(o.b, recv_ok, "{what}: B's receives");
            assert_eq!(
                (o.a_state, o.b_state),
                (Some(QpState::Rts), Some(QpState::Rts))
            );
            let (mut want_a, mut want_b) = (initial(1), initial(2));
            for (m, &op) in (0..).zip(&ops) {
                apply(op, m, &mut want_a, &mut want_b);
            }
            assert!(o.regions[0] == want_a, "{what}: A's region");
            assert!(o.regions[1] == want_b, "{what}: B's region");
            assert!(o.regions[2] == initial(3), "{what}: A's other region");
            assert!(o.regions[3] == initial(4), "{what}: B's other region");
            impaired.0 += o.impaired.0;
            impaired.1 += o.impaired.1;
        }
    }
    assert!(
        impaired.0 > 0 && impaired.1 > 0,
        "both links lost or corrupted frames: {impaired:?}"
    );
}

#[test]
fn a_key_of_another_pd_fails_exactly_its_request_under_loss() {
    let cases = [
        (
            Mismatch::RemoteKey,
            SendOp::Write,
            WcStatus::RemoteAccessError,
        ),
        (
            Mismatch::RemoteKey,
            SendOp::WriteWithImm,
            WcStatus::RemoteAccessError,
        ),
        (
            Mismatch::RemoteKey,
            SendOp::Read,
            WcStatus::RemoteAccessError,
        ),
        (
            Mismatch::RemoteKey,
            SendOp::FetchAdd,
            WcStatus::RemoteAccessError,
        ),
        (
            Mismatch::RemoteKey,
            SendOp::CompareSwap,
            WcStatus::RemoteAccessError,
        ),
        (
            Mismatch::ReceiveKey,
            SendOp::Send,
            WcStatus::RemoteOperationalError,
        ),
        // rxe_req.c `finish_packet`: `copy_data`'s `-EINVAL`.
        (
            Mismatch::LocalKey,
            SendOp::Send,
            WcStatus::LocalQpOperationError,
        ),
        // rxe_req.c `finish_packet`: `copy_data`'s `-EINVAL`.
        (
            Mismatch::LocalKey,
            SendOp::Write,
            WcStatus::LocalQpOperationError,
        ),
        // rxe_req.c `finish_packet`: `copy_data`'s `-EINVAL`.
        (
            Mismatch::LocalKey,
            SendOp::WriteWithImm,
            WcStatus::LocalQpOperationError,
        ),
        (
            Mismatch::LocalKey,
            SendOp::Read,
            WcStatus::LocalProtectionError,
        ),
        (
            Mismatch::LocalKey,
            SendOp::FetchAdd,
            WcStatus::LocalProtectionError,
        ),
        (
            Mismatch::LocalKey,
            SendOp::CompareSwap,
            WcStatus::LocalProtectionError,
        ),
    ];
    let mut impaired = 0;
    for (mismatch, k_op, status) in cases {
        for seed in SEEDS {
            let ops = ops(k_op);
            let what = format!("{mismatch:?} on {k_op:?}, seed {seed}");
            let o = run(&ops, mismatch, seed);
            // A: before K complete, K fails, after K flushed.
            let want_a: Vec<_> = (0..MESSAGES)
                .map(|m| match m.cmp(&K) {
                    core::cmp::Ordering::Less => (m, WcStatus::Success),
                    core::cmp::Ordering::Equal => (m, status),
                    core::cmp::Ordering::Greater => (m, WcStatus::Flushed),
                })
                .collect();
            assert_eq!(o.a, want_a, "{what}");
            assert_eq!(o.a_state, Some(QpState::Error), "{what}");
            // B: the receives before K complete; when B refused K, its
            // receive fails (receive key) or is flushed, as those after.
            let want_b: Vec<_> = (0..MESSAGES)
                .filter(|&m| receives(ops[m as usize]))
                .filter(|&m| m < K || mismatch != Mismatch::LocalKey)
                .map(|m| match m.cmp(&K) {
                    core::cmp::Ordering::Less => (m, WcStatus::Success),
                    // rxe_resp.c `RESPST_ERR_MALFORMED_WQE`.
                    core::cmp::Ordering::Equal if mismatch == Mismatch::ReceiveKey => {
                        (m, WcStatus::LocalQpOperationError)
                    }
                    _ => (m, WcStatus::Flushed),
                })
                .collect();
            assert_eq!(o.b, want_b, "{what}: B's receives");
            let b_state = if mismatch == Mismatch::LocalKey {
                QpState::Rts
            } else {
                QpState::Error
            };
            assert_eq!(o.b_state, Some(b_state), "{what}");
            // Bytes: every request before K ran; K moved nothing into a
            // region of its QP's side; after K nothing ran. Unless K's
            // own buffer failed only when its answer came (a READ or
            // atomic): B executed it (an atomic changed B's word) and the
            // requests after it may have run at B before A went to error.
            let (mut want_a, mut want_b) = (initial(1), initial(2));
            for (m, &op) in (0..K).zip(&ops) {
                apply(op, m, &mut want_a, &mut want_b);
            }
            let answered = mismatch == Mismatch::LocalKey && k_op.is_read_or_atomic();
            let k_slot = (K * SLOT) as usize;
            let (upto_a, upto_b) = if answered {
                (k_slot + SLOT as usize, k_slot)
            } else {
                (REGION, REGION)
            };
            assert!(
                o.regions[0][..upto_a] == want_a[..upto_a],
                "{what}: A's region"
            );
            assert!(
                o.regions[1][..upto_b] == want_b[..upto_b],
                "{what}: B's region"
            );
            assert!(o.regions[2] == initial(3), "{what}: A's other region");
            assert!(o.regions[3] == initial(4), "{what}: B's other region");
            if mismatch != Mismatch::LocalKey {
                assert_eq!(o.impaired.1, 0, "{what}: B's link loses nothing");
            }
            impaired += o.impaired.0;
        }
    }
    assert!(impaired > 0, "the runs lost or corrupted requests");
}
