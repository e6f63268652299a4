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

/// The counter of a [`ProcessSnapshot`] holding the frames the service
/// handed to the process (received for its QPs); `roce-xdp stats` shows it
/// as "frames in".
pub const PROCESS_FRAMES_IN: &str = "frames_in";
/// The counter of a [`ProcessSnapshot`] holding the frames the process
/// handed to the service to send ("frames out").
pub const PROCESS_FRAMES_OUT: &str = "frames_out";

/// Whether a process counter counts drops: `roce-xdp stats` sums these in
/// its "drops" column (a name containing `drop`, e.g. `frames_in_dropped`).
pub fn is_drop_counter(name: &str) -> bool {
    name.contains("drop")
}

/// One process attached to a shared engine (`roce-xdp service`), as the
/// service sees it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProcessSnapshot {
    pub pid: u32,
    /// `/proc/PID/comm` as the service read it when the process attached.
    pub command: String,
    pub uid: u32,
    /// Nanoseconds since it attached.
    pub attached_ns: u64,
    /// Its block of QP numbers, `qpn_first..=qpn_last`.
    pub qpn_first: u32,
    pub qpn_last: u32,
    /// QPs and memory regions, as the process reports them.
    pub qps: u64,
    pub regions: u64,
    /// Of its regions: those the NIC reaches without a copy, and those
    /// copied through the shared frame rings.
    pub zero_copy_regions: u64,
    pub copied_regions: u64,
    /// `(name, value)` in display order: frames in/out ([`PROCESS_FRAMES_IN`],
    /// [`PROCESS_FRAMES_OUT`]), drops, refusals...
    pub counters: Vec<(String, u64)>,
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
    /// The processes attached to a shared engine (`roce-xdp service`);
    /// empty for an engine inside one process.
    pub processes: Vec<ProcessSnapshot>,
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
        s.push_str(",\"processes\":[");
        for (i, p) in self.processes.iter().enumerate() {
            if i > 0 {
                s.push(',');
            }
            let _ = write!(s, "{{\"pid\":{},\"command\":", p.pid);
            json_str(&mut s, &p.command);
            let _ = write!(
                s,
                ",\"uid\":{},\"attached_ns\":{},\"qpn_first\":{},\"qpn_last\":{},\
                 \"qps\":{},\"regions\":{},\"zero_copy_regions\":{},\"copied_regions\":{},\
                 \"counters\":",
                p.uid,
                p.attached_ns,
                p.qpn_first,
                p.qpn_last,
                p.qps,
                p.regions,
                p.zero_copy_regions,
                p.copied_regions
            );
            json_counters(&mut s, &p.counters);
            s.push('}');
        }
        s.push(']');
        s.push_str("}\n");
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn processes_in_the_json_document() {
        let mut s = Snapshot {
            iface: "v0".into(),
            ..Default::default()
        };
        let v: serde_json::Value = serde_json::from_str(&s.to_json()).unwrap();
        assert_eq!(v["processes"], serde_json::json!([]));
        s.processes = vec![ProcessSnapshot {
            pid: 1234,
            command: "ib_\"send\"\n".into(),
            uid: 1000,
            attached_ns: 5,
            qpn_first: 256,
            qpn_last: 511,
            qps: 2,
            regions: 3,
            zero_copy_regions: 1,
            copied_regions: 2,
            counters: vec![
                (PROCESS_FRAMES_IN.into(), 10),
                ("frames_in_dropped".into(), 1),
            ],
        }];
        let json = s.to_json();
        assert!(
            json.contains(
                "\"processes\":[{\"pid\":1234,\"command\":\"ib_\\\"send\\\"\\u000a\",\"uid\":1000,\
                 \"attached_ns\":5,\"qpn_first\":256,\"qpn_last\":511,\"qps\":2,\"regions\":3,\
                 \"zero_copy_regions\":1,\"copied_regions\":2,\
                 \"counters\":{\"frames_in\":10,\"frames_in_dropped\":1}}]}"
            ),
            "{json}"
        );
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(v["processes"][0]["command"], "ib_\"send\"\n");
        assert!(is_drop_counter("frames_in_dropped"));
        assert!(!is_drop_counter(PROCESS_FRAMES_OUT));
    }
}
