//! A whole RoCE v2 frame in its owned form: Ethernet [+ 802.1Q] +
//! IPv4/IPv6 + UDP + BTH + extension headers + payload + pad + ICRC
//! (`docs/wire-format.md`, "Frame layout"). [`RoceHeaders`] holds every
//! header, [`RoceFrame`] a parsed frame. [`super::parse`] fills them (its
//! module docs say what it accepts), [`super::emit`] writes them.

use super::aeth::AethRepr;
use super::atomic::{AtomicAckEthRepr, AtomicEthRepr};
use super::bth::BthRepr;
use super::deth::DethRepr;
use super::eth::EthRepr;
use super::ip::IpRepr;
use super::reth::RethRepr;
use super::udp::UdpRepr;

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
    /// DETH (Q_Key, source QP), for the UD opcodes: right after the BTH.
    pub deth: Option<DethRepr>,
}

/// A parsed frame: headers, the payload (without pad) borrowed from the
/// input, the pad count, and the ICRC as carried. For a CNP the payload is
/// its 16 reserved bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RoceFrame<'a> {
    pub headers: RoceHeaders,
    pub payload: &'a [u8],
    pub pad: u8,
    pub icrc: u32,
}
