//! Receives whose buffer cannot take a message, packet by packet, on RC
//! and UC: a key no region has, a region of another PD, a range leaving
//! its region, a region without LOCAL_WRITE; one SGE or one entry of a
//! list. As rxe, they are posted (rdma-core providers/rxe/rxe.c
//! `rxe_post_one_recv` checks the queue and `num_sge`, no key) and fail
//! when a message's bytes reach the bad buffer (rxe_resp.c `send_data_in`
//! -> rxe_mr.c `copy_data`, which looks each entry up as it reaches it,
//! `lookup_mr` then `mr_check_range` on the bytes it copies: any error
//! but `-ENOSPC` is `RESPST_ERR_MALFORMED_WQE`, "All, Class A"): the
//! bytes before the bad entry land, the receive completes with a local
//! QP operation error (`do_class_ac_error(qp, AETH_NAK_REM_OP_ERR,
//! IB_WC_LOC_QP_OP_ERR)`), an RC responder NAKs remote operational error
//! (AETH syndrome 0x63) at the packet's PSN and the requester's request
//! completes with a remote operational error (rxe_comp.c
//! `AETH_NAK_REM_OP_ERR`: `IB_WC_REM_OP_ERR`), the QP goes to error. A
//! message of no bytes touches no buffer and succeeds (`copy_data` of
//! length 0 returns at once), as a WRITE with immediate does (its bytes
//! go to the R_Key's region).

use core::net::{IpAddr, Ipv4Addr};

use proto::endpoint::{ConnectOptions, Endpoint, EndpointConfig, RemoteQp};
use proto::rc::{Access, MrKeys, Mtu, QpInitAttr, QpState, RecvWr, SendOp, Sge, SgeCaps, WcStatus};
use proto::wire::Opcode;

use crate::support::*;

const OTHER_PD: u32 = 7;
/// B's region of another PD (4 KiB of 0x33).
const OTHER_IOVA: u64 = 0x900_0000;
/// B's region of the QP's PD without LOCAL_WRITE (4 KiB of 0x44).
const NO_WRITE_IOVA: u64 = 0xA00_0000;
const EXTRA_LEN: usize = 4096;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Bad {
    UnknownKey,
    OtherPd,
    /// Starts 1024 bytes before the end of B's region.
    PastRegion,
    NoLocalWrite,
}

const BAD: [Bad; 4] = [
    Bad::UnknownKey,
    Bad::OtherPd,
    Bad::PastRegion,
    Bad::NoLocalWrite,
];

/// A and B with one QP each (RC, or UC when `uc`), SGE lists of up to 8
/// entries, path MTU 1024, connected; 1 MiB regions with every right
/// (A's holding pattern 5, B's zero), and B's two extra regions.
fn pair(uc: bool) -> (Pair, MrKeys, MrKeys) {
    let side = |mac, ip: [u8; 4]| {
        let mut ep = Endpoint::new(EndpointConfig {
            local_mac: mac,
            local_ip: IpAddr::V4(Ipv4Addr::from(ip)),
            ..Default::default()
        });
        let cq = ep.create_cq(1024);
        let init = QpInitAttr {
            send_cq: cq,
            recv_cq: cq,
            max_send_wr: 64,
            max_recv_wr: 8,
            sq_sig_all: true,
            srq: None,
        };
        let qpn = if uc {
            ep.create_uc_qp_in(0, init).unwrap()
        } else {
            ep.create_qp(init).unwrap()
        };
        ep.set_qp_sge_caps(
            qpn,
            SgeCaps {
                max_send_sge: 8,
                max_recv_sge: 8,
                max_inline_data: 0,
            },
        )
        .unwrap();
        Side { ep, qpn, cq }
    };
    let (mut a, mut b) = (side(MAC_A, [10, 0, 0, 1]), side(MAC_B, [10, 0, 0, 2]));
    let o = ConnectOptions {
        path_mtu: Mtu::Mtu1024,
        ..opts()
    };
    let remote = |s: &Side, mac, ip: [u8; 4]| RemoteQp {
        qpn: s.qpn,
        psn: o.sq_psn,
        mac,
        ip: IpAddr::V4(Ipv4Addr::from(ip)),
    };
    let (ra, rb) = (
        remote(&a, MAC_A, [10, 0, 0, 1]),
        remote(&b, MAC_B, [10, 0, 0, 2]),
    );
    a.ep.connect(a.qpn, &rb, &o).unwrap();
    b.ep.connect(b.qpn, &ra, &o).unwrap();
    let mut p = Pair::with_regions(a, b, 0);
    p.a.mr_write(p.mr_a.lkey, IOVA_A, &bytes(MR_LEN, 5))
        .unwrap();
    let other =
        p.b.reg_mr_in(
            OTHER_PD,
            Box::new(vec![0x33u8; EXTRA_LEN]),
            OTHER_IOVA,
            Access::ALL,
        )
        .unwrap();
    let no_write =
        p.b.reg_mr_in(
            0,
            Box::new(vec![0x44u8; EXTRA_LEN]),
            NO_WRITE_IOVA,
            Access::REMOTE_READ,
        )
        .unwrap();
    (p, other, no_write)
}

/// A bad buffer of `len` bytes.
fn bad_sge(p: &Pair, other: &MrKeys, no_write: &MrKeys, bad: Bad, len: u32) -> Sge {
    match bad {
        Bad::UnknownKey => Sge {
            lkey: p.mr_b.lkey ^ 0x5A5A_0000,
            addr: IOVA_B,
            length: len,
        },
        Bad::OtherPd => Sge {
            lkey: other.lkey,
            addr: OTHER_IOVA,
            length: len,
        },
        Bad::PastRegion => Sge {
            lkey: p.mr_b.lkey,
            addr: IOVA_B + MR_LEN as u64 - 1024,
            length: len,
        },
        Bad::NoLocalWrite => Sge {
            lkey: no_write.lkey,
            addr: NO_WRITE_IOVA,
            length: len,
        },
    }
}

/// Every byte of B's three regions.
fn b_bytes(p: &Pair, other: &MrKeys, no_write: &MrKeys) -> Vec<u8> {
    let mut v = p.read_b(IOVA_B, MR_LEN);
    let mut x = vec![0u8; EXTRA_LEN];
    p.b.mr_read(other.lkey, OTHER_IOVA, &mut x).unwrap();
    v.extend_from_slice(&x);
    p.b.mr_read(no_write.lkey, NO_WRITE_IOVA, &mut x).unwrap();
    v.extend_from_slice(&x);
    v
}

fn outcomes(wcs: &[proto::rc::WorkCompletion]) -> Vec<(u64, WcStatus)> {
    wcs.iter().map(|w| (w.wr_id, w.status)).collect()
}

/// B's answers to packets it took: positive ACKs only (or nothing).
fn only_acks(frames: &[Vec<u8>], what: &str) {
    for f in frames {
        assert_eq!(opcode(f), Opcode::Acknowledge, "{what}");
        assert_eq!(syndrome(f) & 0x60, 0, "{what}: an ACK, not a NAK");
    }
}

/// A's SEND (wr_id 1) of `len` bytes from the start of A's region into
/// B's receive 9, whose buffer fails at packet `fails_at` of its frames:
/// the packets before it are taken, that one is refused (RC: one NAK
/// remote operational error at its PSN; UC: nothing), the ones after it
/// are dropped; B's receive completes with a local QP operation error and
/// B goes to error; on RC, A's SEND completes with a remote operational
/// error and A goes to error. Returns nothing; `want_b` is every byte of
/// B's regions afterwards.
fn send_fails_at(
    p: &mut Pair,
    regions: (&MrKeys, &MrKeys),
    len: u32,
    fails_at: usize,
    uc: bool,
    want_b: &[u8],
    what: &str,
) {
    p.a.post_send(p.qa, send_wr_a(p, 1, SendOp::Send, len))
        .unwrap();
    let f = p.tx_a();
    assert_eq!(f.len(), (len as usize).div_ceil(1024), "{what}");
    for (k, frame) in f.iter().enumerate().take(fails_at) {
        p.deliver_b(core::slice::from_ref(frame));
        only_acks(&p.tx_b(), &format!("{what}: packet {k}"));
        assert!(p.wcs_b().is_empty(), "{what}: packet {k}");
        assert_eq!(p.b.qp_state(p.qb), Some(QpState::Rts), "{what}: packet {k}");
    }
    let nak = if uc {
        p.deliver_b(&f[fails_at..=fails_at]);
        assert!(p.tx_b().is_empty(), "{what}: UC answers nothing");
        assert_eq!(p.b.qp_state(p.qb), Some(QpState::Error), "{what}");
        Vec::new()
    } else {
        refused_by_b(p, &f[fails_at..=fails_at], 0x63, what)
    };
    assert_eq!(
        outcomes(&p.wcs_b()),
        [(9, WcStatus::LocalQpOperationError)],
        "{what}"
    );
    // The packets after it reach a QP in error: dropped, unanswered.
    p.deliver_b(&f[fails_at + 1..]);
    assert!(p.tx_b().is_empty(), "{what}");
    assert!(p.wcs_b().is_empty(), "{what}");
    assert!(
        b_bytes(p, regions.0, regions.1) == want_b,
        "{what}: B's bytes"
    );
    assert!(
        p.read_a(IOVA_A, MR_LEN) == bytes(MR_LEN, 5),
        "{what}: A's bytes"
    );
    if uc {
        // UC completes a SEND when it leaves.
        assert_eq!(outcomes(&p.wcs_a()), [(1, WcStatus::Success)], "{what}");
        assert_eq!(p.a.qp_state(p.qa), Some(QpState::Rts), "{what}");
    } else {
        p.deliver_a(&nak);
        assert_eq!(
            outcomes(&p.wcs_a()),
            [(1, WcStatus::RemoteOperationalError)],
            "{what}"
        );
        assert_eq!(p.a.qp_state(p.qa), Some(QpState::Error), "{what}");
    }
}

#[test]
fn a_receive_with_a_bad_buffer_is_posted_and_fails_when_a_send_reaches_it() {
    for uc in [false, true] {
        for bad in BAD {
            let what = format!("{} {bad:?}", if uc { "UC" } else { "RC" });
            let (mut p, other, no_write) = pair(uc);
            let b0 = b_bytes(&p, &other, &no_write);
            let sge = bad_sge(&p, &other, &no_write, bad, 2048);
            p.b.post_recv(p.qb, RecvWr { wr_id: 9, sge }).unwrap();
            assert_eq!(p.b.qp(p.qb).unwrap().posted_recv_wrs(), 1, "{what}");
            // A 2-packet SEND. The range leaving B's region takes the
            // first packet (its 1024 bytes lie in the region: rxe's
            // `mr_check_range` looks at the bytes copied); the second is
            // refused. Every other buffer refuses the first.
            let mut want = b0.clone();
            let fails_at = if bad == Bad::PastRegion {
                want[MR_LEN - 1024..MR_LEN].copy_from_slice(&bytes(MR_LEN, 5)[..1024]);
                1
            } else {
                0
            };
            send_fails_at(
                &mut p,
                (&other, &no_write),
                2048,
                fails_at,
                uc,
                &want,
                &what,
            );
        }
    }
}

#[test]
fn a_bad_entry_anywhere_in_a_receive_list_is_posted_and_fails_the_receive_where_reached() {
    // Eight entries of 512 bytes, 1024 bytes apart in B's region; a
    // 4096-byte SEND of four packets, packet k filling entries 2k and
    // 2k + 1. The entries before the bad one are filled; the packet that
    // reaches it is refused (its piece before the entry landed).
    for uc in [false, true] {
        for bad in BAD {
            for at in [0usize, 3, 6, 7] {
                let what = format!("{} {bad:?} at {at}", if uc { "UC" } else { "RC" });
                let (mut p, other, no_write) = pair(uc);
                let b0 = b_bytes(&p, &other, &no_write);
                let mut list: Vec<Sge> = (0..8)
                    .map(|k| Sge {
                        lkey: p.mr_b.lkey,
                        addr: IOVA_B + k * 1024,
                        length: 512,
                    })
                    .collect();
                let mut bad_entry = bad_sge(&p, &other, &no_write, bad, 512);
                if bad == Bad::PastRegion {
                    // Wholly past the end: no byte of it lies in the region.
                    bad_entry.addr = IOVA_B + MR_LEN as u64 - 256;
                }
                list[at] = bad_entry;
                p.b.post_recv_sgl(p.qb, 9, &list).unwrap();
                let a = bytes(MR_LEN, 5);
                let mut want = b0.clone();
                for k in 0..at {
                    let o = k * 1024;
                    want[o..o + 512].copy_from_slice(&a[k * 512..(k + 1) * 512]);
                }
                send_fails_at(&mut p, (&other, &no_write), 4096, at / 2, uc, &want, &what);
            }
        }
    }
}

#[test]
fn a_message_that_copies_nothing_into_a_bad_receive_succeeds() {
    // rxe `copy_data` returns before looking at any entry when there is
    // nothing to copy; a WRITE with immediate copies nothing into the
    // receive it consumes (rxe `execute`: `write_data_in` goes to the
    // R_Key's region).
    for uc in [false, true] {
        for bad in BAD {
            let what = format!(
                "{} {bad:?}, WRITE with immediate",
                if uc { "UC" } else { "RC" }
            );
            let (mut p, other, no_write) = pair(uc);
            let sge = bad_sge(&p, &other, &no_write, bad, 64);
            p.b.post_recv(p.qb, RecvWr { wr_id: 9, sge }).unwrap();
            let mut wr = rdma_wr(&p, 1, SendOp::WriteWithImm, 2048, 0x4000);
            wr.imm = 0x0BAD_0001;
            p.a.post_send(p.qa, wr).unwrap();
            p.settle();
            let wb = p.wcs_b();
            assert_eq!(
                wb.iter()
                    .map(|w| (w.wr_id, w.status, w.byte_len, w.imm))
                    .collect::<Vec<_>>(),
                [(9, WcStatus::Success, 2048, Some(0x0BAD_0001))],
                "{what}"
            );
            assert_eq!(outcomes(&p.wcs_a()), [(1, WcStatus::Success)], "{what}");
            let mut want = vec![0u8; MR_LEN];
            want[0x4000..0x4800].copy_from_slice(&bytes(MR_LEN, 5)[0x4000..0x4800]);
            assert!(p.read_b(IOVA_B, MR_LEN) == want, "{what}");
        }
    }
    for uc in [false, true] {
        for bad in BAD {
            let what = format!("{} {bad:?}", if uc { "UC" } else { "RC" });
            let (mut p, other, no_write) = pair(uc);
            let b0 = b_bytes(&p, &other, &no_write);
            let sge = bad_sge(&p, &other, &no_write, bad, 64);
            p.b.post_recv(p.qb, RecvWr { wr_id: 9, sge }).unwrap();
            let list = [sge, sge];
            p.b.post_recv_sgl(p.qb, 10, &list).unwrap();
            for id in [1, 2] {
                p.a.post_send(p.qa, send_wr_a(&p, id, SendOp::Send, 0))
                    .unwrap();
            }
            p.settle();
            let wb = p.wcs_b();
            assert_eq!(
                wb.iter()
                    .map(|w| (w.wr_id, w.status, w.byte_len))
                    .collect::<Vec<_>>(),
                [(9, WcStatus::Success, 0), (10, WcStatus::Success, 0)],
                "{what}"
            );
            assert_eq!(
                outcomes(&p.wcs_a()),
                [(1, WcStatus::Success), (2, WcStatus::Success)],
                "{what}"
            );
            assert_eq!(p.b.qp_state(p.qb), Some(QpState::Rts), "{what}");
            assert!(b_bytes(&p, &other, &no_write) == b0, "{what}");
        }
    }
}
