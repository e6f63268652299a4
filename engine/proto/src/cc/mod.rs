//! Congestion control: ECN marking, the DCQCN notification point (CE ->
//! CNP, paced per QP) and reaction point (per-QP rate limiter), with the
//! counters RDMA users know (`docs/congestion.md`, "ECN marking", "CNP",
//! "DCQCN").
//!
//! [`QpCongestion`] is the per-QP state the endpoint keeps inside each QP
//! (the RC transport's hook). [`CongestionControl`] is the same machinery
//! over a fixed-capacity table, for code that keeps QPs elsewhere: one per
//! endpoint, sized for its maximum number of QPs, allocated once. Its
//! per-packet calls are
//! - [`CongestionControl::on_ce_marked`] for every received RoCE packet
//!   whose IP ECN field is CE (true = send a CNP to the peer QP now),
//! - [`CongestionControl::on_cnp`] for every received CNP,
//! - [`CongestionControl::may_send`] / [`CongestionControl::consume`]
//!   around every requester transmission.
//!
//! Endpoint wiring: `EndpointConfig::cc` ([`CcConfig`]) configures every
//! QP; counters `np_ecn_marked_roce_packets`, `np_cnp_sent`,
//! `rp_cnp_handled`, `rp_cnp_ignored` are in the endpoint's transport
//! counters; `Endpoint::qp_rates` gives the current rate per QP.
//!
//! Try it in the simulator (three senders through a 25 Gb/s switch queue
//! marking above 5 KB; drop `--dcqcn off` to compare):
//!
//! ```text
//! roce-xdp sim --bottleneck-gbps 25 --rate-gbps 25 --ecn-threshold-kb 5 --senders 3 \
//!     --messages 768 --size 65536 --window 16 --mtu 4096 --latency-us 2 \
//!     --trace rate.csv --json
//! roce-xdp plot rate.csv --out rate.svg
//! ```

mod config;
mod congestion_control;
mod counters;
mod dcqcn;
mod notification_point;
mod pacer;
mod qp_congestion;
mod qp_table;

pub use self::config::{
    ip_ecn, CcConfig, EcnMarking, MarkingError, DEFAULT_CNP_DSCP, DEFAULT_DATA_DSCP,
};
pub use self::congestion_control::{CongestionControl, QpRate};
pub use self::counters::CcCounters;
pub use self::dcqcn::{CnpOutcome, Dcqcn, DcqcnParams, IncreaseStage};
pub use self::notification_point::{
    CnpPacer, NotificationPoint, NpCounters, DEFAULT_MIN_TIME_BETWEEN_CNPS,
};
pub use self::pacer::Pacer;
pub use self::qp_congestion::{QpCcConfig, QpCongestion};
pub use self::qp_table::{QpTable, TableFull};
