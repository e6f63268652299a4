//! A drop-in `libibverbs.so.1` over the roce-xdp engine: unmodified,
//! dynamically linked verbs programs (rdma-core's examples and tests,
//! perftest, libfabric, UCX) run on it under `roce-xdp exec`
//! (docs/verbs-drop-in.md).
//!
//! - `abi.rs`: `verbs.h`'s structures and constants, byte for byte: the
//!   `roce-xdp-verbs-abi` crate's, shared with the drop-in librdmacm
//!   (checked by its `tests/layout.rs` against the installed header);
//! - `ffi.rs` and `ffi/`: the exported `ibv_*` functions and the ops tables
//!   the inline verbs call through; the contract with C callers heads
//!   `ffi.rs`;
//! - `handles.rs`: the objects handed to the program, checked before use;
//! - `checks.rs`: argument checks, with rxe's errnos;
//! - `limits.rs`: the device's limits, as `ibv_query_device` reports them;
//! - `identity.rs`: the device's name, GUIDs, GIDs and port as verbs
//!   report them and as sysfs writes them (shared with `roce-xdp exec`'s
//!   view of `/sys/class/infiniband`);
//! - `shell.rs`: the verbs over one engine queue
//!   (engine::driver::RunToCompletion) and the progress thread;
//! - `memory.rs`: memory the program registers, used in place;
//! - `os.rs`: the eventfds of completion channels and async events;
//! - `strings.rs`: the enum-to-string and rate helpers;
//! - `unsupported.rs`: verbs the engine does not serve, and rdma-core's
//!   private symbols so that providers linked by perftest load;
//! - `compat.rs`: the symbol versions rdma-core keeps for old binaries;
//! - `config.rs`: the environment variables.
//!
//! The shared object itself is this crate's staticlib linked with
//! `libibverbs.map` (rdma-core's symbol versions) by `cc`: rustc applies
//! its own version script to a cdylib, which cannot carry version nodes.
#![deny(unsafe_op_in_unsafe_fn)]

pub mod abi;
mod checks;
mod compat;
pub mod config;
mod ffi;
mod handles;
pub mod identity;
mod limits;
mod memory;
mod os;
mod shell;
mod strings;
mod unsupported;

pub use identity::DEVICE_NAME;

/// The version script `libibverbs.so.1` is linked with.
pub const VERSION_SCRIPT: &str = include_str!("../libibverbs.map");
