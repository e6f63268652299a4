//! Memory windows (IBA 10.6.7; rxe `rxe_mw.c`, `rxe_do_local_ops`,
//! `check_rkey`, `invalidate_rkey`), packet by packet. B opens part of a
//! region that grants no remote right itself (LOCAL_WRITE | MW_BIND, as
//! rdma-core's MW tests register it) through a window, and A reaches it
//! by the window's R_Key only, inside its range, with its rights: a bind
//! is a local operation of B's send queue (no packet), completed in
//! order; a type 2 window is closed by B's LOCAL_INV or A's SEND with
//! invalidate, a type 1 by a bind of zero length, either by freeing it;
//! an access through a closed window is NAKed remote access error.

use crate::support::*;

use proto::endpoint::Endpoint;
use proto::rc::{Access, MrKeys, MwBind, MwType, QpState, SendOp, SendWr, Sge, WcOpcode, WcStatus};
use proto::wire::Opcode;

/// Where B's window region starts, and its length.
const IOVA_W: u64 = 0x40_0000;
const W_LEN: usize = 64 * 1024;
/// The window: 8 KiB from 0x1000 into the region.
const WIN_AT: u64 = IOVA_W + 0x1000;
const WIN_LEN: u64 = 8192;
/// Bytes A moves: three packets at the default MTU.
const LEN: u32 = 3000;
/// NAK remote access error, NAK invalid request.
const NAK_ACCESS: u8 = 0x62;
const NAK_INVALID: u8 = 0x61;

/// A region at `IOVA_W` that only windows open (LOCAL_WRITE | MW_BIND).
fn window_region(ep: &mut Endpoint) -> MrKeys {
    ep.reg_mr(
        Box::new(vec![0u8; W_LEN]),
        IOVA_W,
        Access::LOCAL_WRITE | Access::MW_BIND,
    )
    .unwrap()
}

/// The default pair, B with a region that only windows open.
fn pair() -> (Pair, MrKeys) {
    let mut p = Pair::default_pair();
    let kw = window_region(&mut p.b);
    (p, kw)
}

/// A bind of `mw_rkey` over the window range of B's region `kw`, new key
/// byte `byte`.
fn bind(mw_rkey: u32, kw: MrKeys, byte: u8, access: Access) -> MwBind {
    MwBind {
        mw_rkey,
        rkey: (mw_rkey & !0xFF) | u32::from(byte),
        lkey: kw.lkey,
        addr: WIN_AT,
        len: WIN_LEN,
        access,
        zero_based: false,
    }
}

/// B binds (wr_id 50) and sends nothing; returns the window's new key and
/// B's completions.
fn bind_at_b(p: &mut Pair, b: &MwBind) -> Vec<proto::rc::WorkCompletion> {
    p.b.post_send(p.qb, SendWr::bind_mw(50, b)).unwrap();
    assert!(p.tx_b().is_empty(), "a bind is no packet");
    p.wcs_b()
}

/// A's `op` through R_Key `rkey` at `addr` (`len` bytes; 8 for an atomic).
fn through(p: &Pair, wr_id: u64, op: SendOp, rkey: u32, addr: u64, len: u32) -> SendWr {
    let mut wr = rdma_wr(p, wr_id, op, len, 0);
    wr.remote_addr = addr;
    wr.rkey = rkey;
    wr
}

fn outcomes(wcs: &[proto::rc::WorkCompletion]) -> Vec<(u64, WcOpcode, WcStatus)> {
    wcs.iter().map(|w| (w.wr_id, w.opcode, w.status)).collect()
}

/// A window of `kind` bound at B with REMOTE_WRITE | REMOTE_READ.
fn bound(kind: MwType) -> (Pair, MrKeys, u32) {
    let (mut p, kw) = pair();
    let mw = p.b.alloc_mw(0, kind).unwrap();
    let wcs = bind_at_b(
        &mut p,
        &bind(mw, kw, 0x5A, Access::REMOTE_WRITE | Access::REMOTE_READ),
    );
    assert_eq!(outcomes(&wcs), [(50, WcOpcode::BindMw, WcStatus::Success)]);
    let (rkey, k) = p.b.mw(mw).unwrap();
    assert_eq!((rkey >> 8, rkey & 0xFF, k), (mw >> 8, 0x5A, kind));
    (p, kw, rkey)
}

#[test]
fn a_bound_window_opens_its_range_for_writes_and_reads_by_its_rkey() {
    for kind in [MwType::One, MwType::Two] {
        let (mut p, kw, rkey) = bound(kind);
        let data = bytes(LEN as usize, 9);
        p.a.mr_write(p.mr_a.lkey, IOVA_A, &data).unwrap();
        let at = WIN_AT + 0x100;
        p.a.post_send(p.qa, through(&p, 1, SendOp::Write, rkey, at, LEN))
            .unwrap();
        p.settle();
        let mut got = vec![0u8; LEN as usize];
        p.b.mr_read(kw.lkey, at, &mut got).unwrap();
        assert_eq!(got, data, "{kind:?}: the WRITE landed in the window");
        // Read it back into another place of A's region.
        let mut rd = through(&p, 2, SendOp::Read, rkey, at, LEN);
        rd.local.addr = IOVA_A + 0x8000;
        p.a.post_send(p.qa, rd).unwrap();
        p.settle();
        assert_eq!(p.read_a(IOVA_A + 0x8000, LEN as usize), data, "{kind:?}");
        assert_eq!(
            outcomes(&p.wcs_a()),
            [
                (1, WcOpcode::Write, WcStatus::Success),
                (2, WcOpcode::Read, WcStatus::Success)
            ],
            "{kind:?}"
        );
        // The region itself grants no remote right: its own R_Key is
        // refused.
        let f = {
            p.a.post_send(p.qa, through(&p, 3, SendOp::Write, kw.rkey, at, 8))
                .unwrap();
            p.tx_a()
        };
        refused_by_b(&mut p, &f, NAK_ACCESS, "the region's own R_Key");
    }
}

#[test]
fn a_window_refuses_what_lies_outside_its_range_and_rights_or_another_key_byte() {
    let cases: [(&str, SendOp, u64, u32, u32); 5] = [
        ("before the window", SendOp::Write, WIN_AT - 8, 16, 0),
        ("past its end", SendOp::Write, WIN_AT + WIN_LEN - 8, 16, 0),
        ("a right it lacks", SendOp::FetchAdd, WIN_AT, 8, 0),
        (
            "the key byte before the bind",
            SendOp::Write,
            WIN_AT,
            8,
            0x5A ^ 0xA5,
        ),
        (
            "a READ past its end",
            SendOp::Read,
            WIN_AT + 8,
            WIN_LEN as u32,
            0,
        ),
    ];
    for kind in [MwType::One, MwType::Two] {
        for (what, op, addr, len, byte) in cases {
            let what = format!("{kind:?}: {what}");
            let (mut p, kw, rkey) = bound(kind);
            let key = if byte == 0 {
                rkey
            } else {
                (rkey & !0xFF) | (byte & 0xFF)
            };
            p.a.post_send(p.qa, through(&p, 1, op, key, addr, len))
                .unwrap();
            let f = p.tx_a();
            refused_by_b(&mut p, &f, NAK_ACCESS, &what);
            let mut v = vec![0u8; W_LEN];
            p.b.mr_read(kw.lkey, IOVA_W, &mut v).unwrap();
            assert!(v.iter().all(|&b| b == 0), "{what}: nothing written");
        }
    }
}

#[test]
fn a_zero_based_type_2_window_counts_remote_addresses_from_its_start() {
    let (mut p, kw) = pair();
    let mw = p.b.alloc_mw(0, MwType::Two).unwrap();
    let b = MwBind {
        zero_based: true,
        ..bind(mw, kw, 1, Access::REMOTE_WRITE)
    };
    assert_eq!(
        outcomes(&bind_at_b(&mut p, &b)),
        [(50, WcOpcode::BindMw, WcStatus::Success)]
    );
    let rkey = p.b.mw(mw).unwrap().0;
    p.a.mr_write(p.mr_a.lkey, IOVA_A, &[7; 16]).unwrap();
    p.a.post_send(p.qa, through(&p, 1, SendOp::Write, rkey, 0x20, 16))
        .unwrap();
    p.settle();
    let mut got = [0u8; 16];
    p.b.mr_read(kw.lkey, WIN_AT + 0x20, &mut got).unwrap();
    assert_eq!(got, [7; 16]);
    // A zero-based type 1 is refused (o10-36.2.2).
    let one = p.b.alloc_mw(0, MwType::One).unwrap();
    let wcs = bind_at_b(
        &mut p,
        &MwBind {
            zero_based: true,
            ..bind(one, kw, 1, Access::REMOTE_WRITE)
        },
    );
    assert_eq!(
        outcomes(&wcs),
        [(50, WcOpcode::BindMw, WcStatus::MwBindError)]
    );
}

#[test]
fn a_bind_that_breaks_a_rule_completes_with_a_bind_error_and_the_qp_fails() {
    // (what, window type, window PD, region rights, bind change)
    type Change = fn(&mut MwBind);
    let keep: Change = |_| {};
    let cases: [(&str, MwType, u32, Access, Change); 7] = [
        (
            "a region without MW_BIND",
            MwType::Two,
            0,
            Access::ALL,
            keep,
        ),
        (
            "a writable window on a region without LOCAL_WRITE",
            MwType::One,
            0,
            Access::MW_BIND,
            keep,
        ),
        (
            "a range past the region",
            MwType::Two,
            0,
            Access::LOCAL_WRITE | Access::MW_BIND,
            |b| b.len = W_LEN as u64,
        ),
        (
            "a type 2 of zero length",
            MwType::Two,
            0,
            Access::LOCAL_WRITE | Access::MW_BIND,
            |b| b.len = 0,
        ),
        (
            "a type 2 of another PD than the QP's",
            MwType::Two,
            3,
            Access::LOCAL_WRITE | Access::MW_BIND,
            keep,
        ),
        (
            "a stale window key",
            MwType::One,
            0,
            Access::LOCAL_WRITE | Access::MW_BIND,
            |b| b.mw_rkey ^= 1,
        ),
        (
            "an unknown region",
            MwType::One,
            0,
            Access::LOCAL_WRITE | Access::MW_BIND,
            |b| b.lkey ^= 0x100,
        ),
    ];
    for (what, kind, pd, rights, change) in cases {
        let mut p = Pair::default_pair();
        let kw =
            p.b.reg_mr(Box::new(vec![0u8; W_LEN]), IOVA_W, rights)
                .unwrap();
        let mw = p.b.alloc_mw(pd, kind).unwrap();
        let mut b = bind(mw, kw, 1, Access::REMOTE_WRITE);
        change(&mut b);
        // A second request behind it is flushed.
        p.b.post_send(p.qb, SendWr::bind_mw(50, &b)).unwrap();
        p.b.post_send(p.qb, SendWr::bind_mw(51, &b)).unwrap();
        assert!(p.tx_b().is_empty(), "{what}");
        assert_eq!(
            outcomes(&p.wcs_b()),
            [
                (50, WcOpcode::BindMw, WcStatus::MwBindError),
                (51, WcOpcode::BindMw, WcStatus::Flushed)
            ],
            "{what}"
        );
        assert_eq!(p.b.qp_state(p.qb), Some(QpState::Error), "{what}");
        assert_eq!(
            p.b.mw(mw).unwrap().0,
            mw,
            "{what}: the window's key is unchanged"
        );
    }
}

#[test]
fn a_type_2_window_is_bound_once_until_invalidated() {
    let (mut p, kw, rkey) = bound(MwType::Two);
    let wcs = bind_at_b(&mut p, &bind(rkey, kw, 7, Access::REMOTE_WRITE));
    assert_eq!(
        outcomes(&wcs),
        [(50, WcOpcode::BindMw, WcStatus::MwBindError)]
    );
}

#[test]
fn local_inv_closes_a_type_2_window_and_a_later_access_is_a_nak() {
    let (mut p, _kw, rkey) = bound(MwType::Two);
    let mut inv = SendWr::new(60, SendOp::LocalInv, Sge::default());
    inv.imm = rkey;
    p.b.post_send(p.qb, inv).unwrap();
    assert!(p.tx_b().is_empty(), "LOCAL_INV is no packet");
    assert_eq!(
        outcomes(&p.wcs_b()),
        [(60, WcOpcode::LocalInv, WcStatus::Success)]
    );
    p.a.post_send(p.qa, through(&p, 1, SendOp::Write, rkey, WIN_AT, 8))
        .unwrap();
    let f = p.tx_a();
    let n = refused_by_b(&mut p, &f, NAK_ACCESS, "through the invalidated window");
    p.deliver_a(&n);
    assert_eq!(
        outcomes(&p.wcs_a()),
        [(1, WcOpcode::Write, WcStatus::RemoteAccessError)]
    );
}

#[test]
fn local_inv_of_a_type_1_window_or_a_region_key_fails_with_a_local_qp_operation_error() {
    for what in ["a type 1 window", "a region's R_Key"] {
        let (mut p, kw, rkey) = bound(MwType::One);
        let key = if what == "a type 1 window" {
            rkey
        } else {
            kw.rkey
        };
        let mut inv = SendWr::new(60, SendOp::LocalInv, Sge::default());
        inv.imm = key;
        p.b.post_send(p.qb, inv).unwrap();
        assert!(p.tx_b().is_empty(), "{what}");
        assert_eq!(
            outcomes(&p.wcs_b()),
            [(60, WcOpcode::LocalInv, WcStatus::LocalQpOperationError)],
            "{what}"
        );
        assert_eq!(p.b.qp_state(p.qb), Some(QpState::Error), "{what}");
    }
}

#[test]
fn send_with_invalidate_closes_the_window_and_the_receive_names_its_key() {
    let (mut p, _kw, rkey) = bound(MwType::Two);
    p.b.post_recv(p.qb, recv_wr_b(&p, 7, 4096)).unwrap();
    p.a.mr_write(p.mr_a.lkey, IOVA_A, &bytes(100, 3)).unwrap();
    let mut wr = send_wr_a(&p, 1, SendOp::SendWithInv, 100);
    wr.imm = rkey;
    p.a.post_send(p.qa, wr).unwrap();
    let f = p.tx_a();
    assert_eq!(f.len(), 1);
    assert_eq!(opcode(&f[0]), Opcode::SendOnlyInv);
    assert_eq!(hdr(&f[0]).ieth, Some(rkey), "the IETH carries the R_Key");
    assert_eq!(payload(&f[0]), bytes(100, 3));
    p.deliver_b(&f);
    p.settle();
    let wb = p.wcs_b();
    assert_eq!(wb.len(), 1);
    assert_eq!(
        (
            wb[0].wr_id,
            wb[0].status,
            wb[0].byte_len,
            wb[0].invalidated_rkey,
            wb[0].imm
        ),
        (7, WcStatus::Success, 100, Some(rkey), None)
    );
    assert_eq!(p.read_b(IOVA_B, 100), bytes(100, 3));
    assert_eq!(
        outcomes(&p.wcs_a()),
        [(1, WcOpcode::Send, WcStatus::Success)]
    );
    // The window is closed.
    p.a.post_send(p.qa, through(&p, 2, SendOp::Write, rkey, WIN_AT, 8))
        .unwrap();
    let f = p.tx_a();
    refused_by_b(&mut p, &f, NAK_ACCESS, "through the invalidated window");
}

#[test]
fn a_multi_packet_send_with_invalidate_carries_the_ieth_on_its_last_packet() {
    let (mut p, _kw, rkey) = bound(MwType::Two);
    p.b.post_recv(p.qb, recv_wr_b(&p, 7, 4096)).unwrap();
    let mut wr = send_wr_a(&p, 1, SendOp::SendWithInv, LEN);
    wr.imm = rkey;
    p.a.post_send(p.qa, wr).unwrap();
    let f = p.tx_a();
    let ops: Vec<_> = f.iter().map(|x| opcode(x)).collect();
    assert_eq!(
        ops,
        [Opcode::SendFirst, Opcode::SendMiddle, Opcode::SendLastInv]
    );
    assert_eq!(hdr(&f[2]).ieth, Some(rkey));
    p.deliver_b(&f);
    p.settle();
    let wb = p.wcs_b();
    assert_eq!(
        (wb[0].status, wb[0].byte_len, wb[0].invalidated_rkey),
        (WcStatus::Success, LEN, Some(rkey))
    );
}

#[test]
fn send_with_invalidate_of_a_key_that_is_no_bound_type_2_window_is_a_nak_invalid_request() {
    for what in [
        "a type 1 window",
        "a region's R_Key",
        "an unknown key",
        "a freed window",
    ] {
        let (mut p, kw, rkey) = bound(if what == "a type 1 window" {
            MwType::One
        } else {
            MwType::Two
        });
        let key = match what {
            "a region's R_Key" => kw.rkey,
            "an unknown key" => rkey ^ 0x0100_0000,
            "a freed window" => {
                p.b.dealloc_mw(rkey).unwrap();
                rkey
            }
            _ => rkey,
        };
        p.b.post_recv(p.qb, recv_wr_b(&p, 7, 4096)).unwrap();
        let mut wr = send_wr_a(&p, 1, SendOp::SendWithInv, 16);
        wr.imm = key;
        p.a.post_send(p.qa, wr).unwrap();
        let f = p.tx_a();
        let n = refused_by_b(&mut p, &f, NAK_INVALID, what);
        p.deliver_a(&n);
        let wb = p.wcs_b();
        assert_eq!(
            (wb[0].wr_id, wb[0].status, wb[0].invalidated_rkey),
            (7, WcStatus::RemoteInvalidRequest, None),
            "{what}: the receive fails (rxe: IB_WC_REM_INV_REQ_ERR)"
        );
        assert_eq!(
            outcomes(&p.wcs_a()),
            [(1, WcOpcode::Send, WcStatus::RemoteInvalidRequest)],
            "{what}"
        );
    }
}

#[test]
fn a_zero_length_bind_closes_a_type_1_window_and_freeing_closes_either() {
    let (mut p, kw, rkey) = bound(MwType::One);
    let mut unbind = bind(rkey, kw, 0x77, Access::REMOTE_WRITE);
    unbind.len = 0;
    assert_eq!(
        outcomes(&bind_at_b(&mut p, &unbind)),
        [(50, WcOpcode::BindMw, WcStatus::Success)]
    );
    let now = p.b.mw(rkey).unwrap().0;
    assert_eq!(now & 0xFF, 0x77, "the bind gave the new key byte");
    p.a.post_send(p.qa, through(&p, 1, SendOp::Write, now, WIN_AT, 8))
        .unwrap();
    let f = p.tx_a();
    refused_by_b(&mut p, &f, NAK_ACCESS, "a type 1 bound to nothing");

    for kind in [MwType::One, MwType::Two] {
        let (mut p, kw, rkey) = bound(kind);
        // The region cannot go while the window is bound (rxe: -EINVAL).
        assert!(p.b.dereg_mr(kw.lkey).is_err(), "{kind:?}");
        p.b.dealloc_mw(rkey).unwrap();
        assert_eq!(p.b.mw(rkey), None);
        p.a.post_send(p.qa, through(&p, 1, SendOp::Write, rkey, WIN_AT, 8))
            .unwrap();
        let f = p.tx_a();
        refused_by_b(&mut p, &f, NAK_ACCESS, "a freed window");
        assert!(p.b.dereg_mr(kw.lkey).is_ok(), "{kind:?}: unbound now");
    }
}

#[test]
fn local_operations_complete_in_send_queue_order_and_take_no_psn() {
    let mut p = Pair::default_pair();
    // A's own window this time: A binds between two WRITEs.
    let ka = window_region(&mut p.a);
    let mw = p.a.alloc_mw(0, MwType::Two).unwrap();
    p.a.post_send(p.qa, write_wr(&p, 1, LEN, 0)).unwrap();
    p.a.post_send(
        p.qa,
        SendWr::bind_mw(2, &bind(mw, ka, 3, Access::REMOTE_READ)),
    )
    .unwrap();
    p.a.post_send(p.qa, write_wr(&p, 3, LEN, 0x4000)).unwrap();
    let f = p.tx_a();
    let psns: Vec<u32> = f.iter().map(|x| psn(x)).collect();
    assert_eq!(
        psns.len(),
        6,
        "two WRITEs of three packets, no packet for the bind"
    );
    assert!(
        psns.windows(2).all(|w| w[1] == (w[0] + 1) & 0xFF_FFFF),
        "contiguous PSNs: {psns:?}"
    );
    // Nothing completes before the first WRITE's ACK: the bind waits for it.
    assert!(p.wcs_a().is_empty());
    p.deliver_b(&f);
    p.settle();
    assert_eq!(
        outcomes(&p.wcs_a()),
        [
            (1, WcOpcode::Write, WcStatus::Success),
            (2, WcOpcode::BindMw, WcStatus::Success),
            (3, WcOpcode::Write, WcStatus::Success)
        ]
    );
    assert_eq!(p.a.mw(mw).unwrap().0 & 0xFF, 3);
}

#[test]
fn a_destroyed_qp_leaves_no_type_2_window_bound() {
    let (mut p, kw, rkey) = bound(MwType::Two);
    p.b.destroy_qp(p.qb).unwrap();
    assert!(
        p.b.dereg_mr(kw.lkey).is_ok(),
        "the window let the region go"
    );
    assert_eq!(p.b.mw(rkey).map(|m| m.0), Some(rkey), "the window stays");
}

#[test]
fn a_send_with_invalidate_waits_for_the_read_responses_queued_before_it() {
    let (mut p, kw, rkey) = bound(MwType::Two);
    let data = bytes(LEN as usize, 5);
    p.b.mr_write(kw.lkey, WIN_AT, &data).unwrap();
    p.b.post_recv(p.qb, recv_wr_b(&p, 7, 4096)).unwrap();
    p.a.post_send(p.qa, through(&p, 1, SendOp::Read, rkey, WIN_AT, LEN))
        .unwrap();
    let mut wr = send_wr_a(&p, 2, SendOp::SendWithInv, 16);
    wr.imm = rkey;
    p.a.post_send(p.qa, wr).unwrap();
    let f = p.tx_a();
    assert_eq!(f.len(), 2);
    p.deliver_b(&f);
    // The READ's three responses leave; the SEND waits (dropped, counted).
    let r = p.tx_b();
    let ops: Vec<_> = r.iter().map(|x| opcode(x)).collect();
    assert_eq!(
        ops,
        [
            Opcode::ReadRespFirst,
            Opcode::ReadRespMiddle,
            Opcode::ReadRespLast
        ]
    );
    assert_eq!(p.b.qp_counters(p.qb).unwrap().dropped_busy, 1);
    p.deliver_a(&r);
    p.settle();
    // A sends it again after its ACK timeout; now it executes.
    p.fire_a_timer();
    p.settle();
    assert_eq!(p.read_a(IOVA_A, LEN as usize), data);
    assert_eq!(
        outcomes(&p.wcs_a()),
        [
            (1, WcOpcode::Read, WcStatus::Success),
            (2, WcOpcode::Send, WcStatus::Success)
        ]
    );
    let wb = p.wcs_b();
    assert_eq!((wb[0].wr_id, wb[0].invalidated_rkey), (7, Some(rkey)));
}
