//! The four AF_XDP rings (fill, completion, RX, TX) as single-producer /
//! single-consumer rings shared with the kernel.
//!
//! Memory ordering follows the kernel's contract (see the comment block of
//! net/xdp/xsk_queue.h and libxdp's xsk.h): the producer writes entries,
//! then publishes the producer index with a Release store; the consumer
//! loads the producer index with Acquire before reading entries, and
//! publishes its consumer index with a Release store after it is done with
//! them. Both sides cache the other's index and only reload it when the
//! cached view runs out (this is why the fill ring's consumer index looks
//! "lazily published": the kernel takes entries in batches).

use std::io;
use std::os::fd::BorrowedFd;
use std::sync::atomic::{AtomicU32, Ordering};

use super::sys::Mapping;

/// Entries are either UMEM addresses (fill, completion) or descriptors.
pub(crate) trait RingEntry: Copy {}
impl RingEntry for u64 {}
impl RingEntry for libc::xdp_desc {}

/// One mapped ring. Invariant: `producer`, `consumer`, `flags` and `descs`
/// point into `_map`, which lives as long as the ring; `size` is a power
/// of two and `descs` has `size` entries.
pub(crate) struct Ring<T: RingEntry> {
    _map: Mapping,
    producer: *const AtomicU32,
    consumer: *const AtomicU32,
    flags: *const AtomicU32,
    descs: *mut T,
    size: u32,
    mask: u32,
    /// Our view of the producer index (ours if we produce).
    cached_prod: u32,
    /// Our view of the consumer index (ours if we consume; plus `size`
    /// when we produce, as in libxdp, so `cached_cons - cached_prod` is
    /// the free space).
    cached_cons: u32,
}

// SAFETY: the raw pointers point into the owned mapping; a ring is used by
// one thread at a time (it is `Send`, not `Sync`), and the kernel side is
// synchronised through the atomics.
unsafe impl<T: RingEntry> Send for Ring<T> {}

impl<T: RingEntry> Ring<T> {
    /// Maps a ring of `size` entries of the socket `fd`.
    pub(crate) fn map(
        fd: BorrowedFd<'_>,
        off: &libc::xdp_ring_offset,
        size: u32,
        pgoff: u64,
        producer_side: bool,
    ) -> io::Result<Self> {
        assert!(size.is_power_of_two());
        let len = off.desc as usize + size as usize * std::mem::size_of::<T>();
        let map = Mapping::socket_ring(fd, len, pgoff)?;
        let base = map.as_ptr();
        // SAFETY: the kernel laid out the ring at these offsets inside the
        // `len` bytes we mapped (XDP_MMAP_OFFSETS); the index words are
        // 4-byte aligned u32s shared with the kernel, hence atomics.
        let (producer, consumer, flags, descs) = unsafe {
            (
                base.add(off.producer as usize) as *const AtomicU32,
                base.add(off.consumer as usize) as *const AtomicU32,
                base.add(off.flags as usize) as *const AtomicU32,
                base.add(off.desc as usize) as *mut T,
            )
        };
        let mut ring = Ring {
            _map: map,
            producer,
            consumer,
            flags,
            descs,
            size,
            mask: size - 1,
            cached_prod: 0,
            cached_cons: 0,
        };
        ring.cached_prod = ring.producer().load(Ordering::Relaxed);
        ring.cached_cons = ring.consumer().load(Ordering::Relaxed);
        if producer_side {
            ring.cached_cons = ring.cached_cons.wrapping_add(size);
        }
        Ok(ring)
    }

    fn producer(&self) -> &AtomicU32 {
        // SAFETY: see the struct invariant.
        unsafe { &*self.producer }
    }

    fn consumer(&self) -> &AtomicU32 {
        // SAFETY: see the struct invariant.
        unsafe { &*self.consumer }
    }

    /// Number of entries.
    pub(crate) fn size(&self) -> u32 {
        self.size
    }

    /// Whether the kernel asked to be woken up (XDP_USE_NEED_WAKEUP).
    pub(crate) fn needs_wakeup(&self) -> bool {
        // Order our earlier producer-index store before this load, as the
        // kernel sets the flag and then re-checks the ring.
        std::sync::atomic::fence(Ordering::SeqCst);
        // SAFETY: see the struct invariant.
        unsafe { &*self.flags }.load(Ordering::Relaxed) & libc::XDP_RING_NEED_WAKEUP != 0
    }

    // ---- producer side (fill, TX) ----

    /// Free slots, reloading the kernel's consumer index only if fewer
    /// than `want` are known to be free.
    pub(crate) fn prod_free(&mut self, want: u32) -> u32 {
        let free = self.cached_cons.wrapping_sub(self.cached_prod);
        if free >= want {
            return free;
        }
        self.cached_cons = self
            .consumer()
            .load(Ordering::Acquire)
            .wrapping_add(self.size);
        self.cached_cons.wrapping_sub(self.cached_prod)
    }

    /// Writes the `i`-th entry after the published producer index.
    /// The caller must have checked `i < prod_free(..)`.
    pub(crate) fn prod_write(&mut self, i: u32, v: T) {
        debug_assert!(i < self.cached_cons.wrapping_sub(self.cached_prod));
        let idx = (self.cached_prod.wrapping_add(i) & self.mask) as usize;
        // SAFETY: idx < size; the slot is free (we own it until we publish).
        unsafe { self.descs.add(idx).write_volatile(v) }
    }

    /// Publishes `n` written entries to the kernel.
    pub(crate) fn prod_submit(&mut self, n: u32) {
        if n == 0 {
            return;
        }
        self.cached_prod = self.cached_prod.wrapping_add(n);
        self.producer().store(self.cached_prod, Ordering::Release);
    }

    // ---- consumer side (completion, RX) ----

    /// Entries available to read (at most `max`), reloading the kernel's
    /// producer index when the cached view is empty.
    pub(crate) fn cons_avail(&mut self, max: u32) -> u32 {
        let mut n = self.cached_prod.wrapping_sub(self.cached_cons);
        if n == 0 {
            self.cached_prod = self.producer().load(Ordering::Acquire);
            n = self.cached_prod.wrapping_sub(self.cached_cons);
        }
        n.min(max)
    }

    /// Reads the `i`-th entry after our consumer index. The caller must
    /// have checked `i < cons_avail(..)`.
    pub(crate) fn cons_read(&self, i: u32) -> T {
        debug_assert!(i < self.cached_prod.wrapping_sub(self.cached_cons));
        let idx = (self.cached_cons.wrapping_add(i) & self.mask) as usize;
        // SAFETY: idx < size; the kernel published this entry (Acquire
        // load of the producer index in cons_avail).
        unsafe { self.descs.add(idx).read_volatile() }
    }

    /// Gives `n` read entries back to the kernel.
    pub(crate) fn cons_release(&mut self, n: u32) {
        if n == 0 {
            return;
        }
        self.cached_cons = self.cached_cons.wrapping_add(n);
        self.consumer().store(self.cached_cons, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ring over anonymous memory laid out like the kernel's (producer,
    /// consumer, flags, then entries), with the indices starting at
    /// `start` so tests can cross the u32 wrap. Returns the ring and raw
    /// pointers to play the kernel's side.
    fn fake<T: RingEntry>(
        size: u32,
        start: u32,
        producer_side: bool,
    ) -> (Ring<T>, *const AtomicU32, *const AtomicU32) {
        let off = libc::xdp_ring_offset {
            producer: 0,
            consumer: 64,
            flags: 128,
            desc: 192,
        };
        let map = Mapping::anonymous(4096 * 4, false).unwrap();
        let base = map.as_ptr();
        // SAFETY (test): the offsets are inside the 16 KiB mapping and aligned.
        let (p, c, f, d) = unsafe {
            (
                base.add(off.producer as usize) as *const AtomicU32,
                base.add(off.consumer as usize) as *const AtomicU32,
                base.add(off.flags as usize) as *const AtomicU32,
                base.add(off.desc as usize) as *mut T,
            )
        };
        // SAFETY (test): valid, aligned, initialised (zeroed) words.
        unsafe {
            (*p).store(start, Ordering::Relaxed);
            (*c).store(start, Ordering::Relaxed);
        }
        let cached_cons = if producer_side {
            start.wrapping_add(size)
        } else {
            start
        };
        let ring = Ring {
            _map: map,
            producer: p,
            consumer: c,
            flags: f,
            descs: d,
            size,
            mask: size - 1,
            cached_prod: start,
            cached_cons,
        };
        (ring, p, c)
    }

    #[test]
    fn producer_ring_tracks_free_space_across_the_index_wrap() {
        let (mut r, prod, cons) = fake::<u64>(8, u32::MAX - 3, true);
        assert_eq!(r.prod_free(8), 8);
        for i in 0..8 {
            r.prod_write(i, 100 + i as u64);
        }
        r.prod_submit(8);
        // SAFETY (test): see `fake`.
        let (prod, cons) = unsafe { (&*prod, &*cons) };
        assert_eq!(prod.load(Ordering::Acquire), (u32::MAX - 3).wrapping_add(8));
        assert_eq!(r.prod_free(1), 0, "full until the kernel consumes");
        // The kernel consumes 3 entries.
        cons.store((u32::MAX - 3).wrapping_add(3), Ordering::Release);
        assert_eq!(r.prod_free(1), 3);
        r.prod_write(0, 7);
        r.prod_submit(1);
        assert_eq!(r.prod_free(3), 2);
        // Slot of the 9th entry is the 1st slot again (mask).
        // SAFETY (test): reading entry 0 of the ring memory.
        let first = unsafe {
            r.descs
                .add(((u32::MAX - 3).wrapping_add(8) & r.mask) as usize)
                .read()
        };
        assert_eq!(first, 7);
    }

    #[test]
    fn consumer_ring_reads_only_published_entries() {
        let (mut r, prod, _cons) = fake::<libc::xdp_desc>(4, u32::MAX - 1, false);
        assert_eq!(r.cons_avail(16), 0);
        // The kernel writes two descriptors and publishes them.
        for i in 0..2u32 {
            let idx = ((u32::MAX - 1).wrapping_add(i) & r.mask) as usize;
            // SAFETY (test): idx < size.
            unsafe {
                r.descs.add(idx).write(libc::xdp_desc {
                    addr: 4096 * i as u64,
                    len: 60 + i,
                    options: 0,
                })
            };
        }
        // SAFETY (test): see `fake`.
        unsafe { &*prod }.store((u32::MAX - 1).wrapping_add(2), Ordering::Release);
        assert_eq!(r.cons_avail(16), 2);
        assert_eq!(r.cons_avail(1), 1, "capped by max");
        assert_eq!(r.cons_read(0).len, 60);
        assert_eq!(r.cons_read(1).addr, 4096);
        r.cons_release(2);
        // SAFETY (test): see `fake`.
        assert_eq!(
            unsafe { &*r.consumer }.load(Ordering::Acquire),
            0,
            "wrapped past u32::MAX"
        );
        assert_eq!(r.cons_avail(16), 0);
    }

    #[test]
    fn need_wakeup_flag_is_read_from_the_ring() {
        let (r, _, _) = fake::<u64>(4, 0, true);
        assert!(!r.needs_wakeup());
        // SAFETY (test): the flags word of the fake ring.
        unsafe { &*r.flags }.store(libc::XDP_RING_NEED_WAKEUP, Ordering::Release);
        assert!(r.needs_wakeup());
    }
}
