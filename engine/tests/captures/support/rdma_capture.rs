//! What the RDMA WRITE / READ captures against rxe (`interop/run.sh`,
//! engine 10.99.0.2, rxe 10.99.0.11, path MTU 1024) are read with.

use std::collections::BTreeMap;

use engine::wire::{parse_frame, IpRepr, RoceFrame};

use super::{read_pcap, Record};

/// The engine's address in the captures.
pub const ENGINE: [u8; 4] = [10, 99, 0, 2];
/// rxe's address in the captures.
pub const RXE: [u8; 4] = [10, 99, 0, 11];
/// Path MTU of the runs.
pub const PMTU: u64 = 1024;
/// PSNs are 24 bits.
pub const PSN_MASK: u32 = 0xff_ffff;

/// Every frame of capture `name`, parsed (panics on a frame that does not
/// parse or has a wrong ICRC). The records are leaked so that the frames
/// can borrow them for the rest of the test.
pub fn roce_frames(name: &str) -> Vec<RoceFrame<'static>> {
    let recs: &'static [Record] = Box::leak(read_pcap(name).into_boxed_slice());
    recs.iter()
        .enumerate()
        .map(|(i, r)| parse_frame(&r.data).unwrap_or_else(|e| panic!("frame {}: {e:?}", i + 1)))
        .collect()
}

/// IPv4 source address of a frame.
pub fn src(f: &RoceFrame<'_>) -> [u8; 4] {
    match f.headers.ip {
        IpRepr::V4 { src, .. } => src.octets(),
        IpRepr::V6 { .. } => panic!("IPv4 capture"),
    }
}

/// `a - b` modulo 2^24.
pub fn psn_delta(a: u32, b: u32) -> u32 {
    a.wrapping_sub(b) & PSN_MASK
}

/// How many frames each (source address, opcode) pair sent.
pub fn opcode_counts(frames: &[RoceFrame<'_>]) -> BTreeMap<([u8; 4], u8), usize> {
    let mut counts = BTreeMap::new();
    for f in frames {
        *counts
            .entry((src(f), f.headers.bth.opcode as u8))
            .or_insert(0) += 1;
    }
    counts
}
