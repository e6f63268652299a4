//! Output of the perftest-style tools: perftest's table layout (a banner
//! describing the test, a header line, one line per message size) or one
//! JSON document (`--json`, schema [`JSON_SCHEMA_VERSION`]).

use std::fmt::Write as _;

use serde::Serialize;

use super::bandwidth::BandwidthStats;
use super::latency::LatencyStats;

/// Version of the JSON document layout; bump on incompatible changes.
pub const JSON_SCHEMA_VERSION: u32 = 1;

const RULE: &str =
    "---------------------------------------------------------------------------------------";

/// The test being run, for the banner and the JSON `test` object.
#[derive(Debug, Clone, Serialize)]
pub struct TestInfo {
    /// Tool name, e.g. `write-bw`.
    pub tool: String,
    /// `client` or `server`.
    pub role: String,
    /// Verb in perftest's words, e.g. `RDMA_Write`, `RDMA_Read`, `Send`.
    pub verb: String,
    /// `bw` or `lat`.
    pub kind: String,
    pub qps: u32,
    pub mtu: u32,
    pub tx_depth: u32,
    pub iface: String,
    pub local: String,
    pub remote: String,
    /// XDP attach mode (`native` / `generic`).
    pub xdp_mode: String,
    pub zero_copy: bool,
}

/// One line of a bandwidth table.
#[derive(Debug, Clone, Copy, Serialize, serde::Deserialize)]
pub struct BwRow {
    pub bytes: u64,
    pub iterations: u64,
    #[serde(flatten)]
    pub stats: BandwidthStats,
}

/// One line of a latency table.
#[derive(Debug, Clone, Copy, Serialize, serde::Deserialize)]
pub struct LatRow {
    pub bytes: u64,
    pub iterations: u64,
    #[serde(flatten)]
    pub stats: LatencyStats,
}

/// The rows of a run.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum Rows {
    Bandwidth(Vec<BwRow>),
    Latency(Vec<LatRow>),
}

/// The whole `--json` document.
#[derive(Debug, Clone, Serialize)]
pub struct JsonReport<'a> {
    pub schema_version: u32,
    pub test: &'a TestInfo,
    pub results: &'a Rows,
    /// This side's engine, per queue, at the end of the run.
    #[serde(skip_serializing_if = "<[QueueSummary]>::is_empty")]
    pub queues: &'a [QueueSummary],
}

/// What one queue of this side's engine did (`docs/multi-queue.md`).
#[derive(Debug, Clone, Copy, Serialize)]
pub struct QueueSummary {
    pub queue: u32,
    /// RoCE packets received on this queue's RX ring.
    pub rx_packets: u64,
    /// Of those, handed to the queue that holds their QP (a detour).
    pub rx_handoff: u64,
    /// Hand-offs dropped (pool empty or target inbox full).
    pub rx_handoff_dropped: u64,
    /// QPs that moved to this queue because their packets arrive here.
    pub qp_migrations: u64,
    /// Packets for a QP no queue holds.
    pub dropped_unknown_qp: u64,
    pub zero_copy: bool,
}

/// Renders the JSON document.
pub fn to_json(info: &TestInfo, rows: &Rows, queues: &[QueueSummary]) -> String {
    serde_json::to_string_pretty(&JsonReport {
        schema_version: JSON_SCHEMA_VERSION,
        test: info,
        results: rows,
        queues,
    })
    .expect("report serialises")
}

/// The banner printed before the table, as perftest prints its test
/// parameters.
pub fn banner(info: &TestInfo) -> String {
    let title = format!(
        "{} {} Test",
        info.verb,
        if info.kind == "bw" { "BW" } else { "Latency" }
    );
    let mut s = String::new();
    let _ = writeln!(s, "{RULE}");
    let _ = writeln!(s, "{:^87}", title);
    let _ = writeln!(
        s,
        " Number of qps   : {:<10} Transport type : RoCE v2 over AF_XDP",
        info.qps
    );
    let _ = writeln!(s, " Connection type : RC         Using SRQ      : OFF");
    let _ = writeln!(
        s,
        " TX depth        : {:<10} Mtu            : {}[B]",
        info.tx_depth, info.mtu
    );
    let _ = writeln!(
        s,
        " Interface       : {:<10} XDP mode       : {}{}",
        info.iface,
        info.xdp_mode,
        if info.zero_copy {
            ", zero-copy"
        } else {
            ", copy"
        }
    );
    let _ = writeln!(s, " local address   : {}", info.local);
    let _ = writeln!(s, " remote address  : {}", info.remote);
    let _ = write!(s, "{RULE}");
    s
}

/// Header line of a bandwidth table.
pub const BW_HEADER: &str =
    " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   BW average[MB/sec]   MsgRate[Mpps]";

/// Header line of a latency table.
pub const LAT_HEADER: &str = " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec]";

/// One bandwidth line, aligned under [`BW_HEADER`].
pub fn bw_line(r: &BwRow) -> String {
    format!(
        " {:<10} {:<14} {:<18.2} {:<20.2} {:<20.2} {:.6}",
        r.bytes,
        r.iterations,
        r.stats.bw_peak_gbps,
        r.stats.bw_avg_gbps,
        r.stats.bw_avg_mbps,
        r.stats.msg_rate_mpps
    )
}

/// One latency line, aligned under [`LAT_HEADER`].
pub fn lat_line(r: &LatRow) -> String {
    let l = &r.stats;
    format!(
        " {:<6} {:<11} {:<14.2} {:<14.2} {:<16.2} {:<14.2} {:<15.2} {:<22.2} {:.2}",
        r.bytes,
        r.iterations,
        l.t_min_us,
        l.t_max_us,
        l.t_typical_us,
        l.t_avg_us,
        l.t_stdev_us,
        l.p99_us,
        l.p99_9_us
    )
}

/// Streams a table to stdout: the banner and header first, then each line
/// as its size finishes, then the closing rule.
#[derive(Debug)]
pub struct TableWriter {
    kind_bw: bool,
}

impl TableWriter {
    /// Prints the banner and the header.
    pub fn start(info: &TestInfo) -> TableWriter {
        println!("{}", banner(info));
        let kind_bw = info.kind == "bw";
        println!("{}", if kind_bw { BW_HEADER } else { LAT_HEADER });
        TableWriter { kind_bw }
    }

    pub fn bw(&self, r: &BwRow) {
        debug_assert!(self.kind_bw);
        println!("{}", bw_line(r));
    }

    pub fn lat(&self, r: &LatRow) {
        debug_assert!(!self.kind_bw);
        println!("{}", lat_line(r));
    }

    pub fn finish(self) {
        println!("{RULE}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(kind: &str) -> TestInfo {
        TestInfo {
            tool: format!("write-{kind}"),
            role: "client".into(),
            verb: "RDMA_Write".into(),
            kind: kind.into(),
            qps: 1,
            mtu: 1024,
            tx_depth: 128,
            iface: "veth0".into(),
            local: "QPN 0x000011 PSN 0x000001 IP 10.0.0.1".into(),
            remote: "QPN 0x000012 PSN 0x000002 IP 10.0.0.2".into(),
            xdp_mode: "generic".into(),
            zero_copy: false,
        }
    }

    #[test]
    fn bw_json_has_the_schema_fields() {
        let rows = Rows::Bandwidth(vec![BwRow {
            bytes: 65536,
            iterations: 1000,
            stats: BandwidthStats {
                bw_peak_gbps: 2.0,
                bw_avg_gbps: 1.5,
                bw_avg_mbps: 178.8,
                msg_rate_mpps: 0.0029,
            },
        }]);
        let v: serde_json::Value = serde_json::from_str(&to_json(&info("bw"), &rows, &[])).unwrap();
        assert_eq!(v["schema_version"], 1);
        assert_eq!(v["test"]["tool"], "write-bw");
        let r = &v["results"][0];
        for k in [
            "bytes",
            "iterations",
            "bw_peak_gbps",
            "bw_avg_gbps",
            "bw_avg_mbps",
            "msg_rate_mpps",
        ] {
            assert!(r.get(k).is_some(), "missing {k}");
        }
    }

    #[test]
    fn lat_line_has_all_columns() {
        let s = LatencyStats::from_nanos(&[1000, 2000, 3000]).unwrap();
        let line = lat_line(&LatRow {
            bytes: 2,
            iterations: 3,
            stats: s,
        });
        assert_eq!(line.split_whitespace().count(), 9);
        assert_eq!(LAT_HEADER.matches("[usec]").count(), 7);
        let b = BandwidthStats::from_completions(64, &[100, 200]).unwrap();
        let line = bw_line(&BwRow {
            bytes: 64,
            iterations: 2,
            stats: b,
        });
        assert_eq!(line.split_whitespace().count(), 6);
        assert!(banner(&info("lat")).contains("RDMA_Write Latency Test"));
    }
}
