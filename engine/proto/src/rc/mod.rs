//! The Reliable Connection transport, sans-IO, and the Unreliable
//! Connection service on the same queue pairs ([`Transport`]).
//!
//! The public API is the types re-exported here: queue pairs and their
//! attributes and states ([`Qp`], [`QpInitAttr`], [`QpAttr`],
//! [`QpAttrMask`], [`QpState`], [`Mtu`], [`RemoteAddress`]), work requests
//! and completions ([`SendWr`], [`RecvWr`], [`Sge`], [`SendOp`],
//! [`WorkCompletion`], [`WcStatus`], [`WcOpcode`], [`Cq`]), memory regions
//! ([`MrTable`], [`MrKeys`], [`Access`], [`AccessError`],
//! [`RegionMemory`], [`QpScope`]), memory windows ([`MwType`], [`MwBind`],
//! [`MwError`]), [`Psn`], [`Counters`] and [`VerbsError`]. An
//! [`crate::endpoint::Endpoint`] drives them.
//!
//! One file per role or object (`docs/architecture.md`):
//! - `psn.rs`: 24-bit PSNs and their wrap-aware order;
//! - `mr.rs`: memory regions, keys, and the bounds and rights checks;
//! - `mw.rs`: memory windows (types 1 and 2), kept in the region table;
//! - `attr.rs`: QP attributes and the verbs state machine;
//! - `qp.rs`: a queue pair and the glue between its roles;
//! - `requester.rs`: send work requests -> request packets;
//! - `completer.rs`: ACKs, NAKs and responses for the requester; retries,
//!   timers, error completions;
//! - `responder.rs`: incoming requests in PSN order (rxe's stages), ACK
//!   coalescing, READ responses, atomic replay;
//! - `srq.rs`: shared receive queues ([`Srq`]), which QPs created on one
//!   take their receives from;
//! - `context.rs`: what a QP lends its roles for one call;
//! - `random.rs`: QP numbers, PSNs and keys from a caller's secret seed;
//! - `sgl.rs`: scatter/gather lists and inline data of work requests;
//! - `uc.rs`: the Unreliable Connection service: the same QP, its
//!   responder's UC rules (no answers, a lost packet drops its message);
//! - `cq.rs`, `wqe.rs`, `timer.rs`, `counters.rs`, `error.rs`;
//! - `congestion.rs`: the hook into [`crate::cc`];
//! - `frame.rs`: a QP's header template.

mod attr;
mod completer;
mod congestion;
mod context;
mod counters;
mod cq;
mod error;
mod frame;
mod mr;
mod mw;
mod psn;
mod qp;
mod random;
mod requester;
mod responder;
mod sgl;
mod srq;
mod timer;
mod uc;
mod wqe;

pub use attr::{Mtu, QpAttr, QpAttrMask, QpState, RemoteAddress};
// The UD transport (`crate::ud`) picks its UDP source port and matches
// P_Keys by the same rules.
pub(crate) use attr::default_udp_src_port;
pub(crate) use context::InflightRoom;
pub use counters::{Counters, QpCounters};
pub use cq::Cq;
pub use error::VerbsError;
pub(crate) use frame::pkey_match;
pub use mr::{Access, AccessError, MrKeys, MrTable, QpScope, RegionMemory};
pub use mw::{MwBind, MwError, MwType};
pub use psn::Psn;
pub use qp::{Qp, QpInitAttr, Transport};
pub(crate) use random::NumberMap;
pub use random::{KeyPermutation, Rng, Seed};
pub use requester::MAX_MESSAGE_LEN;
pub(crate) use sgl::{scatter, WqeData};
pub use sgl::{QpSgl, SgeCaps, MAX_INLINE_DATA, MAX_SGE};
pub use srq::{
    Srq, SrqAttr, SrqAttrMask, SrqCounters, SrqError, MAX_SRQS, MAX_SRQ_SGE, MAX_SRQ_WR,
};
pub(crate) use uc::RC_ONLY;
pub use wqe::{RecvWr, SendOp, SendWr, Sge, WcOpcode, WcStatus, WorkCompletion};
