//! `roce-xdp capture --iface IF -w FILE.pcap`: records the RoCE frames
//! that the engines running on IF (`roce-xdp serve` or a tool) send and
//! receive, through the engine's local stats channel (engine::stats,
//! `CAPTURE` request), into a classic pcap file readable by tshark and
//! `roce-xdp decode`. Ends on Ctrl-C, after `-c COUNT` frames, after
//! `--duration SECONDS`, or when the engine stops.

use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::Args;

use crate::errors::UserError;

/// Options of `roce-xdp capture`.
#[derive(Debug, Args)]
pub struct CaptureArgs {
    /// Interface whose engines to record.
    #[arg(short = 'd', long = "iface", value_name = "IF")]
    pub iface: String,
    /// Output file (classic pcap, Ethernet).
    #[arg(short = 'w', long = "write", value_name = "FILE")]
    pub write: PathBuf,
    /// Stop after this many frames.
    #[arg(short = 'c', long = "count")]
    pub count: Option<u64>,
    /// Stop after this many seconds.
    #[arg(long = "duration", value_name = "SECONDS")]
    pub duration: Option<f64>,
}

/// pcap global header and record header sizes.
const GLOBAL_HEADER: usize = 24;
const RECORD_HEADER: usize = 16;

/// Splits a pcap byte stream into whole records, so the file never ends
/// in the middle of one.
#[derive(Debug, Default)]
pub struct PcapStream {
    pending: Vec<u8>,
    header_done: bool,
    pub records: u64,
}

impl PcapStream {
    /// Feeds bytes; returns the bytes that complete the header / records
    /// (to write out), stopping after `limit` records.
    pub fn feed(&mut self, data: &[u8], limit: Option<u64>) -> Vec<u8> {
        self.pending.extend_from_slice(data);
        let mut out = Vec::new();
        let mut pos = 0;
        if !self.header_done {
            if self.pending.len() < GLOBAL_HEADER {
                return out;
            }
            out.extend_from_slice(&self.pending[..GLOBAL_HEADER]);
            pos = GLOBAL_HEADER;
            self.header_done = true;
        }
        while limit.is_none_or(|l| self.records < l) && self.pending.len() - pos >= RECORD_HEADER {
            let h = &self.pending[pos..pos + RECORD_HEADER];
            let incl = u32::from_le_bytes([h[8], h[9], h[10], h[11]]) as usize;
            if self.pending.len() - pos < RECORD_HEADER + incl {
                break;
            }
            out.extend_from_slice(&self.pending[pos..pos + RECORD_HEADER + incl]);
            pos += RECORD_HEADER + incl;
            self.records += 1;
        }
        self.pending.drain(..pos);
        out
    }
}

/// Runs `roce-xdp capture`.
pub fn run(a: CaptureArgs) -> anyhow::Result<()> {
    if a.duration.is_some_and(|d| !(d > 0.0 && d.is_finite())) {
        return Err(
            UserError::Usage("--duration must be a positive number of seconds".into()).into(),
        );
    }
    let mut conn = engine::stats::open_capture(&a.iface).map_err(|e| match e {
        engine::stats::StatsError::NotRunning { .. }
        | engine::stats::StatsError::CaptureUnavailable { .. } => {
            anyhow::Error::new(UserError::Usage(e.to_string()))
        }
        other => anyhow::Error::new(other),
    })?;
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone()).context("installing the signal handler")?;
    }
    let file = File::create(&a.write).with_context(|| format!("creating {}", a.write.display()))?;
    let mut out = BufWriter::new(file);
    conn.set_read_timeout(Some(Duration::from_millis(100)))?;
    let end = a
        .duration
        .map(|d| Instant::now() + Duration::from_secs_f64(d));
    let mut stream = PcapStream::default();
    let mut buf = vec![0u8; 64 * 1024];
    eprintln!(
        "capturing RoCE frames of the engine on {} to {} (Ctrl-C to stop)",
        a.iface,
        a.write.display()
    );
    loop {
        if stop.load(Ordering::Relaxed)
            || end.is_some_and(|e| Instant::now() >= e)
            || a.count.is_some_and(|c| stream.records >= c)
        {
            break;
        }
        match conn.read(&mut buf) {
            Ok(0) => break, // the engine stopped
            Ok(n) => out.write_all(&stream.feed(&buf[..n], a.count))?,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e).context("reading the capture stream"),
        }
    }
    if !stream.header_done {
        // Nothing arrived at all: still leave a valid, empty pcap file.
        out.write_all(&stream.feed(&[], None))?;
    }
    out.flush()?;
    eprintln!(
        "captured {} frames to {}",
        stream.records,
        a.write.display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_on_record_boundaries() {
        let mut bytes = vec![0xd4, 0xc3, 0xb2, 0xa1];
        bytes.extend_from_slice(&[0; 20]);
        for len in [3u32, 5] {
            bytes.extend_from_slice(&[0; 8]);
            bytes.extend_from_slice(&len.to_le_bytes());
            bytes.extend_from_slice(&len.to_le_bytes());
            bytes.extend(std::iter::repeat_n(7, len as usize));
        }
        let mut s = PcapStream::default();
        let mut out = Vec::new();
        for chunk in bytes.chunks(7) {
            out.extend(s.feed(chunk, None));
        }
        assert_eq!(out, bytes);
        assert_eq!(s.records, 2);
        let mut s = PcapStream::default();
        let first = s.feed(&bytes, Some(1));
        assert_eq!(first.len(), 24 + 16 + 3);
        assert_eq!(s.records, 1);
    }
}
