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
