//! Several senders, one receiver, one shared switch queue: the DCQCN
//! scenario. Each sender node has one QP and streams verified RDMA WRITEs
//! to its own QP on the receiver; every frame toward the receiver passes a
//! [`Bottleneck`](crate::sim::Bottleneck) that marks CE above its
//! threshold and tail-drops at its buffer limit. Reports per-QP throughput,
//! Jain's fairness index, CNP counts, the queue's depth, and (optionally) a
//! time series of each QP's DCQCN rate and alpha with the queue depth.
//!
//! Every message's bytes are checked at the receiver when its WRITE
//! completes (the pattern of `workload::pattern`), so "every byte arrives"
//! is part of [`IncastReport::ok`].
//!
//! [`run`] takes three steps: [`Incast::setup`] (the receiver, the switch,
//! the senders and their QPs), [`Incast::drive`] (post, poll and verify,
//! measure the queue and sample the rates, step the simulator) and
//! [`Incast::verify`] (per-flow throughput, fairness, counters: the
//! report).

use core::net::{IpAddr, Ipv4Addr};
use core::time::Duration;

use super::workload::pattern;
use crate::cc::CcConfig;
use crate::endpoint::{ConnectOptions, Endpoint, EndpointConfig, RemoteQp};
use crate::rc::{
    Access, Counters, MrKeys, Mtu, QpInitAttr, SendOp, SendWr, Sge, WcStatus, WorkCompletion,
};
use crate::sim::{BottleneckConfig, BottleneckStats, LinkConfig, Simulator, Switch};
use crate::time::Instant;

/// Parameters of an incast run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct IncastConfig {
    /// Number of sender nodes (one QP each).
    pub senders: u32,
    /// Bytes each sender writes.
    pub bytes_per_flow: u64,
    /// Bytes per WRITE.
    pub message_size: u32,
    /// WRITEs in flight per QP.
    pub window: u32,
    pub mtu: Mtu,
    /// Every host's egress link (senders' and the receiver's).
    pub link: LinkConfig,
    /// The switch queue toward the receiver; `None` = no shared queue.
    pub bottleneck: Option<BottleneckConfig>,
    /// Random CE marking of ECN-capable frames (`--ce P`).
    pub ce_probability: f64,
    /// Congestion control of every endpoint (DCQCN on/off, parameters).
    pub cc: CcConfig,
    /// Sender `i` starts at `i * start_stagger`.
    pub start_stagger: Duration,
    pub seed: u64,
    /// Sample rates, alpha and queue depth this often (also the trace rows).
    pub sample_interval: Duration,
    /// Keep the samples as a trace.
    pub trace: bool,
    /// Give up when simulated time passes this.
    pub max_sim_time: Duration,
}

impl Default for IncastConfig {
    fn default() -> Self {
        IncastConfig {
            senders: 2,
            bytes_per_flow: 16 << 20,
            message_size: 64 << 10,
            window: 4,
            mtu: Mtu::Mtu4096,
            link: LinkConfig {
                latency: Duration::from_micros(2),
                rate_bps: 25_000_000_000,
                ..LinkConfig::default()
            },
            bottleneck: None,
            ce_probability: 0.0,
            cc: CcConfig {
                line_rate_gbps: 25.0,
                ..CcConfig::default()
            },
            start_stagger: Duration::ZERO,
            seed: 1,
            sample_interval: Duration::from_micros(10),
            trace: false,
            max_sim_time: Duration::from_secs(10),
        }
    }
}

/// One row of the time series.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TraceSample {
    pub time_us: f64,
    /// The flow's QP number on the receiver (unique per flow; every sender
    /// has the same local QP number).
    pub qp: u32,
    pub rate_gbps: f64,
    pub alpha: f64,
    pub queue_kb: f64,
}

/// Per-flow results.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct FlowReport {
    /// Receiver-side QP number of the flow.
    pub qp: u32,
    pub bytes_verified: u64,
    pub start_us: f64,
    pub finish_us: Option<f64>,
    /// Bytes verified per second over the flow's life, Gb/s.
    pub throughput_gbps: f64,
    /// Throughput while every flow was active (the fairness window), Gb/s.
    pub shared_throughput_gbps: f64,
    /// Time average of the DCQCN current rate while the flow was active.
    pub mean_dcqcn_rate_gbps: f64,
}

/// Outcome of an incast run.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct IncastReport {
    pub flows: Vec<FlowReport>,
    /// Jain's fairness index of `shared_throughput_gbps` (1 = equal).
    pub jain_index: f64,
    /// The fairness window, us (from the last start plus a settling time to
    /// the first finish).
    pub fairness_window_us: (f64, f64),
    pub bytes_expected: u64,
    pub bytes_verified: u64,
    pub data_errors: u64,
    pub error_completions: u64,
    pub finished: bool,
    pub sim_time_us: f64,
    /// Summed counters of every endpoint (CNPs, CE marks, retransmissions).
    pub counters: Counters,
    /// The shared queue over the whole run (zeros without one); its
    /// `max_queue_bytes` includes the start-up transient.
    pub bottleneck: BottleneckStats,
    /// Deepest queue seen inside the fairness window (steady state), bytes.
    pub window_max_queue_bytes: u64,
    /// Time-average queue inside the fairness window, bytes.
    pub window_mean_queue_bytes: f64,
    /// Frames marked by `--ce`.
    pub random_ce: u64,
    pub trace: Vec<TraceSample>,
    pub first_error: Option<String>,
}

impl IncastReport {
    /// Every byte of every flow arrived, verified, with no error completion.
    pub fn ok(&self) -> bool {
        self.finished
            && self.data_errors == 0
            && self.error_completions == 0
            && self.bytes_verified == self.bytes_expected
    }
}

/// Jain's fairness index of `x`: (sum x)^2 / (n * sum x^2).
pub fn jain_index(x: &[f64]) -> f64 {
    let sum: f64 = x.iter().sum();
    let sq: f64 = x.iter().map(|v| v * v).sum();
    if x.is_empty() || sq == 0.0 {
        return 0.0;
    }
    sum * sum / (x.len() as f64 * sq)
}

const RECEIVER_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0xEE];
const RECEIVER_IP: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 254));

fn sender_mac(i: u32) -> [u8; 6] {
    [0x02, 0, 0, 1, (i >> 8) as u8, i as u8]
}

/// One sender's stream: its node, CQ and QP, the receiver's QP, the two
/// regions, its progress, and what the fairness window and the samples
/// measured of it.
struct Flow {
    node: usize,
    cq: u32,
    qpn: u32,
    rqpn: u32,
    count: u64,
    posted: u64,
    completed: u64,
    src: MrKeys,
    src_iova: u64,
    dst: MrKeys,
    dst_iova: u64,
    start: Instant,
    finish: Option<Instant>,
    bytes_at_window_start: Option<u64>,
    bytes_at_window_end: Option<u64>,
    rate_time_sum: f64,
    active_time: f64,
}

impl Flow {
    /// The flow's line of the report, the run having ended at `end`;
    /// `shared_secs` is the length of the fairness window.
    fn report(&self, end: Instant, slot: u64, shared_secs: f64) -> FlowReport {
        let finish = self.finish.unwrap_or(end);
        let life = (finish - self.start).as_secs_f64();
        let verified = self.completed * slot;
        let shared = match (self.bytes_at_window_start, self.bytes_at_window_end) {
            (Some(a), Some(b)) if shared_secs > 0.0 && b >= a => {
                (b - a) as f64 * 8.0 / shared_secs / 1e9
            }
            _ => 0.0,
        };
        FlowReport {
            qp: self.rqpn,
            bytes_verified: verified,
            start_us: self.start.as_nanos() as f64 / 1e3,
            finish_us: self.finish.map(|t| t.as_nanos() as f64 / 1e3),
            throughput_gbps: if life > 0.0 {
                verified as f64 * 8.0 / life / 1e9
            } else {
                0.0
            },
            shared_throughput_gbps: shared,
            mean_dcqcn_rate_gbps: if self.active_time > 0.0 {
                self.rate_time_sum / self.active_time
            } else {
                0.0
            },
        }
    }
}

/// ACK timeout: the verbs default (14: 67 ms) unless the worst queueing
/// delay plus the RTT needs more. Rate-limited QPs send the packets of a
/// message slowly (AckReq comes with the last one), so a timeout near the
/// RTT would fire while a slow QP is still sending.
fn ack_timeout(cfg: &IncastConfig) -> u8 {
    let buffer_time = cfg.bottleneck.map_or(Duration::ZERO, |b| {
        Duration::from_nanos((b.buffer_bytes as f64 * 8e9 / b.rate_bps) as u64)
    });
    let rtt = cfg.link.latency * 4 + buffer_time * 2 + Duration::from_micros(100);
    let mut timeout = ConnectOptions::default().timeout.max(1);
    while (4096u64 << timeout) < rtt.as_nanos() as u64 && timeout < 31 {
        timeout += 1;
    }
    timeout
}

/// When the fairness window opens: after the last of `n` senders started
/// and a settling time, a fifth of the expected shared period (at least
/// 1 ms).
fn fairness_window_start(cfg: &IncastConfig, n: u32, bytes_expected: u64) -> Instant {
    let last_start = Instant::ZERO + cfg.start_stagger * (n - 1);
    let bottleneck_bps = cfg
        .bottleneck
        .map_or(cfg.link.rate_bps as f64, |b| b.rate_bps);
    let shared_period =
        Duration::from_secs_f64(bytes_expected as f64 * 8.0 / bottleneck_bps.max(1.0));
    last_start + (shared_period / 5).max(Duration::from_millis(1))
}

/// Run the incast scenario (see the module docs): set up, drive, verify.
pub fn run(cfg: &IncastConfig) -> IncastReport {
    let mut incast = Incast::setup(cfg);
    incast.drive();
    incast.verify()
}

/// An incast run in progress: the simulator (receiver, senders, switch),
/// the flows, what is measured of the queue, and the report so far.
struct Incast<'c> {
    cfg: &'c IncastConfig,
    sim: Simulator,
    receiver: usize,
    rx_cq: u32,
    /// Bytes per WRITE.
    size: u32,
    /// WRITEs in flight per QP.
    window: u32,
    /// Bytes between two message slots of a region (the message size).
    slot: u64,
    flows: Vec<Flow>,
    /// The fairness window: opens at [`fairness_window_start`], closes
    /// when the first flow finishes.
    window_start: Instant,
    window_end: Option<Instant>,
    /// A message's expected bytes, and its bytes read at the receiver.
    scratch: Vec<u8>,
    got: Vec<u8>,
    next_sample: Instant,
    last_sample: Instant,
    /// Queue depth integrated over the fairness window (byte-seconds), the
    /// time integrated, and the last depth seen with its time.
    queue_area: f64,
    queue_time: f64,
    last_queue: Option<(Instant, u64)>,
    rep: IncastReport,
}

impl<'c> Incast<'c> {
    /// Setup: the receiver node, the switch in front of it (random CE
    /// marking, the bottleneck queue if any), its CQ, then one sender per
    /// flow ([`Self::add_sender`]) and the fairness window's start.
    fn setup(cfg: &'c IncastConfig) -> Self {
        let n = cfg.senders.max(1);
        let size = cfg.message_size.max(1);
        let window = cfg.window.max(1);
        let count = cfg.bytes_per_flow.div_ceil(u64::from(size)).max(1);
        let mut sim = Simulator::new(cfg.seed);
        let receiver = sim.add_node(
            Endpoint::new(EndpointConfig {
                local_mac: RECEIVER_MAC,
                local_ip: RECEIVER_IP,
                max_qps: n,
                cc: cfg.cc,
                seed: [cfg.seed, u64::MAX],
                ..EndpointConfig::default()
            }),
            cfg.link,
        );
        let mut switch = Switch::random_ce(cfg.ce_probability);
        if let Some(b) = cfg.bottleneck {
            switch.add_egress(receiver, b);
        }
        sim.switch = Some(switch);
        let rx_cq = sim
            .endpoint(receiver)
            .create_cq(cq_capacity(window) * n as usize);
        let mut incast = Incast {
            cfg,
            sim,
            receiver,
            rx_cq,
            size,
            window,
            slot: u64::from(size),
            flows: Vec::new(),
            window_start: Instant::ZERO,
            window_end: None,
            scratch: vec![0u8; size as usize],
            got: vec![0u8; size as usize],
            next_sample: Instant::ZERO,
            last_sample: Instant::ZERO,
            queue_area: 0.0,
            queue_time: 0.0,
            last_queue: None,
            rep: IncastReport::default(),
        };
        let opts = ConnectOptions {
            path_mtu: cfg.mtu,
            timeout: ack_timeout(cfg),
            retry_cnt: 7,
            rnr_retry: 7,
            ..ConnectOptions::default()
        };
        for i in 0..n {
            let flow = incast.add_sender(i, count, &opts);
            incast.flows.push(flow);
        }
        incast.rep.bytes_expected = count * u64::from(size) * u64::from(n);
        incast.window_start = fairness_window_start(cfg, n, incast.rep.bytes_expected);
        incast
    }

    /// Adds sender `i`: its node, CQ and QP, a QP on the receiver, the two
    /// connected ([`Self::connect_flow`]), a source region on the sender
    /// and a destination region on the receiver, each a window of slots.
    fn add_sender(&mut self, i: u32, count: u64, opts: &ConnectOptions) -> Flow {
        let cfg = self.cfg;
        let ip = sender_ip(i);
        let node = self.sim.add_node(
            Endpoint::new(EndpointConfig {
                local_mac: sender_mac(i),
                local_ip: ip,
                max_qps: 1,
                cc: cfg.cc,
                seed: [cfg.seed, u64::from(i)],
                ..EndpointConfig::default()
            }),
            cfg.link,
        );
        let cq = self.sim.endpoint(node).create_cq(cq_capacity(self.window));
        let init = QpInitAttr {
            send_cq: cq,
            recv_cq: cq,
            max_send_wr: self.window,
            max_recv_wr: 1,
            sq_sig_all: true,
            srq: None,
        };
        let qpn = self.sim.endpoint(node).create_qp(init).expect("sender QP");
        let rinit = QpInitAttr {
            send_cq: self.rx_cq,
            recv_cq: self.rx_cq,
            ..init
        };
        let rqpn = self
            .sim
            .endpoint(self.receiver)
            .create_qp(rinit)
            .expect("receiver QP");
        self.connect_flow(i, node, qpn, rqpn, opts);
        let len = (self.slot * u64::from(self.window)) as usize;
        let src_iova = 0x1000_0000;
        let dst_iova = 0x4000_0000 + u64::from(i) * 0x100_0000;
        let src = self
            .sim
            .endpoint(node)
            .reg_mr(Box::new(vec![0u8; len]), src_iova, Access::LOCAL_WRITE)
            .expect("sender MR");
        let dst = self
            .sim
            .endpoint(self.receiver)
            .reg_mr(Box::new(vec![0u8; len]), dst_iova, Access::ALL)
            .expect("receiver MR");
        Flow {
            node,
            cq,
            qpn,
            rqpn,
            count,
            posted: 0,
            completed: 0,
            src,
            src_iova,
            dst,
            dst_iova,
            start: Instant::ZERO + cfg.start_stagger * i,
            finish: None,
            bytes_at_window_start: None,
            bytes_at_window_end: None,
            rate_time_sum: 0.0,
            active_time: 0.0,
        }
    }

    /// Connects sender `i`'s QP `qpn` (on `node`) with the receiver's QP
    /// `rqpn`, both starting at PSN 0; the receiver's grants REMOTE_WRITE.
    fn connect_flow(&mut self, i: u32, node: usize, qpn: u32, rqpn: u32, opts: &ConnectOptions) {
        let to_receiver = RemoteQp {
            qpn: rqpn,
            psn: 0,
            mac: RECEIVER_MAC,
            ip: RECEIVER_IP,
        };
        self.sim
            .endpoint(node)
            .connect(qpn, &to_receiver, opts)
            .expect("connect sender");
        let to_sender = RemoteQp {
            qpn,
            psn: 0,
            mac: sender_mac(i),
            ip: sender_ip(i),
        };
        // The senders WRITE into the receiver's QPs.
        let ropts = ConnectOptions {
            access: Access::REMOTE_WRITE,
            ..*opts
        };
        self.sim
            .endpoint(self.receiver)
            .connect(rqpn, &to_sender, &ropts)
            .expect("connect receiver");
    }

    /// Drive: posts what the windows allow, verifies each completion,
    /// tracks the fairness window and the queue, samples the rates, and
    /// steps the simulator (jumping to the next flow's start when nothing
    /// else is due), until every flow completed, a completion was wrong,
    /// the simulated deadline passed, or nothing is left to happen.
    fn drive(&mut self) {
        let mut wcs = [WorkCompletion::default(); 64];
        let deadline = Instant::ZERO + self.cfg.max_sim_time;
        loop {
            self.post_windows();
            self.poll_completions(&mut wcs);
            // Receiver completions (none expected for WRITE); keep its CQ empty.
            while self
                .sim
                .endpoint(self.receiver)
                .poll_cq(self.rx_cq, &mut wcs)
                > 0
            {}
            let now = self.sim.now();
            self.track_fairness_window(now);
            self.track_queue(now);
            if now >= self.next_sample {
                self.sample(now);
            }
            if self.flows.iter().all(|f| f.completed == f.count) {
                self.rep.finished = true;
                break;
            }
            if self.rep.error_completions > 0
                || self.rep.data_errors > 0
                || self.sim.now() > deadline
            {
                break;
            }
            // Step (transmit what is ready, jump to the next event); when
            // nothing is left to happen, jump to the next flow start.
            if !self.sim.step() && !self.advance_to_next_start() {
                break;
            }
        }
    }

    /// Posts what the windows allow, for flows that have started: each
    /// WRITE's source slot gets the message's pattern first.
    fn post_windows(&mut self) {
        let now = self.sim.now();
        let window = u64::from(self.window);
        for (q, f) in self.flows.iter_mut().enumerate() {
            if now < f.start {
                continue;
            }
            while f.posted < f.count && f.posted - f.completed < window {
                let m = f.posted;
                let off = (m % window) * self.slot;
                pattern(self.cfg.seed, q as u32, m, &mut self.scratch);
                let ep = self.sim.endpoint(f.node);
                ep.mr_write(f.src.lkey, f.src_iova + off, &self.scratch)
                    .expect("fill");
                let local = Sge {
                    lkey: f.src.lkey,
                    addr: f.src_iova + off,
                    length: self.size,
                };
                let mut wr = SendWr::new(m, SendOp::Write, local);
                wr.rkey = f.dst.rkey;
                wr.remote_addr = f.dst_iova + off;
                ep.post_send(f.qpn, wr).expect("post_send");
                f.posted += 1;
            }
        }
    }

    /// Polls every sender's CQ until empty, verifying each completion
    /// ([`Self::on_completion`]).
    fn poll_completions(&mut self, wcs: &mut [WorkCompletion]) {
        for q in 0..self.flows.len() {
            loop {
                let f = &self.flows[q];
                let k = self.sim.endpoint(f.node).poll_cq(f.cq, wcs);
                if k == 0 {
                    break;
                }
                for wc in &wcs[..k] {
                    self.on_completion(q, wc);
                }
            }
        }
    }

    /// A completion of flow `q`: successful, the next message in order,
    /// and the message's bytes at the receiver are its pattern. Marks the
    /// flow finished at its last message.
    fn on_completion(&mut self, q: usize, wc: &WorkCompletion) {
        let rep = &mut self.rep;
        if wc.status != WcStatus::Success {
            rep.error_completions += 1;
            rep.first_error.get_or_insert(format!(
                "flow {q}: wr_id {} completed with {:?}",
                wc.wr_id, wc.status
            ));
            return;
        }
        let m = wc.wr_id;
        let off = (m % u64::from(self.window)) * self.slot;
        pattern(self.cfg.seed, q as u32, m, &mut self.scratch);
        let f = &mut self.flows[q];
        let ok = m == f.completed
            && self
                .sim
                .endpoint(self.receiver)
                .mr_read(f.dst.lkey, f.dst_iova + off, &mut self.got)
                .is_ok()
            && self.got == self.scratch;
        if ok {
            rep.bytes_verified += u64::from(self.size);
        } else {
            rep.data_errors += 1;
            rep.first_error
                .get_or_insert(format!("flow {q}: message {m} has wrong bytes"));
        }
        f.completed += 1;
        if f.completed == f.count {
            f.finish = Some(self.sim.now());
        }
    }

    /// The fairness window closes when the first flow finishes; each flow's
    /// verified bytes are noted when it opens and when it closes.
    fn track_fairness_window(&mut self, now: Instant) {
        if self.window_end.is_none() && self.flows.iter().any(|f| f.finish.is_some()) {
            self.window_end = Some(now);
            for f in &mut self.flows {
                f.bytes_at_window_end = Some(f.completed * self.slot);
            }
        }
        if now >= self.window_start {
            for f in &mut self.flows {
                f.bytes_at_window_start
                    .get_or_insert(f.completed * self.slot);
            }
        }
    }

    /// Queue depth inside the fairness window (at every event): its
    /// maximum, and its integral over time for the mean.
    fn track_queue(&mut self, now: Instant) {
        if now >= self.window_start && self.window_end.is_none_or(|e| now <= e) {
            let depth = self.queue_bytes(now);
            self.rep.window_max_queue_bytes = self.rep.window_max_queue_bytes.max(depth);
            if let Some((t, d)) = self.last_queue {
                let dt = (now - t).as_secs_f64();
                self.queue_area += d as f64 * dt;
                self.queue_time += dt;
            }
            self.last_queue = Some((now, depth));
        }
    }

    /// Bytes in the switch queue toward the receiver (0 without one).
    fn queue_bytes(&self, now: Instant) -> u64 {
        self.sim
            .switch
            .as_ref()
            .and_then(|s| s.queue(self.receiver))
            .map_or(0, |q| q.queue_bytes(now))
    }

    /// A sample: each active flow's DCQCN rate is integrated over the time
    /// since the last sample (for its mean); with a trace, each started
    /// flow's rate and alpha and the queue depth make a row.
    fn sample(&mut self, now: Instant) {
        let dt = (now - self.last_sample).as_secs_f64();
        let queue_kb = self.queue_bytes(now) as f64 / 1e3;
        for f in &mut self.flows {
            let active = now >= f.start && f.finish.is_none();
            let Some(cc) = self.sim.endpoint(f.node).qp_congestion(f.qpn) else {
                continue;
            };
            let rate = cc.rate_bps() / 1e9;
            let alpha = cc.alpha(now);
            if active {
                f.rate_time_sum += rate * dt;
                f.active_time += dt;
            }
            if self.cfg.trace && now >= f.start {
                self.rep.trace.push(TraceSample {
                    time_us: now.as_nanos() as f64 / 1e3,
                    qp: f.rqpn,
                    rate_gbps: rate,
                    alpha,
                    queue_kb,
                });
            }
        }
        self.last_sample = now;
        while self.next_sample <= now {
            self.next_sample += self.cfg.sample_interval.max(Duration::from_nanos(100));
        }
    }

    /// Nothing is left to happen: moves the clock to the next flow's start;
    /// false when every flow has started.
    fn advance_to_next_start(&mut self) -> bool {
        let now = self.sim.now();
        let Some(start) = self
            .flows
            .iter()
            .map(|f| f.start)
            .filter(|&s| s > now)
            .min()
        else {
            return false;
        };
        self.sim.advance_to(start);
        true
    }

    /// Verify: builds the report: the queue's mean in the fairness window,
    /// each flow's bytes and throughput, Jain's index, every endpoint's
    /// counters, the switch's statistics, and the first error (bytes
    /// missing at the end).
    fn verify(mut self) -> IncastReport {
        let end = self.sim.now();
        let rep = &mut self.rep;
        if self.queue_time > 0.0 {
            rep.window_mean_queue_bytes = self.queue_area / self.queue_time;
        }
        rep.sim_time_us = end.as_nanos() as f64 / 1e3;
        let ws = self.window_start;
        let we = self.window_end.unwrap_or(end);
        rep.fairness_window_us = (ws.as_nanos() as f64 / 1e3, we.as_nanos() as f64 / 1e3);
        let shared_secs = (we - ws).as_secs_f64();
        for f in &self.flows {
            rep.flows.push(f.report(end, self.slot, shared_secs));
        }
        let shared: Vec<f64> = rep.flows.iter().map(|f| f.shared_throughput_gbps).collect();
        rep.jain_index = if shared.iter().all(|&x| x > 0.0) {
            jain_index(&shared)
        } else {
            // No common window (flows too short or staggered apart): fall back
            // to whole-life throughput.
            jain_index(
                &rep.flows
                    .iter()
                    .map(|f| f.throughput_gbps)
                    .collect::<Vec<_>>(),
            )
        };
        for i in 0..self.sim.len() {
            rep.counters.accumulate(&self.sim.endpoint(i).counters());
        }
        if let Some(sw) = &self.sim.switch {
            if let Some(q) = sw.queue(self.receiver) {
                rep.bottleneck = q.stats();
            }
            rep.random_ce = sw.stats.random_ce;
        }
        if !rep.finished && rep.first_error.is_none() {
            rep.first_error = Some(format!(
                "{} of {} bytes verified by {:.0} us of simulated time",
                rep.bytes_verified, rep.bytes_expected, rep.sim_time_us
            ));
        }
        self.rep
    }
}

/// Completion queue entries per sender QP (the receiver's CQ holds this
/// many per flow).
fn cq_capacity(window: u32) -> usize {
    (window * 2 + 16) as usize
}

/// Sender `i`'s address.
fn sender_ip(i: u32) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(10, 0, 1, (i % 250 + 1) as u8))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jain() {
        assert_eq!(jain_index(&[1.0, 1.0, 1.0]), 1.0);
        assert_eq!(jain_index(&[1.0, 0.0]), 0.5);
        assert!((jain_index(&[10.0, 5.0]) - 0.9).abs() < 1e-12);
    }
}
