//! Memory windows over seeded lossy links. B opens part of a region that
//! grants no remote right itself through a type 2 window bound by a
//! BIND_MW on its QP; A runs a stream of WRITEs and READs through the
//! window's R_Key, then a SEND with invalidate naming it, then one more
//! WRITE. Every request before the last completes, byte-exact, however
//! its packets were lost, reordered, duplicated or corrupted on A's link
//! (a retransmitted SEND with invalidate invalidates once: a duplicate is
//! only ACKed again); B's receive names the invalidated key; the last
//! WRITE finds the window closed and fails with a remote access error,
//! and nothing of it lands.
//!
//! A QP in error answers nothing (rxe the same), so the NAK must arrive:
//! B's link reorders and duplicates but does not lose.

use core::time::Duration;

use proto::rc::{
    Access, MwBind, MwType, QpState, RecvWr, SendOp, SendWr, Sge, WcStatus, WorkCompletion,
};
use proto::sim::Simulator;
use proto::time::Instant;

use crate::lossy_pair::{connect, impaired, pattern, Side, A, B};

const IOVA_A: u64 = 0x10_0000;
const IOVA_B: u64 = 0x20_0000;
const IOVA_W: u64 = 0x40_0000;
const REGION: usize = 64 * 1024;
/// The window: 32 KiB from 4 KiB into B's window region.
const WIN_AT: u64 = IOVA_W + 0x1000;
const WIN_LEN: u64 = 32 * 1024;
/// Bytes of each WRITE or READ: three packets at MTU 1024.
const SIZE: u32 = 3000;
const SLOT: u64 = 4096;
/// WRITEs and READs, alternating, message `m` at slot `m` of the window.
const MESSAGES: u64 = 8;
const SEEDS: std::ops::RangeInclusive<u64> = 1..=4;

/// Every completion of `node` on `cq`, appended to `out`.
fn poll(sim: &mut Simulator, node: usize, cq: u32, out: &mut Vec<WorkCompletion>) {
    let mut buf = [WorkCompletion::default(); 16];
    loop {
        let n = sim.endpoint(node).poll_cq(cq, &mut buf);
        if n == 0 {
            return;
        }
        out.extend_from_slice(&buf[..n]);
    }
}

#[test]
fn a_window_carries_writes_and_reads_until_a_send_with_invalidate_closes_it_under_loss() {
    let every = Access::ALL;
    for seed in SEEDS {
        let side = Side {
            pd: 0,
            access: every,
        };
        let mut p = connect(seed, false, 32, side, side);
        let sim = &mut p.sim;
        let ka = sim
            .endpoint(A)
            .reg_mr(Box::new(pattern(1, REGION)), IOVA_A, every)
            .unwrap();
        let kb = sim
            .endpoint(B)
            .reg_mr(Box::new(vec![0u8; REGION]), IOVA_B, every)
            .unwrap();
        let kw = sim
            .endpoint(B)
            .reg_mr(
                Box::new(pattern(2, REGION)),
                IOVA_W,
                Access::LOCAL_WRITE | Access::MW_BIND,
            )
            .unwrap();
        let mw = sim.endpoint(B).alloc_mw(0, MwType::Two).unwrap();
        let bind = MwBind {
            mw_rkey: mw,
            rkey: mw ^ 0x33,
            lkey: kw.lkey,
            addr: WIN_AT,
            len: WIN_LEN,
            access: Access::REMOTE_WRITE | Access::REMOTE_READ,
            zero_based: false,
        };
        sim.endpoint(B)
            .post_send(p.qb, SendWr::bind_mw(100, &bind))
            .unwrap();
        sim.endpoint(B)
            .post_recv(
                p.qb,
                RecvWr {
                    wr_id: 200,
                    sge: Sge {
                        lkey: kb.lkey,
                        addr: IOVA_B,
                        length: 4096,
                    },
                },
            )
            .unwrap();
        let (mut wa, mut wb) = (Vec::new(), Vec::new());
        let deadline = Instant::ZERO + Duration::from_secs(10);
        assert!(sim.run_until(deadline, |sim| {
            poll(sim, B, p.cq_b, &mut wb);
            !wb.is_empty()
        }));
        assert_eq!(
            (wb[0].wr_id, wb[0].status),
            (100, WcStatus::Success),
            "seed {seed}: the bind"
        );
        let rkey = sim.endpoint(B).mw(mw).unwrap().0;
        assert_eq!(rkey, (mw & !0xFF) | ((mw ^ 0x33) & 0xFF));

        // The stream: WRITE A's slot m to the window's slot m, or READ the
        // window's slot m into A's slot m.
        for m in 0..MESSAGES {
            let op = if m % 2 == 0 {
                SendOp::Write
            } else {
                SendOp::Read
            };
            let mut wr = SendWr::new(
                m,
                op,
                Sge {
                    lkey: ka.lkey,
                    addr: IOVA_A + m * SLOT,
                    length: SIZE,
                },
            );
            wr.remote_addr = WIN_AT + m * SLOT;
            wr.rkey = rkey;
            sim.endpoint(A).post_send(p.qa, wr).unwrap();
        }
        let mut inv = SendWr::new(
            MESSAGES,
            SendOp::SendWithInv,
            Sge {
                lkey: ka.lkey,
                addr: IOVA_A,
                length: 64,
            },
        );
        inv.imm = rkey;
        sim.endpoint(A).post_send(p.qa, inv).unwrap();
        let done = sim.run_until(deadline, |sim| {
            poll(sim, A, p.cq_a, &mut wa);
            poll(sim, B, p.cq_b, &mut wb);
            wa.len() == MESSAGES as usize + 1 && wb.len() == 2
        });
        assert!(done, "seed {seed}: A {wa:?} B {wb:?}");
        assert!(
            wa.iter().all(|w| w.status == WcStatus::Success),
            "seed {seed}: {wa:?}"
        );
        let r = wb[1];
        assert_eq!(
            (r.wr_id, r.status, r.byte_len, r.invalidated_rkey),
            (200, WcStatus::Success, 64, Some(rkey)),
            "seed {seed}: the receive names the invalidated key"
        );

        // After the window closed: one more WRITE, refused.
        let mut late = SendWr::new(
            99,
            SendOp::Write,
            Sge {
                lkey: ka.lkey,
                addr: IOVA_A + 0x8000,
                length: 8,
            },
        );
        late.remote_addr = WIN_AT + 0x7000;
        late.rkey = rkey;
        sim.endpoint(A).post_send(p.qa, late).unwrap();
        wa.clear();
        let refused = sim.run_until(deadline, |sim| {
            poll(sim, A, p.cq_a, &mut wa);
            !wa.is_empty()
        });
        assert!(refused, "seed {seed}");
        assert_eq!(
            (wa[0].wr_id, wa[0].status),
            (99, WcStatus::RemoteAccessError),
            "seed {seed}"
        );
        while sim.now() < deadline && sim.step() {}
        assert_eq!(sim.endpoint(B).qp_state(p.qb), Some(QpState::Error));

        // Every byte: the window got A's WRITEs, A got the window's READs,
        // nothing else moved.
        let mut read = |node, lkey, iova| {
            let mut v = vec![0u8; REGION];
            sim.endpoint(node).mr_read(lkey, iova, &mut v).unwrap();
            v
        };
        let (got_a, got_w) = (read(A, ka.lkey, IOVA_A), read(B, kw.lkey, IOVA_W));
        let (mut want_a, mut want_w) = (pattern(1, REGION), pattern(2, REGION));
        let off = (WIN_AT - IOVA_W) as usize;
        for m in 0..MESSAGES as usize {
            let (a, w, n) = (m * SLOT as usize, off + m * SLOT as usize, SIZE as usize);
            if m % 2 == 0 {
                want_w[w..w + n].copy_from_slice(&pattern(1, REGION)[a..a + n]);
            } else {
                want_a[a..a + n].copy_from_slice(&pattern(2, REGION)[w..w + n]);
            }
        }
        assert!(got_a == want_a, "seed {seed}: A's region");
        assert!(got_w == want_w, "seed {seed}: the window's region");
        assert_eq!(
            read(B, kb.lkey, IOVA_B)[..64],
            pattern(1, REGION)[..64],
            "seed {seed}: the SEND's bytes"
        );
        assert!(impaired(&p.sim, A) > 0, "seed {seed}: A's link lost frames");
    }
}
