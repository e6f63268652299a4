//! The errors of the wire layer: why bytes are not a RoCE v2 frame
//! ([`ParseError`]), why a frame could not be written ([`EmitError`]).

/// Why a byte string is not a valid RoCE v2 frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ParseError {
    /// Shorter than the headers it announces.
    Truncated,
    /// Not IPv4/IPv6 UDP to port 4791 (includes IP fragments, IP options
    /// the parser does not accept, and non-IP ethertypes).
    NotRoce,
    /// BTH opcode not in the RC set nor CNP.
    UnsupportedOpcode(u8),
    /// Pad count inconsistent with the opcode or payload.
    BadPad,
    /// IP / UDP lengths disagree with the frame or the opcode's payload rules.
    LengthMismatch,
    /// ICRC does not match.
    BadIcrc { carried: u32, computed: u32 },
}

impl core::fmt::Display for ParseError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            ParseError::Truncated => f.write_str("truncated frame"),
            ParseError::NotRoce => f.write_str("not a RoCE v2 frame (UDP port 4791)"),
            ParseError::UnsupportedOpcode(op) => write!(f, "unsupported BTH opcode {op:#04x}"),
            ParseError::BadPad => f.write_str("bad pad count"),
            ParseError::LengthMismatch => f.write_str("IP/UDP length mismatch"),
            ParseError::BadIcrc { carried, computed } => {
                write!(
                    f,
                    "bad ICRC: carried {carried:#010x}, computed {computed:#010x}"
                )
            }
        }
    }
}

impl core::error::Error for ParseError {}

/// Why a frame could not be emitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EmitError {
    /// The output buffer is smaller than [`frame_len`](super::frame_len).
    BufferTooSmall,
    /// The optional headers present do not match the opcode.
    HeadersMismatchOpcode,
    /// Payload too long for the IP length fields.
    PayloadTooLong,
}

impl core::fmt::Display for EmitError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            EmitError::BufferTooSmall => "output buffer too small for the frame",
            EmitError::HeadersMismatchOpcode => {
                "extension headers or payload do not match the opcode"
            }
            EmitError::PayloadTooLong => "payload too long for the IP length field",
        })
    }
}

impl core::error::Error for EmitError {}
