//! roce-xdp engine: a software RoCE v2 endpoint over AF_XDP.
//!
//! The protocol itself is the sans-IO core, the crate `roce-xdp-proto`
//! (`engine/proto`), re-exported here (see `docs/architecture.md`):
//! - [`wire`]: zero-copy views and plain representations of every header.
//! - [`rc`]: the Reliable Connection transport, sans-IO.
//! - [`cc`]: congestion control (CNP notification point, DCQCN reaction point).
//! - [`endpoint`]: the one sans-IO entry point, demultiplexing by QPN.
//! - [`sim`]: a seeded, deterministic virtual network for tests and `roce-xdp sim`.
//!
//! The core never reads a clock, touches a socket, spawns a thread or uses
//! `unsafe`: time is the [`time::Instant`] argument the caller passes in.
//!
//! This crate puts it on the wire, one folder per part:
//! - [`verbs`]: the application API, verbs-style: a [`verbs::Device`] with
//!   one engine thread per queue, its memory regions and queue pairs.
//! - [`attach`]: the shared engine: a service owning an interface's
//!   queues, and the processes attached to it over shared-memory frame
//!   rings.
//! - [`driver`]: what moves packets between a socket and an endpoint: the
//!   engine thread of a queue, one iteration of it, run-to-completion
//!   ([`driver::RunToCompletion`]: the application's thread drives the
//!   engine), pcap capture, and [`driver::PollMode`].
//! - [`io`]: AF_XDP sockets, the fill/completion/RX/TX rings, the UMEM,
//!   system calls and the one-pass copy + CRC: the only `unsafe` code.
//! - [`nic`]: the interface on the kernel's side of the rings: the XDP
//!   program that steers RoCE v2 to the sockets, the interface's addresses,
//!   the neighbour table, network namespaces.
//! - [`stats`]: the local stats channel (a Unix socket per interface) that
//!   `roce-xdp stats` and `roce-xdp capture` read.
//! - [`oob`]: the out-of-band exchanges real RDMA tools use to connect QPs
//!   (`ibv_rc_pingpong`, perftest-style, the interop RDMA target): formats
//!   only, sans-IO.
//! - [`testbed`]: not production: veth pairs in network namespaces, the
//!   loopback run, the bare AF_XDP I/O floor and its echo loop, for the
//!   tests, `roce-xdp loopback` and the benchmarks. Nothing above depends
//!   on it.
#![deny(unsafe_code)]

pub use proto::{cc, endpoint, rc, sim, time, ud, wire};

pub mod attach;
pub mod driver;
#[allow(unsafe_code)]
pub mod io;
pub mod nic;
pub mod oob;
pub mod stats;
pub mod testbed;
pub mod verbs;
