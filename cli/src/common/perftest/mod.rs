//! Shared pieces of the perftest-style tools (`write-bw`, `read-lat`, ...):
//! options, message sizes, statistics, output and the progress bar.

pub mod bandwidth;
pub mod conn;
pub mod kind;
pub mod latency;
pub mod progress;
pub mod report;
pub mod session;
pub mod sizes;
