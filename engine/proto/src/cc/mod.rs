//! Congestion control: ECN marking, the DCQCN notification point (CE ->
//! CNP, paced per QP) and reaction point (per-QP rate limiter), with the
//! counters RDMA users know (`docs/congestion.md`, "ECN marking", "CNP",
//! "DCQCN").
//!
//! [`QpCongestion`] is the per-QP state the endpoint keeps inside each QP
//! (the RC transport's hook). Its per-packet calls are
//! - [`QpCongestion::on_packet_received`] for every received RoCE packet
//!   (a CE mark arms a CNP to the peer QP, paced by [`CnpPacer`]),
//! - [`QpCongestion::on_cnp`] for every received CNP,
//! - [`QpCongestion::may_send`] / [`QpCongestion::on_sent`] around every
//!   requester transmission.
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
mod dcqcn;
mod notification_point;
mod pacer;
mod qp_congestion;

pub use self::config::{
    ip_ecn, CcConfig, EcnMarking, MarkingError, DEFAULT_CNP_DSCP, DEFAULT_DATA_DSCP,
};
pub use self::dcqcn::{CnpOutcome, Dcqcn, DcqcnParams, IncreaseStage};
pub use self::notification_point::{CnpPacer, DEFAULT_MIN_TIME_BETWEEN_CNPS};
pub use self::pacer::Pacer;
pub use self::qp_congestion::{QpCcConfig, QpCongestion};
