//! perftest's TCP connection exchange (linux-rdma/perftest,
//! `src/perftest_communication.c`, without `-R` / rdma_cm), as pure
//! functions: fixed-size messages in, values out, and the order in which
//! each test exchanges them ([`schedule`]). The caller owns the socket
//! (`cli/src/common/perftest/conn.rs`).
//!
//! Every exchange is symmetric: the client writes its message and then
//! reads the server's; the server reads first (`ctx_xchg_data_ethernet`,
//! `ctx_hand_shake`). Each message is one `write()` of a fixed size, read
//! with one `read()` of that size by perftest, so a message must go out in
//! a single write.
//!
//! | message | bytes | perftest |
//! |---|---|---|
//! | version | 16, NUL-padded text (`"6.06"`) | `exchange_versions` |
//! | cycle buffer, cache line | 4 + 4, big-endian; each side takes the larger | `check_sys_data` (peer >= 5.32) |
//! | MTU | 2: the `ibv_mtu` digit and NUL; each side takes the smaller | `check_mtu` (peer >= 5.31) |
//! | key | 108: `%04x:%04x:%06x:%06x:%08x:%016llx:` + 16 × `%02x:` + `%08x:` + NUL | `ethernet_write_keys` (lid, out_reads, qpn, psn, rkey, vaddr, gid, srqn) |
//! | bandwidth report | 5 × 8, big-endian (size, iters, peak, avg MB/s, Mpps) | `xchg_bw_reports` (peer >= 5.33) |
//! | `done` | 5 (`"done\0"`), written by both, read by neither; gone in 23.10 | `ctx_close_connection` |
//!
//! Peers announcing 6.28 or later negotiate parameters only with a peer
//! that announces 6.28 or later too (`negotiate_params`); we announce
//! [`VERSION`], so every perftest from 4.4 (5.60) to 26.x speaks the
//! table above with us. Recorded transcripts of stock perftest 4.5 and
//! 25.01 (`interop/perftest/transcripts/`) are checked in the tests below.

use std::fmt;
use std::net::IpAddr;

use super::gid::Gid;

/// The internal protocol version we announce: perftest 4.5's. Above 5.70
/// (the oldest a 4.5 accepts), at least 5.33 (8-byte iteration counts in
/// reports), below 6.28 (no parameter negotiation).
pub const VERSION: &str = "6.06";
/// Oldest peer version whose exchange we speak (reports with 8-byte
/// iteration counts, 2-byte MTU, cycle buffer exchange).
pub const MIN_PEER_VERSION: f64 = 5.33;

pub const VERSION_LEN: usize = 16;
pub const SYS_LEN: usize = 4;
pub const MTU_LEN: usize = 2;
pub const KEY_LEN: usize = 108;
pub const REPORT_FIELD_LEN: usize = 8;
pub const REPORT_FIELDS: usize = 5;
/// perftest's closing message up to 23.07.
pub const DONE: &[u8; 5] = b"done\0";

/// Default cycle buffer (perftest: the page size) and cache line size.
pub const CYCLE_BUFFER: u32 = 4096;
pub const CACHE_LINE: u32 = 64;

/// Why a message could not be used.
#[derive(Debug, Clone, PartialEq)]
pub enum ExchangeError {
    /// Not the length the exchange needs at this point.
    Length {
        what: &'static str,
        want: usize,
        got: usize,
    },
    /// The peer announced a version whose exchange differs from ours.
    Version { ours: String, theirs: String },
    /// A field that does not parse.
    Field { what: &'static str, text: String },
}

impl fmt::Display for ExchangeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExchangeError::Length { what, want, got } => {
                write!(f, "perftest {what}: expected {want} bytes, got {got}")
            }
            ExchangeError::Version { ours, theirs } => write!(
                f,
                "the peer speaks perftest protocol version {theirs:?}, this side {ours} (supported: {MIN_PEER_VERSION:.2} and later, i.e. perftest 4.4 through 26.x)"
            ),
            ExchangeError::Field { what, text } => {
                write!(f, "perftest {what}: cannot parse {text:?}")
            }
        }
    }
}

impl std::error::Error for ExchangeError {}

fn exact<'a>(what: &'static str, b: &'a [u8], want: usize) -> Result<&'a [u8], ExchangeError> {
    if b.len() == want {
        Ok(b)
    } else {
        Err(ExchangeError::Length {
            what,
            want,
            got: b.len(),
        })
    }
}

/// Text up to the first NUL, lossy.
fn c_str(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}

/// A peer's announced version: the text and its value as perftest reads
/// it (`atof`).
#[derive(Debug, Clone, PartialEq)]
pub struct Version {
    pub text: String,
    pub value: f64,
}

/// The 16-byte version message.
pub fn encode_version(v: &str) -> [u8; VERSION_LEN] {
    let mut m = [0u8; VERSION_LEN];
    let n = v.len().min(VERSION_LEN - 1);
    m[..n].copy_from_slice(&v.as_bytes()[..n]);
    m
}

/// Parses a version message and checks that we speak its exchange.
pub fn parse_version(b: &[u8]) -> Result<Version, ExchangeError> {
    let b = exact("version", b, VERSION_LEN)?;
    let text = c_str(b);
    // atof: the longest prefix of digits and one dot.
    let mut end = 0;
    let mut dot = false;
    for (i, c) in text.char_indices() {
        if c.is_ascii_digit() || (c == '.' && !dot) {
            dot |= c == '.';
            end = i + 1;
        } else {
            break;
        }
    }
    let value: f64 = text[..end].parse().unwrap_or(0.0);
    if value.is_nan() || value < MIN_PEER_VERSION {
        return Err(ExchangeError::Version {
            ours: VERSION.into(),
            theirs: text,
        });
    }
    Ok(Version { text, value })
}

/// A 4-byte big-endian integer (cycle buffer, cache line size).
pub fn encode_u32(v: u32) -> [u8; SYS_LEN] {
    v.to_be_bytes()
}

pub fn parse_u32(what: &'static str, b: &[u8]) -> Result<u32, ExchangeError> {
    let b = exact(what, b, SYS_LEN)?;
    Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

/// The MTU message: `ibv_mtu` (1 = 256 ... 5 = 4096) as one ASCII digit
/// and a NUL (`sprintf("%d")` into 2 bytes).
pub fn encode_mtu(mtu_bytes: u32) -> [u8; MTU_LEN] {
    let e = match mtu_bytes {
        256 => 1,
        512 => 2,
        1024 => 3,
        2048 => 4,
        _ => 5,
    };
    [b'0' + e, 0]
}

/// The peer's MTU in bytes.
pub fn parse_mtu(b: &[u8]) -> Result<u32, ExchangeError> {
    let b = exact("MTU", b, MTU_LEN)?;
    match b[0] {
        b'1'..=b'5' if b[1] == 0 || b[1].is_ascii_digit() => Ok(128 << (b[0] - b'0')),
        _ => Err(ExchangeError::Field {
            what: "MTU",
            text: c_str(b),
        }),
    }
}

/// One QP's connection data (`struct pingpong_dest` on the wire).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Key {
    pub lid: u16,
    /// The READ / atomic responder depth this side offers
    /// (`max_dest_rd_atomic`); the peer keeps at most this many in flight.
    pub out_reads: u32,
    pub qpn: u32,
    pub psn: u32,
    pub rkey: u32,
    pub vaddr: u64,
    pub gid: Gid,
    pub srqn: u32,
}

impl Key {
    /// The 108-byte message.
    pub fn encode(&self) -> [u8; KEY_LEN] {
        use std::fmt::Write as _;
        let mut s = String::with_capacity(KEY_LEN);
        let _ = write!(
            s,
            "{:04x}:{:04x}:{:06x}:{:06x}:{:08x}:{:016x}:",
            self.lid,
            self.out_reads & 0xffff,
            self.qpn & 0xff_ffff,
            self.psn & 0xff_ffff,
            self.rkey,
            self.vaddr
        );
        for b in self.gid.0 {
            let _ = write!(s, "{b:02x}:");
        }
        let _ = write!(s, "{:08x}:", self.srqn);
        let mut m = [0u8; KEY_LEN];
        m[..s.len()].copy_from_slice(s.as_bytes());
        m
    }

    /// Parses a key message.
    pub fn parse(b: &[u8]) -> Result<Key, ExchangeError> {
        let b = exact("key", b, KEY_LEN)?;
        let text = c_str(b);
        let bad = || ExchangeError::Field {
            what: "key",
            text: text.clone(),
        };
        let f: Vec<&str> = text.split(':').collect();
        // 6 numbers, 16 GID bytes, the SRQ number, and the empty tail.
        if f.len() != 24 || !f[23].is_empty() {
            return Err(bad());
        }
        let hex = |s: &str, max: u64| {
            (!s.is_empty() && s.len() <= 16)
                .then(|| u64::from_str_radix(s, 16).ok())
                .flatten()
                .filter(|v| *v <= max)
                .ok_or_else(bad)
        };
        let mut gid = [0u8; 16];
        for (i, g) in gid.iter_mut().enumerate() {
            *g = hex(f[6 + i], 0xff)? as u8;
        }
        Ok(Key {
            lid: hex(f[0], 0xffff)? as u16,
            out_reads: hex(f[1], 0xffff)? as u32,
            qpn: hex(f[2], 0xff_ffff)? as u32,
            psn: hex(f[3], 0xff_ffff)? as u32,
            rkey: hex(f[4], u32::MAX as u64)? as u32,
            vaddr: hex(f[5], u64::MAX)?,
            gid: Gid(gid),
            srqn: hex(f[22], u32::MAX as u64)? as u32,
        })
    }

    /// The peer's address (its GID).
    pub fn ip(&self) -> IpAddr {
        self.gid.to_ip()
    }
}

/// A bandwidth result as `xchg_bw_reports` sends it (`report_per_port`
/// off): MB/s are 2^20 bytes per second, the message rate in 10^6 per
/// second. Each field is exchanged on its own (client first).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct BwReport {
    pub size: u64,
    pub iters: u64,
    pub bw_peak_mbs: f64,
    pub bw_avg_mbs: f64,
    pub msg_rate_mpps: f64,
}

impl BwReport {
    pub fn encode(&self) -> [[u8; REPORT_FIELD_LEN]; REPORT_FIELDS] {
        [
            self.size.to_be_bytes(),
            self.iters.to_be_bytes(),
            self.bw_peak_mbs.to_bits().to_be_bytes(),
            self.bw_avg_mbs.to_bits().to_be_bytes(),
            self.msg_rate_mpps.to_bits().to_be_bytes(),
        ]
    }

    /// From the five fields received (each 8 bytes).
    pub fn parse(fields: &[&[u8]]) -> Result<BwReport, ExchangeError> {
        if fields.len() != REPORT_FIELDS {
            return Err(ExchangeError::Length {
                what: "bandwidth report fields",
                want: REPORT_FIELDS,
                got: fields.len(),
            });
        }
        let mut v = [0u64; REPORT_FIELDS];
        for (o, f) in v.iter_mut().zip(fields) {
            let f = exact("bandwidth report", f, REPORT_FIELD_LEN)?;
            let mut a = [0u8; 8];
            a.copy_from_slice(f);
            *o = u64::from_be_bytes(a);
        }
        Ok(BwReport {
            size: v[0],
            iters: v[1],
            bw_peak_mbs: f64::from_bits(v[2]),
            bw_avg_mbs: f64::from_bits(v[3]),
            msg_rate_mpps: f64::from_bits(v[4]),
        })
    }
}

/// The perftest test whose exchange order to follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Test {
    WriteBw,
    ReadBw,
    SendBw,
    AtomicBw,
    WriteLat,
    ReadLat,
    SendLat,
    AtomicLat,
}

impl Test {
    pub fn is_latency(self) -> bool {
        matches!(
            self,
            Test::WriteLat | Test::ReadLat | Test::SendLat | Test::AtomicLat
        )
    }
}

/// Which end of the TCP connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Client,
    Server,
}

/// One step of a test's exchange, in order. The message steps are
/// exchanged (client writes first); the others are local actions at that
/// point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    Version,
    CycleBuffer,
    CacheLine,
    Mtu,
    /// QP `qp`'s key before the QPs connect: what to connect to.
    SetupKey {
        qp: usize,
    },
    /// Local: connect the QPs to the setup keys.
    Connect,
    /// QP `qp`'s key again, after connecting (a barrier; contents as
    /// before).
    Key {
        qp: usize,
    },
    /// Local (send tests, server): post the receives for size `size`.
    PostRecvs {
        size: usize,
    },
    /// Local: run size number `size` (the client drives it; a passive
    /// server waits for the next message step).
    Run {
        size: usize,
    },
    /// The bandwidth report (client's result to the server).
    Report,
    /// Both write [`DONE`] (nobody reads it) and close.
    Done,
}

/// The exchange of `test` with `qps` QPs over `sizes` message sizes (1,
/// or 23 for `-a`), half duplex (`-b` exchanges reports per size, see
/// [`schedule_duplex`]). Read from perftest 4.5's and 26.x's mains
/// (`write_bw.c`, `send_lat.c`, ...): bandwidth tests exchange the keys
/// per QP, connect, again per QP and once more; latency tests start with
/// one more key; send tests connect after the first round and sync on
/// each size once the receives are posted.
pub fn schedule(test: Test, qps: usize, sizes: usize) -> Vec<Step> {
    use Step::*;
    let mut s = vec![Version, CycleBuffer, CacheLine, Mtu];
    let per_qp = |s: &mut Vec<Step>, setup: bool| {
        for qp in 0..qps {
            s.push(if setup { SetupKey { qp } } else { Key { qp } });
        }
    };
    // Setup keys, connect, keys again, one more, the runs.
    let connect_and_run = |s: &mut Vec<Step>| {
        per_qp(s, true);
        s.push(Connect);
        per_qp(s, false);
        s.push(Key { qp: 0 });
        s.extend((0..sizes).map(|size| Run { size }));
    };
    match test {
        Test::SendBw | Test::SendLat => {
            // send_bw.c / send_lat.c: keys, connect, barrier, keys.
            per_qp(&mut s, true);
            s.push(Connect);
            s.push(Key { qp: 0 });
            per_qp(&mut s, false);
            for size in 0..sizes {
                s.push(PostRecvs { size });
                s.push(Key { qp: 0 });
                s.push(Run { size });
                if test == Test::SendBw && sizes > 1 {
                    s.push(Key { qp: 0 });
                }
            }
            s.push(Key { qp: 0 });
            s.push(Done);
        }
        Test::WriteLat | Test::ReadLat | Test::AtomicLat => {
            s.push(Key { qp: 0 });
            connect_and_run(&mut s);
            if test != Test::WriteLat {
                // The server waits here for the client's end.
                s.push(Key { qp: 0 });
                s.push(Done);
            }
        }
        Test::WriteBw | Test::ReadBw | Test::AtomicBw => {
            connect_and_run(&mut s);
            s.push(Key { qp: 0 });
            s.push(Report);
            s.push(Key { qp: 0 });
            s.push(Done);
        }
    }
    s
}

/// The latency tests' first key (before the per-QP round) comes from QP 0:
/// [`Step::Key`] `{ qp: 0 }` ahead of any [`Step::SetupKey`]. Its contents
/// equal QP 0's setup key, so a receiver may take it as that.
pub fn is_early_key(steps: &[Step], i: usize) -> bool {
    matches!(steps.get(i), Some(Step::Key { .. }))
        && !steps[..i]
            .iter()
            .any(|s| matches!(s, Step::SetupKey { .. }))
}

/// Bidirectional (`-b`) bandwidth tests (write/read/atomic): both sides
/// run, with a barrier before each size and, from 4.6 on, after it, and
/// the reports exchanged after each size (`write_bw.c`, duplex).
pub fn schedule_duplex(test: Test, qps: usize, sizes: usize) -> Vec<Step> {
    use Step::*;
    let mut s = vec![Version, CycleBuffer, CacheLine, Mtu];
    for qp in 0..qps {
        s.push(SetupKey { qp });
    }
    s.push(Connect);
    for qp in 0..qps {
        s.push(Key { qp });
    }
    s.push(Key { qp: 0 });
    for size in 0..sizes {
        if test == Test::SendBw {
            s.push(PostRecvs { size });
        }
        s.push(Key { qp: 0 });
        s.push(Run { size });
        if sizes > 1 {
            s.push(Key { qp: 0 });
        }
        s.push(Report);
    }
    s.push(Key { qp: 0 });
    s.push(Done);
    s
}

/// Byte length of a message step (0 for local actions).
pub fn step_len(step: Step) -> usize {
    match step {
        Step::Version => VERSION_LEN,
        Step::CycleBuffer | Step::CacheLine => SYS_LEN,
        Step::Mtu => MTU_LEN,
        Step::SetupKey { .. } | Step::Key { .. } => KEY_LEN,
        Step::Report => REPORT_FIELD_LEN * REPORT_FIELDS,
        Step::Done => DONE.len(),
        Step::Connect | Step::PostRecvs { .. } | Step::Run { .. } => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::super::perftest_transcripts::{Transcript, TRANSCRIPTS};
    use super::*;

    fn key() -> Key {
        Key {
            lid: 0,
            out_reads: 0x80,
            qpn: 0x11,
            psn: 0x1ebd45,
            rkey: 0x295,
            vaddr: 0x55e1_2384_7000,
            gid: Gid::from_ip("10.53.0.11".parse().unwrap()),
            srqn: 0,
        }
    }

    #[test]
    fn key_is_perftests_format() {
        let m = key().encode();
        let text = std::str::from_utf8(&m[..107]).unwrap();
        assert_eq!(
            text,
            "0000:0080:000011:1ebd45:00000295:000055e123847000:00:00:00:00:00:00:00:00:00:00:ff:ff:0a:35:00:0b:00000000:"
        );
        assert_eq!(m[107], 0);
        assert_eq!(Key::parse(&m), Ok(key()));
        assert_eq!(key().ip(), "10.53.0.11".parse::<IpAddr>().unwrap());
    }

    #[test]
    fn malformed_keys_are_errors() {
        let good = key().encode();
        assert!(Key::parse(&good[..107]).is_err());
        let mut m = good;
        m[5] = b'z';
        assert!(Key::parse(&m).is_err());
        let mut m = good;
        m[106] = b'0'; // no trailing colon
        assert!(Key::parse(&m).is_err());
        assert!(Key::parse(&[0u8; KEY_LEN]).is_err());
        assert!(Key::parse(&[b':'; KEY_LEN]).is_err());
        let mut m = good;
        m[10] = b'1'; // QPN wider than 24 bits
        m[11] = b'1';
        assert!(Key::parse(&m).is_ok()); // 6 digits still
        let long = "0000:0080:10000011:1ebd45:00000295:000055e123847000:00:00:00:00:00:00:00:00:00:00:ff:ff:0a:35:00:0b:0:";
        let mut m = [0u8; KEY_LEN];
        m[..long.len()].copy_from_slice(long.as_bytes());
        assert!(Key::parse(&m).is_err(), "QPN > 24 bits");
    }

    #[test]
    fn versions() {
        assert_eq!(&encode_version("6.06")[..5], b"6.06\0");
        assert_eq!(parse_version(&encode_version("6.06")).unwrap().value, 6.06);
        assert_eq!(parse_version(&encode_version("6.29")).unwrap().value, 6.29);
        assert_eq!(parse_version(&encode_version("5.60")).unwrap().value, 5.60);
        for old in ["5.32", "4.5", "", "x6.0"] {
            match parse_version(&encode_version(old)) {
                Err(e @ ExchangeError::Version { .. }) => {
                    let t = e.to_string();
                    assert!(t.contains(VERSION) && t.contains(old), "{t}");
                }
                other => panic!("{old}: {other:?}"),
            }
        }
        assert!(parse_version(b"6.06").is_err());
    }

    #[test]
    fn mtu_and_sys() {
        for m in [256, 512, 1024, 2048, 4096] {
            assert_eq!(parse_mtu(&encode_mtu(m)), Ok(m));
        }
        assert_eq!(encode_mtu(1024), *b"3\0");
        assert!(parse_mtu(b"9\0").is_err());
        assert_eq!(parse_u32("cycle buffer", &encode_u32(4096)), Ok(4096));
        assert!(parse_u32("cycle buffer", &[0; 3]).is_err());
    }

    #[test]
    fn report_round_trips() {
        let r = BwReport {
            size: 4096,
            iters: 5,
            bw_peak_mbs: 17.98,
            bw_avg_mbs: 3.13,
            msg_rate_mpps: 0.000802,
        };
        let f = r.encode();
        let refs: Vec<&[u8]> = f.iter().map(|x| &x[..]).collect();
        assert_eq!(BwReport::parse(&refs), Ok(r));
        assert!(BwReport::parse(&refs[..4]).is_err());
    }

    /// Walks `steps` over both directions of a transcript: every message
    /// parses, and both streams are consumed exactly.
    fn check(t: &Transcript) {
        let (name, test, qps, sizes) = (t.name, t.test, t.qps, t.sizes);
        let (c, s) = (t.stream("c"), t.stream("s"));
        let (mut ci, mut si) = (0, 0);
        let steps = schedule(test, qps, sizes);
        let mut setup = vec![None; qps];
        for (i, &step) in steps.iter().enumerate() {
            let n = step_len(step);
            if n == 0 {
                continue;
            }
            for (stream, at, side) in [(&c, &mut ci, "client"), (&s, &mut si, "server")] {
                if step == Step::Done && *at == stream.len() {
                    continue; // 23.10 and later send no "done"
                }
                let m = stream
                    .get(*at..*at + n)
                    .unwrap_or_else(|| panic!("{name}: {side} stream ends before {step:?} (#{i})"));
                *at += n;
                match step {
                    Step::Version => {
                        assert_eq!(parse_version(m).unwrap().text, t.version, "{name}");
                    }
                    Step::CycleBuffer => assert_eq!(parse_u32("cycle", m), Ok(CYCLE_BUFFER)),
                    Step::CacheLine => assert_eq!(parse_u32("cache line", m), Ok(CACHE_LINE)),
                    Step::Mtu => assert_eq!(parse_mtu(m), Ok(1024)),
                    Step::SetupKey { qp } | Step::Key { qp } => {
                        let k = Key::parse(m)
                            .unwrap_or_else(|e| panic!("{name}: {side} {step:?}: {e}"));
                        // The recording VM: 10.53.0.11 (4.5), 10.53.2.11 (25.01).
                        let ip = k.ip().to_string();
                        assert!(ip.starts_with("10.53.") && ip.ends_with(".11"), "{ip}");
                        if side == "client" {
                            if let Step::SetupKey { qp } = step {
                                setup[qp] = Some(k);
                            } else if !is_early_key(&steps, i) {
                                assert_eq!(Some(k), setup[qp], "{name}: key {qp} changed");
                            }
                        }
                    }
                    Step::Report => {
                        let f: Vec<&[u8]> = m.chunks(REPORT_FIELD_LEN).collect();
                        let r = BwReport::parse(&f).unwrap();
                        if side == "client" {
                            assert_eq!(r.size, if test == Test::AtomicBw { 8 } else { 4096 });
                            assert!(r.bw_avg_mbs > 0.0 && r.msg_rate_mpps > 0.0, "{r:?}");
                        }
                    }
                    Step::Done => assert_eq!(m, DONE),
                    _ => {}
                }
            }
        }
        assert_eq!((ci, si), (c.len(), s.len()), "{name}: bytes left over");
    }

    #[test]
    fn stock_perftest_transcripts_follow_the_schedules() {
        for t in &TRANSCRIPTS {
            if t.version == "6.24" {
                assert!(
                    !t.text.contains(" 646f6e6500"),
                    "{}: 25.01 sends no done",
                    t.name
                );
            }
            check(t);
        }
    }

    #[test]
    fn read_tests_announce_their_responder_depth() {
        let c = TRANSCRIPTS[3].stream("c");
        assert_eq!(TRANSCRIPTS[3].name, "read_bw");
        let k = Key::parse(&c[28..28 + KEY_LEN]).unwrap();
        assert_eq!(k.out_reads, 0x80, "rxe's max_qp_rd_atom");
    }
}
