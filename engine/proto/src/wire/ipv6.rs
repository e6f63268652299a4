//! IPv6 header (RFC 8200), fixed 40 bytes; RoCE v2 frames carry UDP
//! directly (no extension headers). ECN is exposed (RFC 3168).

use core::net::Ipv6Addr;

use super::bytes::{get16, get32, header_view, set16, set32, Field};
use super::error::ParseError;
use super::ip::{Ecn, IpRepr, PROTOCOL_UDP};

/// Byte ranges of the IPv6 header fields.
pub mod field {
    use super::Field;
    /// Version (4 bits) | traffic class (8) | flow label (20).
    pub const VER_TC_FLOW: Field = 0..4;
    pub const LENGTH: Field = 4..6;
    pub const NXT_HDR: usize = 6;
    pub const HOP_LIMIT: usize = 7;
    pub const SRC_ADDR: Field = 8..24;
    pub const DST_ADDR: Field = 24..40;
}

/// Length of the IPv6 header.
pub const HEADER_LEN: usize = 40;

header_view!(
    /// A view of an IPv6 header.
    Ipv6Packet,
    HEADER_LEN
);

impl<T: AsRef<[u8]>> Ipv6Packet<T> {
    fn word0(&self) -> u32 {
        get32(self.buffer.as_ref(), field::VER_TC_FLOW.start)
    }
    /// IP version (6 for a valid header).
    #[inline]
    pub fn version(&self) -> u8 {
        (self.word0() >> 28) as u8
    }
    /// Traffic class (DSCP | ECN).
    #[inline]
    pub fn traffic_class(&self) -> u8 {
        (self.word0() >> 20) as u8
    }
    /// DSCP (6 bits).
    #[inline]
    pub fn dscp(&self) -> u8 {
        self.traffic_class() >> 2
    }
    /// ECN codepoint.
    #[inline]
    pub fn ecn(&self) -> Ecn {
        Ecn::from_bits(self.traffic_class())
    }
    /// Flow label (20 bits).
    #[inline]
    pub fn flow_label(&self) -> u32 {
        self.word0() & 0x000F_FFFF
    }
    /// Payload length (everything after this header).
    #[inline]
    pub fn payload_len(&self) -> u16 {
        get16(self.buffer.as_ref(), field::LENGTH.start)
    }
    /// Next header (17 = UDP).
    #[inline]
    pub fn next_header(&self) -> u8 {
        self.buffer.as_ref()[field::NXT_HDR]
    }
    /// Hop limit.
    #[inline]
    pub fn hop_limit(&self) -> u8 {
        self.buffer.as_ref()[field::HOP_LIMIT]
    }
    /// What a RoCE v2 frame's IPv6 header must be: version 6 carrying UDP
    /// directly (no extension headers); else `NotRoce`.
    #[inline]
    pub fn check_roce(&self) -> Result<(), ParseError> {
        if self.version() != 6 || self.next_header() != PROTOCOL_UDP {
            return Err(ParseError::NotRoce);
        }
        Ok(())
    }
    /// Source address.
    #[inline]
    pub fn src_addr(&self) -> Ipv6Addr {
        let mut a = [0u8; 16];
        a.copy_from_slice(&self.buffer.as_ref()[field::SRC_ADDR]);
        Ipv6Addr::from(a)
    }
    /// Destination address.
    #[inline]
    pub fn dst_addr(&self) -> Ipv6Addr {
        let mut a = [0u8; 16];
        a.copy_from_slice(&self.buffer.as_ref()[field::DST_ADDR]);
        Ipv6Addr::from(a)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv6Packet<T> {
    /// Set version 6, traffic class (DSCP | ECN) and flow label.
    #[inline]
    pub fn set_version_class_flow(&mut self, dscp: u8, ecn: Ecn, flow_label: u32) {
        let tclass = ((dscp << 2) | ecn.bits()) as u32;
        let word = (6u32 << 28) | (tclass << 20) | (flow_label & 0x000F_FFFF);
        set32(self.buffer.as_mut(), field::VER_TC_FLOW.start, word)
    }
    /// Set only the ECN bits (what a switch does when it marks CE).
    #[inline]
    pub fn set_ecn(&mut self, ecn: Ecn) {
        let b = &mut self.buffer.as_mut()[1];
        *b = (*b & !0x30) | (ecn.bits() << 4);
    }
    /// Set the payload length.
    #[inline]
    pub fn set_payload_len(&mut self, value: u16) {
        set16(self.buffer.as_mut(), field::LENGTH.start, value)
    }
    /// Set the next header.
    #[inline]
    pub fn set_next_header(&mut self, value: u8) {
        self.buffer.as_mut()[field::NXT_HDR] = value;
    }
    /// Set the hop limit.
    #[inline]
    pub fn set_hop_limit(&mut self, value: u8) {
        self.buffer.as_mut()[field::HOP_LIMIT] = value;
    }
    /// Set the source address.
    #[inline]
    pub fn set_src_addr(&mut self, addr: Ipv6Addr) {
        self.buffer.as_mut()[field::SRC_ADDR].copy_from_slice(&addr.octets())
    }
    /// Set the destination address.
    #[inline]
    pub fn set_dst_addr(&mut self, addr: Ipv6Addr) {
        self.buffer.as_mut()[field::DST_ADDR].copy_from_slice(&addr.octets())
    }
}

/// The fields of a header that was already checked ([`Ipv6Packet::check_roce`]).
#[inline]
pub fn repr<T: AsRef<[u8]>>(p: &Ipv6Packet<T>) -> IpRepr {
    IpRepr::V6 {
        src: p.src_addr(),
        dst: p.dst_addr(),
        dscp: p.dscp(),
        ecn: p.ecn(),
        flow_label: p.flow_label(),
        hop_limit: p.hop_limit(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_round_trip() {
        let mut b = [0u8; 40];
        let mut p = Ipv6Packet::new_unchecked(&mut b[..]);
        p.set_version_class_flow(46, Ecn::Ect1, 0xFEDCB);
        p.set_payload_len(1234);
        p.set_next_header(17);
        p.set_hop_limit(7);
        p.set_src_addr("fd00::1".parse().unwrap());
        p.set_dst_addr("fd00::2".parse().unwrap());
        p.set_ecn(Ecn::Ce);
        assert_eq!(b[0], 0x6B);
        let p = Ipv6Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.check_roce(), Ok(()));
        assert_eq!(p.payload_len(), 1234);
        assert_eq!(
            repr(&p),
            IpRepr::V6 {
                src: "fd00::1".parse().unwrap(),
                dst: "fd00::2".parse().unwrap(),
                dscp: 46,
                ecn: Ecn::Ce,
                flow_label: 0xFEDCB,
                hop_limit: 7
            }
        );
        b[6] = 0; // hop-by-hop options
        let p = Ipv6Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.check_roce(), Err(ParseError::NotRoce));
    }
}
