//! The 16-byte Global Identifier and its RoCE v2 meaning: an IP address.
//!
//! A RoCE v2 GID for an IPv4 interface is the IPv4-mapped IPv6 address
//! `::ffff:a.b.c.d` (`docs/connection-setup.md`); for IPv6 it is the
//! address itself.

use core::fmt;
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// A 16-byte GID, stored in network (big-endian) byte order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Gid(pub [u8; 16]);

impl Gid {
    /// The all-zero GID (what `ibv_rc_pingpong` sends without `-g`).
    pub const ZERO: Gid = Gid([0; 16]);

    /// The GID of an IPv4 RoCE v2 interface: `::ffff:a.b.c.d`.
    pub fn from_ipv4(addr: Ipv4Addr) -> Gid {
        Gid(addr.to_ipv6_mapped().octets())
    }

    /// The GID of an IP address (IPv4 addresses are mapped).
    pub fn from_ip(addr: IpAddr) -> Gid {
        match addr {
            IpAddr::V4(v4) => Gid::from_ipv4(v4),
            IpAddr::V6(v6) => Gid(v6.octets()),
        }
    }

    /// The GID as an IPv6 address.
    pub fn to_ipv6(self) -> Ipv6Addr {
        Ipv6Addr::from(self.0)
    }

    /// The IPv4 address if this GID is IPv4-mapped (`::ffff:a.b.c.d`).
    pub fn to_ipv4_mapped(self) -> Option<Ipv4Addr> {
        self.to_ipv6().to_ipv4_mapped()
    }

    /// The IP address a RoCE v2 peer with this GID uses: IPv4 when mapped,
    /// IPv6 otherwise.
    pub fn to_ip(self) -> IpAddr {
        match self.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(self.to_ipv6()),
        }
    }

    /// True for the all-zero GID. `ibv_rc_pingpong` only uses a GRH (and so
    /// only works over RoCE) when the peer's GID interface ID is non-zero.
    pub fn is_zero(self) -> bool {
        self.0 == [0; 16]
    }

    /// The low 8 bytes (the interface ID).
    pub fn interface_id(self) -> u64 {
        u64::from_be_bytes([
            self.0[8], self.0[9], self.0[10], self.0[11], self.0[12], self.0[13], self.0[14],
            self.0[15],
        ])
    }
}

/// Formats like `inet_ntop(AF_INET6, ...)`, which `ibv_rc_pingpong` prints:
/// `::ffff:10.99.0.11`, `fe80::5054:ff:fe99:11`, `::`.
impl fmt::Display for Gid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.to_ipv6(), f)
    }
}

impl From<Ipv4Addr> for Gid {
    fn from(addr: Ipv4Addr) -> Gid {
        Gid::from_ipv4(addr)
    }
}

impl From<Ipv6Addr> for Gid {
    fn from(addr: Ipv6Addr) -> Gid {
        Gid(addr.octets())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv4_mapped_round_trip() {
        let gid = Gid::from_ipv4(Ipv4Addr::new(10, 99, 0, 11));
        assert_eq!(
            gid.0,
            [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 99, 0, 11]
        );
        assert_eq!(gid.to_ipv4_mapped(), Some(Ipv4Addr::new(10, 99, 0, 11)));
        assert_eq!(gid.to_ip(), IpAddr::V4(Ipv4Addr::new(10, 99, 0, 11)));
        assert_eq!(gid.to_string(), "::ffff:10.99.0.11");
        assert_eq!(gid.interface_id(), 0x0000_ffff_0a63_000b);
    }

    #[test]
    fn ipv6_link_local_is_not_mapped() {
        let v6: Ipv6Addr = "fe80::5054:ff:fe99:11".parse().unwrap();
        let gid = Gid::from(v6);
        assert_eq!(gid.to_ipv4_mapped(), None);
        assert_eq!(gid.to_ip(), IpAddr::V6(v6));
        assert_eq!(gid.to_string(), "fe80::5054:ff:fe99:11");
    }

    #[test]
    fn zero_gid() {
        assert!(Gid::ZERO.is_zero());
        assert_eq!(Gid::ZERO.interface_id(), 0);
        assert_eq!(Gid::ZERO.to_string(), "::");
        assert!(!Gid::from_ipv4(Ipv4Addr::new(10, 0, 0, 1)).is_zero());
    }
}
