//! The harness's result: every figure, the paired target measurements, the
//! ratios against the throughput targets, and renderings as a
//! plain-text table, Markdown and JSON.
//! A figure that could not be measured is `None`, and `missing` says why;
//! nothing here is ever filled in by hand.
//!
//! - `model.rs`: what a run measured ([`Report`] and its parts), as the
//!   JSON holds it.
//! - `targets.rs`: the target comparisons ([`PAIRED_TARGETS`],
//!   [`PAIRED_INFO`]) and the ratio rows held against them
//!   ([`Report::target_ratios`]).
//! - `tables.rs`: the [`Table`] type and the tables a report prints.
//! - `render.rs`: plain text, Markdown and JSON.
//! - `tool_rows.rs`: the latency tools' rows and the idle cost, against
//!   the AF_XDP floor.
//! - `drop_in_rows.rs`: stock perftest on the drop-in libibverbs against
//!   the engine's tools.
//! - `ucx_rows.rs`: UCX's `ucx_perftest` on the drop-in libibverbs against
//!   the engine's tools.
//! - `cm_rows.rs`: the RDMA connection manager's setup rate and the tools'
//!   `-R` against their TCP exchange.
//! - `shared_rows.rs`: the shared engine: stock perftest attached to a
//!   `roce-xdp service` against in-process, and the idle service's CPU.

mod cm_rows;
mod drop_in_rows;
mod model;
mod render;
#[cfg(test)]
mod sample;
mod shared_rows;
mod tables;
mod targets;
mod tool_rows;
mod ucx_rows;

pub use cm_rows::{
    CmReport, CmSetupRate, CmUcmatose, UcmatosePair, CM_WRITE_BW_TARGET, STOCK_WRITE_BW_RATIO,
};
pub use drop_in_rows::{
    DropInPair, DropInReport, DropInTarget, GOODPUT_TARGET, LATENCY_TARGET, THREADED_GOODPUT_TARGET,
};
pub use model::{
    Cmp, GoodputRow, Latency, MessageRate, MultiQueue, MultiQueueRow, Pair, PairedTarget,
    Projection, ProjectionRow, Ratio, Report, Scaling, Setup, INFORMATION, SCHEMA_VERSION,
};
pub use shared_rows::{
    SharedIdle, SharedPair, SharedReport, SharedRow, SHARED_IDLE_TARGET_PERCENT,
    SHARED_MANY_TARGET, SHARED_SEND_LAT_TARGET, SHARED_WRITE_BW_TARGET,
};
pub use tables::{paired_tables, sge_tables, size_label, Table};
pub use targets::{
    Baseline, BaselinePayload, Metric, PairedSpec, PAIRED_INFO, PAIRED_LABEL, PAIRED_TARGETS,
    SWEEP_LABEL,
};
pub use tool_rows::{IdleCost, ToolLatency, ToolsReport};
pub use ucx_rows::{UcxReport, UCX_PUT_BW_TARGET, UCX_TAG_LAT_TARGET};
