//! `roce-xdp service --iface IF`: the shared engine of an interface. It
//! owns the interface's queues (the XDP program and one AF_XDP socket per
//! queue) and any number of programs attach to it: a program under
//! `roce-xdp exec --iface IF` finds its socket and attaches instead of
//! taking the interface (docs/shared-engine.md). Runs until SIGINT or
//! SIGTERM; `roce-xdp stats --iface IF` lists the attached programs.

use std::sync::{Arc, Mutex};

use anyhow::Context as _;
use clap::Args;

use engine::attach::{qpn_block, ProcessReport, Service, ServiceConfig, ServiceReport};
use engine::io::{XskCounters, XskStatistics};
use engine::nic::SteerProgram;
use engine::stats::{
    xdp_counters, ProcessSnapshot, QueueSnapshot, Snapshot, StatsServer, PROCESS_FRAMES_IN,
    PROCESS_FRAMES_OUT,
};

use crate::common::args::AttachArgs;
use crate::common::metrics;
use crate::common::signals::stop_flag;

/// Options of `roce-xdp service`.
#[derive(Debug, Args)]
pub struct ServiceArgs {
    /// Interface whose queues the service owns.
    #[arg(short = 'd', long = "iface", value_name = "IF")]
    pub iface: String,
    /// How many RX queues to own, from 0 (default: all of them, so that
    /// RSS may spread flows anywhere).
    #[arg(long = "queues")]
    pub queues: Option<u32>,
    /// A group (name or number) whose members may attach besides root:
    /// the socket becomes root:GROUP, mode 0660 (default: root only,
    /// 0600).
    #[arg(long = "group", value_name = "GROUP")]
    pub group: Option<String>,
    /// Slots of each attached program's frame rings, each way (a power of
    /// two; 4.4 KB each).
    #[arg(long = "ring-slots", default_value_t = 512)]
    pub ring_slots: u32,
    /// Serve the counters (per queue and per attached program) for
    /// Prometheus on http://ADDR:PORT/metrics, e.g. 127.0.0.1:9464.
    #[arg(long = "metrics", value_name = "ADDR:PORT", value_parser = metrics::parse_addr)]
    pub metrics: Option<std::net::SocketAddr>,
    /// Serve IPv6 (the GID is the interface's global IPv6 address).
    #[arg(short = '6', long = "ipv6")]
    pub ipv6: bool,
    /// Attach mode, zero-copy, --force.
    #[command(flatten)]
    pub attach: AttachArgs,
}

/// Runs `roce-xdp service`.
pub fn run(args: ServiceArgs) -> anyhow::Result<()> {
    let group = args.group.as_deref().map(group_id).transpose()?;
    let mut cfg = ServiceConfig::new(&args.iface);
    cfg.queues = args.queues;
    cfg.attach = args.attach.mode.into();
    cfg.zero_copy = args.attach.zero_copy.into();
    cfg.force = args.attach.force;
    cfg.ipv6 = args.ipv6;
    cfg.ring_slots = args.ring_slots;
    cfg.group = group;
    let stop = stop_flag()?;
    let mut service = Service::open(&cfg)
        .with_context(|| format!("starting the roce-xdp service of {}", args.iface))?;
    let (mac, ip) = service.address();
    let report = service.report();
    let program = service.program();
    let source = {
        let iface = args.iface.clone();
        move || snapshot(&iface, &report, &program)
    };
    let source = Arc::new(source);
    let stats = {
        let source = source.clone();
        StatsServer::start(&args.iface, move || source()).context("starting the stats channel")?
    };
    let metrics_server = match args.metrics {
        Some(addr) => {
            let source = source.clone();
            Some(metrics::start(addr, move || source())?)
        }
        None => None,
    };
    println!(
        "roce-xdp service: {} ({}, {}), socket {}; programs under `roce-xdp exec --iface {}` attach to it; Ctrl-C stops it",
        args.iface,
        mac.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":"),
        ip,
        service.socket_path().display(),
        args.iface,
    );
    if let Some(m) = &metrics_server {
        println!("metrics: {}", metrics::url(m));
    }
    service.run(&stop);
    drop(metrics_server);
    drop(stats);
    let last = service.report();
    let last = last.lock().unwrap_or_else(|e| e.into_inner());
    println!(
        "roce-xdp service: stopped; {} attached, {} detached, {} still attached",
        last.counters.attached,
        last.counters.detached,
        last.processes.len()
    );
    Ok(())
}

/// The gid of `group` (a number, or a name in /etc/group).
fn group_id(group: &str) -> anyhow::Result<u32> {
    if let Ok(n) = group.parse() {
        return Ok(n);
    }
    let text = std::fs::read_to_string("/etc/group").context("reading /etc/group")?;
    text.lines()
        .filter_map(|l| {
            let mut f = l.split(':');
            Some((f.next()?, f.nth(1)?))
        })
        .find(|(name, _)| *name == group)
        .and_then(|(_, gid)| gid.parse().ok())
        .with_context(|| format!("no group named {group} in /etc/group"))
}

/// The stats document of the service: its queues' socket counters, the
/// service's own counters (under queue 0's), and the attached programs.
fn snapshot(
    iface: &str,
    report: &Mutex<ServiceReport>,
    program: &Arc<Mutex<SteerProgram>>,
) -> Snapshot {
    let r = report.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let p = program.lock().unwrap_or_else(|e| e.into_inner());
    Snapshot {
        iface: iface.to_string(),
        pid: std::process::id(),
        uptime_ns: r.uptime.as_nanos() as u64,
        xdp_mode: p.mode().to_string(),
        zero_copy: false,
        xdp: p.counters().map(|c| xdp_counters(&c)).unwrap_or_default(),
        queues: r
            .queues
            .iter()
            .enumerate()
            .map(|(i, (q, c, k))| QueueSnapshot {
                queue: *q,
                core: None,
                zero_copy: false,
                counters: queue_counters(c, k, (i == 0).then_some(&r)),
                qp_rates: Vec::new(),
            })
            .collect(),
        steering: None,
        cm: None,
        processes: r.processes.iter().map(process_snapshot).collect(),
    }
}

/// One attached program as `roce-xdp stats` shows it. Every region of an
/// attached program is used in place by the program's own engine: none is
/// copied (docs/shared-engine.md, "Memory").
fn process_snapshot(p: &ProcessReport) -> ProcessSnapshot {
    let block = qpn_block(p.slot);
    let c = &p.counters;
    ProcessSnapshot {
        pid: p.pid,
        command: p.command.clone(),
        uid: p.uid,
        attached_ns: p.attached_for.as_nanos() as u64,
        qpn_first: block.first,
        qpn_last: block.last,
        qps: p.qps,
        regions: p.regions,
        zero_copy_regions: p.regions,
        copied_regions: 0,
        counters: [
            (PROCESS_FRAMES_IN, c.frames_in),
            ("bytes_in", c.bytes_in),
            (PROCESS_FRAMES_OUT, c.frames_out),
            ("bytes_out", c.bytes_out),
            ("dropped_ring_full", c.dropped_ring_full),
            ("refused", c.refused),
        ]
        .into_iter()
        .map(|(n, v)| (n.to_string(), v))
        .collect(),
    }
}

fn queue_counters(
    c: &XskCounters,
    k: &Option<XskStatistics>,
    service: Option<&ServiceReport>,
) -> Vec<(String, u64)> {
    let k = k.unwrap_or_default();
    let mut v: Vec<(String, u64)> = [
        ("xsk_rx_packets", c.rx_packets),
        ("xsk_rx_bytes", c.rx_bytes),
        ("xsk_tx_packets", c.tx_packets),
        ("xsk_tx_bytes", c.tx_bytes),
        ("xsk_tx_full", c.tx_full),
        ("xsk_tx_kicks", c.tx_kicks),
        ("kernel_rx_dropped", k.rx_dropped),
        ("kernel_rx_ring_full", k.rx_ring_full),
        (
            "kernel_rx_fill_ring_empty_descs",
            k.rx_fill_ring_empty_descs,
        ),
    ]
    .into_iter()
    .map(|(n, x)| (n.to_string(), x))
    .collect();
    if let Some(r) = service {
        let s = &r.counters;
        for (n, x) in [
            ("service_attached", s.attached),
            ("service_detached", s.detached),
            (
                "service_detached_for_ring_errors",
                s.detached_for_ring_errors,
            ),
            ("service_attach_refused", s.attach_refused),
            ("service_frames_no_process", s.frames_no_process),
            ("service_frames_not_roce", s.frames_not_roce),
            ("service_frames_gsi", s.frames_gsi),
            ("service_frames_gsi_dropped", s.frames_gsi_dropped),
            ("service_frames_local", s.frames_local),
            ("service_frames_ring_full", s.frames_ring_full),
            ("service_frames_tx_full", s.frames_tx_full),
            ("service_processes", r.processes.len() as u64),
        ] {
            v.push((n.to_string(), x));
        }
    }
    v
}
