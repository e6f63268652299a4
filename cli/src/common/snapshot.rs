//! Builds the stats channel's snapshot (engine::stats) from a running
//! verbs [`Device`]: per-queue transport counters (rxe names), AF_XDP
//! socket and kernel counters, the current DCQCN rate of every QP, and
//! the XDP program's counters.

use std::time::Instant;

use engine::driver::QueueStats;
use engine::stats::{QueueSnapshot, Snapshot};
use engine::verbs::Device;

/// `(name, value)` pairs of one queue's statistics, in display order.
pub fn queue_counters(s: &QueueStats) -> Vec<(String, u64)> {
    let mut v: Vec<(String, u64)> = s
        .transport
        .iter()
        .map(|(n, x)| (n.to_string(), x))
        .collect();
    let k = &s.socket;
    for (n, x) in [
        ("xsk_rx_packets", k.rx_packets),
        ("xsk_rx_bytes", k.rx_bytes),
        ("xsk_rx_multi_buffer", k.rx_multi_buffer),
        ("xsk_rx_linearized", k.rx_linearized),
        ("xsk_rx_bad_descs", k.rx_bad_descs),
        ("xsk_tx_packets", k.tx_packets),
        ("xsk_tx_bytes", k.tx_bytes),
        ("xsk_tx_full", k.tx_full),
        ("xsk_tx_kicks", k.tx_kicks),
        ("xsk_rx_kicks", k.rx_kicks),
    ] {
        v.push((n.into(), x));
    }
    let k = &s.kernel;
    for (n, x) in [
        ("kernel_rx_dropped", k.rx_dropped),
        ("kernel_rx_invalid_descs", k.rx_invalid_descs),
        ("kernel_tx_invalid_descs", k.tx_invalid_descs),
        ("kernel_rx_ring_full", k.rx_ring_full),
        (
            "kernel_rx_fill_ring_empty_descs",
            k.rx_fill_ring_empty_descs,
        ),
        ("kernel_tx_ring_empty_descs", k.tx_ring_empty_descs),
        ("engine_loops", s.loops),
        ("engine_sleeps", s.sleeps),
        ("engine_app_wakes", s.app_wakes),
        ("engine_woken_by_posts", s.woken_by_posts),
        // Multi-queue (docs/multi-queue.md): packets that arrived on this
        // queue for a QP another queue held, and what moved here.
        ("rx_handoff", s.rx_handoff),
        ("rx_handoff_dropped", s.rx_handoff_dropped),
        ("handoff_received", s.handoff_received),
        ("qp_migrations", s.qp_migrations),
        ("work_forwarded", s.work_forwarded),
    ] {
        v.push((n.into(), x));
    }
    v
}

/// A snapshot of every queue of `dev`.
pub fn of_device(dev: &Device, iface: &str, cores: &[usize], started: Instant) -> Snapshot {
    let xdp = match dev.steer_counters() {
        Ok(c) => vec![
            ("seen".to_string(), c.seen),
            ("redirected".into(), c.redirected),
            ("passed".into(), c.passed),
            ("no_socket".into(), c.no_socket),
            ("dropped_impairment".into(), c.dropped_impairment),
            ("ce_marked".into(), c.ce_marked),
        ],
        Err(_) => Vec::new(),
    };
    let queues = (0..dev.queues())
        .map(|q| {
            let stats = dev.stats(q).ok();
            QueueSnapshot {
                queue: q,
                core: (!cores.is_empty()).then(|| cores[q as usize % cores.len()]),
                zero_copy: dev.is_zero_copy(q),
                counters: stats.as_ref().map(queue_counters).unwrap_or_default(),
                qp_rates: stats
                    .map(|s| s.qp_rates.as_slice().to_vec())
                    .unwrap_or_default(),
            }
        })
        .collect();
    Snapshot {
        iface: iface.to_string(),
        pid: std::process::id(),
        uptime_ns: started.elapsed().as_nanos() as u64,
        xdp_mode: dev.attached_mode().to_string(),
        zero_copy: (0..dev.queues()).all(|q| dev.is_zero_copy(q)),
        xdp,
        queues,
        steering: None,
    }
}
