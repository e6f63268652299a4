//! What the device promises (`ibv_query_device`, `ibv_query_device_ex`)
//! and the checks hold it to: each limit is one the engine really has.

use std::ffi::c_int;

/// QPs an engine holds (`EndpointConfig::max_qps`).
pub const MAX_QP: c_int = engine::endpoint::MAX_QPS_PER_ENGINE as c_int;
/// Work requests a queue holds (the endpoint's `check_init`: 1..=65536).
pub const MAX_QP_WR: c_int = 1 << 16;
/// Scatter/gather entries a work request carries, and a READ's local
/// list (`max_sge`, `max_sge_rd`; rxe `RXE_MAX_SGE`, `RXE_MAX_SGE_RD`).
pub const MAX_SGE: c_int = engine::rc::MAX_SGE as c_int;
/// Bytes of `IBV_SEND_INLINE` data a QP may be created for (rxe
/// `RXE_MAX_INLINE_DATA`, the room of its largest send WQE's SGE list).
/// The data is copied when the request is posted: the program may reuse
/// its buffer at once, and the buffer need not be registered. A QP gets
/// what rxe grants ([`engine::rc::SgeCaps::as_rxe_grants`]): at least
/// 16 bytes a QP, more if it asked for more SGEs.
pub const MAX_INLINE_DATA: u32 = engine::rc::MAX_INLINE_DATA;
/// Completion queues: the engine's CQ ids are not reused, so this bounds
/// the CQs a program creates over its life.
pub const MAX_CQ: c_int = 1 << 16;
/// Entries a completion queue holds.
pub const MAX_CQE: c_int = 1 << 20;
/// Memory regions a process registers at once.
pub const MAX_MR: c_int = 1 << 16;
/// Memory windows a process holds at once (the engine's table holds
/// 2^24; rxe's default is 2^16).
pub const MAX_MW: c_int = 1 << 16;
/// Protection domains a process holds at once.
pub const MAX_PD: c_int = 1 << 16;
/// RDMA READ and atomic requests outstanding on a QP, each way: 128,
/// Soft-RoCE's `RXE_MAX_QP_RD_ATOM`. perftest sets a QP's
/// `max_rd_atomic` to the *peer's* `max_qp_rd_atom`, and both ends check
/// it against their own limit (rxe's `rxe_qp_chk_attr`, ours in
/// `checks::modify_values`), so a smaller limit here fails every READ and
/// atomic test against rxe at RTS.
pub const MAX_QP_RD_ATOM: c_int = 128;
/// Completion vectors (`ibv_context.num_comp_vectors`).
pub const NUM_COMP_VECTORS: c_int = 1;
/// Shared receive queues a process holds at once (the engine's limit).
pub const MAX_SRQ: c_int = engine::rc::MAX_SRQS as c_int;
/// Work requests a shared receive queue holds (the engine's SRQ).
pub const MAX_SRQ_WR: c_int = engine::rc::MAX_SRQ_WR as c_int;
/// Scatter/gather entries a shared receive queue's work request carries
/// (rxe `RXE_MAX_SRQ_SGE`, the engine's SRQ).
pub const MAX_SRQ_SGE: c_int = engine::rc::MAX_SRQ_SGE as c_int;
/// `vendor_id` of software RoCE devices: Soft-RoCE reports 0xFFFFFF
/// (`RXE_VENDOR_ID`), and programs that require a nonzero id accept it.
pub const VENDOR_ID: u32 = 0xFF_FFFF;
