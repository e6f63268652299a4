//! Where the harness runs the engine's threads: with one queue per side,
//! one pinned engine thread each (side a's on the first core, side b's on
//! the second; the 2-queue scaling run floats, see `engine_path`), and
//! the application thread that posts the work requests on the core of
//! the side that does *not* send the data, as the engine's design asks
//! ("applications post work ... without touching the engine's core"). On
//! a machine with fewer than two cores nothing is pinned. The baselines
//! are not pinned (see the harness's placement note).

use std::sync::OnceLock;

/// The two cores of sides a and b, or `None` with fewer than two cores.
/// Taken from the affinity of the first thread that asks (the harness's
/// main thread, before it pins anything) and remembered.
pub fn side_cores() -> Option<[usize; 2]> {
    static CORES: OnceLock<Option<[usize; 2]>> = OnceLock::new();
    *CORES.get_or_init(|| {
        let ids = core_affinity::get_core_ids()?;
        (ids.len() >= 2).then(|| [ids[0].id, ids[1].id])
    })
}

/// Pins the calling thread to `core` (nothing when `None`).
pub fn pin_current(core: Option<usize>) {
    if let Some(id) = core {
        let _ = core_affinity::set_for_current(core_affinity::CoreId { id });
    }
}

/// The calling thread's CPU affinity mask.
fn current_mask() -> libc::cpu_set_t {
    #[allow(unsafe_code)]
    // SAFETY: all-zero is a valid (empty) `cpu_set_t`; sched_getaffinity
    // writes at most the `size_of::<cpu_set_t>()` bytes we pass, into a
    // set we own, for the calling thread (pid 0).
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set);
        set
    }
}

/// Sets the calling thread's CPU affinity mask.
fn set_mask(set: &libc::cpu_set_t) {
    #[allow(unsafe_code)]
    // SAFETY: sched_setaffinity reads `size_of::<cpu_set_t>()` bytes of a
    // set we own and changes only the calling thread (pid 0).
    unsafe {
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), set);
    }
}

/// Pins the calling thread to a core until the guard drops, then puts
/// its previous affinity back.
pub struct Pinned {
    previous: Option<libc::cpu_set_t>,
}

impl Pinned {
    /// Pins the calling thread to `core` (a no-op guard when `None`).
    pub fn to(core: Option<usize>) -> Pinned {
        let previous = core.map(|_| current_mask());
        pin_current(core);
        Pinned { previous }
    }
}

impl Drop for Pinned {
    fn drop(&mut self) {
        if let Some(set) = &self.previous {
            set_mask(set);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn has(set: &libc::cpu_set_t, id: usize) -> bool {
        #[allow(unsafe_code)]
        // SAFETY: reads one bit of a set we own; ids come from the kernel's
        // own list of cores (below CPU_SETSIZE).
        unsafe {
            libc::CPU_ISSET(id, set)
        }
    }

    #[test]
    fn pinning_moves_the_thread_and_the_guard_restores_it() {
        let Some([a, b]) = side_cores() else {
            eprintln!("skipping: fewer than two cores");
            return;
        };
        assert_ne!(a, b);
        std::thread::spawn(move || {
            let before = current_mask();
            {
                let _g = Pinned::to(Some(b));
                let s = current_mask();
                assert!(has(&s, b) && !has(&s, a));
            }
            let after = current_mask();
            assert_eq!(has(&after, a), has(&before, a));
            assert_eq!(has(&after, b), has(&before, b));
            assert!(has(&after, a) && has(&after, b));
            // A guard for no core changes nothing.
            drop(Pinned::to(None));
            assert!(has(&current_mask(), a));
        })
        .join()
        .unwrap();
    }
}
