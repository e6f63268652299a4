//! DCQCN reaction point (the sender): per-QP rate control driven by CNPs.
//!
//! `docs/congestion.md`, "DCQCN" (after Zhu et al.,
//! "Congestion Control for Large-Scale RDMA Deployments", SIGCOMM'15, and
//! NVIDIA's firmware parameters):
//!
//! - State: current rate RC, target rate RT, alpha.
//! - On a CNP: `RT = RC; RC = RC * (1 - alpha/2); alpha = (1-g)*alpha + g`,
//!   at most one reduction per rate-reduce monitor period (CNPs inside the
//!   period after a reduction are ignored and counted as such). The cut is
//!   bounded by `min_decrease_factor` and RC never goes below the minimum
//!   rate. The rate-increase timer, byte counter and both stage counters
//!   restart.
//! - Every alpha period without a CNP: `alpha = (1-g)*alpha`. Alpha is
//!   decayed lazily (whole periods since the last CNP), which gives the same
//!   values as a periodic timer without waking up for it.
//! - Rate increase: each expiry of the timer T increments the timer stage
//!   `t`, each `B` bytes sent increments the byte stage `bc`; after either:
//!   - fast recovery if `max(t, bc) <= F`: `RC = (RT + RC) / 2`,
//!   - hyper increase if `min(t, bc) > F`: `RT += R_HAI; RC = (RT + RC)/2`,
//!   - additive increase otherwise: `RT += R_AI; RC = (RT + RC) / 2`,
//!
//!   RT and RC capped at the maximum rate. A disabled counter (zero period or
//!   zero bytes) stays at stage 0, so hyper increase needs both counters (as
//!   in the paper's state machine). Once RC reaches the maximum
//!   rate, the QP is no longer limited: the timer stops and the pacer lets
//!   everything through.
//! - Alpha starts at `initial_alpha` on the first CNP of the QP (NVIDIA's
//!   `initial_alpha_value` is "the initial value of alpha to use when
//!   receiving the first CNP for a flow").
//!
//! Everything is driven by the `now` argument; nothing here reads a clock.

use core::time::Duration;
use std::sync::Arc;

use super::pacer::Pacer;
use crate::time::Instant;

/// Every DCQCN parameter. Rates are in Mb/s (10^6 bit/s), times are
/// [`Duration`]s, the byte counter is in bytes.
///
/// NVIDIA firmware values given in undocumented "firmware units" were mapped
/// as follows (a unit choice of ours, tested for dynamics, not digits):
/// `DCE_TCP_RTT = 1` -> alpha period 1 us; `RPG_BYTE_RESET = 32767` ->
/// 32767 bytes; `DCE_TCP_G = 1019` -> alpha keeps 1019/1024 per update, so
/// g = 5/1024; `INITIAL_ALPHA_VALUE = 1023` -> 1023/1024.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DcqcnParams {
    /// Alpha gain g (0..=1): `alpha = (1-g)*alpha (+ g on a CNP)`.
    pub g: f64,
    /// Alpha used for the first CNP of a QP (0..=1).
    pub initial_alpha: f64,
    /// Alpha decays once per this period without a CNP.
    pub alpha_update_period: Duration,
    /// At most one rate reduction per this period; zero = every CNP reduces.
    pub rate_reduce_monitor_period: Duration,
    /// Smallest multiplier one CNP may apply to RC (0..=1): the new rate is
    /// `RC * max(1 - alpha/2, min_decrease_factor)`.
    pub min_decrease_factor: f64,
    /// RC never goes below this, Mb/s.
    pub min_rate_mbps: f64,
    /// Cap on RC and RT, Mb/s; zero = the QP's line rate.
    pub max_rate_mbps: f64,
    /// Rate-increase timer T; zero disables the timer.
    pub rate_increase_period: Duration,
    /// Byte counter B, bytes sent per increase event; zero disables it.
    pub byte_counter: u64,
    /// Fast-recovery stages F.
    pub fast_recovery_stages: u32,
    /// Additive increase R_AI, Mb/s.
    pub additive_increase_mbps: f64,
    /// Hyper increase R_HAI, Mb/s.
    pub hyper_increase_mbps: f64,
    /// Depth of the token bucket that paces the QP at RC, bytes (one MTU
    /// frame or more, so a limited QP still sends whole packets).
    pub pacer_burst_bytes: u64,
}

impl Default for DcqcnParams {
    fn default() -> Self {
        Self::nvidia_default()
    }
}

impl DcqcnParams {
    /// NVIDIA ConnectX firmware defaults (the default preset): g = 5/1024
    /// (DCE_TCP_G 1019), initial alpha 1023/1024, alpha period 1 us
    /// (DCE_TCP_RTT 1), rate-reduce monitor period 4 us, minimum decrease
    /// factor 50 %, minimum rate 1 Mb/s, T = 300 us (RPG_TIME_RESET),
    /// B = 32767 bytes (RPG_BYTE_RESET), F = 1 (RPG_THRESHOLD),
    /// R_AI = 5 Mb/s, R_HAI = 50 Mb/s.
    pub fn nvidia_default() -> Self {
        DcqcnParams {
            g: 5.0 / 1024.0,
            initial_alpha: 1023.0 / 1024.0,
            alpha_update_period: Duration::from_micros(1),
            rate_reduce_monitor_period: Duration::from_micros(4),
            min_decrease_factor: 0.5,
            min_rate_mbps: 1.0,
            max_rate_mbps: 0.0,
            rate_increase_period: Duration::from_micros(300),
            byte_counter: 32_767,
            fast_recovery_stages: 1,
            additive_increase_mbps: 5.0,
            hyper_increase_mbps: 50.0,
            pacer_burst_bytes: 8192,
        }
    }

    /// The DCQCN paper's values (SIGCOMM'15): g = 1/256, initial alpha 1,
    /// alpha period 55 us, T = 55 us, B = 10 MB (10^7 bytes), F = 5,
    /// R_AI = 40 Mb/s. The paper's notification point already limits CNPs
    /// to one per 50 us, so it has no monitor period (zero here). It names
    /// no minimum rate and no R_HAI: we use 1 Mb/s and 10 x R_AI = 400 Mb/s
    /// (QCN's ratio of hyper to additive increase).
    pub fn paper() -> Self {
        DcqcnParams {
            g: 1.0 / 256.0,
            initial_alpha: 1.0,
            alpha_update_period: Duration::from_micros(55),
            rate_reduce_monitor_period: Duration::ZERO,
            min_decrease_factor: 0.5,
            min_rate_mbps: 1.0,
            max_rate_mbps: 0.0,
            rate_increase_period: Duration::from_micros(55),
            byte_counter: 10_000_000,
            fast_recovery_stages: 5,
            additive_increase_mbps: 40.0,
            hyper_increase_mbps: 400.0,
            pacer_burst_bytes: 8192,
        }
    }

    /// Check ranges; the error says which field is wrong.
    pub fn validate(&self) -> Result<(), &'static str> {
        let unit = |x: f64| (0.0..=1.0).contains(&x);
        if !unit(self.g) {
            return Err("DCQCN g must be within 0..=1");
        }
        if !unit(self.initial_alpha) {
            return Err("DCQCN initial_alpha must be within 0..=1");
        }
        if !unit(self.min_decrease_factor) {
            return Err("DCQCN min_decrease_factor must be within 0..=1");
        }
        if self.alpha_update_period.is_zero() {
            return Err("DCQCN alpha_update_period must be positive");
        }
        if self.min_rate_mbps.is_nan() || self.min_rate_mbps <= 0.0 {
            return Err("DCQCN min_rate_mbps must be positive (a zero rate never sends again)");
        }
        if self.max_rate_mbps.is_nan() || self.max_rate_mbps < 0.0 {
            return Err("DCQCN max_rate_mbps must be zero (line rate) or positive");
        }
        if self.additive_increase_mbps.is_nan()
            || self.hyper_increase_mbps.is_nan()
            || self.additive_increase_mbps < 0.0
            || self.hyper_increase_mbps < 0.0
        {
            return Err("DCQCN increase steps must be non-negative");
        }
        Ok(())
    }
}

/// What a reaction point did with a CNP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CnpOutcome {
    /// The rate was reduced (counted as `rp_cnp_handled`).
    Handled,
    /// Inside the rate-reduce monitor period: no change (`rp_cnp_ignored`).
    Ignored,
}

/// Which increase rule an increase event applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IncreaseStage {
    FastRecovery,
    AdditiveIncrease,
    HyperIncrease,
}

/// DCQCN reaction-point state of one QP (see the module docs).
#[derive(Debug, Clone)]
pub struct Dcqcn {
    /// Shared by the QPs of an endpoint ([`Dcqcn::with_shared_params`]):
    /// constant, read on every data packet (`byte_counter`), so one copy
    /// that stays in the caches rather than ~140 bytes of each QP.
    params: Arc<DcqcnParams>,
    /// Upper bound on RC and RT, bit/s.
    max_rate_bps: f64,
    min_rate_bps: f64,
    /// Current rate RC, bit/s.
    rate_bps: f64,
    /// Target rate RT, bit/s.
    target_bps: f64,
    /// Alpha as of `alpha_at` (None before the first CNP).
    alpha: Option<f64>,
    alpha_at: Instant,
    last_reduction: Option<Instant>,
    timer_stage: u32,
    byte_stage: u32,
    bytes_since_increase: u64,
    /// Next expiry of the rate-increase timer; None when not limited.
    next_increase: Option<Instant>,
    last_increase: Option<IncreaseStage>,
    pacer: Pacer,
}

impl Dcqcn {
    /// A QP on a link of `line_rate_bps`, starting unlimited (RC = RT = max).
    pub fn new(params: DcqcnParams, line_rate_bps: f64) -> Self {
        Self::with_shared_params(Arc::new(params), line_rate_bps)
    }

    /// As [`Dcqcn::new`], with parameters shared with other QPs.
    pub fn with_shared_params(params: Arc<DcqcnParams>, line_rate_bps: f64) -> Self {
        let max_rate_bps = Self::max_rate_for(&params, line_rate_bps);
        let min_rate_bps = (params.min_rate_mbps * 1e6).min(max_rate_bps);
        Dcqcn {
            max_rate_bps,
            min_rate_bps,
            rate_bps: max_rate_bps,
            target_bps: max_rate_bps,
            alpha: None,
            alpha_at: Instant::ZERO,
            last_reduction: None,
            timer_stage: 0,
            byte_stage: 0,
            bytes_since_increase: 0,
            next_increase: None,
            last_increase: None,
            pacer: Pacer::new(params.pacer_burst_bytes),
            params,
        }
    }

    /// The maximum rate of a QP with `params` on a link of `line_rate_bps`
    /// (`max_rate_mbps` if set and lower). Passing the result as the line
    /// rate gives it back.
    pub fn max_rate_for(params: &DcqcnParams, line_rate_bps: f64) -> f64 {
        if params.max_rate_mbps > 0.0 {
            (params.max_rate_mbps * 1e6).min(line_rate_bps)
        } else {
            line_rate_bps
        }
    }

    /// The parameters in use.
    pub fn params(&self) -> &DcqcnParams {
        &self.params
    }

    /// The parameters in use, as shared.
    pub fn shared_params(&self) -> &Arc<DcqcnParams> {
        &self.params
    }

    /// Current rate RC, bit/s.
    pub fn rate_bps(&self) -> f64 {
        self.rate_bps
    }

    /// Target rate RT, bit/s.
    pub fn target_rate_bps(&self) -> f64 {
        self.target_bps
    }

    /// The maximum (line) rate, bit/s.
    pub fn max_rate_bps(&self) -> f64 {
        self.max_rate_bps
    }

    /// True while RC is below the maximum rate.
    pub fn is_limited(&self) -> bool {
        self.rate_bps < self.max_rate_bps
    }

    /// Alpha as it would be at `now` (decayed over whole periods since the
    /// last CNP); `initial_alpha` before the first CNP.
    pub fn alpha(&self, now: Instant) -> f64 {
        match self.alpha {
            None => self.params.initial_alpha,
            Some(a) => a * (1.0 - self.params.g).powf(self.alpha_periods_since(now) as f64),
        }
    }

    /// (timer stage, byte stage) counters since the last CNP.
    pub fn stages(&self) -> (u32, u32) {
        (self.timer_stage, self.byte_stage)
    }

    /// The rule the most recent increase event applied.
    pub fn last_increase(&self) -> Option<IncreaseStage> {
        self.last_increase
    }

    fn alpha_periods_since(&self, now: Instant) -> u64 {
        let elapsed = now.saturating_duration_since(self.alpha_at).as_nanos();
        let period = self.params.alpha_update_period.as_nanos().max(1);
        u64::try_from(elapsed / period).unwrap_or(u64::MAX)
    }

    /// A CNP for this QP arrived at `now`.
    pub fn on_cnp(&mut self, now: Instant) -> CnpOutcome {
        self.advance(now);
        if let Some(last) = self.last_reduction {
            if now.saturating_duration_since(last) < self.params.rate_reduce_monitor_period {
                return CnpOutcome::Ignored;
            }
        }
        let g = self.params.g;
        let alpha = self.alpha(now);
        // RT = RC; RC = RC * (1 - alpha/2), bounded below by the minimum
        // decrease factor and the minimum rate.
        self.target_bps = self.rate_bps;
        let factor = (1.0 - alpha / 2.0).max(self.params.min_decrease_factor);
        self.rate_bps = (self.rate_bps * factor).max(self.min_rate_bps);
        // alpha = (1-g)*alpha + g; the next alpha period starts now.
        self.alpha = Some((1.0 - g) * alpha + g);
        self.alpha_at = now;
        self.last_reduction = Some(now);
        self.timer_stage = 0;
        self.byte_stage = 0;
        self.bytes_since_increase = 0;
        self.next_increase = if self.params.rate_increase_period.is_zero() {
            None
        } else {
            Some(now + self.params.rate_increase_period)
        };
        CnpOutcome::Handled
    }

    /// Apply every rate-increase timer expiry up to `now`.
    pub fn on_timer(&mut self, now: Instant) {
        self.advance(now);
    }

    /// When the rate-increase timer next expires (None: nothing pending).
    pub fn next_deadline(&self) -> Option<Instant> {
        self.next_increase
    }

    fn advance(&mut self, now: Instant) {
        while let Some(t) = self.next_increase {
            if t > now {
                break;
            }
            self.timer_stage = self.timer_stage.saturating_add(1);
            self.increase();
            self.next_increase = if self.is_limited() {
                Some(t + self.params.rate_increase_period)
            } else {
                None
            };
        }
    }

    /// `n` bytes were sent at `now`: drives the byte counter B.
    pub fn on_bytes_sent(&mut self, now: Instant, n: u64) {
        self.advance(now);
        let b = self.params.byte_counter;
        if b == 0 || !self.is_limited() {
            return;
        }
        self.bytes_since_increase += n;
        while self.bytes_since_increase >= b && self.is_limited() {
            self.bytes_since_increase -= b;
            self.byte_stage = self.byte_stage.saturating_add(1);
            self.increase();
        }
        if !self.is_limited() {
            self.next_increase = None;
        }
    }

    /// One increase event (after a stage counter was incremented).
    fn increase(&mut self) {
        let f = self.params.fast_recovery_stages;
        let hi = self.timer_stage.max(self.byte_stage);
        let lo = self.timer_stage.min(self.byte_stage);
        let stage = if hi <= f {
            IncreaseStage::FastRecovery
        } else if lo > f {
            self.target_bps += self.params.hyper_increase_mbps * 1e6;
            IncreaseStage::HyperIncrease
        } else {
            self.target_bps += self.params.additive_increase_mbps * 1e6;
            IncreaseStage::AdditiveIncrease
        };
        self.target_bps = self.target_bps.min(self.max_rate_bps);
        self.rate_bps = ((self.target_bps + self.rate_bps) / 2.0).min(self.max_rate_bps);
        // Halving the gap never closes it exactly: within a millionth of the
        // maximum, the QP is unlimited again.
        if self.max_rate_bps - self.rate_bps <= self.max_rate_bps * 1e-6 {
            self.rate_bps = self.max_rate_bps;
            self.target_bps = self.max_rate_bps;
        }
        self.last_increase = Some(stage);
    }

    /// May `bytes` be sent at `now`? `Err(t)`: retry at `t`. Applies due
    /// timer events first. An unlimited QP is always allowed.
    pub fn may_send(&mut self, now: Instant, bytes: u64) -> Result<(), Instant> {
        self.advance(now);
        if !self.is_limited() {
            return Ok(());
        }
        self.pacer.may_send(now, bytes, self.rate_bps)
    }

    /// `bytes` were sent at `now`: pays the pacer and drives the byte counter.
    pub fn consume(&mut self, now: Instant, bytes: u64) {
        self.advance(now);
        if !self.is_limited() {
            return;
        }
        self.pacer.consume(now, bytes, self.rate_bps);
        self.on_bytes_sent(now, bytes);
    }
}
