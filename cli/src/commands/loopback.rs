//! `roce-xdp loopback`: two engines in two network namespaces joined by a
//! veth pair, a verified transfer between them, throughput and counters.
//! Everything it creates (namespaces, veth, XDP programs) is removed when
//! it exits, also on Ctrl-C.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::{Args, ValueEnum};
use engine::driver::{capture_channel, PcapWriter, PollMode};
use engine::endpoint::MAX_QPS_PER_ENGINE;
use engine::io::ZeroCopy;
use engine::nic::AttachMode;
use engine::rc::Mtu;
use engine::testbed::floor::{run_echo_floor, FloorOptions};
use engine::testbed::netns::is_root;
use engine::testbed::scenarios::loopback::{
    run_loopback, LoopbackOp, LoopbackOptions, LoopbackReport,
};
use serde_json::json;

use crate::common::args::{ModeArg, OpArg};

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum PollArg {
    /// Spin briefly, then sleep in poll(2) until the next deadline.
    Adaptive,
    /// Spin on the rings (one core per engine thread).
    Busy,
}

/// Arguments of `roce-xdp loopback`.
#[derive(Debug, Args)]
pub struct LoopbackArgs {
    /// RDMA operation.
    #[arg(long, value_enum, default_value = "write")]
    op: OpArg,
    /// Number of messages (in total, over all QPs).
    #[arg(long, default_value_t = 1000)]
    messages: u64,
    /// Message size in bytes (atomics are always 8).
    #[arg(long, default_value_t = 65536)]
    size: u32,
    /// Path MTU: 256, 512, 1024, 2048 or 4096.
    #[arg(long, default_value_t = 4096)]
    mtu: u32,
    /// Number of queue pairs.
    #[arg(long, default_value_t = 1)]
    qps: u32,
    /// Engine threads (queues) per side; QP i is created on queue i % queues.
    #[arg(long, default_value_t = 1)]
    queues: u32,
    /// Join the two namespaces through a Linux bridge: frames then arrive
    /// on a queue chosen by their flow's hash, as RSS spreads them on a NIC
    /// (with a plain veth pair a frame sent from queue q arrives on queue q).
    #[arg(long)]
    bridge: bool,
    /// Drop this fraction of RoCE frames in the XDP program of both sides
    /// (e.g. 0.01), to exercise retransmission.
    #[arg(long, default_value_t = 0.0)]
    loss: f64,
    /// Write the RoCE frames both engines received and sent to FILE (pcap).
    #[arg(long, value_name = "FILE")]
    pcap: Option<PathBuf>,
    /// Print one JSON object instead of the summary.
    #[arg(long)]
    json: bool,
    /// XDP attach mode.
    #[arg(long, value_enum, default_value = "auto")]
    mode: ModeArg,
    /// Use IPv6 addresses (GIDs) instead of IPv4.
    #[arg(long)]
    ipv6: bool,
    /// Engine poll loop.
    #[arg(long, value_enum, default_value = "adaptive")]
    poll: PollArg,
    /// Tag every RoCE frame with this 802.1Q VLAN id (1-4094), priority 3.
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=4094))]
    vlan: Option<u16>,
    /// Outstanding messages per QP.
    #[arg(long, default_value_t = 16)]
    window: u32,
    /// Also measure the I/O floor: a bare AF_XDP echo loop over a fresh
    /// veth pair with frames of the same size, and print the ratio.
    #[arg(long)]
    floor: bool,
}

pub fn run(a: LoopbackArgs) -> anyhow::Result<()> {
    let Some(mtu) = Mtu::from_bytes(a.mtu) else {
        bail!(
            "--mtu must be one of 256, 512, 1024, 2048, 4096 (got {})",
            a.mtu
        );
    };
    if !(0.0..1.0).contains(&a.loss) {
        bail!("--loss is a probability in [0, 1) (got {})", a.loss);
    }
    if a.messages == 0 || a.qps == 0 || a.queues == 0 {
        bail!("--messages, --qps and --queues must be at least 1");
    }
    let most = u64::from(a.queues) * u64::from(MAX_QPS_PER_ENGINE);
    if u64::from(a.qps) > most {
        bail!(
            "--qps {} is more than {} queue(s) hold ({MAX_QPS_PER_ENGINE} QPs per engine): lower --qps or raise --queues",
            a.qps,
            a.queues
        );
    }
    if !is_root() {
        bail!(
            "loopback creates network namespaces and attaches XDP programs: run it as root (sudo)"
        );
    }

    let cancel = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, cancel.clone())
            .context("installing the signal handler")?;
    }

    let (capture, writer) = match &a.pcap {
        Some(path) => {
            let (sink, rx) = capture_channel(1 << 16);
            let mut w =
                PcapWriter::create(path).with_context(|| format!("creating {}", path.display()))?;
            let h = std::thread::spawn(move || -> std::io::Result<u64> {
                let mut n = 0;
                for f in rx {
                    w.write(&f)?;
                    n += 1;
                }
                w.finish()?;
                Ok(n)
            });
            (Some(sink), Some(h))
        }
        None => (None, None),
    };
    let dropped_capture = capture.clone();

    let op = match a.op {
        OpArg::Write => LoopbackOp::Write,
        OpArg::Send => LoopbackOp::Send,
        OpArg::Read => LoopbackOp::Read,
        OpArg::Atomic => LoopbackOp::Atomic,
    };
    let opts = LoopbackOptions {
        op,
        messages: a.messages,
        size: a.size,
        mtu,
        qps: a.qps,
        queues: a.queues,
        bridge: a.bridge,
        loss: a.loss,
        ce: 0.0,
        mode: a.mode.into(),
        ipv6: a.ipv6,
        zero_copy: ZeroCopy::Auto,
        poll: match a.poll {
            PollArg::Adaptive => PollMode::default(),
            PollArg::Busy => PollMode::Busy,
        },
        window: a.window.max(1),
        // 16.8 ms ACK timeout: long enough not to fire spuriously when the
        // engine threads share a small, busy machine; gaps are recovered
        // earlier by sequence-error NAKs.
        ack_timeout: 12,
        capture,
        vlan: a.vlan.map(|vid| engine::wire::VlanTag {
            pcp: 3,
            dei: false,
            vid,
        }),
        check_kernel_traffic: false,
        stall_timeout: Duration::from_secs(10),
        cancel: Some(cancel),
    };
    if !a.json {
        eprintln!(
            "loopback: {} x {} bytes ({:?}, PMTU {}, {} QP(s), {} queue(s){}) between two network namespaces over {}...",
            a.messages,
            if op == LoopbackOp::Atomic { 8 } else { a.size },
            a.op,
            a.mtu,
            a.qps,
            a.queues,
            if a.loss > 0.0 { format!(", {:.2}% injected loss", a.loss * 100.0) } else { String::new() },
            if a.bridge { "veth and a Linux bridge" } else { "veth" },
        );
    }
    let result = run_loopback(&opts);
    let capture_dropped = dropped_capture.as_ref().map(|c| c.dropped()).unwrap_or(0);
    drop(opts);
    drop(dropped_capture);
    let captured = match writer {
        Some(h) => Some(
            h.join()
                .map_err(|_| anyhow::anyhow!("pcap writer panicked"))??,
        ),
        None => None,
    };
    let r = result.context("loopback setup failed")?;
    let ok = r.success(a.messages);
    let floor = if a.floor && ok {
        let frame_len = mtu.bytes() as usize + if a.ipv6 { 98 } else { 78 };
        let fo = FloorOptions {
            frame_len,
            packets: 200_000,
            mode: match a.mode {
                ModeArg::Generic => AttachMode::Generic,
                _ => AttachMode::Native,
            },
            ..Default::default()
        };
        Some(run_echo_floor(&fo).context("echo floor")?)
    } else {
        None
    };
    if a.json {
        let mut v = to_json(&a, &r, captured, capture_dropped);
        if let Some(f) = &floor {
            v["floor_mpps"] = json!(f.mpps);
            v["floor_gbps"] = json!(f.gbps);
            v["data_mpps_over_floor"] = json!(r.data_mpps / f.mpps.max(1e-12));
        }
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        print_summary(&a, &r, captured, capture_dropped);
        if let Some(f) = &floor {
            println!(
                "  I/O floor (bare AF_XDP echo, same frame size): {:.3} Mpps; engine data packets {:.3} Mpps = {:.2}x the floor",
                f.mpps,
                r.data_mpps,
                r.data_mpps / f.mpps.max(1e-12)
            );
        }
    }
    if !ok {
        bail!(
            "loopback failed: {} of {} messages completed, {} data errors, {} failed completions{}{}",
            r.messages_completed,
            a.messages,
            r.data_errors,
            r.failed_completions,
            if r.stalled { ", transfer stalled" } else { "" },
            if r.cancelled { ", interrupted" } else { "" }
        );
    }
    Ok(())
}

fn to_json(
    a: &LoopbackArgs,
    r: &LoopbackReport,
    captured: Option<u64>,
    capture_dropped: u64,
) -> serde_json::Value {
    let counters = |c: &engine::rc::Counters| {
        serde_json::Value::Object(c.iter().map(|(k, v)| (k.to_string(), json!(v))).collect())
    };
    let steer = |s: &engine::nic::SteerCounters| {
        json!({"seen": s.seen, "redirected": s.redirected, "passed": s.passed, "no_socket": s.no_socket,
               "dropped_impairment": s.dropped_impairment, "ce_marked": s.ce_marked})
    };
    let io = |q: &engine::driver::QueueStats| {
        json!({"rx_packets": q.socket.rx_packets, "tx_packets": q.socket.tx_packets,
               "rx_multi_buffer": q.socket.rx_multi_buffer, "rx_linearized": q.socket.rx_linearized,
               "tx_ring_full": q.socket.tx_full,
               "kernel_rx_dropped": q.kernel.rx_dropped, "kernel_rx_ring_full": q.kernel.rx_ring_full,
               "kernel_fill_ring_empty": q.kernel.rx_fill_ring_empty_descs,
               "kernel_tx_invalid_descs": q.kernel.tx_invalid_descs,
               "loops": q.loops, "sleeps": q.sleeps,
               "app_wakes": q.app_wakes, "woken_by_posts": q.woken_by_posts,
               "rx_handoff": q.rx_handoff, "rx_handoff_dropped": q.rx_handoff_dropped,
               "handoff_received": q.handoff_received, "qp_migrations": q.qp_migrations,
               "work_forwarded": q.work_forwarded})
    };
    json!({
        "op": format!("{:?}", a.op).to_lowercase(),
        "messages": a.messages,
        "size": if matches!(a.op, OpArg::Atomic) { 8 } else { a.size },
        "mtu": a.mtu,
        "qps": a.qps,
        "queues": a.queues,
        "bridge": a.bridge,
        "rx_packets_per_queue": {"requester": r.rx_per_queue_requester, "responder": r.rx_per_queue_responder},
        "loss": a.loss,
        "ipv6": a.ipv6,
        "vlan": a.vlan,
        "xdp_mode": r.attached_mode,
        "zero_copy": r.zero_copy,
        "messages_completed": r.messages_completed,
        "bytes_verified": r.bytes_verified,
        "registered_bytes": r.registered_bytes,
        "data_errors": r.data_errors,
        "failed_completions": r.failed_completions,
        "retransmitted_packets": r.retransmitted_packets,
        "elapsed_s": r.elapsed.as_secs_f64(),
        "gbps": r.gbps,
        "mpps": r.mpps,
        "data_mpps": r.data_mpps,
        "stalled": r.stalled,
        "cancelled": r.cancelled,
        "requester": counters(&r.requester),
        "responder": counters(&r.responder),
        "io_requester": io(&r.io_requester),
        "io_responder": io(&r.io_responder),
        "xdp_requester": steer(&r.steer_requester),
        "xdp_responder": steer(&r.steer_responder),
        "pcap_frames": captured,
        "pcap_dropped": capture_dropped,
    })
}

fn print_summary(
    a: &LoopbackArgs,
    r: &LoopbackReport,
    captured: Option<u64>,
    capture_dropped: u64,
) {
    let ok = r.success(a.messages);
    println!(
        "{} {} of {} messages completed, {} bytes verified byte-for-byte, {} data errors",
        if ok { "OK:" } else { "FAILED:" },
        r.messages_completed,
        a.messages,
        r.bytes_verified,
        r.data_errors
    );
    println!(
        "  {:.3} s, {:.2} Gb/s goodput, {:.3} Mpps (both directions), XDP {} mode{}",
        r.elapsed.as_secs_f64(),
        r.gbps,
        r.mpps,
        r.attached_mode,
        if r.zero_copy {
            ", zero-copy"
        } else {
            ", copy mode"
        }
    );
    println!(
        "  packets: requester sent {} / received {}, responder sent {} / received {}; retransmitted {}, timeouts {}",
        r.requester.sent_pkts,
        r.requester.rcvd_pkts,
        r.responder.sent_pkts,
        r.responder.rcvd_pkts,
        r.retransmitted_packets,
        r.requester.timeouts
    );
    println!(
        "  memory registered for the messages: {:.1} MiB (each QP's messages in flight at most, both sides)",
        r.registered_bytes as f64 / (1 << 20) as f64
    );
    println!(
        "  XDP: redirected {} + {}, passed to the kernel {} + {}, dropped by --loss {} + {}",
        r.steer_requester.redirected,
        r.steer_responder.redirected,
        r.steer_requester.passed,
        r.steer_responder.passed,
        r.steer_requester.dropped_impairment,
        r.steer_responder.dropped_impairment
    );
    if a.queues > 1 {
        println!(
            "  queues: received per queue: requester {:?}, responder {:?}; handed to another queue (rx_handoff) {} + {}, QPs moved to the queue their packets arrive on {} + {}",
            r.rx_per_queue_requester,
            r.rx_per_queue_responder,
            r.io_requester.rx_handoff,
            r.io_responder.rx_handoff,
            r.io_requester.qp_migrations,
            r.io_responder.qp_migrations
        );
    }
    let kernel_drops = |q: &engine::driver::QueueStats| q.kernel.rx_dropped + q.kernel.rx_ring_full;
    let drops = kernel_drops(&r.io_requester) + kernel_drops(&r.io_responder);
    if drops > 0 {
        println!("  AF_XDP: {drops} frames dropped by the kernel (RX ring full or no free frame); recovered by retransmission");
    }
    if let (Some(n), Some(p)) = (captured, &a.pcap) {
        println!(
            "  wrote {n} frames to {} ({capture_dropped} dropped by the bounded capture queue)",
            p.display()
        );
    }
}
