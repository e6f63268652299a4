//! The shared engine: one service per interface owns its AF_XDP queues,
//! and any number of processes attach to it (`docs/shared-engine.md`).
//!
//! - `service.rs`: [`Service`], the switch between the queues and the
//!   attached processes' frame rings: attach and detach, routing by QP
//!   number, the checks on what a process sends, local delivery between
//!   processes.
//! - `port.rs`: [`AttachedPort`], the process's side: a
//!   [`crate::io::FramePort`] over its rings, which its own engine
//!   ([`crate::driver::RunToCompletion::attached`]) runs on.
//! - `route.rs`: where a frame goes and what a process may send, as pure
//!   functions of the frame.
//! - `protocol.rs`: the attach handshake on the service's Unix socket, and
//!   the blocks of QP numbers.
//! - `path.rs`: where a service's socket is.
//!
//! The frame rings themselves (shared memory, their checks) are
//! [`crate::io::frame_ring`].

mod path;
mod port;
mod protocol;
mod route;
mod service;

pub use path::{netns_inode, service_dir, service_socket, ENV_RUN_DIR};
pub use port::{reported, AttachError, AttachedPort};
pub use protocol::{qpn_block, slot_of_qpn, Welcome};
pub use route::{check_outgoing, destination, Destination, Outgoing};
pub use service::{
    ProcessCounters, ProcessReport, Service, ServiceConfig, ServiceCounters, ServiceError,
    ServiceReport, MAX_PROCESSES,
};
