//! IPv4 header (RFC 791), without options: the form RoCE v2 uses
//! (`docs/wire-format.md`, "Frame layout"). ECN is exposed (RFC 3168).

use core::net::Ipv4Addr;

use super::bytes::{get16, get32, header_view, set16, set32, Field};
use super::checksum;
use super::error::ParseError;
use super::ip::{Ecn, IpRepr, PROTOCOL_UDP};

/// Byte ranges of the IPv4 header fields.
pub mod field {
    use super::Field;
    pub const VER_IHL: usize = 0;
    /// DSCP (6 bits) | ECN (2 bits).
    pub const DSCP_ECN: usize = 1;
    pub const LENGTH: Field = 2..4;
    pub const IDENT: Field = 4..6;
    /// Flags (3 bits: reserved, DF, MF) | fragment offset (13 bits).
    pub const FLG_OFF: Field = 6..8;
    pub const TTL: usize = 8;
    pub const PROTOCOL: usize = 9;
    pub const CHECKSUM: Field = 10..12;
    pub const SRC_ADDR: Field = 12..16;
    pub const DST_ADDR: Field = 16..20;
}

/// Length of an IPv4 header without options.
pub const HEADER_LEN: usize = 20;

header_view!(
    /// A view of an IPv4 header (the first 20 bytes; options are not
    /// interpreted).
    Ipv4Packet,
    HEADER_LEN
);

impl<T: AsRef<[u8]>> Ipv4Packet<T> {
    /// IP version (4 for a valid header).
    #[inline]
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VER_IHL] >> 4
    }
    /// Header length in bytes (IHL * 4).
    #[inline]
    pub fn header_len(&self) -> usize {
        ((self.buffer.as_ref()[field::VER_IHL] & 0x0F) as usize) * 4
    }
    /// Differentiated services code point (6 bits).
    #[inline]
    pub fn dscp(&self) -> u8 {
        self.buffer.as_ref()[field::DSCP_ECN] >> 2
    }
    /// ECN codepoint.
    #[inline]
    pub fn ecn(&self) -> Ecn {
        Ecn::from_bits(self.buffer.as_ref()[field::DSCP_ECN])
    }
    /// Total length (header + payload).
    #[inline]
    pub fn total_len(&self) -> u16 {
        get16(self.buffer.as_ref(), field::LENGTH.start)
    }
    /// Identification.
    #[inline]
    pub fn ident(&self) -> u16 {
        get16(self.buffer.as_ref(), field::IDENT.start)
    }
    /// Don't Fragment flag.
    #[inline]
    pub fn dont_frag(&self) -> bool {
        self.buffer.as_ref()[field::FLG_OFF.start] & 0x40 != 0
    }
    /// More Fragments flag.
    #[inline]
    pub fn more_frags(&self) -> bool {
        self.buffer.as_ref()[field::FLG_OFF.start] & 0x20 != 0
    }
    /// Fragment offset in 8-byte units.
    #[inline]
    pub fn frag_offset(&self) -> u16 {
        get16(self.buffer.as_ref(), field::FLG_OFF.start) & 0x1FFF
    }
    /// True if this is a fragment (MF set or a non-zero offset).
    #[inline]
    pub fn is_fragment(&self) -> bool {
        get16(self.buffer.as_ref(), field::FLG_OFF.start) & 0x3FFF != 0
    }
    /// Time to live.
    #[inline]
    pub fn ttl(&self) -> u8 {
        self.buffer.as_ref()[field::TTL]
    }
    /// Protocol number of the payload.
    #[inline]
    pub fn protocol(&self) -> u8 {
        self.buffer.as_ref()[field::PROTOCOL]
    }
    /// Header checksum as carried.
    #[inline]
    pub fn checksum(&self) -> u16 {
        get16(self.buffer.as_ref(), field::CHECKSUM.start)
    }
    /// Source address.
    #[inline]
    pub fn src_addr(&self) -> Ipv4Addr {
        Ipv4Addr::from(get32(self.buffer.as_ref(), field::SRC_ADDR.start))
    }
    /// Destination address.
    #[inline]
    pub fn dst_addr(&self) -> Ipv4Addr {
        Ipv4Addr::from(get32(self.buffer.as_ref(), field::DST_ADDR.start))
    }
    /// What a RoCE v2 frame's IPv4 header must be: version 4 without
    /// options (IHL 5), not a fragment, protocol UDP; else `NotRoce`.
    #[inline]
    pub fn check_roce(&self) -> Result<(), ParseError> {
        let ver_ihl = self.buffer.as_ref()[field::VER_IHL];
        if ver_ihl != 0x45 || self.is_fragment() || self.protocol() != PROTOCOL_UDP {
            return Err(ParseError::NotRoce);
        }
        Ok(())
    }
    /// True if the header checksum is correct (over the 20-byte header).
    #[inline]
    pub fn verify_checksum(&self) -> bool {
        checksum::checksum(self.as_bytes()) == 0
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv4Packet<T> {
    /// Set version 4 and IHL 5 (no options).
    #[inline]
    pub fn set_version_ihl(&mut self) {
        self.buffer.as_mut()[field::VER_IHL] = 0x45;
    }
    /// Set DSCP and ECN.
    #[inline]
    pub fn set_dscp_ecn(&mut self, dscp: u8, ecn: Ecn) {
        self.buffer.as_mut()[field::DSCP_ECN] = (dscp << 2) | ecn.bits();
    }
    /// Set only the ECN bits (what a switch does when it marks CE).
    #[inline]
    pub fn set_ecn(&mut self, ecn: Ecn) {
        let b = &mut self.buffer.as_mut()[field::DSCP_ECN];
        *b = (*b & !0b11) | ecn.bits();
    }
    /// Set the total length.
    #[inline]
    pub fn set_total_len(&mut self, value: u16) {
        set16(self.buffer.as_mut(), field::LENGTH.start, value)
    }
    /// Set the identification.
    #[inline]
    pub fn set_ident(&mut self, value: u16) {
        set16(self.buffer.as_mut(), field::IDENT.start, value)
    }
    /// Set flags to DF (or none) and the fragment offset to 0.
    #[inline]
    pub fn set_flags_fragment(&mut self, dont_frag: bool) {
        set16(
            self.buffer.as_mut(),
            field::FLG_OFF.start,
            if dont_frag { 0x4000 } else { 0 },
        )
    }
    /// Set the TTL.
    #[inline]
    pub fn set_ttl(&mut self, value: u8) {
        self.buffer.as_mut()[field::TTL] = value;
    }
    /// Set the protocol.
    #[inline]
    pub fn set_protocol(&mut self, value: u8) {
        self.buffer.as_mut()[field::PROTOCOL] = value;
    }
    /// Set the checksum field.
    #[inline]
    pub fn set_checksum(&mut self, value: u16) {
        set16(self.buffer.as_mut(), field::CHECKSUM.start, value)
    }
    /// Set the source address.
    #[inline]
    pub fn set_src_addr(&mut self, addr: Ipv4Addr) {
        set32(self.buffer.as_mut(), field::SRC_ADDR.start, addr.to_bits())
    }
    /// Set the destination address.
    #[inline]
    pub fn set_dst_addr(&mut self, addr: Ipv4Addr) {
        set32(self.buffer.as_mut(), field::DST_ADDR.start, addr.to_bits())
    }
    /// Compute and store the header checksum (RFC 1071).
    #[inline]
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let c = checksum::checksum(self.as_bytes());
        self.set_checksum(c);
    }
}

/// The fields of a header that was already checked ([`Ipv4Packet::check_roce`]).
#[inline]
pub fn repr<T: AsRef<[u8]>>(p: &Ipv4Packet<T>) -> IpRepr {
    IpRepr::V4 {
        src: p.src_addr(),
        dst: p.dst_addr(),
        dscp: p.dscp(),
        ecn: p.ecn(),
        ttl: p.ttl(),
        ident: p.ident(),
        dont_fragment: p.dont_frag(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HDR: [u8; 20] = [
        0x45, 0x6B, 0x00, 0x3C, 0x12, 0x34, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 10, 0, 0, 1, 10, 0,
        0, 2,
    ];

    #[test]
    fn getters_read_the_fields() {
        let mut h = HDR;
        Ipv4Packet::new_unchecked(&mut h[..]).fill_checksum();
        let p = Ipv4Packet::new_checked(&h[..]).unwrap();
        assert_eq!((p.version(), p.header_len()), (4, 20));
        assert_eq!((p.dscp(), p.ecn()), (26, Ecn::Ce));
        assert_eq!(
            (p.total_len(), p.ident(), p.ttl(), p.protocol()),
            (60, 0x1234, 64, 17)
        );
        assert!(p.dont_frag() && !p.more_frags() && !p.is_fragment());
        assert_eq!(p.src_addr(), Ipv4Addr::new(10, 0, 0, 1));
        assert!(p.verify_checksum());
        assert_eq!(p.check_roce(), Ok(()));
        assert_eq!(repr(&p).ecn(), Ecn::Ce);
    }

    #[test]
    fn rejects_options_fragments_and_non_udp() {
        let parse = |h: &[u8]| Ipv4Packet::new_checked(h)?.check_roce();
        let mut h = HDR;
        h[0] = 0x46;
        assert_eq!(parse(&h).unwrap_err(), ParseError::NotRoce);
        let mut h = HDR;
        h[6] = 0x20; // MF
        assert_eq!(parse(&h).unwrap_err(), ParseError::NotRoce);
        let mut h = HDR;
        h[9] = 6;
        assert_eq!(parse(&h).unwrap_err(), ParseError::NotRoce);
        assert_eq!(parse(&HDR[..19]).unwrap_err(), ParseError::Truncated);
    }

    #[test]
    fn set_ecn_keeps_dscp() {
        let mut h = HDR;
        let mut p = Ipv4Packet::new_unchecked(&mut h[..]);
        p.set_ecn(Ecn::Ect0);
        assert_eq!((p.dscp(), p.ecn()), (26, Ecn::Ect0));
    }
}
