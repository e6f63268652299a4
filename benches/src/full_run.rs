//! The full run behind `roce-xdp bench`, the harness's orchestrator:
//! creates a fresh pair of network namespaces joined by a veth pair, and
//! measures on it, in one process, the kernel UDP path and the bare AF_XDP
//! floor ([`crate::baselines`]) and the engine ([`crate::engine_path`]):
//! the sweep, in rounds; then the target comparisons as adjacent pairs
//! ([`crate::paired`]); then derives the ratios, the multi-queue scaling
//! and the projection, and puts every figure in the [`Report`].
//!
//! No measurement module imports this one: it sits on top of them, and
//! only the command line ([`crate::frontend`]) calls [`run`]. The
//! namespaces (and with them the veth pair and any XDP program) are
//! removed when the pair is dropped, also on error or panic.

use engine::testbed::netns::{is_root, PairConfig, VethPair};

use crate::baselines::floor::{self, floor_pingpong, floor_point, FloorPayload, FloorPoint};
use crate::baselines::kernel_udp::{self, kernel_pingpong, kernel_stream};
use crate::engine_path::{self, EngineResults, Op};
use crate::error::HarnessError;
use crate::multi_queue;
use crate::options::{Options, Section, LINK_MTU, ROCE_PMTU, SMALL, UDP_CHUNK};
use crate::paired;
use crate::placement;
use crate::protocol_path;
use crate::report::{
    GoodputRow, Latency, MessageRate, Projection, ProjectionRow, Report, Setup, SCHEMA_VERSION,
};
use crate::sources::SourceLayout;

/// Queues per side in the multi-queue row (one per core of a 2-core machine).
const MQ_QUEUES: u32 = 2;
use crate::stats::{keep_best, lower_p50, Percentiles};
use crate::sysinfo::Machine;

fn progress(opts: &Options, msg: &str) {
    if opts.progress {
        eprintln!("bench: {msg}");
    }
}

/// Runs everything and returns the report.
pub fn run(opts: &Options) -> Result<Report, HarnessError> {
    if !is_root() {
        return Err(HarnessError::NotRoot);
    }
    if let Some(section) = opts.only {
        return run_section(opts, section);
    }
    let machine = Machine::detect();
    progress(opts, "creating namespaces and veth pair");
    let pair = VethPair::create(&PairConfig {
        mtu: LINK_MTU,
        queues: 2,
    })?;
    let sizes = opts.sizes();
    let mut notes = vec![
        format!(
            "kernel UDP: messages larger than {UDP_CHUNK} B are sent as {UDP_CHUNK}-byte datagrams (the largest that fits the {LINK_MTU}-byte link MTU unfragmented; the last of a message carries the rest), whose payloads sendmmsg reads from where the engine's stream of the same messages reads them (as for the floor); its goodput counts UDP payload received"
        ),
        format!(
            "AF_XDP floor: one-way stream of Ethernet/IPv4/UDP frames as long as the engine's WRITE packets (payload + {} B headers, RETH included for single-packet messages), no protocol work; each frame's payload is copied from a {} MiB region laid out as the engine's stream lays out its messages ({}), so the floor reads the same bytes from the same places as the engine; goodput counts the payload those frames carry",
            floor::ROCE_OVERHEAD,
            crate::sources::REGION >> 20,
            SourceLayout::Perftest.describe()
        ),
        "engine goodput counts message bytes completed at the requester (WRITE; READ: bytes read back) or received (SEND: receive completions at the responder)".into(),
        format!(
            "projection: cycles per packet = measured ns per packet x {:.0} MHz; one core's packets/s x 4096 B = Gb/s per core; cores = a link's packet rate at {WIRE_BYTES_4096} wire bytes per packet / one core's packet rate. A projection, not a measurement: a zero-copy NIC removes most of the copy-mode AF_XDP and veth cost in the two 'on this veth' rows, and memory bandwidth, caches and the NIC are not modelled",
            machine.cpu_mhz
        ),
    ];
    notes.push(match placement::side_cores() {
        Some([x, y]) => format!(
            "placement: the engine runs as designed, one pinned engine thread per queue: side a's (requester) on core {x}, side b's (responder) on core {y}; the application thread that posts the engine's work requests runs on the core of the side that does not send the data (WRITE, SEND: core {y}; READ: core {x}), so that it never competes with the engine thread that limits the stream (applications post without touching the engine's core); the 2-queue scaling run is not pinned (four engine threads pinned two per core measured 10.3 Gb/s at 64 KiB against 11.3-13.1 floating). The baselines (AF_XDP floor, kernel UDP) and every ping-pong are not pinned: measured on this machine, pinning the floor's sender and receiver the same way lowered the floor (64 KiB: about 8.4 instead of 12-13 Gb/s), so each baseline keeps its better, unpinned placement"
        ),
        None => "placement: fewer than two cores, no thread is pinned".into(),
    });
    let mut missing = Vec::new();
    let rounds = opts.rounds();
    let mut best: Option<Round> = None;
    for k in 0..rounds {
        progress(opts, &format!("round {} of {rounds}", k + 1));
        let mut round_missing = Vec::new();
        let r = measure_round(&pair, opts, &sizes, &mut notes, &mut round_missing)?;
        for m in round_missing {
            let m = if rounds > 1 {
                format!("round {}: {m}", k + 1)
            } else {
                m
            };
            missing.push(m);
        }
        best = Some(match best {
            None => r,
            Some(b) => b.merge(r),
        });
    }
    // The paired step runs once, after the rounds: pairing (not repetition)
    // is what cancels the machine's drift, so more pairs buy more than
    // repeating the step each round, and its pairs are interleaved across
    // the targets so each target's pairs spread over the whole step.
    let paired_opts = paired::PairedOptions {
        pairs: opts.pairs(),
        point: opts.pair_point(),
        poll: opts.engine_poll,
    };
    progress(
        opts,
        &format!(
            "paired target measurements: {} pairs per target, {:.2} s per side",
            paired_opts.pairs,
            paired_opts.point.as_secs_f64()
        ),
    );
    let paired = paired::measure(&pair, &paired_opts, opts.progress, &mut missing);
    // The multi-queue row, on its own bridged pairs.
    let mq_rounds = if opts.quick { 1 } else { 3 };
    let multi_queue = match multi_queue::measure(opts, opts.engine_poll, MQ_QUEUES, mq_rounds) {
        Ok(m) => Some(m),
        Err(e) => {
            missing.push(format!("multi-queue row: {e}"));
            None
        }
    };
    notes.push(format!(
        "multi-queue: RDMA WRITE of {} B messages on {} QP pairs (QP i created on queue i % queues), one queue per side and then {MQ_QUEUES}, alternating, {mq_rounds} round(s) of one {:.2} s point each, median per queue count; each run on a fresh pair of veths joined by a Linux bridge whose ports pick each frame's queue by a hash of its flow (ebpf/testbed_rss.c), as RSS does on a NIC; 'handed to another queue' = rx_handoff / packets received by both sides in the measured window; engine CPU = both sides' engine threads (user + system) per data packet; engine threads pinned with one queue per side, floating with more",
        multi_queue::SIZE,
        multi_queue::QPS,
        opts.point().as_secs_f64()
    ));
    notes.push(format!(
        "paired target measurements: after the sweep, each target comparison is measured as {} pairs of {:.2} s points, the engine's WRITE stream and its baseline (the sweep's own floor or kernel UDP point) back to back, the baseline first in odd-numbered pairs and the engine first in even-numbered ones (A B, B A, ...: a drift linear in time cancels), pair 1 of every target, then pair 2 of every target, and so on; per pair, ratio = engine / baseline. The throughput rows of 'Ratios against the targets' are the median of those per-pair ratios, not a ratio of two best-of-sweep figures measured tens of seconds apart, which on a machine whose speed drifts (a small shared VM: by up to 1.5x within minutes) says more about when each side ran than about the engine",
        paired_opts.pairs,
        paired_opts.point.as_secs_f64()
    ));
    // The latency tools' own loops, the Device polling option, idle cost.
    progress(opts, "latency tools, Device polling option, idle cost");
    let tools = crate::tool_latency::measure(&pair, opts, &mut notes, &mut missing);
    progress(
        opts,
        "stock perftest on the drop-in libibverbs against the tools",
    );
    let verbs_drop_in = crate::verbs_drop_in::measure(&pair, opts, &mut missing);
    progress(
        opts,
        "UCX's ucx_perftest on the drop-in libibverbs against the tools",
    );
    let ucx = crate::ucx::measure(&pair, opts, &mut missing);
    progress(
        opts,
        "RDMA CM: connection setup rate, write-bw -R and stock ib_write_bw -R against their TCP exchange (paired), stock ucmatose",
    );
    let cm = crate::rdma_cm::measure(&pair, opts, &mut missing);
    progress(
        opts,
        "shared engine: stock perftest attached to a roce-xdp service against in-process (paired), the idle service's CPU",
    );
    let shared = crate::shared_engine::measure(&pair, opts, &mut missing);
    progress(
        opts,
        "SGE lists and inline data against the one-SGE path (paired)",
    );
    let sge_paths = crate::sge_paths::measure(
        &pair,
        &crate::sge_paths::SGE_ROWS,
        &paired_opts,
        opts.progress,
        &mut missing,
    );
    notes.push(format!(
        "SGE lists and inline data: the engine's own WRITE and SEND streams (verbs Device, fresh 1-queue device per point), the variant (64 KiB WRITE gathered from 8 SGEs of 8 KiB with post_send_sgl on a QP with max_send_sge 8; 64 B SEND posted inline with post_send_inline on a QP with max_inline_data 64, its bytes copied from application memory) against the same stream posted from one SGE with post_send, as {} pairs of {:.2} s points in alternating order, the rows' pairs interleaved; ratio = variant / one SGE per pair, the row's figure the median, target >= {}",
        paired_opts.pairs,
        paired_opts.point.as_secs_f64(),
        crate::sge_paths::BOUND
    ));
    let mut seen = std::collections::HashSet::new();
    notes.retain(|n| seen.insert(n.clone()));
    if rounds > 1 {
        notes.push(format!(
            "each figure is the best of {rounds} rounds run one after the other (highest throughput; for latency the round with the lowest p50), to reduce interference from other load on this shared machine"
        ));
    }
    let Round {
        kernel,
        kernel_lat,
        floor: floor_pts,
        floor_lat,
        engine,
        xdp_mode,
        zero_copy,
    } = best.expect("at least one round");
    let kernel_gbps = |size: u64| at(&kernel, size).map(|s| s.gbps());
    let kernel_mpps = at(&kernel, SMALL).map(|s| s.mpps());
    let floor_at = |size: u64| at(&floor_pts, size).cloned();

    let goodput = sizes
        .iter()
        .map(|&s| GoodputRow {
            message_bytes: s,
            kernel_udp_gbps: kernel_gbps(s),
            floor_gbps: floor_at(s).map(|p| p.gbps),
            write_gbps: engine.gbps(Op::Write, s),
            send_gbps: engine.gbps(Op::Send, s),
            read_gbps: engine.gbps(Op::Read, s),
        })
        .collect();
    if let Some(n) = sender_thread_note(&sizes, floor_at, &engine) {
        notes.push(n);
    }
    let machine_mhz = machine.cpu_mhz;
    let mut missing_late = Vec::new();
    let mut report = Report {
        schema: SCHEMA_VERSION,
        machine,
        setup: Setup {
            quick: opts.quick,
            link_mtu: LINK_MTU,
            roce_pmtu: ROCE_PMTU,
            udp_chunk: UDP_CHUNK,
            xdp_mode,
            xsk_zero_copy: zero_copy,
            batch: floor::BATCH as u32,
            seconds_per_point: opts.point().as_secs_f64(),
            pingpong_iterations: opts.pingpongs() as u32,
        },
        goodput,
        message_rate: MessageRate {
            message_bytes: SMALL,
            kernel_udp_mpps: kernel_mpps,
            floor_mpps: floor_at(SMALL).map(|p| p.mpps),
            write_mpps: engine.mpps(Op::Write, SMALL),
            send_mpps: engine.mpps(Op::Send, SMALL),
            read_mpps: engine.mpps(Op::Read, SMALL),
        },
        latency: Latency {
            message_bytes: SMALL,
            kernel_udp: kernel_lat,
            floor: floor_lat,
            engine_send: engine.send_latency,
            engine_send_rtc: engine.send_latency_rtc,
        },
        ratios: vec![],
        paired,
        scaling: engine.scaling,
        multi_queue,
        tools,
        projection: Some(projection(
            opts,
            &machine_mhz,
            floor_at(1 << 20).and_then(|p| p.cpu_ns_per_packet),
            engine.write_cpu_ns_per_full_packet(),
            &mut missing_late,
        )),
        qp_scale: qp_scale_rows(opts, &mut missing_late),
        qp_scale_memory: qp_scale_memory_rows(opts),
        verbs_drop_in,
        ucx,
        sge_paths,
        cm,
        shared,
        section: None,
        notes,
        missing,
    };
    report.missing.append(&mut missing_late);
    report.ratios = report.target_ratios();
    drop(pair);
    Ok(report)
}

/// One section alone (`--only`): a report holding its figures, every
/// other part empty (not measured).
fn run_section(opts: &Options, section: Section) -> Result<Report, HarnessError> {
    let machine = Machine::detect();
    progress(opts, "creating namespaces and veth pair");
    let pair = VethPair::create(&PairConfig {
        mtu: LINK_MTU,
        queues: 2,
    })?;
    let mut missing = Vec::new();
    let mut notes = Vec::new();
    let mut report = Report {
        schema: SCHEMA_VERSION,
        machine,
        setup: Setup {
            quick: opts.quick,
            link_mtu: LINK_MTU,
            roce_pmtu: ROCE_PMTU,
            udp_chunk: UDP_CHUNK,
            xdp_mode: "unknown".into(),
            xsk_zero_copy: false,
            batch: floor::BATCH as u32,
            seconds_per_point: opts.point().as_secs_f64(),
            pingpong_iterations: opts.pingpongs() as u32,
        },
        goodput: Vec::new(),
        message_rate: MessageRate {
            message_bytes: SMALL,
            kernel_udp_mpps: None,
            floor_mpps: None,
            write_mpps: None,
            send_mpps: None,
            read_mpps: None,
        },
        latency: Latency {
            message_bytes: SMALL,
            kernel_udp: None,
            floor: None,
            engine_send: None,
            engine_send_rtc: None,
        },
        ratios: vec![],
        paired: Vec::new(),
        scaling: None,
        multi_queue: None,
        tools: Default::default(),
        projection: None,
        qp_scale: Vec::new(),
        qp_scale_memory: Vec::new(),
        verbs_drop_in: Default::default(),
        ucx: Default::default(),
        sge_paths: Vec::new(),
        cm: Default::default(),
        shared: Default::default(),
        section: None,
        notes: Vec::new(),
        missing: Vec::new(),
    };
    match section {
        Section::Shared => {
            progress(
                opts,
                "shared engine: stock perftest attached to a roce-xdp service against in-process (paired), the idle service's CPU",
            );
            report.shared = crate::shared_engine::measure(&pair, opts, &mut missing);
            report.section = Some("shared".into());
            notes.push(
                "section run (--only shared): only the shared engine's rows were measured".into(),
            );
        }
    }
    report.notes = notes;
    report.missing = missing;
    report.ratios = match section {
        Section::Shared => report.shared.target_ratios(),
    };
    drop(pair);
    Ok(report)
}

/// The point of `size`-byte messages in a round's per-size points.
fn at<T>(points: &[(u64, T)], size: u64) -> Option<&T> {
    points.iter().find(|(k, _)| *k == size).map(|(_, t)| t)
}

/// A note comparing, per WRITE size, the CPU time per packet of the
/// thread that sends the data: the floor's sender and the requester's
/// engine thread (the responder's thread spins while it waits for data,
/// so its CPU time says little when it is not the one that limits).
fn sender_thread_note(
    sizes: &[u64],
    floor_at: impl Fn(u64) -> Option<FloorPoint>,
    engine: &EngineResults,
) -> Option<String> {
    let figures: Vec<String> = sizes
        .iter()
        .filter_map(|&s| {
            let (floor_tx, _) = floor_at(s)?.thread_ns_per_packet?;
            let (requester, _) = engine
                .find(Op::Write, s)?
                .thread_ns_per_packet?;
            Some(format!(
                "{s} B: floor sender {floor_tx:.0} ns, engine requester thread {requester:.0} ns ({:.2})",
                floor_tx / requester
            ))
        })
        .collect();
    (!figures.is_empty()).then(|| {
        format!(
            "sending thread, CPU time per data packet (user + system, including the copy-mode AF_XDP and veth work its system calls do, which on veth includes delivering the packet to the peer's socket; in parentheses floor / engine: the goodput ratio to expect when the sending thread is the one that limits and has a core of its own, and far less sensitive to other load on the machine than the goodput ratio), WRITE: {}",
            figures.join("; ")
        )
    })
}

/// What one round measured.
struct Round {
    /// The kernel UDP point per message size.
    kernel: Vec<(u64, kernel_udp::StreamStats)>,
    kernel_lat: Option<Percentiles>,
    /// The floor's point per message size.
    floor: Vec<(u64, FloorPoint)>,
    floor_lat: Option<Percentiles>,
    engine: EngineResults,
    xdp_mode: String,
    zero_copy: bool,
}

impl Round {
    /// The best of two rounds, figure by figure.
    fn merge(mut self, o: Round) -> Round {
        keep_best(&mut self.kernel, o.kernel, |k| k.0, |k| k.1.gbps());
        keep_best(&mut self.floor, o.floor, |f| f.0, |f| f.1.gbps);
        self.kernel_lat = lower_p50(self.kernel_lat, o.kernel_lat);
        self.floor_lat = lower_p50(self.floor_lat, o.floor_lat);
        self.engine = self.engine.merge(o.engine);
        self
    }
}

/// One pass over every measurement.
fn measure_round(
    pair: &VethPair,
    opts: &Options,
    sizes: &[u64],
    notes: &mut Vec<String>,
    missing: &mut Vec<String>,
) -> Result<Round, HarnessError> {
    // 1. Kernel UDP.
    let mut kernel: Vec<(u64, kernel_udp::StreamStats)> = Vec::new();
    for &size in sizes {
        let datagram = size.min(UDP_CHUNK as u64);
        let s = kernel_stream(pair, size, SourceLayout::Perftest, opts.point())?;
        progress(
            opts,
            &format!(
                "kernel UDP, {size} B messages in {datagram} B datagrams: {:.2} Gb/s, {:.3} Mpps",
                s.gbps(),
                s.mpps()
            ),
        );
        kernel.push((size, s));
    }
    let kernel_lat = kernel_pingpong(pair, SMALL as usize, opts.pingpongs())?;
    progress(opts, &format!("kernel UDP ping-pong: {kernel_lat:?}"));

    // 2. AF_XDP floor.
    let mut floor_pts: Vec<(u64, FloorPoint)> = Vec::new();
    let mut xdp_mode = String::from("unknown");
    let mut zero_copy = false;
    for &size in sizes {
        let p = floor_point(
            pair,
            size,
            FloorPayload::Messages(SourceLayout::Perftest),
            opts.point(),
            opts.engine_poll,
        )?;
        let (frame_len, _) = floor::frame_len_for(size as usize, ROCE_PMTU as usize);
        progress(
            opts,
            &format!(
                "AF_XDP floor, {size} B messages in {frame_len} B frames: {:.2} Gb/s payload, {:.3} Mpps",
                p.gbps, p.mpps
            ),
        );
        xdp_mode = p.mode.clone();
        zero_copy = p.zero_copy;
        floor_pts.push((size, p));
    }
    let floor_lat = floor_pingpong(pair, SMALL as usize, opts.pingpongs(), opts.engine_poll)?;
    progress(opts, &format!("AF_XDP floor ping-pong: {floor_lat:?}"));

    // 3. The engine.
    let engine = engine_path::measure(pair, sizes, opts, notes, missing);
    Ok(Round {
        kernel,
        kernel_lat,
        floor: floor_pts,
        floor_lat,
        engine,
        xdp_mode,
        zero_copy,
    })
}

/// The `qp_scale` rows (`crate::qp_scale`), in memory, no I/O.
fn qp_scale_rows(opts: &Options, missing: &mut Vec<String>) -> Vec<crate::qp_scale::QpScaleRow> {
    use crate::qp_scale::{measure, QP_COUNTS, SIM_MESSAGES};
    progress(opts, "per-packet cost with 1 / 1K / 16K / 64K active QPs");
    let passes = if opts.quick { 1 } else { 3 };
    measure(&QP_COUNTS, passes, SIM_MESSAGES).unwrap_or_else(|e| {
        missing.push(format!("qp_scale rows: {e}"));
        Vec::new()
    })
}

/// The memory latency behind the `qp_scale` rows
/// (`crate::qp_scale::memory_rows`), in memory, no I/O.
fn qp_scale_memory_rows(opts: &Options) -> Vec<crate::qp_scale::MemoryRow> {
    use crate::qp_scale::{memory_rows, QP_COUNTS};
    progress(opts, "memory latency over as many QPs' state");
    memory_rows(&QP_COUNTS, if opts.quick { 1 } else { 3 })
}

/// Wire bytes of one RoCE packet with 4096 B of payload: RoCE headers
/// and ICRC, plus Ethernet FCS (4), preamble (8) and inter-frame gap (12).
const WIRE_BYTES_4096: u32 = 4096 + floor::ROCE_OVERHEAD as u32 + 4 + 8 + 12;

/// Builds the projection from measured cycles per packet.
fn projection(
    opts: &Options,
    mhz: &f64,
    floor_cpu_ns: Option<f64>,
    engine_cpu_ns: Option<f64>,
    missing: &mut Vec<String>,
) -> Projection {
    let mhz = *mhz;
    let cycles = |ns: f64| ns * mhz / 1e3;
    let row =
        |basis: &str, ns: f64| ProjectionRow::project(basis, cycles(ns), mhz, WIRE_BYTES_4096);
    let mut rows = Vec::new();
    progress(opts, "timing the protocol path in memory");
    match protocol_path::measure(opts.point()) {
        Ok(t) => {
            rows.push(row(
                "engine requester, in memory (WRITE segmentation + ACK handling, no I/O)",
                t.requester_ns_per_packet,
            ));
            rows.push(row(
                "engine responder, in memory (parse + ICRC + checks + placement + ACK, no I/O)",
                t.responder_ns_per_packet,
            ));
        }
        Err(e) => missing.push(format!("in-memory protocol path timing failed: {e}")),
    }
    if let Some(ns) = floor_cpu_ns {
        rows.push(row(
            "AF_XDP floor on this veth (copy mode; CPU time of both ends incl. veth, per packet)",
            ns,
        ));
    }
    if let Some(ns) = engine_cpu_ns {
        rows.push(row(
            "engine WRITE on this veth (copy mode; CPU time of both ends incl. veth, per packet)",
            ns,
        ));
    }
    Projection {
        cpu_mhz: mhz,
        wire_bytes_per_packet: WIRE_BYTES_4096,
        rows,
    }
}
