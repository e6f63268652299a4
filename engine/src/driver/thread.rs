//! The engine thread of one queue: pinned to a core, it polls its AF_XDP
//! socket and feeds the sans-IO [`Endpoint`] in batches:
//!
//! 1. take what other queues handed over (frames, QPs, posts; see
//!    `directory.rs`), then work posted by applications (lock-free
//!    `ArrayQueue`s),
//! 2. the I/O steps of `step.rs`: `receive` for every received frame
//!    (a frame for a QP another queue holds is handed to that queue),
//!    `handle_timeout` when `poll_timeout` has passed, `poll_transmit` into
//!    TX frames until the endpoint has nothing due or the ring is full,
//! 3. move work completions to the completion queue of the application
//!    that created each QP.
//!
//! A QP lives on the queue its packets arrive on (`docs/multi-queue.md`,
//! "Where a QP lives"): it is created on its application's queue; when its
//! first packet arrives on another queue (RSS chose that one), it moves
//! there, whole; posts for it are passed on from its application's queue,
//! completions come back to it. Frames that still arrive on another queue
//! are handed over and counted (`rx_handoff`).
//!
//! Time is read here (a monotonic clock, origin = thread start) and passed
//! to the endpoint; the endpoint never reads a clock. When idle, the loop
//! either spins ([`PollMode::Busy`]) or spins briefly and then sleeps in
//! poll(2) on the socket and a [`Waker`] until the endpoint's next deadline
//! ([`PollMode::Adaptive`]).

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use thiserror::Error;

use crate::endpoint::{Endpoint, EndpointConfig, Received};
use crate::io::{XskConfig, XskError, XskSocket};
use crate::nic::SteerProgram;
use crate::rc::WorkCompletion;
use crate::time::Instant;

use super::capture::CaptureSink;
use super::directory::Directory;
use super::shared::{FrameBuf, Handoff, PostError, QueueStats, Shared, Work};
use super::step::{DriverStep, BATCH};
use super::PollMode;

/// Configuration of one engine thread.
#[derive(Clone)]
pub struct QueueConfig {
    /// AF_XDP socket (interface, queue, UMEM, rings, zero-copy).
    pub xsk: XskConfig,
    /// Network namespace to enter first (`ip netns` name), if any.
    pub netns: Option<String>,
    /// Core to pin the thread to.
    pub core: Option<usize>,
    pub poll: PollMode,
    pub endpoint: EndpointConfig,
    /// Capacity of the work and completion queues.
    pub queue_depth: usize,
    /// Frame capture (`--pcap`), off when None.
    pub capture: Option<CaptureSink>,
}

/// Why an engine thread could not start.
#[derive(Debug, Error)]
pub enum DriverError {
    #[error(transparent)]
    Netns(#[from] crate::nic::NetnsError),
    #[error(transparent)]
    Xsk(#[from] XskError),
    #[error(transparent)]
    Loader(#[from] crate::nic::LoaderError),
    #[error("creating the engine's wake-up eventfd failed: {0}")]
    Waker(std::io::Error),
    #[error("spawning the engine thread failed: {0}")]
    Spawn(std::io::Error),
    #[error("the engine thread of queue {0} died during start-up")]
    StartupPanicked(u32),
}

/// A running engine thread.
pub struct Driver {
    shared: Arc<Shared>,
    queue: u32,
    zero_copy: bool,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Driver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Driver")
            .field("queue", &self.queue)
            .finish_non_exhaustive()
    }
}

/// How often the statistics snapshot is refreshed.
const STATS_PERIOD: Duration = Duration::from_millis(5);
/// Longest sleep in adaptive mode when the endpoint has no deadline.
const MAX_SLEEP: Duration = Duration::from_millis(5);

impl Driver {
    /// Starts the engine thread of queue `cfg.xsk.queue` of a device whose
    /// queues share `directory` (which holds this queue's [`Shared`]): it
    /// enters `cfg.netns`, pins itself, opens its socket, registers it in
    /// the XDP program's XSKMAP and runs.
    pub fn start(
        cfg: QueueConfig,
        program: Arc<Mutex<SteerProgram>>,
        directory: Arc<Directory>,
    ) -> Result<Driver, DriverError> {
        let queue = cfg.xsk.queue;
        let shared = directory
            .queue(queue)
            .cloned()
            .ok_or(DriverError::StartupPanicked(queue))?;
        let (ready_tx, ready_rx) = std::sync::mpsc::sync_channel::<Result<bool, DriverError>>(1);
        let thread = std::thread::Builder::new()
            .name(format!("roce-q{queue}"))
            .spawn(move || {
                let sock = match setup(&cfg, &program) {
                    Ok(s) => s,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                let _ = ready_tx.send(Ok(sock.is_zero_copy()));
                run(sock, cfg, &directory, &program);
            })
            .map_err(DriverError::Spawn)?;
        match ready_rx.recv() {
            Ok(Ok(zero_copy)) => Ok(Driver {
                shared,
                queue,
                zero_copy,
                thread: Some(thread),
            }),
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(e)
            }
            Err(_) => {
                let _ = thread.join();
                Err(DriverError::StartupPanicked(queue))
            }
        }
    }

    /// Whether the socket is bound in zero-copy mode.
    pub fn is_zero_copy(&self) -> bool {
        self.zero_copy
    }

    /// The state shared with the application.
    pub fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// Stops the thread and returns its final statistics.
    pub fn stop(mut self) -> QueueStats {
        self.stop_inner();
        self.shared.stats()
    }

    fn stop_inner(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        self.shared.waker.wake();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        self.stop_inner();
    }
}

fn setup(cfg: &QueueConfig, program: &Mutex<SteerProgram>) -> Result<XskSocket, DriverError> {
    if let Some(ns) = &cfg.netns {
        crate::nic::enter_netns(ns)?;
    }
    if let Some(core) = cfg.core {
        // Best effort: an unknown core id leaves the thread unpinned.
        let _ = core_affinity::set_for_current(core_affinity::CoreId { id: core });
    }
    let sock = XskSocket::open(&cfg.xsk)?;
    program
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .register_socket(cfg.xsk.queue, &sock)?;
    Ok(sock)
}

fn run(mut sock: XskSocket, cfg: QueueConfig, dir: &Directory, program: &Mutex<SteerProgram>) {
    let me = cfg.xsk.queue;
    let Some(shared) = dir.queue(me).cloned() else {
        return;
    };
    let origin = std::time::Instant::now();
    let clock = || Instant::from_nanos(origin.elapsed().as_nanos() as u64);
    let mut ep = Endpoint::new(cfg.endpoint);
    // CQ i of every queue's endpoint collects the completions of the QPs
    // that the application of queue i created, wherever they live now.
    let cq_depth = cfg.queue_depth.max(16) * 2;
    for _ in 0..dir.queue_count() {
        ep.create_cq(cq_depth);
    }
    let mut eng = Engine {
        me,
        dir,
        shared: &shared,
        ep,
        stats: QueueStats::default(),
        backlog: VecDeque::with_capacity(cfg.queue_depth.max(16)),
        spilled: VecDeque::new(),
        wcs: vec![WorkCompletion::default(); BATCH],
        backlog_limit: cfg.queue_depth.max(16),
    };
    let mut last_stats = origin;
    let mut idle_since: Option<std::time::Instant> = None;
    let mut step = DriverStep::new(&sock, cfg.capture.clone());

    loop {
        if shared.stop.load(Ordering::Relaxed) {
            break;
        }
        eng.stats.loops += 1;
        let mut progress = false;

        // 1. hand-offs from other queues, then application work
        progress |= eng.take_handoffs(clock());
        progress |= eng.take_work();

        // 2. receive (frames for QPs another queue holds are handed off),
        //    timers, transmit
        let now = clock();
        let received = step.receive_routed(&mut sock, &mut eng.ep, now, |ep, frame, r| {
            eng_route(dir, me, &mut eng.stats, ep, frame, r)
        });
        let now = clock();
        let timers_fired = step.timers(&mut eng.ep, now);
        let sent = step.transmit(&mut sock, &mut eng.ep, now);
        progress |= received > 0 || timers_fired || sent > 0;

        // 3. completions, and hand-offs waiting for room
        progress |= eng.deliver_completions();
        progress |= eng.drain_backlog();

        let wall = std::time::Instant::now();
        if wall.duration_since(last_stats) >= STATS_PERIOD {
            publish(&shared, &mut eng.stats, &eng.ep, &sock);
            last_stats = wall;
        }

        if progress {
            idle_since = None;
            continue;
        }
        if let PollMode::Adaptive { spin } = cfg.poll {
            let since = *idle_since.get_or_insert(wall);
            if wall.duration_since(since) < spin {
                // Leave the core to any other runnable thread while spinning
                // (the application, the peer's engine thread on a small
                // machine): measured on 2 cores, spinning without yielding
                // took the 64 B SEND ping-pong p50 from ~30 us to ~150 us.
                std::thread::yield_now();
                continue;
            }
            // Sleep until the next deadline, a packet, a post or a hand-off.
            let now = clock();
            let sleep = match eng.ep.poll_timeout() {
                Some(t) => t.saturating_duration_since(now).min(MAX_SLEEP),
                None => MAX_SLEEP,
            };
            if sleep.is_zero() || sock.tx_unconsumed() > 0 || !eng.backlog.is_empty() {
                continue;
            }
            shared.sleeping.store(true, Ordering::SeqCst);
            if shared.work.is_empty()
                && shared.handoff.is_empty()
                && !shared.stop.load(Ordering::SeqCst)
            {
                eng.stats.sleeps += 1;
                let _ = shared.waker.wait_with(&sock, sleep);
            }
            shared.sleeping.store(false, Ordering::SeqCst);
            idle_since = None;
        }
    }
    publish(&shared, &mut eng.stats, &eng.ep, &sock);
    let _ = program
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .unregister_socket(cfg.xsk.queue);
}

/// What queue `me` does with a frame its endpoint did not take: a QP
/// another queue holds gets the frame handed to it (`rx_handoff`); a QP in
/// transit to this queue gets it through this queue's own inbox, behind the
/// QP; a QP nobody holds is an unknown-QP drop. A frame for a QP of this
/// queue homes that QP here if it was not homed yet.
#[inline]
fn eng_route(
    dir: &Directory,
    me: u32,
    stats: &mut QueueStats,
    ep: &mut Endpoint,
    frame: &[u8],
    r: Received,
) {
    match r {
        Received::Delivered { qpn } => dir.note_direct(qpn, me),
        Received::Dropped => {}
        Received::NotHere { qpn } => match dir.owner(qpn) {
            Some(owner) => {
                if dir.hand_off_frame(me, owner, frame) {
                    stats.rx_handoff += 1;
                } else {
                    stats.rx_handoff_dropped += 1;
                }
            }
            None => ep.note_unknown_qp(),
        },
    }
}

/// The engine-thread state of one queue besides its socket: its endpoint,
/// its statistics, and what it owes other queues.
struct Engine<'a> {
    me: u32,
    dir: &'a Directory,
    shared: &'a Shared,
    ep: Endpoint,
    stats: QueueStats,
    /// Hand-offs (QPs, forwarded posts) waiting for room in another queue's
    /// inbox, in order. While it is longer than `backlog_limit`, no new
    /// application work is taken (the application sees `WouldBlock`).
    backlog: VecDeque<(u32, Handoff)>,
    backlog_limit: usize,
    /// Completions an application's queue had no room for, in order.
    spilled: VecDeque<(u32, WorkCompletion)>,
    wcs: Vec<WorkCompletion>,
}

impl Engine<'_> {
    /// Takes up to [`BATCH`] hand-offs from other queues.
    fn take_handoffs(&mut self, now: Instant) -> bool {
        let mut any = false;
        for _ in 0..BATCH {
            let Some(h) = self.shared.take_handoff() else {
                break;
            };
            any = true;
            match h {
                Handoff::Frame(fb) => {
                    self.stats.handoff_received += 1;
                    self.receive_handed_off(now, &fb);
                    self.dir.recycle(fb);
                }
                Handoff::Qp(qp) => {
                    // The number is the device's, so it is free here.
                    let placed = self.ep.insert_qp(qp).is_ok();
                    debug_assert!(placed, "a moving QP found its number taken");
                    self.stats.qp_migrations += u64::from(placed);
                }
                Handoff::Work { origin, work } => self.apply(origin, work),
            }
        }
        any
    }

    /// A frame another queue received for a QP this queue holds: handled
    /// here; if the QP was not homed yet, it moves to the queue the frame
    /// arrived on (RSS keeps a RoCE flow's packets on one queue, so that is
    /// where the rest will arrive too).
    fn receive_handed_off(&mut self, now: Instant, fb: &FrameBuf) {
        match self.ep.receive(now, fb.frame()) {
            Received::Delivered { qpn } => {
                if fb.from != self.me && !self.dir.is_homed(qpn) {
                    self.migrate(qpn, fb.from);
                }
            }
            Received::Dropped => {}
            Received::NotHere { qpn } => match self.dir.owner(qpn) {
                // It moved on meanwhile (counted as a detour already,
                // where it arrived): pass it on.
                Some(owner) if owner != self.me => {
                    if !self.dir.hand_off_frame(fb.from, owner, fb.frame()) {
                        self.stats.rx_handoff_dropped += 1;
                    }
                }
                _ => self.ep.note_unknown_qp(),
            },
        }
    }

    /// Moves QP `qpn` to queue `to`: completions it already produced go to
    /// the application first, then the QP itself goes into `to`'s inbox,
    /// then the directory lists it there (so anything handed to `to` for
    /// it from then on arrives behind it). If `to`'s inbox is full it stays.
    fn migrate(&mut self, qpn: u32, to: u32) {
        let Some(target) = self.dir.queue(to) else {
            return;
        };
        self.deliver_completions();
        let Some(qp) = self.ep.take_qp(qpn) else {
            return;
        };
        match target.hand_off(Handoff::Qp(qp)) {
            Ok(()) => self.dir.set_home(qpn, to),
            Err(Handoff::Qp(qp)) => {
                let _ = self.ep.insert_qp(qp);
            }
            Err(_) => {}
        }
    }

    /// Takes up to [`BATCH`] posts of this queue's application (unless
    /// hand-offs to other queues are backed up).
    fn take_work(&mut self) -> bool {
        if self.backlog.len() >= self.backlog_limit {
            return false;
        }
        let mut any = false;
        for _ in 0..BATCH {
            let Some(work) = self.shared.work.pop() else {
                break;
            };
            any = true;
            self.apply(self.me, work);
        }
        any
    }

    /// Runs one post or control operation from the application of queue
    /// `origin`; one for a QP another queue holds is passed on to it.
    fn apply(&mut self, origin: u32, work: Work) {
        let qpn = match &work {
            Work::Send { qpn, .. } | Work::Recv { qpn, .. } | Work::QpControl { qpn, .. } => {
                Some(*qpn)
            }
            Work::Control(_) => None,
        };
        if let Some(qpn) = qpn.filter(|&q| !self.ep.has_qp(q)) {
            match self.dir.owner(qpn) {
                Some(owner) if owner != self.me => {
                    self.stats.work_forwarded += 1;
                    self.forward(owner, Handoff::Work { origin, work });
                    return;
                }
                Some(_) => {
                    // In transit to this queue: the QP is in our inbox
                    // ahead of this; run it after the QP arrives.
                    if let Err(h) = self.shared.hand_off(Handoff::Work { origin, work }) {
                        self.backlog.push_back((self.me, h));
                    }
                    return;
                }
                None => {} // nobody's: the endpoint refuses it below
            }
        }
        let refused = match work {
            Work::Send { qpn, wr } => self.ep.post_send(qpn, wr).err().map(|e| (qpn, wr.wr_id, e)),
            Work::Recv { qpn, wr } => self.ep.post_recv(qpn, wr).err().map(|e| (qpn, wr.wr_id, e)),
            Work::Control(f) | Work::QpControl { f, .. } => {
                f(&mut self.ep, origin);
                None
            }
        };
        if let Some((qpn, wr_id, error)) = refused {
            if let Some(q) = self.dir.queue(origin) {
                let _ = q.post_errors.push(PostError { qpn, wr_id, error });
            }
        }
    }

    /// Hands `h` to queue `to`, or queues it behind the hand-offs already
    /// waiting (order is kept).
    fn forward(&mut self, to: u32, h: Handoff) {
        if !self.backlog.is_empty() {
            self.backlog.push_back((to, h));
        } else if let Some(Err(h)) = self.dir.queue(to).map(|q| q.hand_off(h)) {
            self.backlog.push_back((to, h));
        }
    }

    /// Retries the hand-offs waiting for room, in order.
    fn drain_backlog(&mut self) -> bool {
        let mut any = false;
        while let Some((to, h)) = self.backlog.pop_front() {
            let Some(q) = self.dir.queue(to) else {
                continue;
            };
            match q.hand_off(h) {
                Ok(()) => any = true,
                Err(h) => {
                    self.backlog.push_front((to, h));
                    break;
                }
            }
        }
        any
    }

    /// Moves completions from the endpoint's CQs to the applications'
    /// completion queues (CQ i to queue i's) and wakes a waiting
    /// application thread.
    fn deliver_completions(&mut self) -> bool {
        let mut any = false;
        while let Some(&(q, wc)) = self.spilled.front() {
            let Some(target) = self.dir.queue(q) else {
                self.spilled.pop_front();
                continue;
            };
            if target.completions.push(wc).is_err() {
                self.stats.completion_backlog_events += 1;
                return any;
            }
            self.spilled.pop_front();
            any = true;
        }
        for q in 0..self.dir.queue_count() {
            let Some(target) = self.dir.queue(q) else {
                continue;
            };
            let room = target.completions.capacity() - target.completions.len();
            if room == 0 {
                self.stats.completion_backlog_events += 1;
                continue;
            }
            let k = self.ep.poll_cq(q, &mut self.wcs[..room.min(BATCH)]);
            for wc in &self.wcs[..k] {
                // Another queue's engine may have filled it meanwhile.
                if let Err(wc) = target.completions.push(*wc) {
                    self.spilled.push_back((q, wc));
                }
            }
            if k > 0 && target.notify_completion() {
                self.stats.app_wakes += 1;
            }
            any |= k > 0;
        }
        any
    }
}

fn publish(shared: &Shared, stats: &mut QueueStats, ep: &Endpoint, sock: &XskSocket) {
    stats.transport = ep.counters();
    stats.thread_cpu = crate::io::thread_cpu_time();
    // Runs every STATS_PERIOD, not per packet: one walk over the QPs.
    stats.qp_rates.fill(ep.qp_rates());
    stats.socket = sock.counters();
    stats.woken_by_posts = shared.woken_by_posts.load(Ordering::Relaxed);
    if let Ok(k) = sock.statistics() {
        stats.kernel = k;
    }
    *shared.stats.lock().unwrap_or_else(|e| e.into_inner()) = *stats;
}
