//! `roce-xdp loopback`: two engines in two network namespaces joined by a
//! veth pair, a transfer between them, and byte-exact verification of
//! every message. Used by the CLI and by the datapath tests.
//!
//! [`run_loopback`] takes three steps: `Loopback::setup` (the pair, the
//! two devices, the QP pairs and their regions), `Loopback::drive`
//! (issue up to each QP's window, poll and check each completion, until
//! every message completed, a stall or a cancel) and
//! `Loopback::verify` (what is checked at the end, and the report).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use thiserror::Error;

use crate::driver::{CaptureSink, PollMode, QueueStats};
use crate::endpoint::{ConnectOptions, RemoteQp};
use crate::io::ZeroCopy;
use crate::nic::{AttachMode, Impairment, NetnsError, SteerCounters};
use crate::rc::{Access, Counters, Mtu, RecvWr, SendOp, SendWr, WcStatus, WorkCompletion};
use crate::testbed::netns::{PairConfig, Side, VethPair};
use crate::verbs::{Device, DeviceConfig, DeviceError, MemoryRegion, QpCaps, QueuePair};

/// The operation the transfer uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoopbackOp {
    Write,
    Send,
    Read,
    /// FETCH_ADD of 1 on a remote word, then one COMPARE_SWAP per QP.
    Atomic,
}

impl LoopbackOp {
    /// The right the responder's QP grants (verbs `qp_access_flags`): the
    /// one this operation needs, none for SENDs.
    fn responder_access(self) -> Access {
        match self {
            LoopbackOp::Write => Access::REMOTE_WRITE,
            LoopbackOp::Send => Access::NONE,
            LoopbackOp::Read => Access::REMOTE_READ,
            LoopbackOp::Atomic => Access::REMOTE_ATOMIC,
        }
    }
}

/// Loopback options (the CLI flags).
#[derive(Debug, Clone)]
pub struct LoopbackOptions {
    pub op: LoopbackOp,
    /// Messages in total, spread over the QPs.
    pub messages: u64,
    /// Message size in bytes (ignored for atomics: 8).
    pub size: u32,
    /// Path MTU: 256..4096.
    pub mtu: Mtu,
    pub qps: u32,
    /// Engine threads (queues) per side; QP i is created on queue i % queues.
    pub queues: u32,
    /// Join the two sides through a Linux bridge
    /// ([`VethPair::create_bridged`]) instead of one veth pair: frames
    /// arrive on a queue chosen by the flow's hash, as RSS spreads them on
    /// a NIC, instead of on the queue they were sent from.
    pub bridge: bool,
    /// Frame loss probability injected by the XDP program on both sides.
    pub loss: f64,
    /// Probability that the XDP program marks an ECN-capable RoCE frame CE
    /// (congestion tests).
    pub ce: f64,
    pub mode: AttachMode,
    pub ipv6: bool,
    pub zero_copy: ZeroCopy,
    pub poll: PollMode,
    /// Outstanding messages per QP.
    pub window: u32,
    /// ACK timeout exponent (4.096 us * 2^timeout).
    pub ack_timeout: u8,
    pub capture: Option<CaptureSink>,
    /// 802.1Q tag on every RoCE frame both engines send (`None` = untagged).
    pub vlan: Option<crate::wire::VlanTag>,
    /// Ping and hold a TCP exchange across the veth during the transfer.
    pub check_kernel_traffic: bool,
    /// Give up after this long without a completion.
    pub stall_timeout: Duration,
    /// Set (e.g. by a SIGINT handler) to stop early; the engines are
    /// stopped, the programs detached and the namespaces removed.
    pub cancel: Option<Arc<AtomicBool>>,
}

impl Default for LoopbackOptions {
    fn default() -> Self {
        LoopbackOptions {
            op: LoopbackOp::Write,
            messages: 1000,
            size: 65536,
            mtu: Mtu::Mtu4096,
            qps: 1,
            queues: 1,
            bridge: false,
            loss: 0.0,
            ce: 0.0,
            mode: AttachMode::Auto,
            ipv6: false,
            zero_copy: ZeroCopy::Auto,
            poll: PollMode::default(),
            window: 16,
            ack_timeout: 12,
            capture: None,
            vlan: None,
            check_kernel_traffic: false,
            stall_timeout: Duration::from_secs(10),
            cancel: None,
        }
    }
}

/// Outcome of a loopback run.
#[derive(Debug, Clone, Default)]
pub struct LoopbackReport {
    pub messages_completed: u64,
    pub bytes_verified: u64,
    pub data_errors: u64,
    /// Completions with an error status.
    pub failed_completions: u64,
    pub retransmitted_packets: u64,
    pub elapsed: Duration,
    pub gbps: f64,
    /// RoCE packets per second sent by both sides together, millions.
    pub mpps: f64,
    /// Packets per second in the data direction (requester for WRITE/SEND,
    /// responder for READ), millions: comparable with the echo floor.
    pub data_mpps: f64,
    /// Transport counters: requester side (a), responder side (b).
    pub requester: Counters,
    pub responder: Counters,
    /// AF_XDP socket and engine-loop statistics of each side.
    pub io_requester: QueueStats,
    pub io_responder: QueueStats,
    /// RoCE packets each queue of each side received on its own RX ring.
    pub rx_per_queue_requester: Vec<u64>,
    pub rx_per_queue_responder: Vec<u64>,
    pub steer_requester: SteerCounters,
    pub steer_responder: SteerCounters,
    pub attached_mode: String,
    pub zero_copy: bool,
    /// Result of the kernel-traffic check (None when not requested).
    pub kernel_traffic_ok: Option<bool>,
    pub stalled: bool,
    pub cancelled: bool,
    /// Bytes of memory registered for the messages, both sides together:
    /// each QP's messages in flight at most (the window, or fewer when the
    /// QP has fewer messages), SEND's posted receives.
    pub registered_bytes: u64,
}

impl LoopbackReport {
    /// Everything completed, verified, without errors.
    pub fn success(&self, expected_messages: u64) -> bool {
        self.messages_completed == expected_messages
            && self.data_errors == 0
            && self.failed_completions == 0
            && !self.stalled
            && !self.cancelled
            && self.kernel_traffic_ok != Some(false)
    }
}

/// Why a loopback run could not run.
#[derive(Debug, Error)]
pub enum LoopbackError {
    #[error(transparent)]
    Netns(#[from] NetnsError),
    #[error(transparent)]
    Device(#[from] DeviceError),
    #[error("invalid options: {0}")]
    Options(String),
}

/// The byte of message `msg` at `i` for QP `qp` (deterministic pattern).
fn pattern(qp: u32, msg: u64, i: usize) -> u8 {
    let x = (msg.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ ((qp as u64) << 40))
        .wrapping_add(i as u64 * 0x2545_F491);
    (x >> 24) as u8 ^ (i as u8)
}

fn fill(buf: &mut [u8], qp: u32, msg: u64) {
    for (i, b) in buf.iter_mut().enumerate() {
        *b = pattern(qp, msg, i);
    }
}

/// One QP pair of the transfer (requester `a`, responder `b`), its
/// regions and its progress.
struct QpRun {
    idx: u32,
    a: QueuePair,
    b: QueuePair,
    /// Requester's local buffer (a) and the responder's buffer (b).
    la: MemoryRegion,
    rb: MemoryRegion,
    /// Messages in flight at most on this QP, each in its own slot of
    /// `la` (and, but for SEND, of `rb`): the window, or fewer when the QP
    /// has fewer messages.
    window: usize,
    /// Slots of `rb` (SEND: receives kept posted, twice the window, at most
    /// one per message; otherwise `window`).
    recv_slots: usize,
    /// Messages to issue on this QP, issued, completed.
    total: u64,
    issued: u64,
    completed: u64,
    /// SEND: send completions at the requester (a send buffer slot may be
    /// reused, and the send queue has room, only once its SEND completed,
    /// which can be later than the receive completion at b).
    sends_completed: u64,
    /// Message number occupying each window slot.
    slot_msg: Vec<u64>,
    /// Atomic results seen (fetch-add originals).
    seen_orig: Vec<bool>,
}

impl QpRun {
    /// Whether the window (and, for SEND, the send slots) has room for
    /// another message.
    fn may_issue(&self, op: LoopbackOp) -> bool {
        self.issued < self.total
            && self.issued - self.completed < self.window as u64
            && (op != LoopbackOp::Send || self.issued - self.sends_completed < self.window as u64)
    }

    /// The work request of message `msg` in the slot at `off`; for WRITE
    /// and SEND the slot of `la` gets the message's pattern first (`buf`
    /// is scratch).
    fn work_request(
        &self,
        op: LoopbackOp,
        msg: u64,
        off: usize,
        size: u32,
        buf: &mut [u8],
    ) -> SendWr {
        match op {
            LoopbackOp::Write | LoopbackOp::Send => {
                fill(buf, self.idx, msg);
                self.la.write(off, buf);
                let op = if op == LoopbackOp::Write {
                    SendOp::Write
                } else {
                    SendOp::Send
                };
                SendWr {
                    remote_addr: self.rb.addr() + off as u64,
                    rkey: self.rb.rkey,
                    ..SendWr::new(msg, op, self.la.sge(off, size))
                }
            }
            LoopbackOp::Read => SendWr {
                remote_addr: self.rb.addr() + off as u64,
                rkey: self.rb.rkey,
                ..SendWr::new(msg, SendOp::Read, self.la.sge(off, size))
            },
            LoopbackOp::Atomic => SendWr {
                remote_addr: self.rb.addr(),
                rkey: self.rb.rkey,
                compare_add: 1,
                ..SendWr::new(msg, SendOp::FetchAdd, self.la.sge(off, 8))
            },
        }
    }
}

/// What QP `idx` carries: its queue, its messages, and how many it has in
/// flight and (SEND) receives posted at most.
struct QpPlan {
    idx: u32,
    queue: u32,
    total: u64,
    window: usize,
    recv_slots: usize,
}

impl QpPlan {
    /// QP `i`'s share: the messages spread over the QPs, on queue
    /// `i % queues`.
    fn new(opts: &LoopbackOptions, i: u32, queues: u32) -> QpPlan {
        let window = opts.window.max(1) as usize;
        let total = opts.messages / opts.qps as u64
            + u64::from((i as u64) < opts.messages % opts.qps as u64);
        // Memory for the messages this QP can have in flight, no more: with
        // thousands of QPs and a few messages each, a whole window per QP
        // was gigabytes (4096 QPs x 16 x 64 KiB x 3 for SEND: 12 GiB, 37 s
        // of the kernel clearing pages).
        let qp_window = window.min(total as usize);
        // SEND: b keeps twice the window of receives posted, so the receive
        // for a message was posted about a window of completions before the
        // message can be sent. With exactly a window, the repost and the
        // SEND it allows raced (the post reaches b's engine thread through
        // its work queue, the SEND through a's engine and the wire): now and
        // then the SEND won and got an RNR NAK.
        let recv_slots = if opts.op == LoopbackOp::Send {
            (2 * qp_window).min(total as usize)
        } else {
            qp_window
        };
        QpPlan {
            idx: i,
            queue: i % queues,
            total,
            window: qp_window,
            recv_slots,
        }
    }
}

/// The memory registered for the QPs' messages, and what it adds up to.
struct Regions {
    slot_len: usize,
    registered_bytes: u64,
    /// Per queue, the slot shared by its QPs that carry no message.
    idle: Vec<Option<(MemoryRegion, MemoryRegion)>>,
}

impl Regions {
    /// The requester's and the responder's region of QP `plan`: a slot per
    /// message in flight (per posted receive at the responder).
    fn for_qp(
        &mut self,
        dev_a: &Device,
        dev_b: &Device,
        plan: &QpPlan,
    ) -> Result<(MemoryRegion, MemoryRegion), LoopbackError> {
        let (q, slot_len) = (plan.queue, self.slot_len);
        // A QP with no message (more QPs than messages) posts nothing: the
        // QPs of a queue share one slot on each side (at 4096 QPs and 1000
        // messages, a slot each was 3096 x 2 x 64 KiB: 387 MiB).
        if plan.total == 0 {
            let idle = &mut self.idle[q as usize];
            if idle.is_none() {
                let la = dev_a.register_memory(q, slot_len, Access::ALL)?;
                let rb = dev_b.register_memory(q, slot_len, Access::ALL)?;
                self.registered_bytes += 2 * slot_len as u64;
                *idle = Some((la, rb));
            }
            return Ok(idle.clone().expect("registered above"));
        }
        let la = dev_a.register_memory(q, slot_len * plan.window, Access::ALL)?;
        let rb = dev_b.register_memory(q, slot_len * plan.recv_slots, Access::ALL)?;
        self.registered_bytes += (slot_len * (plan.window + plan.recv_slots)) as u64;
        Ok((la, rb))
    }
}

/// Each side's address and MAC, as the other resolved it.
struct Addresses {
    ip_a: IpAddr,
    ip_b: IpAddr,
    mac_a: [u8; 6],
    mac_b: [u8; 6],
}

/// The device on `side`, as the options ask.
fn open_device(opts: &LoopbackOptions, side: &Side, queues: u32) -> Result<Device, LoopbackError> {
    let mut c = DeviceConfig::new(&side.ifname);
    c.netns = Some(side.netns.clone());
    c.queues = queues;
    c.attach = opts.mode;
    c.zero_copy = opts.zero_copy;
    c.poll = opts.poll;
    c.ipv6 = opts.ipv6;
    c.multi_buffer = true;
    c.capture = opts.capture.clone();
    c.umem.frame_count = 4096;
    c.ring_size = 2048;
    Ok(Device::open(c)?)
}

/// Connects `qa` and `qb`, each from its QP's random first PSN; `qb`
/// grants the right the operation needs.
fn connect_pair(
    opts: &LoopbackOptions,
    qa: &QueuePair,
    qb: &QueuePair,
    addrs: &Addresses,
) -> Result<(), LoopbackError> {
    let copts = ConnectOptions {
        path_mtu: opts.mtu,
        timeout: opts.ack_timeout,
        // Each side starts at its QP's random first PSN, as the
        // tools and serve do (docs/security.md).
        sq_psn: qa.psn(),
        vlan: opts.vlan,
        ..Default::default()
    };
    let psn_b = qb.psn();
    qa.connect(
        RemoteQp {
            qpn: qb.qpn(),
            psn: psn_b,
            mac: addrs.mac_b,
            ip: addrs.ip_b,
        },
        copts,
    )?;
    qb.connect(
        RemoteQp {
            qpn: qa.qpn(),
            psn: copts.sq_psn,
            mac: addrs.mac_a,
            ip: addrs.ip_a,
        },
        ConnectOptions {
            sq_psn: psn_b,
            access: opts.op.responder_access(),
            ..copts
        },
    )?;
    Ok(())
}

/// The QP pairs: QP `i` on queue `i % queues` of each side, with its share
/// of the messages and its regions, connected. Returns them with the bytes
/// registered.
fn create_runs(
    opts: &LoopbackOptions,
    dev_a: &Device,
    dev_b: &Device,
    addrs: &Addresses,
    slot_len: usize,
    queues: u32,
) -> Result<(Vec<QpRun>, u64), LoopbackError> {
    let window = opts.window.max(1);
    let mut runs = Vec::new();
    let mut regions = Regions {
        slot_len,
        registered_bytes: 0,
        idle: vec![None; queues as usize],
    };
    for i in 0..opts.qps {
        let plan = QpPlan::new(opts, i, queues);
        let caps = QpCaps {
            max_send_wr: (window * 2).max(16),
            max_recv_wr: (window * 2).max(16),
        };
        let qa = dev_a.create_qp(plan.queue, caps)?;
        let qb = dev_b.create_qp(plan.queue, caps)?;
        let (la, rb) = regions.for_qp(dev_a, dev_b, &plan)?;
        connect_pair(opts, &qa, &qb, addrs)?;
        runs.push(QpRun {
            idx: plan.idx,
            a: qa,
            b: qb,
            la,
            rb,
            window: plan.window,
            recv_slots: plan.recv_slots,
            total: plan.total,
            issued: 0,
            completed: 0,
            sends_completed: 0,
            slot_msg: vec![u64::MAX; plan.window],
            seen_orig: if opts.op == LoopbackOp::Atomic {
                vec![false; plan.total as usize]
            } else {
                Vec::new()
            },
        });
    }
    Ok((runs, regions.registered_bytes))
}

/// Each completion's QP run, by (queue, QPN) of one side's QP (`side`
/// picks it): a search over the runs per completion cost O(QPs) (4M
/// comparisons at 4096 QPs and 1000 messages).
fn index_by_qp(runs: &[QpRun], side: fn(&QpRun) -> &QueuePair) -> HashMap<(u32, u32), usize> {
    runs.iter()
        .enumerate()
        .map(|(i, r)| ((side(r).queue(), side(r).qpn()), i))
        .collect()
}

/// Runs a loopback transfer (see the module docs): set up, drive, verify.
pub fn run_loopback(opts: &LoopbackOptions) -> Result<LoopbackReport, LoopbackError> {
    let mut loopback = Loopback::setup(opts)?;
    loopback.drive()?;
    loopback.verify()
}

/// A transfer in progress. The fields drop in the order they are declared
/// (when a step fails): the QPs and regions before the devices, the
/// devices before the namespaces.
struct Loopback<'o> {
    opts: &'o LoopbackOptions,
    /// Bytes per message (8 for atomics), and the slot of one message.
    size: u32,
    slot_len: usize,
    queues: u32,
    /// The ping and TCP exchange across the veth, when asked for.
    kernel_check: Option<JoinHandle<bool>>,
    /// The run of each (queue, QPN) of the requester's QPs, and of the
    /// responder's.
    runs_a: HashMap<(u32, u32), usize>,
    runs_b: HashMap<(u32, u32), usize>,
    runs: Vec<QpRun>,
    dev_b: Device,
    dev_a: Device,
    pair: VethPair,
    /// One message's bytes, read back to be checked.
    buf: Vec<u8>,
    report: LoopbackReport,
}

impl<'o> Loopback<'o> {
    /// Setup: the veth pair (bridged or not) with an MTU the path MTU fits
    /// in, a device on each side with the options' impairments, the QP
    /// pairs ([`create_runs`]), the READ sources filled, and the kernel
    /// traffic check started.
    fn setup(opts: &'o LoopbackOptions) -> Result<Self, LoopbackError> {
        if opts.qps == 0 || opts.messages == 0 {
            return Err(LoopbackError::Options(
                "qps and messages must be > 0".into(),
            ));
        }
        let size = if opts.op == LoopbackOp::Atomic {
            8
        } else {
            opts.size.max(1)
        };
        let pmtu = opts.mtu.bytes();
        // Link MTU: the PMTU plus IPv6 + UDP + BTH + RETH + ICRC, rounded up.
        let link_mtu = (pmtu + 128).max(1500);
        let queues = opts.queues.max(1);
        let cfg = PairConfig {
            mtu: link_mtu,
            queues,
        };
        let pair = if opts.bridge {
            VethPair::create_bridged(&cfg, queues)?
        } else {
            VethPair::create(&cfg)?
        };
        let dev_a = open_device(opts, &pair.a, queues)?;
        let dev_b = open_device(opts, &pair.b, queues)?;
        let imp = Impairment {
            drop_ppm: Impairment::ppm(opts.loss),
            ce_ppm: Impairment::ppm(opts.ce),
        };
        dev_a.set_impairment(imp)?;
        dev_b.set_impairment(imp)?;
        let (ip_a, ip_b) = (dev_a.ip(), dev_b.ip());
        let mac_b = dev_a.resolve_mac(ip_b)?;
        let mac_a = dev_b.resolve_mac(ip_a)?;
        let addrs = Addresses {
            ip_a,
            ip_b,
            mac_a,
            mac_b,
        };
        let slot_len = size as usize;
        let (runs, registered_bytes) = create_runs(opts, &dev_a, &dev_b, &addrs, slot_len, queues)?;
        let (runs_a, runs_b) = (index_by_qp(&runs, |r| &r.a), index_by_qp(&runs, |r| &r.b));
        if opts.op == LoopbackOp::Read {
            fill_read_sources(&runs, slot_len);
        }
        let kernel_check = opts
            .check_kernel_traffic
            .then(|| spawn_kernel_traffic(&pair));
        let report = LoopbackReport {
            attached_mode: dev_a.xdp_mode(),
            zero_copy: dev_a.is_zero_copy(0),
            registered_bytes,
            ..Default::default()
        };
        Ok(Loopback {
            opts,
            size,
            slot_len,
            queues,
            kernel_check,
            runs_a,
            runs_b,
            runs,
            dev_b,
            dev_a,
            pair,
            buf: vec![0u8; slot_len],
            report,
        })
    }

    /// Drive: (SEND) posts the first receives, then issues up to each QP's
    /// window and polls both sides' completions on every queue, checking
    /// each, until every message completed, the run is cancelled, or no
    /// completion came for the stall timeout. Times the transfer.
    fn drive(&mut self) -> Result<(), LoopbackError> {
        let opts = self.opts;
        let start = Instant::now();
        let mut last_progress = Instant::now();
        let mut wcs = vec![WorkCompletion::default(); 256];
        let total_messages: u64 = self.runs.iter().map(|r| r.total).sum();
        if opts.op == LoopbackOp::Send {
            self.prepost_receives()?;
        }
        while self.report.messages_completed < total_messages {
            if opts
                .cancel
                .as_ref()
                .is_some_and(|c| c.load(Ordering::Relaxed))
            {
                self.report.cancelled = true;
                break;
            }
            self.issue();
            let mut progressed = false;
            for q in 0..self.queues {
                progressed |= self.poll_requester(q, &mut wcs);
                progressed |= self.poll_responder(q, &mut wcs);
                self.count_post_errors(q);
            }
            if progressed {
                last_progress = Instant::now();
            } else if last_progress.elapsed() > opts.stall_timeout {
                self.report.stalled = true;
                break;
            } else {
                std::thread::sleep(Duration::from_micros(20));
            }
        }
        self.report.elapsed = start.elapsed();
        Ok(())
    }

    /// SEND: posts receives in every slot of each QP's responder region
    /// (twice the window).
    fn prepost_receives(&self) -> Result<(), LoopbackError> {
        for r in &self.runs {
            for s in 0..r.recv_slots {
                let wr = RecvWr {
                    wr_id: s as u64,
                    sge: r.rb.sge(s * self.slot_len, self.size),
                };
                // Thousands of QPs' receives fill the engine's work queue
                // (its inbox) faster than it takes them: wait for room.
                r.b.post_recv_within(wr, self.opts.stall_timeout)?;
            }
        }
        Ok(())
    }

    /// Issues up to the window on every QP (until a post fails: the send
    /// queue is full).
    fn issue(&mut self) {
        let (op, size, slot_len) = (self.opts.op, self.size, self.slot_len);
        for r in self.runs.iter_mut() {
            while r.may_issue(op) {
                let msg = r.issued;
                let slot = (msg % r.window as u64) as usize;
                let wr = r.work_request(op, msg, slot * slot_len, size, &mut self.buf);
                if r.a.post_send(wr).is_err() {
                    break;
                }
                r.slot_msg[slot] = msg;
                r.issued += 1;
            }
        }
    }

    /// Polls the requester's completions on queue `q` and checks each
    /// ([`Self::check_requester`]); returns whether there was any.
    fn poll_requester(&mut self, q: u32, wcs: &mut [WorkCompletion]) -> bool {
        let n = self.dev_a.poll_cq(q, wcs);
        for wc in &wcs[..n] {
            let Some(&i) = self.runs_a.get(&(q, wc.qpn)) else {
                continue;
            };
            if wc.status != WcStatus::Success {
                let r = &mut self.runs[i];
                self.report.failed_completions += 1;
                r.completed += 1;
                r.sends_completed += 1;
                self.report.messages_completed += 1;
                continue;
            }
            let ok = self.check_requester(i, wc.wr_id);
            let send = self.opts.op == LoopbackOp::Send;
            if ok {
                if !send {
                    self.report.bytes_verified += self.size as u64;
                }
            } else {
                self.report.data_errors += 1;
            }
            if !send {
                self.runs[i].completed += 1;
                self.report.messages_completed += 1;
            }
        }
        n > 0
    }

    /// Whether message `msg` of run `run` completed intact at the requester:
    /// a WRITE's bytes placed at the responder, a READ's read back, a
    /// fetch-add's original value not seen before. SENDs are checked at
    /// their receive ([`Self::poll_responder`]).
    fn check_requester(&mut self, run: usize, msg: u64) -> bool {
        let r = &mut self.runs[run];
        let buf = &mut self.buf;
        let slot = (msg % r.window as u64) as usize;
        let off = slot * self.slot_len;
        match self.opts.op {
            // WRITE completed = acknowledged = placed at the responder.
            LoopbackOp::Write => {
                r.rb.read(off, buf);
                (0..self.slot_len).all(|i| buf[i] == pattern(r.idx, msg, i))
            }
            // SEND is verified on the receive completion.
            LoopbackOp::Send => {
                r.sends_completed += 1;
                true
            }
            LoopbackOp::Read => {
                r.la.read(off, buf);
                (0..self.slot_len).all(|i| buf[i] == pattern(r.idx, slot as u64, i))
            }
            LoopbackOp::Atomic => {
                let mut w = [0u8; 8];
                r.la.read(off, &mut w);
                let orig = u64::from_le_bytes(w);
                let fresh = (orig as usize) < r.seen_orig.len() && !r.seen_orig[orig as usize];
                if fresh {
                    r.seen_orig[orig as usize] = true;
                }
                fresh
            }
        }
    }

    /// Polls the responder's completions on queue `q`: SEND receives, each
    /// checked (length and bytes) and its slot posted again while messages
    /// remain; returns whether there was any completion.
    fn poll_responder(&mut self, q: u32, wcs: &mut [WorkCompletion]) -> bool {
        let n = self.dev_b.poll_cq(q, wcs);
        for wc in &wcs[..n] {
            if self.opts.op != LoopbackOp::Send {
                continue;
            }
            let Some(&i) = self.runs_b.get(&(q, wc.qpn)) else {
                continue;
            };
            let (size, slot_len) = (self.size, self.slot_len);
            let r = &mut self.runs[i];
            let slot = wc.wr_id as usize;
            if wc.status != WcStatus::Success {
                self.report.failed_completions += 1;
            } else {
                let msg = r.completed;
                r.rb.read(slot * slot_len, &mut self.buf);
                let ok = wc.byte_len == size
                    && (0..slot_len).all(|i| self.buf[i] == pattern(r.idx, msg, i));
                if ok {
                    self.report.bytes_verified += size as u64;
                } else {
                    self.report.data_errors += 1;
                }
            }
            r.completed += 1;
            self.report.messages_completed += 1;
            // Receives complete in order: repost the slot for message
            // completed + recv_slots - 1.
            if r.completed + r.recv_slots as u64 <= r.total {
                let _ = r.b.post_recv(RecvWr {
                    wr_id: slot as u64,
                    sge: r.rb.sge(slot * slot_len, size),
                });
            }
        }
        n > 0
    }

    /// Work requests the engines of queue `q` refused after taking them
    /// count as failed completions.
    fn count_post_errors(&mut self, q: u32) {
        while let Some(e) = self
            .dev_a
            .poll_post_error(q)
            .or_else(|| self.dev_b.poll_post_error(q))
        {
            self.report.failed_completions += 1;
            let _ = e;
        }
    }

    /// Verify: (atomics) each remote word must equal its QP's number of
    /// fetch-adds; then the kernel traffic check's result, the steering
    /// and per-queue counters, both devices closed for their statistics,
    /// the rates, and the namespaces removed.
    fn verify(self) -> Result<LoopbackReport, LoopbackError> {
        let opts = self.opts;
        let mut report = self.report;
        let pair = self.pair;
        let dev_a = self.dev_a;
        let dev_b = self.dev_b;
        let runs = self.runs;
        // Atomics: the remote word must equal the number of fetch-adds.
        if opts.op == LoopbackOp::Atomic && !report.stalled && !report.cancelled {
            for r in &runs {
                let mut w = [0u8; 8];
                r.rb.read(0, &mut w);
                if u64::from_le_bytes(w) != r.total {
                    report.data_errors += 1;
                }
            }
        }
        report.kernel_traffic_ok = self.kernel_check.map(|h| h.join().unwrap_or(false));
        report.steer_requester = dev_a.steer_counters()?;
        report.steer_responder = dev_b.steer_counters()?;
        report.rx_per_queue_requester = rx_per_queue(&dev_a);
        report.rx_per_queue_responder = rx_per_queue(&dev_b);
        let sa = dev_a.close();
        let sb = dev_b.close();
        report.io_requester = sa;
        report.io_responder = sb;
        report.requester = sa.transport;
        report.responder = sb.transport;
        report.retransmitted_packets =
            sa.transport.retransmitted_packets + sb.transport.retransmitted_packets;
        let secs = report.elapsed.as_secs_f64().max(1e-9);
        report.gbps = report.bytes_verified as f64 * 8.0 / secs / 1e9;
        report.mpps = (sa.transport.sent_pkts + sb.transport.sent_pkts) as f64 / secs / 1e6;
        report.data_mpps = sa.transport.sent_pkts.max(sb.transport.sent_pkts) as f64 / secs / 1e6;
        drop(pair);
        Ok(report)
    }
}

/// RoCE packets each queue of `dev` received on its own RX ring.
fn rx_per_queue(dev: &Device) -> Vec<u64> {
    (0..dev.queues())
        .map(|q| dev.stats(q).map_or(0, |s| s.socket.rx_packets))
        .collect()
}

/// READ: the responder's buffer holds the pattern of each slot.
fn fill_read_sources(runs: &[QpRun], slot_len: usize) {
    for r in runs {
        let mut buf = vec![0u8; slot_len];
        for s in 0..r.window {
            fill(&mut buf, r.idx, s as u64);
            r.rb.write(s * slot_len, &buf);
        }
    }
}

/// Pings b from a and runs a TCP echo across the veth while the engines
/// run; true if both worked.
fn spawn_kernel_traffic(pair: &VethPair) -> std::thread::JoinHandle<bool> {
    let a = pair.a.clone();
    let b = pair.b.clone();
    std::thread::spawn(move || {
        use std::io::{Read, Write};
        let ping_ok = a
            .command("ping")
            .args(["-c", "3", "-i", "0.1", "-W", "2", &b.ipv4.to_string()])
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false);
        let b2 = b.clone();
        let server = std::thread::spawn(move || -> std::io::Result<()> {
            b2.enter().map_err(std::io::Error::other)?;
            let l = std::net::TcpListener::bind((b2.ipv4, 18515))?;
            let (mut c, _) = l.accept()?;
            let mut buf = [0u8; 4];
            c.read_exact(&mut buf)?;
            c.write_all(&buf)
        });
        std::thread::sleep(Duration::from_millis(100));
        let tcp_ok = std::thread::spawn(move || -> std::io::Result<bool> {
            a.enter().map_err(std::io::Error::other)?;
            let mut c = std::net::TcpStream::connect_timeout(
                &(b.ipv4, 18515).into(),
                Duration::from_secs(3),
            )?;
            c.write_all(b"ping")?;
            let mut buf = [0u8; 4];
            c.read_exact(&mut buf)?;
            Ok(&buf == b"ping")
        })
        .join()
        .map(|r| r.unwrap_or(false))
        .unwrap_or(false);
        let server_ok = server.join().map(|r| r.is_ok()).unwrap_or(false);
        ping_ok && tcp_ok && server_ok
    })
}
