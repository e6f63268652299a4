//! CPU time of the calling thread and of the whole process, and the CPU
//! affinity of the calling thread: safe wrappers over `clock_gettime` and
//! `sched_{get,set}affinity`, for the engine's own accounting and for
//! callers that measure the engine (the benchmark harness) and must put a
//! thread's placement back after moving it.

use std::fmt;
use std::io;
use std::time::Duration;

/// CPU time the calling thread has used so far (user + system, including
/// the kernel work its system calls do), from `CLOCK_THREAD_CPUTIME_ID`;
/// zero if the clock cannot be read.
pub fn thread_cpu_time() -> Duration {
    cpu_clock(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// CPU time the whole process has used so far (user + system, every
/// thread, including the kernel work their system calls do), from
/// `CLOCK_PROCESS_CPUTIME_ID`; zero if the clock cannot be read.
pub fn process_cpu_time() -> Duration {
    cpu_clock(libc::CLOCK_PROCESS_CPUTIME_ID)
}

fn cpu_clock(clock: libc::clockid_t) -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec we own.
    let r = unsafe { libc::clock_gettime(clock, &mut ts) };
    if r != 0 {
        return Duration::ZERO;
    }
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// A set of CPUs, as the kernel's affinity calls take it (`cpu_set_t`).
#[derive(Clone, Copy)]
pub struct CpuSet(libc::cpu_set_t);

impl CpuSet {
    /// Number of CPUs a set can name (`CPU_SETSIZE`): ids are below it.
    pub const CAPACITY: usize = libc::CPU_SETSIZE as usize;

    /// The CPUs the calling thread may run on (`sched_getaffinity(0)`).
    pub fn of_current_thread() -> io::Result<CpuSet> {
        // SAFETY: all-zero is a valid (empty) `cpu_set_t`.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        // SAFETY: sched_getaffinity writes at most the
        // `size_of::<cpu_set_t>()` bytes we pass, into a set we own, for the
        // calling thread (pid 0).
        let r =
            unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(CpuSet(set))
    }

    /// Restricts the calling thread to this set (`sched_setaffinity(0)`).
    /// Fails (EINVAL) if the set names no CPU the thread may use.
    pub fn apply_to_current_thread(&self) -> io::Result<()> {
        // SAFETY: sched_setaffinity reads `size_of::<cpu_set_t>()` bytes of
        // a set we own and changes only the calling thread (pid 0).
        let r =
            unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &self.0) };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Whether CPU `id` is in the set (false for ids beyond [`Self::CAPACITY`]).
    pub fn contains(&self, id: usize) -> bool {
        // SAFETY: CPU_ISSET reads one bit of a set we own; the id is below
        // CPU_SETSIZE, so the bit lies inside the set.
        id < Self::CAPACITY && unsafe { libc::CPU_ISSET(id, &self.0) }
    }

    /// The CPU ids in the set, in increasing order.
    pub fn ids(&self) -> impl Iterator<Item = usize> + '_ {
        (0..Self::CAPACITY).filter(|&id| self.contains(id))
    }
}

impl fmt::Debug for CpuSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.ids()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_cpu_time_counts_this_threads_work_only() {
        let t0 = thread_cpu_time();
        let wall = std::time::Instant::now();
        let mut x = 0u64;
        while wall.elapsed() < Duration::from_millis(20) {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
        }
        let used = thread_cpu_time() - t0;
        assert!(used > Duration::from_millis(1), "{used:?}");
        assert!(
            used <= wall.elapsed() + Duration::from_millis(1),
            "{used:?}"
        );
        // Another thread's work is not ours: a sleeping thread uses ~nothing.
        let other = std::thread::spawn(|| {
            let t = thread_cpu_time();
            std::thread::sleep(Duration::from_millis(20));
            thread_cpu_time() - t
        })
        .join()
        .unwrap();
        assert!(other < Duration::from_millis(5), "{other:?}");
    }

    #[test]
    fn process_cpu_time_counts_every_thread() {
        // Each thread works until its own CPU clock shows 10 ms (however
        // busy the machine is); the process's clock covers both.
        let work = || {
            let t0 = thread_cpu_time();
            let mut x = 0u64;
            while thread_cpu_time() - t0 < Duration::from_millis(10) {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
            }
            thread_cpu_time() - t0
        };
        let p0 = process_cpu_time();
        let other = std::thread::spawn(work);
        let mine = work();
        let theirs = other.join().unwrap();
        let used = process_cpu_time() - p0;
        assert!(used >= mine + theirs, "{used:?} < {mine:?} + {theirs:?}");
    }

    #[test]
    fn affinity_of_a_thread_round_trips() {
        std::thread::spawn(|| {
            let all = CpuSet::of_current_thread().unwrap();
            let ids: Vec<usize> = all.ids().collect();
            assert!(!ids.is_empty(), "{all:?}");
            assert!(!all.contains(CpuSet::CAPACITY));
            // Putting the same set back changes nothing and succeeds.
            all.apply_to_current_thread().unwrap();
            let again = CpuSet::of_current_thread().unwrap();
            assert_eq!(again.ids().collect::<Vec<_>>(), ids);
        })
        .join()
        .unwrap();
    }
}
