//! The driver: what moves packets between an AF_XDP socket ([`crate::io`])
//! and the sans-IO [`Endpoint`](crate::endpoint::Endpoint) of one queue.
//!
//! - `thread.rs`: the engine thread of one queue, behind the verbs
//!   [`Device`](crate::verbs::Device): pinned to a core, it polls its
//!   socket, takes work posted by applications from lock-free queues,
//!   hands back completions, and sleeps as its [`PollMode`] says; an
//!   application thread may take its queue's engine and drive it itself
//!   for a while ([`DrivenQueue`]).
//! - `step.rs`: one iteration of any engine loop (receive a batch, run due
//!   timers, transmit what is due), shared by the engine thread and
//!   run-to-completion, so both put the same frames on the wire.
//! - `run_to_completion.rs`: [`RunToCompletion`], the application thread
//!   drives one queue's engine itself (no engine thread, no queues between
//!   threads).
//! - `shared.rs`: what an engine thread shares with its applications and
//!   the other engine threads ([`QueueStats`], the work and completion
//!   queues, the hand-off inbox).
//! - `directory.rs`: what the engine threads of one device share so that a
//!   QP works whichever queue its packets arrive on: device-wide QP
//!   numbers, which queue holds each QP, hand-off inboxes, a buffer pool.
//! - `own_address.rs`: the engine's own MAC and IP, which a frame the
//!   engine transmits is checked against: one addressed to the engine
//!   itself (two of its QPs connected to each other) is received from its
//!   TX frame instead of leaving (`loopback_frames`).
//! - `capture.rs`: optional pcap capture of the frames the engines send
//!   and receive ([`capture_channel`], [`PcapWriter`]).
//! - `poll_mode.rs`: [`PollMode`], how a loop waits when idle, and
//!   [`CqWait`], how an application thread waits for completions.
//!
//! Time is read here (a monotonic clock) and passed to the endpoint; the
//! endpoint never reads a clock.

mod capture;
mod directory;
mod own_address;
mod poll_mode;
mod port;
mod run_to_completion;
mod shared;
mod step;
mod thread;

pub use capture::{capture_channel, CaptureSink, CapturedFrame, PcapWriter, SNAPLEN};
pub(crate) use directory::{os_seed, Directory};
pub(crate) use own_address::OwnAddress;
pub use poll_mode::{CqWait, PollMode};
pub use port::QueuePort;
pub use run_to_completion::{InlineConfig, RunToCompletion};
pub(crate) use shared::{Control, Shared, Work};
pub use shared::{PostError, QpRates, QueueStats, MAX_REPORTED_QPS};
pub use step::{
    prefetch_distance, prefetch_posts, prefetch_qp_index, prefetch_qp_state, prefetch_qpn_index,
    prefetch_qpn_state, PostHint, PREFETCH_AHEAD, PREFETCH_MIN_QPS,
};
pub use thread::{DrivenQueue, DriverError};
pub(crate) use thread::{Driver, QueueConfig};
