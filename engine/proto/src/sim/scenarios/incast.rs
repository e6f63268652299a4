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

use core::net::{IpAddr, Ipv4Addr};
use core::time::Duration;

use super::workload::pattern;
use crate::cc::CcConfig;
use crate::endpoint::{ConnectOptions, Endpoint, EndpointConfig, RemoteQp, FIRST_QPN};
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

fn sender_mac(i: u32) -> [u8; 6] {
    [0x02, 0, 0, 1, (i >> 8) as u8, i as u8]
}

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

/// Run the incast scenario (see the module docs).
pub fn run(cfg: &IncastConfig) -> IncastReport {
    let mut rep = IncastReport::default();
    let n = cfg.senders.max(1);
    let size = cfg.message_size.max(1);
    let window = cfg.window.max(1);
    let count = cfg.bytes_per_flow.div_ceil(u64::from(size)).max(1);
    let mut sim = Simulator::new(cfg.seed);
    let rx_ip = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 254));
    let receiver = sim.add_node(
        Endpoint::new(EndpointConfig {
            local_mac: RECEIVER_MAC,
            local_ip: rx_ip,
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
    let cq_cap = (window * 2 + 16) as usize;
    let rx_cq = sim.endpoint(receiver).create_cq(cq_cap * n as usize);
    // ACK timeout: the verbs default (14: 67 ms) unless the worst queueing
    // delay plus the RTT needs more. Rate-limited QPs send the packets of a
    // message slowly (AckReq comes with the last one), so a timeout near
    // the RTT would fire while a slow QP is still sending.
    let buffer_time = cfg.bottleneck.map_or(Duration::ZERO, |b| {
        Duration::from_nanos((b.buffer_bytes as f64 * 8e9 / b.rate_bps) as u64)
    });
    let rtt = cfg.link.latency * 4 + buffer_time * 2 + Duration::from_micros(100);
    let mut timeout = ConnectOptions::default().timeout.max(1);
    while (4096u64 << timeout) < rtt.as_nanos() as u64 && timeout < 31 {
        timeout += 1;
    }
    let opts = ConnectOptions {
        path_mtu: cfg.mtu,
        timeout,
        retry_cnt: 7,
        rnr_retry: 7,
        ..ConnectOptions::default()
    };
    let slot = u64::from(size);
    let mut flows = Vec::new();
    for i in 0..n {
        let ip = IpAddr::V4(Ipv4Addr::new(10, 0, 1, (i % 250 + 1) as u8));
        let node = sim.add_node(
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
        let cq = sim.endpoint(node).create_cq(cq_cap);
        let init = QpInitAttr {
            send_cq: cq,
            recv_cq: cq,
            max_send_wr: window,
            max_recv_wr: 1,
            sq_sig_all: true,
        };
        let qpn = sim.endpoint(node).create_qp(init).expect("sender QP");
        let rinit = QpInitAttr {
            send_cq: rx_cq,
            recv_cq: rx_cq,
            ..init
        };
        let rqpn = sim
            .endpoint(receiver)
            .create_qp(rinit)
            .expect("receiver QP");
        sim.endpoint(node)
            .connect(
                qpn,
                &RemoteQp {
                    qpn: rqpn,
                    psn: 0,
                    mac: RECEIVER_MAC,
                    ip: rx_ip,
                },
                &opts,
            )
            .expect("connect sender");
        sim.endpoint(receiver)
            .connect(
                rqpn,
                &RemoteQp {
                    qpn,
                    psn: 0,
                    mac: sender_mac(i),
                    ip,
                },
                // The senders WRITE into the receiver's QPs.
                &ConnectOptions {
                    access: Access::REMOTE_WRITE,
                    ..opts
                },
            )
            .expect("connect receiver");
        let len = (slot * u64::from(window)) as usize;
        let src_iova = 0x1000_0000;
        let dst_iova = 0x4000_0000 + u64::from(i) * 0x100_0000;
        let src = sim
            .endpoint(node)
            .reg_mr(Box::new(vec![0u8; len]), src_iova, Access::LOCAL_WRITE)
            .expect("sender MR");
        let dst = sim
            .endpoint(receiver)
            .reg_mr(Box::new(vec![0u8; len]), dst_iova, Access::ALL)
            .expect("receiver MR");
        flows.push(Flow {
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
        });
    }
    rep.bytes_expected = count * u64::from(size) * u64::from(n);
    let last_start = Instant::ZERO + cfg.start_stagger * (n - 1);
    // Settling time before fairness is measured: a fifth of the expected
    // shared period, at least 1 ms.
    let bottleneck_bps = cfg
        .bottleneck
        .map_or(cfg.link.rate_bps as f64, |b| b.rate_bps);
    let shared_period =
        Duration::from_secs_f64(rep.bytes_expected as f64 * 8.0 / bottleneck_bps.max(1.0));
    let window_start = last_start + (shared_period / 5).max(Duration::from_millis(1));
    let mut window_end: Option<Instant> = None;

    let mut scratch = vec![0u8; size as usize];
    let mut got = vec![0u8; size as usize];
    let mut wcs = [WorkCompletion::default(); 64];
    let deadline = Instant::ZERO + cfg.max_sim_time;
    let mut next_sample = Instant::ZERO;
    let mut last_sample = Instant::ZERO;
    let (mut queue_area, mut queue_time, mut last_queue) = (0.0f64, 0.0f64, None::<(Instant, u64)>);
    loop {
        let now = sim.now();
        // Post what the windows allow, for flows that have started.
        for (q, f) in flows.iter_mut().enumerate() {
            if now < f.start {
                continue;
            }
            while f.posted < f.count && f.posted - f.completed < u64::from(window) {
                let m = f.posted;
                let off = (m % u64::from(window)) * slot;
                pattern(cfg.seed, q as u32, m, &mut scratch);
                let ep = sim.endpoint(f.node);
                ep.mr_write(f.src.lkey, f.src_iova + off, &scratch)
                    .expect("fill");
                let local = Sge {
                    lkey: f.src.lkey,
                    addr: f.src_iova + off,
                    length: size,
                };
                let mut wr = SendWr::new(m, SendOp::Write, local);
                wr.rkey = f.dst.rkey;
                wr.remote_addr = f.dst_iova + off;
                ep.post_send(f.qpn, wr).expect("post_send");
                f.posted += 1;
            }
        }
        // Completions: verify the bytes at the receiver.
        for (q, f) in flows.iter_mut().enumerate() {
            loop {
                let k = sim.endpoint(f.node).poll_cq(f.cq, &mut wcs);
                if k == 0 {
                    break;
                }
                for wc in &wcs[..k] {
                    if wc.status != WcStatus::Success {
                        rep.error_completions += 1;
                        rep.first_error.get_or_insert(format!(
                            "flow {q}: wr_id {} completed with {:?}",
                            wc.wr_id, wc.status
                        ));
                        continue;
                    }
                    let m = wc.wr_id;
                    let off = (m % u64::from(window)) * slot;
                    pattern(cfg.seed, q as u32, m, &mut scratch);
                    let ok = m == f.completed
                        && sim
                            .endpoint(receiver)
                            .mr_read(f.dst.lkey, f.dst_iova + off, &mut got)
                            .is_ok()
                        && got == scratch;
                    if ok {
                        rep.bytes_verified += u64::from(size);
                    } else {
                        rep.data_errors += 1;
                        rep.first_error
                            .get_or_insert(format!("flow {q}: message {m} has wrong bytes"));
                    }
                    f.completed += 1;
                    if f.completed == f.count {
                        f.finish = Some(sim.now());
                    }
                }
            }
        }
        // Receiver completions (none expected for WRITE); keep its CQ empty.
        while sim.endpoint(receiver).poll_cq(rx_cq, &mut wcs) > 0 {}
        let now = sim.now();
        // The fairness window closes when the first flow finishes.
        if window_end.is_none() && flows.iter().any(|f| f.finish.is_some()) {
            window_end = Some(now);
            for f in &mut flows {
                f.bytes_at_window_end = Some(f.completed * slot);
            }
        }
        if now >= window_start {
            for f in &mut flows {
                f.bytes_at_window_start.get_or_insert(f.completed * slot);
            }
        }
        // Queue depth inside the fairness window (every event).
        if now >= window_start && window_end.is_none_or(|e| now <= e) {
            let depth = sim
                .switch
                .as_ref()
                .and_then(|s| s.queue(receiver))
                .map_or(0, |q| q.queue_bytes(now));
            rep.window_max_queue_bytes = rep.window_max_queue_bytes.max(depth);
            if let Some((t, d)) = last_queue {
                let dt = (now - t).as_secs_f64();
                queue_area += d as f64 * dt;
                queue_time += dt;
            }
            last_queue = Some((now, depth));
        }
        // Samples.
        if now >= next_sample {
            let dt = (now - last_sample).as_secs_f64();
            let queue_kb = sim
                .switch
                .as_ref()
                .and_then(|s| s.queue(receiver))
                .map_or(0.0, |q| q.queue_bytes(now) as f64 / 1e3);
            for f in &mut flows {
                let active = now >= f.start && f.finish.is_none();
                let Some(cc) = sim.endpoint(f.node).qp_congestion(f.qpn) else {
                    continue;
                };
                let rate = cc.rate_bps() / 1e9;
                let alpha = cc.alpha(now);
                if active {
                    f.rate_time_sum += rate * dt;
                    f.active_time += dt;
                }
                if cfg.trace && now >= f.start {
                    rep.trace.push(TraceSample {
                        time_us: now.as_nanos() as f64 / 1e3,
                        qp: f.rqpn,
                        rate_gbps: rate,
                        alpha,
                        queue_kb,
                    });
                }
            }
            last_sample = now;
            while next_sample <= now {
                next_sample += cfg.sample_interval.max(Duration::from_nanos(100));
            }
        }
        if flows.iter().all(|f| f.completed == f.count) {
            rep.finished = true;
            break;
        }
        if rep.error_completions > 0 || rep.data_errors > 0 || sim.now() > deadline {
            break;
        }
        // Step (transmit what is ready, jump to the next event); when
        // nothing is left to happen, jump to the next flow start.
        if !sim.step() {
            let Some(start) = flows
                .iter()
                .map(|f| f.start)
                .filter(|&s| s > sim.now())
                .min()
            else {
                break;
            };
            sim.advance_to(start);
        }
    }
    let end = sim.now();
    if queue_time > 0.0 {
        rep.window_mean_queue_bytes = queue_area / queue_time;
    }
    rep.sim_time_us = end.as_nanos() as f64 / 1e3;
    let ws = window_start;
    let we = window_end.unwrap_or(end);
    rep.fairness_window_us = (ws.as_nanos() as f64 / 1e3, we.as_nanos() as f64 / 1e3);
    let shared_secs = (we - ws).as_secs_f64();
    for f in &flows {
        let finish = f.finish.unwrap_or(end);
        let life = (finish - f.start).as_secs_f64();
        let verified = f.completed * slot;
        let shared = match (f.bytes_at_window_start, f.bytes_at_window_end) {
            (Some(a), Some(b)) if shared_secs > 0.0 && b >= a => {
                (b - a) as f64 * 8.0 / shared_secs / 1e9
            }
            _ => 0.0,
        };
        rep.flows.push(FlowReport {
            qp: f.rqpn,
            bytes_verified: verified,
            start_us: f.start.as_nanos() as f64 / 1e3,
            finish_us: f.finish.map(|t| t.as_nanos() as f64 / 1e3),
            throughput_gbps: if life > 0.0 {
                verified as f64 * 8.0 / life / 1e9
            } else {
                0.0
            },
            shared_throughput_gbps: shared,
            mean_dcqcn_rate_gbps: if f.active_time > 0.0 {
                f.rate_time_sum / f.active_time
            } else {
                0.0
            },
        });
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
    for i in 0..sim.len() {
        rep.counters.accumulate(&sim.endpoint(i).counters());
    }
    if let Some(sw) = &sim.switch {
        if let Some(q) = sw.queue(receiver) {
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
    let _ = FIRST_QPN;
    rep
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
