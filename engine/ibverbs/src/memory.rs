//! Memory the program owns, registered as it is (`ibv_reg_mr`): the engine
//! reads and writes the program's own bytes, no copy in between.

use engine::rc::RegionMemory;

/// `len` bytes at `ptr`, owned by the program.
pub struct ForeignMemory {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the engine runs on the program's threads; the memory is the
// program's and outlives the registration (the verbs contract:
// `ibv_dereg_mr` before freeing it).
unsafe impl Send for ForeignMemory {}

impl ForeignMemory {
    /// # Safety
    /// `ptr..ptr+len` must stay mapped and writable until the region is
    /// deregistered, and the program must not touch a range while a work
    /// request on it is outstanding (the RDMA ownership contract, as for
    /// engine::io::RegisteredRegion).
    pub unsafe fn new(ptr: *mut u8, len: usize) -> ForeignMemory {
        ForeignMemory { ptr, len }
    }
}

impl RegionMemory for ForeignMemory {
    fn len(&self) -> usize {
        self.len
    }

    fn as_slice(&self) -> &[u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: see `new`.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    fn as_mut_slice(&mut self) -> &mut [u8] {
        if self.len == 0 {
            return &mut [];
        }
        // SAFETY: see `new`.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}
