//! RDMA WRITE and READ between the engine (`roce-xdp interop rdma-client`,
//! 10.99.0.2) and Linux Soft-RoCE (rxe, 10.99.0.11, running
//! `interop/peer/rdma_target`), captured on the bridge by `interop/run.sh`
//! (see interop/README.md, "RDMA WRITE and READ against rxe"):
//! `SIZES=" " LOSS_SIZES=" " RDMA_SIZES=4096 RDMA_LOSS_SIZES=16384
//! LOSS_RATE=0.1 ITERS=5`, i.e. WRITE 5 x 4096, WRITE 5 x 16384 with the
//! engine's XDP dropping 10 % of what it receives, then the same for READ.
//! The capture is taken before the engine's XDP, so dropped frames are in it.

use std::collections::BTreeMap;

use engine::oob::rdma_target::pattern;
use engine::wire::{Opcode, RoceFrame};

use crate::support::rdma_capture::{
    opcode_counts, psn_delta, roce_frames, src, ENGINE, PMTU, PSN_MASK, RXE,
};

fn frames() -> Vec<RoceFrame<'static>> {
    roce_frames("engine_rxe_write_read.pcap")
}

#[test]
fn every_frame_parses_with_correct_icrc_and_expected_opcodes() {
    let counts = opcode_counts(&frames());
    let expect: BTreeMap<([u8; 4], u8), usize> = [
        ((ENGINE, Opcode::WriteFirst as u8), 11),
        ((ENGINE, Opcode::WriteMiddle as u8), 94),
        ((ENGINE, Opcode::WriteLast as u8), 11),
        ((ENGINE, Opcode::ReadRequest as u8), 25),
        ((RXE, Opcode::ReadRespFirst as u8), 21),
        ((RXE, Opcode::ReadRespMiddle as u8), 250),
        ((RXE, Opcode::ReadRespLast as u8), 25),
        ((RXE, Opcode::Acknowledge as u8), 26),
    ]
    .into_iter()
    .collect();
    assert_eq!(counts, expect);
}

/// Every WRITE payload byte the engine sent is the pattern byte of the
/// target offset it is written to (the first WRITE of a run starts at the
/// target buffer's base; a retransmitted message restarts at WRITE_FIRST
/// with its RETH).
#[test]
fn engine_writes_carry_the_pattern_at_the_right_offsets() {
    let mut base: Option<(u32, u64)> = None; // (rxe QPN, buffer VA) of the run
    let mut cursor = 0u64;
    let mut checked = 0usize;
    for f in frames().iter().filter(|f| src(f) == ENGINE) {
        let h = &f.headers;
        match h.bth.opcode {
            Opcode::WriteFirst => {
                let reth = h.reth.expect("WRITE_FIRST carries a RETH");
                if base.map(|(q, _)| q) != Some(h.bth.dest_qp) {
                    base = Some((h.bth.dest_qp, reth.va));
                }
                cursor = reth.va - base.unwrap().1;
            }
            Opcode::WriteMiddle | Opcode::WriteLast => {}
            _ => continue,
        }
        for (i, &b) in f.payload.iter().enumerate() {
            assert_eq!(
                b,
                pattern(cursor + i as u64),
                "offset {}",
                cursor + i as u64
            );
        }
        cursor += f.payload.len() as u64;
        checked += f.payload.len();
    }
    // 5 x 4096 + 5 x 16384 + one retransmitted 16384-byte message.
    assert_eq!(checked, 5 * 4096 + 5 * 16384 + 16384);
}

/// READ go-back-N: each READ request the engine re-issued starts at a PSN
/// inside an earlier request's range with its RETH advanced to match
/// (VA + k * PMTU, length - k * PMTU); every READ response payload byte is
/// the pattern byte of the offset its PSN stands for.
#[test]
fn read_requests_reissue_from_the_missing_psn_and_responses_carry_the_pattern() {
    struct Msg {
        psn: u32,
        offset: u64,
        len: u64,
    }
    struct Run {
        rxe_qpn: u32,
        base: u64,
        size: u64,
        msgs: Vec<Msg>,
    }
    let mut runs: Vec<Run> = Vec::new();
    let mut reissued = 0;
    let mut resp_bytes = 0usize;
    for f in frames() {
        let h = &f.headers;
        if src(&f) == ENGINE && h.bth.opcode == Opcode::ReadRequest {
            let reth = h.reth.expect("READ request carries a RETH");
            if runs.last().map(|r| r.rxe_qpn) != Some(h.bth.dest_qp) {
                runs.push(Run {
                    rxe_qpn: h.bth.dest_qp,
                    base: reth.va,
                    size: u64::from(reth.dma_len),
                    msgs: Vec::new(),
                });
            }
            let run = runs.last_mut().unwrap();
            let next_psn = run
                .msgs
                .last()
                .map(|m| (m.psn + m.len.div_ceil(PMTU) as u32) & PSN_MASK);
            if next_psn.is_none() || next_psn == Some(h.bth.psn) {
                // A first-time request: message k covers offset k * size.
                let offset = run.msgs.len() as u64 * run.size;
                assert_eq!(reth.va, run.base + offset);
                assert_eq!(u64::from(reth.dma_len), run.size);
                run.msgs.push(Msg {
                    psn: h.bth.psn,
                    offset,
                    len: run.size,
                });
            } else {
                let m = run
                    .msgs
                    .iter()
                    .find(|m| u64::from(psn_delta(h.bth.psn, m.psn)) < m.len.div_ceil(PMTU))
                    .expect("a re-issued READ starts inside an earlier request");
                let k = u64::from(psn_delta(h.bth.psn, m.psn));
                assert_eq!(reth.va, run.base + m.offset + k * PMTU);
                assert_eq!(u64::from(reth.dma_len), m.len - k * PMTU);
                if k > 0 {
                    reissued += 1;
                }
            }
        } else if src(&f) == RXE
            && matches!(
                h.bth.opcode,
                Opcode::ReadRespFirst
                    | Opcode::ReadRespMiddle
                    | Opcode::ReadRespLast
                    | Opcode::ReadRespOnly
            )
        {
            let run = runs.last().expect("responses follow a request");
            let m = run
                .msgs
                .iter()
                .find(|m| u64::from(psn_delta(h.bth.psn, m.psn)) < m.len.div_ceil(PMTU))
                .expect("a response PSN belongs to a request");
            let off = m.offset + u64::from(psn_delta(h.bth.psn, m.psn)) * PMTU;
            for (i, &b) in f.payload.iter().enumerate() {
                assert_eq!(b, pattern(off + i as u64), "offset {}", off + i as u64);
            }
            resp_bytes += f.payload.len();
        }
    }
    assert_eq!(runs.len(), 2);
    assert_eq!((runs[0].size, runs[1].size), (4096, 16384));
    assert!(runs.iter().all(|r| r.msgs.len() == 5));
    assert!(
        reissued > 0,
        "the 10 % drop run re-issued READs from mid-message PSNs"
    );
    assert!(resp_bytes >= 5 * 4096 + 5 * 16384);
}
