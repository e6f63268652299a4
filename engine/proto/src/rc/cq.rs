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

    /// Capacity given at creation or by the last [`Cq::resize`].
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Holds up to `capacity` completions from now on (`ibv_resize_cq`);
    /// false, and nothing changed, when more than that wait already.
    pub fn resize(&mut self, capacity: usize) -> bool {
        let capacity = capacity.max(1);
        if self.entries.len() > capacity {
            return false;
        }
        self.entries
            .reserve(capacity.saturating_sub(self.entries.len()));
        self.capacity = capacity;
        true
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

#[cfg(test)]
mod tests {
    use super::*;

    fn wc(wr_id: u64) -> WorkCompletion {
        WorkCompletion {
            wr_id,
            ..WorkCompletion::default()
        }
    }

    /// Completions come out in the order they went in, and a full queue
    /// drops and counts, across every way of emptying it (`poll`, `pop`)
    /// and refilling it: checked against a plain FIFO with the same
    /// capacity, over random pushes and polls.
    #[test]
    fn resize_keeps_what_waits_and_refuses_less_room_than_that() {
        let mut q = Cq::new(4);
        for i in 0..3 {
            assert!(q.push(wc(i)));
        }
        assert!(!q.resize(2), "three wait: two is too few");
        assert_eq!(q.capacity(), 4);
        assert!(q.resize(3));
        assert!(!q.push(wc(3)), "full at the new size");
        assert!(q.resize(8));
        for i in 3..8 {
            assert!(q.push(wc(i)));
        }
        assert!(!q.push(wc(8)));
        let mut out = [WorkCompletion::default(); 8];
        assert_eq!(q.poll(&mut out), 8);
        assert!(out.iter().enumerate().all(|(i, w)| w.wr_id == i as u64));
    }

    #[test]
    fn completions_keep_their_order_and_a_full_queue_counts_what_it_drops() {
        let mut cq = Cq::new(5);
        let mut model = std::collections::VecDeque::new();
        let mut rng = crate::sim::SplitMix64::new(7);
        let (mut next, mut dropped) = (0u64, 0u64);
        let mut out = [WorkCompletion::default(); 4];
        for _ in 0..20_000 {
            match rng.below(4) {
                0 | 1 => {
                    let accepted = cq.push(wc(next));
                    assert_eq!(accepted, model.len() < 5);
                    if accepted {
                        model.push_back(next);
                    } else {
                        dropped += 1;
                    }
                    next += 1;
                }
                2 => {
                    let want = rng.below(out.len() as u64 + 1) as usize;
                    let n = cq.poll(&mut out[..want]);
                    assert_eq!(n, want.min(model.len()));
                    for got in &out[..n] {
                        assert_eq!(Some(got.wr_id), model.pop_front());
                    }
                }
                _ => assert_eq!(cq.pop().map(|w| w.wr_id), model.pop_front()),
            }
            assert_eq!(cq.len(), model.len());
            assert_eq!(cq.is_empty(), model.is_empty());
        }
        assert_eq!(cq.overflows, dropped);
        assert!(dropped > 0, "the run filled the queue at times");
    }
}
