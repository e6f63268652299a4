//! Congestion control: ECN marking, the DCQCN notification point (CE ->
//! CNP, paced per QP) and reaction point (per-QP rate limiter), with the
//! counters RDMA users know. roce-v2-notes.md, "Congestion: ECN, CNP, DCQCN".
//!
//! [`QpCongestion`] is the per-QP state the endpoint keeps inside each QP
//! (the RC transport's hook). [`CongestionControl`] is the same machinery
//! over a fixed-capacity table, for code that keeps QPs elsewhere: one per
//! endpoint, sized for its maximum number of QPs, allocated once. Its
//! per-packet calls are
//! - [`CongestionControl::on_ce_marked`] for every received RoCE packet
//!   whose IP ECN field is CE (true = send a CNP to the peer QP now),
//! - [`CongestionControl::on_cnp`] for every received CNP,
//! - [`CongestionControl::may_send`] / [`CongestionControl::consume`]
//!   around every requester transmission.
//!
//! Endpoint wiring: `EndpointConfig::cc` ([`CcConfig`]) configures every
//! QP; counters `np_ecn_marked_roce_packets`, `np_cnp_sent`,
//! `rp_cnp_handled`, `rp_cnp_ignored` are in the endpoint's transport
//! counters; `Endpoint::qp_rates` gives the current rate per QP.
//!
//! Try it in the simulator (three senders through a 25 Gb/s switch queue
//! marking above 5 KB; drop `--dcqcn off` to compare):
//!
//! ```text
//! roce-xdp sim --bottleneck-gbps 25 --rate-gbps 25 --ecn-threshold-kb 5 --senders 3 \
//!     --messages 768 --size 65536 --window 16 --mtu 4096 --latency-us 2 \
//!     --trace rate.csv --json
//! roce-xdp plot rate.csv --out rate.svg
//! ```

pub mod config;
pub mod dcqcn;
pub mod notification_point;
pub mod pacer;
pub mod qp_congestion;
pub mod qp_table;

use core::time::Duration;

pub use config::{ip_ecn, EcnMarking, MarkingError, DEFAULT_CNP_DSCP, DEFAULT_DATA_DSCP};
pub use dcqcn::{CnpOutcome, Dcqcn, DcqcnParams, IncreaseStage};
pub use notification_point::{
    CnpPacer, NotificationPoint, NpCounters, DEFAULT_MIN_TIME_BETWEEN_CNPS,
};
pub use pacer::Pacer;
pub use qp_congestion::QpCongestion;
pub use qp_table::{QpTable, TableFull};

use crate::time::Instant;

/// Congestion-control configuration of one endpoint.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CcConfig {
    /// ECN/DSCP marking of sent packets.
    pub marking: EcnMarking,
    /// Notification point: at most one CNP per QP per this interval
    /// (zero = one CNP per CE-marked packet). Default 4 us.
    pub min_time_between_cnps: Duration,
    /// Reaction point on (default) or off. Off: CNPs are counted as
    /// `rp_cnp_ignored` and transmissions are never rate-limited. The
    /// notification point works either way.
    pub dcqcn_enabled: bool,
    /// DCQCN parameters (default [`DcqcnParams::nvidia_default`]).
    pub dcqcn: DcqcnParams,
    /// Line rate of the endpoint's link, Gb/s: where DCQCN starts and the
    /// most it recovers to (unless `dcqcn.max_rate_mbps` is lower).
    /// Default 100.
    pub line_rate_gbps: f64,
}

impl Default for CcConfig {
    fn default() -> Self {
        CcConfig {
            marking: EcnMarking::default(),
            min_time_between_cnps: DEFAULT_MIN_TIME_BETWEEN_CNPS,
            dcqcn_enabled: true,
            dcqcn: DcqcnParams::nvidia_default(),
            line_rate_gbps: 100.0,
        }
    }
}

/// Congestion counters of one endpoint (NVIDIA/Broadcom counter names).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CcCounters {
    /// Received RoCE packets whose IP ECN field was CE.
    pub np_ecn_marked_roce_packets: u64,
    /// CNPs sent (allowed by the per-QP pacer).
    pub np_cnp_sent: u64,
    /// CNPs sent without pacing because the pacing table was full.
    pub np_cnp_unpaced: u64,
    /// CNPs that reduced a QP's rate.
    pub rp_cnp_handled: u64,
    /// CNPs that did not: inside the rate-reduce monitor period, for an
    /// unknown QP, or with DCQCN switched off.
    pub rp_cnp_ignored: u64,
}

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
