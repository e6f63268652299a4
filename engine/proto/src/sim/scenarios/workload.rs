//! Verified traffic between two simulated endpoints: every message's bytes
//! are checked at the destination, every completion is checked for order,
//! status and uniqueness. Used by `roce-xdp sim` and the `sim_*` tests.
//!
//! [`run`] takes three steps: [`Workload::setup`] (the endpoints, their
//! regions and QP pairs), [`Workload::drive`] (post, move frames, poll and
//! check each completion) and [`Workload::verify`] (what can only be
//! checked at the end, and the report).

use core::fmt;
use core::net::{IpAddr, Ipv4Addr};
use core::time::Duration;

use std::collections::VecDeque;

use crate::sim::rng::mix;
use crate::sim::{Link, LinkConfig, LinkStats, Simulator};

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

/// One QP pair of the run (A's QP `qa` talking to B's `qb`), its slices
/// of the two regions, and its progress.
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
const IP_A: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
const IP_B: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));

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

/// The configuration of endpoint `tag` (A or B): its addresses, room for
/// `qps` QPs, and its seed.
fn endpoint_config(
    cfg: &WorkloadConfig,
    mac: [u8; 6],
    ip: IpAddr,
    qps: u32,
    tag: u64,
) -> EndpointConfig {
    EndpointConfig {
        local_mac: mac,
        local_ip: ip,
        max_qps: qps,
        seed: [cfg.seed, tag],
        ..Default::default()
    }
}

/// Run the workload and verify everything: set up, drive, verify (see the
/// module docs).
pub fn run(cfg: &WorkloadConfig) -> WorkloadReport {
    let mut workload = Workload::setup(cfg);
    workload.drive();
    workload.verify()
}

/// A run in progress: the simulator with endpoints A (requester) and B
/// (responder), the QP pairs, and the report so far.
struct Workload<'c> {
    cfg: &'c WorkloadConfig,
    sim: Simulator,
    /// Bytes per message (8 for atomics).
    size: u32,
    /// Messages in flight per QP.
    window: u32,
    /// Bytes between two message slots of a QP's slice of a region.
    slot: u64,
    cq_a: u32,
    cq_b: u32,
    runs: Vec<QpRun>,
    /// Only QPs whose window may have opened are visited: all at first,
    /// then those with new completions, so a pass costs what it posts, not
    /// the number of QPs.
    to_post: VecDeque<u32>,
    /// Runs whose every message (and, for SEND, receive) completed.
    done: usize,
    /// The expected bytes of one message.
    scratch: Vec<u8>,
    rep: WorkloadReport,
}

impl<'c> Workload<'c> {
    /// Setup: adds endpoints A and B to a simulator seeded with the run's
    /// seed, one CQ each, then the regions and connected QP pairs
    /// ([`Self::connect_runs`]).
    fn setup(cfg: &'c WorkloadConfig) -> Self {
        let size = if cfg.op == Op::Atomic { 8 } else { cfg.size };
        let window = cfg.window.max(1);
        let qps = cfg.qps.max(1);
        let mut sim = Simulator::new(cfg.seed);
        let a = sim.add_node(
            Endpoint::new(endpoint_config(cfg, MAC_A, IP_A, qps, 0xA)),
            cfg.link,
        );
        let b = sim.add_node(
            Endpoint::new(endpoint_config(cfg, MAC_B, IP_B, qps, 0xB)),
            cfg.link,
        );
        debug_assert_eq!((a, b), (A, B));
        let cq_cap = (qps * window * 2 + 16) as usize;
        let cq_a = sim.endpoint(A).create_cq(cq_cap);
        let cq_b = sim.endpoint(B).create_cq(cq_cap);
        let mut workload = Workload {
            cfg,
            sim,
            size,
            window,
            slot: u64::from(size.max(8)),
            cq_a,
            cq_b,
            runs: Vec::with_capacity(qps as usize),
            to_post: (0..qps).collect(),
            done: 0,
            scratch: vec![0u8; size as usize],
            rep: WorkloadReport::default(),
        };
        workload.connect_runs(qps);
        workload.done = workload.runs.iter().filter(|r| r.done).count();
        workload.rep.messages_posted = cfg.messages;
        workload
    }

    /// Registers one region on each side and creates `qps` connected QP
    /// pairs, each with its slice of both regions and its share of the
    /// messages.
    fn connect_runs(&mut self, qps: u32) {
        let cfg = self.cfg;
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
        let len = (self.slot * u64::from(self.window)) as usize;
        let stride = (len as u64).next_multiple_of(64);
        let a_base = 0x1000_0000_0000u64;
        let b_base = 0x2000_0000_0000u64 + 0x40;
        let bytes = (stride * u64::from(qps)) as usize;
        let a_mr = self
            .sim
            .endpoint(A)
            .reg_mr(Box::new(vec![0u8; bytes]), a_base, Access::LOCAL_WRITE)
            .expect("reg A");
        let b_mr = self
            .sim
            .endpoint(B)
            .reg_mr(Box::new(vec![0u8; bytes]), b_base, Access::ALL)
            .expect("reg B");
        for q in 0..qps {
            let count = cfg.messages / u64::from(qps)
                + u64::from(u64::from(q) < cfg.messages % u64::from(qps));
            let (qa, qb) = self.connect_pair(q, &opts);
            self.runs.push(QpRun {
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
                a_iova: a_base + stride * u64::from(q),
                b_mr,
                b_iova: b_base + stride * u64::from(q),
            });
        }
    }

    /// Creates QP pair `q` (one QP on A, one on B) and connects the two;
    /// B's QP grants A the one right the operation needs.
    fn connect_pair(&mut self, q: u32, opts: &ConnectOptions) -> (u32, u32) {
        let init = QpInitAttr {
            send_cq: self.cq_a,
            recv_cq: self.cq_a,
            max_send_wr: self.window,
            max_recv_wr: self.window,
            sq_sig_all: true,
            srq: None,
        };
        let qa = self
            .sim
            .endpoint(A)
            .create_qp(init)
            .expect("create QP on A");
        let init = QpInitAttr {
            send_cq: self.cq_b,
            recv_cq: self.cq_b,
            ..init
        };
        let qb = self
            .sim
            .endpoint(B)
            .create_qp(init)
            .expect("create QP on B");
        // Starting PSNs near the 2^24 wrap so long runs cross it.
        let psn_a = (0xFF_FFFF - 50 * q) & 0xFF_FFFF;
        let psn_b = (0xFF_FF00 + 7 * q) & 0xFF_FFFF;
        let oa = ConnectOptions {
            sq_psn: psn_a,
            ..*opts
        };
        let ob = ConnectOptions {
            sq_psn: psn_b,
            access: responder_access(self.cfg.op),
            ..*opts
        };
        let to_b = RemoteQp {
            qpn: qb,
            psn: psn_b,
            mac: MAC_B,
            ip: IP_B,
        };
        let to_a = RemoteQp {
            qpn: qa,
            psn: psn_a,
            mac: MAC_A,
            ip: IP_A,
        };
        self.sim
            .endpoint(A)
            .connect(qa, &to_b, &oa)
            .expect("connect A");
        self.sim
            .endpoint(B)
            .connect(qb, &to_a, &ob)
            .expect("connect B");
        (qa, qb)
    }

    /// Drive: posts what the QPs' windows allow, checks every completion,
    /// and steps the simulator (one event at a time), until every message
    /// completed, a completion was wrong, the simulated deadline passed, or
    /// nothing is left to happen.
    fn drive(&mut self) {
        let mut wcs = [WorkCompletion::default(); 64];
        let deadline = Instant::ZERO + self.cfg.max_sim_time;
        loop {
            // Whether this pass posted work or consumed completions: if so the
            // simulator may have new events even if it was idle before.
            let posted = self.post_windows();
            let polled = self.poll_completions(&mut wcs);
            let busy = posted || polled;
            let failed = self.rep.error_completions > 0 || self.rep.data_errors > 0;
            if self.done == self.runs.len() {
                self.rep.finished = true;
                break;
            }
            if failed || self.sim.now() > deadline || (!self.sim.step() && !busy) {
                self.dump_qps_if_debugging();
                break;
            }
        }
    }

    /// Posts, on each QP queued in `to_post`, what its window allows (for
    /// SEND, receives at B first); returns whether anything was posted.
    fn post_windows(&mut self) -> bool {
        let mut busy = false;
        while let Some(q) = self.to_post.pop_front() {
            self.runs[q as usize].queued = false;
            if self.cfg.op == Op::Send {
                busy |= self.post_recvs(q);
            }
            busy |= self.post_sends(q);
        }
        busy
    }

    /// SEND: posts receives at B for run `q`'s next messages, up to the
    /// window; returns whether it posted any.
    fn post_recvs(&mut self, q: u32) -> bool {
        let window = u64::from(self.window);
        let r = &mut self.runs[q as usize];
        let mut posted = false;
        while r.recv_posted < r.count && r.recv_posted - r.recv_completed < window {
            let m = r.recv_posted;
            let sge = Sge {
                lkey: r.b_mr.lkey,
                addr: r.b_iova + (m % window) * self.slot,
                length: self.size,
            };
            self.sim
                .endpoint(B)
                .post_recv(
                    r.qb,
                    RecvWr {
                        wr_id: wr_id(q, m),
                        sge,
                    },
                )
                .expect("post_recv");
            r.recv_posted += 1;
            posted = true;
        }
        posted
    }

    /// Posts run `q`'s next messages at A, up to the window (for SEND, no
    /// further than the receives posted); returns whether it posted any.
    fn post_sends(&mut self, q: u32) -> bool {
        let window = u64::from(self.window);
        let mut posted = false;
        loop {
            let r = &self.runs[q as usize];
            if r.posted >= r.count || r.posted - r.completed >= window {
                break;
            }
            let m = r.posted;
            if self.cfg.op == Op::Send && m >= r.recv_posted {
                break;
            }
            let wr = self.prepare_send(q, m);
            let r = &mut self.runs[q as usize];
            self.sim.endpoint(A).post_send(r.qa, wr).expect("post_send");
            r.posted += 1;
            posted = true;
        }
        posted
    }

    /// The work request of message `m` of run `q`, with its source filled
    /// in: the pattern in A's slot (WRITE, SEND; odd SENDs carry an
    /// immediate), in B's slot (READ), or an all-ones word for the atomic's
    /// result (fetch-and-add and compare-and-swap alternate on B's counter).
    fn prepare_send(&mut self, q: u32, m: u64) -> SendWr {
        let (op, seed) = (self.cfg.op, self.cfg.seed);
        let r = &self.runs[q as usize];
        let off = (m % u64::from(self.window)) * self.slot;
        let local = Sge {
            lkey: r.a_mr.lkey,
            addr: r.a_iova + off,
            length: self.size,
        };
        let mut wr = SendWr::new(wr_id(q, m), SendOp::Write, local);
        wr.rkey = r.b_mr.rkey;
        wr.remote_addr = r.b_iova + off;
        match op {
            Op::Write | Op::Send => {
                pattern(seed, q, m, &mut self.scratch);
                self.sim
                    .endpoint(A)
                    .mr_write(r.a_mr.lkey, r.a_iova + off, &self.scratch)
                    .expect("fill");
                if op == Op::Send {
                    wr.opcode = if m % 2 == 1 {
                        SendOp::SendWithImm
                    } else {
                        SendOp::Send
                    };
                    wr.imm = (m as u32) ^ q;
                }
            }
            Op::Read => {
                pattern(seed, q, m, &mut self.scratch);
                self.sim
                    .endpoint(B)
                    .mr_write(r.b_mr.lkey, r.b_iova + off, &self.scratch)
                    .expect("fill");
                wr.opcode = SendOp::Read;
            }
            Op::Atomic => {
                self.sim
                    .endpoint(A)
                    .mr_write(r.a_mr.lkey, r.a_iova + off, &u64::MAX.to_le_bytes())
                    .expect("fill");
                wr.remote_addr = r.b_iova;
                if m.is_multiple_of(2) {
                    wr.opcode = SendOp::FetchAdd;
                    wr.compare_add = 1;
                } else {
                    wr.opcode = SendOp::CompareSwap;
                    wr.compare_add = m;
                    wr.swap = m + 1;
                }
            }
        }
        wr
    }

    /// Polls A's CQ, then B's, until both are empty, checking each
    /// completion ([`Self::on_completion`]); returns whether there was any.
    fn poll_completions(&mut self, wcs: &mut [WorkCompletion]) -> bool {
        let mut busy = false;
        for (node, cq) in [(A, self.cq_a), (B, self.cq_b)] {
            loop {
                let n = self.sim.endpoint(node).poll_cq(cq, wcs);
                if n == 0 {
                    break;
                }
                busy = true;
                for wc in &wcs[..n] {
                    self.on_completion(node, wc);
                }
            }
        }
        busy
    }

    /// One completion at `node`: it must belong to the run its work request
    /// ID names ([`wr_id`]); then it is checked ([`Self::check_completion`]),
    /// its run queued to post again, and counted done once its last message
    /// (and, for SEND, its last receive) completed.
    fn on_completion(&mut self, node: usize, wc: &WorkCompletion) {
        // The run comes from the work request's ID, and must own the QP
        // the completion names.
        let q = run_index(wc.wr_id);
        let owner = self.runs.get(q as usize).map(|r| [r.qa, r.qb][node]);
        if owner != Some(wc.qpn) {
            self.rep.error_completions += 1;
            self.rep.first_error.get_or_insert(format!(
                "completion for QP {:#x} with wr_id {:#x}, which no run of that QP posted",
                wc.qpn, wc.wr_id
            ));
            return;
        }
        self.check_completion(node, q, wc);
        let send = self.cfg.op == Op::Send;
        let r = &mut self.runs[q as usize];
        if !r.queued {
            r.queued = true;
            self.to_post.push_back(q);
        }
        if !r.done && r.completed == r.count && (!send || r.recv_completed == r.count) {
            r.done = true;
            self.done += 1;
        }
    }

    /// Checks a completion of run `q` at `node`: success, and the next
    /// message in order (not a duplicate); then its bytes
    /// ([`Self::message_intact`]). Counts what is wrong in the report.
    fn check_completion(&mut self, node: usize, q: u32, wc: &WorkCompletion) {
        let rep = &mut self.rep;
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
        let r = &self.runs[q as usize];
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
        let good = self.message_intact(is_recv, q, m, wc);
        let rep = &mut self.rep;
        if self.cfg.op != Op::Send && good {
            rep.bytes_verified += u64::from(self.size);
            rep.messages_completed += 1;
        }
        if !good {
            rep.data_errors += 1;
            rep.first_error.get_or_insert(format!(
                "QP {q}: message {m} has wrong bytes, length or immediate"
            ));
        }
    }

    /// Whether message `m` of run `q` arrived intact: SEND at its receive
    /// completion at B (bytes, length, immediate; counted there), WRITE in
    /// B's region, READ in A's, an atomic's original value (the number of
    /// atomics before it). Advances the run's completion count.
    fn message_intact(&mut self, is_recv: bool, q: u32, m: u64, wc: &WorkCompletion) -> bool {
        let (seed, size) = (self.cfg.seed, self.size);
        let off = (m % u64::from(self.window)) * self.slot;
        let scratch = &mut self.scratch;
        let r = &mut self.runs[q as usize];
        match (self.cfg.op, is_recv) {
            (Op::Send, true) => {
                let want_imm = if m % 2 == 1 {
                    Some((m as u32) ^ q)
                } else {
                    None
                };
                pattern(seed, q, m, scratch);
                let got = self
                    .sim
                    .endpoint(B)
                    .mr_slice(r.b_mr.lkey, r.b_iova + off, size as usize)
                    .unwrap_or(&[]);
                let good = wc.byte_len == size && wc.imm == want_imm && got == &scratch[..];
                r.recv_completed += 1;
                if good {
                    self.rep.bytes_verified += u64::from(size);
                    self.rep.messages_completed += 1;
                }
                good
            }
            (Op::Send, false) => {
                r.completed += 1;
                true
            }
            (Op::Write, _) => {
                pattern(seed, q, m, scratch);
                let got = self
                    .sim
                    .endpoint(B)
                    .mr_slice(r.b_mr.lkey, r.b_iova + off, size as usize)
                    .unwrap_or(&[]);
                r.completed += 1;
                got == &scratch[..]
            }
            (Op::Read, _) => {
                pattern(seed, q, m, scratch);
                let got = self
                    .sim
                    .endpoint(A)
                    .mr_slice(r.a_mr.lkey, r.a_iova + off, size as usize)
                    .unwrap_or(&[]);
                r.completed += 1;
                wc.byte_len == size && got == &scratch[..]
            }
            (Op::Atomic, _) => {
                let mut v = [0u8; 8];
                let _ = self
                    .sim
                    .endpoint(A)
                    .mr_read(r.a_mr.lkey, r.a_iova + off, &mut v);
                r.completed += 1;
                u64::from_le_bytes(v) == m
            }
        }
    }

    /// With `ROCE_SIM_DEBUG` set, prints every QP's state (a run that
    /// stopped early).
    fn dump_qps_if_debugging(&mut self) {
        if std::env::var_os("ROCE_SIM_DEBUG").is_some() {
            for i in [A, B] {
                for r in &self.runs {
                    let qpn = if i == A { r.qa } else { r.qb };
                    eprintln!("node {i} {:#?}", self.sim.endpoint(i).qp(qpn));
                }
            }
        }
    }

    /// Verify: for atomics, each QP's counter at B must hold the number of
    /// its atomics; messages never completed are counted lost; the report
    /// gets the simulated time and both endpoints' and links' counters.
    fn verify(mut self) -> WorkloadReport {
        if self.cfg.op == Op::Atomic && self.rep.finished {
            self.check_counters();
        }
        let send = self.cfg.op == Op::Send;
        let rep = &mut self.rep;
        let now_us = self.sim.now().as_nanos() / 1000;
        rep.lost_messages = self
            .runs
            .iter()
            .map(|r| {
                r.count
                    - if send {
                        r.completed.min(r.recv_completed)
                    } else {
                        r.completed
                    }
            })
            .sum();
        if rep.lost_messages > 0 && rep.first_error.is_none() {
            rep.first_error = Some(format!(
                "{} messages not completed by {now_us} us of simulated time",
                rep.lost_messages,
            ));
        }
        rep.sim_time_us = now_us;
        for i in [A, B] {
            rep.counters.accumulate(&self.sim.endpoint(i).counters());
            let s = self.sim.node(i).link.stats;
            rep.link.frames += s.frames;
            rep.link.bytes += s.bytes;
            rep.link.dropped += s.dropped;
            rep.link.reordered += s.reordered;
            rep.link.duplicated += s.duplicated;
            rep.link.corrupted += s.corrupted;
        }
        self.rep
    }

    /// Atomics: each QP's counter at B must equal the number of its atomics
    /// (each added one exactly once).
    fn check_counters(&mut self) {
        for (q, r) in self.runs.iter().enumerate() {
            let mut v = [0u8; 8];
            self.sim
                .endpoint(B)
                .mr_read(r.b_mr.lkey, r.b_iova, &mut v)
                .expect("read counter");
            if u64::from_le_bytes(v) != r.count {
                self.rep.data_errors += 1;
                self.rep.first_error.get_or_insert(format!(
                    "QP {q}: counter is {} after {} atomics",
                    u64::from_le_bytes(v),
                    r.count
                ));
            }
        }
    }
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
