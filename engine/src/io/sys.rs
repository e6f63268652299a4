//! Thin wrappers over the Linux system calls the AF_XDP datapath uses.
//! Every `unsafe` block states why the call is sound; the wrappers return
//! `io::Result` and own what they create (fds as [`OwnedFd`], mappings as
//! [`Mapping`]).

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;
use std::time::Duration;

fn cvt(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// A shared or anonymous memory mapping, unmapped on drop.
#[derive(Debug)]
pub struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: a Mapping is a plain owned address range; moving it to another
// thread moves ownership of the range (no thread-local state).
unsafe impl Send for Mapping {}
// SAFETY: `&Mapping` only exposes the base pointer and length; every access
// through them is done by callers that uphold their own aliasing rules
// (rings use atomics, UMEM frames are handed out by ownership).
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Maps `len` bytes of anonymous, zeroed, private memory (prefaulted).
    pub fn anonymous(len: usize, huge_pages: bool) -> io::Result<Mapping> {
        let mut flags = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE;
        if huge_pages {
            flags |= libc::MAP_HUGETLB;
        }
        // SAFETY: a fresh anonymous mapping at an address the kernel picks
        // cannot alias any existing Rust object.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                flags,
                -1,
                0,
            )
        };
        Self::from_mmap(p, len)
    }

    /// Maps `len` bytes of anonymous memory shared with child processes.
    pub fn anonymous_shared(len: usize) -> io::Result<Mapping> {
        let flags = libc::MAP_SHARED | libc::MAP_ANONYMOUS | libc::MAP_POPULATE;
        // SAFETY: as in `anonymous`.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                flags,
                -1,
                0,
            )
        };
        Self::from_mmap(p, len)
    }

    /// Maps `len` bytes of the socket `fd` at page offset `offset` (an
    /// AF_XDP ring).
    pub fn socket_ring(fd: BorrowedFd<'_>, len: usize, offset: u64) -> io::Result<Mapping> {
        // SAFETY: mapping a ring of our own socket at a kernel-chosen
        // address; the kernel validates offset and length.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd.as_raw_fd(),
                offset as libc::off_t,
            )
        };
        Self::from_mmap(p, len)
    }

    fn from_mmap(p: *mut libc::c_void, len: usize) -> io::Result<Mapping> {
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ptr =
            NonNull::new(p.cast::<u8>()).ok_or_else(|| io::Error::other("mmap returned NULL"))?;
        Ok(Mapping { ptr, len })
    }

    /// Base address.
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the mapping is empty (never, in practice).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: we own the range [ptr, ptr+len) since `from_mmap`.
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast(), self.len);
        }
    }
}

/// `socket(AF_XDP, SOCK_RAW | SOCK_CLOEXEC, 0)`.
pub fn xdp_socket() -> io::Result<OwnedFd> {
    // SAFETY: plain syscall with constant arguments.
    let fd = cvt(unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) })?;
    // SAFETY: `fd` is a fresh descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Marker for plain-old-data option structs passed by pointer to the kernel.
///
/// # Safety
/// Implementors must be `repr(C)` structs of integers (any bit pattern valid).
pub unsafe trait SockOpt: Copy {}
// SAFETY: all are repr(C) structs of integers from linux/if_xdp.h.
unsafe impl SockOpt for libc::xdp_umem_reg {}
// SAFETY: as above.
unsafe impl SockOpt for libc::xdp_mmap_offsets {}
// SAFETY: as above.
unsafe impl SockOpt for libc::xdp_statistics {}
// SAFETY: as above.
unsafe impl SockOpt for libc::xdp_options {}
// SAFETY: an integer.
unsafe impl SockOpt for u32 {}

/// `setsockopt(fd, SOL_XDP, opt, value)`.
pub fn set_xdp_opt<T: SockOpt>(fd: BorrowedFd<'_>, opt: libc::c_int, value: &T) -> io::Result<()> {
    // SAFETY: `value` points to size_of::<T>() readable bytes (SockOpt).
    cvt(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_XDP,
            opt,
            (value as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    })?;
    Ok(())
}

/// `getsockopt(fd, SOL_XDP, opt)`; returns the value and the length the
/// kernel wrote.
pub fn get_xdp_opt<T: SockOpt>(fd: BorrowedFd<'_>, opt: libc::c_int) -> io::Result<(T, usize)> {
    // SAFETY: SockOpt types are valid for the all-zero bit pattern.
    let mut value: T = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<T>() as libc::socklen_t;
    // SAFETY: `value` is writable for `len` bytes; the kernel writes at most `len`.
    cvt(unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_XDP,
            opt,
            (&mut value as *mut T).cast(),
            &mut len,
        )
    })?;
    Ok((value, len as usize))
}

/// `bind(fd, sockaddr_xdp{..})`.
pub fn bind_xdp(fd: BorrowedFd<'_>, ifindex: u32, queue: u32, flags: u16) -> io::Result<()> {
    let addr = libc::sockaddr_xdp {
        sxdp_family: libc::AF_XDP as u16,
        sxdp_flags: flags,
        sxdp_ifindex: ifindex,
        sxdp_queue_id: queue,
        sxdp_shared_umem_fd: 0,
    };
    // SAFETY: `addr` is a valid sockaddr_xdp of the length passed.
    cvt(unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&addr as *const libc::sockaddr_xdp).cast(),
            std::mem::size_of::<libc::sockaddr_xdp>() as libc::socklen_t,
        )
    })?;
    Ok(())
}

/// Kicks the kernel to process the TX ring (`sendto(fd, NULL, 0, MSG_DONTWAIT)`).
/// Transient errors (EAGAIN, EBUSY, ENOBUFS, ENETDOWN) are not errors here:
/// the caller retries on its next pass.
pub fn kick_tx(fd: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: a zero-length send with no buffer and no address.
    let r = unsafe {
        libc::sendto(
            fd.as_raw_fd(),
            std::ptr::null(),
            0,
            libc::MSG_DONTWAIT,
            std::ptr::null(),
            0,
        )
    };
    if r < 0 {
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EAGAIN) | Some(libc::EBUSY) | Some(libc::ENOBUFS) | Some(libc::ENETDOWN) => {
                Ok(())
            }
            _ => Err(e),
        }
    } else {
        Ok(())
    }
}

/// Kicks the kernel to refill RX from the fill ring (`recvfrom(fd, NULL, 0, MSG_DONTWAIT)`).
pub fn kick_rx(fd: BorrowedFd<'_>) {
    // SAFETY: a zero-length receive with no buffer and no address.
    unsafe {
        libc::recvfrom(
            fd.as_raw_fd(),
            std::ptr::null_mut(),
            0,
            libc::MSG_DONTWAIT,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        );
    }
}

/// Waits until `fd` is readable or `timeout` passes (`ppoll`, microsecond
/// resolution). Returns whether it became readable.
pub fn wait_readable(fd: BorrowedFd<'_>, timeout: Duration) -> io::Result<bool> {
    Ok(wait_readable_any(&[fd], timeout)? != 0)
}

/// The most descriptors [`wait_readable_any`] waits on.
pub const MAX_WAIT_FDS: usize = 4;

/// Waits until one of `fds` (at most [`MAX_WAIT_FDS`]) is readable (or
/// hung up) or `timeout` passes (`ppoll`, microsecond resolution; a signal
/// ends the wait early as a timeout does). Returns a mask: bit `i` set when
/// `fds[i]` is readable; 0 on a timeout.
pub fn wait_readable_any(fds: &[BorrowedFd<'_>], timeout: Duration) -> io::Result<u32> {
    if fds.len() > MAX_WAIT_FDS {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "wait_readable_any: too many descriptors",
        ));
    }
    let mut pfds = [libc::pollfd {
        fd: -1,
        events: libc::POLLIN,
        revents: 0,
    }; MAX_WAIT_FDS];
    for (p, fd) in pfds.iter_mut().zip(fds) {
        p.fd = fd.as_raw_fd();
    }
    ppoll(&mut pfds[..fds.len()], timeout)?;
    Ok(pfds[..fds.len()]
        .iter()
        .enumerate()
        .filter(|(_, p)| p.revents != 0)
        .fold(0, |m, (i, _)| m | 1 << i))
}

/// An integer socket option (`getsockopt` of `level`, `name`).
pub fn int_sockopt(
    fd: BorrowedFd<'_>,
    level: libc::c_int,
    name: libc::c_int,
) -> io::Result<libc::c_int> {
    let mut v: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into the live `v`.
    cvt(unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (&mut v as *mut libc::c_int).cast(),
            &mut len,
        )
    })?;
    Ok(v)
}

/// Interface index of `name` in the calling thread's network namespace.
pub fn if_index(name: &str) -> io::Result<u32> {
    let c = CString::new(name)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "interface name contains NUL"))?;
    // SAFETY: `c` is a valid NUL-terminated string.
    let idx = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if idx == 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(idx)
    }
}

/// MTU of interface `name` in the calling thread's network namespace
/// (`ioctl(SIOCGIFMTU)` on a throw-away UDP socket, which needs no
/// privilege).
pub fn if_mtu(name: &str) -> io::Result<u32> {
    let bytes = name.as_bytes();
    if bytes.is_empty() || bytes.len() >= libc::IFNAMSIZ || bytes.contains(&0) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not an interface name",
        ));
    }
    // SAFETY: plain syscall with constant arguments.
    let fd = cvt(unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) })?;
    // SAFETY: `fd` is a fresh descriptor that nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: `ifreq` is a repr(C) struct of integers and a union of
    // integers / sockaddrs / pointers: the all-zero pattern is valid.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    // The name is shorter than IFNAMSIZ (checked above): the zeroed tail
    // terminates it.
    for (d, s) in req.ifr_name.iter_mut().zip(bytes) {
        *d = *s as libc::c_char;
    }
    // SAFETY: SIOCGIFMTU reads `ifr_name` and writes `ifr_mtu` of the
    // ifreq that the third argument points to, which lives until the call
    // returns.
    cvt(unsafe { libc::ioctl(fd.as_raw_fd(), libc::SIOCGIFMTU as _, &mut req) })?;
    // SAFETY: the successful SIOCGIFMTU wrote the union's `ifru_mtu`
    // member (an integer: any bit pattern is valid anyway).
    let mtu = unsafe { req.ifr_ifru.ifru_mtu };
    u32::try_from(mtu).map_err(|_| io::Error::other(format!("negative MTU {mtu}")))
}

/// Moves the calling thread into the network namespace `fd` refers to
/// (e.g. an open `/var/run/netns/NAME`). Sockets created afterwards by
/// this thread live in that namespace.
pub fn set_thread_netns(fd: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: setns on a valid descriptor; with CLONE_NEWNET it changes only
    // the calling thread's network namespace.
    cvt(unsafe { libc::setns(fd.as_raw_fd(), libc::CLONE_NEWNET) })?;
    Ok(())
}

/// Waits until one of `fds` (any number) is readable (or hung up) or
/// `timeout` passes, as [`wait_readable_any`] does. Returns how many are
/// ready. For a loop that sleeps on many descriptors at once (the shared
/// engine's service); allocates.
pub fn wait_readable_many(fds: &[BorrowedFd<'_>], timeout: Duration) -> io::Result<usize> {
    let mut pfds: Vec<libc::pollfd> = fds
        .iter()
        .map(|fd| libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    ppoll(&mut pfds, timeout)
}

/// `ppoll` on `pfds` (readable or hung up) for at most `timeout`
/// (microsecond resolution; a signal ends the wait early as a timeout
/// does: 0). Returns how many are ready.
fn ppoll(pfds: &mut [libc::pollfd], timeout: Duration) -> io::Result<usize> {
    let ts = libc::timespec {
        tv_sec: timeout.as_secs().min(i64::MAX as u64) as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: `pfds.len()` valid pollfds, a valid timespec, no signal mask.
    let r = unsafe {
        libc::ppoll(
            pfds.as_mut_ptr(),
            pfds.len() as libc::nfds_t,
            &ts,
            std::ptr::null(),
        )
    };
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EINTR) {
            return Ok(0);
        }
        return Err(e);
    }
    Ok(r as usize)
}
