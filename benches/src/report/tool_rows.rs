//! The latency tools' rows and the idle-cost row ([`ToolsReport`]),
//! measured by `tool_latency.rs`, with their targets: each
//! latency tool's round trip against the AF_XDP echo floor of the same
//! run, p50 ratio <= [`P50_TARGET`] and p99 ratio <= [`P99_TARGET`];
//! idle CPU per queue <= [`IDLE_TARGET`] CPU seconds per wall second.

use serde::{Deserialize, Serialize};

use super::tables::Table;
use crate::stats::Percentiles;

/// Target of a tool's p50 round trip / the floor's.
pub const P50_TARGET: f64 = 1.2;
/// Target of a tool's p99 round trip / the floor's.
pub const P99_TARGET: f64 = 2.0;
/// Target of idle CPU seconds per wall second, per queue.
pub const IDLE_TARGET: f64 = 0.01;

/// One latency tool's own figures (its `--json`), 64 B.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolLatency {
    pub tool: String,
    /// `--threaded` (engine threads) rather than run-to-completion.
    pub threaded: bool,
    pub iterations: u64,
    /// The tool reports half the round trip (send-lat, write-lat, as
    /// perftest); the round trip is twice its figures.
    pub reports_half_round_trip: bool,
    pub t_min_us: f64,
    pub t_max_us: f64,
    pub t_typical_us: f64,
    pub p99_us: f64,
    pub p99_9_us: f64,
    /// The AF_XDP echo floor's round trip measured just before this tool
    /// ran (the same number of round trips): its ratios are taken against
    /// it, so that a machine whose speed drifts over the minutes of a run
    /// moves tool and floor together. Absent in older results: the run's
    /// one floor then.
    #[serde(default)]
    pub floor: Option<Percentiles>,
    /// Every floor-then-tool pair the run measured for this tool, in the
    /// order run: the tool's round trip against the floor's just before
    /// it. The figures above are those of the pair whose p50 ratio is the
    /// median ([`ToolLatency::median_of`]): one pair's ratio moved by
    /// 1.15-2.0 from one run to the next on the development VM. Empty in
    /// older results files, which measured one pair.
    #[serde(default)]
    pub pairs: Vec<PairRatios>,
}

/// One floor-then-tool pair's ratios (round trip / the floor's).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PairRatios {
    pub p50: f64,
    pub p99: f64,
}

impl ToolLatency {
    /// This tool's round trip against its floor, if it has one.
    fn ratios(&self) -> Option<PairRatios> {
        let b = self.floor?;
        Some(PairRatios {
            p50: self.rtt(self.t_typical_us) / b.p50_us,
            p99: self.rtt(self.p99_us) / b.p99_us,
        })
    }

    /// Of several measurements of one tool, each with the floor measured
    /// just before it: the one whose p50 ratio is the median (the lower
    /// middle one of an even count), with every pair's ratios in
    /// [`ToolLatency::pairs`]; `None` for none.
    pub fn median_of(mut runs: Vec<ToolLatency>) -> Option<ToolLatency> {
        let pairs: Vec<PairRatios> = runs.iter().filter_map(ToolLatency::ratios).collect();
        let key = |t: &ToolLatency| t.ratios().map_or(f64::INFINITY, |r| r.p50);
        runs.sort_by(|a, b| key(a).total_cmp(&key(b)));
        let mid = runs.len().checked_sub(1)? / 2;
        let mut t = runs.swap_remove(mid);
        t.pairs = pairs;
        Some(t)
    }

    /// The range of the pairs' p50 ratios, as the table shows it.
    fn pairs_p50(&self) -> String {
        let (lo, hi) = self
            .pairs
            .iter()
            .fold((f64::INFINITY, 0f64), |(lo, hi), p| {
                (lo.min(p.p50), hi.max(p.p50))
            });
        match self.pairs.len() {
            0 => "-".into(),
            1 => format!("{lo:.2} (1)"),
            n => format!("{lo:.2}-{hi:.2} ({n})"),
        }
    }

    /// A figure of the tool's as a round trip.
    fn rtt(&self, us: f64) -> f64 {
        if self.reports_half_round_trip {
            2.0 * us
        } else {
            us
        }
    }
}

/// What an idle engine costs (CPU seconds per wall second, per queue).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct IdleCost {
    /// Length of each CPU measurement, seconds.
    pub window_s: f64,
    /// An open Device pair with a connected, idle QP (engine threads).
    pub device_cpu_per_queue: Option<f64>,
    /// `roce-xdp serve` with one queue, no client yet (whole process).
    pub serve_cpu_per_queue: Option<f64>,
    /// The same serve after a client connected QPs and left them idle.
    pub serve_connected_cpu_per_queue: Option<f64>,
    /// Idle time before each first round trip, seconds.
    pub gap_s: f64,
    /// Round trips (µs) of the first 64 B SEND after each idle gap.
    pub first_after_idle_us: Vec<f64>,
    /// The same ping-pong warm, before the idle window.
    pub warm_rtt: Option<Percentiles>,
}

/// The tools' rows of a run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolsReport {
    pub tools: Vec<ToolLatency>,
    /// The Device ping-pong with the polling option (`CqWait::Spin`).
    pub device_spin: Option<Percentiles>,
    pub idle: Option<IdleCost>,
    /// The AF_XDP floor of an RC ping-pong's frames
    /// (`floor_pingpong_frames`): each ping a 64 B frame then an
    /// ACK-sized one in one kick, the peer answering with the 64 B echo
    /// then an ACK-sized frame of its own in one kick, the round trip
    /// until both are back: what a SEND or WRITE ping-pong, which carries
    /// a request and then an ACK each way and waits for both (as perftest
    /// does), costs on the wire alone. A diagnostic column; the targets
    /// stay against the one-frame floor.
    #[serde(default)]
    pub floor_with_ack: Option<Percentiles>,
}

fn f(v: Option<f64>, d: usize) -> String {
    v.map_or("n/a".into(), |x| format!("{x:.d$}"))
}

fn verdict(v: Option<f64>, target: f64) -> String {
    match v {
        Some(x) if x <= target => "yes".into(),
        Some(_) => "NO".into(),
        None => "n/a".into(),
    }
}

impl ToolsReport {
    /// The tools' latency table (against `floor`, the run's AF_XDP echo
    /// round trip) and the idle table.
    pub fn tables(&self, floor: Option<Percentiles>) -> Vec<Table> {
        let mut rows = Vec::new();
        let fp50 = floor.map(|p| p.p50_us);
        let fp99 = floor.map(|p| p.p99_us);
        let ack50 = self.floor_with_ack.map(|p| p.p50_us);
        for t in &self.tools {
            let p50 = t.rtt(t.t_typical_us);
            let p99 = t.rtt(t.p99_us);
            let own = t.floor.or(floor);
            let r50 = own.map(|b| p50 / b.p50_us);
            let r99 = own.map(|b| p99 / b.p99_us);
            // The request+ACK floor is the wire cost of the tools whose
            // exchange carries an ACK each way (SEND and WRITE ping-pongs).
            let r50_ack = if t.reports_half_round_trip {
                f(ack50.map(|b| p50 / b), 2)
            } else {
                "-".into()
            };
            rows.push(vec![
                format!(
                    "roce-xdp {}{}",
                    t.tool,
                    if t.threaded {
                        " --threaded"
                    } else {
                        " (run-to-completion)"
                    }
                ),
                format!("{:.2}", t.t_min_us),
                format!("{:.2}", t.t_typical_us),
                format!("{:.2}", t.p99_us),
                format!("{:.2}", t.p99_9_us),
                format!("{:.2}", t.t_max_us),
                format!("{p50:.1}"),
                f(r50, 2),
                f(r99, 2),
                if t.threaded {
                    "-".into()
                } else {
                    format!(
                        "{} / {}",
                        verdict(r50, P50_TARGET),
                        verdict(r99, P99_TARGET)
                    )
                },
                r50_ack,
                own.map_or("n/a".into(), |b| format!("{:.1}", b.p50_us)),
                t.pairs_p50(),
            ]);
        }
        // Round-trip rows: the Device polling option, the floor itself.
        let rtt_row = |name: &str, p: Percentiles| {
            let r = |v: Option<f64>, of: f64| v.map_or("n/a".into(), |b| format!("{:.2}", of / b));
            vec![
                name.to_string(),
                "-".into(),
                format!("{:.2}", p.p50_us),
                format!("{:.2}", p.p99_us),
                format!("{:.2}", p.p999_us),
                "-".into(),
                format!("{:.1}", p.p50_us),
                r(fp50, p.p50_us),
                r(fp99, p.p99_us),
                "-".into(),
                r(ack50, p.p50_us),
                "-".into(),
                "-".into(),
            ]
        };
        if let Some(p) = self.device_spin {
            rows.push(rtt_row(
                "verbs Device, engine threads, CqWait::Spin (SEND ping-pong, round trip)",
                p,
            ));
        }
        if let Some(p) = self.floor_with_ack {
            rows.push(rtt_row(
                "AF_XDP floor, a 64 B frame then an ACK-sized one each way in one kick (round trip: until the answer and its ACK-sized frame are back)",
                p,
            ));
        }
        if let Some(p) = floor {
            rows.push(rtt_row("AF_XDP floor (echo loop, round trip)", p));
        }
        let mut t = vec![Table {
            title: format!(
                "Latency tools, 64 B, as perftest reports them (µs; send-lat and write-lat: half the round trip), against the AF_XDP floor's round trip measured just before each tool (target: p50 <= {P50_TARGET}x, p99 <= {P99_TARGET}x); each tool runs several times, each run right after a floor, and its row is the run whose p50 / floor is the median"
            ),
            header: [
                "tool",
                "t_min",
                "t_typical",
                "99%",
                "99.9%",
                "t_max",
                "round trip p50",
                "p50 / floor",
                "p99 / floor",
                "met (p50 / p99)?",
                "p50 / request+ACK floor (measured once, before the tools)",
                "floor p50 (measured just before the tool)",
                "p50 / floor of every run (lowest-highest, runs)",
            ]
            .map(String::from)
            .to_vec(),
            rows,
        }];
        if let Some(i) = &self.idle {
            let row = |name: &str, v: Option<f64>| {
                vec![
                    name.to_string(),
                    f(v, 5),
                    format!("<= {IDLE_TARGET}"),
                    verdict(v, IDLE_TARGET),
                ]
            };
            t.push(Table {
                title: format!(
                    "Idle cost: CPU seconds per wall second, per queue, over {:.0} s (from /proc)",
                    i.window_s
                ),
                header: ["what", "CPU s / s / queue", "target", "met?"]
                    .map(String::from)
                    .to_vec(),
                rows: vec![
                    row(
                        "open verbs Device, a connected idle QP (engine threads)",
                        i.device_cpu_per_queue,
                    ),
                    row(
                        "roce-xdp serve, no client (the whole process)",
                        i.serve_cpu_per_queue,
                    ),
                    row(
                        "roce-xdp serve, after a client connected QPs (idle)",
                        i.serve_connected_cpu_per_queue,
                    ),
                ],
            });
            let firsts: Vec<String> = i
                .first_after_idle_us
                .iter()
                .map(|x| format!("{x:.1}"))
                .collect();
            t.push(Table {
                title: format!(
                    "First round trip after {:.1} s idle (64 B SEND, verbs Device, engines asleep in poll(2)), µs",
                    i.gap_s
                ),
                header: ["warm p50", "warm p99", "first after idle (each)"]
                    .map(String::from)
                    .to_vec(),
                rows: vec![vec![
                    f(i.warm_rtt.map(|p| p.p50_us), 1),
                    f(i.warm_rtt.map(|p| p.p99_us), 1),
                    firsts.join(", "),
                ]],
            });
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(name: &str, threaded: bool, half: bool, typical: f64, p99: f64) -> ToolLatency {
        ToolLatency {
            tool: name.into(),
            threaded,
            iterations: 1000,
            reports_half_round_trip: half,
            t_min_us: 1.0,
            t_max_us: 100.0,
            t_typical_us: typical,
            p99_us: p99,
            p99_9_us: 50.0,
            floor: None,
            pairs: Vec::new(),
        }
    }

    #[test]
    fn tool_rows_compare_round_trips_with_the_floor() {
        let floor = Percentiles {
            samples: 1000,
            p50_us: 4.0,
            p99_us: 10.0,
            p999_us: 20.0,
        };
        let r = ToolsReport {
            tools: vec![
                // Half round trip 2.2 us: 4.4 us round trip, 1.1x the floor.
                tool("send-lat", false, true, 2.2, 9.0),
                tool("read-lat", false, false, 6.0, 30.0),
                tool("read-lat", true, false, 12.0, 30.0),
                // Its own floor, measured just before it, wins over the
                // run's: 6 us against 8 us.
                ToolLatency {
                    floor: Some(Percentiles {
                        samples: 1000,
                        p50_us: 8.0,
                        p99_us: 30.0,
                        p999_us: 40.0,
                    }),
                    ..tool("atomic-lat", false, false, 6.0, 30.0)
                },
            ],
            device_spin: None,
            floor_with_ack: Some(Percentiles {
                samples: 1000,
                p50_us: 5.5,
                p99_us: 12.0,
                p999_us: 20.0,
            }),
            idle: Some(IdleCost {
                window_s: 10.0,
                device_cpu_per_queue: Some(0.002),
                serve_cpu_per_queue: Some(0.02),
                ..IdleCost::default()
            }),
        };
        let t = r.tables(Some(floor));
        let rows = &t[0].rows;
        assert_eq!(rows[0][6], "4.4");
        assert_eq!((rows[0][7].as_str(), rows[0][8].as_str()), ("1.10", "1.80"));
        assert_eq!(rows[0][9], "yes / yes");
        assert_eq!(rows[1][9], "NO / NO");
        assert_eq!(rows[2][9], "-", "--threaded has no target");
        assert_eq!((rows[3][7].as_str(), rows[3][8].as_str()), ("0.75", "1.00"));
        assert_eq!((rows[0][11].as_str(), rows[3][11].as_str()), ("4.0", "8.0"));
        assert_eq!(rows[3][9], "yes / yes");
        assert_eq!(rows.last().unwrap()[7], "1.00", "the floor row");
        // send-lat's 4.4 us round trip against the 5.5 us request+ACK
        // floor; read-lat carries no ACK: no such ratio.
        assert_eq!((rows[0][10].as_str(), rows[1][10].as_str()), ("0.80", "-"));
        assert_eq!(rows[rows.len() - 2][7], "1.38", "the request+ACK floor row");
        assert_eq!(rows[0][12], "-", "no pairs recorded");
        let idle = &t[1].rows;
        assert_eq!(idle[0][3], "yes");
        assert_eq!(idle[1][3], "NO");
        assert_eq!(idle[2][1], "n/a");
    }

    #[test]
    fn several_runs_of_a_tool_report_the_median_one_and_every_ratio() {
        let floor = |p50_us: f64| Percentiles {
            samples: 1000,
            p50_us,
            p99_us: 10.0,
            p999_us: 20.0,
        };
        let run = |typical: f64, floor_p50: f64| ToolLatency {
            floor: Some(floor(floor_p50)),
            ..tool("read-lat", false, false, typical, 12.0)
        };
        // p50 / floor: 1.5, 1.1, 1.3 (slow tool), 1.2.
        let runs = vec![run(6.0, 4.0), run(4.4, 4.0), run(6.5, 5.0), run(4.8, 4.0)];
        let t = ToolLatency::median_of(runs).expect("a run");
        // Four runs: the lower middle one, 1.2.
        assert_eq!(t.t_typical_us, 4.8);
        assert_eq!(t.floor.map(|f| f.p50_us), Some(4.0));
        let p50: Vec<f64> = t
            .pairs
            .iter()
            .map(|p| (p.p50 * 100.0).round() / 100.0)
            .collect();
        assert_eq!(p50, vec![1.5, 1.1, 1.3, 1.2], "in the order run");
        assert!(t.pairs.iter().all(|p| (p.p99 - 1.2).abs() < 1e-9));
        let r = ToolsReport {
            tools: vec![t],
            ..ToolsReport::default()
        };
        let rows = &r.tables(None)[0].rows;
        assert_eq!(rows[0][7], "1.20");
        assert_eq!(rows[0][9], "yes / yes");
        assert_eq!(rows[0][12], "1.10-1.50 (4)");
        let three = vec![run(6.0, 4.0), run(4.4, 4.0), run(6.5, 5.0)];
        assert_eq!(
            ToolLatency::median_of(three).map(|t| t.t_typical_us),
            Some(6.5)
        );
        assert!(ToolLatency::median_of(Vec::new()).is_none());
    }
}
