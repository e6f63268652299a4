//! Scenarios run on the testbed: engines on a veth pair in network
//! namespaces ([`netns`](super::netns)), traffic between them, and every
//! byte verified. They sit inside `testbed` because they are made of its
//! parts and, like it, are no part of the production path.
//!
//! - [`loopback`]: two engines over a veth pair, a transfer between them
//!   and byte-exact verification of every message (`roce-xdp loopback`,
//!   the datapath tests).
//!
//! Each runs in three steps: setup (a struct holding the scenario's
//! state), drive (the loop that posts and polls), verify (the checks left
//! for the end, and the report).

pub mod loopback;
