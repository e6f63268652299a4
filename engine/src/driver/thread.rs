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
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use thiserror::Error;

use crate::attach::AttachedPort;
use crate::endpoint::{Endpoint, EndpointConfig, MemoryRange, Received};
use crate::io::{Lookahead, XskConfig, XskError, XskSocket};

use super::port::QueuePort;
use crate::nic::SteerProgram;
use crate::rc::WorkCompletion;
use crate::time::Instant;

use super::capture::CaptureSink;
use super::directory::Directory;
use super::own_address::OwnAddress;
use super::shared::{FrameBuf, Handoff, PostError, QueueStats, Shared, Work};
use super::step::{prefetch_distance, prefetch_posts, DriverStep, PostHint, BATCH};
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
    /// The queue's engine: held by the engine thread, or by an application
    /// thread that drives the queue itself ([`Driver::drive`]).
    core: Arc<Mutex<Option<Core>>>,
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

/// How often the statistics snapshot is refreshed while there is traffic
/// (and once before each sleep that follows some).
const STATS_PERIOD: Duration = Duration::from_millis(5);
/// Longest sleep in adaptive mode when the endpoint has no deadline: what
/// an idle engine costs (one wake-up per `MAX_SLEEP`). Nothing waits for
/// this timeout: a received frame wakes poll(2) on the socket, a post, a
/// hand-off, a claim or a stop wakes the eventfd.
const MAX_SLEEP: Duration = Duration::from_secs(1);
/// How often an engine thread whose queue an application drives checks
/// that it still does (it is woken when the claim ends).
const CLAIM_POLL: Duration = Duration::from_millis(100);

/// The longest a driven queue holds the ACKs due from packets that made
/// completions for the application's answer ([`Core::hold_for_answer`]):
/// far below any retransmission timeout, and long enough for a loop that
/// waits for its own ACK (which comes right behind the peer's message)
/// before it answers.
const ANSWER_HOLD: Duration = Duration::from_micros(20);

impl Driver {
    /// Starts the engine thread of queue `cfg.xsk.queue` of a device whose
    /// queues share `directory` (which holds this queue's [`Shared`]): it
    /// enters `cfg.netns`, pins itself, opens its socket, registers it in
    /// the XDP program's XSKMAP and runs.
    ///
    /// With `attached`, the queue's frames go through the shared engine's
    /// service that port is attached to (no socket of its own, no
    /// program: `program` is None then).
    pub fn start(
        cfg: QueueConfig,
        program: Option<Arc<Mutex<SteerProgram>>>,
        directory: Arc<Directory>,
        attached: Option<AttachedPort>,
    ) -> Result<Driver, DriverError> {
        let queue = cfg.xsk.queue;
        let shared = directory
            .queue(queue)
            .cloned()
            .ok_or(DriverError::StartupPanicked(queue))?;
        let core = Arc::new(Mutex::new(None));
        let (ready_tx, ready_rx) = std::sync::mpsc::sync_channel::<Result<bool, DriverError>>(1);
        let thread_core = core.clone();
        let thread = std::thread::Builder::new()
            .name(format!("roce-q{queue}"))
            .spawn(move || {
                let sock = match setup(&cfg, program.as_deref(), attached) {
                    Ok(s) => s,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                let zero_copy = sock.is_zero_copy();
                let mut slot = lock(&thread_core);
                *slot = Core::new(sock, &cfg, directory);
                let _ = ready_tx.send(Ok(zero_copy));
                run(slot, &thread_core, &cfg);
                if let Some(p) = &program {
                    let _ = lock(p).unregister_socket(cfg.xsk.queue);
                }
            })
            .map_err(DriverError::Spawn)?;
        match ready_rx.recv() {
            Ok(Ok(zero_copy)) => Ok(Driver {
                shared,
                core,
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

    /// Takes the queue's engine from its engine thread so that the calling
    /// thread drives it itself (run-to-completion) until the returned
    /// [`DrivenQueue`] is dropped; `None` if another thread drives it
    /// already. Blocks until the engine thread lets go of it (at the end
    /// of its current iteration, or at once if it sleeps).
    pub fn drive(&self) -> Option<DrivenQueue> {
        self.shared
            .claimed
            .compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
            .ok()?;
        self.shared
            .driven_by
            .store(super::shared::thread_token(), Ordering::SeqCst);
        self.shared.waker.wake();
        // Wait for the engine thread to let go (it does not take the core
        // back while the claim lasts).
        drop(lock(&self.core));
        Some(DrivenQueue {
            core: self.core.clone(),
            shared: self.shared.clone(),
        })
    }

    /// One engine iteration on the calling thread, which drives the queue
    /// ([`Driver::drive`]); nothing if the engine is gone.
    pub(crate) fn iterate_driven(&self) {
        iterate_driven(&self.core);
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

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn setup(
    cfg: &QueueConfig,
    program: Option<&Mutex<SteerProgram>>,
    attached: Option<AttachedPort>,
) -> Result<QueuePort, DriverError> {
    if let Some(ns) = &cfg.netns {
        crate::nic::enter_netns(ns)?;
    }
    if let Some(core) = cfg.core {
        // Best effort: an unknown core id leaves the thread unpinned.
        let _ = core_affinity::set_for_current(core_affinity::CoreId { id: core });
    }
    if let Some(port) = attached {
        return Ok(QueuePort::Attached(port));
    }
    let sock = XskSocket::open(&cfg.xsk)?;
    if let Some(p) = program {
        lock(p).register_socket(cfg.xsk.queue, &sock)?;
    }
    Ok(QueuePort::Xsk(sock))
}

/// A queue's engine driven by an application thread (run-to-completion
/// on a [`crate::verbs::Device`]: `Device::run_to_completion`). While it
/// lives, the queue's engine thread waits, and every `poll_cq` of the
/// queue from the driving thread ([`DrivenQueue::poll_cq`], or
/// `Device::poll_cq`) first runs one engine iteration on that thread:
/// what the engine thread would do (hand-offs, posts, receive, timers,
/// transmit, completions), with no thread hop and no wake-up between the
/// post, the wire and the completion. Posts still go through the queue's
/// [`QueuePair`](crate::verbs::QueuePair)s; control operations
/// (`create_qp`, `connect`, ...) from the driving thread are refused while
/// it drives (they would wait for itself). Nothing moves while the driving
/// thread does not poll. Dropping it sends what the last poll left for the
/// next one and hands the engine back to its thread.
///
/// As [`super::RunToCompletion::poll_cq`], a poll that received packets
/// and returns completions leaves what those packets made due (their
/// ACKs) for the next poll, so that they leave with the application's
/// answer, in one TX kick.
///
/// It keeps the queue's engine alive: if the device closes first, the
/// engine thread stops and its socket leaves the XDP program; polls then
/// find nothing.
pub struct DrivenQueue {
    core: Arc<Mutex<Option<Core>>>,
    shared: Arc<Shared>,
}

fn iterate_driven(core: &Mutex<Option<Core>>) {
    if let Some(core) = lock(core).as_mut() {
        core.iterate_inline();
    }
}

impl std::fmt::Debug for DrivenQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DrivenQueue").finish_non_exhaustive()
    }
}

impl DrivenQueue {
    /// Whether an iteration that received packets but delivered no
    /// completion leaves the ACKs they made due to the next iteration too
    /// (off by default). For a loop that answers what lands in memory (a
    /// WRITE ping-pong, perftest's `ib_write_lat`): its WRITE, posted
    /// before the next poll, leaves in one TX kick with the ACK. A READ
    /// response waits one poll with it, so leave it off where the queue
    /// serves READs or atomics. Reset when the claim ends.
    pub fn hold_acks(&self, on: bool) {
        if let Some(core) = lock(&self.core).as_mut() {
            core.hold_acks = on;
        }
    }

    /// Runs one engine iteration and takes up to `out.len()` completions
    /// of the queue. Never blocks.
    pub fn poll_cq(&mut self, out: &mut [WorkCompletion]) -> usize {
        iterate_driven(&self.core);
        let mut n = 0;
        while n < out.len() {
            match self.shared.pop_completion() {
                Some(wc) => {
                    out[n] = wc;
                    n += 1;
                }
                None => break,
            }
        }
        n
    }
}

impl Drop for DrivenQueue {
    fn drop(&mut self) {
        if let Some(core) = lock(&self.core).as_mut() {
            core.flush_deferred();
            core.hold_acks = false;
            core.publish(false);
        }
        let shared = &self.shared;
        shared.driven_by.store(0, Ordering::SeqCst);
        shared.claimed.store(false, Ordering::SeqCst);
        shared.waker.wake();
    }
}

/// The engine thread's loop over the queue's [`Core`], which it holds in
/// `slot` except while an application thread drives the queue.
fn run<'a>(
    mut slot: MutexGuard<'a, Option<Core>>,
    core: &'a Mutex<Option<Core>>,
    cfg: &QueueConfig,
) {
    let Some(shared) = slot.as_ref().map(|c| c.shared.clone()) else {
        return;
    };
    let mut idle_since: Option<std::time::Instant> = None;
    loop {
        if shared.stop.load(Ordering::Relaxed) {
            break;
        }
        if shared.claimed.load(Ordering::SeqCst) {
            drop(slot);
            while shared.claimed.load(Ordering::SeqCst) && !shared.stop.load(Ordering::SeqCst) {
                let _ = shared.waker.wait(CLAIM_POLL);
            }
            slot = lock(core);
            idle_since = None;
            continue;
        }
        let Some(eng) = slot.as_mut() else { break };
        if eng.iterate() {
            idle_since = None;
            continue;
        }
        if let PollMode::Adaptive { spin } = cfg.poll {
            let wall = std::time::Instant::now();
            // The spin runs once per burst of work: a wake-up that finds
            // nothing to do (a timeout) goes back to sleep at once.
            let since = *idle_since.get_or_insert(wall);
            if wall.duration_since(since) < spin {
                // Leave the core to any other runnable thread while spinning
                // (the application, the peer's engine thread on a small
                // machine): measured on 2 cores, spinning without yielding
                // took the 64 B SEND ping-pong p50 from ~30 us to ~150 us.
                std::thread::yield_now();
                continue;
            }
            eng.sleep();
        }
    }
    if let Some(eng) = slot.as_mut() {
        eng.publish(true);
    }
}

/// What queue `me` does with a frame its endpoint did not take (received
/// from the wire, or looped back by its own transmit step because it was
/// addressed to the device itself): a QP
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

/// What an iteration took from other queues and from the application.
#[derive(Debug, Clone, Copy, Default)]
struct Taken {
    /// Anything at all (progress).
    any: bool,
    /// Something that may make packets due at once: a send-side post, a
    /// control operation, a hand-off. Posted receives alone make none (a
    /// responder sends nothing because a receive was posted; a requester
    /// that met an RNR NAK retries on its own timer), so in a driven
    /// iteration they do not release what was held for the application's
    /// answer ([`Core::iterate_inline`]).
    may_transmit: bool,
}

/// The engine of one queue: its socket and I/O steps, its endpoint, its
/// statistics, and what it owes other queues. The engine thread runs it;
/// an application thread may take it and run it itself ([`DrivenQueue`]).
pub(crate) struct Core {
    me: u32,
    dir: Arc<Directory>,
    shared: Arc<Shared>,
    sock: QueuePort,
    step: DriverStep,
    ep: Endpoint,
    stats: QueueStats,
    /// Hand-offs (QPs, forwarded posts) waiting for room in another queue's
    /// inbox, in order. While it is longer than `backlog_limit`, no new
    /// application work is taken (the application sees `WouldBlock`).
    backlog: VecDeque<(u32, Handoff)>,
    backlog_limit: usize,
    /// The posts [`Core::take_work`] takes at once (kept for its
    /// capacity: no allocation a batch).
    work_batch: Vec<Work>,
    /// Completions an application's queue had no room for, in order.
    spilled: VecDeque<(u32, WorkCompletion)>,
    wcs: Vec<WorkCompletion>,
    /// The endpoint's time origin.
    origin: std::time::Instant,
    last_stats: Instant,
    /// The time read after the last receive (timers and transmit use it).
    last_now: Instant,
    /// Something happened since the statistics were last published.
    dirty: bool,
    /// The last driven iteration left its transmissions to the next.
    deferred: bool,
    /// When the transmissions held for the application's answer were
    /// first held ([`Core::hold_for_answer`]).
    deferred_at: Instant,
    /// A driven iteration that received packets leaves its transmissions
    /// to the next even without completions ([`DrivenQueue::hold_acks`]).
    hold_acks: bool,
}

impl Core {
    /// The engine of `cfg`'s queue over `sock`: its endpoint, with one CQ
    /// per queue of the device.
    fn new(sock: QueuePort, cfg: &QueueConfig, dir: Arc<Directory>) -> Option<Core> {
        let me = cfg.xsk.queue;
        let shared = dir.queue(me).cloned()?;
        let mut ep = Endpoint::new(cfg.endpoint);
        // CQ i of every queue's endpoint collects the completions of the QPs
        // that the application of queue i created, wherever they live now.
        let cq_depth = cfg.queue_depth.max(16) * 2;
        for _ in 0..dir.queue_count() {
            ep.create_cq(cq_depth);
        }
        let origin = std::time::Instant::now();
        Some(Core {
            me,
            step: DriverStep::new(&sock, cfg.capture.clone(), {
                let (mac, ip) = (cfg.endpoint.local_mac, cfg.endpoint.local_ip);
                match sock {
                    // The service turns frames to the host around.
                    QueuePort::Attached(_) => OwnAddress::without_loopback(mac, ip),
                    QueuePort::Xsk(_) => OwnAddress::new(mac, ip),
                }
            }),
            sock,
            dir,
            shared,
            ep,
            stats: QueueStats::default(),
            backlog: VecDeque::with_capacity(cfg.queue_depth.max(16)),
            backlog_limit: cfg.queue_depth.max(16),
            work_batch: Vec::with_capacity(BATCH),
            spilled: VecDeque::new(),
            wcs: vec![WorkCompletion::default(); BATCH],
            origin,
            last_stats: Instant::from_nanos(0),
            last_now: Instant::from_nanos(0),
            dirty: true,
            deferred: false,
            deferred_at: Instant::from_nanos(0),
            hold_acks: false,
        })
    }

    fn now(&self) -> Instant {
        Instant::from_nanos(self.origin.elapsed().as_nanos() as u64)
    }

    /// The first steps of an iteration: hand-offs from other queues,
    /// application work, receive (frames for QPs another queue holds are
    /// handed off), timers. Returns (progress, packets received).
    fn take_in(&mut self) -> (bool, usize) {
        let (taken, now) = self.take_posts();
        let progress = taken.any;
        let (more, received) = self.take_packets(now);
        (progress | more, received)
    }

    /// Hand-offs from other queues and the application's work. Returns
    /// what there was, and the time to go on with.
    fn take_posts(&mut self) -> (Taken, Instant) {
        self.stats.loops += 1;
        // One clock read for an iteration that finds nothing (most of a
        // busy-polling loop's): each further one only after work that took
        // time (posts applied, packets received).
        let now = self.now();
        let handoffs = self.take_handoffs(now);
        let work = self.take_work();
        let now = if work.any { self.now() } else { now };
        self.last_now = now;
        let taken = Taken {
            any: handoffs | work.any,
            may_transmit: handoffs | work.may_transmit,
        };
        (taken, now)
    }

    /// Receive (frames for QPs another queue holds are handed off), then
    /// the timers that are due. Returns (progress, packets received).
    fn take_packets(&mut self, now: Instant) -> (bool, usize) {
        let (dir, me, stats) = (&*self.dir, self.me, &mut self.stats);
        let received =
            self.step
                .receive_routed(&mut self.sock, &mut self.ep, now, |ep, frame, r| {
                    eng_route(dir, me, stats, ep, frame, r)
                });
        let now = if received > 0 { self.now() } else { now };
        self.last_now = now;
        // Only timers that ran are progress. The endpoint's heap is lazy:
        // a deadline that moved later (an ACK came) leaves an entry that
        // falls due with nothing to do; counted as progress it restarted
        // the adaptive spin after every such wake-up instead of going back
        // to sleep at once.
        let timers_ran =
            self.ep.poll_timeout().is_some_and(|t| t <= now) && self.ep.handle_timeout(now);
        (timers_ran || received > 0, received)
    }

    /// Transmits what is due; a frame to the device's own address is
    /// received here instead, and one for a QP another queue holds is
    /// handed to that queue, as a received frame is ([`eng_route`]).
    fn transmit(&mut self) -> bool {
        let now = self.last_now;
        let (dir, me, stats) = (&*self.dir, self.me, &mut self.stats);
        self.step
            .transmit_routed(&mut self.sock, &mut self.ep, now, |ep, frame, r| {
                eng_route(dir, me, stats, ep, frame, r)
            })
            > 0
    }

    /// Publishes the statistics every [`STATS_PERIOD`] while there is work.
    fn maybe_publish(&mut self, progress: bool, engine_thread: bool) {
        self.dirty |= progress;
        if self.dirty && self.last_now.saturating_duration_since(self.last_stats) >= STATS_PERIOD {
            self.publish(engine_thread);
        }
    }

    /// One iteration of the engine thread: hand-offs, posts, receive,
    /// timers, transmit, completions, waiting hand-offs. Returns whether
    /// anything happened.
    fn iterate(&mut self) -> bool {
        let (mut progress, _) = self.take_in();
        progress |= self.transmit();
        progress |= self.deliver_completions();
        progress |= self.drain_backlog();
        self.maybe_publish(progress, true);
        progress
    }

    /// One iteration on an application thread ([`DrivenQueue::poll_cq`]):
    /// as [`Core::iterate`], but work the application posted since the
    /// last poll is transmitted first, before receiving (with what the last
    /// iteration held for it; receives alone post nothing to transmit and
    /// keep the hold: [`Taken::may_transmit`]), completions are delivered before the
    /// second transmit, and when packets received now delivered completions,
    /// what they made due (their ACKs) waits for the next iteration, to
    /// leave with the application's answer, posted before its next poll.
    /// Packets that delivered no completion (a READ or atomic request, a
    /// WRITE without immediate) have their answer or ACK sent at once: a
    /// READ response is the answer itself, and holding it back cost the
    /// read-lat and atomic-lat responder one more poll (and the yield of
    /// the loop between two polls) per round trip; unless
    /// [`DrivenQueue::hold_acks`] asked for it: a WRITE ping-pong, whose
    /// answer (the application's WRITE, posted when it sees the data land)
    /// then leaves with the ACK.
    fn iterate_inline(&mut self) -> bool {
        let (taken, _) = self.take_posts();
        let mut progress = taken.any;
        if taken.may_transmit {
            // The application's answer leaves at once, with the ACKs the
            // last iteration held for it: packets that came meanwhile (the
            // peer's ACK of our last message, in a ping-pong) are handled
            // after, off the round trip's path.
            self.deferred = false;
            progress |= self.transmit();
        }
        let (more, received) = self.take_packets(self.last_now);
        progress |= more;
        let delivered = self.deliver_completions();
        if !self.hold_for_answer(received > 0 && (delivered || self.hold_acks), received) {
            progress |= self.transmit();
        }
        progress |= delivered | self.drain_backlog();
        self.maybe_publish(progress, false);
        progress
    }

    /// Whether this driven iteration leaves its transmissions (the ACKs
    /// its packets made due) for the application's answer: from an
    /// iteration whose packets made completions (`took_completions`), for
    /// the polls after it that receive nothing else to answer at once, at
    /// most [`ANSWER_HOLD`]. A ping-pong whose application waits for the
    /// ACK of its own message before it answers (perftest's latency
    /// loops) polls a few times between the peer's message and that ACK;
    /// releasing the held ACK at the first of them cost a TX kick of its
    /// own on each side per round trip. A packet that made no completion
    /// (a READ request) ends the hold: its answer goes now.
    fn hold_for_answer(&mut self, took_completions: bool, received: usize) -> bool {
        let now = self.last_now;
        self.deferred = if self.deferred {
            (took_completions || received == 0)
                && now.saturating_duration_since(self.deferred_at) < ANSWER_HOLD
        } else {
            self.deferred_at = now;
            took_completions
        };
        self.deferred
    }

    /// Sends what the last driven iteration left for the next one.
    fn flush_deferred(&mut self) {
        if std::mem::take(&mut self.deferred) {
            self.last_now = self.now();
            self.transmit();
        }
    }

    /// The engine thread has nothing to do: sleep in poll(2) on the socket
    /// and the eventfd until a packet, a post, a hand-off, a claim, a stop,
    /// or the endpoint's next deadline (at most [`MAX_SLEEP`]).
    fn sleep(&mut self) {
        let now = self.now();
        let sleep = match self.ep.poll_timeout() {
            Some(t) => t.saturating_duration_since(now).min(MAX_SLEEP),
            None => MAX_SLEEP,
        };
        if sleep.is_zero() || self.sock.tx_unconsumed() > 0 || !self.backlog.is_empty() {
            return;
        }
        if self.dirty {
            self.publish(true);
        }
        let shared = &*self.shared;
        shared.sleeping.store(true, Ordering::SeqCst);
        if shared.work.is_empty()
            && shared.handoff.is_empty()
            && !shared.stop.load(Ordering::SeqCst)
            && !shared.claimed.load(Ordering::SeqCst)
        {
            // Attached: tell the service this side sleeps (it rings the
            // doorbell then), unless frames came meanwhile.
            let may_sleep = self.sock.attached_mut().is_none_or(|p| p.prepare_sleep());
            if may_sleep {
                self.stats.sleeps += 1;
                let _ = shared.waker.wait_with(&self.sock, sleep);
            }
        }
        shared.sleeping.store(false, Ordering::SeqCst);
    }

    /// Publishes the statistics snapshot; the CPU time is the engine
    /// thread's, so only the engine thread updates it.
    fn publish(&mut self, engine_thread: bool) {
        let shared = &*self.shared;
        let stats = &mut self.stats;
        stats.transport = self.ep.counters();
        if engine_thread {
            stats.thread_cpu = crate::io::thread_cpu_time();
        }
        // Not per packet, and bounded: the first MAX_REPORTED_QPS QPs; the
        // rest are counted from the iterator's exact length, not walked.
        stats.qp_rates.fill(self.ep.qp_rates());
        stats.socket = self.sock.counters();
        let looped = self.step.looped();
        (stats.loopback_frames, stats.loopback_bytes) = (looped.frames, looped.bytes);
        stats.woken_by_posts = shared.woken_by_posts.load(Ordering::Relaxed);
        if let Some(k) = self.sock.statistics() {
            stats.kernel = k;
        }
        *shared.stats.lock().unwrap_or_else(|e| e.into_inner()) = *stats;
        self.last_stats = self.now();
        self.dirty = false;
    }

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
        let Some(target) = self.dir.queue(to).cloned() else {
            return;
        };
        self.deliver_completions();
        let Some(qp) = self.ep.take_qp(qpn) else {
            // A UD QP does not move (its datagrams come from many peers,
            // which RSS spreads over the queues): homed where it is, so
            // its handed-over datagrams stop asking.
            if self.ep.is_ud_qp(qpn) {
                self.dir.set_home(qpn, self.me);
            }
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
    /// hand-offs to other queues are backed up), in order. With many QPs,
    /// each post's QP is prefetched a few posts ahead, in the receive
    /// step's two stages ([`prefetch_distance`]): an application that
    /// posts to thousands of QPs finds each one out of the caches.
    fn take_work(&mut self) -> Taken {
        if self.backlog.len() >= self.backlog_limit {
            return Taken::default();
        }
        let mut batch = std::mem::take(&mut self.work_batch);
        while batch.len() < BATCH {
            let Some(work) = self.shared.work.pop() else {
                break;
            };
            batch.push(work);
        }
        let taken = Taken {
            any: !batch.is_empty(),
            may_transmit: batch.iter().any(|w| {
                !matches!(
                    w,
                    Work::Recv { .. } | Work::RecvList { .. } | Work::UdRecv { .. }
                )
            }),
        };
        let ahead = prefetch_distance(&self.ep);
        let prefetch = ahead != Lookahead::default();
        let mut posts = [None; BATCH];
        if prefetch {
            for (p, w) in posts.iter_mut().zip(&batch) {
                *p = w.qpn().map(|qpn| PostHint {
                    qpn,
                    payload: match w {
                        Work::Send { wr, .. } => self.ep.send_payload_hint(wr),
                        _ => MemoryRange::EMPTY,
                    },
                });
            }
        }
        for (i, work) in batch.drain(..).enumerate() {
            if prefetch {
                prefetch_posts(&self.ep, &posts, i, ahead);
            }
            self.apply(self.me, work);
        }
        self.work_batch = batch;
        taken
    }

    /// Runs one post or control operation from the application of queue
    /// `origin`; one for a QP another queue holds is passed on to it.
    fn apply(&mut self, origin: u32, work: Work) {
        if let Some(qpn) = work.qpn().filter(|&q| !self.ep.has_qp(q)) {
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
            Work::SendList { qpn, wr, sges } => self
                .ep
                .post_send_sgl(qpn, wr, &sges)
                .err()
                .map(|e| (qpn, wr.wr_id, e)),
            Work::SendInline { qpn, wr, data } => self
                .ep
                .post_send_inline(qpn, wr, &data)
                .err()
                .map(|e| (qpn, wr.wr_id, e)),
            Work::RecvList { qpn, wr_id, sges } => self
                .ep
                .post_recv_sgl(qpn, wr_id, &sges)
                .err()
                .map(|e| (qpn, wr_id, e)),
            Work::UdSend { qpn, wr } => self
                .ep
                .post_ud_send(qpn, wr)
                .err()
                .map(|e| (qpn, wr.wr_id, e)),
            Work::UdRecv { qpn, wr } => self
                .ep
                .post_ud_recv(qpn, wr)
                .err()
                .map(|e| (qpn, wr.wr_id, e)),
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
