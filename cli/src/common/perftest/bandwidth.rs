//! Bandwidth statistics from message completion times.
//!
//! Units follow perftest: Gb/sec is 10^9 bits per second, MB/sec is 2^20
//! bytes per second, MsgRate is 10^6 messages per second.
//! Average = all bytes / time from the first post to the last completion.
//! Peak = the best rate over any window of consecutive completions holding
//! 1/16 of the messages (at least one message), so one lucky completion
//! cannot dominate a long run.

use serde::Serialize;

/// Summary of one bandwidth run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, serde::Deserialize)]
pub struct BandwidthStats {
    pub bw_peak_gbps: f64,
    pub bw_avg_gbps: f64,
    pub bw_avg_mbps: f64,
    pub msg_rate_mpps: f64,
}

const BITS_PER_GBIT: f64 = 1e9;
const BYTES_PER_MB: f64 = 1_048_576.0;

impl BandwidthStats {
    /// `completions_ns`: for each message, in completion order, the time it
    /// completed, in nanoseconds since the first message was posted.
    /// `None` when nothing completed or no time elapsed.
    pub fn from_completions(msg_bytes: u64, completions_ns: &[u64]) -> Option<BandwidthStats> {
        let n = completions_ns.len();
        let total_ns = *completions_ns.last()?;
        if total_ns == 0 {
            return None;
        }
        let secs = total_ns as f64 / 1e9;
        let bytes = msg_bytes as f64 * n as f64;
        let avg_gbps = bytes * 8.0 / secs / BITS_PER_GBIT;
        let window = (n / 16).max(1);
        let mut peak = avg_gbps;
        // Window of `window` messages ending at i: from the completion
        // before its first message (or time zero) to completion i.
        for i in (window - 1)..n {
            let start = if i + 1 > window {
                completions_ns[i - window]
            } else {
                0
            };
            let dt = completions_ns[i].saturating_sub(start);
            if dt > 0 {
                let g = msg_bytes as f64 * window as f64 * 8.0 / (dt as f64 / 1e9) / BITS_PER_GBIT;
                peak = peak.max(g);
            }
        }
        Some(BandwidthStats {
            bw_peak_gbps: peak,
            bw_avg_gbps: avg_gbps,
            bw_avg_mbps: bytes / secs / BYTES_PER_MB,
            msg_rate_mpps: n as f64 / secs / 1e6,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steady_rate() {
        // 1000 messages of 125 bytes, one per microsecond: 1 Gb/s, 1 Mpps.
        let c: Vec<u64> = (1..=1000).map(|i| i * 1000).collect();
        let b = BandwidthStats::from_completions(125, &c).unwrap();
        assert!((b.bw_avg_gbps - 1.0).abs() < 1e-9);
        assert!((b.bw_peak_gbps - 1.0).abs() < 1e-9);
        assert!((b.msg_rate_mpps - 1.0).abs() < 1e-9);
        assert!((b.bw_avg_mbps - 125e6 / 1_048_576.0).abs() < 1e-6);
    }

    #[test]
    fn peak_sees_a_fast_stretch() {
        // 32 messages: the first 16 take 10 us each, the last 16 take 1 us each.
        let mut t = 0;
        let mut c = Vec::new();
        for i in 0..32 {
            t += if i < 16 { 10_000 } else { 1_000 };
            c.push(t);
        }
        let b = BandwidthStats::from_completions(1000, &c).unwrap();
        // Window = 2 messages: the fast ones run at 8 Gb/s.
        assert!((b.bw_peak_gbps - 8.0).abs() < 1e-9);
        assert!(b.bw_avg_gbps < b.bw_peak_gbps);
    }

    #[test]
    fn nothing_completed() {
        assert!(BandwidthStats::from_completions(64, &[]).is_none());
        assert!(BandwidthStats::from_completions(64, &[0]).is_none());
    }
}
