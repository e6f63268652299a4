//! The congestion part of `roce-xdp sim`: `--ce P`, `--bottleneck-gbps G
//! --ecn-threshold-kb K` (a switch queue shared by `--senders` senders),
//! `--dcqcn on|off`, `--trace FILE`. When any of them is given, `sim` runs
//! the incast scenario of `engine::sim::scenarios::run_incast` (verified RDMA WRITE streams
//! from each sender to one receiver) instead of the two-endpoint workload,
//! and its summary adds CNP and CE counts, per-QP rates, fairness and the
//! queue depth.

use std::io::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use engine::cc::{CcConfig, DcqcnParams};
use engine::rc::Mtu;
use engine::sim::scenarios::{run_incast, IncastConfig, IncastReport};
use engine::sim::{BottleneckConfig, Impairments, LinkConfig, MarkPoint, RedEcn};
use serde::Serialize;

use crate::errors::UserError;

/// On or off.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OnOff {
    On,
    Off,
}

/// DCQCN parameter presets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DcqcnPreset {
    /// NVIDIA ConnectX firmware defaults.
    Nvidia,
    /// The DCQCN paper (SIGCOMM'15).
    Paper,
}

/// Where the switch decides to mark.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum MarkAt {
    Dequeue,
    Enqueue,
}

/// Congestion options of `roce-xdp sim`.
#[derive(Debug, Clone, Args)]
pub struct CongestionArgs {
    /// Mark this fraction (0..1) of ECN-capable frames CE at random, as a
    /// congested switch would; receivers answer with CNPs.
    #[arg(long = "ce", value_name = "P")]
    pub ce: Option<f64>,
    /// Put a switch queue draining at G Gb/s in front of the receiver,
    /// shared by every sender (see --senders).
    #[arg(long = "bottleneck-gbps", value_name = "G")]
    pub bottleneck_gbps: Option<f64>,
    /// ECN marking threshold Kmin of the switch queue, KB (marking rises to
    /// Pmax at Kmax, then every packet is marked).
    #[arg(long = "ecn-threshold-kb", value_name = "K", default_value_t = 5.0)]
    pub ecn_threshold_kb: f64,
    /// Kmax, KB (default: 200, or twice the threshold if that is larger).
    #[arg(long = "ecn-kmax-kb", value_name = "KB")]
    pub ecn_kmax_kb: Option<f64>,
    /// Marking probability at Kmax (0..1).
    #[arg(long = "ecn-pmax", value_name = "P", default_value_t = 0.01)]
    pub ecn_pmax: f64,
    /// Mark on dequeue (feedback without the queueing delay) or on enqueue.
    #[arg(long = "mark-at", value_enum, default_value = "dequeue")]
    pub mark_at: MarkAt,
    /// Switch buffer, KB: frames beyond it are tail-dropped.
    #[arg(long = "buffer-kb", value_name = "KB", default_value_t = 1000.0)]
    pub buffer_kb: f64,
    /// Number of senders sharing the bottleneck (one QP each).
    #[arg(long, value_name = "N")]
    pub senders: Option<u32>,
    /// Sender i starts i x this many microseconds after the first.
    #[arg(long = "stagger-us", value_name = "US", default_value_t = 0.0)]
    pub stagger_us: f64,
    /// DCQCN rate control at the senders.
    #[arg(long, value_enum)]
    pub dcqcn: Option<OnOff>,
    /// DCQCN parameter set.
    #[arg(long = "dcqcn-params", value_enum, default_value = "nvidia")]
    pub dcqcn_params: DcqcnPreset,
    /// Minimum time between two CNPs of one QP, microseconds (0 = a CNP
    /// for every CE-marked packet).
    #[arg(
        long = "min-time-between-cnps-us",
        value_name = "US",
        default_value_t = 4.0
    )]
    pub min_time_between_cnps_us: f64,
    /// Write a CSV time series (time_us, qp, rate_gbps, alpha, queue_kb);
    /// draw it with `roce-xdp plot FILE --out rate.svg`.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// Sampling interval of the trace and rate averages, microseconds.
    #[arg(long = "trace-interval-us", value_name = "US", default_value_t = 10.0)]
    pub trace_interval_us: f64,
}

impl CongestionArgs {
    /// Whether a congestion scenario was asked for.
    pub fn requested(&self) -> bool {
        self.ce.is_some()
            || self.bottleneck_gbps.is_some()
            || self.senders.is_some()
            || self.dcqcn.is_some()
            || self.trace.is_some()
    }
}

/// The `sim` options the congestion scenario shares with the plain one.
#[derive(Debug, Clone, Copy)]
pub struct Common {
    /// Only WRITE is simulated here.
    pub op_is_write: bool,
    pub messages: u64,
    pub size: u32,
    pub mtu: u32,
    pub window: u32,
    pub latency_us: f64,
    pub rate_gbps: f64,
    pub impair: Impairments,
    pub seed: u64,
    pub max_sim_seconds: u64,
    pub json: bool,
}

fn usage(msg: impl Into<String>) -> anyhow::Error {
    UserError::Usage(msg.into()).into()
}

fn positive(name: &str, v: f64) -> Result<f64> {
    if !(v > 0.0 && v.is_finite()) {
        return Err(usage(format!(
            "--{name} must be a positive number, got {v}"
        )));
    }
    Ok(v)
}

/// Build the incast configuration from the command line.
pub fn config(c: &CongestionArgs, common: &Common) -> Result<IncastConfig> {
    if !common.op_is_write {
        return Err(usage(
            "the congestion simulation (--ce, --bottleneck-gbps, --senders, --dcqcn, --trace) streams RDMA WRITEs: \
             drop --op or use --op write",
        ));
    }
    let ce = c.ce.unwrap_or(0.0);
    if !(0.0..=1.0).contains(&ce) {
        return Err(usage(format!(
            "--ce must be a probability between 0 and 1, got {ce}"
        )));
    }
    if !(0.0..=1.0).contains(&c.ecn_pmax) {
        return Err(usage(format!(
            "--ecn-pmax must be between 0 and 1, got {}",
            c.ecn_pmax
        )));
    }
    let senders = c
        .senders
        .unwrap_or(if c.bottleneck_gbps.is_some() { 2 } else { 1 });
    if senders == 0 || senders > 1000 {
        return Err(usage("--senders must be 1..=1000"));
    }
    let mtu = Mtu::from_bytes(common.mtu).ok_or_else(|| {
        usage(format!(
            "--mtu must be 256, 512, 1024, 2048 or 4096, got {}",
            common.mtu
        ))
    })?;
    let rate_gbps = positive("rate-gbps", common.rate_gbps)?;
    let latency = Duration::from_nanos((common.latency_us.max(0.0) * 1000.0) as u64);
    let kmin = positive("ecn-threshold-kb", c.ecn_threshold_kb)? * 1000.0;
    let mut red = RedEcn::from_threshold(kmin as u64);
    if let Some(kmax) = c.ecn_kmax_kb {
        red.kmax_bytes = (positive("ecn-kmax-kb", kmax)? * 1000.0) as u64;
        if red.kmax_bytes <= red.kmin_bytes {
            return Err(usage(
                "--ecn-kmax-kb must be larger than --ecn-threshold-kb",
            ));
        }
    }
    red.pmax = c.ecn_pmax;
    let bottleneck = match c.bottleneck_gbps {
        None => None,
        Some(g) => Some(BottleneckConfig {
            rate_bps: positive("bottleneck-gbps", g)? * 1e9,
            red: Some(red),
            mark_point: match c.mark_at {
                MarkAt::Dequeue => MarkPoint::Dequeue,
                MarkAt::Enqueue => MarkPoint::Enqueue,
            },
            buffer_bytes: (positive("buffer-kb", c.buffer_kb)? * 1000.0) as u64,
        }),
    };
    let per_flow_messages = common.messages.div_ceil(u64::from(senders)).max(1);
    let dcqcn = match c.dcqcn_params {
        DcqcnPreset::Nvidia => DcqcnParams::nvidia_default(),
        DcqcnPreset::Paper => DcqcnParams::paper(),
    };
    if !(c.min_time_between_cnps_us >= 0.0 && c.min_time_between_cnps_us.is_finite()) {
        return Err(usage("--min-time-between-cnps-us must be >= 0"));
    }
    Ok(IncastConfig {
        senders,
        bytes_per_flow: per_flow_messages * u64::from(common.size.max(1)),
        message_size: common.size.max(1),
        window: common.window.max(1),
        mtu,
        link: LinkConfig {
            latency,
            rate_bps: (rate_gbps * 1e9) as u64,
            impair: common.impair,
        },
        bottleneck,
        ce_probability: ce,
        cc: CcConfig {
            dcqcn_enabled: c.dcqcn != Some(OnOff::Off),
            dcqcn,
            line_rate_gbps: rate_gbps,
            min_time_between_cnps: Duration::from_nanos(
                (c.min_time_between_cnps_us * 1000.0) as u64,
            ),
            ..CcConfig::default()
        },
        start_stagger: Duration::from_nanos((c.stagger_us.max(0.0) * 1000.0) as u64),
        seed: common.seed,
        sample_interval: Duration::from_nanos(
            (positive("trace-interval-us", c.trace_interval_us)? * 1000.0) as u64,
        ),
        trace: c.trace.is_some(),
        max_sim_time: Duration::from_secs(common.max_sim_seconds),
    })
}

#[derive(Serialize)]
struct JsonReport<'a> {
    ok: bool,
    scenario: &'static str,
    senders: u32,
    message_size: u32,
    bytes_per_flow: u64,
    seed: u64,
    dcqcn: bool,
    ce_probability: f64,
    bottleneck_gbps: Option<f64>,
    ecn_kmin_kb: Option<f64>,
    ecn_kmax_kb: Option<f64>,
    ecn_pmax: Option<f64>,
    bytes_expected: u64,
    bytes_verified: u64,
    sim_time_us: f64,
    /// CNPs sent by notification points (receivers).
    cnp_sent: u64,
    /// CNPs received by reaction points (senders).
    cnp_received: u64,
    /// Frames the network marked CE (switch queue + random marker).
    ce_marked: u64,
    /// CE-marked RoCE packets counted by receivers.
    np_ecn_marked_roce_packets: u64,
    rp_cnp_handled: u64,
    rp_cnp_ignored: u64,
    /// Mean rate of each QP: bytes verified over its life, Gb/s.
    qp_rates_gbps: Vec<f64>,
    /// Each QP's rate while every flow was active (what fairness is
    /// computed on), Gb/s.
    qp_shared_rates_gbps: Vec<f64>,
    /// Time average of each QP's DCQCN current rate while active, Gb/s.
    qp_mean_dcqcn_rates_gbps: Vec<f64>,
    jain_index: f64,
    fairness_window_us: [f64; 2],
    max_queue_kb: f64,
    steady_max_queue_kb: f64,
    steady_mean_queue_kb: f64,
    queue_dropped: u64,
    retransmitted_packets: u64,
    timeouts: u64,
    counters: std::collections::BTreeMap<&'static str, u64>,
    first_error: Option<&'a str>,
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

fn write_trace(path: &PathBuf, r: &IncastReport) -> Result<()> {
    let f = std::fs::File::create(path)
        .with_context(|| format!("cannot create trace file {}", path.display()))?;
    let mut w = std::io::BufWriter::new(f);
    writeln!(w, "time_us,qp,rate_gbps,alpha,queue_kb")?;
    for s in &r.trace {
        writeln!(
            w,
            "{:.3},{},{:.6},{:.6},{:.3}",
            s.time_us, s.qp, s.rate_gbps, s.alpha, s.queue_kb
        )?;
    }
    w.flush()
        .with_context(|| format!("cannot write trace file {}", path.display()))?;
    Ok(())
}

/// Run the congestion scenario and print its summary.
pub fn run(c: &CongestionArgs, common: &Common) -> Result<()> {
    let cfg = config(c, common)?;
    let r = run_incast(&cfg);
    if let Some(path) = &c.trace {
        write_trace(path, &r)?;
    }
    let counters = &r.counters;
    let ce_marked = r.bottleneck.ce_marked + r.random_ce;
    if common.json {
        let red = cfg.bottleneck.and_then(|b| b.red);
        let j = JsonReport {
            ok: r.ok(),
            scenario: "incast",
            senders: cfg.senders,
            message_size: cfg.message_size,
            bytes_per_flow: cfg.bytes_per_flow,
            seed: cfg.seed,
            dcqcn: cfg.cc.dcqcn_enabled,
            ce_probability: cfg.ce_probability,
            bottleneck_gbps: cfg.bottleneck.map(|b| b.rate_bps / 1e9),
            ecn_kmin_kb: red.map(|r| r.kmin_bytes as f64 / 1e3),
            ecn_kmax_kb: red.map(|r| r.kmax_bytes as f64 / 1e3),
            ecn_pmax: red.map(|r| r.pmax),
            bytes_expected: r.bytes_expected,
            bytes_verified: r.bytes_verified,
            sim_time_us: round3(r.sim_time_us),
            cnp_sent: counters.np_cnp_sent,
            cnp_received: counters.cnp_received,
            ce_marked,
            np_ecn_marked_roce_packets: counters.np_ecn_marked_roce_packets,
            rp_cnp_handled: counters.rp_cnp_handled,
            rp_cnp_ignored: counters.rp_cnp_ignored,
            qp_rates_gbps: r.flows.iter().map(|f| round3(f.throughput_gbps)).collect(),
            qp_shared_rates_gbps: r
                .flows
                .iter()
                .map(|f| round3(f.shared_throughput_gbps))
                .collect(),
            qp_mean_dcqcn_rates_gbps: r
                .flows
                .iter()
                .map(|f| round3(f.mean_dcqcn_rate_gbps))
                .collect(),
            jain_index: (r.jain_index * 1e4).round() / 1e4,
            fairness_window_us: [
                round3(r.fairness_window_us.0),
                round3(r.fairness_window_us.1),
            ],
            max_queue_kb: r.bottleneck.max_queue_bytes as f64 / 1e3,
            steady_max_queue_kb: r.window_max_queue_bytes as f64 / 1e3,
            steady_mean_queue_kb: round3(r.window_mean_queue_bytes / 1e3),
            queue_dropped: r.bottleneck.dropped,
            retransmitted_packets: counters.retransmitted_packets,
            timeouts: counters.timeouts,
            counters: counters.iter().collect(),
            first_error: r.first_error.as_deref(),
        };
        println!("{}", serde_json::to_string(&j)?);
    } else {
        println!(
            "roce-xdp sim (congestion): {} sender(s) x {} B in {} B WRITEs, links {} Gb/s, {}, CE {}, DCQCN {} ({:?}), seed {}",
            cfg.senders,
            cfg.bytes_per_flow,
            cfg.message_size,
            common.rate_gbps,
            match cfg.bottleneck {
                Some(b) => format!(
                    "bottleneck {} Gb/s (Kmin {} KB, Kmax {} KB, Pmax {}, buffer {} KB)",
                    b.rate_bps / 1e9,
                    b.red.map_or(0, |r| r.kmin_bytes / 1000),
                    b.red.map_or(0, |r| r.kmax_bytes / 1000),
                    b.red.map_or(0.0, |r| r.pmax),
                    b.buffer_bytes / 1000
                ),
                None => "no bottleneck".to_string(),
            },
            cfg.ce_probability,
            if cfg.cc.dcqcn_enabled { "on" } else { "off" },
            c.dcqcn_params,
            cfg.seed
        );
        println!(
            "bytes verified         {} / {}",
            r.bytes_verified, r.bytes_expected
        );
        println!("simulated time         {:.0} us", r.sim_time_us);
        for f in &r.flows {
            println!(
                "QP {:#x}: {:.2} Gb/s over its life, {:.2} Gb/s while all flows ran, DCQCN rate {:.2} Gb/s on average",
                f.qp, f.throughput_gbps, f.shared_throughput_gbps, f.mean_dcqcn_rate_gbps
            );
        }
        println!(
            "fairness (Jain)        {:.4} over {:.0}..{:.0} us",
            r.jain_index, r.fairness_window_us.0, r.fairness_window_us.1
        );
        println!(
            "congestion: CE marked {} (received {}), CNPs sent {} received {} (handled {}, ignored {})",
            ce_marked,
            counters.np_ecn_marked_roce_packets,
            counters.np_cnp_sent,
            counters.cnp_received,
            counters.rp_cnp_handled,
            counters.rp_cnp_ignored
        );
        if cfg.bottleneck.is_some() {
            println!(
                "queue: max {:.1} KB, steady max {:.1} KB, steady mean {:.1} KB, dropped {}",
                r.bottleneck.max_queue_bytes as f64 / 1e3,
                r.window_max_queue_bytes as f64 / 1e3,
                r.window_mean_queue_bytes / 1e3,
                r.bottleneck.dropped
            );
        }
        println!(
            "recovery: retransmitted {}, timeouts {}",
            counters.retransmitted_packets, counters.timeouts
        );
        if let Some(path) = &c.trace {
            println!("trace: {} ({} rows)", path.display(), r.trace.len());
        }
        println!(
            "{}",
            if r.ok() {
                "OK: every byte delivered and verified"
            } else {
                "FAILED"
            }
        );
    }
    if !r.ok() {
        anyhow::bail!(
            "verification failed: {}",
            r.first_error
                .as_deref()
                .unwrap_or("not every byte was delivered and verified")
        );
    }
    Ok(())
}
