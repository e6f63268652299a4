//! The I/O floor: bare AF_XDP over the same veth pair, same rings and batch
//! sizes as the engine, with no protocol work. A one-way stream (the sender
//! keeps the TX ring full, the receiver counts) gives the packet rate and
//! goodput the engine is compared with; a ping-pong against the datapath's
//! echo loop (`engine::testbed::echo`) gives the round-trip floor.
//!
//! Every loop waits the way the engine's driver does in the same
//! [`PollMode`] (see [`idle_wait`]): in adaptive mode it yields the core
//! while idle-spinning and then sleeps in poll(2), so that on a machine
//! with few cores the floor is not slowed by spinners starving each other
//! and stays an upper bound for the engine.
//!
//! Frames are Ethernet/IPv4/UDP to port 4791, so the XDP program steers
//! them to the socket, and as long as the engine's RoCE packet carrying the
//! same payload (see [`frame_len_for`]); their content is not RoCE. The
//! stream's payloads are read from a region laid out as the engine's
//! messages are ([`FloorPayload::Messages`]), so both move the same bytes.
//!
//! The loops ([`stream_send`], [`stream_receive`], [`pingpong`]) work on one
//! socket; [`floor_point`] and [`floor_pingpong`] run them over the
//! harness's veth pair, each side on a thread inside its namespace: the
//! points the sweep, the paired step and the examples measure.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use engine::driver::PollMode;
use engine::io::{process_cpu_time, thread_cpu_time, InPlace, XskConfig, XskSocket};
use engine::nic::{AttachMode, SteerProgram};
use engine::testbed::echo::idle_wait;
use engine::testbed::netns::{Side, VethPair};

use crate::error::HarnessError;
use crate::options::ROCE_PMTU;
use crate::sources::{region_pattern, window, PacketSource, SourceLayout, REGION};
use crate::stats::{per_second, Percentiles};
use crate::threads::{join, spawn_in};

/// Packets queued per `flush`/taken per `recv` (the echo loop's batch).
pub const BATCH: usize = 64;

/// Ethernet + IPv4 + UDP + BTH + ICRC bytes around a RoCE payload.
pub const ROCE_OVERHEAD: usize = 14 + 20 + 8 + 12 + 4;
/// RETH, carried by the first (or only) packet of an RDMA WRITE.
pub const RETH_LEN: usize = 16;
/// AETH, carried by an ACK.
pub const AETH_LEN: usize = 4;

/// Length of the frame that carries `payload` bytes of a WRITE message the
/// way the engine sends it: a WRITE-only packet (with RETH) if the message
/// fits one PMTU, otherwise full-PMTU middle packets (no RETH).
pub fn frame_len_for(message: usize, pmtu: usize) -> (usize, usize) {
    if message <= pmtu {
        (message + ROCE_OVERHEAD + RETH_LEN, message)
    } else {
        (pmtu + ROCE_OVERHEAD, pmtu)
    }
}

/// An Ethernet/IPv4/UDP frame of `len` bytes from `src` to `dst`, UDP
/// destination port `dport`, with a valid IPv4 header checksum
/// ([`engine::testbed::floor::udp_frame`]) and payload byte i = i as u8.
pub fn udp_frame(src: &Side, dst: &Side, dport: u16, len: usize) -> Vec<u8> {
    let mut f = engine::testbed::floor::udp_frame(src, dst, dport, len);
    for (i, b) in f[42..].iter_mut().enumerate() {
        *b = i as u8;
    }
    f
}

/// What one side of a floor stream counted.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct FloorStats {
    pub packets: u64,
    pub bytes: u64,
    /// From the first to the last packet (receiver) or the whole send loop.
    pub elapsed: Duration,
    /// CPU time of the thread over the same span (user + system, including
    /// the kernel work its system calls do).
    pub thread_cpu: Duration,
}

/// Where the floor's sender takes each frame's payload from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FloorPayload {
    /// From a region laid out as the engine's stream of the same messages
    /// lays out its own ([`PacketSource`]): the floor moves the same bytes
    /// from the same places as the engine, with no protocol work. The
    /// floor the targets use.
    Messages(SourceLayout),
    /// One frame, built once and sent again and again: no message is read.
    /// For information: next to
    /// `Messages`, it shows what reading the messages costs.
    OneFrame,
}

/// The frames a floor stream sends: headers as long as the engine's
/// packets', and payloads as [`FloorPayload`] says.
pub struct FloorFrames {
    /// A whole frame: headers up to `header`, then (`OneFrame`) its payload.
    frame: Vec<u8>,
    header: usize,
    /// The region the payloads are read from, and where each one starts
    /// (`Messages`).
    source: Option<(Vec<u8>, PacketSource)>,
}

impl FloorFrames {
    /// Frames like `frame` (its last `payload` bytes are the payload) for
    /// a stream of `message`-byte messages with `window` in flight.
    pub fn new(
        frame: Vec<u8>,
        payload: usize,
        what: FloorPayload,
        message: u64,
        window: u64,
    ) -> FloorFrames {
        let header = frame.len() - payload.min(frame.len());
        let source = match what {
            FloorPayload::OneFrame => None,
            FloorPayload::Messages(layout) => {
                let src = PacketSource::new(layout, message, payload as u64, window, REGION);
                Some((region_pattern(src.region_len()), src))
            }
        };
        FloorFrames {
            frame,
            header,
            source,
        }
    }

    /// Length of every frame.
    pub fn frame_len(&self) -> usize {
        self.frame.len()
    }

    /// Writes packet `p` of the stream into `buf[..frame_len()]`: the
    /// headers, then (`Messages`) the payload packet `p` reads from the
    /// region, or (`OneFrame`) the frame's own payload.
    pub fn write(&self, p: u64, buf: &mut [u8]) {
        let (len, h) = (self.frame.len(), self.header);
        let Some((region, src)) = &self.source else {
            buf[..len].copy_from_slice(&self.frame);
            return;
        };
        let (at, _) = src.packet(p);
        let end = (at + (len - h)).min(region.len());
        buf[..h].copy_from_slice(&self.frame[..h]);
        buf[h..len].copy_from_slice(&region[end - (len - h)..end]);
    }

    /// Queues packet `p` of the stream on `sock`: written in place into
    /// its UMEM frames as the engine writes its packets (`Messages`), or
    /// copied from the one frame (`OneFrame`, as the floor always did), or
    /// through `scratch` when no run of adjacent frames is at hand. False
    /// when the ring or the frames are full.
    fn queue(&self, sock: &mut XskSocket, p: u64, scratch: &mut [u8]) -> bool {
        if self.source.is_none() {
            return sock.send(&self.frame);
        }
        let len = self.frame.len();
        match sock.send_in_place(len, |buf| {
            self.write(p, buf);
            Some(len)
        }) {
            InPlace::Sent(_) => true,
            InPlace::Nothing => false,
            InPlace::NoRoom => {
                self.write(p, scratch);
                sock.send(&scratch[..len])
            }
        }
    }
}

/// Sends `frames` as fast as the rings take them for `duration`, `BATCH`
/// packets per flush. When the TX ring is full, waits as the engine's
/// driver does with frames pending (spins in `Busy`, yields in
/// `Adaptive`). Returns what was queued.
pub fn stream_send(
    sock: &mut XskSocket,
    frames: &FloorFrames,
    duration: Duration,
    poll: PollMode,
) -> FloorStats {
    let mut scratch = vec![0u8; frames.frame_len()];
    let start = Instant::now();
    let cpu0 = thread_cpu_time();
    let mut stats = FloorStats::default();
    let mut p = 0u64;
    while start.elapsed() < duration {
        sock.complete();
        let mut queued = 0;
        while queued < BATCH && frames.queue(sock, p, &mut scratch) {
            queued += 1;
            p += 1;
        }
        stats.packets += queued as u64;
        stats.bytes += (queued * frames.frame_len()) as u64;
        let _ = sock.flush();
        if queued == 0 && poll != PollMode::Busy {
            std::thread::yield_now();
        }
    }
    // Let the kernel drain what is queued.
    let drain = Instant::now();
    while sock.tx_in_flight() > 0 && drain.elapsed() < Duration::from_millis(200) {
        let _ = sock.flush();
        sock.complete();
        if poll != PollMode::Busy {
            std::thread::yield_now();
        }
    }
    stats.elapsed = start.elapsed();
    stats.thread_cpu = thread_cpu_time().saturating_sub(cpu0);
    stats
}

/// Receives until `stop` is set and nothing arrived for `idle`; counts
/// packets and bytes from the first packet to the last. Waits for packets
/// as the engine's driver does in `poll` mode.
pub fn stream_receive(
    sock: &mut XskSocket,
    stop: &AtomicBool,
    idle: Duration,
    poll: PollMode,
) -> FloorStats {
    let mut stats = FloorStats::default();
    let mut first: Option<(Instant, Duration)> = None;
    let mut last = Instant::now();
    let mut last_cpu = Duration::ZERO;
    let mut idle_since = None;
    loop {
        let mut bytes = 0u64;
        let n = sock.recv(BATCH, |p| bytes += p.len() as u64);
        if n > 0 {
            let now = Instant::now();
            last_cpu = thread_cpu_time();
            first.get_or_insert((now, last_cpu));
            last = now;
            stats.packets += n as u64;
            stats.bytes += bytes;
            idle_since = None;
        } else if stop.load(Ordering::Relaxed) && last.elapsed() >= idle {
            break;
        } else {
            idle_wait(sock, poll, &mut idle_since, Duration::from_millis(5));
        }
    }
    if let Some((t0, cpu0)) = first {
        stats.elapsed = last - t0;
        stats.thread_cpu = last_cpu.saturating_sub(cpu0);
    }
    stats
}

/// Sends `frame` `iterations` times to an echoing peer, one at a time,
/// and returns each round-trip time. While waiting for the echo it yields
/// the core (as the engine's application thread does); in `Adaptive` mode
/// it sleeps in poll(2) after the spin window, as the engine's driver
/// does. A packet not echoed within `timeout` ends the run with an error.
pub fn pingpong(
    sock: &mut XskSocket,
    frame: &[u8],
    iterations: usize,
    timeout: Duration,
    poll: PollMode,
) -> Result<Vec<Duration>, String> {
    pingpong_frames(sock, frame, None, iterations, timeout, poll)
}

/// [`pingpong`] with, if `ack` is given, the frames of an RC ping-pong:
/// each ping is `frame` then `ack` (standing for the ACK of the peer's
/// last answer) in one TX kick, the peer answers as
/// [`engine::testbed::echo::answer_requests`] does (the echo of `frame`,
/// then an ACK-sized frame of its own, in one kick), and the round trip
/// ends when both are back: as in `send-lat` and `write-lat` (and
/// perftest's latency loops), where a side waits for the peer's answer and
/// for the ACK of its own message, which leaves behind that answer. The
/// ACK's length must differ from `frame`'s, which tells them apart.
pub fn pingpong_frames(
    sock: &mut XskSocket,
    frame: &[u8],
    ack: Option<&[u8]>,
    iterations: usize,
    timeout: Duration,
    poll: PollMode,
) -> Result<Vec<Duration>, String> {
    let first = frame.len();
    assert!(
        ack.is_none_or(|a| a.len() != first),
        "the request's length must tell its echo from the ACK"
    );
    let frames: &[&[u8]] = match &ack {
        Some(a) => &[frame, a],
        None => &[frame],
    };
    let mut rtts = Vec::with_capacity(iterations);
    for i in 0..iterations {
        sock.complete();
        let start = Instant::now();
        for f in frames {
            while !sock.send(f) {
                sock.complete();
                if start.elapsed() > timeout {
                    return Err(format!("no TX room for ping {i}"));
                }
            }
        }
        let _ = sock.flush();
        let mut idle_since = None;
        let (mut answer, mut acks) = (false, 0usize);
        loop {
            sock.recv(frames.len(), |echo| {
                if echo.len() == first {
                    answer = true;
                } else {
                    acks += 1;
                }
            });
            if answer && acks + 1 >= frames.len() {
                break;
            }
            if start.elapsed() > timeout {
                return Err(format!(
                    "ping {i}: {} within {timeout:?}",
                    if answer {
                        "the answer came, its ACK-sized frame did not"
                    } else {
                        "not answered"
                    }
                ));
            }
            match poll {
                // As the engine's application thread does: leave the core
                // to the echo loop if it needs it.
                PollMode::Busy => std::thread::yield_now(),
                PollMode::Adaptive { .. } => {
                    idle_wait(sock, poll, &mut idle_since, Duration::from_millis(1))
                }
            }
        }
        rtts.push(start.elapsed());
    }
    Ok(rtts)
}

/// What one floor stream measured.
#[derive(Debug, Clone)]
pub struct FloorPoint {
    /// Payload goodput the received frames stand for, Gb/s.
    pub gbps: f64,
    /// Frames received per second, millions.
    pub mpps: f64,
    pub mode: String,
    pub zero_copy: bool,
    /// Process CPU time (both ends, plus the veth work done in their
    /// system calls) per received frame, ns.
    pub cpu_ns_per_packet: Option<f64>,
    /// CPU time per received frame of the sending and of the receiving
    /// thread, ns (each including the kernel work of its system calls).
    pub thread_ns_per_packet: Option<(f64, f64)>,
}

/// Opens an AF_XDP socket on queue `queue` of `side`'s veth end with the
/// steering program attached and the socket registered. Must run on a
/// thread inside `side`'s namespace.
pub fn open_xsk(side: &Side, queue: u32) -> Result<(SteerProgram, XskSocket), HarnessError> {
    let mut prog = SteerProgram::attach(&side.ifname, AttachMode::Auto, false)
        .map_err(|e| HarnessError::Floor(e.to_string()))?;
    let sock = XskSocket::open(&XskConfig::new(&side.ifname, queue))
        .map_err(|e| HarnessError::Floor(e.to_string()))?;
    prog.register_socket(queue, &sock)
        .map_err(|e| HarnessError::Floor(e.to_string()))?;
    Ok((prog, sock))
}

/// The floor stream for `message`-byte WRITE messages, one way from a to
/// b on `pair`: frames as long as the engine's WRITE packets, payloads as
/// `what` says. The sweep, the paired step and the focused comparisons
/// (`examples/write_vs_floor.rs`) all measure the floor with it.
pub fn floor_point(
    pair: &VethPair,
    message: u64,
    what: FloorPayload,
    duration: Duration,
    poll: PollMode,
) -> Result<FloorPoint, HarnessError> {
    let (frame_len, payload) = frame_len_for(message as usize, ROCE_PMTU as usize);
    let stop = Arc::new(AtomicBool::new(false));
    let (ready_tx, ready_rx) = mpsc::channel();
    let stop_rx = stop.clone();
    let b = pair.b.clone();
    let receiver = spawn_in(&pair.b, move || {
        let (prog, mut sock) = open_xsk(&b, 0)?;
        let _ = ready_tx.send(());
        let stats = stream_receive(&mut sock, &stop_rx, Duration::from_millis(100), poll);
        Ok((stats, prog.mode().to_string(), sock.is_zero_copy()))
    });
    if ready_rx.recv_timeout(Duration::from_secs(10)).is_err() {
        return Err(join(receiver)
            .err()
            .unwrap_or(HarnessError::Floor("the receiver did not start".into())));
    }
    let frame = udp_frame(&pair.a, &pair.b, 4791, frame_len);
    let frames = FloorFrames::new(frame, payload, what, message, window(message));
    let a = pair.a.clone();
    let cpu0 = process_cpu_time();
    let sender = spawn_in(&pair.a, move || {
        let (_prog, mut sock) = open_xsk(&a, 0)?;
        Ok(stream_send(&mut sock, &frames, duration, poll))
    });
    let sent = join(sender);
    stop.store(true, Ordering::Relaxed);
    let (got, mode, zero_copy) = join(receiver)?;
    let cpu = process_cpu_time().saturating_sub(cpu0);
    let sent = sent?;
    if got.packets == 0 {
        return Err(HarnessError::Floor(format!(
            "no {frame_len}-byte frame arrived: is XDP steering UDP 4791 on {}?",
            pair.b.ifname
        )));
    }
    Ok(FloorPoint {
        gbps: per_second((got.packets * payload as u64 * 8) as f64, got.elapsed) / 1e9,
        mpps: per_second(got.packets as f64, got.elapsed) / 1e6,
        mode,
        zero_copy,
        cpu_ns_per_packet: (got.packets > 0).then(|| cpu.as_nanos() as f64 / got.packets as f64),
        thread_ns_per_packet: (sent.packets > 0).then(|| {
            (
                sent.thread_cpu.as_nanos() as f64 / sent.packets as f64,
                got.thread_cpu.as_nanos() as f64 / got.packets as f64,
            )
        }),
    })
}

/// AF_XDP ping-pong: a sends one frame at a time, b's echo loop returns it.
pub fn floor_pingpong(
    pair: &VethPair,
    payload: usize,
    iterations: usize,
    poll: PollMode,
) -> Result<Option<Percentiles>, HarnessError> {
    floor_pingpong_frames(pair, payload, false, iterations, poll)
}

/// Length of an RC ACK frame (Ethernet, IPv4, UDP, BTH, AETH, ICRC).
pub const ACK_FRAME_LEN: usize = ROCE_OVERHEAD + AETH_LEN;

/// [`floor_pingpong`] with, if `with_ack`, the frames of an RC SEND
/// ping-pong ([`pingpong_frames`]): each ping a 64 B frame then an
/// ACK-sized one in one TX kick, the peer answering with the 64 B echo
/// then an ACK-sized frame of its own in one kick
/// ([`engine::testbed::echo::answer_requests`]), each round trip until
/// both are back: the wire cost of `send-lat` and `write-lat`, which carry
/// a request and then an ACK each way and wait for both.
pub fn floor_pingpong_frames(
    pair: &VethPair,
    payload: usize,
    with_ack: bool,
    iterations: usize,
    poll: PollMode,
) -> Result<Option<Percentiles>, HarnessError> {
    let stop = Arc::new(AtomicBool::new(false));
    let (ready_tx, ready_rx) = mpsc::channel();
    let stop_echo = stop.clone();
    let b = pair.b.clone();
    let (frame_len, _) = frame_len_for(payload, ROCE_PMTU as usize);
    let ack_back = udp_frame(&pair.b, &pair.a, 4791, ACK_FRAME_LEN);
    let echo = spawn_in(&pair.b, move || {
        let (_prog, mut sock) = open_xsk(&b, 0)?;
        let _ = ready_tx.send(());
        Ok(if with_ack {
            engine::testbed::echo::answer_requests(
                &mut sock, &stop_echo, poll, frame_len, &ack_back,
            )
        } else {
            engine::testbed::echo::echo(&mut sock, &stop_echo, poll)
        })
    });
    if ready_rx.recv_timeout(Duration::from_secs(10)).is_err() {
        return Err(join(echo)
            .err()
            .unwrap_or(HarnessError::Floor("the echo loop did not start".into())));
    }
    let frame = udp_frame(&pair.a, &pair.b, 4791, frame_len);
    let ack = udp_frame(&pair.a, &pair.b, 4791, ACK_FRAME_LEN);
    let a = pair.a.clone();
    let client = spawn_in(&pair.a, move || {
        let (_prog, mut sock) = open_xsk(&a, 0)?;
        let warm = iterations / 10;
        let mut rtts = pingpong_frames(
            &mut sock,
            &frame,
            with_ack.then_some(&ack[..]),
            iterations + warm,
            Duration::from_secs(2),
            poll,
        )
        .map_err(HarnessError::Floor)?;
        Ok(Percentiles::of(&mut rtts[warm..]))
    });
    let r = join(client);
    stop.store(true, Ordering::Relaxed);
    join(echo)?;
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::veth_pair;
    use std::net::Ipv4Addr;

    fn side(last: u8) -> Side {
        Side {
            netns: "x".into(),
            ifname: "y".into(),
            mac: [2, 0, 0, 0, 0, last],
            ipv4: Ipv4Addr::new(10, 47, 0, last),
            ipv6: "fd00:47::1".parse().unwrap(),
        }
    }

    #[test]
    fn frame_has_valid_ipv4_checksum_and_lengths() {
        let f = udp_frame(&side(1), &side(2), 4791, 138);
        assert_eq!(f.len(), 138);
        assert_eq!(&f[0..6], &[2, 0, 0, 0, 0, 2]);
        let mut sum: u32 = (14..34)
            .step_by(2)
            .map(|i| u16::from_be_bytes([f[i], f[i + 1]]) as u32)
            .sum();
        while sum > 0xffff {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        assert_eq!(sum, 0xffff, "checksum over the header folds to all ones");
        assert_eq!(u16::from_be_bytes([f[16], f[17]]), 124);
        assert_eq!(u16::from_be_bytes([f[36], f[37]]), 4791);
        assert_eq!(u16::from_be_bytes([f[38], f[39]]), 104);
    }

    #[test]
    fn frame_lengths_follow_the_engine_packets() {
        assert_eq!(frame_len_for(64, 4096), (64 + 58 + 16, 64));
        assert_eq!(frame_len_for(4096, 4096), (4096 + 58 + 16, 4096));
        assert_eq!(frame_len_for(65536, 4096), (4096 + 58, 4096));
    }

    #[test]
    fn message_frames_carry_the_region_bytes_the_engine_would_send() {
        let (a, b) = (side(1), side(2));
        let (len, payload) = frame_len_for(65536, 4096);
        let frame = udp_frame(&a, &b, 4791, len);
        let frames = FloorFrames::new(
            frame.clone(),
            payload,
            FloorPayload::Messages(SourceLayout::Perftest),
            65536,
            32,
        );
        let region = region_pattern(REGION as usize);
        let h = len - payload;
        let mut buf = vec![0u8; len];
        for p in [0u64, 1, 15, 16, 17] {
            frames.write(p, &mut buf);
            assert_eq!(buf[..h], frame[..h], "headers of packet {p}");
            let at = (p as usize % 16) * 4096;
            assert_eq!(buf[h..], region[at..at + 4096], "payload of packet {p}");
        }
        // One frame: the frame itself, whatever the packet.
        let one = FloorFrames::new(frame.clone(), payload, FloorPayload::OneFrame, 65536, 32);
        one.write(5, &mut buf);
        assert_eq!(buf, frame);
    }

    #[test]
    #[ignore = "needs root"]
    fn floor_pingpong_over_veth_busy_and_adaptive() {
        let pair = veth_pair();
        for poll in [PollMode::Busy, PollMode::default()] {
            let p = floor_pingpong(&pair, 64, 2000, poll).unwrap().unwrap();
            eprintln!("floor ping-pong {poll:?}: {p:?}");
            assert_eq!(p.samples, 2000);
        }
    }

    /// The RC ping-pong floor: every ping's 64 B frame is answered with
    /// its echo and an ACK-sized frame, and each round trip waits for
    /// both (a missing ACK-sized frame ends the run with an error).
    #[test]
    #[ignore = "needs root"]
    fn floor_pingpong_with_acks_gets_an_answer_and_an_ack_per_ping() {
        let pair = veth_pair();
        let poll = PollMode::default();
        let with = floor_pingpong_frames(&pair, 64, true, 2000, poll)
            .unwrap()
            .unwrap();
        let without = floor_pingpong(&pair, 64, 2000, poll).unwrap().unwrap();
        eprintln!("request+ACK floor: {with:?}; one frame: {without:?}");
        assert_eq!(with.samples, 2000);
        assert!(with.p50_us > 0.0 && with.p50_us <= with.p99_us);
    }
}
