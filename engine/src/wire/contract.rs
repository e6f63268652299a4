//! Plain representations shared across the engine. (To be split into one
//! file per header by the wire layer; names are the contract.)

use core::net::{Ipv4Addr, Ipv6Addr};

/// UDP destination port of RoCE v2 (IANA).
pub const ROCE_V2_UDP_PORT: u16 = 4791;
/// Default partition key.
pub const DEFAULT_PKEY: u16 = 0xFFFF;

/// BTH opcodes of the RC transport (0x00-0x17) plus the RoCE v2 CNP (0x81).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Opcode {
    SendFirst = 0x00,
    SendMiddle = 0x01,
    SendLast = 0x02,
    SendLastImm = 0x03,
    SendOnly = 0x04,
    SendOnlyImm = 0x05,
    WriteFirst = 0x06,
    WriteMiddle = 0x07,
    WriteLast = 0x08,
    WriteLastImm = 0x09,
    WriteOnly = 0x0A,
    WriteOnlyImm = 0x0B,
    ReadRequest = 0x0C,
    ReadRespFirst = 0x0D,
    ReadRespMiddle = 0x0E,
    ReadRespLast = 0x0F,
    ReadRespOnly = 0x10,
    Acknowledge = 0x11,
    AtomicAcknowledge = 0x12,
    CompareSwap = 0x13,
    FetchAdd = 0x14,
    SendLastInv = 0x16,
    SendOnlyInv = 0x17,
    Cnp = 0x81,
}

/// ECN codepoint (low two bits of IPv4 TOS / IPv6 traffic class).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Ecn {
    #[default]
    NotEct = 0b00,
    Ect1 = 0b01,
    Ect0 = 0b10,
    Ce = 0b11,
}

/// One 802.1Q tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct VlanTag {
    pub pcp: u8,
    pub dei: bool,
    pub vid: u16,
}

/// Ethernet header, with an optional 802.1Q tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct EthRepr {
    pub dst: [u8; 6],
    pub src: [u8; 6],
    pub vlan: Option<VlanTag>,
}

/// IPv4 or IPv6 header fields the engine sets or reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IpRepr {
    V4 {
        src: Ipv4Addr,
        dst: Ipv4Addr,
        dscp: u8,
        ecn: Ecn,
        ttl: u8,
        ident: u16,
        dont_fragment: bool,
    },
    V6 {
        src: Ipv6Addr,
        dst: Ipv6Addr,
        dscp: u8,
        ecn: Ecn,
        flow_label: u32,
        hop_limit: u8,
    },
}

/// UDP ports (length and checksum are computed on emit).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UdpRepr {
    pub src_port: u16,
    pub dst_port: u16,
}

/// Base Transport Header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BthRepr {
    pub opcode: Opcode,
    pub solicited: bool,
    pub mig_req: bool,
    /// Pad count; computed from the payload length on emit.
    pub pad_count: u8,
    pub pkey: u16,
    pub fecn: bool,
    pub becn: bool,
    /// 24-bit destination QP number.
    pub dest_qp: u32,
    pub ack_req: bool,
    /// 24-bit packet sequence number.
    pub psn: u32,
}

/// RDMA Extended Transport Header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct RethRepr {
    pub va: u64,
    pub rkey: u32,
    pub dma_len: u32,
}

/// ACK Extended Transport Header: raw syndrome byte and 24-bit MSN.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct AethRepr {
    pub syndrome: u8,
    pub msn: u32,
}

/// Atomic Extended Transport Header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct AtomicEthRepr {
    pub va: u64,
    pub rkey: u32,
    pub swap_add: u64,
    pub compare: u64,
}

/// Atomic ACK Extended Transport Header: the original remote value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct AtomicAckEthRepr {
    pub orig: u64,
}

/// Every header of one RoCE v2 frame. Which optional headers are present is
/// determined by `bth.opcode`; emit requires exactly those.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RoceHeaders {
    pub eth: EthRepr,
    pub ip: IpRepr,
    pub udp: UdpRepr,
    pub bth: BthRepr,
    pub reth: Option<RethRepr>,
    pub aeth: Option<AethRepr>,
    pub atomic_eth: Option<AtomicEthRepr>,
    pub atomic_ack_eth: Option<AtomicAckEthRepr>,
    /// ImmDt (immediate data), for the *_IMM opcodes.
    pub immdt: Option<u32>,
    /// IETH (R_Key to invalidate), for SEND_*_WITH_INV.
    pub ieth: Option<u32>,
}

/// A parsed frame: headers, the payload (without pad) borrowed from the
/// input, the pad count, and the ICRC as carried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoceFrame<'a> {
    pub headers: RoceHeaders,
    pub payload: &'a [u8],
    pub pad: u8,
    pub icrc: u32,
}

/// Why a byte string is not a valid RoCE v2 frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ParseError {
    /// Shorter than the headers it announces.
    Truncated,
    /// Not IPv4/IPv6 UDP to port 4791 (includes IP fragments, IP options
    /// the parser does not accept, and non-IP ethertypes).
    NotRoce,
    /// BTH opcode not in the RC set nor CNP.
    UnsupportedOpcode(u8),
    /// Pad count inconsistent with the opcode or payload.
    BadPad,
    /// IP / UDP lengths disagree with the frame or the opcode's payload rules.
    LengthMismatch,
    /// ICRC does not match.
    BadIcrc { carried: u32, computed: u32 },
}

/// Why a frame could not be emitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EmitError {
    /// The output buffer is smaller than [`frame_len`].
    BufferTooSmall,
    /// The optional headers present do not match the opcode.
    HeadersMismatchOpcode,
    /// Payload too long for the IP length fields.
    PayloadTooLong,
}

pub use super::frame::{emit_frame, frame_len, parse_frame};
