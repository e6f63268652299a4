//! `fork`: a child of a process that used this library cannot use what its
//! parent opened (the CM thread did not follow it; the device, its QP 1 and
//! its memory belong to the parent's engine). As a kernel-backed
//! librdmacm's child opens its own ids, so does ours: every `fork` starts a
//! new generation, and the process-wide state ([`crate::state`], the
//! device) made in an older one is left alone (leaked, never touched) and
//! made anew at first use in the child. Python's `multiprocessing`, which
//! rdma-core's own tests use, forks each side of a connection from one
//! parent.

use std::sync::atomic::{AtomicU64, Ordering};

static GENERATION: AtomicU64 = AtomicU64::new(0);

/// The current generation (0 until the process forks).
pub fn generation() -> u64 {
    GENERATION.load(Ordering::Acquire)
}

/// Counts forks from now on (once; idempotent).
pub fn watch() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    // SAFETY: registers a plain function for the child only; it only adds
    // to an atomic (async-signal-safe).
    ONCE.call_once(|| unsafe {
        libc::pthread_atfork(None, None, Some(forked_child));
    });
}

extern "C" fn forked_child() {
    GENERATION.fetch_add(1, Ordering::AcqRel);
}

/// A process-wide value made anew in each generation: `get` returns the
/// current generation's, making it with `make` if needed. Values of older
/// generations are leaked (a child must not touch or drop its parent's).
pub struct PerGeneration<T: 'static> {
    current: std::sync::atomic::AtomicPtr<(u64, T)>,
    making: std::sync::Mutex<()>,
}

impl<T: 'static> PerGeneration<T> {
    pub const fn new() -> PerGeneration<T> {
        PerGeneration {
            current: std::sync::atomic::AtomicPtr::new(std::ptr::null_mut()),
            making: std::sync::Mutex::new(()),
        }
    }

    /// This generation's value, made by `make` on first use.
    pub fn get(&'static self, make: impl FnOnce() -> T) -> &'static T {
        let g = generation();
        let p = self.current.load(Ordering::Acquire);
        // SAFETY: a non-null pointer is a leaked Box, never freed.
        if let Some((gen, v)) = unsafe { p.as_ref() } {
            if *gen == g {
                return v;
            }
        }
        self.make(g, make)
    }

    /// This generation's value if it was made.
    pub fn made(&'static self) -> Option<&'static T> {
        let p = self.current.load(Ordering::Acquire);
        // SAFETY: as in `get`.
        unsafe { p.as_ref() }
            .filter(|(gen, _)| *gen == generation())
            .map(|(_, v)| v)
    }

    #[cold]
    fn make(&'static self, g: u64, make: impl FnOnce() -> T) -> &'static T {
        watch();
        // A fork while another thread was making the value leaves this
        // lock held in the child; the child's value is made without it
        // then (nobody else runs there yet).
        let _making = match self.making.try_lock() {
            Ok(guard) => Some(guard),
            Err(std::sync::TryLockError::Poisoned(e)) => Some(e.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) if g > 0 => None,
            Err(std::sync::TryLockError::WouldBlock) => {
                Some(self.making.lock().unwrap_or_else(|e| e.into_inner()))
            }
        };
        let p = self.current.load(Ordering::Acquire);
        // SAFETY: as in `get`.
        if let Some((gen, v)) = unsafe { p.as_ref() } {
            if *gen == g {
                return v;
            }
        }
        let made: &'static (u64, T) = Box::leak(Box::new((g, make())));
        self.current
            .store(made as *const _ as *mut (u64, T), Ordering::Release);
        &made.1
    }
}
