//! A drop-in `libibverbs.so.1` over the roce-xdp engine: unmodified,
//! dynamically linked verbs programs (rdma-core's examples, perftest) run
//! on it under `roce-xdp exec` (docs/verbs-drop-in.md).
//!
//! - `abi.rs`: `verbs.h`'s structures, byte for byte (checked by
//!   `tests/layout.rs` against the installed header);
//! - `ffi.rs`: the exported `ibv_*` functions and the ops tables the
//!   inline verbs call through: conversions only;
//! - `shell.rs`: the verbs over one engine queue
//!   (engine::driver::RunToCompletion) and the progress thread;
//! - `memory.rs`: memory the program registers, used in place;
//! - `os.rs`: the eventfds of completion channels and async events;
//! - `unsupported.rs`: verbs the engine does not serve, and rdma-core's
//!   private symbols so that providers linked by perftest load;
//! - `config.rs`: the environment variables;
//! - `identity.rs`: the device's GUIDs, GIDs and port as verbs report them
//!   and as sysfs writes them (shared with `roce-xdp exec`'s view of
//!   `/sys/class/infiniband`).
//!
//! The shared object itself is this crate's staticlib linked with
//! `libibverbs.map` (rdma-core's symbol versions) by `cc`: rustc applies
//! its own version script to a cdylib, which cannot carry version nodes.

pub mod abi;
pub mod config;
mod ffi;
pub mod identity;
mod memory;
mod os;
mod shell;
mod unsupported;

pub use ffi::DEVICE_NAME;

/// The version script `libibverbs.so.1` is linked with.
pub const VERSION_SCRIPT: &str = include_str!("../libibverbs.map");
