//! Pre-emitted Ethernet [+ 802.1Q] + IP + UDP headers of one flow, and the
//! packet emit that starts from them.
//!
//! Every packet a QP sends carries the same addresses, ports, TOS and TTL;
//! only the lengths, the IPv4 header checksum, the BTH and the extension
//! headers change. [`HeaderTemplate::new`] emits the fixed part once;
//! [`emit_templated`] copies it, patches the lengths, computes the IPv4
//! checksum from the template's precomputed partial sum (RFC 1071: the
//! one's-complement sum is order-independent, so adding the total length to
//! the sum of the other words gives the same result as summing the whole
//! header), writes the BTH and extension headers, copies the payload, and
//! computes the ICRC over the IP packet with its variant fields set to
//! all-ones (`docs/wire-format.md`, "ICRC"): the headers from a masked copy,
//! the payload while it is copied in (by the caller's
//! [`CopyCrc`]: one pass where the I/O crate supplies one). The bytes are
//! the same as [`super::emit_frame`]'s for the same headers (tested).

use super::aeth::{Aeth, AethRepr};
use super::bth::{self, Bth, BthRepr};
use super::checksum;
use super::crc32::{crc32_update, CopyCrc, LRH_CRC};
use super::emit::pad_for;
use super::error::EmitError;
use super::eth::{self, EthRepr, EthernetFrame};
use super::icrc::{self, IpVersion, ICRC_LEN};
use super::immdt::ImmDt;
use super::ip::IpRepr;
use super::ipv4::{self, Ipv4Packet};
use super::ipv6::{self, Ipv6Packet};
use super::reth::{Reth, RethRepr};
use super::udp::{self, UdpPacket, UdpRepr};
use super::view::RoceFrameView;
use super::vlan::VlanHeader;

/// Longest fixed prefix: Ethernet + 802.1Q tag + IPv6 + UDP.
const MAX_PREFIX: usize = 14 + 4 + 40 + 8;

/// Bytes from the IP header to the end of the extension headers a
/// templated packet can carry: IPv6 (the longest) + UDP + BTH + RETH +
/// ImmDt (AETH never comes with either).
const MAX_HEADERS: usize = 40 + udp::HEADER_LEN + bth::HEADER_LEN + 16 + 4;
// The one-pass branch of `emit_templated` copies MAX_HEADERS bytes from the
// IP header of a packet longer than SMALL_PACKET.
const _: () = assert!(MAX_HEADERS <= icrc::SMALL_PACKET);

/// The fixed headers of one flow (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeaderTemplate {
    /// Ethernet [+ VLAN] + IP + UDP, lengths and checksums zero.
    bytes: [u8; MAX_PREFIX],
    /// Bytes of `bytes` in use.
    len: u8,
    /// Offset of the IP header.
    ip_at: u8,
    /// IPv4 (else IPv6): the addresses, for IPv6's UDP checksum, are
    /// read from `bytes` (a QP holds this template: no second copy).
    v4: bool,
    /// One's-complement sum of the IPv4 header words with the total length
    /// and checksum fields zero (unused for IPv6).
    ipv4_sum: u64,
}

impl HeaderTemplate {
    /// Emit the fixed headers of a flow.
    pub fn new(eth: &EthRepr, ip: &IpRepr, udp: &UdpRepr) -> HeaderTemplate {
        let mut bytes = [0u8; MAX_PREFIX];
        let ip_at = eth.header_len();
        let udp_at = ip_at + ip.header_len();
        let len = udp_at + udp::HEADER_LEN;
        eth.emit(ip.ethertype(), &mut bytes);
        ip.emit(0, &mut bytes[ip_at..]);
        udp.emit(0, &mut UdpPacket::new_unchecked(&mut bytes[udp_at..len]));
        let mut ipv4_sum = 0;
        if let IpRepr::V4 { .. } = ip {
            let h = &mut bytes[ip_at..udp_at];
            // Zero the total length (emitted as 20 + 0) and the checksum.
            h[2..4].fill(0);
            h[10..12].fill(0);
            ipv4_sum = checksum::sum(0, h);
        }
        HeaderTemplate {
            bytes,
            len: len as u8,
            ip_at: ip_at as u8,
            v4: matches!(ip, IpRepr::V4 { .. }),
            ipv4_sum,
        }
    }

    /// The pre-emitted IP header (its length fields and IPv4 checksum
    /// zero; the addresses as sent).
    #[inline(always)]
    fn ip_header(&self) -> &[u8] {
        &self.bytes[usize::from(self.ip_at)..usize::from(self.len) - udp::HEADER_LEN]
    }

    /// The Ethernet, IP and UDP headers the template was made from, read
    /// back from its bytes (the IPv4 identification is 0, as emitted):
    /// for the packets [`emit_templated`] does not write (CNPs, atomics),
    /// which go through [`super::emit_frame`]. A QP keeps only the bytes.
    pub fn reprs(&self) -> (EthRepr, IpRepr, UdpRepr) {
        let b = &self.bytes[..usize::from(self.len)];
        let ip_at = usize::from(self.ip_at);
        let udp_at = b.len() - udp::HEADER_LEN;
        let e = EthernetFrame::new_unchecked(b);
        let eth = EthRepr {
            dst: e.dst_addr(),
            src: e.src_addr(),
            vlan: (ip_at > eth::HEADER_LEN)
                .then(|| VlanHeader::new_unchecked(&b[eth::HEADER_LEN..]).tag()),
        };
        let ip = if self.v4 {
            ipv4::repr(&Ipv4Packet::new_unchecked(self.ip_header()))
        } else {
            ipv6::repr(&Ipv6Packet::new_unchecked(self.ip_header()))
        };
        let udp = UdpRepr::parse(&UdpPacket::new_unchecked(&b[udp_at..]));
        (eth, ip, udp)
    }

    /// Whether `f` travels the other way of this template's flow: its
    /// source IP address is the template's destination and its
    /// destination the template's source (reads the two addresses only).
    #[inline(always)]
    pub fn is_reply(&self, f: &RoceFrameView<'_>) -> bool {
        let ip = self.ip_header();
        if self.v4 {
            let h = Ipv4Packet::new_unchecked(ip);
            f.ipv4_addrs() == Some((h.dst_addr(), h.src_addr()))
        } else {
            let h = Ipv6Packet::new_unchecked(ip);
            f.ipv6_addrs() == Some((h.dst_addr(), h.src_addr()))
        }
    }

    /// Length of the frame [`emit_templated`] writes for `opcode` and a
    /// payload of `payload_len` bytes (pad and ICRC included).
    #[inline]
    pub fn frame_len(&self, opcode: super::Opcode, payload_len: usize) -> usize {
        usize::from(self.len)
            + bth::HEADER_LEN
            + opcode.ext_headers_len()
            + payload_len
            + pad_for(payload_len)
            + ICRC_LEN
    }
}

/// Copies a template's prefix (`dst` and `src` of equal length) with
/// the copy inlined for each length a template can have (Ethernet,
/// with or without one VLAN tag, IPv4 or IPv6, UDP: 42, 46, 62 or 66
/// bytes); any other length through `copy_from_slice`. A copy of a length
/// known only at run time is a call into the C library's `memcpy`, and a
/// profile of the responder's pass with 65,536 QPs (`perf record` of
/// `examples/qp_scale_probe 65536 N shuffled`) put a large share of what
/// those QPs cost over one QP on that call's first instruction. Inlined,
/// the stall moved to the copy's own loads, and the pass gained a few
/// percent (docs/architecture.md, "What the prefetch costs").
#[inline(always)]
fn copy_prefix(dst: &mut [u8], src: &[u8]) {
    match dst.len() {
        42 => dst[..42].copy_from_slice(&src[..42]),
        46 => dst[..46].copy_from_slice(&src[..46]),
        62 => dst[..62].copy_from_slice(&src[..62]),
        66 => dst[..66].copy_from_slice(&src[..66]),
        _ => dst.copy_from_slice(src),
    }
}

/// Emit a packet (BTH, optional RETH, ImmDt and AETH, payload) with the
/// template's fixed headers into `buf`; returns the frame length. The bytes
/// equal [`super::emit_frame`]'s for the same headers: the pad count is
/// computed (`bth.pad_count` ignored), 24-bit fields are masked, the IPv4
/// UDP checksum is 0 and the IPv6 one is computed.
///
/// The caller passes exactly the extension headers `bth.opcode` carries
/// (checked: [`EmitError::HeadersMismatchOpcode`]); opcodes with an
/// AtomicETH, AtomicAckETH or IETH, and CNPs, go through `emit_frame`.
///
/// `copy_crc` copies a payload longer than a small packet's into the frame
/// while it extends the ICRC over it (`EndpointConfig::copy_crc` for a QP's
/// packets; [`super::crc32::copy_then_update_after`] is the portable one).
#[allow(clippy::too_many_arguments)]
pub fn emit_templated(
    copy_crc: CopyCrc,
    t: &HeaderTemplate,
    bth_repr: &BthRepr,
    reth: Option<&RethRepr>,
    immdt: Option<u32>,
    aeth: Option<&AethRepr>,
    payload: &[u8],
    buf: &mut [u8],
) -> Result<usize, EmitError> {
    let op = bth_repr.opcode;
    if reth.is_some() != op.has_reth()
        || immdt.is_some() != op.has_immdt()
        || aeth.is_some() != op.has_aeth()
        || op.has_atomic_eth()
        || op.has_atomic_ack_eth()
        || op.has_ieth()
        || op.has_deth()
        || op == super::Opcode::Cnp
        || (!op.has_payload() && !payload.is_empty())
    {
        return Err(EmitError::HeadersMismatchOpcode);
    }
    let pad = pad_for(payload.len());
    let ext = op.ext_headers_len();
    let udp_len = udp::HEADER_LEN + bth::HEADER_LEN + ext + payload.len() + pad + ICRC_LEN;
    let ip_at = usize::from(t.ip_at);
    let prefix = usize::from(t.len);
    let ip_hdr = prefix - udp::HEADER_LEN - ip_at;
    let udp_at = ip_at + ip_hdr;
    let v4 = t.v4;
    let ip_len_field = if v4 {
        ipv4::HEADER_LEN + udp_len
    } else {
        udp_len
    };
    if ip_len_field > u16::MAX as usize {
        return Err(EmitError::PayloadTooLong);
    }
    let total = udp_at + udp_len;
    if buf.len() < total {
        return Err(EmitError::BufferTooSmall);
    }
    let f = &mut buf[..total];

    copy_prefix(&mut f[..prefix], &t.bytes[..prefix]);
    // IPv4 total length / IPv6 payload length, then the UDP length.
    let len_at = if v4 { ip_at + 2 } else { ip_at + 4 };
    f[len_at..len_at + 2].copy_from_slice(&(ip_len_field as u16).to_be_bytes());
    f[udp_at + 4..udp_at + 6].copy_from_slice(&(udp_len as u16).to_be_bytes());

    let bth_at = prefix;
    let mut b = *bth_repr;
    b.pad_count = pad as u8;
    b.emit(&mut Bth::new_unchecked(
        &mut f[bth_at..bth_at + bth::HEADER_LEN],
    ));
    let mut x = bth_at + bth::HEADER_LEN;
    if let Some(r) = reth {
        r.emit(&mut Reth::new_unchecked(&mut f[x..]));
        x += Reth::<&[u8]>::HEADER_LEN;
    }
    if let Some(imm) = immdt {
        ImmDt::new_unchecked(&mut f[x..]).set_immediate(imm);
        x += ImmDt::<&[u8]>::HEADER_LEN;
    }
    if let Some(a) = aeth {
        a.emit(&mut Aeth::new_unchecked(&mut f[x..]));
        x += Aeth::<&[u8]>::HEADER_LEN;
    }
    let icrc_at = total - ICRC_LEN;
    let payload_end = x + payload.len();
    if payload_end < icrc_at {
        // The pad (a zero-length fill is still a memset call).
        f[payload_end..icrc_at].fill(0);
    }

    let version = if v4 { IpVersion::V4 } else { IpVersion::V6 };
    let crc = if icrc_at - ip_at <= icrc::SMALL_PACKET {
        // Small packets (ACKs, short messages): the ICRC's own tuned path
        // over a masked stack copy.
        f[x..payload_end].copy_from_slice(payload);
        icrc::compute(version, &f[ip_at..icrc_at]).unwrap_or(0)
    } else {
        // A copy of the headers with the variant fields of IP + UDP + BTH
        // set to ones, CRCed ahead of the payload while the payload is
        // copied in (`copy_crc`: one pass where it can), then the pad.
        // (A fixed-size copy, which compiles to a few vector moves: the
        // frame is longer than SMALL_PACKET, so MAX_HEADERS bytes from the
        // IP header are within it; the bytes past `x` are not used.)
        let mut masked = [0u8; MAX_HEADERS];
        masked.copy_from_slice(&f[ip_at..ip_at + MAX_HEADERS]);
        icrc::mask(version, &mut masked[..bth_at + bth::HEADER_LEN - ip_at]);
        let crc = copy_crc(
            LRH_CRC,
            &masked[..x - ip_at],
            &mut f[x..payload_end],
            payload,
        );
        if payload_end < icrc_at {
            crc32_update(crc, &f[payload_end..icrc_at])
        } else {
            crc
        }
    };
    f[icrc_at..].copy_from_slice(&crc.to_le_bytes());

    if v4 {
        let sum = t.ipv4_sum + ip_len_field as u64;
        let c = checksum::finish(sum);
        f[ip_at + 10..ip_at + 12].copy_from_slice(&c.to_be_bytes());
    } else {
        // The addresses as the template emitted them.
        let ip6 = Ipv6Packet::new_unchecked(t.ip_header());
        let (src, dst) = (ip6.src_addr().octets(), ip6.dst_addr().octets());
        let c = checksum::udp_ipv6(&src, &dst, &f[udp_at..]);
        UdpPacket::new_unchecked(&mut f[udp_at..]).set_checksum(c);
    }
    Ok(total)
}
