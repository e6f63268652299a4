//! Descriptors over a Unix socket (`SCM_RIGHTS`) and the peer's
//! credentials (`SO_PEERCRED`): how the shared engine's service hands an
//! attached process its frame rings and learns who the process is.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::net::UnixStream;

/// Who is at the other end of a Unix socket, as the kernel saw it connect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerCredentials {
    pub pid: u32,
    pub uid: u32,
    pub gid: u32,
}

/// `SO_PEERCRED` of `sock`.
pub fn peer_credentials(sock: &UnixStream) -> io::Result<PeerCredentials> {
    // SAFETY: ucred is plain integers, valid all zero.
    let mut c: libc::ucred = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `c` is writable for `len` bytes; the kernel writes at most that.
    let r = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut c as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(PeerCredentials {
        pid: c.pid as u32,
        uid: c.uid,
        gid: c.gid,
    })
}

/// Sends `msg` with one descriptor attached.
pub fn send_with_fd(sock: &UnixStream, msg: &[u8], fd: BorrowedFd<'_>) -> io::Result<()> {
    let mut iov = libc::iovec {
        iov_base: msg.as_ptr() as *mut libc::c_void,
        iov_len: msg.len(),
    };
    // Room for one cmsghdr with one int, aligned as cmsghdr.
    let mut control = [0u64; 4];
    // SAFETY: CMSG_SPACE is a pure size computation.
    let space = unsafe { libc::CMSG_SPACE(std::mem::size_of::<libc::c_int>() as u32) } as usize;
    debug_assert!(space <= std::mem::size_of_val(&control));
    // SAFETY: a zeroed msghdr is valid; its pointers are set below to live
    // buffers (`iov`, `control`) that outlive the sendmsg call.
    let mut mh: libc::msghdr = unsafe { std::mem::zeroed() };
    mh.msg_iov = &mut iov;
    mh.msg_iovlen = 1;
    mh.msg_control = control.as_mut_ptr().cast();
    mh.msg_controllen = space as _;
    // SAFETY: `mh` has a control buffer of `space` bytes, so CMSG_FIRSTHDR
    // is non-null and its data has room for one c_int.
    unsafe {
        let c = libc::CMSG_FIRSTHDR(&mh);
        (*c).cmsg_level = libc::SOL_SOCKET;
        (*c).cmsg_type = libc::SCM_RIGHTS;
        (*c).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<libc::c_int>() as u32) as _;
        (libc::CMSG_DATA(c) as *mut libc::c_int).write_unaligned(fd.as_raw_fd());
    }
    // SAFETY: `mh` is fully initialised as above.
    let n = unsafe { libc::sendmsg(sock.as_raw_fd(), &mh, libc::MSG_NOSIGNAL) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    if n as usize != msg.len() {
        return Err(io::Error::new(io::ErrorKind::WriteZero, "short sendmsg"));
    }
    Ok(())
}

/// Receives one message into `buf` and the descriptor attached to it, if
/// any (close-on-exec). Any further descriptors are closed.
pub fn recv_with_fd(sock: &UnixStream, buf: &mut [u8]) -> io::Result<(usize, Option<OwnedFd>)> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let mut control = [0u64; 16];
    // SAFETY: a zeroed msghdr is valid; its pointers are set to live
    // buffers that outlive the recvmsg call.
    let mut mh: libc::msghdr = unsafe { std::mem::zeroed() };
    mh.msg_iov = &mut iov;
    mh.msg_iovlen = 1;
    mh.msg_control = control.as_mut_ptr().cast();
    mh.msg_controllen = std::mem::size_of_val(&control) as _;
    // SAFETY: `mh` describes writable buffers of the stated sizes.
    let n = unsafe { libc::recvmsg(sock.as_raw_fd(), &mut mh, libc::MSG_CMSG_CLOEXEC) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut first = None;
    // SAFETY: walking the control messages the kernel wrote into
    // `control`, with the CMSG macros that bound each by msg_controllen;
    // each SCM_RIGHTS descriptor is a fresh one the kernel installed for
    // us, so wrapping it in an OwnedFd (closed if not kept) is sound.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&mh);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(c) as *const libc::c_int;
                let count = ((*c).cmsg_len as usize - libc::CMSG_LEN(0) as usize)
                    / std::mem::size_of::<libc::c_int>();
                for k in 0..count {
                    let fd = OwnedFd::from_raw_fd(data.add(k).read_unaligned());
                    if first.is_none() {
                        first = Some(fd);
                    }
                }
            }
            c = libc::CMSG_NXTHDR(&mh, c);
        }
    }
    Ok((n as usize, first))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::fd::AsFd;

    #[test]
    fn a_descriptor_crosses_with_its_message() {
        let (a, b) = UnixStream::pair().unwrap();
        let (mut r, w) = UnixStream::pair().unwrap();
        send_with_fd(&a, b"rings", w.as_fd()).unwrap();
        let mut buf = [0u8; 16];
        let (n, fd) = recv_with_fd(&b, &mut buf).unwrap();
        assert_eq!(&buf[..n], b"rings");
        let mut w2 = UnixStream::from(fd.expect("a descriptor"));
        w2.write_all(b"x").unwrap();
        drop(w);
        drop(w2);
        let mut got = Vec::new();
        r.read_to_end(&mut got).unwrap();
        assert_eq!(got, b"x");
        let me = peer_credentials(&a).unwrap();
        assert_eq!(me.pid, std::process::id());
    }
}
