//! The drop-in libibverbs' rows ([`DropInReport`]), measured by
//! `verbs_drop_in.rs`, with their targets: Debian's stock
//! `ib_write_bw` under `roce-xdp exec` against `roce-xdp write-bw`,
//! goodput ratio >= [`GOODPUT_TARGET`] at 64 B and 64 KiB; stock
//! `ib_send_lat` under `exec` against `roce-xdp send-lat`, p50 ratio <=
//! [`LATENCY_TARGET`]; the transfer-engine pattern (`threaded_rdma_bw`:
//! several posting threads, one polling thread) under `exec` against
//! `roce-xdp read-bw` / `write-bw`, goodput ratio >=
//! [`THREADED_GOODPUT_TARGET`].

use serde::{Deserialize, Serialize};

use super::tables::{size_label, Table};
use super::{Ratio, PAIRED_LABEL};
use crate::stats::min_max;

/// Target of the stock binary's goodput / the tool's.
pub const GOODPUT_TARGET: f64 = 0.9;
/// Target of the stock binary's p50 latency / the tool's.
pub const LATENCY_TARGET: f64 = 1.2;
/// Target of the transfer-engine pattern's goodput (posting threads and a
/// polling thread of the program's own) / the tool's.
pub const THREADED_GOODPUT_TARGET: f64 = 0.8;

/// One pair: the stock binary and the tool, back to back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DropInPair {
    /// The stock binary ran first in this pair.
    pub stock_first: bool,
    /// The stock binary's figure (MB/s, or µs t_typical).
    pub stock: f64,
    /// The tool's figure, in the same unit.
    pub tool: f64,
}

impl DropInPair {
    /// stock / tool.
    pub fn ratio(&self) -> f64 {
        self.stock / self.tool
    }
}

/// One comparison: a stock binary under `exec` against the engine's tool.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DropInTarget {
    /// The stock binary (`ib_write_bw`, `ib_send_lat`).
    pub stock: String,
    /// The engine's tool (`roce-xdp write-bw`, ...).
    pub tool: String,
    pub message_bytes: u64,
    /// A latency comparison (µs t_typical, lower is better) rather than a
    /// goodput one (MB/s, higher is better).
    pub latency: bool,
    pub pairs: Vec<DropInPair>,
    /// Median of the per-pair ratios (stock / tool).
    pub ratio: Option<f64>,
    /// The ratio's target where it is not its kind's
    /// ([`GOODPUT_TARGET`], [`LATENCY_TARGET`]): the transfer-engine
    /// pattern's [`THREADED_GOODPUT_TARGET`]. Absent from older reports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_ratio: Option<f64>,
}

impl DropInTarget {
    /// The target of this comparison's ratio.
    pub fn target(&self) -> f64 {
        match (self.target_ratio, self.latency) {
            (Some(t), _) => t,
            (None, true) => LATENCY_TARGET,
            (None, false) => GOODPUT_TARGET,
        }
    }

    /// Whether the ratio meets the target (`None`: not measured).
    pub fn met(&self) -> Option<bool> {
        self.ratio.map(|r| self.meets(r))
    }

    fn meets(&self, ratio: f64) -> bool {
        if self.latency {
            ratio <= self.target()
        } else {
            ratio >= self.target()
        }
    }

    /// The per-pair ratios.
    pub fn ratios(&self) -> Vec<f64> {
        self.pairs.iter().map(DropInPair::ratio).collect()
    }

    /// The 95 % interval of the median ratio (`None` under 6 pairs), as
    /// the paired targets' ([`crate::stats::median_ci`]).
    pub fn ci95(&self) -> Option<(f64, f64)> {
        crate::stats::median_ci(&self.ratios(), 0.95)
    }

    /// This comparison as a row of the report's target ratios
    /// ([`Report::target_ratios`](super::Report::target_ratios)), named
    /// `name` and labelled paired.
    pub fn ratio_row(&self, name: &str) -> Ratio {
        Ratio {
            name: format!("{name} {PAIRED_LABEL}"),
            value: self.ratio,
            target: format!(
                "{} {}",
                if self.latency { "<=" } else { ">=" },
                self.target()
            ),
            met: self.met(),
            ci95_decides: self.ci95().map(|(lo, hi)| self.meets(lo) == self.meets(hi)),
        }
    }
}

/// The drop-in's rows of a run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DropInReport {
    /// Length of each bandwidth run (`-D`), seconds.
    pub bw_seconds: u32,
    /// Round trips of each latency run (`-n`).
    pub lat_iterations: u64,
    pub targets: Vec<DropInTarget>,
}

impl DropInReport {
    /// The comparison table (empty when nothing was measured).
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
                    ("t_typical µs", 2)
                } else {
                    ("BW average MB/s", 1)
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
                    match t.met() {
                        Some(true) => "yes".into(),
                        Some(false) => "NO".into(),
                        None => "n/a".into(),
                    },
                ]
            })
            .collect();
        vec![Table {
            title: format!(
                "Stock perftest and the transfer-engine pattern (threaded_rdma_bw: 4 posting threads with a QP each, batches of 16 signaled requests, spinning or yielding while they wait for their batch, one thread polling the shared CQ) on the drop-in libibverbs (`roce-xdp exec`) against the engine's own tools, same namespaces, paired (bandwidth runs -D {} s, latency runs -n {}; ratio = median of per-pair program / tool)",
                self.bw_seconds, self.lat_iterations
            ),
            header: [
                "comparison",
                "size",
                "figure",
                "pairs",
                "stock (min .. max)",
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

    fn target(latency: bool, pairs: &[(f64, f64)]) -> DropInTarget {
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
        DropInTarget {
            stock: "ib_write_bw".into(),
            tool: "roce-xdp write-bw".into(),
            message_bytes: 64,
            latency,
            ratio: crate::stats::median(&ratios),
            pairs,
            target_ratio: None,
        }
    }

    #[test]
    fn goodput_meets_from_above_and_latency_from_below() {
        let bw = target(false, &[(95.0, 100.0), (80.0, 100.0), (99.0, 100.0)]);
        assert_eq!(bw.ratio, Some(0.95));
        assert_eq!(bw.met(), Some(true));
        let lat = target(true, &[(3.0, 2.0), (3.0, 2.0)]);
        assert_eq!(lat.met(), Some(false), "1.5x the tool's latency");
        let none = target(true, &[]);
        assert_eq!(none.met(), None);
        let r = DropInReport {
            bw_seconds: 1,
            lat_iterations: 100,
            targets: vec![bw, lat, none],
        };
        let rows = &r.tables()[0].rows;
        assert_eq!(rows[0][4], "80.0 .. 99.0");
        assert_eq!((rows[0][6].as_str(), rows[0][8].as_str()), ("0.95", "yes"));
        assert_eq!((rows[1][7].as_str(), rows[1][8].as_str()), ("<= 1.2", "NO"));
        assert_eq!(rows[2][6], "n/a");
        assert!(DropInReport::default().tables().is_empty());
    }

    #[test]
    fn a_target_of_its_own_replaces_its_kinds() {
        let mut t = target(false, &[(85.0, 100.0)]);
        assert_eq!(t.met(), Some(false), "below the goodput target");
        t.target_ratio = Some(THREADED_GOODPUT_TARGET);
        assert_eq!((t.target(), t.met()), (THREADED_GOODPUT_TARGET, Some(true)));
        let json = serde_json::to_string(&target(false, &[])).unwrap();
        assert!(!json.contains("target_ratio"), "{json}");
        let old: DropInTarget = serde_json::from_str(&json).unwrap();
        assert_eq!(old.target_ratio, None);
    }
}
