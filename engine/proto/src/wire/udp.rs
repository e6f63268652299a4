//! UDP header (RFC 768). RoCE v2 uses destination port 4791; the source
//! port carries per-QP flow entropy (rxe: base 0xC000). The checksum is 0
//! over IPv4 (as rxe sends) and computed over IPv6 (RFC 8200 8.1).

use super::bytes::{get16, header_view, set16, Field};

/// Byte ranges of the UDP header fields.
pub mod field {
    use super::Field;
    pub const SRC_PORT: Field = 0..2;
    pub const DST_PORT: Field = 2..4;
    pub const LENGTH: Field = 4..6;
    pub const CHECKSUM: Field = 6..8;
}

/// Length of the UDP header.
pub const HEADER_LEN: usize = 8;

/// UDP destination port of RoCE v2 (IANA).
pub const ROCE_V2_UDP_PORT: u16 = 4791;

header_view!(
    /// A view of a UDP header.
    UdpPacket,
    HEADER_LEN
);

impl<T: AsRef<[u8]>> UdpPacket<T> {
    /// Source port.
    #[inline]
    pub fn src_port(&self) -> u16 {
        get16(self.buffer.as_ref(), field::SRC_PORT.start)
    }
    /// Destination port.
    #[inline]
    pub fn dst_port(&self) -> u16 {
        get16(self.buffer.as_ref(), field::DST_PORT.start)
    }
    /// Length of header + data.
    #[inline]
    pub fn len(&self) -> u16 {
        get16(self.buffer.as_ref(), field::LENGTH.start)
    }
    /// True if the length field is 0 (never valid).
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Checksum as carried (0 = none, IPv4 only).
    #[inline]
    pub fn checksum(&self) -> u16 {
        get16(self.buffer.as_ref(), field::CHECKSUM.start)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> UdpPacket<T> {
    /// Set the source port.
    #[inline]
    pub fn set_src_port(&mut self, value: u16) {
        set16(self.buffer.as_mut(), field::SRC_PORT.start, value)
    }
    /// Set the destination port.
    #[inline]
    pub fn set_dst_port(&mut self, value: u16) {
        set16(self.buffer.as_mut(), field::DST_PORT.start, value)
    }
    /// Set the length.
    #[inline]
    pub fn set_len(&mut self, value: u16) {
        set16(self.buffer.as_mut(), field::LENGTH.start, value)
    }
    /// Set the checksum field.
    #[inline]
    pub fn set_checksum(&mut self, value: u16) {
        set16(self.buffer.as_mut(), field::CHECKSUM.start, value)
    }
}

/// UDP ports (length and checksum are computed on emit).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UdpRepr {
    pub src_port: u16,
    pub dst_port: u16,
}

impl UdpRepr {
    /// Read the ports of a header.
    #[inline]
    pub fn parse<T: AsRef<[u8]>>(packet: &UdpPacket<T>) -> UdpRepr {
        UdpRepr {
            src_port: packet.src_port(),
            dst_port: packet.dst_port(),
        }
    }

    /// Write the header for a datagram of `len` bytes with checksum 0 (the
    /// IPv6 checksum is filled in once the datagram is complete).
    #[inline]
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, len: u16, packet: &mut UdpPacket<T>) {
        packet.set_src_port(self.src_port);
        packet.set_dst_port(self.dst_port);
        packet.set_len(len);
        packet.set_checksum(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emit_then_read() {
        let mut b = [0xFFu8; 8];
        UdpRepr {
            src_port: 0xC001,
            dst_port: 4791,
        }
        .emit(100, &mut UdpPacket::new_unchecked(&mut b[..]));
        assert_eq!(b, [0xC0, 0x01, 0x12, 0xB7, 0, 100, 0, 0]);
        let p = UdpPacket::new_checked(&b[..]).unwrap();
        assert_eq!(
            (p.src_port(), p.dst_port(), p.len(), p.checksum()),
            (0xC001, 4791, 100, 0)
        );
        assert!(UdpPacket::new_checked(&b[..7]).is_err());
    }
}
