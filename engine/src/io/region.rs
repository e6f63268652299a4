//! Registered memory shared between application threads and the engine
//! thread: one anonymous mapping, accessed only by bounded copies.
//!
//! As with hardware RDMA, the contract is that the application does not
//! touch a range while a work request on it is outstanding; the engine
//! only copies bytes in and out (no long-lived references into the
//! region are ever created), so a violation yields unspecified bytes in
//! that range, never an out-of-bounds access.

use std::io;
use std::sync::atomic::AtomicU64;

use super::sys::Mapping;

/// A fixed-size, zero-initialised memory region shareable across threads
/// (wrap it in an `Arc`).
#[derive(Debug)]
pub struct SharedRegion {
    map: Mapping,
}

impl SharedRegion {
    /// Maps `len` zeroed bytes (at least one page is mapped).
    pub fn new(len: usize) -> io::Result<SharedRegion> {
        let map = Mapping::anonymous_shared(len.max(1))?;
        Ok(SharedRegion { map })
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether the region is empty (never).
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Base address as an integer (the virtual address a peer uses in
    /// RETH/AtomicETH when the region is registered with its real address).
    pub fn addr(&self) -> u64 {
        self.map.as_ptr() as u64
    }

    fn check(&self, offset: usize, len: usize) -> Option<usize> {
        let end = offset.checked_add(len)?;
        (end <= self.map.len()).then_some(offset)
    }

    /// Copies `out.len()` bytes at `offset` into `out`; false if out of bounds.
    pub fn read(&self, offset: usize, out: &mut [u8]) -> bool {
        let Some(off) = self.check(offset, out.len()) else {
            return false;
        };
        // SAFETY: [off, off+len) is inside the mapping (checked); `out` is a
        // distinct Rust buffer; the copy creates no reference into the region.
        unsafe {
            std::ptr::copy_nonoverlapping(self.map.as_ptr().add(off), out.as_mut_ptr(), out.len())
        };
        true
    }

    /// Copies `data` into the region at `offset`; false if out of bounds.
    pub fn write(&self, offset: usize, data: &[u8]) -> bool {
        let Some(off) = self.check(offset, data.len()) else {
            return false;
        };
        // SAFETY: as in `read`, in the other direction.
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), self.map.as_ptr().add(off), data.len())
        };
        true
    }

    /// The 8-byte-aligned word at `offset` as an atomic, for RDMA atomics
    /// (None if out of bounds or misaligned).
    pub fn atomic_u64(&self, offset: usize) -> Option<&AtomicU64> {
        if !offset.is_multiple_of(8) {
            return None;
        }
        let off = self.check(offset, 8)?;
        // SAFETY: in bounds and 8-byte aligned (the mapping is page
        // aligned); AtomicU64 has the layout of u64 and every access to
        // the region from here on is either a copy or this atomic.
        Some(unsafe { &*(self.map.as_ptr().add(off) as *const AtomicU64) })
    }
}

/// A [`SharedRegion`] registered with an endpoint: the engine thread
/// accesses it through [`RegionMemory`](crate::rc::RegionMemory), the application through the
/// `SharedRegion` (copies).
#[derive(Debug, Clone)]
pub struct RegisteredRegion(pub std::sync::Arc<SharedRegion>);

impl crate::rc::RegionMemory for RegisteredRegion {
    fn len(&self) -> usize {
        self.0.len()
    }

    fn as_slice(&self) -> &[u8] {
        // SAFETY: the mapping lives as long as the Arc we hold. Other
        // threads may only copy into or out of ranges that have no work
        // request outstanding (the RDMA ownership contract, see the module
        // docs), so the engine's view of the ranges it touches is stable.
        unsafe { std::slice::from_raw_parts(self.0.map.as_ptr(), self.0.len()) }
    }

    fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as in `as_slice`; the endpoint is the only holder of a
        // RegisteredRegion for this mapping that creates references.
        unsafe { std::slice::from_raw_parts_mut(self.0.map.as_ptr(), self.0.len()) }
    }
}
