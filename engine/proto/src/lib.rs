//! roce-xdp's protocol core: a sans-IO RoCE v2 endpoint.
//!
//! Layers, from the wire up (`docs/architecture.md`):
//! - [`wire`]: zero-copy views and plain representations of every header.
//! - [`rc`]: the Reliable Connection transport.
//! - [`ud`]: the Unreliable Datagram transport.
//! - [`cc`]: congestion control (CNP notification point, DCQCN reaction point).
//! - [`cm`]: the InfiniBand Communication Manager (connection setup MADs).
//! - [`endpoint`]: the one entry point, demultiplexing by QPN.
//! - [`sim`]: a seeded, deterministic virtual network for tests and `roce-xdp sim`.
//! - [`time`]: the [`time::Instant`] every entry point takes.
//!
//! Each layer is a public module whose files are private modules: its
//! `mod.rs` re-exports the names callers use (`wire::parse_frame_view`,
//! `endpoint::Endpoint`, `cc::CcConfig`, `sim::Simulator`), as smoltcp's
//! and quinn-proto's do, so a file can move or split without breaking a
//! caller.
//!
//! Nothing here reads a clock, touches a socket, spawns a thread or uses
//! `unsafe`: time is the [`time::Instant`] argument the caller passes in,
//! and packets are byte slices the caller owns. The AF_XDP datapath, the
//! XDP loader and the verbs API live in the `engine` crate, which drives
//! this one.
#![forbid(unsafe_code)]

pub mod cc;
pub mod cm;
pub mod endpoint;
pub mod rc;
pub mod sim;
pub mod time;
pub mod ud;
pub mod wire;
