//! Software prefetch: asking the CPU to bring memory into its caches
//! before it is read.

/// Cache line size assumed by [`prefetch`].
const LINE: usize = 64;

/// Asks the CPU to bring every cache line of `*v` into its caches, to be
/// read soon. Only a hint: it reads nothing the program sees, never
/// faults, and changes no result; on other architectures than x86-64 it
/// does nothing.
#[inline]
pub fn prefetch<T>(v: &T) {
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let p = (v as *const T).cast::<i8>();
        let mut off = 0;
        while off < core::mem::size_of::<T>() {
            // SAFETY: PREFETCHT0 is part of SSE, which every x86-64 CPU
            // has; it only hints the cache hierarchy, never faults, and
            // `p + off` stays inside `*v`, a live reference.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(p.add(off)) };
            off += LINE;
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = v;
}
