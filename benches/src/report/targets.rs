//! The targets the engine is held to: the paired comparisons of its WRITE
//! with a baseline ([`PAIRED_TARGETS`], and [`PAIRED_INFO`] for
//! information), what each is named and measured in, and the ratio rows
//! of a report ([`Report::target_ratios`]): from the paired medians, or
//! from the sweep's best-of figures in a report without them.

use super::model::{Cmp, Pair, PairedTarget, Ratio, Report};
use super::tables::size_label;
use crate::sources::SourceLayout;
use crate::stats::Percentiles;

/// Label of a target ratio taken from the paired measurements.
pub const PAIRED_LABEL: &str = "[paired median]";
/// Label of a target ratio taken from the sweep's best-of figures because
/// the report has no paired measurement for it.
pub const SWEEP_LABEL: &str = "[best-of sweep, not paired]";

impl PairedTarget {
    /// The target row of [`Report::ratios`] this measurement stands for.
    pub fn ratio(&self) -> Ratio {
        Ratio {
            name: format!("{} {PAIRED_LABEL}", self.name),
            value: self.median,
            target: self.target.clone(),
            met: self.met,
            ci95_decides: self.ci95_decides,
        }
    }
}

/// A target comparison of the engine's WRITE with a baseline, measured as
/// pairs (see [`PairedTarget`]), and the sweep figures it falls back on.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PairedSpec {
    pub message_bytes: u64,
    pub baseline: Baseline,
    /// Message rate (64 B targets) or goodput.
    pub metric: Metric,
    /// Where the engine's stream places its messages (and where the
    /// baseline reads its payloads from, with [`BaselinePayload::Messages`]).
    pub sources: SourceLayout,
    /// What the baseline's sender sends.
    pub baseline_payload: BaselinePayload,
    /// The target's lower bound; `None`: measured for information.
    pub bound: Option<f64>,
}

/// The baseline of a paired target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Baseline {
    Floor,
    KernelUdp,
}

/// What the baseline's sender of a paired comparison sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BaselinePayload {
    /// The engine's messages: each payload read from where the engine's
    /// stream reads it (the spec's `sources`), so both move the same bytes.
    Messages,
    /// The floor's one frame, sent again and again (no message read), for
    /// information. (Kernel UDP has no such
    /// variant: it reads the messages either way.)
    OneFrame,
}

/// The figure a paired target compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    /// Messages per second, millions.
    MessageRate,
    /// Payload goodput, Gb/s.
    Goodput,
}

/// The paired throughput targets: the engine against the AF_XDP floor
/// (>= 0.8 at 64 B message rate, >= 0.9 at 64 KiB goodput) and against
/// kernel UDP (>= 2 at 64 B message rate); the engine's WRITE >= 0.8 x
/// the floor at 64 B and 1 KiB.
pub const PAIRED_TARGETS: [PairedSpec; 4] = [
    PairedSpec {
        message_bytes: 64,
        baseline: Baseline::Floor,
        metric: Metric::MessageRate,
        sources: SourceLayout::Perftest,
        baseline_payload: BaselinePayload::Messages,
        bound: Some(0.8),
    },
    PairedSpec {
        message_bytes: 1024,
        baseline: Baseline::Floor,
        metric: Metric::Goodput,
        sources: SourceLayout::Perftest,
        baseline_payload: BaselinePayload::Messages,
        bound: Some(0.8),
    },
    PairedSpec {
        message_bytes: 64 * 1024,
        baseline: Baseline::Floor,
        metric: Metric::Goodput,
        sources: SourceLayout::Perftest,
        baseline_payload: BaselinePayload::Messages,
        bound: Some(0.9),
    },
    PairedSpec {
        message_bytes: 64,
        baseline: Baseline::KernelUdp,
        metric: Metric::MessageRate,
        sources: SourceLayout::Perftest,
        baseline_payload: BaselinePayload::Messages,
        bound: Some(2.0),
    },
];

/// Paired comparisons measured for information, after the targets: the
/// 64 KiB WRITE target again (1) against the floor re-sending one frame,
/// which reads no message (the difference is what reading the messages
/// costs), and (2) with every message in flight
/// in a range of its own on both sides (a 2 MiB working set per side,
/// beyond this machine's L2 cache).
pub const PAIRED_INFO: [PairedSpec; 2] = [
    PairedSpec {
        message_bytes: 64 * 1024,
        baseline: Baseline::Floor,
        metric: Metric::Goodput,
        sources: SourceLayout::Perftest,
        baseline_payload: BaselinePayload::OneFrame,
        bound: None,
    },
    PairedSpec {
        message_bytes: 64 * 1024,
        baseline: Baseline::Floor,
        metric: Metric::Goodput,
        sources: SourceLayout::Spread,
        baseline_payload: BaselinePayload::Messages,
        bound: None,
    },
];

impl PairedSpec {
    /// The comparison's name (without the paired/sweep label).
    pub fn name(&self) -> String {
        let size = size_label(self.message_bytes);
        let name = match (self.baseline, self.metric) {
            (Baseline::Floor, Metric::MessageRate) => {
                format!("engine / AF_XDP floor, {size} WRITE message rate")
            }
            (Baseline::Floor, Metric::Goodput) => {
                format!("engine / AF_XDP floor, {size} WRITE goodput")
            }
            (Baseline::KernelUdp, Metric::MessageRate) => {
                format!("engine / kernel UDP, {size} message rate (WRITE)")
            }
            (Baseline::KernelUdp, Metric::Goodput) => {
                format!("engine / kernel UDP, {size} goodput (WRITE)")
            }
        };
        match (self.sources, self.baseline_payload) {
            (SourceLayout::Perftest, BaselinePayload::Messages) => name,
            (SourceLayout::Perftest, BaselinePayload::OneFrame) => {
                format!("{name}, against the floor re-sending one frame (information)")
            }
            (SourceLayout::Spread, BaselinePayload::Messages) => {
                format!("{name}, every message in flight in its own range (information)")
            }
            (SourceLayout::Spread, BaselinePayload::OneFrame) => format!(
                "{name}, every message in flight in its own range, against the floor re-sending one frame (information)"
            ),
        }
    }

    /// `AF_XDP floor` or `kernel UDP`.
    pub fn baseline_name(&self) -> &'static str {
        match self.baseline {
            Baseline::Floor => "AF_XDP floor",
            Baseline::KernelUdp => "kernel UDP",
        }
    }

    /// `Mmsg/s` or `Gb/s`.
    pub fn unit(&self) -> &'static str {
        match self.metric {
            Metric::MessageRate => "Mmsg/s",
            Metric::Goodput => "Gb/s",
        }
    }

    /// Summarises measured pairs of this comparison.
    pub fn summarise(&self, seconds_per_side: f64, pairs: Vec<Pair>) -> PairedTarget {
        PairedTarget::new(
            &self.name(),
            self.message_bytes,
            self.baseline_name(),
            self.unit(),
            seconds_per_side,
            self.bound.map(|b| (Cmp::AtLeast, b)),
            pairs,
        )
    }
}

impl Report {
    /// The ratio rows the issues' targets are stated in: the throughput
    /// targets from the paired measurements' median ratio (labelled
    /// [`PAIRED_LABEL`]), or, in a report without one, from the sweep's
    /// best-of figures (labelled [`SWEEP_LABEL`]); the latency target from
    /// the latency table.
    pub fn target_ratios(&self) -> Vec<Ratio> {
        let mr = &self.message_rate;
        let at = |size: u64| self.goodput.iter().find(|r| r.message_bytes == size);
        let p50 = |p: Option<Percentiles>| p.map(|p| p.p50_us);
        let mut out: Vec<Ratio> = PAIRED_TARGETS
            .iter()
            .filter_map(|spec| Some((spec, spec.bound?)))
            .map(|(spec, bound)| {
                let name = spec.name();
                if let Some(p) = self.paired.iter().find(|p| p.name == name) {
                    return p.ratio();
                }
                let (engine, baseline) = match (spec.metric, spec.baseline) {
                    (Metric::MessageRate, Baseline::Floor)
                        if spec.message_bytes == mr.message_bytes =>
                    {
                        (mr.write_mpps, mr.floor_mpps)
                    }
                    (Metric::MessageRate, Baseline::KernelUdp)
                        if spec.message_bytes == mr.message_bytes =>
                    {
                        (mr.write_mpps, mr.kernel_udp_mpps)
                    }
                    (Metric::Goodput, Baseline::Floor) => {
                        let row = at(spec.message_bytes);
                        (
                            row.and_then(|r| r.write_gbps),
                            row.and_then(|r| r.floor_gbps),
                        )
                    }
                    (Metric::Goodput, Baseline::KernelUdp) => {
                        let row = at(spec.message_bytes);
                        (
                            row.and_then(|r| r.write_gbps),
                            row.and_then(|r| r.kernel_udp_gbps),
                        )
                    }
                    _ => (None, None),
                };
                Ratio::new(
                    &format!("{name} {SWEEP_LABEL}"),
                    engine,
                    baseline,
                    Cmp::AtLeast,
                    bound,
                )
            })
            .collect();
        out.push(Ratio::new(
            "engine / kernel UDP, 64 B p50 round trip (SEND, run-to-completion)",
            p50(self.latency.engine_send_rtc),
            p50(self.latency.kernel_udp),
            Cmp::Below,
            1.0,
        ));
        // Scatter/gather lists and inline data against the one-SGE path.
        out.extend(self.sge_paths.iter().map(PairedTarget::ratio));
        if let Some(m) = &self.multi_queue {
            let (first, last) = (m.rows.first(), m.rows.last());
            if let (Some(one), Some(many)) = (first, last.filter(|r| r.queues > 1)) {
                out.push(Ratio::new(
                    &format!(
                        "engine CPU per packet, {} queues / 1 queue ({} WRITE, flows spread by hash)",
                        many.queues,
                        size_label(m.message_bytes)
                    ),
                    Some(many.cpu_ns_per_packet),
                    Some(one.cpu_ns_per_packet),
                    Cmp::AtMost,
                    1.1,
                ));
            }
        }
        // The RDMA CM's: stock ib_write_bw -R against ib_write_bw.
        out.extend(self.cm.target_ratio());
        // The shared engine's: attached against in-process.
        out.extend(self.shared.target_ratios());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::sample::{sample, sample_paired};
    use crate::report::INFORMATION;

    #[test]
    fn an_information_comparison_is_shown_but_is_no_target() {
        let r = sample_paired();
        let info = &r.paired[3];
        assert_eq!(info.target, INFORMATION);
        assert!((info.median.unwrap() - 0.65).abs() < 1e-9);
        assert_eq!(info.met, None);
        assert!(info
            .name
            .contains("64 KiB WRITE goodput, against the floor re-sending one frame"));
        assert!(PAIRED_INFO[1]
            .name()
            .contains("64 KiB WRITE goodput, every message in flight"));
        let md = r.to_markdown(None);
        assert!(md.contains(&format!(
            "| {} | 2 x 1.00 s | 0.650 | n/a (under 6 pairs) | 0.600–0.700 | none (information) | - |",
            info.name
        )));
        // The target rows are the four bounded comparisons and latency.
        assert_eq!(r.ratios.len(), 5);
        assert!(r.ratios.iter().all(|x| !x.name.contains("information")));
    }

    #[test]
    fn ratios_follow_the_figures_and_targets() {
        let r = sample();
        let v: Vec<(Option<f64>, Option<bool>)> =
            r.ratios.iter().map(|r| (r.value, r.met)).collect();
        assert_eq!(r.ratios.len(), 5);
        assert_eq!(v[0], (Some(0.9), Some(true))); // 2.25 / 2.5 >= 0.8
        assert_eq!(v[1], (None, None)); // no 1 KiB row in the sweep
        assert_eq!(v[2], (Some(0.85), Some(false))); // 17 / 20 < 0.9
        assert_eq!(v[3], (Some(2.25), Some(true))); // 2.25 / 1.0 >= 2
        assert_eq!(v[4], (Some(0.5), Some(true))); // 10 / 20 < 1
                                                   // Without paired measurements, every throughput row says it is not paired.
        assert!(r.ratios[..4].iter().all(|r| r.name.ends_with(SWEEP_LABEL)));
        assert_eq!(r.ratios[1].target, ">= 0.8");
    }

    #[test]
    fn target_ratios_use_the_paired_median() {
        let r = sample_paired();
        let row = |i: usize| {
            (
                r.ratios[i].name.as_str(),
                r.ratios[i].value,
                r.ratios[i].met,
            )
        };
        assert_eq!(
            row(0),
            (
                "engine / AF_XDP floor, 64 B WRITE message rate [paired median]",
                Some(0.8125),
                Some(true)
            )
        );
        // 1 KiB: the issue-5 row, from its pairs only.
        assert_eq!(
            row(1),
            (
                "engine / AF_XDP floor, 1 KiB WRITE goodput [paired median]",
                Some(0.5),
                Some(false)
            )
        );
        // 64 KiB: paired, but no pair measured: not measured, no fallback.
        assert_eq!(
            row(2),
            (
                "engine / AF_XDP floor, 64 KiB WRITE goodput [paired median]",
                None,
                None
            )
        );
        // Kernel UDP: no paired measurement: the sweep's figures, labelled so.
        assert_eq!(
            row(3),
            (
                "engine / kernel UDP, 64 B message rate (WRITE) [best-of sweep, not paired]",
                Some(2.25),
                Some(true)
            )
        );
        let p = &r.paired[0];
        assert_eq!((p.min, p.max), (Some(0.5), Some(1.0)));
        assert_eq!(
            (p.unit.as_str(), p.baseline.as_str()),
            ("Mmsg/s", "AF_XDP floor")
        );
    }

    #[test]
    fn the_median_comes_with_its_95_percent_interval_and_whether_it_decides() {
        let spec = PAIRED_TARGETS
            .iter()
            .find(|s| s.baseline == Baseline::Floor && s.message_bytes == 65536)
            .unwrap();
        // Twelve pairs, ratios 0.80, 0.82, ..., 1.02: median 0.91, interval
        // x(3)..x(10) = 0.84..0.98, which crosses 0.9.
        let pairs = |first: f64| -> Vec<Pair> {
            (0..12)
                .map(|i| Pair::new(i % 2 == 0, first + 0.02 * f64::from(i), 1.0))
                .collect()
        };
        let p = spec.summarise(0.5, pairs(0.80));
        assert!((p.median.unwrap() - 0.91).abs() < 1e-9);
        assert!((p.ci95_low.unwrap() - 0.84).abs() < 1e-9);
        assert!((p.ci95_high.unwrap() - 0.98).abs() < 1e-9);
        assert_eq!((p.met, p.ci95_decides), (Some(true), Some(false)));
        let mut r = sample();
        r.paired = vec![p];
        r.ratios = r.target_ratios();
        let md = r.to_markdown(None);
        assert!(md.contains("| 0.910 | 0.840–0.980 | 0.800–1.020 | >= 0.9 | yes (within noise: the CI crosses the bound) |"));
        // The target row it feeds says so too.
        assert!(md.contains(
            "| engine / AF_XDP floor, 64 KiB WRITE goodput [paired median] | 0.910 | >= 0.9 | yes (within noise) |"
        ));
        // Shifted up by 0.1: the whole interval is above the bound.
        let p = spec.summarise(0.5, pairs(0.90));
        assert_eq!((p.met, p.ci95_decides), (Some(true), Some(true)));
        let v: serde_json::Value =
            serde_json::from_str(&serde_json::to_string(&p).unwrap()).unwrap();
        assert!((v["ci95_low"].as_f64().unwrap() - 0.94).abs() < 1e-9);
        assert_eq!(v["ci95_decides"], true);
        // Information rows have no target to decide.
        let info = PAIRED_INFO[0].summarise(0.5, pairs(0.80));
        assert_eq!((info.met, info.ci95_decides), (None, None));
        assert!(info.ci95_low.is_some());
    }
}
