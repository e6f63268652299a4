//! The connection exchange of roce-xdp's perftest-style tools and of
//! `roce-xdp serve`: newline-terminated text lines over a TCP connection
//! the caller owns (sans-IO: lines in, lines out).
//!
//! 1. client -> server: a [`Hello`] with the test, its parameters and the
//!    client's QPs (QPN, first PSN), GID (IP), MAC, and its buffer's VA,
//!    R_Key and length; server -> client: the server's [`Hello`].
//!    What RC needs to connect is what `ibv_rc_pingpong` and perftest
//!    exchange (`docs/connection-setup.md`), plus the
//!    VA and R_Key for RDMA WRITE / READ / atomics.
//! 2. per message size: client `BEGIN <size> <iters> <duration_ms>`,
//!    server `READY` once its receives are posted / buffers cleared;
//!    the run; client `END <json row>`, server `OK`.
//! 3. client `BYE`.
//!
//! Every line is at most [`MAX_LINE`] bytes; a malformed line is an error,
//! never a panic.

use std::fmt;
use std::net::IpAddr;

/// Protocol tag and version, first word of a hello.
pub const MAGIC: &str = "ROCEXDP-PERF/1";
/// Longest line accepted.
pub const MAX_LINE: usize = 4096;
/// Most QPs one hello may carry.
pub const MAX_QPS: usize = 64;

/// One side's description of itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hello {
    /// Test name, e.g. `write-bw`; `serve` in a server's answer when the
    /// server is `roce-xdp serve`.
    pub test: String,
    /// `(QPN, first PSN)` of each QP, 24-bit values.
    pub qps: Vec<(u32, u32)>,
    pub ip: IpAddr,
    pub mac: [u8; 6],
    /// Buffer the peer may WRITE / READ / run atomics on.
    pub va: u64,
    pub rkey: u32,
    pub len: u64,
    /// Path MTU in bytes.
    pub mtu: u32,
    /// Work requests in flight per QP.
    pub tx_depth: u32,
    /// The NIC queue this side's QPs use. A server with several queues
    /// puts the client's QPs on the same index: frames of a flow must
    /// arrive on the queue whose engine holds the QP (AF_XDP sockets only
    /// see their own RX queue). Absent = 0.
    pub queue: u32,
}

/// Why a line could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError(pub String);

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "malformed connection-exchange message: {}", self.0)
    }
}

impl std::error::Error for ParseError {}

fn err<T>(s: impl Into<String>) -> Result<T, ParseError> {
    Err(ParseError(s.into()))
}

fn mac_text(m: &[u8; 6]) -> String {
    m.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let mut mac = [0u8; 6];
    let mut it = s.split(':');
    for b in mac.iter_mut() {
        let p = it.next()?;
        if p.len() != 2 {
            return None;
        }
        *b = u8::from_str_radix(p, 16).ok()?;
    }
    it.next().is_none().then_some(mac)
}

fn hex_u64(s: &str) -> Option<u64> {
    u64::from_str_radix(s.strip_prefix("0x")?, 16).ok()
}

impl Hello {
    /// The line to send (with its trailing newline).
    pub fn encode(&self) -> String {
        let qps: Vec<String> = self
            .qps
            .iter()
            .map(|(q, p)| format!("{:06x}/{:06x}", q & 0xff_ffff, p & 0xff_ffff))
            .collect();
        format!(
            "{MAGIC} test={} qps={} ip={} mac={} va=0x{:x} rkey=0x{:08x} len={} mtu={} tx_depth={} queue={}\n",
            self.test,
            qps.join(","),
            self.ip,
            mac_text(&self.mac),
            self.va,
            self.rkey,
            self.len,
            self.mtu,
            self.tx_depth,
            self.queue
        )
    }

    /// Parses a hello line (trailing newline optional).
    pub fn decode(line: &str) -> Result<Hello, ParseError> {
        if line.len() > MAX_LINE {
            return err("line too long");
        }
        let mut words = line.trim_end().split(' ');
        match words.next() {
            Some(MAGIC) => {}
            Some(other) => {
                return err(format!(
                    "expected {MAGIC}, got {:?} (is the peer a roce-xdp of the same version?)",
                    other.chars().take(32).collect::<String>()
                ))
            }
            None => return err("empty line"),
        }
        let (mut test, mut qps, mut ip, mut mac, mut va, mut rkey, mut len, mut mtu, mut depth) =
            (None, None, None, None, None, None, None, None, None);
        let mut queue = 0u32;
        for w in words {
            let Some((k, v)) = w.split_once('=') else {
                return err(format!("expected key=value, got {w:?}"));
            };
            match k {
                "test" if !v.is_empty() && v.len() <= 32 => test = Some(v.to_string()),
                "qps" => {
                    let mut list = Vec::new();
                    for item in v.split(',') {
                        let (q, p) = item
                            .split_once('/')
                            .ok_or_else(|| ParseError(format!("bad QP {item:?}")))?;
                        let q = u32::from_str_radix(q, 16)
                            .map_err(|_| ParseError(format!("bad QPN {q:?}")))?;
                        let p = u32::from_str_radix(p, 16)
                            .map_err(|_| ParseError(format!("bad PSN {p:?}")))?;
                        if q > 0xff_ffff || p > 0xff_ffff {
                            return err("QPN and PSN are 24-bit");
                        }
                        list.push((q, p));
                    }
                    if list.is_empty() || list.len() > MAX_QPS {
                        return err(format!("1..={MAX_QPS} QPs expected"));
                    }
                    qps = Some(list);
                }
                "ip" => ip = Some(v.parse().map_err(|_| ParseError(format!("bad ip {v:?}")))?),
                "mac" => {
                    mac = Some(parse_mac(v).ok_or_else(|| ParseError(format!("bad mac {v:?}")))?)
                }
                "va" => va = Some(hex_u64(v).ok_or_else(|| ParseError(format!("bad va {v:?}")))?),
                "rkey" => {
                    let r = hex_u64(v).filter(|r| *r <= u32::MAX as u64);
                    rkey = Some(r.ok_or_else(|| ParseError(format!("bad rkey {v:?}")))? as u32)
                }
                "len" => {
                    len = Some(
                        v.parse()
                            .map_err(|_| ParseError(format!("bad len {v:?}")))?,
                    )
                }
                "mtu" => {
                    mtu = Some(
                        v.parse()
                            .map_err(|_| ParseError(format!("bad mtu {v:?}")))?,
                    )
                }
                "tx_depth" => {
                    depth = Some(
                        v.parse()
                            .map_err(|_| ParseError(format!("bad tx_depth {v:?}")))?,
                    )
                }
                "queue" => {
                    queue = v
                        .parse()
                        .map_err(|_| ParseError(format!("bad queue {v:?}")))?
                }
                _ => {} // unknown keys: ignored, for later additions
            }
        }
        let missing = |n: &str| ParseError(format!("missing {n}"));
        Ok(Hello {
            test: test.ok_or_else(|| missing("test"))?,
            qps: qps.ok_or_else(|| missing("qps"))?,
            ip: ip.ok_or_else(|| missing("ip"))?,
            mac: mac.ok_or_else(|| missing("mac"))?,
            va: va.ok_or_else(|| missing("va"))?,
            rkey: rkey.ok_or_else(|| missing("rkey"))?,
            len: len.ok_or_else(|| missing("len"))?,
            mtu: mtu.ok_or_else(|| missing("mtu"))?,
            tx_depth: depth.ok_or_else(|| missing("tx_depth"))?,
            queue,
        })
    }
}

/// Control lines after the hellos.
#[derive(Debug, Clone, PartialEq)]
pub enum Control {
    /// Client: the next size is about to run.
    Begin {
        size: u64,
        iters: u64,
        duration_ms: u64,
    },
    /// Server: ready for it.
    Ready,
    /// Client: the size finished; its result row (a JSON object, one line).
    End { row: String },
    /// Server: acknowledged.
    Ok,
    /// Client: no more sizes.
    Bye,
    /// Either side: giving up, with the reason.
    Error(String),
}

impl Control {
    /// The line to send (with its trailing newline).
    pub fn encode(&self) -> String {
        match self {
            Control::Begin {
                size,
                iters,
                duration_ms,
            } => format!("BEGIN {size} {iters} {duration_ms}\n"),
            Control::Ready => "READY\n".into(),
            Control::End { row } => format!("END {}\n", row.replace('\n', " ")),
            Control::Ok => "OK\n".into(),
            Control::Bye => "BYE\n".into(),
            Control::Error(e) => format!("ERROR {}\n", e.replace('\n', " ")),
        }
    }

    /// Parses a control line (trailing newline optional).
    pub fn decode(line: &str) -> Result<Control, ParseError> {
        if line.len() > MAX_LINE {
            return err("line too long");
        }
        let line = line.trim_end_matches(['\n', '\r']);
        let (word, rest) = line.split_once(' ').unwrap_or((line, ""));
        Ok(match word {
            "BEGIN" => {
                let v: Vec<u64> = rest
                    .split(' ')
                    .map(|x| x.parse::<u64>())
                    .collect::<Result<_, _>>()
                    .map_err(|_| ParseError(format!("bad BEGIN {rest:?}")))?;
                let [size, iters, duration_ms] = v[..] else {
                    return err(format!("BEGIN needs 3 numbers, got {rest:?}"));
                };
                Control::Begin {
                    size,
                    iters,
                    duration_ms,
                }
            }
            "READY" => Control::Ready,
            "END" => Control::End {
                row: rest.to_string(),
            },
            "OK" => Control::Ok,
            "BYE" => Control::Bye,
            "ERROR" => Control::Error(rest.to_string()),
            _ => {
                return err(format!(
                    "unknown control line {:?}",
                    line.chars().take(32).collect::<String>()
                ))
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hello() -> Hello {
        Hello {
            test: "write-bw".into(),
            qps: vec![(0x11, 0xabcdef), (0x12, 1)],
            ip: "10.47.0.1".parse().unwrap(),
            mac: [2, 0, 0, 0, 0, 0xaa],
            va: 0x7f00_1234_5000,
            rkey: 0xdead_beef,
            len: 8 << 20,
            mtu: 1024,
            tx_depth: 128,
            queue: 1,
        }
    }

    #[test]
    fn hello_round_trips() {
        let h = hello();
        let line = h.encode();
        assert!(line.starts_with("ROCEXDP-PERF/1 test=write-bw qps=000011/abcdef,000012/000001 ip=10.47.0.1 mac=02:00:00:00:00:aa va=0x7f0012345000 rkey=0xdeadbeef"), "{line}");
        assert_eq!(Hello::decode(&line), Ok(h.clone()));
        let v6 = Hello {
            ip: "fd00:47::2".parse().unwrap(),
            ..h
        };
        assert_eq!(Hello::decode(&v6.encode()), Ok(v6));
    }

    #[test]
    fn malformed_hellos_are_errors() {
        let good = hello().encode();
        for bad in [
            String::new(),
            "GET / HTTP/1.1".into(),
            good.replace("rkey=0xdeadbeef", "rkey=zz"),
            good.replace("qps=000011/abcdef,000012/000001", "qps=1000000/0"),
            good.replace("mac=02:00:00:00:00:aa", "mac=02:00"),
            good.replace(" ip=10.47.0.1", ""),
            "x".repeat(MAX_LINE + 1),
        ] {
            assert!(Hello::decode(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn control_round_trips() {
        for c in [
            Control::Begin {
                size: 65536,
                iters: 5000,
                duration_ms: 0,
            },
            Control::Ready,
            Control::End {
                row: "{\"bytes\":2}".into(),
            },
            Control::Ok,
            Control::Bye,
            Control::Error("server runs read-bw".into()),
        ] {
            assert_eq!(Control::decode(&c.encode()), Ok(c));
        }
        assert!(Control::decode("BEGIN 1 2").is_err());
        assert!(Control::decode("NOPE").is_err());
    }
}
