//! A deterministic simulator: endpoints joined by seeded virtual links with
//! latency, rate, loss, reordering, duplication and corruption; time jumps
//! to the next event (frame arrival, endpoint timer, or link becoming free).
//!
//! Each node has one egress [`Link`]; a frame is routed to the node whose
//! MAC is the frame's destination MAC (frames to unknown MACs are counted
//! and dropped). A node is only asked for a frame when its link is free, as
//! a NIC's transmitter would. Everything is driven by one seed.
//!
//! [`CmNet`] is a MAD-level network of CM agents (no frames, no links)
//! for the Communication Manager's tests.
//!
//! [`scenarios`] holds what runs on it: [`scenarios::run_workload`],
//! verified traffic between two endpoints (`roce-xdp sim` and the
//! simulation tests use it), and [`scenarios::run_incast`], verified WRITE
//! streams from several senders through a congested switch queue
//! ([`Switch`], [`Bottleneck`]).

mod bottleneck;
mod cm_net;
mod impair;
mod link;
mod rng;
pub mod scenarios;
mod simulator;

pub use self::bottleneck::{
    frame_ecn, mark_frame_ce, Bottleneck, BottleneckConfig, BottleneckStats, MarkPoint, RedEcn,
    Switch, SwitchStats, Verdict,
};
pub use self::cm_net::CmNet;
pub use self::impair::{corrupt_covered_bit, Fate, Impairments};
pub use self::link::{Delivery, Link, LinkConfig, LinkStats};
pub use self::rng::SplitMix64;
pub use self::simulator::{Node, SimStats, Simulator, MAX_FRAME};
