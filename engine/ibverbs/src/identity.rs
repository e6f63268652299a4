//! What the device says about itself: its GUIDs and GIDs (made from the
//! interface's MAC and IPv4 address), its firmware string and its port,
//! with the text forms the kernel gives them in sysfs. The verbs
//! (`ffi.rs`) and the files `roce-xdp exec` shows under
//! `/sys/class/infiniband` (the CLI's `commands/exec/discovery.rs`) both
//! read them here, so that a program finds the same values either way.

use std::net::Ipv4Addr;

/// The device name programs see.
pub const DEVICE_NAME: &str = "roce-xdp0";

/// The name of the device's uverbs node (`/dev/infiniband/...`) and of its
/// directory under `/sys/class/infiniband_verbs`: `uverbs-` + the device
/// name ([`DEVICE_NAME`]).
pub const UVERBS_NAME: &str = "uverbs-roce-xdp0";

/// `fw_ver` of `ibv_query_device` and of sysfs.
pub const FW_VER: &str = concat!("roce-xdp ", env!("CARGO_PKG_VERSION"));

/// Entries in the port's GID table (`gid_tbl_len`): [`GIDS_IN_USE`] of
/// them hold a GID, the rest are empty, as on every RoCE device (rxe's
/// table has 1024 entries, one or two a local address).
pub const GID_TABLE_LEN: u32 = 16;
/// The GIDs in use: 0, the IPv6 link-local address from the MAC; 1, the
/// IPv4-mapped address; both RoCE v2 (as `-g 1` on Soft-RoCE).
pub const GIDS_IN_USE: u32 = 2;

/// The one port's number.
pub const PORT: u8 = 1;
/// `IB_PORT_CM_SUP | IB_PORT_IP_BASED_GIDS`, as rxe.
pub const PORT_CAP_FLAGS: u32 = (1 << 16) | (1 << 26);
/// `IBV_PORT_ACTIVE`.
pub const PORT_STATE_ACTIVE: u8 = 4;
/// Physical port state 5: LinkUp.
pub const PHYS_STATE_LINK_UP: u8 = 5;
/// `active_width` 1: 1X.
pub const ACTIVE_WIDTH: u8 = 1;
/// `active_speed` 1: SDR (2.5 Gb/s a lane).
pub const ACTIVE_SPEED: u8 = 1;
/// The one P_Key (the default, full membership).
pub const PKEY: u16 = 0xffff;

/// The EUI-64 of a MAC (RFC 4291 appendix A: the universal/local bit
/// flipped, ff:fe in the middle): the node GUID and GID 0's interface
/// identifier.
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

/// `node_guid` and `sys_image_guid` as verbs hold them (`__be64`: the
/// EUI-64's bytes in order in memory).
pub fn node_guid(mac: [u8; 6]) -> u64 {
    u64::from_ne_bytes(eui64(mac))
}

/// GID `index` of port 1, or None for an empty entry (see
/// [`GIDS_IN_USE`]).
pub fn gid(mac: [u8; 6], ip: Ipv4Addr, index: u32) -> Option<[u8; 16]> {
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

/// Big-endian 16-bit groups of `bytes`, as four hex digits each, joined by
/// colons.
fn hex_groups(bytes: &[u8]) -> String {
    bytes
        .chunks(2)
        .map(|c| format!("{:02x}{:02x}", c[0], c[1]))
        .collect::<Vec<_>>()
        .join(":")
}

/// A GUID as sysfs writes `node_guid` (`xxxx:xxxx:xxxx:xxxx`).
pub fn guid_text(eui64: [u8; 8]) -> String {
    hex_groups(&eui64)
}

/// A GID as sysfs writes `ports/N/gids/M`: eight groups of four hex
/// digits, nothing shortened (the kernel's `%pI6`).
pub fn gid_text(gid: [u8; 16]) -> String {
    hex_groups(&gid)
}

/// `ports/N/rate` for an `active_width` and `active_speed` (the kernel's
/// `rate_show`: unknown speeds count as SDR).
pub fn rate_text(width: u8, speed: u8) -> String {
    let lanes: u32 = match width {
        2 => 4,
        4 => 8,
        8 => 12,
        16 => 2,
        _ => 1,
    };
    // Tenths of Gb/s a lane.
    let (tenths, name) = match speed {
        2 => (50, "DDR"),
        4 => (100, "QDR"),
        8 => (100, "FDR10"),
        16 => (140, "FDR"),
        32 => (250, "EDR"),
        64 => (500, "HDR"),
        128 => (1000, "NDR"),
        _ => (25, "SDR"),
    };
    let rate = tenths * lanes;
    let half = if rate.is_multiple_of(10) { "" } else { ".5" };
    format!("{}{half} Gb/sec ({lanes}X {name})", rate / 10)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAC: [u8; 6] = [0x52, 0x54, 0x00, 0x12, 0x34, 0x56];

    #[test]
    fn the_guid_is_the_macs_eui64_in_the_kernels_form() {
        assert_eq!(guid_text(eui64(MAC)), "5054:00ff:fe12:3456");
        // The __be64 holds the same bytes in the same order.
        assert_eq!(node_guid(MAC).to_ne_bytes(), eui64(MAC));
    }

    #[test]
    fn gids_in_the_kernels_form() {
        let ip = Ipv4Addr::new(10, 55, 0, 1);
        assert_eq!(
            gid_text(gid(MAC, ip, 0).unwrap()),
            "fe80:0000:0000:0000:5054:00ff:fe12:3456"
        );
        assert_eq!(
            gid_text(gid(MAC, ip, 1).unwrap()),
            "0000:0000:0000:0000:0000:ffff:0a37:0001"
        );
        assert_eq!(gid(MAC, ip, GIDS_IN_USE), None);
    }

    #[test]
    fn rates_as_the_kernel_writes_them() {
        assert_eq!(rate_text(ACTIVE_WIDTH, ACTIVE_SPEED), "2.5 Gb/sec (1X SDR)");
        assert_eq!(rate_text(2, 32), "100 Gb/sec (4X EDR)");
        assert_eq!(rate_text(16, 64), "100 Gb/sec (2X HDR)");
    }

    #[test]
    fn the_uverbs_name_follows_the_device_name() {
        assert_eq!(UVERBS_NAME, format!("uverbs-{}", crate::DEVICE_NAME));
    }
}
