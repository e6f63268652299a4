//! The "I/O floor" the benchmark compares the engine against: a bare
//! AF_XDP echo loop over the same kind of veth pair, no RoCE processing.
//! Namespace `a` generates UDP/4791 frames of a given size and keeps a
//! window in flight; namespace `b` echoes each frame back (MACs swapped);
//! the rate of echoed frames is the floor.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::driver::PollMode;
use crate::io::{XskConfig, XskSocket};
use crate::nic::{AttachMode, SteerProgram};

use super::echo::{echo, generate, LoopStats};
use super::netns::{PairConfig, Side, VethPair};
use super::scenarios::loopback::LoopbackError;

/// Options of an echo-floor run.
#[derive(Debug, Clone)]
pub struct FloorOptions {
    /// Frame length in bytes (Ethernet header to end of payload).
    pub frame_len: usize,
    /// Frames to echo.
    pub packets: u64,
    /// Frames in flight.
    pub window: u64,
    pub mode: AttachMode,
    pub poll: PollMode,
}

impl Default for FloorOptions {
    fn default() -> Self {
        FloorOptions {
            frame_len: 1024 + 78,
            packets: 200_000,
            window: 256,
            mode: AttachMode::Native,
            poll: PollMode::default(),
        }
    }
}

/// Result of an echo-floor run (generator side).
#[derive(Debug, Clone, Copy, Default)]
pub struct FloorReport {
    pub stats: LoopStats,
    /// Echoed frames per second, millions.
    pub mpps: f64,
    /// Echoed bytes per second, Gb/s (one direction).
    pub gbps: f64,
}

/// Writes an Ethernet/IPv4/UDP frame of `len` bytes (at least 42) from
/// `src` to `dst` into `buf[..len]`: UDP destination port `dport`, source
/// port 49152, DF set, a valid IPv4 header checksum, a zero payload (the
/// floor's frames, and the tests' raw frames, all start from this).
/// Returns `len`.
pub fn write_udp_frame(buf: &mut [u8], src: &Side, dst: &Side, dport: u16, len: usize) -> usize {
    assert!(len >= 42, "a UDP/IPv4 frame has at least 42 bytes");
    let f = &mut buf[..len];
    f.fill(0);
    f[0..6].copy_from_slice(&dst.mac);
    f[6..12].copy_from_slice(&src.mac);
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    let ip_len = (len - 14) as u16;
    f[14] = 0x45;
    f[16..18].copy_from_slice(&ip_len.to_be_bytes());
    f[20] = 0x40; // DF
    f[22] = 64;
    f[23] = 17;
    f[26..30].copy_from_slice(&src.ipv4.octets());
    f[30..34].copy_from_slice(&dst.ipv4.octets());
    let mut sum = 0u32;
    for i in (14..34).step_by(2) {
        sum += u16::from_be_bytes([f[i], f[i + 1]]) as u32;
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    f[24..26].copy_from_slice(&(!(sum as u16)).to_be_bytes());
    f[34..36].copy_from_slice(&0xc000u16.to_be_bytes());
    f[36..38].copy_from_slice(&dport.to_be_bytes());
    f[38..40].copy_from_slice(&(ip_len - 20).to_be_bytes());
    len
}

/// [`write_udp_frame`] into a new buffer of `len` bytes.
pub fn udp_frame(src: &Side, dst: &Side, dport: u16, len: usize) -> Vec<u8> {
    let mut f = vec![0u8; len];
    write_udp_frame(&mut f, src, dst, dport, len);
    f
}

/// Runs the echo floor on a fresh veth pair.
pub fn run_echo_floor(opts: &FloorOptions) -> Result<FloorReport, LoopbackError> {
    let mtu = (opts.frame_len as u32).max(1500);
    let pair = VethPair::create(&PairConfig { mtu, queues: 1 })?;
    let (a, b) = (pair.a.clone(), pair.b.clone());
    let stop = Arc::new(AtomicBool::new(false));
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Result<(), String>>();
    let (mode, poll) = (opts.mode, opts.poll);
    let stop2 = stop.clone();
    let echo_side = std::thread::spawn(move || {
        let run = || -> Result<(SteerProgram, XskSocket), String> {
            b.enter().map_err(|e| e.to_string())?;
            let mut prog =
                SteerProgram::attach(&b.ifname, mode, false).map_err(|e| e.to_string())?;
            let sock = XskSocket::open(&XskConfig::new(&b.ifname, 0)).map_err(|e| e.to_string())?;
            prog.register_socket(0, &sock).map_err(|e| e.to_string())?;
            Ok((prog, sock))
        };
        match run() {
            Ok((_prog, mut sock)) => {
                let _ = ready_tx.send(Ok(()));
                echo(&mut sock, &stop2, poll);
            }
            Err(e) => {
                let _ = ready_tx.send(Err(e));
            }
        }
    });
    let ready = ready_rx
        .recv()
        .unwrap_or_else(|_| Err("echo thread died".into()));
    let result = ready.and_then(|()| {
        let frame = udp_frame(&a, &pair.b, 4791, opts.frame_len.max(42));
        let (packets, window) = (opts.packets, opts.window);
        std::thread::spawn(move || -> Result<LoopStats, String> {
            a.enter().map_err(|e| e.to_string())?;
            let mut prog =
                SteerProgram::attach(&a.ifname, mode, false).map_err(|e| e.to_string())?;
            let mut sock =
                XskSocket::open(&XskConfig::new(&a.ifname, 0)).map_err(|e| e.to_string())?;
            prog.register_socket(0, &sock).map_err(|e| e.to_string())?;
            Ok(generate(
                &mut sock,
                &frame,
                packets,
                window,
                poll,
                Duration::from_secs(5),
            ))
        })
        .join()
        .unwrap_or_else(|_| Err("generator thread panicked".into()))
    });
    stop.store(true, Ordering::SeqCst);
    let _ = echo_side.join();
    let stats = result.map_err(LoopbackError::Options)?;
    let secs = stats.elapsed.as_secs_f64().max(1e-9);
    Ok(FloorReport {
        stats,
        mpps: stats.mpps(),
        gbps: stats.bytes_received as f64 * 8.0 / secs / 1e9,
    })
}
