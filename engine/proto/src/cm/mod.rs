//! The InfiniBand Communication Manager (IBA vol 1 ch. 12), sans-IO: the
//! MADs RDMA programs connect with (librdmacm on the wire), sent as UD
//! datagrams to QP 1 (the GSI) over RoCE v2.
//!
//! - [`mad`]: zero-copy views and builders of the CM MADs.
//! - [`ip`]: the RDMA IP CM service's private-data header and service IDs
//!   (IBTA annex A11).
//! - [`CmAgent`]: every connection of one port, as the Linux kernel's
//!   `drivers/infiniband/core/cm.c` runs them (IBA 12.9 state diagrams):
//!   the consumer calls `connect` / `listen` / `accept` / ..., feeds
//!   received MADs to `handle_mad`, sends what `poll_transmit` gives, and
//!   reads `poll_event`; time is the `now` argument.
//!
//! - [`mad_owner`]: which of several agents sharing QP 1 a MAD is for.
//!
//! `docs/connection-manager.md` describes the state machine, timers, REJ
//! reasons, caps and where this core differs from cm.c.

pub mod ip;
pub mod mad;

mod agent;
mod config;
mod conn;
mod counters;
mod demux;
mod error;
mod event;
mod format;
mod receive;
mod timers;
mod timing;

pub use self::agent::CmAgent;
pub use self::config::{AcceptParams, CmConfig, ConnectParams, MadAddress, Transport};
pub use self::counters::CmCounters;
pub use self::demux::{mad_owner, MadOwner};
pub use self::error::CmError;
pub use self::event::{CmEvent, PrivateData, RepInfo, ReqInfo, SidrReqInfo};
pub use self::timing::iba_time;

/// Our local Communication ID of a connection (also a SIDR request's ID).
pub type ConnId = u32;
/// A listener's handle.
pub type ListenerId = u32;
