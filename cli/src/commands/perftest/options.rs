//! Options shared by the perftest-style tools, in perftest's spirit:
//! the server runs without an address, the client gets the server's.

use std::time::Duration;

use clap::Args;

use crate::common::args::{EngineArgs, VALID_PMTUS};
use crate::common::lists::{parse_list, CpuList};
use crate::common::perftest::sizes::{all_sizes, parse_size};

/// Options of `write-bw`, `read-bw`, `send-bw`, `write-lat`, `read-lat`,
/// `send-lat`.
#[derive(Debug, Clone, Args)]
pub struct PerftestArgs {
    /// Server address (client side). Without it, run as the server and
    /// wait for one client.
    pub server: Option<String>,
    /// Network interface (default: the one the route to the server uses;
    /// required on the server).
    #[arg(short = 'd', long = "iface", value_name = "IF")]
    pub iface: Option<String>,
    /// Message size in bytes (K, M suffixes allowed).
    #[arg(short = 's', long = "size", value_parser = parse_size, default_value = "65536")]
    pub size: u64,
    /// Iterations per size (give the server the same, as with perftest).
    #[arg(short = 'n', long = "iters", value_name = "ITERS")]
    pub iters: Option<u64>,
    /// Run each size for this many seconds instead of a number of iterations.
    #[arg(
        short = 'D',
        long = "duration",
        value_name = "SECONDS",
        conflicts_with = "iters"
    )]
    pub duration: Option<f64>,
    /// Number of QPs (the messages are spread over them).
    #[arg(short = 'q', long = "qps", default_value_t = 1)]
    pub qps: u32,
    /// Path MTU: 256, 512, 1024, 2048 or 4096.
    #[arg(short = 'm', long = "mtu", default_value_t = 1024)]
    pub mtu: u32,
    /// Run every size from 2 B to 8 MiB (powers of two).
    #[arg(short = 'a', long = "all", conflicts_with = "size")]
    pub all: bool,
    /// Work requests outstanding per QP (bandwidth tests).
    #[arg(short = 't', long = "tx-depth", default_value_t = 128)]
    pub tx_depth: u32,
    /// Bidirectional: both sides send (write-bw, read-bw, atomic-bw).
    #[arg(short = 'b', long = "bidirectional")]
    pub bidirectional: bool,
    /// perftest's GID index: accepted for compatibility (the engine's GID
    /// is always its interface's IP address).
    #[arg(short = 'x', long = "gid-index", value_name = "INDEX")]
    pub gid_index: Option<u32>,
    /// Port of the connection exchange (TCP; with -R the RDMA CM's
    /// port, in rdma_cm's TCP port space).
    #[arg(short = 'p', long = "port", default_value_t = 18515)]
    pub port: u16,
    /// Connect through the RDMA connection manager, as perftest's -R: the
    /// exchange runs over a control QP the CM connects, and every test QP
    /// is connected by the CM (REQ / REP / RTU on QP 1), no TCP. Both
    /// sides need it.
    #[arg(short = 'R', long = "rdma-cm")]
    pub rdma_cm: bool,
    /// NIC queue whose engine creates the QPs (queues 0..=QUEUE are attached).
    #[arg(long = "queue", default_value_t = 0)]
    pub queue: u32,
    /// NIC queues to attach to, starting at 0 (`0-3`), as `serve --queues`:
    /// on a NIC with RSS, serve every queue RoCE traffic may arrive on
    /// (each QP then lives on the queue its packets arrive on). Default:
    /// 0..=QUEUE.
    #[arg(long = "queues", value_parser = parse_list)]
    pub queues: Option<CpuList>,
    /// Attach mode, zero-copy, --force, --steer, --pcap, --busy-poll.
    #[command(flatten)]
    pub engine: EngineArgs,
    /// Print one JSON document instead of the table.
    #[arg(long = "json")]
    pub json: bool,
    /// Latency tools: run the measurement loop through the engine threads
    /// (the loop posts to them and polls what they complete) instead of
    /// run-to-completion, the default (the loop's own thread drives its
    /// queue's engine, as perftest busy-polls its CQ).
    #[arg(long = "threaded")]
    pub threaded: bool,
    /// Seconds to wait for the peer (connection exchange and transfers).
    #[arg(long = "timeout", default_value_t = 30.0)]
    pub timeout: f64,
}

/// The engine's QP limit (its default endpoint configuration).
pub fn max_qps() -> u32 {
    engine::endpoint::MAX_QPS_PER_ENGINE
}

impl PerftestArgs {
    /// The message sizes to run.
    pub fn sizes(&self) -> Vec<u64> {
        if self.all {
            all_sizes()
        } else {
            vec![self.size]
        }
    }

    /// Iterations per size (perftest's defaults: 5000 for bandwidth,
    /// 1000 for latency) unless `-D` is given.
    pub fn iterations(&self, latency: bool) -> u64 {
        self.iters.unwrap_or(if latency { 1000 } else { 5000 })
    }

    /// The `-D` duration.
    pub fn run_duration(&self) -> Option<Duration> {
        self.duration.map(Duration::from_secs_f64)
    }

    /// How many queues to attach (queues 0..n).
    pub fn queue_count(&self) -> u32 {
        match &self.queues {
            Some(l) => l.0.len() as u32,
            None => self.queue + 1,
        }
    }

    /// Checks value ranges clap cannot express.
    pub fn validate(&self) -> Result<(), String> {
        if !VALID_PMTUS.contains(&self.mtu) {
            return Err(format!(
                "-m {}: the path MTU must be one of 256, 512, 1024, 2048, 4096",
                self.mtu
            ));
        }
        if self.qps == 0 {
            return Err("-q must be at least 1".into());
        }
        let max_qps = max_qps();
        if self.qps > max_qps {
            return Err(format!(
                "-q {}: an engine holds at most {max_qps} QPs",
                self.qps
            ));
        }
        if self.tx_depth == 0 {
            return Err("--tx-depth must be at least 1".into());
        }
        if self.iters == Some(0) {
            return Err("-n must be at least 1".into());
        }
        if let Some(d) = self.duration {
            if !(d > 0.0 && d.is_finite()) {
                return Err("-D must be a positive number of seconds".into());
            }
        }
        if !self.all && self.size == 0 {
            return Err("-s must be at least 1 byte".into());
        }
        if let Some(l) = &self.queues {
            if l.0.iter().enumerate().any(|(i, &q)| q != i) {
                return Err(format!(
                    "--queues must start at 0 and have no gaps (0-{}): this version serves queues 0..N",
                    l.0.len().saturating_sub(1)
                ));
            }
            if self.queue as usize >= l.0.len() {
                return Err(format!(
                    "--queue {} is not among --queues 0-{}",
                    self.queue,
                    l.0.len() - 1
                ));
            }
        }
        if self.rdma_cm && self.queue_count() > 1 {
            return Err(
                "-R: the connection manager (QP 1) runs on one queue here: use one queue (--queues 0), or connect without -R".into(),
            );
        }
        if self.server.is_none() && self.iface.is_none() {
            return Err("the server needs --iface IF (the interface to attach to)".into());
        }
        Ok(())
    }
}
