//! [`MemoryRegion`]: registered shared memory the application reads and
//! writes by copies, with the keys work requests and peers name it by.

use std::sync::Arc;

use crate::io::SharedRegion;
use crate::rc::Sge;

/// A registered memory region: shared memory the application reads and
/// writes by copies, and keys for work requests and peers.
#[derive(Debug, Clone)]
pub struct MemoryRegion {
    region: Arc<SharedRegion>,
    pub lkey: u32,
    pub rkey: u32,
    pub queue: u32,
}

impl MemoryRegion {
    /// A region registered on queue `queue` with keys `lkey`/`rkey`.
    pub(crate) fn new(region: Arc<SharedRegion>, lkey: u32, rkey: u32, queue: u32) -> Self {
        MemoryRegion {
            region,
            lkey,
            rkey,
            queue,
        }
    }

    /// I/O virtual address of byte 0 (give it to peers with the rkey).
    pub fn addr(&self) -> u64 {
        self.region.addr()
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.region.len()
    }

    /// Whether the region is empty (never).
    pub fn is_empty(&self) -> bool {
        self.region.is_empty()
    }

    /// Copies bytes out of the region; false if out of bounds.
    pub fn read(&self, offset: usize, out: &mut [u8]) -> bool {
        self.region.read(offset, out)
    }

    /// Copies bytes into the region; false if out of bounds.
    pub fn write(&self, offset: usize, data: &[u8]) -> bool {
        self.region.write(offset, data)
    }

    /// A scatter/gather entry for `len` bytes at `offset`.
    pub fn sge(&self, offset: usize, len: u32) -> Sge {
        Sge {
            lkey: self.lkey,
            addr: self.addr() + offset as u64,
            length: len,
        }
    }
}
