//! The commands that need neither privileges nor a network, run on the
//! binary: `sim` (the two-endpoint run and the congestion scenario),
//! `plot`, and `decode` (the Scapy vectors, captures from Linux rxe, the
//! engine's CNPs).

mod cnp_decode;
mod congestion;
mod decode;
mod sim;
mod tool_modes;

use std::process::{Command, Output};

/// Runs `roce-xdp ARGS` to completion.
pub fn roce_xdp(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_roce-xdp"))
        .args(args)
        .output()
        .expect("running roce-xdp")
}
