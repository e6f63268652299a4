//! The extended CQ: the context's `create_cq_ex` (which the inline
//! `ibv_create_cq_ex` calls) and the polling ops of `struct ibv_cq_ex`
//! that the inline `ibv_start_poll`, `ibv_next_poll`, `ibv_end_poll` and
//! `ibv_wc_read_*` call through.
//!
//! Every CQ of the drop-in is laid out as an `ibv_cq_ex` (`ibv_cq_ex_to_cq`
//! is a cast: the CQ of `ibv_create_cq_ex` serves `ibv_poll_cq`, channels
//! and `ibv_req_notify_cq` as any), and every CQ has the polling ops (on
//! rxe a CQ of `ibv_create_cq` has none: calling them crashes; here they
//! work). As rxe: `ibv_start_poll` takes the CQ's poll lock and the first
//! completion, or returns `ENOENT` (lock released) when there is none;
//! `ibv_next_poll` takes the next one or returns `ENOENT`;
//! `ibv_end_poll` releases the lock. The completion taken is the one the
//! `ibv_wc_read_*` accessors read, with `status` and `wr_id` in the
//! `ibv_cq_ex`.

use std::cell::UnsafeCell;
use std::ffi::{c_int, c_uint};
use std::sync::atomic::{AtomicU64, Ordering};

use super::completions::{cq, ibv_create_cq, to_wc, Cq};
use super::{context, engine, pointer};
use crate::abi::*;

/// The CQ's extended part: `ibv_cq_ex` after its `ibv_cq` (public), the
/// poll lock and the completion being read (private).
#[repr(C)]
pub(super) struct CqEx {
    ops: UnsafeCell<ibv_cq_ex_ops>,
    /// The thread between a successful `ibv_start_poll` and
    /// `ibv_end_poll` ([`thread`]), 0 for none.
    owner: AtomicU64,
    /// The completion taken last; written only by the lock's holder.
    cur: UnsafeCell<ibv_wc>,
}

// `ibv_cq_ex` as `verbs.h` lays it out: the extended part follows the
// `ibv_cq` with no padding.
const _: () = {
    use std::mem::{offset_of, size_of};
    assert!(offset_of!(Cq, ex) == size_of::<ibv_cq>());
    assert!(offset_of!(ibv_cq_ex, ex) == size_of::<ibv_cq>());
};

/// A number for the calling thread, never 0, distinct among live threads.
fn thread() -> u64 {
    thread_local! {
        static MARK: u8 = const { 0 };
    }
    MARK.with(|m| m as *const u8 as u64)
}

impl CqEx {
    pub(super) fn new() -> CqEx {
        CqEx {
            ops: UnsafeCell::new(ibv_cq_ex_ops {
                comp_mask: 0,
                status: 0,
                wr_id: 0,
                start_poll: Some(start_poll),
                next_poll: Some(next_poll),
                end_poll: Some(end_poll),
                read_opcode: Some(read_opcode),
                read_vendor_err: Some(read_vendor_err),
                read_byte_len: Some(read_byte_len),
                read_imm_data: Some(read_imm_data),
                read_qp_num: Some(read_qp_num),
                read_src_qp: Some(read_src_qp),
                read_wc_flags: Some(read_wc_flags),
                read_slid: Some(read_slid),
                read_sl: Some(read_sl),
                read_dlid_path_bits: Some(read_dlid_path_bits),
                _unsupported: [None; 5],
            }),
            owner: AtomicU64::new(0),
            cur: UnsafeCell::new(ibv_wc::default()),
        }
    }
}

/// `verbs_context.create_cq_ex`: rxe's checks, then a CQ as
/// `ibv_create_cq` makes it.
pub(super) unsafe extern "C" fn create_cq_ex(
    ctx: *mut ibv_context,
    attr: *mut ibv_cq_init_attr_ex,
) -> *mut ibv_cq_ex {
    pointer((|| {
        context(ctx)?;
        // SAFETY: a non-NULL `attr` points to the attributes (point 1).
        let a = unsafe { attr.as_ref() }.ok_or(libc::EINVAL)?;
        // rdma-core's `ibv_cmd_create_cq_ex`: known attributes only.
        if a.comp_mask & !(IBV_CQ_INIT_ATTR_MASK_FLAGS | IBV_CQ_INIT_ATTR_MASK_PD) != 0 {
            return Err(libc::EOPNOTSUPP);
        }
        // rxe's `RXE_SUP_WC_EX_FLAGS`: the standard fields, no
        // timestamps, VLAN, flow tag or tag matching.
        if a.wc_flags & !IBV_WC_STANDARD_FLAGS != 0 {
            return Err(libc::EOPNOTSUPP);
        }
        // SINGLE_THREADED is a hint; IGNORE_OVERRUN is refused by rxe's
        // kernel driver (no CQ creation flags).
        if a.comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS != 0
            && a.flags & !IBV_CREATE_CQ_ATTR_SINGLE_THREADED != 0
        {
            return Err(libc::EOPNOTSUPP);
        }
        // There are no parent domains (`ibv_alloc_parent_domain`).
        if a.comp_mask & IBV_CQ_INIT_ATTR_MASK_PD != 0 && !a.parent_domain.is_null() {
            return Err(libc::EINVAL);
        }
        let cqe = c_int::try_from(a.cqe).map_err(|_| libc::EINVAL)?;
        let vector = c_int::try_from(a.comp_vector).map_err(|_| libc::EINVAL)?;
        // SAFETY: `ctx` is a live context; a non-NULL channel is checked
        // by `ibv_create_cq`.
        let c = unsafe { ibv_create_cq(ctx, cqe, a.cq_context, a.channel, vector) };
        if c.is_null() {
            return Err(std::io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EINVAL));
        }
        Ok(c.cast::<ibv_cq_ex>())
    })())
}

/// Takes one completion of `c` into its `cur`; whether there was one.
///
/// The caller holds `c`'s poll lock.
fn take_one(c: &Cq) -> bool {
    let Ok(shell) = engine() else {
        return false;
    };
    let ex = &c.ex;
    let mut wc = None;
    shell.poll_cq(c.id, 1, |_, w| wc = Some(to_wc(w)));
    let Some(wc) = wc else {
        return false;
    };
    // SAFETY: the lock's holder alone writes `cur` and the `status` and
    // `wr_id` the program reads after this call returns.
    unsafe {
        *ex.cur.get() = wc;
        let o = ex.ops.get();
        (&raw mut (*o).status).write(wc.status);
        (&raw mut (*o).wr_id).write(wc.wr_id);
    }
    true
}

unsafe extern "C" fn start_poll(p: *mut ibv_cq_ex, attr: *mut ibv_poll_cq_attr) -> c_int {
    let Ok(c) = cq(p as *const ibv_cq) else {
        return libc::EINVAL;
    };
    // SAFETY: a non-NULL `attr` points to the attributes (point 1).
    if unsafe { attr.as_ref() }.is_some_and(|a| a.comp_mask != 0) {
        return libc::EINVAL;
    }
    let me = thread();
    let owner = &c.ex.owner;
    if owner.load(Ordering::Relaxed) == me {
        // A second start before `ibv_end_poll`.
        return libc::EINVAL;
    }
    while owner
        .compare_exchange_weak(0, me, Ordering::Acquire, Ordering::Relaxed)
        .is_err()
    {
        std::thread::yield_now();
    }
    if take_one(c) {
        0
    } else {
        owner.store(0, Ordering::Release);
        libc::ENOENT
    }
}

unsafe extern "C" fn next_poll(p: *mut ibv_cq_ex) -> c_int {
    let Ok(c) = cq(p as *const ibv_cq) else {
        return libc::EINVAL;
    };
    if c.ex.owner.load(Ordering::Relaxed) != thread() {
        return libc::EINVAL;
    }
    if take_one(c) {
        0
    } else {
        libc::ENOENT
    }
}

unsafe extern "C" fn end_poll(p: *mut ibv_cq_ex) {
    if let Ok(c) = cq(p as *const ibv_cq) {
        let _ =
            c.ex.owner
                .compare_exchange(thread(), 0, Ordering::Release, Ordering::Relaxed);
    }
}

/// The completion the accessors read (all-zero for a bad CQ).
fn current(p: *mut ibv_cq_ex) -> ibv_wc {
    match cq(p as *const ibv_cq) {
        // SAFETY: `cur` is written by the poll lock's holder, which is the
        // caller between start and end (the verbs contract of the
        // accessors).
        Ok(c) => unsafe { *c.ex.cur.get() },
        Err(_) => ibv_wc::default(),
    }
}

unsafe extern "C" fn read_opcode(p: *mut ibv_cq_ex) -> c_int {
    current(p).opcode
}
unsafe extern "C" fn read_vendor_err(p: *mut ibv_cq_ex) -> u32 {
    current(p).vendor_err
}
unsafe extern "C" fn read_byte_len(p: *mut ibv_cq_ex) -> u32 {
    current(p).byte_len
}
/// The immediate data (network order) or, for `IBV_WC_WITH_INV`, the
/// invalidated R_Key (host order: `ibv_wc_read_invalidated_rkey` returns
/// this value as it is).
unsafe extern "C" fn read_imm_data(p: *mut ibv_cq_ex) -> u32 {
    current(p).imm_data
}
unsafe extern "C" fn read_qp_num(p: *mut ibv_cq_ex) -> u32 {
    current(p).qp_num
}
unsafe extern "C" fn read_src_qp(p: *mut ibv_cq_ex) -> u32 {
    current(p).src_qp
}
unsafe extern "C" fn read_wc_flags(p: *mut ibv_cq_ex) -> c_uint {
    current(p).wc_flags
}
unsafe extern "C" fn read_slid(p: *mut ibv_cq_ex) -> u32 {
    current(p).slid.into()
}
unsafe extern "C" fn read_sl(p: *mut ibv_cq_ex) -> u8 {
    current(p).sl
}
unsafe extern "C" fn read_dlid_path_bits(p: *mut ibv_cq_ex) -> u8 {
    current(p).dlid_path_bits
}
