//! The RDMA IP CM service (IBTA annex A11): header bytes and service IDs.

use proto::cm::ip::*;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

#[test]
fn ipv4_header_bytes() {
    let h = IpCmHeader {
        src_port: 0xC350,
        src: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
        dst: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)),
    };
    let b = h.to_bytes().unwrap();
    let mut want = [0u8; 36];
    want[1] = 0x40;
    want[2..4].copy_from_slice(&[0xC3, 0x50]);
    want[16..20].copy_from_slice(&[10, 0, 0, 1]);
    want[32..36].copy_from_slice(&[10, 0, 0, 2]);
    assert_eq!(b, want);
    assert_eq!(IpCmHeader::parse(&b), Ok(h));
}

#[test]
fn ipv6_header_bytes_and_errors() {
    let s: Ipv6Addr = "fe80::1".parse().unwrap();
    let d: Ipv6Addr = "2001:db8::2".parse().unwrap();
    let h = IpCmHeader {
        src_port: 1,
        src: IpAddr::V6(s),
        dst: IpAddr::V6(d),
    };
    let b = h.to_bytes().unwrap();
    assert_eq!(b[1], 0x60);
    assert_eq!(&b[4..20], &s.octets());
    assert_eq!(&b[20..36], &d.octets());
    assert_eq!(IpCmHeader::parse(&b), Ok(h));
    assert_eq!(IpCmHeader::parse(&b[..35]), Err(IpHeaderError::Truncated));
    let mut x = b;
    x[0] = 1;
    assert_eq!(IpCmHeader::parse(&x), Err(IpHeaderError::Version));
    let mut x = b;
    x[1] = 0x50;
    assert_eq!(IpCmHeader::parse(&x), Err(IpHeaderError::IpVersion));
    let mixed = IpCmHeader {
        src_port: 1,
        src: IpAddr::V6(s),
        dst: IpAddr::V4(Ipv4Addr::LOCALHOST),
    };
    assert_eq!(mixed.to_bytes(), Err(IpHeaderError::MixedFamilies));
    assert_eq!(h.emit(&mut [0u8; 35]), Err(IpHeaderError::Truncated));
}

#[test]
fn service_ids_of_the_port_spaces() {
    assert_eq!(service_id(PS_TCP, 20000), 0x0000_0000_0106_4E20);
    assert_eq!(service_id(PS_UDP, 1), 0x0000_0000_0111_0001);
    assert_eq!(service_id(PS_IB, 0xFFFF), 0x0000_0000_013F_FFFF);
    assert_eq!(service_id(PS_IPOIB, 7), 0x0000_0000_0002_0007);
    assert_eq!(split_service_id(0x0106_4E20), Some((PS_TCP, 20000)));
    assert_eq!(split_service_id(1 << 32), None);
}
