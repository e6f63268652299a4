//! Hostile peers on the sans-IO pair (`docs/security.md`): one
//! test per attack, each asserting the counter that saw it and that the
//! memory it aimed at did not change. The attacker is the test itself,
//! writing frames the endpoints never sent (forged from their real frames
//! with [`support::rewrite`]), with the two endpoints of
//! [`support::Pair`] as victims.
//!
//! - `peer`: forged sources (WRITE, CNP, the peer's UDP port), P_Key;
//! - `responses`: forged ACKs, NAKs and responses in and out of the
//!   requester's window, and responses of the wrong kind;
//! - `responder`: R_Key guessing, old-PSN READ and atomic replay;
//! - `regressions`: inputs the fuzzers (`fuzz/`) found, kept as tests.

#[path = "../rc/support/mod.rs"]
#[allow(dead_code)]
mod support;

mod forge;
mod peer;
mod regressions;
mod responder;
mod responses;
