//! DCQCN notification point (the receiver): CE-marked packet -> CNP, paced
//! per QP.
//!
//! `docs/congestion.md`, "CNP": on a packet marked CE for a QP, send a CNP
//! to the sender's QP, at most one per QP per `min_time_between_cnps`
//! (NVIDIA firmware default 4 us; the DCQCN paper uses 50 us, so it is
//! configurable). A zero interval sends one CNP per marked packet.
//!
//! Pacing state is one timestamp per QP in a fixed-capacity [`QpTable`],
//! keyed by the local QPN the marked packet was addressed to (an RC QP has
//! exactly one peer, so "per local QP" is "per sender's QP").

use core::time::Duration;

use super::qp_table::QpTable;
use crate::time::Instant;

/// NVIDIA firmware default for `min_time_between_cnps`.
pub const DEFAULT_MIN_TIME_BETWEEN_CNPS: Duration = Duration::from_micros(4);

/// Counters of the notification point (NVIDIA counter names).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NpCounters {
    /// RoCE packets received with the IP ECN field CE.
    pub np_ecn_marked_roce_packets: u64,
    /// CNPs the pacer allowed (the endpoint sends one for each).
    pub np_cnp_sent: u64,
    /// CNPs allowed without pacing because the QP table was full (the QP
    /// count exceeded the capacity the endpoint was built with).
    pub np_cnp_unpaced: u64,
}

/// The CNP pacing state of one QP, for code that keeps per-QP state in the
/// QP itself (the endpoint does); [`NotificationPoint`] is the same rule
/// over a table of QPs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CnpPacer {
    last_cnp: Option<Instant>,
}

impl CnpPacer {
    /// May a CNP be sent at `now`, at most one per `min_interval`? Records
    /// the CNP if so.
    #[inline]
    pub fn allow(&mut self, now: Instant, min_interval: Duration) -> bool {
        match self.last_cnp {
            Some(last) if now.saturating_duration_since(last) < min_interval => false,
            _ => {
                self.last_cnp = Some(now);
                true
            }
        }
    }
}

/// Per-QP CNP pacer over a fixed-capacity table (see the module docs).
#[derive(Debug, Clone)]
pub struct NotificationPoint {
    min_time_between_cnps: Duration,
    /// Time of the last CNP per local QPN.
    last_cnp: QpTable<CnpPacer>,
    counters: NpCounters,
}

impl NotificationPoint {
    /// A pacer for up to `max_qps` QPs. Allocates once, here.
    pub fn new(min_time_between_cnps: Duration, max_qps: usize) -> Self {
        NotificationPoint {
            min_time_between_cnps,
            last_cnp: QpTable::with_capacity(max_qps),
            counters: NpCounters::default(),
        }
    }

    /// The configured minimum interval between CNPs of one QP.
    pub fn min_time_between_cnps(&self) -> Duration {
        self.min_time_between_cnps
    }

    /// Change the interval (takes effect for the next marked packet).
    pub fn set_min_time_between_cnps(&mut self, interval: Duration) {
        self.min_time_between_cnps = interval;
    }

    /// A RoCE packet for local QP `qpn` arrived marked CE at `now`. Counts it
    /// and returns true if a CNP must be sent to that QP's peer now.
    pub fn on_ce_marked(&mut self, now: Instant, qpn: u32) -> bool {
        self.counters.np_ecn_marked_roce_packets += 1;
        let interval = self.min_time_between_cnps;
        let send = match self.last_cnp.get_mut(qpn) {
            Some(pacer) => pacer.allow(now, interval),
            None => {
                let mut pacer = CnpPacer::default();
                let send = pacer.allow(now, interval);
                if self.last_cnp.insert(qpn, pacer).is_err() {
                    // Better an unpaced congestion signal than none: the
                    // reaction point still applies at most one reduction
                    // per monitor period.
                    self.counters.np_cnp_unpaced += 1;
                }
                send
            }
        };
        if send {
            self.counters.np_cnp_sent += 1;
        }
        send
    }

    /// Forget a destroyed QP's pacing state.
    pub fn remove_qp(&mut self, qpn: u32) {
        self.last_cnp.remove(qpn);
    }

    /// The counters so far.
    pub fn counters(&self) -> NpCounters {
        self.counters
    }
}
