//! The timers of one QP, in one table indexed by an enum.

use crate::time::Instant;

/// Timers a QP can arm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Timer {
    /// Local ACK timeout: go-back-N from the oldest unacknowledged PSN.
    Retransmit = 0,
    /// RNR wait after an RNR NAK: resend when it expires.
    Rnr = 1,
}

const TIMER_COUNT: usize = 2;

/// Deadlines, `None` = not armed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TimerTable([Option<Instant>; TIMER_COUNT]);

impl TimerTable {
    /// Arm `t` to fire at `at` (replacing any earlier deadline).
    #[inline]
    pub fn set(&mut self, t: Timer, at: Instant) {
        self.0[t as usize] = Some(at);
    }

    /// Disarm `t`.
    #[inline]
    pub fn clear(&mut self, t: Timer) {
        self.0[t as usize] = None;
    }

    /// Whether `t` is armed.
    #[inline]
    pub fn is_armed(&self, t: Timer) -> bool {
        self.0[t as usize].is_some()
    }

    /// Earliest armed deadline.
    #[inline]
    pub fn earliest(&self) -> Option<Instant> {
        self.0.iter().flatten().min().copied()
    }

    /// Disarm and return `t` if it expired at `now`.
    #[inline]
    pub fn take_expired(&mut self, t: Timer, now: Instant) -> bool {
        match self.0[t as usize] {
            Some(at) if at <= now => {
                self.0[t as usize] = None;
                true
            }
            _ => false,
        }
    }
}
