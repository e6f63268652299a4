//! roce-xdp benchmarks: criterion microbenchmarks live in `benches/benches/`;
//! this library holds the end-to-end harness behind `roce-xdp bench`
//! ([`full_run::run`]) and its pieces. It has no unsafe code: the package
//! forbids it (`Cargo.toml`, `[lints.rust]`).
//!
//! From the top: [`frontend`] (the command line) calls [`full_run`] (the
//! orchestrator, which nothing else imports); it runs the baselines
//! ([`baselines::kernel_udp`], [`baselines::floor`]), the engine
//! ([`engine_path`], [`engine_rtc`]), the latency tools and the idle cost
//! ([`tool_latency`]), stock perftest on the drop-in libibverbs
//! ([`verbs_drop_in`], with [`tool_run`] running binaries in the
//! namespaces), UCX's `ucx_perftest` on it ([`ucx`]), the connection
//! manager's rows ([`rdma_cm`]), the shared engine's ([`shared_engine`]), the [`paired`] step and the in-memory
//! [`protocol_path`], and fills the [`report`], which [`output`] writes
//! (with an SVG chart from the `charts` crate). Below them: [`options`] (what to run, shared
//! constants), [`error`], [`threads`] (threads inside a namespace),
//! [`placement`] (cores), [`sources`] (where messages sit), [`stats`],
//! [`sysinfo`]. No module imports one above it.

pub mod baselines;
pub mod engine_path;
pub mod engine_rtc;
pub mod error;
pub mod frontend;
pub mod full_run;
pub mod multi_queue;
pub mod options;
pub mod output;
pub mod paired;
pub mod placement;
pub mod protocol_path;
pub mod qp_scale;
pub mod rdma_cm;
pub mod report;
pub mod sge_paths;
pub mod shared_engine;
pub mod sources;
pub mod stats;
pub mod sysinfo;
#[cfg(test)]
mod test_support;
pub mod threads;
pub mod tool_latency;
pub mod tool_run;
pub mod ucx;
pub mod verbs_drop_in;
