//! The engine's side of the harness: RDMA WRITE, SEND and READ goodput
//! and message rate over the veth pair, 64 B SEND ping-pong latency and
//! the multi-queue WRITE scaling, all through the engine's verbs API
//! (`engine::verbs`): one [`Device`] per namespace (XDP program + one
//! engine thread per queue), one RC QP pair per queue, and one
//! application thread (this one) posting work and polling completions.

use std::net::IpAddr;
use std::time::{Duration, Instant};

use engine::driver::{CqWait, PollMode};
use engine::endpoint::{ConnectOptions, RemoteQp};
use engine::io::process_cpu_time;
use engine::rc::{Access, Mtu, RecvWr, SendOp, SendWr, SgeCaps, WcStatus, WorkCompletion};
use engine::testbed::netns::{Side, VethPair};
use engine::verbs::{Device, DeviceConfig, MemoryRegion, QpCaps, QueuePair};

use crate::error::{context, EngineResult};
use crate::options::{Options, ROCE_PMTU, SMALL};
use crate::placement;
use crate::report::Scaling;
use crate::sources::{window, SourceLayout, BYTES_IN_FLIGHT, MAX_WINDOW};
use crate::stats::{keep_best, lower_p50, per_second, Percentiles};

/// An RDMA operation measured by the harness.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Write,
    Send,
    Read,
}

impl Op {
    fn name(self) -> &'static str {
        match self {
            Op::Write => "WRITE",
            Op::Send => "SEND",
            Op::Read => "READ",
        }
    }
}

/// How a stream's application thread posts each message's data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PostMode {
    /// One SGE (`QueuePair::post_send`): the path every other row takes.
    OneSge,
    /// The message gathered from this many equal, consecutive SGEs of the
    /// same range (`QueuePair::post_send_sgl`, on QPs whose `max_send_sge`
    /// allows them).
    Sges(u32),
    /// The message copied from application memory into the post
    /// (`QueuePair::post_send_inline`, `IBV_SEND_INLINE`), on QPs whose
    /// `max_inline_data` holds it.
    Inline,
}

impl PostMode {
    /// The QP capacities the mode needs for `size`-byte messages (`None`:
    /// the QP keeps its defaults, one SGE and no inline data).
    fn caps(self, size: u64) -> Option<SgeCaps> {
        match self {
            PostMode::OneSge => None,
            PostMode::Sges(n) => Some(SgeCaps {
                max_send_sge: n,
                ..SgeCaps::default()
            }),
            PostMode::Inline => Some(SgeCaps {
                max_inline_data: size as u32,
                ..SgeCaps::default()
            }),
        }
    }
}

/// One throughput point of the engine.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    pub op: Op,
    pub message_bytes: u64,
    pub gbps: f64,
    pub mpps: f64,
    /// Process CPU time per data packet, if measured.
    pub cpu_ns_per_packet: Option<f64>,
    /// CPU time per data packet of the engine threads of side a (the
    /// requester) and side b (the responder), each including the kernel
    /// work of its system calls: the busier one bounds the rate when each
    /// thread has a core of its own.
    pub thread_ns_per_packet: Option<(f64, f64)>,
}

/// Everything the engine runs measured.
#[derive(Debug, Clone, Default)]
pub struct EngineResults {
    pub points: Vec<Point>,
    /// 64 B SEND ping-pong through the verbs `Device`: engine threads plus
    /// one application thread playing both sides.
    pub send_latency: Option<Percentiles>,
    /// 64 B SEND ping-pong in run-to-completion mode: one application
    /// thread per side drives its queue's engine ([`crate::engine_rtc`]).
    pub send_latency_rtc: Option<Percentiles>,
    pub scaling: Option<Scaling>,
}

impl EngineResults {
    /// The better of two runs, figure by figure (higher throughput, lower
    /// p50 latency; scaling from the best 1- and 2-queue figures).
    pub fn merge(mut self, o: EngineResults) -> EngineResults {
        keep_best(
            &mut self.points,
            o.points,
            |p| (p.op, p.message_bytes),
            |p| p.gbps,
        );
        self.send_latency = lower_p50(self.send_latency, o.send_latency);
        self.send_latency_rtc = lower_p50(self.send_latency_rtc, o.send_latency_rtc);
        self.scaling = match (self.scaling, o.scaling) {
            (Some(a), Some(b)) => Some(Scaling::new(
                a.message_bytes,
                a.queues,
                a.one_queue_gbps.max(b.one_queue_gbps),
                a.many_queues_gbps.max(b.many_queues_gbps),
            )),
            (a, b) => a.or(b),
        };
        self
    }

    /// The point of `op` at `size` bytes, if measured.
    pub fn find(&self, op: Op, size: u64) -> Option<&Point> {
        self.points
            .iter()
            .find(|p| p.op == op && p.message_bytes == size)
    }
    /// Goodput of `op` at `size` bytes, Gb/s, if measured.
    pub fn gbps(&self, op: Op, size: u64) -> Option<f64> {
        self.find(op, size).map(|p| p.gbps)
    }
    /// Message rate of `op` at `size` bytes, millions per second, if measured.
    pub fn mpps(&self, op: Op, size: u64) -> Option<f64> {
        self.find(op, size).map(|p| p.mpps)
    }
    /// CPU time per 4096-byte-payload packet of the largest WRITE measured.
    pub fn write_cpu_ns_per_full_packet(&self) -> Option<f64> {
        self.points
            .iter()
            .filter(|p| p.op == Op::Write && p.message_bytes >= ROCE_PMTU as u64)
            .max_by_key(|p| p.message_bytes)
            .and_then(|p| p.cpu_ns_per_packet)
    }
}

/// Size of each side's registered region per QP.
const REGION: usize = crate::sources::REGION as usize;
/// Message size of the scaling test.
const SCALING_SIZE: u64 = 64 * 1024;

/// Every how many WRITE/READ requests of a stream with `win` in flight
/// one is signaled: half the window, so the other half keeps the engine
/// busy while the application thread wakes up and posts again (perftest
/// signals every `--cq-mod` = 100 by default, within its tx depth). Each
/// signaled completion that finds the application waiting costs the
/// engine thread a futex wake: measured on this VM, about 7 us of its time
/// per wake, ~64 ns per packet at 64 KiB when a quarter window was
/// signaled.
fn signal_every(win: u64) -> u64 {
    (win / 2).max(1)
}

/// The two devices, one registered region per queue and side, and the
/// addresses needed to connect QPs.
pub(crate) struct Rig {
    pub(crate) a: Device,
    pub(crate) b: Device,
    /// Requester's buffer (a) and responder's buffer (b), per queue.
    regions: Vec<(MemoryRegion, MemoryRegion)>,
    mac_a: [u8; 6],
    mac_b: [u8; 6],
    /// QP pairs created so far (for distinct starting PSNs).
    created: std::cell::Cell<u32>,
    /// The cores of sides a and b when the engine threads are pinned
    /// (one queue per side), `None` when they float.
    cores: Option<[usize; 2]>,
    /// QP pairs per stream (QP i on queue i % queues).
    qps: u32,
}

/// A connected RC QP pair on one queue, with that queue's regions.
pub(crate) struct QpPair {
    a: QueuePair,
    b: QueuePair,
    la: MemoryRegion,
    rb: MemoryRegion,
}

impl QpPair {
    /// Destroys both QPs, so that a long run does not pile up idle QPs in
    /// the engines (every stream connects fresh ones).
    fn destroy(self) -> EngineResult<()> {
        self.a.destroy().map_err(context("destroying QP a"))?;
        self.b.destroy().map_err(context("destroying QP b"))
    }
}

/// A device on `side` with `queues` queues, queue i's engine thread
/// pinned to `cores[i % len]` (unpinned when `cores` is empty).
fn device_config(
    side: &Side,
    queues: u32,
    poll: PollMode,
    cq_wait: CqWait,
    cores: Vec<usize>,
) -> DeviceConfig {
    let mut c = DeviceConfig::new(&side.ifname);
    c.cq_wait = cq_wait;
    c.netns = Some(side.netns.clone());
    c.queues = queues;
    c.poll = poll;
    c.multi_buffer = true;
    c.cores = cores;
    c
}

impl Rig {
    /// Two devices; with one queue, a's engine thread runs on side a's core
    /// and b's on side b's ([`placement`]). With more queues than that the
    /// threads float: four engine threads pinned two per core (a sender and
    /// a receiver each) measured 10.3 Gb/s at 64 KiB against 11.3-13.1
    /// floating (`--quick` runs back to back).
    fn open(pair: &VethPair, queues: u32, poll: PollMode) -> EngineResult<Rig> {
        Rig::open_with_qps(pair, queues, poll, queues)
    }

    /// As [`Rig::open`], with `qps` QP pairs per stream, QP i created on
    /// queue i % queues.
    pub(crate) fn open_with_qps(
        pair: &VethPair,
        queues: u32,
        poll: PollMode,
        qps: u32,
    ) -> EngineResult<Rig> {
        Rig::open_waiting(pair, queues, poll, qps, CqWait::Park)
    }

    /// As [`Rig::open_with_qps`], the devices' `poll_cq_wait` waiting as
    /// `cq_wait` says.
    fn open_waiting(
        pair: &VethPair,
        queues: u32,
        poll: PollMode,
        qps: u32,
        cq_wait: CqWait,
    ) -> EngineResult<Rig> {
        let cores = placement::side_cores().filter(|_| queues == 1);
        let (cores_a, cores_b) = match cores {
            Some([x, y]) => (vec![x], vec![y]),
            None => (Vec::new(), Vec::new()),
        };
        let a = Device::open(device_config(&pair.a, queues, poll, cq_wait, cores_a))
            .map_err(context("opening device a"))?;
        let b = Device::open(device_config(&pair.b, queues, poll, cq_wait, cores_b))
            .map_err(context("opening device b"))?;
        let mac_b = a
            .resolve_mac(b.ip())
            .map_err(context("resolving b's MAC"))?;
        let mac_a = b
            .resolve_mac(a.ip())
            .map_err(context("resolving a's MAC"))?;
        let pattern = crate::sources::region_pattern(REGION);
        let mut regions = Vec::new();
        for q in 0..queues {
            let la = a
                .register_memory(q, REGION, Access::ALL)
                .map_err(context("registering memory a"))?;
            let rb = b
                .register_memory(q, REGION, Access::ALL)
                .map_err(context("registering memory b"))?;
            la.write(0, &pattern);
            rb.write(0, &pattern);
            regions.push((la, rb));
        }
        Ok(Rig {
            a,
            b,
            regions,
            mac_a,
            mac_b,
            created: std::cell::Cell::new(0),
            cores,
            qps: qps.max(1),
        })
    }

    /// Creates and connects a fresh QP pair on queue `q` (a fresh pair per
    /// test, so one test's outcome cannot leak into the next).
    pub(crate) fn connect(&self, q: u32) -> EngineResult<QpPair> {
        self.connect_with(q, None)
    }

    /// [`Rig::connect`], the requester's QP given `sge_caps` first (before
    /// it is connected, as `ibv_create_qp`'s `cap` would).
    fn connect_with(&self, q: u32, sge_caps: Option<SgeCaps>) -> EngineResult<QpPair> {
        let k = self.created.get();
        self.created.set(k + 1);
        let caps = QpCaps {
            max_send_wr: (MAX_WINDOW * 2) as u32,
            max_recv_wr: (MAX_WINDOW * 2) as u32,
        };
        let qa = self
            .a
            .create_qp(q, caps)
            .map_err(context("creating QP a"))?;
        let qb = self
            .b
            .create_qp(q, caps)
            .map_err(context("creating QP b"))?;
        if let Some(c) = sge_caps {
            qa.set_sge_caps(c)
                .map_err(context("setting QP a's SGE and inline capacities"))?;
        }
        let (ip_a, ip_b): (IpAddr, IpAddr) = (self.a.ip(), self.b.ip());
        let opts = ConnectOptions {
            path_mtu: Mtu::Mtu4096,
            sq_psn: 0x100 * (k + 1),
            // The rig's runs WRITE to and READ from either side.
            access: Access::REMOTE_WRITE | Access::REMOTE_READ,
            ..Default::default()
        };
        let psn_b = 0x9_0000 + k;
        qa.connect(
            RemoteQp {
                qpn: qb.qpn(),
                psn: psn_b,
                mac: self.mac_b,
                ip: ip_b,
            },
            opts,
        )
        .map_err(context("connecting QP a"))?;
        qb.connect(
            RemoteQp {
                qpn: qa.qpn(),
                psn: opts.sq_psn,
                mac: self.mac_a,
                ip: ip_a,
            },
            ConnectOptions {
                sq_psn: psn_b,
                ..opts
            },
        )
        .map_err(context("connecting QP b"))?;
        let (la, rb) = self.regions[q as usize].clone();
        Ok(QpPair {
            a: qa,
            b: qb,
            la,
            rb,
        })
    }

    /// The rig's fresh QP pairs, QP i on queue i % queues.
    fn connect_all(&self, sge_caps: Option<SgeCaps>) -> EngineResult<Vec<QpPair>> {
        (0..self.qps)
            .map(|i| self.connect_with(i % self.a.queues(), sge_caps))
            .collect()
    }

    pub(crate) fn close(self) {
        self.a.close();
        self.b.close();
    }
}

/// Per-QP bookkeeping of a stream.
struct Flow {
    issued: u64,
    completed: u64,
    /// SEND: receives posted on b.
    recvs_posted: u64,
}

/// What a stream measured.
#[derive(Debug, Clone, Copy)]
pub(crate) struct StreamResult {
    pub(crate) messages: u64,
    pub(crate) elapsed: Duration,
    cpu: Duration,
    /// CPU time of the engine threads of side a and side b.
    pub(crate) threads_cpu: (Duration, Duration),
    /// Packets both sides' engines received, and how many of them took a
    /// detour through another queue (`rx_handoff`).
    pub(crate) received: u64,
    pub(crate) handed_off: u64,
}

impl StreamResult {
    /// The figures of one point of `size`-byte `op` messages.
    pub(crate) fn point(&self, op: Op, size: u64) -> Point {
        let packets = (self.messages * packets_per_message(size)) as f64;
        let per_packet = |d: Duration| d.as_nanos() as f64 / packets;
        Point {
            op,
            message_bytes: size,
            gbps: per_second((self.messages * size * 8) as f64, self.elapsed) / 1e9,
            mpps: per_second(self.messages as f64, self.elapsed) / 1e6,
            cpu_ns_per_packet: (self.messages > 0).then(|| per_packet(self.cpu)),
            thread_ns_per_packet: (self.messages > 0).then(|| {
                (
                    per_packet(self.threads_cpu.0),
                    per_packet(self.threads_cpu.1),
                )
            }),
        }
    }
}

/// CPU time of the engine threads of both sides so far.
fn threads_cpu(rig: &Rig) -> (Duration, Duration) {
    (
        rig.a.total_stats().thread_cpu,
        rig.b.total_stats().thread_cpu,
    )
}

/// Where a stream's measured window starts: time, messages completed,
/// process CPU, engine threads' CPU (a, b), (packets received, handed off).
type WindowStart = (Instant, u64, Duration, (Duration, Duration), (u64, u64));

/// Packets both sides received so far, and how many took a detour.
fn detours(rig: &Rig) -> (u64, u64) {
    let (a, b) = (rig.a.total_stats(), rig.b.total_stats());
    (
        a.socket.rx_packets + b.socket.rx_packets,
        a.rx_handoff + b.rx_handoff,
    )
}

/// Streams `size`-byte `op` messages on every QP of the rig for
/// `duration` (after a warm-up), keeping `window(size)` in flight per QP,
/// placed in the regions as `layout` says,
/// every `signal_every`-th request signaled. Counts requester completions
/// (WRITE/READ) or receive completions (SEND).
pub(crate) fn stream(
    rig: &Rig,
    op: Op,
    size: u64,
    layout: SourceLayout,
    duration: Duration,
) -> EngineResult<StreamResult> {
    stream_posting(rig, op, size, layout, duration, PostMode::OneSge)
}

/// [`stream`], each message's data posted as `mode` says (WRITE and SEND;
/// inline messages are copied from an application buffer laid out as the
/// registered region, at the same offsets).
pub(crate) fn stream_posting(
    rig: &Rig,
    op: Op,
    size: u64,
    layout: SourceLayout,
    duration: Duration,
    mode: PostMode,
) -> EngineResult<StreamResult> {
    if let PostMode::Sges(n) = mode {
        if n == 0 || !size.is_multiple_of(u64::from(n)) {
            return Err(format!("{size} B cannot be gathered from {n} equal SGEs"));
        }
    }
    if mode != PostMode::OneSge && op == Op::Read {
        return Err("READ takes no gathered or inline data".into());
    }
    // The application's own copy of the data posted inline.
    let inline_src = match mode {
        PostMode::Inline => crate::sources::region_pattern(REGION),
        _ => Vec::new(),
    };
    let mut sges = Vec::new();
    // The application thread posts from the core of the side that does
    // not send the data (WRITE, SEND: a sends; READ: b sends the
    // responses), never beside the engine thread that limits the stream.
    let _pinned = placement::Pinned::to(rig.cores.map(|[a, b]| if op == Op::Read { a } else { b }));
    let qps = rig.connect_all(mode.caps(size))?;
    let win = window(size);
    let signal_every = signal_every(win);
    let mut flows: Vec<Flow> = qps
        .iter()
        .map(|_| Flow {
            issued: 0,
            completed: 0,
            recvs_posted: 0,
        })
        .collect();
    let mut wcs = vec![WorkCompletion::default(); 256];
    let warmup = duration / 5 + Duration::from_millis(20);
    let start = Instant::now();
    let mut measured: Option<WindowStart> = None;
    let mut result: Option<StreamResult> = None;
    let mut last_progress = Instant::now();
    let total_completed = |f: &[Flow]| f.iter().map(|f| f.completed).sum::<u64>();
    loop {
        let now = Instant::now();
        let posting = result.is_none();
        if measured.is_none() && now - start >= warmup {
            measured = Some((
                now,
                total_completed(&flows),
                process_cpu_time(),
                threads_cpu(rig),
                detours(rig),
            ));
        }
        if let Some((t0, c0, cpu0, (ta0, tb0), (r0, h0))) = measured {
            if result.is_none() && now - t0 >= duration {
                let (ta, tb) = threads_cpu(rig);
                let (r, h) = detours(rig);
                result = Some(StreamResult {
                    messages: total_completed(&flows) - c0,
                    elapsed: now - t0,
                    cpu: process_cpu_time().saturating_sub(cpu0),
                    threads_cpu: (ta.saturating_sub(ta0), tb.saturating_sub(tb0)),
                    received: r.saturating_sub(r0),
                    handed_off: h.saturating_sub(h0),
                });
            }
        }
        let mut progressed = false;
        for (qp, f) in qps.iter().zip(flows.iter_mut()) {
            if op == Op::Send {
                // Keep the receive queue ahead of the sends.
                while f.recvs_posted < f.completed + win + 16 {
                    let r = qp.b.post_recv(RecvWr {
                        wr_id: f.recvs_posted,
                        sge: qp.rb.sge(0, size as u32),
                    });
                    if r.is_err() {
                        break;
                    }
                    f.recvs_posted += 1;
                }
            }
            while posting && f.issued < f.completed + win {
                let off = layout.offset(size, f.issued, win, REGION as u64) as usize;
                let opcode = match op {
                    Op::Write => SendOp::Write,
                    Op::Send => SendOp::Send,
                    Op::Read => SendOp::Read,
                };
                let mut wr = SendWr::new(f.issued, opcode, qp.la.sge(off, size as u32));
                wr.remote_addr = qp.rb.addr() + off as u64;
                wr.rkey = qp.rb.rkey;
                wr.signaled = op == Op::Send || (f.issued + 1) % signal_every == 0;
                let posted = match mode {
                    PostMode::OneSge => qp.a.post_send(wr),
                    PostMode::Sges(n) => {
                        let piece = (size / u64::from(n)) as usize;
                        sges.clear();
                        sges.extend(
                            (0..n as usize).map(|i| qp.la.sge(off + i * piece, piece as u32)),
                        );
                        qp.a.post_send_sgl(wr, &sges)
                    }
                    PostMode::Inline => {
                        qp.a.post_send_inline(wr, &inline_src[off..off + size as usize])
                    }
                };
                if posted.is_err() {
                    break;
                }
                f.issued += 1;
            }
        }
        for q in 0..rig.a.queues() {
            let n = rig.a.poll_cq(q, &mut wcs);
            for wc in &wcs[..n] {
                if wc.status != WcStatus::Success {
                    return Err(format!(
                        "{} of {size} B completed with {:?}",
                        op.name(),
                        wc.status
                    ));
                }
                progressed = true;
                if op != Op::Send {
                    if let Some((_, f)) = qps
                        .iter()
                        .zip(flows.iter_mut())
                        .find(|(p, _)| p.a.qpn() == wc.qpn && p.a.queue() == q)
                    {
                        // RC completes in order: wr_id n done => 0..=n done.
                        f.completed = f.completed.max(wc.wr_id + 1);
                    }
                }
            }
            if op == Op::Send {
                let n = rig.b.poll_cq(q, &mut wcs);
                for wc in &wcs[..n] {
                    if wc.status != WcStatus::Success {
                        return Err(format!(
                            "receive of {size} B completed with {:?}",
                            wc.status
                        ));
                    }
                    progressed = true;
                    if let Some((_, f)) = qps
                        .iter()
                        .zip(flows.iter_mut())
                        .find(|(p, _)| p.b.qpn() == wc.qpn && p.b.queue() == q)
                    {
                        f.completed += 1;
                    }
                }
            }
            if let Some(err) = rig
                .a
                .poll_post_error(q)
                .or_else(|| rig.b.poll_post_error(q))
            {
                return Err(format!("the engine refused a {} post: {err:?}", op.name()));
            }
        }
        if let Some(r) = result {
            if flows.iter().all(|f| f.completed >= f.issued) {
                for qp in qps {
                    qp.destroy()?;
                }
                return Ok(r);
            }
        }
        if progressed {
            last_progress = Instant::now();
        } else {
            if last_progress.elapsed() > Duration::from_secs(5) {
                return Err(format!(
                    "{} of {size} B stalled: no completion for 5 s ({} issued, {} completed)",
                    op.name(),
                    flows.iter().map(|f| f.issued).sum::<u64>(),
                    total_completed(&flows)
                ));
            }
            if rig.a.queues() == 1 {
                // Block until the engine thread pushes the next completion
                // (it wakes this thread): the application leaves both cores
                // to the engine threads instead of polling beside them.
                let dev = if op == Op::Send { &rig.b } else { &rig.a };
                dev.wait_cq(0, Duration::from_millis(1));
            } else if last_progress.elapsed() > Duration::from_micros(50) {
                // Several queues: no single queue to wait on.
                std::thread::sleep(Duration::from_micros(20));
            } else {
                std::thread::yield_now();
            }
        }
    }
}

/// Data packets one message of `size` bytes takes.
fn packets_per_message(size: u64) -> u64 {
    size.div_ceil(ROCE_PMTU as u64).max(1)
}

/// 64 B SEND ping-pong between a and b on QP 0; returns the round trips.
fn pingpong(rig: &Rig, size: u64, iterations: usize) -> EngineResult<Vec<Duration>> {
    pingpong_on(rig, &rig.connect(0)?, size, iterations)
}

/// [`pingpong`] on the connected pair `qp` of queue 0.
pub(crate) fn pingpong_on(
    rig: &Rig,
    qp: &QpPair,
    size: u64,
    iterations: usize,
) -> EngineResult<Vec<Duration>> {
    let mut wcs = vec![WorkCompletion::default(); 16];
    let post_recvs = |side_b: bool| -> EngineResult<()> {
        for i in 0..8u64 {
            let (q, mr) = if side_b {
                (&qp.b, &qp.rb)
            } else {
                (&qp.a, &qp.la)
            };
            q.post_recv(RecvWr {
                wr_id: i,
                sge: mr.sge(0, size as u32),
            })
            .map_err(context("posting a receive"))?;
        }
        Ok(())
    };
    post_recvs(true)?;
    post_recvs(false)?;
    let mut rtts = Vec::with_capacity(iterations);
    // Waits for a receive completion, blocking (the engine thread wakes this
    // thread when it pushes a completion), so the waiting thread leaves its
    // core to the engine threads.
    let wait = |dev: &Device, want_recv: bool, wcs: &mut [WorkCompletion]| -> EngineResult<()> {
        let t = Instant::now();
        loop {
            let n = dev.poll_cq_wait(0, wcs, Duration::from_millis(100));
            for wc in &wcs[..n] {
                if wc.status != WcStatus::Success {
                    return Err(format!("ping-pong completion {:?}", wc.status));
                }
                if want_recv && wc.opcode == engine::rc::WcOpcode::Recv {
                    return Ok(());
                }
            }
            if !want_recv {
                return Ok(());
            }
            if t.elapsed() > Duration::from_secs(2) {
                return Err("ping-pong: no answer within 2 s".into());
            }
        }
    };
    for i in 0..iterations as u64 {
        let t0 = Instant::now();
        let mut ping = SendWr::new(i, SendOp::Send, qp.la.sge(4096, size as u32));
        ping.signaled = false;
        qp.a.post_send(ping).map_err(context("posting the ping"))?;
        wait(&rig.b, true, &mut wcs)?;
        qp.b.post_recv(RecvWr {
            wr_id: i,
            sge: qp.rb.sge(0, size as u32),
        })
        .map_err(context("reposting a receive"))?;
        let mut pong = SendWr::new(i, SendOp::Send, qp.rb.sge(4096, size as u32));
        pong.signaled = false;
        qp.b.post_send(pong).map_err(context("posting the pong"))?;
        wait(&rig.a, true, &mut wcs)?;
        rtts.push(t0.elapsed());
        qp.a.post_recv(RecvWr {
            wr_id: i,
            sge: qp.la.sge(0, size as u32),
        })
        .map_err(context("reposting a receive"))?;
    }
    Ok(rtts)
}

/// The 64 B SEND ping-pong of [`measure`] through the verbs `Device`
/// (engine threads + one application thread) on a fresh 1-queue rig, for
/// focused comparisons (`examples/latency.rs`).
pub fn pingpong_threaded(
    pair: &VethPair,
    size: u64,
    iterations: usize,
    poll: PollMode,
) -> EngineResult<Vec<Duration>> {
    pingpong_threaded_with(pair, size, iterations, poll, CqWait::Park)
}

/// [`pingpong_threaded`] with the devices' application threads waiting
/// for completions as `cq_wait` says (the polling option: `CqWait::Spin`).
pub fn pingpong_threaded_with(
    pair: &VethPair,
    size: u64,
    iterations: usize,
    poll: PollMode,
    cq_wait: CqWait,
) -> EngineResult<Vec<Duration>> {
    let rig = Rig::open_waiting(pair, 1, poll, 1, cq_wait)?;
    let r = pingpong(&rig, size, iterations);
    rig.close();
    r
}

/// Streams each of `ops` at each of `sizes` on one fresh 1-queue rig
/// (as [`measure`] does), for focused comparisons
/// (`examples/write_vs_floor.rs`).
pub fn measure_points(
    pair: &VethPair,
    ops: &[Op],
    sizes: &[u64],
    layout: SourceLayout,
    point: Duration,
    poll: PollMode,
) -> EngineResult<Vec<Point>> {
    let rig = Rig::open(pair, 1, poll)?;
    let mut out = Vec::new();
    for &op in ops {
        for &size in sizes {
            out.push(stream(&rig, op, size, layout, point)?.point(op, size));
        }
    }
    rig.close();
    Ok(out)
}

/// One point of `size`-byte `op` messages posted as `mode` says, on a
/// fresh 1-queue rig (closed before returning, as [`measure_points`]).
pub fn measure_point_posting(
    pair: &VethPair,
    op: Op,
    size: u64,
    layout: SourceLayout,
    point: Duration,
    poll: PollMode,
    mode: PostMode,
) -> EngineResult<Point> {
    let rig = Rig::open(pair, 1, poll)?;
    let p = stream_posting(&rig, op, size, layout, point, mode);
    rig.close();
    Ok(p?.point(op, size))
}

/// Runs the engine measurements on `pair`. What cannot be measured is
/// described in `missing`; how figures were obtained goes to `notes`.
pub fn measure(
    pair: &VethPair,
    sizes: &[u64],
    opts: &Options,
    notes: &mut Vec<String>,
    missing: &mut Vec<String>,
) -> EngineResults {
    let mut res = EngineResults::default();
    let poll = opts.engine_poll;
    notes.push(format!(
        "engine: one verbs Device per namespace, engine threads in {poll:?} poll mode, RC QPs with PMTU 4096; up to {} B or {MAX_WINDOW} messages in flight per QP; WRITE/READ signal every window/2-th request, SEND counts receive completions; message placement in the registered regions: {}",
        BYTES_IN_FLIGHT,
        SourceLayout::Perftest.describe()
    ));
    notes.push(
        "latency, engine SEND, run-to-completion (app thread drives the engine): the library's run-to-completion mode (engine::driver::RunToCompletion): two application threads, one per side, each owning its side's AF_XDP socket and endpoint; every poll_cq runs one engine iteration (receive, timers, transmit) and returns completions; both busy-poll, yielding the core when nothing arrived (the kernel UDP ping-pong's idle policy). No engine thread, no cross-thread queue. This row is the one the p50 target ratio uses: it compares like with like (two busy-polling application threads, one per side)"
            .into(),
    );
    notes.push(format!(
        "latency, engine SEND, engine threads + app thread: the verbs Device (one engine thread per side in {poll:?} poll mode) and ONE application thread playing both sides, posting through the work queue and blocking in Device::poll_cq_wait (a futex wake per half trip): three threads per round trip on this 2-core machine"
    ));
    let rig = match Rig::open(pair, 1, poll) {
        Ok(r) => r,
        Err(err) => {
            missing.push(format!("engine (all figures): {err}"));
            return res;
        }
    };
    for op in [Op::Write, Op::Send, Op::Read] {
        for &size in sizes {
            match stream(&rig, op, size, SourceLayout::Perftest, opts.point()) {
                Ok(r) => {
                    let p = r.point(op, size);
                    if opts.progress {
                        eprintln!(
                            "bench: engine {} {size} B: {:.2} Gb/s, {:.3} Mmsg/s",
                            op.name(),
                            p.gbps,
                            p.mpps
                        );
                    }
                    res.points.push(p);
                }
                Err(err) => missing.push(format!("engine {} {size} B: {err}", op.name())),
            }
        }
    }
    match pingpong(&rig, SMALL, opts.pingpongs() + opts.pingpongs() / 10) {
        Ok(mut rtts) => {
            let warm = opts.pingpongs() / 10;
            res.send_latency = Percentiles::of(&mut rtts[warm..]);
            if opts.progress {
                eprintln!("bench: engine SEND ping-pong: {:?}", res.send_latency);
            }
        }
        Err(err) => missing.push(format!("engine SEND ping-pong: {err}")),
    }
    rig.close();

    // The same ping-pong in run-to-completion mode (the devices above are
    // closed: these queues attach the XDP program themselves).
    match crate::engine_rtc::pingpong(pair, SMALL, opts.pingpongs() + opts.pingpongs() / 10) {
        Ok(mut rtts) => {
            let warm = opts.pingpongs() / 10;
            res.send_latency_rtc = Percentiles::of(&mut rtts[warm..]);
            if opts.progress {
                eprintln!(
                    "bench: engine SEND ping-pong, run-to-completion: {:?}",
                    res.send_latency_rtc
                );
            }
        }
        Err(err) => missing.push(format!("engine SEND ping-pong, run-to-completion: {err}")),
    }

    // Multi-queue scaling: the same WRITE test on 2 queues (one QP each).
    let one = res.gbps(Op::Write, SCALING_SIZE);
    match (one, Rig::open(pair, 2, poll)) {
        (Some(one), Ok(rig2)) => {
            match stream(
                &rig2,
                Op::Write,
                SCALING_SIZE,
                SourceLayout::Perftest,
                opts.point(),
            ) {
                Ok(r) => {
                    let many = per_second((r.messages * SCALING_SIZE * 8) as f64, r.elapsed) / 1e9;
                    res.scaling = Some(Scaling::new(SCALING_SIZE, 2, one, many));
                    if opts.progress {
                        eprintln!("bench: engine WRITE 64 KiB on 2 queues: {many:.2} Gb/s");
                    }
                }
                Err(err) => missing.push(format!("multi-queue scaling: {err}")),
            }
            rig2.close();
        }
        (None, _) => missing
            .push("multi-queue scaling: no 1-queue 64 KiB WRITE figure to compare with".into()),
        (_, Err(err)) => missing.push(format!("multi-queue scaling: {err}")),
    }
    res
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::veth_pair;

    #[test]
    #[ignore = "needs root"]
    fn pingpong_and_write_stream_over_veth() {
        let pair = veth_pair();
        let rig = Rig::open(&pair, 1, PollMode::default()).unwrap();
        let mut rtts = pingpong(&rig, 64, 2000).unwrap();
        assert_eq!(rtts.len(), 2000);
        let p = Percentiles::of(&mut rtts[200..]).unwrap();
        eprintln!("engine SEND ping-pong: {p:?}");
        let r = stream(
            &rig,
            Op::Write,
            65536,
            SourceLayout::Perftest,
            Duration::from_millis(200),
        )
        .unwrap();
        eprintln!(
            "engine WRITE 64 KiB: {} messages in {:?}, cpu {:?}",
            r.messages, r.elapsed, r.cpu
        );
        assert!(r.messages > 0);
        rig.close();
    }

    #[test]
    fn windows_bound_bytes_and_messages() {
        assert_eq!(window(64), MAX_WINDOW);
        assert_eq!(window(65536), 32);
        assert_eq!(window(1 << 20), 4);
        assert_eq!(packets_per_message(64), 1);
        assert_eq!(packets_per_message(4096), 1);
        assert_eq!(packets_per_message(65536), 16);
        // Half the window signaled, at least every request of a window of 1.
        assert_eq!(signal_every(window(65536)), 16);
        assert_eq!(signal_every(window(1 << 20)), 2);
        assert_eq!(signal_every(1), 1);
    }
}
