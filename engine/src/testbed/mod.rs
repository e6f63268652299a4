//! What exists to test and measure the engine, not to run it: nothing in
//! the production path (`driver`, `verbs`, `nic`, `io`) depends on this
//! folder. The datapath tests, `roce-xdp loopback` and the benchmark
//! harness (`benches/`) build on it.
//!
//! - [`netns`]: two network namespaces joined by a veth pair, with
//!   addresses that exist only inside them, removed on drop (needs root);
//! - [`scenarios`]: what runs over such a pair; [`scenarios::loopback`]:
//!   two engines, a transfer between them and byte-exact verification of
//!   every message (`roce-xdp loopback`);
//! - [`floor`]: the I/O floor, a bare AF_XDP echo over the same kind of
//!   pair with no RoCE processing, which benchmarks compare the engine
//!   with;
//! - [`echo`]: the floor's echo and generator loops.

pub mod echo;
pub mod floor;
pub mod netns;
pub mod scenarios;
