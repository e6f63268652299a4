//! The operator's side of the stats channel (`roce-xdp stats`,
//! `roce-xdp capture`): one snapshot, or a capture stream.

use std::io::{self, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use super::{read_request, socket_path, StatsError};

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
