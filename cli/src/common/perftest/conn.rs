//! The TCP side of perftest's connection exchange (`engine::oob::perftest`
//! holds the formats and the order): each message is one write of its
//! fixed size; the client writes first, the server reads first. Reads have
//! a deadline, so a peer that disconnects or stalls mid-exchange ends the
//! tool with exit status 2 within `--timeout`, never a hang.

use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use engine::oob::perftest::{
    self as pt, BwReport, Key, Role, Version, KEY_LEN, MTU_LEN, REPORT_FIELDS, REPORT_FIELD_LEN,
    SYS_LEN, VERSION_LEN,
};

use crate::errors::{classify_connect, UserError};

/// What the stream under a [`PerfConn`] must do besides Read + Write: read
/// deadlines and a non-blocking peek (a real socket; a recorded
/// transcript in tests).
pub trait Stream: Read + Write {
    fn set_read_timeout(&mut self, t: Option<Duration>) -> io::Result<()>;
    /// Whether a byte (or the end of the stream) is waiting, without
    /// consuming it and without blocking.
    fn readable(&mut self) -> io::Result<bool>;
    /// Copies waiting bytes without consuming them (blocking as a read).
    fn peek(&mut self, buf: &mut [u8]) -> io::Result<usize>;
}

impl Stream for TcpStream {
    fn set_read_timeout(&mut self, t: Option<Duration>) -> io::Result<()> {
        TcpStream::set_read_timeout(self, t)
    }

    fn readable(&mut self) -> io::Result<bool> {
        self.set_nonblocking(true)?;
        let mut b = [0u8];
        let r = self.peek(&mut b);
        self.set_nonblocking(false)?;
        match r {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(false),
            Err(_) => Ok(true), // a reset: the next read reports it
        }
    }

    fn peek(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        TcpStream::peek(self, buf)
    }
}

/// How `roce-xdp serve` starts a refusal.
pub const REFUSED: &[u8] = b"refused";

/// A perftest exchange connection.
pub struct PerfConn<S: Stream = TcpStream> {
    stream: S,
    role: Role,
    peer: String,
    /// Deadline of each read.
    pub timeout: Duration,
    /// `-R`: keys travel as perftest's rdma_cm mode sends them
    /// ([`encode_dest`]), not as the TCP exchange's text.
    pub binary_keys: bool,
}

/// Bytes of `struct pingpong_dest` (perftest 4.5: lid, out_reads, qpn,
/// psn, rkey, 4 bytes of padding, vaddr, gid, srqn, gid_index).
pub const DEST_LEN: usize = 56;

/// A key as perftest's rdma_cm mode sends it (`rdma_write_keys`): its
/// `struct pingpong_dest`, every integer big-endian, the padding zero.
pub fn encode_dest(k: &Key) -> [u8; DEST_LEN] {
    let mut b = [0u8; DEST_LEN];
    b[0..4].copy_from_slice(&u32::from(k.lid).to_be_bytes());
    b[4..8].copy_from_slice(&k.out_reads.to_be_bytes());
    b[8..12].copy_from_slice(&k.qpn.to_be_bytes());
    b[12..16].copy_from_slice(&k.psn.to_be_bytes());
    b[16..20].copy_from_slice(&k.rkey.to_be_bytes());
    b[24..32].copy_from_slice(&k.vaddr.to_be_bytes());
    b[32..48].copy_from_slice(&k.gid.0);
    b[48..52].copy_from_slice(&k.srqn.to_be_bytes());
    b
}

/// The key in a `struct pingpong_dest` (`rdma_read_keys` reads lid,
/// out_reads, qpn, psn, rkey, vaddr and gid; the SRQ number is ours).
pub fn parse_dest(b: &[u8]) -> Option<Key> {
    if b.len() < DEST_LEN {
        return None;
    }
    let u = |i: usize| u32::from_be_bytes(b[i..i + 4].try_into().expect("4 bytes"));
    let mut gid = [0u8; 16];
    gid.copy_from_slice(&b[32..48]);
    Some(Key {
        lid: u(0) as u16,
        out_reads: u(4),
        qpn: u(8) & 0xFF_FFFF,
        psn: u(12) & 0xFF_FFFF,
        rkey: u(16),
        vaddr: u64::from_be_bytes(b[24..32].try_into().expect("8 bytes")),
        gid: engine::oob::Gid(gid),
        srqn: u(48),
    })
}

/// What the first four exchanges settle.
#[derive(Debug, Clone, PartialEq)]
pub struct Preamble {
    pub peer_version: Version,
    /// The larger of both sides'.
    pub cycle_buffer: u32,
    pub cache_line: u32,
    /// The smaller of both sides', bytes.
    pub mtu: u32,
}

impl PerfConn<TcpStream> {
    /// Connects to `host:port` within `timeout`.
    pub fn connect(
        host: IpAddr,
        port: u16,
        timeout: Duration,
        tool: &str,
    ) -> anyhow::Result<PerfConn> {
        let a = SocketAddr::new(host, port);
        match TcpStream::connect_timeout(&a, timeout.min(Duration::from_secs(10))) {
            Ok(s) => {
                let _ = s.set_nodelay(true);
                Ok(PerfConn::new(s, Role::Client, a.to_string(), timeout))
            }
            Err(e) => Err(classify_connect(e, &a.to_string(), tool)),
        }
    }

    /// The server's end of an accepted connection.
    pub fn accepted(s: TcpStream, timeout: Duration) -> PerfConn {
        let _ = s.set_nodelay(true);
        let peer = s
            .peer_addr()
            .map(|a| a.to_string())
            .unwrap_or_else(|_| "client".into());
        PerfConn::new(s, Role::Server, peer, timeout)
    }
}

/// An error the user can act on (exit status 2).
fn user(msg: String) -> anyhow::Error {
    UserError::Usage(msg).into()
}

impl<S: Stream> PerfConn<S> {
    pub fn new(stream: S, role: Role, peer: String, timeout: Duration) -> PerfConn<S> {
        PerfConn {
            stream,
            role,
            peer,
            timeout,
            binary_keys: false,
        }
    }

    /// The stream, back.
    pub fn into_inner(self) -> S {
        self.stream
    }

    /// The peer, for messages.
    pub fn peer(&self) -> &str {
        &self.peer
    }

    /// Sends one message in one write.
    pub fn send(&mut self, m: &[u8]) -> anyhow::Result<()> {
        self.stream
            .write_all(m)
            .and_then(|_| self.stream.flush())
            .map_err(|e| {
                user(format!(
                    "the perftest peer {} went away during the connection exchange ({e})",
                    self.peer
                ))
            })
    }

    /// Reads exactly `n` bytes, waiting at most the timeout.
    pub fn recv(&mut self, n: usize, what: &str) -> anyhow::Result<Vec<u8>> {
        let deadline = Instant::now() + self.timeout;
        let mut buf = vec![0u8; n];
        let mut got = 0;
        while got < n {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(user(format!(
                    "the perftest peer {} stalled: no {what} within {:.0} s (--timeout)",
                    self.peer,
                    self.timeout.as_secs_f64()
                )));
            }
            self.stream.set_read_timeout(Some(left))?;
            match self.stream.read(&mut buf[got..]) {
                Ok(0) => {
                    return Err(user(format!(
                        "the perftest peer {} closed the connection before sending its {what} (did it fail? see its output)",
                        self.peer
                    )))
                }
                Ok(k) => got += k,
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
                    ) => {}
                Err(e) => {
                    return Err(user(format!(
                        "the perftest peer {} reset the connection while we waited for its {what} ({e})",
                        self.peer
                    )))
                }
            }
        }
        Ok(buf)
    }

    /// One symmetric exchange: ours for theirs, in perftest's order.
    pub fn exchange(&mut self, mine: &[u8], what: &str) -> anyhow::Result<Vec<u8>> {
        match self.role {
            Role::Client => {
                self.send(mine)?;
                self.recv(mine.len(), what)
            }
            Role::Server => {
                let theirs = self.recv(mine.len(), what)?;
                self.send(mine)?;
                Ok(theirs)
            }
        }
    }

    /// Version, cycle buffer, cache line and MTU (`exchange_versions`,
    /// `check_sys_data`, `check_mtu`). `mtu`: ours, bytes.
    pub fn preamble(&mut self, mtu: u32) -> anyhow::Result<Preamble> {
        let v = self.exchange(&pt::encode_version(pt::VERSION), "version")?;
        debug_assert_eq!(v.len(), VERSION_LEN);
        if v.starts_with(REFUSED) {
            // `roce-xdp serve` explains why on one line after it.
            let why = self.recv_line();
            return Err(user(format!(
                "the server {} refused the connection: {why}",
                self.peer
            )));
        }
        let peer_version = pt::parse_version(&v).map_err(|e| user(e.to_string()))?;
        let bad = |e: pt::ExchangeError| user(e.to_string());
        let cb = self.exchange(&pt::encode_u32(pt::CYCLE_BUFFER), "cycle buffer size")?;
        let cl = self.exchange(&pt::encode_u32(pt::CACHE_LINE), "cache line size")?;
        let m = self.exchange(&pt::encode_mtu(mtu), "MTU")?;
        debug_assert_eq!((cb.len(), m.len()), (SYS_LEN, MTU_LEN));
        Ok(Preamble {
            peer_version,
            cycle_buffer: pt::parse_u32("cycle buffer", &cb)
                .map_err(bad)?
                .max(pt::CYCLE_BUFFER),
            cache_line: pt::parse_u32("cache line", &cl)
                .map_err(bad)?
                .max(pt::CACHE_LINE),
            mtu: pt::parse_mtu(&m).map_err(bad)?.min(mtu),
        })
    }

    /// One key exchange.
    pub fn key(&mut self, mine: &Key) -> anyhow::Result<Key> {
        if self.binary_keys {
            let k = self.exchange(&encode_dest(mine), "QP key")?;
            return parse_dest(&k).ok_or_else(|| user("a short QP key".into()));
        }
        let k = self.exchange(&mine.encode(), "QP key")?;
        debug_assert_eq!(k.len(), KEY_LEN);
        if k.starts_with(REFUSED) {
            let end = k.iter().position(|&b| b == 0).unwrap_or(k.len());
            return Err(user(format!(
                "the server {} {}",
                self.peer,
                String::from_utf8_lossy(&k[..end])
            )));
        }
        Key::parse(&k).map_err(|e| user(e.to_string()))
    }

    /// Refuses the peer in the slot of a message of `len` bytes (a
    /// version or a key): `refused: WHY`, NUL-padded; when it does not fit,
    /// `refused` there and WHY on a line after it. Stock perftest reports
    /// an unusable version or key; roce-xdp prints WHY.
    pub fn refuse(&mut self, len: usize, why: &str) {
        let text = format!("refused: {why}");
        let mut m = vec![0u8; len];
        if text.len() < len {
            m[..text.len()].copy_from_slice(text.as_bytes());
            let _ = self.stream.write_all(&m);
        } else {
            m[..REFUSED.len()].copy_from_slice(REFUSED);
            let _ = self.stream.write_all(&m);
            let _ = self.stream.write_all(format!("{why}\n").as_bytes());
        }
        let _ = self.stream.flush();
    }

    /// A refusal's reason line (best effort, at most 512 bytes).
    fn recv_line(&mut self) -> String {
        let _ = self.stream.set_read_timeout(Some(Duration::from_secs(2)));
        let mut line = Vec::new();
        let mut b = [0u8];
        while line.len() < 512 {
            match self.stream.read(&mut b) {
                Ok(1) if b[0] != b'\n' => line.push(b[0]),
                _ => break,
            }
        }
        String::from_utf8_lossy(&line).trim().to_string()
    }

    /// The bandwidth report exchange (field by field); returns the peer's.
    pub fn report(&mut self, mine: &BwReport) -> anyhow::Result<BwReport> {
        let mut got = Vec::with_capacity(REPORT_FIELDS);
        for f in mine.encode() {
            got.push(self.exchange(&f, "results")?);
        }
        let refs: Vec<&[u8]> = got.iter().map(|f| &f[..REPORT_FIELD_LEN]).collect();
        BwReport::parse(&refs).map_err(|e| user(e.to_string()))
    }

    /// perftest's `"done"` (up to 23.07; nobody reads it). The peer may
    /// have closed already: errors are ignored.
    pub fn done(&mut self) {
        let _ = self.stream.write_all(pt::DONE);
        let _ = self.stream.flush();
    }

    /// Waits (at most the timeout) for the first `n` bytes of the peer's
    /// next message, without consuming them; `None` when it closed.
    pub fn peek_head(&mut self, n: usize) -> anyhow::Result<Option<Vec<u8>>> {
        let deadline = Instant::now() + self.timeout;
        let mut buf = vec![0u8; n];
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(user(format!(
                    "the perftest peer {} stalled: nothing within {:.0} s",
                    self.peer,
                    self.timeout.as_secs_f64()
                )));
            }
            self.stream.set_read_timeout(Some(left))?;
            match self.stream.peek(&mut buf) {
                Ok(0) => return Ok(None),
                Ok(k) if k >= n => return Ok(Some(buf)),
                Ok(_) => std::thread::sleep(Duration::from_millis(1)),
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock
                            | io::ErrorKind::TimedOut
                            | io::ErrorKind::Interrupted
                    ) => {}
                Err(_) => return Ok(None),
            }
        }
    }

    /// Whether the peer has sent something (or closed), without waiting.
    pub fn readable(&mut self) -> anyhow::Result<bool> {
        Ok(self.stream.readable()?)
    }
}

/// Listens on `port` on every address (IPv6 and IPv4 when possible).
pub fn listen(port: u16) -> anyhow::Result<TcpListener> {
    let l = TcpListener::bind(("::", port)).or_else(|_| TcpListener::bind(("0.0.0.0", port)));
    l.map_err(|e| {
        if e.kind() == io::ErrorKind::AddrInUse {
            UserError::Usage(format!(
                "TCP port {port} is already in use (another roce-xdp or perftest server?): stop it or pick another with -p"
            ))
            .into()
        } else {
            anyhow::Error::new(e).context(format!("listening on TCP port {port}"))
        }
    })
}

/// Resolves a host name to an address.
pub fn resolve(addr: &str, port: u16) -> anyhow::Result<IpAddr> {
    if let Ok(ip) = addr.trim_matches(['[', ']']).parse::<IpAddr>() {
        return Ok(ip);
    }
    (addr, port)
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .map(|a| a.ip())
        .ok_or_else(|| {
            anyhow::Error::from(UserError::PeerUnreachable {
                addr: addr.to_string(),
                detail: "cannot resolve the name".into(),
            })
        })
}

#[cfg(test)]
pub mod replay {
    //! A recorded stock perftest peer: what it sent, fed to our side.
    use super::*;

    /// Plays one direction of a transcript (`c HEX` / `s HEX` lines) and
    /// records what we write.
    pub struct Replay {
        pub input: Vec<u8>,
        pub at: usize,
        pub written: Vec<u8>,
    }

    impl Replay {
        /// The bytes `from` ("c" or "s") sent in `transcript`.
        pub fn new(transcript: &str, from: &str) -> Replay {
            let mut input = Vec::new();
            for l in transcript.lines() {
                let (dir, hex) = l.split_once(' ').unwrap();
                if dir != from || hex == "EOF" {
                    continue;
                }
                input.extend(
                    (0..hex.len())
                        .step_by(2)
                        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap()),
                );
            }
            Replay {
                input,
                at: 0,
                written: Vec::new(),
            }
        }
    }

    impl Read for Replay {
        fn read(&mut self, b: &mut [u8]) -> io::Result<usize> {
            let n = b.len().min(self.input.len() - self.at);
            b[..n].copy_from_slice(&self.input[self.at..self.at + n]);
            self.at += n;
            Ok(n)
        }
    }

    impl Write for Replay {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            self.written.extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl Stream for Replay {
        fn set_read_timeout(&mut self, _: Option<Duration>) -> io::Result<()> {
            Ok(())
        }
        fn readable(&mut self) -> io::Result<bool> {
            Ok(true)
        }
        fn peek(&mut self, b: &mut [u8]) -> io::Result<usize> {
            let n = b.len().min(self.input.len() - self.at);
            b[..n].copy_from_slice(&self.input[self.at..self.at + n]);
            Ok(n)
        }
    }
}

#[cfg(test)]
mod dest_tests {
    use super::*;

    /// perftest's `struct pingpong_dest` as `rdma_write_keys` fills it
    /// (HAVE_ENDIAN: each integer `htobe32` / `htobe64`).
    #[test]
    fn keys_as_perftest_rdma_cm_mode_sends_them() {
        let k = Key {
            lid: 0,
            out_reads: 16,
            qpn: 0x12_3456,
            psn: 0xab_cdef,
            rkey: 0x1122_3344,
            vaddr: 0x0000_7f00_dead_beef,
            gid: engine::oob::Gid::from_ip("10.53.0.2".parse().unwrap()),
            srqn: 7,
        };
        let b = encode_dest(&k);
        assert_eq!(&b[0..8], &[0, 0, 0, 0, 0, 0, 0, 16]);
        assert_eq!(&b[8..16], &[0, 0x12, 0x34, 0x56, 0, 0xab, 0xcd, 0xef]);
        assert_eq!(&b[16..24], &[0x11, 0x22, 0x33, 0x44, 0, 0, 0, 0]);
        assert_eq!(&b[24..32], &[0, 0, 0x7f, 0, 0xde, 0xad, 0xbe, 0xef]);
        assert_eq!(
            &b[32..48],
            &[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 53, 0, 2]
        );
        assert_eq!(&b[48..56], &[0, 0, 0, 7, 0, 0, 0, 0]);
        assert_eq!(parse_dest(&b), Some(k));
        assert_eq!(parse_dest(&b[..55]), None);
    }
}
