//! The rtnetlink reply parser on hand-built datagrams: good replies,
//! entries of other families, interfaces, addresses and states, and every
//! kind of truncation and wrong length (an error, never a panic).

use super::*;
use std::net::{Ipv4Addr, Ipv6Addr};

const MAC: [u8; 6] = [0x02, 0xab, 0x00, 0x01, 0xff, 0x10];
const PEER4: Ipv4Addr = Ipv4Addr::new(10, 7, 0, 2);

fn attr(kind: u16, value: &[u8]) -> Vec<u8> {
    let len = RTA_HDRLEN + value.len();
    let mut a = Vec::new();
    a.extend_from_slice(&(len as u16).to_ne_bytes());
    a.extend_from_slice(&kind.to_ne_bytes());
    a.extend_from_slice(value);
    a.resize(align4(len), 0);
    a
}

fn message(kind: u16, seq: u32, payload: &[u8]) -> Vec<u8> {
    let len = NLMSG_HDRLEN + payload.len();
    let mut m = Vec::new();
    m.extend_from_slice(&(len as u32).to_ne_bytes());
    m.extend_from_slice(&kind.to_ne_bytes());
    m.extend_from_slice(&(libc::NLM_F_MULTI as u16).to_ne_bytes());
    m.extend_from_slice(&seq.to_ne_bytes());
    m.extend_from_slice(&4242u32.to_ne_bytes());
    m.extend_from_slice(payload);
    m.resize(align4(len), 0);
    m
}

fn ndmsg(family: i32, ifindex: u32, state: u16, attrs: &[Vec<u8>]) -> Vec<u8> {
    let mut p = vec![0u8; NDMSG_LEN];
    p[NDM_FAMILY] = family as u8;
    p[NDM_IFINDEX..NDM_IFINDEX + 4].copy_from_slice(&ifindex.to_ne_bytes());
    p[NDM_STATE..NDM_STATE + 2].copy_from_slice(&state.to_ne_bytes());
    for a in attrs {
        p.extend_from_slice(a);
    }
    p
}

fn neigh4(ifindex: u32, dst: Ipv4Addr, state: u16, lladdr: &[u8]) -> Vec<u8> {
    ndmsg(
        libc::AF_INET,
        ifindex,
        state,
        &[
            attr(libc::NDA_DST, &dst.octets()),
            attr(libc::NDA_LLADDR, lladdr),
        ],
    )
}

fn done(seq: u32) -> Vec<u8> {
    message(NLMSG_DONE, seq, &0i32.to_ne_bytes())
}

/// Walks one datagram looking for PEER4 on interface 3.
fn find_peer4(buf: &[u8]) -> Result<Dump<[u8; 6]>, NetlinkError> {
    walk_datagram(buf, 1, libc::RTM_NEWNEIGH, &mut |p| {
        Ok(parse_neighbour(p)?.mac_of(3, PEER4.into()))
    })
}

#[test]
fn finds_a_resolved_neighbour_among_others() {
    let mut buf = Vec::new();
    // Another interface, another address, an unresolved entry, then ours.
    buf.extend(message(
        libc::RTM_NEWNEIGH,
        1,
        &neigh4(4, PEER4, libc::NUD_REACHABLE, &[9; 6]),
    ));
    buf.extend(message(
        libc::RTM_NEWNEIGH,
        1,
        &neigh4(3, Ipv4Addr::new(10, 7, 0, 9), libc::NUD_REACHABLE, &[8; 6]),
    ));
    buf.extend(message(
        libc::RTM_NEWNEIGH,
        1,
        &neigh4(3, PEER4, libc::NUD_STALE, &MAC),
    ));
    assert_eq!(find_peer4(&buf).unwrap(), Dump::Found(MAC));
}

#[test]
fn every_resolved_state_counts_and_unresolved_ones_do_not() {
    for state in [
        libc::NUD_REACHABLE,
        libc::NUD_STALE,
        libc::NUD_DELAY,
        libc::NUD_PROBE,
        libc::NUD_PERMANENT,
        libc::NUD_NOARP,
    ] {
        let buf = message(libc::RTM_NEWNEIGH, 1, &neigh4(3, PEER4, state, &MAC));
        assert_eq!(
            find_peer4(&buf).unwrap(),
            Dump::Found(MAC),
            "state {state:#x}"
        );
    }
    for state in [libc::NUD_NONE, libc::NUD_INCOMPLETE, libc::NUD_FAILED] {
        let mut buf = message(libc::RTM_NEWNEIGH, 1, &neigh4(3, PEER4, state, &MAC));
        buf.extend(done(1));
        assert_eq!(find_peer4(&buf).unwrap(), Dump::Done, "state {state:#x}");
    }
}

#[test]
fn an_entry_without_a_six_byte_lladdr_is_no_answer() {
    for lladdr in [&[][..], &MAC[..5], &[1, 2, 3, 4, 5, 6, 7, 8][..]] {
        let buf = message(
            libc::RTM_NEWNEIGH,
            1,
            &neigh4(3, PEER4, libc::NUD_REACHABLE, lladdr),
        );
        assert_eq!(find_peer4(&buf).unwrap(), Dump::More);
    }
    // No NDA_LLADDR at all.
    let p = ndmsg(
        libc::AF_INET,
        3,
        libc::NUD_REACHABLE,
        &[attr(libc::NDA_DST, &PEER4.octets())],
    );
    assert_eq!(
        find_peer4(&message(libc::RTM_NEWNEIGH, 1, &p)).unwrap(),
        Dump::More
    );
}

#[test]
fn other_families_and_address_lengths_do_not_match() {
    let v6: Ipv6Addr = "fd00::2".parse().unwrap();
    // An IPv6 entry whose first four bytes happen to equal PEER4.
    let mut dst = [0u8; 16];
    dst[..4].copy_from_slice(&PEER4.octets());
    let p = ndmsg(
        libc::AF_INET6,
        3,
        libc::NUD_REACHABLE,
        &[attr(libc::NDA_DST, &dst), attr(libc::NDA_LLADDR, &MAC)],
    );
    assert_eq!(
        find_peer4(&message(libc::RTM_NEWNEIGH, 1, &p)).unwrap(),
        Dump::More
    );
    // An AF_INET entry carrying a 16-byte NDA_DST.
    let p = ndmsg(
        libc::AF_INET,
        3,
        libc::NUD_REACHABLE,
        &[attr(libc::NDA_DST, &dst), attr(libc::NDA_LLADDR, &MAC)],
    );
    assert_eq!(
        find_peer4(&message(libc::RTM_NEWNEIGH, 1, &p)).unwrap(),
        Dump::More
    );
    // IPv6 matches IPv6.
    let p = ndmsg(
        libc::AF_INET6,
        3,
        libc::NUD_REACHABLE,
        &[
            attr(libc::NDA_DST, &v6.octets()),
            attr(libc::NDA_LLADDR, &MAC),
        ],
    );
    let n = parse_neighbour(&p).unwrap();
    assert_eq!(n.mac_of(3, v6.into()), Some(MAC));
    assert_eq!(n.mac_of(3, PEER4.into()), None);
    assert_eq!(n.mac_of(2, v6.into()), None);
}

#[test]
fn other_requests_and_message_types_are_skipped() {
    let mut buf = message(
        libc::RTM_NEWNEIGH,
        7,
        &neigh4(3, PEER4, libc::NUD_REACHABLE, &MAC),
    );
    // A RTM_NEWADDR with our sequence number is not a neighbour.
    buf.extend(message(libc::RTM_NEWADDR, 1, &[0u8; 8]));
    buf.extend(done(7));
    assert_eq!(find_peer4(&buf).unwrap(), Dump::More);
    buf.extend(done(1));
    assert_eq!(find_peer4(&buf).unwrap(), Dump::Done);
}

#[test]
fn kernel_errors_are_errors_and_acks_are_not() {
    let mut err = (-libc::EPERM).to_ne_bytes().to_vec();
    err.extend(vec![0u8; NLMSG_HDRLEN]);
    let e = find_peer4(&message(NLMSG_ERROR, 1, &err)).unwrap_err();
    assert!(
        matches!(&e, NetlinkError::Refused(io) if io.raw_os_error() == Some(libc::EPERM)),
        "{e:?}"
    );
    let ack = message(NLMSG_ERROR, 1, &[0u8; 4 + NLMSG_HDRLEN]);
    assert_eq!(find_peer4(&ack).unwrap(), Dump::More);
    // A dump that failed reports its error in NLMSG_DONE.
    let e = find_peer4(&message(NLMSG_DONE, 1, &(-libc::EINTR).to_ne_bytes())).unwrap_err();
    assert!(matches!(e, NetlinkError::Refused(_)), "{e:?}");
    // An NLMSG_ERROR too short for its code.
    assert!(matches!(
        find_peer4(&message(NLMSG_ERROR, 1, &[0u8; 2])),
        Err(NetlinkError::Malformed(_))
    ));
    // A bare NLMSG_DONE (older kernels) ends the dump.
    assert_eq!(
        find_peer4(&message(NLMSG_DONE, 1, &[])).unwrap(),
        Dump::Done
    );
}

#[test]
fn truncated_and_mislabelled_messages_are_errors() {
    let good = message(
        libc::RTM_NEWNEIGH,
        1,
        &neigh4(3, PEER4, libc::NUD_REACHABLE, &MAC),
    );
    // Every truncation of a datagram is an error or (cut exactly between
    // messages) a shorter datagram, never a panic.
    for cut in 1..good.len() {
        assert!(
            matches!(find_peer4(&good[..cut]), Err(NetlinkError::Malformed(_))),
            "cut at {cut}"
        );
    }
    // nlmsg_len smaller than the header, larger than the datagram.
    for len in [0u32, 15, good.len() as u32 + 1, u32::MAX] {
        let mut bad = good.clone();
        bad[..4].copy_from_slice(&len.to_ne_bytes());
        assert!(
            matches!(find_peer4(&bad), Err(NetlinkError::Malformed(_))),
            "nlmsg_len {len}"
        );
    }
    // A payload shorter than an ndmsg.
    assert!(matches!(
        find_peer4(&message(libc::RTM_NEWNEIGH, 1, &[0u8; NDMSG_LEN - 1])),
        Err(NetlinkError::Malformed(_))
    ));
    // An attribute whose rta_len is below its header or past the message.
    let off = NLMSG_HDRLEN + NDMSG_LEN;
    for rta_len in [0u16, 3, 200, u16::MAX] {
        let mut bad = good.clone();
        bad[off..off + 2].copy_from_slice(&rta_len.to_ne_bytes());
        assert!(
            matches!(find_peer4(&bad), Err(NetlinkError::Malformed(_))),
            "rta_len {rta_len}"
        );
    }
    // Trailing bytes too few for an attribute header.
    let mut p = neigh4(3, PEER4, libc::NUD_REACHABLE, &MAC);
    p.extend_from_slice(&[4, 0]);
    assert!(matches!(
        find_peer4(&message(libc::RTM_NEWNEIGH, 1, &p)),
        Err(NetlinkError::Malformed(_))
    ));
}

#[test]
fn an_unpadded_last_attribute_and_message_parse() {
    // The last attribute's value is 6 bytes, the message not padded to 4.
    let mut p = ndmsg(
        libc::AF_INET,
        3,
        libc::NUD_REACHABLE,
        &[attr(libc::NDA_DST, &PEER4.octets())],
    );
    p.extend_from_slice(&10u16.to_ne_bytes());
    p.extend_from_slice(&libc::NDA_LLADDR.to_ne_bytes());
    p.extend_from_slice(&MAC);
    let mut m = message(libc::RTM_NEWNEIGH, 1, &p);
    m.truncate(NLMSG_HDRLEN + p.len());
    assert_eq!(find_peer4(&m).unwrap(), Dump::Found(MAC));
}

fn ifaddrmsg(family: i32, scope: u8, ifindex: u32, attrs: &[Vec<u8>]) -> Vec<u8> {
    let mut p = vec![0u8; IFADDRMSG_LEN];
    p[offset_of!(libc::ifaddrmsg, ifa_family)] = family as u8;
    p[offset_of!(libc::ifaddrmsg, ifa_scope)] = scope;
    let i = offset_of!(libc::ifaddrmsg, ifa_index);
    p[i..i + 4].copy_from_slice(&ifindex.to_ne_bytes());
    for a in attrs {
        p.extend_from_slice(a);
    }
    p
}

#[test]
fn addresses_global_of_the_family_on_the_interface() {
    let v4 = Ipv4Addr::new(10, 7, 0, 1);
    let peer = Ipv4Addr::new(10, 7, 0, 99);
    let v6: Ipv6Addr = "fd00::1".parse().unwrap();
    let ll: Ipv6Addr = "fe80::1".parse().unwrap();
    // IPv4: IFA_LOCAL is the address (IFA_ADDRESS is a p2p peer).
    let a = ifaddrmsg(
        libc::AF_INET,
        libc::RT_SCOPE_UNIVERSE,
        3,
        &[
            attr(libc::IFA_ADDRESS, &peer.octets()),
            attr(libc::IFA_LOCAL, &v4.octets()),
        ],
    );
    let a = parse_address(&a).unwrap();
    assert_eq!(a.global_on(3, false), Some(v4.into()));
    assert_eq!(a.global_on(3, true), None);
    assert_eq!(a.global_on(4, false), None);
    // IPv6: IFA_ADDRESS alone.
    let g = ifaddrmsg(
        libc::AF_INET6,
        libc::RT_SCOPE_UNIVERSE,
        3,
        &[attr(libc::IFA_ADDRESS, &v6.octets())],
    );
    assert_eq!(
        parse_address(&g).unwrap().global_on(3, true),
        Some(v6.into())
    );
    // Link scope (fe80::) and host scope (127.0.0.1) are not global.
    let l = ifaddrmsg(
        libc::AF_INET6,
        libc::RT_SCOPE_LINK,
        3,
        &[attr(libc::IFA_ADDRESS, &ll.octets())],
    );
    assert_eq!(parse_address(&l).unwrap().global_on(3, true), None);
    let h = ifaddrmsg(
        libc::AF_INET,
        libc::RT_SCOPE_HOST,
        3,
        &[attr(libc::IFA_LOCAL, &Ipv4Addr::LOCALHOST.octets())],
    );
    assert_eq!(parse_address(&h).unwrap().global_on(3, false), None);
    // A wrong-length address is no address.
    let w = ifaddrmsg(
        libc::AF_INET,
        libc::RT_SCOPE_UNIVERSE,
        3,
        &[attr(libc::IFA_LOCAL, &v6.octets())],
    );
    assert_eq!(parse_address(&w).unwrap().global_on(3, false), None);
    // Truncated.
    assert!(parse_address(&[0u8; IFADDRMSG_LEN - 1]).is_err());
    let mut t = ifaddrmsg(libc::AF_INET, 0, 3, &[attr(libc::IFA_LOCAL, &v4.octets())]);
    t.pop();
    assert!(parse_address(&t).is_err());
}

fn ifinfomsg(ifindex: u32, kind: u16, attrs: &[Vec<u8>]) -> Vec<u8> {
    let mut p = vec![0u8; IFINFOMSG_LEN];
    let i = offset_of!(libc::ifinfomsg, ifi_index);
    p[i..i + 4].copy_from_slice(&ifindex.to_ne_bytes());
    let t = offset_of!(libc::ifinfomsg, ifi_type);
    p[t..t + 2].copy_from_slice(&kind.to_ne_bytes());
    for a in attrs {
        p.extend_from_slice(a);
    }
    p
}

#[test]
fn links_ethernet_address_of_the_interface() {
    let e = ifinfomsg(
        3,
        libc::ARPHRD_ETHER,
        &[attr(3, b"veth0\0"), attr(IFLA_ADDRESS, &MAC)],
    );
    let l = parse_link(&e).unwrap();
    assert_eq!(l.ether_of(3), Some(MAC));
    assert_eq!(l.ether_of(2), None);
    // Loopback has a 6-byte address of zeros but is not Ethernet.
    let lo = ifinfomsg(1, libc::ARPHRD_LOOPBACK, &[attr(IFLA_ADDRESS, &[0; 6])]);
    assert_eq!(parse_link(&lo).unwrap().ether_of(1), None);
    // An Ethernet link with a wrong-length address.
    let w = ifinfomsg(3, libc::ARPHRD_ETHER, &[attr(IFLA_ADDRESS, &MAC[..4])]);
    assert_eq!(parse_link(&w).unwrap().ether_of(3), None);
    assert!(parse_link(&[0u8; IFINFOMSG_LEN - 1]).is_err());
}

#[test]
fn requests_are_laid_out_as_the_kernel_reads_them() {
    let r = dump_request(
        libc::RTM_GETNEIGH,
        9,
        &[libc::AF_INET as u8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
    );
    assert_eq!(r.len(), NLMSG_HDRLEN + NDMSG_LEN);
    let m: Vec<_> = messages(&r).collect::<Result<_, _>>().unwrap();
    assert_eq!(m.len(), 1);
    assert_eq!(m[0].kind, libc::RTM_GETNEIGH);
    assert_eq!(m[0].seq, 9);
    assert_eq!(m[0].payload[0], libc::AF_INET as u8);
    assert_eq!(
        u16_at(&r, offset_of!(libc::nlmsghdr, nlmsg_flags)),
        Some((libc::NLM_F_REQUEST | libc::NLM_F_DUMP) as u16)
    );
}

/// The live kernel answers in the test's own namespace: `lo` is index 1,
/// not Ethernet, and has 127.0.0.1 in host scope (so no global address).
#[test]
fn the_kernel_answers_for_lo() {
    let lo = crate::io::if_index("lo").unwrap();
    assert_eq!(link_mac(lo).unwrap(), None);
    assert_eq!(global_address(lo, false).unwrap(), None);
    assert_eq!(neighbour_mac(lo, PEER4.into()).unwrap(), None);
}
