//! Base Transport Header, 12 bytes (IBTA Vol. 1, 9.2;
//! `docs/wire-format.md`, "BTH"):
//!
//! ```text
//! byte 0      OpCode
//! byte 1      SE(1) | MigReq(1) | PadCnt(2) | TVer(4)
//! bytes 2-3   P_Key
//! byte 4      FECN(1) | BECN(1) | resv6       (masked in the ICRC)
//! bytes 5-7   DestQP (24 bits)
//! byte 8      AckReq(1) | resv7
//! bytes 9-11  PSN (24 bits)
//! ```

use super::bytes::{get16, get24, header_view, set16, set24, Field};
use super::error::ParseError;
use super::opcode::Opcode;

/// Byte ranges of the BTH fields.
pub mod field {
    use super::Field;
    pub const OPCODE: usize = 0;
    /// SE | MigReq | PadCnt | TVer.
    pub const FLAGS: usize = 1;
    pub const PKEY: Field = 2..4;
    /// FECN | BECN | resv6.
    pub const FECN_BECN: usize = 4;
    pub const DEST_QP: Field = 5..8;
    /// AckReq | resv7.
    pub const ACK_REQ: usize = 8;
    pub const PSN: Field = 9..12;
}

/// Length of the BTH.
pub const HEADER_LEN: usize = 12;
/// Mask of 24-bit fields (DestQP, PSN).
pub const MASK_24: u32 = 0x00FF_FFFF;
/// Default partition key.
pub const DEFAULT_PKEY: u16 = 0xFFFF;

header_view!(
    /// A view of a BTH.
    Bth,
    HEADER_LEN
);

impl<T: AsRef<[u8]>> Bth<T> {
    fn b(&self, at: usize) -> u8 {
        self.buffer.as_ref()[at]
    }
    /// The opcode byte as carried.
    #[inline]
    pub fn opcode_raw(&self) -> u8 {
        self.b(field::OPCODE)
    }
    /// The opcode, if supported (RC, UD or CNP).
    #[inline]
    pub fn opcode(&self) -> Option<Opcode> {
        Opcode::from_u8(self.opcode_raw())
    }
    /// Solicited event.
    #[inline]
    pub fn solicited(&self) -> bool {
        self.b(field::FLAGS) & 0x80 != 0
    }
    /// Migration request.
    #[inline]
    pub fn mig_req(&self) -> bool {
        self.b(field::FLAGS) & 0x40 != 0
    }
    /// Pad count (0..3).
    #[inline]
    pub fn pad_count(&self) -> u8 {
        (self.b(field::FLAGS) >> 4) & 0x3
    }
    /// Transport header version (0).
    #[inline]
    pub fn tver(&self) -> u8 {
        self.b(field::FLAGS) & 0x0F
    }
    /// Partition key.
    #[inline(always)]
    pub fn pkey(&self) -> u16 {
        get16(self.buffer.as_ref(), field::PKEY.start)
    }
    /// Forward ECN.
    #[inline]
    pub fn fecn(&self) -> bool {
        self.b(field::FECN_BECN) & 0x80 != 0
    }
    /// Backward ECN (set on CNPs).
    #[inline]
    pub fn becn(&self) -> bool {
        self.b(field::FECN_BECN) & 0x40 != 0
    }
    /// Destination QP number (24 bits).
    #[inline]
    pub fn dest_qp(&self) -> u32 {
        get24(self.buffer.as_ref(), field::DEST_QP.start)
    }
    /// Acknowledge request.
    #[inline]
    pub fn ack_req(&self) -> bool {
        self.b(field::ACK_REQ) & 0x80 != 0
    }
    /// Packet sequence number (24 bits).
    #[inline]
    pub fn psn(&self) -> u32 {
        get24(self.buffer.as_ref(), field::PSN.start)
    }

    /// What a RoCE v2 BTH must be: an RC, UD or CNP opcode (else
    /// `UnsupportedOpcode`), transport version 0 (else `NotRoce`). Returns
    /// the opcode. The one rule both [`BthRepr::parse`] and the frame
    /// validator apply.
    #[inline(always)]
    pub fn check_roce(&self) -> Result<Opcode, ParseError> {
        let Some(opcode) = self.opcode() else {
            return Err(ParseError::UnsupportedOpcode(self.opcode_raw()));
        };
        if self.tver() != 0 {
            return Err(ParseError::NotRoce);
        }
        Ok(opcode)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Bth<T> {
    fn b_mut(&mut self, at: usize) -> &mut u8 {
        &mut self.buffer.as_mut()[at]
    }
    fn set_bit(&mut self, at: usize, mask: u8, on: bool) {
        let b = self.b_mut(at);
        *b = if on { *b | mask } else { *b & !mask };
    }
    /// Set the opcode.
    #[inline]
    pub fn set_opcode(&mut self, op: Opcode) {
        *self.b_mut(field::OPCODE) = op.as_u8();
    }
    /// Set the solicited event bit.
    #[inline]
    pub fn set_solicited(&mut self, on: bool) {
        self.set_bit(field::FLAGS, 0x80, on)
    }
    /// Set the migration request bit.
    #[inline]
    pub fn set_mig_req(&mut self, on: bool) {
        self.set_bit(field::FLAGS, 0x40, on)
    }
    /// Set the pad count (low two bits of `pad`).
    #[inline]
    pub fn set_pad_count(&mut self, pad: u8) {
        let b = self.b_mut(field::FLAGS);
        *b = (*b & !0x30) | ((pad & 0x3) << 4);
    }
    /// Set the transport header version (low four bits).
    #[inline]
    pub fn set_tver(&mut self, tver: u8) {
        let b = self.b_mut(field::FLAGS);
        *b = (*b & 0xF0) | (tver & 0x0F);
    }
    /// Set the partition key.
    #[inline]
    pub fn set_pkey(&mut self, value: u16) {
        set16(self.buffer.as_mut(), field::PKEY.start, value)
    }
    /// Set FECN.
    #[inline]
    pub fn set_fecn(&mut self, on: bool) {
        self.set_bit(field::FECN_BECN, 0x80, on)
    }
    /// Set BECN.
    #[inline]
    pub fn set_becn(&mut self, on: bool) {
        self.set_bit(field::FECN_BECN, 0x40, on)
    }
    /// Set the destination QP (low 24 bits of `qpn`).
    #[inline]
    pub fn set_dest_qp(&mut self, qpn: u32) {
        set24(self.buffer.as_mut(), field::DEST_QP.start, qpn & MASK_24)
    }
    /// Set the acknowledge request bit (clears resv7).
    #[inline]
    pub fn set_ack_req(&mut self, on: bool) {
        *self.b_mut(field::ACK_REQ) = (on as u8) << 7;
    }
    /// Set the PSN (low 24 bits of `psn`).
    #[inline]
    pub fn set_psn(&mut self, psn: u32) {
        set24(self.buffer.as_mut(), field::PSN.start, psn & MASK_24)
    }
}

/// Base Transport Header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BthRepr {
    pub opcode: Opcode,
    pub solicited: bool,
    pub mig_req: bool,
    /// Pad count; computed from the payload length on emit.
    pub pad_count: u8,
    pub pkey: u16,
    pub fecn: bool,
    pub becn: bool,
    /// 24-bit destination QP number.
    pub dest_qp: u32,
    pub ack_req: bool,
    /// 24-bit packet sequence number.
    pub psn: u32,
}

impl BthRepr {
    /// Parse a BTH: the opcode must be RC, UD or CNP (`UnsupportedOpcode`), the
    /// transport version 0 (`NotRoce`); see [`Bth::check_roce`].
    #[inline(always)]
    pub fn parse<T: AsRef<[u8]>>(bth: &Bth<T>) -> Result<BthRepr, ParseError> {
        let opcode = bth.check_roce()?;
        Ok(BthRepr::parse_checked(bth, opcode))
    }

    /// The fields of a BTH whose [`Bth::check_roce`] returned `opcode`.
    #[inline(always)]
    pub(super) fn parse_checked<T: AsRef<[u8]>>(bth: &Bth<T>, opcode: Opcode) -> BthRepr {
        BthRepr {
            opcode,
            solicited: bth.solicited(),
            mig_req: bth.mig_req(),
            pad_count: bth.pad_count(),
            pkey: bth.pkey(),
            fecn: bth.fecn(),
            becn: bth.becn(),
            dest_qp: bth.dest_qp(),
            ack_req: bth.ack_req(),
            psn: bth.psn(),
        }
    }

    /// Write every field (reserved bits zero, TVer 0, 24-bit fields masked).
    #[inline]
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, bth: &mut Bth<T>) {
        let b = bth.buffer.as_mut();
        b[field::OPCODE] = self.opcode.as_u8();
        b[field::FLAGS] = ((self.solicited as u8) << 7)
            | ((self.mig_req as u8) << 6)
            | ((self.pad_count & 0x3) << 4);
        b[field::FECN_BECN] = ((self.fecn as u8) << 7) | ((self.becn as u8) << 6);
        bth.set_pkey(self.pkey);
        bth.set_dest_qp(self.dest_qp);
        bth.set_ack_req(self.ack_req);
        bth.set_psn(self.psn);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // SEND_ONLY, SE, pad 2, P_Key 0xFFFF, BECN, DestQP 0x123456, AckReq, PSN 0xABCDEF.
    const BYTES: [u8; 12] = [
        0x04, 0xA0, 0xFF, 0xFF, 0x40, 0x12, 0x34, 0x56, 0x80, 0xAB, 0xCD, 0xEF,
    ];

    #[test]
    fn parse_and_emit_known_bytes() {
        let repr = BthRepr::parse(&Bth::new_checked(&BYTES[..]).unwrap()).unwrap();
        assert_eq!(
            repr,
            BthRepr {
                opcode: Opcode::SendOnly,
                solicited: true,
                mig_req: false,
                pad_count: 2,
                pkey: 0xFFFF,
                fecn: false,
                becn: true,
                dest_qp: 0x12_3456,
                ack_req: true,
                psn: 0xAB_CDEF
            }
        );
        let mut out = [0xFFu8; 12];
        repr.emit(&mut Bth::new_unchecked(&mut out[..]));
        assert_eq!(out, BYTES);
    }

    #[test]
    fn setters_touch_only_their_bits() {
        let mut b = BYTES;
        let mut v = Bth::new_unchecked(&mut b[..]);
        v.set_fecn(true);
        v.set_pad_count(1);
        v.set_dest_qp(0xFF00_0001);
        v.set_psn(0x0100_0002);
        assert!(v.fecn() && v.becn() && v.solicited());
        assert_eq!((v.pad_count(), v.dest_qp(), v.psn()), (1, 1, 2));
    }

    #[test]
    fn rejects_unknown_opcode_and_version() {
        let mut b = BYTES;
        b[0] = 0x15;
        assert_eq!(
            BthRepr::parse(&Bth::new_unchecked(&b[..])).unwrap_err(),
            ParseError::UnsupportedOpcode(0x15)
        );
        let mut b = BYTES;
        b[1] |= 1;
        assert_eq!(
            BthRepr::parse(&Bth::new_unchecked(&b[..])).unwrap_err(),
            ParseError::NotRoce
        );
        assert_eq!(
            Bth::new_checked(&BYTES[..11]).unwrap_err(),
            ParseError::Truncated
        );
    }
}
