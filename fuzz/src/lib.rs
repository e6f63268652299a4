//! Fuzz harnesses of roce-xdp (`fuzz/README.md`, `docs/security.md`,
//! "Fuzzing"). Each module has one `run(&[u8])`: the AFL entry points in
//! `src/bin/` call it under `cargo afl fuzz`, and `tests/corpus.rs`
//! replays every committed corpus and regression input through it under
//! a plain `cargo test`. A harness panics when an invariant breaks; the
//! code under test must never panic on any input.
//!
//! - [`frame`]: the frame validator and the borrowed view;
//! - [`cm`]: the Communication Manager's agent fed MAD sequences (raw,
//!   forged on live connections' IDs, the peer's delivered, dropped,
//!   duplicated, reordered, mutated) and every consumer call, next to a
//!   well-behaved peer agent;
//! - [`datagram`]: one endpoint's UD QPs (QP 1 among them) and UC QPs
//!   fed well-formed, mutated and raw UD / UC frames between posts, with
//!   completions, region bytes and counters checked after every step;
//! - [`pair`]: two connected endpoints (requester and responder on both
//!   sides) fed a sequence of delivered, dropped, duplicated, mutated and
//!   forged frames, with invariants checked after every step;
//! - [`pingpong`]: the `ibv_rc_pingpong` exchange parser
//!   (`engine/src/oob/pingpong.rs`);
//! - [`pcap`]: the pcap / pcapng reader (`engine/proto/src/wire/pcap.rs`).
//!
//! - [`perftest_exchange`]: the stock perftest TCP exchange parsers
//!   (`engine/src/oob/perftest.rs`), seeded with the recorded transcripts.

pub mod cm;
pub mod datagram;
pub mod frame;
pub mod headers;
pub mod input;
pub mod pair;
pub mod pcap;
pub mod perftest_exchange;
pub mod pingpong;
