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
//!   "queues":[{"queue":0,"core":2,"counters":{"sent_pkts":1,...},
//!   "qp_rates_gbps":{"17":100.000}}]}`
//!
//! `qp_rates_gbps` maps each QP number of the queue to its current DCQCN
//! rate in Gb/s (the line rate while not limited or with DCQCN off).

use std::fmt::Write as _;
use std::io::{self, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use thiserror::Error;

use crate::driver::{CaptureSink, CapturedFrame, PcapWriter};

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

/// Counters of one queue's engine.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct QueueSnapshot {
    pub queue: u32,
    /// The core the engine thread is pinned to, if pinned.
    pub core: Option<usize>,
    /// `(name, value)` in display order.
    pub counters: Vec<(String, u64)>,
    /// Current DCQCN rate of each QP, `(qpn, bit/s)`.
    pub qp_rates: Vec<(u32, f64)>,
}

/// Everything one snapshot reports.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    pub iface: String,
    pub pid: u32,
    /// Nanoseconds since the engines started.
    pub uptime_ns: u64,
    pub xdp_mode: String,
    pub zero_copy: bool,
    /// XDP program counters (summed over CPUs).
    pub xdp: Vec<(String, u64)>,
    pub queues: Vec<QueueSnapshot>,
}

fn json_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

fn json_counters(out: &mut String, c: &[(String, u64)]) {
    out.push('{');
    for (i, (k, v)) in c.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        json_str(out, k);
        let _ = write!(out, ":{v}");
    }
    out.push('}');
}

/// `{"qpn":gbps,...}`; a non-finite rate (never expected) is `null`.
fn json_rates_gbps(out: &mut String, rates: &[(u32, f64)]) {
    out.push('{');
    for (i, (qpn, bps)) in rates.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let gbps = bps / 1e9;
        if gbps.is_finite() {
            let _ = write!(out, "\"{qpn}\":{gbps:.3}");
        } else {
            let _ = write!(out, "\"{qpn}\":null");
        }
    }
    out.push('}');
}

impl Snapshot {
    /// The JSON document (layout in the module docs).
    pub fn to_json(&self) -> String {
        let mut s = String::with_capacity(1024);
        let _ = write!(s, "{{\"schema_version\":{SCHEMA_VERSION},\"iface\":");
        json_str(&mut s, &self.iface);
        let _ = write!(
            s,
            ",\"pid\":{},\"uptime_ns\":{},\"xdp_mode\":",
            self.pid, self.uptime_ns
        );
        json_str(&mut s, &self.xdp_mode);
        let _ = write!(s, ",\"zero_copy\":{},\"xdp\":", self.zero_copy);
        json_counters(&mut s, &self.xdp);
        s.push_str(",\"queues\":[");
        for (i, q) in self.queues.iter().enumerate() {
            if i > 0 {
                s.push(',');
            }
            let _ = write!(s, "{{\"queue\":{},\"core\":", q.queue);
            match q.core {
                Some(c) => {
                    let _ = write!(s, "{c}");
                }
                None => s.push_str("null"),
            }
            s.push_str(",\"counters\":");
            json_counters(&mut s, &q.counters);
            s.push_str(",\"qp_rates_gbps\":");
            json_rates_gbps(&mut s, &q.qp_rates);
            s.push('}');
        }
        s.push_str("]}\n");
        s
    }
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

/// On-demand capture: the engines' (paused) capture sink and its channel.
pub struct CaptureHub {
    pub sink: CaptureSink,
    pub frames: Receiver<CapturedFrame>,
}

type Subscribers = Arc<Mutex<Vec<PcapWriter<UnixStream>>>>;

/// Moves captured frames to every capture client; pauses the sink when
/// nobody listens. Ends when the engines (every sink clone) are gone.
fn run_hub(hub: CaptureHub, subs: Subscribers, stop: Arc<AtomicBool>) {
    while !stop.load(Ordering::Relaxed) {
        match hub.frames.recv_timeout(Duration::from_millis(100)) {
            Ok(f) => {
                let mut s = subs.lock().unwrap_or_else(|e| e.into_inner());
                s.retain_mut(|w| w.write(&f).is_ok());
                if s.is_empty() {
                    hub.sink.set_enabled(false);
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => break,
        }
    }
    hub.sink.set_enabled(false);
}

/// Serves snapshots on the interface's socket until dropped; dropping it
/// removes the socket file.
#[derive(Debug)]
pub struct StatsServer {
    path: PathBuf,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    hub: Option<JoinHandle<()>>,
}

impl StatsServer {
    /// Binds `socket_path(iface)` and answers every connection with
    /// `source()`'s snapshot, from a background thread.
    pub fn start<F>(iface: &str, source: F) -> Result<StatsServer, StatsError>
    where
        F: Fn() -> Snapshot + Send + 'static,
    {
        Self::start_at(&socket_path(iface), source, None)
    }

    /// As [`StatsServer::start`], also serving `CAPTURE` requests from
    /// `hub` (its sink should start paused).
    pub fn start_with_capture<F>(
        iface: &str,
        source: F,
        hub: CaptureHub,
    ) -> Result<StatsServer, StatsError>
    where
        F: Fn() -> Snapshot + Send + 'static,
    {
        Self::start_at(&socket_path(iface), source, Some(hub))
    }

    /// As [`StatsServer::start`], at an explicit path.
    pub fn start_at<F>(
        path: &Path,
        source: F,
        hub: Option<CaptureHub>,
    ) -> Result<StatsServer, StatsError>
    where
        F: Fn() -> Snapshot + Send + 'static,
    {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|source| StatsError::RunDir {
                dir: dir.display().to_string(),
                source,
            })?;
        }
        if path.exists() {
            if UnixStream::connect(path).is_ok() {
                return Err(StatsError::InUse(path.display().to_string()));
            }
            // Left behind by an engine that died: take it over.
            let _ = std::fs::remove_file(path);
        }
        let listener = UnixListener::bind(path).map_err(|source| StatsError::Bind {
            path: path.display().to_string(),
            source,
        })?;
        listener
            .set_nonblocking(true)
            .map_err(|source| StatsError::Bind {
                path: path.display().to_string(),
                source,
            })?;
        let stop = Arc::new(AtomicBool::new(false));
        let subs: Option<(Subscribers, CaptureSink)> = hub
            .as_ref()
            .map(|h| (Arc::new(Mutex::new(Vec::new())), h.sink.clone()));
        let hub_thread = match (hub, &subs) {
            (Some(h), Some((s, _))) => {
                let (s, st) = (s.clone(), stop.clone());
                std::thread::Builder::new()
                    .name("roce-xdp-capture".into())
                    .spawn(move || run_hub(h, s, st))
                    .ok()
            }
            _ => None,
        };
        let stop2 = stop.clone();
        let thread = std::thread::Builder::new()
            .name("roce-xdp-stats".into())
            .spawn(move || serve(listener, &stop2, source, subs))
            .map_err(|source| StatsError::Bind {
                path: path.display().to_string(),
                source,
            })?;
        Ok(StatsServer {
            path: path.to_path_buf(),
            stop,
            thread: Some(thread),
            hub: hub_thread,
        })
    }

    /// The socket's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
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

fn answer<F: Fn() -> Snapshot>(
    mut conn: UnixStream,
    source: &F,
    capture: &Option<(Subscribers, CaptureSink)>,
) {
    let _ = conn.set_nonblocking(false);
    let _ = conn.set_write_timeout(Some(Duration::from_secs(1)));
    match read_request(&mut conn).as_str() {
        "CAPTURE" => match capture {
            Some((subs, sink)) => {
                if conn.write_all(b"OK\n").is_err() {
                    return;
                }
                // A capture client that cannot keep up is dropped.
                let _ = conn.set_write_timeout(Some(Duration::from_millis(200)));
                if let Ok(w) = PcapWriter::new(conn) {
                    subs.lock().unwrap_or_else(|e| e.into_inner()).push(w);
                    sink.set_enabled(true);
                }
            }
            None => {
                let _ = conn.write_all(b"ERROR this engine records to its own --pcap file\n");
            }
        },
        _ => {
            let _ = conn.write_all(source().to_json().as_bytes());
        }
    }
}

fn serve<F: Fn() -> Snapshot>(
    listener: UnixListener,
    stop: &AtomicBool,
    source: F,
    capture: Option<(Subscribers, CaptureSink)>,
) {
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((conn, _)) => answer(conn, &source, &capture),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

impl Drop for StatsServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        if let Some(t) = self.hub.take() {
            let _ = t.join();
        }
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Reads one snapshot (the raw JSON document) from the engine on `iface`.
pub fn fetch(iface: &str) -> Result<String, StatsError> {
    fetch_at(iface, &socket_path(iface))
}

/// As [`fetch`], at an explicit path.
pub fn fetch_at(iface: &str, path: &Path) -> Result<String, StatsError> {
    let mut conn = UnixStream::connect(path).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused => StatsError::NotRunning {
            iface: iface.to_string(),
            path: path.display().to_string(),
        },
        _ => StatsError::Read {
            path: path.display().to_string(),
            source: e,
        },
    })?;
    let _ = conn.set_read_timeout(Some(Duration::from_secs(2)));
    conn.write_all(b"STATS\n")
        .map_err(|source| StatsError::Read {
            path: path.display().to_string(),
            source,
        })?;
    let mut s = String::new();
    conn.read_to_string(&mut s)
        .map_err(|source| StatsError::Read {
            path: path.display().to_string(),
            source,
        })?;
    Ok(s)
}

/// Asks the engine on `iface` for a capture; on success the stream
/// carries a classic pcap file from its next byte on.
pub fn open_capture(iface: &str) -> Result<UnixStream, StatsError> {
    open_capture_at(iface, &socket_path(iface))
}

/// As [`open_capture`], at an explicit path.
pub fn open_capture_at(iface: &str, path: &Path) -> Result<UnixStream, StatsError> {
    let read_err = |source| StatsError::Read {
        path: path.display().to_string(),
        source,
    };
    let mut conn = UnixStream::connect(path).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused => StatsError::NotRunning {
            iface: iface.to_string(),
            path: path.display().to_string(),
        },
        _ => read_err(e),
    })?;
    conn.write_all(b"CAPTURE\n").map_err(read_err)?;
    let _ = conn.set_read_timeout(Some(Duration::from_secs(2)));
    let answer = read_request(&mut conn);
    let _ = conn.set_read_timeout(None);
    match answer.as_str() {
        "OK" => Ok(conn),
        other => Err(StatsError::CaptureUnavailable {
            iface: iface.to_string(),
            reason: other.strip_prefix("ERROR ").unwrap_or(other).to_string(),
        }),
    }
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
                "\"queues\":[{\"queue\":1,\"core\":null,\"counters\":{\"sent_pkts\":5},\
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
