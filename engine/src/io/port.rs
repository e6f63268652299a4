//! [`FramePort`]: what an engine loop needs of the thing that carries its
//! frames. An AF_XDP socket ([`XskSocket`]) is one; the frame rings of a
//! process attached to a shared engine (`crate::attach`) are the other.
//! The I/O steps (`driver::step`) are written against this trait, so both
//! put the same frames on the wire.

use std::io;

use super::socket::{InPlace, Lookahead, Rx, XskSocket};

/// A carrier of frames in both directions (see the module documentation).
/// The methods are those of [`XskSocket`], which documents each.
pub trait FramePort {
    /// Receives up to `max_packets` frames, showing each to `f`
    /// ([`XskSocket::recv_ahead`]).
    fn recv_ahead<F: FnMut(Rx<'_>)>(&mut self, max_packets: usize, ahead: Lookahead, f: F)
        -> usize;
    /// Takes back what was transmitted ([`XskSocket::complete`]).
    fn complete(&mut self) -> u32;
    /// Frames (of [`FramePort::frame_size`]) that can be queued now.
    fn tx_room(&mut self) -> usize;
    /// Queues one frame written in place ([`XskSocket::send_in_place`]).
    fn send_in_place<F: FnOnce(&mut [u8]) -> Option<usize>>(
        &mut self,
        room: usize,
        f: F,
    ) -> InPlace;
    /// Queues a copy of `packet` ([`XskSocket::send`]).
    fn send(&mut self, packet: &[u8]) -> bool;
    /// Publishes what was queued ([`XskSocket::flush`]).
    fn flush(&mut self) -> io::Result<()>;
    /// Frames given for transmission and not yet taken back.
    fn tx_in_flight(&self) -> u32;
    /// Largest frame accepted.
    fn max_packet(&self) -> usize;
    /// Bytes of one frame buffer.
    fn frame_size(&self) -> u32;
}

impl FramePort for XskSocket {
    #[inline]
    fn recv_ahead<F: FnMut(Rx<'_>)>(
        &mut self,
        max_packets: usize,
        ahead: Lookahead,
        f: F,
    ) -> usize {
        XskSocket::recv_ahead(self, max_packets, ahead, f)
    }
    #[inline]
    fn complete(&mut self) -> u32 {
        XskSocket::complete(self)
    }
    #[inline]
    fn tx_room(&mut self) -> usize {
        XskSocket::tx_room(self)
    }
    #[inline]
    fn send_in_place<F: FnOnce(&mut [u8]) -> Option<usize>>(
        &mut self,
        room: usize,
        f: F,
    ) -> InPlace {
        XskSocket::send_in_place(self, room, f)
    }
    #[inline]
    fn send(&mut self, packet: &[u8]) -> bool {
        XskSocket::send(self, packet)
    }
    #[inline]
    fn flush(&mut self) -> io::Result<()> {
        XskSocket::flush(self)
    }
    #[inline]
    fn tx_in_flight(&self) -> u32 {
        XskSocket::tx_in_flight(self)
    }
    #[inline]
    fn max_packet(&self) -> usize {
        XskSocket::max_packet(self)
    }
    #[inline]
    fn frame_size(&self) -> u32 {
        XskSocket::frame_size(self)
    }
}
