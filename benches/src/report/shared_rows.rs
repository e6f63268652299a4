//! The shared engine's rows ([`SharedReport`]), measured by
//! `shared_engine.rs`: stock perftest under `roce-xdp exec --share always`
//! (each program attached to the `roce-xdp service` of its namespace)
//! against the same binaries under `--share never` (each program's engine
//! owning its queue), paired in one run; and the service's CPU time with
//! idle attached programs.

use serde::{Deserialize, Serialize};

use super::tables::{size_label, Table};
use super::{Ratio, PAIRED_LABEL};
use crate::stats::{median, median_ci, min_max};

/// Target of attached / in-process `ib_write_bw` BW average at 64 KiB.
pub const SHARED_WRITE_BW_TARGET: f64 = 0.9;
/// Target of attached / in-process `ib_send_lat` t_typical at 64 B.
pub const SHARED_SEND_LAT_TARGET: f64 = 1.3;
/// Target of 8 attached programs x 8 QPs / 1 in-process program x 64 QPs.
pub const SHARED_MANY_TARGET: f64 = 0.9;
/// Target of the idle service's CPU, % of a core.
pub const SHARED_IDLE_TARGET_PERCENT: f64 = 1.0;

/// One pair: the attached run and its baseline, back to back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SharedPair {
    /// The attached run came first in this pair.
    pub attached_first: bool,
    /// The attached run's figure (MB/s, or µs t_typical).
    pub attached: f64,
    /// The baseline's figure, in the same unit.
    pub baseline: f64,
}

impl SharedPair {
    /// attached / baseline.
    pub fn ratio(&self) -> f64 {
        self.attached / self.baseline
    }
}

/// One comparison: attached programs against their in-process baseline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SharedRow {
    /// What runs attached (`ib_write_bw -s 65536 ...`).
    pub attached: String,
    /// What runs as the baseline.
    pub baseline: String,
    pub message_bytes: u64,
    /// The figure: "BW average MB/s" (summed over programs) or
    /// "t_typical µs".
    pub unit: String,
    /// Lower is better (latency).
    pub latency: bool,
    pub pairs: Vec<SharedPair>,
    /// Median of the per-pair ratios (attached / baseline).
    pub ratio: Option<f64>,
    /// The ratio's target (>= for goodput, <= for latency).
    pub target_ratio: f64,
}

impl SharedRow {
    /// The per-pair ratios.
    pub fn ratios(&self) -> Vec<f64> {
        self.pairs.iter().map(SharedPair::ratio).collect()
    }

    fn meets(&self, r: f64) -> bool {
        if self.latency {
            r <= self.target_ratio
        } else {
            r >= self.target_ratio
        }
    }

    /// Whether the median meets the target (`None`: not measured).
    pub fn met(&self) -> Option<bool> {
        self.ratio.map(|r| self.meets(r))
    }

    /// Sets `ratio` from the pairs.
    pub fn summarise(&mut self) {
        self.ratio = median(&self.ratios());
    }

    /// This comparison as a row of the report's target ratios.
    pub fn ratio_row(&self) -> Ratio {
        let sym = if self.latency { "<=" } else { ">=" };
        Ratio {
            name: format!(
                "shared engine: {} / {} {PAIRED_LABEL}",
                self.attached, self.baseline
            ),
            value: self.ratio,
            target: format!("{sym} {}", self.target_ratio),
            met: self.met(),
            ci95_decides: median_ci(&self.ratios(), 0.95)
                .map(|(lo, hi)| self.meets(lo) == self.meets(hi)),
        }
    }
}

/// The service's CPU time while programs are attached and idle.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SharedIdle {
    /// Programs attached (as the service's `roce-xdp stats` listed them).
    pub programs: u32,
    /// Wall time of the measurement, seconds.
    pub seconds: f64,
    /// The service's utime + stime over it (/proc/PID/stat), seconds.
    pub cpu_seconds: f64,
    /// `cpu_seconds / seconds`, % of one core.
    pub percent_of_core: f64,
    pub target_percent: f64,
}

impl SharedIdle {
    pub fn met(&self) -> bool {
        self.percent_of_core <= self.target_percent
    }
}

/// The shared engine's rows of a run (JSON key `shared`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SharedReport {
    /// The paired comparisons (`ib_write_bw` 64 KiB, `ib_send_lat` 64 B,
    /// 8 programs x 8 QPs against 1 x 64).
    pub rows: Vec<SharedRow>,
    /// The idle service's CPU (`None`: not measured).
    pub idle: Option<SharedIdle>,
    /// Length of each bandwidth run (`-D`), seconds.
    pub bw_seconds: u32,
    /// Why the step did not run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
}

impl SharedReport {
    /// The comparisons' rows of the report's target ratios.
    pub fn target_ratios(&self) -> Vec<Ratio> {
        self.rows.iter().map(SharedRow::ratio_row).collect()
    }

    /// The section's tables (none when the step did not run).
    pub fn tables(&self) -> Vec<Table> {
        if self.rows.is_empty() && self.idle.is_none() && self.skipped.is_none() {
            return Vec::new();
        }
        let range = |v: Vec<f64>, d: usize| match min_max(&v) {
            Some((lo, hi)) => format!("{lo:.d$} .. {hi:.d$}"),
            None => "n/a".into(),
        };
        let verdict = |m: Option<bool>| match m {
            Some(true) => "met".to_string(),
            Some(false) => "NOT met".into(),
            None => "n/a".into(),
        };
        let mut rows: Vec<Vec<String>> = self
            .rows
            .iter()
            .map(|r| {
                let d = if r.latency { 2 } else { 1 };
                let att: Vec<f64> = r.pairs.iter().map(|p| p.attached).collect();
                let base: Vec<f64> = r.pairs.iter().map(|p| p.baseline).collect();
                vec![
                    format!("{} / {}", r.attached, r.baseline),
                    size_label(r.message_bytes),
                    r.unit.clone(),
                    median(&att).map_or("n/a".into(), |v| format!("{v:.d$}")),
                    median(&base).map_or("n/a".into(), |v| format!("{v:.d$}")),
                    r.pairs.len().to_string(),
                    range(r.ratios(), 3),
                    r.ratio.map_or("n/a".into(), |v| format!("{v:.3}")),
                    format!("{} {}", if r.latency { "<=" } else { ">=" }, r.target_ratio),
                    verdict(r.met()),
                ]
            })
            .collect();
        match &self.idle {
            Some(i) => rows.push(vec![
                format!(
                    "idle: service CPU with {} attached programs waiting, {:.1} s",
                    i.programs, i.seconds
                ),
                "-".into(),
                "% of a core".into(),
                format!("{:.3}", i.percent_of_core),
                "-".into(),
                "1".into(),
                "-".into(),
                format!("{:.3}", i.percent_of_core),
                format!("<= {}", i.target_percent),
                verdict(Some(i.met())),
            ]),
            None => rows.push(vec![
                "idle: service CPU".into(),
                "-".into(),
                "% of a core".into(),
                match &self.skipped {
                    Some(w) => format!("not measured: {w}"),
                    None => "n/a".into(),
                },
                "-".into(),
                "0".into(),
                "-".into(),
                "n/a".into(),
                format!("<= {SHARED_IDLE_TARGET_PERCENT}"),
                "n/a".into(),
            ]),
        }
        vec![Table {
            title: format!(
                "Shared engine: stock perftest under roce-xdp exec --share always (attached to a roce-xdp service in each namespace) against --share never (each program's engine owns its queue), paired, order alternating; figures are medians over the pairs, ratio = median of per-pair attached / baseline; bandwidth runs -D {} s",
                self.bw_seconds
            ),
            header: [
                "comparison",
                "size",
                "unit",
                "attached",
                "baseline",
                "pairs",
                "per-pair ratios",
                "ratio",
                "target",
                "verdict",
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

    fn row(latency: bool, pairs: &[(f64, f64)]) -> SharedRow {
        let mut r = SharedRow {
            attached: "a".into(),
            baseline: "b".into(),
            message_bytes: 64,
            unit: "u".into(),
            latency,
            pairs: pairs
                .iter()
                .enumerate()
                .map(|(k, &(attached, baseline))| SharedPair {
                    attached_first: k % 2 == 0,
                    attached,
                    baseline,
                })
                .collect(),
            ratio: None,
            target_ratio: if latency { 1.3 } else { 0.9 },
        };
        r.summarise();
        r
    }

    #[test]
    fn ratios_medians_and_verdicts() {
        let bw = row(false, &[(90.0, 100.0), (80.0, 100.0), (100.0, 100.0)]);
        assert_eq!(bw.ratio, Some(0.9));
        assert_eq!(bw.met(), Some(true));
        let lat = row(true, &[(14.0, 10.0), (12.0, 10.0), (20.0, 10.0)]);
        assert_eq!(lat.ratio, Some(1.4));
        assert_eq!(lat.met(), Some(false));
        let r = SharedReport {
            rows: vec![bw, lat],
            idle: Some(SharedIdle {
                programs: 8,
                seconds: 10.0,
                cpu_seconds: 0.05,
                percent_of_core: 0.5,
                target_percent: 1.0,
            }),
            bw_seconds: 2,
            skipped: None,
        };
        let t = &r.tables()[0];
        assert_eq!(t.rows.len(), 3);
        assert_eq!(t.rows[0][7], "0.900");
        assert_eq!(t.rows[1][9], "NOT met");
        assert_eq!(t.rows[2][7], "0.500");
        assert_eq!(t.rows[2][9], "met");
        let ratios = r.target_ratios();
        assert_eq!(ratios.len(), 2);
        assert_eq!(ratios[1].target, "<= 1.3");
        let back: SharedReport = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
        assert_eq!(back, r);
        assert!(SharedReport::default().tables().is_empty());
    }
}
