//! What one snapshot reports ([`Snapshot`], [`QueueSnapshot`]) and its
//! JSON document (layout in the module docs of `stats`).

use std::fmt::Write as _;

use super::json::json_str;

use super::SCHEMA_VERSION;

/// `(name, value)` pairs of one queue's statistics, in display order.
pub fn queue_counters(s: &crate::driver::QueueStats) -> Vec<(String, u64)> {
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
        ("xsk_tx_completed_frames", k.tx_completed_frames),
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
        // Frames to the engine's own address, received without the wire.
        ("loopback_frames", s.loopback_frames),
        ("loopback_bytes", s.loopback_bytes),
    ] {
        v.push((n.into(), x));
    }
    v
}

/// `(name, value)` pairs of the XDP program's counters, in display order.
pub fn xdp_counters(c: &crate::nic::SteerCounters) -> Vec<(String, u64)> {
    vec![
        ("seen".to_string(), c.seen),
        ("redirected".into(), c.redirected),
        ("passed".into(), c.passed),
        ("no_socket".into(), c.no_socket),
        ("dropped_impairment".into(), c.dropped_impairment),
        ("ce_marked".into(), c.ce_marked),
    ]
}

/// Counters of one queue's engine.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct QueueSnapshot {
    pub queue: u32,
    /// The core the engine thread is pinned to, if pinned.
    pub core: Option<usize>,
    /// Whether this queue's AF_XDP socket is bound in zero-copy mode (what
    /// the kernel reports after the bind, not what was asked for).
    pub zero_copy: bool,
    /// `(name, value)` in display order.
    pub counters: Vec<(String, u64)>,
    /// Current DCQCN rate of each QP, `(qpn, bit/s)`.
    pub qp_rates: Vec<(u32, f64)>,
}

/// Everything one snapshot reports.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    pub iface: String,
    pub pid: u32,
    /// Nanoseconds since the engines started.
    pub uptime_ns: u64,
    pub xdp_mode: String,
    pub zero_copy: bool,
    /// XDP program counters (summed over CPUs).
    pub xdp: Vec<(String, u64)>,
    pub queues: Vec<QueueSnapshot>,
    /// Queue coverage (`docs/queue-coverage.md`); None: not reported.
    pub steering: Option<crate::nic::SteeringStatus>,
    /// The RDMA CM's counters (the drop-in librdmacm's agent, when the
    /// program uses it; docs/rdma-cm-drop-in.md); None: no CM.
    pub cm: Option<Vec<(String, u64)>>,
}

fn json_counters(out: &mut String, c: &[(String, u64)]) {
    out.push('{');
    for (i, (k, v)) in c.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        json_str(out, k);
        let _ = write!(out, ":{v}");
    }
    out.push('}');
}

/// `{"qpn":gbps,...}`; a non-finite rate (never expected) is `null`.
fn json_rates_gbps(out: &mut String, rates: &[(u32, f64)]) {
    out.push('{');
    for (i, (qpn, bps)) in rates.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let gbps = bps / 1e9;
        if gbps.is_finite() {
            let _ = write!(out, "\"{qpn}\":{gbps:.3}");
        } else {
            let _ = write!(out, "\"{qpn}\":null");
        }
    }
    out.push('}');
}

impl Snapshot {
    /// The JSON document (layout in the module docs).
    pub fn to_json(&self) -> String {
        let mut s = String::with_capacity(1024);
        let _ = write!(s, "{{\"schema_version\":{SCHEMA_VERSION},\"iface\":");
        json_str(&mut s, &self.iface);
        let _ = write!(
            s,
            ",\"pid\":{},\"uptime_ns\":{},\"xdp_mode\":",
            self.pid, self.uptime_ns
        );
        json_str(&mut s, &self.xdp_mode);
        let _ = write!(s, ",\"zero_copy\":{},\"xdp\":", self.zero_copy);
        json_counters(&mut s, &self.xdp);
        s.push_str(",\"queues\":[");
        for (i, q) in self.queues.iter().enumerate() {
            if i > 0 {
                s.push(',');
            }
            let _ = write!(s, "{{\"queue\":{},\"core\":", q.queue);
            match q.core {
                Some(c) => {
                    let _ = write!(s, "{c}");
                }
                None => s.push_str("null"),
            }
            let _ = write!(s, ",\"zero_copy\":{}", q.zero_copy);
            s.push_str(",\"counters\":");
            json_counters(&mut s, &q.counters);
            s.push_str(",\"qp_rates_gbps\":");
            json_rates_gbps(&mut s, &q.qp_rates);
            s.push('}');
        }
        s.push(']');
        if let Some(st) = &self.steering {
            s.push_str(",\"steering\":");
            super::steering::json(&mut s, st);
        }
        if let Some(cm) = &self.cm {
            s.push_str(",\"cm\":");
            json_counters(&mut s, cm);
        }
        s.push_str("}\n");
        s
    }
}
