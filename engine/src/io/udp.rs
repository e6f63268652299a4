//! Batched UDP system calls on a kernel socket: `sendmmsg(2)` of up to
//! [`MAX_BATCH`] datagrams from borrowed slices, `recvmmsg(2)` into
//! caller-owned buffers, and socket buffers forced above the system's
//! limits. The kernel-path baseline of the benchmark harness moves its
//! datagrams with these, so the baseline pays one system call per batch,
//! as the engine's AF_XDP path pays one kick per batch.

use std::io;
use std::net::UdpSocket;
use std::os::fd::AsRawFd;

/// Most datagrams one [`send_batch`] or [`recv_batch`] passes to the kernel.
pub const MAX_BATCH: usize = 64;

const EMPTY_IOVEC: libc::iovec = libc::iovec {
    iov_base: std::ptr::null_mut(),
    iov_len: 0,
};

/// An all-zero `mmsghdr` array: no name, no control data, no iovecs yet.
fn zeroed_headers() -> [libc::mmsghdr; MAX_BATCH] {
    // SAFETY: an all-zero mmsghdr is a valid value (null pointers, zero
    // lengths).
    unsafe { std::mem::zeroed() }
}

/// One `sendmmsg` on the connected `socket`: one datagram per payload, the
/// first [`MAX_BATCH`] of `payloads` at most. Returns how many datagrams the
/// kernel took; a full socket buffer (`ENOBUFS`, `EAGAIN`) is back-pressure,
/// not failure, and takes none (`Ok(0)`).
pub fn send_batch<'a>(
    socket: &UdpSocket,
    payloads: impl IntoIterator<Item = &'a [u8]>,
) -> io::Result<usize> {
    let mut iovs = [EMPTY_IOVEC; MAX_BATCH];
    let mut msgs = zeroed_headers();
    let mut batch = 0;
    for ((msg, iov), payload) in msgs.iter_mut().zip(iovs.iter_mut()).zip(payloads) {
        *iov = libc::iovec {
            iov_base: payload.as_ptr() as *mut libc::c_void,
            iov_len: payload.len(),
        };
        msg.msg_hdr.msg_iov = iov;
        msg.msg_hdr.msg_iovlen = 1;
        batch += 1;
    }
    // SAFETY: `msgs[..batch]` point at `iovs`, which point at the borrowed
    // payloads; all outlive the call, and the kernel only reads the
    // iovecs' memory.
    let sent = unsafe { libc::sendmmsg(socket.as_raw_fd(), msgs.as_mut_ptr(), batch as u32, 0) };
    if sent < 0 {
        let err = io::Error::last_os_error();
        if matches!(err.raw_os_error(), Some(libc::ENOBUFS) | Some(libc::EAGAIN)) {
            return Ok(0);
        }
        return Err(err);
    }
    Ok(sent as usize)
}

/// What one [`recv_batch`] received.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Received {
    /// Datagrams received: `bufs[..datagrams]` hold them.
    pub datagrams: usize,
    /// Their payload bytes, summed.
    pub bytes: usize,
}

/// One `recvmmsg(MSG_WAITFORONE)` into the first [`MAX_BATCH`] of `bufs`,
/// one datagram per buffer (truncated to the buffer). The first datagram
/// waits up to the socket's read timeout (`SO_RCVTIMEO`), which then is an
/// error of kind `WouldBlock`; later ones do not wait.
pub fn recv_batch<B: AsMut<[u8]>>(socket: &UdpSocket, bufs: &mut [B]) -> io::Result<Received> {
    let mut iovs = [EMPTY_IOVEC; MAX_BATCH];
    let mut msgs = zeroed_headers();
    let mut count = 0;
    for ((msg, iov), buf) in msgs.iter_mut().zip(iovs.iter_mut()).zip(bufs.iter_mut()) {
        let buf = buf.as_mut();
        *iov = libc::iovec {
            iov_base: buf.as_mut_ptr() as *mut libc::c_void,
            iov_len: buf.len(),
        };
        msg.msg_hdr.msg_iov = iov;
        msg.msg_hdr.msg_iovlen = 1;
        count += 1;
    }
    // SAFETY: each iovec points at a distinct, live, writable buffer of the
    // stated length (borrowed mutably for the call); the kernel writes at
    // most that much and fills msg_len.
    let got = unsafe {
        libc::recvmmsg(
            socket.as_raw_fd(),
            msgs.as_mut_ptr(),
            count as u32,
            libc::MSG_WAITFORONE,
            std::ptr::null_mut(),
        )
    };
    if got < 0 {
        return Err(io::Error::last_os_error());
    }
    let datagrams = got as usize;
    let bytes = msgs[..datagrams].iter().map(|m| m.msg_len as usize).sum();
    Ok(Received { datagrams, bytes })
}

/// Sets the socket's send and receive buffers to `bytes` each, above
/// `net.core.{r,w}mem_max` (`SO_SNDBUFFORCE`, `SO_RCVBUFFORCE`; needs
/// CAP_NET_ADMIN).
pub fn force_buffer_sizes(socket: &UdpSocket, bytes: usize) -> io::Result<()> {
    let v = bytes.min(i32::MAX as usize) as libc::c_int;
    for opt in [libc::SO_SNDBUFFORCE, libc::SO_RCVBUFFORCE] {
        // SAFETY: setsockopt reads one c_int from a live local.
        let r = unsafe {
            libc::setsockopt(
                socket.as_raw_fd(),
                libc::SOL_SOCKET,
                opt,
                (&v as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn connected_pair() -> (UdpSocket, UdpSocket) {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.connect(rx.local_addr().unwrap()).unwrap();
        rx.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        (tx, rx)
    }

    #[test]
    fn a_batch_arrives_datagram_by_datagram() {
        let (tx, rx) = connected_pair();
        let data: Vec<u8> = (0..=255).collect();
        let payloads = [&data[..10], &data[10..110], &data[110..111]];
        assert_eq!(send_batch(&tx, payloads).unwrap(), 3);
        let mut buf = [vec![0u8; 200]];
        for p in payloads {
            // One buffer: one datagram per call.
            let r = recv_batch(&rx, &mut buf).unwrap();
            assert_eq!(r.datagrams, 1);
            assert_eq!(&buf[0][..r.bytes], p);
        }
    }

    #[test]
    fn one_receive_takes_what_is_queued_and_sums_the_bytes() {
        let (tx, rx) = connected_pair();
        let data = [7u8; 64];
        let payloads = std::iter::repeat_n(&data[..], 5);
        assert_eq!(send_batch(&tx, payloads).unwrap(), 5);
        let mut bufs = vec![[0u8; 64]; MAX_BATCH];
        let mut total = Received::default();
        while total.datagrams < 5 {
            let r = recv_batch(&rx, &mut bufs).unwrap();
            assert!(r.datagrams >= 1 && bufs[..r.datagrams].iter().all(|b| *b == data));
            total.datagrams += r.datagrams;
            total.bytes += r.bytes;
        }
        assert_eq!(
            total,
            Received {
                datagrams: 5,
                bytes: 320
            }
        );
    }

    #[test]
    fn at_most_one_batch_is_sent_and_an_empty_batch_sends_nothing() {
        let (tx, rx) = connected_pair();
        assert_eq!(send_batch(&tx, std::iter::empty()).unwrap(), 0);
        let one = [1u8];
        let many = std::iter::repeat_n(&one[..], MAX_BATCH + 10);
        assert_eq!(send_batch(&tx, many).unwrap(), MAX_BATCH);
        // Forcing the buffers needs CAP_NET_ADMIN: done, or refused as such.
        if let Err(e) = force_buffer_sizes(&rx, 1 << 20) {
            assert_eq!(e.kind(), std::io::ErrorKind::PermissionDenied, "{e}");
        }
    }
}
