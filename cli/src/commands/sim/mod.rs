//! `roce-xdp sim`: run two simulated endpoints over a seeded virtual link
//! with loss, reordering, duplication and corruption, verify every byte and
//! every completion, and print what the transport did to recover.
//! No hardware, no privileges: everything happens in simulated time.

mod congestion;

use core::time::Duration;

use anyhow::Result;
use clap::Args;
use engine::endpoint::MAX_QPS_PER_ENGINE;
use engine::rc::Mtu;
use engine::sim::scenarios::{run_workload, Op, WorkloadConfig, WorkloadReport};
use engine::sim::{Impairments, LinkConfig};
use serde::Serialize;

use crate::common::args::OpArg;
use crate::errors::UserError;

/// Options of `roce-xdp sim`.
#[derive(Debug, Args)]
pub struct SimArgs {
    /// Operation: RDMA WRITE, SEND (odd messages with immediate), RDMA READ,
    /// or atomics (alternating fetch-and-add / compare-and-swap).
    #[arg(long, value_enum, default_value = "write")]
    op: OpArg,
    /// Messages in total (spread over the QPs).
    #[arg(long, default_value_t = 1000)]
    messages: u64,
    /// Bytes per message (0 to 1 GiB; atomics always move 8).
    #[arg(long, default_value_t = 4096)]
    size: u32,
    /// Path MTU: 256, 512, 1024, 2048 or 4096.
    #[arg(long, default_value_t = 1024)]
    mtu: u32,
    /// Queue pairs.
    #[arg(long, default_value_t = 1)]
    qps: u32,
    /// Messages in flight per QP.
    #[arg(long, default_value_t = 4)]
    window: u32,
    /// Probability (0..1) that a frame is lost.
    #[arg(long, default_value_t = 0.0)]
    loss: f64,
    /// Probability (0..1) that a frame is delayed so later frames overtake it.
    #[arg(long, default_value_t = 0.0)]
    reorder: f64,
    /// Probability (0..1) that a frame is delivered twice.
    #[arg(long, default_value_t = 0.0)]
    duplicate: f64,
    /// Probability (0..1) that one bit of a frame is flipped (the ICRC must catch it).
    #[arg(long, default_value_t = 0.0)]
    corrupt: f64,
    /// One-way link latency in microseconds.
    #[arg(long = "latency-us", default_value_t = 5.0)]
    latency_us: f64,
    /// Link rate in Gb/s.
    #[arg(long = "rate-gbps", default_value_t = 100.0)]
    rate_gbps: f64,
    /// ACK timeout exponent (4.096 us * 2^t); derived from the link when absent.
    #[arg(long)]
    timeout: Option<u8>,
    /// Seed of every random choice: the same seed gives the same run.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Give up after this much simulated time, in seconds.
    #[arg(long = "max-sim-seconds", default_value_t = 600)]
    max_sim_seconds: u64,
    /// Print one JSON object instead of the text summary.
    #[arg(long)]
    json: bool,
    /// Congestion (--ce, --bottleneck-gbps, --senders, --dcqcn, --trace):
    /// when any is given, WRITE streams from several senders through a
    /// shared switch queue instead of the two-endpoint run.
    #[command(flatten)]
    congestion: congestion::CongestionArgs,
}

#[derive(Serialize)]
struct JsonReport<'a> {
    ok: bool,
    op: &'static str,
    messages: u64,
    size: u32,
    mtu: u32,
    qps: u32,
    seed: u64,
    messages_completed: u64,
    bytes_verified: u64,
    data_errors: u64,
    duplicate_completions: u64,
    out_of_order_completions: u64,
    error_completions: u64,
    lost_messages: u64,
    packets_sent: u64,
    retransmitted_packets: u64,
    naks_sent: u64,
    timeouts: u64,
    sim_time_us: u64,
    link_dropped: u64,
    link_reordered: u64,
    link_duplicated: u64,
    link_corrupted: u64,
    counters: std::collections::BTreeMap<&'static str, u64>,
    first_error: Option<&'a str>,
}

fn probability(name: &str, p: f64) -> Result<f64> {
    if !(0.0..=1.0).contains(&p) {
        return Err(UserError::Usage(format!(
            "--{name} must be a probability between 0 and 1, got {p}"
        ))
        .into());
    }
    Ok(p)
}

fn config(a: &SimArgs) -> Result<WorkloadConfig> {
    let mtu = Mtu::from_bytes(a.mtu).ok_or_else(|| {
        UserError::Usage(format!(
            "--mtu must be 256, 512, 1024, 2048 or 4096, got {}",
            a.mtu
        ))
    })?;
    if a.qps == 0 || a.qps > MAX_QPS_PER_ENGINE {
        return Err(UserError::Usage(format!(
            "--qps must be 1..={MAX_QPS_PER_ENGINE} (the QPs one engine holds)"
        ))
        .into());
    }
    if a.window == 0 || a.window > 1024 {
        return Err(UserError::Usage("--window must be 1..=1024".into()).into());
    }
    if u64::from(a.size) * u64::from(a.window) * u64::from(a.qps) > 8 << 30 {
        return Err(UserError::Usage(
            "--size x --window x --qps needs more than 8 GiB of simulated memory: lower one".into(),
        )
        .into());
    }
    if a.size > 1 << 30 {
        return Err(UserError::Usage("--size must be at most 1 GiB".into()).into());
    }
    let latency_ok = a.latency_us.is_finite() && a.latency_us >= 0.0;
    let rate_ok = a.rate_gbps.is_finite() && a.rate_gbps > 0.0;
    if !latency_ok || !rate_ok {
        return Err(
            UserError::Usage("--latency-us must be >= 0 and --rate-gbps > 0".into()).into(),
        );
    }
    if a.timeout.is_some_and(|t| t > 31) {
        return Err(UserError::Usage("--timeout must be 0..=31".into()).into());
    }
    let op = match a.op {
        OpArg::Write => Op::Write,
        OpArg::Send => Op::Send,
        OpArg::Read => Op::Read,
        OpArg::Atomic => Op::Atomic,
    };
    let latency = Duration::from_nanos((a.latency_us * 1000.0) as u64);
    let impair = Impairments {
        loss: probability("loss", a.loss)?,
        reorder: probability("reorder", a.reorder)?,
        reorder_delay: latency.max(Duration::from_micros(2)),
        duplicate: probability("duplicate", a.duplicate)?,
        corrupt: probability("corrupt", a.corrupt)?,
    };
    Ok(WorkloadConfig {
        op,
        messages: a.messages,
        size: a.size,
        mtu,
        qps: a.qps,
        link: LinkConfig {
            latency,
            rate_bps: (a.rate_gbps * 1e9) as u64,
            impair,
        },
        seed: a.seed,
        window: a.window,
        timeout: a.timeout,
        retry_cnt: 7,
        max_sim_time: Duration::from_secs(a.max_sim_seconds),
    })
}

fn print_text(a: &SimArgs, cfg: &WorkloadConfig, r: &WorkloadReport) {
    println!(
        "roce-xdp sim: {} x {} B {} over {} QP(s), PMTU {}, loss {} reorder {} duplicate {} corrupt {}, latency {} us, seed {}",
        a.messages,
        if cfg.op == Op::Atomic { 8 } else { a.size },
        cfg.op.name(),
        a.qps,
        a.mtu,
        a.loss,
        a.reorder,
        a.duplicate,
        a.corrupt,
        a.latency_us,
        a.seed
    );
    print!("{r}");
    let c = &r.counters;
    println!(
        "recovery: packets sent {} (retransmitted {}), NAKs {}, timeouts {}, RNR NAKs {}, bad ICRC dropped {}",
        c.sent_pkts, c.retransmitted_packets, c.naks_sent, c.timeouts, c.send_rnr_err, c.dropped_bad_icrc
    );
    if r.sim_time_us > 0 {
        let gbps = r.bytes_verified as f64 * 8.0 / (r.sim_time_us as f64 * 1000.0);
        println!("goodput (simulated): {gbps:.2} Gb/s");
    }
    println!(
        "{}",
        if r.ok() {
            "OK: every message delivered once, byte-exact, in order"
        } else {
            "FAILED"
        }
    );
}

/// Run `roce-xdp sim`.
pub fn run(a: SimArgs) -> Result<()> {
    let cfg = config(&a)?;
    if a.congestion.requested() {
        let common = congestion::Common {
            op_is_write: cfg.op == Op::Write,
            messages: a.messages,
            size: a.size,
            mtu: a.mtu,
            window: a.window,
            latency_us: a.latency_us,
            rate_gbps: a.rate_gbps,
            impair: cfg.link.impair,
            seed: a.seed,
            max_sim_seconds: a.max_sim_seconds,
            json: a.json,
        };
        return congestion::run(&a.congestion, &common);
    }
    let r = run_workload(&cfg);
    if a.json {
        let c = &r.counters;
        let j = JsonReport {
            ok: r.ok(),
            op: cfg.op.name(),
            messages: a.messages,
            size: if cfg.op == Op::Atomic { 8 } else { a.size },
            mtu: a.mtu,
            qps: a.qps,
            seed: a.seed,
            messages_completed: r.messages_completed,
            bytes_verified: r.bytes_verified,
            data_errors: r.data_errors,
            duplicate_completions: r.duplicate_completions,
            out_of_order_completions: r.out_of_order_completions,
            error_completions: r.error_completions,
            lost_messages: r.lost_messages,
            packets_sent: c.sent_pkts,
            retransmitted_packets: c.retransmitted_packets,
            naks_sent: c.naks_sent,
            timeouts: c.timeouts,
            sim_time_us: r.sim_time_us,
            link_dropped: r.link.dropped,
            link_reordered: r.link.reordered,
            link_duplicated: r.link.duplicated,
            link_corrupted: r.link.corrupted,
            counters: c.iter().collect(),
            first_error: r.first_error.as_deref(),
        };
        println!("{}", serde_json::to_string(&j)?);
    } else {
        print_text(&a, &cfg, &r);
    }
    if !r.ok() {
        anyhow::bail!(
            "verification failed: {}",
            r.first_error
                .as_deref()
                .unwrap_or("not every message completed once, in order, byte-exact")
        );
    }
    Ok(())
}
