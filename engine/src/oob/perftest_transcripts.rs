//! Recorded sessions of stock perftest talking to itself over Soft-RoCE
//! (`interop/perftest/record.sh`): the exchange's test vectors, for the
//! unit tests of both sides and as fuzzing seeds. Each line is one TCP
//! read of the recording relay: `c HEX` client to server, `s HEX` back,
//! `EOF` at a close.

use super::perftest::Test;

/// One recorded session.
#[derive(Debug, Clone, Copy)]
pub struct Transcript {
    pub name: &'static str,
    pub text: &'static str,
    pub test: Test,
    pub qps: usize,
    /// Message sizes run (23 with `-a`).
    pub sizes: usize,
    /// The protocol version both ends announced.
    pub version: &'static str,
}

macro_rules! t {
    ($name:literal, $file:literal, $test:ident, $qps:literal, $sizes:literal, $v:literal) => {
        Transcript {
            name: $name,
            text: include_str!(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../interop/perftest/transcripts/",
                $file
            )),
            test: Test::$test,
            qps: $qps,
            sizes: $sizes,
            version: $v,
        }
    };
}

/// perftest 4.5+0.17 (Debian bookworm, protocol 6.06) and 25.01.0+0.80
/// (trixie, 6.24, which no longer sends `done`).
pub const TRANSCRIPTS: [Transcript; 14] = [
    t!("write_bw", "write_bw.txt", WriteBw, 1, 1, "6.06"),
    t!("write_bw -q 4", "write_bw_q4.txt", WriteBw, 4, 1, "6.06"),
    t!("write_bw -D 2", "write_bw_D2.txt", WriteBw, 1, 1, "6.06"),
    t!("read_bw", "read_bw.txt", ReadBw, 1, 1, "6.06"),
    t!("atomic_bw", "atomic_bw.txt", AtomicBw, 1, 1, "6.06"),
    t!("send_bw", "send_bw.txt", SendBw, 1, 1, "6.06"),
    t!("send_bw -a", "send_bw_a.txt", SendBw, 1, 23, "6.06"),
    t!("write_lat", "write_lat.txt", WriteLat, 1, 1, "6.06"),
    t!("read_lat", "read_lat.txt", ReadLat, 1, 1, "6.06"),
    t!("send_lat", "send_lat.txt", SendLat, 1, 1, "6.06"),
    t!("atomic_lat", "atomic_lat.txt", AtomicLat, 1, 1, "6.06"),
    t!(
        "write_bw 25.01",
        "write_bw_trixie.txt",
        WriteBw,
        1,
        1,
        "6.24"
    ),
    t!(
        "read_lat 25.01",
        "read_lat_trixie.txt",
        ReadLat,
        1,
        1,
        "6.24"
    ),
    t!(
        "send_lat 25.01",
        "send_lat_trixie.txt",
        SendLat,
        1,
        1,
        "6.24"
    ),
];

impl Transcript {
    /// The bytes one side sent: `from` is `"c"` (client) or `"s"`.
    pub fn stream(&self, from: &str) -> Vec<u8> {
        let mut out = Vec::new();
        for l in self.text.lines() {
            let Some((dir, hex)) = l.split_once(' ') else {
                continue;
            };
            if dir != from || hex == "EOF" {
                continue;
            }
            out.extend(
                (0..hex.len() / 2)
                    .filter_map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok()),
            );
        }
        out
    }
}
