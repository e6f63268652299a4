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

/// Whether an engine attaches to its interface's service: `Auto`
/// attaches when one runs and runs its own engine otherwise, `Always`
/// attaches or fails, `Never` runs its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Share {
    #[default]
    Auto,
    Always,
    Never,
}

/// The attachment `share` asks for, to the service of `ifname` in the
/// calling thread's network namespace: None to run an engine of one's own.
pub fn attach_as(share: Share, ifname: &str) -> Result<Option<AttachedPort>, AttachError> {
    if share == Share::Never {
        return Ok(None);
    }
    let path = service_socket(ifname).map_err(|e| AttachError::Connect {
        path: "/run/roce-xdp".into(),
        source: e,
    })?;
    match AttachedPort::attach(&path) {
        Ok(port) => Ok(Some(port)),
        Err(AttachError::NoService { .. }) if share == Share::Auto => Ok(None),
        Err(e) => Err(e),
    }
}

/// Whether `share` would attach to a service of `ifname` (in the calling
/// thread's network namespace) that seems to run: its socket exists. For
/// checks a command skips when the service owns the interface.
pub fn would_attach(share: Share, ifname: &str) -> bool {
    share != Share::Never && service_socket(ifname).is_ok_and(|p| p.exists())
}

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
