//! The shell: the verbs of a C program mapped onto one engine queue
//! ([`RunToCompletion`]), with no protocol logic of its own. It owns what
//! verbs have and the engine does not: per-CQ buffers the completion
//! channels are armed on, the channels' event queues, the asynchronous
//! event queue, and the progress thread that keeps the engine moving while
//! the program is not inside `ibv_poll_cq` (a passive RDMA target never
//! polls: see docs/verbs-drop-in.md, "Process model").
//!
//! Every call takes one lock (the engine's); `ibv_poll_cq` runs one engine
//! iteration inline, so a program that polls drives its own packets and the
//! progress thread stays asleep. An `ibv_post_send` from a thread other
//! than the one that polls transmits what it posted itself (a doorbell);
//! an `ibv_poll_cq` that keeps finding nothing while a window of requests
//! is in flight sleeps until a frame or a completion arrives. When idle,
//! the progress thread sleeps in poll(2) on the AF_XDP socket and an
//! eventfd, until a frame arrives, the engine's next timer is due, or a
//! verb of the program changed something (a post, a state change: the verb
//! wakes it).

use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, Ipv4Addr};
use std::os::fd::{BorrowedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use engine::driver::{InlineConfig, RunToCompletion};
use engine::endpoint::{AsyncEvent, Endpoint};
use engine::io::{spawn_without_signals, Waker};
use engine::nic::{LoaderError, QueueOption, SteerOps, SteerRequest, Steering};
use engine::rc::{
    Access, MrKeys, Mtu, MwType, QpAttr, QpAttrMask, QpInitAttr, QpState, RecvWr, RegionMemory,
    SendWr, Sge, SgeCaps, SrqAttr, SrqAttrMask, VerbsError, WcOpcode, WcStatus, WorkCompletion,
};
use engine::stats::{queue_counters, xdp_counters, QueueSnapshot, Snapshot, StatsServer};
use engine::ud::{AhAttr, UdQpAttr, UdQpAttrMask, UdSendWr};
use engine::verbs::DeviceError;

use crate::config::Config;
use crate::os::EventFd;

/// The progress thread's first nap when the program called `ibv_poll_cq`
/// since its last look (the program drives the engine): short, so that a
/// program that polls now and then (perftest's servers between their
/// steps) does not keep the thread asleep for long. Each further nap in a
/// row doubles, up to [`APP_DRIVES_MAX`]: a program that busy-polls keeps
/// the engine going itself, and a thread waking every 20 µs beside it
/// took the core from one of the two busy-polling sides of a latency test
/// 14,000 times a second (`perf stat -e context-switches` on a stock
/// `ib_send_lat`: 33,697 in 2.4 s, against 359 for `roce-xdp send-lat`).
const APP_DRIVES_FOR: Duration = Duration::from_micros(20);
/// The longest nap: how late, at most, the thread takes over from a
/// program that stopped polling without arming a CQ (`ibv_req_notify_cq`
/// ends a nap at once).
const APP_DRIVES_MAX: Duration = Duration::from_millis(1);
/// Idle iterations the progress thread spins (yielding) before it sleeps.
const IDLE_SPINS: u32 = 64;
/// Its longest sleep in poll(2) when idle (a frame, a timer or a verb
/// wakes it sooner).
const MAX_SLEEP: Duration = Duration::from_secs(1);
/// Requests in flight on a QP from which a program polling an empty CQ is
/// waiting for a window's ACKs, not for a ping-pong's answer.
const WINDOW_IN_FLIGHT: usize = 4;
/// The longest an empty `ibv_poll_cq` waits for a frame or a completion
/// once the program has polled [`Config::poll_yield`] empty calls in a row
/// with a window in flight (as long as the progress thread's longest nap).
const POLL_WAIT_MAX: Duration = Duration::from_millis(1);
/// Completions moved from the engine's CQ to the shell's per call.
const DRAIN_BATCH: usize = 32;

/// A completion channel: an eventfd (the program polls `channel->fd`) and
/// the CQs whose events it carries, in order.
#[derive(Debug)]
pub struct Channel {
    pub fd: EventFd,
    events: Mutex<VecDeque<usize>>,
}

impl Channel {
    pub fn new() -> std::io::Result<Channel> {
        Ok(Channel {
            fd: EventFd::new()?,
            events: Mutex::new(VecDeque::with_capacity(64)),
        })
    }

    /// Blocks (unless the fd is non-blocking) until an event arrives;
    /// returns the token of its CQ.
    pub fn get_event(&self) -> std::io::Result<usize> {
        loop {
            self.fd.read()?;
            if let Some(t) = lock(&self.events).pop_front() {
                return Ok(t);
            }
        }
    }

    fn push(&self, token: usize) {
        lock(&self.events).push_back(token);
        self.fd.signal();
    }
}

/// The asynchronous events of one context (`ibv_get_async_event`): its
/// own eventfd, the context's `async_fd`, as each `ibv_open_device` of
/// rdma-core opens its own uverbs file (UCX opens the device once per
/// UCP context, Open MPI twice, and registers each `async_fd` apart).
#[derive(Debug)]
pub struct ContextEvents {
    pub fd: EventFd,
    events: Mutex<VecDeque<(i32, usize)>>,
}

impl ContextEvents {
    pub fn new() -> std::io::Result<ContextEvents> {
        Ok(ContextEvents {
            fd: EventFd::new()?,
            events: Mutex::new(VecDeque::with_capacity(64)),
        })
    }

    /// Blocks (unless the fd is non-blocking) until an event arrives:
    /// (event type, element token).
    pub fn get(&self) -> std::io::Result<(i32, usize)> {
        loop {
            self.fd.read()?;
            if let Some(e) = lock(&self.events).pop_front() {
                return Ok(e);
            }
        }
    }
}

/// The open contexts' event queues, by context: an event goes to the
/// context its QP or SRQ was created on.
#[derive(Debug, Default)]
pub struct AsyncEvents {
    contexts: Mutex<HashMap<usize, Arc<ContextEvents>>>,
}

impl AsyncEvents {
    /// A context opened: its events go to `events` until it closes.
    pub fn attach(&self, context: usize, events: Arc<ContextEvents>) {
        lock(&self.contexts).insert(context, events);
    }

    pub fn detach(&self, context: usize) {
        lock(&self.contexts).remove(&context);
    }

    /// Reports an event of the QP or SRQ whose `ibv_qp` / `ibv_srq` is at
    /// `token`; dropped if its context is closed.
    fn push(&self, ty: i32, token: usize) {
        // SAFETY: tokens of QPs and SRQs are the addresses of their live
        // `ibv_qp` / `ibv_srq` (the shell drops a QP's or SRQ's token
        // before it is freed), and both structs begin with their
        // `ibv_context *`, written before the object was handed out and
        // never after.
        let context = unsafe { *(token as *const usize) };
        if let Some(c) = lock(&self.contexts).get(&context) {
            lock(&c.events).push_back((ty, token));
            c.fd.signal();
        }
    }

    /// Reports a device event (no element) to every open context.
    fn push_device(&self, ty: i32) {
        for c in lock(&self.contexts).values() {
            lock(&c.events).push_back((ty, 0));
            c.fd.signal();
        }
    }

    /// Drops the events of the object at `token` not yet taken (it is
    /// being destroyed).
    fn forget(&self, token: usize) {
        for c in lock(&self.contexts).values() {
            lock(&c.events).retain(|&(_, k)| k != token);
        }
    }
}

#[derive(Debug)]
struct CqState {
    buf: VecDeque<WorkCompletion>,
    capacity: usize,
    armed: bool,
    channel: Option<Arc<Channel>>,
    token: usize,
}

struct State {
    rtc: RunToCompletion,
    cqs: Vec<Option<CqState>>,
    /// QP number -> (token of its `ibv_qp`, a fatal event was reported).
    qps: HashMap<u32, (usize, bool)>,
    /// SRQ id -> token of its `ibv_srq` (its limit events carry it).
    srqs: HashMap<u32, usize>,
    /// Where a drain takes the engine's completions (allocated once: an
    /// empty poll initializes no batch).
    scratch: Box<[WorkCompletion; DRAIN_BATCH]>,
    /// UD QP number -> its send staging area ([`UdStaging`]).
    ud_staging: HashMap<u32, UdStaging>,
    /// UD QP number -> its receive staging area ([`UdRecvStaging`]).
    ud_recv_staging: HashMap<u32, UdRecvStaging>,
    /// The service this process was attached to is gone, and what that
    /// does was done ([`State::attachment_lost`]).
    service_gone: bool,
}

/// Where the receives of a UD QP created with more than one receive SGE
/// land (the engine's UD receive takes one SGE): a region of the QP's PD
/// with one slot of 40 + MTU bytes per receive queue entry. Every receive
/// of the QP takes the next slot and keeps the program's SGE list beside
/// it; its completion (receives complete in the order they were posted,
/// flushed ones too) scatters the slot's bytes into that list.
struct UdRecvStaging {
    lkey: u32,
    /// The QP's PD: the program's entries are written as the QP writes.
    pd: u32,
    slot_len: usize,
    slots: usize,
    max_sge: usize,
    /// Receives posted and completed so far (slot = count % slots).
    posted: usize,
    completed: usize,
    /// The program's SGE lists, `max_sge` per slot, and their lengths.
    sges: Box<[Sge]>,
    counts: Box<[usize]>,
    scratch: Box<[u8]>,
}

impl UdRecvStaging {
    /// The next receive completion of the QP: the bytes of its slot (the
    /// GRH area, then the payload) scattered into the program's list in
    /// order, each entry written through the QP's PD with LOCAL_WRITE, as
    /// rxe_resp.c `send_data_in` -> rxe_mr.c `copy_data` writes a
    /// receive. An entry that refuses its bytes (a key of no region, of a
    /// region of another PD or without LOCAL_WRITE, a range out of its
    /// region: rxe `RESPST_ERR_MALFORMED_WQE`, class A) leaves the entries
    /// before it written, completes the receive with a local QP operation
    /// error and moves the QP to ERROR. (rxe does so when the datagram
    /// lands; here, when its completion is drained: a datagram that landed
    /// in a later receive of the QP before then keeps its completion.)
    fn complete(&mut self, ep: &mut Endpoint, wc: &mut WorkCompletion) {
        let slot = self.completed % self.slots;
        self.completed = self.completed.wrapping_add(1);
        if wc.status != WcStatus::Success {
            return;
        }
        let n = (wc.byte_len as usize).min(self.slot_len);
        let base = (slot * self.slot_len) as u64;
        if ep.mr_read(self.lkey, base, &mut self.scratch[..n]).is_err() {
            wc.status = WcStatus::LocalProtectionError;
            return;
        }
        let list = &self.sges[slot * self.max_sge..][..self.counts[slot]];
        let mut at = 0;
        for g in list {
            if at == n {
                break;
            }
            let k = (g.length as usize).min(n - at);
            if k > 0
                && ep
                    .mr_write_in(self.pd, g.lkey, g.addr, &self.scratch[at..at + k])
                    .is_err()
            {
                wc.status = WcStatus::LocalQpOperationError;
                wc.byte_len = 0;
                let error = UdQpAttr {
                    state: QpState::Error,
                    ..UdQpAttr::default()
                };
                let _ = ep.modify_ud_qp(wc.qpn, &error, UdQpAttrMask::STATE);
                return;
            }
            at += k;
        }
    }
}

/// Where a UD QP's sends that the engine's one-SGE UD request cannot
/// carry as they are (an SGE list, inline data) are gathered: a region of
/// the QP's PD, registered in the engine, of one MTU-sized slot per send
/// queue entry. A send takes the next slot; the send posted `slots`
/// earlier has left it by then (the queue has room only once it is out,
/// and the engine copies a datagram's payload into its frame as it sends
/// it).
struct UdStaging {
    lkey: u32,
    slot_len: usize,
    slots: usize,
    next: usize,
    /// One message, gathered before it is written into its slot.
    scratch: Box<[u8]>,
}

/// The data of a staged UD send ([`Shell::post_ud_send_staged`]).
pub enum UdData<'a> {
    /// An SGE list, gathered through the engine's regions.
    Sges(&'a [Sge]),
    /// Inline bytes, already copied from the program.
    Inline(&'a [u8]),
}

/// The engine of one program: one interface queue.
pub struct Shell {
    state: Mutex<State>,
    pub mac: [u8; 6],
    pub ip: Ipv4Addr,
    /// The largest path MTU the interface carries.
    pub active_mtu: Mtu,
    pub ifindex: u32,
    pub iface: String,
    pub async_events: AsyncEvents,
    origin: Instant,
    /// The AF_XDP socket's descriptor (it lives as long as `state`).
    sock_fd: RawFd,
    /// Wakes the progress thread from its poll(2).
    waker: Waker,
    /// The progress thread sleeps (or is about to): verbs must wake it.
    sleeping: AtomicBool,
    /// The progress thread naps while the program polls: only arming a CQ
    /// (the program is about to block for its event) wakes it.
    napping: AtomicBool,
    /// Answers `roce-xdp stats --iface IF` (and `--watch`) with this
    /// queue's counters, as the CLI's engines do.
    stats_server: Mutex<Option<StatsServer>>,
    /// The drop-in's own counters (the stats channel shows them).
    counters: ShellCounters,
    /// `ibv_poll_cq` calls in a row that found nothing to do.
    empty_polls: AtomicU32,
    /// How many before such calls may yield (`Config::poll_yield`; 0 =
    /// never).
    poll_yield: u32,
    /// The thread that called `ibv_poll_cq` last ([`thread_id`]; 0: none
    /// yet): a post from another thread rings the doorbell itself
    /// ([`Shell::doorbell`]).
    poller: AtomicU64,
    /// `ibv_poll_cq` calls waiting for work (their yield,
    /// [`Shell::poll_cq`]): whoever moves completions into a CQ wakes them
    /// with `poll_waker`.
    pollers_waiting: AtomicU32,
    poll_waker: Waker,
}

/// A number for the calling thread, unique in the process (never 0).
fn thread_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    thread_local! {
        static ID: u64 = NEXT.fetch_add(1, Ordering::Relaxed);
    }
    ID.with(|id| *id)
}

/// What moved the engine, for the stats channel.
#[derive(Default)]
struct ShellCounters {
    /// `ibv_poll_cq` calls of the program.
    app_polls: AtomicU64,
    /// Engine iterations the progress thread ran.
    progress_loops: AtomicU64,
    /// Its sleeps in poll(2), and the times a verb woke it.
    progress_sleeps: AtomicU64,
    progress_wakes: AtomicU64,
    /// Its naps while the program polled.
    progress_naps: AtomicU64,
    /// Times an `ibv_poll_cq` that found nothing yielded the core (waited
    /// for a frame or a completion).
    app_yields: AtomicU64,
    /// `ibv_req_notify_cq` calls (a program about to wait for an event).
    app_arms: AtomicU64,
    /// `ibv_post_send` calls that transmitted at once ([`Shell::doorbell`]).
    doorbells: AtomicU64,
}

/// The queue coverage the program's engine installed (ntuple rules on a
/// multi-queue NIC), removed when the program exits.
static STEERING: Mutex<Option<Steering>> = Mutex::new(None);

extern "C" fn remove_steering() {
    if let Some(s) = lock(&STEERING).take() {
        if let Err(e) = s.remove() {
            eprintln!("roce-xdp: {e}");
        }
    }
}

/// Settles queue coverage as the CLI's tools do (docs/queue-coverage.md):
/// on an interface with more RX queues than the program's, steers RoCE to
/// its queue (queue 0: steering cannot single out another one) or refuses
/// unless forced. What it installs is removed at exit.
fn steer(cfg: &Config) -> Result<Option<Steering>, String> {
    if cfg.queue != 0 {
        let rx = engine::nic::EthtoolOps::open(None, &cfg.iface)
            .and_then(|ops| ops.rx_queues().map_err(engine::nic::SteerError::Ethtool))
            .map(|q| q.count)
            .unwrap_or(1);
        if rx > 1 && !cfg.force {
            return Err(format!(
                "{} has {rx} RX queues and the program serves queue {} alone: RSS would put RoCE flows on the others, where they stall, and steering can only send RoCE to queue 0. Use --queues 0, or --force to serve anyway",
                cfg.iface, cfg.queue
            ));
        }
        return Ok(None);
    }
    let req = SteerRequest {
        mode: cfg.steer,
        force: cfg.force,
        queue_option: QueueOption::One,
        ..SteerRequest::new(&cfg.iface, 1)
    };
    let s = Steering::establish_on_nic(&req).map_err(|e| e.to_string())?;
    for n in s.notes() {
        eprintln!("roce-xdp: warning: {n}");
    }
    // SAFETY: registers a plain function without arguments.
    unsafe { libc::atexit(remove_steering) };
    Ok(Some(s))
}

/// Gives the calling thread nice value `n` (`ROCE_XDP_PROGRESS_NICE`), or
/// says why it could not.
fn set_thread_nice(n: i32) {
    // SAFETY: gettid takes no argument and cannot fail.
    let tid = unsafe { libc::gettid() };
    // SAFETY: setpriority on this thread's id (Linux: PRIO_PROCESS with a
    // thread id sets that thread's nice value); plain integer arguments.
    if unsafe { libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, n) } != 0 {
        eprintln!(
            "roce-xdp: {}={n}: {} (the progress thread keeps the program's nice value)",
            crate::config::ENV_PROGRESS_NICE,
            std::io::Error::last_os_error()
        );
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The attachment to the interface's shared engine (`roce-xdp service`)
/// that `cfg.share` asks for: None to run an engine in this process.
fn attach_to_service(cfg: &Config) -> Result<Option<engine::attach::AttachedPort>, String> {
    use crate::config::{Share, ENV_SHARE};
    engine::attach::attach_as(cfg.share, &cfg.iface).map_err(|e| {
        let share = if cfg.share == Share::Always {
            "always"
        } else {
            "auto"
        };
        format!("{e} ({ENV_SHARE}={share}; {ENV_SHARE}=never runs an engine in this process)")
    })
}

/// Why the queue could not be opened, with what to do (the CLI's hints
/// plus the one-program-per-queue rule of the drop-in).
fn open_error(cfg: &Config, e: DeviceError) -> String {
    let (iface, q) = (&cfg.iface, cfg.queue);
    match e {
        DeviceError::Loader(LoaderError::AlreadyAttached(_)) => format!(
            "{iface} is in use by another roce-xdp engine (a program under `roce-xdp exec`, `roce-xdp serve` or a tool): one program per interface; stop it first, or run `roce-xdp service --iface {iface}` instead of it and every program attaches to that (ROCE_XDP_FORCE=1 takes the interface over and breaks it)"
        ),
        e => format!("cannot open {iface} queue {q}: {e}"),
    }
}

/// RoCE v2 headers in an IPv4 frame's MTU: IPv4 20 + UDP 8 + BTH 12 +
/// RETH 16 + ICRC 4 (rxe subtracts the same before choosing the IB MTU).
const ROCE_OVERHEAD: u32 = 60;

impl Shell {
    /// Opens the queue `cfg` names and starts the progress thread.
    pub fn open(cfg: &Config) -> Result<Arc<Shell>, String> {
        let mut ic = InlineConfig::new(&cfg.iface);
        ic.queue = cfg.queue;
        ic.attach = cfg.attach;
        ic.zero_copy = cfg.zero_copy;
        ic.force = cfg.force;
        let (rtc, steering) = match attach_to_service(cfg)? {
            Some(port) => (RunToCompletion::attached(ic, port), None),
            None => {
                let steering = steer(cfg)?;
                let rtc = RunToCompletion::open(ic).map_err(|e| open_error(cfg, e))?;
                (rtc, steering)
            }
        };
        let attached = rtc.attachment().is_some();
        let ip = match rtc.ip() {
            IpAddr::V4(ip) => ip,
            IpAddr::V6(_) => return Err("the drop-in serves IPv4 RoCE v2 GIDs only".into()),
        };
        let if_mtu = match rtc.attachment() {
            Some(port) => port.welcome().if_mtu,
            None => std::fs::read_to_string(format!("/sys/class/net/{}/mtu", cfg.iface))
                .ok()
                .and_then(|s| s.trim().parse::<u32>().ok())
                .unwrap_or(1500),
        };
        let active_mtu = [Mtu::Mtu4096, Mtu::Mtu2048, Mtu::Mtu1024, Mtu::Mtu512]
            .into_iter()
            .find(|m| m.bytes() + ROCE_OVERHEAD <= if_mtu)
            .unwrap_or(Mtu::Mtu256);
        let ifindex = engine::io::if_index(&cfg.iface).unwrap_or(0);
        let sock_fd = rtc.socket_fd();
        let shell = Arc::new(Shell {
            mac: rtc.mac(),
            ip,
            active_mtu,
            ifindex,
            iface: cfg.iface.clone(),
            state: Mutex::new(State {
                rtc,
                cqs: Vec::new(),
                qps: HashMap::new(),
                srqs: HashMap::new(),
                scratch: Box::new([WorkCompletion::default(); DRAIN_BATCH]),
                ud_staging: HashMap::new(),
                ud_recv_staging: HashMap::new(),
                service_gone: false,
            }),
            async_events: AsyncEvents::default(),
            origin: Instant::now(),
            sock_fd,
            waker: Waker::new().map_err(|e| format!("eventfd: {e}"))?,
            sleeping: AtomicBool::new(false),
            napping: AtomicBool::new(false),
            stats_server: Mutex::new(None),
            counters: ShellCounters::default(),
            empty_polls: AtomicU32::new(0),
            poll_yield: cfg.poll_yield,
            poller: AtomicU64::new(0),
            pollers_waiting: AtomicU32::new(0),
            poll_waker: Waker::new().map_err(|e| format!("eventfd: {e}"))?,
        });
        *lock(&STEERING) = steering;
        let weak = Arc::downgrade(&shell);
        let source = move || weak.upgrade().map(|s| s.snapshot()).unwrap_or_default();
        // Attached, the service's stats channel is the interface's: it
        // lists this process among the attached ones.
        if !attached {
            match StatsServer::start(&cfg.iface, source) {
                Ok(server) => *lock(&shell.stats_server) = Some(server),
                Err(e) => eprintln!(
                    "roce-xdp: the stats channel is unavailable ({e}); the program runs without it"
                ),
            }
        }
        if cfg.progress_thread {
            let s = shell.clone();
            let nice = cfg.progress_nice;
            // The program's signals stay the program's (see
            // `spawn_without_signals`).
            spawn_without_signals(
                std::thread::Builder::new().name("roce-xdp-progress".into()),
                move || {
                    if let Some(n) = nice {
                        set_thread_nice(n);
                    }
                    s.progress_loop()
                },
            )
            .map_err(|e| format!("cannot start the progress thread: {e}"))?;
        }
        Ok(shell)
    }

    /// Attached to a service: publishes the service IDs the CM listens on
    /// and returns the communication IDs' top byte (the slot); 0 when the
    /// engine runs in this process.
    pub fn share_cm(&self, listeners: &[u64]) -> u8 {
        let st = lock(&self.state);
        match st.rtc.attachment() {
            Some(port) => {
                port.set_listeners(listeners);
                port.slot()
            }
            None => 0,
        }
    }

    /// This queue's counters for the stats channel (`roce-xdp stats`).
    fn snapshot(&self) -> Snapshot {
        // The CM's counters first: librdmacm's reader takes its own lock,
        // under which its CM thread calls verbs (which take ours).
        let cm = crate::ffi::cm_stats::cm_counters();
        let st = lock(&self.state);
        let stats = st.rtc.stats();
        Snapshot {
            iface: self.iface.clone(),
            pid: std::process::id(),
            uptime_ns: self.now_ns(),
            xdp_mode: st
                .rtc
                .attached_mode()
                .map_or_else(|| "attached to the service".into(), |m| m.to_string()),
            zero_copy: st.rtc.is_zero_copy(),
            steering: lock(&STEERING).as_ref().map(|s| s.status().clone()),
            cm,
            processes: Vec::new(),
            xdp: st
                .rtc
                .steer_counters()
                .map(|c| xdp_counters(&c))
                .unwrap_or_default(),
            queues: vec![QueueSnapshot {
                queue: st.rtc.queue(),
                core: None,
                zero_copy: st.rtc.is_zero_copy(),
                counters: {
                    let mut v = queue_counters(&stats);
                    let c = &self.counters;
                    for (n, x) in [
                        ("verbs_poll_cq_calls", &c.app_polls),
                        ("progress_thread_loops", &c.progress_loops),
                        ("progress_thread_sleeps", &c.progress_sleeps),
                        ("progress_thread_woken_by_verbs", &c.progress_wakes),
                        ("progress_thread_naps", &c.progress_naps),
                        ("verbs_req_notify_cq_calls", &c.app_arms),
                        ("verbs_poll_cq_yields", &c.app_yields),
                        ("verbs_post_send_doorbells", &c.doorbells),
                    ] {
                        v.push((n.into(), x.load(Ordering::Relaxed)));
                    }
                    v
                },
                qp_rates: stats.qp_rates.as_slice().to_vec(),
            }],
        }
    }

    fn now_ns(&self) -> u64 {
        self.origin.elapsed().as_nanos() as u64
    }

    /// Drives the engine while the program does not: busy, it iterates;
    /// idle for [`IDLE_SPINS`] iterations, it sleeps in poll(2) on the
    /// socket and its waker until a frame arrives, the next timer is due
    /// or a verb wakes it ([`Shell::wake`]).
    fn progress_loop(&self) {
        let mut idle = 0u32;
        let mut polls_seen = u64::MAX;
        let mut arms_seen = 0;
        let mut nap = APP_DRIVES_FOR;
        loop {
            // The program polled since the last look and armed no CQ: it
            // drives the engine (its `ibv_poll_cq` runs an iteration). Look
            // again after a nap, twice as long each time in a row up to
            // APP_DRIVES_MAX; arming a CQ ends the nap (the program is
            // about to block in `ibv_get_cq_event`). Counting calls costs
            // the program no clock read.
            let polls = self.counters.app_polls.load(Ordering::Relaxed);
            let arms = self.counters.app_arms.load(Ordering::SeqCst);
            if polls != polls_seen {
                polls_seen = polls;
                if polls > 0 && arms == arms_seen {
                    self.counters.progress_naps.fetch_add(1, Ordering::Relaxed);
                    self.napping.store(true, Ordering::SeqCst);
                    // An arm between the load above and the flag: no wake
                    // came, do not nap.
                    if self.counters.app_arms.load(Ordering::SeqCst) == arms_seen {
                        let _ = self.waker.wait(nap);
                    }
                    self.napping.store(false, Ordering::SeqCst);
                    nap = (nap * 2).min(APP_DRIVES_MAX);
                    continue;
                }
            }
            arms_seen = arms;
            nap = APP_DRIVES_FOR;
            let sleep = {
                let mut st = lock(&self.state);
                let busy = st.rtc.progress();
                if st.attachment_lost(self) {
                    // Nothing moves any more: the program gets its flushed
                    // completions and the fatal event from the verbs; this
                    // thread has nothing left to drive.
                    return;
                }
                if st.drain_all(self) > 0 {
                    self.wake_poller();
                }
                self.counters.progress_loops.fetch_add(1, Ordering::Relaxed);
                if busy {
                    idle = 0;
                    continue;
                }
                if idle < IDLE_SPINS {
                    None
                } else {
                    let sleep = st.rtc.idle_for(MAX_SLEEP);
                    // Set under the lock: a verb that runs after it is
                    // released sees it and wakes the thread.
                    self.sleeping.store(sleep.is_some(), Ordering::SeqCst);
                    sleep
                }
            };
            match sleep {
                None => {
                    idle += 1;
                    std::thread::yield_now();
                }
                Some(d) => {
                    // SAFETY: the socket is owned by `state`, which lives
                    // as long as `self`.
                    let sock = unsafe { BorrowedFd::borrow_raw(self.sock_fd) };
                    self.counters
                        .progress_sleeps
                        .fetch_add(1, Ordering::Relaxed);
                    let _ = self.waker.wait_with(sock, d);
                    self.sleeping.store(false, Ordering::SeqCst);
                    idle = 0;
                }
            }
        }
    }

    /// Wakes the progress thread if it sleeps: a verb changed what the
    /// engine has to do (a post, a state change, a region).
    fn wake(&self) {
        if self.sleeping.load(Ordering::SeqCst) {
            self.counters.progress_wakes.fetch_add(1, Ordering::Relaxed);
            self.waker.wake();
        }
    }

    /// Wakes an `ibv_poll_cq` that waits for work: completions arrived
    /// in a CQ. Called under the engine lock, after the move.
    fn wake_poller(&self) {
        if self.pollers_waiting.load(Ordering::SeqCst) > 0 {
            self.poll_waker.wake();
        }
    }

    fn with<R>(&self, f: impl FnOnce(&mut Endpoint) -> R) -> R {
        let r = f(lock(&self.state).rtc.endpoint_mut());
        self.wake();
        r
    }

    /// The MAC of `ip` from the kernel's neighbour table; for the engine's
    /// own address its own MAC, with no ARP (two QPs of the device
    /// connected to each other: loopback).
    pub fn resolve_mac(&self, ip: IpAddr) -> Result<[u8; 6], String> {
        if ip == IpAddr::V4(self.ip) {
            return Ok(self.mac);
        }
        // Resolution may take a while: not under the engine lock.
        engine::nic::resolve_mac(None, &self.iface, ip, Duration::from_secs(3))
            .map_err(|e| e.to_string())
    }

    /// The hop limit frames to `ip` carry: the kernel route's, as the
    /// kernel's RDMA core sets it in every address it resolves for rxe and
    /// NICs alike, whatever the program asked for (64 if the route cannot
    /// be read).
    pub fn route_hop_limit(&self, ip: IpAddr) -> u8 {
        engine::nic::route_hop_limit(ip).unwrap_or(64)
    }

    pub fn create_cq(&self, depth: usize, token: usize) -> u32 {
        let mut st = lock(&self.state);
        let depth = depth.max(16);
        let id = st.rtc.endpoint_mut().create_cq(depth);
        let slot = id as usize;
        if st.cqs.len() <= slot {
            st.cqs.resize_with(slot + 1, || None);
        }
        st.cqs[slot] = Some(CqState {
            buf: VecDeque::with_capacity(depth),
            capacity: depth,
            armed: false,
            channel: None,
            token,
        });
        id
    }

    /// Gives CQ `cq` room for `depth` completions (`ibv_resize_cq`), in the
    /// engine and in the program's buffer alike; refused while more than
    /// that wait in the two.
    pub fn resize_cq(&self, cq: u32, depth: usize) -> Result<(), VerbsError> {
        let mut st = lock(&self.state);
        st.drain(cq as usize, self);
        let State { rtc, cqs, .. } = &mut *st;
        let Some(Some(c)) = cqs.get_mut(cq as usize) else {
            return Err(VerbsError::UnknownCq);
        };
        // The program's `cqe` is what must hold what waits, here and in the
        // engine (rxe); the buffers keep at least 16 entries, as at
        // creation.
        let engine_held = rtc.endpoint_mut().cq_len(cq).unwrap_or(0);
        if c.buf.len() + engine_held > depth {
            return Err(VerbsError::InvalidArgument(
                "more completions wait in the CQ than the new size holds",
            ));
        }
        let depth = depth.max(16);
        rtc.endpoint_mut().resize_cq(cq, depth)?;
        c.capacity = depth;
        c.buf.reserve(depth.saturating_sub(c.buf.len()));
        Ok(())
    }

    pub fn set_cq_channel(&self, cq: u32, channel: Option<Arc<Channel>>) {
        if let Some(Some(c)) = lock(&self.state).cqs.get_mut(cq as usize) {
            c.channel = channel;
        }
    }

    /// Forgets a CQ (the engine's CQ id is not reused).
    pub fn destroy_cq(&self, cq: u32) {
        if let Some(c) = lock(&self.state).cqs.get_mut(cq as usize) {
            *c = None;
        }
    }

    /// Registers `memory` in the engine's protection domain `pd`.
    pub fn reg_mr(
        &self,
        pd: u32,
        memory: Box<dyn RegionMemory>,
        iova: u64,
        access: Access,
    ) -> Result<MrKeys, VerbsError> {
        self.with(|ep| ep.reg_mr_in(pd, memory, iova, access))
    }

    pub fn dereg_mr(&self, lkey: u32) -> Result<(), VerbsError> {
        self.with(|ep| ep.dereg_mr(lkey).map(drop))
    }

    /// Registers `memory` in place of the region `lkey` under the same
    /// keys, in protection domain `pd` (`ibv_rereg_mr`), in one step
    /// under the engine's lock; if the engine refuses the new region, the
    /// old one stays as it was.
    pub fn rereg_mr(
        &self,
        lkey: u32,
        pd: u32,
        memory: Box<dyn RegionMemory>,
        iova: u64,
        access: Access,
    ) -> Result<(), VerbsError> {
        self.with(|ep| {
            ep.rereg_mr(lkey, memory, iova, access)?;
            ep.set_mr_pd(lkey, pd).map(drop)
        })
    }

    /// Allocates a memory window of `kind` in the engine's protection
    /// domain `pd`; returns its R_Key.
    pub fn alloc_mw(&self, pd: u32, kind: MwType) -> Result<u32, VerbsError> {
        self.with(|ep| ep.alloc_mw(pd, kind))
    }

    /// Frees the memory window `rkey` names.
    pub fn dealloc_mw(&self, rkey: u32) -> Result<(), VerbsError> {
        self.with(|ep| ep.dealloc_mw(rkey))
    }

    /// Creates a QP in the engine's protection domain `pd`.
    pub fn create_qp(&self, pd: u32, init: QpInitAttr, token: usize) -> Result<u32, VerbsError> {
        let mut st = lock(&self.state);
        let qpn = st.rtc.endpoint_mut().create_qp_in(pd, init)?;
        st.qps.insert(qpn, (token, false));
        Ok(qpn)
    }

    /// Creates a UC QP in the engine's protection domain `pd`
    /// (`IBV_QPT_UC`): as [`Shell::create_qp`], the Unreliable Connection
    /// service.
    pub fn create_uc_qp(&self, pd: u32, init: QpInitAttr, token: usize) -> Result<u32, VerbsError> {
        let mut st = lock(&self.state);
        let qpn = st.rtc.endpoint_mut().create_uc_qp_in(pd, init)?;
        st.qps.insert(qpn, (token, false));
        Ok(qpn)
    }

    pub fn modify_qp(&self, qpn: u32, attr: &QpAttr, mask: QpAttrMask) -> Result<(), VerbsError> {
        let mut st = lock(&self.state);
        // A move to ERR or RESET drops what the QP had due: its deferred
        // ACKs leave first.
        st.rtc.flush_deferred();
        let r = st.rtc.endpoint_mut().modify_qp(qpn, attr, mask);
        if r.is_ok() && mask.contains(QpAttrMask::STATE) && attr.state == QpState::Reset {
            st.forget_completions(qpn, self);
        }
        drop(st);
        self.wake();
        r
    }

    /// The QP's state and attributes.
    pub fn query_qp(&self, qpn: u32) -> Option<(QpState, QpAttr)> {
        self.with(|ep| ep.qp(qpn).map(|q| (q.state(), *q.attr())))
    }

    pub fn destroy_qp(&self, qpn: u32) -> Result<(), VerbsError> {
        let mut st = lock(&self.state);
        // The ACKs of what this QP received last leave before it goes.
        st.rtc.flush_deferred();
        if let Some((token, _)) = st.qps.remove(&qpn) {
            self.async_events.forget(token);
        }
        let r = st.rtc.endpoint_mut().destroy_qp(qpn);
        if r.is_ok() {
            if let Some(s) = st.ud_staging.remove(&qpn) {
                let _ = st.rtc.endpoint_mut().dereg_mr(s.lkey);
            }
            if let Some(s) = st.ud_recv_staging.remove(&qpn) {
                let _ = st.rtc.endpoint_mut().dereg_mr(s.lkey);
            }
        }
        drop(st);
        self.wake();
        r
    }

    pub fn post_send(&self, qpn: u32, wr: SendWr) -> Result<(), VerbsError> {
        self.with(|ep| ep.post_send(qpn, wr))
    }

    pub fn post_recv(&self, qpn: u32, wr: RecvWr) -> Result<(), VerbsError> {
        self.with(|ep| ep.post_recv(qpn, wr))
    }

    /// Gives QP `qpn`, in RESET, its scatter/gather capacities.
    pub fn set_qp_sge_caps(&self, qpn: u32, caps: SgeCaps) -> Result<(), VerbsError> {
        self.with(|ep| ep.set_qp_sge_caps(qpn, caps))
    }

    /// A send request whose data is gathered from `sges`.
    pub fn post_send_sgl(&self, qpn: u32, wr: SendWr, sges: &[Sge]) -> Result<(), VerbsError> {
        self.with(|ep| ep.post_send_sgl(qpn, wr, sges))
    }

    /// A SEND or WRITE carrying `data` inline (copied now).
    pub fn post_send_inline(&self, qpn: u32, wr: SendWr, data: &[u8]) -> Result<(), VerbsError> {
        self.with(|ep| ep.post_send_inline(qpn, wr, data))
    }

    /// A receive whose buffer is the list `sges`.
    pub fn post_recv_sgl(&self, qpn: u32, wr_id: u64, sges: &[Sge]) -> Result<(), VerbsError> {
        self.with(|ep| ep.post_recv_sgl(qpn, wr_id, sges))
    }

    // ---- Unreliable Datagram (docs/unreliable-datagram.md) ----

    /// Makes an address handle in the engine's protection domain `pd`.
    pub fn create_ah(&self, pd: u32, attr: &AhAttr) -> Result<u32, VerbsError> {
        self.with(|ep| ep.create_ah(pd, attr))
    }

    pub fn destroy_ah(&self, ah: u32) -> Result<(), VerbsError> {
        self.with(|ep| ep.destroy_ah(ah))
    }

    /// Creates a UD QP in the engine's protection domain `pd`.
    pub fn create_ud_qp(&self, pd: u32, init: QpInitAttr, token: usize) -> Result<u32, VerbsError> {
        let mut st = lock(&self.state);
        let qpn = st.rtc.endpoint_mut().create_ud_qp(pd, init)?;
        st.qps.insert(qpn, (token, false));
        Ok(qpn)
    }

    /// Creates QP 1, the GSI (a UD QP whose Q_Key is always 0x80010000).
    pub fn create_gsi_qp(
        &self,
        pd: u32,
        init: QpInitAttr,
        token: usize,
    ) -> Result<u32, VerbsError> {
        let mut st = lock(&self.state);
        let qpn = st
            .rtc
            .endpoint_mut()
            .create_ud_qp_numbered(pd, engine::ud::GSI_QPN, init)?;
        st.qps.insert(qpn, (token, false));
        Ok(qpn)
    }

    /// Modifies a UD QP; as [`Shell::modify_qp`], a move to RESET leaves
    /// none of its completions behind.
    pub fn modify_ud_qp(
        &self,
        qpn: u32,
        attr: &UdQpAttr,
        mask: UdQpAttrMask,
    ) -> Result<(), VerbsError> {
        let mut st = lock(&self.state);
        let r = st.rtc.endpoint_mut().modify_ud_qp(qpn, attr, mask);
        if r.is_ok() && mask.contains(UdQpAttrMask::STATE) && attr.state == QpState::Reset {
            st.forget_completions(qpn, self);
            // RESET empties the receive queue without completions.
            if let Some(r) = st.ud_recv_staging.get_mut(&qpn) {
                r.completed = r.posted;
            }
        }
        drop(st);
        self.wake();
        r
    }

    /// The UD QP's attributes (its state among them) and next send PSN.
    pub fn query_ud_qp(&self, qpn: u32) -> Option<(UdQpAttr, u32)> {
        self.with(|ep| ep.ud_qp(qpn).map(|q| (*q.attr(), q.next_psn())))
    }

    pub fn post_ud_send(&self, qpn: u32, wr: UdSendWr) -> Result<(), VerbsError> {
        self.with(|ep| ep.post_ud_send(qpn, wr))
    }

    pub fn post_ud_recv(&self, qpn: u32, wr: RecvWr) -> Result<(), VerbsError> {
        self.with(|ep| ep.post_ud_recv(qpn, wr))
    }

    /// Gives UD QP `qpn`, of the engine's PD `pd`, a receive staging
    /// area of `slots` receives of up to `max_sge` SGEs
    /// ([`UdRecvStaging`]).
    pub fn stage_ud_recvs(
        &self,
        qpn: u32,
        pd: u32,
        slots: usize,
        max_sge: usize,
    ) -> Result<(), VerbsError> {
        let slot_len = engine::ud::GRH_LEN + self.active_mtu.bytes() as usize;
        let slots = slots.max(1);
        let memory = vec![0u8; slots * slot_len].into_boxed_slice();
        let mut st = lock(&self.state);
        let keys = st
            .rtc
            .endpoint_mut()
            .reg_mr_in(pd, Box::new(memory), 0, Access::LOCAL_WRITE)?;
        st.ud_recv_staging.insert(
            qpn,
            UdRecvStaging {
                lkey: keys.lkey,
                pd,
                slot_len,
                slots,
                max_sge,
                posted: 0,
                completed: 0,
                sges: vec![Sge::default(); slots * max_sge].into_boxed_slice(),
                counts: vec![0; slots].into_boxed_slice(),
                scratch: vec![0u8; slot_len].into_boxed_slice(),
            },
        );
        Ok(())
    }

    /// Posts a receive of UD QP `qpn` (one with a receive staging area)
    /// whose buffer is the list `sges` (at most the area's `max_sge`).
    pub fn post_ud_recv_staged(
        &self,
        qpn: u32,
        wr_id: u64,
        sges: &[Sge],
    ) -> Result<(), VerbsError> {
        let mut st = lock(&self.state);
        let State {
            rtc,
            ud_recv_staging,
            ..
        } = &mut *st;
        let r = ud_recv_staging
            .get_mut(&qpn)
            .ok_or(VerbsError::InvalidArgument(
                "the QP has no receive staging area",
            ))?;
        if sges.len() > r.max_sge {
            return Err(VerbsError::InvalidArgument("more SGEs than the QP's"));
        }
        // A slot still waiting for its completion is not taken again.
        if r.posted.wrapping_sub(r.completed) >= r.slots {
            return Err(VerbsError::QueueFull);
        }
        let total: u64 = sges.iter().map(|g| u64::from(g.length)).sum();
        let slot = r.posted % r.slots;
        let sge = Sge {
            lkey: r.lkey,
            addr: (slot * r.slot_len) as u64,
            length: total.min(r.slot_len as u64) as u32,
        };
        rtc.endpoint_mut()
            .post_ud_recv(qpn, RecvWr { wr_id, sge })?;
        r.sges[slot * r.max_sge..][..sges.len()].copy_from_slice(sges);
        r.counts[slot] = sges.len();
        r.posted = r.posted.wrapping_add(1);
        drop(st);
        self.wake();
        Ok(())
    }

    /// Gives UD QP `qpn`, of the engine's PD `pd`, a staging area of
    /// `slots` sends ([`UdStaging`]), for SGE lists and inline data.
    pub fn stage_ud_sends(&self, qpn: u32, pd: u32, slots: usize) -> Result<(), VerbsError> {
        let slot_len = self.active_mtu.bytes() as usize;
        // Two slots at least: a send longer than the MTU names a range
        // one byte longer than a slot (see `post_ud_send_staged`).
        let slots = slots.max(2);
        let memory = vec![0u8; slots * slot_len].into_boxed_slice();
        let mut st = lock(&self.state);
        let keys = st
            .rtc
            .endpoint_mut()
            .reg_mr_in(pd, Box::new(memory), 0, Access::LOCAL_WRITE)?;
        st.ud_staging.insert(
            qpn,
            UdStaging {
                lkey: keys.lkey,
                slot_len,
                slots,
                next: 0,
                scratch: vec![0u8; slot_len].into_boxed_slice(),
            },
        );
        Ok(())
    }

    /// Posts a UD send whose data is `data`, gathered into the QP's next
    /// staging slot; `wr.local` is set here. An SGE list is read through
    /// the engine's regions as the QP reads them (its PD's regions only).
    /// An entry that cannot be read (a key of no region or of another
    /// PD's, a range past its region) does not refuse the post: rxe reads
    /// the list only when it builds the datagram, and fails the send then
    /// (rxe_req.c `finish_packet`: `copy_data`'s `-EINVAL`,
    /// `IBV_WC_LOC_QP_OP_ERR`); the send is posted naming bytes past the
    /// end of the staging area, which the engine fails the same way. A
    /// message longer than the MTU is not copied: the engine completes it
    /// without a packet (IBA C10-93.1.1), as it does any such send.
    pub fn post_ud_send_staged(
        &self,
        qpn: u32,
        mut wr: UdSendWr,
        data: UdData<'_>,
    ) -> Result<(), VerbsError> {
        let mut st = lock(&self.state);
        let State {
            rtc, ud_staging, ..
        } = &mut *st;
        let ep = rtc.endpoint_mut();
        let s = ud_staging
            .get_mut(&qpn)
            .ok_or(VerbsError::InvalidArgument("the QP has no UD staging area"))?;
        let q = ep.ud_qp(qpn).ok_or(VerbsError::UnknownQp)?;
        // The slot must not hold a send still queued (see `UdStaging`).
        if q.send_queue_len() >= q.init_attr().max_send_wr as usize {
            return Err(VerbsError::QueueFull);
        }
        let pd = q.pd;
        let total: u64 = match data {
            UdData::Sges(l) => l.iter().map(|g| u64::from(g.length)).sum(),
            UdData::Inline(d) => d.len() as u64,
        };
        if total > u64::from(engine::rc::MAX_MESSAGE_LEN) {
            return Err(VerbsError::InvalidArgument("message longer than 1 GiB"));
        }
        let base = ((s.next % s.slots) * s.slot_len) as u64;
        wr.local = if total == 0 {
            Sge::default()
        } else if total > s.slot_len as u64 {
            Sge {
                lkey: s.lkey,
                addr: 0,
                length: s.slot_len as u32 + 1,
            }
        } else {
            let n = total as usize;
            let readable = match data {
                UdData::Sges(l) => {
                    let mut at = 0;
                    l.iter().filter(|g| g.length > 0).all(|g| {
                        let len = g.length as usize;
                        let ok = ep
                            .mr_read_in(pd, g.lkey, g.addr, &mut s.scratch[at..at + len])
                            .is_ok();
                        at += len;
                        ok
                    })
                }
                UdData::Inline(d) => {
                    s.scratch[..n].copy_from_slice(d);
                    true
                }
            };
            if readable {
                ep.mr_write(s.lkey, base, &s.scratch[..n])?;
                Sge {
                    lkey: s.lkey,
                    addr: base,
                    length: n as u32,
                }
            } else {
                Sge {
                    lkey: s.lkey,
                    addr: (s.slots * s.slot_len) as u64,
                    length: n as u32,
                }
            }
        };
        ep.post_ud_send(qpn, wr)?;
        s.next = s.next.wrapping_add(1);
        drop(st);
        self.wake();
        Ok(())
    }

    /// Creates a shared receive queue in the engine's protection domain
    /// `pd`; its limit events carry `token`. Returns its id and what it
    /// holds.
    pub fn create_srq(
        &self,
        pd: u32,
        attr: SrqAttr,
        token: usize,
    ) -> Result<(u32, SrqAttr), VerbsError> {
        let mut st = lock(&self.state);
        let ep = st.rtc.endpoint_mut();
        let id = ep.create_srq(pd, attr)?;
        let got = ep.query_srq(id)?;
        st.srqs.insert(id, token);
        Ok((id, got))
    }

    pub fn modify_srq(
        &self,
        srq: u32,
        attr: &SrqAttr,
        mask: SrqAttrMask,
    ) -> Result<(), VerbsError> {
        self.with(|ep| ep.modify_srq(srq, attr, mask))
    }

    pub fn query_srq(&self, srq: u32) -> Result<SrqAttr, VerbsError> {
        self.with(|ep| ep.query_srq(srq))
    }

    /// Destroys an SRQ no QP uses (`VerbsError::Busy` otherwise). A limit
    /// event of it not yet taken by the program is dropped.
    pub fn destroy_srq(&self, srq: u32) -> Result<(), VerbsError> {
        let mut st = lock(&self.state);
        st.rtc.endpoint_mut().destroy_srq(srq)?;
        if let Some(token) = st.srqs.remove(&srq) {
            self.async_events.forget(token);
        }
        Ok(())
    }

    pub fn post_srq_recv(&self, srq: u32, wr: RecvWr) -> Result<(), VerbsError> {
        self.with(|ep| ep.post_srq_recv(srq, wr))
    }

    /// Posts an SRQ receive whose buffer is the SGE list `sges`.
    pub fn post_srq_recv_sgl(&self, srq: u32, wr_id: u64, sges: &[Sge]) -> Result<(), VerbsError> {
        self.with(|ep| ep.post_srq_recv_sgl(srq, wr_id, sges))
    }

    /// After an `ibv_post_send`: a thread other than the one that polls
    /// transmits what it posted at once, as a NIC's doorbell would start
    /// it. The polling thread needs none: its next `ibv_poll_cq` sends its
    /// posts first, in one TX kick with whatever else is due (a program
    /// that posts one message per call between its polls, as perftest's,
    /// would otherwise pay a kick per message). A program whose posting
    /// threads do not poll (a transfer engine: several threads post,
    /// another polls) would otherwise leave its requests until the polling
    /// thread's next call, which may wait for a frame (see
    /// [`Shell::poll_cq`]) or for a core.
    pub fn doorbell(&self) {
        if self.poller.load(Ordering::Relaxed) == thread_id() {
            return;
        }
        self.counters.doorbells.fetch_add(1, Ordering::Relaxed);
        lock(&self.state).rtc.transmit();
    }

    /// Up to `out.len()` completions of `cq`: those already taken from the
    /// engine, else what one engine iteration produces.
    ///
    /// A program that keeps polling an empty CQ while its QPs wait for the
    /// ACKs of a window of requests ([`WINDOW_IN_FLIGHT`] or more in
    /// flight on a QP: a bandwidth test) yields its core once per call
    /// after `ROCE_XDP_POLL_YIELD` such calls: on a host whose cores the
    /// peer's engine or other work shares, a busy-polling program would
    /// otherwise hold the core the ACKs it waits for need. It yields by
    /// sleeping in poll(2) until a frame arrives, the progress thread
    /// moves completions into a CQ, or the engine's next timer (at most
    /// [`POLL_WAIT_MAX`]), not with sched_yield: a thread that yields
    /// beside threads that spin (a transfer engine's posting threads
    /// waiting for their batch) gets its core back only at the
    /// scheduler's next tick, 4 ms at HZ=250, while a sleeping one that a
    /// frame wakes runs at once. A ping-pong (a request or two in flight)
    /// never yields: its wait is the peer's answer, and yielding there
    /// made both sides of a latency test yield in turn
    /// (docs/verbs-drop-in.md).
    ///
    /// `put(i, wc)` receives the `i`-th completion taken (at most `max`):
    /// the caller writes it where it wants (the program's `ibv_wc` array),
    /// with no buffer between.
    pub fn poll_cq(
        &self,
        cq: u32,
        max: usize,
        mut put: impl FnMut(usize, &WorkCompletion),
    ) -> usize {
        self.counters.app_polls.fetch_add(1, Ordering::Relaxed);
        let me = thread_id();
        if self.poller.load(Ordering::Relaxed) != me {
            self.poller.store(me, Ordering::Relaxed);
        }
        let mut st = lock(&self.state);
        let buffered = matches!(st.cqs.get(cq as usize), Some(Some(c)) if !c.buf.is_empty());
        // One engine iteration unless completions wait already; with
        // completions for this CQ from the packets it received, the ACKs
        // they made due wait for the next call, to leave with the
        // program's answer in one TX kick (`RunToCompletion::poll_with`).
        let busy = !buffered && {
            let State {
                rtc,
                cqs,
                qps,
                srqs,
                scratch,
                ud_recv_staging,
                ..
            } = &mut *st;
            rtc.poll_with(|ep| {
                drain_cq(
                    ep,
                    cqs,
                    qps,
                    srqs,
                    scratch,
                    ud_recv_staging,
                    cq as usize,
                    self,
                )
            })
            .1
        };
        // What this call received may have completed work of another CQ,
        // which another thread may wait for.
        if busy {
            self.wake_poller();
        }
        // Attached, a program that polls without pause may be the first to
        // see the service gone (its progress thread naps meanwhile).
        if st.rtc.attachment().is_some_and(|p| p.is_dead()) {
            st.attachment_lost(self);
        }
        let Some(Some(c)) = st.cqs.get_mut(cq as usize) else {
            return 0;
        };
        let mut n = 0;
        while n < max {
            match c.buf.pop_front() {
                Some(wc) => {
                    put(n, &wc);
                    n += 1;
                }
                None => break,
            }
        }
        if n > 0 || busy {
            self.empty_polls.store(0, Ordering::Relaxed);
            return n;
        }
        let empty = self.empty_polls.fetch_add(1, Ordering::Relaxed);
        // Attached to a service, whatever is in flight crosses the
        // service's thread, which needs a core: a program spinning here
        // would hold the one it needs (two busy-polling ends and the
        // service on two cores made every round trip wait for a
        // scheduler tick, 4 ms). So it sleeps until the service rings.
        let attached = st.rtc.attachment().is_some();
        if self.poll_yield > 0 && empty >= self.poll_yield && (attached || st.window_in_flight()) {
            // Nothing due now (frames to send, an expired timer): sleep
            // until a frame, a completion or the next timer.
            if let Some(d) = st.rtc.idle_for(POLL_WAIT_MAX) {
                // Set under the lock: a move of completions after it is
                // released sees it and wakes this call.
                self.pollers_waiting.fetch_add(1, Ordering::SeqCst);
                drop(st);
                self.counters.app_yields.fetch_add(1, Ordering::Relaxed);
                // SAFETY: the socket is owned by `state`, which lives as
                // long as `self`.
                let sock = unsafe { BorrowedFd::borrow_raw(self.sock_fd) };
                let _ = self.poll_waker.wait_with(sock, d);
                self.pollers_waiting.fetch_sub(1, Ordering::SeqCst);
            }
        }
        0
    }

    /// Arms `cq`: its channel gets one event when it holds a completion.
    pub fn req_notify(&self, cq: u32) {
        let mut st = lock(&self.state);
        if let Some(Some(c)) = st.cqs.get_mut(cq as usize) {
            c.armed = true;
        }
        st.drain(cq as usize, self);
        drop(st);
        // The program is about to wait for the event: the progress thread
        // takes over now, not at the end of its nap.
        self.counters.app_arms.fetch_add(1, Ordering::SeqCst);
        if self.napping.load(Ordering::SeqCst) {
            self.waker.wake();
        }
    }
}

impl State {
    /// Whether a QP of the program waits for the ACKs of
    /// [`WINDOW_IN_FLIGHT`] or more requests.
    fn window_in_flight(&mut self) -> bool {
        let State { rtc, qps, .. } = self;
        let ep = rtc.endpoint_mut();
        qps.keys().any(|&q| {
            ep.qp(q)
                .is_some_and(|qp| qp.outstanding_send_wrs() >= WINDOW_IN_FLIGHT)
        })
    }

    /// A QP moved to RESET leaves no completion behind in any CQ (the
    /// flushes of its error state included), as NICs clean their CQs of a
    /// reset QP's entries: a program that resets a failed QP and uses it
    /// again polls only what the QP does from then on.
    fn forget_completions(&mut self, qpn: u32, shell: &Shell) {
        self.drain_all(shell);
        for c in self.cqs.iter_mut().flatten() {
            c.buf.retain(|wc| wc.qpn != qpn);
        }
    }

    /// Moves every CQ's completions ([`State::drain`]); returns how many.
    /// For a program attached to the interface's service: reports its QPs
    /// and regions to the service (`roce-xdp stats` lists them), and when
    /// the service is gone (its socket ended: it exited or was killed),
    /// moves every QP to ERROR, so that what was posted completes with
    /// flush errors and new posts fail, and reports
    /// `IBV_EVENT_DEVICE_FATAL` to every context, as a device that fails
    /// does. Returns whether the service is gone.
    fn attachment_lost(&mut self, shell: &Shell) -> bool {
        use engine::attach::reported;
        let ep = self.rtc.endpoint();
        let (qps, regions) = (ep.qp_count() as u64, ep.region_count() as u64);
        let Some(port) = self.rtc.attachment_mut() else {
            return false;
        };
        port.report(reported::QPS, qps);
        port.report(reported::REGIONS, regions);
        if !port.is_dead() {
            return false;
        }
        if std::mem::replace(&mut self.service_gone, true) {
            return true;
        }
        eprintln!(
            "roce-xdp: the roce-xdp service of {} is gone: every QP is moved to the error state",
            shell.iface
        );
        let qpns: Vec<u32> = self.qps.keys().copied().collect();
        let ep = self.rtc.endpoint_mut();
        for qpn in qpns {
            let rc = QpAttr {
                state: QpState::Error,
                ..QpAttr::default()
            };
            if ep.modify_qp(qpn, &rc, QpAttrMask::STATE).is_err() {
                let ud = UdQpAttr {
                    state: QpState::Error,
                    ..UdQpAttr::default()
                };
                let _ = ep.modify_ud_qp(qpn, &ud, UdQpAttrMask::STATE);
            }
        }
        self.drain_all(shell);
        shell.wake_poller();
        shell
            .async_events
            .push_device(crate::abi::IBV_EVENT_DEVICE_FATAL);
        true
    }

    fn drain_all(&mut self, shell: &Shell) -> usize {
        (0..self.cqs.len()).map(|i| self.drain(i, shell)).sum()
    }

    /// Moves the engine's completions of CQ `i` into its buffer, reports
    /// QP errors as asynchronous events, fires an armed channel; returns
    /// how many it moved.
    fn drain(&mut self, i: usize, shell: &Shell) -> usize {
        let State {
            rtc,
            cqs,
            qps,
            srqs,
            scratch,
            ud_recv_staging,
            ..
        } = self;
        drain_cq(
            rtc.endpoint_mut(),
            cqs,
            qps,
            srqs,
            scratch,
            ud_recv_staging,
            i,
            shell,
        )
    }
}

/// Moves the engine's completions of CQ `i` into its buffer, reports QP
/// errors and the engine's asynchronous events (SRQ limits) as
/// asynchronous events, fires an armed channel; returns how many
/// completions it moved.
// The parts of `State` it needs, borrowed apart (a `State` borrow would
// hold the engine the caller's `poll_with` lends).
#[allow(clippy::too_many_arguments)]
fn drain_cq(
    ep: &mut Endpoint,
    cqs: &mut [Option<CqState>],
    qps: &mut HashMap<u32, (usize, bool)>,
    srqs: &HashMap<u32, usize>,
    batch: &mut [WorkCompletion; DRAIN_BATCH],
    ud_recv_staging: &mut HashMap<u32, UdRecvStaging>,
    i: usize,
    shell: &Shell,
) -> usize {
    while let Some(e) = ep.poll_event() {
        let event = match e {
            AsyncEvent::SrqLimitReached { srq } => srqs
                .get(&srq)
                .map(|&t| (crate::abi::IBV_EVENT_SRQ_LIMIT_REACHED, t)),
            AsyncEvent::QpLastWqeReached { qpn } => qps
                .get(&qpn)
                .map(|&(t, _)| (crate::abi::IBV_EVENT_QP_LAST_WQE_REACHED, t)),
        };
        if let Some((ty, token)) = event {
            shell.async_events.push(ty, token);
        }
    }
    let Some(Some(c)) = cqs.get_mut(i) else {
        return 0;
    };
    let mut moved = 0;
    loop {
        let room = c.capacity.saturating_sub(c.buf.len()).min(DRAIN_BATCH);
        if room == 0 {
            break;
        }
        let n = ep.poll_cq(i as u32, &mut batch[..room]);
        moved += n;
        if !ud_recv_staging.is_empty() {
            for wc in batch[..n].iter_mut() {
                if wc.opcode == WcOpcode::Recv {
                    if let Some(r) = ud_recv_staging.get_mut(&wc.qpn) {
                        r.complete(ep, wc);
                    }
                }
            }
        }
        for wc in &batch[..n] {
            if wc.status != WcStatus::Success && wc.status != WcStatus::Flushed {
                if let Some((token, reported)) = qps.get_mut(&wc.qpn) {
                    if !*reported {
                        *reported = true;
                        shell
                            .async_events
                            .push(crate::abi::IBV_EVENT_QP_FATAL, *token);
                    }
                }
            }
            c.buf.push_back(*wc);
        }
        if n < room {
            break;
        }
    }
    if c.armed && !c.buf.is_empty() {
        if let Some(ch) = &c.channel {
            c.armed = false;
            ch.push(c.token);
        }
    }
    moved
}
