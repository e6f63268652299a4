//! Threads the engine starts inside somebody else's program (the drop-in
//! libibverbs' progress thread, the stats channel): they take none of the
//! program's signals.
//!
//! A process-directed signal (SIGALRM of a timer, SIGINT, SIGCHLD, ...)
//! goes to any thread that does not block it. rdma-core's libraries start
//! no threads, so a verbs program's signals reach its own threads and
//! interrupt what they wait in (qperf's latency loop leaves a blocking
//! `ibv_get_cq_event` by its timer's EINTR; Python runs its handlers on
//! its main thread). A thread of ours that took such a signal would run
//! the program's handler where the program does not expect it and leave
//! the program's own wait uninterrupted.

use std::io;
use std::thread::{Builder, JoinHandle};

/// Signals raised by the faulting thread itself; blocking them would not
/// stop them (the kernel forces them through) and only lose their
/// handlers (Rust's stack-overflow message, a program's SIGSEGV handler).
const SYNCHRONOUS: [libc::c_int; 5] = [
    libc::SIGSEGV,
    libc::SIGBUS,
    libc::SIGFPE,
    libc::SIGILL,
    libc::SIGTRAP,
];

/// Spawns `f` on a thread of `builder` that blocks every asynchronous
/// signal from its first instruction: the calling thread's mask is
/// widened around the spawn (a new thread inherits it) and restored
/// after, so there is no moment at which the new thread could take one.
pub fn spawn_without_signals<F, T>(builder: Builder, f: F) -> io::Result<JoinHandle<T>>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    // SAFETY: sigset_t is plain data that sigfillset initialises; the
    // masks are live locals; pthread_sigmask only changes this thread's
    // mask, and the old one is put back before returning.
    unsafe {
        let mut blocked: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut blocked);
        for s in SYNCHRONOUS {
            libc::sigdelset(&mut blocked, s);
        }
        libc::pthread_sigmask(libc::SIG_BLOCK, &blocked, &mut old);
        let spawned = builder.spawn(f);
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        spawned
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This thread's mask has `signal` blocked.
    fn blocks(signal: libc::c_int) -> bool {
        // SAFETY: reads this thread's mask into a live local.
        unsafe {
            let mut mask: libc::sigset_t = std::mem::zeroed();
            libc::pthread_sigmask(libc::SIG_BLOCK, std::ptr::null(), &mut mask);
            libc::sigismember(&mask, signal) == 1
        }
    }

    #[test]
    fn the_thread_blocks_asynchronous_signals_and_the_caller_keeps_its_mask() {
        let before = (blocks(libc::SIGALRM), blocks(libc::SIGINT));
        let inside = spawn_without_signals(Builder::new(), || {
            (
                blocks(libc::SIGALRM),
                blocks(libc::SIGINT),
                blocks(libc::SIGCHLD),
                blocks(libc::SIGSEGV),
            )
        })
        .unwrap()
        .join()
        .unwrap();
        assert_eq!(inside, (true, true, true, false));
        assert_eq!((blocks(libc::SIGALRM), blocks(libc::SIGINT)), before);
    }
}
