//! Builds the stats channel's snapshot (engine::stats) from a running
//! verbs [`Device`]: per-queue transport counters (rxe names), AF_XDP
//! socket and kernel counters, the current DCQCN rate of every QP, and
//! the XDP program's counters.

use std::time::Instant;

use engine::stats::{queue_counters, xdp_counters, QueueSnapshot, Snapshot};
use engine::verbs::Device;

/// A snapshot of every queue of `dev`.
pub fn of_device(dev: &Device, iface: &str, cores: &[usize], started: Instant) -> Snapshot {
    let xdp = dev
        .steer_counters()
        .map(|c| xdp_counters(&c))
        .unwrap_or_default();
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
        xdp_mode: dev.xdp_mode(),
        zero_copy: (0..dev.queues()).all(|q| dev.is_zero_copy(q)),
        xdp,
        queues,
        steering: None,
        cm: dev.cm_counters(),
        processes: Vec::new(),
    }
}
