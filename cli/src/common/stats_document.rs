//! The stats channel's document (engine::stats JSON) as the CLI reads it
//! back: per-queue counters and QP rates, their totals and per-second
//! rates, rendered as the table of `roce-xdp stats` (and of `serve`'s final
//! counters) or as their JSON document.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// One queue in the engine's snapshot.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct QueueStats {
    pub queue: u32,
    pub core: Option<usize>,
    /// This queue's socket is bound in zero-copy mode (absent from engines
    /// that predate it: false).
    #[serde(default)]
    pub zero_copy: bool,
    /// In the engine's display order (serde_json preserves it).
    pub counters: Map<String, Value>,
    /// Current DCQCN rate of each QP, Gb/s, by QP number (absent from
    /// engines that predate it).
    #[serde(default)]
    pub qp_rates_gbps: Map<String, Value>,
}

/// A process attached to a shared engine (`roce-xdp service`).
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct ProcessStats {
    pub pid: u32,
    /// `/proc/PID/comm` as the service read it.
    pub command: String,
    pub uid: u32,
    /// Nanoseconds since it attached.
    pub attached_ns: u64,
    /// Its block of QP numbers.
    pub qpn_first: u32,
    pub qpn_last: u32,
    /// As the process reports them.
    pub qps: u64,
    pub regions: u64,
    pub zero_copy_regions: u64,
    pub copied_regions: u64,
    /// In the service's display order: frames in/out, drops, refusals...
    #[serde(default)]
    pub counters: Map<String, Value>,
}

impl ProcessStats {
    fn counter(&self, name: &str) -> u64 {
        self.counters.get(name).map(as_u64).unwrap_or(0)
    }

    /// The sum of its drop counters (engine::stats::is_drop_counter).
    fn drops(&self) -> u64 {
        self.counters
            .iter()
            .filter(|(k, _)| engine::stats::is_drop_counter(k))
            .map(|(_, v)| as_u64(v))
            .fold(0u64, u64::saturating_add)
    }
}

/// The engine's snapshot (engine::stats JSON, schema 1).
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct Snapshot {
    pub schema_version: u32,
    pub iface: String,
    pub pid: u32,
    pub uptime_ns: u64,
    pub xdp_mode: String,
    pub zero_copy: bool,
    pub xdp: Map<String, Value>,
    pub queues: Vec<QueueStats>,
    /// Queue coverage (`docs/queue-coverage.md`; engine::stats's
    /// `steering.rs`); absent from engines that predate it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steering: Option<Value>,
    /// The RDMA CM agent's counters (a program on the drop-in librdmacm;
    /// docs/rdma-cm-drop-in.md); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cm: Option<Map<String, Value>>,
    /// The processes attached to a shared engine; empty for an engine
    /// inside one process (and absent from engines that predate it).
    #[serde(default)]
    pub processes: Vec<ProcessStats>,
}

fn as_u64(v: &Value) -> u64 {
    v.as_u64().unwrap_or(0)
}

impl Snapshot {
    /// Counter names, in order of first appearance over the queues.
    pub fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = Vec::new();
        for q in &self.queues {
            for k in q.counters.keys() {
                if !names.contains(k) {
                    names.push(k.clone());
                }
            }
        }
        names
    }

    /// Sum over queues of every counter.
    pub fn totals(&self) -> Vec<(String, u64)> {
        self.names()
            .into_iter()
            .map(|n| {
                let sum = self
                    .queues
                    .iter()
                    .map(|q| q.counters.get(&n).map(as_u64).unwrap_or(0))
                    .sum();
                (n, sum)
            })
            .collect()
    }
}

/// Per-second rates of the totals and of the XDP counters.
pub type Rates<'a> = (&'a [(String, f64)], &'a [(String, f64)]);

/// Per-second rates between two snapshots.
pub fn rates(prev: &[(String, u64)], cur: &[(String, u64)], secs: f64) -> Vec<(String, f64)> {
    cur.iter()
        .map(|(n, v)| {
            let p = prev
                .iter()
                .find(|(pn, _)| pn == n)
                .map(|x| x.1)
                .unwrap_or(0);
            (n.clone(), v.saturating_sub(p) as f64 / secs)
        })
        .collect()
}

pub fn xdp_pairs(s: &Snapshot) -> Vec<(String, u64)> {
    s.xdp.iter().map(|(k, v)| (k.clone(), as_u64(v))).collect()
}

/// Renders the human table; `rates` are (totals, xdp) per second.
pub fn render(s: &Snapshot, rates: Option<Rates<'_>>) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let zc: Vec<String> = s
        .queues
        .iter()
        .filter(|q| q.zero_copy)
        .map(|q| format!("q{}", q.queue))
        .collect();
    let mode = if s.zero_copy {
        " zero-copy".to_string()
    } else if zc.is_empty() {
        " copy".to_string()
    } else {
        format!(" zero-copy on {}, copy on the others", zc.join(","))
    };
    let _ = writeln!(
        out,
        "roce-xdp on {}: pid {}, up {:.1} s, XDP {}{}, {} queue(s)",
        s.iface,
        s.pid,
        s.uptime_ns as f64 / 1e9,
        s.xdp_mode,
        mode,
        s.queues.len()
    );
    if let Some(summary) = s.steering.as_ref().and_then(|v| v["summary"].as_str()) {
        let _ = writeln!(out, "steering: {summary}");
    }
    let names = s.names();
    let w = names
        .iter()
        .chain(s.xdp.keys())
        .map(|n| n.len())
        .max()
        .unwrap_or(0)
        .max(7);
    let mut header = format!("{:<w$}", "counter");
    for q in &s.queues {
        let _ = write!(header, " {:>14}", format!("q{}", q.queue));
    }
    let _ = write!(header, " {:>14}", "total");
    if rates.is_some() {
        let _ = write!(header, " {:>14}", "rate/s");
    }
    let _ = writeln!(out, "{header}");
    for (i, (name, total)) in s.totals().iter().enumerate() {
        let mut line = format!("{name:<w$}");
        for q in &s.queues {
            let v = q.counters.get(name).map(as_u64).unwrap_or(0);
            let _ = write!(line, " {v:>14}");
        }
        let _ = write!(line, " {total:>14}");
        if let Some((r, _)) = rates {
            let _ = write!(line, " {:>14.1}", r.get(i).map(|x| x.1).unwrap_or(0.0));
        }
        let _ = writeln!(out, "{line}");
    }
    let _ = writeln!(out, "XDP program");
    for (i, (name, v)) in xdp_pairs(s).iter().enumerate() {
        let mut line = format!("{name:<w$} {v:>14}");
        if let Some((_, r)) = rates {
            let _ = write!(line, " {:>14.1}", r.get(i).map(|x| x.1).unwrap_or(0.0));
        }
        let _ = writeln!(out, "{line}");
    }
    render_qp_rates(&mut out, s);
    render_processes(&mut out, s);
    if let Some(cm) = &s.cm {
        let _ = writeln!(out, "RDMA CM");
        for (name, v) in cm {
            let _ = writeln!(out, "{name:<w$} {:>14}", as_u64(v));
        }
    }
    out
}

/// The per-QP rate table (nothing when no queue has a QP).
fn render_qp_rates(out: &mut String, s: &Snapshot) {
    use std::fmt::Write as _;
    if s.queues.iter().all(|q| q.qp_rates_gbps.is_empty()) {
        return;
    }
    let _ = writeln!(out, "DCQCN rate per QP");
    let _ = writeln!(out, "{:<6} {:>8} {:>14}", "queue", "QP", "rate (Gb/s)");
    for q in &s.queues {
        for (qpn, rate) in &q.qp_rates_gbps {
            let rate = match rate.as_f64() {
                Some(r) => format!("{r:.3}"),
                None => "-".into(),
            };
            let _ = writeln!(out, "{:<6} {qpn:>8} {rate:>14}", format!("q{}", q.queue));
        }
    }
}

/// The table of attached processes (nothing for an engine inside one
/// process).
fn render_processes(out: &mut String, s: &Snapshot) {
    use std::fmt::Write as _;
    if s.processes.is_empty() {
        return;
    }
    let cw = s
        .processes
        .iter()
        .map(|p| p.command.chars().count())
        .max()
        .unwrap_or(0)
        .max(7);
    let _ = writeln!(out, "Attached processes");
    let _ = writeln!(
        out,
        "{:>8} {:<cw$} {:>6} {:>7} {:>17} {:>14} {:>14} {:>10}",
        "pid", "command", "QPs", "regions", "zero-copy/copied", "frames in", "frames out", "drops"
    );
    for p in &s.processes {
        // A command is whatever the process named itself: no control
        // characters reach the terminal.
        let command: String = p
            .command
            .chars()
            .map(|c| if c.is_control() { '?' } else { c })
            .collect();
        let _ = writeln!(
            out,
            "{:>8} {command:<cw$} {:>6} {:>7} {:>17} {:>14} {:>14} {:>10}",
            p.pid,
            p.qps,
            p.regions,
            format!("{}/{}", p.zero_copy_regions, p.copied_regions),
            p.counter(engine::stats::PROCESS_FRAMES_IN),
            p.counter(engine::stats::PROCESS_FRAMES_OUT),
            p.drops()
        );
    }
}

/// The `--json` document: the snapshot plus totals (and rates when watching).
pub fn json_document(s: &Snapshot, rates: Option<Rates<'_>>) -> Value {
    let mut v = serde_json::to_value(s).expect("snapshot serialises");
    let totals: Map<String, Value> = s.totals().into_iter().map(|(k, n)| (k, n.into())).collect();
    v["totals"] = Value::Object(totals);
    if let Some((t, x)) = rates {
        let m = |r: &[(String, f64)]| -> Value {
            Value::Object(r.iter().map(|(k, n)| (k.clone(), (*n).into())).collect())
        };
        v["rates_per_sec"] = serde_json::json!({ "totals": m(t), "xdp": m(x) });
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_engine_snapshot() {
        let eng = engine::stats::Snapshot {
            iface: "v0".into(),
            pid: 1,
            uptime_ns: 2_000_000_000,
            xdp_mode: "generic".into(),
            zero_copy: false,
            xdp: vec![("seen".into(), 10), ("redirected".into(), 9)],
            queues: vec![
                engine::stats::QueueSnapshot {
                    queue: 0,
                    core: Some(1),
                    zero_copy: true,
                    counters: vec![("sent_pkts".into(), 5), ("rcvd_pkts".into(), 1)],
                    qp_rates: vec![(17, 100e9), (18, 12.5e9)],
                },
                engine::stats::QueueSnapshot {
                    queue: 1,
                    core: None,
                    zero_copy: false,
                    counters: vec![("sent_pkts".into(), 7), ("rcvd_pkts".into(), 2)],
                    qp_rates: Vec::new(),
                },
            ],
            steering: None,
            cm: Some(vec![("malformed".into(), 4), ("retransmissions".into(), 1)]),
            processes: vec![engine::stats::ProcessSnapshot {
                pid: 4321,
                command: "ib_write\nbw".into(),
                uid: 1000,
                attached_ns: 3_000_000_000,
                qpn_first: 256,
                qpn_last: 511,
                qps: 2,
                regions: 3,
                zero_copy_regions: 1,
                copied_regions: 2,
                counters: vec![
                    ("frames_in".into(), 100),
                    ("frames_out".into(), 90),
                    ("frames_in_dropped".into(), 3),
                    ("frames_out_dropped".into(), 4),
                    ("refused_posts".into(), 7),
                ],
            }],
        };
        let s: Snapshot = serde_json::from_str(&eng.to_json()).unwrap();
        // Attached processes: in the JSON under "processes", and as a
        // table (the command's control characters not printed).
        let j = json_document(&s, None);
        assert_eq!(j["processes"][0]["pid"], 4321);
        assert_eq!(j["processes"][0]["command"], "ib_write\nbw");
        assert_eq!(j["processes"][0]["qpn_last"], 511);
        assert_eq!(j["processes"][0]["counters"]["refused_posts"], 7);
        let t = render(&s, None);
        let table: Vec<Vec<&str>> = t
            .split("Attached processes\n")
            .nth(1)
            .unwrap_or_default()
            .lines()
            .take(2)
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert_eq!(
            table,
            [
                vec![
                    "pid",
                    "command",
                    "QPs",
                    "regions",
                    "zero-copy/copied",
                    "frames",
                    "in",
                    "frames",
                    "out",
                    "drops"
                ],
                vec!["4321", "ib_write?bw", "2", "3", "1/2", "100", "90", "7"],
            ],
            "{t}"
        );
        // The RDMA CM's counters: in the JSON under "cm", and as a table.
        assert_eq!(json_document(&s, None)["cm"]["malformed"], 4);
        let t = render(&s, None);
        let cm = t.split("RDMA CM\n").nth(1).unwrap_or_default();
        assert!(
            cm.lines()
                .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["retransmissions", "1"]),
            "{t}"
        );
        assert_eq!(
            s.totals(),
            vec![("sent_pkts".to_string(), 12), ("rcvd_pkts".to_string(), 3)]
        );
        let text = render(&s, None);
        assert!(
            text.lines()
                .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["sent_pkts", "5", "7", "12"]),
            "{text}"
        );
        assert!(text.contains("redirected"));
        // Zero-copy per queue: in the JSON, and named in the header line
        // when only some queues have it.
        assert!(s.queues[0].zero_copy);
        assert!(!s.queues[1].zero_copy);
        assert!(
            text.lines()
                .next()
                .is_some_and(|l| l.contains("zero-copy on q0, copy on the others")),
            "{text}"
        );
        let r = rates(&[("a".into(), 10)], &[("a".into(), 30)], 2.0);
        assert_eq!(r[0].1, 10.0);
        let j = json_document(&s, None);
        assert_eq!(j["totals"]["sent_pkts"], 12);
        // Per-QP rates: in the JSON per queue, and as a table.
        assert_eq!(j["queues"][0]["qp_rates_gbps"]["17"], 100.0);
        assert_eq!(j["queues"][0]["qp_rates_gbps"]["18"], 12.5);
        assert_eq!(j["queues"][1]["qp_rates_gbps"], serde_json::json!({}));
        assert!(text.contains("rate (Gb/s)"), "{text}");
        assert!(
            text.lines()
                .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["q0", "18", "12.500"]),
            "{text}"
        );
    }

    #[test]
    fn reads_documents_without_qp_rates() {
        let old = r#"{"schema_version":1,"iface":"v0","pid":1,"uptime_ns":1,
            "xdp_mode":"native","zero_copy":false,"xdp":{},
            "queues":[{"queue":0,"core":null,"counters":{"sent_pkts":1}}]}"#;
        let s: Snapshot = serde_json::from_str(old).unwrap();
        assert!(s.queues[0].qp_rates_gbps.is_empty());
        assert!(!s.queues[0].zero_copy);
        assert!(!render(&s, None).contains("rate (Gb/s)"));
        // No "processes" key: none attached, no table.
        assert!(s.processes.is_empty());
        assert!(!render(&s, None).contains("Attached processes"));
        assert_eq!(json_document(&s, None)["processes"], serde_json::json!([]));
    }
}
