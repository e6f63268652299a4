//! [`Device`]: the XDP program on one interface and one engine thread per
//! queue; memory registration, QP creation, completions, statistics.

use std::net::IpAddr;
use std::sync::mpsc::sync_channel;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::attach::Share;
use crate::driver::{
    CaptureSink, CqWait, Directory, DrivenQueue, Driver, DriverError, OwnAddress, PollMode,
    PostError, QueueConfig, QueueStats, Shared, Work,
};
use crate::endpoint::{Endpoint, EndpointConfig};
use crate::io::{RegisteredRegion, SharedRegion, UmemConfig, XskConfig, ZeroCopy};
use crate::nic::{in_netns, AttachMode, AttachedMode, Impairment, SteerCounters, SteerProgram};
use crate::rc::{Access, WorkCompletion};

use super::{DeviceError, MemoryRegion, QpCaps, QueuePair};

/// How to open a device.
#[derive(Clone)]
pub struct DeviceConfig {
    pub ifname: String,
    /// Network namespace of the interface (`ip netns` name); None = ours.
    pub netns: Option<String>,
    /// Number of queues (one engine thread and AF_XDP socket each).
    pub queues: u32,
    /// Cores to pin the engine threads to (queue i -> cores[i % len]);
    /// empty = not pinned.
    pub cores: Vec<usize>,
    pub attach: AttachMode,
    /// Remove an XDP program attached by netlink first.
    pub force: bool,
    pub zero_copy: ZeroCopy,
    pub poll: PollMode,
    /// How [`Device::poll_cq_wait`] waits: park (default) or spin.
    pub cq_wait: CqWait,
    /// Local IP (GID); None = the interface's first global address of the
    /// family `ipv6` selects.
    pub local_ip: Option<IpAddr>,
    pub ipv6: bool,
    pub umem: UmemConfig,
    /// RX/TX and fill/completion ring sizes.
    pub ring_size: u32,
    /// Multi-buffer AF_XDP frames (needed for PMTU 4096).
    pub multi_buffer: bool,
    /// Depth of the work and completion queues between app and engine.
    pub queue_depth: usize,
    pub capture: Option<CaptureSink>,
    /// Whether to attach to the interface's shared engine
    /// (`roce-xdp service`; docs/shared-engine.md) instead of owning its
    /// queues. Attached, the device has one queue (the service spreads
    /// the interface's), and `queues`, `cores`, `attach`, `force`,
    /// `zero_copy`, `umem` and the ring sizes are the service's business.
    pub share: Share,
}

impl DeviceConfig {
    /// Defaults: one queue, unpinned, native XDP with generic fallback,
    /// zero-copy auto, adaptive polling, IPv4, 4096 x 4 KiB frames.
    pub fn new(ifname: &str) -> DeviceConfig {
        DeviceConfig {
            ifname: ifname.to_string(),
            netns: None,
            queues: 1,
            cores: Vec::new(),
            attach: AttachMode::Auto,
            force: false,
            zero_copy: ZeroCopy::Auto,
            poll: PollMode::default(),
            cq_wait: CqWait::default(),
            local_ip: None,
            ipv6: false,
            umem: UmemConfig::default(),
            ring_size: 2048,
            multi_buffer: true,
            queue_depth: 4096,
            capture: None,
            share: Share::Never,
        }
    }
}

/// An open device: the XDP program on one interface and one engine thread
/// per queue.
pub struct Device {
    // Drivers stop (and unregister their sockets) before the program detaches.
    drivers: Vec<Driver>,
    /// Device-wide QP numbers, which queue holds each QP, hand-offs.
    pub(super) directory: Arc<Directory>,
    /// None when attached to the interface's service (which owns it).
    program: Option<Arc<Mutex<SteerProgram>>>,
    /// Attached: the slot the service gave and the shared rings (what
    /// reports to the service from outside the engine thread).
    attachment: Option<(u8, Arc<crate::io::frame_ring::RingPair>)>,
    ifname: String,
    netns: Option<String>,
    mac: [u8; 6],
    ip: IpAddr,
    cq_wait: CqWait,
    /// Address handle numbers (`ud.rs`): one number names the handle in
    /// every queue's endpoint.
    pub(super) ah_numbers: Mutex<super::ud::AhNumbers>,
    /// The CM agent's counters as its [`super::cm::CmService`] last
    /// published them (after each of its passes that moved a MAD), for
    /// `roce-xdp stats`; None while no CM service runs on the device.
    pub(super) cm_counters: Mutex<Option<proto::cm::CmCounters>>,
}

impl std::fmt::Debug for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Device")
            .field("ifname", &self.ifname)
            .field("ip", &self.ip)
            .finish_non_exhaustive()
    }
}

impl Device {
    /// Attaches the XDP program and starts the engine threads.
    pub fn open(cfg: DeviceConfig) -> Result<Device, DeviceError> {
        let ns = cfg.netns.as_deref();
        let attached = in_netns(ns, || crate::attach::attach_as(cfg.share, &cfg.ifname))??;
        Device::open_with(cfg, attached)
    }

    /// [`Device::open`] with the attachment already made (or none: the
    /// device owns the interface's queues; `cfg.share` is not looked at).
    pub fn open_with(
        cfg: DeviceConfig,
        mut attached: Option<crate::attach::AttachedPort>,
    ) -> Result<Device, DeviceError> {
        let ns = cfg.netns.as_deref();
        let (mac, ip) = match &attached {
            Some(port) => (port.welcome().mac, port.welcome().ip),
            None => (
                crate::nic::interface_mac(ns, &cfg.ifname)?,
                match cfg.local_ip {
                    Some(ip) => ip,
                    None => crate::nic::interface_addr(ns, &cfg.ifname, cfg.ipv6)?,
                },
            ),
        };
        let program = match attached {
            Some(_) => None,
            None => Some(Arc::new(Mutex::new(in_netns(ns, || {
                SteerProgram::attach(&cfg.ifname, cfg.attach, cfg.force)
            })??))),
        };
        let queues = if attached.is_some() {
            1
        } else {
            cfg.queues.max(1)
        };
        let qpns = attached
            .as_ref()
            .map_or(crate::endpoint::QpnRange::ALL, |p| p.qpns());
        let attachment = attached.as_ref().map(|p| (p.slot(), p.rings()));
        let endpoint = EndpointConfig {
            local_mac: mac,
            local_ip: ip,
            seed: crate::driver::os_seed(),
            // Payloads copied into their frames with the ICRC computed in
            // the same pass where the CPU allows.
            copy_crc: crate::io::copy_crc::best(),
            qpns,
            ..EndpointConfig::default()
        };
        let shared = (0..queues)
            .map(|_| Shared::new(cfg.queue_depth).map(Arc::new))
            .collect::<Result<Vec<_>, _>>()
            .map_err(DriverError::Waker)?;
        let directory = Arc::new(Directory::in_range(shared, endpoint.max_qps, qpns));
        let mut drivers = Vec::new();
        for q in 0..queues {
            let mut xsk = XskConfig::new(&cfg.ifname, q);
            xsk.umem = cfg.umem;
            xsk.ring_size = cfg.ring_size;
            xsk.fill_size = cfg.ring_size;
            xsk.zero_copy = cfg.zero_copy;
            xsk.multi_buffer = cfg.multi_buffer;
            let qc = QueueConfig {
                xsk,
                netns: cfg.netns.clone(),
                core: (!cfg.cores.is_empty()).then(|| cfg.cores[q as usize % cfg.cores.len()]),
                poll: cfg.poll,
                endpoint,
                queue_depth: cfg.queue_depth,
                capture: cfg.capture.clone(),
            };
            drivers.push(Driver::start(
                qc,
                program.clone(),
                directory.clone(),
                attached.take(),
            )?);
        }
        Ok(Device {
            drivers,
            directory,
            program,
            attachment,
            ifname: cfg.ifname,
            netns: cfg.netns,
            mac,
            ip,
            cq_wait: cfg.cq_wait,
            ah_numbers: Mutex::default(),
            cm_counters: Mutex::default(),
        })
    }

    /// The counters of the CM service on this device (named as `roce-xdp
    /// stats` shows them), if one runs.
    pub fn cm_counters(&self) -> Option<Vec<(String, u64)>> {
        let c = (*self.cm_counters.lock().unwrap_or_else(|e| e.into_inner()))?;
        Some(
            c.named()
                .iter()
                .map(|(n, v)| (n.to_string_lossy().into_owned(), *v))
                .collect(),
        )
    }

    /// The interface's MAC.
    pub fn mac(&self) -> [u8; 6] {
        self.mac
    }

    /// The local IP (GID).
    pub fn ip(&self) -> IpAddr {
        self.ip
    }

    /// Number of queues.
    pub fn queues(&self) -> u32 {
        self.drivers.len() as u32
    }

    /// The XDP attach mode in use (None: attached to the interface's
    /// service, which owns the program).
    pub fn attached_mode(&self) -> Option<AttachedMode> {
        self.program
            .as_ref()
            .map(|p| p.lock().unwrap_or_else(|e| e.into_inner()).mode())
    }

    /// The XDP attach mode as the tools print it ("native", "generic",
    /// or "attached to the service").
    pub fn xdp_mode(&self) -> String {
        self.attached_mode()
            .map_or_else(|| "attached to the service".into(), |m| m.to_string())
    }

    /// Attached to the interface's service: the slot it gave this device
    /// (its QP numbers' and CM communication IDs' top byte).
    pub fn attachment_slot(&self) -> Option<u8> {
        self.attachment.as_ref().map(|(s, _)| *s)
    }

    /// Attached: publishes the service IDs this device's CM listens on
    /// (the service hands it the REQs for them); nothing otherwise.
    pub fn publish_cm_listeners(&self, ids: &[u64]) {
        if let Some((_, rings)) = &self.attachment {
            rings.set_listeners(ids);
        }
    }

    /// Whether this device is attached to the interface's service.
    pub fn is_attached(&self) -> bool {
        self.program.is_none()
    }

    /// Whether queue `q`'s socket is bound in zero-copy mode.
    pub fn is_zero_copy(&self, q: u32) -> bool {
        self.drivers
            .get(q as usize)
            .is_some_and(Driver::is_zero_copy)
    }

    pub(super) fn shared(&self, q: u32) -> Result<&Arc<Shared>, DeviceError> {
        self.drivers
            .get(q as usize)
            .map(Driver::shared)
            .ok_or(DeviceError::NoSuchQueue(q, self.drivers.len() as u32))
    }

    /// Registers `len` bytes of fresh shared memory (`ibv_reg_mr`). Its I/O
    /// virtual address is its real address. The region and its keys are
    /// the device's: every queue's endpoint accepts them, so a QP reaches
    /// it whichever queue it lives on; `q` (an existing queue) is recorded
    /// in [`MemoryRegion::queue`] as the queue of the application that
    /// registered it.
    pub fn register_memory(
        &self,
        q: u32,
        len: usize,
        access: Access,
    ) -> Result<MemoryRegion, DeviceError> {
        self.shared(q)?;
        let region = Arc::new(SharedRegion::new(len).map_err(DeviceError::Memory)?);
        let iova = region.addr();
        // Queue 0's endpoint chooses the keys; the others register the same
        // memory under them.
        let handle = RegisteredRegion(region.clone());
        let keys = call(self.shared(0)?, 0, move |ep, _| {
            ep.reg_mr(Box::new(handle), iova, access)
        })??;
        for other in 1..self.queues() {
            let handle = RegisteredRegion(region.clone());
            let r = call(self.shared(other)?, other, move |ep, _| {
                ep.reg_mr_at(Box::new(handle), iova, access, keys)
            })
            .and_then(|r| r.map_err(DeviceError::from));
            if let Err(e) = r {
                // Undo the queues that have it: 0..other.
                self.deregister_keys(keys.lkey, 0..other);
                return Err(e);
            }
        }
        Ok(MemoryRegion::new(region, keys.lkey, keys.rkey, q))
    }

    /// Deregisters `mr` (`ibv_dereg_mr`) on every queue: from then on its
    /// keys are unknown to the engine, so a peer's WRITE, READ or atomic
    /// naming its R_Key gets a remote access NAK and a local work request
    /// naming its L_Key completes with a local protection error. Deregister
    /// only when no work request on it is outstanding. The memory itself
    /// stays mapped while any clone of `mr` lives (reads and writes through
    /// it keep working, they just no longer reach the network).
    pub fn deregister_memory(&self, mr: &MemoryRegion) -> Result<(), DeviceError> {
        let lkey = mr.lkey;
        call(self.shared(0)?, 0, move |ep, _| ep.dereg_mr(lkey).map(drop))??;
        self.deregister_keys(lkey, 1..self.queues());
        Ok(())
    }

    /// Deregisters `lkey` on `queues` (best effort).
    fn deregister_keys(&self, lkey: u32, queues: std::ops::Range<u32>) {
        for q in queues {
            if let Ok(sh) = self.shared(q) {
                let _ = call(sh, q, move |ep, _| ep.dereg_mr(lkey).map(drop));
            }
        }
    }

    /// Creates an RC QP for the application of queue `q`: its completions
    /// arrive on queue `q` ([`Device::poll_cq`]) and its posts go through
    /// queue `q`, wherever the QP lives. Its number is unique across the
    /// device. It starts on queue `q` and moves to the queue its first
    /// packet arrives on (`docs/multi-queue.md`).
    pub fn create_qp(&self, q: u32, caps: QpCaps) -> Result<QueuePair, DeviceError> {
        let shared = self.shared(q)?.clone();
        let qpn = self.directory.allocate_qpn(q)?;
        let created = call(&shared, q, move |ep, cq| {
            ep.create_qp_numbered(qpn, caps.init_attr(cq))
        })
        .and_then(|r| r.map_err(DeviceError::from));
        if let Err(e) = created {
            self.directory.free_qpn(qpn);
            return Err(e);
        }
        Ok(QueuePair::new(qpn, q, shared, self.directory.clone()))
    }

    /// The queue whose engine holds QP `qpn` now (where its packets are
    /// handled), if the QP exists.
    pub fn qp_queue(&self, qpn: u32) -> Option<u32> {
        self.directory.owner(qpn)
    }

    /// QPs that exist on this device now, across its queues (numbers
    /// allocated and not yet freed).
    pub fn live_qps(&self) -> usize {
        self.directory.live_qps()
    }

    /// The MAC of `ip` from the kernel's neighbour table (resolving it with
    /// ARP/ND through the kernel if needed); for the device's own IP, its
    /// own MAC, without asking: a QP connected to another QP of the device
    /// gets its frames back without the wire (`loopback_frames` in
    /// [`Device::stats`]).
    pub fn resolve_mac(&self, ip: IpAddr) -> Result<[u8; 6], DeviceError> {
        if let Some(mac) = OwnAddress::new(self.mac, self.ip).mac_of(ip) {
            return Ok(mac);
        }
        Ok(crate::nic::resolve_mac(
            self.netns.as_deref(),
            &self.ifname,
            ip,
            Duration::from_secs(3),
        )?)
    }

    /// Takes up to `out.len()` completions of queue `q`. From the thread
    /// that drives the queue ([`Device::run_to_completion`]) it first runs
    /// one engine iteration.
    pub fn poll_cq(&self, q: u32, out: &mut [WorkCompletion]) -> usize {
        let Ok(sh) = self.shared(q) else { return 0 };
        if sh.driven_here() {
            self.drivers[q as usize].iterate_driven();
        }
        let mut n = 0;
        while n < out.len() {
            match sh.pop_completion() {
                Some(wc) => {
                    out[n] = wc;
                    n += 1;
                }
                None => break,
            }
        }
        n
    }

    /// Run-to-completion on queue `q`: the calling thread takes the
    /// queue's engine from its engine thread and drives it itself until the
    /// returned [`DrivenQueue`] is dropped (each [`DrivenQueue::poll_cq`]
    /// runs one engine iteration, then takes completions; no thread hop on
    /// a round trip). Posts go through the queue's QPs as usual; create
    /// and connect QPs before, not while driving. Fails if another thread
    /// drives the queue already.
    pub fn run_to_completion(&self, q: u32) -> Result<DrivenQueue, DeviceError> {
        let d = self
            .drivers
            .get(q as usize)
            .ok_or(DeviceError::NoSuchQueue(q, self.drivers.len() as u32))?;
        d.drive().ok_or(DeviceError::Driven(q))
    }

    /// Whether an application thread drives queue `q` itself
    /// ([`Device::run_to_completion`]).
    pub fn is_driven(&self, q: u32) -> bool {
        self.shared(q).is_ok_and(|sh| sh.is_driven())
    }

    /// Like [`Device::poll_cq`], but when the queue is empty it waits as
    /// [`DeviceConfig::cq_wait`] says until at least one completion arrives
    /// or `timeout` passes; returns 0 on timeout. [`CqWait::Park`] (the
    /// default) blocks (the engine thread wakes it after pushing
    /// completions), leaving the core to the engine threads, which matters
    /// when cores are few; [`CqWait::Spin`] polls, yielding between polls.
    pub fn poll_cq_wait(&self, q: u32, out: &mut [WorkCompletion], timeout: Duration) -> usize {
        let Ok(sh) = self.shared(q) else { return 0 };
        if self.cq_wait == CqWait::Spin {
            return self.poll_cq_spin(q, out, timeout);
        }
        let start = std::time::Instant::now();
        let deadline = start + timeout;
        loop {
            let n = self.poll_cq(q, out);
            if n > 0 || out.is_empty() {
                return n;
            }
            let now = std::time::Instant::now();
            let left = deadline.saturating_duration_since(now);
            if left.is_zero() {
                return 0;
            }
            // Spin (yielding the core) briefly first: a completion that is
            // microseconds away is cheaper to catch than a park/unpark.
            if now.duration_since(start) < WAIT_SPIN {
                std::thread::yield_now();
                continue;
            }
            // Bounded slices: another thread waiting on the same queue may
            // have replaced us as the one the engine wakes.
            sh.wait_completion(left.min(Duration::from_millis(1)));
        }
    }

    /// [`Device::poll_cq_wait`] with [`CqWait::Spin`].
    fn poll_cq_spin(&self, q: u32, out: &mut [WorkCompletion], timeout: Duration) -> usize {
        let start = std::time::Instant::now();
        loop {
            let n = self.poll_cq(q, out);
            if n > 0 || out.is_empty() || start.elapsed() >= timeout {
                return n;
            }
            std::thread::yield_now();
        }
    }

    /// Blocks until queue `q` has a completion to poll (the engine thread
    /// wakes this thread when it pushes one) or `timeout` passes; takes
    /// nothing. For an application that also has other work to do between
    /// polls (posting), and wants to leave its core to the engine threads
    /// while it has none.
    pub fn wait_cq(&self, q: u32, timeout: Duration) {
        if let Ok(sh) = self.shared(q) {
            sh.wait_completion(timeout);
        }
    }

    /// Takes one post the engine refused on queue `q` (bad key, wrong
    /// state, queue full...).
    pub fn poll_post_error(&self, q: u32) -> Option<PostError> {
        self.shared(q).ok()?.pop_post_error()
    }

    /// The XDP program's counters.
    pub fn steer_counters(&self) -> Result<SteerCounters, DeviceError> {
        let p = self.program.as_ref().ok_or(DeviceError::Attached)?;
        Ok(p.lock().unwrap_or_else(|e| e.into_inner()).counters()?)
    }

    /// Sets the XDP program's test impairments (RX side of this interface).
    pub fn set_impairment(&self, imp: Impairment) -> Result<(), DeviceError> {
        let p = self.program.as_ref().ok_or(DeviceError::Attached)?;
        Ok(p.lock()
            .unwrap_or_else(|e| e.into_inner())
            .set_impairment(imp)?)
    }

    /// Statistics of queue `q` (refreshed every few milliseconds).
    pub fn stats(&self, q: u32) -> Result<QueueStats, DeviceError> {
        Ok(self.shared(q)?.stats())
    }

    /// Statistics summed over queues.
    pub fn total_stats(&self) -> QueueStats {
        let mut t = QueueStats::default();
        for d in &self.drivers {
            add_stats(&mut t, &d.shared().stats());
        }
        t
    }

    /// Stops the engine threads, detaches the program, and returns the
    /// final statistics summed over queues.
    pub fn close(mut self) -> QueueStats {
        let mut t = QueueStats::default();
        for d in self.drivers.drain(..) {
            add_stats(&mut t, &d.stop());
        }
        t
    }
}

fn add_stats(t: &mut QueueStats, s: &QueueStats) {
    t.transport.accumulate(&s.transport);
    t.socket.accumulate(&s.socket);
    t.kernel.accumulate(&s.kernel);
    t.loops += s.loops;
    t.sleeps += s.sleeps;
    t.thread_cpu += s.thread_cpu;
    t.completion_backlog_events += s.completion_backlog_events;
    t.app_wakes += s.app_wakes;
    t.woken_by_posts += s.woken_by_posts;
    t.rx_handoff += s.rx_handoff;
    t.rx_handoff_dropped += s.rx_handoff_dropped;
    t.handoff_received += s.handoff_received;
    t.qp_migrations += s.qp_migrations;
    t.work_forwarded += s.work_forwarded;
    t.loopback_frames += s.loopback_frames;
    t.loopback_bytes += s.loopback_bytes;
}

/// How long [`Device::poll_cq_wait`] spins before it blocks.
const WAIT_SPIN: Duration = Duration::from_micros(20);

/// Runs `f` on queue `q`'s engine thread and waits for its result.
pub(super) fn call<R: Send + 'static>(
    shared: &Shared,
    q: u32,
    f: impl FnOnce(&mut Endpoint, u32) -> R + Send + 'static,
) -> Result<R, DeviceError> {
    call_work(shared, q, None, f)
}

/// Runs `f` on the engine thread of whichever queue holds QP `qpn` (posted
/// through queue `q`, its application's) and waits for its result.
pub(super) fn call_qp<R: Send + 'static>(
    shared: &Shared,
    q: u32,
    qpn: u32,
    f: impl FnOnce(&mut Endpoint, u32) -> R + Send + 'static,
) -> Result<R, DeviceError> {
    call_work(shared, q, Some(qpn), f)
}

fn call_work<R: Send + 'static>(
    shared: &Shared,
    q: u32,
    qpn: Option<u32>,
    f: impl FnOnce(&mut Endpoint, u32) -> R + Send + 'static,
) -> Result<R, DeviceError> {
    if shared.driven_here() {
        return Err(DeviceError::ControlWhileDriven(q));
    }
    let (tx, rx) = sync_channel(1);
    let f: crate::driver::Control = Box::new(move |ep, cq| {
        let _ = tx.send(f(ep, cq));
    });
    let mut work = match qpn {
        Some(qpn) => Work::QpControl { qpn, f },
        None => Work::Control(f),
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        match shared.post(work) {
            Ok(()) => break,
            Err(w) if std::time::Instant::now() < deadline => {
                work = w;
                std::thread::yield_now();
            }
            Err(_) => return Err(DeviceError::WouldBlock(q)),
        }
    }
    rx.recv_timeout(Duration::from_secs(5))
        .map_err(|_| DeviceError::EngineGone(q))
}
