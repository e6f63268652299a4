//! The perftest-style sessions, shared by the tools (`write-bw`,
//! `read-lat`, ...; `commands/perftest/`) and `serve`: the kinds of test,
//! the connection exchange (TCP, or with `-R` a CM-connected control
//! QP), the two sides of a test once connected,
//! message sizes, statistics, the table / JSON output and the progress bar.

pub mod bandwidth;
pub mod cm;
pub mod conn;
pub mod exchange;
pub mod kind;
pub mod latency;
pub mod progress;
pub mod report;
pub mod rtc;
pub mod session;
pub mod sizes;
