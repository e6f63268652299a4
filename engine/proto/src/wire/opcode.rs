//! BTH opcodes: decoding, names and which headers each opcode carries.
//!
//! Header presence per opcode follows the IBTA spec (Vol. 1, 9.2 / table 38)
//! as mirrored by Linux `include/rdma/ib_pack.h`; see
//! `docs/wire-format.md`, "RC opcodes".

/// BTH opcodes of the RC transport (0x00-0x17), the UC transport's SENDs
/// and RDMA WRITEs (0x20-0x2B: IBA 9.2 table 38, "UC" opcodes 001xxxxx),
/// the UD transport's two (0x64, 0x65: "UD" opcodes 011xxxxx) and the
/// RoCE v2 CNP (0x81).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Opcode {
    SendFirst = 0x00,
    SendMiddle = 0x01,
    SendLast = 0x02,
    SendLastImm = 0x03,
    SendOnly = 0x04,
    SendOnlyImm = 0x05,
    WriteFirst = 0x06,
    WriteMiddle = 0x07,
    WriteLast = 0x08,
    WriteLastImm = 0x09,
    WriteOnly = 0x0A,
    WriteOnlyImm = 0x0B,
    ReadRequest = 0x0C,
    ReadRespFirst = 0x0D,
    ReadRespMiddle = 0x0E,
    ReadRespLast = 0x0F,
    ReadRespOnly = 0x10,
    Acknowledge = 0x11,
    AtomicAcknowledge = 0x12,
    CompareSwap = 0x13,
    FetchAdd = 0x14,
    SendLastInv = 0x16,
    SendOnlyInv = 0x17,
    /// ATOMIC WRITE (IBA 1.5, 9.4.8 "Atomic Write"; rxe
    /// `IB_OPCODE_RC_ATOMIC_WRITE`): BTH + RETH + an 8-byte payload
    /// written at the RETH's address as one aligned 64-bit store. rxe
    /// `rxe_opcode.c`: RETH | PAYLOAD | REQ | ATOMIC_WRITE | START | END,
    /// length BTH + RETH. RC only.
    AtomicWrite = 0x1D,
    /// UC (IBA 9.2 table 38, transport bits 001): RC's SEND and RDMA
    /// WRITE opcodes with RC's header layout (RETH on WRITE FIRST/ONLY,
    /// ImmDt on the `_WITH_IMMEDIATE` ones), 0x20 above them.
    UcSendFirst = 0x20,
    UcSendMiddle = 0x21,
    UcSendLast = 0x22,
    UcSendLastImm = 0x23,
    UcSendOnly = 0x24,
    UcSendOnlyImm = 0x25,
    UcWriteFirst = 0x26,
    UcWriteMiddle = 0x27,
    UcWriteLast = 0x28,
    UcWriteLastImm = 0x29,
    UcWriteOnly = 0x2A,
    UcWriteOnlyImm = 0x2B,
    /// UD SEND_ONLY: BTH + DETH + payload.
    UdSendOnly = 0x64,
    /// UD SEND_ONLY_WITH_IMMEDIATE: BTH + DETH + ImmDt + payload.
    UdSendOnlyImm = 0x65,
    Cnp = 0x81,
}

impl Opcode {
    /// Every supported opcode, in numeric order (RC 0x00-0x17 without the
    /// reserved 0x15, UC 0x20-0x2B, UD 0x64 and 0x65, then CNP 0x81).
    pub const ALL: [Opcode; 39] = [
        Opcode::SendFirst,
        Opcode::SendMiddle,
        Opcode::SendLast,
        Opcode::SendLastImm,
        Opcode::SendOnly,
        Opcode::SendOnlyImm,
        Opcode::WriteFirst,
        Opcode::WriteMiddle,
        Opcode::WriteLast,
        Opcode::WriteLastImm,
        Opcode::WriteOnly,
        Opcode::WriteOnlyImm,
        Opcode::ReadRequest,
        Opcode::ReadRespFirst,
        Opcode::ReadRespMiddle,
        Opcode::ReadRespLast,
        Opcode::ReadRespOnly,
        Opcode::Acknowledge,
        Opcode::AtomicAcknowledge,
        Opcode::CompareSwap,
        Opcode::FetchAdd,
        Opcode::SendLastInv,
        Opcode::SendOnlyInv,
        Opcode::AtomicWrite,
        Opcode::UcSendFirst,
        Opcode::UcSendMiddle,
        Opcode::UcSendLast,
        Opcode::UcSendLastImm,
        Opcode::UcSendOnly,
        Opcode::UcSendOnlyImm,
        Opcode::UcWriteFirst,
        Opcode::UcWriteMiddle,
        Opcode::UcWriteLast,
        Opcode::UcWriteLastImm,
        Opcode::UcWriteOnly,
        Opcode::UcWriteOnlyImm,
        Opcode::UdSendOnly,
        Opcode::UdSendOnlyImm,
        Opcode::Cnp,
    ];

    /// The opcode for a BTH opcode byte, if it is an RC or UD opcode or CNP.
    #[inline(always)]
    pub const fn from_u8(value: u8) -> Option<Opcode> {
        Some(match value {
            0x00 => Opcode::SendFirst,
            0x01 => Opcode::SendMiddle,
            0x02 => Opcode::SendLast,
            0x03 => Opcode::SendLastImm,
            0x04 => Opcode::SendOnly,
            0x05 => Opcode::SendOnlyImm,
            0x06 => Opcode::WriteFirst,
            0x07 => Opcode::WriteMiddle,
            0x08 => Opcode::WriteLast,
            0x09 => Opcode::WriteLastImm,
            0x0A => Opcode::WriteOnly,
            0x0B => Opcode::WriteOnlyImm,
            0x0C => Opcode::ReadRequest,
            0x0D => Opcode::ReadRespFirst,
            0x0E => Opcode::ReadRespMiddle,
            0x0F => Opcode::ReadRespLast,
            0x10 => Opcode::ReadRespOnly,
            0x11 => Opcode::Acknowledge,
            0x12 => Opcode::AtomicAcknowledge,
            0x13 => Opcode::CompareSwap,
            0x14 => Opcode::FetchAdd,
            0x16 => Opcode::SendLastInv,
            0x17 => Opcode::SendOnlyInv,
            0x1D => Opcode::AtomicWrite,
            0x20 => Opcode::UcSendFirst,
            0x21 => Opcode::UcSendMiddle,
            0x22 => Opcode::UcSendLast,
            0x23 => Opcode::UcSendLastImm,
            0x24 => Opcode::UcSendOnly,
            0x25 => Opcode::UcSendOnlyImm,
            0x26 => Opcode::UcWriteFirst,
            0x27 => Opcode::UcWriteMiddle,
            0x28 => Opcode::UcWriteLast,
            0x29 => Opcode::UcWriteLastImm,
            0x2A => Opcode::UcWriteOnly,
            0x2B => Opcode::UcWriteOnlyImm,
            0x64 => Opcode::UdSendOnly,
            0x65 => Opcode::UdSendOnlyImm,
            0x81 => Opcode::Cnp,
            _ => return None,
        })
    }

    /// The opcode byte carried in the BTH.
    #[inline]
    pub const fn as_u8(self) -> u8 {
        self as u8
    }

    /// The IBTA / `ib_pack.h` name, without the transport prefix for RC
    /// and with it for UC and UD (so the SEND_ONLYs differ), e.g.
    /// `"SEND_FIRST"`, `"RDMA_WRITE_ONLY_WITH_IMMEDIATE"`, `"CNP"`,
    /// `"UD_SEND_ONLY"` (the names of Scapy's RoCE layer, its `RC_` prefix
    /// dropped).
    pub const fn name(self) -> &'static str {
        match self {
            Opcode::SendFirst => "SEND_FIRST",
            Opcode::SendMiddle => "SEND_MIDDLE",
            Opcode::SendLast => "SEND_LAST",
            Opcode::SendLastImm => "SEND_LAST_WITH_IMMEDIATE",
            Opcode::SendOnly => "SEND_ONLY",
            Opcode::SendOnlyImm => "SEND_ONLY_WITH_IMMEDIATE",
            Opcode::WriteFirst => "RDMA_WRITE_FIRST",
            Opcode::WriteMiddle => "RDMA_WRITE_MIDDLE",
            Opcode::WriteLast => "RDMA_WRITE_LAST",
            Opcode::WriteLastImm => "RDMA_WRITE_LAST_WITH_IMMEDIATE",
            Opcode::WriteOnly => "RDMA_WRITE_ONLY",
            Opcode::WriteOnlyImm => "RDMA_WRITE_ONLY_WITH_IMMEDIATE",
            Opcode::ReadRequest => "RDMA_READ_REQUEST",
            Opcode::ReadRespFirst => "RDMA_READ_RESPONSE_FIRST",
            Opcode::ReadRespMiddle => "RDMA_READ_RESPONSE_MIDDLE",
            Opcode::ReadRespLast => "RDMA_READ_RESPONSE_LAST",
            Opcode::ReadRespOnly => "RDMA_READ_RESPONSE_ONLY",
            Opcode::Acknowledge => "ACKNOWLEDGE",
            Opcode::AtomicAcknowledge => "ATOMIC_ACKNOWLEDGE",
            Opcode::CompareSwap => "COMPARE_SWAP",
            Opcode::FetchAdd => "FETCH_ADD",
            Opcode::SendLastInv => "SEND_LAST_WITH_INVALIDATE",
            Opcode::SendOnlyInv => "SEND_ONLY_WITH_INVALIDATE",
            Opcode::AtomicWrite => "ATOMIC_WRITE",
            Opcode::UcSendFirst => "UC_SEND_FIRST",
            Opcode::UcSendMiddle => "UC_SEND_MIDDLE",
            Opcode::UcSendLast => "UC_SEND_LAST",
            Opcode::UcSendLastImm => "UC_SEND_LAST_WITH_IMMEDIATE",
            Opcode::UcSendOnly => "UC_SEND_ONLY",
            Opcode::UcSendOnlyImm => "UC_SEND_ONLY_WITH_IMMEDIATE",
            Opcode::UcWriteFirst => "UC_RDMA_WRITE_FIRST",
            Opcode::UcWriteMiddle => "UC_RDMA_WRITE_MIDDLE",
            Opcode::UcWriteLast => "UC_RDMA_WRITE_LAST",
            Opcode::UcWriteLastImm => "UC_RDMA_WRITE_LAST_WITH_IMMEDIATE",
            Opcode::UcWriteOnly => "UC_RDMA_WRITE_ONLY",
            Opcode::UcWriteOnlyImm => "UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE",
            Opcode::UdSendOnly => "UD_SEND_ONLY",
            Opcode::UdSendOnlyImm => "UD_SEND_ONLY_WITH_IMMEDIATE",
            Opcode::Cnp => "CNP",
        }
    }

    /// The RC opcode whose headers and place in a message a UC opcode
    /// has (UC SEND_FIRST -> SEND_FIRST, ...; IBA 9.2 table 38: the same
    /// low five bits); any other opcode is itself.
    #[inline(always)]
    pub const fn rc_equivalent(self) -> Opcode {
        match self {
            Opcode::UcSendFirst => Opcode::SendFirst,
            Opcode::UcSendMiddle => Opcode::SendMiddle,
            Opcode::UcSendLast => Opcode::SendLast,
            Opcode::UcSendLastImm => Opcode::SendLastImm,
            Opcode::UcSendOnly => Opcode::SendOnly,
            Opcode::UcSendOnlyImm => Opcode::SendOnlyImm,
            Opcode::UcWriteFirst => Opcode::WriteFirst,
            Opcode::UcWriteMiddle => Opcode::WriteMiddle,
            Opcode::UcWriteLast => Opcode::WriteLast,
            Opcode::UcWriteLastImm => Opcode::WriteLastImm,
            Opcode::UcWriteOnly => Opcode::WriteOnly,
            Opcode::UcWriteOnlyImm => Opcode::WriteOnlyImm,
            other => other,
        }
    }

    /// The UC opcode of an RC SEND or RDMA WRITE opcode (SEND_FIRST -> UC
    /// SEND_FIRST, ...); `None` for every other opcode (UC has no READ,
    /// atomic, ACK or SEND with invalidate: IBA 9.2 table 38).
    #[inline]
    pub const fn to_uc(self) -> Option<Opcode> {
        Some(match self {
            Opcode::SendFirst => Opcode::UcSendFirst,
            Opcode::SendMiddle => Opcode::UcSendMiddle,
            Opcode::SendLast => Opcode::UcSendLast,
            Opcode::SendLastImm => Opcode::UcSendLastImm,
            Opcode::SendOnly => Opcode::UcSendOnly,
            Opcode::SendOnlyImm => Opcode::UcSendOnlyImm,
            Opcode::WriteFirst => Opcode::UcWriteFirst,
            Opcode::WriteMiddle => Opcode::UcWriteMiddle,
            Opcode::WriteLast => Opcode::UcWriteLast,
            Opcode::WriteLastImm => Opcode::UcWriteLastImm,
            Opcode::WriteOnly => Opcode::UcWriteOnly,
            Opcode::WriteOnlyImm => Opcode::UcWriteOnlyImm,
            _ => return None,
        })
    }

    /// An Unreliable Connection opcode (transport bits 001, IBA 9.2
    /// table 38).
    #[inline(always)]
    pub const fn is_uc(self) -> bool {
        (self as u8) >> 5 == 0b001
    }

    /// Carries a RETH (RDMA WRITE First/Only, READ Request, ATOMIC WRITE).
    #[inline]
    pub const fn has_reth(self) -> bool {
        matches!(
            self,
            Opcode::WriteFirst
                | Opcode::WriteOnly
                | Opcode::WriteOnlyImm
                | Opcode::ReadRequest
                | Opcode::AtomicWrite
                | Opcode::UcWriteFirst
                | Opcode::UcWriteOnly
                | Opcode::UcWriteOnlyImm
        )
    }

    /// Carries an AETH (READ response First/Last/Only, ACK, atomic ACK).
    #[inline]
    pub const fn has_aeth(self) -> bool {
        matches!(
            self,
            Opcode::ReadRespFirst
                | Opcode::ReadRespLast
                | Opcode::ReadRespOnly
                | Opcode::Acknowledge
                | Opcode::AtomicAcknowledge
        )
    }

    /// Carries ImmDt (the `*_WITH_IMMEDIATE` opcodes).
    #[inline]
    pub const fn has_immdt(self) -> bool {
        matches!(
            self,
            Opcode::SendLastImm
                | Opcode::SendOnlyImm
                | Opcode::WriteLastImm
                | Opcode::WriteOnlyImm
                | Opcode::UdSendOnlyImm
                | Opcode::UcSendLastImm
                | Opcode::UcSendOnlyImm
                | Opcode::UcWriteLastImm
                | Opcode::UcWriteOnlyImm
        )
    }

    /// An Unreliable Datagram opcode (transport bits 011, IBA 9.2 table
    /// 38): SEND_ONLY with or without immediate.
    #[inline(always)]
    pub const fn is_ud(self) -> bool {
        matches!(self, Opcode::UdSendOnly | Opcode::UdSendOnlyImm)
    }

    /// Carries a DETH (every UD packet; IBA 9.3.3).
    #[inline(always)]
    pub const fn has_deth(self) -> bool {
        self.is_ud()
    }

    /// Carries an IETH (the `SEND_*_WITH_INVALIDATE` opcodes).
    #[inline]
    pub const fn has_ieth(self) -> bool {
        matches!(self, Opcode::SendLastInv | Opcode::SendOnlyInv)
    }

    /// Carries an AtomicETH (COMPARE_SWAP, FETCH_ADD).
    #[inline]
    pub const fn has_atomic_eth(self) -> bool {
        matches!(self, Opcode::CompareSwap | Opcode::FetchAdd)
    }

    /// Carries an AtomicAckETH (ATOMIC_ACKNOWLEDGE).
    #[inline]
    pub const fn has_atomic_ack_eth(self) -> bool {
        matches!(self, Opcode::AtomicAcknowledge)
    }

    /// Carries a data payload (SENDs, WRITEs, READ responses, ATOMIC
    /// WRITE's 8 bytes). The CNP's 16
    /// reserved bytes are not a payload in this sense ([`super::CNP_RESERVED_LEN`]).
    #[inline]
    pub const fn has_payload(self) -> bool {
        matches!(
            self,
            Opcode::SendFirst
                | Opcode::SendMiddle
                | Opcode::SendLast
                | Opcode::SendLastImm
                | Opcode::SendOnly
                | Opcode::SendOnlyImm
                | Opcode::WriteFirst
                | Opcode::WriteMiddle
                | Opcode::WriteLast
                | Opcode::WriteLastImm
                | Opcode::WriteOnly
                | Opcode::WriteOnlyImm
                | Opcode::ReadRespFirst
                | Opcode::ReadRespMiddle
                | Opcode::ReadRespLast
                | Opcode::SendLastInv
                | Opcode::SendOnlyInv
                | Opcode::ReadRespOnly
                | Opcode::AtomicWrite
                | Opcode::UdSendOnly
                | Opcode::UdSendOnlyImm
                | Opcode::UcSendFirst
                | Opcode::UcSendMiddle
                | Opcode::UcSendLast
                | Opcode::UcSendLastImm
                | Opcode::UcSendOnly
                | Opcode::UcSendOnlyImm
                | Opcode::UcWriteFirst
                | Opcode::UcWriteMiddle
                | Opcode::UcWriteLast
                | Opcode::UcWriteLastImm
                | Opcode::UcWriteOnly
                | Opcode::UcWriteOnlyImm
        )
    }

    /// First packet of a multi-packet message.
    #[inline]
    pub const fn is_first(self) -> bool {
        matches!(
            self,
            Opcode::SendFirst
                | Opcode::WriteFirst
                | Opcode::ReadRespFirst
                | Opcode::UcSendFirst
                | Opcode::UcWriteFirst
        )
    }

    /// Middle packet of a multi-packet message.
    #[inline]
    pub const fn is_middle(self) -> bool {
        matches!(
            self,
            Opcode::SendMiddle
                | Opcode::WriteMiddle
                | Opcode::ReadRespMiddle
                | Opcode::UcSendMiddle
                | Opcode::UcWriteMiddle
        )
    }

    /// Last packet of a multi-packet message.
    #[inline]
    pub const fn is_last(self) -> bool {
        matches!(
            self,
            Opcode::SendLast
                | Opcode::SendLastImm
                | Opcode::SendLastInv
                | Opcode::WriteLast
                | Opcode::WriteLastImm
                | Opcode::ReadRespLast
                | Opcode::UcSendLast
                | Opcode::UcSendLastImm
                | Opcode::UcWriteLast
                | Opcode::UcWriteLastImm
        )
    }

    /// The only packet of a message (single-packet SEND/WRITE/READ
    /// response, and the single-packet requests and responses: READ
    /// request, ACK, atomics).
    #[inline]
    pub const fn is_only(self) -> bool {
        matches!(
            self,
            Opcode::SendOnly
                | Opcode::SendOnlyImm
                | Opcode::SendOnlyInv
                | Opcode::WriteOnly
                | Opcode::WriteOnlyImm
                | Opcode::ReadRespOnly
                | Opcode::ReadRequest
                | Opcode::Acknowledge
                | Opcode::AtomicAcknowledge
                | Opcode::CompareSwap
                | Opcode::FetchAdd
                | Opcode::AtomicWrite
                | Opcode::UdSendOnly
                | Opcode::UdSendOnlyImm
                | Opcode::UcSendOnly
                | Opcode::UcSendOnlyImm
                | Opcode::UcWriteOnly
                | Opcode::UcWriteOnlyImm
        )
    }

    /// Sent by a requester (SEND, WRITE, READ request, atomics).
    #[inline]
    pub const fn is_request(self) -> bool {
        matches!(
            self,
            Opcode::SendFirst
                | Opcode::SendMiddle
                | Opcode::SendLast
                | Opcode::SendLastImm
                | Opcode::SendOnly
                | Opcode::SendOnlyImm
                | Opcode::WriteFirst
                | Opcode::WriteMiddle
                | Opcode::WriteLast
                | Opcode::WriteLastImm
                | Opcode::WriteOnly
                | Opcode::WriteOnlyImm
                | Opcode::ReadRequest
                | Opcode::CompareSwap
                | Opcode::FetchAdd
                | Opcode::SendLastInv
                | Opcode::SendOnlyInv
                | Opcode::AtomicWrite
                | Opcode::UdSendOnly
                | Opcode::UdSendOnlyImm
                | Opcode::UcSendFirst
                | Opcode::UcSendMiddle
                | Opcode::UcSendLast
                | Opcode::UcSendLastImm
                | Opcode::UcSendOnly
                | Opcode::UcSendOnlyImm
                | Opcode::UcWriteFirst
                | Opcode::UcWriteMiddle
                | Opcode::UcWriteLast
                | Opcode::UcWriteLastImm
                | Opcode::UcWriteOnly
                | Opcode::UcWriteOnlyImm
        )
    }

    /// Sent by a responder (READ responses, ACK, atomic ACK).
    #[inline]
    pub const fn is_response(self) -> bool {
        matches!(
            self,
            Opcode::ReadRespFirst
                | Opcode::ReadRespMiddle
                | Opcode::ReadRespLast
                | Opcode::ReadRespOnly
                | Opcode::Acknowledge
                | Opcode::AtomicAcknowledge
        )
    }

    /// A SEND of any kind.
    #[inline]
    pub const fn is_send(self) -> bool {
        matches!(
            self,
            Opcode::SendFirst
                | Opcode::SendMiddle
                | Opcode::SendLast
                | Opcode::SendLastImm
                | Opcode::SendOnly
                | Opcode::SendOnlyImm
                | Opcode::SendLastInv
                | Opcode::SendOnlyInv
                | Opcode::UdSendOnly
                | Opcode::UdSendOnlyImm
                | Opcode::UcSendFirst
                | Opcode::UcSendMiddle
                | Opcode::UcSendLast
                | Opcode::UcSendLastImm
                | Opcode::UcSendOnly
                | Opcode::UcSendOnlyImm
        )
    }

    /// An RDMA WRITE of any kind.
    #[inline]
    pub const fn is_write(self) -> bool {
        matches!(
            self,
            Opcode::WriteFirst
                | Opcode::WriteMiddle
                | Opcode::WriteLast
                | Opcode::WriteLastImm
                | Opcode::WriteOnly
                | Opcode::WriteOnlyImm
                | Opcode::UcWriteFirst
                | Opcode::UcWriteMiddle
                | Opcode::UcWriteLast
                | Opcode::UcWriteLastImm
                | Opcode::UcWriteOnly
                | Opcode::UcWriteOnlyImm
        )
    }

    /// Length of the extension headers this opcode carries (between the BTH
    /// and the payload). For CNP this is 0: its 16 reserved bytes are
    /// carried as the frame payload.
    #[inline(always)]
    pub const fn ext_headers_len(self) -> usize {
        let mut len = 0;
        if self.has_deth() {
            len += 8;
        }
        if self.has_reth() {
            len += 16;
        }
        if self.has_atomic_eth() {
            len += 28;
        }
        if self.has_immdt() || self.has_ieth() {
            len += 4;
        }
        if self.has_aeth() {
            len += 4;
        }
        if self.has_atomic_ack_eth() {
            len += 8;
        }
        len
    }
}

impl TryFrom<u8> for Opcode {
    type Error = u8;
    fn try_from(value: u8) -> Result<Self, u8> {
        Opcode::from_u8(value).ok_or(value)
    }
}

impl core::fmt::Display for Opcode {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn from_u8_round_trips_every_opcode_and_rejects_the_rest() {
        for op in Opcode::ALL {
            assert_eq!(Opcode::from_u8(op.as_u8()), Some(op));
        }
        let known = (0u8..=255)
            .filter(|v| Opcode::from_u8(*v).is_some())
            .count();
        assert_eq!(known, Opcode::ALL.len());
        assert_eq!(Opcode::from_u8(0x15), None);
        assert_eq!(Opcode::from_u8(0x2C), None);
        assert_eq!(Opcode::from_u8(0x1F), None);
    }

    #[test]
    fn ext_header_lengths_match_the_notes() {
        assert_eq!(Opcode::SendFirst.ext_headers_len(), 0);
        assert_eq!(Opcode::WriteOnlyImm.ext_headers_len(), 20);
        assert_eq!(Opcode::ReadRequest.ext_headers_len(), 16);
        assert_eq!(Opcode::AtomicAcknowledge.ext_headers_len(), 12);
        assert_eq!(Opcode::CompareSwap.ext_headers_len(), 28);
        assert_eq!(Opcode::SendOnlyInv.ext_headers_len(), 4);
        // rxe_opcode.c: IB_OPCODE_RC_ATOMIC_WRITE's length is BTH + RETH.
        assert_eq!(Opcode::AtomicWrite.ext_headers_len(), 16);
        assert_eq!(Opcode::Cnp.ext_headers_len(), 0);
        assert_eq!(Opcode::UdSendOnly.ext_headers_len(), 8);
        assert_eq!(Opcode::UdSendOnlyImm.ext_headers_len(), 12);
    }

    #[test]
    fn ud_opcodes_are_single_packet_sends_with_a_deth() {
        assert_eq!(Opcode::from_u8(0x64), Some(Opcode::UdSendOnly));
        assert_eq!(Opcode::from_u8(0x65), Some(Opcode::UdSendOnlyImm));
        for op in Opcode::ALL {
            assert_eq!(op.is_ud(), op.as_u8() >> 5 == 0b011, "{op:?}");
            assert_eq!(op.has_deth(), op.is_ud());
        }
        for op in [Opcode::UdSendOnly, Opcode::UdSendOnlyImm] {
            assert!(op.is_only() && op.is_send() && op.is_request() && op.has_payload());
            assert!(!op.is_first() && !op.is_middle() && !op.is_last());
        }
        assert!(Opcode::UdSendOnlyImm.has_immdt() && !Opcode::UdSendOnly.has_immdt());
        // No other UD opcode (0x60-0x7F) is known.
        for raw in 0x60u8..=0x7F {
            assert_eq!(Opcode::from_u8(raw).is_some(), raw == 0x64 || raw == 0x65);
        }
    }

    #[test]
    fn uc_opcodes_are_rc_sends_and_writes_with_the_uc_transport_bits() {
        let uc: Vec<Opcode> = Opcode::ALL.into_iter().filter(|o| o.is_uc()).collect();
        assert_eq!(uc.len(), 12);
        for op in uc {
            let rc = op.rc_equivalent();
            assert_eq!(op.as_u8(), 0x20 | rc.as_u8(), "{op}");
            assert_eq!(rc.to_uc(), Some(op));
            assert!(op.is_request() && (op.is_send() || op.is_write()));
            assert_eq!(op.ext_headers_len(), rc.ext_headers_len(), "{op}");
            assert_eq!(
                (op.is_first(), op.is_middle(), op.is_last(), op.is_only()),
                (rc.is_first(), rc.is_middle(), rc.is_last(), rc.is_only())
            );
            assert_eq!(
                (op.has_reth(), op.has_immdt()),
                (rc.has_reth(), rc.has_immdt())
            );
            assert_eq!(op.name(), format!("UC_{}", rc.name()));
        }
        for op in [
            Opcode::ReadRequest,
            Opcode::Acknowledge,
            Opcode::FetchAdd,
            Opcode::SendOnlyInv,
            Opcode::UdSendOnly,
        ] {
            assert_eq!(op.to_uc(), None, "{op}");
        }
    }

    #[test]
    fn atomic_write_is_a_single_packet_request_with_a_reth_and_a_payload() {
        let op = Opcode::from_u8(0x1D).unwrap();
        assert_eq!(op, Opcode::AtomicWrite);
        assert_eq!(op.name(), "ATOMIC_WRITE");
        assert!(op.has_reth() && op.has_payload() && op.is_only() && op.is_request());
        assert!(!op.has_aeth() && !op.has_atomic_eth() && !op.has_immdt());
        assert!(!op.is_send() && !op.is_write() && !op.is_uc() && op.to_uc().is_none());
        assert!(!op.is_first() && !op.is_middle() && !op.is_last());
    }

    #[test]
    fn every_rc_opcode_is_exactly_one_of_request_or_response() {
        for op in Opcode::ALL {
            if op == Opcode::Cnp {
                assert!(!op.is_request() && !op.is_response());
            } else {
                assert!(op.is_request() ^ op.is_response(), "{op}");
            }
        }
    }
}
