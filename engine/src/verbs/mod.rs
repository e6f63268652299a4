//! Verbs-style application API over the AF_XDP datapath.
//!
//! ```text
//! let dev = Device::open(DeviceConfig::new("eth0"))?;        // XDP + one engine thread per queue
//! let mr  = dev.register_memory(0, 1 << 20, Access::ALL)?;  // shared memory the app sees
//! let qp  = dev.create_qp(0, QpCaps::default())?;           // bound to queue 0
//! let mac = dev.resolve_mac(peer_ip)?;                       // kernel neighbour table (ARP/ND)
//! qp.connect(RemoteQp { qpn, psn, mac, ip: peer_ip }, ConnectOptions { access: Access::REMOTE_WRITE, ..Default::default() })?;
//! mr.write(0, b"hello");
//! qp.post_send(SendWr { .. local: mr.sge(0, 5), .. })?;
//! let n = dev.poll_cq(0, &mut wcs);
//! ```
//!
//! Each queue runs its own [`Endpoint`](crate::endpoint::Endpoint) on its
//! own thread. Memory regions and QP numbers are the device's: a region is
//! registered in every queue's endpoint under one key, and a QP lives on
//! the queue its packets arrive on (RSS chooses it), while its posts go
//! through, and its completions return to, the queue of the application
//! that created it (`docs/multi-queue.md`). Applications never touch an
//! endpoint: posts and completions cross lock-free queues, control
//! operations run on the engine thread that holds their QP.
//!
//! - `device.rs`: [`Device`] and [`DeviceConfig`];
//! - `memory.rs`: [`MemoryRegion`];
//! - `qp.rs`: [`QueuePair`] and [`QpCaps`];
//! - `ud.rs`: [`UdQueuePair`] and [`AddressHandle`] (Unreliable
//!   Datagram);
//! - `error.rs`: [`DeviceError`];
//! - `shared_cq.rs`: [`SharedCq`], one queue's completions shared by
//!   several consumers (each takes its own QPs');
//! - `cm.rs`: [`cm::CmService`], the connection manager (QP 1 and the
//!   IB CM over RoCE v2): blocking `connect` / `listen` + `accept`.
//!
//! An application that wants to drive a queue's engine from its own thread
//! instead uses [`RunToCompletion`](crate::driver::RunToCompletion), which
//! takes the same [`QpCaps`] and hands out the same [`MemoryRegion`]s, or,
//! for a while, takes a `Device` queue's engine from its engine thread:
//! [`Device::run_to_completion`] (a [`DrivenQueue`]). How a thread waits
//! for completions otherwise: [`DeviceConfig::cq_wait`] ([`CqWait`]).

pub mod cm;
mod device;
mod error;
mod memory;
mod qp;
mod shared_cq;
mod ud;

pub use crate::driver::{CqWait, DrivenQueue};
pub use device::{Device, DeviceConfig};
pub use error::DeviceError;
pub use memory::MemoryRegion;
pub use qp::{QpCaps, QueuePair};
pub use shared_cq::SharedCq;
pub use ud::{AddressHandle, UdQueuePair};
