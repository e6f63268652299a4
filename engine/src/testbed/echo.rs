//! The bare AF_XDP "I/O floor": an echo loop that sends every received
//! packet back with its Ethernet addresses swapped, and a generator that
//! keeps a window of packets in flight towards an echoing peer and counts
//! what comes back. The benchmark harness compares the engine's packet
//! rate with this loop over the same link.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::driver::PollMode;
use crate::io::XskSocket;

/// Packet and byte counts of a loop.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LoopStats {
    pub packets_sent: u64,
    pub packets_received: u64,
    pub bytes_received: u64,
    pub elapsed: Duration,
}

impl LoopStats {
    /// Received packets per second, in millions.
    pub fn mpps(&self) -> f64 {
        let s = self.elapsed.as_secs_f64();
        if s > 0.0 {
            self.packets_received as f64 / s / 1e6
        } else {
            0.0
        }
    }
}

const BATCH: usize = 64;

/// Batch arena for copying received packets out of the RX frames before
/// sending them again (the same single copy the engine's driver does).
struct Arena {
    buf: Vec<u8>,
    lens: Vec<usize>,
    slot: usize,
}

impl Arena {
    fn new(slot: usize) -> Arena {
        Arena {
            buf: vec![0; slot * BATCH],
            lens: Vec::with_capacity(BATCH),
            slot,
        }
    }
}

/// One idle iteration of a loop that found no work, with the engine
/// driver's policy: [`PollMode::Busy`] returns at once (keep spinning);
/// [`PollMode::Adaptive`] yields the core while the idle spell is shorter
/// than `spin` and then blocks in poll(2) on `sock` for up to `max`.
/// `idle_since` holds the start of the idle spell; reset it to `None`
/// whenever the loop makes progress.
///
/// Yielding matters on machines with fewer cores than busy threads: two
/// loops spinning without yielding starve each other (and the peer),
/// which on 2 cores made the bare loops slower than the engine.
pub fn idle_wait(
    sock: &XskSocket,
    mode: PollMode,
    idle_since: &mut Option<Instant>,
    max: Duration,
) {
    if let PollMode::Adaptive { spin } = mode {
        let since = *idle_since.get_or_insert_with(Instant::now);
        if since.elapsed() < spin {
            std::thread::yield_now();
        } else {
            let _ = sock.wait(max);
            *idle_since = None;
        }
    }
}

/// Echoes packets until `stop` is set: each received packet goes back out
/// with destination and source MAC swapped.
pub fn echo(sock: &mut XskSocket, stop: &AtomicBool, mode: PollMode) -> LoopStats {
    echo_loop(sock, stop, mode, None)
}

/// The bare-I/O side of an RC ping-pong's responder, until `stop` is set:
/// each received frame `request_len` bytes long goes back with its MAC
/// addresses swapped, followed by `ack` (the frame standing for the ACK
/// of that request), both in the TX kick of the batch it came in; other
/// frames (the peer's ACKs) are taken and not answered. What a SEND
/// ping-pong's wire carries: a request and then an ACK each way, one kick
/// per side.
pub fn answer_requests(
    sock: &mut XskSocket,
    stop: &AtomicBool,
    mode: PollMode,
    request_len: usize,
    ack: &[u8],
) -> LoopStats {
    echo_loop(sock, stop, mode, Some((request_len, ack)))
}

/// [`echo`] (`answer` None) or [`answer_requests`] (`answer` the request
/// length and the ACK frame).
fn echo_loop(
    sock: &mut XskSocket,
    stop: &AtomicBool,
    mode: PollMode,
    answer: Option<(usize, &[u8])>,
) -> LoopStats {
    let start = Instant::now();
    let mut stats = LoopStats::default();
    let mut arena = Arena::new(sock.max_packet());
    let mut idle_since = None;
    while !stop.load(Ordering::Relaxed) {
        sock.complete();
        arena.lens.clear();
        let slot = arena.slot;
        let Arena { buf, lens, .. } = &mut arena;
        let n = sock.recv(BATCH, |pkt| {
            let i = lens.len();
            let dst = &mut buf[i * slot..i * slot + pkt.len()];
            dst.copy_from_slice(pkt);
            if dst.len() >= 12 {
                for k in 0..6 {
                    dst.swap(k, k + 6);
                }
            }
            lens.push(pkt.len());
        });
        for (i, &len) in arena.lens.iter().enumerate() {
            stats.packets_received += 1;
            stats.bytes_received += len as u64;
            let echoed = &arena.buf[i * slot..i * slot + len];
            let out: [&[u8]; 2] = match answer {
                None => [echoed, &[]],
                Some((request_len, ack)) if len == request_len => [echoed, ack],
                Some(_) => [&[], &[]],
            };
            for frame in out.into_iter().filter(|f| !f.is_empty()) {
                while !sock.send(frame) {
                    let _ = sock.flush();
                    sock.complete();
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    if mode != PollMode::Busy {
                        // TX ring full: let the peer run (as the driver does).
                        std::thread::yield_now();
                    }
                }
                stats.packets_sent += 1;
            }
        }
        let _ = sock.flush();
        if n == 0 {
            idle_wait(sock, mode, &mut idle_since, Duration::from_millis(10));
        } else {
            idle_since = None;
        }
    }
    stats.elapsed = start.elapsed();
    stats
}

/// Sends `count` copies of `frame` towards an echoing peer, keeping at
/// most `window` unanswered, and counts the echoes. Stops early after
/// `timeout` without progress.
pub fn generate(
    sock: &mut XskSocket,
    frame: &[u8],
    count: u64,
    window: u64,
    mode: PollMode,
    timeout: Duration,
) -> LoopStats {
    let start = Instant::now();
    let mut stats = LoopStats::default();
    let mut last_progress = Instant::now();
    let mut idle_since = None;
    while stats.packets_received < count {
        sock.complete();
        while stats.packets_sent < count && stats.packets_sent - stats.packets_received < window {
            if !sock.send(frame) {
                break;
            }
            stats.packets_sent += 1;
        }
        let _ = sock.flush();
        let mut bytes = 0u64;
        let n = sock.recv(BATCH, |pkt| bytes += pkt.len() as u64);
        stats.packets_received += n as u64;
        stats.bytes_received += bytes;
        if n > 0 {
            last_progress = Instant::now();
            idle_since = None;
        } else {
            if last_progress.elapsed() > timeout {
                break;
            }
            idle_wait(sock, mode, &mut idle_since, Duration::from_millis(1));
        }
    }
    stats.elapsed = start.elapsed();
    stats
}
