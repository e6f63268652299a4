//! The engine as RDMA WRITE / READ target of Linux Soft-RoCE: rxe
//! (10.99.0.11, `interop/peer/rdma_target -c`) WRITEs into and READs from the
//! buffer of `roce-xdp interop rdma-target` (10.99.0.2), captured on the bridge by
//! `interop/run.sh` (interop/README.md): `RDMA_DIRS=engine-target SIZES=" "
//! LOSS_SIZES=" " RDMA_SIZES=4096 RDMA_LOSS_SIZES=8192 LOSS_RATE=0.1
//! ITERS=5`: WRITE 5 x 4096, WRITE 5 x 8192 with the engine's XDP dropping
//! 10 % of what it receives, then the same for READ. The capture is taken
//! before the engine's XDP, so the dropped frames are in it.

use std::collections::BTreeMap;

use engine::oob::rdma_target::pattern;
use engine::wire::{Opcode, RoceFrame};

use crate::support::rdma_capture::{opcode_counts, psn_delta, roce_frames, src, ENGINE, PMTU, RXE};

/// AETH syndrome of a NAK for a PSN sequence error (`docs/wire-format.md`,
/// "AETH").
const NAK_PSN_SEQ_ERR: u8 = 0x60;

fn frames() -> Vec<RoceFrame<'static>> {
    roce_frames("engine_rxe_target_write_read.pcap")
}

/// First-time messages of one run: (first PSN, target offset, length).
/// Runs are told apart by rxe's UDP source port (per rxe QP; the engine's
/// QPN repeats across runs since each run is a new process).
#[derive(Default)]
struct Msgs {
    rxe_port: u16,
    base: u64,
    list: Vec<(u32, u64, u64)>,
}

impl Msgs {
    /// Registers a request carrying a RETH (WRITE_FIRST/ONLY, READ request).
    fn on_reth(&mut self, rxe_port: u16, psn: u32, va: u64, len: u64) {
        if self.rxe_port != rxe_port || self.list.is_empty() {
            *self = Msgs {
                rxe_port,
                base: va,
                list: Vec::new(),
            };
        }
        if self.offset_of(psn).is_none() {
            self.list.push((psn, va - self.base, len));
        }
    }

    /// Target offset of the first payload byte of the packet with `psn`.
    fn offset_of(&self, psn: u32) -> Option<u64> {
        self.list.iter().find_map(|&(first, off, len)| {
            let k = u64::from(psn_delta(psn, first));
            (k < len.div_ceil(PMTU)).then_some(off + k * PMTU)
        })
    }
}

#[test]
fn every_frame_parses_with_correct_icrc_and_expected_opcodes() {
    let counts = opcode_counts(&frames());
    let expect: BTreeMap<([u8; 4], u8), usize> = [
        ((RXE, Opcode::WriteFirst as u8), 14),
        ((RXE, Opcode::WriteMiddle as u8), 74),
        ((RXE, Opcode::WriteLast as u8), 18),
        ((RXE, Opcode::ReadRequest as u8), 11),
        ((ENGINE, Opcode::ReadRespFirst as u8), 10),
        ((ENGINE, Opcode::ReadRespMiddle as u8), 40),
        ((ENGINE, Opcode::ReadRespLast as u8), 10),
        ((ENGINE, Opcode::Acknowledge as u8), 14),
    ]
    .into_iter()
    .collect();
    assert_eq!(counts, expect);
}

/// rxe's WRITE payloads carry the pattern at the offsets their PSNs stand
/// for, the engine NAKs each PSN gap with the PSN it expects, and rxe goes
/// back to exactly that PSN.
#[test]
fn engine_naks_write_gaps_and_rxe_resends_from_the_naked_psn() {
    let all = frames();
    let mut msgs = Msgs::default();
    let mut naks = Vec::new();
    for (i, f) in all.iter().enumerate() {
        let h = &f.headers;
        if src(f) == RXE {
            match h.bth.opcode {
                Opcode::WriteFirst | Opcode::WriteOnly => {
                    let r = h.reth.expect("RETH");
                    msgs.on_reth(h.udp.src_port, h.bth.psn, r.va, u64::from(r.dma_len));
                }
                Opcode::WriteMiddle | Opcode::WriteLast => {}
                _ => continue,
            }
            let off = msgs
                .offset_of(h.bth.psn)
                .expect("a WRITE PSN belongs to a message");
            for (j, &b) in f.payload.iter().enumerate() {
                assert_eq!(b, pattern(off + j as u64), "offset {}", off + j as u64);
            }
        } else if h.bth.opcode == Opcode::Acknowledge {
            let aeth = h.aeth.expect("AETH");
            if aeth.syndrome == NAK_PSN_SEQ_ERR {
                naks.push((i, h.bth.psn));
            }
        }
    }
    assert!(!naks.is_empty(), "the 10 % drop run made the engine NAK");
    for &(i, psn) in &naks {
        // After the NAK, rxe's first WRITE packet that does not move forward
        // from the one before it restarts at the NAK'd PSN.
        let mut prev: Option<u32> = None;
        let restart = all[i + 1..]
            .iter()
            .filter(|f| {
                src(f) == RXE
                    && matches!(
                        f.headers.bth.opcode,
                        Opcode::WriteFirst | Opcode::WriteMiddle | Opcode::WriteLast
                    )
            })
            .map(|f| f.headers.bth.psn)
            .find(|&p| {
                let back = prev.is_some_and(|q| psn_delta(p, q) != 1);
                prev = Some(p);
                back || p == psn
            });
        assert_eq!(restart, Some(psn), "NAK at frame {}", i + 1);
    }
}

/// The engine's READ responses carry the pattern at the offsets the READ
/// requests ask for (including one rxe re-issued after a dropped request).
#[test]
fn engine_read_responses_carry_the_pattern() {
    let mut msgs = Msgs::default();
    let mut bytes = 0usize;
    for f in frames() {
        let h = &f.headers;
        if src(&f) == RXE && h.bth.opcode == Opcode::ReadRequest {
            let r = h.reth.expect("RETH");
            msgs.on_reth(h.udp.src_port, h.bth.psn, r.va, u64::from(r.dma_len));
        } else if src(&f) == ENGINE
            && matches!(
                h.bth.opcode,
                Opcode::ReadRespFirst
                    | Opcode::ReadRespMiddle
                    | Opcode::ReadRespLast
                    | Opcode::ReadRespOnly
            )
        {
            let off = msgs
                .offset_of(h.bth.psn)
                .expect("a response PSN belongs to a request");
            for (j, &b) in f.payload.iter().enumerate() {
                assert_eq!(b, pattern(off + j as u64), "offset {}", off + j as u64);
            }
            bytes += f.payload.len();
        }
    }
    assert_eq!(bytes, 5 * 4096 + 5 * 8192);
}
