//! Scatter/gather lists and inline data over seeded links that lose,
//! corrupt, reorder and duplicate: a stream of SENDs, WRITEs (with and
//! without immediate), READs and inline SENDs and WRITEs, each with a
//! random list of 1..=32 entries (lengths from 0, boundaries anywhere in
//! a packet) and, for the receives, a random receive list; every byte of
//! both regions checked against the flat model (`sgl_model`), however
//! packets were resent. And a list entry whose region goes away after
//! the post fails exactly its request.

use core::time::Duration;

use proto::rc::{
    Access, MrKeys, QpState, SendOp, SendWr, Sge, SgeCaps, WcStatus, MAX_INLINE_DATA, MAX_SGE,
};
use proto::time::Instant;

use crate::lossy_pair::{connect_with_caps, impaired, poll, Side, A, B};
use crate::sgl_model::{gather, pattern, place, scatter, split, Rand};

const MESSAGES: u64 = 24;
/// Bytes of each message's slot in either region.
const SLOT: u64 = 64 * 1024;
const REGION: usize = (SLOT * MESSAGES) as usize;
const IOVA_A: u64 = 0x10_0000;
const IOVA_B: u64 = 0x4000_0000;
const CAPS: SgeCaps = SgeCaps {
    max_send_sge: MAX_SGE,
    max_recv_sge: MAX_SGE,
    max_inline_data: MAX_INLINE_DATA,
};

/// One message of the stream.
struct Message {
    op: SendOp,
    /// Inline: the bytes; else `None` and `local` is the list.
    inline: Option<Vec<u8>>,
    local: Vec<Sge>,
    /// B's receive list (SEND, WRITE with immediate).
    recv: Option<Vec<Sge>>,
    remote_off: u64,
}

fn receives(op: SendOp) -> bool {
    matches!(
        op,
        SendOp::Send | SendOp::SendWithImm | SendOp::WriteWithImm
    )
}

/// Draw message `m` of seed `seed`'s stream, over the regions of keys `ka`
/// and `kb`.
fn draw(r: &mut Rand, m: u64, ka: MrKeys, kb: MrKeys) -> Message {
    let ops = [
        SendOp::Send,
        SendOp::SendWithImm,
        SendOp::Write,
        SendOp::WriteWithImm,
        SendOp::Read,
    ];
    let op = ops[r.below(ops.len() as u64) as usize];
    let inline = !matches!(op, SendOp::Read) && r.below(4) == 0;
    let total = if inline {
        r.below(u64::from(MAX_INLINE_DATA) + 1) as u32
    } else if r.below(3) == 0 {
        r.below(2048) as u32
    } else {
        r.below(16_000) as u32
    };
    let n = 1 + r.below(u64::from(MAX_SGE)) as usize;
    let mut c = m * SLOT;
    let lens = split(r, total, n);
    let local = place(r, ka.lkey, IOVA_A, &mut c, &lens);
    let inline = inline.then(|| pattern(m as u8 ^ 0xA5, total as usize));
    let recv = receives(op).then(|| {
        let mut c = m * SLOT;
        let room = if op == SendOp::WriteWithImm {
            0
        } else {
            total + r.below(64) as u32
        };
        if room == 0 && r.below(2) == 0 {
            return Vec::new();
        }
        let n = 1 + r.below(u64::from(MAX_SGE)) as usize;
        let lens = split(r, room, n);
        place(r, kb.lkey, IOVA_B, &mut c, &lens)
    });
    // The remote side of a WRITE or READ, in the second half of the slot.
    let remote_off = m * SLOT + SLOT / 2 + r.below(1024);
    Message {
        op,
        inline,
        local,
        recv,
        remote_off,
    }
}

/// The regions as the stream leaves them: A's and B's.
fn model(msgs: &[Message]) -> (Vec<u8>, Vec<u8>) {
    let (mut a, mut b) = (pattern(1, REGION), pattern(2, REGION));
    for m in msgs {
        let data = match &m.inline {
            Some(d) => d.clone(),
            None => gather(&a, IOVA_A, &m.local),
        };
        match m.op {
            SendOp::Send | SendOp::SendWithImm => {
                scatter(&mut b, IOVA_B, m.recv.as_ref().unwrap(), &data)
            }
            SendOp::Write | SendOp::WriteWithImm => {
                let at = m.remote_off as usize;
                b[at..at + data.len()].copy_from_slice(&data);
            }
            _ => {
                let at = m.remote_off as usize;
                let total: u32 = m.local.iter().map(|s| s.length).sum();
                let src = b[at..at + total as usize].to_vec();
                scatter(&mut a, IOVA_A, &m.local, &src);
            }
        }
    }
    (a, b)
}

#[test]
fn random_lists_and_inline_data_move_byte_exact_under_loss() {
    let mut impaired_total = (0, 0);
    for seed in 1..=6u64 {
        let remote = Access::REMOTE_WRITE | Access::REMOTE_READ;
        let side = Side {
            pd: 0,
            access: remote,
        };
        let pair = connect_with_caps(seed, true, MESSAGES as u32, side, side, CAPS);
        let (mut sim, qa, qb, cq_a, cq_b) = (pair.sim, pair.qa, pair.qb, pair.cq_a, pair.cq_b);
        let ka = sim
            .endpoint(A)
            .reg_mr(Box::new(pattern(1, REGION)), IOVA_A, Access::ALL)
            .unwrap();
        let kb = sim
            .endpoint(B)
            .reg_mr(Box::new(pattern(2, REGION)), IOVA_B, Access::ALL)
            .unwrap();
        let mut r = Rand(seed * 0x1234_5678);
        let msgs: Vec<Message> = (0..MESSAGES).map(|m| draw(&mut r, m, ka, kb)).collect();
        for (m, msg) in (0..).zip(&msgs) {
            if let Some(recv) = &msg.recv {
                sim.endpoint(B).post_recv_sgl(qb, m, recv).unwrap();
            }
            let mut wr = SendWr::new(m, msg.op, Sge::default());
            wr.remote_addr = IOVA_B + msg.remote_off;
            wr.rkey = kb.rkey;
            wr.imm = m as u32;
            match &msg.inline {
                Some(d) => sim.endpoint(A).post_send_inline(qa, wr, d).unwrap(),
                None => sim.endpoint(A).post_send_sgl(qa, wr, &msg.local).unwrap(),
            }
        }
        let want_recvs = msgs.iter().filter(|m| m.recv.is_some()).count();
        let (mut wa, mut wb) = (Vec::new(), Vec::new());
        let deadline = Instant::ZERO + Duration::from_secs(10);
        let done = sim.run_until(deadline, |sim| {
            poll(sim, A, cq_a, &mut wa);
            poll(sim, B, cq_b, &mut wb);
            wa.len() == MESSAGES as usize && wb.len() == want_recvs
        });
        assert!(done, "seed {seed}: A {wa:?} B {wb:?}");
        while sim.now() < deadline && sim.step() {}
        poll(&mut sim, A, cq_a, &mut wa);
        poll(&mut sim, B, cq_b, &mut wb);
        let ok: Vec<_> = (0..MESSAGES).map(|m| (m, WcStatus::Success)).collect();
        assert_eq!(wa, ok, "seed {seed}");
        let recv_ok: Vec<_> = (0..MESSAGES)
            .filter(|&m| msgs[m as usize].recv.is_some())
            .map(|m| (m, WcStatus::Success))
            .collect();
        assert_eq!(wb, recv_ok, "seed {seed}: each receive completes once");
        let (want_a, want_b) = model(&msgs);
        let mut got = vec![0u8; REGION];
        sim.endpoint(A).mr_read(ka.lkey, IOVA_A, &mut got).unwrap();
        assert!(got == want_a, "seed {seed}: A's region");
        sim.endpoint(B).mr_read(kb.lkey, IOVA_B, &mut got).unwrap();
        assert!(got == want_b, "seed {seed}: B's region");
        impaired_total.0 += impaired(&sim, A);
        impaired_total.1 += impaired(&sim, B);
    }
    assert!(
        impaired_total.0 > 0 && impaired_total.1 > 0,
        "both links lost or corrupted frames: {impaired_total:?}"
    );
}

#[test]
fn an_entry_whose_region_went_away_fails_exactly_its_request_under_loss() {
    const K: u64 = 3;
    for op in [SendOp::Send, SendOp::Write, SendOp::Read] {
        for seed in 1..=4u64 {
            let remote = Access::REMOTE_WRITE | Access::REMOTE_READ;
            let side = Side {
                pd: 0,
                access: remote,
            };
            // B's link does not lose: A's NAK-free failure needs nothing
            // from B, but the ACKs of the requests before K must arrive.
            let pair = connect_with_caps(seed, false, 8, side, side, CAPS);
            let (mut sim, qa, qb, cq_a, cq_b) = (pair.sim, pair.qa, pair.qb, pair.cq_a, pair.cq_b);
            let ka = sim
                .endpoint(A)
                .reg_mr(Box::new(pattern(1, REGION)), IOVA_A, Access::ALL)
                .unwrap();
            let kb = sim
                .endpoint(B)
                .reg_mr(Box::new(pattern(2, REGION)), IOVA_B, Access::ALL)
                .unwrap();
            let gone = sim
                .endpoint(A)
                .reg_mr(Box::new(vec![0x11u8; 8192]), 0x900_0000, Access::ALL)
                .unwrap();
            for m in 0..6u64 {
                let at = m * SLOT;
                let mut list = vec![
                    Sge {
                        lkey: ka.lkey,
                        addr: IOVA_A + at,
                        length: 2500,
                    },
                    Sge {
                        lkey: ka.lkey,
                        addr: IOVA_A + at + 4000,
                        length: 2500,
                    },
                ];
                if m == K {
                    list[1] = Sge {
                        lkey: gone.lkey,
                        addr: 0x900_0000,
                        length: 2500,
                    };
                }
                if op == SendOp::Send {
                    let recv = [Sge {
                        lkey: kb.lkey,
                        addr: IOVA_B + at,
                        length: 5000,
                    }];
                    sim.endpoint(B).post_recv_sgl(qb, m, &recv).unwrap();
                }
                let mut wr = SendWr::new(m, op, Sge::default());
                wr.remote_addr = IOVA_B + at + SLOT / 2;
                wr.rkey = kb.rkey;
                sim.endpoint(A).post_send_sgl(qa, wr, &list).unwrap();
            }
            sim.endpoint(A).dereg_mr(gone.lkey).unwrap();
            let mut wa = Vec::new();
            let deadline = Instant::ZERO + Duration::from_secs(10);
            let done = sim.run_until(deadline, |sim| {
                poll(sim, A, cq_a, &mut wa);
                wa.len() == 6
            });
            assert!(done, "{op:?} seed {seed}: {wa:?}");
            let want: Vec<_> = (0..6u64)
                .map(|m| {
                    let s = match m {
                        m if m < K => WcStatus::Success,
                        // A READ's answer cannot be placed (rxe_comp.c
                        // `do_read`); a SEND's or WRITE's packet cannot be
                        // built (rxe_req.c `finish_packet`).
                        K if op == SendOp::Read => WcStatus::LocalProtectionError,
                        K => WcStatus::LocalQpOperationError,
                        _ => WcStatus::Flushed,
                    };
                    (m, s)
                })
                .collect();
            assert_eq!(wa, want, "{op:?} seed {seed}");
            assert_eq!(sim.endpoint(A).qp_state(qa), Some(QpState::Error));
            let mut wb = Vec::new();
            while sim.now() < deadline && sim.step() {}
            poll(&mut sim, B, cq_b, &mut wb);
            if op == SendOp::Send {
                // The receives before K completed, each once.
                let got: Vec<_> = wb.iter().filter(|w| w.1 == WcStatus::Success).collect();
                assert_eq!(got.len(), K as usize, "{op:?} seed {seed}: {wb:?}");
            }
        }
    }
}
