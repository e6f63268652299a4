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

use super::{read_request, socket_path, Snapshot, StatsError};

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
