//! The connection manager's rows ([`CmReport`]), measured by
//! `rdma_cm.rs`: how many connections per second the engine sets up and
//! tears down through the CM (REQ / REP / RTU, then DREQ / DREP, on QP 1),
//! engine against engine, next to the kernel's TCP connect / close rate
//! between the same namespaces in the same run; stock `ucmatose -c N`
//! under `roce-xdp exec` on both ends, timed by the client's wall time;
//! and `-R` (the QPs connected by the CM) against the TCP exchange at
//! 64 KiB, paired, target ratio >= [`CM_WRITE_BW_TARGET`]: `roce-xdp
//! write-bw`, and stock `ib_write_bw` under `exec` on both ends (the
//! target's row of [`Report::target_ratios`](super::Report::target_ratios)).

use serde::{Deserialize, Serialize};

use super::drop_in_rows::DropInTarget;
use super::tables::{size_label, Table};
use super::Ratio;
use crate::stats::{median, min_max};

/// Target of `write-bw -R` goodput / `write-bw`'s.
pub const CM_WRITE_BW_TARGET: f64 = 0.95;

/// Connection setup rate through the CM.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CmSetupRate {
    /// Connections established and torn down (client side: connect
    /// returned, then the disconnect's DREP came) in `seconds`.
    pub connections: u64,
    pub seconds: f64,
    /// `connections / seconds`.
    pub per_second: f64,
    /// Same-run baseline: kernel TCP connect + accept + close between the
    /// same namespaces, per second (`None`: not measured).
    pub kernel_tcp_per_second: Option<f64>,
}

/// One pair of `ucmatose` client runs: `-c N` and `-c 1`, back to back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UcmatosePair {
    /// The `-c N` run came first in this pair.
    pub many_first: bool,
    /// Wall time of the client with `-c N`, seconds.
    pub many_seconds: f64,
    /// Wall time of the client with `-c 1`, seconds.
    pub one_seconds: f64,
}

impl UcmatosePair {
    /// `N / many_seconds`: connections per second of the whole client.
    pub fn per_second(&self, connections: u32) -> f64 {
        f64::from(connections) / self.many_seconds
    }

    /// `(N - 1) / (many_seconds - one_seconds)`: the rate of the
    /// connections beyond the first, what the client's start, its
    /// engine's and its first connection cost taken out (NaN when the
    /// difference is not positive).
    pub fn marginal_per_second(&self, connections: u32) -> f64 {
        let d = self.many_seconds - self.one_seconds;
        if d > 0.0 {
            f64::from(connections.saturating_sub(1)) / d
        } else {
            f64::NAN
        }
    }
}

/// Stock `ucmatose` (rdmacm-utils) under `roce-xdp exec` on both ends:
/// the client opens `connections` RC connections through the CM at once,
/// exchanges `messages` SENDs of `message_bytes` on each, and the server
/// disconnects them all.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CmUcmatose {
    /// `-c`.
    pub connections: u32,
    /// `-C`.
    pub messages: u32,
    /// `-S`.
    pub message_bytes: u32,
    pub pairs: Vec<UcmatosePair>,
    /// Median over the pairs of `N / wall time of the client with -c N`.
    pub per_second: Option<f64>,
    /// Median over the pairs of `(N - 1) / (wall(-c N) - wall(-c 1))`.
    pub marginal_per_second: Option<f64>,
}

impl CmUcmatose {
    /// The figures of `pairs`.
    pub fn new(
        connections: u32,
        messages: u32,
        message_bytes: u32,
        pairs: Vec<UcmatosePair>,
    ) -> Self {
        let rates: Vec<f64> = pairs.iter().map(|p| p.per_second(connections)).collect();
        let marginal: Vec<f64> = pairs
            .iter()
            .map(|p| p.marginal_per_second(connections))
            .filter(|r| r.is_finite())
            .collect();
        CmUcmatose {
            connections,
            messages,
            message_bytes,
            pairs,
            per_second: median(&rates),
            marginal_per_second: median(&marginal),
        }
    }
}

/// The CM's rows of a run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CmReport {
    /// Connection setup / teardown rate (`None`: not measured, see
    /// `skipped` and the report's `missing`).
    pub setup_rate: Option<CmSetupRate>,
    /// `write-bw -R` against `write-bw` (as a [`DropInTarget`]: `stock`
    /// is the `-R` run, `pairs[].stock` its figure, MB/s).
    pub write_bw: Option<DropInTarget>,
    /// Stock `ib_write_bw -R` against stock `ib_write_bw`, both under
    /// `exec` on both ends (`stock` is the `-R` run, `pairs[].stock` its
    /// figure, MB/s). Absent from older reports.
    #[serde(default)]
    pub stock_write_bw: Option<DropInTarget>,
    /// Stock `ucmatose -c N` under `exec` on both ends. Absent from older
    /// reports.
    #[serde(default)]
    pub ucmatose: Option<CmUcmatose>,
    /// Length of each `write-bw` / `ib_write_bw` run (`-D`), seconds.
    pub bw_seconds: u32,
    /// Why the step did not run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
}

/// Name of the stock `-R` comparison's row among the target ratios.
pub const STOCK_WRITE_BW_RATIO: &str =
    "ib_write_bw -R / ib_write_bw, 64 KiB goodput, stock perftest under exec on both ends (the RDMA CM adds nothing to the data path)";

impl CmReport {
    /// The stock `-R` comparison's row of the target ratios (`None`: not
    /// run).
    pub fn target_ratio(&self) -> Option<Ratio> {
        self.stock_write_bw
            .as_ref()
            .map(|w| w.ratio_row(STOCK_WRITE_BW_RATIO))
    }

    /// The three tables (none for a report from before the step existed).
    pub fn tables(&self) -> Vec<Table> {
        if self.setup_rate.is_none()
            && self.write_bw.is_none()
            && self.stock_write_bw.is_none()
            && self.ucmatose.is_none()
            && self.skipped.is_none()
        {
            return Vec::new();
        }
        let why = || match &self.skipped {
            Some(w) => format!("not measured: {w}"),
            None => "n/a".into(),
        };
        let rate = match &self.setup_rate {
            Some(r) => vec![
                "engine CM (REQ/REP/RTU + DREQ/DREP), engine against engine".into(),
                r.connections.to_string(),
                format!("{:.2}", r.seconds),
                format!("{:.0}", r.per_second),
                r.kernel_tcp_per_second
                    .map_or("n/a".into(), |k| format!("{k:.0}")),
                r.kernel_tcp_per_second
                    .map_or("n/a".into(), |k| format!("{:.3}", r.per_second / k)),
            ],
            None => vec![
                "engine CM".into(),
                "n/a".into(),
                "n/a".into(),
                why(),
                "n/a".into(),
                "n/a".into(),
            ],
        };
        let mut t = vec![Table {
            title: "RDMA CM connection setup and teardown rate: one connection at a time, a fresh RC QP each (connect: REQ, REP, QP to RTS, RTU; disconnect: DREQ, DREP; QP destroyed), against the kernel's TCP connect / accept / close between the same namespaces in the same run".into(),
            header: [
                "what",
                "connections",
                "seconds",
                "per second",
                "kernel TCP per second",
                "CM / TCP",
            ]
            .map(String::from)
            .to_vec(),
            rows: vec![rate],
        }];
        let range = |v: Vec<f64>, d: usize| match min_max(&v) {
            Some((lo, hi)) => format!("{lo:.d$} .. {hi:.d$}"),
            None => "n/a".into(),
        };
        let bw_row = |w: &Option<DropInTarget>, name: &str| match w {
            Some(w) => vec![
                format!("{} / {}", w.stock, w.tool),
                size_label(w.message_bytes),
                w.pairs.len().to_string(),
                range(w.pairs.iter().map(|p| p.stock).collect(), 1),
                range(w.pairs.iter().map(|p| p.tool).collect(), 1),
                w.ratio.map_or("n/a".into(), |r| format!("{r:.3}")),
                range(w.ratios(), 3),
                w.ci95().map_or("n/a (under 6 pairs)".into(), |(lo, hi)| {
                    format!("{lo:.3} .. {hi:.3}")
                }),
                format!(">= {}", w.target()),
                match w.met() {
                    Some(true) => "yes".into(),
                    Some(false) => "NO".into(),
                    None => why(),
                },
            ],
            None => vec![
                name.into(),
                "64 KiB".into(),
                "0".into(),
                "n/a".into(),
                "n/a".into(),
                "n/a".into(),
                "n/a".into(),
                "n/a".into(),
                format!(">= {CM_WRITE_BW_TARGET}"),
                why(),
            ],
        };
        t.push(Table {
            title: format!(
                "-R (QPs connected by the RDMA CM) against the TCP exchange, same namespaces, paired (-D {} s each, order alternating; ratio = median of per-pair -R / without, MB/s BW average): roce-xdp write-bw (-R: the exchange over a CM-connected control QP), and Debian's stock ib_write_bw under roce-xdp exec on both ends (the drop-in librdmacm and libibverbs)",
                self.bw_seconds
            ),
            header: [
                "comparison",
                "size",
                "pairs",
                "-R MB/s (min .. max)",
                "without -R MB/s (min .. max)",
                "ratio",
                "ratio min .. max",
                "ratio 95% CI",
                "target",
                "met?",
            ]
            .map(String::from)
            .to_vec(),
            rows: vec![
                bw_row(&self.write_bw, "roce-xdp write-bw -R / roce-xdp write-bw"),
                bw_row(&self.stock_write_bw, "ib_write_bw -R / ib_write_bw"),
            ],
        });
        let secs = |v: Vec<f64>| range(v, 3);
        let (title, row) = match &self.ucmatose {
            Some(u) => (
                format!(
                    "Stock ucmatose (rdmacm-utils) under roce-xdp exec on both ends: the client connects {n} RC QPs at once through the CM (REQ, REP, RTU each), {m} SEND(s) of {b} B each way on each, the server disconnects them all (DREQ, DREP), the client exits. Connections per second = {n} / the client's wall time (spawning `ip netns exec ... roce-xdp exec -- ucmatose -c {n}` to its exit: its engine's start, address and route resolution, the connections, the SENDs, the disconnections, the teardown), median over the pairs; marginal = ({n} - 1) / (wall time with -c {n} - wall time with -c 1), the -c 1 run measured in the same pair (order alternating), median over the pairs",
                    n = u.connections,
                    m = u.messages,
                    b = u.message_bytes
                ),
                vec![
                    format!("ucmatose -c {} -C {} -S {}", u.connections, u.messages, u.message_bytes),
                    u.pairs.len().to_string(),
                    secs(u.pairs.iter().map(|p| p.many_seconds).collect()),
                    secs(u.pairs.iter().map(|p| p.one_seconds).collect()),
                    u.per_second.map_or("n/a".into(), |r| format!("{r:.0}")),
                    u.marginal_per_second
                        .map_or("n/a".into(), |r| format!("{r:.0}")),
                ],
            ),
            None => (
                "Stock ucmatose under roce-xdp exec on both ends".into(),
                vec![
                    "ucmatose".into(),
                    "0".into(),
                    "n/a".into(),
                    "n/a".into(),
                    why(),
                    "n/a".into(),
                ],
            ),
        };
        t.push(Table {
            title,
            header: [
                "what",
                "pairs",
                "client wall s, -c N (min .. max)",
                "client wall s, -c 1 (min .. max)",
                "connections per second (N / wall)",
                "marginal per second",
            ]
            .map(String::from)
            .to_vec(),
            rows: vec![row],
        });
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::DropInPair;

    fn bw(stock: &str, tool: &str, pairs: &[(f64, f64)]) -> DropInTarget {
        let pairs: Vec<DropInPair> = pairs
            .iter()
            .enumerate()
            .map(|(i, &(stock, tool))| DropInPair {
                stock_first: i % 2 == 1,
                stock,
                tool,
            })
            .collect();
        let ratios: Vec<f64> = pairs.iter().map(DropInPair::ratio).collect();
        DropInTarget {
            stock: stock.into(),
            tool: tool.into(),
            message_bytes: 65536,
            latency: false,
            ratio: crate::stats::median(&ratios),
            pairs,
            target_ratio: Some(CM_WRITE_BW_TARGET),
        }
    }

    fn report() -> CmReport {
        CmReport {
            setup_rate: Some(CmSetupRate {
                connections: 500,
                seconds: 2.0,
                per_second: 250.0,
                kernel_tcp_per_second: Some(5000.0),
            }),
            write_bw: Some(bw(
                "roce-xdp write-bw -R",
                "roce-xdp write-bw",
                &[(960.0, 1000.0), (1000.0, 1000.0)],
            )),
            // Ratios 0.90, 0.92, 0.95, 0.97, 0.98, 1.00: median 0.96,
            // interval x(1)..x(6) of six = 0.90..1.00, which crosses 0.95.
            stock_write_bw: Some(bw(
                "ib_write_bw -R",
                "ib_write_bw",
                &[
                    (90.0, 100.0),
                    (92.0, 100.0),
                    (95.0, 100.0),
                    (97.0, 100.0),
                    (98.0, 100.0),
                    (100.0, 100.0),
                ],
            )),
            ucmatose: Some(CmUcmatose::new(
                65,
                1,
                100,
                vec![
                    UcmatosePair {
                        many_first: true,
                        many_seconds: 0.5,
                        one_seconds: 0.3,
                    },
                    UcmatosePair {
                        many_first: false,
                        many_seconds: 0.4,
                        one_seconds: 0.24,
                    },
                ],
            )),
            bw_seconds: 2,
            skipped: None,
        }
    }

    #[test]
    fn rows_hold_the_rates_their_baselines_and_the_paired_ratios() {
        let r = report();
        let t = r.tables();
        assert_eq!(t.len(), 3);
        assert_eq!(t[0].rows[0][3], "250");
        assert_eq!(t[0].rows[0][4], "5000");
        assert_eq!(t[0].rows[0][5], "0.050");
        let tool = &t[1].rows[0];
        assert_eq!(tool[1], "64 KiB");
        assert_eq!(
            (tool[5].as_str(), tool[6].as_str(), tool[7].as_str()),
            ("0.980", "0.960 .. 1.000", "n/a (under 6 pairs)")
        );
        assert_eq!((tool[8].as_str(), tool[9].as_str()), (">= 0.95", "yes"));
        let stock = &t[1].rows[1];
        assert_eq!(stock[0], "ib_write_bw -R / ib_write_bw");
        assert_eq!(stock[3], "90.0 .. 100.0");
        assert_eq!(
            (stock[5].as_str(), stock[7].as_str(), stock[9].as_str()),
            ("0.960", "0.900 .. 1.000", "yes")
        );
        // ucmatose: 65 / 0.5 = 130, 65 / 0.4 = 162.5: median 146.25;
        // marginal 64 / 0.2 = 320, 64 / 0.16 = 400: median 360.
        let u = &t[2].rows[0];
        assert_eq!(u[0], "ucmatose -c 65 -C 1 -S 100");
        assert_eq!(
            (u[2].as_str(), u[3].as_str()),
            ("0.400 .. 0.500", "0.240 .. 0.300")
        );
        assert_eq!((u[4].as_str(), u[5].as_str()), ("146", "360"));
        assert!(t[2].title.contains("65 / the client's wall time"));
        let json = serde_json::to_string(&r).unwrap();
        for k in [
            "setup_rate",
            "per_second",
            "kernel_tcp_per_second",
            "write_bw",
            "stock_write_bw",
            "ucmatose",
            "marginal_per_second",
            "many_seconds",
            "bw_seconds",
        ] {
            assert!(json.contains(&format!("\"{k}\"")), "{k} in {json}");
        }
        let back: CmReport = serde_json::from_str(&json).unwrap();
        assert_eq!(back, r);
        assert!(CmReport::default().tables().is_empty());
    }

    #[test]
    fn the_stock_comparison_is_a_target_ratio_with_its_interval() {
        let r = report();
        let row = r.target_ratio().unwrap();
        assert_eq!(row.name, format!("{STOCK_WRITE_BW_RATIO} [paired median]"));
        assert!((row.value.unwrap() - 0.96).abs() < 1e-9);
        assert_eq!(row.target, ">= 0.95");
        assert_eq!(row.met, Some(true));
        assert_eq!(row.ci95_decides, Some(false), "0.90 .. 1.00 crosses 0.95");
        assert_eq!(CmReport::default().target_ratio(), None);
    }

    #[test]
    fn a_report_from_before_the_stock_rows_reads() {
        let mut r = report();
        r.stock_write_bw = None;
        r.ucmatose = None;
        let mut v: serde_json::Value = serde_json::to_value(&r).unwrap();
        let cm = v.as_object_mut().unwrap();
        cm.remove("stock_write_bw");
        cm.remove("ucmatose");
        let back: CmReport = serde_json::from_value(v).unwrap();
        assert_eq!(back, r);
    }

    #[test]
    fn a_pair_whose_difference_is_not_positive_has_no_marginal_rate() {
        let p = UcmatosePair {
            many_first: true,
            many_seconds: 0.3,
            one_seconds: 0.3,
        };
        assert!(p.marginal_per_second(64).is_nan());
        let u = CmUcmatose::new(64, 1, 100, vec![p]);
        assert_eq!(u.marginal_per_second, None);
        assert!((u.per_second.unwrap() - 64.0 / 0.3).abs() < 1e-9);
    }

    #[test]
    fn a_skipped_step_says_why() {
        let r = CmReport {
            skipped: Some("the roce-xdp binary was not found".into()),
            ..CmReport::default()
        };
        let t = r.tables();
        assert!(
            t[0].rows[0][3].starts_with("not measured"),
            "{:?}",
            t[0].rows
        );
        for row in &t[1].rows {
            assert!(row[9].starts_with("not measured"), "{row:?}");
        }
        assert!(
            t[2].rows[0][4].starts_with("not measured"),
            "{:?}",
            t[2].rows
        );
    }
}
