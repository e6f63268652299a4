//! Congestion control's tests, one binary: CNP bytes against Scapy and
//! the endpoint's notification / reaction point, DCQCN against
//! hand-computed sequences, CNP pacing, and DCQCN end to end in the
//! simulator.

// Two connected endpoints, from the RC tests' hand-driven wire.
#[path = "../rc/support/connect.rs"]
mod connect;

mod cnp_vectors;
mod dcqcn;
mod pacing;
mod sim_fairness;
