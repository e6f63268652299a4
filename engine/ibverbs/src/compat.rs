//! The symbols rdma-core keeps for binaries linked against older
//! libibverbs ABIs: the `IBVERBS_1.0` versions of the 1.0 verbs (binaries
//! built before libibverbs 1.1, 2007, whose structures differ from
//! today's) and `ibv_register_driver@IBVERBS_1.1`. They are exported as
//! non-default versions, as rdma-core's `compat-1_0.c` exports them, so
//! that a binary importing one loads and a symbol table compared with
//! rdma-core's is the same; a program linked today never binds to them.
//!
//! The 1.0 entry points refuse with `EOPNOTSUPP` and one line naming the
//! ABI: the drop-in serves only the structures of the current ABI.
//!
//! A symbol named `name@NODE` in an object is what the assembler's
//! `.symver name_impl, name@NODE` makes: the linker exports it as the
//! non-default version `NODE` of `name` (the node is in `libibverbs.map`).

use std::ffi::{c_int, c_void};
use std::ptr::null_mut;

use crate::ffi::{set_errno, unsupported};

const ABI_1_0: &str = "the libibverbs 1.0 ABI (a binary linked against libibverbs 1.0)";

/// 1.0 verbs that return a pointer: NULL, `errno` = `EOPNOTSUPP`.
macro_rules! null_1_0 {
    ($($rust:ident = $sym:literal;)*) => {$(
        #[export_name = $sym]
        pub extern "C" fn $rust() -> *mut c_void {
            set_errno(unsupported!(ABI_1_0, libc::EOPNOTSUPP));
            null_mut()
        }
    )*};
}

/// 1.0 verbs that return an errno (or -1 with `errno`, for the event
/// calls): `EOPNOTSUPP` either way.
macro_rules! errno_1_0 {
    ($($rust:ident = $sym:literal;)*) => {$(
        #[export_name = $sym]
        pub extern "C" fn $rust() -> c_int {
            set_errno(unsupported!(ABI_1_0, libc::EOPNOTSUPP));
            libc::EOPNOTSUPP
        }
    )*};
}

/// 1.0 verbs without a result.
macro_rules! void_1_0 {
    ($($rust:ident = $sym:literal;)*) => {$(
        #[export_name = $sym]
        pub extern "C" fn $rust() {
            unsupported!(ABI_1_0, ());
        }
    )*};
}

null_1_0! {
    alloc_pd_1_0 = "ibv_alloc_pd@IBVERBS_1.0";
    create_ah_1_0 = "ibv_create_ah@IBVERBS_1.0";
    create_cq_1_0 = "ibv_create_cq@IBVERBS_1.0";
    create_qp_1_0 = "ibv_create_qp@IBVERBS_1.0";
    create_srq_1_0 = "ibv_create_srq@IBVERBS_1.0";
    get_device_list_1_0 = "ibv_get_device_list@IBVERBS_1.0";
    get_device_name_1_0 = "ibv_get_device_name@IBVERBS_1.0";
    open_device_1_0 = "ibv_open_device@IBVERBS_1.0";
    reg_mr_1_0 = "ibv_reg_mr@IBVERBS_1.0";
}

errno_1_0! {
    attach_mcast_1_0 = "ibv_attach_mcast@IBVERBS_1.0";
    close_device_1_0 = "ibv_close_device@IBVERBS_1.0";
    dealloc_pd_1_0 = "ibv_dealloc_pd@IBVERBS_1.0";
    dereg_mr_1_0 = "ibv_dereg_mr@IBVERBS_1.0";
    destroy_ah_1_0 = "ibv_destroy_ah@IBVERBS_1.0";
    destroy_cq_1_0 = "ibv_destroy_cq@IBVERBS_1.0";
    destroy_qp_1_0 = "ibv_destroy_qp@IBVERBS_1.0";
    destroy_srq_1_0 = "ibv_destroy_srq@IBVERBS_1.0";
    detach_mcast_1_0 = "ibv_detach_mcast@IBVERBS_1.0";
    get_async_event_1_0 = "ibv_get_async_event@IBVERBS_1.0";
    get_cq_event_1_0 = "ibv_get_cq_event@IBVERBS_1.0";
    modify_qp_1_0 = "ibv_modify_qp@IBVERBS_1.0";
    modify_srq_1_0 = "ibv_modify_srq@IBVERBS_1.0";
    query_device_1_0 = "ibv_query_device@IBVERBS_1.0";
    query_gid_1_0 = "ibv_query_gid@IBVERBS_1.0";
    query_pkey_1_0 = "ibv_query_pkey@IBVERBS_1.0";
    query_port_1_0 = "ibv_query_port@IBVERBS_1.0";
    query_qp_1_0 = "ibv_query_qp@IBVERBS_1.0";
    query_srq_1_0 = "ibv_query_srq@IBVERBS_1.0";
    resize_cq_1_0 = "ibv_resize_cq@IBVERBS_1.0";
}

void_1_0! {
    ack_async_event_1_0 = "ibv_ack_async_event@IBVERBS_1.0";
    ack_cq_events_1_0 = "ibv_ack_cq_events@IBVERBS_1.0";
    free_device_list_1_0 = "ibv_free_device_list@IBVERBS_1.0";
}

/// The 1.0 `ibv_get_device_guid`: 0, as for no device.
#[export_name = "ibv_get_device_guid@IBVERBS_1.0"]
pub extern "C" fn get_device_guid_1_0() -> u64 {
    unsupported!(ABI_1_0, 0)
}

/// The driver interface is private since rdma-core 13; old libfabric usNIC
/// providers still call this to silence a warning. rdma-core's does
/// nothing, and so does this one.
#[export_name = "ibv_register_driver@IBVERBS_1.1"]
pub extern "C" fn register_driver_1_1(_name: *const c_void, _init: *const c_void) {}
