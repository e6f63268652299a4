//! The system calls of completion channels and async events: an eventfd
//! in semaphore mode (one `read` per event), pollable by the program.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// An eventfd counting pending events.
#[derive(Debug)]
pub struct EventFd(OwnedFd);

impl EventFd {
    pub fn new() -> io::Result<EventFd> {
        // SAFETY: plain system call; the result is checked.
        let fd = unsafe { libc::eventfd(0, libc::EFD_SEMAPHORE | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a fresh descriptor we own.
        Ok(EventFd(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    pub fn raw(&self) -> RawFd {
        self.0.as_raw_fd()
    }

    /// Adds one event.
    pub fn signal(&self) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a live u64 to our descriptor.
        unsafe { libc::write(self.raw(), (&one as *const u64).cast(), 8) };
    }

    /// Takes one event, blocking unless the program made the fd
    /// non-blocking (then `WouldBlock`). A signal whose handler was
    /// installed without `SA_RESTART` ends the wait with `Interrupted`
    /// (EINTR), as `read(2)` on rdma-core's channel and async file does:
    /// qperf's latency tests leave their loop that way when their timer
    /// fires while they wait for a completion that will not come.
    pub fn read(&self) -> io::Result<()> {
        let mut v: u64 = 0;
        // SAFETY: reads 8 bytes into a live u64 from our descriptor.
        let n = unsafe { libc::read(self.raw(), (&mut v as *mut u64).cast(), 8) };
        if n == 8 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }
}
