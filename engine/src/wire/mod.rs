//! RoCE v2 wire format: zero-copy views over packet bytes and plain
//! representations (parse / emit / len) for every header, one file per
//! header. See `../shared/docs/roce-v2-notes.md`, "Frame layout".
//!
//! CONTRACT (shared by the wire, rc, cc and datapath work): the names
//! re-exported below are the interface other modules code against. Keep
//! them; move definitions into per-header files freely.

mod contract;

pub mod checksum;
pub mod crc32;
pub mod frame;
pub mod icrc;
pub mod opcode;
pub mod pcap;

pub use contract::*;
pub use frame::{pad_for, parse_frame_lenient, parse_frame_unchecked_icrc, CNP_RESERVED_LEN};
