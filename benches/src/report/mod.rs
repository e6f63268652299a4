//! The harness's result: every figure, the paired target measurements, the
//! ratios against the targets of issues 5 and 7, and renderings as a
//! plain-text table, Markdown and JSON.
//! A figure that could not be measured is `None`, and `missing` says why;
//! nothing here is ever filled in by hand.

use serde::{Deserialize, Serialize};

use crate::sources::SourceLayout;
use crate::stats::Percentiles;
use crate::sysinfo::Machine;

/// Version of the JSON layout; bump on incompatible changes.
pub const SCHEMA_VERSION: u32 = 1;

/// Everything one harness run measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub schema: u32,
    pub machine: Machine,
    pub setup: Setup,
    /// Goodput by message size, one row per size.
    pub goodput: Vec<GoodputRow>,
    /// Message rate at the smallest message size.
    pub message_rate: MessageRate,
    /// 64 B round trips.
    pub latency: Latency,
    /// The ratios the targets are stated in.
    pub ratios: Vec<Ratio>,
    /// The target comparisons measured as adjacent engine/baseline pairs
    /// (absent from reports written before the paired step existed).
    #[serde(default)]
    pub paired: Vec<PairedTarget>,
    pub scaling: Option<Scaling>,
    pub projection: Option<Projection>,
    /// How the figures were obtained (chunking, modes, ...).
    pub notes: Vec<String>,
    /// What was not measured, and why.
    pub missing: Vec<String>,
}

/// How the run was set up.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Setup {
    pub quick: bool,
    /// MTU of both veth ends.
    pub link_mtu: u32,
    /// RoCE path MTU the engine used (payload bytes per packet).
    pub roce_pmtu: u32,
    /// Largest UDP datagram the kernel baseline sends; bigger messages are
    /// sent as several datagrams of this size.
    pub udp_chunk: u32,
    /// XDP attach mode on the veth ends (`native`/`generic`).
    pub xdp_mode: String,
    /// Whether the AF_XDP sockets were bound zero-copy (veth: never).
    pub xsk_zero_copy: bool,
    /// Packets per ring batch.
    pub batch: u32,
    /// Length of one throughput measurement, seconds.
    pub seconds_per_point: f64,
    /// Round trips per latency measurement.
    pub pingpong_iterations: u32,
}

/// Goodput (payload bits per second, received) at one message size.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct GoodputRow {
    pub message_bytes: u64,
    pub kernel_udp_gbps: Option<f64>,
    pub floor_gbps: Option<f64>,
    pub write_gbps: Option<f64>,
    pub send_gbps: Option<f64>,
    pub read_gbps: Option<f64>,
}

/// Messages per second (millions) at `message_bytes`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MessageRate {
    pub message_bytes: u64,
    pub kernel_udp_mpps: Option<f64>,
    pub floor_mpps: Option<f64>,
    pub write_mpps: Option<f64>,
    pub send_mpps: Option<f64>,
    pub read_mpps: Option<f64>,
}

/// Round-trip latency of 64 B ping-pongs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Latency {
    pub message_bytes: u64,
    /// Kernel UDP sockets, one busy-polling thread per side.
    pub kernel_udp: Option<Percentiles>,
    pub floor: Option<Percentiles>,
    /// Engine SEND through the verbs `Device`: engine threads plus one
    /// application thread playing both sides.
    pub engine_send: Option<Percentiles>,
    /// Engine SEND in run-to-completion mode: one application thread per
    /// side drives its engine (the row the p50 target ratio uses).
    #[serde(default)]
    pub engine_send_rtc: Option<Percentiles>,
}

/// A ratio of two measured figures and the target it is held against.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ratio {
    pub name: String,
    pub value: Option<f64>,
    /// The comparison and bound, e.g. `>= 0.8` or `< 1`.
    pub target: String,
    /// Whether the target is met (`None` if not measured).
    pub met: Option<bool>,
    /// For a paired median: whether its 95 % interval lies on the same side
    /// of the bound ([`PairedTarget::ci95_decides`]); `None` otherwise.
    #[serde(default)]
    pub ci95_decides: Option<bool>,
}

impl Ratio {
    /// `numerator / denominator` held against `op bound`.
    pub fn new(
        name: &str,
        numerator: Option<f64>,
        denominator: Option<f64>,
        op: Cmp,
        bound: f64,
    ) -> Ratio {
        let value = match (numerator, denominator) {
            (Some(n), Some(d)) if d > 0.0 => Some(n / d),
            _ => None,
        };
        Ratio {
            name: name.to_string(),
            value,
            target: format!("{} {bound}", op.symbol()),
            met: value.map(|v| op.holds(v, bound)),
            ci95_decides: None,
        }
    }
}

/// One pair of a paired target measurement: the engine and its baseline
/// measured back to back.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Pair {
    /// Whether the engine ran first (pairs alternate: baseline first in
    /// pair 0, engine first in pair 1, ...).
    pub engine_first: bool,
    /// The engine's figure, in the target's `unit`.
    pub engine: f64,
    /// The baseline's figure, in the target's `unit`.
    pub baseline: f64,
    /// `engine / baseline`.
    pub ratio: f64,
}

impl Pair {
    /// A pair of figures; the ratio is `engine / baseline` (NaN when the
    /// baseline is not positive, which the statistics then sort last).
    pub fn new(engine_first: bool, engine: f64, baseline: f64) -> Pair {
        Pair {
            engine_first,
            engine,
            baseline,
            ratio: if baseline > 0.0 {
                engine / baseline
            } else {
                f64::NAN
            },
        }
    }
}

/// A target ratio measured as adjacent engine/baseline pairs in
/// alternating order, summarised by the median of the per-pair ratios:
/// both sides of a pair see the same machine speed, so the ratio does not
/// depend on how fast the machine was when each side happened to run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PairedTarget {
    /// The comparison, e.g. `engine / AF_XDP floor, 64 B WRITE message rate`.
    pub name: String,
    pub message_bytes: u64,
    /// `AF_XDP floor` or `kernel UDP`.
    pub baseline: String,
    /// Unit of the pairs' figures (`Mmsg/s` or `Gb/s`).
    pub unit: String,
    /// Length of each side's measurement, seconds.
    pub seconds_per_side: f64,
    /// The comparison and bound, e.g. `>= 0.8`.
    pub target: String,
    /// Every pair, in the order measured.
    pub pairs: Vec<Pair>,
    /// Median, smallest and largest of the per-pair ratios.
    pub median: Option<f64>,
    pub min: Option<f64>,
    pub max: Option<f64>,
    /// 95 % confidence interval of the median ratio (distribution-free,
    /// from the pairs' order statistics: [`crate::stats::median_ci`]);
    /// `None` with fewer than 6 pairs.
    #[serde(default)]
    pub ci95_low: Option<f64>,
    #[serde(default)]
    pub ci95_high: Option<f64>,
    /// Whether the median meets the target (`None` if no pair was measured).
    pub met: Option<bool>,
    /// Whether the whole 95 % interval is on the same side of the target's
    /// bound as the median, i.e. the verdict `met` does not hinge on the
    /// machine's noise (`None` without a target or an interval).
    #[serde(default)]
    pub ci95_decides: Option<bool>,
}

impl PairedTarget {
    /// Summarises `pairs` against `op bound`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        name: &str,
        message_bytes: u64,
        baseline: &str,
        unit: &str,
        seconds_per_side: f64,
        target: Option<(Cmp, f64)>,
        pairs: Vec<Pair>,
    ) -> PairedTarget {
        let ratios: Vec<f64> = pairs
            .iter()
            .map(|p| p.ratio)
            .filter(|r| r.is_finite())
            .collect();
        let median = crate::stats::median(&ratios);
        let range = crate::stats::min_max(&ratios);
        let ci = crate::stats::median_ci(&ratios, 0.95);
        PairedTarget {
            name: name.to_string(),
            message_bytes,
            baseline: baseline.to_string(),
            unit: unit.to_string(),
            seconds_per_side,
            target: match target {
                Some((op, bound)) => format!("{} {bound}", op.symbol()),
                None => INFORMATION.into(),
            },
            pairs,
            median,
            min: range.map(|r| r.0),
            max: range.map(|r| r.1),
            ci95_low: ci.map(|c| c.0),
            ci95_high: ci.map(|c| c.1),
            met: target.and_then(|(op, bound)| median.map(|m| op.holds(m, bound))),
            ci95_decides: target.and_then(|(op, bound)| {
                ci.map(|(lo, hi)| op.holds(lo, bound) == op.holds(hi, bound))
            }),
        }
    }

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

/// The `target` of a paired comparison measured for information.
pub const INFORMATION: &str = "none (information)";

/// Label of a target ratio taken from the paired measurements.
pub const PAIRED_LABEL: &str = "[paired median]";
/// Label of a target ratio taken from the sweep's best-of figures because
/// the report has no paired measurement for it.
pub const SWEEP_LABEL: &str = "[best-of sweep, not paired]";

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
    /// The floor's one frame, sent again and again (no message read): the
    /// floor before 2026-11-30, for information. (Kernel UDP has no such
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

/// The paired targets: issue 7 (engine / floor >= 0.8 at 64 B message
/// rate, >= 0.9 at 64 KiB goodput; engine / kernel UDP >= 2 at 64 B
/// message rate) and issue 5 (engine WRITE >= 0.8 x floor at 64 B and
/// 1 KiB).
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
/// which reads no message (the floor before 2026-11-30: the difference is
/// what reading the messages costs), and (2) with every message in flight
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

/// Comparison of a ratio with its bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cmp {
    AtLeast,
    Below,
}

impl Cmp {
    fn symbol(self) -> &'static str {
        match self {
            Cmp::AtLeast => ">=",
            Cmp::Below => "<",
        }
    }

    fn holds(self, v: f64, bound: f64) -> bool {
        match self {
            Cmp::AtLeast => v >= bound,
            Cmp::Below => v < bound,
        }
    }
}

/// The WRITE test on one queue and on several.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Scaling {
    pub message_bytes: u64,
    pub queues: u32,
    pub one_queue_gbps: f64,
    pub many_queues_gbps: f64,
    /// `many_queues_gbps / one_queue_gbps`.
    pub ratio: f64,
}

/// Line rate one core would sustain at 4096-byte MTU, derived from
/// measured cycles per packet. A projection, not a measurement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Projection {
    pub cpu_mhz: f64,
    /// Wire bytes of one 4096-byte-payload RoCE packet, including the
    /// Ethernet FCS, preamble and inter-frame gap.
    pub wire_bytes_per_packet: u32,
    pub rows: Vec<ProjectionRow>,
}

/// One basis of the projection.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProjectionRow {
    /// What was measured.
    pub basis: String,
    pub cycles_per_packet: f64,
    /// Payload goodput one core would sustain with 4096 B packets.
    pub gbps_per_core: f64,
    /// Cores needed to fill 100, 200 and 400 Gb/s links at 4096 B packets.
    pub cores_for_100g: f64,
    pub cores_for_200g: f64,
    pub cores_for_400g: f64,
}

impl ProjectionRow {
    /// Projects `cycles_per_packet` at `cpu_mhz` onto 4096-byte packets
    /// of `wire_bytes` each.
    pub fn project(basis: &str, cycles_per_packet: f64, cpu_mhz: f64, wire_bytes: u32) -> Self {
        let pps = if cycles_per_packet > 0.0 {
            cpu_mhz * 1e6 / cycles_per_packet
        } else {
            0.0
        };
        let cores = |gbps: f64| {
            let link_pps = gbps * 1e9 / (wire_bytes as f64 * 8.0);
            if pps > 0.0 {
                link_pps / pps
            } else {
                f64::INFINITY
            }
        };
        ProjectionRow {
            basis: basis.to_string(),
            cycles_per_packet,
            gbps_per_core: pps * 4096.0 * 8.0 / 1e9,
            cores_for_100g: cores(100.0),
            cores_for_200g: cores(200.0),
            cores_for_400g: cores(400.0),
        }
    }
}

/// A table of strings: a title, a header row and body rows.
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    pub title: String,
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

impl Table {
    /// Fixed-width plain text.
    pub fn to_text(&self) -> String {
        let widths: Vec<usize> = (0..self.header.len())
            .map(|c| {
                std::iter::once(&self.header)
                    .chain(&self.rows)
                    .map(|r| r.get(c).map_or(0, |s| s.chars().count()))
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let line = |r: &[String]| {
            let cells: Vec<String> = r
                .iter()
                .zip(&widths)
                .enumerate()
                .map(|(i, (s, w))| {
                    if i == 0 {
                        format!("{s:<w$}")
                    } else {
                        format!("{s:>w$}")
                    }
                })
                .collect();
            cells.join("  ").trim_end().to_string()
        };
        let mut out = format!("{}\n{}\n", self.title, line(&self.header));
        for r in &self.rows {
            out.push_str(&line(r));
            out.push('\n');
        }
        out
    }

    /// GitHub-flavoured Markdown.
    pub fn to_markdown(&self) -> String {
        let mut out = format!("**{}**\n\n| {} |\n", self.title, self.header.join(" | "));
        let aligns: Vec<&str> = (0..self.header.len())
            .map(|i| if i == 0 { "---" } else { "---:" })
            .collect();
        out.push_str(&format!("|{}|\n", aligns.join("|")));
        for r in &self.rows {
            out.push_str(&format!("| {} |\n", r.join(" | ")));
        }
        out
    }
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
    [paired_summary(paired), paired_pairs(paired)]
}

fn paired_summary(paired: &[PairedTarget]) -> Table {
    Table {
        title: "Paired target measurements (engine WRITE and its baseline back to back, alternating order; ratio = engine / baseline per pair)".into(),
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

fn paired_pairs(paired: &[PairedTarget]) -> Table {
    let mut rows = Vec::new();
    for p in paired {
        let decimals = if p.unit == "Mmsg/s" { 3 } else { 2 };
        for (i, pair) in p.pairs.iter().enumerate() {
            rows.push(vec![
                p.name.clone(),
                (i + 1).to_string(),
                if pair.engine_first {
                    format!("engine, {}", p.baseline)
                } else {
                    format!("{}, engine", p.baseline)
                },
                format!("{} {}", num(Some(pair.engine), decimals), p.unit),
                format!("{} {}", num(Some(pair.baseline), decimals), p.unit),
                num(Some(pair.ratio), 3),
            ]);
        }
    }
    Table {
        title: "Paired target measurements, every pair".into(),
        header: ["target", "pair", "order", "engine", "baseline", "ratio"]
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
        out
    }

    /// All tables, in the order they are printed.
    pub fn tables(&self) -> Vec<Table> {
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
        t.push(Table {
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
        });
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
        t
    }

    fn header_lines(&self) -> Vec<String> {
        let m = &self.machine;
        let s = &self.setup;
        vec![
            format!(
                "Run: {} ({} run); CPU: {} ({} cores, {:.0} MHz); kernel {}",
                m.date_utc,
                if s.quick { "quick" } else { "full" },
                m.cpu_model,
                m.cores,
                m.cpu_mhz,
                m.kernel
            ),
            format!(
                "Link: veth pair in two fresh network namespaces, MTU {}; RoCE PMTU {}; XDP {} mode, AF_XDP {}; batch {}; {:.2} s per throughput point; {} round trips per latency figure",
                s.link_mtu,
                s.roce_pmtu,
                s.xdp_mode,
                if s.xsk_zero_copy { "zero-copy" } else { "copy mode" },
                s.batch,
                s.seconds_per_point,
                s.pingpong_iterations
            ),
        ]
    }

    /// The report as plain text (what the CLI prints).
    pub fn to_text(&self) -> String {
        let mut out = self.header_lines().join("\n");
        out.push_str("\n\n");
        for t in self.tables() {
            out.push_str(&t.to_text());
            out.push('\n');
        }
        for n in &self.notes {
            out.push_str(&format!("note: {n}\n"));
        }
        for m in &self.missing {
            out.push_str(&format!("not measured: {m}\n"));
        }
        out
    }

    /// The report as Markdown (what the README's Results section is
    /// pasted from). `plot` is the file name of the SVG, if written.
    pub fn to_markdown(&self, plot: Option<&str>) -> String {
        let mut out = String::new();
        for l in self.header_lines() {
            out.push_str(&format!("{l}\n\n"));
        }
        out.push_str("Every figure below was measured by that run (`roce-xdp bench --out DIR`); none is written by hand.\n\n");
        if let Some(p) = plot {
            out.push_str(&format!("![goodput versus message size]({p})\n\n"));
        }
        for t in self.tables() {
            out.push_str(&t.to_markdown());
            out.push('\n');
        }
        if !self.notes.is_empty() {
            out.push_str("Notes:\n\n");
            for n in &self.notes {
                out.push_str(&format!("- {n}\n"));
            }
            out.push('\n');
        }
        if !self.missing.is_empty() {
            out.push_str("Not measured in this run:\n\n");
            for m in &self.missing {
                out.push_str(&format!("- {m}\n"));
            }
            out.push('\n');
        }
        out
    }

    /// The report as pretty-printed JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a report always serializes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn sample() -> Report {
        let mut r = Report {
            schema: SCHEMA_VERSION,
            machine: Machine {
                date_utc: "2026-11-29 20:00:00 UTC".into(),
                cpu_model: "Test CPU".into(),
                cpu_mhz: 2000.0,
                cores: 2,
                kernel: "6.18".into(),
            },
            setup: Setup {
                quick: true,
                link_mtu: 4200,
                roce_pmtu: 4096,
                udp_chunk: 4172,
                xdp_mode: "native".into(),
                xsk_zero_copy: false,
                batch: 64,
                seconds_per_point: 0.25,
                pingpong_iterations: 1000,
            },
            goodput: vec![
                GoodputRow {
                    message_bytes: 64,
                    kernel_udp_gbps: Some(0.5),
                    floor_gbps: Some(1.0),
                    write_gbps: Some(0.9),
                    send_gbps: None,
                    read_gbps: None,
                },
                GoodputRow {
                    message_bytes: 65536,
                    kernel_udp_gbps: Some(10.0),
                    floor_gbps: Some(20.0),
                    write_gbps: Some(17.0),
                    send_gbps: None,
                    read_gbps: None,
                },
            ],
            message_rate: MessageRate {
                message_bytes: 64,
                kernel_udp_mpps: Some(1.0),
                floor_mpps: Some(2.5),
                write_mpps: Some(2.25),
                send_mpps: None,
                read_mpps: None,
            },
            latency: Latency {
                message_bytes: 64,
                kernel_udp: Some(Percentiles {
                    samples: 10,
                    p50_us: 20.0,
                    p99_us: 40.0,
                    p999_us: 50.0,
                }),
                floor: None,
                engine_send: Some(Percentiles {
                    samples: 10,
                    p50_us: 30.0,
                    p99_us: 60.0,
                    p999_us: 70.0,
                }),
                engine_send_rtc: Some(Percentiles {
                    samples: 10,
                    p50_us: 10.0,
                    p99_us: 30.0,
                    p999_us: 35.0,
                }),
            },
            ratios: vec![],
            paired: vec![],
            scaling: None,
            projection: None,
            notes: vec!["a note".into()],
            missing: vec!["READ: not built".into()],
        };
        r.ratios = r.target_ratios();
        r
    }

    /// The sample with paired measurements for the three floor targets
    /// (the kernel UDP one left out, as if it had failed).
    pub(crate) fn sample_paired() -> Report {
        let mut r = sample();
        let floor = |size: u64| {
            PAIRED_TARGETS
                .iter()
                .find(|s| s.baseline == Baseline::Floor && s.message_bytes == size)
                .unwrap()
        };
        r.paired = vec![
            // Ratios 0.5, 1.0, 0.875, 0.75: median 0.8125.
            floor(64).summarise(
                1.0,
                vec![
                    Pair::new(false, 1.0, 2.0),
                    Pair::new(true, 2.0, 2.0),
                    Pair::new(false, 1.75, 2.0),
                    Pair::new(true, 1.5, 2.0),
                ],
            ),
            // Ratios 0.75, 0.5, 0.25: median 0.5.
            floor(1024).summarise(
                1.0,
                vec![
                    Pair::new(false, 1.5, 2.0),
                    Pair::new(true, 1.0, 2.0),
                    Pair::new(false, 0.5, 2.0),
                ],
            ),
            floor(65536).summarise(1.0, vec![]),
            // Ratios 0.6, 0.7: median 0.65, no target.
            PAIRED_INFO[0].summarise(
                1.0,
                vec![Pair::new(false, 6.0, 10.0), Pair::new(true, 7.0, 10.0)],
            ),
        ];
        r.ratios = r.target_ratios();
        r
    }

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
    fn paired_json_round_trips_and_old_reports_still_parse() {
        let r = sample_paired();
        let json = r.to_json();
        let back: Report = serde_json::from_str(&json).unwrap();
        assert_eq!(back, r);
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        let pair = &v["paired"][1]["pairs"][0];
        assert_eq!(pair["engine_first"], false);
        assert_eq!(pair["engine"], 1.5);
        assert_eq!(pair["baseline"], 2.0);
        assert_eq!(pair["ratio"], 0.75);
        assert_eq!(v["paired"][1]["median"], 0.5);
        // A report written before the paired step: no "paired" key.
        let mut old: serde_json::Value = serde_json::from_str(&sample().to_json()).unwrap();
        old.as_object_mut().unwrap().remove("paired");
        let back: Report = serde_json::from_value(old).unwrap();
        assert!(back.paired.is_empty());
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

    #[test]
    fn pair_ratio_of_a_zero_baseline_is_left_out() {
        let p = PAIRED_TARGETS[0].summarise(
            0.3,
            vec![Pair::new(false, 1.0, 0.0), Pair::new(true, 0.9, 1.0)],
        );
        assert!(p.pairs[0].ratio.is_nan());
        assert_eq!((p.median, p.min, p.max), (Some(0.9), Some(0.9), Some(0.9)));
    }

    #[test]
    fn missing_figures_make_unmeasured_ratios() {
        let r = Ratio::new("x", None, Some(1.0), Cmp::AtLeast, 1.0);
        assert_eq!((r.value, r.met), (None, None));
        assert_eq!(r.target, ">= 1");
    }

    #[test]
    fn json_round_trips() {
        let r = sample();
        let back: Report = serde_json::from_str(&r.to_json()).unwrap();
        assert_eq!(back, r);
    }

    #[test]
    fn text_and_markdown_carry_every_figure() {
        let r = sample();
        let text = r.to_text();
        assert!(text.contains("64 KiB"));
        assert!(text.contains("17.00"));
        assert!(text.contains("0.85"));
        assert!(text.contains("not measured: READ: not built"));
        let md = r.to_markdown(Some("goodput.svg"));
        assert!(md.contains("| 64 KiB | 10.00 | 20.00 | 17.00 | n/a | n/a | 0.85 | 1.70 |"));
        assert!(md.contains("![goodput versus message size](goodput.svg)"));
        assert!(md.contains("Test CPU"));
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
    fn reports_without_the_run_to_completion_row_still_parse() {
        let mut v: serde_json::Value = serde_json::from_str(&sample().to_json()).unwrap();
        v["latency"]
            .as_object_mut()
            .unwrap()
            .remove("engine_send_rtc");
        let back: Report = serde_json::from_value(v).unwrap();
        assert_eq!(back.latency.engine_send_rtc, None);
    }

    #[test]
    fn projection_converts_cycles_to_line_rate() {
        // 2000 cycles at 2000 MHz = 1 Mpps = 32.768 Gb/s of 4096 B payload.
        let p = ProjectionRow::project("x", 2000.0, 2000.0, 4178);
        assert!((p.gbps_per_core - 32.768).abs() < 1e-9);
        // 100 Gb/s of 4178-byte wire packets = 2.9919 Mpps = 2.99 cores.
        assert!((p.cores_for_100g - 100e9 / (4178.0 * 8.0) / 1e6).abs() < 1e-9);
    }

    #[test]
    fn size_labels() {
        assert_eq!(size_label(64), "64 B");
        assert_eq!(size_label(4096), "4 KiB");
        assert_eq!(size_label(1 << 20), "1 MiB");
        assert_eq!(size_label(1500), "1500 B");
    }
}
