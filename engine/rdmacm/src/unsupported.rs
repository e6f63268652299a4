//! What this library refuses: multicast (`ENOSYS`: the engine has no
//! multicast groups), ECE (`EOPNOTSUPP`), and rsockets (every call -1 with
//! `ENOSYS`). Each prints one line, once, naming the call.

use std::ffi::{c_int, c_void};

use crate::abi::*;

macro_rules! refuse {
    ($what:expr, $errno:expr) => {{
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            eprintln!(
                "roce-xdp librdmacm: {} is not supported ({})",
                $what,
                stringify!($errno)
            )
        });
        // SAFETY: the thread's errno.
        unsafe { *libc::__errno_location() = $errno };
        -1
    }};
}

#[no_mangle]
unsafe extern "C" fn rdma_join_multicast(
    _id: *mut rdma_cm_id,
    _addr: *mut libc::sockaddr,
    _ctx: *mut c_void,
) -> c_int {
    refuse!("rdma_join_multicast", libc::ENOSYS)
}

#[no_mangle]
unsafe extern "C" fn rdma_join_multicast_ex(
    _id: *mut rdma_cm_id,
    _attr: *mut rdma_cm_join_mc_attr_ex,
    _ctx: *mut c_void,
) -> c_int {
    refuse!("rdma_join_multicast_ex", libc::ENOSYS)
}

#[no_mangle]
unsafe extern "C" fn rdma_leave_multicast(
    _id: *mut rdma_cm_id,
    _addr: *mut libc::sockaddr,
) -> c_int {
    refuse!("rdma_leave_multicast", libc::ENOSYS)
}

#[no_mangle]
unsafe extern "C" fn rdma_set_local_ece(_id: *mut rdma_cm_id, _ece: *mut c_void) -> c_int {
    refuse!("rdma_set_local_ece", libc::EOPNOTSUPP)
}

#[no_mangle]
unsafe extern "C" fn rdma_get_remote_ece(_id: *mut rdma_cm_id, _ece: *mut c_void) -> c_int {
    refuse!("rdma_get_remote_ece", libc::EOPNOTSUPP)
}

/// rsockets: every entry point -1 with ENOSYS (their argument lists do
/// not matter: nothing is read).
macro_rules! rsocket_calls {
    ($($name:ident),*) => {$(
        #[no_mangle]
        unsafe extern "C" fn $name() -> c_int {
            refuse!(concat!("rsockets (", stringify!($name), ")"), libc::ENOSYS)
        }
    )*};
}
rsocket_calls!(
    rsocket,
    rbind,
    rlisten,
    raccept,
    rconnect,
    rshutdown,
    rclose,
    rrecv,
    rrecvfrom,
    rrecvmsg,
    rsend,
    rsendto,
    rsendmsg,
    rread,
    rreadv,
    rwrite,
    rwritev,
    rpoll,
    rselect,
    rgetpeername,
    rgetsockname,
    rsetsockopt,
    rgetsockopt,
    rfcntl,
    riounmap,
    riowrite
);

/// `riomap` returns an `off_t`: -1.
#[no_mangle]
unsafe extern "C" fn riomap(
    _s: c_int,
    _buf: *mut c_void,
    _len: usize,
    _prot: c_int,
    _flags: c_int,
    _offset: i64,
) -> i64 {
    i64::from(refuse!("rsockets (riomap)", libc::ENOSYS))
}
