//! Waking an engine thread that sleeps in poll(2) on its AF_XDP socket:
//! an eventfd polled together with the socket.

use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

/// An eventfd other threads write to wake a sleeping engine thread.
#[derive(Debug)]
pub struct Waker {
    fd: OwnedFd,
}

impl Waker {
    /// A new non-blocking eventfd.
    pub fn new() -> io::Result<Waker> {
        // SAFETY: plain syscall with constant flags.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a fresh descriptor nothing else owns.
        Ok(Waker {
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }

    /// Wakes the sleeper (idempotent until it drains).
    pub fn wake(&self) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a valid u64 to our eventfd.
        unsafe { libc::write(self.fd.as_raw_fd(), (&one as *const u64).cast(), 8) };
    }

    /// Clears pending wake-ups.
    pub fn drain(&self) {
        let mut v: u64 = 0;
        // SAFETY: reads at most 8 bytes into a valid u64; non-blocking.
        unsafe { libc::read(self.fd.as_raw_fd(), (&mut v as *mut u64).cast(), 8) };
    }

    /// Sleeps until this waker is woken or `timeout` passes.
    pub fn wait(&self, timeout: Duration) -> io::Result<()> {
        if super::sys::wait_readable(self.fd.as_fd(), timeout)? {
            self.drain();
        }
        Ok(())
    }

    /// Sleeps until `other` is readable, this waker is woken, or `timeout`
    /// passes (microsecond resolution).
    pub fn wait_with(&self, other: impl AsFd, timeout: Duration) -> io::Result<()> {
        let woken = super::sys::wait_readable_any(&[other.as_fd(), self.fd.as_fd()], timeout)?;
        if woken & 0b10 != 0 {
            self.drain();
        }
        Ok(())
    }
}
