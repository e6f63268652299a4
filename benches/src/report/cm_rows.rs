//! The connection manager's rows ([`CmReport`]), measured by
//! `rdma_cm.rs`: how many connections per second the engine sets up and
//! tears down through the CM (REQ / REP / RTU, then DREQ / DREP, on QP 1),
//! engine against engine, next to the kernel's TCP connect / close rate
//! between the same namespaces in the same run; and `roce-xdp write-bw
//! -R` (the QPs connected by the CM, the exchange over a CM-connected
//! control QP) against `roce-xdp write-bw` (TCP exchange) at 64 KiB,
//! paired, target ratio >= [`CM_WRITE_BW_TARGET`].

use serde::{Deserialize, Serialize};

use super::drop_in_rows::DropInTarget;
use super::tables::{size_label, Table};
use crate::stats::min_max;

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

/// The CM's rows of a run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CmReport {
    /// Connection setup / teardown rate (`None`: not measured, see
    /// `skipped` and the report's `missing`).
    pub setup_rate: Option<CmSetupRate>,
    /// `write-bw -R` against `write-bw` (as a [`DropInTarget`]: `stock`
    /// is the `-R` run, `pairs[].stock` its figure, MB/s).
    pub write_bw: Option<DropInTarget>,
    /// Length of each `write-bw` run (`-D`), seconds.
    pub bw_seconds: u32,
    /// Why the step did not run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
}

impl CmReport {
    /// The two tables (none for a report from before the step existed).
    pub fn tables(&self) -> Vec<Table> {
        if self.setup_rate.is_none() && self.write_bw.is_none() && self.skipped.is_none() {
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
        let range = |v: Vec<f64>| match min_max(&v) {
            Some((lo, hi)) => format!("{lo:.1} .. {hi:.1}"),
            None => "n/a".into(),
        };
        let bw = match &self.write_bw {
            Some(w) => vec![
                format!("{} / {}", w.stock, w.tool),
                size_label(w.message_bytes),
                w.pairs.len().to_string(),
                range(w.pairs.iter().map(|p| p.stock).collect()),
                range(w.pairs.iter().map(|p| p.tool).collect()),
                w.ratio.map_or("n/a".into(), |r| format!("{r:.3}")),
                format!(">= {}", w.target()),
                match (w.met(), &self.skipped) {
                    (Some(true), _) => "yes".into(),
                    (Some(false), _) => "NO".into(),
                    (None, _) => why(),
                },
            ],
            None => vec![
                "write-bw -R / write-bw".into(),
                "64 KiB".into(),
                "0".into(),
                "n/a".into(),
                "n/a".into(),
                "n/a".into(),
                format!(">= {CM_WRITE_BW_TARGET}"),
                why(),
            ],
        };
        t.push(Table {
            title: format!(
                "write-bw with -R (QPs connected by the RDMA CM, exchange over a CM-connected control QP) against write-bw (TCP exchange), same namespaces, paired (-D {} s each, order alternating; ratio = median of per-pair -R / TCP, MB/s BW average)",
                self.bw_seconds
            ),
            header: [
                "comparison",
                "size",
                "pairs",
                "-R MB/s (min .. max)",
                "TCP MB/s (min .. max)",
                "ratio",
                "target",
                "met?",
            ]
            .map(String::from)
            .to_vec(),
            rows: vec![bw],
        });
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::DropInPair;

    fn report() -> CmReport {
        let pairs = vec![
            DropInPair {
                stock_first: false,
                stock: 960.0,
                tool: 1000.0,
            },
            DropInPair {
                stock_first: true,
                stock: 1000.0,
                tool: 1000.0,
            },
        ];
        CmReport {
            setup_rate: Some(CmSetupRate {
                connections: 500,
                seconds: 2.0,
                per_second: 250.0,
                kernel_tcp_per_second: Some(5000.0),
            }),
            write_bw: Some(DropInTarget {
                stock: "roce-xdp write-bw -R".into(),
                tool: "roce-xdp write-bw".into(),
                message_bytes: 65536,
                latency: false,
                ratio: crate::stats::median(&[0.96, 1.0]),
                pairs,
                target_ratio: Some(CM_WRITE_BW_TARGET),
            }),
            bw_seconds: 2,
            skipped: None,
        }
    }

    #[test]
    fn rows_hold_the_rate_its_baseline_and_the_paired_ratio() {
        let r = report();
        let t = r.tables();
        assert_eq!(t.len(), 2);
        assert_eq!(t[0].rows[0][3], "250");
        assert_eq!(t[0].rows[0][4], "5000");
        assert_eq!(t[0].rows[0][5], "0.050");
        let bw = &t[1].rows[0];
        assert_eq!(bw[1], "64 KiB");
        assert_eq!(
            (bw[5].as_str(), bw[6].as_str(), bw[7].as_str()),
            ("0.980", ">= 0.95", "yes")
        );
        let json = serde_json::to_string(&r).unwrap();
        for k in [
            "setup_rate",
            "per_second",
            "kernel_tcp_per_second",
            "write_bw",
            "bw_seconds",
        ] {
            assert!(json.contains(&format!("\"{k}\"")), "{k} in {json}");
        }
        let back: CmReport = serde_json::from_str(&json).unwrap();
        assert_eq!(back, r);
        assert!(CmReport::default().tables().is_empty());
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
        assert!(
            t[1].rows[0][7].starts_with("not measured"),
            "{:?}",
            t[1].rows
        );
    }
}
