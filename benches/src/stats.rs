//! Small statistics helpers: latency percentiles, rates, the median and
//! the alternating (ABBA) order of paired measurements, and the best-of
//! merges of repeated rounds.

use std::time::Duration;

/// Latency percentiles of a set of round trips, in microseconds.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Percentiles {
    pub samples: u64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
}

impl Percentiles {
    /// Percentiles (nearest-rank) of `samples`; `None` if there are none.
    pub fn of(samples: &mut [Duration]) -> Option<Percentiles> {
        if samples.is_empty() {
            return None;
        }
        samples.sort_unstable();
        let at = |q: f64| -> f64 {
            let rank = ((q * samples.len() as f64 - 1e-9).ceil() as usize).clamp(1, samples.len());
            samples[rank - 1].as_nanos() as f64 / 1e3
        };
        Some(Percentiles {
            samples: samples.len() as u64,
            p50_us: at(0.50),
            p99_us: at(0.99),
            p999_us: at(0.999),
        })
    }
}

/// Of two latency figures, the one with the lower p50 (either, if only
/// one was measured): the best round of a latency measurement.
pub fn lower_p50(a: Option<Percentiles>, b: Option<Percentiles>) -> Option<Percentiles> {
    match (a, b) {
        (Some(x), Some(y)) => Some(if y.p50_us < x.p50_us { y } else { x }),
        (x, y) => x.or(y),
    }
}

/// Merges `from` into `into`, keeping per `key` the entry with the larger
/// `value` (the earlier one on a tie): the best round of each
/// throughput point.
pub fn keep_best<T, K: PartialEq>(
    into: &mut Vec<T>,
    from: Vec<T>,
    key: impl Fn(&T) -> K,
    value: impl Fn(&T) -> f64,
) {
    for t in from {
        match into.iter_mut().find(|x| key(x) == key(&t)) {
            Some(slot) => {
                if value(&t) > value(slot) {
                    *slot = t;
                }
            }
            None => into.push(t),
        }
    }
}

/// `count` per second over `elapsed` (0 if no time passed).
pub fn per_second(count: f64, elapsed: Duration) -> f64 {
    let secs = elapsed.as_secs_f64();
    if secs > 0.0 {
        count / secs
    } else {
        0.0
    }
}

/// The median of `values` (the mean of the middle two for an even count);
/// `None` if there are none. NaNs sort last.
pub fn median(values: &[f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// A distribution-free confidence interval for the median of what
/// `values` were sampled from (independent draws): the order statistics
/// x(k) and x(n+1-k), with the largest k for which
/// P(Binomial(n, 1/2) < k) <= (1 - level) / 2, so the interval covers the
/// median with probability at least `level`. `None` when there are too
/// few values for that level (5 or fewer at 95 %). NaNs sort last.
pub fn median_ci(values: &[f64], level: f64) -> Option<(f64, f64)> {
    let n = values.len();
    let tail = (1.0 - level) / 2.0;
    // P(B <= i) for B ~ Binomial(n, 1/2), accumulated term by term.
    let mut term = 0.5f64.powi(n as i32);
    let mut cdf = term;
    let mut k = 0;
    for i in 0..n {
        if cdf > tail {
            break;
        }
        k = i + 1;
        term *= (n - i) as f64 / (i + 1) as f64;
        cdf += term;
    }
    if k == 0 {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    Some((v[k - 1], v[n - k]))
}

/// The smallest and the largest of `values`; `None` if there are none.
pub fn min_max(values: &[f64]) -> Option<(f64, f64)> {
    values.iter().fold(None, |acc, &x| match acc {
        None => Some((x, x)),
        Some((lo, hi)) => Some((lo.min(x), hi.max(x))),
    })
}

/// Whether pair `index` (from 0) of an alternating sequence of paired
/// measurements runs side A first: A B, B A, A B, B A, ... Under a drift
/// that is linear in time, each side is measured as often early as late
/// within its pair, so over an even number of pairs the drift's effect on
/// the ratio cancels (the ABBA design).
pub fn abba_a_first(index: usize) -> bool {
    index.is_multiple_of(2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn best_of_rounds_keeps_the_higher_rate_and_the_lower_p50() {
        let mut best = vec![(64u64, 1.0), (4096, 5.0)];
        keep_best(
            &mut best,
            vec![(64, 2.0), (4096, 4.0), (65536, 9.0)],
            |p| p.0,
            |p| p.1,
        );
        assert_eq!(best, [(64, 2.0), (4096, 5.0), (65536, 9.0)]);
        let lat = |p50_us| Percentiles {
            samples: 1,
            p50_us,
            p99_us: 100.0,
            p999_us: 100.0,
        };
        assert_eq!(lower_p50(Some(lat(20.0)), Some(lat(10.0))), Some(lat(10.0)));
        assert_eq!(lower_p50(Some(lat(20.0)), None), Some(lat(20.0)));
        assert_eq!(lower_p50(None, Some(lat(30.0))), Some(lat(30.0)));
        assert_eq!(lower_p50(None, None), None);
    }

    #[test]
    fn median_ci_uses_the_binomial_order_statistics() {
        // n = 20: P(B <= 5) = 0.0207 <= 0.025 < P(B <= 6) = 0.0577, so the
        // 95 % interval is x(6)..x(15).
        let v: Vec<f64> = (1..=20).rev().map(f64::from).collect();
        assert_eq!(median_ci(&v, 0.95), Some((6.0, 15.0)));
        // n = 12: P(B <= 2) = 0.0193, P(B <= 3) = 0.073: x(3)..x(10).
        let v: Vec<f64> = (1..=12).map(f64::from).collect();
        assert_eq!(median_ci(&v, 0.95), Some((3.0, 10.0)));
        // n = 6: P(B = 0) = 0.0156: the whole range.
        assert_eq!(
            median_ci(&[3.0, 1.0, 2.0, 6.0, 5.0, 4.0], 0.95),
            Some((1.0, 6.0))
        );
        // n = 5: P(B = 0) = 0.031 > 0.025: no 95 % interval.
        assert_eq!(median_ci(&[1.0, 2.0, 3.0, 4.0, 5.0], 0.95), None);
        assert_eq!(median_ci(&[], 0.95), None);
    }

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[3.0]), Some(3.0));
        assert_eq!(median(&[5.0, 1.0, 3.0]), Some(3.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        // One wild value moves the median by at most one rank.
        assert_eq!(median(&[0.8, 0.81, 0.79, 5.0, 0.8]), Some(0.8));
    }

    #[test]
    fn min_max_of_values() {
        assert_eq!(min_max(&[]), None);
        assert_eq!(min_max(&[2.0]), Some((2.0, 2.0)));
        assert_eq!(min_max(&[0.9, 0.7, 1.1, 0.8]), Some((0.7, 1.1)));
    }

    #[test]
    fn abba_alternates_the_first_side() {
        let order: Vec<bool> = (0..6).map(abba_a_first).collect();
        assert_eq!(order, [true, false, true, false, true, false]);
    }

    #[test]
    fn nearest_rank_percentiles() {
        let mut v: Vec<Duration> = (1..=1000).map(Duration::from_micros).collect();
        v.reverse();
        let p = Percentiles::of(&mut v).unwrap();
        assert_eq!(p.samples, 1000);
        assert_eq!(p.p50_us, 500.0);
        assert_eq!(p.p99_us, 990.0);
        assert_eq!(p.p999_us, 999.0);
        assert!(Percentiles::of(&mut []).is_none());
    }

    #[test]
    fn single_sample_is_every_percentile() {
        let mut v = vec![Duration::from_micros(7)];
        let p = Percentiles::of(&mut v).unwrap();
        assert_eq!((p.p50_us, p.p99_us, p.p999_us), (7.0, 7.0, 7.0));
    }
}
