//! Software prefetch: asking the CPU to bring memory into its caches
//! before it is read.

use crate::endpoint::MemoryRange;

/// Cache line size assumed by [`prefetch`].
const LINE: usize = 64;

/// Asks the CPU to bring every cache line of `*v` into its caches, to be
/// read soon. Only a hint: it reads nothing the program sees, never
/// faults, and changes no result; on other architectures than x86-64 it
/// does nothing.
#[inline]
pub fn prefetch<T>(v: &T) {
    prefetch_range(MemoryRange {
        addr: v as *const T as usize,
        len: core::mem::size_of::<T>(),
    })
}

/// As [`prefetch`], for every cache line of the range `r` (an address the
/// endpoint handed out, e.g. [`Endpoint::qp_state_hint`]). The range need
/// not be live any more: a prefetch never faults and reads nothing the
/// program sees.
///
/// [`Endpoint::qp_state_hint`]: crate::endpoint::Endpoint::qp_state_hint
#[inline]
pub fn prefetch_range(r: MemoryRange) {
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // Every line the range touches, the first one from its start.
        let mut line = r.addr & !(LINE - 1);
        let end = r.addr.saturating_add(r.len);
        while line < end {
            // SAFETY: PREFETCHT0 is part of SSE, which every x86-64 CPU
            // has; it only hints the cache hierarchy and never faults,
            // whatever the address (no memory is read through it).
            unsafe { _mm_prefetch::<_MM_HINT_T0>(line as *const i8) };
            line += LINE;
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = r;
}
