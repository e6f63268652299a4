//! DCQCN notification point (the receiver): CE-marked packet -> CNP, paced
//! per QP.
//!
//! `docs/congestion.md`, "CNP": on a packet marked CE for a QP, send a CNP
//! to the sender's QP, at most one per QP per `min_time_between_cnps`
//! (NVIDIA firmware default 4 us; the DCQCN paper uses 50 us, so it is
//! configurable). A zero interval sends one CNP per marked packet.
//!
//! Pacing state is one timestamp per QP ([`CnpPacer`]), kept in the QP the
//! marked packet was addressed to (an RC QP has exactly one peer, so "per
//! local QP" is "per sender's QP").

use core::time::Duration;

use crate::time::Instant;

/// NVIDIA firmware default for `min_time_between_cnps`.
pub const DEFAULT_MIN_TIME_BETWEEN_CNPS: Duration = Duration::from_micros(4);

/// The CNP pacing state of one QP (the endpoint keeps it in the QP's
/// [`super::QpCongestion`]).
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
