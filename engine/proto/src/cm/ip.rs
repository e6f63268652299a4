//! The RDMA IP CM service (IBTA annex A11): the header librdmacm puts at
//! the start of a REQ's or SIDR_REQ's private data, and the service IDs of
//! its port spaces.
//!
//! Header layout (annex A11.6.1, table A11-2; the kernel's `struct
//! cma_hdr`): byte 0 the CM version (0), byte 1 the IP version in bits
//! 7:4 (4 or 6), bytes 2..4 the source port, bytes 4..20 the source IP,
//! bytes 20..36 the destination IP. An IPv4 address is the last 4 bytes of
//! its 16 (the first 12 zero, as the kernel writes them).

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Length of the IP CM header.
pub const HEADER_LEN: usize = 36;
/// The header's CM version (annex A11.6.1: 0).
pub const VERSION: u8 = 0;

/// The RDMA_PS_TCP port space (RC connections).
pub const PS_TCP: u16 = 0x0106;
/// The RDMA_PS_UDP port space (UD, SIDR).
pub const PS_UDP: u16 = 0x0111;
/// The RDMA_PS_IB port space.
pub const PS_IB: u16 = 0x013F;
/// The RDMA_PS_IPOIB port space.
pub const PS_IPOIB: u16 = 0x0002;

/// The service ID of `port` in `port_space` (annex A11.2.1; the kernel's
/// rdma_get_service_id): `(port_space << 16) | port`.
pub fn service_id(port_space: u16, port: u16) -> u64 {
    (u64::from(port_space) << 16) | u64::from(port)
}

/// The port space and port of an IP CM service ID, or `None` if it is not
/// one (the top 32 bits are not zero).
pub fn split_service_id(sid: u64) -> Option<(u16, u16)> {
    if sid >> 32 != 0 {
        return None;
    }
    Some(((sid >> 16) as u16, sid as u16))
}

/// Why bytes are not an IP CM header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IpHeaderError {
    /// Fewer than 36 bytes.
    Truncated,
    /// The CM version is not 0.
    Version,
    /// The IP version is neither 4 nor 6.
    IpVersion,
    /// Source and destination of different families (cannot happen
    /// when building: both are `IpAddr` of the header's version).
    MixedFamilies,
}

impl core::fmt::Display for IpHeaderError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            IpHeaderError::Truncated => "IP CM header shorter than 36 bytes",
            IpHeaderError::Version => "IP CM header version is not 0",
            IpHeaderError::IpVersion => "IP CM header IP version is neither 4 nor 6",
            IpHeaderError::MixedFamilies => {
                "IP CM header source and destination of different families"
            }
        })
    }
}

impl std::error::Error for IpHeaderError {}

/// The IP CM header, owned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct IpCmHeader {
    /// The active side's port.
    pub src_port: u16,
    /// The active side's address.
    pub src: IpAddr,
    /// The passive side's address.
    pub dst: IpAddr,
}

fn addr_bytes(a: IpAddr) -> [u8; 16] {
    match a {
        IpAddr::V4(v4) => {
            let mut b = [0u8; 16];
            b[12..].copy_from_slice(&v4.octets());
            b
        }
        IpAddr::V6(v6) => v6.octets(),
    }
}

impl IpCmHeader {
    /// Reads the header at the start of `private_data`.
    pub fn parse(private_data: &[u8]) -> Result<IpCmHeader, IpHeaderError> {
        if private_data.len() < HEADER_LEN {
            return Err(IpHeaderError::Truncated);
        }
        if private_data[0] != VERSION {
            return Err(IpHeaderError::Version);
        }
        let port = u16::from_be_bytes([private_data[2], private_data[3]]);
        let mut s = [0u8; 16];
        let mut d = [0u8; 16];
        s.copy_from_slice(&private_data[4..20]);
        d.copy_from_slice(&private_data[20..36]);
        let (src, dst) = match private_data[1] >> 4 {
            4 => (
                IpAddr::V4(Ipv4Addr::new(s[12], s[13], s[14], s[15])),
                IpAddr::V4(Ipv4Addr::new(d[12], d[13], d[14], d[15])),
            ),
            6 => (IpAddr::V6(Ipv6Addr::from(s)), IpAddr::V6(Ipv6Addr::from(d))),
            _ => return Err(IpHeaderError::IpVersion),
        };
        Ok(IpCmHeader {
            src_port: port,
            src,
            dst,
        })
    }

    /// Writes the header into the first 36 bytes of `buf`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<(), IpHeaderError> {
        if buf.len() < HEADER_LEN {
            return Err(IpHeaderError::Truncated);
        }
        let ver = match (self.src, self.dst) {
            (IpAddr::V4(_), IpAddr::V4(_)) => 4u8,
            (IpAddr::V6(_), IpAddr::V6(_)) => 6u8,
            _ => return Err(IpHeaderError::MixedFamilies),
        };
        buf[0] = VERSION;
        buf[1] = ver << 4;
        buf[2..4].copy_from_slice(&self.src_port.to_be_bytes());
        buf[4..20].copy_from_slice(&addr_bytes(self.src));
        buf[20..36].copy_from_slice(&addr_bytes(self.dst));
        Ok(())
    }

    /// The header as bytes.
    pub fn to_bytes(&self) -> Result<[u8; HEADER_LEN], IpHeaderError> {
        let mut b = [0u8; HEADER_LEN];
        self.emit(&mut b)?;
        Ok(b)
    }
}
