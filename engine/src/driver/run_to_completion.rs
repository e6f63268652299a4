//! Run-to-completion mode: the application thread drives one queue's
//! engine itself, the way a DPDK application or an RDMA application
//! polling its CQ works. There is no engine thread and no queue between
//! threads: [`RunToCompletion`] owns the AF_XDP socket of one
//! (interface, queue) and the sans-IO [`Endpoint`] behind it, posts go
//! straight into the endpoint, and every [`RunToCompletion::poll_cq`] runs
//! one engine iteration (receive a batch, run due timers, transmit what is
//! due) before it returns the completions.
//!
//! ```text
//! let mut q = RunToCompletion::open(InlineConfig::new("eth0"))?; // XDP + socket of queue 0
//! let mr = q.register_memory(1 << 20, Access::ALL)?;
//! let qpn = q.create_qp(QpCaps::default())?;
//! q.connect(qpn, RemoteQp { .. }, ConnectOptions::default())?;
//! q.post_send(qpn, SendWr { .. local: mr.sge(0, 64), .. })?;
//! loop { let n = q.poll_cq(&mut wcs); /* handle wcs[..n] */ }
//! ```
//!
//! Nothing moves unless the owner calls [`RunToCompletion::poll_cq`] (or
//! [`RunToCompletion::progress`]): retransmissions, ACKs and the peer's
//! requests are all served from those calls, so an application keeps
//! calling it while it has QPs, the way a poll-mode driver is polled (with
//! reply coalescing, the default, the ACKs of what a call returned leave on
//! the next call, together with the application's answer). When
//! it has nothing else to do it may spin (lowest latency, one core per
//! queue) or block in [`RunToCompletion::wait`] until a packet arrives or
//! the next timer is due.
//!
//! Compared with [`crate::verbs::Device`] (one engine thread per queue,
//! lock-free queues to the application), a round trip crosses no thread
//! boundary and no futex; the price is that the application's own work
//! delays the engine's. The I/O steps are those of the engine thread
//! (`step.rs`), so both modes put the same frames on the wire.

use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::attach::AttachedPort;
use crate::endpoint::{ConnectOptions, Endpoint, EndpointConfig, RemoteQp};
use crate::io::{RegisteredRegion, SharedRegion, UmemConfig, XskConfig, XskSocket, ZeroCopy};
use crate::nic::{in_netns, AttachMode, AttachedMode, SteerCounters, SteerProgram};
use crate::rc::{Access, QpState, RecvWr, SendWr, Sge, SgeCaps, VerbsError, WorkCompletion};
use crate::time::Instant;
use crate::verbs::{DeviceError, MemoryRegion, QpCaps};

use super::capture::CaptureSink;
use super::own_address::OwnAddress;
use super::port::QueuePort;
use super::shared::QueueStats;
use super::step::DriverStep;
use super::thread::DriverError;

/// How to open a run-to-completion queue.
#[derive(Clone)]
pub struct InlineConfig {
    pub ifname: String,
    /// Network namespace of the interface (`ip netns` name); None = the
    /// calling thread's. The socket is opened there; afterwards any thread
    /// may drive it.
    pub netns: Option<String>,
    /// The interface queue whose AF_XDP socket this owns.
    pub queue: u32,
    pub attach: AttachMode,
    /// Remove an XDP program attached by netlink first.
    pub force: bool,
    pub zero_copy: ZeroCopy,
    /// Local IP (GID); None = the interface's first global address of the
    /// family `ipv6` selects.
    pub local_ip: Option<IpAddr>,
    pub ipv6: bool,
    pub umem: UmemConfig,
    /// RX/TX and fill/completion ring sizes.
    pub ring_size: u32,
    /// Multi-buffer AF_XDP frames (needed for PMTU 4096).
    pub multi_buffer: bool,
    /// Capacity of the completion queue (completions not yet taken by
    /// [`RunToCompletion::poll_cq`]).
    pub cq_depth: usize,
    /// Let ACKs due from the packets of a `poll_cq` that returned
    /// completions wait for the next call, to leave with the application's
    /// answer (see [`RunToCompletion::poll_cq`]). On by default.
    pub coalesce_replies: bool,
    pub capture: Option<CaptureSink>,
}

impl InlineConfig {
    /// Defaults as [`crate::verbs::DeviceConfig::new`]: queue 0, native XDP
    /// with generic fallback, zero-copy auto, IPv4, 4096 x 4 KiB frames.
    pub fn new(ifname: &str) -> InlineConfig {
        InlineConfig {
            ifname: ifname.to_string(),
            netns: None,
            queue: 0,
            attach: AttachMode::Auto,
            force: false,
            zero_copy: ZeroCopy::Auto,
            local_ip: None,
            ipv6: false,
            umem: UmemConfig::default(),
            ring_size: 2048,
            multi_buffer: true,
            cq_depth: 8192,
            coalesce_replies: true,
            capture: None,
        }
    }
}

/// One queue's engine, driven by the thread that owns it (see the module
/// documentation). `Send`: open it anywhere, then move it to the thread
/// that will poll it. Dropping it unregisters its socket from the XDP
/// program (and detaches the program if no other queue shares it).
pub struct RunToCompletion {
    // Field order is drop order: the socket closes (after `Drop`
    // unregistered it) before the program handle goes.
    sock: QueuePort,
    ep: Endpoint,
    step: DriverStep,
    cq: u32,
    origin: std::time::Instant,
    loops: u64,
    coalesce_replies: bool,
    /// The last `poll_cq` left its transmissions to the next call.
    deferred: bool,
    /// The application posted (or reached the endpoint) since the last
    /// poll: the next one transmits before it receives.
    posted: bool,
    /// Frames looped back to this engine ([`DriverStep::transmit`]) as of
    /// the last time completions were taken (a poll, or the owner reaching
    /// the endpoint): more since then may have left completions that
    /// nobody took yet ([`RunToCompletion::wait`]).
    looped_when_taken: u64,
    queue: u32,
    ifname: String,
    netns: Option<String>,
    mac: [u8; 6],
    ip: IpAddr,
    /// The XDP program of the interface; None when attached to a service
    /// (which owns it).
    program: Option<Arc<Mutex<SteerProgram>>>,
}

impl std::fmt::Debug for RunToCompletion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunToCompletion")
            .field("ifname", &self.ifname)
            .field("queue", &self.queue)
            .field("ip", &self.ip)
            .finish_non_exhaustive()
    }
}

fn lock(p: &Mutex<SteerProgram>) -> std::sync::MutexGuard<'_, SteerProgram> {
    p.lock().unwrap_or_else(|e| e.into_inner())
}

impl RunToCompletion {
    /// Attaches the XDP program to `cfg.ifname` and opens and registers the
    /// socket of `cfg.queue`.
    pub fn open(cfg: InlineConfig) -> Result<RunToCompletion, DeviceError> {
        let program = in_netns(cfg.netns.as_deref(), || {
            SteerProgram::attach(&cfg.ifname, cfg.attach, cfg.force)
        })??;
        Self::open_on(cfg, Arc::new(Mutex::new(program)))
    }

    /// Opens and registers the socket of `cfg.queue` with a program already
    /// attached to `cfg.ifname` (e.g. [`RunToCompletion::program`] of
    /// another queue of the same interface); `cfg.attach` and `cfg.force`
    /// are not used.
    pub fn open_on(
        cfg: InlineConfig,
        program: Arc<Mutex<SteerProgram>>,
    ) -> Result<RunToCompletion, DeviceError> {
        let ns = cfg.netns.as_deref();
        let mac = crate::nic::interface_mac(ns, &cfg.ifname)?;
        let ip = match cfg.local_ip {
            Some(ip) => ip,
            None => crate::nic::interface_addr(ns, &cfg.ifname, cfg.ipv6)?,
        };
        let mut xsk = XskConfig::new(&cfg.ifname, cfg.queue);
        xsk.umem = cfg.umem;
        xsk.ring_size = cfg.ring_size;
        xsk.fill_size = cfg.ring_size;
        xsk.zero_copy = cfg.zero_copy;
        xsk.multi_buffer = cfg.multi_buffer;
        let sock = in_netns(ns, || -> Result<XskSocket, DriverError> {
            let sock = XskSocket::open(&xsk)?;
            lock(&program).register_socket(cfg.queue, &sock)?;
            Ok(sock)
        })??;
        let ep = Endpoint::new(EndpointConfig {
            local_mac: mac,
            local_ip: ip,
            // Unpredictable QPNs, PSNs and keys, as the threaded Device's
            // (docs/security.md): the default seed is fixed, for tests.
            seed: super::os_seed(),
            ..EndpointConfig::default()
        });
        let own = OwnAddress::new(mac, ip);
        let program = Some(program);
        Ok(Self::assemble(cfg, QueuePort::Xsk(sock), ep, own, program))
    }

    /// An engine whose frames go through the shared engine's service
    /// that `port` is attached to (`docs/shared-engine.md`): its QP
    /// numbers are the block the service gave it, its address the
    /// interface's, and a frame to that address leaves through the service
    /// (which turns it around to whichever process holds its QP).
    /// `cfg.ifname`, `cfg.netns` and `cfg.capture`, `cfg.cq_depth` and
    /// `cfg.coalesce_replies` are used; the socket options are the
    /// service's.
    pub fn attached(cfg: InlineConfig, port: AttachedPort) -> RunToCompletion {
        let w = *port.welcome();
        let ep = Endpoint::new(EndpointConfig {
            local_mac: w.mac,
            local_ip: w.ip,
            seed: super::os_seed(),
            qpns: port.qpns(),
            ..EndpointConfig::default()
        });
        let own = OwnAddress::without_loopback(w.mac, w.ip);
        let mut rtc = Self::assemble(cfg, QueuePort::Attached(port), ep, own, None);
        rtc.queue = 0;
        rtc
    }

    /// The queue around `sock` and `ep` (its CQ created here).
    fn assemble(
        cfg: InlineConfig,
        sock: QueuePort,
        mut ep: Endpoint,
        own: OwnAddress,
        program: Option<Arc<Mutex<SteerProgram>>>,
    ) -> RunToCompletion {
        let cq = ep.create_cq(cfg.cq_depth.max(16));
        let step = DriverStep::new(&sock, cfg.capture, own);
        let (mac, ip) = own.address();
        RunToCompletion {
            sock,
            ep,
            step,
            cq,
            origin: std::time::Instant::now(),
            loops: 0,
            coalesce_replies: cfg.coalesce_replies,
            deferred: false,
            posted: false,
            looped_when_taken: 0,
            queue: cfg.queue,
            ifname: cfg.ifname,
            netns: cfg.netns,
            mac,
            ip,
            program,
        }
    }

    /// The XDP program this queue is registered with (to open another
    /// queue of the same interface with [`RunToCompletion::open_on`]);
    /// None when attached to a service.
    pub fn program(&self) -> Option<&Arc<Mutex<SteerProgram>>> {
        self.program.as_ref()
    }

    /// The service attachment, when this engine has one.
    pub fn attachment(&self) -> Option<&AttachedPort> {
        self.sock.attached()
    }

    /// The service attachment, when this engine has one.
    pub fn attachment_mut(&mut self) -> Option<&mut AttachedPort> {
        self.sock.attached_mut()
    }

    /// The interface's MAC.
    pub fn mac(&self) -> [u8; 6] {
        self.mac
    }

    /// The local IP (GID).
    pub fn ip(&self) -> IpAddr {
        self.ip
    }

    /// The interface queue this owns.
    pub fn queue(&self) -> u32 {
        self.queue
    }

    /// Whether the socket is bound in zero-copy mode.
    pub fn is_zero_copy(&self) -> bool {
        self.sock.is_zero_copy()
    }

    /// The XDP attach mode in use (None: attached to a service, which
    /// owns the program).
    pub fn attached_mode(&self) -> Option<AttachedMode> {
        self.program.as_ref().map(|p| lock(p).mode())
    }

    /// The MAC of `ip` from the kernel's neighbour table (resolving it with
    /// ARP/ND through the kernel if needed); for this queue's own IP, its
    /// own MAC, without asking: a QP connected to another QP of this
    /// queue gets its frames back without the wire
    /// (`loopback_frames` in [`RunToCompletion::stats`]).
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

    /// Registers `len` bytes of fresh memory (usable by this queue's QPs).
    /// Its I/O virtual address is its real address.
    pub fn register_memory(
        &mut self,
        len: usize,
        access: Access,
    ) -> Result<MemoryRegion, DeviceError> {
        let region = Arc::new(SharedRegion::new(len).map_err(DeviceError::Memory)?);
        let iova = region.addr();
        let keys = self
            .ep
            .reg_mr(Box::new(RegisteredRegion(region.clone())), iova, access)?;
        Ok(MemoryRegion::new(region, keys.lkey, keys.rkey, self.queue))
    }

    /// Creates an RC QP; returns its QP number (give it to the peer).
    pub fn create_qp(&mut self, caps: QpCaps) -> Result<u32, DeviceError> {
        Ok(self.ep.create_qp(caps.init_attr(self.cq))?)
    }

    /// RESET -> INIT -> RTR -> RTS with the peer's parameters.
    pub fn connect(
        &mut self,
        qpn: u32,
        remote: RemoteQp,
        opts: ConnectOptions,
    ) -> Result<(), DeviceError> {
        Ok(self.ep.connect(qpn, &remote, &opts)?)
    }

    /// The QP's state (None: no such QP).
    pub fn qp_state(&self, qpn: u32) -> Option<QpState> {
        self.ep.qp_state(qpn)
    }

    /// Posts a send work request (SEND, WRITE, READ, atomics). Unlike the
    /// threaded [`crate::verbs::QueuePair::post_send`], a refusal is
    /// returned here. The packets leave on the next
    /// [`RunToCompletion::poll_cq`].
    pub fn post_send(&mut self, qpn: u32, wr: SendWr) -> Result<(), VerbsError> {
        self.posted = true;
        self.ep.post_send(qpn, wr)
    }

    /// Posts a receive work request.
    pub fn post_recv(&mut self, qpn: u32, wr: RecvWr) -> Result<(), VerbsError> {
        self.posted = true;
        self.ep.post_recv(qpn, wr)
    }

    /// Gives QP `qpn`, before it is connected, room for SGE lists and
    /// inline data ([`Endpoint::set_qp_sge_caps`]).
    pub fn set_qp_sge_caps(&mut self, qpn: u32, caps: SgeCaps) -> Result<(), VerbsError> {
        self.ep.set_qp_sge_caps(qpn, caps)
    }

    /// Posts a send work request whose data is gathered from `sges`
    /// ([`Endpoint::post_send_sgl`]).
    pub fn post_send_sgl(&mut self, qpn: u32, wr: SendWr, sges: &[Sge]) -> Result<(), VerbsError> {
        self.posted = true;
        self.ep.post_send_sgl(qpn, wr, sges)
    }

    /// Posts a SEND or WRITE carrying `data` inline
    /// ([`Endpoint::post_send_inline`]).
    pub fn post_send_inline(
        &mut self,
        qpn: u32,
        wr: SendWr,
        data: &[u8],
    ) -> Result<(), VerbsError> {
        self.posted = true;
        self.ep.post_send_inline(qpn, wr, data)
    }

    /// Posts a receive whose buffer is the list `sges`
    /// ([`Endpoint::post_recv_sgl`]).
    pub fn post_recv_sgl(&mut self, qpn: u32, wr_id: u64, sges: &[Sge]) -> Result<(), VerbsError> {
        self.posted = true;
        self.ep.post_recv_sgl(qpn, wr_id, sges)
    }

    /// The sans-IO endpoint behind this queue, for a verbs layer that maps
    /// each verb onto the endpoint's own (its CQs, memory the application
    /// owns registered through [`Endpoint::reg_mr`], `modify_qp`,
    /// `destroy_qp`) and drives the I/O with [`RunToCompletion::progress`].
    pub fn endpoint_mut(&mut self) -> &mut Endpoint {
        // It may post: the next poll transmits first.
        self.posted = true;
        // It may take completions, those of looped frames among them.
        self.looped_when_taken = self.step.looped().frames;
        &mut self.ep
    }

    /// The sans-IO endpoint behind this queue, to read.
    pub fn endpoint(&self) -> &Endpoint {
        &self.ep
    }

    fn now(&self) -> Instant {
        Instant::from_nanos(self.origin.elapsed().as_nanos() as u64)
    }

    /// One engine iteration: receive a batch, run due timers, transmit what
    /// is due. Returns whether anything happened.
    pub fn progress(&mut self) -> bool {
        self.loops += 1;
        self.deferred = false;
        self.posted = false;
        let origin = self.origin;
        let clock = move || Instant::from_nanos(origin.elapsed().as_nanos() as u64);
        self.step
            .step(&mut self.sock, &mut self.ep, clock)
            .progress()
    }

    /// Runs one engine iteration (receive a batch, run due timers,
    /// transmit what is due) and takes up to `out.len()` completions.
    /// Never blocks.
    ///
    /// With [`InlineConfig::coalesce_replies`] (the default), a call that
    /// received packets and returns completions leaves what those packets
    /// made due (their ACKs, READ responses) for the next call, which
    /// transmits them first, before it receives: the application's answer,
    /// posted in between, leaves in the same batch and system call as the
    /// ACK, so a request/response exchange costs one TX kick per direction,
    /// not two, and the packets that came meanwhile do not hold it back.
    /// The ACK is late by the application's time between two calls.
    pub fn poll_cq(&mut self, out: &mut [WorkCompletion]) -> usize {
        let cq = self.cq;
        self.poll_with(|ep| ep.poll_cq(cq, out)).0
    }

    /// [`RunToCompletion::poll_cq`] for a caller that takes the
    /// completions itself (a verbs layer with CQs of its own): one engine
    /// iteration in which `take` runs after receiving and the timers, and
    /// returns how many completions it took; with
    /// [`InlineConfig::coalesce_replies`], an iteration that received
    /// packets and took completions leaves its transmit to the next call,
    /// as `poll_cq` does. Returns (what `take` returned, whether anything
    /// happened: packets received or sent, timers run).
    pub fn poll_with(&mut self, take: impl FnOnce(&mut Endpoint) -> usize) -> (usize, bool) {
        self.loops += 1;
        let now = self.now();
        // What the application posted since the last call, and what that
        // call held back for it, leave first: packets that came meanwhile
        // (in a ping-pong, the peer's ACK of our last message, which
        // completes it) are handled after the answer is on its way, and do
        // not hold it back for one more call.
        let mut sent = 0;
        if std::mem::take(&mut self.posted) | std::mem::take(&mut self.deferred) {
            sent = self.step.transmit(&mut self.sock, &mut self.ep, now);
        }
        let received = self.step.receive(&mut self.sock, &mut self.ep, now);
        // Nothing received: the time read before receiving is still now
        // (one clock read per empty poll, not two).
        let now = if received > 0 { self.now() } else { now };
        let timers = self.step.timers(&mut self.ep, now);
        self.looped_when_taken = self.step.looped().frames;
        let n = take(&mut self.ep);
        if self.coalesce_replies && n > 0 && received > 0 {
            self.deferred = true;
            return (n, true);
        }
        sent += self.step.transmit(&mut self.sock, &mut self.ep, now);
        (n, received > 0 || timers || sent > 0)
    }

    /// Transmits what is due now (up to a batch of packets: what the
    /// application posted, the replies a coalescing
    /// [`RunToCompletion::poll_with`] held back), without receiving or
    /// running timers: a doorbell, for an owner whose posting thread is not
    /// the one that polls (that thread may not poll again soon). Returns
    /// how many packets it queued or looped back.
    pub fn transmit(&mut self) -> usize {
        self.deferred = false;
        let now = self.now();
        let sent = self.step.transmit(&mut self.sock, &mut self.ep, now);
        // More than a batch: the next poll sends the rest first.
        self.posted = self.ep.has_pending_transmit();
        sent
    }

    /// Sends what a coalescing [`RunToCompletion::poll_with`] left for the
    /// next call (ACKs, READ responses), if anything: for an owner about to
    /// destroy a QP or stop polling, whose peer would otherwise wait for
    /// those ACKs until its retransmit timer.
    pub fn flush_deferred(&mut self) {
        if std::mem::take(&mut self.deferred) {
            let now = self.now();
            self.step.transmit(&mut self.sock, &mut self.ep, now);
        }
    }

    /// Blocks in poll(2) until a packet may have arrived, the endpoint's
    /// next timer is due, or `timeout` passes, whichever is first; returns
    /// at once if packets wait to be transmitted. For an application that
    /// has nothing to do and wants to leave its core (call
    /// [`RunToCompletion::poll_cq`] afterwards).
    pub fn wait(&mut self, timeout: Duration) {
        let now = self.now();
        let until_timer = self
            .ep
            .poll_timeout()
            .map_or(timeout, |t| t.saturating_duration_since(now));
        let sleep = timeout.min(until_timer);
        if sleep.is_zero() || self.has_work_due() {
            return;
        }
        let _ = self.sock.wait(sleep);
    }

    /// How long the owner may sleep in poll(2) on [`RunToCompletion::socket_fd`]
    /// (at most `limit`): None when something is due now (frames to
    /// transmit, a timer that expired). For an owner that sleeps without
    /// holding `&mut self` (a progress thread that lets other threads post
    /// meanwhile: it must wake on their posts itself).
    ///
    /// Attached to a service, a `Some` also told the service that this
    /// side sleeps (so that it rings the doorbell, which makes
    /// [`RunToCompletion::socket_fd`] readable, when frames come).
    pub fn idle_for(&mut self, limit: Duration) -> Option<Duration> {
        if self.has_work_due() {
            return None;
        }
        let sleep = match self.ep.poll_timeout() {
            Some(t) => t.saturating_duration_since(self.now()).min(limit),
            None => limit,
        };
        if sleep.is_zero() {
            return None;
        }
        if let Some(port) = self.sock.attached_mut() {
            if !port.prepare_sleep() {
                return None;
            }
        }
        Some(sleep)
    }

    /// Whether something waits for the next poll without a packet or a
    /// timer to announce it: frames to transmit, frames the kernel has not
    /// taken yet, or frames looped back to this engine after the last
    /// poll took its completions (the completions they made wait in the
    /// endpoint; no packet will wake poll(2) for them).
    fn has_work_due(&mut self) -> bool {
        self.ep.has_pending_transmit()
            || self.sock.tx_unconsumed() > 0
            || self.step.looped().frames != self.looped_when_taken
    }

    /// The AF_XDP socket's descriptor (readable when frames arrived), valid
    /// as long as this queue is open.
    pub fn socket_fd(&self) -> std::os::fd::RawFd {
        self.sock.raw_fd()
    }

    /// Statistics of this queue, read now.
    pub fn stats(&self) -> QueueStats {
        let mut s = QueueStats {
            transport: self.ep.counters(),
            socket: self.sock.counters(),
            loops: self.loops,
            loopback_frames: self.step.looped().frames,
            loopback_bytes: self.step.looped().bytes,
            ..QueueStats::default()
        };
        if let Some(k) = self.sock.statistics() {
            s.kernel = k;
        }
        s.qp_rates.fill(self.ep.qp_rates());
        s
    }

    /// The XDP program's counters (all queues of the interface).
    pub fn steer_counters(&self) -> Result<SteerCounters, DeviceError> {
        match &self.program {
            Some(p) => Ok(lock(p).counters()?),
            None => Err(DeviceError::Attached),
        }
    }

    /// Unregisters the socket and closes it (as dropping does); returns the
    /// final statistics.
    pub fn close(self) -> QueueStats {
        self.stats()
    }
}

impl Drop for RunToCompletion {
    fn drop(&mut self) {
        // Send what a last poll_cq may have left for the next call.
        let now = self.now();
        self.step.transmit(&mut self.sock, &mut self.ep, now);
        // RoCE frames for this queue go to the kernel (counted as
        // `no_socket`) from here on; the socket closes right after.
        if let Some(p) = &self.program {
            let _ = lock(p).unregister_socket(self.queue);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn is_send() {
        fn send<T: Send>() {}
        send::<RunToCompletion>();
    }
}
