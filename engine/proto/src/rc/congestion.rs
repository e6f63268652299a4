//! The one place where the RC transport asks congestion control.
//!
//! Every call the transport makes into congestion control goes through
//! [`QpCongestion`], implemented in [`crate::cc::qp_congestion`] (DCQCN
//! notification and reaction point; `docs/congestion.md`, "ECN marking",
//! "CNP", "DCQCN"):
//!
//! - Receive side (notification point): [`QpCongestion::on_packet_received`]
//!   sees the IP ECN field of every RoCE packet accepted for this QP; when a
//!   CE mark (paced per QP) wants a CNP sent, [`QpCongestion::poll_cnp`]
//!   returns true and the QP emits one to the peer QP (opcode 0x81, BECN=1,
//!   DSCP [`QpCongestion::cnp_dscp`], Not-ECT).
//! - Send side (reaction point): before the requester (or the responder's
//!   READ responses) emits a data packet it calls [`QpCongestion::may_send`];
//!   when refused, the QP waits until [`QpCongestion::next_send_time`], which
//!   is folded into `Endpoint::poll_timeout`. [`QpCongestion::on_sent`]
//!   reports each data packet sent, [`QpCongestion::on_cnp`] each CNP
//!   received that passes [`Qp::handle_cnp`]'s checks.

pub use crate::cc::QpCongestion;

use super::attr::QpState;
use super::qp::Qp;
use crate::cc::CnpOutcome;
use crate::time::Instant;
use crate::wire::RoceFrameView;

impl Qp {
    /// A CNP addressed to this QP (`docs/congestion.md`, "CNP"). It cuts
    /// the QP's rate only if it passes the checks every packet of the QP
    /// passes ([`Qp::admit`]: from the connected peer, with the QP's
    /// P_Key), in a state that sends (RTR or RTS): otherwise anyone who
    /// can name a QP number could throttle it. A CNP carries no PSN, so
    /// that is all there is to check. Refused CNPs count in
    /// `dropped_wrong_peer` / `dropped_bad_pkey` (or `dropped_malformed`
    /// in another state), not in `cnp_received`.
    pub(crate) fn handle_cnp(&mut self, now: Instant, f: &RoceFrameView<'_>) {
        if !matches!(self.attr.state, QpState::Rtr | QpState::Rts) {
            self.counters.rest().dropped_malformed += 1;
            return;
        }
        if !self.admit(f) {
            return;
        }
        self.counters.rest().cnp_received += 1;
        match self.cc.on_cnp(now) {
            CnpOutcome::Handled => self.counters.rest().rp_cnp_handled += 1,
            CnpOutcome::Ignored => self.counters.rest().rp_cnp_ignored += 1,
        }
    }
}
