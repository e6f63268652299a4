//! The Reliable Connection transport, sans-IO.
//!
//! One file per role (architecture.md): [`psn`] (24-bit PSNs), [`mr`]
//! (memory regions and access checks), [`attr`] (QP attributes and the state
//! machine), [`qp`] (a queue pair and the glue between its roles),
//! [`requester`] (work requests -> packets), [`completer`] (ACK/NAK/response
//! handling, retries, timers), [`responder`] (ePSN, duplicates, NAKs,
//! placement, ACK coalescing), [`cq`], [`wqe`], [`timer`], [`counters`],
//! [`congestion`] (the hook for `engine::cc`), [`frame`] (per-QP header
//! template).

pub mod attr;
pub mod completer;
pub mod congestion;
pub mod counters;
pub mod cq;
pub mod error;
pub mod frame;
pub mod mr;
pub mod psn;
pub mod qp;
pub mod requester;
pub mod responder;
pub mod timer;
pub mod wqe;

pub use attr::{Mtu, QpAttr, QpAttrMask, QpState, RemoteAddress};
pub use counters::Counters;
pub use cq::Cq;
pub use error::VerbsError;
pub use mr::{Access, AccessError, MrKeys, MrTable, RegionMemory};
pub use psn::Psn;
pub use qp::{Qp, QpInitAttr};
pub use wqe::{RecvWr, SendOp, SendWr, Sge, WcOpcode, WcStatus, WorkCompletion};
