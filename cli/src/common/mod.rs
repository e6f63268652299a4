//! What several commands share.

pub mod args;
pub mod datapath;
pub mod perftest;
pub mod preflight;
pub mod privileges;
pub mod rdma_target_exchange;
pub mod snapshot;
pub mod stats_document;
pub mod verbs_peer;
