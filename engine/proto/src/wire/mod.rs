//! RoCE v2 wire format: zero-copy views over packet bytes and plain
//! representations (parse / emit / len) for every header, one file per
//! header. See `../shared/docs/roce-v2-notes.md`, "Frame layout".
//!
//! Each header file has a view (`new_unchecked`, `new_checked`,
//! `check_len`, getters and setters over `&[u8]` / `&mut [u8]`, a `field`
//! module of byte ranges) and, where the engine needs one, a plain `*Repr`
//! with `parse` / `emit`. [`frame`] puts them together: [`parse_frame`]
//! validates a whole frame and checks its ICRC, [`emit_frame`] writes one.
//! [`parse_frame_view`] ([`view`]) does the same checks and returns a
//! borrowed [`RoceFrameView`] whose accessors read the headers from the
//! frame bytes; the receive path uses it (no owned headers built per
//! packet).
//!
//! CONTRACT (shared by the wire, rc, cc and datapath work): the names in
//! `contract.rs` (re-exported here) are the interface other modules code
//! against. Keep them.

mod bytes;
mod contract;

pub mod aeth;
pub mod atomic;
pub mod bth;
pub mod checksum;
pub mod cnp;
pub mod crc32;
pub mod eth;
pub mod frame;
pub mod icrc;
pub mod ieth;
pub mod immdt;
pub mod ip;
pub mod ipv4;
pub mod ipv6;
pub mod opcode;
pub mod pcap;
pub mod reth;
pub mod template;
pub mod udp;
pub mod view;
pub mod vlan;

pub use contract::*;

pub use aeth::{nak_code, rnr_timer_micros, Syndrome};
pub use cnp::{cnp_headers, cnp_reply};
pub use frame::{frame_icrc, pad_for, parse_frame_lenient, parse_frame_unchecked_icrc};
pub use template::{emit_templated, HeaderTemplate};
pub use view::{parse_frame_view, RoceFrameView};
