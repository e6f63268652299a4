//! Parsing a whole RoCE v2 frame (`docs/wire-format.md`, "Frame layout",
//! "BTH", "RC opcodes", "ICRC"). One validator, [`validate`], checks every
//! header and length once and yields a borrowed [`RoceFrameView`]; every
//! parse below is that validator plus what it does with the ICRC and
//! whether it materialises the owned [`RoceFrame`]. So all of them accept
//! and reject the same frames with the same errors. The receive path uses
//! [`parse_frame_view`] (headers read lazily, nothing copied).
//!
//! What parsing accepts, and the error for what it rejects:
//! - Ethernet II, at most one 802.1Q tag, EtherType IPv4 or IPv6, else
//!   [`ParseError::NotRoce`]. Bytes after the IP packet (Ethernet padding of
//!   short frames) are ignored.
//! - IPv4 without options (IHL 5), not a fragment, protocol UDP; IPv6 with
//!   next header UDP (no extension headers); UDP destination port 4791; BTH
//!   transport version 0. Anything else is [`ParseError::NotRoce`]. The IPv4
//!   header checksum and the UDP checksum are not verified (the ICRC covers
//!   every invariant byte; use [`Ipv4Packet::verify_checksum`] if you need
//!   it).
//! - A BTH opcode that is neither RC, UD (SEND_ONLY with or without
//!   immediate: BTH, DETH, [ImmDt], payload; IBA 9.3.3) nor CNP is
//!   [`ParseError::UnsupportedOpcode`].
//! - Lengths: a frame shorter than its headers or its IP length is
//!   [`ParseError::Truncated`]; a UDP length that disagrees with the IP
//!   length, or a payload on an opcode that carries none, is
//!   [`ParseError::LengthMismatch`].
//! - Pad (IBTA 9.2.3: pads the payload to a multiple of 4): more pad than
//!   payload bytes, payload + pad not a multiple of 4, or a pad on a FIRST,
//!   MIDDLE or payload-less packet is [`ParseError::BadPad`].
//! - CNP (opcode 0x81): the 16 reserved bytes after the BTH are returned as
//!   the payload; anything but exactly 16 bytes is
//!   [`ParseError::LengthMismatch`] (see [`super::cnp`]).
//! - [`parse_frame`] and [`parse_frame_view`] then compare the carried ICRC
//!   with the computed one: [`ParseError::BadIcrc`].

use super::atomic::AtomicEth;
use super::bth::{self, Bth};
use super::cnp::RESERVED_LEN as CNP_RESERVED_LEN;
use super::error::ParseError;
use super::eth::{ethertype, EthernetFrame};
use super::frame::RoceFrame;
use super::icrc::{IpVersion, ICRC_LEN};
use super::ipv4::{self, Ipv4Packet};
use super::ipv6::{self, Ipv6Packet};
use super::opcode::Opcode;
use super::reth::Reth;
use super::udp::{self, UdpPacket, ROCE_V2_UDP_PORT};
use super::view::RoceFrameView;

/// Parse a whole Ethernet frame and verify its ICRC. Never panics; no
/// allocation, no copy of the payload. The receive path uses the borrowed
/// [`parse_frame_view`] (same checks, headers read lazily) instead.
#[inline]
pub fn parse_frame(frame: &[u8]) -> Result<RoceFrame<'_>, ParseError> {
    parse_frame_view(frame).map(|v| v.to_frame())
}

/// Parse a whole Ethernet frame into a view and verify its ICRC. Same
/// acceptance rules and errors as [`parse_frame`]; never panics, no
/// allocation, no copy of headers or payload.
#[inline]
pub fn parse_frame_view(frame: &[u8]) -> Result<RoceFrameView<'_>, ParseError> {
    let v = validate(frame)?;
    let carried = v.icrc();
    let computed = v.computed_icrc();
    if carried != computed {
        return Err(ParseError::BadIcrc { carried, computed });
    }
    Ok(v)
}

/// Parse a whole Ethernet frame without checking its ICRC (the carried value
/// is in [`RoceFrame::icrc`]); for when the ICRC was already checked or
/// does not matter.
#[inline]
pub fn parse_frame_unchecked_icrc(frame: &[u8]) -> Result<RoceFrame<'_>, ParseError> {
    validate(frame).map(|v| v.to_frame())
}

/// Parse a whole frame and compute its ICRC without rejecting a mismatch:
/// returns the frame and the ICRC it should carry
/// (`icrc_ok == (frame.icrc == computed)`). Used by `roce-xdp decode` to
/// report bad ICRCs instead of dropping the frame.
#[inline]
pub fn parse_frame_lenient(frame: &[u8]) -> Result<(RoceFrame<'_>, u32), ParseError> {
    let v = validate(frame)?;
    Ok((v.to_frame(), v.computed_icrc()))
}

/// The destination QP a whole Ethernet frame names, if its headers say
/// RoCE v2: `None` for anything else. A hint, for a receiver that wants
/// the QP's state in the caches before it checks and handles the frame
/// ([`crate::endpoint::Endpoint::qp_hint`]), so it reads only the fields
/// that say where the BTH is and that the frame is RoCE v2, by the same
/// rules as [`parse_frame_view`] (EtherType with at most one 802.1Q tag,
/// IPv4 without options and not a fragment or IPv6, UDP to port 4791,
/// BTH transport version 0, a BTH within the frame): not the lengths the
/// IP and UDP headers claim, the opcode's headers, the pad or the ICRC.
/// A frame that passes here and fails there is dropped by
/// [`parse_frame_view`] as usual; the hint only brought a QP's lines
/// into the caches.
///
/// Checking everything [`parse_frame_view`] does but the ICRC here, twice
/// per frame (the driver's two prefetch stages), was a large part of what
/// the prefetch costs in a profile of `examples/qp_scale_probe 1 N
/// shuffled` with the prefetch forced on (`docs/performance-log.md`, "What
/// the prefetch costs").
#[inline]
pub fn peek_dest_qp(frame: &[u8]) -> Option<u32> {
    peek_request(frame).map(|p| p.dest_qp)
}

/// What a receiver's prefetch reads of a frame's headers
/// ([`peek_request`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeekedRequest {
    /// The BTH's destination QP.
    pub dest_qp: u32,
    /// The BTH's opcode, if one this parser knows.
    pub opcode: Option<Opcode>,
    /// Where the BTH starts in the frame.
    bth_at: usize,
}

/// The BTH of a whole Ethernet frame, if its headers say RoCE v2 (the
/// rules of [`peek_dest_qp`]): its destination QP and opcode, and where
/// it lies, for [`peek_remote_access`]. One look at the headers for both
/// hints of a receiver's prefetch.
#[inline]
pub fn peek_request(frame: &[u8]) -> Option<PeekedRequest> {
    let (bth_at, b) = peek_bth(frame)?;
    Some(PeekedRequest {
        dest_qp: b.dest_qp(),
        opcode: b.opcode(),
        bth_at,
    })
}

/// The remote memory a request frame names in its extension header
/// (`peeked`: what [`peek_request`] found in that frame): its opcode,
/// and R_Key, virtual address and length of a RETH (RC or UC WRITE FIRST or ONLY,
/// with or without immediate: the bytes of it this packet carries; READ
/// request: the bytes to read) or an AtomicETH (8 bytes). A hint, as
/// [`peek_dest_qp`] is: the responder's checks come later.
#[inline]
pub fn peek_remote_access(frame: &[u8], peeked: &PeekedRequest) -> Option<(Opcode, u32, u64, u64)> {
    let (at, op) = (peeked.bth_at, peeked.opcode?);
    let ext = frame.get(at + bth::HEADER_LEN..)?;
    // A UC WRITE FIRST/ONLY carries its RETH as RC's does.
    match op.rc_equivalent() {
        Opcode::WriteFirst | Opcode::WriteOnly | Opcode::WriteOnlyImm => {
            let r = Reth::new_checked(ext).ok()?;
            let payload = frame
                .len()
                .saturating_sub(at + bth::HEADER_LEN + op.ext_headers_len());
            let len = u64::from(r.dma_len()).min(payload as u64);
            Some((op, r.rkey(), r.va(), len))
        }
        Opcode::ReadRequest => {
            let r = Reth::new_checked(ext).ok()?;
            Some((op, r.rkey(), r.va(), u64::from(r.dma_len())))
        }
        // ATOMIC WRITE: 8 bytes at the RETH's address (IBA 1.5 9.4.8).
        Opcode::AtomicWrite => {
            let r = Reth::new_checked(ext).ok()?;
            Some((op, r.rkey(), r.va(), 8))
        }
        Opcode::CompareSwap | Opcode::FetchAdd => {
            let a = AtomicEth::new_checked(ext).ok()?;
            Some((op, a.rkey(), a.va(), 8))
        }
        _ => None,
    }
}

/// Where a whole Ethernet frame's BTH starts, and the BTH, if its
/// headers say RoCE v2 (see [`peek_dest_qp`]; the BTH is whole and of
/// transport version 0).
#[inline]
fn peek_bth(frame: &[u8]) -> Option<(usize, Bth<&[u8]>)> {
    let (ethertype, ip_at) = EthernetFrame::new_checked(frame)
        .ok()?
        .network_header()
        .ok()?;
    let udp_at = match ethertype {
        ethertype::IPV4 => {
            Ipv4Packet::new_checked(frame.get(ip_at..)?)
                .ok()?
                .check_roce()
                .ok()?;
            ip_at + ipv4::HEADER_LEN
        }
        ethertype::IPV6 => {
            Ipv6Packet::new_checked(frame.get(ip_at..)?)
                .ok()?
                .check_roce()
                .ok()?;
            ip_at + ipv6::HEADER_LEN
        }
        _ => return None,
    };
    let udp_hdr = UdpPacket::new_checked(frame.get(udp_at..)?).ok()?;
    if udp_hdr.dst_port() != ROCE_V2_UDP_PORT {
        return None;
    }
    let at = udp_at + udp::HEADER_LEN;
    let b = Bth::new_checked(frame.get(at..)?).ok()?;
    (b.tver() == 0).then_some((at, b))
}

/// The ICRC a whole Ethernet frame should carry, located from the frame's
/// own headers (it must parse up to its lengths; the carried ICRC is
/// ignored). See [`super::icrc::compute`] for a bare IP packet.
pub fn frame_icrc(frame: &[u8]) -> Result<u32, ParseError> {
    Ok(validate(frame)?.computed_icrc())
}

/// The validator: every header and length of `f` (everything but the
/// ICRC), in wire order, each header's own rule taken from its file
/// ([`EthernetFrame::network_header`], [`Ipv4Packet::check_roce`],
/// [`Ipv6Packet::check_roce`], [`Bth::check_roce`]); returns the view.
/// Always inlined: with a plain `#[inline]`, whether it inlines into the
/// receive path (`Endpoint::handle_packet`) depends on how the crate is
/// split into codegen units (measured: ~58 instructions per packet more).
#[inline(always)]
fn validate(f: &[u8]) -> Result<RoceFrameView<'_>, ParseError> {
    let (ethertype, ip_at) = EthernetFrame::new_checked(f)?.network_header()?;
    let (version, udp_at, ip_end) = match ethertype {
        ethertype::IPV4 => {
            let p = Ipv4Packet::new_checked(&f[ip_at..])?;
            p.check_roce()?;
            let total = p.total_len() as usize;
            if total < ipv4::HEADER_LEN + udp::HEADER_LEN {
                return Err(ParseError::LengthMismatch);
            }
            (IpVersion::V4, ip_at + ipv4::HEADER_LEN, ip_at + total)
        }
        ethertype::IPV6 => {
            let p = Ipv6Packet::new_checked(&f[ip_at..])?;
            p.check_roce()?;
            let plen = p.payload_len() as usize;
            if plen < udp::HEADER_LEN {
                return Err(ParseError::LengthMismatch);
            }
            (
                IpVersion::V6,
                ip_at + ipv6::HEADER_LEN,
                ip_at + ipv6::HEADER_LEN + plen,
            )
        }
        _ => return Err(ParseError::NotRoce),
    };
    let udp_hdr = UdpPacket::new_checked(&f[udp_at..])?;
    if udp_hdr.dst_port() != ROCE_V2_UDP_PORT {
        return Err(ParseError::NotRoce);
    }
    if ip_end > f.len() {
        return Err(ParseError::Truncated);
    }
    if udp_at + udp_hdr.len() as usize != ip_end {
        return Err(ParseError::LengthMismatch);
    }
    let bth_at = udp_at + udp::HEADER_LEN;
    if ip_end < bth_at + bth::HEADER_LEN + ICRC_LEN {
        return Err(ParseError::Truncated);
    }
    let b = Bth::new_unchecked(&f[bth_at..]);
    let op = b.check_roce()?;
    let payload = bth_at + bth::HEADER_LEN + op.ext_headers_len();
    let icrc_at = ip_end - ICRC_LEN;
    if payload > icrc_at {
        return Err(ParseError::Truncated);
    }
    // Pad (IBTA 9.2.3; `docs/wire-format.md`, "Frame layout"): payload +
    // pad is a multiple of 4, only LAST / ONLY packets carry one.
    let padded = icrc_at - payload;
    let pad = b.pad_count();
    if pad as usize > padded || !padded.is_multiple_of(4) {
        return Err(ParseError::BadPad);
    }
    if op == Opcode::Cnp {
        if pad != 0 {
            return Err(ParseError::BadPad);
        }
        if padded != CNP_RESERVED_LEN {
            return Err(ParseError::LengthMismatch);
        }
    } else if !op.has_payload() {
        if pad != 0 {
            return Err(ParseError::BadPad);
        }
        if padded != 0 {
            return Err(ParseError::LengthMismatch);
        }
    } else if pad != 0 && (op.is_first() || op.is_middle()) {
        return Err(ParseError::BadPad);
    }
    // `ip_end` <= f.len() and the IP length fields are 16-bit, so the
    // offsets fit (the payload starts within the first ~130 bytes).
    Ok(RoceFrameView {
        frame: f,
        opcode: op,
        version,
        ip: ip_at as u8,
        payload: payload as u16,
        payload_len: (padded - pad as usize) as u32,
        icrc: icrc_at as u32,
    })
}
