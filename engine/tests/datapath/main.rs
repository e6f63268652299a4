//! The datapath end to end: engines, AF_XDP sockets and the XDP program
//! over veth pairs in network namespaces each test creates (and removes).
//! Every test here needs root and is `#[ignore = "needs root"]`: run them
//! as root with `cargo test --release -- --include-ignored`; without root,
//! asking for them fails them with a message (see
//! [`support::require_root`]).

mod cq_wait;
mod driven;
mod echo;
mod forged_frames;
mod loopback;
mod malformed;
mod multi_queue;
mod queue_busy;
mod recv_ahead;
mod run_to_completion;
mod self_connected;
mod steer;
mod support;
mod teardown;
mod tx_in_place;
mod ud;
mod vlan;
