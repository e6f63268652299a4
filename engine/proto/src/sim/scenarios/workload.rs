//! Verified traffic between two simulated endpoints: every message's bytes
//! are checked at the destination, every completion is checked for order,
//! status and uniqueness. Used by `roce-xdp sim` and the `sim_*` tests.

use core::fmt;
use core::net::{IpAddr, Ipv4Addr};
use core::time::Duration;

use std::collections::VecDeque;

use crate::sim::rng::mix;
use crate::sim::{Link, LinkConfig, LinkStats, Simulator, MAX_FRAME};

use crate::endpoint::{ConnectOptions, Endpoint, EndpointConfig, RemoteQp};
use crate::rc::{
    Access, Counters, MrKeys, Mtu, QpInitAttr, RecvWr, SendOp, SendWr, Sge, WcStatus,
    WorkCompletion,
};
use crate::time::Instant;

/// Which operation the workload runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    /// RDMA WRITE; bytes checked at the responder when the write completes.
    Write,
    /// SEND (odd messages with immediate); checked at each receive completion.
    Send,
    /// RDMA READ; checked at the requester.
    Read,
    /// Alternating fetch-and-add and compare-and-swap on one counter per QP;
    /// each must return the number of atomics before it (exactly once).
    Atomic,
}

impl Op {
    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            Op::Write => "write",
            Op::Send => "send",
            Op::Read => "read",
            Op::Atomic => "atomic",
        }
    }
}

impl core::str::FromStr for Op {
    type Err = String;
    fn from_str(s: &str) -> Result<Op, String> {
        match s {
            "write" => Ok(Op::Write),
            "send" => Ok(Op::Send),
            "read" => Ok(Op::Read),
            "atomic" => Ok(Op::Atomic),
            _ => Err(format!("unknown op {s:?}: use write, send, read or atomic")),
        }
    }
}

/// Parameters of a verified run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WorkloadConfig {
    pub op: Op,
    /// Messages in total, spread over the QPs.
    pub messages: u64,
    /// Bytes per message (ignored for atomics: 8).
    pub size: u32,
    pub mtu: Mtu,
    pub qps: u32,
    /// Both directions use this link.
    pub link: LinkConfig,
    pub seed: u64,
    /// Messages in flight per QP.
    pub window: u32,
    /// ACK timeout exponent; `None` derives one from the link.
    pub timeout: Option<u8>,
    pub retry_cnt: u8,
    /// Give up when simulated time passes this.
    pub max_sim_time: Duration,
}

impl Default for WorkloadConfig {
    fn default() -> Self {
        WorkloadConfig {
            op: Op::Write,
            messages: 100,
            size: 4096,
            mtu: Mtu::Mtu1024,
            qps: 1,
            link: LinkConfig::default(),
            seed: 1,
            window: 4,
            timeout: None,
            retry_cnt: 7,
            max_sim_time: Duration::from_secs(600),
        }
    }
}

/// Outcome of a verified run.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WorkloadReport {
    pub messages_posted: u64,
    /// Messages whose completion was successful, in order, and verified.
    pub messages_completed: u64,
    pub bytes_verified: u64,
    /// Messages whose bytes (or length/immediate) were wrong.
    pub data_errors: u64,
    pub duplicate_completions: u64,
    pub out_of_order_completions: u64,
    /// Completions with a status other than success.
    pub error_completions: u64,
    /// Messages never completed.
    pub lost_messages: u64,
    pub sim_time_us: u64,
    /// Summed counters of both endpoints.
    pub counters: Counters,
    /// Summed link counters of both directions.
    pub link: LinkStats,
    /// The first problem seen, for humans.
    pub first_error: Option<String>,
    /// Whether the run finished before the deadline.
    pub finished: bool,
}

impl WorkloadReport {
    /// Every message delivered once, byte-exact, in order, and nothing else.
    pub fn ok(&self) -> bool {
        self.finished
            && self.data_errors == 0
            && self.duplicate_completions == 0
            && self.out_of_order_completions == 0
            && self.error_completions == 0
            && self.lost_messages == 0
            && self.messages_completed == self.messages_posted
    }
}

impl fmt::Display for WorkloadReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "messages completed     {} / {}",
            self.messages_completed, self.messages_posted
        )?;
        writeln!(f, "bytes verified         {}", self.bytes_verified)?;
        writeln!(f, "data errors            {}", self.data_errors)?;
        writeln!(f, "duplicate completions  {}", self.duplicate_completions)?;
        writeln!(
            f,
            "out-of-order compl.    {}",
            self.out_of_order_completions
        )?;
        writeln!(f, "error completions      {}", self.error_completions)?;
        writeln!(f, "lost messages          {}", self.lost_messages)?;
        writeln!(f, "simulated time         {} us", self.sim_time_us)?;
        writeln!(
            f,
            "link: frames {} dropped {} reordered {} duplicated {} corrupted {}",
            self.link.frames,
            self.link.dropped,
            self.link.reordered,
            self.link.duplicated,
            self.link.corrupted
        )?;
        if let Some(e) = &self.first_error {
            writeln!(f, "first error: {e}")?;
        }
        Ok(())
    }
}

struct QpRun {
    qa: u32,
    qb: u32,
    /// In the queue of QPs to post on.
    queued: bool,
    done: bool,
    count: u64,
    posted: u64,
    completed: u64,
    recv_posted: u64,
    recv_completed: u64,
    a_mr: MrKeys,
    a_iova: u64,
    b_mr: MrKeys,
    b_iova: u64,
}

const A: usize = 0;
const B: usize = 1;
const MAC_A: [u8; 6] = [0x02, 0, 0, 0, 0, 0x0A];
const MAC_B: [u8; 6] = [0x02, 0, 0, 0, 0, 0x0B];

/// Fill `buf` with the pattern of message `m` on QP `q`.
pub(super) fn pattern(seed: u64, q: u32, m: u64, buf: &mut [u8]) {
    let key = mix(seed ^ (u64::from(q) << 40) ^ m.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    for (i, chunk) in buf.chunks_mut(8).enumerate() {
        let v = mix(key.wrapping_add(i as u64)).to_le_bytes();
        chunk.copy_from_slice(&v[..chunk.len()]);
    }
}

/// The rights B's QPs grant A (verbs `qp_access_flags`): the one `op`
/// needs, no more. A's QPs grant none.
fn responder_access(op: Op) -> Access {
    match op {
        Op::Write => Access::REMOTE_WRITE,
        Op::Send => Access::NONE,
        Op::Read => Access::REMOTE_READ,
        Op::Atomic => Access::REMOTE_ATOMIC,
    }
}

fn auto_timeout(cfg: &WorkloadConfig) -> u8 {
    let link = Link::new(cfg.link);
    let frame = link.serialization(cfg.mtu.bytes() as usize + 100);
    let window = frame * (128 * cfg.qps.max(1));
    let rtt = cfg.link.latency * 2 + cfg.link.impair.reorder_delay * 2 + window;
    let target = (rtt * 3).as_nanos() as u64;
    let mut t = 1u8;
    while (4096u64 << t) < target && t < 31 {
        t += 1;
    }
    t
}

/// Run the workload and verify everything.
pub fn run(cfg: &WorkloadConfig) -> WorkloadReport {
    let mut rep = WorkloadReport::default();
    let size = if cfg.op == Op::Atomic { 8 } else { cfg.size };
    let window = cfg.window.max(1);
    let qps = cfg.qps.max(1);
    let slot = u64::from(size.max(8));
    let mut sim = Simulator::new(cfg.seed);
    let ip_a = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
    let ip_b = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));
    let a = sim.add_node(
        Endpoint::new(EndpointConfig {
            local_mac: MAC_A,
            local_ip: ip_a,
            max_qps: qps,
            seed: [cfg.seed, 0xA],
            ..Default::default()
        }),
        cfg.link,
    );
    let b = sim.add_node(
        Endpoint::new(EndpointConfig {
            local_mac: MAC_B,
            local_ip: ip_b,
            max_qps: qps,
            seed: [cfg.seed, 0xB],
            ..Default::default()
        }),
        cfg.link,
    );
    debug_assert_eq!((a, b), (A, B));
    let cq_cap = (qps * window * 2 + 16) as usize;
    let cq_a = sim.endpoint(A).create_cq(cq_cap);
    let cq_b = sim.endpoint(B).create_cq(cq_cap);
    let opts = ConnectOptions {
        path_mtu: cfg.mtu,
        timeout: cfg.timeout.unwrap_or_else(|| auto_timeout(cfg)),
        retry_cnt: cfg.retry_cnt,
        rnr_retry: 7,
        min_rnr_timer: 1,
        ..ConnectOptions::default()
    };
    // One region per side, a slice of it per QP (as an application with
    // many connections registers its buffers once): registering a region
    // per QP cost more than the messages of a run with 65,536 QPs.
    let len = (slot * u64::from(window)) as usize;
    let stride = (len as u64).next_multiple_of(64);
    let a_base = 0x1000_0000_0000u64;
    let b_base = 0x2000_0000_0000u64 + 0x40;
    let a_mr = sim
        .endpoint(A)
        .reg_mr(
            Box::new(vec![0u8; (stride * u64::from(qps)) as usize]),
            a_base,
            Access::LOCAL_WRITE,
        )
        .expect("reg A");
    let b_mr = sim
        .endpoint(B)
        .reg_mr(
            Box::new(vec![0u8; (stride * u64::from(qps)) as usize]),
            b_base,
            Access::ALL,
        )
        .expect("reg B");
    let mut runs = Vec::with_capacity(qps as usize);
    for q in 0..qps {
        let count =
            cfg.messages / u64::from(qps) + u64::from(u64::from(q) < cfg.messages % u64::from(qps));
        let init = QpInitAttr {
            send_cq: cq_a,
            recv_cq: cq_a,
            max_send_wr: window,
            max_recv_wr: window,
            sq_sig_all: true,
        };
        let qa = sim.endpoint(A).create_qp(init).expect("create QP on A");
        let init = QpInitAttr {
            send_cq: cq_b,
            recv_cq: cq_b,
            ..init
        };
        let qb = sim.endpoint(B).create_qp(init).expect("create QP on B");
        // Starting PSNs near the 2^24 wrap so long runs cross it.
        let psn_a = (0xFF_FFFF - 50 * q) & 0xFF_FFFF;
        let psn_b = (0xFF_FF00 + 7 * q) & 0xFF_FFFF;
        let oa = ConnectOptions {
            sq_psn: psn_a,
            ..opts
        };
        let ob = ConnectOptions {
            sq_psn: psn_b,
            access: responder_access(cfg.op),
            ..opts
        };
        sim.endpoint(A)
            .connect(
                qa,
                &RemoteQp {
                    qpn: qb,
                    psn: psn_b,
                    mac: MAC_B,
                    ip: ip_b,
                },
                &oa,
            )
            .expect("connect A");
        sim.endpoint(B)
            .connect(
                qb,
                &RemoteQp {
                    qpn: qa,
                    psn: psn_a,
                    mac: MAC_A,
                    ip: ip_a,
                },
                &ob,
            )
            .expect("connect B");
        let a_iova = a_base + stride * u64::from(q);
        let b_iova = b_base + stride * u64::from(q);
        runs.push(QpRun {
            qa,
            qb,
            queued: true,
            done: count == 0,
            count,
            posted: 0,
            completed: 0,
            recv_posted: 0,
            recv_completed: 0,
            a_mr,
            a_iova,
            b_mr,
            b_iova,
        });
    }
    rep.messages_posted = cfg.messages;
    // Only QPs whose window may have opened are visited: all at first,
    // then those with new completions, so a pass costs what it posts, not
    // the number of QPs.
    let mut to_post: VecDeque<u32> = (0..qps).collect();
    let mut done = runs.iter().filter(|r| r.done).count();
    let mut scratch = vec![0u8; size as usize];
    let mut wcs = [WorkCompletion::default(); 64];
    let deadline = Instant::ZERO + cfg.max_sim_time;
    let mut failed = false;

    loop {
        // Whether this pass posted work or consumed completions: if so the
        // simulator may have new events even if it was idle before.
        let mut busy = false;
        // Post what the windows allow.
        while let Some(q) = to_post.pop_front() {
            let r = &mut runs[q as usize];
            r.queued = false;
            let (qa, qb) = (r.qa, r.qb);
            if cfg.op == Op::Send {
                while r.recv_posted < r.count
                    && r.recv_posted - r.recv_completed < u64::from(window)
                {
                    let m = r.recv_posted;
                    let addr = r.b_iova + (m % u64::from(window)) * slot;
                    let sge = Sge {
                        lkey: r.b_mr.lkey,
                        addr,
                        length: size,
                    };
                    sim.endpoint(B)
                        .post_recv(
                            qb,
                            RecvWr {
                                wr_id: wr_id(q, m),
                                sge,
                            },
                        )
                        .expect("post_recv");
                    r.recv_posted += 1;
                    busy = true;
                }
            }
            while r.posted < r.count && r.posted - r.completed < u64::from(window) {
                let m = r.posted;
                if cfg.op == Op::Send && m >= r.recv_posted {
                    break;
                }
                let off = (m % u64::from(window)) * slot;
                let local = Sge {
                    lkey: r.a_mr.lkey,
                    addr: r.a_iova + off,
                    length: size,
                };
                let mut wr = SendWr::new(wr_id(q, m), SendOp::Write, local);
                wr.rkey = r.b_mr.rkey;
                wr.remote_addr = r.b_iova + off;
                match cfg.op {
                    Op::Write | Op::Send => {
                        pattern(cfg.seed, q, m, &mut scratch);
                        sim.endpoint(A)
                            .mr_write(r.a_mr.lkey, r.a_iova + off, &scratch)
                            .expect("fill");
                        if cfg.op == Op::Send {
                            wr.opcode = if m % 2 == 1 {
                                SendOp::SendWithImm
                            } else {
                                SendOp::Send
                            };
                            wr.imm = (m as u32) ^ q;
                        }
                    }
                    Op::Read => {
                        pattern(cfg.seed, q, m, &mut scratch);
                        sim.endpoint(B)
                            .mr_write(r.b_mr.lkey, r.b_iova + off, &scratch)
                            .expect("fill");
                        wr.opcode = SendOp::Read;
                    }
                    Op::Atomic => {
                        sim.endpoint(A)
                            .mr_write(r.a_mr.lkey, r.a_iova + off, &u64::MAX.to_le_bytes())
                            .expect("fill");
                        wr.remote_addr = r.b_iova;
                        if m % 2 == 0 {
                            wr.opcode = SendOp::FetchAdd;
                            wr.compare_add = 1;
                        } else {
                            wr.opcode = SendOp::CompareSwap;
                            wr.compare_add = m;
                            wr.swap = m + 1;
                        }
                    }
                }
                sim.endpoint(A).post_send(qa, wr).expect("post_send");
                r.posted += 1;
                busy = true;
            }
        }
        // Check completions.
        for (node, cq) in [(A, cq_a), (B, cq_b)] {
            loop {
                let n = sim.endpoint(node).poll_cq(cq, &mut wcs);
                if n == 0 {
                    break;
                }
                busy = true;
                for wc in &wcs[..n] {
                    // The run comes from the work request's ID, and must
                    // own the QP the completion names.
                    let q = run_index(wc.wr_id);
                    let owner = runs.get(q as usize).map(|r| [r.qa, r.qb][node]);
                    if owner != Some(wc.qpn) {
                        rep.error_completions += 1;
                        rep.first_error.get_or_insert(format!(
                            "completion for QP {:#x} with wr_id {:#x}, which no run of that QP posted",
                            wc.qpn, wc.wr_id
                        ));
                        continue;
                    }
                    let r = &mut runs[q as usize];
                    check_completion(
                        cfg,
                        &mut sim,
                        node,
                        q,
                        r,
                        wc,
                        size,
                        slot,
                        window,
                        &mut scratch,
                        &mut rep,
                    );
                    if !r.queued {
                        r.queued = true;
                        to_post.push_back(q);
                    }
                    if !r.done
                        && r.completed == r.count
                        && (cfg.op != Op::Send || r.recv_completed == r.count)
                    {
                        r.done = true;
                        done += 1;
                    }
                }
            }
        }
        if rep.error_completions > 0 || rep.data_errors > 0 {
            failed = true;
        }
        if done == runs.len() {
            rep.finished = true;
            break;
        }
        if failed || sim.now() > deadline || (!sim.step() && !busy) {
            if std::env::var_os("ROCE_SIM_DEBUG").is_some() {
                for i in [A, B] {
                    for r in &runs {
                        let qpn = if i == A { r.qa } else { r.qb };
                        eprintln!("node {i} {:#?}", sim.endpoint(i).qp(qpn));
                    }
                }
            }
            break;
        }
    }

    if cfg.op == Op::Atomic && rep.finished {
        for (q, r) in runs.iter().enumerate() {
            let mut v = [0u8; 8];
            sim.endpoint(B)
                .mr_read(r.b_mr.lkey, r.b_iova, &mut v)
                .expect("read counter");
            if u64::from_le_bytes(v) != r.count {
                rep.data_errors += 1;
                rep.first_error.get_or_insert(format!(
                    "QP {q}: counter is {} after {} atomics",
                    u64::from_le_bytes(v),
                    r.count
                ));
            }
        }
    }
    rep.lost_messages = runs
        .iter()
        .map(|r| {
            r.count
                - if cfg.op == Op::Send {
                    r.completed.min(r.recv_completed)
                } else {
                    r.completed
                }
        })
        .sum();
    if rep.lost_messages > 0 && rep.first_error.is_none() {
        rep.first_error = Some(format!(
            "{} messages not completed by {} us of simulated time",
            rep.lost_messages,
            sim.now().as_nanos() / 1000
        ));
    }
    rep.sim_time_us = sim.now().as_nanos() / 1000;
    for i in [A, B] {
        rep.counters.accumulate(&sim.endpoint(i).counters());
        let s = sim.node(i).link.stats;
        rep.link.frames += s.frames;
        rep.link.bytes += s.bytes;
        rep.link.dropped += s.dropped;
        rep.link.reordered += s.reordered;
        rep.link.duplicated += s.duplicated;
        rep.link.corrupted += s.corrupted;
    }
    let _ = MAX_FRAME;
    rep
}

/// Bits of a work request ID that hold the run's index (its QP pair).
const RUN_BITS: u32 = 24;

/// The work request ID of message `m` of run `q`: the run's index and the
/// message's, so that a completion leads straight to both. (A map from QP
/// number to run, looked up for every completion, cost the 65,536-QP sim
/// a cache miss per message.)
fn wr_id(q: u32, m: u64) -> u64 {
    debug_assert!(q < 1 << RUN_BITS);
    (m << RUN_BITS) | u64::from(q)
}

/// The run index of a work request ID made by [`wr_id`].
fn run_index(wr_id: u64) -> u32 {
    (wr_id & ((1 << RUN_BITS) - 1)) as u32
}

/// The message index of a work request ID made by [`wr_id`].
fn message_index(wr_id: u64) -> u64 {
    wr_id >> RUN_BITS
}

#[allow(clippy::too_many_arguments)]
fn check_completion(
    cfg: &WorkloadConfig,
    sim: &mut Simulator,
    node: usize,
    q: u32,
    r: &mut QpRun,
    wc: &WorkCompletion,
    size: u32,
    slot: u64,
    window: u32,
    scratch: &mut [u8],
    rep: &mut WorkloadReport,
) {
    if wc.status != WcStatus::Success {
        rep.error_completions += 1;
        rep.first_error.get_or_insert(format!(
            "QP {q} node {node}: message {} completed with {:?}",
            message_index(wc.wr_id),
            wc.status
        ));
        return;
    }
    let m = message_index(wc.wr_id);
    let is_recv = node == B;
    let expected = if is_recv {
        r.recv_completed
    } else {
        r.completed
    };
    if m < expected {
        rep.duplicate_completions += 1;
        rep.first_error
            .get_or_insert(format!("QP {q}: message {m} completed twice"));
        return;
    }
    if m > expected {
        rep.out_of_order_completions += 1;
        rep.first_error
            .get_or_insert(format!("QP {q}: message {m} completed before {expected}"));
        return;
    }
    let off = (m % u64::from(window)) * slot;
    let mut good = true;
    match (cfg.op, is_recv) {
        (Op::Send, true) => {
            let want_imm = if m % 2 == 1 {
                Some((m as u32) ^ q)
            } else {
                None
            };
            pattern(cfg.seed, q, m, scratch);
            let got = sim
                .endpoint(B)
                .mr_slice(r.b_mr.lkey, r.b_iova + off, size as usize)
                .unwrap_or(&[]);
            good = wc.byte_len == size && wc.imm == want_imm && got == &scratch[..];
            r.recv_completed += 1;
            if good {
                rep.bytes_verified += u64::from(size);
                rep.messages_completed += 1;
            }
        }
        (Op::Send, false) => {
            r.completed += 1;
        }
        (Op::Write, _) => {
            pattern(cfg.seed, q, m, scratch);
            let got = sim
                .endpoint(B)
                .mr_slice(r.b_mr.lkey, r.b_iova + off, size as usize)
                .unwrap_or(&[]);
            good = got == &scratch[..];
            r.completed += 1;
        }
        (Op::Read, _) => {
            pattern(cfg.seed, q, m, scratch);
            let got = sim
                .endpoint(A)
                .mr_slice(r.a_mr.lkey, r.a_iova + off, size as usize)
                .unwrap_or(&[]);
            good = wc.byte_len == size && got == &scratch[..];
            r.completed += 1;
        }
        (Op::Atomic, _) => {
            let mut v = [0u8; 8];
            let _ = sim.endpoint(A).mr_read(r.a_mr.lkey, r.a_iova + off, &mut v);
            good = u64::from_le_bytes(v) == m;
            r.completed += 1;
        }
    }
    if cfg.op != Op::Send && good {
        rep.bytes_verified += u64::from(size);
        rep.messages_completed += 1;
    }
    if !good {
        rep.data_errors += 1;
        rep.first_error.get_or_insert(format!(
            "QP {q}: message {m} has wrong bytes, length or immediate"
        ));
    }
}
