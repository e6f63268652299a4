//! UC QPs over seeded links that lose, corrupt, reorder and duplicate
//! (`rc/uc.rs`): a stream of SENDs (with and without immediate) and RDMA
//! WRITEs (with and without immediate), 1 to 12 packets each. Messages are
//! lost, never corrupted and never completed twice: every request
//! completes at A as it leaves; every receive B completes is one message,
//! in order, byte for byte (a SEND's bytes in its receive, a WRITE with
//! immediate's in its target); a WRITE without immediate leaves each byte
//! of its target either as it was or as the message says; B never sends a
//! frame.

use core::net::{IpAddr, Ipv4Addr};
use core::time::Duration;
use std::collections::HashSet;

use proto::endpoint::{ConnectOptions, Endpoint, EndpointConfig, RemoteQp};
use proto::rc::{
    Access, MrKeys, Mtu, QpInitAttr, RecvWr, SendOp, SendWr, Sge, WcOpcode, WcStatus,
    WorkCompletion,
};
use proto::sim::Simulator;
use proto::time::Instant;

use crate::lossy_pair::{impaired, link, pattern, A, B};
use crate::sgl_model::Rand;

const MESSAGES: u64 = 240;
/// Bytes of each message's slot (its source at A, its WRITE target at B),
/// and of each receive buffer.
const SLOT: u64 = 16 * 1024;
const RECVS: u64 = 64;
const IOVA_A: u64 = 0x10_0000;
const IOVA_B: u64 = 0x4000_0000;
/// B's receive buffers, after the WRITE targets.
const RECV_AT: u64 = IOVA_B + MESSAGES * SLOT;
const REGION_A: usize = (MESSAGES * SLOT) as usize;
const REGION_B: usize = ((MESSAGES + RECVS) * SLOT) as usize;
/// Immediate data of message `m`.
const fn imm(m: u64) -> u32 {
    0xABC0_0000 ^ m as u32
}

/// The bytes of message `m` of `len` bytes: its number first (a SEND's
/// receive says which message it holds), then its own pattern.
fn message_bytes(m: u64, len: usize) -> Vec<u8> {
    let mut v = pattern(0x40 ^ m as u8, len);
    let id = m.to_le_bytes();
    let n = len.min(8);
    v[..n].copy_from_slice(&id[..n]);
    v
}

struct Message {
    op: SendOp,
    len: u32,
}

/// Two nodes with one UC QP each, connected (path MTU 1024), A's link
/// lossy or not, B's lossy; regions registered.
fn uc_pair(seed: u64, lossy: bool) -> (Simulator, u32, u32, u32, u32, MrKeys, MrKeys) {
    let mut sim = Simulator::new(seed);
    let ip = |x| IpAddr::V4(Ipv4Addr::new(10, 0, 0, x));
    let cfg = |mac: u8, x| EndpointConfig {
        local_mac: [2, 0, 0, 0, 0, mac],
        local_ip: ip(x),
        seed: [seed, u64::from(mac)],
        ..EndpointConfig::default()
    };
    assert_eq!(sim.add_node(Endpoint::new(cfg(0xA, 1)), link(lossy)), A);
    assert_eq!(sim.add_node(Endpoint::new(cfg(0xB, 2)), link(true)), B);
    let mut qp = |node| {
        let cq = sim.endpoint(node).create_cq(256);
        let init = QpInitAttr {
            send_cq: cq,
            recv_cq: cq,
            max_send_wr: 32,
            max_recv_wr: RECVS as u32,
            sq_sig_all: true,
            srq: None,
        };
        (cq, sim.endpoint(node).create_uc_qp_in(0, init).unwrap())
    };
    let ((cq_a, qa), (cq_b, qb)) = (qp(A), qp(B));
    let psn_a = sim.endpoint(A).initial_psn(qa).unwrap();
    let psn_b = sim.endpoint(B).initial_psn(qb).unwrap();
    let opts = |sq_psn| ConnectOptions {
        sq_psn,
        path_mtu: Mtu::Mtu1024,
        access: Access::REMOTE_WRITE,
        ..ConnectOptions::default()
    };
    let remote = |qpn, psn, mac: u8, x| RemoteQp {
        qpn,
        psn,
        mac: [2, 0, 0, 0, 0, mac],
        ip: ip(x),
    };
    sim.endpoint(A)
        .connect(qa, &remote(qb, psn_b, 0xB, 2), &opts(psn_a))
        .unwrap();
    sim.endpoint(B)
        .connect(qb, &remote(qa, psn_a, 0xA, 1), &opts(psn_b))
        .unwrap();
    let ka = sim
        .endpoint(A)
        .reg_mr(Box::new(vec![0u8; REGION_A]), IOVA_A, Access::ALL)
        .unwrap();
    let kb = sim
        .endpoint(B)
        .reg_mr(Box::new(pattern(2, REGION_B)), IOVA_B, Access::ALL)
        .unwrap();
    (sim, qa, qb, cq_a, cq_b, ka, kb)
}

/// What B received, checked as it completes.
#[derive(Default)]
struct Received {
    /// Messages B completed a receive for, in order.
    ids: Vec<u64>,
    seen: HashSet<u64>,
}

/// Check B's completion `wc` against the stream (see the module notes)
/// and post its receive again.
fn check_receive(
    sim: &mut Simulator,
    qb: u32,
    kb: MrKeys,
    msgs: &[Message],
    wc: &WorkCompletion,
    got: &mut Received,
    seed: u64,
) {
    assert_eq!(wc.status, WcStatus::Success, "seed {seed}: {wc:?}");
    let slot = wc.wr_id;
    let id = match wc.opcode {
        WcOpcode::Recv => {
            let mut head = [0u8; 8];
            sim.endpoint(B)
                .mr_read(kb.lkey, RECV_AT + slot * SLOT, &mut head)
                .unwrap();
            u64::from_le_bytes(head)
        }
        WcOpcode::RecvRdmaWithImm => u64::from(wc.imm.expect("immediate") ^ imm(0)),
        other => panic!("seed {seed}: {other:?}"),
    };
    assert!(id < MESSAGES, "seed {seed}: {wc:?}");
    let m = &msgs[id as usize];
    assert!(
        got.seen.insert(id),
        "seed {seed}: message {id} completed twice"
    );
    assert!(
        got.ids.last().is_none_or(|&l| l < id),
        "seed {seed}: {id} after {:?}",
        got.ids.last()
    );
    got.ids.push(id);
    assert_eq!(wc.byte_len, m.len, "seed {seed}: message {id}");
    let want = message_bytes(id, m.len as usize);
    let mut bytes = vec![0u8; m.len as usize];
    match m.op {
        SendOp::Send | SendOp::SendWithImm => {
            assert_eq!(wc.opcode, WcOpcode::Recv, "seed {seed}");
            let want_imm = (m.op == SendOp::SendWithImm).then_some(imm(id));
            assert_eq!(wc.imm, want_imm, "seed {seed}: message {id}");
            sim.endpoint(B)
                .mr_read(kb.lkey, RECV_AT + slot * SLOT, &mut bytes)
                .unwrap();
        }
        SendOp::WriteWithImm => {
            assert_eq!(wc.opcode, WcOpcode::RecvRdmaWithImm, "seed {seed}");
            sim.endpoint(B)
                .mr_read(kb.lkey, IOVA_B + id * SLOT, &mut bytes)
                .unwrap();
        }
        op => panic!("seed {seed}: message {id} ({op:?}) consumed a receive"),
    }
    assert!(bytes == want, "seed {seed}: message {id}'s bytes");
    let again = RecvWr {
        wr_id: slot,
        sge: Sge {
            lkey: kb.lkey,
            addr: RECV_AT + slot * SLOT,
            length: SLOT as u32,
        },
    };
    sim.endpoint(B).post_recv(qb, again).unwrap();
}

/// The stream of seed `seed` over a link that loses (`lossy`) or only
/// reorders and duplicates; returns (messages B received, B's dropped
/// count).
fn run(seed: u64, lossy: bool) -> (usize, u64) {
    let (mut sim, qa, qb, cq_a, cq_b, ka, kb) = uc_pair(seed, lossy);
    let mut r = Rand(seed * 0x9E37);
    let ops = [
        SendOp::Send,
        SendOp::SendWithImm,
        SendOp::Write,
        SendOp::WriteWithImm,
    ];
    let msgs: Vec<Message> = (0..MESSAGES)
        .map(|_| {
            let op = ops[r.below(4) as usize];
            let len = match r.below(3) {
                0 => 8 + r.below(1017),
                _ => 8 + r.below(12 * 1024 - 8),
            } as u32;
            Message { op, len }
        })
        .collect();
    for (m, msg) in (0..).zip(&msgs) {
        sim.endpoint(A)
            .mr_write(
                ka.lkey,
                IOVA_A + m * SLOT,
                &message_bytes(m, msg.len as usize),
            )
            .unwrap();
    }
    for k in 0..RECVS {
        let wr = RecvWr {
            wr_id: k,
            sge: Sge {
                lkey: kb.lkey,
                addr: RECV_AT + k * SLOT,
                length: SLOT as u32,
            },
        };
        sim.endpoint(B).post_recv(qb, wr).unwrap();
    }
    let (mut posted, mut done_a) = (0u64, Vec::new());
    let mut got = Received::default();
    let mut wcs = [WorkCompletion::default(); 16];
    let deadline = Instant::ZERO + Duration::from_secs(5);
    let mut step = |sim: &mut Simulator, got: &mut Received| {
        loop {
            let n = sim.endpoint(A).poll_cq(cq_a, &mut wcs);
            if n == 0 {
                break;
            }
            done_a.extend(wcs[..n].iter().map(|w| (w.wr_id, w.status)));
        }
        while posted < MESSAGES && posted - (done_a.len() as u64) < 24 {
            let m = &msgs[posted as usize];
            let mut wr = SendWr::new(
                posted,
                m.op,
                Sge {
                    lkey: ka.lkey,
                    addr: IOVA_A + posted * SLOT,
                    length: m.len,
                },
            );
            wr.remote_addr = IOVA_B + posted * SLOT;
            wr.rkey = kb.rkey;
            wr.imm = imm(posted);
            sim.endpoint(A).post_send(qa, wr).unwrap();
            posted += 1;
        }
        loop {
            let n = sim.endpoint(B).poll_cq(cq_b, &mut wcs);
            if n == 0 {
                break;
            }
            for wc in &wcs[..n] {
                check_receive(sim, qb, kb, &msgs, wc, got, seed);
            }
        }
        done_a.len() as u64 == MESSAGES
    };
    let finished = sim.run_until(deadline, |sim| step(sim, &mut got));
    assert!(finished, "seed {seed}: A completed {posted} posted");
    while sim.now() < deadline && sim.step() {}
    step(&mut sim, &mut got);
    let ok: Vec<_> = (0..MESSAGES).map(|m| (m, WcStatus::Success)).collect();
    assert_eq!(
        done_a, ok,
        "seed {seed}: every request completes at A, in order"
    );
    // A WRITE without immediate: every byte of its target as it was or as
    // the message says (a dropped one may have placed part of itself).
    let before = pattern(2, REGION_B);
    let mut landed_writes = 0;
    for (m, msg) in (0..).zip(&msgs) {
        if msg.op != SendOp::Write {
            continue;
        }
        let at = (m * SLOT) as usize;
        let mut t = vec![0u8; msg.len as usize];
        sim.endpoint(B)
            .mr_read(kb.lkey, IOVA_B + m * SLOT, &mut t)
            .unwrap();
        let want = message_bytes(m, msg.len as usize);
        for (i, &b) in t.iter().enumerate() {
            assert!(
                b == want[i] || b == before[at + i],
                "seed {seed}: WRITE {m} byte {i}"
            );
        }
        landed_writes += usize::from(t == want);
    }
    let cb = sim.endpoint(B).qp_counters(qb).unwrap();
    assert_eq!(
        sim.node(B).link.stats.frames,
        0,
        "seed {seed}: B never sends"
    );
    assert_eq!((cb.acks_sent, cb.naks_sent, cb.sent_pkts), (0, 0, 0));
    let ca = sim.endpoint(A).qp_counters(qa).unwrap();
    assert_eq!(
        (ca.retransmitted_packets, ca.timeouts),
        (0, 0),
        "seed {seed}"
    );
    assert!(landed_writes > 0, "seed {seed}");
    if lossy {
        assert!(impaired(&sim, A) > 0, "seed {seed}");
    }
    (got.ids.len(), cb.uc_messages_dropped)
}

#[test]
fn messages_are_lost_whole_never_corrupted_never_completed_twice() {
    let mut delivered = 0;
    let mut dropped = 0;
    for seed in 1..=6u64 {
        let (d, x) = run(seed, true);
        assert!(d > 0, "seed {seed}: some messages arrive");
        delivered += d;
        dropped += x;
    }
    assert!(dropped > 0, "the lossy links dropped messages");
    assert!(
        delivered > 6 * 60,
        "most receive-taking messages arrive: {delivered}"
    );
}

#[test]
fn reordering_and_duplication_alone_lose_messages_but_never_mix_them() {
    for seed in 11..=13u64 {
        let (d, _) = run(seed, false);
        assert!(d > 0, "seed {seed}");
    }
}
