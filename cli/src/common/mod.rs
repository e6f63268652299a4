//! What several commands share, one module per concern:
//!
//! - `args`: option blocks and values (`#[command(flatten)]` structs, the
//!   XDP attach mode, zero-copy, the RDMA operation)
//! - `preflight`, `privileges`: the checks before touching the datapath
//! - `datapath`: opening and closing the engine for `serve` and the
//!   perftest-style tools (stats channel, capture)
//! - `snapshot`, `stats_document`: the stats channel's snapshot, built from
//!   a device and read back as a table or JSON (`stats`, `serve`)
//! - `metrics`: `--metrics ADDR:PORT`, the snapshot for Prometheus
//! - `lists`: lists of queue and core numbers (`--queues 0-3`, `--cores`)
//! - `steering`: `--steer` and queue coverage before the datapath opens
//! - `signals`: the stop flag Ctrl-C and SIGTERM raise
//! - `perftest`: the perftest-style sessions (the tools, `serve`)
//! - `verbs_peer`, `rdma_target_exchange`: facing a libibverbs peer
//!   (`pingpong`, `interop rdma-client`, `interop rdma-target`)

pub mod args;
pub mod datapath;
pub mod lists;
pub mod metrics;
pub mod perftest;
pub mod preflight;
pub mod privileges;
pub mod rdma_target_exchange;
pub mod signals;
pub mod snapshot;
pub mod stats_document;
pub mod steering;
pub mod verbs_peer;
