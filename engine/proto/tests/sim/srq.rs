//! A shared receive queue under loss, reordering, duplication and
//! corruption: B's QPs, each connected to one of A's, take their receives
//! from one SRQ that B refills when its limit fires, late (a consumer that
//! takes a while to answer the event: meanwhile the SRQ runs empty, and
//! the SENDs that find it so are RNR NAKed and retried), arming the limit
//! again after each refill. Every A QP sends a
//! stream of SENDs of one to three packets. Every message completes on
//! both sides, byte-exact, in its QP's order; every WQE posted is taken
//! exactly once (none twice, none lost); each QP's WQEs were taken in its
//! messages' order. Run once with one-SGE receives and once with
//! receives of five-piece SGE lists laid out backwards in their slot
//! (each message scattered across them in list order).

use core::net::{IpAddr, Ipv4Addr};
use core::time::Duration;
use std::collections::HashMap;

use proto::endpoint::{AsyncEvent, ConnectOptions, Endpoint, EndpointConfig, RemoteQp};
use proto::rc::{
    Access, QpInitAttr, RecvWr, SendOp, SendWr, Sge, SrqAttr, SrqAttrMask, WcOpcode, WcStatus,
    WorkCompletion,
};
use proto::sim::Simulator;
use proto::time::Instant;

use crate::lossy_pair::{impaired, link, A, B};

/// QP pairs.
const QPS: u64 = 8;
/// Messages each A QP sends.
const MESSAGES: u64 = 24;
const TOTAL: u64 = QPS * MESSAGES;
/// Bytes of a message's slot and of a receive buffer.
const SLOT: u64 = 4096;
const IOVA_A: u64 = 0x10_0000;
const IOVA_B: u64 = 0x40_0000;
/// The SRQ's size, the most B keeps posted, and its limit.
const SRQ_WR: u32 = 16;
const KEEP_POSTED: usize = 10;
const LIMIT: u32 = 4;
/// How long after the limit event B refills.
const REFILL_AFTER: Duration = Duration::from_micros(30);

/// Bytes of message `m` of QP `i`: 1 to 3000 (one to three packets at
/// MTU 1024).
fn len(i: u64, m: u64) -> u32 {
    1 + ((i * 733 + m * 1301) % 3000) as u32
}

/// Its bytes.
fn content(i: u64, m: u64) -> Vec<u8> {
    (0..len(i, m) as usize)
        .map(|k| (k % 251) as u8 ^ (i as u8).wrapping_mul(31) ^ (m as u8).wrapping_mul(7))
        .collect()
}

/// The pieces of a list receive in slot `k` (lengths [`PIECES`], the
/// first piece last in the slot): what the message's bytes fill in order.
const PIECES: [u32; 5] = [500, 700, 600, 800, 496];

fn pieces(lkey: u32, k: u64) -> Vec<Sge> {
    let mut end = IOVA_B + k * SLOT + PIECES.iter().sum::<u32>() as u64;
    PIECES
        .iter()
        .map(|&length| {
            end -= u64::from(length);
            Sge {
                lkey,
                addr: end,
                length,
            }
        })
        .collect()
}

fn run(seed: u64, lists: bool) {
    let mut sim = Simulator::new(seed);
    let ip = |x| IpAddr::V4(Ipv4Addr::new(10, 0, 0, x));
    let cfg = |mac: u8, x| EndpointConfig {
        local_mac: [2, 0, 0, 0, 0, mac],
        local_ip: ip(x),
        seed: [seed, u64::from(mac)],
        ..EndpointConfig::default()
    };
    assert_eq!(sim.add_node(Endpoint::new(cfg(0xA, 1)), link(true)), A);
    assert_eq!(sim.add_node(Endpoint::new(cfg(0xB, 2)), link(true)), B);
    let cq_a = sim.endpoint(A).create_cq(4096);
    let cq_b = sim.endpoint(B).create_cq(4096);
    let mr_a = sim
        .endpoint(A)
        .reg_mr(
            Box::new(vec![0u8; (SLOT * TOTAL) as usize]),
            IOVA_A,
            Access::ALL,
        )
        .unwrap();
    let mr_b = sim
        .endpoint(B)
        .reg_mr(
            Box::new(vec![0u8; (SLOT * TOTAL) as usize]),
            IOVA_B,
            Access::ALL,
        )
        .unwrap();
    let srq = sim
        .endpoint(B)
        .create_srq(
            0,
            SrqAttr {
                max_wr: SRQ_WR,
                max_sge: if lists { PIECES.len() as u32 } else { 1 },
                srq_limit: LIMIT,
            },
        )
        .unwrap();
    let init = |cq, srq| QpInitAttr {
        send_cq: cq,
        recv_cq: cq,
        max_send_wr: MESSAGES as u32,
        max_recv_wr: 1,
        sq_sig_all: true,
        srq,
    };
    let opts = |sq_psn| ConnectOptions {
        timeout: 8,
        min_rnr_timer: 1,
        sq_psn,
        ..ConnectOptions::default()
    };
    let remote = |qpn, psn, mac: u8, x| RemoteQp {
        qpn,
        psn,
        mac: [2, 0, 0, 0, 0, mac],
        ip: ip(x),
    };
    let mut pairs = Vec::new();
    for _ in 0..QPS {
        let qa = sim.endpoint(A).create_qp(init(cq_a, None)).unwrap();
        let qb = sim.endpoint(B).create_qp(init(cq_b, Some(srq))).unwrap();
        let pa = sim.endpoint(A).initial_psn(qa).unwrap();
        let pb = sim.endpoint(B).initial_psn(qb).unwrap();
        sim.endpoint(A)
            .connect(qa, &remote(qb, pb, 0xB, 2), &opts(pa))
            .unwrap();
        sim.endpoint(B)
            .connect(qb, &remote(qa, pa, 0xA, 1), &opts(pb))
            .unwrap();
        pairs.push((qa, qb));
    }
    let index_of_b: HashMap<u32, u64> = pairs
        .iter()
        .enumerate()
        .map(|(i, &(_, qb))| (qb, i as u64))
        .collect();
    // Every message posted up front.
    for (i, &(qa, _)) in pairs.iter().enumerate() {
        let i = i as u64;
        for m in 0..MESSAGES {
            let at = IOVA_A + (i * MESSAGES + m) * SLOT;
            sim.endpoint(A)
                .mr_write(mr_a.lkey, at, &content(i, m))
                .unwrap();
            let wr = SendWr::new(
                i * MESSAGES + m,
                SendOp::Send,
                Sge {
                    lkey: mr_a.lkey,
                    addr: at,
                    length: len(i, m),
                },
            );
            sim.endpoint(A).post_send(qa, wr).unwrap();
        }
    }
    // WQE k receives into slot k of B's region.
    let mut posted = 0u64;
    let refill = |ep: &mut Endpoint, posted: &mut u64| {
        while *posted < TOTAL && ep.srq(srq).unwrap().posted() < KEEP_POSTED {
            let wr = RecvWr {
                wr_id: *posted,
                sge: Sge {
                    lkey: mr_b.lkey,
                    addr: IOVA_B + *posted * SLOT,
                    length: SLOT as u32,
                },
            };
            if lists {
                ep.post_srq_recv_sgl(srq, *posted, &pieces(mr_b.lkey, *posted))
                    .unwrap();
            } else {
                ep.post_srq_recv(srq, wr).unwrap();
            }
            *posted += 1;
        }
    };
    refill(sim.endpoint(B), &mut posted);
    let (mut got_a, mut got_b) = (Vec::new(), Vec::new());
    let mut events = 0;
    let mut refill_at = None;
    let poll = |ep: &mut Endpoint, cq, out: &mut Vec<WorkCompletion>| {
        let mut buf = [WorkCompletion::default(); 32];
        loop {
            let n = ep.poll_cq(cq, &mut buf);
            if n == 0 {
                return;
            }
            out.extend_from_slice(&buf[..n]);
        }
    };
    let done = sim.run_until(Instant::ZERO + Duration::from_secs(20), |sim| {
        let now = sim.now();
        poll(sim.endpoint(A), cq_a, &mut got_a);
        let b = sim.endpoint(B);
        poll(b, cq_b, &mut got_b);
        while let Some(e) = b.poll_event() {
            assert_eq!(e, AsyncEvent::SrqLimitReached { srq });
            assert_eq!(b.query_srq(srq).unwrap().srq_limit, 0, "disarmed");
            assert!(
                (b.srq(srq).unwrap().posted() as u32) < LIMIT,
                "fewer than the limit"
            );
            events += 1;
            refill_at = Some(now + REFILL_AFTER);
        }
        if refill_at.is_some_and(|t| now >= t) {
            refill_at = None;
            refill(b, &mut posted);
            b.modify_srq(
                srq,
                &SrqAttr {
                    srq_limit: LIMIT,
                    ..SrqAttr::default()
                },
                SrqAttrMask::LIMIT,
            )
            .unwrap();
        }
        got_a.len() as u64 == TOTAL && got_b.len() as u64 == TOTAL
    });
    let what = format!("seed {seed}, lists {lists}");
    assert!(
        done,
        "{what}: {} of A's and {} of B's completions, {posted} WQEs posted",
        got_a.len(),
        got_b.len()
    );
    // A: every SEND succeeded, each QP's in its order.
    for (i, &(qa, _)) in pairs.iter().enumerate() {
        let ids: Vec<u64> = got_a
            .iter()
            .filter(|w| w.qpn == qa)
            .map(|w| {
                assert_eq!(w.status, WcStatus::Success, "{what}");
                w.wr_id
            })
            .collect();
        let want: Vec<u64> = (0..MESSAGES).map(|m| i as u64 * MESSAGES + m).collect();
        assert_eq!(ids, want, "{what}: QP {i}'s sends");
    }
    // B: every WQE taken exactly once.
    let mut wqes: Vec<u64> = got_b.iter().map(|w| w.wr_id).collect();
    wqes.sort_unstable();
    assert_eq!(wqes, (0..TOTAL).collect::<Vec<_>>(), "{what}: WQEs");
    // Each QP's k-th receive holds its k-th message, in the WQE it took,
    // and its WQEs were taken in its messages' order.
    let mut next = vec![0u64; QPS as usize];
    let mut last_wqe = vec![None::<u64>; QPS as usize];
    for w in &got_b {
        let i = index_of_b[&w.qpn];
        let m = next[i as usize];
        next[i as usize] += 1;
        assert_eq!(
            (w.status, w.opcode),
            (WcStatus::Success, WcOpcode::Recv),
            "{what}"
        );
        assert_eq!(w.byte_len, len(i, m), "{what}: QP {i} message {m}");
        let mut buf = vec![0u8; len(i, m) as usize];
        if lists {
            let mut at = 0usize;
            for g in pieces(mr_b.lkey, w.wr_id) {
                let n = (g.length as usize).min(buf.len() - at);
                sim.endpoint(B)
                    .mr_read(mr_b.lkey, g.addr, &mut buf[at..at + n])
                    .unwrap();
                at += n;
            }
        } else {
            sim.endpoint(B)
                .mr_read(mr_b.lkey, IOVA_B + w.wr_id * SLOT, &mut buf)
                .unwrap();
        }
        assert!(
            buf == content(i, m),
            "{what}: QP {i} message {m} in WQE {}",
            w.wr_id
        );
        if let Some(prev) = last_wqe[i as usize] {
            assert!(w.wr_id > prev, "{what}: QP {i}'s WQEs in order");
        }
        last_wqe[i as usize] = Some(w.wr_id);
    }
    let s = sim.endpoint(B).srq(srq).unwrap().counters();
    assert_eq!((s.posted, s.taken), (TOTAL, TOTAL), "{what}");
    assert!(s.rnr_naks > 0, "{what}: the SRQ never ran empty");
    assert!(events > 0, "{what}: the limit never fired");
    assert_eq!(s.limit_events, events, "{what}");
    assert!(
        impaired(&sim, A) > 0 && impaired(&sim, B) > 0,
        "{what}: the links lost nothing"
    );
}

#[test]
fn many_qps_share_one_srq_under_loss_reordering_and_duplication() {
    for seed in 1..=4 {
        run(seed, false);
    }
}

#[test]
fn many_qps_share_one_srq_of_sge_lists_under_loss_reordering_and_duplication() {
    for seed in 1..=4 {
        run(seed, true);
    }
}
