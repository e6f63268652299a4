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
//! [`icrc`], [`crc32`], [`checksum`] and [`pcap`] stay modules: their
//! functions are named for their module (`icrc::compute`, `pcap::Reader`).
//!
//! The names re-exported here are the interface the rest of the workspace
//! (rc, cc, endpoint, the datapath, the CLI) codes against: keep them.
//! Where two headers use one name (`HEADER_LEN`), the re-export carries
//! the header's prefix, as smoltcp does.

mod bytes;

mod aeth;
mod atomic;
mod bth;
mod cnp;
mod deth;
mod emit;
mod error;
mod eth;
mod frame;
mod ieth;
mod immdt;
mod ip;
mod ipv4;
mod ipv6;
mod opcode;
mod parse;
mod reth;
mod template;
mod udp;
mod view;
mod vlan;

pub mod checksum;
pub mod crc32;
pub mod icrc;
pub mod pcap;

// Frames: parse, view, emit, errors.
pub use self::emit::{emit_frame, frame_len, pad_for};
pub use self::error::{EmitError, ParseError};
pub use self::frame::{RoceFrame, RoceHeaders};
pub use self::parse::{
    frame_icrc, parse_frame, parse_frame_lenient, parse_frame_unchecked_icrc, parse_frame_view,
    peek_dest_qp, peek_remote_access, peek_request, PeekedRequest,
};
pub use self::template::{emit_templated, HeaderTemplate};
pub use self::view::RoceFrameView;

// Headers, outermost first: view, representation, constants.
pub use self::aeth::{
    nak_code, rnr_timer_code_for, rnr_timer_micros, Aeth, AethRepr, Syndrome,
    CREDITS_INVALID as AETH_CREDITS_INVALID, RNR_TIMER_MICROS,
};
pub use self::atomic::{AtomicAckEth, AtomicAckEthRepr, AtomicEth, AtomicEthRepr};
pub use self::bth::{Bth, BthRepr, DEFAULT_PKEY, HEADER_LEN as BTH_HEADER_LEN};
pub use self::deth::{Deth, DethRepr};
pub use self::eth::{ethertype, EthRepr, EthernetFrame, HEADER_LEN as ETH_HEADER_LEN};
pub use self::ieth::Ieth;
pub use self::immdt::ImmDt;
pub use self::ip::{Ecn, IpRepr, PROTOCOL_UDP as IP_PROTOCOL_UDP};
pub use self::ipv4::{Ipv4Packet, HEADER_LEN as IPV4_HEADER_LEN};
pub use self::ipv6::{Ipv6Packet, HEADER_LEN as IPV6_HEADER_LEN};
pub use self::opcode::Opcode;
pub use self::reth::{Reth, RethRepr};
pub use self::udp::{UdpPacket, UdpRepr, HEADER_LEN as UDP_HEADER_LEN, ROCE_V2_UDP_PORT};
pub use self::vlan::{VlanHeader, VlanTag};

// The CNP (opcode 0x81).
pub use self::cnp::{
    cnp_headers, cnp_headers_default_pkey, cnp_reply, DEFAULT_DSCP as CNP_DEFAULT_DSCP,
    RESERVED as CNP_RESERVED, RESERVED_LEN as CNP_RESERVED_LEN,
};
