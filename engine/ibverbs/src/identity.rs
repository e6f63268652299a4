//! How the device names itself: its node GUID and its GID table, from the
//! interface's MAC and IPv4 address. `ibv_query_gid`, `ibv_query_device`
//! and the device files `roce-xdp exec` shows under `/sys/class/infiniband`
//! all come from here, so they agree.

use std::net::Ipv4Addr;

/// The device name programs see.
pub const DEVICE_NAME: &str = "roce-xdp0";

/// GIDs in the table: 0, the IPv6 link-local address from the MAC; 1, the
/// IPv4-mapped address (Soft-RoCE's IPv4 entry, `-g 1` / `-x 1`). Both
/// RoCE v2.
pub const GID_TABLE_LEN: u32 = 2;

/// The modified EUI-64 of a MAC (RFC 4291 appendix A): the universal/local
/// bit flipped, ff:fe in the middle.
pub fn eui64(mac: [u8; 6]) -> [u8; 8] {
    [
        mac[0] ^ 2,
        mac[1],
        mac[2],
        0xff,
        0xfe,
        mac[3],
        mac[4],
        mac[5],
    ]
}

/// The node GUID (and system image GUID): the EUI-64, in the byte order
/// of the wire (verbs return GUIDs as big-endian 64-bit values).
pub fn node_guid(mac: [u8; 6]) -> u64 {
    u64::from_ne_bytes(eui64(mac))
}

/// GID `index` of the table, or None past its end.
pub fn gid(index: u32, mac: [u8; 6], ip: Ipv4Addr) -> Option<[u8; 16]> {
    match index {
        0 => {
            let mut g = [0u8; 16];
            g[0] = 0xfe;
            g[1] = 0x80;
            g[8..].copy_from_slice(&eui64(mac));
            Some(g)
        }
        1 => Some(ip.to_ipv6_mapped().octets()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gids_and_guid_from_mac_and_address() {
        let mac = [0x02, 0x11, 0x22, 0x33, 0x44, 0x55];
        assert_eq!(eui64(mac), [0x00, 0x11, 0x22, 0xff, 0xfe, 0x33, 0x44, 0x55]);
        assert_eq!(
            node_guid(mac).to_ne_bytes(),
            [0x00, 0x11, 0x22, 0xff, 0xfe, 0x33, 0x44, 0x55]
        );
        let ip = Ipv4Addr::new(10, 0, 0, 1);
        assert_eq!(
            gid(0, mac, ip).unwrap(),
            [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x00, 0x11, 0x22, 0xff, 0xfe, 0x33, 0x44, 0x55]
        );
        assert_eq!(
            gid(1, mac, ip).unwrap(),
            [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1]
        );
        assert_eq!(gid(GID_TABLE_LEN, mac, ip), None);
    }
}
