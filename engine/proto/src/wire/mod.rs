//! RoCE v2 wire format: zero-copy views over packet bytes and plain
//! representations (parse / emit / len) for every header, one file per
//! header (`docs/wire-format.md`, "Frame layout").
//!
//! Each header file has a view (`new_unchecked`, `new_checked`,
//! `check_len`, getters and setters over `&[u8]` / `&mut [u8]`, a `field`
//! module of byte ranges) and, where the engine needs one, a plain `*Repr`
//! with `parse` / `emit`. The frame files put them together:
//! - `frame.rs`: [`RoceHeaders`] (every header of a frame) and
//!   [`RoceFrame`] (a parsed frame);
//! - `parse.rs`: the one frame validator, behind [`parse_frame`] (owned
//!   headers, ICRC checked), [`parse_frame_view`] (the borrowed
//!   [`RoceFrameView`] of `view.rs`, which the receive path uses: no owned
//!   headers built per packet) and the other `parse_frame*`;
//! - `emit.rs`: [`emit_frame`] and [`frame_len`]; `template.rs`: the
//!   per-packet [`emit_templated`] from a [`HeaderTemplate`];
//! - `cnp.rs`: the CNP's headers; `error.rs`: [`ParseError`],
//!   [`EmitError`].
//!
//! CONTRACT (shared by the wire, rc, cc and datapath work): the names
//! re-exported here are the interface other modules code against. Keep
//! them.

mod bytes;

pub mod aeth;
pub mod atomic;
pub mod bth;
pub mod checksum;
pub mod cnp;
pub mod crc32;
pub mod emit;
pub mod error;
pub mod eth;
pub mod frame;
pub mod icrc;
pub mod ieth;
pub mod immdt;
pub mod ip;
pub mod ipv4;
pub mod ipv6;
pub mod opcode;
pub mod parse;
pub mod pcap;
pub mod reth;
pub mod template;
pub mod udp;
pub mod view;
pub mod vlan;

pub use aeth::{nak_code, rnr_timer_micros, AethRepr, Syndrome};
pub use atomic::{AtomicAckEthRepr, AtomicEthRepr};
pub use bth::{BthRepr, DEFAULT_PKEY};
pub use cnp::{cnp_headers, cnp_reply};
pub use emit::{emit_frame, frame_len, pad_for};
pub use error::{EmitError, ParseError};
pub use eth::EthRepr;
pub use frame::{RoceFrame, RoceHeaders};
pub use ip::{Ecn, IpRepr};
pub use opcode::Opcode;
pub use parse::{
    frame_icrc, parse_frame, parse_frame_lenient, parse_frame_unchecked_icrc, parse_frame_view,
};
pub use reth::RethRepr;
pub use template::{emit_templated, HeaderTemplate};
pub use udp::{UdpRepr, ROCE_V2_UDP_PORT};
pub use view::RoceFrameView;
pub use vlan::VlanTag;
