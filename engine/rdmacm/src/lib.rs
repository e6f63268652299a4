//! A drop-in `librdmacm.so.1` over the drop-in `libibverbs.so.1`: stock
//! RDMA CM programs (rping, ucmatose, udaddy, rdma_server/rdma_client,
//! perftest -R, ...) connect under `roce-xdp exec` without the kernel's
//! `/dev/infiniband/rdma_cm` (docs/rdma-cm-drop-in.md).
//!
//! - `abi.rs`: `rdma_cma.h`'s structures (checked by `tests/layout.rs`);
//! - `ibv.rs`: the public verbs this library calls, through the drop-in
//!   libibverbs' C ABI (never its Rust code: the engine exists once per
//!   process, in libibverbs.so.1), over the verbs structures of the
//!   `roce-xdp-verbs-abi` crate both drop-ins share;
//! - `state.rs`: the process's ids, channels and events behind one lock;
//! - `device.rs`: the one device, its GSI (QP 1) and the CM thread that
//!   runs `roce_xdp_proto::cm::CmAgent` and turns its events into
//!   `rdma_cm_event`s;
//! - `qp.rs`: the consumer QP's transitions (`rdma_init_qp_attr`);
//! - `addr.rs`: socket addresses, route lookup, `rdma_getaddrinfo`;
//! - `ffi.rs`: the exported `rdma_*` functions;
//! - `unsupported.rs`: multicast, ECE and rsockets, refused.
//!
//! The shared object is this crate's staticlib linked with
//! `librdmacm.map` (rdma-core's symbol versions) and `-libverbs` by
//! `roce-xdp exec`.
#![deny(unsafe_op_in_unsafe_fn)]

pub mod abi;
mod addr;
mod device;
mod ffi;
mod fork;
pub mod ibv;
mod qp;
mod state;
mod unsupported;

/// The version script `librdmacm.so.1` is linked with.
pub const VERSION_SCRIPT: &str = include_str!("../librdmacm.map");
