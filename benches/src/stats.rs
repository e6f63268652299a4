//! Small statistics helpers: latency percentiles and rates.

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

/// `count` per second over `elapsed` (0 if no time passed).
pub fn per_second(count: f64, elapsed: Duration) -> f64 {
    let secs = elapsed.as_secs_f64();
    if secs > 0.0 {
        count / secs
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
