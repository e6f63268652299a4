//! Exported verbs the engine does not serve: each returns the errno
//! libibverbs documents (NULL with `errno`, or the errno as the return
//! value) and prints one line naming it, once. Then rdma-core's private
//! symbols (`IBVERBS_PRIVATE_34`), exported only so that the providers
//! Debian's perftest links directly (libmlx5.so.1, libefa.so.1, linked
//! with BIND_NOW) load; nothing calls them, since the one device is ours.

use std::ffi::{c_char, c_int, c_void};
use std::ptr::null_mut;

use crate::ffi::{set_errno, unsupported};

/// Unsupported verbs returning a pointer: NULL, errno set.
macro_rules! null_verbs {
    ($($name:ident: $what:literal, $errno:expr;)*) => {$(
        #[no_mangle]
        pub extern "C" fn $name() -> *mut c_void {
            set_errno(unsupported!($what, $errno));
            null_mut()
        }
    )*};
}

/// Unsupported verbs returning an errno.
macro_rules! errno_verbs {
    ($($name:ident: $what:literal, $errno:expr;)*) => {$(
        #[no_mangle]
        pub extern "C" fn $name() -> c_int {
            unsupported!($what, $errno)
        }
    )*};
}

null_verbs! {
    ibv_import_device: "ibv_import_device (a kernel verbs file descriptor)", libc::EOPNOTSUPP;
    ibv_import_pd: "ibv_import_pd (objects of another process's context)", libc::EOPNOTSUPP;
    ibv_import_mr: "ibv_import_mr (objects of another process's context)", libc::EOPNOTSUPP;
    ibv_import_dm: "ibv_import_dm (device memory)", libc::EOPNOTSUPP;
    ibv_reg_dmabuf_mr: "ibv_reg_dmabuf_mr (dma-buf memory)", libc::EOPNOTSUPP;
}

errno_verbs! {
    ibv_attach_mcast: "ibv_attach_mcast (multicast: UD)", libc::EOPNOTSUPP;
    ibv_detach_mcast: "ibv_detach_mcast (multicast: UD)", libc::EOPNOTSUPP;
    ibv_query_ece: "ibv_query_ece", libc::EOPNOTSUPP;
    ibv_set_ece: "ibv_set_ece", libc::EOPNOTSUPP;
    ibv_resolve_eth_l2_from_gid: "ibv_resolve_eth_l2_from_gid", libc::EOPNOTSUPP;
}

/// Kernel-ABI copy helpers (for librdmacm's kernel path): nothing to copy.
macro_rules! void_verbs {
    ($($name:ident: $what:literal;)*) => {$(
        #[no_mangle]
        pub extern "C" fn $name() {
            unsupported!($what, ());
        }
    )*};
}

void_verbs! {
    ibv_copy_ah_attr_from_kern: "ibv_copy_ah_attr_from_kern";
    ibv_copy_path_rec_from_kern: "ibv_copy_path_rec_from_kern";
    ibv_copy_path_rec_to_kern: "ibv_copy_path_rec_to_kern";
    ibv_copy_qp_attr_from_kern: "ibv_copy_qp_attr_from_kern";
    ibv_unimport_pd: "ibv_unimport_pd (objects of another process's context)";
    ibv_unimport_mr: "ibv_unimport_mr (objects of another process's context)";
    ibv_unimport_dm: "ibv_unimport_dm (device memory)";
}

/// No fork protection is needed: registered memory is not pinned.
#[no_mangle]
pub extern "C" fn ibv_fork_init() -> c_int {
    0
}

#[no_mangle]
pub extern "C" fn ibv_dontfork_range(_base: *mut c_void, _size: usize) -> c_int {
    0
}

#[no_mangle]
pub extern "C" fn ibv_dofork_range(_base: *mut c_void, _size: usize) -> c_int {
    0
}

/// `IBV_FORK_UNNEEDED`: the engine reads and writes registered memory
/// through the process's own mappings, never pinned pages, so a fork
/// needs no protection (copy-on-write keeps the parent's view).
#[no_mangle]
pub extern "C" fn ibv_is_fork_initialized() -> c_int {
    2
}

/// 0, "not guaranteed", as rxe and every provider without the operation
/// answer (rdma-core's default): the engine writes a message's packets in
/// PSN order, but a program may not poll on its last byte for that.
#[no_mangle]
pub extern "C" fn ibv_query_qp_data_in_order(_qp: *mut c_void, _op: c_int, _flags: u32) -> c_int {
    0
}

/// There is no sysfs device: reading its files fails as for a missing file.
#[no_mangle]
pub extern "C" fn ibv_read_sysfs_file(
    _dir: *const c_char,
    _file: *const c_char,
    _buf: *mut c_char,
    _size: usize,
) -> c_int {
    set_errno(libc::ENOENT);
    -1
}

#[no_mangle]
pub extern "C" fn ibv_get_sysfs_path() -> *const c_char {
    c"/sys".as_ptr()
}

// ---- IBVERBS_PRIVATE_34 ----

/// A provider's constructor registers its driver: nothing to do, the
/// drop-in has one device of its own.
#[no_mangle]
pub extern "C" fn verbs_register_driver_34(_driver: *const c_void) {}

#[no_mangle]
pub extern "C" fn __verbs_log(_ctx: *mut c_void, _level: u32, _fmt: *const c_char) {}

#[no_mangle]
pub static mut verbs_allow_disassociate_destroy: bool = false;

/// Private entry points of providers: never reached (no provider device).
macro_rules! private_verbs {
    ($($name:ident)*) => {$(
        #[no_mangle]
        pub extern "C" fn $name() -> c_int {
            unsupported!(concat!(stringify!($name), " (rdma-core provider internals)"), libc::EOPNOTSUPP)
        }
    )*};
}

private_verbs! {
    _verbs_init_and_alloc_context execute_ioctl ibv_cmd_advise_mr ibv_cmd_alloc_dm
    ibv_cmd_alloc_mw ibv_cmd_alloc_pd ibv_cmd_attach_mcast ibv_cmd_close_xrcd ibv_cmd_create_ah
    ibv_cmd_create_counters ibv_cmd_create_cq_ex ibv_cmd_create_flow
    ibv_cmd_create_flow_action_esp ibv_cmd_create_qp_ex ibv_cmd_create_qp_ex2
    ibv_cmd_create_rwq_ind_table ibv_cmd_create_srq ibv_cmd_create_srq_ex ibv_cmd_create_wq
    ibv_cmd_dealloc_mw ibv_cmd_dealloc_pd ibv_cmd_dereg_mr ibv_cmd_destroy_ah
    ibv_cmd_destroy_counters ibv_cmd_destroy_cq ibv_cmd_destroy_flow ibv_cmd_destroy_flow_action
    ibv_cmd_destroy_qp ibv_cmd_destroy_rwq_ind_table ibv_cmd_destroy_srq ibv_cmd_destroy_wq
    ibv_cmd_detach_mcast ibv_cmd_free_dm ibv_cmd_get_context ibv_cmd_modify_cq
    ibv_cmd_modify_flow_action_esp ibv_cmd_modify_qp ibv_cmd_modify_qp_ex ibv_cmd_modify_srq
    ibv_cmd_modify_wq ibv_cmd_open_qp ibv_cmd_open_xrcd ibv_cmd_query_context
    ibv_cmd_query_device_any ibv_cmd_query_mr ibv_cmd_query_port ibv_cmd_query_qp
    ibv_cmd_query_srq ibv_cmd_read_counters ibv_cmd_reg_dm_mr ibv_cmd_reg_dmabuf_mr
    ibv_cmd_reg_mr ibv_cmd_rereg_mr ibv_cmd_resize_cq verbs_init_cq verbs_open_device
    verbs_set_ops verbs_uninit_context __ioctl_final_num_attrs ibv_cmd_create_cq
    ibv_cmd_create_qp ibv_cmd_poll_cq ibv_cmd_post_recv ibv_cmd_post_send
    ibv_cmd_post_srq_recv ibv_cmd_req_notify_cq ibv_read_ibdev_sysfs_file
}
