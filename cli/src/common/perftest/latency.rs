//! Latency statistics over per-iteration samples, as perftest reports them:
//! minimum, maximum, typical (the median), average, standard deviation and
//! the 99 % / 99.9 % percentiles (nearest rank over the sorted samples).

use serde::Serialize;

/// Summary of latency samples, in microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, serde::Deserialize)]
pub struct LatencyStats {
    pub t_min_us: f64,
    pub t_max_us: f64,
    /// The median sample (perftest's "t_typical").
    pub t_typical_us: f64,
    pub t_avg_us: f64,
    /// Population standard deviation.
    pub t_stdev_us: f64,
    pub p99_us: f64,
    pub p99_9_us: f64,
}

/// Nearest-rank percentile of sorted samples, `per_mille` in 0..=1000
/// (integer arithmetic: 99.9 % of 1000 samples is rank 999 exactly).
fn percentile(sorted: &[f64], per_mille: usize) -> f64 {
    let n = sorted.len();
    let rank = (per_mille * n).div_ceil(1000);
    sorted[rank.clamp(1, n) - 1]
}

impl LatencyStats {
    /// Computes the summary of `samples_ns` (one sample per iteration, in
    /// nanoseconds). `None` when there are no samples.
    pub fn from_nanos(samples_ns: &[u64]) -> Option<LatencyStats> {
        if samples_ns.is_empty() {
            return None;
        }
        let mut us: Vec<f64> = samples_ns.iter().map(|&n| n as f64 / 1000.0).collect();
        us.sort_by(|a, b| a.total_cmp(b));
        let n = us.len() as f64;
        let avg = us.iter().sum::<f64>() / n;
        let var = us.iter().map(|x| (x - avg) * (x - avg)).sum::<f64>() / n;
        Some(LatencyStats {
            t_min_us: us[0],
            t_max_us: us[us.len() - 1],
            t_typical_us: percentile(&us, 500),
            t_avg_us: avg,
            t_stdev_us: var.sqrt(),
            p99_us: percentile(&us, 990),
            p99_9_us: percentile(&us, 999),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_to_thousand() {
        // 1..=1000 us.
        let s: Vec<u64> = (1..=1000).map(|i| i * 1000).collect();
        let l = LatencyStats::from_nanos(&s).unwrap();
        assert_eq!(l.t_min_us, 1.0);
        assert_eq!(l.t_max_us, 1000.0);
        assert_eq!(l.t_typical_us, 500.0);
        assert_eq!(l.t_avg_us, 500.5);
        assert_eq!(l.p99_us, 990.0);
        assert_eq!(l.p99_9_us, 999.0);
        // Population stdev of 1..=n is sqrt((n^2-1)/12).
        assert!((l.t_stdev_us - ((1000.0f64 * 1000.0 - 1.0) / 12.0).sqrt()).abs() < 1e-9);
    }

    #[test]
    fn single_sample_and_empty() {
        let l = LatencyStats::from_nanos(&[2500]).unwrap();
        assert_eq!(
            (l.t_min_us, l.t_max_us, l.p99_9_us, l.t_stdev_us),
            (2.5, 2.5, 2.5, 0.0)
        );
        assert!(LatencyStats::from_nanos(&[]).is_none());
    }

    #[test]
    fn unsorted_input() {
        let l = LatencyStats::from_nanos(&[3000, 1000, 2000]).unwrap();
        assert_eq!((l.t_min_us, l.t_typical_us, l.t_max_us), (1.0, 2.0, 3.0));
    }
}
