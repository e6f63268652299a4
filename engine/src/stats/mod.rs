//! The local stats channel: a running engine serves snapshots of its
//! counters (per queue, plus the XDP program's) on a Unix socket,
//! `/run/roce-xdp/IFACE.sock` (directory overridable with
//! `ROCE_XDP_RUN_DIR`). No log scraping, no shared memory layout to keep
//! stable: the names are the interface.
//!
//! A client sends one request line:
//! - `STATS`: the server answers one JSON document and closes;
//! - `CAPTURE`: the server answers `OK` (a line), then streams a classic
//!   pcap file of the RoCE frames its engines send and receive until the
//!   client disconnects (or `ERROR <reason>` when capture is unavailable).
//!   Frames are only copied while at least one capture client listens.
//!
//! JSON layout (schema 1):
//! `{"schema_version":1,"iface":"eth0","pid":123,"uptime_ns":5,
//!   "xdp_mode":"native","zero_copy":false,
//!   "xdp":{"seen":1,...},
//!   "queues":[{"queue":0,"core":2,"zero_copy":false,
//!   "counters":{"sent_pkts":1,...},"qp_rates_gbps":{"17":100.000}}]}`
//!
//! The top-level `zero_copy` is true when every queue's socket is bound in
//! zero-copy mode; each queue's `zero_copy` says it for that queue (as the
//! kernel reports it after the bind: XDP_OPTIONS).
//!
//! `processes` lists the processes attached to a shared engine (`roce-xdp
//! service`), empty for an engine inside one process:
//! `"processes":[{"pid":1234,"command":"ib_write_bw","uid":1000,
//!   "attached_ns":5,"qpn_first":256,"qpn_last":511,"qps":2,"regions":1,
//!   "zero_copy_regions":0,"copied_regions":1,
//!   "counters":{"frames_in":10,"frames_out":9,...}}]`
//! (`command` is `/proc/PID/comm` as the service read it; `qps` and
//! `regions` as the process reports them).
//!
//! `qp_rates_gbps` maps each QP number of the queue to its current DCQCN
//! rate in Gb/s (the line rate while not limited or with DCQCN off).
//! `steering` (when the datapath reports it) says how RoCE reaches the
//! served queues (`steering.rs`). `cm` (a program on the drop-in
//! librdmacm) holds the RDMA CM agent's counters (`roce_xdp_proto::cm::
//! CmCounters`: `malformed`, `unmatched`, `retransmissions`, ...;
//! docs/rdma-cm-drop-in.md).
//!
//! - `snapshot.rs`: [`Snapshot`] and its JSON;
//! - `prometheus.rs`: the snapshot in Prometheus' text format
//!   ([`prometheus_text`]) and [`MetricsServer`], its HTTP endpoint;
//! - `server.rs`: [`StatsServer`], the engine's side;
//! - `client.rs`: [`fetch`] and [`open_capture`], the operator's side.

use std::io::{self, Read};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::Duration;

use thiserror::Error;

mod client;
mod json;
mod prometheus;
mod server;
mod snapshot;
mod steering;

pub use client::{fetch, fetch_at, open_capture, open_capture_at};
pub use prometheus::{
    render as prometheus_text, Limits as MetricsLimits, MetricsServer,
    CONTENT_TYPE as METRICS_CONTENT_TYPE, METRICS_PATH,
};
pub use server::{CaptureHub, StatsServer};
pub use snapshot::{
    is_drop_counter, queue_counters, xdp_counters, ProcessSnapshot, QueueSnapshot, Snapshot,
    PROCESS_FRAMES_IN, PROCESS_FRAMES_OUT,
};

/// Default directory of the sockets.
pub const DEFAULT_RUN_DIR: &str = "/run/roce-xdp";
/// Environment variable overriding [`DEFAULT_RUN_DIR`].
pub const RUN_DIR_ENV: &str = "ROCE_XDP_RUN_DIR";
/// Version of the JSON layout.
pub const SCHEMA_VERSION: u32 = 1;

/// The directory holding the sockets.
pub fn run_dir() -> PathBuf {
    std::env::var_os(RUN_DIR_ENV)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(DEFAULT_RUN_DIR))
}

/// The socket of the engine attached to `iface`.
pub fn socket_path(iface: &str) -> PathBuf {
    run_dir().join(format!("{iface}.sock"))
}

/// Why the channel could not be opened or read.
#[derive(Debug, Error)]
pub enum StatsError {
    #[error("creating {dir} failed ({source}): run as root or set {RUN_DIR_ENV}")]
    RunDir { dir: String, source: io::Error },
    #[error("another roce-xdp engine already serves {0}: stop it first")]
    InUse(String),
    #[error("binding the stats socket {path} failed: {source}")]
    Bind { path: String, source: io::Error },
    #[error("no roce-xdp engine is running on {iface} (no stats socket at {path}): start `roce-xdp serve --iface {iface}`")]
    NotRunning { iface: String, path: String },
    #[error("reading stats from {path} failed: {source}")]
    Read { path: String, source: io::Error },
    #[error("the engine on {iface} cannot capture: {reason}")]
    CaptureUnavailable { iface: String, reason: String },
}

/// Reads the request line (up to 64 bytes, 1 s).
fn read_request(conn: &mut UnixStream) -> String {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(1)));
    let mut buf = Vec::new();
    let mut byte = [0u8];
    while buf.len() < 64 {
        match conn.read(&mut byte) {
            Ok(1) if byte[0] != b'\n' => buf.push(byte[0]),
            _ => break,
        }
    }
    String::from_utf8_lossy(&buf).trim().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serves_snapshots_and_cleans_up() {
        let dir = std::env::temp_dir().join(format!("roce-xdp-stats-test-{}", std::process::id()));
        let path = dir.join("t0.sock");
        let server = StatsServer::start_at(
            &path,
            || Snapshot {
                iface: "t\"0".into(),
                pid: 7,
                xdp: vec![("seen".into(), 3)],
                queues: vec![QueueSnapshot {
                    queue: 1,
                    core: None,
                    zero_copy: true,
                    counters: vec![("sent_pkts".into(), 5)],
                    qp_rates: vec![(17, 100e9), (18, 2.5e9)],
                }],
                ..Default::default()
            },
            None,
        )
        .unwrap();
        // A second engine on the same interface is refused.
        assert!(matches!(
            StatsServer::start_at(&path, Snapshot::default, None),
            Err(StatsError::InUse(_))
        ));
        let json = fetch_at("t0", &path).unwrap();
        assert!(json.contains("\"iface\":\"t\\\"0\""), "{json}");
        assert!(
            json.contains(
                "\"queues\":[{\"queue\":1,\"core\":null,\"zero_copy\":true,\"counters\":{\"sent_pkts\":5},\
                 \"qp_rates_gbps\":{\"17\":100.000,\"18\":2.500}}]"
            ),
            "{json}"
        );
        assert!(json.contains("\"xdp\":{\"seen\":3}"), "{json}");
        drop(server);
        assert!(!path.exists());
        assert!(matches!(
            fetch_at("t0", &path),
            Err(StatsError::NotRunning { .. })
        ));
        let _ = std::fs::remove_dir(&dir);
    }

    #[test]
    fn streams_captures_on_demand() {
        let dir = std::env::temp_dir().join(format!("roce-xdp-cap-test-{}", std::process::id()));
        let path = dir.join("c0.sock");
        let (sink, frames) = crate::driver::capture_channel(64);
        sink.set_enabled(false);
        let engine_side = sink.clone();
        let server =
            StatsServer::start_at(&path, Snapshot::default, Some(CaptureHub { sink, frames }))
                .unwrap();
        engine_side.record(&[9; 10]); // nobody listens: not recorded
        let mut conn = open_capture_at("c0", &path).unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while !engine_side.is_enabled() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        engine_side.record(&[1, 2, 3, 4]);
        let mut buf = vec![0u8; 24 + 16 + 4];
        conn.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        conn.read_exact(&mut buf).unwrap();
        assert_eq!(&buf[0..4], &[0xd4, 0xc3, 0xb2, 0xa1]);
        assert_eq!(&buf[40..44], &[1, 2, 3, 4]);
        // Plain stats still work beside a capture.
        assert!(fetch_at("c0", &path).unwrap().contains("schema_version"));
        drop(conn);
        drop(server);
        drop(engine_side);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
