//! The verbs this library calls: the public `ibv_*` functions of the
//! drop-in libibverbs.so.1 it is linked against (`-libverbs`), and that
//! library's private exports, declared here; the `<infiniband/verbs.h>`
//! structures and constants they take are rdma-core 44's verbs ABI,
//! defined once in `verbs_abi` (shared with the drop-in libibverbs and
//! checked there against the installed header) and re-exported here. This
//! crate does not depend on the drop-in libibverbs' crate: that one
//! carries the engine, which must exist once per process.

use std::ffi::{c_char, c_int, c_uint, c_void};

pub use verbs_abi::*;

// The public verbs of the drop-in libibverbs.so.1 this library is linked
// against (`-libverbs`), and its two private exports.
extern "C" {
    pub fn ibv_get_device_list(num: *mut c_int) -> *mut *mut ibv_device;
    pub fn ibv_free_device_list(list: *mut *mut ibv_device);
    pub fn ibv_open_device(dev: *mut ibv_device) -> *mut ibv_context;
    pub fn ibv_query_device(ctx: *mut ibv_context, attr: *mut ibv_device_attr) -> c_int;
    pub fn ibv_query_port(ctx: *mut ibv_context, port: u8, attr: *mut ibv_port_attr) -> c_int;
    pub fn ibv_query_gid(
        ctx: *mut ibv_context,
        port: u8,
        index: c_int,
        gid: *mut [u8; 16],
    ) -> c_int;
    pub fn ibv_alloc_pd(ctx: *mut ibv_context) -> *mut ibv_pd;
    pub fn ibv_dealloc_pd(pd: *mut ibv_pd) -> c_int;
    pub fn ibv_reg_mr(pd: *mut ibv_pd, addr: *mut c_void, len: usize, access: c_int)
        -> *mut ibv_mr;
    pub fn ibv_create_comp_channel(ctx: *mut ibv_context) -> *mut ibv_comp_channel;
    pub fn ibv_destroy_comp_channel(ch: *mut ibv_comp_channel) -> c_int;
    pub fn ibv_create_cq(
        ctx: *mut ibv_context,
        cqe: c_int,
        cq_context: *mut c_void,
        ch: *mut ibv_comp_channel,
        vector: c_int,
    ) -> *mut ibv_cq;
    pub fn ibv_destroy_cq(cq: *mut ibv_cq) -> c_int;
    pub fn ibv_get_cq_event(
        ch: *mut ibv_comp_channel,
        cq: *mut *mut ibv_cq,
        ctx: *mut *mut c_void,
    ) -> c_int;
    pub fn ibv_ack_cq_events(cq: *mut ibv_cq, n: c_uint);
    pub fn ibv_create_qp(pd: *mut ibv_pd, attr: *mut ibv_qp_init_attr) -> *mut ibv_qp;
    pub fn ibv_modify_qp(qp: *mut ibv_qp, attr: *mut ibv_qp_attr, mask: c_int) -> c_int;
    pub fn ibv_destroy_qp(qp: *mut ibv_qp) -> c_int;
    pub fn ibv_create_srq(pd: *mut ibv_pd, attr: *mut ibv_srq_init_attr) -> *mut ibv_srq;
    pub fn ibv_destroy_srq(srq: *mut ibv_srq) -> c_int;
    pub fn ibv_create_ah(pd: *mut ibv_pd, attr: *mut ibv_ah_attr) -> *mut ibv_ah;
    pub fn roce_xdp_create_gsi_qp(pd: *mut ibv_pd, attr: *mut ibv_qp_init_attr) -> *mut ibv_qp;
    /// The drop-in libibverbs' other private export: `roce-xdp stats`
    /// reads the CM's counters through `read`.
    pub fn roce_xdp_set_cm_counters(
        read: Option<unsafe extern "C" fn(*mut *const c_char, *mut u64, usize) -> usize>,
    );
    /// And the third: attached to a shared engine, publishes the service
    /// IDs listened on and returns the top byte our communication IDs
    /// must have (0: the engine is this process's own; -1: no engine).
    pub fn roce_xdp_share_cm(ids: *const u64, n: usize) -> c_int;
}

/// `ibv_poll_cq` (inline in verbs.h: through the context's ops).
///
/// # Safety
/// `cq` is a live CQ of the drop-in; `wc` has room for `n` entries.
pub unsafe fn ibv_poll_cq(cq: *mut ibv_cq, n: c_int, wc: *mut ibv_wc) -> c_int {
    // SAFETY: a live CQ's context is live and its ops are set.
    unsafe {
        match (*(*cq).context).ops.poll_cq {
            Some(f) => f(cq, n, wc),
            None => libc::EOPNOTSUPP,
        }
    }
}

/// `ibv_req_notify_cq` (inline in verbs.h).
///
/// # Safety
/// `cq` is a live CQ of the drop-in.
pub unsafe fn ibv_req_notify_cq(cq: *mut ibv_cq, solicited: c_int) -> c_int {
    // SAFETY: as ibv_poll_cq.
    unsafe {
        match (*(*cq).context).ops.req_notify_cq {
            Some(f) => f(cq, solicited),
            None => libc::EOPNOTSUPP,
        }
    }
}

/// `ibv_post_send` (inline in verbs.h).
///
/// # Safety
/// `qp` is a live QP of the drop-in; `wr` a valid list.
pub unsafe fn ibv_post_send(qp: *mut ibv_qp, wr: *mut ibv_send_wr) -> c_int {
    let mut bad = std::ptr::null_mut();
    // SAFETY: as ibv_poll_cq.
    unsafe {
        match (*(*qp).context).ops.post_send {
            Some(f) => f(qp, wr, &mut bad),
            None => libc::EOPNOTSUPP,
        }
    }
}

/// `ibv_post_recv` (inline in verbs.h).
///
/// # Safety
/// `qp` is a live QP of the drop-in; `wr` a valid list.
pub unsafe fn ibv_post_recv(qp: *mut ibv_qp, wr: *mut ibv_recv_wr) -> c_int {
    let mut bad = std::ptr::null_mut();
    // SAFETY: as ibv_poll_cq.
    unsafe {
        match (*(*qp).context).ops.post_recv {
            Some(f) => f(qp, wr, &mut bad),
            None => libc::EOPNOTSUPP,
        }
    }
}
