//! How an engine loop waits when it has nothing to do: spin, or spin and
//! then sleep. The engine thread takes it from its queue's configuration
//! (`DeviceConfig::poll` in the verbs API); the test bed's bare AF_XDP
//! loops follow the same policy so that they compare like with like.

use std::time::Duration;

/// How a loop waits when there is nothing to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PollMode {
    /// Spin on the rings (one core per loop).
    Busy,
    /// Spin for `spin`, then block in poll(2) on the socket (up to the next
    /// deadline). Suits machines with fewer cores than loops.
    Adaptive { spin: Duration },
}

impl Default for PollMode {
    fn default() -> Self {
        PollMode::Adaptive {
            spin: Duration::from_micros(50),
        }
    }
}

/// How an application thread of the threaded [`crate::verbs::Device`]
/// waits for completions in `Device::poll_cq_wait` (`DeviceConfig::cq_wait`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CqWait {
    /// Spin briefly, then park until the engine thread pushes a completion
    /// (a futex wake per completion that finds the thread parked). Leaves
    /// the core to the engine threads: the default, for throughput.
    #[default]
    Park,
    /// Spin on the completion queue until a completion arrives or the
    /// timeout passes, yielding the core between polls (perftest's
    /// default, busy polling): no wake-up on the completion's path, at the
    /// price of a busy application thread.
    Spin,
}
