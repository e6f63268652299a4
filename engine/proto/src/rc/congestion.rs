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
//!   received.

pub use crate::cc::QpCongestion;
