//! Optional frame capture for `--pcap`: engine threads copy the RoCE frames
//! they receive and send into a bounded channel (only when capture is
//! enabled; a full channel drops and counts), and a writer drains it into a
//! classic pcap file (microsecond timestamps, LINKTYPE_ETHERNET).

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// Bytes kept of each frame.
pub const SNAPLEN: u32 = 9216;

/// One captured frame.
#[derive(Debug)]
pub struct CapturedFrame {
    /// Wall-clock time, nanoseconds since the Unix epoch.
    pub unix_nanos: u64,
    pub data: Vec<u8>,
}

/// The sending half, cloned into every engine thread.
#[derive(Debug, Clone)]
pub struct CaptureSink {
    tx: SyncSender<CapturedFrame>,
    dropped: Arc<AtomicU64>,
    /// Off: `record` returns at once (no copy), for on-demand capture
    /// (`roce-xdp capture` through the stats channel).
    enabled: Arc<AtomicBool>,
}

impl CaptureSink {
    /// Copies `frame` into the channel; drops (and counts) it if full.
    pub fn record(&self, frame: &[u8]) {
        if !self.enabled.load(Ordering::Relaxed) {
            return;
        }
        let unix_nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        let data = frame[..frame.len().min(SNAPLEN as usize)].to_vec();
        if let Err(TrySendError::Full(_)) = self.tx.try_send(CapturedFrame { unix_nanos, data }) {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Wakes the channel's reader with an empty frame (not counted, never
    /// written: readers skip frames without data), so that it looks at its
    /// stop flag without polling; nothing is sent if the channel is full
    /// (the reader is awake then).
    pub fn wake_reader(&self) {
        let _ = self.tx.try_send(CapturedFrame {
            unix_nanos: 0,
            data: Vec::new(),
        });
    }

    /// Frames dropped because the channel was full.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Turns recording on or off (for every clone of this sink).
    pub fn set_enabled(&self, on: bool) {
        self.enabled.store(on, Ordering::Relaxed);
    }

    /// Whether frames are being recorded.
    pub fn is_enabled(&self) -> bool {
        self.enabled.load(Ordering::Relaxed)
    }
}

/// A bounded capture channel of `capacity` frames.
pub fn capture_channel(capacity: usize) -> (CaptureSink, Receiver<CapturedFrame>) {
    let (tx, rx) = sync_channel(capacity);
    (
        CaptureSink {
            tx,
            dropped: Arc::new(AtomicU64::new(0)),
            enabled: Arc::new(AtomicBool::new(true)),
        },
        rx,
    )
}

/// A classic pcap writer.
pub struct PcapWriter<W: Write> {
    out: W,
}

impl PcapWriter<BufWriter<File>> {
    /// Creates `path` and writes the global header.
    pub fn create(path: &Path) -> io::Result<Self> {
        PcapWriter::new(BufWriter::new(File::create(path)?))
    }
}

impl<W: Write> PcapWriter<W> {
    /// Writes the global header to `out`.
    pub fn new(mut out: W) -> io::Result<Self> {
        out.write_all(&0xa1b2_c3d4u32.to_le_bytes())?;
        out.write_all(&2u16.to_le_bytes())?;
        out.write_all(&4u16.to_le_bytes())?;
        out.write_all(&0i32.to_le_bytes())?;
        out.write_all(&0u32.to_le_bytes())?;
        out.write_all(&SNAPLEN.to_le_bytes())?;
        out.write_all(&1u32.to_le_bytes())?; // LINKTYPE_ETHERNET
        Ok(PcapWriter { out })
    }

    /// Appends one record.
    pub fn write(&mut self, f: &CapturedFrame) -> io::Result<()> {
        let secs = (f.unix_nanos / 1_000_000_000) as u32;
        let micros = ((f.unix_nanos % 1_000_000_000) / 1000) as u32;
        self.out.write_all(&secs.to_le_bytes())?;
        self.out.write_all(&micros.to_le_bytes())?;
        self.out.write_all(&(f.data.len() as u32).to_le_bytes())?;
        self.out.write_all(&(f.data.len() as u32).to_le_bytes())?;
        self.out.write_all(&f.data)
    }

    /// Flushes and returns the inner writer.
    pub fn finish(mut self) -> io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_classic_pcap() {
        let mut w = PcapWriter::new(Vec::new()).unwrap();
        w.write(&CapturedFrame {
            unix_nanos: 1_500_000_000_123_456_789,
            data: vec![1, 2, 3],
        })
        .unwrap();
        let b = w.finish().unwrap();
        assert_eq!(b.len(), 24 + 16 + 3);
        assert_eq!(&b[0..4], &[0xd4, 0xc3, 0xb2, 0xa1]);
        assert_eq!(u32::from_le_bytes(b[20..24].try_into().unwrap()), 1);
        assert_eq!(
            u32::from_le_bytes(b[24..28].try_into().unwrap()),
            1_500_000_000
        );
        assert_eq!(u32::from_le_bytes(b[28..32].try_into().unwrap()), 123_456);
        assert_eq!(u32::from_le_bytes(b[32..36].try_into().unwrap()), 3);
        assert_eq!(&b[40..], &[1, 2, 3]);
    }

    #[test]
    fn full_channel_drops_and_counts() {
        let (sink, rx) = capture_channel(1);
        sink.record(&[1]);
        sink.record(&[2]);
        assert_eq!(sink.dropped(), 1);
        assert_eq!(rx.try_recv().unwrap().data, vec![1]);
    }
}
