//! The Unreliable Datagram transport's tests, one binary: packet by
//! packet between two hand-driven endpoints (`packets.rs`: the frame's
//! bytes, the GRH area, Q_Keys, lengths, drops, states, the GSI), in the
//! simulator under loss, reordering, duplication and corruption
//! (`sim.rs`: many QPs, many to one, every byte checked), and arbitrary
//! bytes and mutated datagrams fed to a receiving endpoint (`fuzz.rs`).

mod fuzz;
mod packets;
mod sim;
mod srq;
mod support;
mod vectors;
