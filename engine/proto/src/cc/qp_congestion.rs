//! Everything congestion control keeps for one QP, behind the calls the RC
//! transport makes (the hook `crate::rc::congestion` re-exports this type):
//!
//! - receive side (notification point): [`QpCongestion::on_packet_received`]
//!   sees the IP ECN field of every RoCE packet accepted for the QP; a CE
//!   mark, if the per-QP pacer allows, arms a CNP that
//!   [`QpCongestion::poll_cnp`] hands out once;
//! - send side (reaction point): [`QpCongestion::may_send`] before each data
//!   packet, [`QpCongestion::on_sent`] after it, [`QpCongestion::on_cnp`]
//!   for each CNP received; [`QpCongestion::next_send_time`] says when a
//!   refused sender may retry.
//!
//! A few words of state per QP; the reaction point's DCQCN state (rates,
//! alpha, stages, its pacer: [`Dcqcn`], 136 bytes) is allocated at the
//! first CNP the QP handles, once in its life (or after a reset): most
//! QPs of a large endpoint never see one, and until then a fresh
//! [`Dcqcn`] would only say "unlimited". The counters of these events
//! (`np_ecn_marked_roce_packets`, `np_cnp_sent`, `rp_cnp_handled`,
//! `rp_cnp_ignored`) are the QP's transport counters (`rc::Counters`),
//! kept by the QP that makes these calls.

use core::time::Duration;
use std::sync::Arc;

use super::config::{CcConfig, EcnMarking};
use super::dcqcn::{CnpOutcome, Dcqcn, DcqcnParams};
use super::notification_point::CnpPacer;
use crate::time::Instant;
use crate::wire::Ecn;

/// What the congestion state of every QP of an endpoint reads from the
/// endpoint's configuration: one copy per endpoint, shared by its QPs
/// ([`QpCongestion::with_shared`]), so that a QP keeps a pointer to it
/// instead of these 48 bytes.
#[derive(Debug, Clone, PartialEq)]
pub struct QpCcConfig {
    min_time_between_cnps: Duration,
    dcqcn_enabled: bool,
    marking: EcnMarking,
    /// The DCQCN parameters, also shared with each QP's [`Dcqcn`].
    params: Arc<DcqcnParams>,
    /// Upper bound on the reaction point's rate, bit/s
    /// ([`Dcqcn::max_rate_for`]).
    max_rate_bps: f64,
}

impl QpCcConfig {
    /// What QPs of an endpoint configured with `config` read.
    pub fn new(config: &CcConfig) -> QpCcConfig {
        QpCcConfig {
            min_time_between_cnps: config.min_time_between_cnps,
            dcqcn_enabled: config.dcqcn_enabled,
            marking: config.marking,
            max_rate_bps: Dcqcn::max_rate_for(&config.dcqcn, config.line_rate_gbps * 1e9),
            params: Arc::new(config.dcqcn),
        }
    }
}

/// Per-QP congestion-control state (see the module docs).
#[derive(Debug, Clone)]
pub struct QpCongestion {
    pacer: CnpPacer,
    /// Set when `may_send` refused: when to try again.
    blocked_until: Option<Instant>,
    /// The endpoint's configuration of it, shared with its other QPs.
    config: Arc<QpCcConfig>,
    /// The reaction point, from the first CNP handled on (never with DCQCN
    /// off): `None` behaves exactly as a fresh [`Dcqcn`] (unlimited, no
    /// timer, nothing paced).
    rp: Option<Box<Dcqcn>>,
    /// CNPs allowed by the pacer and not yet handed out (several when
    /// `min_time_between_cnps` is zero and marks arrive faster than the QP
    /// transmits).
    cnp_pending: u32,
}

impl Default for QpCongestion {
    fn default() -> Self {
        Self::with_config(&CcConfig::default())
    }
}

impl QpCongestion {
    /// State with the default configuration ([`CcConfig::default`]).
    pub fn new() -> QpCongestion {
        QpCongestion::default()
    }

    /// State for a QP of an endpoint configured with `config`.
    pub fn with_config(config: &CcConfig) -> QpCongestion {
        Self::with_shared(Arc::new(QpCcConfig::new(config)))
    }

    /// As [`QpCongestion::with_config`], the configuration shared with the
    /// endpoint's other QPs.
    pub fn with_shared(config: Arc<QpCcConfig>) -> QpCongestion {
        QpCongestion {
            pacer: CnpPacer::default(),
            blocked_until: None,
            config,
            rp: None,
            cnp_pending: 0,
        }
    }

    /// Back to the initial state (QP reset), keeping the configuration.
    pub fn reset(&mut self) {
        self.pacer = CnpPacer::default();
        self.cnp_pending = 0;
        self.rp = None;
        self.blocked_until = None;
    }

    /// A RoCE packet for this QP arrived with IP ECN `ecn`.
    #[inline]
    pub fn on_packet_received(&mut self, now: Instant, ecn: Ecn) {
        if ecn != Ecn::Ce {
            return;
        }
        if self.pacer.allow(now, self.config.min_time_between_cnps) {
            self.cnp_pending = self.cnp_pending.saturating_add(1);
        }
    }

    /// Whether a CNP should be sent now (consumes the request; the QP
    /// counts the CNP it emits as `np_cnp_sent`).
    #[inline]
    pub fn poll_cnp(&mut self, _now: Instant) -> bool {
        if self.cnp_pending == 0 {
            return false;
        }
        self.cnp_pending -= 1;
        true
    }

    /// Whether a CNP is waiting to be sent.
    #[inline]
    pub fn has_cnp_pending(&self) -> bool {
        self.cnp_pending > 0
    }

    /// DSCP to send CNPs with (they are always Not-ECT).
    pub fn cnp_dscp(&self) -> u8 {
        self.config.marking.cnp_dscp
    }

    /// A CNP for this QP arrived (reaction point).
    #[inline]
    pub fn on_cnp(&mut self, now: Instant) -> CnpOutcome {
        let outcome = if self.config.dcqcn_enabled {
            let (params, max_rate_bps) = (&self.config.params, self.config.max_rate_bps);
            self.rp
                .get_or_insert_with(|| {
                    Box::new(Dcqcn::with_shared_params(params.clone(), max_rate_bps))
                })
                .on_cnp(now)
        } else {
            CnpOutcome::Ignored
        };
        if outcome == CnpOutcome::Handled {
            // The rate changed: a pending retry time is stale.
            self.blocked_until = None;
        }
        outcome
    }

    /// May the QP send a data packet of `bytes` bytes (whole frame) at `now`?
    #[inline]
    pub fn may_send(&mut self, now: Instant, bytes: usize) -> bool {
        let Some(rp) = self.rp.as_mut() else {
            return true;
        };
        match rp.may_send(now, bytes as u64) {
            Ok(()) => {
                self.blocked_until = None;
                true
            }
            Err(retry) => {
                self.blocked_until = Some(retry);
                false
            }
        }
    }

    /// When a refused sender may try again (`None` = not held back).
    #[inline]
    pub fn next_send_time(&self) -> Option<Instant> {
        self.blocked_until
    }

    /// The QP sent a data packet of `bytes` bytes (whole frame) at `now`.
    #[inline]
    pub fn on_sent(&mut self, now: Instant, bytes: usize) {
        if let Some(rp) = self.rp.as_mut() {
            rp.consume(now, bytes as u64);
        }
    }

    /// The DCQCN rate-increase timer, while the QP is rate-limited. (The
    /// pacer's retry time is [`Self::next_send_time`].)
    #[inline]
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.rp.as_ref().and_then(|rp| rp.next_deadline())
    }

    /// Run the rate-increase timers due at `now`.
    #[inline]
    pub fn handle_timeout(&mut self, now: Instant) {
        if let Some(rp) = self.rp.as_mut() {
            rp.on_timer(now);
        }
        // The retry time has come: the QP will be asked again by the next
        // transmit; a past deadline must not stay in `poll_timeout`.
        if self.blocked_until.is_some_and(|t| t <= now) {
            self.blocked_until = None;
        }
    }

    /// Whether the reaction point is on.
    pub fn dcqcn_enabled(&self) -> bool {
        self.config.dcqcn_enabled
    }

    /// Current rate, bit/s (the line rate when DCQCN is off or unlimited).
    pub fn rate_bps(&self) -> f64 {
        match self.rp.as_ref() {
            Some(rp) => rp.rate_bps(),
            None => self.config.max_rate_bps,
        }
    }

    /// DCQCN's alpha as it would be at `now` (the parameters'
    /// `initial_alpha` before the first CNP handled).
    pub fn alpha(&self, now: Instant) -> f64 {
        match &self.rp {
            Some(rp) => rp.alpha(now),
            None => self.config.params.initial_alpha,
        }
    }

    /// The DCQCN state (rate, target, alpha, stages), from the first CNP
    /// the QP handled on (`None` before: unlimited, at the maximum rate).
    pub fn reaction_point(&self) -> Option<&Dcqcn> {
        self.rp.as_deref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn us(t: u64) -> Instant {
        Instant::from_micros(t)
    }

    #[test]
    fn ce_marks_arm_one_cnp_per_interval() {
        let mut q = QpCongestion::new();
        q.on_packet_received(us(0), Ecn::Ect0);
        assert!(!q.poll_cnp(us(0)));
        for t in 0..4 {
            q.on_packet_received(us(t), Ecn::Ce);
        }
        assert!(q.poll_cnp(us(3)));
        assert!(!q.poll_cnp(us(3)));
        q.on_packet_received(us(4), Ecn::Ce);
        assert!(q.poll_cnp(us(4)));
        assert!(!q.has_cnp_pending());
        assert_eq!(q.cnp_dscp(), 48);
    }

    #[test]
    fn cnp_limits_the_sender_and_reset_restores() {
        let mut q = QpCongestion::new();
        assert_eq!(q.rate_bps(), 100e9);
        assert!(q.reaction_point().is_none(), "no DCQCN state before a CNP");
        assert_eq!(q.alpha(us(0)), DcqcnParams::default().initial_alpha);
        assert_eq!(q.on_cnp(us(0)), CnpOutcome::Handled);
        assert!(q.reaction_point().is_some_and(|rp| rp.is_limited()));
        let first_cut = q.rate_bps();
        assert_eq!(q.on_cnp(us(1)), CnpOutcome::Ignored);
        assert!(q.rate_bps() < 51e9);
        assert_eq!(q.poll_timeout(), Some(us(300)));
        let mut sent = 0;
        while q.may_send(us(0), 4096) {
            q.on_sent(us(0), 4096);
            sent += 1;
        }
        assert!(sent >= 2, "the bucket lets a burst through");
        let retry = q.next_send_time().expect("held back");
        assert!(retry > us(0));
        assert!(q.may_send(retry, 4096));
        q.reset();
        assert_eq!(q.rate_bps(), 100e9);
        assert!(q.reaction_point().is_none());
        assert_eq!(q.poll_timeout(), None);
        // After a reset the first CNP starts from the initial alpha again.
        assert_eq!(q.on_cnp(us(1_000_000)), CnpOutcome::Handled);
        assert_eq!(q.rate_bps(), first_cut);
    }

    #[test]
    fn dcqcn_off_never_limits() {
        let mut q = QpCongestion::with_config(&CcConfig {
            dcqcn_enabled: false,
            ..CcConfig::default()
        });
        assert_eq!(q.on_cnp(us(0)), CnpOutcome::Ignored);
        assert!(q.reaction_point().is_none());
        for _ in 0..1000 {
            assert!(q.may_send(us(0), 4096));
            q.on_sent(us(0), 4096);
        }
        assert_eq!(q.poll_timeout(), None);
        // The notification point still works.
        q.on_packet_received(us(0), Ecn::Ce);
        assert!(q.poll_cnp(us(0)));
    }
}
