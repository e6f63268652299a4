//! ACK Extended Transport Header, 4 bytes: syndrome (8) | MSN (24)
//! (IBTA Vol. 1, 9.3.5; `docs/wire-format.md`, "AETH").
//!
//! Syndrome bits 7..5 are the type: 000 ACK (low 5 bits = credit count,
//! 0x1F = invalid/unlimited), 001 RNR NAK (low 5 bits = RNR timer code,
//! [`rnr_timer_micros`]), 011 NAK (low 5 bits = [`nak_code`]); 010 is
//! reserved.

use super::bytes::{get24, header_view, set24, Field};

/// Byte ranges of the AETH fields.
pub mod field {
    use super::Field;
    pub const SYNDROME: usize = 0;
    pub const MSN: Field = 1..4;
}

header_view!(
    /// A view of an AETH.
    Aeth,
    4
);

impl<T: AsRef<[u8]>> Aeth<T> {
    /// The raw syndrome byte.
    #[inline]
    pub fn syndrome(&self) -> u8 {
        self.buffer.as_ref()[field::SYNDROME]
    }
    /// Message sequence number (24 bits).
    #[inline]
    pub fn msn(&self) -> u32 {
        get24(self.buffer.as_ref(), field::MSN.start)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Aeth<T> {
    /// Set the raw syndrome byte.
    #[inline]
    pub fn set_syndrome(&mut self, value: u8) {
        self.buffer.as_mut()[field::SYNDROME] = value;
    }
    /// Set the MSN (low 24 bits).
    #[inline]
    pub fn set_msn(&mut self, value: u32) {
        set24(self.buffer.as_mut(), field::MSN.start, value & 0xFF_FFFF)
    }
}

/// ACK Extended Transport Header: raw syndrome byte and 24-bit MSN.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct AethRepr {
    pub syndrome: u8,
    pub msn: u32,
}

impl AethRepr {
    /// Read both fields.
    #[inline(always)]
    pub fn parse<T: AsRef<[u8]>>(aeth: &Aeth<T>) -> AethRepr {
        AethRepr {
            syndrome: aeth.syndrome(),
            msn: aeth.msn(),
        }
    }
    /// Write both fields (MSN masked to 24 bits).
    #[inline]
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, aeth: &mut Aeth<T>) {
        aeth.set_syndrome(self.syndrome);
        aeth.set_msn(self.msn);
    }
    /// The decoded syndrome.
    #[inline]
    pub const fn kind(&self) -> Syndrome {
        Syndrome::from_u8(self.syndrome)
    }
    /// An ACK with a credit count (0..=31; [`CREDITS_INVALID`] = none).
    #[inline]
    pub const fn ack(credits: u8, msn: u32) -> AethRepr {
        AethRepr {
            syndrome: Syndrome::Ack { credits }.to_u8(),
            msn,
        }
    }
    /// An RNR NAK with an RNR timer code (0..=31, see [`rnr_timer_micros`]).
    #[inline]
    pub const fn rnr_nak(timer: u8, msn: u32) -> AethRepr {
        AethRepr {
            syndrome: Syndrome::RnrNak { timer }.to_u8(),
            msn,
        }
    }
    /// A NAK with a [`nak_code`].
    #[inline]
    pub const fn nak(code: u8, msn: u32) -> AethRepr {
        AethRepr {
            syndrome: Syndrome::Nak(code).to_u8(),
            msn,
        }
    }
}

/// ACK credit count meaning "invalid / unlimited" (end-to-end flow control
/// not used).
pub const CREDITS_INVALID: u8 = 0x1F;

/// NAK codes (low 5 bits of a NAK syndrome `0x60 | code`).
pub mod nak_code {
    pub const PSN_SEQUENCE_ERROR: u8 = 0;
    pub const INVALID_REQUEST: u8 = 1;
    pub const REMOTE_ACCESS_ERROR: u8 = 2;
    pub const REMOTE_OPERATIONAL_ERROR: u8 = 3;
    pub const INVALID_RD_REQUEST: u8 = 4;
}

/// The decoded AETH syndrome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Syndrome {
    /// Positive acknowledgement with a credit count.
    Ack { credits: u8 },
    /// Receiver not ready; retry after the timer code's delay.
    RnrNak { timer: u8 },
    /// Negative acknowledgement with a [`nak_code`].
    Nak(u8),
    /// Type 010 (reserved); the raw syndrome byte.
    Reserved(u8),
}

impl Syndrome {
    /// An ACK without end-to-end credits (credit count [`CREDITS_INVALID`]),
    /// the only ACK a responder without RC flow control sends (Linux rxe's
    /// `AETH_ACK_UNLIMITED`, 0x1F).
    pub const ACK_UNLIMITED: Syndrome = Syndrome::Ack {
        credits: CREDITS_INVALID,
    };

    /// Decode a syndrome byte (bit 7 is reserved and ignored).
    #[inline]
    pub const fn from_u8(syndrome: u8) -> Syndrome {
        let low = syndrome & 0x1F;
        match (syndrome >> 5) & 0x3 {
            0b00 => Syndrome::Ack { credits: low },
            0b01 => Syndrome::RnrNak { timer: low },
            0b11 => Syndrome::Nak(low),
            _ => Syndrome::Reserved(syndrome),
        }
    }

    /// Encode (low 5 bits of the value are used).
    #[inline]
    pub const fn to_u8(self) -> u8 {
        match self {
            Syndrome::Ack { credits } => credits & 0x1F,
            Syndrome::RnrNak { timer } => 0x20 | (timer & 0x1F),
            Syndrome::Nak(code) => 0x60 | (code & 0x1F),
            Syndrome::Reserved(raw) => raw,
        }
    }

    /// A short name for logs and `decode`: "ACK", "RNR_NAK", "NAK_PSN_SEQ",
    /// "NAK_INV_REQ", "NAK_REM_ACCESS", "NAK_REM_OP", "NAK_INV_RD_REQ",
    /// "NAK_UNKNOWN", "RESERVED".
    pub const fn name(self) -> &'static str {
        match self {
            Syndrome::Ack { .. } => "ACK",
            Syndrome::RnrNak { .. } => "RNR_NAK",
            Syndrome::Nak(nak_code::PSN_SEQUENCE_ERROR) => "NAK_PSN_SEQ",
            Syndrome::Nak(nak_code::INVALID_REQUEST) => "NAK_INV_REQ",
            Syndrome::Nak(nak_code::REMOTE_ACCESS_ERROR) => "NAK_REM_ACCESS",
            Syndrome::Nak(nak_code::REMOTE_OPERATIONAL_ERROR) => "NAK_REM_OP",
            Syndrome::Nak(nak_code::INVALID_RD_REQUEST) => "NAK_INV_RD_REQ",
            Syndrome::Nak(_) => "NAK_UNKNOWN",
            Syndrome::Reserved(_) => "RESERVED",
        }
    }
}

/// RNR NAK timer field encoding, code -> microseconds (IBTA Vol. 1,
/// table 45 "Encoding for RNR NAK Timer Field"; the same values as Linux
/// rxe's `rnrnak_usec`). Code 0 is the longest, 655.36 ms.
pub const RNR_TIMER_MICROS: [u32; 32] = [
    655_360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1_280, 1_920, 2_560, 3_840,
    5_120, 7_680, 10_240, 15_360, 20_480, 30_720, 40_960, 61_440, 81_920, 122_880, 163_840,
    245_760, 327_680, 491_520,
];

/// Microseconds an RNR timer code stands for (low 5 bits of `code`).
#[inline]
pub const fn rnr_timer_micros(code: u8) -> u32 {
    RNR_TIMER_MICROS[(code & 0x1F) as usize]
}

/// The smallest RNR timer code whose delay is at least `micros` (31, the
/// longest after code 0, if none is).
pub fn rnr_timer_code_for(micros: u32) -> u8 {
    (1..32u8)
        .find(|c| RNR_TIMER_MICROS[*c as usize] >= micros)
        .unwrap_or(31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syndromes_decode_per_the_notes() {
        assert_eq!(
            Syndrome::from_u8(0x1F),
            Syndrome::Ack {
                credits: CREDITS_INVALID
            }
        );
        assert_eq!(Syndrome::ACK_UNLIMITED.to_u8(), 0x1F);
        assert_eq!(Syndrome::from_u8(0x2E), Syndrome::RnrNak { timer: 14 });
        assert_eq!(
            Syndrome::from_u8(0x60),
            Syndrome::Nak(nak_code::PSN_SEQUENCE_ERROR)
        );
        assert_eq!(
            Syndrome::from_u8(0x62),
            Syndrome::Nak(nak_code::REMOTE_ACCESS_ERROR)
        );
        assert_eq!(Syndrome::from_u8(0x45), Syndrome::Reserved(0x45));
        for s in 0..=0x7Fu8 {
            assert_eq!(Syndrome::from_u8(s).to_u8(), s);
        }
        assert_eq!(AethRepr::nak(nak_code::INVALID_REQUEST, 5).syndrome, 0x61);
        assert_eq!(
            AethRepr::rnr_nak(1, 5).kind(),
            Syndrome::RnrNak { timer: 1 }
        );
        assert_eq!(AethRepr::ack(3, 7).kind().name(), "ACK");
    }

    #[test]
    fn rnr_timer_table_matches_the_spec_ends() {
        assert_eq!(rnr_timer_micros(0), 655_360);
        assert_eq!(rnr_timer_micros(1), 10);
        assert_eq!(rnr_timer_micros(14), 1_280);
        assert_eq!(rnr_timer_micros(31), 491_520);
        // Increasing from code 1 on.
        assert!(RNR_TIMER_MICROS[1..].windows(2).all(|w| w[0] < w[1]));
        assert_eq!(rnr_timer_code_for(0), 1);
        assert_eq!(rnr_timer_code_for(1_000), 14);
        assert_eq!(rnr_timer_code_for(1_000_000), 31);
    }

    #[test]
    fn view_round_trip() {
        let mut b = [0u8; 4];
        AethRepr {
            syndrome: 0x60,
            msn: 0x1AB_CDEF,
        }
        .emit(&mut Aeth::new_unchecked(&mut b[..]));
        assert_eq!(b, [0x60, 0xAB, 0xCD, 0xEF]);
        assert_eq!(
            AethRepr::parse(&Aeth::new_checked(&b[..]).unwrap()).msn,
            0xAB_CDEF
        );
    }
}
