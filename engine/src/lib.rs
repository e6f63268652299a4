//! roce-xdp engine: a software RoCE v2 endpoint.
//!
//! Layers, from the wire up (see `../shared/docs/architecture.md`):
//! - [`wire`]: zero-copy views and plain representations of every header.
//! - [`rc`]: the Reliable Connection transport, sans-IO.
//! - [`cc`]: congestion control (CNP notification point, DCQCN reaction point).
//! - [`endpoint`]: the one sans-IO entry point, demultiplexing by QPN.
//! - [`sim`]: a seeded, deterministic virtual network for tests and `roce-xdp sim`.
//!
//! The core modules never read a clock, touch a socket, spawn a thread or use
//! `unsafe`: time is the [`time::Instant`] argument the caller passes in.
#![deny(unsafe_code)]

pub use proto::{cc, endpoint, rc, sim, time, wire};

pub mod driver;
#[allow(unsafe_code)]
pub mod io;
pub mod nic;
pub mod oob;
pub mod stats;
pub mod testbed;
pub mod verbs;
