//! The UMEM (the packet buffer area shared with the kernel) and the frame
//! accounting that guarantees no frame is leaked or handed out twice.

use std::collections::VecDeque;
use std::io;

use super::sys::Mapping;

/// UMEM geometry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UmemConfig {
    /// Number of frames (chunks). Half serve RX (fill ring), half TX.
    pub frame_count: u32,
    /// Frame (chunk) size: 2048 or 4096.
    pub frame_size: u32,
    /// Back the area with huge pages (needs reserved hugepages).
    pub huge_pages: bool,
}

impl Default for UmemConfig {
    fn default() -> Self {
        UmemConfig {
            frame_count: 4096,
            frame_size: 4096,
            huge_pages: false,
        }
    }
}

/// Who owns a frame right now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum FrameState {
    /// In one of our free stacks.
    Free,
    /// Given to the kernel through the fill ring (comes back on RX).
    Fill,
    /// Given to the kernel through the TX ring (comes back on completion).
    Tx,
}

/// A snapshot of where the frames are (for tests and diagnostics).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FrameAccounting {
    pub total: u32,
    pub free_rx: u32,
    pub free_tx: u32,
    pub in_fill_or_rx: u32,
    pub in_tx_or_completion: u32,
    /// Addresses the kernel returned that we did not give it (never
    /// expected; counted, the frame is ignored).
    pub bad_returns: u64,
}

/// The UMEM area.
pub struct Umem {
    map: Mapping,
    frame_size: u32,
    frame_count: u32,
}

impl std::fmt::Debug for Umem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Umem")
            .field("frame_size", &self.frame_size)
            .field("frame_count", &self.frame_count)
            .finish()
    }
}

impl Umem {
    /// Maps a zeroed UMEM area.
    pub fn new(cfg: UmemConfig) -> io::Result<Umem> {
        if cfg.frame_size != 2048 && cfg.frame_size != 4096 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "UMEM frame size must be 2048 or 4096",
            ));
        }
        if cfg.frame_count < 4 || !cfg.frame_count.is_power_of_two() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "UMEM frame count must be a power of two >= 4",
            ));
        }
        let len = cfg.frame_count as usize * cfg.frame_size as usize;
        let map = Mapping::anonymous(len, cfg.huge_pages)?;
        Ok(Umem {
            map,
            frame_size: cfg.frame_size,
            frame_count: cfg.frame_count,
        })
    }

    pub(crate) fn base(&self) -> *mut u8 {
        self.map.as_ptr()
    }

    /// Total length in bytes.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether the area is empty (never).
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Frame size in bytes.
    pub fn frame_size(&self) -> u32 {
        self.frame_size
    }

    /// Number of frames.
    pub fn frame_count(&self) -> u32 {
        self.frame_count
    }

    /// Bytes `[addr, addr+len)` of the area, if in bounds and within one
    /// frame. The caller must own the frame (not given to the kernel).
    pub(crate) fn bytes(&self, addr: u64, len: u32) -> Option<&[u8]> {
        let (start, len) = self.check(addr, len)?;
        // SAFETY: in bounds (check); the frame is owned by us, so the
        // kernel does not write it while the slice lives.
        Some(unsafe { std::slice::from_raw_parts(self.base().add(start), len) })
    }

    /// Mutable bytes of one owned frame.
    pub(crate) fn bytes_mut(&mut self, addr: u64, len: u32) -> Option<&mut [u8]> {
        let (start, len) = self.check(addr, len)?;
        // SAFETY: in bounds; `&mut self` and frame ownership make it unique.
        Some(unsafe { std::slice::from_raw_parts_mut(self.base().add(start), len) })
    }

    /// Mutable bytes of `frames` adjacent owned frames starting at the
    /// frame `base` (one contiguous slice across the frame boundaries).
    pub(crate) fn run_mut(&mut self, base: u64, frames: u32) -> Option<&mut [u8]> {
        let fs = self.frame_size as u64;
        let len = fs * u64::from(frames);
        if !base.is_multiple_of(fs) || frames == 0 || base + len > self.map.len() as u64 {
            return None;
        }
        // SAFETY: in bounds (checked above); `&mut self` and ownership of
        // every frame of the run make the slice unique.
        Some(unsafe {
            std::slice::from_raw_parts_mut(self.base().add(base as usize), len as usize)
        })
    }

    /// Bytes `[addr, addr+len)` of the area across frame boundaries, if in
    /// bounds. The caller must own every frame the span touches.
    pub(crate) fn span(&self, addr: u64, len: usize) -> Option<&[u8]> {
        let end = addr.checked_add(len as u64)?;
        if end > self.map.len() as u64 {
            return None;
        }
        // SAFETY: in bounds (checked above); the caller owns the frames,
        // so the kernel does not write them while the slice lives.
        Some(unsafe { std::slice::from_raw_parts(self.base().add(addr as usize), len) })
    }

    /// Moves `len` bytes from `src` to `dst` inside the area (the ranges
    /// may overlap); false, moving nothing, if either is out of bounds.
    /// The caller must own every frame both ranges touch.
    pub(crate) fn move_within(&mut self, src: u64, dst: u64, len: usize) -> bool {
        let in_bounds = |a: u64| {
            a.checked_add(len as u64)
                .is_some_and(|e| e <= self.map.len() as u64)
        };
        if !in_bounds(src) || !in_bounds(dst) {
            return false;
        }
        // SAFETY: both ranges are in bounds (checked above); `&mut self`
        // and the caller's ownership of the frames make the access unique;
        // `copy` allows overlapping ranges.
        unsafe {
            std::ptr::copy(
                self.base().add(src as usize),
                self.base().add(dst as usize),
                len,
            )
        };
        true
    }

    fn check(&self, addr: u64, len: u32) -> Option<(usize, usize)> {
        let fs = self.frame_size as u64;
        let off_in_frame = addr % fs;
        if addr >= self.map.len() as u64 || off_in_frame + len as u64 > fs {
            return None;
        }
        Some((addr as usize, len as usize))
    }
}

/// Frame ownership: the free RX frames (a queue: they go back to the fill
/// ring in the order they returned), the free TX frames (a stack: they
/// come back from the completion ring) and the owner of every frame,
/// checked on every transition so that a leaked or doubly returned frame
/// is detected (counted in `bad_returns`) instead of corrupting data. The
/// free RX queue is the "stash": frames waiting for room in the fill ring,
/// whose consumer index the kernel publishes in batches.
#[derive(Debug)]
pub(crate) struct FramePool {
    frame_size: u32,
    state: Vec<FrameState>,
    /// In the order the frames came back, which is the order the kernel
    /// filled them: re-posted in that order, the fill ring keeps handing
    /// out ascending adjacent frames, so a multi-buffer packet usually
    /// lands in adjacent frames, one contiguous span (see
    /// `XskSocket::recv`).
    free_rx: VecDeque<u64>,
    free_tx: Vec<u64>,
    in_fill: u32,
    in_tx: u32,
    bad_returns: u64,
}

impl FramePool {
    /// The first half of the frames serves RX, the second half TX.
    pub(crate) fn new(frame_count: u32, frame_size: u32) -> FramePool {
        let half = frame_count / 2;
        let fs = frame_size as u64;
        FramePool {
            frame_size,
            state: vec![FrameState::Free; frame_count as usize],
            // Ascending: the fill ring gets adjacent frames in order.
            free_rx: (0..half).map(|i| i as u64 * fs).collect(),
            free_tx: (half..frame_count).rev().map(|i| i as u64 * fs).collect(),
            in_fill: 0,
            in_tx: 0,
            bad_returns: 0,
        }
    }

    fn index(&self, addr: u64) -> Option<usize> {
        let i = (addr / self.frame_size as u64) as usize;
        (i < self.state.len()).then_some(i)
    }

    /// Base address of the frame containing `addr`.
    pub(crate) fn frame_base(&self, addr: u64) -> u64 {
        addr - addr % self.frame_size as u64
    }

    pub(crate) fn free_rx(&self) -> usize {
        self.free_rx.len()
    }

    pub(crate) fn free_tx(&self) -> usize {
        self.free_tx.len()
    }

    /// Takes a free RX frame to place in the fill ring.
    pub(crate) fn take_rx(&mut self) -> Option<u64> {
        let a = self.free_rx.pop_front()?;
        let i = self.index(a).expect("pool holds only valid frames");
        debug_assert_eq!(self.state[i], FrameState::Free);
        self.state[i] = FrameState::Fill;
        self.in_fill += 1;
        Some(a)
    }

    /// A frame came back from the kernel on the RX ring (we are done with it).
    pub(crate) fn return_rx(&mut self, addr: u64) {
        let base = self.frame_base(addr);
        match self.index(base) {
            Some(i) if self.state[i] == FrameState::Fill => {
                self.state[i] = FrameState::Free;
                self.in_fill -= 1;
                self.free_rx.push_back(base);
            }
            _ => self.bad_returns += 1,
        }
    }

    /// Takes a free TX frame to fill and put on the TX ring.
    pub(crate) fn take_tx(&mut self) -> Option<u64> {
        let a = self.free_tx.pop()?;
        let i = self.index(a).expect("pool holds only valid frames");
        debug_assert_eq!(self.state[i], FrameState::Free);
        self.state[i] = FrameState::Tx;
        self.in_tx += 1;
        Some(a)
    }

    /// Takes `k` free TX frames that are adjacent in the UMEM and returns
    /// the address of the lowest, or None (taking nothing) if the top `k`
    /// of the free stack are not such a run. Frames come back from the
    /// completion ring in the order they were sent, so frames taken as a
    /// run are usually pushed back as one (in descending order).
    pub(crate) fn take_tx_run(&mut self, k: usize) -> Option<u64> {
        let n = self.free_tx.len();
        if k == 0 || n < k {
            return None;
        }
        let top = &self.free_tx[n - k..];
        let fs = self.frame_size as u64;
        let (lo, hi) = top
            .iter()
            .fold((u64::MAX, 0), |(lo, hi), &a| (lo.min(a), hi.max(a)));
        // k distinct frames (each free frame is on the stack once) spanning
        // exactly k frames are adjacent.
        if hi - lo != (k as u64 - 1) * fs {
            return None;
        }
        for _ in 0..k {
            self.take_tx().expect("k frames are on the stack");
        }
        Some(lo)
    }

    /// Gives back the frames `[base + from*fs, base + k*fs)` of a run
    /// taken with [`take_tx_run`](Self::take_tx_run) and not submitted,
    /// highest first so that the next run starts at the lowest.
    pub(crate) fn untake_tx_run(&mut self, base: u64, from: usize, k: usize) {
        let fs = self.frame_size as u64;
        for i in (from..k).rev() {
            self.untake_tx(base + i as u64 * fs);
        }
    }

    /// Undoes `take_tx` for a frame that was not submitted.
    pub(crate) fn untake_tx(&mut self, addr: u64) {
        let i = self.index(addr).expect("frame came from take_tx");
        self.state[i] = FrameState::Free;
        self.in_tx -= 1;
        self.free_tx.push(addr);
    }

    /// A frame came back on the completion ring.
    pub(crate) fn return_tx(&mut self, addr: u64) {
        let base = self.frame_base(addr);
        match self.index(base) {
            Some(i) if self.state[i] == FrameState::Tx => {
                self.state[i] = FrameState::Free;
                self.in_tx -= 1;
                self.free_tx.push(base);
            }
            _ => self.bad_returns += 1,
        }
    }

    pub(crate) fn accounting(&self) -> FrameAccounting {
        FrameAccounting {
            total: self.state.len() as u32,
            free_rx: self.free_rx.len() as u32,
            free_tx: self.free_tx.len() as u32,
            in_fill_or_rx: self.in_fill,
            in_tx_or_completion: self.in_tx,
            bad_returns: self.bad_returns,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_move_between_owners_without_leaks() {
        let mut p = FramePool::new(8, 2048);
        let a = p.take_rx().unwrap();
        assert_eq!(a, 0);
        let t = p.take_tx().unwrap();
        assert_eq!(t, 4 * 2048);
        let acc = p.accounting();
        assert_eq!(
            (
                acc.free_rx,
                acc.free_tx,
                acc.in_fill_or_rx,
                acc.in_tx_or_completion
            ),
            (3, 3, 1, 1)
        );
        // RX returns may point inside the frame (headroom/offset).
        p.return_rx(a + 256);
        p.return_tx(t);
        let acc = p.accounting();
        assert_eq!(
            (
                acc.free_rx,
                acc.free_tx,
                acc.in_fill_or_rx,
                acc.in_tx_or_completion
            ),
            (4, 4, 0, 0)
        );
        assert_eq!(acc.bad_returns, 0);
    }

    #[test]
    fn double_return_and_foreign_addresses_are_counted_not_freed() {
        let mut p = FramePool::new(8, 2048);
        let a = p.take_rx().unwrap();
        p.return_rx(a);
        p.return_rx(a); // double free
        p.return_tx(a); // wrong ring
        p.return_rx(1 << 40); // out of range
        let acc = p.accounting();
        assert_eq!(acc.bad_returns, 3);
        assert_eq!(acc.free_rx, 4);
    }

    #[test]
    fn untake_restores_state() {
        let mut p = FramePool::new(4, 4096);
        let t = p.take_tx().unwrap();
        p.untake_tx(t);
        let acc = p.accounting();
        assert_eq!(
            (
                acc.free_rx,
                acc.free_tx,
                acc.in_fill_or_rx,
                acc.in_tx_or_completion
            ),
            (2, 2, 0, 0)
        );
    }

    #[test]
    fn tx_runs_are_adjacent_and_given_back_exactly() {
        let mut p = FramePool::new(16, 4096);
        let base = p.take_tx_run(2).unwrap();
        assert_eq!(base, 8 * 4096, "the lowest TX frames first");
        assert_eq!(p.accounting().in_tx_or_completion, 2);
        // Use one frame, give the other back: the next run starts there.
        p.untake_tx_run(base, 1, 2);
        assert_eq!(p.accounting().in_tx_or_completion, 1);
        assert_eq!(p.accounting().free_tx, 7);
        let next = p.take_tx_run(2).unwrap();
        assert_eq!(next, base + 4096);
        // Nothing used: all back.
        p.untake_tx_run(next, 0, 2);
        // Completions in send order keep runs adjacent on the stack.
        p.return_tx(base);
        let acc = p.accounting();
        assert_eq!((acc.free_tx, acc.in_tx_or_completion), (8, 0));
        assert_eq!(acc.bad_returns, 0);
        let r = p.take_tx_run(3).unwrap();
        p.untake_tx_run(r, 0, 3);
        assert_eq!(p.accounting().free_tx, 8);
    }

    #[test]
    fn completions_returned_last_first_keep_small_packets_in_runs() {
        let mut p = FramePool::new(64, 4096);
        // Rounds of 8 one-frame packets, each from a two-frame run (one
        // frame given back), completed in send order and returned last
        // first (as XskSocket::complete does): every run is found.
        for _ in 0..4 {
            let mut sent = Vec::new();
            for _ in 0..8 {
                let base = p.take_tx_run(2).expect("a run on top of the stack");
                p.untake_tx_run(base, 1, 2);
                sent.push(base);
            }
            for &a in sent.iter().rev() {
                p.return_tx(a);
            }
        }
        let acc = p.accounting();
        assert_eq!(
            (acc.free_tx, acc.in_tx_or_completion, acc.bad_returns),
            (32, 0, 0)
        );
    }

    #[test]
    fn a_scattered_stack_yields_no_run_and_takes_nothing() {
        let mut p = FramePool::new(16, 4096);
        let a = p.take_tx().unwrap();
        let b = p.take_tx().unwrap();
        let c = p.take_tx().unwrap();
        // Return a and c: the stack top is c, then a (not adjacent).
        p.return_tx(a);
        p.return_tx(c);
        assert_eq!(p.take_tx_run(2), None);
        let acc = p.accounting();
        assert_eq!((acc.free_tx, acc.in_tx_or_completion), (7, 1));
        assert_eq!(p.take_tx_run(0), None);
        assert_eq!(p.take_tx_run(9), None, "more than are free");
        p.return_tx(b);
        assert_eq!(p.accounting().free_tx, 8);
    }

    #[test]
    fn umem_runs_are_bounds_checked() {
        let mut u = Umem::new(UmemConfig {
            frame_count: 4,
            frame_size: 4096,
            huge_pages: false,
        })
        .unwrap();
        assert_eq!(u.run_mut(4096, 2).unwrap().len(), 8192);
        assert!(u.run_mut(4096, 3).is_some());
        assert!(u.run_mut(4096, 4).is_none(), "past the end");
        assert!(u.run_mut(100, 1).is_none(), "not a frame start");
        assert!(u.run_mut(0, 0).is_none());
    }

    #[test]
    fn umem_bounds_are_checked() {
        let u = Umem::new(UmemConfig {
            frame_count: 4,
            frame_size: 2048,
            huge_pages: false,
        })
        .unwrap();
        assert_eq!(u.bytes(0, 2048).unwrap().len(), 2048);
        assert!(u.bytes(100, 2000).is_none(), "crosses a frame boundary");
        assert!(u.bytes(4 * 2048, 1).is_none(), "past the end");
        assert!(Umem::new(UmemConfig {
            frame_count: 4,
            frame_size: 1000,
            huge_pages: false
        })
        .is_err());
    }

    #[test]
    fn rx_frames_are_handed_out_ascending_and_again_in_the_order_they_return() {
        let mut p = FramePool::new(8, 4096);
        let taken: Vec<u64> = (0..4).map(|_| p.take_rx().unwrap()).collect();
        assert_eq!(taken, [0, 4096, 8192, 12288], "adjacent, ascending");
        assert_eq!(p.take_rx(), None, "the first half serves RX");
        // Returned in the order the kernel filled them: re-posted in that
        // order, so a packet over two fill entries gets adjacent frames.
        for &a in &taken[..2] {
            p.return_rx(a + 256); // RX descriptors point past the headroom
        }
        assert_eq!(p.take_rx(), Some(0));
        assert_eq!(p.take_rx(), Some(4096));
        let acc = p.accounting();
        assert_eq!((acc.free_rx, acc.in_fill_or_rx), (0, 4));
    }

    #[test]
    fn spans_and_moves_cross_frames_within_bounds() {
        let mut u = Umem::new(UmemConfig {
            frame_count: 4,
            frame_size: 4096,
            huge_pages: false,
        })
        .unwrap();
        // A second piece at the next frame's headroom moves back to where
        // the first one ends; the span then reads both as one slice.
        u.bytes_mut(4096 - 4, 4).unwrap().copy_from_slice(b"head");
        u.bytes_mut(4096 + 256, 6)
            .unwrap()
            .copy_from_slice(b"tail!!");
        assert!(u.move_within(4096 + 256, 4096, 6));
        assert_eq!(u.span(4096 - 4, 10).unwrap(), b"headtail!!");
        // Overlapping ranges move like memmove.
        u.bytes_mut(0, 8).unwrap().copy_from_slice(b"abcdefgh");
        assert!(u.move_within(2, 0, 6));
        assert_eq!(u.span(0, 8).unwrap(), b"cdefghgh");
        // Out of bounds: refused, nothing moved.
        assert!(!u.move_within(4 * 4096 - 4, 0, 8));
        assert!(!u.move_within(0, 4 * 4096 - 4, 8));
        assert_eq!(u.span(0, 8).unwrap(), b"cdefghgh");
        assert!(u.span(4 * 4096 - 4, 8).is_none());
        assert!(u.span(u64::MAX, 1).is_none());
        assert_eq!(u.span(0, 4 * 4096).unwrap().len(), 4 * 4096);
    }
}
