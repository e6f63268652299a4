//! What one harness run measured: [`Report`] and its parts, exactly as
//! the JSON holds them (`--json`, `results.json`). A figure that could not
//! be measured is `None` (JSON `null`), and `missing` says why.

use serde::{Deserialize, Serialize};

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
    /// The multi-queue row on the bridged test bed (flows spread over the
    /// queues by hash, as RSS does); absent from older reports.
    #[serde(default)]
    pub multi_queue: Option<MultiQueue>,
    /// The latency tools' own loops, the Device polling option and the
    /// idle cost (absent from older reports).
    #[serde(default)]
    pub tools: super::ToolsReport,
    pub projection: Option<Projection>,
    /// Per-packet cost against the number of active QPs (`crate::qp_scale`);
    /// absent from older reports.
    #[serde(default)]
    pub qp_scale: Vec<crate::qp_scale::QpScaleRow>,
    /// The machine's memory latency over as many QPs' state as the
    /// `qp_scale` rows use (`crate::qp_scale::memory_rows`); absent from
    /// older reports.
    #[serde(default)]
    pub qp_scale_memory: Vec<crate::qp_scale::MemoryRow>,
    /// Stock perftest on the drop-in libibverbs against the engine's own
    /// tools (`crate::verbs_drop_in`); absent from older reports.
    #[serde(default)]
    pub verbs_drop_in: super::DropInReport,
    /// UCX's `ucx_perftest` on the drop-in libibverbs against the
    /// engine's own tools (`crate::ucx`); absent from older reports.
    #[serde(default)]
    pub ucx: super::UcxReport,
    /// Scatter/gather lists and inline data against the one-SGE path
    /// (`crate::sge_paths`): paired comparisons whose "engine" side is
    /// the variant (8 SGEs, inline) and whose baseline is the same stream
    /// posted from one SGE; absent from older reports.
    #[serde(default)]
    pub sge_paths: Vec<PairedTarget>,
    /// The RDMA connection manager: setup rate and `write-bw -R`
    /// (`crate::rdma_cm`); absent from older reports.
    #[serde(default)]
    pub cm: super::CmReport,
    /// The shared engine (`roce-xdp service`): attached programs against
    /// in-process ones, and the idle service's CPU (`crate::shared_engine`);
    /// absent from older reports.
    #[serde(default)]
    pub shared: super::SharedReport,
    /// A section run (`roce-xdp bench --only NAME`): the section's name;
    /// only its figures were measured. Absent from a full run's report.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub section: Option<String>,
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
}

/// The `target` of a paired comparison measured for information.
pub const INFORMATION: &str = "none (information)";

/// Comparison of a ratio with its bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cmp {
    AtLeast,
    AtMost,
    Below,
}

impl Cmp {
    fn symbol(self) -> &'static str {
        match self {
            Cmp::AtLeast => ">=",
            Cmp::AtMost => "<=",
            Cmp::Below => "<",
        }
    }

    fn holds(self, v: f64, bound: f64) -> bool {
        match self {
            Cmp::AtLeast => v >= bound,
            Cmp::AtMost => v <= bound,
            Cmp::Below => v < bound,
        }
    }
}

/// RDMA WRITE over the bridged test bed, whose bridge spreads flows over
/// each side's queues by hash as RSS does (`docs/multi-queue.md`): the same
/// QPs on one queue per side and on several.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MultiQueue {
    pub message_bytes: u64,
    /// QP pairs (QP i created on queue i % queues).
    pub qps: u32,
    /// Rounds per queue count (alternating); each figure is their median.
    pub rounds: u32,
    pub rows: Vec<MultiQueueRow>,
    /// CPU per data packet with the most queues / with one queue.
    pub cpu_ratio: Option<f64>,
}

/// One queue count of [`MultiQueue`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MultiQueueRow {
    pub queues: u32,
    pub gbps: f64,
    /// Packets received by both sides that were handed to another queue
    /// (`rx_handoff` / received), in the measured window.
    pub handoff_share: f64,
    /// CPU time of both sides' engine threads per data packet, ns.
    pub cpu_ns_per_packet: f64,
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

impl Scaling {
    /// The same test on one queue and on `queues`; the ratio is 0 when
    /// the one-queue figure is not positive.
    pub fn new(
        message_bytes: u64,
        queues: u32,
        one_queue_gbps: f64,
        many_queues_gbps: f64,
    ) -> Self {
        Scaling {
            message_bytes,
            queues,
            one_queue_gbps,
            many_queues_gbps,
            ratio: if one_queue_gbps > 0.0 {
                many_queues_gbps / one_queue_gbps
            } else {
                0.0
            },
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::sample::{sample, sample_paired};
    use crate::report::PAIRED_TARGETS;

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
}
