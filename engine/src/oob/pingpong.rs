//! rdma-core's `ibv_rc_pingpong` connection exchange and report format.
//!
//! Read from rdma-core `libibverbs/examples/rc_pingpong.c` and `pingpong.c`
//! (behaviour only; nothing copied). The exchange runs over one TCP
//! connection, default port [`DEFAULT_TCP_PORT`]:
//!
//! | step | client (has a server address)     | server (no address)                       |
//! |------|-----------------------------------|-------------------------------------------|
//! | 1    | connect                           | accept one connection                     |
//! | 2    | write its [`Dest`] (52 bytes)      | read the client's [`Dest`] (52 bytes)     |
//! | 3    |                                   | move its QP to RTR and RTS                |
//! | 4    | read the server's [`Dest`]        | write its [`Dest`] (52 bytes)             |
//! | 5    | write [`DONE`] (5 bytes), close   | read [`DONE`] (expects exactly 5), close  |
//! | 6    | move its QP to RTR and RTS, post the first SEND | wait for the first RECV     |
//!
//! The server checks that its last `read()` returned exactly `DONE.len()`
//! bytes, so a client must send `done\0` in one write.
//!
//! A [`Dest`] is the text `LLLL:QQQQQQ:PPPPPP:GGGG...G` plus a NUL: LID
//! (`%04x`), QPN (`%06x`), PSN (`%06x`) and the GID as four `%08x` groups,
//! one per big-endian 32-bit word of the 16-byte GID (32 hex digits). With
//! RoCE the LID is 0 and the GID is the IPv4-mapped address (`-g 1` on
//! Soft-RoCE). Without `-g`, `ibv_rc_pingpong` sends an all-zero GID and then
//! cannot address a RoCE peer.

use core::fmt;

use super::gid::Gid;

/// TCP port `ibv_rc_pingpong` listens on / connects to without `-p`.
pub const DEFAULT_TCP_PORT: u16 = 18515;
/// Default message size (`-s`).
pub const DEFAULT_SIZE: u32 = 4096;
/// Default number of exchanges (`-n`).
pub const DEFAULT_ITERS: u32 = 1000;
/// Default path MTU in bytes (`-m`).
pub const DEFAULT_MTU: u32 = 1024;
/// Default number of receives posted at a time (`-r`).
pub const DEFAULT_RX_DEPTH: u32 = 500;
/// The byte `ibv_rc_pingpong` fills its buffer with before the first SEND.
pub const FILL_BYTE: u8 = 0x7b;

/// Length of one [`Dest`] message on the wire, NUL included.
pub const DEST_MSG_LEN: usize = 52;
/// The client's final message: `done` plus a NUL.
pub const DONE: &[u8; 5] = b"done\0";

/// QP attributes `ibv_rc_pingpong` sets when it connects (`pp_connect_ctx`).
/// Both roles use the same values; the path MTU comes from `-m`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpAttrs {
    /// Local ACK timeout exponent: 4.096 us * 2^14 = 67.1 ms.
    pub timeout: u8,
    /// Retries after a timeout or sequence error (7; rxe treats 7 as infinite).
    pub retry_cnt: u8,
    /// RNR retries (7 = infinite, per the IB spec).
    pub rnr_retry: u8,
    /// RNR NAK timer code the responder advertises (12 = 0.64 ms).
    pub min_rnr_timer: u8,
    /// Incoming RDMA READ / atomic requests the responder accepts at once.
    pub max_dest_rd_atomic: u8,
    /// Outstanding RDMA READ / atomic requests the requester may issue.
    pub max_rd_atomic: u8,
    /// Service level (`-l`, default 0).
    pub sl: u8,
    /// Hop limit in the GRH (`ibv_rc_pingpong` uses 1; rxe sends TTL 64
    /// regardless on RoCE v2 over IPv4).
    pub hop_limit: u8,
    /// Send queue depth (`max_send_wr`): one SEND in flight at a time.
    pub max_send_wr: u32,
}

/// What `ibv_rc_pingpong` sets.
pub const RC_PINGPONG_QP_ATTRS: QpAttrs = QpAttrs {
    timeout: 14,
    retry_cnt: 7,
    rnr_retry: 7,
    min_rnr_timer: 12,
    max_dest_rd_atomic: 1,
    max_rd_atomic: 1,
    sl: 0,
    hop_limit: 1,
    max_send_wr: 1,
};

/// The path MTUs `-m` accepts (bytes).
pub const VALID_MTUS: [u32; 5] = [256, 512, 1024, 2048, 4096];

/// True if `mtu` is a valid InfiniBand path MTU (what `-m` accepts).
pub fn is_valid_mtu(mtu: u32) -> bool {
    VALID_MTUS.contains(&mtu)
}

/// One side's connection parameters: `struct pingpong_dest`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Dest {
    /// Local identifier; 0 on RoCE.
    pub lid: u16,
    /// 24-bit QP number.
    pub qpn: u32,
    /// 24-bit starting PSN (`ibv_rc_pingpong` picks `lrand48() & 0xffffff`).
    pub psn: u32,
    /// Global identifier (the IP address on RoCE v2).
    pub gid: Gid,
}

/// Why a 52-byte exchange message is not a valid [`Dest`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DestParseError {
    /// Not exactly [`DEST_MSG_LEN`] bytes.
    WrongLength(usize),
    /// The last byte is not the NUL terminator.
    MissingNul,
    /// A `:` separator is missing at this byte offset.
    MissingSeparator(usize),
    /// A non-hex character at this byte offset.
    NotHex(usize),
}

impl fmt::Display for DestParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DestParseError::WrongLength(n) => write!(
                f,
                "exchange message is {n} bytes, expected {DEST_MSG_LEN} \
                 (is the peer ibv_rc_pingpong, and are both sides the same tool?)"
            ),
            DestParseError::MissingNul => write!(f, "exchange message is not NUL-terminated"),
            DestParseError::MissingSeparator(at) => {
                write!(f, "exchange message has no ':' at byte {at}")
            }
            DestParseError::NotHex(at) => {
                write!(f, "exchange message has a non-hex character at byte {at}")
            }
        }
    }
}

impl std::error::Error for DestParseError {}

/// Field layout of the message: (start, digits).
const LID_FIELD: (usize, usize) = (0, 4);
const QPN_FIELD: (usize, usize) = (5, 6);
const PSN_FIELD: (usize, usize) = (12, 6);
const GID_FIELD: (usize, usize) = (19, 32);
const SEPARATORS: [usize; 3] = [4, 11, 18];

const HEX_DIGITS: &[u8; 16] = b"0123456789abcdef";

impl Dest {
    /// Format as `ibv_rc_pingpong` does (`"%04x:%06x:%06x:%s"` + NUL).
    /// QPN and PSN are masked to 24 bits.
    pub fn to_bytes(&self) -> [u8; DEST_MSG_LEN] {
        let mut msg = [0u8; DEST_MSG_LEN];
        write_hex(&mut msg, LID_FIELD, u64::from(self.lid));
        write_hex(&mut msg, QPN_FIELD, u64::from(self.qpn & 0xFF_FFFF));
        write_hex(&mut msg, PSN_FIELD, u64::from(self.psn & 0xFF_FFFF));
        for (i, word) in self.gid.0.chunks_exact(4).enumerate() {
            let word = u32::from_be_bytes([word[0], word[1], word[2], word[3]]);
            write_hex(&mut msg, (GID_FIELD.0 + 8 * i, 8), u64::from(word));
        }
        for at in SEPARATORS {
            msg[at] = b':';
        }
        msg[DEST_MSG_LEN - 1] = 0;
        msg
    }

    /// Parse a message in exactly the layout `ibv_rc_pingpong` writes
    /// (hex digits of either case).
    pub fn parse(msg: &[u8]) -> Result<Dest, DestParseError> {
        if msg.len() != DEST_MSG_LEN {
            return Err(DestParseError::WrongLength(msg.len()));
        }
        if msg[DEST_MSG_LEN - 1] != 0 {
            return Err(DestParseError::MissingNul);
        }
        for at in SEPARATORS {
            if msg[at] != b':' {
                return Err(DestParseError::MissingSeparator(at));
            }
        }
        let lid = read_hex(msg, LID_FIELD)? as u16;
        let qpn = read_hex(msg, QPN_FIELD)? as u32;
        let psn = read_hex(msg, PSN_FIELD)? as u32;
        let mut gid = [0u8; 16];
        for i in 0..4 {
            let word = read_hex(msg, (GID_FIELD.0 + 8 * i, 8))? as u32;
            gid[4 * i..4 * i + 4].copy_from_slice(&word.to_be_bytes());
        }
        Ok(Dest {
            lid,
            qpn,
            psn,
            gid: Gid(gid),
        })
    }
}

/// Prints like `ibv_rc_pingpong`'s address lines:
/// `LID 0x0000, QPN 0x000011, PSN 0x3b1c2a, GID ::ffff:10.99.0.11`.
impl fmt::Display for Dest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "LID 0x{:04x}, QPN 0x{:06x}, PSN 0x{:06x}, GID {}",
            self.lid, self.qpn, self.psn, self.gid
        )
    }
}

fn write_hex(msg: &mut [u8], (start, digits): (usize, usize), value: u64) {
    for i in 0..digits {
        let shift = 4 * (digits - 1 - i);
        msg[start + i] = HEX_DIGITS[((value >> shift) & 0xF) as usize];
    }
}

fn read_hex(msg: &[u8], (start, digits): (usize, usize)) -> Result<u64, DestParseError> {
    let mut value = 0u64;
    for (i, &c) in msg[start..start + digits].iter().enumerate() {
        let nibble = match c {
            b'0'..=b'9' => c - b'0',
            b'a'..=b'f' => c - b'a' + 10,
            b'A'..=b'F' => c - b'A' + 10,
            _ => return Err(DestParseError::NotHex(start + i)),
        };
        value = (value << 4) | u64::from(nibble);
    }
    Ok(value)
}

/// True if `msg` is the client's final `done\0`.
pub fn is_done(msg: &[u8]) -> bool {
    msg == DONE
}

/// The two result lines `ibv_rc_pingpong` prints, computed the way it does:
/// elapsed time in whole microseconds (from `gettimeofday`) held in a C
/// `float`, bytes = size * iters * 2 (both directions).
///
/// ```text
/// 8192000 bytes in 1.23 seconds = 53.28 Mbit/sec
/// 1000 iters in 1.23 seconds = 1230.00 usec/iter
/// ```
pub fn report_lines(size: u32, iters: u32, elapsed_usec: u64) -> [String; 2] {
    // `float usec` in rc_pingpong.c: single precision, then promoted.
    let usec = f64::from(elapsed_usec as f32);
    let bytes = u64::from(size) * u64::from(iters) * 2;
    [
        format!(
            "{} bytes in {:.2} seconds = {:.2} Mbit/sec",
            bytes,
            usec / 1_000_000.0,
            bytes as f64 * 8.0 / usec
        ),
        format!(
            "{} iters in {:.2} seconds = {:.2} usec/iter",
            iters,
            usec / 1_000_000.0,
            usec / f64::from(iters)
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::net::Ipv4Addr;

    fn vm_dest() -> Dest {
        Dest {
            lid: 0,
            qpn: 0x11,
            psn: 0x3b1c2a,
            gid: Gid::from_ipv4(Ipv4Addr::new(10, 99, 0, 11)),
        }
    }

    #[test]
    fn formats_like_sprintf() {
        let msg = vm_dest().to_bytes();
        assert_eq!(
            &msg[..],
            &b"0000:000011:3b1c2a:00000000000000000000ffff0a63000b\0"[..]
        );
    }

    #[test]
    fn parse_round_trip() {
        let d = vm_dest();
        assert_eq!(Dest::parse(&d.to_bytes()), Ok(d));
        let zero = Dest {
            lid: 0xffff,
            qpn: 0xff_ffff,
            psn: 0,
            gid: Gid::ZERO,
        };
        assert_eq!(Dest::parse(&zero.to_bytes()), Ok(zero));
    }

    #[test]
    fn masks_to_24_bits() {
        let d = Dest {
            qpn: 0x1234_5678,
            psn: 0xff00_0001,
            ..vm_dest()
        };
        let parsed = Dest::parse(&d.to_bytes()).unwrap();
        assert_eq!(parsed.qpn, 0x34_5678);
        assert_eq!(parsed.psn, 0x00_0001);
    }

    #[test]
    fn accepts_upper_case_hex() {
        let d = Dest::parse(b"0000:0000AB:ABCDEF:00000000000000000000FFFF0A63000B\0").unwrap();
        assert_eq!(d.qpn, 0xab);
        assert_eq!(d.psn, 0xabcdef);
        assert_eq!(d.gid.to_ipv4_mapped(), Some(Ipv4Addr::new(10, 99, 0, 11)));
    }

    #[test]
    fn rejects_malformed() {
        let good = vm_dest().to_bytes();
        assert_eq!(
            Dest::parse(&good[..51]),
            Err(DestParseError::WrongLength(51))
        );
        assert_eq!(Dest::parse(DONE), Err(DestParseError::WrongLength(5)));
        let mut m = good;
        m[51] = b'0';
        assert_eq!(Dest::parse(&m), Err(DestParseError::MissingNul));
        let mut m = good;
        m[11] = b'-';
        assert_eq!(Dest::parse(&m), Err(DestParseError::MissingSeparator(11)));
        let mut m = good;
        m[30] = b'g';
        assert_eq!(Dest::parse(&m), Err(DestParseError::NotHex(30)));
    }

    #[test]
    fn done_message() {
        assert!(is_done(b"done\0"));
        assert!(!is_done(b"done"));
        assert_eq!(DONE.len(), 5);
    }

    #[test]
    fn display_like_rc_pingpong() {
        assert_eq!(
            vm_dest().to_string(),
            "LID 0x0000, QPN 0x000011, PSN 0x3b1c2a, GID ::ffff:10.99.0.11"
        );
    }

    #[test]
    fn report_like_rc_pingpong() {
        // 4096 B x 1000 iters x 2 in 1.5 s.
        let [bw, lat] = report_lines(4096, 1000, 1_500_000);
        assert_eq!(bw, "8192000 bytes in 1.50 seconds = 43.69 Mbit/sec");
        assert_eq!(lat, "1000 iters in 1.50 seconds = 1500.00 usec/iter");
    }

    #[test]
    fn qp_attrs_match_rc_pingpong() {
        let a = RC_PINGPONG_QP_ATTRS;
        assert_eq!((a.timeout, a.retry_cnt, a.rnr_retry), (14, 7, 7));
        assert_eq!(
            (a.min_rnr_timer, a.max_dest_rd_atomic, a.max_rd_atomic),
            (12, 1, 1)
        );
        assert!(is_valid_mtu(1024) && !is_valid_mtu(1500));
    }
}
