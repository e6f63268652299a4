//! Datagram Extended Transport Header, 8 bytes: Q_Key (4), reserved (1),
//! source QP (3). Carried by every Unreliable Datagram packet, right after
//! the BTH (IBTA Vol. 1, 9.3.3 "Datagram extended transport header";
//! rxe `struct rxe_deth` in `rxe_hdr.h`: `qkey`, then `sqp` whose top byte
//! is the reserved byte, sent as zero).

use super::bytes::{get32, header_view, set32, Field};

/// Byte ranges of the DETH fields.
pub mod field {
    use super::Field;
    pub const QKEY: Field = 0..4;
    pub const RESERVED: Field = 4..5;
    pub const SRC_QP: Field = 5..8;
}

// The source QP is the low 24 bits of the word after the Q_Key.
const _: () = assert!(field::SRC_QP.start == field::RESERVED.end && field::SRC_QP.end == 8);

/// The 24 bits of a QP number.
const QPN_MASK: u32 = 0x00FF_FFFF;

header_view!(
    /// A view of a DETH.
    Deth,
    8
);

impl<T: AsRef<[u8]>> Deth<T> {
    /// The Q_Key the sender named (IBA 10.2.5).
    #[inline]
    pub fn qkey(&self) -> u32 {
        get32(self.buffer.as_ref(), field::QKEY.start)
    }
    /// The sending QP's number (24 bits).
    #[inline]
    pub fn src_qp(&self) -> u32 {
        get32(self.buffer.as_ref(), field::RESERVED.start) & QPN_MASK
    }
    /// The reserved byte (sent as zero, ignored on receive as rxe does).
    #[inline]
    pub fn reserved(&self) -> u8 {
        self.buffer.as_ref()[field::RESERVED.start]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Deth<T> {
    /// Set the Q_Key.
    #[inline]
    pub fn set_qkey(&mut self, value: u32) {
        set32(self.buffer.as_mut(), field::QKEY.start, value)
    }
    /// Set the source QP (masked to 24 bits); the reserved byte becomes 0.
    #[inline]
    pub fn set_src_qp(&mut self, value: u32) {
        set32(
            self.buffer.as_mut(),
            field::RESERVED.start,
            value & QPN_MASK,
        )
    }
}

/// Datagram Extended Transport Header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct DethRepr {
    pub qkey: u32,
    /// Source QP (24 bits).
    pub src_qp: u32,
}

impl DethRepr {
    /// Read every field (the reserved byte is ignored).
    #[inline(always)]
    pub fn parse<T: AsRef<[u8]>>(deth: &Deth<T>) -> DethRepr {
        DethRepr {
            qkey: deth.qkey(),
            src_qp: deth.src_qp(),
        }
    }
    /// Write every field (reserved byte zero, source QP masked to 24 bits).
    #[inline]
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, deth: &mut Deth<T>) {
        deth.set_qkey(self.qkey);
        deth.set_src_qp(self.src_qp);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_bytes() {
        let bytes = [0x80, 0x01, 0x00, 0x00, 0x00, 0x12, 0x34, 0x56];
        let d = Deth::new_checked(&bytes[..]).unwrap();
        assert_eq!(d.reserved(), 0);
        let r = DethRepr::parse(&d);
        assert_eq!(
            r,
            DethRepr {
                qkey: 0x8001_0000,
                src_qp: 0x12_3456
            }
        );
        let mut out = [0xFFu8; 8];
        r.emit(&mut Deth::new_unchecked(&mut out[..]));
        assert_eq!(out, bytes);
    }

    #[test]
    fn reserved_byte_is_ignored_and_written_as_zero() {
        let bytes = [0, 0, 0, 7, 0xAB, 0, 0, 1];
        let r = DethRepr::parse(&Deth::new_unchecked(&bytes[..]));
        assert_eq!(r, DethRepr { qkey: 7, src_qp: 1 });
        let mut out = [0u8; 8];
        DethRepr {
            qkey: 7,
            src_qp: 0xFF00_0001,
        }
        .emit(&mut Deth::new_unchecked(&mut out[..]));
        assert_eq!(out, [0, 0, 0, 7, 0, 0, 0, 1]);
    }

    #[test]
    fn short_buffers_are_truncated() {
        for n in 0..8 {
            assert!(Deth::new_checked(&[0u8; 8][..n]).is_err());
        }
    }
}
