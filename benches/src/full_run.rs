//! The end-to-end harness behind `roce-xdp bench`: creates a fresh pair of
//! network namespaces joined by a veth pair, and measures on it, in one
//! process, the kernel UDP path, the bare AF_XDP floor and the engine (the
//! sweep, in rounds); then the target comparisons as adjacent pairs
//! ([`crate::paired`]); then derives the ratios, the multi-queue scaling
//! and the projection.
//!
//! Each side of a measurement runs on its own thread that first enters its
//! namespace (`setns`), so sockets, interface lookups and XDP attachments
//! happen there. The namespaces (and with them the veth pair and any XDP
//! program) are removed when the pair is dropped, also on error or panic.

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::Duration;

use engine::io::echo::PollMode;
use engine::io::{process_cpu_time, udp, XskConfig, XskSocket};
use engine::loader::{AttachMode, SteerProgram};
use engine::netns::{PairConfig, Side, VethPair};
use thiserror::Error;

use crate::baselines::floor::{self, FloorPayload};
use crate::baselines::kernel_udp;
use crate::engine_path::{window, EngineResults};
use crate::paired;
use crate::placement;
use crate::protocol_path;
use crate::report::{
    GoodputRow, Latency, MessageRate, Projection, ProjectionRow, Report, Setup, SCHEMA_VERSION,
};
use crate::sources::SourceLayout;
use crate::stats::{per_second, Percentiles};
use crate::sysinfo::Machine;

/// Link MTU of the veth pair: room for a 4096-byte RoCE payload with
/// IPv4, UDP, BTH, RETH and ICRC.
pub const LINK_MTU: u32 = 4200;
/// RoCE path MTU (payload bytes per packet).
pub const ROCE_PMTU: u32 = 4096;
/// Largest UDP payload that fits the link MTU without IP fragmentation.
pub const UDP_CHUNK: u32 = LINK_MTU - 20 - 8;
/// Message size of the message-rate and latency figures.
pub const SMALL: u64 = 64;

/// What to run.
#[derive(Debug, Clone)]
pub struct Options {
    /// CI smoke run: fewer sizes, shorter points (under two minutes).
    pub quick: bool,
    /// Print progress lines to stderr.
    pub progress: bool,
    /// How the engine threads wait when idle.
    pub engine_poll: PollMode,
    /// Engine/baseline pairs per target of the paired step (`--pairs N`;
    /// `None`: 2 quick, 20 full). Rounded up to an even number.
    pub pairs: Option<usize>,
}

impl Options {
    /// Message sizes of the goodput sweep.
    pub fn sizes(&self) -> Vec<u64> {
        if self.quick {
            vec![64, 4096, 65536, 1 << 20]
        } else {
            vec![64, 256, 1024, 4096, 16384, 65536, 262144, 1 << 20]
        }
    }

    /// Length of one throughput point.
    pub fn point(&self) -> Duration {
        if self.quick {
            Duration::from_millis(300)
        } else {
            Duration::from_secs(2)
        }
    }

    /// Round trips per latency figure.
    pub fn pingpongs(&self) -> usize {
        if self.quick {
            2_000
        } else {
            20_000
        }
    }

    /// Engine/baseline pairs per target of the paired step. Even, so that
    /// each order (baseline first, engine first) runs equally often. The
    /// full run's 20 make the median's 95 % interval x(6)..x(15) of the
    /// sorted ratios (12 gave x(3)..x(10), about a third wider here).
    pub fn pairs(&self) -> usize {
        match self.pairs {
            Some(n) => n.max(1).next_multiple_of(2),
            None if self.quick => 2,
            None => 20,
        }
    }

    /// Length of each side's point in the paired step: shorter than the
    /// sweep's, so the two sides of a pair are close in time. (A full run
    /// measured 12 pairs of 0.5 s rather than 6 of 1 s, in the same time:
    /// this machine's speed moves within seconds, so shorter pairs see
    /// less drift and more of them make a steadier median.)
    pub fn pair_point(&self) -> Duration {
        if self.quick {
            Duration::from_millis(300)
        } else {
            Duration::from_millis(500)
        }
    }

    /// Passes over every measurement; each figure is the best pass.
    pub fn rounds(&self) -> usize {
        if self.quick {
            1
        } else {
            3
        }
    }
}

/// Why the harness could not run.
#[derive(Debug, Error)]
pub enum HarnessError {
    #[error(
        "the benchmark harness needs root (network namespaces, XDP, AF_XDP): run it with sudo"
    )]
    NotRoot,
    #[error(transparent)]
    Netns(#[from] engine::netns::NetnsError),
    #[error("{what}: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
    #[error("AF_XDP floor: {0}")]
    Floor(String),
    #[error("engine: {0}")]
    Engine(String),
    #[error("a measurement thread panicked: {0}")]
    Panicked(String),
}

fn io_err(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> HarnessError {
    let what = what.into();
    move |source| HarnessError::Io { what, source }
}

/// Whether the process runs with uid 0 (the engine's check).
pub use engine::netns::is_root;

/// Runs `f` on a new thread inside `side`'s network namespace.
pub fn spawn_in<T, F>(side: &Side, f: F) -> JoinHandle<Result<T, HarnessError>>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, HarnessError> + Send + 'static,
{
    let side = side.clone();
    std::thread::spawn(move || {
        side.enter()?;
        f()
    })
}

/// Joins a measurement thread, turning a panic into an error.
pub fn join<T>(h: JoinHandle<Result<T, HarnessError>>) -> Result<T, HarnessError> {
    h.join().map_err(|p| {
        HarnessError::Panicked(
            p.downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default(),
        )
    })?
}

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
    notes.push(format!(
        "paired target measurements: after the sweep, each target comparison is measured as {} pairs of {:.2} s points, the engine's WRITE stream and its baseline (the sweep's own floor or kernel UDP point) back to back, the baseline first in odd-numbered pairs and the engine first in even-numbered ones (A B, B A, ...: a drift linear in time cancels), pair 1 of every target, then pair 2 of every target, and so on; per pair, ratio = engine / baseline. The throughput rows of 'Ratios against the targets' are the median of those per-pair ratios, not a ratio of two best-of-sweep figures measured tens of seconds apart, which on a machine whose speed drifts (a small shared VM: by up to 1.5x within minutes) says more about when each side ran than about the engine",
        paired_opts.pairs,
        paired_opts.point.as_secs_f64()
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
    let kernel_gbps = |size: u64| {
        kernel
            .iter()
            .find(|(k, _)| *k == size)
            .map(|(_, s)| s.gbps())
    };
    let kernel_mpps = kernel
        .iter()
        .find(|(k, _)| *k == SMALL)
        .map(|(_, s)| s.mpps());
    let floor_at = |size: u64| {
        floor_pts
            .iter()
            .find(|(k, _)| *k == size)
            .map(|(_, p)| p.clone())
    };

    let goodput = sizes
        .iter()
        .map(|&s| GoodputRow {
            message_bytes: s,
            kernel_udp_gbps: kernel_gbps(s),
            floor_gbps: floor_at(s).map(|p| p.gbps),
            write_gbps: engine.write_gbps(s),
            send_gbps: engine.send_gbps(s),
            read_gbps: engine.read_gbps(s),
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
            write_mpps: engine.write_mpps(SMALL),
            send_mpps: engine.send_mpps(SMALL),
            read_mpps: engine.read_mpps(SMALL),
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
        projection: Some(projection(
            opts,
            &machine_mhz,
            floor_at(1 << 20).and_then(|p| p.cpu_ns_per_packet),
            engine.write_cpu_ns_per_full_packet(),
            &mut missing_late,
        )),
        notes,
        missing,
    };
    report.missing.append(&mut missing_late);
    report.ratios = report.target_ratios();
    drop(pair);
    Ok(report)
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
                .find(crate::engine_path::Op::Write, s)?
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

/// The percentiles with the lower p50.
fn lower_p50(a: Option<Percentiles>, b: Option<Percentiles>) -> Option<Percentiles> {
    match (a, b) {
        (Some(x), Some(y)) => Some(if y.p50_us < x.p50_us { y } else { x }),
        (x, y) => x.or(y),
    }
}

/// Keeps, per key, the entry with the larger `value`.
fn keep_best<K: PartialEq + Copy, T>(
    into: &mut Vec<(K, T)>,
    from: Vec<(K, T)>,
    value: impl Fn(&T) -> f64,
) {
    for (k, t) in from {
        match into.iter_mut().find(|(x, _)| *x == k) {
            Some(slot) => {
                if value(&t) > value(&slot.1) {
                    slot.1 = t;
                }
            }
            None => into.push((k, t)),
        }
    }
}

impl Round {
    /// The best of two rounds, figure by figure.
    fn merge(mut self, o: Round) -> Round {
        keep_best(&mut self.kernel, o.kernel, |s| s.gbps());
        keep_best(&mut self.floor, o.floor, |p| p.gbps);
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
    let engine = crate::engine_path::measure(pair, sizes, opts, notes, missing);
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

/// Wire bytes of one RoCE packet with 4096 B of payload: RoCE headers
/// and ICRC, plus Ethernet FCS (4), preamble (8) and inter-frame gap (12).
pub const WIRE_BYTES_4096: u32 = 4096 + floor::ROCE_OVERHEAD as u32 + 4 + 8 + 12;

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

/// One kernel UDP stream of `message`-byte messages from a to b, in
/// datagrams of at most [`UDP_CHUNK`] bytes whose payloads are read from
/// where the engine's stream of those messages placed as `layout` says
/// reads them ([`crate::sources::PacketSource`]): the sweep's point, also
/// used by the paired step.
pub fn kernel_stream(
    pair: &VethPair,
    message: u64,
    layout: SourceLayout,
    duration: Duration,
) -> Result<kernel_udp::StreamStats, HarnessError> {
    let datagram = message.clamp(1, UDP_CHUNK as u64) as usize;
    let source = crate::sources::PacketSource::new(
        layout,
        message,
        datagram as u64,
        window(message),
        crate::sources::REGION,
    );
    let dst = SocketAddr::new(pair.b.ipv4.into(), 7001);
    let stop = Arc::new(AtomicBool::new(false));
    let (ready_tx, ready_rx) = mpsc::channel();
    let stop_rx = stop.clone();
    let receiver = spawn_in(&pair.b, move || {
        let sock = UdpSocket::bind(dst).map_err(io_err("binding the UDP receiver"))?;
        udp::force_buffer_sizes(&sock, 8 << 20).map_err(io_err("SO_RCVBUFFORCE"))?;
        let _ = ready_tx.send(());
        kernel_udp::stream_receive(&sock, datagram, &stop_rx, Duration::from_millis(100))
            .map_err(io_err("receiving the UDP stream"))
    });
    let _ = ready_rx.recv_timeout(Duration::from_secs(5));
    let sender = spawn_in(&pair.a, move || {
        let sock = UdpSocket::bind("0.0.0.0:0").map_err(io_err("binding the UDP sender"))?;
        udp::force_buffer_sizes(&sock, 8 << 20).map_err(io_err("SO_SNDBUFFORCE"))?;
        kernel_udp::stream_send(&sock, dst, &source, udp::MAX_BATCH, duration)
            .map_err(io_err("sending the UDP stream"))
    });
    let sent = join(sender);
    stop.store(true, Ordering::Relaxed);
    let got = join(receiver)?;
    sent?;
    Ok(got)
}

/// UDP ping-pong: a echoes from b.
pub fn kernel_pingpong(
    pair: &VethPair,
    payload: usize,
    iterations: usize,
) -> Result<Option<Percentiles>, HarnessError> {
    let addr = SocketAddr::new(pair.b.ipv4.into(), 7002);
    let stop = Arc::new(AtomicBool::new(false));
    let (ready_tx, ready_rx) = mpsc::channel();
    let stop_srv = stop.clone();
    let server = spawn_in(&pair.b, move || {
        let sock = UdpSocket::bind(addr).map_err(io_err("binding the UDP echo server"))?;
        let _ = ready_tx.send(());
        kernel_udp::pingpong_server(&sock, payload, &stop_srv).map_err(io_err("UDP echo server"))
    });
    let _ = ready_rx.recv_timeout(Duration::from_secs(5));
    let client = spawn_in(&pair.a, move || {
        let sock = UdpSocket::bind("0.0.0.0:0").map_err(io_err("binding the UDP client"))?;
        let warm = iterations / 10;
        let mut rtts = kernel_udp::pingpong_client(
            &sock,
            addr,
            payload,
            iterations + warm,
            Duration::from_secs(2),
        )
        .map_err(io_err("UDP ping-pong"))?;
        Ok(Percentiles::of(&mut rtts[warm..]))
    });
    let r = join(client);
    stop.store(true, Ordering::Relaxed);
    join(server)?;
    r
}

/// What one floor stream measured.
#[derive(Debug, Clone)]
pub struct FloorPoint {
    /// Payload goodput the received frames stand for, Gb/s.
    pub gbps: f64,
    /// Frames received per second, millions.
    pub mpps: f64,
    pub mode: String,
    pub zero_copy: bool,
    /// Process CPU time (both ends, plus the veth work done in their
    /// system calls) per received frame, ns.
    pub cpu_ns_per_packet: Option<f64>,
    /// CPU time per received frame of the sending and of the receiving
    /// thread, ns (each including the kernel work of its system calls).
    pub thread_ns_per_packet: Option<(f64, f64)>,
}

/// Opens an AF_XDP socket on queue `queue` of `side`'s veth end with the
/// steering program attached and the socket registered. Must run on a
/// thread inside `side`'s namespace.
pub fn open_xsk(side: &Side, queue: u32) -> Result<(SteerProgram, XskSocket), HarnessError> {
    let mut prog = SteerProgram::attach(&side.ifname, AttachMode::Auto, false)
        .map_err(|e| HarnessError::Floor(e.to_string()))?;
    let sock = XskSocket::open(&XskConfig::new(&side.ifname, queue))
        .map_err(|e| HarnessError::Floor(e.to_string()))?;
    prog.register_socket(queue, &sock)
        .map_err(|e| HarnessError::Floor(e.to_string()))?;
    Ok((prog, sock))
}

/// The floor stream for `message`-byte WRITE messages, one way from a to
/// b on `pair`: frames as long as the engine's WRITE packets, payloads as
/// `what` says. The sweep, the paired step and the focused comparisons
/// (`examples/write_vs_floor.rs`) all measure the floor with it.
pub fn floor_point(
    pair: &VethPair,
    message: u64,
    what: FloorPayload,
    duration: Duration,
    poll: PollMode,
) -> Result<FloorPoint, HarnessError> {
    let (frame_len, payload) = floor::frame_len_for(message as usize, ROCE_PMTU as usize);
    let stop = Arc::new(AtomicBool::new(false));
    let (ready_tx, ready_rx) = mpsc::channel();
    let stop_rx = stop.clone();
    let b = pair.b.clone();
    let receiver = spawn_in(&pair.b, move || {
        let (prog, mut sock) = open_xsk(&b, 0)?;
        let _ = ready_tx.send(());
        let stats = floor::stream_receive(&mut sock, &stop_rx, Duration::from_millis(100), poll);
        Ok((stats, prog.mode().to_string(), sock.is_zero_copy()))
    });
    if ready_rx.recv_timeout(Duration::from_secs(10)).is_err() {
        return Err(join(receiver)
            .err()
            .unwrap_or(HarnessError::Floor("the receiver did not start".into())));
    }
    let frame = floor::udp_frame(&pair.a, &pair.b, 4791, frame_len);
    let frames = floor::FloorFrames::new(frame, payload, what, message, window(message));
    let a = pair.a.clone();
    let cpu0 = process_cpu_time();
    let sender = spawn_in(&pair.a, move || {
        let (_prog, mut sock) = open_xsk(&a, 0)?;
        Ok(floor::stream_send(&mut sock, &frames, duration, poll))
    });
    let sent = join(sender);
    stop.store(true, Ordering::Relaxed);
    let (got, mode, zero_copy) = join(receiver)?;
    let cpu = process_cpu_time().saturating_sub(cpu0);
    let sent = sent?;
    if got.packets == 0 {
        return Err(HarnessError::Floor(format!(
            "no {frame_len}-byte frame arrived: is XDP steering UDP 4791 on {}?",
            pair.b.ifname
        )));
    }
    Ok(FloorPoint {
        gbps: per_second((got.packets * payload as u64 * 8) as f64, got.elapsed) / 1e9,
        mpps: per_second(got.packets as f64, got.elapsed) / 1e6,
        mode,
        zero_copy,
        cpu_ns_per_packet: (got.packets > 0).then(|| cpu.as_nanos() as f64 / got.packets as f64),
        thread_ns_per_packet: (sent.packets > 0).then(|| {
            (
                sent.thread_cpu.as_nanos() as f64 / sent.packets as f64,
                got.thread_cpu.as_nanos() as f64 / got.packets as f64,
            )
        }),
    })
}

/// AF_XDP ping-pong: a sends one frame at a time, b's echo loop returns it.
pub fn floor_pingpong(
    pair: &VethPair,
    payload: usize,
    iterations: usize,
    poll: PollMode,
) -> Result<Option<Percentiles>, HarnessError> {
    let stop = Arc::new(AtomicBool::new(false));
    let (ready_tx, ready_rx) = mpsc::channel();
    let stop_echo = stop.clone();
    let b = pair.b.clone();
    let echo = spawn_in(&pair.b, move || {
        let (_prog, mut sock) = open_xsk(&b, 0)?;
        let _ = ready_tx.send(());
        Ok(engine::io::echo::echo(&mut sock, &stop_echo, poll))
    });
    if ready_rx.recv_timeout(Duration::from_secs(10)).is_err() {
        return Err(join(echo)
            .err()
            .unwrap_or(HarnessError::Floor("the echo loop did not start".into())));
    }
    let (frame_len, _) = floor::frame_len_for(payload, ROCE_PMTU as usize);
    let frame = floor::udp_frame(&pair.a, &pair.b, 4791, frame_len);
    let a = pair.a.clone();
    let client = spawn_in(&pair.a, move || {
        let (_prog, mut sock) = open_xsk(&a, 0)?;
        let warm = iterations / 10;
        let mut rtts = floor::pingpong(
            &mut sock,
            &frame,
            iterations + warm,
            Duration::from_secs(2),
            poll,
        )
        .map_err(HarnessError::Floor)?;
        Ok(Percentiles::of(&mut rtts[warm..]))
    });
    let r = join(client);
    stop.store(true, Ordering::Relaxed);
    join(echo)?;
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floor_pingpong_over_veth_busy_and_adaptive() {
        if !is_root() {
            eprintln!("skipping: needs root (network namespaces, XDP, AF_XDP)");
            return;
        }
        let pair = VethPair::create(&PairConfig {
            mtu: LINK_MTU,
            queues: 2,
        })
        .unwrap();
        for poll in [PollMode::Busy, PollMode::default()] {
            let p = floor_pingpong(&pair, 64, 2000, poll).unwrap().unwrap();
            eprintln!("floor ping-pong {poll:?}: {p:?}");
            assert_eq!(p.samples, 2000);
        }
    }
}
