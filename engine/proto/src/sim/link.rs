//! A one-way link: a FIFO transmitter at a fixed rate, a propagation
//! latency, and impairments.
//!
//! EXTENSION POINT (congestion control): a bottleneck shared by several
//! senders is a `Link` whose queue (`busy_until - now`, in bytes at `rate`)
//! several nodes feed; CE marking goes where a frame is enqueued
//! ([`Link::transmit`]), based on [`Link::queue_delay`].

use core::time::Duration;

use super::impair::{Fate, Impairments};
use super::rng::SplitMix64;
use crate::time::Instant;

/// Static parameters of a link.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LinkConfig {
    /// One-way propagation delay.
    pub latency: Duration,
    /// Bits per second; 0 = infinitely fast.
    pub rate_bps: u64,
    /// Per-frame impairments.
    pub impair: Impairments,
}

impl Default for LinkConfig {
    fn default() -> Self {
        LinkConfig {
            latency: Duration::from_micros(5),
            rate_bps: 100_000_000_000,
            impair: Impairments::NONE,
        }
    }
}

/// Counters of one link.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LinkStats {
    pub frames: u64,
    pub bytes: u64,
    pub dropped: u64,
    pub reordered: u64,
    pub duplicated: u64,
    pub corrupted: u64,
}

/// A link's dynamic state.
#[derive(Debug, Clone)]
pub struct Link {
    pub config: LinkConfig,
    /// When the transmitter finishes the frames it has accepted.
    pub busy_until: Instant,
    pub stats: LinkStats,
}

/// Where and when copies of a transmitted frame arrive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Delivery {
    pub at: Instant,
    pub fate: Fate,
}

impl Link {
    /// An idle link.
    pub fn new(config: LinkConfig) -> Link {
        Link {
            config,
            busy_until: Instant::ZERO,
            stats: LinkStats::default(),
        }
    }

    /// Time to serialize `len` bytes.
    pub fn serialization(&self, len: usize) -> Duration {
        if self.config.rate_bps == 0 {
            Duration::ZERO
        } else {
            Duration::from_nanos((len as u64 * 8 * 1_000_000_000).div_ceil(self.config.rate_bps))
        }
    }

    /// Whether the transmitter can take a frame at `now`.
    pub fn is_free(&self, now: Instant) -> bool {
        self.busy_until <= now
    }

    /// Queueing delay a frame enqueued at `now` would see.
    pub fn queue_delay(&self, now: Instant) -> Duration {
        self.busy_until - now
    }

    /// Accept a frame of `len` bytes at `now`: returns when it (and a
    /// duplicate, if any) arrives, or `None` if it is lost.
    pub fn transmit(&mut self, now: Instant, len: usize, rng: &mut SplitMix64) -> Option<Delivery> {
        let start = if self.busy_until > now {
            self.busy_until
        } else {
            now
        };
        self.busy_until = start + self.serialization(len);
        self.stats.frames += 1;
        self.stats.bytes += len as u64;
        let fate = self.config.impair.decide(rng);
        if fate.drop {
            self.stats.dropped += 1;
            return None;
        }
        if !fate.extra_delay.is_zero() {
            self.stats.reordered += 1;
        }
        if fate.duplicate {
            self.stats.duplicated += 1;
        }
        if fate.corrupt {
            self.stats.corrupted += 1;
        }
        Some(Delivery {
            at: self.busy_until + self.config.latency + fate.extra_delay,
            fate,
        })
    }
}
