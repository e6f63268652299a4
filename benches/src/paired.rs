//! The paired target step of the harness: each target comparison (engine
//! WRITE against the AF_XDP floor at 64 B, 1 KiB and 64 KiB, and against
//! kernel UDP at 64 B message rate) measured as K pairs of short points,
//! the engine and its baseline back to back, in alternating order.
//!
//! Why: the sweep measures every kernel UDP size, then every floor size,
//! then every engine point, tens of seconds apart, and takes the best of
//! three rounds per figure. On a small shared VM whose speed drifts (by up
//! to 1.5x within minutes), a ratio of two such best-ofs mostly says which
//! side ran in a fast stretch. Two points measured back to back see the
//! same machine, so their ratio cancels the drift; alternating which side
//! runs first (A B, B A, ...) cancels a drift that is linear within a pair;
//! and the median over K pairs ignores the pair a sudden change of speed
//! fell into. The targets of [`crate::report::Report::ratios`] use that
//! median.
//!
//! Every point is one of the sweep's own: [`floor_point`],
//! [`kernel_stream`] and the engine's WRITE stream through
//! [`crate::engine_path::measure_points`] (a fresh 1-queue device per
//! point, closed before the baseline runs, so neither side's XDP program
//! or threads are present while the other is measured).

use std::time::Duration;

use engine::driver::PollMode;
use engine::testbed::netns::VethPair;

use crate::baselines::floor::{floor_point, FloorPayload};
use crate::baselines::kernel_udp::kernel_stream;
use crate::engine_path::{measure_points, Op};
use crate::error::HarnessError;
use crate::report::{
    Baseline, BaselinePayload, Metric, Pair, PairedSpec, PairedTarget, PAIRED_INFO, PAIRED_TARGETS,
};
use crate::stats::abba_a_first;

/// How the paired step runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PairedOptions {
    /// Pairs per target.
    pub pairs: usize,
    /// Length of each side's point.
    pub point: Duration,
    pub poll: PollMode,
}

/// Measures one pair: `baseline` then `engine` when `baseline_first`,
/// otherwise the other way round. Stops at the first error.
pub fn measure_pair<E>(
    baseline_first: bool,
    mut engine: impl FnMut() -> Result<f64, E>,
    mut baseline: impl FnMut() -> Result<f64, E>,
) -> Result<Pair, E> {
    let (e, b) = if baseline_first {
        let b = baseline()?;
        (engine()?, b)
    } else {
        let e = engine()?;
        (e, baseline()?)
    };
    Ok(Pair::new(!baseline_first, e, b))
}

/// Runs the paired step for `specs`: pair 0 of every target, then pair 1
/// of every target, and so on, so each target's pairs are spread over the
/// whole step instead of bunched in one stretch of it. Within a target,
/// pair k runs the baseline first when k is even ([`abba_a_first`]). A
/// target whose point fails keeps the pairs it has, and the failure goes
/// to `missing`.
pub fn run_specs<E: std::fmt::Display>(
    specs: &[PairedSpec],
    pairs: usize,
    seconds_per_side: f64,
    mut engine: impl FnMut(&PairedSpec) -> Result<f64, E>,
    mut baseline: impl FnMut(&PairedSpec) -> Result<f64, E>,
    mut progress: impl FnMut(&PairedSpec, usize, &Pair),
    missing: &mut Vec<String>,
) -> Vec<PairedTarget> {
    let mut measured: Vec<Vec<Pair>> = vec![Vec::new(); specs.len()];
    let mut failed = vec![false; specs.len()];
    for k in 0..pairs {
        for (i, spec) in specs.iter().enumerate() {
            if failed[i] {
                continue;
            }
            match measure_pair(abba_a_first(k), || engine(spec), || baseline(spec)) {
                Ok(p) => {
                    progress(spec, k, &p);
                    measured[i].push(p);
                }
                Err(err) => {
                    failed[i] = true;
                    missing.push(format!("paired {}, pair {}: {err}", spec.name(), k + 1));
                }
            }
        }
    }
    specs
        .iter()
        .zip(measured)
        .map(|(spec, pairs)| spec.summarise(seconds_per_side, pairs))
        .collect()
}

/// The engine's figure for `spec`: a WRITE stream of its message size.
fn engine_figure(pair: &VethPair, spec: &PairedSpec, o: &PairedOptions) -> Result<f64, String> {
    let p = measure_points(
        pair,
        &[Op::Write],
        &[spec.message_bytes],
        spec.sources,
        o.point,
        o.poll,
    )?;
    let p = p.first().ok_or("the engine returned no point")?;
    Ok(match spec.metric {
        Metric::MessageRate => p.mpps,
        Metric::Goodput => p.gbps,
    })
}

/// The baseline's figure for `spec`: the floor stream of frames as long
/// as the engine's WRITE packets, or a kernel UDP stream of the message
/// size (chunked as in the sweep).
fn baseline_figure(
    pair: &VethPair,
    spec: &PairedSpec,
    o: &PairedOptions,
) -> Result<f64, HarnessError> {
    Ok(match spec.baseline {
        Baseline::Floor => {
            let what = match spec.baseline_payload {
                BaselinePayload::Messages => FloorPayload::Messages(spec.sources),
                BaselinePayload::OneFrame => FloorPayload::OneFrame,
            };
            let p = floor_point(pair, spec.message_bytes, what, o.point, o.poll)?;
            match spec.metric {
                Metric::MessageRate => p.mpps,
                Metric::Goodput => p.gbps,
            }
        }
        Baseline::KernelUdp => {
            let s = kernel_stream(pair, spec.message_bytes, spec.sources, o.point)?;
            match spec.metric {
                Metric::MessageRate => s.mpps(),
                Metric::Goodput => s.gbps(),
            }
        }
    })
}

/// Measures every target of [`PAIRED_TARGETS`] and every comparison of
/// [`PAIRED_INFO`] on `pair`, interleaved.
pub fn measure(
    pair: &VethPair,
    o: &PairedOptions,
    progress: bool,
    missing: &mut Vec<String>,
) -> Vec<PairedTarget> {
    let specs: Vec<PairedSpec> = PAIRED_TARGETS.iter().chain(&PAIRED_INFO).copied().collect();
    run_specs(
        &specs,
        o.pairs,
        o.point.as_secs_f64(),
        |spec| engine_figure(pair, spec, o).map_err(|e| format!("engine: {e}")),
        |spec| baseline_figure(pair, spec, o).map_err(|e| e.to_string()),
        |spec, k, p| {
            if progress {
                eprintln!(
                    "bench: paired {} {}/{}: engine {:.3} / {} {:.3} {} = {:.2} ({} first)",
                    spec.name(),
                    k + 1,
                    o.pairs,
                    p.engine,
                    spec.baseline_name(),
                    p.baseline,
                    spec.unit(),
                    p.ratio,
                    if p.engine_first { "engine" } else { "baseline" }
                );
            }
        },
        missing,
    )
}

#[cfg(test)]
mod tests {
    use std::cell::{Cell, RefCell};

    use super::*;

    /// A fake measurement on a machine whose speed follows `speed(step)`,
    /// one step per point: the engine does `true_ratio` of the baseline's
    /// work at any speed. Records which side ran at each step.
    fn run_fake(
        specs: &[PairedSpec],
        pairs: usize,
        true_ratio: f64,
        speed: impl Fn(usize) -> f64,
    ) -> (Vec<PairedTarget>, Vec<(u64, &'static str)>) {
        let step = Cell::new(0usize);
        let log = RefCell::new(Vec::new());
        let tick = |spec: &PairedSpec, side: &'static str| {
            let s = step.get();
            step.set(s + 1);
            log.borrow_mut().push((spec.message_bytes, side));
            speed(s)
        };
        let mut missing = Vec::new();
        let out = run_specs(
            specs,
            pairs,
            1.0,
            |spec| Ok::<_, String>(true_ratio * tick(spec, "engine")),
            |spec| Ok::<_, String>(tick(spec, "baseline")),
            |_, _, _| {},
            &mut missing,
        );
        assert!(missing.is_empty());
        (out, log.into_inner())
    }

    #[test]
    fn pairs_alternate_and_targets_interleave() {
        let specs = &PAIRED_TARGETS[..2];
        let (out, log) = run_fake(specs, 3, 0.9, |_| 1.0);
        let want: Vec<(u64, &str)> = vec![
            (64, "baseline"),
            (64, "engine"),
            (1024, "baseline"),
            (1024, "engine"),
            (64, "engine"),
            (64, "baseline"),
            (1024, "engine"),
            (1024, "baseline"),
            (64, "baseline"),
            (64, "engine"),
            (1024, "baseline"),
            (1024, "engine"),
        ];
        assert_eq!(log, want);
        let first: Vec<bool> = out[0].pairs.iter().map(|p| p.engine_first).collect();
        assert_eq!(first, [false, true, false]);
        assert_eq!(out[0].pairs.len(), 3);
        assert!((out[0].median.unwrap() - 0.9).abs() < 1e-12);
        assert_eq!(out[0].met, Some(true)); // 0.9 >= 0.8
    }

    #[test]
    fn alternating_order_cancels_a_linear_drift() {
        // The machine gets 5 % faster every point: one side always first
        // would make every ratio 5 % off; alternating halves are off in
        // opposite directions and their median (even K) sits on the truth.
        let spec = &PAIRED_TARGETS[..1];
        let (out, _) = run_fake(spec, 6, 0.8, |s| 1.0 + 0.05 * s as f64);
        let p = &out[0];
        let (lo, hi) = (p.min.unwrap(), p.max.unwrap());
        assert!(lo < 0.8 && hi > 0.8, "pairs fall on both sides: {lo}..{hi}");
        assert!(
            (p.median.unwrap() - 0.8).abs() < 0.005,
            "median {:?}",
            p.median
        );
        // The same drift with the engine always second: every ratio high.
        let biased: Vec<f64> = (0..6)
            .map(|k| {
                let s = 2 * k;
                0.8 * (1.0 + 0.05 * (s + 1) as f64) / (1.0 + 0.05 * s as f64)
            })
            .collect();
        let m = crate::stats::median(&biased).unwrap();
        assert!(m - 0.8 > 0.02, "one-sided order is biased: {m}");
    }

    #[test]
    fn a_sudden_speed_change_spoils_one_pair_not_the_median() {
        // The machine turns 1.5x faster between the two points of pair 2
        // (steps 4 and 5; baseline first), the bimodal drift of the shared
        // VM: that pair's engine point runs fast.
        let spec = &PAIRED_TARGETS[..1];
        let (out, _) = run_fake(spec, 5, 0.85, |s| if s < 5 { 1.0 } else { 1.5 });
        let p = &out[0];
        let off: Vec<usize> = p
            .pairs
            .iter()
            .enumerate()
            .filter(|(_, q)| (q.ratio - 0.85).abs() > 1e-9)
            .map(|(i, _)| i)
            .collect();
        assert_eq!(off, [2]);
        assert!((p.median.unwrap() - 0.85).abs() < 1e-9);
        assert!(p.max.unwrap() > 1.2);
    }

    #[test]
    fn a_failing_target_keeps_its_pairs_and_says_why() {
        let specs = &PAIRED_TARGETS[..2];
        let calls = Cell::new(0);
        let mut missing = Vec::new();
        let out = run_specs(
            specs,
            3,
            0.3,
            |spec| {
                calls.set(calls.get() + 1);
                if spec.message_bytes == 1024 && calls.get() > 2 {
                    Err("stalled".to_string())
                } else {
                    Ok(1.0)
                }
            },
            |_| Ok(2.0),
            |_, _, _| {},
            &mut missing,
        );
        assert_eq!(out[0].pairs.len(), 3);
        assert_eq!(out[1].pairs.len(), 1);
        assert_eq!(out[1].median, Some(0.5));
        assert_eq!(out[1].met, Some(false));
        assert_eq!(
            missing,
            ["paired engine / AF_XDP floor, 1 KiB WRITE goodput, pair 2: stalled"]
        );
    }
}
