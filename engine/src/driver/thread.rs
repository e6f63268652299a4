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
use std::sync::atomic::{fence, AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_queue::ArrayQueue;
use thiserror::Error;

use crate::endpoint::{Endpoint, EndpointConfig, Received};
use crate::io::{Waker, XskConfig, XskCounters, XskError, XskSocket, XskStatistics};
use crate::nic::SteerProgram;
use crate::rc::{Counters, RecvWr, SendWr, VerbsError, WorkCompletion};
use crate::time::Instant;

use super::capture::CaptureSink;
use super::directory::{Directory, FrameBuf, Handoff};
use super::step::{DriverStep, BATCH};
use super::PollMode;

/// A control operation run on the engine thread with exclusive access to
/// the endpoint (QP creation, connection, memory registration, ...).
pub type Control = Box<dyn FnOnce(&mut Endpoint, u32) + Send>;

/// Work posted by applications.
pub enum Work {
    Send {
        qpn: u32,
        wr: SendWr,
    },
    Recv {
        qpn: u32,
        wr: RecvWr,
    },
    /// A control operation on the endpoint, not about one QP (memory
    /// registration, QP creation).
    Control(Control),
    /// A control operation on QP `qpn` (connect, modify, query, destroy):
    /// it runs on whichever queue holds the QP.
    QpControl {
        qpn: u32,
        f: Control,
    },
}

/// A post the endpoint refused (returned to the application).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PostError {
    pub qpn: u32,
    pub wr_id: u64,
    pub error: VerbsError,
}

/// Per-queue statistics, refreshed by the engine thread every few
/// milliseconds and when it stops.
#[derive(Debug, Clone, Copy, Default)]
pub struct QueueStats {
    pub transport: Counters,
    pub socket: XskCounters,
    pub kernel: XskStatistics,
    /// Loop iterations and sleeps (to see how busy the thread was).
    pub loops: u64,
    /// CPU time the engine thread has used (user + system, including the
    /// kernel's transmit work done in its system calls), as of the snapshot.
    pub thread_cpu: Duration,
    pub sleeps: u64,
    /// Completions waiting because the application's queue was full.
    pub completion_backlog_events: u64,
    /// Times the engine thread woke an application thread parked in
    /// `wait_cq` / `poll_cq_wait` after pushing completions: each a futex
    /// wake of another thread, paid by the engine thread (on a VM, with an
    /// inter-processor interrupt: several microseconds each).
    pub app_wakes: u64,
    /// Times a post woke the engine thread from its sleep in poll(2) (an
    /// eventfd write by the posting thread, and the engine thread's
    /// wake-up latency on the post's path).
    pub woken_by_posts: u64,
    /// Frames this queue received for a QP another queue holds, handed to
    /// that queue (`rx_handoff`): packets that took a detour. None or
    /// nearly none in steady state, once QPs are homed on the queue RSS
    /// picks for them (`docs/multi-queue.md`).
    pub rx_handoff: u64,
    /// Hand-offs that found the pool of hand-off buffers empty or the
    /// other queue's inbox full: dropped (the peer retransmits).
    pub rx_handoff_dropped: u64,
    /// Frames other queues handed to this one.
    pub handoff_received: u64,
    /// QPs that moved to this queue because their packets arrive here.
    pub qp_migrations: u64,
    /// Posts and control operations this queue passed on to the queue
    /// that holds their QP.
    pub work_forwarded: u64,
    /// Current DCQCN rate of the queue's QPs (filled when published).
    pub qp_rates: QpRates,
}

/// Most QPs whose rate one [`QueueStats`] carries.
pub const MAX_REPORTED_QPS: usize = 64;

/// Current DCQCN rate, bit/s, of up to [`MAX_REPORTED_QPS`] QPs: a fixed
/// array so that [`QueueStats`] stays `Copy` and publishing it allocates
/// nothing.
#[derive(Debug, Clone, Copy)]
pub struct QpRates {
    len: usize,
    entries: [(u32, f64); MAX_REPORTED_QPS],
    /// QPs beyond [`MAX_REPORTED_QPS`], not reported.
    omitted: usize,
}

impl Default for QpRates {
    fn default() -> Self {
        QpRates {
            len: 0,
            entries: [(0, 0.0); MAX_REPORTED_QPS],
            omitted: 0,
        }
    }
}

impl QpRates {
    /// Replaces the contents with `rates` (`(qpn, bit/s)`), keeping the
    /// first [`MAX_REPORTED_QPS`] and counting the rest as omitted.
    pub fn fill(&mut self, rates: impl Iterator<Item = (u32, f64)>) {
        self.len = 0;
        self.omitted = 0;
        for r in rates {
            match self.entries.get_mut(self.len) {
                Some(slot) => {
                    *slot = r;
                    self.len += 1;
                }
                None => self.omitted += 1,
            }
        }
    }

    /// The reported `(qpn, bit/s)` pairs.
    pub fn as_slice(&self) -> &[(u32, f64)] {
        &self.entries[..self.len]
    }

    /// How many QPs did not fit.
    pub fn omitted(&self) -> usize {
        self.omitted
    }
}

/// State shared between the engine thread and applications.
pub struct Shared {
    pub(crate) work: ArrayQueue<Work>,
    pub(crate) completions: ArrayQueue<WorkCompletion>,
    pub(crate) post_errors: ArrayQueue<PostError>,
    /// Frames, QPs and forwarded posts from other queues' engine threads.
    handoff: ArrayQueue<Handoff>,
    stop: AtomicBool,
    sleeping: AtomicBool,
    waker: Waker,
    /// Posts that found the engine thread asleep and woke it.
    woken_by_posts: AtomicU64,
    /// An application thread blocked in [`Shared::wait_completion`]
    /// (unparked by the engine thread after it pushes completions).
    cq_waiting: AtomicBool,
    cq_waiter: Mutex<Option<std::thread::Thread>>,
    stats: Mutex<QueueStats>,
}

impl Shared {
    /// Queues of `depth` entries each (at least 16).
    pub(crate) fn new(depth: usize) -> std::io::Result<Shared> {
        let depth = depth.max(16);
        Ok(Shared {
            work: ArrayQueue::new(depth),
            completions: ArrayQueue::new(depth),
            post_errors: ArrayQueue::new(depth),
            handoff: ArrayQueue::new(depth),
            stop: AtomicBool::new(false),
            sleeping: AtomicBool::new(false),
            woken_by_posts: AtomicU64::new(0),
            waker: Waker::new()?,
            cq_waiting: AtomicBool::new(false),
            cq_waiter: Mutex::new(None),
            stats: Mutex::new(QueueStats::default()),
        })
    }

    /// Queues a hand-off from another engine thread and wakes this queue's
    /// thread if it sleeps. Returns it back if the inbox is full.
    pub(crate) fn hand_off(&self, h: Handoff) -> Result<(), Handoff> {
        self.handoff.push(h)?;
        if self.sleeping.load(Ordering::SeqCst) {
            self.waker.wake();
        }
        Ok(())
    }

    /// Takes one hand-off.
    pub(crate) fn take_handoff(&self) -> Option<Handoff> {
        self.handoff.pop()
    }

    /// Queues work for the engine thread and wakes it if it sleeps.
    /// Returns the work back if the queue is full.
    pub fn post(&self, work: Work) -> Result<(), Work> {
        self.work.push(work)?;
        if self.sleeping.load(Ordering::SeqCst) {
            self.waker.wake();
            self.woken_by_posts.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Takes one completion.
    pub fn pop_completion(&self) -> Option<WorkCompletion> {
        self.completions.pop()
    }

    /// Blocks the calling thread until the engine thread pushes a
    /// completion, or `timeout` passes (returns early, possibly spuriously;
    /// callers re-check the queue). Lets an application wait without
    /// taking a core from the engine threads.
    pub fn wait_completion(&self, timeout: Duration) {
        *self.cq_waiter.lock().unwrap_or_else(|e| e.into_inner()) = Some(std::thread::current());
        self.cq_waiting.store(true, Ordering::SeqCst);
        // Pairs with the fence after the engine's push: either we see the
        // completion here, or the engine sees `cq_waiting` and unparks us.
        fence(Ordering::SeqCst);
        if self.completions.is_empty() {
            std::thread::park_timeout(timeout);
        }
        self.cq_waiting.store(false, Ordering::SeqCst);
    }

    /// Wakes the application thread waiting for completions, if any;
    /// returns whether it woke one.
    fn notify_completion(&self) -> bool {
        fence(Ordering::SeqCst);
        if self.cq_waiting.load(Ordering::SeqCst) {
            if let Some(t) = self
                .cq_waiter
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .as_ref()
            {
                t.unpark();
                return true;
            }
        }
        false
    }

    /// Takes one refused post.
    pub fn pop_post_error(&self) -> Option<PostError> {
        self.post_errors.pop()
    }

    /// The latest statistics snapshot.
    pub fn stats(&self) -> QueueStats {
        *self.stats.lock().unwrap_or_else(|e| e.into_inner())
    }
}

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

#[cfg(test)]
mod qp_rates_tests {
    use super::*;

    #[test]
    fn keeps_the_first_qps_and_counts_the_rest() {
        let mut r = QpRates::default();
        r.fill((0..70u32).map(|q| (q, f64::from(q) * 1e9)));
        assert_eq!(r.as_slice().len(), MAX_REPORTED_QPS);
        assert_eq!(r.as_slice()[17], (17, 17e9));
        assert_eq!(r.omitted(), 6);
        // A refill replaces, never appends.
        r.fill([(5, 1e9)].into_iter());
        assert_eq!(r.as_slice(), &[(5, 1e9)]);
        assert_eq!(r.omitted(), 0);
    }
}
