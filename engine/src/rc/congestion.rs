//! The one place where the RC transport asks congestion control.
//!
//! HOOK for `engine::cc` (owned by the congestion-control work): every call
//! the transport makes into congestion control goes through [`QpCongestion`].
//! This version is the always-yes stub; replace the bodies (keep the
//! signatures, or change both sides in one commit).
//!
//! - Receive side (notification point): [`QpCongestion::on_packet_received`]
//!   sees the IP ECN field of every RoCE packet accepted for this QP; when it
//!   wants a CNP sent, [`QpCongestion::poll_cnp`] returns true and the QP
//!   emits one to the peer QP (notes, "Congestion": opcode 0x81, BECN=1).
//! - Send side (reaction point): before the requester emits a data packet it
//!   calls [`QpCongestion::may_send`]; when refused, the QP waits until
//!   [`QpCongestion::next_send_time`], which is folded into
//!   `Endpoint::poll_timeout`. [`QpCongestion::on_sent`] reports each data
//!   packet sent, [`QpCongestion::on_cnp`] each CNP received.

use crate::time::Instant;
use crate::wire::Ecn;

/// Per-QP congestion-control state (stub: unlimited rate, no CNPs).
#[derive(Debug, Clone, Default)]
pub struct QpCongestion {
    cnp_pending: bool,
}

impl QpCongestion {
    /// Fresh state for a new QP.
    pub fn new() -> QpCongestion {
        QpCongestion::default()
    }

    /// A RoCE packet for this QP arrived with IP ECN `ecn`.
    #[inline]
    pub fn on_packet_received(&mut self, now: Instant, ecn: Ecn) {
        let _ = (now, ecn);
    }

    /// Whether a CNP should be sent now (consumes the request).
    #[inline]
    pub fn poll_cnp(&mut self, now: Instant) -> bool {
        let _ = now;
        core::mem::take(&mut self.cnp_pending)
    }

    /// A CNP for this QP arrived (reaction point).
    #[inline]
    pub fn on_cnp(&mut self, now: Instant) {
        let _ = now;
    }

    /// May the requester send a data packet of `bytes` bytes at `now`?
    #[inline]
    pub fn may_send(&mut self, now: Instant, bytes: usize) -> bool {
        let _ = (now, bytes);
        true
    }

    /// When a refused sender may try again (`None` = not rate-limited).
    #[inline]
    pub fn next_send_time(&self) -> Option<Instant> {
        None
    }

    /// The requester sent a data packet of `bytes` bytes at `now`.
    #[inline]
    pub fn on_sent(&mut self, now: Instant, bytes: usize) {
        let _ = (now, bytes);
    }

    /// Congestion-control timer deadline (e.g. DCQCN alpha/rate timers).
    #[inline]
    pub fn poll_timeout(&self) -> Option<Instant> {
        None
    }

    /// Run congestion-control timers due at `now`.
    #[inline]
    pub fn handle_timeout(&mut self, now: Instant) {
        let _ = now;
    }
}
