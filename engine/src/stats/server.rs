//! The engine's side of the stats channel: [`StatsServer`] answers every
//! connection on the interface's socket with a snapshot, or streams a
//! capture from its [`CaptureHub`].

use std::io::{self, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::driver::{CaptureSink, CapturedFrame, PcapWriter};
use crate::io::{spawn_without_signals, Waker};

use super::{read_request, socket_path, Snapshot, StatsError};

/// On-demand capture: the engines' (paused) capture sink and its channel.
pub struct CaptureHub {
    pub sink: CaptureSink,
    pub frames: Receiver<CapturedFrame>,
}

type Subscribers = Arc<Mutex<Vec<PcapWriter<UnixStream>>>>;

/// How long the stats and capture threads sleep when nothing happens, at
/// most: they are woken when a client connects, a frame comes or the
/// server is dropped, so this only bounds a wake-up that went missing. An
/// idle engine must cost nothing (issue "Latency and idle cost of the
/// tools"): a 20 ms accept poll here was 100 wake-ups a second.
const IDLE_WAIT: Duration = Duration::from_secs(1);

/// Moves captured frames to every capture client; pauses the sink when
/// nobody listens. Ends when the engines (every sink clone) are gone, or
/// when the server stops (it sends an empty frame to wake this thread).
fn run_hub(hub: CaptureHub, subs: Subscribers, stop: Arc<AtomicBool>) {
    while !stop.load(Ordering::Relaxed) {
        match hub.frames.recv_timeout(IDLE_WAIT) {
            Ok(f) if f.data.is_empty() => {} // a wake-up, not a frame
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
    /// Wakes the stats thread (it sleeps on the socket and this).
    waker: Arc<Waker>,
    thread: Option<JoinHandle<()>>,
    hub: Option<JoinHandle<()>>,
    /// Wakes the capture thread (an empty frame).
    hub_sink: Option<CaptureSink>,
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
                spawn_without_signals(
                    std::thread::Builder::new().name("roce-xdp-capture".into()),
                    move || run_hub(h, s, st),
                )
                .ok()
            }
            _ => None,
        };
        let hub_sink = subs.as_ref().map(|(_, sink)| sink.clone());
        let waker = Arc::new(Waker::new().map_err(|source| StatsError::Bind {
            path: path.display().to_string(),
            source,
        })?);
        let (stop2, waker2) = (stop.clone(), waker.clone());
        // Inside a verbs program (the drop-in's stats channel), the
        // program's signals stay the program's.
        let thread = spawn_without_signals(
            std::thread::Builder::new().name("roce-xdp-stats".into()),
            move || serve(listener, &stop2, &waker2, source, subs),
        )
        .map_err(|source| StatsError::Bind {
            path: path.display().to_string(),
            source,
        })?;
        Ok(StatsServer {
            path: path.to_path_buf(),
            stop,
            waker,
            thread: Some(thread),
            hub: hub_thread,
            hub_sink,
        })
    }

    /// The socket's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
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

/// Answers connections until `stop`: sleeps on the (non-blocking)
/// listener and `waker` together, then takes every pending connection.
fn serve<F: Fn() -> Snapshot>(
    listener: UnixListener,
    stop: &AtomicBool,
    waker: &Waker,
    source: F,
    capture: Option<(Subscribers, CaptureSink)>,
) {
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((conn, _)) => answer(conn, &source, &capture),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                // A failed wait (it never fails for valid fds) sleeps as a
                // timeout would, so the loop cannot spin.
                if waker.wait_with(&listener, IDLE_WAIT).is_err() {
                    std::thread::sleep(IDLE_WAIT);
                }
            }
            // ECONNABORTED and the like: the next connection may be fine.
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

impl Drop for StatsServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        self.waker.wake();
        if let Some(sink) = &self.hub_sink {
            sink.wake_reader();
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        if let Some(t) = self.hub.take() {
            let _ = t.join();
        }
        let _ = std::fs::remove_file(&self.path);
    }
}
