//! The kernel-path baseline of the benchmark harness: UDP sockets moving the
//! same payloads as the engine (batched with `sendmmsg`/`recvmmsg`), and a
//! UDP ping-pong for latency. The socket loops ([`stream_send`],
//! [`stream_receive`], [`pingpong_client`], [`pingpong_server`]) run in
//! whatever network namespace their thread is in; [`kernel_stream`] and
//! [`kernel_pingpong`] run them over the harness's veth pair, each side on
//! a thread inside its namespace: the points the sweep, the paired step and
//! the examples measure. The batched system calls are the engine's safe
//! wrappers ([`engine::io::udp`]).

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use engine::io::udp::{self, MAX_BATCH};
use engine::testbed::netns::VethPair;

use crate::error::{io_err, HarnessError};
use crate::options::UDP_CHUNK;
use crate::sources::{region_pattern, window, PacketSource, SourceLayout, REGION};
use crate::stats::Percentiles;
use crate::threads::{join, spawn_in};

/// What one side of a UDP stream measured.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct StreamStats {
    /// Datagrams moved.
    pub datagrams: u64,
    /// Payload bytes moved.
    pub bytes: u64,
    /// Wall time from the first to the last datagram.
    pub elapsed: Duration,
}

impl StreamStats {
    /// Payload goodput in Gb/s.
    pub fn gbps(&self) -> f64 {
        rate(self.bytes as f64 * 8.0, self.elapsed) / 1e9
    }

    /// Datagram rate in millions per second.
    pub fn mpps(&self) -> f64 {
        rate(self.datagrams as f64, self.elapsed) / 1e6
    }
}

fn rate(count: f64, elapsed: Duration) -> f64 {
    let secs = elapsed.as_secs_f64();
    if secs > 0.0 {
        count / secs
    } else {
        0.0
    }
}

/// Sends datagrams to `dst` in batches of `batch` for `duration`, as fast
/// as the kernel takes them: datagram p carries the bytes `source` says
/// packet p of the message stream carries (read from a region of the
/// streams' pattern).
pub fn stream_send(
    socket: &UdpSocket,
    dst: SocketAddr,
    source: &PacketSource,
    batch: usize,
    duration: Duration,
) -> io::Result<StreamStats> {
    socket.connect(dst)?;
    let batch = batch.clamp(1, MAX_BATCH);
    let region = region_pattern(source.region_len());
    let mut payloads = [(0usize, 0usize); MAX_BATCH];
    let mut next = 0u64;
    let start = Instant::now();
    let mut stats = StreamStats::default();
    while start.elapsed() < duration {
        for (i, slot) in payloads[..batch].iter_mut().enumerate() {
            *slot = source.packet(next + i as u64);
        }
        let sent = send_packets(socket, &region, &payloads[..batch])?;
        next += sent as u64;
        stats.datagrams += sent as u64;
        stats.bytes += payloads[..sent]
            .iter()
            .map(|&(_, len)| len as u64)
            .sum::<u64>();
    }
    stats.elapsed = start.elapsed();
    Ok(stats)
}

/// Receives datagrams until `stop` is set and no datagram arrived for
/// `idle`, counting from the first datagram received.
pub fn stream_receive(
    socket: &UdpSocket,
    max_payload: usize,
    stop: &AtomicBool,
    idle: Duration,
) -> io::Result<StreamStats> {
    socket.set_read_timeout(Some(Duration::from_millis(20)))?;
    let mut bufs = vec![vec![0u8; max_payload.max(1)]; MAX_BATCH];
    let mut stats = StreamStats::default();
    let mut first: Option<Instant> = None;
    let mut last = Instant::now();
    loop {
        match udp::recv_batch(socket, &mut bufs) {
            Ok(got) if got.datagrams > 0 => {
                let now = Instant::now();
                first.get_or_insert(now);
                last = now;
                stats.datagrams += got.datagrams as u64;
                stats.bytes += got.bytes as u64;
            }
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) => {}
            Err(e) => return Err(e),
        }
        if stop.load(Ordering::Relaxed) && last.elapsed() >= idle {
            break;
        }
    }
    stats.elapsed = first.map(|f| last - f).unwrap_or_default();
    Ok(stats)
}

/// Sends `iterations` `payload`-byte pings to `dst` and waits for each echo;
/// returns the round-trip times. A ping not answered within `timeout` is
/// an error (the baseline must not hide loss).
pub fn pingpong_client(
    socket: &UdpSocket,
    dst: SocketAddr,
    payload: usize,
    iterations: usize,
    timeout: Duration,
) -> io::Result<Vec<Duration>> {
    socket.connect(dst)?;
    socket.set_nonblocking(true)?;
    let out = vec![0x5Au8; payload.max(1)];
    let mut back = vec![0u8; payload.max(1) + 1];
    let mut rtts = Vec::with_capacity(iterations);
    for _ in 0..iterations {
        let start = Instant::now();
        socket.send(&out[..payload])?;
        let n = loop {
            match socket.recv(&mut back) {
                Ok(n) => break n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if start.elapsed() > timeout {
                        return Err(io::Error::new(
                            io::ErrorKind::TimedOut,
                            "no echo within the timeout",
                        ));
                    }
                    std::thread::yield_now();
                }
                Err(e) => return Err(e),
            }
        };
        if n != payload {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("echo of {n} bytes for a {payload}-byte ping"),
            ));
        }
        rtts.push(start.elapsed());
    }
    Ok(rtts)
}

/// Echoes every datagram back to its sender until `stop` is set.
///
/// Both ping-pong ends busy-poll their sockets (non-blocking receive, yielding
/// the core between tries), the idle policy of the engine's own spin: a
/// baseline that slept in `recv` would pay a sleeping CPU's wake-up on every
/// round trip, which on a virtual machine costs tens of microseconds.
pub fn pingpong_server(
    socket: &UdpSocket,
    max_payload: usize,
    stop: &AtomicBool,
) -> io::Result<u64> {
    socket.set_nonblocking(true)?;
    let mut buf = vec![0u8; max_payload.max(1)];
    let mut echoed = 0;
    while !stop.load(Ordering::Relaxed) {
        match socket.recv_from(&mut buf) {
            Ok((n, from)) => {
                socket.send_to(&buf[..n], from)?;
                echoed += 1;
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::thread::yield_now(),
            Err(e) => return Err(e),
        }
    }
    Ok(echoed)
}

/// One `sendmmsg` on a connected socket of one datagram per `(offset,
/// length)` range of `region` in `payloads` (at most
/// [`MAX_BATCH`]). Returns how many datagrams the kernel took (none when
/// its buffer is full).
fn send_packets(
    socket: &UdpSocket,
    region: &[u8],
    payloads: &[(usize, usize)],
) -> io::Result<usize> {
    udp::send_batch(
        socket,
        payloads.iter().map(|&(at, len)| &region[at..at + len]),
    )
}

/// One kernel UDP stream of `message`-byte messages from a to b, in
/// datagrams of at most [`UDP_CHUNK`] bytes whose payloads are read from
/// where the engine's stream of those messages placed as `layout` says
/// reads them ([`crate::sources::PacketSource`]): the sweep's point, also
/// used by the paired step.
pub fn kernel_stream(
    pair: &VethPair,
    message: u64,
    layout: SourceLayout,
    duration: Duration,
) -> Result<StreamStats, HarnessError> {
    let datagram = message.clamp(1, UDP_CHUNK as u64) as usize;
    let source = PacketSource::new(layout, message, datagram as u64, window(message), REGION);
    let dst = SocketAddr::new(pair.b.ipv4.into(), 7001);
    let stop = Arc::new(AtomicBool::new(false));
    let (ready_tx, ready_rx) = mpsc::channel();
    let stop_rx = stop.clone();
    let receiver = spawn_in(&pair.b, move || {
        let sock = UdpSocket::bind(dst).map_err(io_err("binding the UDP receiver"))?;
        udp::force_buffer_sizes(&sock, 8 << 20).map_err(io_err("SO_RCVBUFFORCE"))?;
        let _ = ready_tx.send(());
        stream_receive(&sock, datagram, &stop_rx, Duration::from_millis(100))
            .map_err(io_err("receiving the UDP stream"))
    });
    let _ = ready_rx.recv_timeout(Duration::from_secs(5));
    let sender = spawn_in(&pair.a, move || {
        let sock = UdpSocket::bind("0.0.0.0:0").map_err(io_err("binding the UDP sender"))?;
        udp::force_buffer_sizes(&sock, 8 << 20).map_err(io_err("SO_SNDBUFFORCE"))?;
        stream_send(&sock, dst, &source, MAX_BATCH, duration)
            .map_err(io_err("sending the UDP stream"))
    });
    let sent = join(sender);
    stop.store(true, Ordering::Relaxed);
    let got = join(receiver)?;
    sent?;
    Ok(got)
}

/// UDP ping-pong: a echoes from b.
pub fn kernel_pingpong(
    pair: &VethPair,
    payload: usize,
    iterations: usize,
) -> Result<Option<Percentiles>, HarnessError> {
    let addr = SocketAddr::new(pair.b.ipv4.into(), 7002);
    let stop = Arc::new(AtomicBool::new(false));
    let (ready_tx, ready_rx) = mpsc::channel();
    let stop_srv = stop.clone();
    let server = spawn_in(&pair.b, move || {
        let sock = UdpSocket::bind(addr).map_err(io_err("binding the UDP echo server"))?;
        let _ = ready_tx.send(());
        pingpong_server(&sock, payload, &stop_srv).map_err(io_err("UDP echo server"))
    });
    let _ = ready_rx.recv_timeout(Duration::from_secs(5));
    let client = spawn_in(&pair.a, move || {
        let sock = UdpSocket::bind("0.0.0.0:0").map_err(io_err("binding the UDP client"))?;
        let warm = iterations / 10;
        let mut rtts = pingpong_client(
            &sock,
            addr,
            payload,
            iterations + warm,
            Duration::from_secs(2),
        )
        .map_err(io_err("UDP ping-pong"))?;
        Ok(Percentiles::of(&mut rtts[warm..]))
    });
    let r = join(client);
    stop.store(true, Ordering::Relaxed);
    join(server)?;
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn stream_over_loopback_counts_what_was_sent() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let dst = rx.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let stop_rx = stop.clone();
        let receiver = std::thread::spawn(move || {
            stream_receive(&rx, 256, &stop_rx, Duration::from_millis(50)).unwrap()
        });
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let source = PacketSource::new(SourceLayout::Perftest, 200, 200, 32, REGION);
        let sent = stream_send(&tx, dst, &source, 16, Duration::from_millis(100)).unwrap();
        stop.store(true, Ordering::Relaxed);
        let got = receiver.join().unwrap();
        assert!(sent.datagrams > 0);
        assert_eq!(sent.bytes, sent.datagrams * 200);
        // Loopback UDP may drop under overload, but never invents datagrams.
        assert!(got.datagrams > 0 && got.datagrams <= sent.datagrams);
        assert_eq!(got.bytes, got.datagrams * 200);
    }

    #[test]
    fn datagrams_carry_the_message_bytes_where_the_source_puts_them() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.connect(rx.local_addr().unwrap()).unwrap();
        // 500-byte messages in 200-byte datagrams: 200, 200, 100, then the
        // next message (perftest: 512-byte steps through one page).
        let source = PacketSource::new(SourceLayout::Perftest, 500, 200, 32, REGION);
        let region = region_pattern(source.region_len());
        let payloads: Vec<(usize, usize)> = (0..4).map(|p| source.packet(p)).collect();
        assert_eq!(payloads, [(0, 200), (200, 200), (400, 100), (512, 200)]);
        assert_eq!(send_packets(&tx, &region, &payloads).unwrap(), 4);
        let mut buf = [0u8; 512];
        for &(at, len) in &payloads {
            let n = rx.recv(&mut buf).unwrap();
            assert_eq!(&buf[..n], &region[at..at + len]);
        }
    }

    #[test]
    fn pingpong_over_loopback_measures_every_round_trip() {
        let server = UdpSocket::bind("127.0.0.1:0").unwrap();
        let addr = server.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let stop_srv = stop.clone();
        let echo = std::thread::spawn(move || pingpong_server(&server, 64, &stop_srv).unwrap());
        let client = UdpSocket::bind("127.0.0.1:0").unwrap();
        let rtts = pingpong_client(&client, addr, 64, 50, Duration::from_secs(2)).unwrap();
        stop.store(true, Ordering::Relaxed);
        assert_eq!(echo.join().unwrap(), 50);
        assert_eq!(rtts.len(), 50);
        assert!(rtts.iter().all(|d| *d > Duration::ZERO));
    }
}
