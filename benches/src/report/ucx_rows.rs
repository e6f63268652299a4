//! UCX's rows ([`UcxReport`]), measured by `ucx.rs`: Debian's stock
//! `ucx_perftest` on the drop-in libibverbs (`roce-xdp exec`, UCP over
//! `rc_verbs` and `ud_verbs`) against the engine's own tools between the
//! same namespaces, paired in one run, with their targets:
//! `ucx_perftest -t ucp_put_bw -s 65536` / `roce-xdp write-bw -s 65536`,
//! goodput ratio >= [`UCX_PUT_BW_TARGET`]; `ucx_perftest -t tag_lat -s 64`
//! / `roce-xdp send-lat -s 64`, p50 ratio (both one-way: half the round
//! trip) <= [`UCX_TAG_LAT_TARGET`].
//!
//! The comparisons are [`DropInTarget`]s (`stock` is the `ucx_perftest`
//! test, `pairs[].stock` its figure), as the drop-in's rows hold them.

use serde::{Deserialize, Serialize};

use super::drop_in_rows::DropInTarget;
use super::tables::{size_label, Table};
use crate::stats::min_max;

/// Target of `ucx_perftest -t ucp_put_bw` goodput / `roce-xdp write-bw`'s.
pub const UCX_PUT_BW_TARGET: f64 = 0.9;
/// Target of `ucx_perftest -t tag_lat` p50 / `roce-xdp send-lat`'s.
pub const UCX_TAG_LAT_TARGET: f64 = 1.3;

/// UCX's rows of a run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct UcxReport {
    /// `ucx_info -v`'s library version (`None`: not installed).
    pub ucx_version: Option<String>,
    /// The environment both sides of every `ucx_perftest` run had
    /// (`UCX_TLS=...`, `UCX_NET_DEVICES=...`).
    pub env: Vec<String>,
    /// Length of each `roce-xdp write-bw` run (`-D`), seconds.
    pub bw_seconds: u32,
    /// Measured iterations (`-n`) of each `ucp_put_bw` run, in the order
    /// of its pairs: as many 64 KiB messages as the tool moved in its
    /// latest run. Every run's warm-up (`-w`) is a tenth of its `-n`.
    pub put_iterations: Vec<u64>,
    /// Round trips (`-n`) of each latency run, both programs.
    pub lat_iterations: u64,
    /// The two comparisons (their pairs empty, ratio `None`, when the
    /// step could not run: see `skipped`).
    pub targets: Vec<DropInTarget>,
    /// Why the step did not run (ucx_perftest not installed, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
}

impl UcxReport {
    /// The comparison table (empty when the report has no rows: a report
    /// from before the step existed).
    pub fn tables(&self) -> Vec<Table> {
        if self.targets.is_empty() {
            return Vec::new();
        }
        let range = |v: Vec<f64>, d: usize| match min_max(&v) {
            Some((lo, hi)) => format!("{lo:.d$} .. {hi:.d$}"),
            None => "n/a".into(),
        };
        let rows = self
            .targets
            .iter()
            .map(|t| {
                let (unit, d) = if t.latency {
                    ("one-way p50 µs (half the round trip, both)", 2)
                } else {
                    ("MB/s (UCX: bw overall; tool: BW average)", 1)
                };
                vec![
                    format!("{} under exec / {}", t.stock, t.tool),
                    size_label(t.message_bytes),
                    unit.into(),
                    t.pairs.len().to_string(),
                    range(t.pairs.iter().map(|p| p.stock).collect(), d),
                    range(t.pairs.iter().map(|p| p.tool).collect(), d),
                    t.ratio.map_or("n/a".into(), |r| format!("{r:.2}")),
                    format!("{} {}", if t.latency { "<=" } else { ">=" }, t.target()),
                    match (t.met(), &self.skipped) {
                        (Some(true), _) => "yes".into(),
                        (Some(false), _) => "NO".into(),
                        (None, Some(why)) => format!("not measured: {why}"),
                        (None, None) => "n/a".into(),
                    },
                ]
            })
            .collect();
        let version = self.ucx_version.as_deref().unwrap_or("not installed");
        let puts = match (
            self.put_iterations.iter().min(),
            self.put_iterations.iter().max(),
        ) {
            (Some(lo), Some(hi)) => format!("{lo} .. {hi}"),
            _ => "n/a".into(),
        };
        vec![Table {
            title: format!(
                "UCX {version} (Debian's ucx_perftest, UCP, {}, its defaults otherwise) on the drop-in libibverbs (`roce-xdp exec`, server in one namespace, client in the other) against the engine's own tools, same namespaces, paired (write-bw -D {} s, ucp_put_bw -n {puts}: the tool's latest -D seconds' worth of messages; latency runs -n {}; ratio = median of per-pair UCX / tool)",
                self.env.join(" "),
                self.bw_seconds,
                self.lat_iterations,
            ),
            header: [
                "comparison",
                "size",
                "figure",
                "pairs",
                "ucx_perftest (min .. max)",
                "tool (min .. max)",
                "ratio",
                "target",
                "met?",
            ]
            .map(String::from)
            .to_vec(),
            rows,
        }]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::DropInPair;

    fn report(skipped: Option<&str>, pairs: &[(f64, f64)]) -> UcxReport {
        let pairs: Vec<DropInPair> = pairs
            .iter()
            .enumerate()
            .map(|(i, &(stock, tool))| DropInPair {
                stock_first: i % 2 == 0,
                stock,
                tool,
            })
            .collect();
        let ratios: Vec<f64> = pairs.iter().map(DropInPair::ratio).collect();
        let row = |latency: bool| DropInTarget {
            stock: if latency {
                "ucx_perftest -t tag_lat".into()
            } else {
                "ucx_perftest -t ucp_put_bw".into()
            },
            tool: if latency {
                "roce-xdp send-lat".into()
            } else {
                "roce-xdp write-bw".into()
            },
            message_bytes: if latency { 64 } else { 65536 },
            latency,
            pairs: pairs.clone(),
            ratio: crate::stats::median(&ratios),
            target_ratio: Some(if latency {
                UCX_TAG_LAT_TARGET
            } else {
                UCX_PUT_BW_TARGET
            }),
        };
        UcxReport {
            ucx_version: Some("1.13.1".into()),
            env: vec!["UCX_TLS=rc_verbs,ud_verbs".into()],
            bw_seconds: 1,
            put_iterations: vec![1000, 1200],
            lat_iterations: 2000,
            targets: vec![row(false), row(true)],
            skipped: skipped.map(String::from),
        }
    }

    #[test]
    fn put_bw_meets_from_above_and_tag_lat_from_below() {
        // Per-pair ratios 0.95 and 1.25: their median is 1.1.
        let r = report(None, &[(0.95, 1.0), (1.25, 1.0)]);
        let t = &r.targets;
        assert_eq!(t[0].ratio, Some(1.1));
        assert_eq!(t[0].met(), Some(true), ">= 0.9");
        assert_eq!(t[1].met(), Some(true), "<= 1.3");
        let r = report(None, &[(1.3, 1.0), (1.4, 1.0)]);
        assert_eq!(r.targets[1].met(), Some(false), "1.35 > 1.3");
        let rows = &r.tables()[0].rows;
        assert_eq!(rows[0][1], "64 KiB");
        assert_eq!(rows[1][1], "64 B");
        assert_eq!((rows[1][7].as_str(), rows[1][8].as_str()), ("<= 1.3", "NO"));
        assert_eq!(rows[0][7], ">= 0.9");
        assert!(rows[1][2].contains("half the round trip"), "{}", rows[1][2]);
        assert!(r.tables()[0].title.contains("-n 1000 .. 1200"));
    }

    #[test]
    fn a_skipped_step_says_why_in_its_rows_and_json() {
        let r = report(Some("ucx_perftest is not installed"), &[]);
        let rows = &r.tables()[0].rows;
        assert_eq!(rows[0][6], "n/a");
        assert_eq!(rows[0][8], "not measured: ucx_perftest is not installed");
        let json = serde_json::to_string(&r).unwrap();
        assert!(json.contains("\"skipped\":\"ucx_perftest is not installed\""));
        let back: UcxReport = serde_json::from_str(&json).unwrap();
        assert_eq!(back, r);
        assert!(UcxReport::default().tables().is_empty());
        let measured = serde_json::to_string(&report(None, &[(1.0, 1.0)])).unwrap();
        assert!(!measured.contains("skipped"), "{measured}");
    }
}
