//! The tables a report prints: the [`Table`] type (a title, a header
//! row, body rows of strings), every table of a [`Report`] in the order
//! printed, and how a cell shows a figure (`n/a` when not measured).

use super::model::{PairedTarget, Report, INFORMATION};
use crate::stats::Percentiles;

/// A table of strings: a title, a header row and body rows.
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    pub title: String,
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

fn num(v: Option<f64>, decimals: usize) -> String {
    match v {
        Some(x) if x.is_finite() => format!("{x:.decimals$}"),
        Some(_) => "inf".into(),
        None => "n/a".into(),
    }
}

fn ratio(n: Option<f64>, d: Option<f64>) -> String {
    match (n, d) {
        (Some(n), Some(d)) if d > 0.0 => format!("{:.2}", n / d),
        _ => "n/a".into(),
    }
}

/// The paired target measurements: one row per target, then every
/// pair in the order measured (also used by `examples/paired_targets.rs`).
pub fn paired_tables(paired: &[PairedTarget]) -> [Table; 2] {
    [
        paired_summary(
            paired,
            "Paired target measurements (engine WRITE and its baseline back to back, alternating order; ratio = engine / baseline per pair)",
        ),
        paired_pairs(paired, "Paired target measurements, every pair", "engine"),
    ]
}

/// Scatter/gather lists and inline data against the one-SGE path: one
/// row per comparison, then every pair (`crate::sge_paths`).
pub fn sge_tables(rows: &[PairedTarget]) -> [Table; 2] {
    [
        paired_summary(
            rows,
            "SGE lists and inline data against the one-SGE path (engine on veth; the two streams back to back, alternating order; ratio = variant / one SGE per pair)",
        ),
        paired_pairs(
            rows,
            "SGE lists and inline data against the one-SGE path, every pair",
            "variant",
        ),
    ]
}

fn paired_summary(paired: &[PairedTarget], title: &str) -> Table {
    Table {
        title: title.into(),
        header: [
            "target",
            "pairs",
            "median ratio",
            "95 % CI of the median",
            "min–max",
            "target",
            "met?",
        ]
        .map(String::from)
        .to_vec(),
        rows: paired
            .iter()
            .map(|p| {
                vec![
                    p.name.clone(),
                    format!("{} x {:.2} s", p.pairs.len(), p.seconds_per_side),
                    num(p.median, 3),
                    match (p.ci95_low, p.ci95_high) {
                        (Some(lo), Some(hi)) => format!("{lo:.3}–{hi:.3}"),
                        _ => "n/a (under 6 pairs)".into(),
                    },
                    match (p.min, p.max) {
                        (Some(lo), Some(hi)) => format!("{lo:.3}–{hi:.3}"),
                        _ => "n/a".into(),
                    },
                    p.target.clone(),
                    if p.target == INFORMATION {
                        "-".into()
                    } else {
                        verdict_label(
                            p.met,
                            p.ci95_decides,
                            "within noise: the CI crosses the bound",
                        )
                    },
                ]
            })
            .collect(),
    }
}

/// Every pair of `paired`; `engine` names the side a pair's `engine`
/// figure belongs to.
fn paired_pairs(paired: &[PairedTarget], title: &str, engine: &str) -> Table {
    let mut rows = Vec::new();
    for p in paired {
        let decimals = if p.unit == "Mmsg/s" { 3 } else { 2 };
        for (i, pair) in p.pairs.iter().enumerate() {
            rows.push(vec![
                p.name.clone(),
                (i + 1).to_string(),
                if pair.engine_first {
                    format!("{engine}, {}", p.baseline)
                } else {
                    format!("{}, {engine}", p.baseline)
                },
                format!("{} {}", num(Some(pair.engine), decimals), p.unit),
                format!("{} {}", num(Some(pair.baseline), decimals), p.unit),
                num(Some(pair.ratio), 3),
            ]);
        }
    }
    Table {
        title: title.into(),
        header: ["target", "pair", "order", engine, "baseline", "ratio"]
            .map(String::from)
            .to_vec(),
        rows,
    }
}

/// [`met_label`], with `(noise)` after it when a 95 % interval crosses
/// the bound (`ci95_decides` false).
fn verdict_label(met: Option<bool>, ci95_decides: Option<bool>, noise: &str) -> String {
    if ci95_decides == Some(false) {
        format!("{} ({noise})", met_label(met))
    } else {
        met_label(met)
    }
}

fn met_label(met: Option<bool>) -> String {
    match met {
        Some(true) => "yes".into(),
        Some(false) => "NO".into(),
        None => "not measured".into(),
    }
}

/// `64 B`, `4 KiB`, `1 MiB`.
pub fn size_label(bytes: u64) -> String {
    if bytes >= 1 << 20 && bytes.is_multiple_of(1 << 20) {
        format!("{} MiB", bytes >> 20)
    } else if bytes >= 1 << 10 && bytes.is_multiple_of(1 << 10) {
        format!("{} KiB", bytes >> 10)
    } else {
        format!("{bytes} B")
    }
}

impl Report {
    /// "Ratios against the targets".
    fn ratios_table(&self) -> Table {
        Table {
            title: "Ratios against the targets".into(),
            header: ["ratio", "measured", "target", "met"]
                .map(String::from)
                .to_vec(),
            rows: self
                .ratios
                .iter()
                .map(|r| {
                    vec![
                        r.name.clone(),
                        num(r.value, 3),
                        r.target.clone(),
                        verdict_label(r.met, r.ci95_decides, "within noise"),
                    ]
                })
                .collect(),
        }
    }

    /// All tables, in the order they are printed (a section run's: that
    /// section's and its target ratios).
    pub fn tables(&self) -> Vec<Table> {
        if self.section.as_deref() == Some("shared") {
            let mut t = self.shared.tables();
            t.push(self.ratios_table());
            return t;
        }
        let mut t = Vec::new();
        t.push(Table {
            title: "Goodput (Gb/s of payload received) by message size".into(),
            header: [
                "message",
                "kernel UDP",
                "AF_XDP floor",
                "WRITE",
                "SEND",
                "READ",
                "WRITE/floor",
                "WRITE/UDP",
            ]
            .map(String::from)
            .to_vec(),
            rows: self
                .goodput
                .iter()
                .map(|r| {
                    vec![
                        size_label(r.message_bytes),
                        num(r.kernel_udp_gbps, 2),
                        num(r.floor_gbps, 2),
                        num(r.write_gbps, 2),
                        num(r.send_gbps, 2),
                        num(r.read_gbps, 2),
                        ratio(r.write_gbps, r.floor_gbps),
                        ratio(r.write_gbps, r.kernel_udp_gbps),
                    ]
                })
                .collect(),
        });
        let mr = &self.message_rate;
        let rate_row =
            |name: &str, v: Option<f64>| vec![name.to_string(), num(v, 3), ratio(mr.write_mpps, v)];
        t.push(Table {
            title: format!(
                "Message rate at {} (millions of messages/s received)",
                size_label(mr.message_bytes)
            ),
            header: ["path", "Mmsg/s", "engine WRITE / this"]
                .map(String::from)
                .to_vec(),
            rows: vec![
                rate_row("kernel UDP (sendmmsg/recvmmsg)", mr.kernel_udp_mpps),
                rate_row("AF_XDP floor (no protocol)", mr.floor_mpps),
                rate_row("engine RDMA WRITE", mr.write_mpps),
                rate_row("engine SEND", mr.send_mpps),
                rate_row("engine RDMA READ", mr.read_mpps),
            ],
        });
        let lat = &self.latency;
        let p50 = |p: Option<Percentiles>| p.map(|p| p.p50_us);
        let lat_row = |name: &str, p: Option<Percentiles>| {
            vec![
                name.to_string(),
                num(p50(p), 1),
                num(p.map(|p| p.p99_us), 1),
                num(p.map(|p| p.p999_us), 1),
                p.map_or("0".into(), |p| p.samples.to_string()),
                ratio(p50(p), p50(lat.kernel_udp)),
            ]
        };
        t.push(Table {
            title: format!(
                "Round-trip latency, {} ping-pong (µs)",
                size_label(lat.message_bytes)
            ),
            header: ["path", "p50", "p99", "p99.9", "samples", "p50 / UDP"]
                .map(String::from)
                .to_vec(),
            rows: vec![
                lat_row(
                    "kernel UDP (busy-polled sockets, one thread per side)",
                    lat.kernel_udp,
                ),
                lat_row("AF_XDP floor (echo loop)", lat.floor),
                lat_row(
                    "engine SEND, run-to-completion (app thread drives the engine) [target ratio]",
                    lat.engine_send_rtc,
                ),
                lat_row("engine SEND, engine threads + app thread", lat.engine_send),
            ],
        });
        if !self.paired.is_empty() {
            t.extend(paired_tables(&self.paired));
        }
        if !self.sge_paths.is_empty() {
            t.extend(sge_tables(&self.sge_paths));
        }
        t.push(self.ratios_table());
        if let Some(s) = &self.scaling {
            t.push(Table {
                title: format!(
                    "Multi-queue scaling, {} RDMA WRITE goodput",
                    size_label(s.message_bytes)
                ),
                header: ["queues", "Gb/s"].map(String::from).to_vec(),
                rows: vec![
                    vec!["1".into(), num(Some(s.one_queue_gbps), 2)],
                    vec![s.queues.to_string(), num(Some(s.many_queues_gbps), 2)],
                    vec![format!("ratio {}/1", s.queues), num(Some(s.ratio), 2)],
                ],
            });
        }
        t.extend(self.tools.tables(self.latency.floor));
        t.extend(self.verbs_drop_in.tables());
        t.extend(self.ucx.tables());
        t.extend(self.cm.tables());
        t.extend(self.shared.tables());
        if let Some(m) = &self.multi_queue {
            t.push(Table {
                title: format!(
                    "Multi-queue, flows spread over the queues by hash as RSS does (bridged veth), {} RDMA WRITE, {} QPs, median of {} rounds",
                    size_label(m.message_bytes),
                    m.qps,
                    m.rounds
                ),
                header: [
                    "queues per side",
                    "Gb/s",
                    "packets handed to another queue",
                    "engine CPU ns/packet",
                ]
                .map(String::from)
                .to_vec(),
                rows: m
                    .rows
                    .iter()
                    .map(|r| {
                        vec![
                            r.queues.to_string(),
                            num(Some(r.gbps), 2),
                            format!("{:.2} %", r.handoff_share * 100.0),
                            num(Some(r.cpu_ns_per_packet), 0),
                        ]
                    })
                    .collect(),
            });
        }
        if let Some(p) = &self.projection {
            t.push(Table {
                title: format!(
                    "PROJECTION (not a measurement): one core at {:.0} MHz, 4096 B payload per packet ({} wire bytes)",
                    p.cpu_mhz, p.wire_bytes_per_packet
                ),
                header: [
                    "basis",
                    "cycles/pkt",
                    "Gb/s per core",
                    "cores for 100G",
                    "200G",
                    "400G",
                ]
                .map(String::from)
                .to_vec(),
                rows: p
                    .rows
                    .iter()
                    .map(|r| {
                        vec![
                            r.basis.clone(),
                            num(Some(r.cycles_per_packet), 0),
                            num(Some(r.gbps_per_core), 1),
                            num(Some(r.cores_for_100g), 2),
                            num(Some(r.cores_for_200g), 2),
                            num(Some(r.cores_for_400g), 2),
                        ]
                    })
                    .collect(),
            });
        }
        if !self.qp_scale.is_empty() {
            t.push(Table {
                title: "Per-packet cost with 1 / 1K / 16K / 64K active QPs (64 B WRITE; sim: wall time per message; QP order: slot = the QPs visited front to back in memory, shuffled = in a seeded random order, as traffic from many peers; +stats = each pass timed from one of the driver's statistics snapshots to the next, that snapshot included)".into(),
                header: ["path", "QP order", "active QPs", "ns per packet", "ratio to 1 QP"]
                    .map(String::from)
                    .to_vec(),
                rows: self
                    .qp_scale
                    .iter()
                    .map(|r| {
                        vec![
                            r.path.clone(),
                            r.order.clone(),
                            r.qps.to_string(),
                            num(Some(r.ns_per_packet), 1),
                            num(Some(r.ratio), 2),
                        ]
                    })
                    .collect(),
            });
        }
        if !self.qp_scale_memory.is_empty() {
            t.push(Table {
                title: "Memory behind those rows: dependent loads, one per cache line, in a random order, over as many bytes as N QPs' state on one side (whether the state of 64K QPs comes from a cache or from memory on this machine)".into(),
                header: ["active QPs", "bytes", "ns per load"]
                    .map(String::from)
                    .to_vec(),
                rows: self
                    .qp_scale_memory
                    .iter()
                    .map(|r| {
                        vec![
                            r.qps.to_string(),
                            r.bytes.to_string(),
                            num(Some(r.ns_per_load), 1),
                        ]
                    })
                    .collect(),
            });
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::sample::{sample, sample_paired};

    #[test]
    fn sge_rows_get_their_tables_target_rows_and_json_key() {
        use crate::report::Pair;
        use crate::sge_paths::SGE_ROWS;
        let mut r = sample();
        let before = r.target_ratios().len();
        r.sge_paths = vec![
            // Ratios 0.98, 0.96: median 0.97.
            SGE_ROWS[0].summarise(
                0.3,
                vec![Pair::new(false, 9.8, 10.0), Pair::new(true, 9.6, 10.0)],
            ),
            // Ratios 0.9, 0.94: median 0.92.
            SGE_ROWS[1].summarise(
                0.3,
                vec![Pair::new(false, 0.9, 1.0), Pair::new(true, 0.94, 1.0)],
            ),
        ];
        r.ratios = r.target_ratios();
        assert_eq!(r.ratios.len(), before + 2);
        let md = r.to_markdown(None);
        assert!(md.contains("SGE lists and inline data against the one-SGE path (engine on veth"));
        assert!(md.contains(
            "| 64 KiB WRITE from 8 SGEs of 8 KiB / from 1 SGE, goodput (engine on veth) | 2 x 0.30 s | 0.970 | n/a (under 6 pairs) | 0.960–0.980 | >= 0.95 | yes |"
        ));
        assert!(md.contains(
            "| 64 B SEND inline / from a registered buffer, message rate (engine on veth) | 2 | variant, registered buffer (1 SGE) | 0.940 Mmsg/s | 1.000 Mmsg/s | 0.940 |"
        ));
        // The target rows, labelled as the paired ones are.
        assert!(md.contains(
            "| 64 B SEND inline / from a registered buffer, message rate (engine on veth) [paired median] | 0.920 | >= 0.95 | NO |"
        ));
        let v: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
        assert_eq!(v["sge_paths"].as_array().unwrap().len(), 2);
        assert!((v["sge_paths"][0]["median"].as_f64().unwrap() - 0.97).abs() < 1e-9);
        assert_eq!(v["sge_paths"][1]["unit"], "Mmsg/s");
        // An older report without the key reads as no rows.
        let mut old = v.clone();
        old.as_object_mut().unwrap().remove("sge_paths");
        let back: Report = serde_json::from_value(old).unwrap();
        assert!(back.sge_paths.is_empty());
    }

    #[test]
    fn paired_tables_show_every_pair_and_the_summary() {
        let r = sample_paired();
        let md = r.to_markdown(None);
        assert!(md.contains(
            "| target | pairs | median ratio | 95 % CI of the median | min–max | target | met? |"
        ));
        assert!(md.contains(
            "| engine / AF_XDP floor, 64 B WRITE message rate | 4 x 1.00 s | 0.812 | n/a (under 6 pairs) | 0.500–1.000 | >= 0.8 | yes |"
        ));
        assert!(md.contains(
            "| engine / AF_XDP floor, 1 KiB WRITE goodput | 3 x 1.00 s | 0.500 | n/a (under 6 pairs) | 0.250–0.750 | >= 0.8 | NO |"
        ));
        assert!(md.contains(
            "| engine / AF_XDP floor, 64 KiB WRITE goodput | 0 x 1.00 s | n/a | n/a (under 6 pairs) | n/a | >= 0.9 | not measured |"
        ));
        assert!(md.contains(
            "| engine / AF_XDP floor, 64 B WRITE message rate | 2 | engine, AF_XDP floor | 2.000 Mmsg/s | 2.000 Mmsg/s | 1.000 |"
        ));
        assert!(md.contains(
            "| engine / AF_XDP floor, 1 KiB WRITE goodput | 1 | AF_XDP floor, engine | 1.50 Gb/s | 2.00 Gb/s | 0.750 |"
        ));
        // The summary precedes the ratios it feeds.
        let summary = md.find("**Paired target measurements (").unwrap();
        assert!(summary < md.find("**Ratios against the targets**").unwrap());
        let text = r.to_text();
        assert!(text.contains("Paired target measurements, every pair"));
        assert!(text.contains("0.500–1.000"));
        // A report without pairs has neither table.
        assert!(!sample().to_text().contains("Paired target"));
    }

    #[test]
    fn a_section_run_prints_only_its_tables_and_ratios() {
        let mut r = sample();
        r.section = Some("shared".into());
        r.shared.skipped = Some("no perftest".into());
        r.ratios = r.shared.target_ratios();
        let titles: Vec<String> = r.tables().into_iter().map(|t| t.title).collect();
        assert_eq!(titles.len(), 2, "{titles:?}");
        assert!(titles[0].starts_with("Shared engine"));
        assert_eq!(titles[1], "Ratios against the targets");
        assert!(r.to_text().contains("not measured: no perftest"));
        let back: crate::report::Report = serde_json::from_str(&r.to_json()).unwrap();
        assert_eq!(back.section.as_deref(), Some("shared"));
        // A full run's report has no `section` key and every table.
        assert!(!sample().to_json().contains("\"section\""));
        assert!(sample().tables().len() > 2);
    }

    #[test]
    fn latency_table_shows_both_engine_modes_against_udp() {
        let r = sample();
        let md = r.to_markdown(None);
        assert!(md.contains(
            "| engine SEND, run-to-completion (app thread drives the engine) [target ratio] | 10.0 | 30.0 | 35.0 | 10 | 0.50 |"
        ));
        assert!(md.contains(
            "| engine SEND, engine threads + app thread | 30.0 | 60.0 | 70.0 | 10 | 1.50 |"
        ));
        assert!(md.contains("| AF_XDP floor (echo loop) | n/a | n/a | n/a | 0 | n/a |"));
        // The target ratio is the run-to-completion row's.
        let lat = &r.ratios[4];
        assert!(lat.name.contains("run-to-completion"));
        assert_eq!(lat.value, Some(0.5));
    }

    #[test]
    fn size_labels() {
        assert_eq!(size_label(64), "64 B");
        assert_eq!(size_label(4096), "4 KiB");
        assert_eq!(size_label(1 << 20), "1 MiB");
        assert_eq!(size_label(1500), "1500 B");
    }
}
