//! What several commands share.

pub mod args;
pub mod datapath;
pub mod perftest;
pub mod preflight;
pub mod privileges;
pub mod snapshot;
pub mod verbs_peer;
