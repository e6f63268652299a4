//! The engine's side of the harness: RDMA WRITE, SEND and READ goodput
//! and message rate over the veth pair, 64 B SEND ping-pong latency and
//! the multi-queue WRITE scaling, all through the engine's verbs API.

use engine::netns::VethPair;

use crate::harness::Options;
use crate::report::Scaling;
use crate::stats::Percentiles;

/// An RDMA operation measured by the harness.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Write,
    Send,
    Read,
}

/// One throughput point of the engine.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    pub op: Op,
    pub message_bytes: u64,
    pub gbps: f64,
    pub mpps: f64,
    /// Process CPU time per data packet, if measured.
    pub cpu_ns_per_packet: Option<f64>,
}

/// Everything the engine runs measured.
#[derive(Debug, Clone, Default)]
pub struct EngineResults {
    pub points: Vec<Point>,
    pub send_latency: Option<Percentiles>,
    pub scaling: Option<Scaling>,
}

impl EngineResults {
    fn find(&self, op: Op, size: u64) -> Option<&Point> {
        self.points
            .iter()
            .find(|p| p.op == op && p.message_bytes == size)
    }
    pub fn write_gbps(&self, size: u64) -> Option<f64> {
        self.find(Op::Write, size).map(|p| p.gbps)
    }
    pub fn send_gbps(&self, size: u64) -> Option<f64> {
        self.find(Op::Send, size).map(|p| p.gbps)
    }
    pub fn read_gbps(&self, size: u64) -> Option<f64> {
        self.find(Op::Read, size).map(|p| p.gbps)
    }
    pub fn write_mpps(&self, size: u64) -> Option<f64> {
        self.find(Op::Write, size).map(|p| p.mpps)
    }
    pub fn send_mpps(&self, size: u64) -> Option<f64> {
        self.find(Op::Send, size).map(|p| p.mpps)
    }
    pub fn read_mpps(&self, size: u64) -> Option<f64> {
        self.find(Op::Read, size).map(|p| p.mpps)
    }
    /// CPU time per 4096-byte-payload packet of the largest WRITE measured.
    pub fn write_cpu_ns_per_full_packet(&self) -> Option<f64> {
        self.points
            .iter()
            .filter(|p| p.op == Op::Write && p.message_bytes >= 4096)
            .max_by_key(|p| p.message_bytes)
            .and_then(|p| p.cpu_ns_per_packet)
    }
}

/// Runs the engine measurements on `pair`. What cannot be measured is
/// described in `missing`; how figures were obtained goes to `notes`.
pub fn measure(
    _pair: &VethPair,
    _sizes: &[u64],
    _opts: &Options,
    _notes: &mut Vec<String>,
    missing: &mut Vec<String>,
) -> EngineResults {
    missing.push(
        "engine WRITE/SEND/READ over the veth, SEND ping-pong and multi-queue scaling: the harness does not drive the engine's verbs API yet".into(),
    );
    EngineResults::default()
}
