//! Scatter/gather lists and inline data against the one-SGE path, on the
//! engine over the veth pair (the verbs `Device`, as the engine's WRITE and
//! SEND rows): each row is a paired comparison of two streams of the same
//! messages that differ only in how the application posts their data.
//!
//! - a 64 KiB RDMA WRITE whose source is 8 SGEs of 8 KiB
//!   (`QueuePair::post_send_sgl`, QP `max_send_sge` 8) against the same
//!   64 KiB from one SGE (`post_send`), goodput;
//! - a 64 B SEND carried inline (`post_send_inline`, `IBV_SEND_INLINE`,
//!   QP `max_inline_data` 64) against the same SEND from a registered
//!   buffer (`post_send`), message rate.
//!
//! Each point is the harness's own engine stream
//! ([`crate::engine_path::measure_point_posting`], a fresh 1-queue device
//! per point, closed before the other side of the pair runs); pairs run
//! back to back in alternating order as the paired step's do
//! ([`crate::paired::measure_pair`], [`abba_a_first`]), the rows'
//! pairs interleaved, and each row's ratio (variant / one SGE) is the
//! median of its per-pair ratios, target >= 0.95.

use engine::testbed::netns::VethPair;

use crate::engine_path::{measure_point_posting, Op, PostMode};
use crate::paired::{measure_pair, PairedOptions};
use crate::report::{Cmp, Metric, Pair, PairedTarget};
use crate::sources::SourceLayout;
use crate::stats::abba_a_first;

/// The lower bound of every row's ratio (variant / one-SGE path).
pub const BOUND: f64 = 0.95;

/// One row: `op` of `message_bytes` posted as `variant`, against the same
/// stream posted from one SGE.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SgeRow {
    pub op: Op,
    pub message_bytes: u64,
    pub variant: PostMode,
    pub metric: Metric,
}

/// The rows, in the order measured and reported.
pub const SGE_ROWS: [SgeRow; 2] = [
    SgeRow {
        op: Op::Write,
        message_bytes: 64 * 1024,
        variant: PostMode::Sges(8),
        metric: Metric::Goodput,
    },
    SgeRow {
        op: Op::Send,
        message_bytes: 64,
        variant: PostMode::Inline,
        metric: Metric::MessageRate,
    },
];

impl SgeRow {
    /// The row's name: what it compares, its figure, and where it ran.
    pub fn name(&self) -> String {
        let size = crate::report::size_label(self.message_bytes);
        match (self.op, self.variant, self.metric) {
            (Op::Write, PostMode::Sges(n), _) => format!(
                "{size} WRITE from {n} SGEs of {} / from 1 SGE, goodput (engine on veth)",
                crate::report::size_label(self.message_bytes / u64::from(n))
            ),
            (Op::Send, PostMode::Inline, _) => format!(
                "{size} SEND inline / from a registered buffer, message rate (engine on veth)"
            ),
            (op, mode, _) => format!("{size} {op:?} {mode:?} / one SGE (engine on veth)"),
        }
    }

    /// What the baseline side posts.
    pub fn baseline_name(&self) -> &'static str {
        match self.variant {
            PostMode::Inline => "registered buffer (1 SGE)",
            _ => "1 SGE",
        }
    }

    /// `Gb/s` or `Mmsg/s`.
    pub fn unit(&self) -> &'static str {
        match self.metric {
            Metric::Goodput => "Gb/s",
            Metric::MessageRate => "Mmsg/s",
        }
    }

    /// Summarises measured pairs of the row against [`BOUND`].
    pub fn summarise(&self, seconds_per_side: f64, pairs: Vec<Pair>) -> PairedTarget {
        PairedTarget::new(
            &self.name(),
            self.message_bytes,
            self.baseline_name(),
            self.unit(),
            seconds_per_side,
            Some((Cmp::AtLeast, BOUND)),
            pairs,
        )
    }

    /// The row's figure with its data posted as `mode`.
    fn figure(&self, pair: &VethPair, o: &PairedOptions, mode: PostMode) -> Result<f64, String> {
        let p = measure_point_posting(
            pair,
            self.op,
            self.message_bytes,
            SourceLayout::Perftest,
            o.point,
            o.poll,
            mode,
        )?;
        Ok(match self.metric {
            Metric::Goodput => p.gbps,
            Metric::MessageRate => p.mpps,
        })
    }
}

/// Measures every row of `rows` as `o.pairs` pairs (variant = the
/// "engine" side of each [`Pair`], one SGE = its baseline): pair 0 of
/// every row, then pair 1 of every row, and so on; pair k runs the
/// baseline first when k is even. A row whose point fails keeps the pairs
/// it has, and the failure goes to `missing`.
pub fn measure(
    pair: &VethPair,
    rows: &[SgeRow],
    o: &PairedOptions,
    progress: bool,
    missing: &mut Vec<String>,
) -> Vec<PairedTarget> {
    let mut measured: Vec<Vec<Pair>> = vec![Vec::new(); rows.len()];
    let mut failed = vec![false; rows.len()];
    for k in 0..o.pairs {
        for (i, row) in rows.iter().enumerate() {
            if failed[i] {
                continue;
            }
            let r = measure_pair(
                abba_a_first(k),
                || row.figure(pair, o, row.variant),
                || row.figure(pair, o, PostMode::OneSge),
            );
            match r {
                Ok(p) => {
                    if progress {
                        eprintln!(
                            "bench: {} {}/{}: {:.3} / {:.3} {} = {:.3}",
                            row.name(),
                            k + 1,
                            o.pairs,
                            p.engine,
                            p.baseline,
                            row.unit(),
                            p.ratio
                        );
                    }
                    measured[i].push(p);
                }
                Err(e) => {
                    failed[i] = true;
                    missing.push(format!("sge paths: {}, pair {}: {e}", row.name(), k + 1));
                }
            }
        }
    }
    rows.iter()
        .zip(measured)
        .map(|(row, pairs)| row.summarise(o.point.as_secs_f64(), pairs))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::veth_pair;

    #[test]
    fn the_rows_say_what_they_compare() {
        assert_eq!(
            SGE_ROWS[0].name(),
            "64 KiB WRITE from 8 SGEs of 8 KiB / from 1 SGE, goodput (engine on veth)"
        );
        assert_eq!(
            SGE_ROWS[1].name(),
            "64 B SEND inline / from a registered buffer, message rate (engine on veth)"
        );
        let p = SGE_ROWS[1].summarise(
            0.3,
            vec![Pair::new(false, 0.97, 1.0), Pair::new(true, 0.9, 1.0)],
        );
        assert_eq!((p.unit.as_str(), p.target.as_str()), ("Mmsg/s", ">= 0.95"));
        assert!((p.median.unwrap() - 0.935).abs() < 1e-9);
        assert_eq!(p.met, Some(false));
    }

    #[test]
    #[ignore = "needs root"]
    fn both_rows_measure_over_veth() {
        let pair = veth_pair();
        let o = PairedOptions {
            pairs: 2,
            point: std::time::Duration::from_millis(200),
            poll: Default::default(),
        };
        let mut missing = Vec::new();
        let rows = measure(&pair, &SGE_ROWS, &o, true, &mut missing);
        assert!(missing.is_empty(), "{missing:?}");
        for r in &rows {
            assert_eq!(r.pairs.len(), 2, "{r:?}");
            assert!(r.pairs.iter().all(|p| p.engine > 0.0 && p.baseline > 0.0));
            assert!(r.median.is_some_and(|m| m > 0.0), "{r:?}");
        }
    }
}
