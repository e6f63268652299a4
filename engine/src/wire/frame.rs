//! A whole RoCE v2 frame: Ethernet [+ 802.1Q] + IPv4/IPv6 + UDP + BTH +
//! extension headers + payload + pad + ICRC (`roce-v2-notes.md`, "Frame
//! layout"). One parse yields every header, the payload slice and the pad
//! count; one emit writes them all, with lengths and checksums computed.
//!
//! What parsing accepts, and the error for what it rejects:
//! - Ethernet II, at most one 802.1Q tag, ethertype IPv4 or IPv6, else
//!   [`ParseError::NotRoce`]. Bytes after the IP packet (Ethernet padding of
//!   short frames) are ignored.
//! - IPv4 without options (IHL 5), not a fragment, protocol UDP; IPv6 with
//!   next header UDP (no extension headers); UDP destination port 4791; BTH
//!   transport version 0. Anything else is [`ParseError::NotRoce`]. The IPv4
//!   header checksum and the UDP checksum are not verified (the ICRC covers
//!   every invariant byte; check [`super::ipv4::Ipv4Packet::verify_checksum`]
//!   if you need it).
//! - Lengths: a frame shorter than its headers or the IP length is
//!   [`ParseError::Truncated`]; a UDP length that disagrees with the IP
//!   length, or a payload on an opcode that carries none, is
//!   [`ParseError::LengthMismatch`].
//! - Pad (IBTA 9.2.3: pads the payload to a multiple of 4): more pad than
//!   payload bytes, payload + pad not a multiple of 4, or a pad on a FIRST,
//!   MIDDLE or payload-less packet is [`ParseError::BadPad`].
//! - CNP (opcode 0x81): the 16 reserved bytes after the BTH are returned as
//!   [`RoceFrame::payload`]; anything but exactly 16 bytes is
//!   [`ParseError::LengthMismatch`].

use core::net::{Ipv4Addr, Ipv6Addr};

use super::checksum;
use super::contract::{
    AethRepr, AtomicAckEthRepr, AtomicEthRepr, BthRepr, Ecn, EmitError, EthRepr, IpRepr, Opcode,
    ParseError, RethRepr, RoceFrame, RoceHeaders, UdpRepr, VlanTag, ROCE_V2_UDP_PORT,
};
use super::icrc::{self, IpVersion, ICRC_LEN};

const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_IPV6: u16 = 0x86DD;
const ETHERTYPE_VLAN: u16 = 0x8100;
const IP_PROTO_UDP: u8 = 17;
const ETH_LEN: usize = 14;
const VLAN_LEN: usize = 4;
const IPV4_LEN: usize = 20;
const IPV6_LEN: usize = 40;
const UDP_LEN: usize = 8;
const BTH_LEN: usize = 12;
/// Bytes of the CNP's reserved field (carried as the payload).
pub const CNP_RESERVED_LEN: usize = 16;

#[inline(always)]
fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}
#[inline(always)]
fn be24(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([0, b[at], b[at + 1], b[at + 2]])
}
#[inline(always)]
fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}
#[inline(always)]
fn be64(b: &[u8], at: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[at..at + 8]);
    u64::from_be_bytes(x)
}

/// Byte offsets of one frame's parts, found from its headers.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Layout {
    pub version: IpVersion,
    pub vlan: bool,
    pub ip: usize,
    pub udp: usize,
    pub bth: usize,
    pub opcode: Opcode,
    pub payload: usize,
    pub payload_len: usize,
    pub pad: u8,
    /// Offset of the ICRC; the IP packet ends 4 bytes later.
    pub icrc: usize,
}

impl Layout {
    /// Validate lengths, protocol and opcode rules and find every part.
    #[inline]
    pub fn of(f: &[u8]) -> Result<Layout, ParseError> {
        if f.len() < ETH_LEN {
            return Err(ParseError::Truncated);
        }
        let mut ethertype = be16(f, 12);
        let mut ip = ETH_LEN;
        let mut vlan = false;
        if ethertype == ETHERTYPE_VLAN {
            if f.len() < ETH_LEN + VLAN_LEN {
                return Err(ParseError::Truncated);
            }
            ethertype = be16(f, 16);
            ip += VLAN_LEN;
            vlan = true;
        }
        let (version, udp, ip_end) = match ethertype {
            ETHERTYPE_IPV4 => {
                if f.len() < ip + IPV4_LEN {
                    return Err(ParseError::Truncated);
                }
                // Version 4, IHL 5 (no options), no fragment, UDP.
                if f[ip] != 0x45 || be16(f, ip + 6) & 0x3FFF != 0 || f[ip + 9] != IP_PROTO_UDP {
                    return Err(ParseError::NotRoce);
                }
                let total = be16(f, ip + 2) as usize;
                if total < IPV4_LEN + UDP_LEN {
                    return Err(ParseError::LengthMismatch);
                }
                (IpVersion::V4, ip + IPV4_LEN, ip + total)
            }
            ETHERTYPE_IPV6 => {
                if f.len() < ip + IPV6_LEN {
                    return Err(ParseError::Truncated);
                }
                if f[ip] >> 4 != 6 || f[ip + 6] != IP_PROTO_UDP {
                    return Err(ParseError::NotRoce);
                }
                let plen = be16(f, ip + 4) as usize;
                if plen < UDP_LEN {
                    return Err(ParseError::LengthMismatch);
                }
                (IpVersion::V6, ip + IPV6_LEN, ip + IPV6_LEN + plen)
            }
            _ => return Err(ParseError::NotRoce),
        };
        if f.len() < udp + UDP_LEN {
            return Err(ParseError::Truncated);
        }
        if be16(f, udp + 2) != ROCE_V2_UDP_PORT {
            return Err(ParseError::NotRoce);
        }
        if ip_end > f.len() {
            return Err(ParseError::Truncated);
        }
        if udp + be16(f, udp + 4) as usize != ip_end {
            return Err(ParseError::LengthMismatch);
        }
        let bth = udp + UDP_LEN;
        if ip_end < bth + BTH_LEN + ICRC_LEN {
            return Err(ParseError::Truncated);
        }
        let opcode = match Opcode::from_u8(f[bth]) {
            Some(op) => op,
            None => return Err(ParseError::UnsupportedOpcode(f[bth])),
        };
        if f[bth + 1] & 0x0F != 0 {
            return Err(ParseError::NotRoce); // TVer must be 0
        }
        let payload = bth + BTH_LEN + opcode.ext_headers_len();
        let icrc = ip_end - ICRC_LEN;
        if payload > icrc {
            return Err(ParseError::Truncated);
        }
        let padded = icrc - payload;
        let pad = (f[bth + 1] >> 4) & 0x3;
        if pad as usize > padded || !padded.is_multiple_of(4) {
            return Err(ParseError::BadPad);
        }
        if opcode == Opcode::Cnp {
            if pad != 0 {
                return Err(ParseError::BadPad);
            }
            if padded != CNP_RESERVED_LEN {
                return Err(ParseError::LengthMismatch);
            }
        } else if !opcode.has_payload() {
            if pad != 0 {
                return Err(ParseError::BadPad);
            }
            if padded != 0 {
                return Err(ParseError::LengthMismatch);
            }
        } else if pad != 0 && (opcode.is_first() || opcode.is_middle()) {
            return Err(ParseError::BadPad);
        }
        Ok(Layout {
            version,
            vlan,
            ip,
            udp,
            bth,
            opcode,
            payload,
            payload_len: padded - pad as usize,
            pad,
            icrc,
        })
    }

    /// The ICRC these bytes should carry.
    #[inline]
    pub fn compute_icrc(&self, f: &[u8]) -> u32 {
        // `of` checked the IP packet holds IP + UDP + BTH, so this is Some.
        icrc::compute(self.version, &f[self.ip..self.icrc]).unwrap_or(0)
    }

    /// The ICRC the frame carries.
    #[inline]
    pub fn carried_icrc(&self, f: &[u8]) -> u32 {
        be32(f, self.icrc).swap_bytes()
    }

    /// Decode every header (lengths already validated by [`Layout::of`]).
    #[inline]
    pub fn frame<'a>(&self, f: &'a [u8]) -> RoceFrame<'a> {
        let mut dst = [0u8; 6];
        let mut src = [0u8; 6];
        dst.copy_from_slice(&f[0..6]);
        src.copy_from_slice(&f[6..12]);
        let vlan = if self.vlan {
            let tci = be16(f, 14);
            Some(VlanTag {
                pcp: (tci >> 13) as u8,
                dei: tci & 0x1000 != 0,
                vid: tci & 0x0FFF,
            })
        } else {
            None
        };
        let i = self.ip;
        let ip = match self.version {
            IpVersion::V4 => IpRepr::V4 {
                src: Ipv4Addr::from(be32(f, i + 12)),
                dst: Ipv4Addr::from(be32(f, i + 16)),
                dscp: f[i + 1] >> 2,
                ecn: ecn_from_bits(f[i + 1]),
                ttl: f[i + 8],
                ident: be16(f, i + 4),
                dont_fragment: f[i + 6] & 0x40 != 0,
            },
            IpVersion::V6 => {
                let word = be32(f, i);
                let tclass = (word >> 20) as u8;
                let mut s = [0u8; 16];
                let mut d = [0u8; 16];
                s.copy_from_slice(&f[i + 8..i + 24]);
                d.copy_from_slice(&f[i + 24..i + 40]);
                IpRepr::V6 {
                    src: Ipv6Addr::from(s),
                    dst: Ipv6Addr::from(d),
                    dscp: tclass >> 2,
                    ecn: ecn_from_bits(tclass),
                    flow_label: word & 0x000F_FFFF,
                    hop_limit: f[i + 7],
                }
            }
        };
        let u = self.udp;
        let udp = UdpRepr {
            src_port: be16(f, u),
            dst_port: be16(f, u + 2),
        };
        let b = self.bth;
        let bth = BthRepr {
            opcode: self.opcode,
            solicited: f[b + 1] & 0x80 != 0,
            mig_req: f[b + 1] & 0x40 != 0,
            pad_count: self.pad,
            pkey: be16(f, b + 2),
            fecn: f[b + 4] & 0x80 != 0,
            becn: f[b + 4] & 0x40 != 0,
            dest_qp: be24(f, b + 5),
            ack_req: f[b + 8] & 0x80 != 0,
            psn: be24(f, b + 9),
        };
        let op = self.opcode;
        let mut x = b + BTH_LEN;
        let mut headers = RoceHeaders {
            eth: EthRepr { dst, src, vlan },
            ip,
            udp,
            bth,
            reth: None,
            aeth: None,
            atomic_eth: None,
            atomic_ack_eth: None,
            immdt: None,
            ieth: None,
        };
        // Order (IBTA 9.2 / notes): RETH, AtomicETH, ImmDt|IETH; AETH,
        // AtomicAckETH.
        if op.has_reth() {
            headers.reth = Some(RethRepr {
                va: be64(f, x),
                rkey: be32(f, x + 8),
                dma_len: be32(f, x + 12),
            });
            x += 16;
        }
        if op.has_atomic_eth() {
            headers.atomic_eth = Some(AtomicEthRepr {
                va: be64(f, x),
                rkey: be32(f, x + 8),
                swap_add: be64(f, x + 12),
                compare: be64(f, x + 20),
            });
            x += 28;
        }
        if op.has_immdt() {
            headers.immdt = Some(be32(f, x));
            x += 4;
        }
        if op.has_ieth() {
            headers.ieth = Some(be32(f, x));
            x += 4;
        }
        if op.has_aeth() {
            headers.aeth = Some(AethRepr {
                syndrome: f[x],
                msn: be24(f, x + 1),
            });
            x += 4;
        }
        if op.has_atomic_ack_eth() {
            headers.atomic_ack_eth = Some(AtomicAckEthRepr { orig: be64(f, x) });
        }
        RoceFrame {
            headers,
            payload: &f[self.payload..self.payload + self.payload_len],
            pad: self.pad,
            icrc: self.carried_icrc(f),
        }
    }
}

#[inline(always)]
fn ecn_from_bits(bits: u8) -> Ecn {
    match bits & 0b11 {
        0b00 => Ecn::NotEct,
        0b01 => Ecn::Ect1,
        0b10 => Ecn::Ect0,
        _ => Ecn::Ce,
    }
}

/// Parse a whole Ethernet frame and verify its ICRC.
#[inline]
pub fn parse_frame(frame: &[u8]) -> Result<RoceFrame<'_>, ParseError> {
    let layout = Layout::of(frame)?;
    let carried = layout.carried_icrc(frame);
    let computed = layout.compute_icrc(frame);
    if carried != computed {
        return Err(ParseError::BadIcrc { carried, computed });
    }
    Ok(layout.frame(frame))
}

/// Parse a whole Ethernet frame without checking its ICRC (the carried value
/// is in [`RoceFrame::icrc`]). For tools that report bad ICRCs instead of
/// dropping them (`roce-xdp decode`); pair with [`parse_frame_lenient`] or
/// [`super::icrc::compute_frame`] to learn the expected value.
#[inline]
pub fn parse_frame_unchecked_icrc(frame: &[u8]) -> Result<RoceFrame<'_>, ParseError> {
    Ok(Layout::of(frame)?.frame(frame))
}

/// Parse a whole frame and compute its ICRC without rejecting a mismatch:
/// returns the frame and the ICRC it should carry
/// (`icrc_ok == (frame.icrc == computed)`).
#[inline]
pub fn parse_frame_lenient(frame: &[u8]) -> Result<(RoceFrame<'_>, u32), ParseError> {
    let layout = Layout::of(frame)?;
    Ok((layout.frame(frame), layout.compute_icrc(frame)))
}

/// Pad bytes that bring `payload_len` to a multiple of 4 (IBTA 9.2.3).
#[inline]
pub const fn pad_for(payload_len: usize) -> usize {
    (4 - (payload_len & 3)) & 3
}

/// The number of bytes after the BTH extension headers for this opcode and
/// payload length: the payload plus pad (a CNP always has its 16 reserved
/// bytes).
#[inline]
fn padded_len(opcode: Opcode, payload_len: usize) -> usize {
    if opcode == Opcode::Cnp {
        CNP_RESERVED_LEN
    } else {
        payload_len + pad_for(payload_len)
    }
}

fn l2_len(headers: &RoceHeaders) -> usize {
    ETH_LEN
        + if headers.eth.vlan.is_some() {
            VLAN_LEN
        } else {
            0
        }
}

fn ip_header_len(headers: &RoceHeaders) -> usize {
    match headers.ip {
        IpRepr::V4 { .. } => IPV4_LEN,
        IpRepr::V6 { .. } => IPV6_LEN,
    }
}

/// Total frame length (Ethernet header to ICRC) for these headers and a
/// payload of `payload_len` bytes; the pad is added. For a CNP the payload
/// is always the 16 reserved bytes, whatever `payload_len` says.
pub fn frame_len(headers: &RoceHeaders, payload_len: usize) -> usize {
    let op = headers.bth.opcode;
    l2_len(headers)
        + ip_header_len(headers)
        + UDP_LEN
        + BTH_LEN
        + op.ext_headers_len()
        + padded_len(op, payload_len)
        + ICRC_LEN
}

/// Emit a whole frame into `buf`: computes pad count, IP total/payload length,
/// the IPv4 header checksum, UDP length (and checksum for IPv6; 0 over IPv4,
/// as rxe does) and the ICRC. Returns the number of bytes written.
///
/// `headers.bth.pad_count` is ignored (computed from `payload`); 24-bit
/// fields (DestQP, PSN, MSN) and the VLAN ID are masked to their width.
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
    let udp_len =
        UDP_LEN + BTH_LEN + op.ext_headers_len() + padded_len(op, payload.len()) + ICRC_LEN;
    let ip_hdr = ip_header_len(headers);
    let ip_total = match headers.ip {
        IpRepr::V4 { .. } => IPV4_LEN + udp_len,
        IpRepr::V6 { .. } => udp_len,
    };
    if ip_total > u16::MAX as usize {
        return Err(EmitError::PayloadTooLong);
    }
    let total = l2_len(headers) + ip_hdr + udp_len;
    if buf.len() < total {
        return Err(EmitError::BufferTooSmall);
    }
    let f = &mut buf[..total];

    // Ethernet [+ 802.1Q].
    f[0..6].copy_from_slice(&headers.eth.dst);
    f[6..12].copy_from_slice(&headers.eth.src);
    let ethertype = match headers.ip {
        IpRepr::V4 { .. } => ETHERTYPE_IPV4,
        IpRepr::V6 { .. } => ETHERTYPE_IPV6,
    };
    let ip = if let Some(tag) = headers.eth.vlan {
        f[12..14].copy_from_slice(&ETHERTYPE_VLAN.to_be_bytes());
        let tci = ((tag.pcp as u16 & 0x7) << 13) | ((tag.dei as u16) << 12) | (tag.vid & 0x0FFF);
        f[14..16].copy_from_slice(&tci.to_be_bytes());
        f[16..18].copy_from_slice(&ethertype.to_be_bytes());
        ETH_LEN + VLAN_LEN
    } else {
        f[12..14].copy_from_slice(&ethertype.to_be_bytes());
        ETH_LEN
    };

    // IP.
    let version = match headers.ip {
        IpRepr::V4 {
            src,
            dst,
            dscp,
            ecn,
            ttl,
            ident,
            dont_fragment,
        } => {
            let h = &mut f[ip..ip + IPV4_LEN];
            h[0] = 0x45;
            h[1] = (dscp << 2) | ecn as u8;
            h[2..4].copy_from_slice(&(ip_total as u16).to_be_bytes());
            h[4..6].copy_from_slice(&ident.to_be_bytes());
            h[6..8].copy_from_slice(&(if dont_fragment { 0x4000u16 } else { 0 }).to_be_bytes());
            h[8] = ttl;
            h[9] = IP_PROTO_UDP;
            h[10..12].copy_from_slice(&[0, 0]);
            h[12..16].copy_from_slice(&src.octets());
            h[16..20].copy_from_slice(&dst.octets());
            let c = checksum::checksum(h);
            h[10..12].copy_from_slice(&c.to_be_bytes());
            IpVersion::V4
        }
        IpRepr::V6 {
            src,
            dst,
            dscp,
            ecn,
            flow_label,
            hop_limit,
        } => {
            let h = &mut f[ip..ip + IPV6_LEN];
            let tclass = ((dscp << 2) | ecn as u8) as u32;
            let word = (6u32 << 28) | (tclass << 20) | (flow_label & 0x000F_FFFF);
            h[0..4].copy_from_slice(&word.to_be_bytes());
            h[4..6].copy_from_slice(&(ip_total as u16).to_be_bytes());
            h[6] = IP_PROTO_UDP;
            h[7] = hop_limit;
            h[8..24].copy_from_slice(&src.octets());
            h[24..40].copy_from_slice(&dst.octets());
            IpVersion::V6
        }
    };

    // UDP (checksum filled in last for IPv6).
    let udp = ip + ip_hdr;
    f[udp..udp + 2].copy_from_slice(&headers.udp.src_port.to_be_bytes());
    f[udp + 2..udp + 4].copy_from_slice(&headers.udp.dst_port.to_be_bytes());
    f[udp + 4..udp + 6].copy_from_slice(&(udp_len as u16).to_be_bytes());
    f[udp + 6..udp + 8].copy_from_slice(&[0, 0]);

    // BTH.
    let b = udp + UDP_LEN;
    let bth = &headers.bth;
    f[b] = op.as_u8();
    f[b + 1] = ((bth.solicited as u8) << 7) | ((bth.mig_req as u8) << 6) | ((pad as u8) << 4);
    f[b + 2..b + 4].copy_from_slice(&bth.pkey.to_be_bytes());
    f[b + 4] = ((bth.fecn as u8) << 7) | ((bth.becn as u8) << 6);
    f[b + 5..b + 8].copy_from_slice(&(bth.dest_qp & 0xFF_FFFF).to_be_bytes()[1..]);
    f[b + 8] = (bth.ack_req as u8) << 7;
    f[b + 9..b + 12].copy_from_slice(&(bth.psn & 0xFF_FFFF).to_be_bytes()[1..]);

    // Extension headers, in IBTA order.
    let mut x = b + BTH_LEN;
    if let Some(r) = headers.reth {
        f[x..x + 8].copy_from_slice(&r.va.to_be_bytes());
        f[x + 8..x + 12].copy_from_slice(&r.rkey.to_be_bytes());
        f[x + 12..x + 16].copy_from_slice(&r.dma_len.to_be_bytes());
        x += 16;
    }
    if let Some(a) = headers.atomic_eth {
        f[x..x + 8].copy_from_slice(&a.va.to_be_bytes());
        f[x + 8..x + 12].copy_from_slice(&a.rkey.to_be_bytes());
        f[x + 12..x + 20].copy_from_slice(&a.swap_add.to_be_bytes());
        f[x + 20..x + 28].copy_from_slice(&a.compare.to_be_bytes());
        x += 28;
    }
    if let Some(imm) = headers.immdt {
        f[x..x + 4].copy_from_slice(&imm.to_be_bytes());
        x += 4;
    }
    if let Some(rkey) = headers.ieth {
        f[x..x + 4].copy_from_slice(&rkey.to_be_bytes());
        x += 4;
    }
    if let Some(a) = headers.aeth {
        f[x] = a.syndrome;
        f[x + 1..x + 4].copy_from_slice(&(a.msn & 0xFF_FFFF).to_be_bytes()[1..]);
        x += 4;
    }
    if let Some(a) = headers.atomic_ack_eth {
        f[x..x + 8].copy_from_slice(&a.orig.to_be_bytes());
        x += 8;
    }

    // Payload and pad (a CNP's reserved bytes default to zero).
    let icrc_at = total - ICRC_LEN;
    f[x..x + payload.len()].copy_from_slice(payload);
    f[x + payload.len()..icrc_at].fill(0);

    // ICRC (masks the UDP checksum, so it can come first), then the IPv6
    // UDP checksum, which covers the ICRC.
    let crc = icrc::compute(version, &f[ip..icrc_at]).unwrap_or(0);
    f[icrc_at..total].copy_from_slice(&crc.to_le_bytes());
    if version == IpVersion::V6 {
        let mut s = [0u8; 16];
        let mut d = [0u8; 16];
        s.copy_from_slice(&f[ip + 8..ip + 24]);
        d.copy_from_slice(&f[ip + 24..ip + 40]);
        let c = checksum::udp_ipv6(&s, &d, &f[udp..total]);
        f[udp + 6..udp + 8].copy_from_slice(&c.to_be_bytes());
    }
    Ok(total)
}
