//! Out-of-band connection setup: the side-channel formats real RDMA tools use
//! to exchange what an RC QP needs to connect (QPN, starting PSN, GID, ...).
//!
//! See `docs/connection-setup.md`.
//! Everything here is sans-IO: byte strings in, byte strings out; the caller
//! owns the TCP socket.

pub mod gid;
pub mod perftest;
// Test vectors: only in the engine's tests and with the `test-vectors`
// feature.
#[cfg(any(test, feature = "test-vectors"))]
pub mod perftest_transcripts;
pub mod pingpong;
pub mod pingpong_loop;
pub mod rdma_target;

pub use gid::Gid;
