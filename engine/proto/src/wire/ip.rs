//! What IPv4 and IPv6 share for RoCE v2: the ECN codepoint and the IP
//! header representation the engine sets or reads.

use core::net::{Ipv4Addr, Ipv6Addr};

/// IP protocol / next-header number of UDP.
pub const PROTOCOL_UDP: u8 = 17;

/// ECN codepoint (low two bits of IPv4 TOS / IPv6 traffic class; RFC 3168;
/// `docs/congestion.md`, "ECN marking").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Ecn {
    #[default]
    NotEct = 0b00,
    Ect1 = 0b01,
    Ect0 = 0b10,
    Ce = 0b11,
}

impl Ecn {
    /// The codepoint in the low two bits of `bits`.
    #[inline]
    pub const fn from_bits(bits: u8) -> Ecn {
        match bits & 0b11 {
            0b00 => Ecn::NotEct,
            0b01 => Ecn::Ect1,
            0b10 => Ecn::Ect0,
            _ => Ecn::Ce,
        }
    }

    /// The two-bit codepoint.
    #[inline]
    pub const fn bits(self) -> u8 {
        self as u8
    }

    /// ECN-capable transport (ECT(0) or ECT(1)).
    #[inline]
    pub const fn is_ect(self) -> bool {
        matches!(self, Ecn::Ect0 | Ecn::Ect1)
    }
}

/// IPv4 or IPv6 header fields the engine sets or reads (lengths, protocol
/// and checksums are computed on emit).
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

impl IpRepr {
    /// The ECN codepoint.
    #[inline]
    pub const fn ecn(&self) -> Ecn {
        match *self {
            IpRepr::V4 { ecn, .. } | IpRepr::V6 { ecn, .. } => ecn,
        }
    }

    /// The DSCP (6 bits).
    #[inline]
    pub const fn dscp(&self) -> u8 {
        match *self {
            IpRepr::V4 { dscp, .. } | IpRepr::V6 { dscp, .. } => dscp,
        }
    }

    /// Bytes of the IP header (no IPv4 options, no IPv6 extension headers).
    #[inline]
    pub const fn header_len(&self) -> usize {
        match self {
            IpRepr::V4 { .. } => super::ipv4::HEADER_LEN,
            IpRepr::V6 { .. } => super::ipv6::HEADER_LEN,
        }
    }

    /// The EtherType that carries this IP version.
    #[inline]
    pub const fn ethertype(&self) -> u16 {
        match self {
            IpRepr::V4 { .. } => super::eth::ethertype::IPV4,
            IpRepr::V6 { .. } => super::eth::ethertype::IPV6,
        }
    }

    /// Write the header at the start of `buf` (at least
    /// [`IpRepr::header_len`] bytes) for a UDP datagram of `udp_len` bytes,
    /// IPv4 header checksum included. The caller checked `udp_len` fits.
    #[inline]
    pub fn emit(&self, udp_len: usize, buf: &mut [u8]) {
        match *self {
            IpRepr::V4 {
                src,
                dst,
                dscp,
                ecn,
                ttl,
                ident,
                dont_fragment,
            } => {
                let mut p = super::ipv4::Ipv4Packet::new_unchecked(buf);
                p.set_version_ihl();
                p.set_dscp_ecn(dscp, ecn);
                p.set_total_len((super::ipv4::HEADER_LEN + udp_len) as u16);
                p.set_ident(ident);
                p.set_flags_fragment(dont_fragment);
                p.set_ttl(ttl);
                p.set_protocol(PROTOCOL_UDP);
                p.set_src_addr(src);
                p.set_dst_addr(dst);
                p.fill_checksum();
            }
            IpRepr::V6 {
                src,
                dst,
                dscp,
                ecn,
                flow_label,
                hop_limit,
            } => {
                let mut p = super::ipv6::Ipv6Packet::new_unchecked(buf);
                p.set_version_class_flow(dscp, ecn, flow_label);
                p.set_payload_len(udp_len as u16);
                p.set_next_header(PROTOCOL_UDP);
                p.set_hop_limit(hop_limit);
                p.set_src_addr(src);
                p.set_dst_addr(dst);
            }
        }
    }
}
