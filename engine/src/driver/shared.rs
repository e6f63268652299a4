//! What an engine thread shares with the applications of its queue and
//! with the other engine threads of its device: the work, completion and
//! post-error queues, the hand-off inbox (frames, QPs and posts from other
//! queues), the wake-up of a sleeping engine or a waiting application, and
//! the statistics snapshot ([`QueueStats`]).

use std::sync::atomic::{fence, AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use crossbeam_queue::ArrayQueue;

use crate::endpoint::Endpoint;
use crate::io::{Waker, XskCounters, XskStatistics};
use crate::rc::{Counters, Qp, RecvWr, SendWr, Sge, VerbsError, WorkCompletion};
use crate::ud::UdSendWr;

/// A control operation run on the engine thread with exclusive access to
/// the endpoint (QP creation, connection, memory registration, ...).
pub type Control = Box<dyn FnOnce(&mut Endpoint, u32) + Send>;

/// Work posted by applications.
pub enum Work {
    Send {
        qpn: u32,
        wr: SendWr,
    },
    Recv {
        qpn: u32,
        wr: RecvWr,
    },
    /// A send request whose data is gathered from `sges` (more than one
    /// SGE: the one-SGE path above carries no list).
    SendList {
        qpn: u32,
        wr: SendWr,
        sges: Box<[Sge]>,
    },
    /// A SEND or WRITE carrying `data` inline (copied at post time).
    SendInline {
        qpn: u32,
        wr: SendWr,
        data: Box<[u8]>,
    },
    /// A receive whose buffer is the list `sges`.
    RecvList {
        qpn: u32,
        wr_id: u64,
        sges: Box<[Sge]>,
    },
    /// A send to UD QP `qpn` (`crate::ud`).
    UdSend {
        qpn: u32,
        wr: UdSendWr,
    },
    /// A receive for UD QP `qpn`.
    UdRecv {
        qpn: u32,
        wr: RecvWr,
    },
    /// A control operation on the endpoint, not about one QP (memory
    /// registration, QP creation).
    Control(Control),
    /// A control operation on QP `qpn` (connect, modify, query, destroy):
    /// it runs on whichever queue holds the QP.
    QpControl {
        qpn: u32,
        f: Control,
    },
}

impl Work {
    /// The QP this work is about (`None` for a control operation that is
    /// about none).
    #[inline]
    pub(crate) fn qpn(&self) -> Option<u32> {
        match self {
            Work::Send { qpn, .. }
            | Work::Recv { qpn, .. }
            | Work::SendList { qpn, .. }
            | Work::SendInline { qpn, .. }
            | Work::RecvList { qpn, .. }
            | Work::UdSend { qpn, .. }
            | Work::UdRecv { qpn, .. }
            | Work::QpControl { qpn, .. } => Some(*qpn),
            Work::Control(_) => None,
        }
    }
}

/// A post the endpoint refused (returned to the application).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PostError {
    pub qpn: u32,
    pub wr_id: u64,
    pub error: VerbsError,
}

/// Per-queue statistics, refreshed by the engine thread every few
/// milliseconds and when it stops.
#[derive(Debug, Clone, Copy, Default)]
pub struct QueueStats {
    pub transport: Counters,
    pub socket: XskCounters,
    pub kernel: XskStatistics,
    /// Loop iterations and sleeps (to see how busy the thread was).
    pub loops: u64,
    /// CPU time the engine thread has used (user + system, including the
    /// kernel's transmit work done in its system calls), as of the snapshot.
    pub thread_cpu: Duration,
    pub sleeps: u64,
    /// Completions waiting because the application's queue was full.
    pub completion_backlog_events: u64,
    /// Times the engine thread woke an application thread parked in
    /// `wait_cq` / `poll_cq_wait` after pushing completions: each a futex
    /// wake of another thread, paid by the engine thread (on a VM, with an
    /// inter-processor interrupt: several microseconds each).
    pub app_wakes: u64,
    /// Times a post woke the engine thread from its sleep in poll(2) (an
    /// eventfd write by the posting thread, and the engine thread's
    /// wake-up latency on the post's path).
    pub woken_by_posts: u64,
    /// Frames this queue received for a QP another queue holds, handed to
    /// that queue (`rx_handoff`): packets that took a detour. None or
    /// nearly none in steady state, once QPs are homed on the queue RSS
    /// picks for them (`docs/multi-queue.md`).
    pub rx_handoff: u64,
    /// Hand-offs that found the pool of hand-off buffers empty or the
    /// other queue's inbox full: dropped (the peer retransmits).
    pub rx_handoff_dropped: u64,
    /// Frames other queues handed to this one.
    pub handoff_received: u64,
    /// QPs that moved to this queue because their packets arrive here.
    pub qp_migrations: u64,
    /// Posts and control operations this queue passed on to the queue
    /// that holds their QP.
    pub work_forwarded: u64,
    /// Frames this queue's engine sent to its own address (two QPs of the
    /// device connected to each other) and received itself instead of
    /// putting them on the wire, and their bytes.
    pub loopback_frames: u64,
    pub loopback_bytes: u64,
    /// Current DCQCN rate of the queue's QPs (filled when published).
    pub qp_rates: QpRates,
}

/// Most QPs whose rate one [`QueueStats`] carries.
pub const MAX_REPORTED_QPS: usize = 64;

/// Current DCQCN rate, bit/s, of up to [`MAX_REPORTED_QPS`] QPs: a fixed
/// array so that [`QueueStats`] stays `Copy` and publishing it allocates
/// nothing.
#[derive(Debug, Clone, Copy)]
pub struct QpRates {
    len: usize,
    entries: [(u32, f64); MAX_REPORTED_QPS],
    /// QPs beyond [`MAX_REPORTED_QPS`], not reported.
    omitted: usize,
}

impl Default for QpRates {
    fn default() -> Self {
        QpRates {
            len: 0,
            entries: [(0, 0.0); MAX_REPORTED_QPS],
            omitted: 0,
        }
    }
}

impl QpRates {
    /// Replaces the contents with `rates` (`(qpn, bit/s)`), keeping the
    /// first [`MAX_REPORTED_QPS`] and counting the rest as omitted.
    ///
    /// Takes at most [`MAX_REPORTED_QPS`] items: the rest are counted from
    /// the iterator's size hint when it is exact (as
    /// `Endpoint::qp_rates`'s is), so that publishing the statistics of an
    /// endpoint with 65,536 QPs does not walk them; walked otherwise.
    pub fn fill(&mut self, mut rates: impl Iterator<Item = (u32, f64)>) {
        self.len = 0;
        for slot in &mut self.entries {
            let Some(r) = rates.next() else { break };
            *slot = r;
            self.len += 1;
        }
        self.omitted = match rates.size_hint() {
            (lo, Some(hi)) if lo == hi => lo,
            _ => rates.count(),
        };
    }

    /// The reported `(qpn, bit/s)` pairs.
    pub fn as_slice(&self) -> &[(u32, f64)] {
        &self.entries[..self.len]
    }

    /// How many QPs did not fit.
    pub fn omitted(&self) -> usize {
        self.omitted
    }
}

/// State shared between the engine thread and applications.
pub struct Shared {
    pub(crate) work: ArrayQueue<Work>,
    pub(crate) completions: ArrayQueue<WorkCompletion>,
    pub(crate) post_errors: ArrayQueue<PostError>,
    /// Frames, QPs and forwarded posts from other queues' engine threads.
    pub(super) handoff: ArrayQueue<Handoff>,
    pub(super) stop: AtomicBool,
    pub(super) sleeping: AtomicBool,
    pub(super) waker: Waker,
    /// Posts that found the engine thread asleep and woke it.
    pub(super) woken_by_posts: AtomicU64,
    /// An application thread blocked in [`Shared::wait_completion`]
    /// (unparked by the engine thread after it pushes completions).
    cq_waiting: AtomicBool,
    cq_waiter: Mutex<Option<std::thread::Thread>>,
    pub(super) stats: Mutex<QueueStats>,
    /// An application thread drives this queue's engine itself
    /// (`Driver::drive`); the engine thread waits meanwhile.
    pub(super) claimed: AtomicBool,
    /// Which thread drives it ([`thread_token`]; 0: none).
    pub(super) driven_by: AtomicU64,
}

impl Shared {
    /// Queues of `depth` entries each (at least 16).
    pub(crate) fn new(depth: usize) -> std::io::Result<Shared> {
        let depth = depth.max(16);
        Ok(Shared {
            work: ArrayQueue::new(depth),
            completions: ArrayQueue::new(depth),
            post_errors: ArrayQueue::new(depth),
            handoff: ArrayQueue::new(depth),
            stop: AtomicBool::new(false),
            sleeping: AtomicBool::new(false),
            woken_by_posts: AtomicU64::new(0),
            waker: Waker::new()?,
            cq_waiting: AtomicBool::new(false),
            cq_waiter: Mutex::new(None),
            stats: Mutex::new(QueueStats::default()),
            claimed: AtomicBool::new(false),
            driven_by: AtomicU64::new(0),
        })
    }

    /// Queues a hand-off from another engine thread and wakes this queue's
    /// thread if it sleeps. Returns it back if the inbox is full.
    pub(crate) fn hand_off(&self, h: Handoff) -> Result<(), Handoff> {
        self.handoff.push(h)?;
        if self.sleeping.load(Ordering::SeqCst) {
            self.waker.wake();
        }
        Ok(())
    }

    /// Takes one hand-off.
    pub(crate) fn take_handoff(&self) -> Option<Handoff> {
        self.handoff.pop()
    }

    /// Queues work for the engine thread and wakes it if it sleeps.
    /// Returns the work back if the queue is full.
    pub fn post(&self, work: Work) -> Result<(), Work> {
        self.work.push(work)?;
        if self.sleeping.load(Ordering::SeqCst) {
            self.waker.wake();
            self.woken_by_posts.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Takes one completion.
    pub fn pop_completion(&self) -> Option<WorkCompletion> {
        self.completions.pop()
    }

    /// Blocks the calling thread until the engine thread pushes a
    /// completion, or `timeout` passes (returns early, possibly spuriously;
    /// callers re-check the queue). Lets an application wait without
    /// taking a core from the engine threads.
    pub fn wait_completion(&self, timeout: Duration) {
        *self.cq_waiter.lock().unwrap_or_else(|e| e.into_inner()) = Some(std::thread::current());
        self.cq_waiting.store(true, Ordering::SeqCst);
        // Pairs with the fence after the engine's push: either we see the
        // completion here, or the engine sees `cq_waiting` and unparks us.
        fence(Ordering::SeqCst);
        if self.completions.is_empty() {
            std::thread::park_timeout(timeout);
        }
        self.cq_waiting.store(false, Ordering::SeqCst);
    }

    /// Wakes the application thread waiting for completions, if any;
    /// returns whether it woke one.
    pub(super) fn notify_completion(&self) -> bool {
        fence(Ordering::SeqCst);
        if self.cq_waiting.load(Ordering::SeqCst) {
            if let Some(t) = self
                .cq_waiter
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .as_ref()
            {
                t.unpark();
                return true;
            }
        }
        false
    }

    /// Whether the calling thread drives this queue's engine itself (so
    /// that waiting for the engine thread would wait for itself).
    #[inline]
    pub(crate) fn driven_here(&self) -> bool {
        self.claimed.load(Ordering::Relaxed)
            && self.driven_by.load(Ordering::Relaxed) == thread_token()
    }

    /// Whether an application thread drives this queue's engine.
    pub fn is_driven(&self) -> bool {
        self.claimed.load(Ordering::SeqCst)
    }

    /// Takes one refused post.
    pub fn pop_post_error(&self) -> Option<PostError> {
        self.post_errors.pop()
    }

    /// The latest statistics snapshot.
    pub fn stats(&self) -> QueueStats {
        *self.stats.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A number unique to the calling thread (never 0): who drives a queue.
pub(super) fn thread_token() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    thread_local! {
        static TOKEN: u64 = NEXT.fetch_add(1, Ordering::Relaxed);
    }
    TOKEN.with(|t| *t)
}

/// A frame handed from the queue it arrived on to the queue whose
/// endpoint holds its QP: a pooled buffer, returned after use.
pub(crate) struct FrameBuf {
    pub(super) buf: Box<[u8]>,
    pub(super) len: usize,
    /// The queue the frame arrived on.
    pub(crate) from: u32,
}

impl FrameBuf {
    pub(crate) fn frame(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

/// What one engine thread hands another.
pub(crate) enum Handoff {
    /// A received frame for a QP the receiving queue holds.
    Frame(FrameBuf),
    /// A QP moving to the receiving queue (whole: work queues, PSNs,
    /// timers, counters), because its packets arrive there.
    Qp(Box<Qp>),
    /// A post or control operation for a QP that moved to the receiving
    /// queue, from the application of queue `origin` (whose completion
    /// queue and post-error queue its results go to).
    Work { origin: u32, work: Work },
}

#[cfg(test)]
mod qp_rates_tests {
    use super::*;

    #[test]
    fn keeps_the_first_qps_and_counts_the_rest() {
        let mut r = QpRates::default();
        r.fill((0..70u32).map(|q| (q, f64::from(q) * 1e9)));
        assert_eq!(r.as_slice().len(), MAX_REPORTED_QPS);
        assert_eq!(r.as_slice()[17], (17, 17e9));
        assert_eq!(r.omitted(), 6);
        // A refill replaces, never appends.
        r.fill([(5, 1e9)].into_iter());
        assert_eq!(r.as_slice(), &[(5, 1e9)]);
        assert_eq!(r.omitted(), 0);
        // Without an exact length the rest is counted by walking it.
        r.fill((0..200u32).filter(|q| q % 2 == 0).map(|q| (q, 1e9)));
        assert_eq!((r.as_slice().len(), r.omitted()), (MAX_REPORTED_QPS, 36));
    }

    /// An iterator of exact length whose items past the reported ones
    /// must not be produced.
    struct Exact(u32, u32);
    impl Iterator for Exact {
        type Item = (u32, f64);
        fn next(&mut self) -> Option<(u32, f64)> {
            assert!(
                self.0 < MAX_REPORTED_QPS as u32,
                "walked past the reported QPs"
            );
            (self.0 < self.1).then(|| {
                self.0 += 1;
                (self.0, 1e9)
            })
        }
        fn size_hint(&self) -> (usize, Option<usize>) {
            let n = (self.1 - self.0) as usize;
            (n, Some(n))
        }
    }

    #[test]
    fn counts_the_rest_of_an_exact_iterator_without_walking_it() {
        let mut r = QpRates::default();
        r.fill(Exact(0, 65_536));
        assert_eq!(r.as_slice().len(), MAX_REPORTED_QPS);
        assert_eq!(r.omitted(), 65_536 - MAX_REPORTED_QPS);
    }
}
