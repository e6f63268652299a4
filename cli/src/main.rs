//! `roce-xdp`: the command-line front end.
//!
//! Each subcommand lives in its own `cmd_<name>.rs`; this file only parses
//! the command line, sets up logging and maps errors to exit codes
//! (2 for mistakes the user can fix, see `errors.rs`).

mod cmd_bench;
mod cmd_capture;
mod cmd_decode;
mod cmd_loopback;
mod cmd_perftest;
mod cmd_pingpong;
mod cmd_plot;
mod cmd_rdma_client;
mod cmd_rdma_target;
mod cmd_serve;
mod cmd_sim;
mod cmd_stats;
mod errors;
mod logging;
mod perftest;
mod preflight;
mod privileges;
mod rxe_common;
mod sim_congestion;
mod snapshot;

use clap::{Parser, Subcommand};

/// Software RoCE v2 over AF_XDP.
#[derive(Debug, Parser)]
#[command(name = "roce-xdp", version, about)]
struct Cli {
    /// Log level (error, warn, info, debug, trace) or a tracing filter
    /// such as `engine=debug`; overrides RUST_LOG. Quiet (warnings only)
    /// by default.
    #[arg(long = "log-level", global = true, value_name = "LEVEL")]
    log_level: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// End-to-end benchmark: engine vs bare AF_XDP vs kernel UDP on a veth pair (needs root).
    Bench(cmd_bench::BenchArgs),
    /// Record the RoCE frames of the engines running on an interface to a pcap file.
    Capture(cmd_capture::CaptureArgs),
    /// Decode the RoCE v2 packets of a pcap/pcapng capture (ICRC checked), as text or JSON lines.
    Decode(cmd_decode::DecodeArgs),
    /// Two engines in two network namespaces over veth: a verified transfer, throughput, counters.
    Loopback(cmd_loopback::LoopbackArgs),
    /// Two simulated endpoints over a seeded virtual link (loss, reordering, duplication, corruption), every byte verified.
    Sim(cmd_sim::SimArgs),
    /// Draw a `sim --trace` CSV (DCQCN rate per QP and queue depth over time) as an SVG chart.
    Plot(cmd_plot::PlotArgs),
    /// Serve RDMA clients: attach to the NIC queues, register memory, answer connection requests.
    Serve(cmd_serve::ServeArgs),
    /// Show the counters of the engines running on an interface.
    Stats(cmd_stats::StatsArgs),
    /// RDMA WRITE bandwidth (perftest's ib_write_bw): server without an address, client with it.
    WriteBw(perftest::options::PerftestArgs),
    /// RDMA READ bandwidth (perftest's ib_read_bw).
    ReadBw(perftest::options::PerftestArgs),
    /// SEND bandwidth (perftest's ib_send_bw).
    SendBw(perftest::options::PerftestArgs),
    /// RDMA WRITE latency, half round trip (perftest's ib_write_lat).
    WriteLat(perftest::options::PerftestArgs),
    /// RDMA READ latency, full round trip (perftest's ib_read_lat).
    ReadLat(perftest::options::PerftestArgs),
    /// SEND latency, half round trip (perftest's ib_send_lat).
    SendLat(perftest::options::PerftestArgs),
    /// FETCH_AND_ADD bandwidth, 8-byte atomics (perftest's ib_atomic_bw).
    AtomicBw(perftest::options::PerftestArgs),
    /// FETCH_AND_ADD latency, full round trip (perftest's ib_atomic_lat).
    AtomicLat(perftest::options::PerftestArgs),
    /// RC SEND/RECV ping-pong, wire-compatible with rdma-core's ibv_rc_pingpong.
    Pingpong(cmd_pingpong::PingpongArgs),
    /// RDMA WRITE/READ against interop/peer/rdma_target on a libibverbs device (rxe).
    RdmaClient(cmd_rdma_client::RdmaClientArgs),
    /// Be the target of RDMA WRITE/READ from interop/peer/rdma_target -c (rxe).
    RdmaTarget(cmd_rdma_target::RdmaTargetArgs),
}

fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Bench(a) => cmd_bench::run(a),
        Command::Capture(a) => cmd_capture::run(a),
        Command::Decode(a) => cmd_decode::run(a),
        Command::Loopback(a) => cmd_loopback::run(a),
        Command::Sim(a) => cmd_sim::run(a),
        Command::Plot(a) => cmd_plot::run(a),
        Command::Serve(a) => cmd_serve::run(a),
        Command::Stats(a) => cmd_stats::run(a),
        Command::WriteBw(a) => cmd_perftest::run(perftest::kind::Kind::WriteBw, a),
        Command::ReadBw(a) => cmd_perftest::run(perftest::kind::Kind::ReadBw, a),
        Command::SendBw(a) => cmd_perftest::run(perftest::kind::Kind::SendBw, a),
        Command::WriteLat(a) => cmd_perftest::run(perftest::kind::Kind::WriteLat, a),
        Command::ReadLat(a) => cmd_perftest::run(perftest::kind::Kind::ReadLat, a),
        Command::SendLat(a) => cmd_perftest::run(perftest::kind::Kind::SendLat, a),
        Command::AtomicBw(a) => cmd_perftest::run(perftest::kind::Kind::AtomicBw, a),
        Command::AtomicLat(a) => cmd_perftest::run(perftest::kind::Kind::AtomicLat, a),
        Command::Pingpong(a) => cmd_pingpong::run(a),
        Command::RdmaClient(a) => cmd_rdma_client::run(a),
        Command::RdmaTarget(a) => cmd_rdma_target::run(a),
    }
}

fn main() {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        // Usage errors (and --help / --version) as clap prints them: exit 2
        // for mistakes, 0 for help.
        Err(e) => e.exit(),
    };
    if let Err(e) = logging::init(cli.log_level.as_deref()) {
        std::process::exit(errors::report(&e));
    }
    if let Err(e) = run(cli) {
        std::process::exit(errors::report(&e));
    }
}
