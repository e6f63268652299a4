//! Ethernet II header (IEEE 802.3): destination, source, EtherType.

use super::bytes::{get16, header_view, set16, Field};
use super::error::ParseError;
use super::vlan::{VlanHeader, VlanTag};

/// Byte ranges of the Ethernet header fields.
pub mod field {
    use super::Field;
    pub const DESTINATION: Field = 0..6;
    pub const SOURCE: Field = 6..12;
    pub const ETHERTYPE: Field = 12..14;
}

/// EtherType values the engine knows.
pub mod ethertype {
    pub const IPV4: u16 = 0x0800;
    pub const IPV6: u16 = 0x86DD;
    /// IEEE 802.1Q VLAN tag.
    pub const VLAN: u16 = 0x8100;
}

/// Length of an untagged Ethernet header.
pub const HEADER_LEN: usize = 14;

header_view!(
    /// A view of an Ethernet header.
    EthernetFrame,
    HEADER_LEN
);

impl<T: AsRef<[u8]>> EthernetFrame<T> {
    /// Destination MAC address.
    #[inline]
    pub fn dst_addr(&self) -> [u8; 6] {
        let mut a = [0u8; 6];
        a.copy_from_slice(&self.buffer.as_ref()[field::DESTINATION]);
        a
    }
    /// Source MAC address.
    #[inline]
    pub fn src_addr(&self) -> [u8; 6] {
        let mut a = [0u8; 6];
        a.copy_from_slice(&self.buffer.as_ref()[field::SOURCE]);
        a
    }
    /// EtherType (0x8100 if a VLAN tag follows).
    #[inline]
    pub fn ethertype(&self) -> u16 {
        get16(self.buffer.as_ref(), field::ETHERTYPE.start)
    }

    /// The network header: its EtherType and its offset in the frame,
    /// after this header and at most one 802.1Q tag (`Truncated` if the
    /// tag is cut short). The view must be checked ([`Self::new_checked`]).
    #[inline]
    pub fn network_header(&self) -> Result<(u16, usize), ParseError> {
        match self.ethertype() {
            ethertype::VLAN => {
                let tag = VlanHeader::new_checked(self.payload())?;
                Ok((
                    tag.ethertype(),
                    HEADER_LEN + VlanHeader::<&[u8]>::HEADER_LEN,
                ))
            }
            et => Ok((et, HEADER_LEN)),
        }
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> EthernetFrame<T> {
    /// Set the destination MAC address.
    #[inline]
    pub fn set_dst_addr(&mut self, addr: [u8; 6]) {
        self.buffer.as_mut()[field::DESTINATION].copy_from_slice(&addr);
    }
    /// Set the source MAC address.
    #[inline]
    pub fn set_src_addr(&mut self, addr: [u8; 6]) {
        self.buffer.as_mut()[field::SOURCE].copy_from_slice(&addr);
    }
    /// Set the EtherType.
    #[inline]
    pub fn set_ethertype(&mut self, value: u16) {
        set16(self.buffer.as_mut(), field::ETHERTYPE.start, value)
    }
}

/// Ethernet header, with an optional 802.1Q tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct EthRepr {
    pub dst: [u8; 6],
    pub src: [u8; 6],
    pub vlan: Option<VlanTag>,
}

impl EthRepr {
    /// Parse the Ethernet header and at most one 802.1Q tag at the start of
    /// `frame`; returns the header, the inner EtherType and the offset of the
    /// network header ([`EthernetFrame::network_header`]).
    #[inline]
    pub fn parse(frame: &[u8]) -> Result<(EthRepr, u16, usize), ParseError> {
        let eth = EthernetFrame::new_checked(frame)?;
        let (ethertype, at) = eth.network_header()?;
        let vlan = (at > HEADER_LEN).then(|| VlanHeader::new_unchecked(eth.payload()).tag());
        let repr = EthRepr {
            dst: eth.dst_addr(),
            src: eth.src_addr(),
            vlan,
        };
        Ok((repr, ethertype, at))
    }

    /// Bytes of the Ethernet header including the VLAN tag, if any.
    #[inline]
    pub const fn header_len(&self) -> usize {
        if self.vlan.is_some() {
            HEADER_LEN + VlanHeader::<&[u8]>::HEADER_LEN
        } else {
            HEADER_LEN
        }
    }

    /// Write the header (and tag) with inner EtherType `ethertype` at the
    /// start of `buf`, which must hold [`EthRepr::header_len`] bytes.
    #[inline]
    pub fn emit(&self, ethertype: u16, buf: &mut [u8]) {
        let mut eth = EthernetFrame::new_unchecked(&mut *buf);
        eth.set_dst_addr(self.dst);
        eth.set_src_addr(self.src);
        match self.vlan {
            None => eth.set_ethertype(ethertype),
            Some(tag) => {
                eth.set_ethertype(ethertype::VLAN);
                let mut v = VlanHeader::new_unchecked(&mut buf[HEADER_LEN..]);
                v.set_tag(tag);
                v.set_ethertype(ethertype);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_untagged_and_tagged() {
        let bytes = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 0x08, 0x00, 0xEE];
        let (repr, et, off) = EthRepr::parse(&bytes).unwrap();
        assert_eq!(repr.dst, [1, 2, 3, 4, 5, 6]);
        assert_eq!(repr.src, [7, 8, 9, 10, 11, 12]);
        assert_eq!((et, off, repr.vlan), (ethertype::IPV4, 14, None));

        let tagged = [
            1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 0x81, 0x00, 0x70, 0x64, 0x86, 0xDD,
        ];
        let (repr, et, off) = EthRepr::parse(&tagged).unwrap();
        assert_eq!(
            repr.vlan,
            Some(VlanTag {
                pcp: 3,
                dei: true,
                vid: 100
            })
        );
        assert_eq!((et, off), (ethertype::IPV6, 18));
        let mut out = [0u8; 18];
        repr.emit(et, &mut out);
        assert_eq!(out, tagged);
        assert_eq!(
            EthRepr::parse(&tagged[..17]).unwrap_err(),
            ParseError::Truncated
        );
        assert_eq!(
            EthRepr::parse(&tagged[..13]).unwrap_err(),
            ParseError::Truncated
        );
    }
}
