//! `roce-xdp loopback`: two engines in two network namespaces joined by a
//! veth pair, a transfer between them, and byte-exact verification of
//! every message. Used by the CLI and by the datapath tests.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
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

/// Runs a loopback transfer.
pub fn run_loopback(opts: &LoopbackOptions) -> Result<LoopbackReport, LoopbackError> {
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

    let dev_cfg = |side: &Side| {
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
        c
    };
    let dev_a = Device::open(dev_cfg(&pair.a))?;
    let dev_b = Device::open(dev_cfg(&pair.b))?;
    let imp = Impairment {
        drop_ppm: Impairment::ppm(opts.loss),
        ce_ppm: Impairment::ppm(opts.ce),
    };
    dev_a.set_impairment(imp)?;
    dev_b.set_impairment(imp)?;

    let ip_a: IpAddr = dev_a.ip();
    let ip_b: IpAddr = dev_b.ip();
    let mac_b = dev_a.resolve_mac(ip_b)?;
    let mac_a = dev_b.resolve_mac(ip_a)?;

    let window = opts.window.max(1) as usize;
    let slot_len = size as usize;
    let mut runs = Vec::new();
    let mut registered_bytes = 0u64;
    let mut idle: Vec<Option<(MemoryRegion, MemoryRegion)>> = vec![None; queues as usize];
    for i in 0..opts.qps {
        let q = i % queues;
        let caps = QpCaps {
            max_send_wr: (window as u32 * 2).max(16),
            max_recv_wr: (window as u32 * 2).max(16),
        };
        let qa = dev_a.create_qp(q, caps)?;
        let qb = dev_b.create_qp(q, caps)?;
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
        // A QP with no message (more QPs than messages) posts nothing: the
        // QPs of a queue share one slot on each side (at 4096 QPs and 1000
        // messages, a slot each was 3096 x 2 x 64 KiB: 387 MiB).
        let (la, rb) = if total == 0 {
            let idle = &mut idle[q as usize];
            if idle.is_none() {
                let la = dev_a.register_memory(q, slot_len, Access::ALL)?;
                let rb = dev_b.register_memory(q, slot_len, Access::ALL)?;
                registered_bytes += 2 * slot_len as u64;
                *idle = Some((la, rb));
            }
            idle.clone().expect("registered above")
        } else {
            let la = dev_a.register_memory(q, slot_len * qp_window, Access::ALL)?;
            let rb = dev_b.register_memory(q, slot_len * recv_slots, Access::ALL)?;
            registered_bytes += (slot_len * (qp_window + recv_slots)) as u64;
            (la, rb)
        };
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
                mac: mac_b,
                ip: ip_b,
            },
            copts,
        )?;
        qb.connect(
            RemoteQp {
                qpn: qa.qpn(),
                psn: copts.sq_psn,
                mac: mac_a,
                ip: ip_a,
            },
            ConnectOptions {
                sq_psn: psn_b,
                access: opts.op.responder_access(),
                ..copts
            },
        )?;
        runs.push(QpRun {
            idx: i,
            a: qa,
            b: qb,
            la,
            rb,
            window: qp_window,
            recv_slots,
            total,
            issued: 0,
            completed: 0,
            sends_completed: 0,
            slot_msg: vec![u64::MAX; qp_window],
            seen_orig: if opts.op == LoopbackOp::Atomic {
                vec![false; total as usize]
            } else {
                Vec::new()
            },
        });
    }

    // Each completion's QP run, by (queue, QPN) on each side: a search over
    // the runs per completion cost O(QPs) (4M comparisons at 4096 QPs and
    // 1000 messages).
    let by_qp = |side: fn(&QpRun) -> &QueuePair| -> HashMap<(u32, u32), usize> {
        runs.iter()
            .enumerate()
            .map(|(i, r)| ((side(r).queue(), side(r).qpn()), i))
            .collect()
    };
    let (runs_a, runs_b) = (by_qp(|r| &r.a), by_qp(|r| &r.b));

    // READ: the responder's buffer holds the pattern of each slot.
    if opts.op == LoopbackOp::Read {
        for r in &runs {
            let mut buf = vec![0u8; slot_len];
            for s in 0..r.window {
                fill(&mut buf, r.idx, s as u64);
                r.rb.write(s * slot_len, &buf);
            }
        }
    }

    let kernel_check = opts
        .check_kernel_traffic
        .then(|| spawn_kernel_traffic(&pair));

    let mut report = LoopbackReport {
        attached_mode: dev_a.attached_mode().to_string(),
        zero_copy: dev_a.is_zero_copy(0),
        registered_bytes,
        ..Default::default()
    };
    let start = Instant::now();
    let mut last_progress = Instant::now();
    let mut buf = vec![0u8; slot_len];
    let mut wcs = vec![WorkCompletion::default(); 256];
    let total_messages: u64 = runs.iter().map(|r| r.total).sum();

    // SEND: pre-post receives for twice the window.
    if opts.op == LoopbackOp::Send {
        for r in &runs {
            for s in 0..r.recv_slots {
                let wr = RecvWr {
                    wr_id: s as u64,
                    sge: r.rb.sge(s * slot_len, size),
                };
                // Thousands of QPs' receives fill the engine's work queue
                // (its inbox) faster than it takes them: wait for room.
                r.b.post_recv_within(wr, opts.stall_timeout)?;
            }
        }
    }

    while report.messages_completed < total_messages {
        if opts
            .cancel
            .as_ref()
            .is_some_and(|c| c.load(Ordering::Relaxed))
        {
            report.cancelled = true;
            break;
        }
        // Issue up to the window on every QP.
        for r in runs.iter_mut() {
            while r.issued < r.total
                && r.issued - r.completed < r.window as u64
                && (opts.op != LoopbackOp::Send || r.issued - r.sends_completed < r.window as u64)
            {
                let msg = r.issued;
                let slot = (msg % r.window as u64) as usize;
                let off = slot * slot_len;
                let wr = match opts.op {
                    LoopbackOp::Write | LoopbackOp::Send => {
                        fill(&mut buf, r.idx, msg);
                        r.la.write(off, &buf);
                        let op = if opts.op == LoopbackOp::Write {
                            SendOp::Write
                        } else {
                            SendOp::Send
                        };
                        SendWr {
                            remote_addr: r.rb.addr() + off as u64,
                            rkey: r.rb.rkey,
                            ..SendWr::new(msg, op, r.la.sge(off, size))
                        }
                    }
                    LoopbackOp::Read => SendWr {
                        remote_addr: r.rb.addr() + off as u64,
                        rkey: r.rb.rkey,
                        ..SendWr::new(msg, SendOp::Read, r.la.sge(off, size))
                    },
                    LoopbackOp::Atomic => SendWr {
                        remote_addr: r.rb.addr(),
                        rkey: r.rb.rkey,
                        compare_add: 1,
                        ..SendWr::new(msg, SendOp::FetchAdd, r.la.sge(off, 8))
                    },
                };
                if r.a.post_send(wr).is_err() {
                    break;
                }
                r.slot_msg[slot] = msg;
                r.issued += 1;
            }
        }

        let mut progressed = false;
        for q in 0..queues {
            // Requester completions.
            let n = dev_a.poll_cq(q, &mut wcs);
            for wc in &wcs[..n] {
                progressed = true;
                let Some(&i) = runs_a.get(&(q, wc.qpn)) else {
                    continue;
                };
                let r = &mut runs[i];
                if wc.status != WcStatus::Success {
                    report.failed_completions += 1;
                    r.completed += 1;
                    r.sends_completed += 1;
                    report.messages_completed += 1;
                    continue;
                }
                let msg = wc.wr_id;
                let slot = (msg % r.window as u64) as usize;
                let off = slot * slot_len;
                let ok = match opts.op {
                    // WRITE completed = acknowledged = placed at the responder.
                    LoopbackOp::Write => {
                        r.rb.read(off, &mut buf);
                        (0..slot_len).all(|i| buf[i] == pattern(r.idx, msg, i))
                    }
                    // SEND is verified on the receive completion.
                    LoopbackOp::Send => {
                        r.sends_completed += 1;
                        true
                    }
                    LoopbackOp::Read => {
                        r.la.read(off, &mut buf);
                        (0..slot_len).all(|i| buf[i] == pattern(r.idx, slot as u64, i))
                    }
                    LoopbackOp::Atomic => {
                        let mut w = [0u8; 8];
                        r.la.read(off, &mut w);
                        let orig = u64::from_le_bytes(w);
                        let fresh =
                            (orig as usize) < r.seen_orig.len() && !r.seen_orig[orig as usize];
                        if fresh {
                            r.seen_orig[orig as usize] = true;
                        }
                        fresh
                    }
                };
                if ok {
                    if opts.op != LoopbackOp::Send {
                        report.bytes_verified += size as u64;
                    }
                } else {
                    report.data_errors += 1;
                }
                if opts.op != LoopbackOp::Send {
                    r.completed += 1;
                    report.messages_completed += 1;
                }
            }
            // Responder completions (SEND receives).
            let n = dev_b.poll_cq(q, &mut wcs);
            for wc in &wcs[..n] {
                progressed = true;
                if opts.op != LoopbackOp::Send {
                    continue;
                }
                let Some(&i) = runs_b.get(&(q, wc.qpn)) else {
                    continue;
                };
                let r = &mut runs[i];
                let slot = wc.wr_id as usize;
                if wc.status != WcStatus::Success {
                    report.failed_completions += 1;
                } else {
                    let msg = r.completed;
                    r.rb.read(slot * slot_len, &mut buf);
                    let ok = wc.byte_len == size
                        && (0..slot_len).all(|i| buf[i] == pattern(r.idx, msg, i));
                    if ok {
                        report.bytes_verified += size as u64;
                    } else {
                        report.data_errors += 1;
                    }
                }
                r.completed += 1;
                report.messages_completed += 1;
                // Receives complete in order: repost the slot for message
                // completed + recv_slots - 1.
                if r.completed + r.recv_slots as u64 <= r.total {
                    let _ = r.b.post_recv(RecvWr {
                        wr_id: slot as u64,
                        sge: r.rb.sge(slot * slot_len, size),
                    });
                }
            }
            while let Some(e) = dev_a
                .poll_post_error(q)
                .or_else(|| dev_b.poll_post_error(q))
            {
                report.failed_completions += 1;
                let _ = e;
            }
        }
        if progressed {
            last_progress = Instant::now();
        } else if last_progress.elapsed() > opts.stall_timeout {
            report.stalled = true;
            break;
        } else {
            std::thread::sleep(Duration::from_micros(20));
        }
    }
    report.elapsed = start.elapsed();

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

    report.kernel_traffic_ok = kernel_check.map(|h| h.join().unwrap_or(false));
    report.steer_requester = dev_a.steer_counters()?;
    report.steer_responder = dev_b.steer_counters()?;
    let rx = |dev: &Device| {
        (0..dev.queues())
            .map(|q| dev.stats(q).map_or(0, |s| s.socket.rx_packets))
            .collect::<Vec<u64>>()
    };
    report.rx_per_queue_requester = rx(&dev_a);
    report.rx_per_queue_responder = rx(&dev_b);
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
