//! Test support: read the small classic-pcap captures in `interop/captures/`.

use std::path::PathBuf;

pub mod rdma_capture;

/// One captured frame: timestamp in microseconds and the bytes.
pub struct Record {
    pub ts_usec: u64,
    pub data: Vec<u8>,
}

/// Path of a file in `interop/captures/`.
pub fn capture_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../interop/captures")
        .join(name)
}

/// Read a classic pcap file (microsecond, either byte order, Ethernet).
pub fn read_pcap(name: &str) -> Vec<Record> {
    let path = capture_path(name);
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(bytes.len() >= 24, "{name}: no pcap header");
    let le = match bytes[0..4] {
        [0xd4, 0xc3, 0xb2, 0xa1] => true,
        [0xa1, 0xb2, 0xc3, 0xd4] => false,
        _ => panic!("{name}: not a microsecond classic pcap"),
    };
    let u32_at = |at: usize| {
        let b = [bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]];
        if le {
            u32::from_le_bytes(b)
        } else {
            u32::from_be_bytes(b)
        }
    };
    assert_eq!(u32_at(20), 1, "{name}: link type is not Ethernet");
    let mut out = Vec::new();
    let mut at = 24;
    while at + 16 <= bytes.len() {
        let ts_usec = u64::from(u32_at(at)) * 1_000_000 + u64::from(u32_at(at + 4));
        let incl = u32_at(at + 8) as usize;
        let orig = u32_at(at + 12) as usize;
        assert_eq!(incl, orig, "{name}: truncated capture record");
        let data = bytes[at + 16..at + 16 + incl].to_vec();
        out.push(Record { ts_usec, data });
        at += 16 + incl;
    }
    assert_eq!(at, bytes.len(), "{name}: trailing bytes");
    out
}

/// The TCP payload of an Ethernet/IPv4/TCP frame and its (src port, dst port).
pub fn tcp_payload(frame: &[u8]) -> Option<((u16, u16), &[u8])> {
    if frame.len() < 14 + 20 + 20 || frame[12..14] != [0x08, 0x00] || frame[23] != 6 {
        return None;
    }
    let ihl = usize::from(frame[14] & 0x0f) * 4;
    let total = usize::from(u16::from_be_bytes([frame[16], frame[17]]));
    let tcp = 14 + ihl;
    let sport = u16::from_be_bytes([frame[tcp], frame[tcp + 1]]);
    let dport = u16::from_be_bytes([frame[tcp + 2], frame[tcp + 3]]);
    let doff = usize::from(frame[tcp + 12] >> 4) * 4;
    Some(((sport, dport), &frame[tcp + doff..14 + total]))
}
