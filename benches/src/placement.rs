//! Where the harness runs the engine's threads: with one queue per side,
//! one pinned engine thread each (side a's on the first core, side b's on
//! the second; the 2-queue scaling run floats, see `engine_path`), and
//! the application thread that posts the work requests on the core of
//! the side that does *not* send the data, as the engine's design asks
//! ("applications post work ... without touching the engine's core"). On
//! a machine with fewer than two cores nothing is pinned. The baselines
//! are not pinned (see the harness's placement note).

use std::sync::OnceLock;

use engine::io::CpuSet;

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

/// Pins the calling thread to a core until the guard drops, then puts
/// its previous affinity back.
pub struct Pinned {
    previous: Option<CpuSet>,
}

impl Pinned {
    /// Pins the calling thread to `core` (a no-op guard when `None`).
    pub fn to(core: Option<usize>) -> Pinned {
        let previous = core.and_then(|_| CpuSet::of_current_thread().ok());
        pin_current(core);
        Pinned { previous }
    }
}

impl Drop for Pinned {
    fn drop(&mut self) {
        if let Some(set) = &self.previous {
            let _ = set.apply_to_current_thread();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn current_mask() -> CpuSet {
        CpuSet::of_current_thread().unwrap()
    }

    #[test]
    fn pinning_moves_the_thread_and_the_guard_restores_it() {
        let [a, b] = side_cores().expect("this test needs at least two cores");
        assert_ne!(a, b);
        std::thread::spawn(move || {
            let before = current_mask();
            {
                let _g = Pinned::to(Some(b));
                let s = current_mask();
                assert!(s.contains(b) && !s.contains(a));
            }
            let after = current_mask();
            assert_eq!(after.contains(a), before.contains(a));
            assert_eq!(after.contains(b), before.contains(b));
            assert!(after.contains(a) && after.contains(b));
            // A guard for no core changes nothing.
            drop(Pinned::to(None));
            assert!(current_mask().contains(a));
        })
        .join()
        .unwrap();
    }
}
