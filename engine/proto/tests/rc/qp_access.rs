//! The QP's own remote rights (`QpAttr::access`, verbs `qp_access_flags`,
//! `ConnectOptions::access`): an RDMA WRITE (with immediate too), READ or
//! atomic reaching a QP whose access flags lack the right it needs is
//! NAKed remote access error (rxe's check_op_valid NAKs invalid request), counted
//! (`qp_access_violation`), executes nothing, puts the QP in error and
//! fails the requester's work request. The regions here grant every
//! right, so only the QP's flags decide.

use crate::support::remote_ops::{b_word, post_remote, RemoteOp};
use crate::support::*;

use proto::endpoint::ConnectOptions;
use proto::rc::{Access, QpAttr, QpAttrMask, QpState, SendOp, WcOpcode, WcStatus};

/// Bytes moved by a WRITE or READ: three packets at the default MTU.
const LEN: usize = 3000;

/// Every combination of REMOTE_WRITE, REMOTE_READ and REMOTE_ATOMIC.
fn every_remote_set() -> Vec<Access> {
    let rights = [
        Access::REMOTE_WRITE,
        Access::REMOTE_READ,
        Access::REMOTE_ATOMIC,
    ];
    (0u8..8)
        .map(|bits| {
            rights
                .iter()
                .enumerate()
                .filter(|(i, _)| bits >> i & 1 == 1)
                .fold(Access::NONE, |a, (_, &r)| a | r)
        })
        .collect()
}

/// A pair whose B QP grants `access` (A's grants every right); A's
/// region starts with `bytes(LEN, 1)`, B's with `bytes(LEN, 2)`.
fn pair_granting(access: Access) -> Pair {
    let mut p = Pair::new(opts(), ConnectOptions { access, ..opts() });
    p.a.mr_write(p.mr_a.lkey, IOVA_A, &bytes(LEN, 1)).unwrap();
    p.b.mr_write(p.mr_b.lkey, IOVA_B, &bytes(LEN, 2)).unwrap();
    p
}

/// `frames` from A reach B, whose QP lacks the right: one NAK remote
/// access error for the first PSN, B in error with the refusal counted, no
/// byte changed on either side, and A's request completes with
/// `RemoteAccessError`.
fn assert_refused(p: &mut Pair, op: RemoteOp, frames: &[Vec<u8>], what: &str) {
    // NAK remote access error.
    let n = refused_by_b(p, frames, 0x62, what);
    let c = p.b.qp_counters(p.qb).unwrap();
    assert_eq!((c.qp_access_violation, c.naks_sent), (1, 1), "{what}");
    assert_eq!(p.read_b(IOVA_B, LEN), bytes(LEN, 2), "{what}: B untouched");
    assert_eq!(p.read_a(IOVA_A, LEN), bytes(LEN, 1), "{what}: A untouched");
    if op == RemoteOp::WriteWithImm {
        let wb = p.wcs_b();
        assert_eq!(
            wb.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(),
            [(7, WcStatus::Flushed)],
            "{what}: the receive is flushed, not consumed"
        );
    }
    p.deliver_a(&n);
    let wa = p.wcs_a();
    assert_eq!(
        wa.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(),
        [(1, WcStatus::RemoteAccessError)],
        "{what}"
    );
    assert_eq!(p.a.qp_state(p.qa), Some(QpState::Error), "{what}");
}

/// `frames` from A reach B, whose QP grants the right: `op` runs to
/// completion, byte-exact, with nothing refused.
fn assert_executed(p: &mut Pair, op: RemoteOp, frames: &[Vec<u8>], what: &str) {
    let orig = b_word(p);
    p.deliver_b(frames);
    p.settle();
    let wa = p.wcs_a();
    assert_eq!(
        wa.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(),
        [(1, WcStatus::Success)],
        "{what}"
    );
    match op {
        RemoteOp::Write | RemoteOp::WriteWithImm => {
            assert_eq!(p.read_b(IOVA_B, LEN), bytes(LEN, 1), "{what}");
        }
        RemoteOp::Read => assert_eq!(p.read_a(IOVA_A, LEN), bytes(LEN, 2), "{what}"),
        RemoteOp::FetchAdd | RemoteOp::CompareSwap => {
            assert_eq!(p.read_a(IOVA_A, 8), orig.to_le_bytes(), "{what}");
            let want = if op == RemoteOp::FetchAdd {
                orig + 1
            } else {
                0x5555
            };
            assert_eq!(b_word(p), want, "{what}");
        }
    }
    if op == RemoteOp::WriteWithImm {
        let wb = p.wcs_b();
        assert_eq!(
            wb.iter()
                .map(|w| (w.wr_id, w.status, w.opcode, w.imm))
                .collect::<Vec<_>>(),
            [(
                7,
                WcStatus::Success,
                WcOpcode::RecvRdmaWithImm,
                Some(0xABCD)
            )],
            "{what}"
        );
    }
    assert_eq!(p.b.qp_state(p.qb), Some(QpState::Rts), "{what}");
    assert_eq!(p.b.qp_counters(p.qb).unwrap().qp_access_violation, 0);
}

#[test]
fn every_remote_op_needs_its_right_in_the_responder_qps_access_flags() {
    for op in RemoteOp::ALL {
        for access in every_remote_set() {
            let what = format!("{op:?} to a QP granting {access:?}");
            let mut p = pair_granting(access);
            let frames = post_remote(&mut p, op, LEN as u32);
            if access.contains(op.needs()) {
                assert_executed(&mut p, op, &frames, &what);
            } else {
                assert_refused(&mut p, op, &frames, &what);
            }
        }
    }
}

#[test]
fn a_qp_without_remote_rights_still_receives_sends() {
    assert_eq!(ConnectOptions::default().access, Access::NONE);
    assert_eq!(QpAttr::default().access, Access::NONE);
    let mut p = Pair::new(opts(), ConnectOptions::default());
    assert_eq!(p.b.qp(p.qb).unwrap().attr().access, Access::NONE);
    let data = bytes(2000, 9);
    p.a.mr_write(p.mr_a.lkey, IOVA_A, &data).unwrap();
    p.b.post_recv(p.qb, recv_wr_b(&p, 5, 2000)).unwrap();
    p.a.post_send(p.qa, send_wr_a(&p, 1, SendOp::SendWithImm, 2000))
        .unwrap();
    p.settle();
    assert_eq!(p.wcs_a()[0].status, WcStatus::Success);
    let wb = p.wcs_b();
    assert_eq!(
        (wb[0].wr_id, wb[0].status, wb[0].byte_len),
        (5, WcStatus::Success, 2000)
    );
    assert_eq!(p.read_b(IOVA_B, 2000), data);
}

/// As in rxe, the QP's rights are checked right after the opcode
/// sequence: before a WRITE with immediate looks for a receive (no RNR
/// NAK), before a zero-length WRITE or READ is let through without a key
/// (IBTA C9-88 exempts the key, not the QP's rights), and before the
/// R_Key (the QP's refusal is counted, not the key's).
#[test]
fn the_qps_rights_are_checked_before_receives_lengths_and_keys() {
    // A WRITE with immediate and no receive posted.
    let mut p = pair_granting(Access::REMOTE_READ | Access::REMOTE_ATOMIC);
    let mut wr = rdma_wr(&p, 1, SendOp::WriteWithImm, 64, 0);
    wr.imm = 1;
    p.a.post_send(p.qa, wr).unwrap();
    let f = p.tx_a();
    assert_refused(
        &mut p,
        RemoteOp::Write,
        &f,
        "WRITE with immediate, no receive",
    );
    assert_eq!(p.b.qp_counters(p.qb).unwrap().send_rnr_err, 0);

    // Zero-length WRITE and READ.
    for op in [SendOp::Write, SendOp::Read] {
        let mut p = pair_granting(Access::REMOTE_ATOMIC);
        p.a.post_send(p.qa, rdma_wr(&p, 1, op, 0, 0)).unwrap();
        let f = p.tx_a();
        assert_refused(&mut p, RemoteOp::Write, &f, &format!("zero-length {op:?}"));
    }

    // A WRITE naming no region at all.
    let mut p = pair_granting(Access::REMOTE_READ);
    let mut wr = write_wr(&p, 1, 64, 0);
    wr.rkey ^= 0x100;
    p.a.post_send(p.qa, wr).unwrap();
    let f = p.tx_a();
    assert_refused(&mut p, RemoteOp::Write, &f, "WRITE with an unknown R_Key");
}

/// The flags apply from the next packet on when changed in RTS (verbs
/// RTS->RTS), and every packet of a WRITE is checked (rxe checks each):
/// a message the QP stops granting mid-way is refused at its next packet,
/// and nothing after that packet lands.
#[test]
fn rights_changed_in_rts_apply_from_the_next_packet() {
    let mut p = pair_granting(Access::NONE);
    let grant = |p: &mut Pair, access: Access| {
        let attr = QpAttr {
            state: QpState::Rts,
            access,
            ..QpAttr::default()
        };
        p.b.modify_qp(p.qb, &attr, QpAttrMask::STATE | QpAttrMask::ACCESS_FLAGS)
            .unwrap();
        assert_eq!(p.b.qp(p.qb).unwrap().attr().access, access);
    };
    grant(&mut p, Access::REMOTE_WRITE);
    let f = post_remote(&mut p, RemoteOp::Write, LEN as u32);
    assert_eq!(f.len(), 3);
    p.deliver_b(&f[..1]);
    assert!(p.tx_b().is_empty(), "the first packet asks for no ACK");
    grant(&mut p, Access::REMOTE_READ);
    p.deliver_b(&f[1..]);
    let n = p.tx_b();
    assert_eq!(n.len(), 1);
    assert_eq!((syndrome(&n[0]), psn(&n[0])), (0x62, psn(&f[1])));
    assert_eq!(p.b.qp_state(p.qb), Some(QpState::Error));
    assert_eq!(p.b.qp_counters(p.qb).unwrap().qp_access_violation, 1);
    // The first packet had landed; the refused one and the rest did not.
    let mut want = bytes(LEN, 1);
    want[1024..].copy_from_slice(&bytes(LEN, 2)[1024..]);
    assert_eq!(p.read_b(IOVA_B, LEN), want);
    p.deliver_a(&n);
    assert_eq!(p.wcs_a()[0].status, WcStatus::RemoteAccessError);
}
