//! The service: the one owner of an interface's AF_XDP queues, which
//! any number of processes attach to (`docs/shared-engine.md`).
//!
//! Each attached process runs its own engine (its endpoint, QPs, CQs and
//! memory, in its own address space) over a pair of frame rings in shared
//! memory. The service is the switch between those rings and the wire:
//!
//! 1. **From the wire**: each frame received on a queue goes to the
//!    process whose block of QP numbers holds the frame's destination QP
//!    ([`super::route`]); a frame for a block nobody holds is counted and
//!    dropped, as a NIC drops a frame for a QP that does not exist.
//! 2. **From a process**: each frame is copied out of its ring, checked
//!    (a RoCE v2 frame from the interface's own MAC and address, a UD
//!    frame's source QP in the process's block), then sent on the wire, or,
//!    addressed to the interface itself, handed to the process that holds
//!    its destination QP: two processes' QPs reach each other through
//!    here.
//! 3. **Attach and detach**: a process connects to the Unix socket, the
//!    service checks its credentials, gives it a free slot and the ring
//!    pair's memfd; when the socket ends (the process exited or was
//!    killed) or its rings break the protocol, the slot is freed, the
//!    mapping dropped, and frames for its QPs are dropped from then on.
//!
//! One thread runs all of it; it sleeps in poll(2) when nothing moves.

use std::io::{self, Read, Write};
use std::net::IpAddr;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::io::fd_passing::{peer_credentials, send_with_fd, PeerCredentials};
use crate::io::frame_ring::{Consumer, Direction, Producer, RingPair, SLOT_ROOM};
use crate::io::{XskConfig, XskCounters, XskSocket, XskStatistics, ZeroCopy};
use crate::nic::{AttachMode, SteerOps, SteerProgram};
use crate::verbs::DeviceError;

use super::port::reported;
use super::protocol::{
    qpn_block, ring_doorbell, take_doorbells, Answer, Hello, Welcome, HELLO_LEN,
};
use super::route::{check_outgoing, destination, Destination, Outgoing};
use proto::cm::MadOwner;

/// Most processes attached at once (slots 1..=255: one byte of the QP
/// number names the slot).
pub const MAX_PROCESSES: usize = 255;
/// Frames moved per queue or per process per iteration.
const BATCH: usize = 64;
/// Idle iterations before the thread sleeps.
const IDLE_SPINS: u32 = 1;
/// The longest sleep (the stop flag and the report are looked at after).
const MAX_SLEEP: Duration = Duration::from_millis(100);
/// How long a new connection has to send its handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(1);
/// Connections whose handshake is awaited at most (more are refused).
const MAX_PENDING: usize = 64;
/// How often the shared report is refreshed and busy processes' sockets
/// are looked at for their end.
const HOUSEKEEPING: Duration = Duration::from_millis(50);

/// How to start a service.
#[derive(Debug, Clone)]
pub struct ServiceConfig {
    pub ifname: String,
    /// Queues to own (0..queues); None: every RX queue of the interface.
    pub queues: Option<u32>,
    pub attach: AttachMode,
    pub force: bool,
    pub zero_copy: ZeroCopy,
    /// Local IP (GID); None: the interface's first global IPv4 address
    /// (or IPv6 with `ipv6`).
    pub local_ip: Option<IpAddr>,
    pub ipv6: bool,
    /// Slots of each frame ring of each process (a power of two).
    pub ring_slots: u32,
    /// A group whose members may attach besides root (the socket is made
    /// theirs, mode 0660; without it 0600, root only).
    pub group: Option<u32>,
    /// Where the socket goes (default [`super::path::service_socket`]).
    pub socket: Option<PathBuf>,
}

impl ServiceConfig {
    pub fn new(ifname: &str) -> ServiceConfig {
        ServiceConfig {
            ifname: ifname.to_string(),
            queues: None,
            attach: AttachMode::Auto,
            force: false,
            zero_copy: ZeroCopy::Auto,
            local_ip: None,
            ipv6: false,
            ring_slots: 512,
            group: None,
            socket: None,
        }
    }
}

/// What the service counts (besides each queue's socket counters and each
/// process's own).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ServiceCounters {
    pub attached: u64,
    pub detached: u64,
    /// Processes detached because their rings broke the protocol.
    pub detached_for_ring_errors: u64,
    /// Connections refused (credentials, no slot, bad handshake).
    pub attach_refused: u64,
    /// Frames from the wire or a process for a QP block nobody holds.
    pub frames_no_process: u64,
    /// Frames from the wire that are not RoCE v2 (the XDP program lets
    /// only UDP 4791 through; anything else here is malformed).
    pub frames_not_roce: u64,
    /// Frames to QP 1 (the connection managers') handed to a process:
    /// the one listening on the REQ's service, or whose communication IDs
    /// the MAD names.
    pub frames_gsi: u64,
    /// Frames to QP 1 that no process is for (no listener on the service,
    /// a communication ID of no process, not a CM MAD).
    pub frames_gsi_dropped: u64,
    /// Frames turned around from one process to another (or itself).
    pub frames_local: u64,
    /// Frames dropped because the destination process's ring was full.
    pub frames_ring_full: u64,
    /// Frames dropped because the wire's TX ring was full.
    pub frames_tx_full: u64,
}

/// One attached process's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProcessCounters {
    /// Frames and bytes handed to the process.
    pub frames_in: u64,
    pub bytes_in: u64,
    /// Frames and bytes the process sent (on the wire or locally).
    pub frames_out: u64,
    pub bytes_out: u64,
    /// Frames for it dropped: its ring was full.
    pub dropped_ring_full: u64,
    /// Frames it sent that the checks refused (not RoCE, another source
    /// address, a source QP outside its block).
    pub refused: u64,
}

/// One attached process, as reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessReport {
    pub slot: u8,
    pub pid: u32,
    pub uid: u32,
    pub command: String,
    pub attached_for: Duration,
    pub qps: u64,
    pub regions: u64,
    pub counters: ProcessCounters,
}

/// What the service publishes for `roce-xdp stats` (refreshed every
/// 50 ms).
#[derive(Debug, Clone, Default)]
pub struct ServiceReport {
    pub counters: ServiceCounters,
    pub queues: Vec<(u32, XskCounters, Option<XskStatistics>)>,
    pub processes: Vec<ProcessReport>,
    pub uptime: Duration,
}

/// A connection whose handshake is not in yet.
struct Pending {
    stream: UnixStream,
    since: Instant,
    hello: [u8; HELLO_LEN],
    got: usize,
}

/// Tells a process it is not admitted, and why (best effort: it may be
/// gone).
fn refuse(s: &UnixStream, why: String) {
    let _ = (&*s).write(&Answer::Refused(why).encode());
}

struct Process {
    stream: UnixStream,
    pair: Arc<RingPair>,
    to: Producer,
    from: Consumer,
    cred: PeerCredentials,
    command: String,
    since: Instant,
    counters: ProcessCounters,
}

/// The service of one interface (see the module documentation).
pub struct Service {
    // Field order is drop order: the sockets close before the program.
    queues: Vec<XskSocket>,
    program: Arc<Mutex<SteerProgram>>,
    listener: UnixListener,
    path: PathBuf,
    processes: Vec<Option<Process>>,
    pending: Vec<Pending>,
    mac: [u8; 6],
    ip: IpAddr,
    if_mtu: u32,
    ring_slots: u32,
    group: Option<u32>,
    scratch: Box<[u8]>,
    counters: ServiceCounters,
    report: Arc<Mutex<ServiceReport>>,
    origin: Instant,
}

impl std::fmt::Debug for Service {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Service")
            .field("path", &self.path)
            .field("queues", &self.queues.len())
            .finish_non_exhaustive()
    }
}

/// Why the service could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    #[error(transparent)]
    Device(#[from] DeviceError),
    #[error("a roce-xdp service already runs for this interface (pid {pid}, socket {path}); stop it first")]
    AlreadyRunning { pid: u32, path: String },
    #[error("cannot create the service socket {path}: {source}")]
    Socket { path: String, source: io::Error },
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Service {
    /// Attaches the XDP program, opens the queues' sockets and listens for
    /// processes.
    pub fn open(cfg: &ServiceConfig) -> Result<Service, ServiceError> {
        let path = match &cfg.socket {
            Some(p) => p.clone(),
            None => super::path::service_socket(&cfg.ifname).map_err(|e| ServiceError::Socket {
                path: "/run/roce-xdp".into(),
                source: e,
            })?,
        };
        let listener = listen(&path, cfg.group)?;
        let program =
            SteerProgram::attach(&cfg.ifname, cfg.attach, cfg.force).map_err(DeviceError::from)?;
        let program = Arc::new(Mutex::new(program));
        let mac = crate::nic::interface_mac(None, &cfg.ifname).map_err(DeviceError::from)?;
        let ip = match cfg.local_ip {
            Some(ip) => ip,
            None => crate::nic::interface_addr(None, &cfg.ifname, cfg.ipv6)
                .map_err(DeviceError::from)?,
        };
        let count = match cfg.queues {
            Some(n) => n.max(1),
            None => crate::nic::EthtoolOps::open(None, &cfg.ifname)
                .and_then(|o| o.rx_queues().map_err(crate::nic::SteerError::Ethtool))
                .map(|q| q.count.max(1))
                .unwrap_or(1),
        };
        let mut queues = Vec::with_capacity(count as usize);
        for q in 0..count {
            let mut xsk = XskConfig::new(&cfg.ifname, q);
            xsk.zero_copy = cfg.zero_copy;
            xsk.multi_buffer = true;
            let sock = XskSocket::open(&xsk)
                .map_err(|e| DeviceError::from(crate::driver::DriverError::from(e)))?;
            lock(&program)
                .register_socket(q, &sock)
                .map_err(DeviceError::from)?;
            queues.push(sock);
        }
        let if_mtu = std::fs::read_to_string(format!("/sys/class/net/{}/mtu", cfg.ifname))
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(1500);
        Ok(Service {
            queues,
            program,
            listener,
            path,
            processes: (0..=MAX_PROCESSES).map(|_| None).collect(),
            pending: Vec::new(),
            mac,
            ip,
            if_mtu,
            ring_slots: cfg.ring_slots,
            group: cfg.group,
            scratch: vec![0u8; SLOT_ROOM].into_boxed_slice(),
            counters: ServiceCounters::default(),
            report: Arc::new(Mutex::new(ServiceReport::default())),
            origin: Instant::now(),
        }
        .with_first_report())
    }

    /// The report filled once, so that `roce-xdp stats` has the queues
    /// from the start.
    fn with_first_report(mut self) -> Service {
        self.housekeeping();
        self
    }

    /// The socket processes attach at.
    pub fn socket_path(&self) -> &Path {
        &self.path
    }

    /// The interface's MAC and address.
    pub fn address(&self) -> ([u8; 6], IpAddr) {
        (self.mac, self.ip)
    }

    /// The XDP program (its counters for the stats).
    pub fn program(&self) -> Arc<Mutex<SteerProgram>> {
        self.program.clone()
    }

    /// The report the service refreshes while it runs.
    pub fn report(&self) -> Arc<Mutex<ServiceReport>> {
        self.report.clone()
    }

    /// Runs until `stop` is set.
    pub fn run(&mut self, stop: &AtomicBool) {
        let mut idle = 0u32;
        let mut last_housekeeping = Instant::now();
        while !stop.load(Ordering::Relaxed) {
            let moved = self.step();
            if last_housekeeping.elapsed() >= HOUSEKEEPING {
                self.housekeeping();
                last_housekeeping = Instant::now();
            }
            if moved {
                idle = 0;
                continue;
            }
            idle += 1;
            if idle < IDLE_SPINS {
                std::hint::spin_loop();
                continue;
            }
            self.sleep();
            idle = 0;
        }
        self.housekeeping();
    }

    /// One iteration: new processes, the wire to the processes, the
    /// processes to the wire and to each other. Returns whether a frame
    /// moved.
    pub fn step(&mut self) -> bool {
        self.accept();
        let mut moved = false;
        for q in 0..self.queues.len() {
            moved |= self.take_from_wire(q) > 0;
        }
        for slot in 1..self.processes.len() {
            moved |= self.take_from_process(slot) > 0;
        }
        for sock in &mut self.queues {
            sock.complete();
            if sock.tx_in_flight() > 0 {
                let _ = sock.flush();
            }
        }
        self.publish_all();
        moved
    }

    fn take_from_wire(&mut self, q: usize) -> usize {
        let Service {
            queues,
            processes,
            counters,
            ..
        } = self;
        queues[q].recv(BATCH, |frame| deliver(processes, counters, frame))
    }

    fn take_from_process(&mut self, slot: usize) -> usize {
        let Some(p) = self.processes[slot].as_mut() else {
            return 0;
        };
        let ready = match p.from.available() {
            Ok(n) => n.min(BATCH as u32),
            Err(_) => {
                self.detach(slot, true);
                return 0;
            }
        };
        let mut taken = 0;
        while taken < ready {
            let Some(p) = self.processes[slot].as_mut() else {
                return taken as usize;
            };
            let len = match p.from.copy_out(taken, &mut self.scratch) {
                Ok(len) => len,
                Err(_) => {
                    self.detach(slot, true);
                    return taken as usize;
                }
            };
            let frame = &self.scratch[..len];
            match check_outgoing(frame, self.mac, self.ip, qpn_block(slot as u8)) {
                Outgoing::Refused => p.counters.refused += 1,
                Outgoing::ToSelf => {
                    p.counters.frames_out += 1;
                    p.counters.bytes_out += len as u64;
                    self.counters.frames_local += 1;
                    deliver(&mut self.processes, &mut self.counters, frame);
                }
                Outgoing::Wire => {
                    let q = slot % self.queues.len();
                    let sock = &mut self.queues[q];
                    if sock.tx_room() == 0 {
                        sock.complete();
                        let _ = sock.flush();
                        if sock.tx_room() == 0 {
                            // Leave the rest in the ring for the next
                            // iteration.
                            break;
                        }
                    }
                    if sock.send(frame) {
                        p.counters.frames_out += 1;
                        p.counters.bytes_out += len as u64;
                    } else {
                        self.counters.frames_tx_full += 1;
                    }
                }
            }
            taken += 1;
        }
        if let Some(p) = self.processes[slot].as_mut() {
            if taken > 0 {
                p.from.release(taken);
            }
        }
        taken as usize
    }

    /// Publishes what was written into the processes' rings and rings the
    /// bell of those that sleep.
    fn publish_all(&mut self) {
        for slot in 1..self.processes.len() {
            let Some(p) = self.processes[slot].as_mut() else {
                continue;
            };
            if p.to.pending() > 0 && p.to.publish() && ring_doorbell(&p.stream).is_err() {
                self.detach(slot, false);
            }
        }
    }

    /// New connections wait in `pending` until their handshake is in;
    /// each step reads what came, without ever blocking: a process that
    /// connects and says nothing costs the others nothing, and is dropped
    /// after [`HANDSHAKE_TIMEOUT`].
    fn accept(&mut self) {
        loop {
            match self.listener.accept() {
                Ok((stream, _)) => {
                    if self.pending.len() >= MAX_PENDING || stream.set_nonblocking(true).is_err() {
                        self.counters.attach_refused += 1;
                        refuse(
                            &stream,
                            "too many processes attaching at once: retry".into(),
                        );
                        continue;
                    }
                    self.pending.push(Pending {
                        stream,
                        since: Instant::now(),
                        hello: [0; HELLO_LEN],
                        got: 0,
                    });
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            }
        }
        let mut i = 0;
        while i < self.pending.len() {
            let p = &mut self.pending[i];
            let outcome = loop {
                match (&p.stream).read(&mut p.hello[p.got..]) {
                    Ok(0) => break Some(false),
                    Ok(n) => {
                        p.got += n;
                        if p.got == HELLO_LEN {
                            break Some(true);
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        break (p.since.elapsed() >= HANDSHAKE_TIMEOUT).then_some(false)
                    }
                    Err(_) => break Some(false),
                }
            };
            match outcome {
                None => i += 1,
                Some(complete) => {
                    let p = self.pending.swap_remove(i);
                    if complete && Hello::decode(&p.hello).is_ok() {
                        self.admit(p.stream);
                    } else {
                        self.counters.attach_refused += 1;
                        refuse(
                            &p.stream,
                            "not a roce-xdp attach handshake of this version".into(),
                        );
                    }
                }
            }
        }
    }

    /// Admits a process whose handshake came in: its credentials, a slot,
    /// its rings.
    fn admit(&mut self, stream: UnixStream) {
        let cred = match peer_credentials(&stream) {
            Ok(c) => c,
            Err(_) => {
                self.counters.attach_refused += 1;
                return;
            }
        };
        if !self.may_attach(&cred) {
            self.counters.attach_refused += 1;
            refuse(
                &stream,
                format!(
                    "uid {} may not use this interface (root or the service's group only)",
                    cred.uid
                ),
            );
            return;
        }
        let Some(slot) = (1..self.processes.len()).find(|&s| self.processes[s].is_none()) else {
            self.counters.attach_refused += 1;
            refuse(
                &stream,
                format!("{MAX_PROCESSES} processes are attached already"),
            );
            return;
        };
        let pair = match RingPair::create(self.ring_slots) {
            Ok(p) => Arc::new(p),
            Err(e) => {
                self.counters.attach_refused += 1;
                refuse(&stream, format!("no memory for the rings: {e}"));
                return;
            }
        };
        let welcome = Answer::Welcome(Welcome {
            slot: slot as u8,
            mac: self.mac,
            ip: self.ip,
            ring_slots: self.ring_slots,
            if_mtu: self.if_mtu,
            service_pid: std::process::id(),
        });
        if send_with_fd(&stream, &welcome.encode(), pair.fd().as_fd()).is_err()
            || stream.set_nonblocking(true).is_err()
        {
            self.counters.attach_refused += 1;
            return;
        }
        let command = std::fs::read_to_string(format!("/proc/{}/comm", cred.pid))
            .map(|s| s.trim_end().to_string())
            .unwrap_or_default();
        self.processes[slot] = Some(Process {
            to: pair.producer(Direction::ToProcess),
            from: pair.consumer(Direction::ToService),
            stream,
            pair,
            cred,
            command,
            since: Instant::now(),
            counters: ProcessCounters::default(),
        });
        self.counters.attached += 1;
    }

    /// Root, or a member of the service's group (primary group, as the
    /// kernel reports it on the socket, or a supplementary one).
    fn may_attach(&self, c: &PeerCredentials) -> bool {
        if c.uid == 0 {
            return true;
        }
        let Some(g) = self.group else {
            return false;
        };
        c.gid == g || supplementary_groups(c.pid).contains(&g)
    }

    /// Frees `slot`: its rings unmapped, its QPs' frames dropped from now.
    fn detach(&mut self, slot: usize, ring_error: bool) {
        if self.processes[slot].take().is_some() {
            self.counters.detached += 1;
            if ring_error {
                self.counters.detached_for_ring_errors += 1;
            }
        }
    }

    /// Sleeps until a frame arrives on a queue, a process rings, a process
    /// connects or ends, or [`MAX_SLEEP`] passes.
    fn sleep(&mut self) {
        let mut sleeping = Vec::new();
        for slot in 1..self.processes.len() {
            let Some(p) = self.processes[slot].as_mut() else {
                continue;
            };
            match p.from.prepare_sleep() {
                Ok(true) => sleeping.push(slot),
                Ok(false) => {
                    for &s in &sleeping {
                        if let Some(p) = self.processes[s].as_mut() {
                            p.from.woke();
                        }
                    }
                    return;
                }
                Err(_) => self.detach(slot, true),
            }
        }
        {
            let mut fds: Vec<BorrowedFd<'_>> = Vec::with_capacity(self.queues.len() + 1);
            fds.extend(self.queues.iter().map(|s| s.as_fd()));
            fds.push(self.listener.as_fd());
            fds.extend(self.pending.iter().map(|p| p.stream.as_fd()));
            fds.extend(self.processes.iter().flatten().map(|p| p.stream.as_fd()));
            let _ = crate::io::wait_readable_many(&fds, MAX_SLEEP);
        }
        for &s in &sleeping {
            if let Some(p) = self.processes[s].as_mut() {
                p.from.woke();
            }
        }
        self.read_bells();
    }

    /// Takes the processes' doorbells; detaches those whose socket ended.
    fn read_bells(&mut self) {
        for slot in 1..self.processes.len() {
            if self.processes[slot]
                .as_ref()
                .is_some_and(|p| take_doorbells(&p.stream))
            {
                self.detach(slot, false);
            }
        }
    }

    fn housekeeping(&mut self) {
        self.read_bells();
        let report = ServiceReport {
            counters: self.counters,
            queues: self
                .queues
                .iter()
                .map(|s| (s.queue(), s.counters(), s.statistics().ok()))
                .collect(),
            processes: self
                .processes
                .iter()
                .enumerate()
                .filter_map(|(slot, p)| {
                    let p = p.as_ref()?;
                    Some(ProcessReport {
                        slot: slot as u8,
                        pid: p.cred.pid,
                        uid: p.cred.uid,
                        command: p.command.clone(),
                        attached_for: p.since.elapsed(),
                        qps: p.pair.reported_value(reported::QPS),
                        regions: p.pair.reported_value(reported::REGIONS),
                        counters: p.counters,
                    })
                })
                .collect(),
            uptime: self.origin.elapsed(),
        };
        *lock(&self.report) = report;
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        for q in 0..self.queues.len() {
            let _ = lock(&self.program).unregister_socket(q as u32);
        }
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Hands `frame` to the process holding its destination QP (counted in
/// `counters` if none does, or its ring is full).
fn deliver(processes: &mut [Option<Process>], counters: &mut ServiceCounters, frame: &[u8]) {
    match destination(frame) {
        Destination::Slot(slot) => {
            match processes.get_mut(slot as usize).and_then(|p| p.as_mut()) {
                Some(p) => to_process(p, counters, frame),
                None => counters.frames_no_process += 1,
            }
        }
        Destination::Gsi(owner) => {
            let slot = match owner {
                MadOwner::CommId(id) => Some((id >> 24) as usize),
                MadOwner::Service(sid) => processes
                    .iter()
                    .position(|p| p.as_ref().is_some_and(|p| p.pair.listens_on(sid))),
                MadOwner::Nobody => None,
            };
            match slot
                .and_then(|s| processes.get_mut(s))
                .and_then(|p| p.as_mut())
            {
                Some(p) => {
                    counters.frames_gsi += 1;
                    to_process(p, counters, frame);
                }
                None => counters.frames_gsi_dropped += 1,
            }
        }
        Destination::NotRoce => counters.frames_not_roce += 1,
    }
}

/// Writes `frame` into `p`'s ring (counted as dropped if it is full).
fn to_process(p: &mut Process, counters: &mut ServiceCounters, frame: &[u8]) {
    let room = p.to.free().unwrap_or(0);
    if room > 0 && p.to.write(frame) {
        p.counters.frames_in += 1;
        p.counters.bytes_in += frame.len() as u64;
    } else {
        p.counters.dropped_ring_full += 1;
        counters.frames_ring_full += 1;
    }
}

/// Creates the socket at `path` (its directory too), refusing if a
/// service answers there already, with the permissions `group` asks for.
fn listen(path: &Path, group: Option<u32>) -> Result<UnixListener, ServiceError> {
    let shown = path.display().to_string();
    let err = |e: io::Error| ServiceError::Socket {
        path: shown.clone(),
        source: e,
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(err)?;
    }
    if let Ok(s) = UnixStream::connect(path) {
        let pid = peer_credentials(&s).map(|c| c.pid).unwrap_or(0);
        return Err(ServiceError::AlreadyRunning { pid, path: shown });
    }
    // A socket left by a service that died: nobody answers on it.
    let _ = std::fs::remove_file(path);
    let listener = UnixListener::bind(path).map_err(err)?;
    listener.set_nonblocking(true).map_err(err)?;
    let mode = if group.is_some() { 0o660 } else { 0o600 };
    if let Some(g) = group {
        std::os::unix::fs::chown(path, Some(0), Some(g)).map_err(err)?;
    }
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).map_err(err)?;
    Ok(listener)
}

/// The supplementary groups of process `pid` (`Groups:` of its status).
fn supplementary_groups(pid: u32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| l.strip_prefix("Groups:")).map(|g| {
                g.split_whitespace()
                    .filter_map(|x| x.parse().ok())
                    .collect()
            })
        })
        .unwrap_or_default()
}
