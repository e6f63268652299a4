//! Completion queues.

use std::collections::VecDeque;

use super::counters::QpCounters;
use super::wqe::WorkCompletion;

/// One completion queue with a fixed capacity, preallocated.
pub struct Cq {
    entries: VecDeque<WorkCompletion>,
    capacity: usize,
    /// Completions dropped because the queue was full.
    pub overflows: u64,
}

impl Cq {
    /// A queue holding up to `capacity` completions.
    pub fn new(capacity: usize) -> Cq {
        let capacity = capacity.max(1);
        Cq {
            entries: VecDeque::with_capacity(capacity),
            capacity,
            overflows: 0,
        }
    }

    /// Append a completion; counts an overflow and drops it when full.
    pub fn push(&mut self, wc: WorkCompletion) -> bool {
        if self.entries.len() >= self.capacity {
            self.overflows += 1;
            return false;
        }
        self.entries.push_back(wc);
        true
    }

    /// Move up to `out.len()` completions into `out`; returns how many.
    pub fn poll(&mut self, out: &mut [WorkCompletion]) -> usize {
        let mut n = 0;
        while n < out.len() {
            match self.entries.pop_front() {
                Some(wc) => {
                    out[n] = wc;
                    n += 1;
                }
                None => break,
            }
        }
        n
    }

    /// Take the oldest completion.
    pub fn pop(&mut self) -> Option<WorkCompletion> {
        self.entries.pop_front()
    }

    /// Completions waiting.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// No completion waiting.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Capacity given at creation.
    pub fn capacity(&self) -> usize {
        self.capacity
    }
}

/// Where the completions of one side of a QP go: the send CQ (requester and
/// completer) or the receive CQ (responder), for one call into that side.
pub(crate) struct CompletionSink<'a> {
    /// `None` when the QP's CQ id names no CQ: completions are dropped.
    pub cq: Option<&'a mut Cq>,
    pub qpn: u32,
    /// Send side: every request completes, signaled or not
    /// ([`super::QpInitAttr::sq_sig_all`]). Unused by the receive side.
    pub sq_sig_all: bool,
}

impl CompletionSink<'_> {
    /// Queue `wc`; a full CQ counts `cq_overflow` and drops it.
    pub fn push(&mut self, wc: WorkCompletion, counters: &mut QpCounters) {
        if let Some(cq) = self.cq.as_deref_mut() {
            if !cq.push(wc) {
                counters.rest().cq_overflow += 1;
            }
        }
    }
}
