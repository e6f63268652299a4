//! [`SharedCq`]: one queue's completions shared by several consumers on
//! one thread or several (a connection manager's QP 1, a control QP, the
//! QPs of a test), each taking only the completions of its own QPs.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use crate::rc::WorkCompletion;

use super::Device;

/// Completions of queue `q` of a device, handed to whoever polls for the
/// QP they belong to: a consumer's poll takes the device's completions,
/// keeps its own and sets the others aside (in arrival order) for their
/// consumers' next polls.
pub struct SharedCq {
    dev: Arc<Device>,
    queue: u32,
    aside: Mutex<VecDeque<WorkCompletion>>,
}

impl std::fmt::Debug for SharedCq {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedCq")
            .field("queue", &self.queue)
            .finish_non_exhaustive()
    }
}

impl SharedCq {
    pub fn new(dev: Arc<Device>, queue: u32) -> Arc<SharedCq> {
        Arc::new(SharedCq {
            dev,
            queue,
            aside: Mutex::new(VecDeque::new()),
        })
    }

    /// The device.
    pub fn device(&self) -> &Arc<Device> {
        &self.dev
    }

    /// The queue.
    pub fn queue(&self) -> u32 {
        self.queue
    }

    /// Takes up to `out.len()` completions of the QPs `mine` selects (by
    /// number): first those set aside by other consumers, then the
    /// device's (one engine iteration first when this thread drives the
    /// queue, as [`Device::poll_cq`]).
    pub fn poll(&self, mine: impl Fn(u32) -> bool, out: &mut [WorkCompletion]) -> usize {
        let mut n = 0;
        let mut aside = self.aside.lock().unwrap_or_else(|e| e.into_inner());
        if !aside.is_empty() {
            let mut i = 0;
            while i < aside.len() && n < out.len() {
                if mine(aside[i].qpn) {
                    out[n] = aside.remove(i).expect("in range");
                    n += 1;
                } else {
                    i += 1;
                }
            }
        }
        if n == out.len() {
            return n;
        }
        // The device's completions land in `out` after ours; those of
        // other consumers move aside, ours close up behind.
        let got = self.dev.poll_cq(self.queue, &mut out[n..]);
        let mut kept = n;
        for i in n..n + got {
            let wc = out[i];
            if mine(wc.qpn) {
                out[kept] = wc;
                kept += 1;
            } else {
                aside.push_back(wc);
            }
        }
        kept
    }
}
