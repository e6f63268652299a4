//! The four AF_XDP rings (fill, completion, RX, TX) as single-producer /
//! single-consumer rings shared with the kernel. User space produces into
//! fill and TX ([`ProducerRing`]) and consumes from RX and completion
//! ([`ConsumerRing`]): each type has only its side's calls, and each
//! ring's constructor fixes its entry type and mapping offset, so a
//! consumer's call on the fill ring, or the RX ring mapped as TX, does
//! not compile (xsk-rs has one type per ring for the same reason).
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

/// Entries are either UMEM addresses (fill, completion) or descriptors
/// (RX, TX).
pub(crate) trait RingEntry: Copy {}
impl RingEntry for u64 {}
impl RingEntry for libc::xdp_desc {}

/// The fill ring: UMEM addresses of free frames, produced by us for the
/// kernel to receive into.
pub(crate) type FillRing = ProducerRing<u64>;
/// The TX ring: descriptors of frames to send, produced by us.
pub(crate) type TxRing = ProducerRing<libc::xdp_desc>;
/// The completion ring: UMEM addresses of sent frames, produced by the
/// kernel and consumed by us.
pub(crate) type CompletionRing = ConsumerRing<u64>;
/// The RX ring: descriptors of received frames, produced by the kernel.
pub(crate) type RxRing = ConsumerRing<libc::xdp_desc>;

/// One mapped ring, whichever side we are on. Invariant: `producer`,
/// `consumer`, `flags` and `descs` point into `_map`, which lives as long
/// as the ring; `size` is a power of two and `descs` has `size` entries.
struct RingMap<T: RingEntry> {
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
unsafe impl<T: RingEntry> Send for RingMap<T> {}

impl<T: RingEntry> RingMap<T> {
    /// Maps a ring of `size` entries of the socket `fd`.
    fn map(
        fd: BorrowedFd<'_>,
        off: &libc::xdp_ring_offset,
        size: u32,
        pgoff: u64,
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
        let mut ring = RingMap {
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
}

/// A ring user space produces into and the kernel consumes from: fill
/// and TX. Only the producer's calls exist on it.
pub(crate) struct ProducerRing<T: RingEntry>(RingMap<T>);

impl<T: RingEntry> ProducerRing<T> {
    fn new(mut ring: RingMap<T>) -> Self {
        ring.cached_cons = ring.cached_cons.wrapping_add(ring.size);
        ProducerRing(ring)
    }

    /// Number of entries.
    pub(crate) fn size(&self) -> u32 {
        self.0.size
    }

    /// Whether the kernel asked to be woken up (XDP_USE_NEED_WAKEUP). The
    /// kernel sets the flag on the rings it consumes: fill (to receive)
    /// and TX (to send).
    pub(crate) fn needs_wakeup(&self) -> bool {
        // Order our earlier producer-index store before this load, as the
        // kernel sets the flag and then re-checks the ring.
        std::sync::atomic::fence(Ordering::SeqCst);
        // SAFETY: see the struct invariant of `RingMap`.
        unsafe { &*self.0.flags }.load(Ordering::Relaxed) & libc::XDP_RING_NEED_WAKEUP != 0
    }

    /// Free slots, reloading the kernel's consumer index only if fewer
    /// than `want` are known to be free.
    pub(crate) fn free(&mut self, want: u32) -> u32 {
        let r = &mut self.0;
        let free = r.cached_cons.wrapping_sub(r.cached_prod);
        if free >= want {
            return free;
        }
        r.cached_cons = r.consumer().load(Ordering::Acquire).wrapping_add(r.size);
        r.cached_cons.wrapping_sub(r.cached_prod)
    }

    /// Writes the `i`-th entry after the published producer index.
    /// The caller must have checked `i < free(..)`.
    pub(crate) fn write(&mut self, i: u32, v: T) {
        let r = &mut self.0;
        debug_assert!(i < r.cached_cons.wrapping_sub(r.cached_prod));
        let idx = (r.cached_prod.wrapping_add(i) & r.mask) as usize;
        // SAFETY: idx < size; the slot is free (we own it until we publish).
        unsafe { r.descs.add(idx).write_volatile(v) }
    }

    /// Publishes `n` written entries to the kernel.
    pub(crate) fn submit(&mut self, n: u32) {
        if n == 0 {
            return;
        }
        let r = &mut self.0;
        r.cached_prod = r.cached_prod.wrapping_add(n);
        r.producer().store(r.cached_prod, Ordering::Release);
    }
}

impl FillRing {
    /// Maps the fill ring of `fd` (`size` entries).
    pub(crate) fn fill(
        fd: BorrowedFd<'_>,
        off: &libc::xdp_mmap_offsets,
        size: u32,
    ) -> io::Result<Self> {
        RingMap::map(fd, &off.fr, size, libc::XDP_UMEM_PGOFF_FILL_RING).map(Self::new)
    }
}

impl TxRing {
    /// Maps the TX ring of `fd` (`size` entries).
    pub(crate) fn tx(
        fd: BorrowedFd<'_>,
        off: &libc::xdp_mmap_offsets,
        size: u32,
    ) -> io::Result<Self> {
        RingMap::map(fd, &off.tx, size, libc::XDP_PGOFF_TX_RING as u64).map(Self::new)
    }
}

/// A ring the kernel produces into and user space consumes from: RX and
/// completion. Only the consumer's calls exist on it.
pub(crate) struct ConsumerRing<T: RingEntry>(RingMap<T>);

impl<T: RingEntry> ConsumerRing<T> {
    /// Entries available to read (at most `max`), reloading the kernel's
    /// producer index when the cached view is empty.
    pub(crate) fn available(&mut self, max: u32) -> u32 {
        let r = &mut self.0;
        let mut n = r.cached_prod.wrapping_sub(r.cached_cons);
        if n == 0 {
            r.cached_prod = r.producer().load(Ordering::Acquire);
            n = r.cached_prod.wrapping_sub(r.cached_cons);
        }
        n.min(max)
    }

    /// Reads the `i`-th entry after our consumer index. The caller must
    /// have checked `i < available(..)`.
    pub(crate) fn read(&self, i: u32) -> T {
        let r = &self.0;
        debug_assert!(i < r.cached_prod.wrapping_sub(r.cached_cons));
        let idx = (r.cached_cons.wrapping_add(i) & r.mask) as usize;
        // SAFETY: idx < size; the kernel published this entry (Acquire
        // load of the producer index in `available`).
        unsafe { r.descs.add(idx).read_volatile() }
    }

    /// Gives `n` read entries back to the kernel.
    pub(crate) fn release(&mut self, n: u32) {
        if n == 0 {
            return;
        }
        let r = &mut self.0;
        r.cached_cons = r.cached_cons.wrapping_add(n);
        r.consumer().store(r.cached_cons, Ordering::Release);
    }
}

impl CompletionRing {
    /// Maps the completion ring of `fd` (`size` entries).
    pub(crate) fn completion(
        fd: BorrowedFd<'_>,
        off: &libc::xdp_mmap_offsets,
        size: u32,
    ) -> io::Result<Self> {
        RingMap::map(fd, &off.cr, size, libc::XDP_UMEM_PGOFF_COMPLETION_RING).map(ConsumerRing)
    }
}

impl RxRing {
    /// Maps the RX ring of `fd` (`size` entries).
    pub(crate) fn rx(
        fd: BorrowedFd<'_>,
        off: &libc::xdp_mmap_offsets,
        size: u32,
    ) -> io::Result<Self> {
        RingMap::map(fd, &off.rx, size, libc::XDP_PGOFF_RX_RING as u64).map(ConsumerRing)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ring over anonymous memory laid out like the kernel's (producer,
    /// consumer, flags, then entries), with both indices at `start` so
    /// tests can cross the u32 wrap: what [`RingMap::map`] returns, for
    /// [`ProducerRing::new`] or [`ConsumerRing`] to take. Returns the ring
    /// and raw pointers to play the kernel's side.
    fn fake<T: RingEntry>(
        size: u32,
        start: u32,
    ) -> (RingMap<T>, *const AtomicU32, *const AtomicU32) {
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
        let ring = RingMap {
            _map: map,
            producer: p,
            consumer: c,
            flags: f,
            descs: d,
            size,
            mask: size - 1,
            cached_prod: start,
            cached_cons: start,
        };
        (ring, p, c)
    }

    #[test]
    fn producer_ring_tracks_free_space_across_the_index_wrap() {
        let (map, prod, cons) = fake::<u64>(8, u32::MAX - 3);
        let mut r = FillRing::new(map);
        assert_eq!(r.free(8), 8);
        for i in 0..8 {
            r.write(i, 100 + i as u64);
        }
        r.submit(8);
        // SAFETY (test): see `fake`.
        let (prod, cons) = unsafe { (&*prod, &*cons) };
        assert_eq!(prod.load(Ordering::Acquire), (u32::MAX - 3).wrapping_add(8));
        assert_eq!(r.free(1), 0, "full until the kernel consumes");
        // The kernel consumes 3 entries.
        cons.store((u32::MAX - 3).wrapping_add(3), Ordering::Release);
        assert_eq!(r.free(1), 3);
        r.write(0, 7);
        r.submit(1);
        assert_eq!(r.free(3), 2);
        // Slot of the 9th entry is the 1st slot again (mask).
        // SAFETY (test): reading entry 0 of the ring memory.
        let first = unsafe {
            r.0.descs
                .add(((u32::MAX - 3).wrapping_add(8) & r.0.mask) as usize)
                .read()
        };
        assert_eq!(first, 7);
    }

    #[test]
    fn consumer_ring_reads_only_published_entries() {
        let (map, prod, _cons) = fake::<libc::xdp_desc>(4, u32::MAX - 1);
        let mut r: RxRing = ConsumerRing(map);
        assert_eq!(r.available(16), 0);
        // The kernel writes two descriptors and publishes them.
        for i in 0..2u32 {
            let idx = ((u32::MAX - 1).wrapping_add(i) & r.0.mask) as usize;
            // SAFETY (test): idx < size.
            unsafe {
                r.0.descs.add(idx).write(libc::xdp_desc {
                    addr: 4096 * i as u64,
                    len: 60 + i,
                    options: 0,
                })
            };
        }
        // SAFETY (test): see `fake`.
        unsafe { &*prod }.store((u32::MAX - 1).wrapping_add(2), Ordering::Release);
        assert_eq!(r.available(16), 2);
        assert_eq!(r.available(1), 1, "capped by max");
        assert_eq!(r.read(0).len, 60);
        assert_eq!(r.read(1).addr, 4096);
        r.release(2);
        // SAFETY (test): see `fake`.
        assert_eq!(
            unsafe { &*r.0.consumer }.load(Ordering::Acquire),
            0,
            "wrapped past u32::MAX"
        );
        assert_eq!(r.available(16), 0);
    }

    #[test]
    fn need_wakeup_flag_is_read_from_the_ring() {
        let (map, _, _) = fake::<u64>(4, 0);
        let r = FillRing::new(map);
        assert!(!r.needs_wakeup());
        // SAFETY (test): the flags word of the fake ring.
        unsafe { &*r.0.flags }.store(libc::XDP_RING_NEED_WAKEUP, Ordering::Release);
        assert!(r.needs_wakeup());
    }
}
