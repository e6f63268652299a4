//! [`QueuePort`]: what one queue's engine exchanges frames through: its
//! own AF_XDP socket, or the frame rings of the shared engine's service it
//! is attached to (`crate::attach`). The I/O steps see a
//! [`FramePort`]; the rest (sleeping, statistics) is here.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::time::Duration;

use crate::attach::AttachedPort;
use crate::io::{FramePort, InPlace, Lookahead, Rx, XskCounters, XskSocket, XskStatistics};

/// One queue's carrier of frames (see the module documentation).
// The socket is larger than the attachment; one lives per queue, is never
// moved on the hot path, and boxing it would add a pointer hop to every
// ring access of the default (in-process) mode.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum QueuePort {
    /// The queue's own AF_XDP socket (the engine owns the interface queue).
    Xsk(XskSocket),
    /// Frame rings to the service that owns the interface's queues.
    Attached(AttachedPort),
}

impl QueuePort {
    /// Sleeps until frames may have arrived or `timeout` passes.
    pub fn wait(&mut self, timeout: Duration) -> io::Result<bool> {
        match self {
            QueuePort::Xsk(s) => s.wait(timeout),
            QueuePort::Attached(p) => p.wait(timeout),
        }
    }

    /// Frames handed for transmission that the kernel has not taken yet
    /// (always 0 attached: the service takes them when it wakes).
    pub fn tx_unconsumed(&mut self) -> u32 {
        match self {
            QueuePort::Xsk(s) => s.tx_unconsumed(),
            QueuePort::Attached(_) => 0,
        }
    }

    /// The port's frame counters.
    pub fn counters(&self) -> XskCounters {
        match self {
            QueuePort::Xsk(s) => s.counters(),
            QueuePort::Attached(p) => p.counters(),
        }
    }

    /// The kernel's statistics of the socket (None attached).
    pub fn statistics(&self) -> Option<XskStatistics> {
        match self {
            QueuePort::Xsk(s) => s.statistics().ok(),
            QueuePort::Attached(_) => None,
        }
    }

    /// Whether the socket is bound zero-copy (false attached).
    pub fn is_zero_copy(&self) -> bool {
        match self {
            QueuePort::Xsk(s) => s.is_zero_copy(),
            QueuePort::Attached(_) => false,
        }
    }

    /// The attachment, if this is one.
    pub fn attached(&self) -> Option<&AttachedPort> {
        match self {
            QueuePort::Xsk(_) => None,
            QueuePort::Attached(p) => Some(p),
        }
    }

    /// The attachment, if this is one.
    pub fn attached_mut(&mut self) -> Option<&mut AttachedPort> {
        match self {
            QueuePort::Xsk(_) => None,
            QueuePort::Attached(p) => Some(p),
        }
    }

    /// The descriptor to poll(2) for arriving frames.
    pub fn raw_fd(&self) -> RawFd {
        match self {
            QueuePort::Xsk(s) => s.as_raw_fd(),
            QueuePort::Attached(p) => p.fd(),
        }
    }
}

impl FramePort for QueuePort {
    #[inline]
    fn recv_ahead<F: FnMut(Rx<'_>)>(&mut self, max: usize, ahead: Lookahead, f: F) -> usize {
        match self {
            QueuePort::Xsk(s) => s.recv_ahead(max, ahead, f),
            QueuePort::Attached(p) => p.recv_ahead(max, ahead, f),
        }
    }
    #[inline]
    fn complete(&mut self) -> u32 {
        match self {
            QueuePort::Xsk(s) => s.complete(),
            QueuePort::Attached(p) => p.complete(),
        }
    }
    #[inline]
    fn tx_room(&mut self) -> usize {
        match self {
            QueuePort::Xsk(s) => s.tx_room(),
            QueuePort::Attached(p) => p.tx_room(),
        }
    }
    #[inline]
    fn send_in_place<F: FnOnce(&mut [u8]) -> Option<usize>>(
        &mut self,
        room: usize,
        f: F,
    ) -> InPlace {
        match self {
            QueuePort::Xsk(s) => s.send_in_place(room, f),
            QueuePort::Attached(p) => p.send_in_place(room, f),
        }
    }
    #[inline]
    fn send(&mut self, packet: &[u8]) -> bool {
        match self {
            QueuePort::Xsk(s) => s.send(packet),
            QueuePort::Attached(p) => p.send(packet),
        }
    }
    #[inline]
    fn flush(&mut self) -> io::Result<()> {
        match self {
            QueuePort::Xsk(s) => s.flush(),
            QueuePort::Attached(p) => p.flush(),
        }
    }
    #[inline]
    fn tx_in_flight(&self) -> u32 {
        match self {
            QueuePort::Xsk(s) => s.tx_in_flight(),
            QueuePort::Attached(p) => p.tx_in_flight(),
        }
    }
    #[inline]
    fn max_packet(&self) -> usize {
        match self {
            QueuePort::Xsk(s) => s.max_packet(),
            QueuePort::Attached(p) => p.max_packet(),
        }
    }
    #[inline]
    fn frame_size(&self) -> u32 {
        match self {
            QueuePort::Xsk(s) => s.frame_size(),
            QueuePort::Attached(p) => p.frame_size(),
        }
    }
}

impl AsFd for QueuePort {
    fn as_fd(&self) -> BorrowedFd<'_> {
        match self {
            QueuePort::Xsk(s) => s.as_fd(),
            QueuePort::Attached(p) => p.as_fd(),
        }
    }
}
