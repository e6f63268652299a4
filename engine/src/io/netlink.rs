//! The kernel's interface facts read over rtnetlink (`NETLINK_ROUTE`), in
//! the calling thread's network namespace: an interface's Ethernet address
//! (`RTM_GETLINK`), its addresses with their scope (`RTM_GETADDR`) and the
//! neighbour table (`RTM_GETNEIGH`, ARP / ND). These are what `ip link`,
//! `ip addr` and `ip neigh` print, read without spawning a process: the
//! drop-in libraries live inside arbitrary programs, where a child process
//! would send the program a SIGCHLD (interrupting its blocking calls) and
//! could have its status reaped by the program's own `waitpid(-1)`.
//!
//! The system calls (socket, sendto, recv) are the only `unsafe` here; the
//! replies are parsed from byte slices with every length checked: a
//! malformed reply is a [`NetlinkError::Malformed`], never a panic or a read
//! outside the buffer.

use std::io;
use std::mem::{offset_of, size_of};
use std::net::IpAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// Why a netlink request failed.
#[derive(Debug, thiserror::Error)]
pub enum NetlinkError {
    #[error("netlink {what}: {source}")]
    Io {
        what: &'static str,
        source: io::Error,
    },
    /// The kernel answered the request with an error (`NLMSG_ERROR`).
    #[error("netlink request refused: {0}")]
    Refused(io::Error),
    #[error("malformed netlink reply: {0}")]
    Malformed(&'static str),
}

// Message layouts of include/uapi/linux/netlink.h and rtnetlink.h.
const NLMSG_HDRLEN: usize = size_of::<libc::nlmsghdr>();
/// `struct ndmsg` (uapi/linux/neighbour.h; not in libc): family u8, two pad
/// bytes, ifindex i32, state u16, flags u8, type u8.
const NDMSG_LEN: usize = 12;
const NDM_FAMILY: usize = 0;
const NDM_IFINDEX: usize = 4;
const NDM_STATE: usize = 8;
const IFADDRMSG_LEN: usize = size_of::<libc::ifaddrmsg>();
const IFINFOMSG_LEN: usize = size_of::<libc::ifinfomsg>();
const RTA_HDRLEN: usize = size_of::<libc::rtattr>();
/// `IFLA_ADDRESS` (uapi/linux/if_link.h; not in libc for Linux).
const IFLA_ADDRESS: u16 = 1;

const NLMSG_ERROR: u16 = libc::NLMSG_ERROR as u16;
const NLMSG_DONE: u16 = libc::NLMSG_DONE as u16;

/// Rounds up to the 4-byte alignment of netlink messages and attributes.
const fn align4(n: usize) -> usize {
    (n + 3) & !3
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// One netlink message of a reply: its type, sequence number, and payload
/// (what follows the `nlmsghdr`, bounded by `nlmsg_len`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Message<'a> {
    pub kind: u16,
    pub seq: u32,
    pub payload: &'a [u8],
}

/// Splits a datagram into its netlink messages. A header that claims less
/// than itself or more than the datagram holds, or trailing bytes too few
/// for a header, is an error.
pub(crate) fn messages(buf: &[u8]) -> impl Iterator<Item = Result<Message<'_>, NetlinkError>> {
    let mut rest = buf;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let m = (|| {
            if rest.len() < NLMSG_HDRLEN {
                return Err(NetlinkError::Malformed("truncated message header"));
            }
            let len = u32_at(rest, offset_of!(libc::nlmsghdr, nlmsg_len)).unwrap_or(0) as usize;
            if len < NLMSG_HDRLEN || len > rest.len() {
                return Err(NetlinkError::Malformed("message length out of bounds"));
            }
            let msg = Message {
                kind: u16_at(rest, offset_of!(libc::nlmsghdr, nlmsg_type)).unwrap_or(0),
                seq: u32_at(rest, offset_of!(libc::nlmsghdr, nlmsg_seq)).unwrap_or(0),
                payload: &rest[NLMSG_HDRLEN..len],
            };
            rest = &rest[align4(len).min(rest.len())..];
            Ok(msg)
        })();
        if m.is_err() {
            rest = &[];
        }
        Some(m)
    })
}

/// Splits the attributes following a message's fixed header into
/// (type, value) pairs; an attribute whose length is out of bounds is an
/// error.
pub(crate) fn attributes(buf: &[u8]) -> impl Iterator<Item = Result<(u16, &[u8]), NetlinkError>> {
    let mut rest = buf;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let a = (|| {
            if rest.len() < RTA_HDRLEN {
                return Err(NetlinkError::Malformed("truncated attribute header"));
            }
            let len = u16_at(rest, offset_of!(libc::rtattr, rta_len)).unwrap_or(0) as usize;
            if len < RTA_HDRLEN || len > rest.len() {
                return Err(NetlinkError::Malformed("attribute length out of bounds"));
            }
            // The top bits are NLA_F_NESTED / NLA_F_NET_BYTEORDER.
            let kind = u16_at(rest, offset_of!(libc::rtattr, rta_type)).unwrap_or(0) & 0x3fff;
            let value = &rest[RTA_HDRLEN..len];
            rest = &rest[align4(len).min(rest.len())..];
            Ok((kind, value))
        })();
        if a.is_err() {
            rest = &[];
        }
        Some(a)
    })
}

/// A neighbour table entry (`RTM_NEWNEIGH`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Neighbour<'a> {
    pub family: u8,
    pub ifindex: u32,
    pub state: u16,
    pub dst: Option<&'a [u8]>,
    pub lladdr: Option<&'a [u8]>,
}

pub(crate) fn parse_neighbour(payload: &[u8]) -> Result<Neighbour<'_>, NetlinkError> {
    if payload.len() < NDMSG_LEN {
        return Err(NetlinkError::Malformed("truncated ndmsg"));
    }
    let mut n = Neighbour {
        family: payload[NDM_FAMILY],
        ifindex: u32_at(payload, NDM_IFINDEX).unwrap_or(0),
        state: u16_at(payload, NDM_STATE).unwrap_or(0),
        dst: None,
        lladdr: None,
    };
    for a in attributes(&payload[align4(NDMSG_LEN).min(payload.len())..]) {
        match a? {
            (libc::NDA_DST, v) => n.dst = Some(v),
            (libc::NDA_LLADDR, v) => n.lladdr = Some(v),
            _ => {}
        }
    }
    Ok(n)
}

impl Neighbour<'_> {
    /// The Ethernet address of this entry if it is `addr` on `ifindex` and
    /// resolved: not `NUD_NONE`, `NUD_INCOMPLETE` or `NUD_FAILED`, with a
    /// 6-byte link-layer address.
    pub fn mac_of(&self, ifindex: u32, addr: IpAddr) -> Option<[u8; 6]> {
        let (v4, v6);
        let (family, octets): (u8, &[u8]) = match addr {
            IpAddr::V4(a) => {
                v4 = a.octets();
                (libc::AF_INET as u8, &v4)
            }
            IpAddr::V6(a) => {
                v6 = a.octets();
                (libc::AF_INET6 as u8, &v6)
            }
        };
        let unresolved = libc::NUD_INCOMPLETE | libc::NUD_FAILED;
        if self.family != family
            || self.ifindex != ifindex
            || self.state == libc::NUD_NONE
            || self.state & unresolved != 0
            || self.dst != Some(octets)
        {
            return None;
        }
        self.lladdr?.try_into().ok()
    }
}

/// An interface address (`RTM_NEWADDR`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Address<'a> {
    pub family: u8,
    pub scope: u8,
    pub ifindex: u32,
    /// `IFA_LOCAL` (the local address of a point-to-point link; IPv4 sets
    /// it on every address).
    pub local: Option<&'a [u8]>,
    /// `IFA_ADDRESS` (the peer's on point-to-point links).
    pub address: Option<&'a [u8]>,
}

pub(crate) fn parse_address(payload: &[u8]) -> Result<Address<'_>, NetlinkError> {
    if payload.len() < IFADDRMSG_LEN {
        return Err(NetlinkError::Malformed("truncated ifaddrmsg"));
    }
    let mut a = Address {
        family: payload[offset_of!(libc::ifaddrmsg, ifa_family)],
        scope: payload[offset_of!(libc::ifaddrmsg, ifa_scope)],
        ifindex: u32_at(payload, offset_of!(libc::ifaddrmsg, ifa_index)).unwrap_or(0),
        local: None,
        address: None,
    };
    for attr in attributes(&payload[IFADDRMSG_LEN..]) {
        match attr? {
            (libc::IFA_LOCAL, v) => a.local = Some(v),
            (libc::IFA_ADDRESS, v) => a.address = Some(v),
            _ => {}
        }
    }
    Ok(a)
}

impl Address<'_> {
    /// The address `ip addr show scope global` prints for this entry
    /// (`IFA_LOCAL`, else `IFA_ADDRESS`) if it is on `ifindex`, of the
    /// family asked for, and of global scope.
    pub fn global_on(&self, ifindex: u32, ipv6: bool) -> Option<IpAddr> {
        if self.ifindex != ifindex || self.scope != libc::RT_SCOPE_UNIVERSE {
            return None;
        }
        let v = self.local.or(self.address)?;
        match (self.family as i32, ipv6) {
            (libc::AF_INET, false) => Some(IpAddr::from(<[u8; 4]>::try_from(v).ok()?)),
            (libc::AF_INET6, true) => Some(IpAddr::from(<[u8; 16]>::try_from(v).ok()?)),
            _ => None,
        }
    }
}

/// A link (`RTM_NEWLINK`): its index, `ARPHRD_*` type and `IFLA_ADDRESS`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Link<'a> {
    pub ifindex: u32,
    pub kind: u16,
    pub address: Option<&'a [u8]>,
}

pub(crate) fn parse_link(payload: &[u8]) -> Result<Link<'_>, NetlinkError> {
    if payload.len() < IFINFOMSG_LEN {
        return Err(NetlinkError::Malformed("truncated ifinfomsg"));
    }
    let mut l = Link {
        ifindex: u32_at(payload, offset_of!(libc::ifinfomsg, ifi_index)).unwrap_or(0),
        kind: u16_at(payload, offset_of!(libc::ifinfomsg, ifi_type)).unwrap_or(0),
        address: None,
    };
    for a in attributes(&payload[IFINFOMSG_LEN..]) {
        if let (IFLA_ADDRESS, v) = a? {
            l.address = Some(v);
        }
    }
    Ok(l)
}

impl Link<'_> {
    /// The Ethernet address (`link/ether` in `ip link`) if this is
    /// `ifindex` and an Ethernet link.
    pub fn ether_of(&self, ifindex: u32) -> Option<[u8; 6]> {
        if self.ifindex != ifindex || self.kind != libc::ARPHRD_ETHER {
            return None;
        }
        self.address?.try_into().ok()
    }
}

/// The `errno` of an `NLMSG_ERROR` payload (`struct nlmsgerr`: a negative
/// errno, 0 for an acknowledgement).
fn error_code(payload: &[u8]) -> Result<i32, NetlinkError> {
    u32_at(payload, 0)
        .map(|e| e as i32)
        .ok_or(NetlinkError::Malformed("truncated nlmsgerr"))
}

/// How a reply datagram ended the dump, if it did.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Dump<T> {
    /// More datagrams follow.
    More,
    /// `NLMSG_DONE`: the dump is complete.
    Done,
    /// The visitor found what it looked for.
    Found(T),
}

/// Walks one datagram of a dump answering request `seq`, handing each
/// message of type `kind` to `visit`; messages of other requests are
/// skipped. `NLMSG_ERROR` with a non-zero code is the kernel's refusal.
pub(crate) fn walk_datagram<T>(
    buf: &[u8],
    seq: u32,
    kind: u16,
    visit: &mut impl FnMut(&[u8]) -> Result<Option<T>, NetlinkError>,
) -> Result<Dump<T>, NetlinkError> {
    for m in messages(buf) {
        let m = m?;
        if m.seq != seq {
            continue;
        }
        match m.kind {
            NLMSG_DONE => {
                // Since Linux 4.x NLMSG_DONE carries an int: the dump's error.
                if let Ok(e) = error_code(m.payload) {
                    if e < 0 {
                        return Err(NetlinkError::Refused(io::Error::from_raw_os_error(-e)));
                    }
                }
                return Ok(Dump::Done);
            }
            NLMSG_ERROR => {
                let e = error_code(m.payload)?;
                if e < 0 {
                    return Err(NetlinkError::Refused(io::Error::from_raw_os_error(-e)));
                }
            }
            k if k == kind => {
                if let Some(t) = visit(m.payload)? {
                    return Ok(Dump::Found(t));
                }
            }
            _ => {}
        }
    }
    Ok(Dump::More)
}

/// Builds the request: `nlmsghdr` (NLM_F_REQUEST | NLM_F_DUMP) followed by
/// the family header `header`.
fn dump_request(kind: u16, seq: u32, header: &[u8]) -> Vec<u8> {
    let len = NLMSG_HDRLEN + align4(header.len());
    let mut req = vec![0u8; len];
    let put = |req: &mut [u8], at: usize, b: &[u8]| req[at..at + b.len()].copy_from_slice(b);
    put(
        &mut req,
        offset_of!(libc::nlmsghdr, nlmsg_len),
        &(len as u32).to_ne_bytes(),
    );
    put(
        &mut req,
        offset_of!(libc::nlmsghdr, nlmsg_type),
        &kind.to_ne_bytes(),
    );
    let flags = (libc::NLM_F_REQUEST | libc::NLM_F_DUMP) as u16;
    put(
        &mut req,
        offset_of!(libc::nlmsghdr, nlmsg_flags),
        &flags.to_ne_bytes(),
    );
    put(
        &mut req,
        offset_of!(libc::nlmsghdr, nlmsg_seq),
        &seq.to_ne_bytes(),
    );
    put(&mut req, NLMSG_HDRLEN, header);
    req
}

fn last_error(what: &'static str) -> NetlinkError {
    NetlinkError::Io {
        what,
        source: io::Error::last_os_error(),
    }
}

/// Sends a dump request of type `kind` with family header `header` on a
/// fresh `NETLINK_ROUTE` socket and hands every reply message of type
/// `reply` to `visit`, until it finds something or the dump ends.
fn dump<T>(
    kind: u16,
    header: &[u8],
    reply: u16,
    mut visit: impl FnMut(&[u8]) -> Result<Option<T>, NetlinkError>,
) -> Result<Option<T>, NetlinkError> {
    // SAFETY: plain socket(2) call; the result is checked before use.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            libc::NETLINK_ROUTE,
        )
    };
    if fd < 0 {
        return Err(last_error("socket"));
    }
    // SAFETY: `fd` is a new descriptor nothing else owns.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    // A kernel that never answers must not hang the caller.
    let tv = libc::timeval {
        tv_sec: 2,
        tv_usec: 0,
    };
    // SAFETY: `tv` is a valid timeval for the duration of the call and the
    // length passed is its size.
    let r = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            (&tv as *const libc::timeval).cast(),
            size_of::<libc::timeval>() as libc::socklen_t,
        )
    };
    if r < 0 {
        return Err(last_error("setsockopt(SO_RCVTIMEO)"));
    }

    let seq = 1;
    let req = dump_request(kind, seq, header);
    // SAFETY: sockaddr_nl is plain data; all-zero is a valid value.
    let mut kernel: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    kernel.nl_family = libc::AF_NETLINK as libc::sa_family_t;
    loop {
        // SAFETY: `req` and `kernel` are valid for reads of the lengths
        // passed for the duration of the call.
        let n = unsafe {
            libc::sendto(
                sock.as_raw_fd(),
                req.as_ptr().cast(),
                req.len(),
                0,
                (&kernel as *const libc::sockaddr_nl).cast(),
                size_of::<libc::sockaddr_nl>() as libc::socklen_t,
            )
        };
        if n >= 0 {
            break;
        }
        if io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            return Err(last_error("sendto"));
        }
    }

    let mut buf = vec![0u8; 64 * 1024];
    loop {
        // MSG_TRUNC: the return value is the datagram's full length, so a
        // datagram larger than `buf` is seen, not silently cut.
        // SAFETY: `buf` is valid for writes of `buf.len()` bytes.
        let n = unsafe {
            libc::recv(
                sock.as_raw_fd(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                libc::MSG_TRUNC,
            )
        };
        if n < 0 {
            if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(last_error("recv"));
        }
        let n = n as usize;
        if n > buf.len() {
            return Err(NetlinkError::Malformed("datagram larger than the buffer"));
        }
        match walk_datagram(&buf[..n], seq, reply, &mut visit)? {
            Dump::More if n == 0 => {
                return Err(NetlinkError::Malformed("empty datagram before NLMSG_DONE"))
            }
            Dump::More => {}
            Dump::Done => return Ok(None),
            Dump::Found(t) => return Ok(Some(t)),
        }
    }
}

/// The resolved Ethernet address of `addr` on interface `ifindex` in the
/// kernel's neighbour table (`ip neigh show to ADDR dev IF`), if any.
pub fn neighbour_mac(ifindex: u32, addr: IpAddr) -> Result<Option<[u8; 6]>, NetlinkError> {
    let family = if addr.is_ipv6() {
        libc::AF_INET6
    } else {
        libc::AF_INET
    };
    let mut ndm = [0u8; NDMSG_LEN];
    ndm[NDM_FAMILY] = family as u8;
    dump(libc::RTM_GETNEIGH, &ndm, libc::RTM_NEWNEIGH, |p| {
        Ok(parse_neighbour(p)?.mac_of(ifindex, addr))
    })
}

/// The Ethernet address of interface `ifindex` (`link/ether` of `ip link`);
/// None if it has none (not an Ethernet link).
pub fn link_mac(ifindex: u32) -> Result<Option<[u8; 6]>, NetlinkError> {
    let ifi = [0u8; IFINFOMSG_LEN];
    dump(libc::RTM_GETLINK, &ifi, libc::RTM_NEWLINK, |p| {
        Ok(parse_link(p)?.ether_of(ifindex))
    })
}

/// The first global-scope address of the family asked for on interface
/// `ifindex`, in the kernel's order (`ip -4|-6 addr show dev IF scope
/// global`).
pub fn global_address(ifindex: u32, ipv6: bool) -> Result<Option<IpAddr>, NetlinkError> {
    let mut ifa = [0u8; IFADDRMSG_LEN];
    ifa[offset_of!(libc::ifaddrmsg, ifa_family)] =
        if ipv6 { libc::AF_INET6 } else { libc::AF_INET } as u8;
    dump(libc::RTM_GETADDR, &ifa, libc::RTM_NEWADDR, |p| {
        Ok(parse_address(p)?.global_on(ifindex, ipv6))
    })
}

/// Counts the SIGCHLD signals this process receives (tests only): proof
/// that a code path spawns no child process.
#[cfg(test)]
pub(crate) mod sigchld {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Once;

    static COUNT: AtomicUsize = AtomicUsize::new(0);

    extern "C" fn on_sigchld(_: libc::c_int) {
        COUNT.fetch_add(1, Ordering::SeqCst);
    }

    /// Installs the counting handler (once) and returns the count so far.
    pub(crate) fn count() -> usize {
        static INSTALL: Once = Once::new();
        INSTALL.call_once(|| {
            // SAFETY: sigaction is plain data; all-zero is a valid value
            // (empty mask, no flags) before the fields set below.
            let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
            sa.sa_sigaction = on_sigchld as extern "C" fn(libc::c_int) as usize;
            sa.sa_flags = libc::SA_RESTART;
            // SAFETY: the handler only touches an atomic
            // (async-signal-safe); `sa` is valid for the call.
            let r = unsafe { libc::sigaction(libc::SIGCHLD, &sa, std::ptr::null_mut()) };
            assert_eq!(r, 0, "sigaction: {}", std::io::Error::last_os_error());
        });
        COUNT.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
#[path = "netlink/tests.rs"]
mod tests;
