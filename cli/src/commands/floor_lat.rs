//! `roce-xdp floor-lat`: the bare AF_XDP round trip between two hosts, with
//! no RoCE processing: the floor that `roce-xdp bench` measures the latency
//! tools against on its veth pair, measured on any link, NIC queues
//! included (`docs/latency-floor.md`).
//!
//! Without an address it echoes: every floor ping that reaches its
//! AF_XDP sockets goes back with its MAC and IP addresses swapped (and,
//! for a ping of the request+ACK pattern, an ACK-sized frame after it, in
//! the same TX kick), until Ctrl-C. With the peer's address it pings: one
//! frame at a time, as long as the RoCE frame of a `-s` byte WRITE, and
//! reports the round trips as the latency tools do (`t_min`, `t_max`,
//! `t_typical`, percentiles; `--json` in the tools' schema).
//!
//! The frames are UDP over IPv4 or IPv6 to port 4791, so the steering
//! program hands them to the sockets as it does RoCE; their payload
//! starts with a marker ([`MAGIC`]), what the echo answers to
//! ([`PingKind`]) and the ping's sequence number. Anything else on port
//! 4791 is counted and dropped.

use std::net::IpAddr;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::Args;
use engine::io::{wait_readable_any, XskConfig, XskSocket, MAX_WAIT_FDS};
use engine::nic::{QueueOption, SteerProgram};
use engine::wire::icrc::ICRC_LEN;
use engine::wire::{
    checksum, pad_for, Opcode, BTH_HEADER_LEN, ETH_HEADER_LEN, IPV4_HEADER_LEN, IPV6_HEADER_LEN,
    UDP_HEADER_LEN,
};

use crate::common::args::AttachArgs;
use crate::common::lists::{parse_list, CpuList};
use crate::common::perftest::latency::LatencyStats;
use crate::common::perftest::report::{self, LatRow, Rows, TestInfo};
use crate::common::{preflight, steering};
use crate::errors::{Interrupted, UserError};

/// Options of `roce-xdp floor-lat`.
#[derive(Debug, Args)]
pub struct FloorLatArgs {
    /// The echoing peer's address, IPv4 or IPv6 (ping). Without it, echo the pings
    /// that arrive until Ctrl-C.
    pub server: Option<IpAddr>,
    /// Network interface.
    #[arg(short = 'd', long = "iface", value_name = "IF")]
    pub iface: String,
    /// Frames as long as the RoCE frame of a WRITE of this many bytes
    /// (Ethernet to ICRC), as the latency rows of `roce-xdp bench` use.
    #[arg(short = 's', long = "size", default_value_t = 64)]
    pub size: usize,
    /// Round trips to measure (after a warm-up of a tenth as many, at most
    /// 1000, not measured).
    #[arg(short = 'n', long = "iters", default_value_t = 1000)]
    pub iters: u64,
    /// The wire pattern of `send-lat` and `write-lat`: each ping is
    /// followed by an ACK-sized frame in the same TX kick, the echo answers
    /// with the ping and then an ACK-sized frame of its own, and a round
    /// trip ends when both are back (RC has no piggybacked ACK).
    #[arg(long = "acks")]
    pub acks: bool,
    /// NIC queues to open sockets on, starting at 0 (`0-3`), as `serve
    /// --queues`: with RSS, every queue the pings (or their echoes) may
    /// reach.
    #[arg(long = "queues", value_parser = parse_list, default_value = "0")]
    pub queues: CpuList,
    /// UDP source port of the pings (which RX queue RSS picks for them).
    #[arg(long = "sport", default_value_t = 49152)]
    pub sport: u16,
    /// Attach mode, zero-copy, --force, --steer (port 4791 is what they
    /// steer and cover, as for RoCE).
    #[command(flatten)]
    pub attach: AttachArgs,
    /// Seconds to wait for the first echo, and for each one after it.
    #[arg(long = "timeout", default_value_t = 5.0)]
    pub timeout: f64,
    /// Print one JSON document (the latency tools' schema) instead of the
    /// table.
    #[arg(long = "json")]
    pub json: bool,
}

/// First bytes of a floor frame's UDP payload.
pub const MAGIC: [u8; 4] = *b"RXFL";
/// Marker, kind and sequence number.
const MARKER_LEN: usize = MAGIC.len() + 1 + 4;
/// Frames a socket takes per `recv`.
const BATCH: usize = 64;
/// How long the echo yields the core between empty polls before it sleeps
/// in poll(2) (as the engine's adaptive poll does).
const ECHO_SPIN: Duration = Duration::from_millis(2);

/// What a floor frame asks of the echo (the byte after [`MAGIC`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum PingKind {
    /// Echo it.
    Echo = 0,
    /// Echo it, then send an ACK-sized frame ([`PingKind::Ack`]).
    EchoAck = 1,
    /// An ACK-sized frame: not answered.
    Ack = 2,
}

impl PingKind {
    fn from_byte(b: u8) -> Option<PingKind> {
        match b {
            0 => Some(PingKind::Echo),
            1 => Some(PingKind::EchoAck),
            2 => Some(PingKind::Ack),
            _ => None,
        }
    }
}

/// One end of the floor's path: its MAC and IP address (both ends of a
/// frame are of one family).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct End {
    pub mac: [u8; 6],
    pub ip: IpAddr,
}

/// Where a frame's UDP header starts (Ethernet and IPv4 without options,
/// or IPv6 without extension headers), if it is UDP over one of them.
fn udp_at(frame: &[u8]) -> Option<usize> {
    match (frame.get(12..14)?, frame.get(14)?) {
        ([0x08, 0x00], 0x45) if *frame.get(23)? == 17 => Some(34),
        ([0x86, 0xdd], v) if v >> 4 == 6 && *frame.get(20)? == 17 => Some(54),
        _ => None,
    }
}

/// Length of the frame that carries the RoCE frame of a `size`-byte
/// RDMA WRITE in one packet (headers, RETH, the pad and ICRC around the
/// payload), and of an RC ACK (headers, AETH, ICRC), over IPv4 or IPv6.
pub fn frame_lens(size: usize, ipv6: bool) -> (usize, usize) {
    let ip = if ipv6 {
        IPV6_HEADER_LEN
    } else {
        IPV4_HEADER_LEN
    };
    let around = ETH_HEADER_LEN + ip + UDP_HEADER_LEN + BTH_HEADER_LEN + ICRC_LEN;
    (
        around + Opcode::WriteOnly.ext_headers_len() + size + pad_for(size),
        around + Opcode::Acknowledge.ext_headers_len(),
    )
}

/// A floor frame's kind and sequence number, if `frame` is one: UDP to
/// port 4791 over IPv4 (no options) or IPv6 (no extension headers), the
/// marker at the payload's start.
pub fn parse(frame: &[u8]) -> Option<(PingKind, u32)> {
    let udp = udp_at(frame)?;
    let m = frame.get(udp + 8..udp + 8 + MARKER_LEN)?;
    if frame[udp + 2..udp + 4] != 4791u16.to_be_bytes() || m[..4] != MAGIC {
        return None;
    }
    let kind = PingKind::from_byte(m[4])?;
    let seq = u32::from_le_bytes([m[5], m[6], m[7], m[8]]);
    Some((kind, seq))
}

/// Writes a floor frame of `len` bytes from `src` to `dst` into
/// `buf[..len]`: UDP source port `sport`, destination 4791, the marker,
/// `kind` and `seq`, zeros after them; IPv4 with DF set and its header
/// checksum (no UDP checksum), or IPv6 with the UDP checksum it requires.
/// `src` and `dst` must be of one family, `len` at least the headers and
/// the marker.
pub fn write_frame(
    buf: &mut [u8],
    src: &End,
    dst: &End,
    sport: u16,
    len: usize,
    kind: PingKind,
    seq: u32,
) {
    let f = &mut buf[..len];
    f.fill(0);
    f[0..6].copy_from_slice(&dst.mac);
    f[6..12].copy_from_slice(&src.mac);
    let udp = match (src.ip, dst.ip) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            f[12..14].copy_from_slice(&[0x08, 0x00]);
            f[14] = 0x45;
            f[20] = 0x40; // DF
            f[22] = 64;
            f[23] = 17;
            f[26..30].copy_from_slice(&s.octets());
            f[30..34].copy_from_slice(&d.octets());
            34
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            f[12..14].copy_from_slice(&[0x86, 0xdd]);
            f[14] = 0x60;
            f[20] = 17;
            f[21] = 64;
            f[22..38].copy_from_slice(&s.octets());
            f[38..54].copy_from_slice(&d.octets());
            54
        }
        _ => panic!("floor frame between two address families"),
    };
    f[udp..udp + 2].copy_from_slice(&sport.to_be_bytes());
    f[udp + 2..udp + 4].copy_from_slice(&4791u16.to_be_bytes());
    f[udp + 8..udp + 12].copy_from_slice(&MAGIC);
    f[udp + 12] = kind as u8;
    f[udp + 13..udp + 17].copy_from_slice(&seq.to_le_bytes());
    fix_lengths(f, udp);
}

/// Sets the IP and UDP lengths of the frame `f` (UDP at `udp`) to its
/// length, and its checksums: IPv4's header checksum, or IPv6's UDP
/// checksum.
fn fix_lengths(f: &mut [u8], udp: usize) {
    let udp_len = (f.len() - udp) as u16;
    f[udp + 4..udp + 6].copy_from_slice(&udp_len.to_be_bytes());
    f[udp + 6..udp + 8].fill(0);
    if udp == 34 {
        f[16..18].copy_from_slice(&(udp_len + 20).to_be_bytes());
        f[24..26].fill(0);
        let c = checksum::checksum(&f[14..34]);
        f[24..26].copy_from_slice(&c.to_be_bytes());
    } else {
        f[18..20].copy_from_slice(&udp_len.to_be_bytes());
        let (src, dst): ([u8; 16], [u8; 16]) = (
            f[22..38].try_into().expect("16 bytes"),
            f[38..54].try_into().expect("16 bytes"),
        );
        let c = checksum::udp_ipv6(&src, &dst, &f[udp..]);
        f[udp + 6..udp + 8].copy_from_slice(&c.to_be_bytes());
    }
}

/// Turns a received floor frame ([`parse`] took it) into its echo in
/// place: MAC and IP addresses swapped (the checksums stay valid: the
/// same 16-bit words, summed in another order).
pub fn swap_addresses(frame: &mut [u8]) {
    for k in 0..6 {
        frame.swap(k, k + 6);
    }
    let (at, n) = if udp_at(frame) == Some(54) {
        (22, 16)
    } else {
        (26, 4)
    };
    for k in at..at + n {
        frame.swap(k, k + n);
    }
}

/// Writes into `out` the ACK-sized frame that follows the echo `echo` of
/// a [`PingKind::EchoAck`] ping ([`parse`] took it): the echo's headers
/// with the lengths and checksums of an RC ACK's frame ([`frame_lens`]),
/// kind [`PingKind::Ack`], the ping's sequence number, zeros after them.
/// Returns its length.
pub fn write_ack_after(echo: &[u8], out: &mut [u8]) -> usize {
    let udp = udp_at(echo).expect("a floor frame");
    let len = frame_lens(0, udp == 54).1;
    let f = &mut out[..len];
    f.fill(0);
    f[..udp + 8 + MARKER_LEN].copy_from_slice(&echo[..udp + 8 + MARKER_LEN]);
    f[udp + 12] = PingKind::Ack as u8;
    fix_lengths(f, udp);
    len
}

/// Runs `roce-xdp floor-lat`.
pub fn run(args: FloorLatArgs) -> anyhow::Result<()> {
    let queues: Vec<u32> = args.queues.0.iter().map(|&q| q as u32).collect();
    if queues.iter().enumerate().any(|(i, &q)| q != i as u32) {
        return Err(UserError::Usage(format!(
            "--queues must start at 0 and have no gaps (0-{}): the sockets open on queues 0..N",
            queues.len().saturating_sub(1)
        ))
        .into());
    }
    if queues.len() > MAX_WAIT_FDS {
        return Err(UserError::Usage(format!(
            "--queues: at most {MAX_WAIT_FDS} queues (one thread polls them all)"
        ))
        .into());
    }
    if !(args.timeout > 0.0 && args.timeout.is_finite()) {
        return Err(
            UserError::Usage("--timeout must be a positive number of seconds".into()).into(),
        );
    }
    if args.size > 4096 {
        return Err(UserError::Usage(format!(
            "-s {}: a floor frame is one UMEM frame, at most 4096 bytes: use -s 4000 or less",
            args.size
        ))
        .into());
    }
    let ipv6 = args.server.is_some_and(|a| a.is_ipv6());
    let (frame_len, ack_len) = frame_lens(args.size, ipv6);
    let link = preflight::check(&preflight::Plan {
        what: format!("floor-lat on {}", args.iface),
        iface: &args.iface,
        queues: &queues,
        // The frame's length is checked below, in floor-lat's words.
        pmtu: 0,
        ipv6,
        force: args.attach.force,
    })?;
    if frame_len - 14 > link.mtu as usize {
        return Err(UserError::Usage(format!(
            "-s {}: the frame ({frame_len} bytes, {} inside the IP MTU) does not fit {}'s MTU of {}: use a smaller -s",
            args.size,
            frame_len - 14,
            args.iface,
            link.mtu
        ))
        .into());
    }
    if frame_len > 4096 {
        return Err(UserError::Usage(format!(
            "-s {}: a floor frame is one UMEM frame, at most 4096 bytes (this one is {frame_len})",
            args.size
        ))
        .into());
    }
    let stop = crate::common::signals::stop_flag()?;
    let steering = steering::steer(
        &args.iface,
        queues.len() as u32,
        args.attach.steer,
        args.attach.force,
        ipv6,
        QueueOption::Range,
    )?;
    let (program, mut socks) = open(&args, queues.len() as u32)?;
    let info = test_info(&args, &program, &socks, link.mtu);
    let result = match args.server {
        Some(peer) => ping(&args, peer, &mut socks, &stop, (frame_len, ack_len), info),
        None => echo(&args, &info.xdp_mode, &mut socks, &stop),
    };
    drop(socks);
    drop(program);
    drop(steering);
    result
}

/// The steering program and one socket a queue.
fn open(args: &FloorLatArgs, queues: u32) -> anyhow::Result<(SteerProgram, Vec<XskSocket>)> {
    let mut program =
        SteerProgram::attach(&args.iface, args.attach.mode.into(), args.attach.force)?;
    let mut socks = Vec::with_capacity(queues as usize);
    for q in 0..queues {
        let mut cfg = XskConfig::new(&args.iface, q);
        cfg.zero_copy = args.attach.zero_copy.into();
        let sock = XskSocket::open(&cfg)?;
        program.register_socket(q, &sock)?;
        socks.push(sock);
    }
    Ok((program, socks))
}

fn test_info(
    args: &FloorLatArgs,
    program: &SteerProgram,
    socks: &[XskSocket],
    mtu: u32,
) -> TestInfo {
    TestInfo {
        tool: "floor-lat".into(),
        role: if args.server.is_some() {
            "client"
        } else {
            "server"
        }
        .into(),
        verb: if args.acks {
            "AF_XDP echo, request+ACK"
        } else {
            "AF_XDP echo"
        }
        .into(),
        kind: "lat".into(),
        qps: 0,
        mtu,
        tx_depth: 1,
        iface: args.iface.clone(),
        local: String::new(),
        remote: args.server.map(|a| a.to_string()).unwrap_or_default(),
        xdp_mode: program.mode().to_string(),
        zero_copy: socks.iter().all(XskSocket::is_zero_copy),
    }
}

/// The echo, until `stop`: prints what it answered when it ends.
fn echo(
    args: &FloorLatArgs,
    mode: &str,
    socks: &mut [XskSocket],
    stop: &AtomicBool,
) -> anyhow::Result<()> {
    eprintln!(
        "roce-xdp floor-lat: echoing floor pings on {} queues 0-{} (XDP {}, {}); Ctrl-C ends",
        args.iface,
        socks.len() - 1,
        mode,
        if socks.iter().all(XskSocket::is_zero_copy) {
            "zero-copy"
        } else {
            "copy"
        }
    );
    let slot = socks
        .iter()
        .map(XskSocket::max_packet)
        .max()
        .unwrap_or(4096);
    let mut arena = vec![0u8; slot * BATCH];
    let mut lens = Vec::with_capacity(BATCH);
    let mut ack = vec![0u8; frame_lens(0, true).1];
    let (mut acks_sent, mut ignored) = (0u64, 0u64);
    let mut echoed = vec![0u64; socks.len()];
    let mut idle_since: Option<Instant> = None;
    while !stop.load(Ordering::Relaxed) {
        let mut got = 0;
        for (q, sock) in socks.iter_mut().enumerate() {
            sock.complete();
            lens.clear();
            got += sock.recv(BATCH, |pkt| {
                let i = lens.len();
                arena[i * slot..i * slot + pkt.len()].copy_from_slice(pkt);
                lens.push(pkt.len());
            });
            for (i, &len) in lens.iter().enumerate() {
                let frame = &mut arena[i * slot..i * slot + len];
                let kind = match parse(frame) {
                    Some((PingKind::Ack, _)) => continue,
                    Some((kind, _)) => kind,
                    None => {
                        ignored += 1;
                        continue;
                    }
                };
                swap_addresses(frame);
                let ack_len = (kind == PingKind::EchoAck).then(|| write_ack_after(frame, &mut ack));
                for out in std::iter::once(&frame[..]).chain(ack_len.map(|l| &ack[..l])) {
                    while !sock.send(out) {
                        let _ = sock.flush();
                        sock.complete();
                        if stop.load(Ordering::Relaxed) {
                            break;
                        }
                        std::thread::yield_now();
                    }
                }
                echoed[q] += 1;
                acks_sent += ack_len.is_some() as u64;
            }
            let _ = sock.flush();
        }
        if got > 0 {
            idle_since = None;
            continue;
        }
        let since = *idle_since.get_or_insert_with(Instant::now);
        if since.elapsed() < ECHO_SPIN {
            std::thread::yield_now();
        } else {
            // Asleep until a frame comes (or a signal, or the timeout: then
            // straight back to sleep, idle_since stays).
            let fds: Vec<_> = socks.iter().map(|s| s.as_fd()).collect();
            let _ = wait_readable_any(&fds, Duration::from_millis(500));
        }
    }
    let per_queue: Vec<String> = echoed
        .iter()
        .enumerate()
        .map(|(q, n)| format!("queue {q}: {n}"))
        .collect();
    eprintln!(
        "roce-xdp floor-lat: echoed {} pings ({}), {acks_sent} of them with an ACK-sized frame after; {ignored} other frames on port 4791 dropped",
        echoed.iter().sum::<u64>(),
        per_queue.join(", ")
    );
    Ok(())
}

/// The pings, their round trips and the report.
fn ping(
    args: &FloorLatArgs,
    peer: IpAddr,
    socks: &mut [XskSocket],
    stop: &AtomicBool,
    (frame_len, ack_len): (usize, usize),
    mut info: TestInfo,
) -> anyhow::Result<()> {
    let local = engine::nic::interface_addr(None, &args.iface, peer.is_ipv6())?;
    let peer_mac = engine::nic::resolve_mac(None, &args.iface, peer, Duration::from_secs(3))
        .map_err(|e| UserError::PeerUnreachable {
            addr: peer.to_string(),
            detail: format!("no MAC for it on {}: {e}", args.iface),
        })?;
    let me = End {
        mac: engine::nic::interface_mac(None, &args.iface)?,
        ip: local,
    };
    let them = End {
        mac: peer_mac,
        ip: peer,
    };
    info.local = local.to_string();
    let kind = if args.acks {
        PingKind::EchoAck
    } else {
        PingKind::Echo
    };
    let mut frame = vec![0u8; frame_len];
    let mut ack = vec![0u8; ack_len];
    // The ACK-sized frame after our ping goes from us to them, as an
    // engine's ACK of the peer's last answer would.
    write_frame(&mut ack, &me, &them, args.sport, ack_len, PingKind::Ack, 0);
    let timeout = Duration::from_secs_f64(args.timeout);
    let warm = (args.iters / 10).min(1000);
    let mut samples = Vec::with_capacity(args.iters as usize);
    for seq in 0..warm + args.iters + 1 {
        if stop.load(Ordering::Relaxed) {
            return Err(Interrupted.into());
        }
        write_frame(
            &mut frame, &me, &them, args.sport, frame_len, kind, seq as u32,
        );
        // The first ping is sent again every 200 ms until answered (the
        // echo may still be starting); the others once.
        let resend = (seq == 0).then_some(Duration::from_millis(200));
        let rtt = round_trip(socks, &frame, args.acks.then_some(&ack[..]), seq as u32, timeout, resend, stop)
            .map_err(|e| match e {
                RoundTrip::Interrupted => anyhow::Error::from(Interrupted),
                RoundTrip::Timeout(what) => UserError::PeerUnreachable {
                    addr: peer.to_string(),
                    detail: format!(
                        "ping {seq}: {what} within {timeout:?}; is `roce-xdp floor-lat --iface IF` running there, on every queue the pings reach (--queues)?"
                    ),
                }
                .into(),
                RoundTrip::NoTxRoom => anyhow::anyhow!("ping {seq}: the TX ring stayed full for {timeout:?}"),
            })?;
        if seq > warm {
            samples.push(rtt.as_nanos() as u64);
        }
    }
    let stats = LatencyStats::from_nanos(&samples).context("no round trip measured (-n 0)")?;
    let row = LatRow {
        bytes: args.size as u64,
        iterations: args.iters,
        stats,
    };
    if args.json {
        println!("{}", report::to_json(&info, &Rows::Latency(vec![row]), &[]));
    } else {
        println!("{}", banner(&info, args.size, frame_len));
        println!("{}", report::LAT_HEADER);
        println!("{}", report::lat_line(&row));
    }
    Ok(())
}

/// Why a round trip did not end.
enum RoundTrip {
    Interrupted,
    Timeout(&'static str),
    NoTxRoom,
}

/// Sends `frame` (then `ack`, in the same kick) from the first socket and
/// polls every socket until the echo of ping `seq` is back, and with
/// `ack` the peer's ACK-sized frame too. `resend`: send again at that
/// interval while nothing came back.
fn round_trip(
    socks: &mut [XskSocket],
    frame: &[u8],
    ack: Option<&[u8]>,
    seq: u32,
    timeout: Duration,
    resend: Option<Duration>,
    stop: &AtomicBool,
) -> Result<Duration, RoundTrip> {
    let start = Instant::now();
    let mut sent_at = start;
    let send = |sock: &mut XskSocket| -> Result<(), RoundTrip> {
        sock.complete();
        for f in std::iter::once(frame).chain(ack) {
            while !sock.send(f) {
                sock.complete();
                if start.elapsed() > timeout {
                    return Err(RoundTrip::NoTxRoom);
                }
            }
        }
        let _ = sock.flush();
        Ok(())
    };
    send(&mut socks[0])?;
    let (mut echo, mut acked) = (false, ack.is_none());
    loop {
        for sock in socks.iter_mut() {
            sock.recv(BATCH, |pkt| match parse(pkt) {
                Some((PingKind::Ack, s)) if s == seq => acked = true,
                Some((_, s)) if s == seq && pkt.len() == frame.len() => echo = true,
                _ => {}
            });
        }
        if echo && acked {
            return Ok(start.elapsed());
        }
        if start.elapsed() > timeout {
            return Err(RoundTrip::Timeout(if echo {
                "the echo came, its ACK-sized frame did not"
            } else {
                "no echo"
            }));
        }
        if stop.load(Ordering::Relaxed) {
            return Err(RoundTrip::Interrupted);
        }
        if let Some(every) = resend {
            if !echo && sent_at.elapsed() > every {
                send(&mut socks[0])?;
                sent_at = Instant::now();
            }
        }
        // As the latency tools' driving thread does between empty polls.
        std::thread::yield_now();
    }
}

/// The banner above the table.
fn banner(info: &TestInfo, size: usize, frame_len: usize) -> String {
    let rule = "-".repeat(87);
    format!(
        "{rule}\n{:^87}\n Frame           : {frame_len}[B] (the RoCE frame of a {}-byte WRITE)\n Interface       : {:<10} XDP mode       : {}, {}\n local address   : {}\n remote address  : {}\n{rule}",
        format!("{} Latency Test", info.verb),
        size,
        info.iface,
        info.xdp_mode,
        if info.zero_copy { "zero-copy" } else { "copy" },
        info.local,
        info.remote,
    )
}

#[cfg(test)]
mod tests {
    use std::net::{Ipv4Addr, Ipv6Addr};

    use super::*;

    fn end(last: u8, ipv6: bool) -> End {
        End {
            mac: [2, 0, 0, 0, 0, last],
            ip: if ipv6 {
                IpAddr::V6(Ipv6Addr::new(0xfd00, 0x47, 0, 0, 0, 0, 0, last as u16))
            } else {
                IpAddr::V4(Ipv4Addr::new(10, 0, 0, last))
            },
        }
    }

    fn frame_of(a: &End, b: &End, len: usize, kind: PingKind, seq: u32) -> Vec<u8> {
        let mut f = vec![0u8; len];
        write_frame(&mut f, a, b, 50000, len, kind, seq);
        f
    }

    /// The frame's IPv4 header checksum, or IPv6 UDP checksum, checks;
    /// its IP and UDP lengths are its own.
    fn consistent(f: &[u8]) -> bool {
        match udp_at(f) {
            Some(34) => {
                checksum::checksum(&f[14..34]) == 0
                    && u16::from_be_bytes([f[16], f[17]]) as usize == f.len() - 14
                    && u16::from_be_bytes([f[38], f[39]]) as usize == f.len() - 34
            }
            Some(54) => {
                let mut z = f[54..].to_vec();
                z[6..8].fill(0);
                let want = checksum::udp_ipv6(
                    &f[22..38].try_into().unwrap(),
                    &f[38..54].try_into().unwrap(),
                    &z,
                );
                u16::from_be_bytes([f[60], f[61]]) == want
                    && u16::from_be_bytes([f[18], f[19]]) as usize == f.len() - 54
                    && u16::from_be_bytes([f[58], f[59]]) as usize == f.len() - 54
            }
            _ => false,
        }
    }

    #[test]
    fn frame_lengths_are_the_roce_frames_of_a_write_and_an_ack() {
        // Ethernet 14, IPv4 20 / IPv6 40, UDP 8, BTH 12, RETH 16, ICRC 4.
        assert_eq!(frame_lens(64, false), (138, 62));
        assert_eq!(frame_lens(64, true), (158, 82));
        // The pad: a 1-byte WRITE carries 3 pad bytes.
        assert_eq!(frame_lens(1, false), (78, 62));
    }

    #[test]
    fn a_ping_parses_and_its_echo_goes_back_to_the_sender() {
        for ipv6 in [false, true] {
            let (a, b) = (end(1, ipv6), end(2, ipv6));
            let len = frame_lens(64, ipv6).0;
            let mut f = frame_of(&a, &b, len, PingKind::EchoAck, 7);
            assert_eq!(parse(&f), Some((PingKind::EchoAck, 7)));
            assert!(consistent(&f), "ipv6 {ipv6}");
            let echo_of = |f: &[u8]| {
                let mut g = f.to_vec();
                swap_addresses(&mut g);
                g
            };
            let e = echo_of(&f);
            // The echo is the frame b would have written to a.
            let mut back = frame_of(&b, &a, len, PingKind::EchoAck, 7);
            back[udp_at(&f).unwrap()..udp_at(&f).unwrap() + 2]
                .copy_from_slice(&50000u16.to_be_bytes());
            if ipv6 {
                // Same UDP checksum: the pseudo-header sums the addresses
                // in either order.
                back[60..62].copy_from_slice(&f[60..62]);
            }
            assert_eq!(e, back, "ipv6 {ipv6}");
            assert!(consistent(&e), "ipv6 {ipv6}");
            swap_addresses(&mut f);
            swap_addresses(&mut f);
            assert_eq!(parse(&f), Some((PingKind::EchoAck, 7)));
        }
    }

    #[test]
    fn the_ack_after_an_echo_has_its_own_lengths_and_checksums() {
        for ipv6 in [false, true] {
            let (flen, alen) = frame_lens(64, ipv6);
            let mut echo = frame_of(&end(1, ipv6), &end(2, ipv6), flen, PingKind::EchoAck, 9);
            swap_addresses(&mut echo);
            let mut out = vec![0xee; 200];
            let n = write_ack_after(&echo, &mut out);
            let ack = &out[..n];
            assert_eq!(n, alen);
            assert_eq!(parse(ack), Some((PingKind::Ack, 9)));
            assert!(consistent(ack), "ipv6 {ipv6}");
            assert_eq!(ack[..12], echo[..12]);
            let marker_end = udp_at(ack).unwrap() + 8 + MARKER_LEN;
            assert!(ack[marker_end..].iter().all(|&b| b == 0));
        }
    }

    #[test]
    fn other_frames_are_not_pings() {
        for ipv6 in [false, true] {
            let f = frame_of(&end(1, ipv6), &end(2, ipv6), 144, PingKind::Echo, 1);
            let udp = udp_at(&f).unwrap();
            let mut g = f.clone();
            g[udp + 8] = b'x'; // no marker: RoCE, say
            assert_eq!(parse(&g), None);
            let mut g = f.clone();
            g[udp + 2..udp + 4].copy_from_slice(&4792u16.to_be_bytes());
            assert_eq!(parse(&g), None);
            let mut g = f.clone();
            g[udp + 12] = 9; // unknown kind
            assert_eq!(parse(&g), None);
            let mut g = f.clone();
            g[12] = 0x88; // not IP
            assert_eq!(parse(&g), None);
            assert_eq!(parse(&f[..udp + 8 + MARKER_LEN - 1]), None);
            for n in 0..f.len() {
                let _ = parse(&f[..n]);
            }
        }
    }
}
