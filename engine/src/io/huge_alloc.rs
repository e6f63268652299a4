//! The global allocator of the project's programs ([`HugePageAlloc`]):
//! the system allocator for everything but large allocations, which get
//! their own anonymous mappings aligned to 2 MiB and advised
//! `MADV_HUGEPAGE`, so that the kernel backs them with transparent huge
//! pages wherever the system allows it (`transparent_hugepage/enabled` set
//! to `madvise`, the default of most distributions, or `always`).
//!
//! Why: an endpoint with tens of thousands of QPs keeps their state in a
//! few large tables (about 100 MiB for 65,536 QPs). Traffic from many
//! peers touches them in no order, and with 4 KiB pages nearly every
//! packet's QP is a TLB miss as well as a cache miss; in a virtual machine
//! a miss walks two page tables, and the CPU drops the prefetches that
//! would have hidden the cache misses (measured with
//! `examples/qp_scale_probe 65536 3 shuffled`, see `docs/architecture.md`,
//! "QP limits").
//!
//! Each large allocation is rounded up to whole 2 MiB pages: at most 2 MiB
//! more address space, and, where huge pages back it, memory a 2 MiB page
//! at a time as it is first touched. Memory from the mapping is zero, so
//! `alloc_zeroed` touches nothing (a `vec![0; n]` costs no memory until it
//! is written).

use std::alloc::{GlobalAlloc, Layout, System};
use std::ptr;

/// Size of a huge page (x86-64, aarch64 with 4 KiB base pages).
const HUGE_PAGE: usize = 2 << 20;

/// The smallest allocation that gets its own huge-page mapping. Smaller
/// ones would waste most of their 2 MiB page.
pub const HUGE_ALLOC_MIN: usize = 1 << 20;

/// The system allocator, with large allocations in huge-page mappings (see
/// the module's documentation). Install it in a program with
/// `#[global_allocator] static ALLOC: HugePageAlloc = HugePageAlloc;`.
#[derive(Debug, Default, Clone, Copy)]
pub struct HugePageAlloc;

/// Whether an allocation of `layout` gets its own mapping.
#[inline]
fn is_large(layout: Layout) -> bool {
    layout.size() >= HUGE_ALLOC_MIN && layout.align() <= HUGE_PAGE
}

/// Bytes mapped for an allocation of `size` bytes: whole huge pages.
#[inline]
fn mapped_len(size: usize) -> usize {
    size.div_ceil(HUGE_PAGE) * HUGE_PAGE
}

/// Maps `mapped_len(size)` bytes of zeroed memory at a 2 MiB boundary,
/// advised `MADV_HUGEPAGE`; null when the system has no memory for it.
fn map_huge(size: usize) -> *mut u8 {
    let len = mapped_len(size);
    let Some(over) = len.checked_add(HUGE_PAGE) else {
        return ptr::null_mut();
    };
    // SAFETY: a new private anonymous mapping, placed by the kernel: it
    // aliases no memory of the program.
    let p = unsafe {
        libc::mmap(
            ptr::null_mut(),
            over,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return ptr::null_mut();
    }
    // Keep the 2 MiB-aligned `len` bytes of the `len + 2 MiB` mapped.
    let base = p as usize;
    let start = base.next_multiple_of(HUGE_PAGE);
    let (head, tail) = (start - base, over - (start - base) - len);
    // SAFETY: both ranges lie inside the mapping just made, outside the
    // part kept, and nothing refers to them.
    unsafe {
        if head > 0 {
            libc::munmap(p, head);
        }
        if tail > 0 {
            libc::munmap((start + len) as *mut libc::c_void, tail);
        }
        // Only advice: where the system does not allow huge pages the
        // mapping keeps its base pages.
        libc::madvise(start as *mut libc::c_void, len, libc::MADV_HUGEPAGE);
    }
    start as *mut u8
}

// SAFETY: small allocations are the system allocator's. A large one is a
// mapping of its own, at least `size` bytes long and aligned to 2 MiB
// (which satisfies every alignment `is_large` admits); it is unmapped only
// by `dealloc` with the same layout, which finds the same length.
unsafe impl GlobalAlloc for HugePageAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if is_large(layout) {
            map_huge(layout.size())
        } else {
            // SAFETY: the caller's contract, passed on.
            unsafe { System.alloc(layout) }
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if is_large(layout) {
            // A new anonymous mapping is zero.
            map_huge(layout.size())
        } else {
            // SAFETY: the caller's contract, passed on.
            unsafe { System.alloc_zeroed(layout) }
        }
    }

    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        if is_large(layout) {
            // SAFETY: `p` came from `map_huge` for this layout's size
            // (the caller's contract), which mapped exactly this length.
            unsafe { libc::munmap(p.cast(), mapped_len(layout.size())) };
        } else {
            // SAFETY: the caller's contract, passed on.
            unsafe { System.dealloc(p, layout) }
        }
    }

    unsafe fn realloc(&self, p: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller guarantees a valid layout for `new_size` with
        // the same alignment.
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        match (is_large(layout), is_large(new_layout)) {
            // SAFETY: the caller's contract, passed on.
            (false, false) => unsafe { System.realloc(p, layout, new_size) },
            // Still inside the same mapping: nothing to move.
            (true, true) if mapped_len(new_size) == mapped_len(layout.size()) => p,
            _ => {
                // SAFETY: `new_layout` is valid (above); `q` and `p` are two
                // live allocations, so they do not overlap, and both hold
                // the bytes copied.
                unsafe {
                    let q = self.alloc(new_layout);
                    if !q.is_null() {
                        ptr::copy_nonoverlapping(p, q, layout.size().min(new_size));
                        self.dealloc(p, layout);
                    }
                    q
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_allocations_are_aligned_zeroed_and_keep_their_bytes_when_moved() {
        let a = HugePageAlloc;
        let l = Layout::from_size_align(3 << 20, 8).unwrap();
        unsafe {
            let p = a.alloc_zeroed(l);
            assert!(!p.is_null());
            assert_eq!(p as usize % HUGE_PAGE, 0, "2 MiB aligned");
            let s = std::slice::from_raw_parts_mut(p, l.size());
            assert!(s.iter().all(|&b| b == 0), "zeroed");
            s[0] = 1;
            s[l.size() - 1] = 2;
            // Grows within its 4 MiB mapping: stays.
            let q = a.realloc(p, l, (4 << 20) - 1);
            assert_eq!(q, p);
            let l = Layout::from_size_align((4 << 20) - 1, 8).unwrap();
            // Grows past it: moves, with its bytes.
            let r = a.realloc(q, l, 9 << 20);
            let s = std::slice::from_raw_parts(r, 3 << 20);
            assert_eq!((s[0], s[(3 << 20) - 1]), (1, 2));
            let l = Layout::from_size_align(9 << 20, 8).unwrap();
            // Shrinks to a small allocation: the system allocator's.
            let t = a.realloc(r, l, 100);
            assert_eq!(*t, 1);
            a.dealloc(t, Layout::from_size_align(100, 8).unwrap());
        }
    }

    #[test]
    fn small_allocations_and_over_aligned_ones_are_the_system_allocators() {
        assert!(!is_large(
            Layout::from_size_align(HUGE_ALLOC_MIN - 1, 8).unwrap()
        ));
        assert!(is_large(
            Layout::from_size_align(HUGE_ALLOC_MIN, 8).unwrap()
        ));
        assert!(!is_large(
            Layout::from_size_align(4 << 20, 4 << 20).unwrap()
        ));
        assert_eq!(mapped_len(1), HUGE_PAGE);
        assert_eq!(mapped_len(HUGE_PAGE + 1), 2 * HUGE_PAGE);
    }
}
