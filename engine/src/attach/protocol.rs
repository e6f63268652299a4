//! The attach handshake on the service's Unix socket: a process sends
//! [`Hello`]; the service answers [`Welcome`] with the ring pair's memfd
//! attached (`SCM_RIGHTS`), or a refusal with its reason. Both are fixed
//! little-endian records, decoded with every field checked. After the
//! handshake the socket carries only doorbells (one byte: "look at your
//! rings") both ways, and its end tells each side the other is gone.

use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::unix::net::UnixStream;

/// Bytes of a [`Hello`].
pub const HELLO_LEN: usize = 16;
/// Bytes of a [`Welcome`] (or a refusal).
pub const WELCOME_LEN: usize = 192;
const MAGIC: [u8; 8] = *b"RXDPATT1";
/// The handshake's version; both sides must agree.
pub const VERSION: u32 = 1;
/// Longest refusal reason carried.
const REASON_AT: usize = 64;
const REASON_MAX: usize = WELCOME_LEN - REASON_AT;

/// What a record that cannot be decoded is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecodeError {
    /// Shorter than the record.
    Truncated,
    /// Not the handshake's magic.
    NotAttach,
    /// Another version of the handshake.
    Version(u32),
    /// A field out of range.
    BadField(&'static str),
}

/// The first `N` bytes of `b`, a record of `N` bytes with the
/// handshake's magic and version.
fn checked<const N: usize>(b: &[u8]) -> Result<&[u8; N], DecodeError> {
    let b: &[u8; N] = b
        .get(..N)
        .and_then(|s| s.try_into().ok())
        .ok_or(DecodeError::Truncated)?;
    if b[..8] != MAGIC {
        return Err(DecodeError::NotAttach);
    }
    let version = u32::from_le_bytes(b[8..12].try_into().expect("4 bytes"));
    if version != VERSION {
        return Err(DecodeError::Version(version));
    }
    Ok(b)
}

/// The process's first message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hello {
    pub version: u32,
}

impl Hello {
    pub fn encode(&self) -> [u8; HELLO_LEN] {
        let mut b = [0u8; HELLO_LEN];
        b[..8].copy_from_slice(&MAGIC);
        b[8..12].copy_from_slice(&self.version.to_le_bytes());
        b
    }

    pub fn decode(b: &[u8]) -> Result<Hello, DecodeError> {
        let b = checked::<HELLO_LEN>(b)?;
        Ok(Hello {
            version: u32::from_le_bytes(b[8..12].try_into().expect("4 bytes")),
        })
    }
}

/// What the service tells an admitted process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Welcome {
    /// The process's slot (1..=255): its QP numbers are
    /// `slot << 16 ..= slot << 16 | 0xffff`.
    pub slot: u8,
    /// The interface's MAC and address (the GID).
    pub mac: [u8; 6],
    pub ip: IpAddr,
    /// Slots per ring of the pair whose memfd comes with this record.
    pub ring_slots: u32,
    /// The interface's MTU.
    pub if_mtu: u32,
    /// The service's pid (for messages).
    pub service_pid: u32,
}

/// The service's answer: admitted, or refused with a reason for the user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    Welcome(Welcome),
    Refused(String),
}

impl Answer {
    pub fn encode(&self) -> [u8; WELCOME_LEN] {
        let mut b = [0u8; WELCOME_LEN];
        b[..8].copy_from_slice(&MAGIC);
        b[8..12].copy_from_slice(&VERSION.to_le_bytes());
        match self {
            Answer::Welcome(w) => {
                b[12] = 0;
                b[13] = w.slot;
                b[16..22].copy_from_slice(&w.mac);
                match w.ip {
                    IpAddr::V4(ip) => {
                        b[22] = 4;
                        b[24..28].copy_from_slice(&ip.octets());
                    }
                    IpAddr::V6(ip) => {
                        b[22] = 6;
                        b[24..40].copy_from_slice(&ip.octets());
                    }
                }
                b[40..44].copy_from_slice(&w.ring_slots.to_le_bytes());
                b[44..48].copy_from_slice(&w.if_mtu.to_le_bytes());
                b[48..52].copy_from_slice(&w.service_pid.to_le_bytes());
            }
            Answer::Refused(why) => {
                b[12] = 1;
                let text = why.as_bytes();
                let n = text.len().min(REASON_MAX);
                b[REASON_AT..REASON_AT + n].copy_from_slice(&text[..n]);
            }
        }
        b
    }

    pub fn decode(b: &[u8]) -> Result<Answer, DecodeError> {
        let b = checked::<WELCOME_LEN>(b)?;
        let u32_at = |at: usize| u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"));
        match b[12] {
            0 => {
                let slot = b[13];
                if slot == 0 {
                    return Err(DecodeError::BadField("slot"));
                }
                let ip = match b[22] {
                    4 => IpAddr::V4(Ipv4Addr::from(
                        <[u8; 4]>::try_from(&b[24..28]).expect("4 bytes"),
                    )),
                    6 => IpAddr::V6(Ipv6Addr::from(
                        <[u8; 16]>::try_from(&b[24..40]).expect("16 bytes"),
                    )),
                    _ => return Err(DecodeError::BadField("address family")),
                };
                let ring_slots = u32_at(40);
                if !ring_slots.is_power_of_two() || ring_slots > crate::io::frame_ring::MAX_SLOTS {
                    return Err(DecodeError::BadField("ring slots"));
                }
                Ok(Answer::Welcome(Welcome {
                    slot,
                    mac: b[16..22].try_into().expect("6 bytes"),
                    ip,
                    ring_slots,
                    if_mtu: u32_at(44),
                    service_pid: u32_at(48),
                }))
            }
            1 => {
                let text = &b[REASON_AT..];
                let end = text.iter().position(|&c| c == 0).unwrap_or(text.len());
                Ok(Answer::Refused(
                    String::from_utf8_lossy(&text[..end]).into_owned(),
                ))
            }
            _ => Err(DecodeError::BadField("status")),
        }
    }
}

/// The QP numbers of slot `slot`: a block of 65,536 whose top byte is the
/// slot (slot 0, holding QP 0 and QP 1, is nobody's).
pub fn qpn_block(slot: u8) -> crate::endpoint::QpnRange {
    let first = u32::from(slot) << 16;
    crate::endpoint::QpnRange {
        first,
        last: first | 0xffff,
    }
}

/// The slot whose block holds `qpn` (0: none).
pub fn slot_of_qpn(qpn: u32) -> u8 {
    ((qpn >> 16) & 0xff) as u8
}

/// Rings the other side's doorbell: one byte on the (non-blocking)
/// socket. A full socket buffer already holds doorbells enough; any other
/// error means the other side is gone.
pub(crate) fn ring_doorbell(stream: &UnixStream) -> io::Result<()> {
    loop {
        match (&*stream).write(&[1]) {
            Ok(_) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
            Err(e) => return Err(e),
        }
    }
}

/// Takes the doorbells rung so far on the (non-blocking) socket; returns
/// whether the other side is gone (the socket ended or failed).
pub(crate) fn take_doorbells(stream: &UnixStream) -> bool {
    let mut buf = [0u8; 64];
    loop {
        match (&*stream).read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return false,
            Err(_) => return true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_garbage_is_refused() {
        let h = Hello { version: VERSION };
        assert_eq!(Hello::decode(&h.encode()), Ok(h));
        let w = Answer::Welcome(Welcome {
            slot: 7,
            mac: [2, 0, 0, 0, 0, 9],
            ip: "10.1.2.3".parse().unwrap(),
            ring_slots: 512,
            if_mtu: 9000,
            service_pid: 42,
        });
        assert_eq!(Answer::decode(&w.encode()), Ok(w));
        let r = Answer::Refused("no free slot: 255 processes attached".into());
        assert_eq!(Answer::decode(&r.encode()), Ok(r));
        assert_eq!(Hello::decode(&[0u8; 4]), Err(DecodeError::Truncated));
        assert_eq!(Hello::decode(&[0u8; 16]), Err(DecodeError::NotAttach));
        let mut v2 = h.encode();
        v2[8] = 2;
        assert_eq!(Hello::decode(&v2), Err(DecodeError::Version(2)));
        let mut bad = Answer::Welcome(Welcome {
            slot: 1,
            mac: [0; 6],
            ip: "::1".parse().unwrap(),
            ring_slots: 8,
            if_mtu: 1500,
            service_pid: 1,
        })
        .encode();
        bad[40] = 3;
        assert_eq!(
            Answer::decode(&bad),
            Err(DecodeError::BadField("ring slots"))
        );
    }

    #[test]
    fn each_slot_owns_one_block_of_qp_numbers() {
        for s in 1..=255u8 {
            let b = qpn_block(s);
            assert_eq!(slot_of_qpn(b.first), s);
            assert_eq!(slot_of_qpn(b.last), s);
            assert_eq!(b.last - b.first, 0xffff);
        }
        assert_eq!(slot_of_qpn(1), 0, "the GSI is nobody's block");
    }
}
