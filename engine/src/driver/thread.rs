//! The engine thread of one queue: pinned to a core, it polls its AF_XDP
//! socket and feeds the sans-IO [`Endpoint`] in batches:
//!
//! 1. take work posted by applications (lock-free `ArrayQueue`s),
//! 2. the I/O steps of `step.rs`: `handle_packet` for every
//!    received frame, `handle_timeout` when `poll_timeout` has passed,
//!    `poll_transmit` into TX frames until the endpoint has nothing due or
//!    the ring is full,
//! 3. move work completions to the application's completion queue.
//!
//! Time is read here (a monotonic clock, origin = thread start) and passed
//! to the endpoint; the endpoint never reads a clock. When idle, the loop
//! either spins ([`PollMode::Busy`]) or spins briefly and then sleeps in
//! poll(2) on the socket and a [`Waker`] until the endpoint's next deadline
//! ([`PollMode::Adaptive`]).

use std::sync::atomic::{fence, AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_queue::ArrayQueue;
use thiserror::Error;

use crate::endpoint::{Endpoint, EndpointConfig};
use crate::io::{Waker, XskConfig, XskCounters, XskError, XskSocket, XskStatistics};
use crate::nic::SteerProgram;
use crate::rc::{Counters, RecvWr, SendWr, VerbsError, WorkCompletion};
use crate::time::Instant;

use super::capture::CaptureSink;
use super::step::{DriverStep, BATCH};
use super::PollMode;

/// A control operation run on the engine thread with exclusive access to
/// the endpoint (QP creation, connection, memory registration, ...).
pub type Control = Box<dyn FnOnce(&mut Endpoint, u32) + Send>;

/// Work posted by applications.
pub enum Work {
    Send { qpn: u32, wr: SendWr },
    Recv { qpn: u32, wr: RecvWr },
    Control(Control),
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
    /// Starts the engine thread: it enters `cfg.netns`, pins itself, opens
    /// its socket, registers it in the XDP program's XSKMAP and runs.
    pub fn start(
        cfg: QueueConfig,
        program: Arc<Mutex<SteerProgram>>,
    ) -> Result<Driver, DriverError> {
        let shared = Arc::new(Shared {
            work: ArrayQueue::new(cfg.queue_depth.max(16)),
            completions: ArrayQueue::new(cfg.queue_depth.max(16)),
            post_errors: ArrayQueue::new(cfg.queue_depth.max(16)),
            stop: AtomicBool::new(false),
            sleeping: AtomicBool::new(false),
            woken_by_posts: AtomicU64::new(0),
            waker: Waker::new().map_err(DriverError::Waker)?,
            cq_waiting: AtomicBool::new(false),
            cq_waiter: Mutex::new(None),
            stats: Mutex::new(QueueStats::default()),
        });
        let queue = cfg.xsk.queue;
        let (ready_tx, ready_rx) = std::sync::mpsc::sync_channel::<Result<bool, DriverError>>(1);
        let sh = shared.clone();
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
                run(sock, cfg, &sh, &program);
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

fn run(mut sock: XskSocket, cfg: QueueConfig, shared: &Shared, program: &Mutex<SteerProgram>) {
    let origin = std::time::Instant::now();
    let clock = || Instant::from_nanos(origin.elapsed().as_nanos() as u64);
    let mut ep = Endpoint::new(cfg.endpoint);
    let cq = ep.create_cq(cfg.queue_depth.max(16) * 2);
    let mut wcs = vec![WorkCompletion::default(); BATCH];
    let mut stats = QueueStats::default();
    let mut last_stats = origin;
    let mut idle_since: Option<std::time::Instant> = None;
    let mut step = DriverStep::new(&sock, cfg.capture.clone());

    loop {
        if shared.stop.load(Ordering::Relaxed) {
            break;
        }
        stats.loops += 1;
        let mut progress = false;

        // 1. application work
        for _ in 0..BATCH {
            let Some(work) = shared.work.pop() else { break };
            progress = true;
            let refused = match work {
                Work::Send { qpn, wr } => ep.post_send(qpn, wr).err().map(|e| (qpn, wr.wr_id, e)),
                Work::Recv { qpn, wr } => ep.post_recv(qpn, wr).err().map(|e| (qpn, wr.wr_id, e)),
                Work::Control(f) => {
                    f(&mut ep, cq);
                    None
                }
            };
            if let Some((qpn, wr_id, error)) = refused {
                let _ = shared.post_errors.push(PostError { qpn, wr_id, error });
            }
        }

        // 2. receive, timers, transmit
        let outcome = step.step(&mut sock, &mut ep, clock);
        progress |= outcome.progress();

        // 3. completions
        let room = shared.completions.capacity() - shared.completions.len();
        if room > 0 {
            let k = ep.poll_cq(cq, &mut wcs[..room.min(BATCH)]);
            for wc in &wcs[..k] {
                let _ = shared.completions.push(*wc);
            }
            if k > 0 && shared.notify_completion() {
                stats.app_wakes += 1;
            }
            progress |= k > 0;
        } else {
            stats.completion_backlog_events += 1;
        }

        let wall = std::time::Instant::now();
        if wall.duration_since(last_stats) >= STATS_PERIOD {
            publish(shared, &mut stats, &ep, &sock);
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
            // Sleep until the next deadline, a packet, or a post.
            let now = clock();
            let sleep = match ep.poll_timeout() {
                Some(t) => t.saturating_duration_since(now).min(MAX_SLEEP),
                None => MAX_SLEEP,
            };
            if sleep.is_zero() || sock.tx_unconsumed() > 0 {
                continue;
            }
            shared.sleeping.store(true, Ordering::SeqCst);
            if shared.work.is_empty() && !shared.stop.load(Ordering::SeqCst) {
                stats.sleeps += 1;
                let _ = shared.waker.wait_with(&sock, sleep);
            }
            shared.sleeping.store(false, Ordering::SeqCst);
            idle_since = None;
        }
    }
    publish(shared, &mut stats, &ep, &sock);
    let _ = program
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .unregister_socket(cfg.xsk.queue);
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
