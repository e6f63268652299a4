//! The wire contract: the names every other module codes against (rc, cc,
//! endpoint, datapath). Definitions live in the per-header files; this file
//! lists them in one place. Do not rename.

/// UDP destination port of RoCE v2 (IANA).
pub const ROCE_V2_UDP_PORT: u16 = 4791;
/// Default partition key.
pub const DEFAULT_PKEY: u16 = 0xFFFF;

pub use super::aeth::AethRepr;
pub use super::atomic::{AtomicAckEthRepr, AtomicEthRepr};
pub use super::bth::BthRepr;
pub use super::eth::EthRepr;
pub use super::frame::{
    emit_frame, frame_len, parse_frame, EmitError, ParseError, RoceFrame, RoceHeaders,
};
pub use super::ip::{Ecn, IpRepr};
pub use super::opcode::Opcode;
pub use super::reth::RethRepr;
pub use super::udp::UdpRepr;
pub use super::vlan::VlanTag;
