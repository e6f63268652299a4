//! Transmit order of one QP that is both requester and responder: a lone
//! pending ACK lets one ready request packet go first (the answer of a
//! request/answer exchange reaches the peer without queueing behind the
//! ACK), then follows it; it never waits behind more than one packet.

use crate::support::*;

use proto::rc::{Mtu, SendOp, SendWr, Sge};
use proto::wire::Opcode;

/// B's RDMA WRITE of `len` bytes from its region to A's.
fn write_b_to_a(p: &Pair, wr_id: u64, len: u32) -> SendWr {
    let mut wr = SendWr::new(
        wr_id,
        SendOp::Write,
        Sge {
            lkey: p.mr_b.lkey,
            addr: IOVA_B,
            length: len,
        },
    );
    wr.remote_addr = IOVA_A;
    wr.rkey = p.mr_a.rkey;
    wr
}

#[test]
fn answer_leaves_before_the_lone_ack_and_the_ack_follows() {
    let mut p = Pair::default_pair();
    p.a.post_send(p.qa, write_wr(&p, 1, 64, 0)).unwrap();
    let req = p.tx_a();
    p.deliver_b(&req);
    // B now owes an ACK; its application answers with a WRITE of its own.
    p.b.post_send(p.qb, write_b_to_a(&p, 2, 64)).unwrap();
    let out = p.tx_b();
    let ops: Vec<Opcode> = out.iter().map(|f| opcode(f)).collect();
    assert_eq!(ops, [Opcode::WriteOnly, Opcode::Acknowledge]);
    assert_eq!(psn(&out[1]), psn(&req[0]), "the ACK covers A's request");
    // Both are still correct for A: its WRITE completes, B's data lands.
    p.deliver_a(&out);
    p.settle();
    assert_eq!(p.read_a(IOVA_A, 64), p.read_b(IOVA_B, 64));
}

#[test]
fn a_streaming_requester_delays_the_ack_by_one_packet_at_most() {
    let mut p = Pair::new(opts_mtu(Mtu::Mtu256), opts_mtu(Mtu::Mtu256));
    p.a.post_send(p.qa, write_wr(&p, 1, 64, 0)).unwrap();
    let req = p.tx_a();
    p.deliver_b(&req);
    // B streams a 10-packet WRITE while it owes A an ACK.
    p.b.post_send(p.qb, write_b_to_a(&p, 2, 256 * 10)).unwrap();
    let out = p.tx_b();
    let ack_at = out
        .iter()
        .position(|f| opcode(f) == Opcode::Acknowledge)
        .expect("the ACK is sent");
    assert_eq!(ack_at, 1, "the ACK follows the first request packet");
    assert_eq!(out.len(), 11);
}

#[test]
fn a_read_response_is_never_held_back() {
    let mut p = Pair::default_pair();
    // A READ request: B owes a READ response, not a lone ACK.
    p.a.post_send(p.qa, read_wr(&p, 1, 64, 0)).unwrap();
    let req = p.tx_a();
    p.deliver_b(&req);
    p.b.post_send(p.qb, write_b_to_a(&p, 2, 64)).unwrap();
    let out = p.tx_b();
    let ops: Vec<Opcode> = out.iter().map(|f| opcode(f)).collect();
    assert_eq!(ops, [Opcode::ReadRespOnly, Opcode::WriteOnly]);
}
