//! Writing a whole RoCE v2 frame from its [`RoceHeaders`]: lengths, pad,
//! checksums and the ICRC computed (`docs/wire-format.md`, "Frame layout",
//! "ICRC"). [`super::template`] writes the same bytes from pre-emitted
//! headers, for the per-packet transmit path.

use super::aeth::Aeth;
use super::atomic::{AtomicAckEth, AtomicEth};
use super::bth::{self, Bth};
use super::checksum;
use super::cnp::RESERVED_LEN as CNP_RESERVED_LEN;
use super::deth::Deth;
use super::error::EmitError;
use super::frame::RoceHeaders;
use super::icrc::{self, IpVersion, ICRC_LEN};
use super::ieth::Ieth;
use super::immdt::ImmDt;
use super::ip::IpRepr;
use super::ipv4;
use super::opcode::Opcode;
use super::reth::Reth;
use super::udp::{self, UdpPacket};

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
        || headers.deth.is_some() != op.has_deth()
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
    // DETH first (IBA 9.3.3: UD packets carry BTH, DETH, [ImmDt]).
    if let Some(d) = headers.deth {
        d.emit(&mut Deth::new_unchecked(&mut f[x..]));
        x += Deth::<&[u8]>::HEADER_LEN;
    }
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
