//! Two simulated nodes, A and B, one RC QP each, connected over seeded
//! links that reorder and duplicate and, when lossy, lose and corrupt:
//! what the tests of one QP pair under loss share (`qp_access.rs`,
//! `pd.rs`).

use core::net::{IpAddr, Ipv4Addr};
use core::time::Duration;

use proto::endpoint::{ConnectOptions, Endpoint, EndpointConfig, RemoteQp};
use proto::rc::{Access, QpInitAttr, SgeCaps, WcStatus, WorkCompletion};
use proto::sim::{Impairments, LinkConfig, Simulator};

/// A's node.
pub const A: usize = 0;
/// B's node.
pub const B: usize = 1;

/// 10 Gbit/s, 5 us, 5% reordered, 2% duplicated; when `lossy` also 5%
/// lost and 2% corrupted.
pub fn link(lossy: bool) -> LinkConfig {
    LinkConfig {
        latency: Duration::from_micros(5),
        rate_bps: 10_000_000_000,
        impair: Impairments {
            loss: if lossy { 0.05 } else { 0.0 },
            reorder: 0.05,
            reorder_delay: Duration::from_micros(20),
            duplicate: 0.02,
            corrupt: if lossy { 0.02 } else { 0.0 },
        },
    }
}

/// `len` bytes a region starts with, different for each `side`.
pub fn pattern(side: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i % 251) as u8 ^ side.wrapping_mul(0x5B))
        .collect()
}

/// Append `node`'s completions on `cq` to `out` as `(wr_id, status)`.
pub fn poll(sim: &mut Simulator, node: usize, cq: u32, out: &mut Vec<(u64, WcStatus)>) {
    let mut buf = [WorkCompletion::default(); 16];
    loop {
        let n = sim.endpoint(node).poll_cq(cq, &mut buf);
        if n == 0 {
            return;
        }
        out.extend(buf[..n].iter().map(|w| (w.wr_id, w.status)));
    }
}

/// Frames `node`'s link lost or corrupted.
pub fn impaired(sim: &Simulator, node: usize) -> u64 {
    let s = sim.node(node).link.stats;
    s.dropped + s.corrupted
}

/// How [`connect`] makes each side's QP.
#[derive(Debug, Clone, Copy)]
pub struct Side {
    /// Its protection domain.
    pub pd: u32,
    /// The remote operations the peer may run on it.
    pub access: Access,
}

/// A connected pair in its simulator.
pub struct Pair {
    pub sim: Simulator,
    pub qa: u32,
    pub qb: u32,
    pub cq_a: u32,
    pub cq_b: u32,
}

/// A on a lossy link and B on `link(b_lossy)`, keys and numbers drawn
/// under `seed`; each with a CQ and a QP of `depth` send and receive
/// requests (every request signaled) made as `a` / `b` say, connected
/// with a short ACK timeout (`timeout` 8) and RNR timer.
pub fn connect(seed: u64, b_lossy: bool, depth: u32, a: Side, b: Side) -> Pair {
    connect_with_caps(seed, b_lossy, depth, a, b, SgeCaps::default())
}

/// [`connect`], both QPs made with the scatter/gather capacities `caps`.
pub fn connect_with_caps(
    seed: u64,
    b_lossy: bool,
    depth: u32,
    a: Side,
    b: Side,
    caps: SgeCaps,
) -> Pair {
    let mut sim = Simulator::new(seed);
    let ip = |x| IpAddr::V4(Ipv4Addr::new(10, 0, 0, x));
    let cfg = |mac: u8, x| EndpointConfig {
        local_mac: [2, 0, 0, 0, 0, mac],
        local_ip: ip(x),
        seed: [seed, u64::from(mac)],
        ..EndpointConfig::default()
    };
    assert_eq!(sim.add_node(Endpoint::new(cfg(0xA, 1)), link(true)), A);
    assert_eq!(sim.add_node(Endpoint::new(cfg(0xB, 2)), link(b_lossy)), B);
    let mut qp = |node, side: Side| {
        let cq = sim.endpoint(node).create_cq(64);
        let init = QpInitAttr {
            send_cq: cq,
            recv_cq: cq,
            max_send_wr: depth,
            max_recv_wr: depth,
            sq_sig_all: true,
            srq: None,
        };
        let qpn = sim.endpoint(node).create_qp_in(side.pd, init).unwrap();
        sim.endpoint(node).set_qp_sge_caps(qpn, caps).unwrap();
        (cq, qpn)
    };
    let ((cq_a, qa), (cq_b, qb)) = (qp(A, a), qp(B, b));
    let psn_a = sim.endpoint(A).initial_psn(qa).unwrap();
    let psn_b = sim.endpoint(B).initial_psn(qb).unwrap();
    let opts = |sq_psn, access| ConnectOptions {
        timeout: 8,
        min_rnr_timer: 1,
        sq_psn,
        access,
        ..ConnectOptions::default()
    };
    let remote = |qpn, psn, mac: u8, x| RemoteQp {
        qpn,
        psn,
        mac: [2, 0, 0, 0, 0, mac],
        ip: ip(x),
    };
    sim.endpoint(A)
        .connect(qa, &remote(qb, psn_b, 0xB, 2), &opts(psn_a, a.access))
        .unwrap();
    sim.endpoint(B)
        .connect(qb, &remote(qa, psn_a, 0xA, 1), &opts(psn_b, b.access))
        .unwrap();
    Pair {
        sim,
        qa,
        qb,
        cq_a,
        cq_b,
    }
}
