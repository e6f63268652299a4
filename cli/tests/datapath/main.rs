//! The commands that attach engines to interfaces, run on the binary
//! between network namespaces the tests create (veth pairs): the
//! perftest-style tools, `serve` with `stats` and `capture`, the error
//! messages of the datapath, queue coverage (`--steer`), the bare AF_XDP
//! round trip (`floor-lat`), and the benchmark harness's smoke run.
//!
//! Every test that needs root (namespaces, XDP, AF_XDP) is
//! `#[ignore = "needs root"]`: run them as root with
//! `cargo test -- --include-ignored`; without root they fail saying so.

mod bench;
mod errors;
mod floor_lat;
mod multi_queue;
mod perftest;
mod qp_scale;
mod serve;
mod serve_soak;
mod steer;
mod support;
