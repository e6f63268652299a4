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
