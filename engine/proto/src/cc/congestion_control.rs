//! [`CongestionControl`]: the notification point and one reaction point
//! per QP over a fixed-capacity table, for code that keeps its QPs
//! elsewhere (the endpoint keeps a [`super::QpCongestion`] in each QP
//! instead).

use super::config::{CcConfig, EcnMarking};
use super::counters::CcCounters;
use super::dcqcn::{CnpOutcome, Dcqcn};
use super::notification_point::NotificationPoint;
use super::qp_table::{QpTable, TableFull};
use crate::time::Instant;

/// One QP's congestion state, for display and traces.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QpRate {
    /// Local QP number.
    pub qpn: u32,
    /// Current rate RC, bit/s.
    pub rate_bps: f64,
    /// Target rate RT, bit/s.
    pub target_bps: f64,
    /// Alpha at the time asked.
    pub alpha: f64,
}

/// All congestion state of one endpoint (see the module docs).
#[derive(Debug, Clone)]
pub struct CongestionControl {
    config: CcConfig,
    np: NotificationPoint,
    rp: QpTable<Dcqcn>,
    rp_cnp_handled: u64,
    rp_cnp_ignored: u64,
}

impl CongestionControl {
    /// State for up to `max_qps` QPs. Allocates once, here.
    pub fn new(config: CcConfig, max_qps: usize) -> Self {
        CongestionControl {
            config,
            np: NotificationPoint::new(config.min_time_between_cnps, max_qps),
            rp: QpTable::with_capacity(max_qps),
            rp_cnp_handled: 0,
            rp_cnp_ignored: 0,
        }
    }

    /// The configuration in use.
    pub fn config(&self) -> &CcConfig {
        &self.config
    }

    /// ECN/DSCP marking for sent packets.
    pub fn marking(&self) -> &EcnMarking {
        &self.config.marking
    }

    /// Switch the reaction point on or off for the whole endpoint. Switching
    /// it on again starts every QP from its line rate.
    pub fn set_dcqcn_enabled(&mut self, enabled: bool) {
        if enabled && !self.config.dcqcn_enabled {
            let params = self.config.dcqcn;
            for (_, rp) in self.rp.iter_mut() {
                *rp = Dcqcn::new(params, rp.max_rate_bps());
            }
        }
        self.config.dcqcn_enabled = enabled;
    }

    /// Start tracking local QP `qpn`, whose link runs at `line_rate_bps`.
    pub fn add_qp(&mut self, qpn: u32, line_rate_bps: f64) -> Result<(), TableFull> {
        self.rp
            .insert(qpn, Dcqcn::new(self.config.dcqcn, line_rate_bps))?;
        Ok(())
    }

    /// Forget local QP `qpn`.
    pub fn remove_qp(&mut self, qpn: u32) {
        self.rp.remove(qpn);
        self.np.remove_qp(qpn);
    }

    /// A RoCE packet for local QP `qpn` arrived marked CE at `now`. Returns
    /// true if a CNP must be sent to the peer QP now. (Process the packet
    /// normally either way.)
    pub fn on_ce_marked(&mut self, now: Instant, qpn: u32) -> bool {
        self.np.on_ce_marked(now, qpn)
    }

    /// A CNP addressed to local QP `qpn` arrived at `now`.
    pub fn on_cnp(&mut self, now: Instant, qpn: u32) -> CnpOutcome {
        let outcome = match (self.config.dcqcn_enabled, self.rp.get_mut(qpn)) {
            (true, Some(rp)) => rp.on_cnp(now),
            _ => CnpOutcome::Ignored,
        };
        match outcome {
            CnpOutcome::Handled => self.rp_cnp_handled += 1,
            CnpOutcome::Ignored => self.rp_cnp_ignored += 1,
        }
        outcome
    }

    /// May local QP `qpn` send `bytes` (whole frame) at `now`? `Err(t)`:
    /// retry at `t`. Always `Ok` with DCQCN off or for an unknown QP.
    #[inline]
    pub fn may_send(&mut self, now: Instant, qpn: u32, bytes: u64) -> Result<(), Instant> {
        if !self.config.dcqcn_enabled {
            return Ok(());
        }
        match self.rp.get_mut(qpn) {
            Some(rp) => rp.may_send(now, bytes),
            None => Ok(()),
        }
    }

    /// Local QP `qpn` sent `bytes` (whole frame) at `now`.
    #[inline]
    pub fn consume(&mut self, now: Instant, qpn: u32, bytes: u64) {
        if !self.config.dcqcn_enabled {
            return;
        }
        if let Some(rp) = self.rp.get_mut(qpn) {
            rp.consume(now, bytes);
        }
    }

    /// Apply rate-increase timers due by `now` (optional: the other calls
    /// apply them lazily; call it to keep [`Self::qp_rates`] current while
    /// a QP is idle).
    pub fn on_timer(&mut self, now: Instant) {
        if !self.config.dcqcn_enabled {
            return;
        }
        for (_, rp) in self.rp.iter_mut() {
            rp.on_timer(now);
        }
    }

    /// Earliest rate-increase timer over all QPs (a scan of the table).
    pub fn next_deadline(&self) -> Option<Instant> {
        if !self.config.dcqcn_enabled {
            return None;
        }
        self.rp
            .iter()
            .filter_map(|(_, rp)| rp.next_deadline())
            .min()
    }

    /// Current rate of local QP `qpn`, bit/s (its line rate with DCQCN off).
    pub fn rate_bps(&self, qpn: u32) -> Option<f64> {
        self.rp.get(qpn).map(|rp| {
            if self.config.dcqcn_enabled {
                rp.rate_bps()
            } else {
                rp.max_rate_bps()
            }
        })
    }

    /// The DCQCN state of local QP `qpn`.
    pub fn reaction_point(&self, qpn: u32) -> Option<&Dcqcn> {
        self.rp.get(qpn)
    }

    /// Rate and alpha of every QP at `now` (table order).
    pub fn qp_rates(&self, now: Instant) -> impl Iterator<Item = QpRate> + '_ {
        let enabled = self.config.dcqcn_enabled;
        self.rp.iter().map(move |(qpn, rp)| QpRate {
            qpn,
            rate_bps: if enabled {
                rp.rate_bps()
            } else {
                rp.max_rate_bps()
            },
            target_bps: if enabled {
                rp.target_rate_bps()
            } else {
                rp.max_rate_bps()
            },
            alpha: rp.alpha(now),
        })
    }

    /// The counters so far.
    pub fn counters(&self) -> CcCounters {
        let np = self.np.counters();
        CcCounters {
            np_ecn_marked_roce_packets: np.np_ecn_marked_roce_packets,
            np_cnp_sent: np.np_cnp_sent,
            np_cnp_unpaced: np.np_cnp_unpaced,
            rp_cnp_handled: self.rp_cnp_handled,
            rp_cnp_ignored: self.rp_cnp_ignored,
        }
    }
}
