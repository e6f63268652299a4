//! The commands of `roce-xdp`, one module each. A command module holds its
//! options and its `run`; it imports no other command (what two commands
//! share lives in `crate::common`).

mod bench;
mod capture;
mod decode;
mod exec;
mod floor_lat;
mod interop;
mod loopback;
mod perftest;
mod pingpong;
mod plot;
mod serve;
mod service;
mod sim;
mod stats;

use clap::Subcommand;

use crate::common::perftest::kind::Kind;

/// The user commands, and `interop` grouping the helpers of the
/// interoperability tests.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// End-to-end benchmark: engine vs bare AF_XDP vs kernel UDP on a veth pair (needs root).
    Bench(bench::BenchArgs),
    /// Record the RoCE frames of the engines running on an interface to a pcap file.
    Capture(capture::CaptureArgs),
    /// Decode the RoCE v2 packets of a pcap/pcapng capture (ICRC checked), as text or JSON lines.
    Decode(decode::DecodeArgs),
    /// Two engines in two network namespaces over veth: a verified transfer, throughput, counters.
    Loopback(loopback::LoopbackArgs),
    /// Two simulated endpoints over a seeded virtual link (loss, reordering, duplication, corruption), every byte verified.
    Sim(sim::SimArgs),
    /// Draw a `sim --trace` CSV (DCQCN rate per QP and queue depth over time) as an SVG chart.
    Plot(plot::PlotArgs),
    /// Serve RDMA clients: attach to the NIC queues, register memory, answer connection requests.
    Serve(serve::ServeArgs),
    /// The shared engine of an interface: owns its queues; programs under `exec` attach to it (many at once).
    Service(service::ServiceArgs),
    /// Show the counters of the engines running on an interface.
    Stats(stats::StatsArgs),
    /// RDMA WRITE bandwidth (perftest's ib_write_bw): server without an address, client with it.
    WriteBw(perftest::PerftestArgs),
    /// RDMA READ bandwidth (perftest's ib_read_bw).
    ReadBw(perftest::PerftestArgs),
    /// SEND bandwidth (perftest's ib_send_bw).
    SendBw(perftest::PerftestArgs),
    /// RDMA WRITE latency, half round trip (perftest's ib_write_lat).
    WriteLat(perftest::PerftestArgs),
    /// RDMA READ latency, full round trip (perftest's ib_read_lat).
    ReadLat(perftest::PerftestArgs),
    /// SEND latency, half round trip (perftest's ib_send_lat).
    SendLat(perftest::PerftestArgs),
    /// FETCH_AND_ADD bandwidth, 8-byte atomics (perftest's ib_atomic_bw).
    AtomicBw(perftest::PerftestArgs),
    /// FETCH_AND_ADD latency, full round trip (perftest's ib_atomic_lat).
    AtomicLat(perftest::PerftestArgs),
    /// RC SEND/RECV ping-pong, wire-compatible with rdma-core's ibv_rc_pingpong.
    Pingpong(pingpong::PingpongArgs),
    /// Bare AF_XDP round trip between two hosts, no RoCE: the floor the latency tools are measured against.
    FloorLat(floor_lat::FloorLatArgs),
    /// Helpers of the interoperability tests against Linux Soft-RoCE (rxe): see interop/README.md.
    #[command(subcommand)]
    Interop(interop::InteropCommand),
    /// Run an unmodified verbs program (ibv_rc_pingpong, perftest...) on the engine through the drop-in libibverbs.
    Exec(exec::ExecArgs),
}

/// Runs a command.
pub fn run(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Bench(a) => bench::run(a),
        Command::Capture(a) => capture::run(a),
        Command::Decode(a) => decode::run(a),
        Command::Loopback(a) => loopback::run(a),
        Command::Sim(a) => sim::run(a),
        Command::Plot(a) => plot::run(a),
        Command::Serve(a) => serve::run(a),
        Command::Service(a) => service::run(a),
        Command::Stats(a) => stats::run(a),
        Command::WriteBw(a) => perftest::run(Kind::WriteBw, a),
        Command::ReadBw(a) => perftest::run(Kind::ReadBw, a),
        Command::SendBw(a) => perftest::run(Kind::SendBw, a),
        Command::WriteLat(a) => perftest::run(Kind::WriteLat, a),
        Command::ReadLat(a) => perftest::run(Kind::ReadLat, a),
        Command::SendLat(a) => perftest::run(Kind::SendLat, a),
        Command::AtomicBw(a) => perftest::run(Kind::AtomicBw, a),
        Command::AtomicLat(a) => perftest::run(Kind::AtomicLat, a),
        Command::Pingpong(a) => pingpong::run(a),
        Command::FloorLat(a) => floor_lat::run(a),
        Command::Interop(c) => interop::run(c),
        Command::Exec(a) => exec::run(a),
    }
}
