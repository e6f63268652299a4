//! Socket addresses as the program passes them, the route's source
//! address (the kernel's: a connected UDP socket's `getsockname`), GIDs of
//! IP addresses (IPv4-mapped, RoCE v2), and `rdma_getaddrinfo`.

use std::ffi::{c_char, c_int, CStr};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::ptr::null_mut;

use crate::abi::*;
use crate::ibv::IBV_QPT_UD;

/// Reads a socket address (AF_INET / AF_INET6); EINVAL for NULL,
/// EAFNOSUPPORT for another family.
///
/// # Safety
/// `sa` is NULL or points to a sockaddr of its family's size.
pub unsafe fn read(sa: *const libc::sockaddr) -> Result<SocketAddr, c_int> {
    if sa.is_null() {
        return Err(libc::EINVAL);
    }
    // SAFETY: the caller's contract; the family says which struct it is.
    unsafe {
        match c_int::from((*sa).sa_family) {
            libc::AF_INET => {
                let s = &*(sa as *const libc::sockaddr_in);
                Ok(SocketAddr::V4(SocketAddrV4::new(
                    Ipv4Addr::from(u32::from_be(s.sin_addr.s_addr)),
                    u16::from_be(s.sin_port),
                )))
            }
            libc::AF_INET6 => {
                let s = &*(sa as *const libc::sockaddr_in6);
                Ok(SocketAddr::V6(SocketAddrV6::new(
                    Ipv6Addr::from(s.sin6_addr.s6_addr),
                    u16::from_be(s.sin6_port),
                    s.sin6_flowinfo,
                    s.sin6_scope_id,
                )))
            }
            _ => Err(libc::EAFNOSUPPORT),
        }
    }
}

/// Writes `a` into a sockaddr_storage.
pub fn write(a: SocketAddr, out: &mut SockaddrStorage) {
    out.0 = [0; 128];
    match a {
        SocketAddr::V4(v) => {
            let s = libc::sockaddr_in {
                sin_family: libc::AF_INET as u16,
                sin_port: v.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from(*v.ip()).to_be(),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_in (16 bytes) fits the 128-byte storage.
            unsafe { std::ptr::write_unaligned(out.0.as_mut_ptr().cast(), s) };
        }
        SocketAddr::V6(v) => {
            let s = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as u16,
                sin6_port: v.port().to_be(),
                sin6_flowinfo: v.flowinfo(),
                sin6_addr: libc::in6_addr {
                    s6_addr: v.ip().octets(),
                },
                sin6_scope_id: v.scope_id(),
            };
            // SAFETY: sockaddr_in6 (28 bytes) fits the storage.
            unsafe { std::ptr::write_unaligned(out.0.as_mut_ptr().cast(), s) };
        }
    }
}

/// The address in a sockaddr_storage this library wrote, if any.
pub fn stored(s: &SockaddrStorage) -> Option<SocketAddr> {
    // SAFETY: 128 bytes of a storage, family-tagged.
    unsafe { read(s.0.as_ptr().cast()).ok() }
}

/// The RoCE v2 GID of an IP address: IPv4-mapped, or the IPv6 address.
pub fn gid_of(ip: IpAddr) -> [u8; 16] {
    match ip {
        IpAddr::V4(v) => v.to_ipv6_mapped().octets(),
        IpAddr::V6(v) => v.octets(),
    }
}

/// The source address the kernel's routing picks toward `dst` (a
/// connected UDP socket's name), or the errno of the route lookup
/// (ENETUNREACH, EHOSTUNREACH, ...).
pub fn route_source(dst: IpAddr) -> Result<IpAddr, c_int> {
    let bind: SocketAddr = match dst {
        IpAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
        IpAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
    };
    let s = std::net::UdpSocket::bind(bind).map_err(|e| e.raw_os_error().unwrap_or(libc::EIO))?;
    s.connect((dst, 9))
        .map_err(|e| e.raw_os_error().unwrap_or(libc::ENETUNREACH))?;
    s.local_addr()
        .map(|a| a.ip())
        .map_err(|e| e.raw_os_error().unwrap_or(libc::EIO))
}

/// Whether `ip` is an address of this host (some interface has it).
pub fn is_local(ip: IpAddr) -> bool {
    std::net::UdpSocket::bind((ip, 0)).is_ok()
}

fn sockaddr_len(a: &SocketAddr) -> libc::socklen_t {
    match a {
        SocketAddr::V4(_) => std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        SocketAddr::V6(_) => std::mem::size_of::<libc::sockaddr_in6>() as libc::socklen_t,
    }
}

fn boxed_sockaddr(a: SocketAddr) -> *mut libc::sockaddr {
    let mut s = Box::new(SockaddrStorage([0; 128]));
    write(a, &mut s);
    Box::into_raw(s).cast()
}

/// `rdma_getaddrinfo`: the addresses of `node`/`service` (numeric, or
/// names through the system resolver), as one `rdma_addrinfo` each: the
/// source address for RAI_PASSIVE, the destination otherwise; the QP type
/// and port space from the hints (RC, RDMA_PS_TCP by default; UD: UDP).
///
/// # Safety
/// `node`/`service` are NULL or strings; `hints` NULL or an rdma_addrinfo;
/// `res` writable.
pub unsafe fn getaddrinfo(
    node: *const c_char,
    service: *const c_char,
    hints: *const rdma_addrinfo,
    res: *mut *mut rdma_addrinfo,
) -> Result<(), c_int> {
    if res.is_null() {
        return Err(libc::EINVAL);
    }
    // SAFETY: the caller's contract.
    let h = unsafe { hints.as_ref() };
    if node.is_null() && service.is_null() {
        // librdmacm: EINVAL only without hints too; else one entry with
        // the hints' flags, family, QP type, port space and addresses.
        let Some(h) = h else {
            return Err(libc::EINVAL);
        };
        // SAFETY: rdma_addrinfo is plain data.
        let mut r: Box<rdma_addrinfo> = Box::new(unsafe { std::mem::zeroed() });
        r.ai_flags = h.ai_flags;
        r.ai_family = h.ai_family;
        r.ai_qp_type = if h.ai_qp_type == 0 {
            crate::ibv::IBV_QPT_RC
        } else {
            h.ai_qp_type
        };
        r.ai_port_space = match h.ai_port_space {
            0 if r.ai_qp_type == IBV_QPT_UD => RDMA_PS_UDP,
            0 => RDMA_PS_TCP,
            p => p,
        };
        // SAFETY: the hints' addresses (the caller's contract).
        unsafe {
            if let Ok(a) = read(h.ai_src_addr) {
                r.ai_src_len = sockaddr_len(&a);
                r.ai_src_addr = boxed_sockaddr(a);
                r.ai_family = if a.is_ipv4() {
                    libc::AF_INET
                } else {
                    libc::AF_INET6
                };
            }
            if let Ok(a) = read(h.ai_dst_addr) {
                r.ai_dst_len = sockaddr_len(&a);
                r.ai_dst_addr = boxed_sockaddr(a);
                r.ai_family = if a.is_ipv4() {
                    libc::AF_INET
                } else {
                    libc::AF_INET6
                };
            }
            *res = Box::into_raw(r);
        }
        return Ok(());
    }
    let flags = h.map_or(0, |h| h.ai_flags);
    let family = h.map_or(0, |h| h.ai_family);
    let qp_type = h.map_or(0, |h| h.ai_qp_type);
    let qp_type = if qp_type == 0 {
        crate::ibv::IBV_QPT_RC
    } else {
        qp_type
    };
    let ps = match h.map_or(0, |h| h.ai_port_space) {
        0 if qp_type == IBV_QPT_UD => RDMA_PS_UDP,
        0 => RDMA_PS_TCP,
        p => p,
    };
    // SAFETY: addrinfo is plain data.
    let mut ai: libc::addrinfo = unsafe { std::mem::zeroed() };
    ai.ai_family = family;
    ai.ai_socktype = if qp_type == IBV_QPT_UD {
        libc::SOCK_DGRAM
    } else {
        libc::SOCK_STREAM
    };
    if flags & RAI_PASSIVE != 0 {
        ai.ai_flags |= libc::AI_PASSIVE;
    }
    if flags & RAI_NUMERICHOST != 0 {
        ai.ai_flags |= libc::AI_NUMERICHOST;
    }
    let mut list: *mut libc::addrinfo = null_mut();
    // SAFETY: the strings are the caller's; `list` is written on success.
    let r = unsafe { libc::getaddrinfo(node, service, &ai, &mut list) };
    if r != 0 {
        return Err(match r {
            libc::EAI_NONAME | libc::EAI_NODATA => libc::ENOENT,
            libc::EAI_MEMORY => libc::ENOMEM,
            libc::EAI_SYSTEM => std::io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EIO),
            _ => libc::EINVAL,
        });
    }
    let mut head: *mut rdma_addrinfo = null_mut();
    let mut tail: *mut *mut rdma_addrinfo = &mut head;
    let mut p = list;
    while !p.is_null() {
        // SAFETY: a node of getaddrinfo's list.
        let a = unsafe { &*p };
        p = a.ai_next;
        // SAFETY: getaddrinfo's address of its family.
        let Ok(addr) = (unsafe { read(a.ai_addr) }) else {
            continue;
        };
        // SAFETY: rdma_addrinfo is plain data.
        let mut r: Box<rdma_addrinfo> = Box::new(unsafe { std::mem::zeroed() });
        r.ai_flags = flags;
        r.ai_family = a.ai_family;
        r.ai_qp_type = qp_type;
        r.ai_port_space = ps;
        if flags & RAI_PASSIVE != 0 {
            r.ai_src_len = sockaddr_len(&addr);
            r.ai_src_addr = boxed_sockaddr(addr);
        } else {
            r.ai_dst_len = sockaddr_len(&addr);
            r.ai_dst_addr = boxed_sockaddr(addr);
            if let Some(h) = h.filter(|h| !h.ai_src_addr.is_null()) {
                // SAFETY: the hints' source address.
                if let Ok(src) = unsafe { read(h.ai_src_addr) } {
                    r.ai_src_len = sockaddr_len(&src);
                    r.ai_src_addr = boxed_sockaddr(src);
                }
            }
        }
        if !node.is_null() && flags & RAI_NUMERICHOST == 0 {
            // SAFETY: the caller's string.
            let name = unsafe { CStr::from_ptr(node) }.to_owned();
            let canon = name.into_raw();
            if flags & RAI_PASSIVE != 0 {
                r.ai_src_canonname = canon;
            } else {
                r.ai_dst_canonname = canon;
            }
        }
        let raw = Box::into_raw(r);
        // SAFETY: `tail` points at `head` or the last node's ai_next.
        unsafe {
            *tail = raw;
            tail = &mut (*raw).ai_next;
        }
    }
    // SAFETY: getaddrinfo's list.
    unsafe { libc::freeaddrinfo(list) };
    if head.is_null() {
        return Err(libc::ENOENT);
    }
    // SAFETY: the caller's out-pointer.
    unsafe { *res = head };
    Ok(())
}

/// `rdma_freeaddrinfo` of a list [`getaddrinfo`] made.
///
/// # Safety
/// `res` is NULL or a list this library returned, not freed yet.
pub unsafe fn freeaddrinfo(mut res: *mut rdma_addrinfo) {
    while !res.is_null() {
        // SAFETY: each node and its addresses/names are our boxes.
        unsafe {
            let r = Box::from_raw(res);
            res = r.ai_next;
            for a in [r.ai_src_addr, r.ai_dst_addr] {
                if !a.is_null() {
                    drop(Box::from_raw(a.cast::<SockaddrStorage>()));
                }
            }
            for c in [r.ai_src_canonname, r.ai_dst_canonname] {
                if !c.is_null() {
                    drop(std::ffi::CString::from_raw(c));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CString;

    #[test]
    fn socket_addresses_round_trip_through_sockaddr_storage() {
        let mut s = SockaddrStorage([0; 128]);
        for a in ["10.1.2.3:7471", "[fe80::1]:18515"] {
            let a: SocketAddr = a.parse().unwrap();
            write(a, &mut s);
            assert_eq!(stored(&s), Some(a));
        }
        // sin_port is big-endian in memory.
        write("1.2.3.4:258".parse().unwrap(), &mut s);
        assert_eq!(&s.0[2..8], &[1, 2, 1, 2, 3, 4]);
    }

    #[test]
    fn gids_of_ipv4_addresses_are_ipv4_mapped() {
        let g = gid_of("10.55.0.1".parse().unwrap());
        assert_eq!(g, [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 55, 0, 1]);
    }

    #[test]
    fn getaddrinfo_numeric_passive_and_hints_only() {
        let node = CString::new("10.9.8.7").unwrap();
        let service = CString::new("7174").unwrap();
        // SAFETY: rdma_addrinfo is plain data.
        let mut hints: rdma_addrinfo = unsafe { std::mem::zeroed() };
        hints.ai_flags = RAI_NUMERICHOST;
        hints.ai_qp_type = IBV_QPT_UD;
        let mut res = std::ptr::null_mut();
        // SAFETY: valid strings, hints and out-pointer.
        unsafe { getaddrinfo(node.as_ptr(), service.as_ptr(), &hints, &mut res) }.unwrap();
        // SAFETY: the list just returned.
        let r = unsafe { &*res };
        assert_eq!(r.ai_port_space, RDMA_PS_UDP);
        assert!(r.ai_src_addr.is_null());
        // SAFETY: our own sockaddr.
        let dst = unsafe { read(r.ai_dst_addr) }.unwrap();
        assert_eq!(dst, "10.9.8.7:7174".parse().unwrap());
        // No node nor service: the hints' own address, copied.
        hints.ai_flags = RAI_PASSIVE;
        hints.ai_src_addr = r.ai_dst_addr;
        let mut res2 = std::ptr::null_mut();
        // SAFETY: as above.
        unsafe { getaddrinfo(std::ptr::null(), std::ptr::null(), &hints, &mut res2) }.unwrap();
        // SAFETY: the list just returned; its sockaddr.
        let src = unsafe { read((*res2).ai_src_addr) }.unwrap();
        assert_eq!(src, dst);
        // SAFETY: lists this module made.
        unsafe {
            freeaddrinfo(res);
            freeaddrinfo(res2);
        }
        // Hints without addresses: an entry with none (librdmacm); no
        // hints either: EINVAL; a name with RAI_NUMERICHOST: no address.
        hints.ai_src_addr = std::ptr::null_mut();
        let mut res3 = std::ptr::null_mut();
        // SAFETY: as above.
        unsafe { getaddrinfo(std::ptr::null(), std::ptr::null(), &hints, &mut res3) }.unwrap();
        // SAFETY: the list just returned.
        unsafe {
            assert!((*res3).ai_src_addr.is_null() && (*res3).ai_dst_addr.is_null());
            assert_eq!((*res3).ai_flags, RAI_PASSIVE);
            freeaddrinfo(res3);
        }
        // SAFETY: as above.
        let e = unsafe {
            getaddrinfo(
                std::ptr::null(),
                std::ptr::null(),
                std::ptr::null(),
                &mut res3,
            )
        };
        assert_eq!(e, Err(libc::EINVAL));
        let name = CString::new("not-numeric").unwrap();
        hints.ai_flags = RAI_NUMERICHOST;
        // SAFETY: as above.
        let e = unsafe { getaddrinfo(name.as_ptr(), service.as_ptr(), &hints, &mut res3) };
        assert!(e.is_err());
    }
}
