//! What a harness run measures and with which constants: [`Options`]
//! (quick or full run, points, rounds, pairs) and the link and message
//! sizes every part of the harness shares.

use std::time::Duration;

use engine::driver::PollMode;

/// Link MTU of the veth pair: room for a 4096-byte RoCE payload with
/// IPv4, UDP, BTH, RETH and ICRC.
pub const LINK_MTU: u32 = 4200;
/// RoCE path MTU (payload bytes per packet).
pub const ROCE_PMTU: u32 = 4096;
/// Largest UDP payload that fits the link MTU without IP fragmentation.
pub const UDP_CHUNK: u32 = LINK_MTU - 20 - 8;
/// Message size of the message-rate and latency figures.
pub const SMALL: u64 = 64;

/// What to run.
#[derive(Debug, Clone)]
pub struct Options {
    /// CI smoke run: fewer sizes, shorter points (under two minutes).
    pub quick: bool,
    /// Print progress lines to stderr.
    pub progress: bool,
    /// How the engine threads wait when idle.
    pub engine_poll: PollMode,
    /// Engine/baseline pairs per target of the paired step (`--pairs N`;
    /// `None`: 2 quick, 20 full). Rounded up to an even number.
    pub pairs: Option<usize>,
    /// Run one section alone (`--only SECTION`) instead of everything.
    pub only: Option<Section>,
}

/// A part of the harness that runs alone (`roce-xdp bench --only NAME`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Section {
    /// The shared engine's rows (`crate::shared_engine`, JSON key `shared`).
    Shared,
}

impl Section {
    /// The sections by their `--only` names.
    pub const ALL: [(&'static str, Section); 1] = [("shared", Section::Shared)];

    /// The section named `name`.
    pub fn parse(name: &str) -> Result<Section, String> {
        Self::ALL
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, s)| *s)
            .ok_or_else(|| {
                let names: Vec<&str> = Self::ALL.iter().map(|(n, _)| *n).collect();
                format!("unknown section {name:?} (one of: {})", names.join(", "))
            })
    }
}

impl Options {
    /// `quick` in a quick run, `full` in a full one.
    fn by_mode<T>(&self, quick: T, full: T) -> T {
        if self.quick {
            quick
        } else {
            full
        }
    }

    /// Message sizes of the goodput sweep.
    pub fn sizes(&self) -> Vec<u64> {
        self.by_mode(
            vec![64, 4096, 65536, 1 << 20],
            vec![64, 256, 1024, 4096, 16384, 65536, 262144, 1 << 20],
        )
    }

    /// Length of one throughput point.
    pub fn point(&self) -> Duration {
        self.by_mode(Duration::from_millis(300), Duration::from_secs(2))
    }

    /// Round trips per latency figure.
    pub fn pingpongs(&self) -> usize {
        self.by_mode(2_000, 20_000)
    }

    /// Floor-then-tool pairs per latency tool (`tool_latency::tools`):
    /// odd, so that one pair's ratio is the median.
    pub fn latency_pairs(&self) -> usize {
        self.by_mode(3, 5)
    }

    /// Engine/baseline pairs per target of the paired step. Even, so that
    /// each order (baseline first, engine first) runs equally often. The
    /// full run's 20 make the median's 95 % interval x(6)..x(15) of the
    /// sorted ratios (12 gave x(3)..x(10), about a third wider here).
    pub fn pairs(&self) -> usize {
        match self.pairs {
            Some(n) => n.max(1).next_multiple_of(2),
            None if self.quick => 2,
            None => 20,
        }
    }

    /// Length of each side's point in the paired step: shorter than the
    /// sweep's, so the two sides of a pair are close in time. (A full run
    /// measured 12 pairs of 0.5 s rather than 6 of 1 s, in the same time:
    /// this machine's speed moves within seconds, so shorter pairs see
    /// less drift and more of them make a steadier median.)
    pub fn pair_point(&self) -> Duration {
        self.by_mode(Duration::from_millis(300), Duration::from_millis(500))
    }

    /// Passes over every measurement; each figure is the best pass.
    pub fn rounds(&self) -> usize {
        self.by_mode(1, 3)
    }
}
