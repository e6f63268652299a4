//! IEEE 802.1Q VLAN tag: the 4 bytes after the outer EtherType 0x8100,
//! TCI (PCP 3 bits | DEI 1 bit | VID 12 bits) then the inner EtherType.

use super::bytes::{get16, header_view, set16, Field};

/// Byte ranges of the tag fields (relative to the end of the MAC addresses
/// plus the 0x8100 TPID, i.e. byte 14 of the frame).
pub mod field {
    use super::Field;
    pub const TCI: Field = 0..2;
    pub const ETHERTYPE: Field = 2..4;
}

header_view!(
    /// A view of an 802.1Q tag (TCI + inner EtherType).
    VlanHeader,
    4
);

/// One 802.1Q tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct VlanTag {
    /// Priority code point (3 bits).
    pub pcp: u8,
    /// Drop eligible indicator.
    pub dei: bool,
    /// VLAN identifier (12 bits).
    pub vid: u16,
}

impl VlanTag {
    /// Decode a tag control information word.
    #[inline]
    pub const fn from_tci(tci: u16) -> Self {
        VlanTag {
            pcp: (tci >> 13) as u8,
            dei: tci & 0x1000 != 0,
            vid: tci & 0x0FFF,
        }
    }

    /// The tag control information word (fields masked to their widths).
    #[inline]
    pub const fn tci(self) -> u16 {
        ((self.pcp as u16 & 0x7) << 13) | ((self.dei as u16) << 12) | (self.vid & 0x0FFF)
    }
}

impl<T: AsRef<[u8]>> VlanHeader<T> {
    /// The tag control information word.
    #[inline]
    pub fn tci(&self) -> u16 {
        get16(self.buffer.as_ref(), field::TCI.start)
    }
    /// The decoded tag.
    #[inline]
    pub fn tag(&self) -> VlanTag {
        VlanTag::from_tci(self.tci())
    }
    /// The EtherType of what follows the tag.
    #[inline]
    pub fn ethertype(&self) -> u16 {
        get16(self.buffer.as_ref(), field::ETHERTYPE.start)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> VlanHeader<T> {
    /// Set the tag control information from a tag.
    #[inline]
    pub fn set_tag(&mut self, tag: VlanTag) {
        set16(self.buffer.as_mut(), field::TCI.start, tag.tci())
    }
    /// Set the inner EtherType.
    #[inline]
    pub fn set_ethertype(&mut self, value: u16) {
        set16(self.buffer.as_mut(), field::ETHERTYPE.start, value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tci_round_trip_and_masking() {
        let tag = VlanTag {
            pcp: 5,
            dei: false,
            vid: 4094,
        };
        assert_eq!(tag.tci(), 0xAFFE);
        assert_eq!(VlanTag::from_tci(0xAFFE), tag);
        assert_eq!(
            VlanTag {
                pcp: 9,
                dei: true,
                vid: 0x1001
            }
            .tci(),
            0x3001
        );
        let mut b = [0u8; 4];
        let mut v = VlanHeader::new_unchecked(&mut b[..]);
        v.set_tag(tag);
        v.set_ethertype(0x0800);
        assert_eq!(b, [0xAF, 0xFE, 0x08, 0x00]);
    }
}
