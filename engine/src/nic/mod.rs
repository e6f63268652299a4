//! The network interface the engine serves, on the kernel's side of the
//! AF_XDP rings:
//!
//! - `loader.rs`: the `roce_steer` XDP program that steers RoCE v2 into
//!   the sockets ([`SteerProgram`]: load, attach by bpf_link, XSKMAP,
//!   per-CPU counters, test impairments);
//! - `iface.rs`: the interface's MAC and address, a peer's MAC from the
//!   kernel's neighbour table, and entering the interface's network
//!   namespace;
//! - `steering.rs`: queue coverage, the ntuple rules and RSS contexts that
//!   keep RoCE on the served queues ([`Steering`], `docs/queue-coverage.md`).

mod iface;
mod loader;
mod steering;

pub use iface::{
    enter_netns, interface_addr, interface_mac, neighbour_mac, resolve_mac, route_hop_limit,
    NetnsError,
};
pub(crate) use iface::{in_netns, ip};
pub use loader::{
    AttachMode, AttachedMode, Impairment, LoaderError, SteerCounters, SteerProgram, MAX_QUEUES,
};
pub use steering::{
    netns_label, state_path, ChannelKind, EthtoolOps, QueueOption, RxQueues, SteerError, SteerMode,
    SteerOps, SteerRequest, Steering, SteeringState, SteeringStatus, Uncovered, ROCE_V2_PORT,
};
