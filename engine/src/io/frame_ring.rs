//! Frame rings in shared memory: how a service that owns an interface's
//! AF_XDP sockets and a process attached to it pass frames
//! (`docs/shared-engine.md`).
//!
//! One memfd holds a header page and two single-producer single-consumer
//! rings of fixed slots: [`Direction::ToProcess`] (the service produces,
//! the process consumes: the frames it receives) and
//! [`Direction::ToService`] (the process produces: the frames it sends).
//! A slot is a 64-byte header (the frame's length) and [`SLOT_ROOM`]
//! bytes, room for the largest frame an endpoint emits.
//!
//! Each ring's header holds, a cache line each, the producer's index, the
//! consumer's index and the consumer's "waiting" flag (set before it
//! sleeps, so that the producer rings its bell only then: AF_XDP's
//! need_wakeup, in shared memory).
//!
//! The two sides do not trust each other alike. The service treats all of
//! the mapping as input from a process that may be broken or hostile: it
//! keeps its own copy of every index it writes and never reads it back,
//! checks each index it reads (the distance between producer and consumer
//! can never exceed the ring), checks each slot's length, and copies a
//! frame out of the mapping before it looks at it ([`Consumer::copy_out`]),
//! so the process cannot change it between the check and the use. It seals
//! the memfd's size, so the process cannot shrink the file under the
//! service's mapping (SIGBUS). A ring found inconsistent is reported as
//! [`RingError`]; the service then detaches that process.

use std::io;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};

use super::sys::Mapping;
use std::ptr::NonNull;
use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

/// Bytes of frame a slot holds: the largest frame an endpoint emits (IBTA's
/// largest path MTU, 4096 bytes, plus at most 102 bytes of Ethernet, VLAN,
/// IPv6, UDP, BTH, RETH, ImmDt and ICRC), rounded up.
pub const SLOT_ROOM: usize = 4096 + 256;
/// A slot's header: the length of its frame (u32), then padding to a
/// cache line.
const SLOT_HEADER: usize = 64;
const SLOT_STRIDE: usize = SLOT_HEADER + SLOT_ROOM;
/// A ring's header: producer index, consumer index, waiting flag, each on
/// its own cache line.
const RING_HEADER: usize = 192;
const PRODUCER: usize = 0;
const CONSUMER: usize = 64;
const WAITING: usize = 128;
/// The mapping's first page: a magic number, the layout, and the
/// counters the process reports ([`REPORTED`] of them).
const REGION_HEADER: usize = 4096;
const MAGIC: u64 = 0x726f_6365_7864_7001; // "rocexdp" 1
/// Counters a process reports to the service in the header page (u64 each,
/// from byte 64): shown by `roce-xdp stats`, never trusted for anything.
pub const REPORTED: usize = 8;
const REPORTED_AT: usize = 64;
/// The service IDs the process's connection manager listens on (so that
/// the service hands it the REQs for them): a count (u32) at byte 256,
/// then up to [`MAX_LISTENERS`] u64s from byte 264.
pub const MAX_LISTENERS: usize = 256;
const LISTENERS_COUNT_AT: usize = 256;
const LISTENERS_AT: usize = 264;

/// Most slots a ring may have (a sanity bound on what a peer claims).
pub const MAX_SLOTS: u32 = 1 << 14;

/// Which ring of a pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Frames the service hands the process.
    ToProcess,
    /// Frames the process sends through the service.
    ToService,
}

/// A ring found inconsistent: what the peer wrote cannot have come from
/// the ring protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RingError {
    #[error("the peer's index is {distance} slots from ours in a ring of {slots}")]
    BadIndex { distance: u32, slots: u32 },
    #[error("a slot claims a frame of {len} bytes (at most {SLOT_ROOM})")]
    BadLength { len: u32 },
    #[error("the mapping is not a roce-xdp frame ring pair (bad magic or layout)")]
    BadLayout,
}

/// The shared mapping of one ring pair (unmapped on drop).
#[derive(Debug)]
pub struct RingPair {
    // Field order is drop order: unmapped before the memfd closes.
    map: Mapping,
    base: NonNull<u8>,
    slots: u32,
    fd: OwnedFd,
}

// SAFETY: the mapping is plain shared memory; every access to it goes
// through atomics or byte copies whose ownership the ring protocol decides,
// and `RingPair` has no thread-affine state.
unsafe impl Send for RingPair {}
// SAFETY: as above; `&RingPair` only reads the layout fields and gives out
// raw access whose callers uphold the ring protocol.
unsafe impl Sync for RingPair {}

fn ring_bytes(slots: u32) -> usize {
    RING_HEADER + slots as usize * SLOT_STRIDE
}

fn region_bytes(slots: u32) -> usize {
    REGION_HEADER + 2 * ring_bytes(slots)
}

impl RingPair {
    /// Creates a ring pair of `slots` slots per direction (a power of two,
    /// at most [`MAX_SLOTS`]) in a new memfd whose size is sealed.
    pub fn create(slots: u32) -> io::Result<RingPair> {
        if !slots.is_power_of_two() || slots > MAX_SLOTS {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("ring slots must be a power of two up to {MAX_SLOTS}, not {slots}"),
            ));
        }
        // SAFETY: memfd_create with a NUL-terminated name and constant flags.
        let raw = unsafe {
            libc::memfd_create(
                c"roce-xdp-frames".as_ptr(),
                libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING,
            )
        };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a fresh descriptor nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let len = region_bytes(slots);
        // SAFETY: ftruncate and fcntl on our own descriptor, plain integers.
        unsafe {
            if libc::ftruncate(fd.as_raw_fd(), len as libc::off_t) != 0 {
                return Err(io::Error::last_os_error());
            }
            let seals = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL;
            if libc::fcntl(fd.as_raw_fd(), libc::F_ADD_SEALS, seals) != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        let pair = Self::map(fd, len, slots)?;
        // SAFETY: the header page is ours alone until the fd is handed out.
        unsafe {
            (pair.base.as_ptr() as *mut u64).write(MAGIC);
            (pair.base.as_ptr().add(8) as *mut u32).write(slots);
        }
        Ok(pair)
    }

    /// Maps a ring pair another process created (`fd`, received over the
    /// service's socket), checking its size and layout.
    pub fn open(fd: OwnedFd, slots: u32) -> io::Result<RingPair> {
        if !slots.is_power_of_two() || slots > MAX_SLOTS {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                RingError::BadLayout,
            ));
        }
        let len = region_bytes(slots);
        // SAFETY: fstat into a zeroed struct on a descriptor we own.
        let size = unsafe {
            let mut st: libc::stat = std::mem::zeroed();
            if libc::fstat(fd.as_raw_fd(), &mut st) != 0 {
                return Err(io::Error::last_os_error());
            }
            st.st_size as usize
        };
        if size != len {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                RingError::BadLayout,
            ));
        }
        let pair = Self::map(fd, len, slots)?;
        // SAFETY: reads of the header page, in bounds of the mapping.
        let (magic, claimed) = unsafe {
            (
                (pair.base.as_ptr() as *const u64).read_volatile(),
                (pair.base.as_ptr().add(8) as *const u32).read_volatile(),
            )
        };
        if magic != MAGIC || claimed != slots {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                RingError::BadLayout,
            ));
        }
        Ok(pair)
    }

    fn map(fd: OwnedFd, len: usize, slots: u32) -> io::Result<RingPair> {
        // A shared read-write mapping of the memfd, as an AF_XDP ring is
        // mapped.
        let map = Mapping::socket_ring(fd.as_fd(), len, 0)?;
        Ok(RingPair {
            base: NonNull::new(map.as_ptr()).expect("a mapping is never at NULL"),
            map,
            slots,
            fd,
        })
    }

    /// The memfd (to hand to the process).
    pub fn fd(&self) -> &OwnedFd {
        &self.fd
    }

    /// Slots per ring.
    pub fn slots(&self) -> u32 {
        self.slots
    }

    /// Bytes mapped (both rings and the header page).
    pub fn mapped_bytes(&self) -> usize {
        self.map.len()
    }

    fn ring_base(&self, d: Direction) -> *mut u8 {
        let at = REGION_HEADER
            + match d {
                Direction::ToProcess => 0,
                Direction::ToService => ring_bytes(self.slots),
            };
        // SAFETY: `at` is within the mapping (region_bytes).
        unsafe { self.base.as_ptr().add(at) }
    }

    fn atomic32(&self, d: Direction, off: usize) -> &AtomicU32 {
        // SAFETY: a 4-byte aligned (offsets are multiples of 64 from a
        // page-aligned base) location inside the mapping, which lives as
        // long as `self`; shared memory is accessed only atomically here.
        unsafe { &*(self.ring_base(d).add(off) as *const AtomicU32) }
    }

    /// The shared word holding ring `d`'s producer index (`producer`) or
    /// consumer index: what a broken or hostile peer may write anything
    /// into. For tests of how the other side copes.
    pub fn index_word(&self, d: Direction, producer: bool) -> &AtomicU32 {
        self.atomic32(d, if producer { PRODUCER } else { CONSUMER })
    }

    /// The producer side of ring `d` (one per ring, by protocol).
    pub fn producer(self: &Arc<Self>, d: Direction) -> Producer {
        Producer {
            pair: self.clone(),
            dir: d,
            head: self.atomic32(d, PRODUCER).load(Ordering::Acquire),
            tail: self.atomic32(d, CONSUMER).load(Ordering::Acquire),
            pending: 0,
        }
    }

    /// The consumer side of ring `d` (one per ring, by protocol).
    pub fn consumer(self: &Arc<Self>, d: Direction) -> Consumer {
        Consumer {
            pair: self.clone(),
            dir: d,
            tail: self.atomic32(d, CONSUMER).load(Ordering::Acquire),
            head: self.atomic32(d, PRODUCER).load(Ordering::Acquire),
        }
    }

    /// The process writes counter `i` (< [`REPORTED`]) for the service.
    pub fn report(&self, i: usize, v: u64) {
        if let Some(a) = self.reported(i) {
            a.store(v, Ordering::Relaxed);
        }
    }

    /// Counter `i` as the process last reported it.
    pub fn reported_value(&self, i: usize) -> u64 {
        self.reported(i).map_or(0, |a| a.load(Ordering::Relaxed))
    }

    /// The process publishes the service IDs it listens on (at most
    /// [`MAX_LISTENERS`]; more are not published). The count goes last,
    /// so a reader meanwhile sees the old list or a prefix of the new.
    pub fn set_listeners(&self, ids: &[u64]) {
        let n = ids.len().min(MAX_LISTENERS);
        self.listener_count().store(0, Ordering::Release);
        for (i, &id) in ids[..n].iter().enumerate() {
            self.listener(i).store(id, Ordering::Relaxed);
        }
        self.listener_count().store(n as u32, Ordering::Release);
    }

    /// Whether the process says it listens on `service_id` (the count it
    /// wrote is bounded by [`MAX_LISTENERS`]: it cannot make the service
    /// read outside the page).
    pub fn listens_on(&self, service_id: u64) -> bool {
        let n = (self.listener_count().load(Ordering::Acquire) as usize).min(MAX_LISTENERS);
        (0..n).any(|i| self.listener(i).load(Ordering::Relaxed) == service_id)
    }

    fn listener_count(&self) -> &AtomicU32 {
        // SAFETY: 4-byte aligned, inside the header page, lives as long as
        // `self`; accessed only atomically.
        unsafe { &*(self.base.as_ptr().add(LISTENERS_COUNT_AT) as *const AtomicU32) }
    }

    fn listener(&self, i: usize) -> &AtomicU64 {
        debug_assert!(i < MAX_LISTENERS);
        // SAFETY: 8-byte aligned, `i < MAX_LISTENERS` keeps it inside the
        // header page (264 + 8 * 256 < 4096), lives as long as `self`.
        unsafe { &*(self.base.as_ptr().add(LISTENERS_AT + 8 * i) as *const AtomicU64) }
    }

    fn reported(&self, i: usize) -> Option<&AtomicU64> {
        (i < REPORTED).then(|| {
            // SAFETY: 8-byte aligned, inside the header page, lives as long
            // as `self`; accessed only atomically.
            unsafe { &*(self.base.as_ptr().add(REPORTED_AT + 8 * i) as *const AtomicU64) }
        })
    }

    fn slot(&self, d: Direction, index: u32) -> *mut u8 {
        let i = (index & (self.slots - 1)) as usize;
        // SAFETY: `i < slots`, so the slot is inside ring `d`.
        unsafe { self.ring_base(d).add(RING_HEADER + i * SLOT_STRIDE) }
    }
}

/// Writes frames into one ring. Keeps its own index: what the peer may
/// have written over it in the mapping is never read back.
#[derive(Debug)]
pub struct Producer {
    pair: Arc<RingPair>,
    dir: Direction,
    head: u32,
    tail: u32,
    pending: u32,
}

impl Producer {
    /// Free slots (reads the consumer's index). An index that cannot come
    /// from the protocol is an error.
    pub fn free(&mut self) -> Result<u32, RingError> {
        let tail = self
            .pair
            .atomic32(self.dir, CONSUMER)
            .load(Ordering::Acquire);
        let used = self.head.wrapping_sub(tail);
        if used > self.pair.slots {
            return Err(RingError::BadIndex {
                distance: used,
                slots: self.pair.slots,
            });
        }
        self.tail = tail;
        Ok(self.pair.slots - used - self.pending)
    }

    /// Free slots as of the last [`Producer::free`] (no shared read).
    pub fn free_cached(&self) -> u32 {
        self.pair.slots - self.head.wrapping_sub(self.tail) - self.pending
    }

    /// Writes the next frame in place: `f` gets the slot's [`SLOT_ROOM`]
    /// bytes and returns the frame's length (0 or None: nothing; the slot
    /// stays free). The caller checked room ([`Producer::free`]). The frame
    /// is visible to the consumer after [`Producer::publish`].
    pub fn write_with(&mut self, f: impl FnOnce(&mut [u8]) -> Option<usize>) -> Option<usize> {
        if self.free_cached() == 0 {
            return None;
        }
        let slot = self
            .pair
            .slot(self.dir, self.head.wrapping_add(self.pending));
        // SAFETY: the slot is past the consumer's index and before ours
        // plus the ring's size: the protocol gives it to the producer alone
        // until published. A peer breaking the protocol can only change
        // bytes (u8 has no invalid value), never the mapping's bounds.
        let room = unsafe { std::slice::from_raw_parts_mut(slot.add(SLOT_HEADER), SLOT_ROOM) };
        let len = f(room).unwrap_or(0).min(SLOT_ROOM);
        if len == 0 {
            return None;
        }
        // SAFETY: the slot's length word, as above.
        unsafe { (slot as *mut u32).write_volatile(len as u32) };
        self.pending += 1;
        Some(len)
    }

    /// Copies `frame` into the next slot; false if no room or too long.
    pub fn write(&mut self, frame: &[u8]) -> bool {
        if frame.is_empty() || frame.len() > SLOT_ROOM {
            return false;
        }
        self.write_with(|room| {
            room[..frame.len()].copy_from_slice(frame);
            Some(frame.len())
        })
        .is_some()
    }

    /// Frames written and not yet published.
    pub fn pending(&self) -> u32 {
        self.pending
    }

    /// Makes the written frames visible to the consumer. Returns whether
    /// the consumer said it sleeps (ring its bell then).
    pub fn publish(&mut self) -> bool {
        if self.pending == 0 {
            return false;
        }
        self.head = self.head.wrapping_add(self.pending);
        self.pending = 0;
        self.pair
            .atomic32(self.dir, PRODUCER)
            .store(self.head, Ordering::Release);
        // Pairs with the consumer's fence in `Consumer::prepare_sleep`:
        // either it sees our frames or we see its flag.
        fence(Ordering::SeqCst);
        self.pair
            .atomic32(self.dir, WAITING)
            .load(Ordering::Relaxed)
            != 0
    }

    /// Frames published and not yet taken by the consumer (as of the last
    /// [`Producer::free`]).
    pub fn unconsumed(&self) -> u32 {
        self.head.wrapping_sub(self.tail)
    }
}

/// Takes frames from one ring. Keeps its own index.
#[derive(Debug)]
pub struct Consumer {
    pair: Arc<RingPair>,
    dir: Direction,
    tail: u32,
    head: u32,
}

impl Consumer {
    /// Frames ready (reads the producer's index, checked).
    pub fn available(&mut self) -> Result<u32, RingError> {
        let head = self
            .pair
            .atomic32(self.dir, PRODUCER)
            .load(Ordering::Acquire);
        let ready = head.wrapping_sub(self.tail);
        if ready > self.pair.slots {
            return Err(RingError::BadIndex {
                distance: ready,
                slots: self.pair.slots,
            });
        }
        self.head = head;
        Ok(ready)
    }

    fn len_of(&self, slot: *mut u8) -> Result<usize, RingError> {
        // SAFETY: the slot's length word, inside the mapping.
        let len = unsafe { (slot as *const u32).read_volatile() };
        if len == 0 || len as usize > SLOT_ROOM {
            return Err(RingError::BadLength { len });
        }
        Ok(len as usize)
    }

    /// The `i`-th ready frame, in place (for the process, which trusts
    /// the service's frames as it trusts the kernel's UMEM).
    pub fn peek(&self, i: u32) -> Result<&[u8], RingError> {
        let slot = self.pair.slot(self.dir, self.tail.wrapping_add(i));
        let len = self.len_of(slot)?;
        // SAFETY: a published slot, which the producer leaves alone until
        // we release it; `len <= SLOT_ROOM` was checked.
        Ok(unsafe { std::slice::from_raw_parts(slot.add(SLOT_HEADER), len) })
    }

    /// Copies the `i`-th ready frame into `out` (for the service: the
    /// frame is checked and used only in its copy). Returns its length.
    pub fn copy_out(&self, i: u32, out: &mut [u8]) -> Result<usize, RingError> {
        let slot = self.pair.slot(self.dir, self.tail.wrapping_add(i));
        let len = self.len_of(slot)?;
        if len > out.len() {
            return Err(RingError::BadLength { len: len as u32 });
        }
        // SAFETY: `len` bytes of the slot's room (checked against
        // SLOT_ROOM) into `out` (checked above); the regions are distinct
        // (`out` is private memory). A peer writing meanwhile changes
        // bytes of the copy only, which is checked afterwards.
        unsafe { std::ptr::copy_nonoverlapping(slot.add(SLOT_HEADER), out.as_mut_ptr(), len) };
        Ok(len)
    }

    /// Gives `n` frames back to the producer.
    pub fn release(&mut self, n: u32) {
        self.tail = self.tail.wrapping_add(n);
        self.pair
            .atomic32(self.dir, CONSUMER)
            .store(self.tail, Ordering::Release);
    }

    /// Says this consumer is about to sleep; returns false (and clears
    /// the flag) if frames arrived meanwhile, so that it must not.
    pub fn prepare_sleep(&mut self) -> Result<bool, RingError> {
        let pair = self.pair.clone();
        let flag = pair.atomic32(self.dir, WAITING);
        flag.store(1, Ordering::Relaxed);
        // Pairs with the producer's fence in `Producer::publish`.
        fence(Ordering::SeqCst);
        if self.available()? > 0 {
            flag.store(0, Ordering::Relaxed);
            return Ok(false);
        }
        Ok(true)
    }

    /// Clears the sleeping flag after a sleep.
    pub fn woke(&mut self) {
        self.pair
            .atomic32(self.dir, WAITING)
            .store(0, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_cross_in_order_and_the_ring_fills() {
        let pair = Arc::new(RingPair::create(8).unwrap());
        let mut p = pair.producer(Direction::ToService);
        assert_eq!(p.free(), Ok(8));
        for k in 0..8u8 {
            assert!(p.write(&[k; 100]));
        }
        assert!(!p.write(&[9; 100]), "full");
        assert!(!p.publish(), "nobody sleeps");
        let mut c = pair.consumer(Direction::ToService);
        assert_eq!(c.available(), Ok(8));
        let mut buf = [0u8; SLOT_ROOM];
        for k in 0..8u32 {
            assert_eq!(c.copy_out(k, &mut buf), Ok(100));
            assert_eq!(buf[..100], [k as u8; 100]);
        }
        c.release(8);
        assert_eq!(p.free(), Ok(8));
    }

    #[test]
    fn a_mapping_opened_from_the_fd_sees_the_same_frames() {
        let pair = Arc::new(RingPair::create(16).unwrap());
        let fd = pair.fd().try_clone().unwrap();
        let other = Arc::new(RingPair::open(fd, 16).unwrap());
        let mut p = pair.producer(Direction::ToProcess);
        assert_eq!(p.free(), Ok(16));
        assert!(p.write(b"hello frame"));
        p.publish();
        let mut c = other.consumer(Direction::ToProcess);
        assert_eq!(c.available(), Ok(1));
        assert_eq!(c.peek(0), Ok(&b"hello frame"[..]));
        other.report(3, 77);
        assert_eq!(pair.reported_value(3), 77);
        other.set_listeners(&[0x0106_4e20, 0x0111_4e20]);
        assert!(pair.listens_on(0x0111_4e20));
        assert!(!pair.listens_on(0x0106_4e21));
        // A count forged past the table is bounded by it.
        pair.listener_count().store(u32::MAX, Ordering::Relaxed);
        assert!(pair.listens_on(0x0106_4e20));
        assert!(RingPair::open(pair.fd().try_clone().unwrap(), 8).is_err());
    }

    #[test]
    fn a_sleeping_consumer_is_reported_to_the_producer() {
        let pair = Arc::new(RingPair::create(8).unwrap());
        let mut c = pair.consumer(Direction::ToProcess);
        assert_eq!(c.prepare_sleep(), Ok(true));
        let mut p = pair.producer(Direction::ToProcess);
        p.free().unwrap();
        assert!(p.write(b"x"));
        assert!(p.publish(), "the consumer sleeps: ring");
        c.woke();
        assert!(p.write(b"y"));
        assert!(!p.publish());
        assert_eq!(c.prepare_sleep(), Ok(false), "frames are ready");
    }

    #[test]
    fn indices_and_lengths_a_peer_forged_are_errors() {
        let pair = Arc::new(RingPair::create(8).unwrap());
        // The consumer's index written 100 slots ahead of the producer.
        pair.atomic32(Direction::ToProcess, CONSUMER)
            .store(100, Ordering::Relaxed);
        let mut p = pair.producer(Direction::ToProcess);
        assert!(matches!(p.free(), Err(RingError::BadIndex { .. })));
        // The producer's index far ahead of the consumer's.
        pair.atomic32(Direction::ToService, PRODUCER)
            .store(1 << 20, Ordering::Relaxed);
        let mut c = pair.consumer(Direction::ToService);
        assert!(matches!(c.available(), Err(RingError::BadIndex { .. })));
        // A slot claiming more than its room.
        pair.atomic32(Direction::ToService, PRODUCER)
            .store(1, Ordering::Relaxed);
        // SAFETY: the first slot's length word of a mapping we own.
        unsafe { (pair.slot(Direction::ToService, 0) as *mut u32).write(1 << 20) };
        let mut c = pair.consumer(Direction::ToService);
        assert_eq!(c.available(), Ok(1));
        let mut buf = vec![0u8; SLOT_ROOM];
        assert!(matches!(
            c.copy_out(0, &mut buf),
            Err(RingError::BadLength { .. })
        ));
    }

    #[test]
    fn the_memfd_cannot_be_shrunk_under_the_mapping() {
        let pair = Arc::new(RingPair::create(8).unwrap());
        // SAFETY: ftruncate on our own descriptor.
        let r = unsafe { libc::ftruncate(pair.fd().as_raw_fd(), 4096) };
        assert_eq!(r, -1, "the size is sealed");
        assert_eq!(io::Error::last_os_error().raw_os_error(), Some(libc::EPERM));
    }
}
