//! The connection exchange of roce-xdp's RDMA WRITE / READ interop test
//! against a stock libibverbs device: `roce-xdp interop rdma-client` (the active
//! side, on the engine) and `interop/peer/rdma_target.c` (the passive side,
//! our own small libibverbs program run on Soft-RoCE in the test VM).
//!
//! Stock perftest (`ib_write_bw` / `ib_read_bw`) would be the natural peer,
//! but its TCP exchange (version strings, binary parameter structs, several
//! sync rounds) changes between perftest releases; this exchange carries
//! only what RC WRITE / READ needs (`docs/connection-setup.md`: QPN, first
//! PSN, GID, plus the buffer's VA and R_Key) and has a
//! closing handshake, so the target can check the bytes and neither side
//! exits while the other still needs ACKs.
//!
//! | step | client (engine)                       | target                                   |
//! |------|---------------------------------------|------------------------------------------|
//! | 1    | connect, write its [`TargetAddr`] line | read it, move its QP to RTR and RTS     |
//! | 2    | read the target's [`TargetAddr`]       | write its line                           |
//! | 3    | WRITE / READ, all completions         | (passive)                                |
//! | 4    | write [`DONE_LINE`]                   | compare its buffer with [`pattern`]      |
//! | 5    | read the [`Verdict`] line, exit       | write `ok <bytes>` or `bad <off> <got> <want>` |
//!
//! A [`TargetAddr`] line is `QQQQQQ:PPPPPP:<GID, 32 hex>:<VA, 16 hex>:RRRRRRRR:LLLLLLLL\n`
//! (lower-case hex, fixed widths). The target's buffer holds `size * iters`
//! bytes; iteration `i` covers bytes `[i * size, (i + 1) * size)`.
//! For READ the target fills it with [`pattern`] first; for WRITE it starts
//! zeroed and must hold [`pattern`] at the end.

use core::fmt;

use super::gid::Gid;

/// The client's closing line: all its work requests completed.
pub const DONE_LINE: &str = "done\n";
/// Longest line either side sends (the address line is 82 bytes with its newline).
pub const MAX_LINE: usize = 128;

/// Byte `k` of the test buffer: the top byte of `k * 2654435761 mod 2^32`
/// (Knuth's multiplicative hash), so every offset of a transfer carries a
/// different-looking byte and a misplaced packet shows up.
pub fn pattern(k: u64) -> u8 {
    ((k as u32).wrapping_mul(2_654_435_761) >> 24) as u8
}

/// Fills `buf` with [`pattern`] as if it started at buffer offset `start`.
pub fn fill_pattern(buf: &mut [u8], start: u64) {
    for (i, b) in buf.iter_mut().enumerate() {
        *b = pattern(start + i as u64);
    }
}

/// The first offset (relative to `buf`) where `buf` differs from
/// [`pattern`] starting at `start`, if any.
pub fn first_mismatch(buf: &[u8], start: u64) -> Option<usize> {
    buf.iter()
        .enumerate()
        .position(|(i, &b)| b != pattern(start + i as u64))
}

/// One side's QP and buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TargetAddr {
    /// 24-bit QP number.
    pub qpn: u32,
    /// 24-bit first PSN of this side's send queue.
    pub psn: u32,
    pub gid: Gid,
    /// Virtual address of the buffer the peer may WRITE / READ.
    pub va: u64,
    pub rkey: u32,
    /// Buffer length in bytes.
    pub len: u32,
}

/// Why a line could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError(pub &'static str);

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "malformed rdma-target message: {}", self.0)
    }
}

impl std::error::Error for ParseError {}

fn hex_field(s: &str, width: usize, what: &'static str) -> Result<u64, ParseError> {
    if s.len() != width || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(ParseError(what));
    }
    u64::from_str_radix(s, 16).map_err(|_| ParseError(what))
}

impl TargetAddr {
    /// The line to send, newline included.
    pub fn encode(&self) -> String {
        let gid: String = self.gid.0.iter().map(|b| format!("{b:02x}")).collect();
        format!(
            "{:06x}:{:06x}:{gid}:{:016x}:{:08x}:{:08x}\n",
            self.qpn & 0xff_ffff,
            self.psn & 0xff_ffff,
            self.va,
            self.rkey,
            self.len
        )
    }

    /// Parses a line (trailing newline optional).
    pub fn parse(line: &str) -> Result<TargetAddr, ParseError> {
        let line = line.strip_suffix('\n').unwrap_or(line);
        if line.len() > MAX_LINE {
            return Err(ParseError("line too long"));
        }
        let f: Vec<&str> = line.split(':').collect();
        if f.len() != 6 {
            return Err(ParseError("expected 6 ':'-separated fields"));
        }
        let gid_text = f[2];
        if gid_text.len() != 32 || !gid_text.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(ParseError("GID must be 32 hex digits"));
        }
        let mut gid = [0u8; 16];
        for (i, b) in gid.iter_mut().enumerate() {
            *b = u8::from_str_radix(&gid_text[2 * i..2 * i + 2], 16)
                .map_err(|_| ParseError("GID must be 32 hex digits"))?;
        }
        Ok(TargetAddr {
            qpn: hex_field(f[0], 6, "QPN must be 6 hex digits")? as u32,
            psn: hex_field(f[1], 6, "PSN must be 6 hex digits")? as u32,
            gid: Gid(gid),
            va: hex_field(f[3], 16, "VA must be 16 hex digits")?,
            rkey: hex_field(f[4], 8, "R_Key must be 8 hex digits")? as u32,
            len: hex_field(f[5], 8, "length must be 8 hex digits")? as u32,
        })
    }
}

/// The target's answer to [`DONE_LINE`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The whole buffer held the pattern (`ok <bytes>`).
    Ok { bytes: u64 },
    /// First wrong byte (`bad <offset> <got> <want>`).
    Bad { offset: u64, got: u8, want: u8 },
}

impl Verdict {
    /// The line to send, newline included.
    pub fn encode(&self) -> String {
        match *self {
            Verdict::Ok { bytes } => format!("ok {bytes}\n"),
            Verdict::Bad { offset, got, want } => format!("bad {offset} {got} {want}\n"),
        }
    }

    /// Parses the target's last line.
    pub fn parse(line: &str) -> Result<Verdict, ParseError> {
        let mut w = line.split_ascii_whitespace();
        let num = |s: Option<&str>| -> Result<u64, ParseError> {
            s.and_then(|s| s.parse().ok())
                .ok_or(ParseError("verdict: expected a decimal number"))
        };
        match w.next() {
            Some("ok") => Ok(Verdict::Ok {
                bytes: num(w.next())?,
            }),
            Some("bad") => Ok(Verdict::Bad {
                offset: num(w.next())?,
                got: num(w.next())? as u8,
                want: num(w.next())? as u8,
            }),
            _ => Err(ParseError("verdict: expected \"ok ...\" or \"bad ...\"")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::net::Ipv4Addr;

    #[test]
    fn address_line_round_trips_with_fixed_widths() {
        let a = TargetAddr {
            qpn: 0x11,
            psn: 0xabcdef,
            gid: Gid::from_ipv4(Ipv4Addr::new(10, 99, 0, 11)),
            va: 0x5555_dead_b000,
            rkey: 0x1234,
            len: 655_360,
        };
        let line = a.encode();
        assert_eq!(
            line,
            "000011:abcdef:00000000000000000000ffff0a63000b:00005555deadb000:00001234:000a0000\n"
        );
        assert_eq!(line.len(), 82);
        assert_eq!(TargetAddr::parse(&line), Ok(a));
    }

    #[test]
    fn malformed_address_lines_are_errors() {
        for bad in [
            "",
            "000011:abcdef",
            "00011:abcdef:00000000000000000000ffff0a63000b:00005555deadb000:00001234:000a0000",
            "000011:abcdef:00000000000000000000ffff0a63000:00005555deadb000:00001234:000a0000",
            "000011:abcdef:00000000000000000000ffff0a63000g:00005555deadb000:00001234:000a0000",
            "000011:abcdef:00000000000000000000ffff0a63000b:00005555deadb000:00001234:000a0000:1",
        ] {
            assert!(TargetAddr::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn pattern_matches_the_c_target() {
        // Values computed by hand: (k * 2654435761) mod 2^32 >> 24.
        assert_eq!(pattern(0), 0);
        assert_eq!(pattern(1), 0x9e);
        assert_eq!(pattern(2), 0x3c);
        assert_eq!(
            pattern(1 << 32),
            0,
            "offsets wrap at 2^32 as in C's uint32_t"
        );
        let mut buf = vec![0u8; 100];
        fill_pattern(&mut buf, 4000);
        assert_eq!(first_mismatch(&buf, 4000), None);
        buf[37] ^= 1;
        assert_eq!(first_mismatch(&buf, 4000), Some(37));
    }

    #[test]
    fn verdicts() {
        assert_eq!(
            Verdict::parse("ok 655360"),
            Ok(Verdict::Ok { bytes: 655_360 })
        );
        assert_eq!(
            Verdict::parse("bad 4096 0 158\n"),
            Ok(Verdict::Bad {
                offset: 4096,
                got: 0,
                want: 158
            })
        );
        for v in [
            Verdict::Ok { bytes: 1 },
            Verdict::Bad {
                offset: 7,
                got: 1,
                want: 2,
            },
        ] {
            assert_eq!(Verdict::parse(&v.encode()), Ok(v));
        }
        assert!(Verdict::parse("").is_err());
        assert!(Verdict::parse("ok x").is_err());
    }
}
