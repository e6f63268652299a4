//! A whole RoCE v2 frame: Ethernet [+ 802.1Q] + IPv4/IPv6 + UDP + BTH +
//! extension headers + payload + pad + ICRC (`roce-v2-notes.md`, "Frame
//! layout"). One parse yields every header, the payload slice and the pad
//! count; one emit writes them all, with lengths and checksums computed.
//!
//! What parsing accepts, and the error for what it rejects:
//! - Ethernet II, at most one 802.1Q tag, EtherType IPv4 or IPv6, else
//!   [`ParseError::NotRoce`]. Bytes after the IP packet (Ethernet padding of
//!   short frames) are ignored.
//! - IPv4 without options (IHL 5), not a fragment, protocol UDP; IPv6 with
//!   next header UDP (no extension headers); UDP destination port 4791; BTH
//!   transport version 0. Anything else is [`ParseError::NotRoce`]. The IPv4
//!   header checksum and the UDP checksum are not verified (the ICRC covers
//!   every invariant byte; use [`super::ipv4::Ipv4Packet::verify_checksum`]
//!   if you need it).
//! - Lengths: a frame shorter than its headers or its IP length is
//!   [`ParseError::Truncated`]; a UDP length that disagrees with the IP
//!   length, or a payload on an opcode that carries none, is
//!   [`ParseError::LengthMismatch`].
//! - Pad (IBTA 9.2.3: pads the payload to a multiple of 4): more pad than
//!   payload bytes, payload + pad not a multiple of 4, or a pad on a FIRST,
//!   MIDDLE or payload-less packet is [`ParseError::BadPad`].
//! - CNP (opcode 0x81): the 16 reserved bytes after the BTH are returned as
//!   [`RoceFrame::payload`]; anything but exactly 16 bytes is
//!   [`ParseError::LengthMismatch`] (see [`super::cnp`]).

use super::aeth::{Aeth, AethRepr};
use super::atomic::{AtomicAckEth, AtomicAckEthRepr, AtomicEth, AtomicEthRepr};
use super::bth::{self, Bth, BthRepr};
use super::checksum;
use super::cnp::RESERVED_LEN as CNP_RESERVED_LEN;
use super::eth::EthRepr;
use super::icrc::{self, IpVersion, ICRC_LEN};
use super::ieth::Ieth;
use super::immdt::ImmDt;
use super::ip::IpRepr;
use super::ipv4;
use super::opcode::Opcode;
use super::reth::{Reth, RethRepr};
use super::udp::{self, UdpPacket, UdpRepr};
use super::view::{locate, parse_frame_view};

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
/// input, the pad count, and the ICRC as carried. For a CNP the payload is
/// its 16 reserved bytes.
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

impl core::fmt::Display for ParseError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            ParseError::Truncated => f.write_str("truncated frame"),
            ParseError::NotRoce => f.write_str("not a RoCE v2 frame (UDP port 4791)"),
            ParseError::UnsupportedOpcode(op) => write!(f, "unsupported BTH opcode {op:#04x}"),
            ParseError::BadPad => f.write_str("bad pad count"),
            ParseError::LengthMismatch => f.write_str("IP/UDP length mismatch"),
            ParseError::BadIcrc { carried, computed } => {
                write!(
                    f,
                    "bad ICRC: carried {carried:#010x}, computed {computed:#010x}"
                )
            }
        }
    }
}

impl core::error::Error for ParseError {}

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

impl core::fmt::Display for EmitError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            EmitError::BufferTooSmall => "output buffer too small for the frame",
            EmitError::HeadersMismatchOpcode => {
                "extension headers or payload do not match the opcode"
            }
            EmitError::PayloadTooLong => "payload too long for the IP length field",
        })
    }
}

impl core::error::Error for EmitError {}

/// Parse a whole Ethernet frame and verify its ICRC. Never panics; no
/// allocation, no copy of the payload. The receive path uses the borrowed
/// [`super::parse_frame_view`] (same checks, headers read lazily) instead.
#[inline]
pub fn parse_frame(frame: &[u8]) -> Result<RoceFrame<'_>, ParseError> {
    parse_frame_view(frame).map(|v| v.to_frame())
}

/// Parse a whole Ethernet frame without checking its ICRC (the carried value
/// is in [`RoceFrame::icrc`]); for when the ICRC was already checked or
/// does not matter.
#[inline]
pub fn parse_frame_unchecked_icrc(frame: &[u8]) -> Result<RoceFrame<'_>, ParseError> {
    locate(frame).map(|v| v.to_frame())
}

/// Parse a whole frame and compute its ICRC without rejecting a mismatch:
/// returns the frame and the ICRC it should carry
/// (`icrc_ok == (frame.icrc == computed)`). Used by `roce-xdp decode` to
/// report bad ICRCs instead of dropping the frame.
#[inline]
pub fn parse_frame_lenient(frame: &[u8]) -> Result<(RoceFrame<'_>, u32), ParseError> {
    let v = locate(frame)?;
    Ok((v.to_frame(), v.computed_icrc()))
}

/// The ICRC a whole Ethernet frame should carry, located from the frame's
/// own headers (it must parse up to its lengths; the carried ICRC is
/// ignored). See [`super::icrc::compute`] for a bare IP packet.
pub fn frame_icrc(frame: &[u8]) -> Result<u32, ParseError> {
    Ok(locate(frame)?.computed_icrc())
}

/// Pad bytes that bring `payload_len` to a multiple of 4 (IBTA 9.2.3).
#[inline]
pub const fn pad_for(payload_len: usize) -> usize {
    (4 - (payload_len & 3)) & 3
}

/// Payload plus pad after the extension headers for this opcode and payload
/// length (a CNP always has its 16 reserved bytes).
#[inline]
fn padded_len(opcode: Opcode, payload_len: usize) -> usize {
    if opcode == Opcode::Cnp {
        CNP_RESERVED_LEN
    } else {
        payload_len.saturating_add(pad_for(payload_len))
    }
}

/// Total frame length (Ethernet header to ICRC) for these headers and a
/// payload of `payload_len` bytes; the pad is added. For a CNP the payload
/// is always the 16 reserved bytes, whatever `payload_len` says.
/// Saturates at `usize::MAX` instead of overflowing.
#[inline]
pub fn frame_len(headers: &RoceHeaders, payload_len: usize) -> usize {
    let op = headers.bth.opcode;
    let headers_len = headers.eth.header_len()
        + headers.ip.header_len()
        + udp::HEADER_LEN
        + bth::HEADER_LEN
        + op.ext_headers_len()
        + ICRC_LEN;
    padded_len(op, payload_len).saturating_add(headers_len)
}

/// Emit a whole frame into `buf`: computes pad count, IP total/payload length,
/// the IPv4 header checksum, UDP length (and checksum for IPv6; 0 over IPv4,
/// as rxe does) and the ICRC. Returns the number of bytes written.
///
/// `headers.bth.pad_count` is ignored (computed from `payload`); 24-bit
/// fields (DestQP, PSN, MSN) and the VLAN fields are masked to their width.
/// Opcodes without payload require an empty `payload`; a CNP takes either an
/// empty `payload` (16 zero reserved bytes are written) or exactly 16 bytes.
pub fn emit_frame(
    headers: &RoceHeaders,
    payload: &[u8],
    buf: &mut [u8],
) -> Result<usize, EmitError> {
    let op = headers.bth.opcode;
    if headers.reth.is_some() != op.has_reth()
        || headers.aeth.is_some() != op.has_aeth()
        || headers.atomic_eth.is_some() != op.has_atomic_eth()
        || headers.atomic_ack_eth.is_some() != op.has_atomic_ack_eth()
        || headers.immdt.is_some() != op.has_immdt()
        || headers.ieth.is_some() != op.has_ieth()
    {
        return Err(EmitError::HeadersMismatchOpcode);
    }
    let pad = if op == Opcode::Cnp {
        if !payload.is_empty() && payload.len() != CNP_RESERVED_LEN {
            return Err(EmitError::HeadersMismatchOpcode);
        }
        0
    } else {
        if !op.has_payload() && !payload.is_empty() {
            return Err(EmitError::HeadersMismatchOpcode);
        }
        pad_for(payload.len())
    };
    let udp_len = udp::HEADER_LEN
        + bth::HEADER_LEN
        + op.ext_headers_len()
        + padded_len(op, payload.len())
        + ICRC_LEN;
    let ip_hdr = headers.ip.header_len();
    let ip_len_field = match headers.ip {
        IpRepr::V4 { .. } => ipv4::HEADER_LEN + udp_len,
        IpRepr::V6 { .. } => udp_len,
    };
    if ip_len_field > u16::MAX as usize {
        return Err(EmitError::PayloadTooLong);
    }
    let ip_at = headers.eth.header_len();
    let total = ip_at + ip_hdr + udp_len;
    if buf.len() < total {
        return Err(EmitError::BufferTooSmall);
    }
    let f = &mut buf[..total];

    headers.eth.emit(headers.ip.ethertype(), f);
    headers.ip.emit(udp_len, &mut f[ip_at..]);
    let udp_at = ip_at + ip_hdr;
    headers.udp.emit(
        udp_len as u16,
        &mut UdpPacket::new_unchecked(&mut f[udp_at..]),
    );
    let bth_at = udp_at + udp::HEADER_LEN;
    let mut bth = headers.bth;
    bth.pad_count = pad as u8;
    bth.emit(&mut Bth::new_unchecked(&mut f[bth_at..]));

    let mut x = bth_at + bth::HEADER_LEN;
    if let Some(r) = headers.reth {
        r.emit(&mut Reth::new_unchecked(&mut f[x..]));
        x += Reth::<&[u8]>::HEADER_LEN;
    }
    if let Some(a) = headers.atomic_eth {
        a.emit(&mut AtomicEth::new_unchecked(&mut f[x..]));
        x += AtomicEth::<&[u8]>::HEADER_LEN;
    }
    if let Some(imm) = headers.immdt {
        ImmDt::new_unchecked(&mut f[x..]).set_immediate(imm);
        x += ImmDt::<&[u8]>::HEADER_LEN;
    }
    if let Some(rkey) = headers.ieth {
        Ieth::new_unchecked(&mut f[x..]).set_rkey(rkey);
        x += Ieth::<&[u8]>::HEADER_LEN;
    }
    if let Some(a) = headers.aeth {
        a.emit(&mut Aeth::new_unchecked(&mut f[x..]));
        x += Aeth::<&[u8]>::HEADER_LEN;
    }
    if let Some(a) = headers.atomic_ack_eth {
        a.emit(&mut AtomicAckEth::new_unchecked(&mut f[x..]));
        x += AtomicAckEth::<&[u8]>::HEADER_LEN;
    }

    // Payload and pad (a CNP's reserved bytes default to zero).
    let icrc_at = total - ICRC_LEN;
    f[x..x + payload.len()].copy_from_slice(payload);
    f[x + payload.len()..icrc_at].fill(0);

    // ICRC (it masks the UDP checksum, so it can come first), then the IPv6
    // UDP checksum, which covers the ICRC.
    let version = match headers.ip {
        IpRepr::V4 { .. } => IpVersion::V4,
        IpRepr::V6 { .. } => IpVersion::V6,
    };
    let crc = icrc::compute(version, &f[ip_at..icrc_at]).unwrap_or(0);
    let mut trailer = [0u8; ICRC_LEN];
    icrc::write(crc, &mut trailer);
    f[icrc_at..].copy_from_slice(&trailer);
    if let IpRepr::V6 { src, dst, .. } = headers.ip {
        let c = checksum::udp_ipv6(&src.octets(), &dst.octets(), &f[udp_at..]);
        UdpPacket::new_unchecked(&mut f[udp_at..]).set_checksum(c);
    }
    Ok(total)
}
