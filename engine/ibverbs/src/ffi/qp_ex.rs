//! The extended QP: the context's `create_qp_ex` (which the inline
//! `ibv_create_qp_ex` calls), `ibv_qp_to_qp_ex`, and the builders of
//! `struct ibv_qp_ex` that the inline `ibv_wr_*` call through.
//!
//! As rxe's provider does: `ibv_wr_start` takes the QP's send lock;
//! each builder (`wr_send`, `wr_rdma_write`, ...) adds one work request
//! with the `wr_id` and `wr_flags` the program stored in the `ibv_qp_ex`
//! before the call; the setters (`wr_set_sge`, `wr_set_inline_data`, ...)
//! complete the last one; `ibv_wr_complete` posts the batch and returns 0
//! or the errno, `ibv_wr_abort` drops it. A builder or setter that cannot
//! take its request (the send queue is full, more SGEs or inline bytes
//! than the QP has) records `ENOSPC` and `ibv_wr_complete` returns it,
//! posting nothing. The batch is posted through `ops.post_send` (the
//! function `ibv_post_send` calls): each request becomes the
//! `ibv_send_wr` a program would have posted, SGE list and inline data
//! included, so both APIs take the same conversion and checks.
//!
//! One difference with rxe: a builder whose `IBV_QP_EX_WITH_*` flag the
//! QP was not created with is NULL on rxe (calling it crashes the
//! program); here it records `EOPNOTSUPP`, which `ibv_wr_complete`
//! returns.
//!
//! A batch is posted request by request: if the engine refuses one (its
//! queue filled meanwhile), those before it are posted, as
//! `ibv_post_send` leaves them, and `ibv_wr_complete` returns the errno.

use std::cell::UnsafeCell;
use std::ffi::{c_int, c_void};
use std::ptr::null_mut;
use std::sync::atomic::{AtomicU64, Ordering};

use super::queue_pairs::{ibv_create_qp, post_send, qp, Qp};
use super::{context, pointer, set_errno};
use crate::abi::*;

/// `IBV_SEND_INLINE` of `enum ibv_send_flags`.
const IBV_SEND_INLINE: std::ffi::c_uint = 1 << 3;

/// The QP's extended part: `ibv_qp_ex` after its `ibv_qp` and
/// `verbs_qp`'s tail (public), then the batch being built (private).
#[repr(C)]
pub(super) struct QpEx {
    ops: UnsafeCell<ibv_qp_ex_ops>,
    /// `verbs_qp.comp_mask`: `VERBS_QP_EX` for a QP of `create_qp_ex`.
    vqp_comp_mask: UnsafeCell<u32>,
    _xrcd: *mut c_void,
    /// The thread between `ibv_wr_start` and `ibv_wr_complete`/`abort`
    /// ([`thread`]), 0 for none: the QP's send lock.
    owner: AtomicU64,
    /// Written only by the thread that holds `owner`.
    batch: UnsafeCell<Batch>,
}

// `ibv_qp_ex` and `verbs_qp` as `verbs.h` and driver.h lay them out: the
// extended part follows the `ibv_qp` with no padding.
const _: () = {
    use std::mem::{offset_of, size_of};
    assert!(offset_of!(Qp, ex) == size_of::<ibv_qp>());
    assert!(offset_of!(ibv_qp_ex, ex) == size_of::<ibv_qp>());
    assert!(
        size_of::<ibv_qp>() + offset_of!(QpEx, vqp_comp_mask) == offset_of!(verbs_qp, comp_mask)
    );
    assert!(size_of::<ibv_qp>() + offset_of!(QpEx, _xrcd) == offset_of!(verbs_qp, xrcd));
};

/// One request of a batch: the `ibv_send_wr` (its `sg_list` and `next`
/// set at `ibv_wr_complete`) and where its SGEs are.
struct Pending {
    wr: ibv_send_wr,
    /// `sges[first..first + count]`.
    first: usize,
    count: usize,
    /// Its one SGE addresses `inline` (an offset until posted).
    inline: bool,
    /// `wr_flags` as the program set them (the inline setters add
    /// `IBV_SEND_INLINE`; an SGE set after them takes it away again).
    flags: std::ffi::c_uint,
}

impl Pending {
    /// The request's data is the program's SGEs, not inline data.
    fn not_inline(&mut self) {
        self.inline = false;
        self.wr.send_flags = self.flags;
    }
}

/// The requests between `ibv_wr_start` and `ibv_wr_complete`; the
/// vectors keep their room from batch to batch.
#[derive(Default)]
struct Batch {
    /// `IBV_QP_EX_WITH_*` the QP was created with.
    send_ops: u64,
    max_send_wr: usize,
    max_sge: usize,
    max_inline: usize,
    /// The errno `ibv_wr_complete` returns (0: none yet).
    err: c_int,
    pending: Vec<Pending>,
    /// Built up for the whole batch.
    wrs: Vec<ibv_send_wr>,
    sges: Vec<ibv_sge>,
    inline: Vec<u8>,
}

impl Batch {
    fn clear(&mut self) {
        self.err = 0;
        self.pending.clear();
        self.wrs.clear();
        self.sges.clear();
        self.inline.clear();
    }

    /// The last request built, or `EINVAL` recorded (a setter with no
    /// builder before it).
    fn last(&mut self) -> Option<&mut Pending> {
        if self.err != 0 {
            return None;
        }
        if self.pending.is_empty() {
            self.err = libc::EINVAL;
        }
        self.pending.last_mut()
    }
}

/// A number for the calling thread, never 0, distinct among live threads.
fn thread() -> u64 {
    thread_local! {
        static MARK: u8 = const { 0 };
    }
    MARK.with(|m| m as *const u8 as u64)
}

impl QpEx {
    /// The extended part of a QP of `ibv_create_qp`: not an extended QP
    /// (`ibv_qp_to_qp_ex` answers NULL, as for rxe's).
    pub(super) fn new() -> QpEx {
        // SAFETY: ibv_qp_ex_ops is integers and optional function
        // pointers: all-zero is valid (no builders).
        let ops: ibv_qp_ex_ops = unsafe { std::mem::zeroed() };
        QpEx {
            ops: UnsafeCell::new(ops),
            vqp_comp_mask: UnsafeCell::new(0),
            _xrcd: null_mut(),
            owner: AtomicU64::new(0),
            batch: UnsafeCell::new(Batch::default()),
        }
    }

    /// Makes the QP an extended one with the builders of `send_ops`.
    ///
    /// # Safety
    /// The QP is not handed to the program yet (nothing else reads it).
    unsafe fn enable(&self, send_ops: u64, cap: &ibv_qp_cap) {
        let has = |f: u64| send_ops & f != 0;
        // SAFETY: the function's contract: this is the only access.
        let (o, b) = unsafe { (&mut *self.ops.get(), &mut *self.batch.get()) };
        o.wr_atomic_cmp_swp = Some(if has(IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP) {
            wr_atomic_cmp_swp
        } else {
            refused_atomic_cmp_swp
        });
        o.wr_atomic_fetch_add = Some(if has(IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD) {
            wr_atomic_fetch_add
        } else {
            refused_rkey_addr_u64
        });
        o.wr_atomic_write = Some(if has(IBV_QP_EX_WITH_ATOMIC_WRITE) {
            wr_atomic_write
        } else {
            refused_atomic_write
        });
        o.wr_bind_mw = Some(if has(IBV_QP_EX_WITH_BIND_MW) {
            wr_bind_mw
        } else {
            refused_bind_mw
        });
        o.wr_local_inv = Some(if has(IBV_QP_EX_WITH_LOCAL_INV) {
            wr_local_inv
        } else {
            refused_u32
        });
        o.wr_rdma_read = Some(if has(IBV_QP_EX_WITH_RDMA_READ) {
            wr_rdma_read
        } else {
            refused_rkey_addr
        });
        o.wr_rdma_write = Some(if has(IBV_QP_EX_WITH_RDMA_WRITE) {
            wr_rdma_write
        } else {
            refused_rkey_addr
        });
        o.wr_rdma_write_imm = Some(if has(IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM) {
            wr_rdma_write_imm
        } else {
            refused_rkey_addr_u32
        });
        o.wr_send = Some(if has(IBV_QP_EX_WITH_SEND) {
            wr_send
        } else {
            refused_send
        });
        o.wr_send_imm = Some(if has(IBV_QP_EX_WITH_SEND_WITH_IMM) {
            wr_send_imm
        } else {
            refused_u32
        });
        o.wr_send_inv = Some(if has(IBV_QP_EX_WITH_SEND_WITH_INV) {
            wr_send_inv
        } else {
            refused_u32
        });
        o.wr_set_ud_addr = Some(wr_set_ud_addr);
        o.wr_set_inline_data = Some(wr_set_inline_data);
        o.wr_set_inline_data_list = Some(wr_set_inline_data_list);
        o.wr_set_sge = Some(wr_set_sge);
        o.wr_set_sge_list = Some(wr_set_sge_list);
        o.wr_start = Some(wr_start);
        o.wr_complete = Some(wr_complete);
        o.wr_abort = Some(wr_abort);
        b.send_ops = send_ops;
        b.max_send_wr = cap.max_send_wr as usize;
        b.max_sge = cap.max_send_sge as usize;
        b.max_inline = cap.max_inline_data as usize;
        // SAFETY: as above.
        unsafe { *self.vqp_comp_mask.get() = VERBS_QP_EX };
    }

    fn is_ex(&self) -> bool {
        // SAFETY: written before the QP is handed out, read-only after.
        unsafe { *self.vqp_comp_mask.get() & VERBS_QP_EX != 0 }
    }

    /// The batch, if the calling thread is between `ibv_wr_start` and
    /// `ibv_wr_complete`/`ibv_wr_abort` on this QP.
    #[allow(clippy::mut_from_ref)]
    fn batch(&self) -> Option<&mut Batch> {
        // SAFETY: only the thread that holds `owner` reaches the batch,
        // and it holds it until complete/abort (no other reference then).
        (self.owner.load(Ordering::Acquire) == thread()).then(|| unsafe { &mut *self.batch.get() })
    }

    /// `wr_id` and `wr_flags` as the program set them for this builder.
    fn wr_id_flags(&self) -> (u64, u32) {
        let o = self.ops.get();
        // SAFETY: the program writes these two fields before a builder
        // call, on this thread; the drop-in never writes them.
        unsafe {
            (
                (&raw const (*o).wr_id).read(),
                (&raw const (*o).wr_flags).read(),
            )
        }
    }
}

/// `verbs_context.create_qp_ex`: rxe's checks (`check_qp_init_attr`),
/// then the QP of `ibv_create_qp` made an extended one.
pub(super) unsafe extern "C" fn create_qp_ex(
    ctx: *mut ibv_context,
    attr: *mut ibv_qp_init_attr_ex,
) -> *mut ibv_qp {
    pointer((|| {
        context(ctx)?;
        // SAFETY: a non-NULL `attr` points to the attributes (point 1).
        let a = unsafe { attr.as_mut() }.ok_or(libc::EINVAL)?;
        const MASK: u32 =
            IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
        const RC_OPS: u64 = IBV_QP_EX_WITH_RDMA_WRITE
            | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM
            | IBV_QP_EX_WITH_SEND
            | IBV_QP_EX_WITH_SEND_WITH_IMM
            | IBV_QP_EX_WITH_RDMA_READ
            | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP
            | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD
            | IBV_QP_EX_WITH_LOCAL_INV
            | IBV_QP_EX_WITH_BIND_MW
            | IBV_QP_EX_WITH_SEND_WITH_INV
            | IBV_QP_EX_WITH_ATOMIC_WRITE;
        const UD_OPS: u64 = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM;
        // UC: no READ, atomic, ATOMIC WRITE or SEND with invalidate (IBA
        // 9.2 table 38; rxe `wr_atomic_write` is RC only).
        const UC_OPS: u64 = IBV_QP_EX_WITH_SEND
            | IBV_QP_EX_WITH_SEND_WITH_IMM
            | IBV_QP_EX_WITH_RDMA_WRITE
            | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM
            | IBV_QP_EX_WITH_LOCAL_INV
            | IBV_QP_EX_WITH_BIND_MW;
        if a.comp_mask & !MASK != 0 {
            return Err(libc::EOPNOTSUPP);
        }
        // rxe creates no QP with creation flags.
        if a.comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS != 0 && a.create_flags != 0 {
            return Err(libc::EOPNOTSUPP);
        }
        let send_ops = match a.comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS != 0 {
            false => 0,
            true => {
                let supported = match a.qp_type {
                    IBV_QPT_RC => RC_OPS,
                    IBV_QPT_UD => UD_OPS,
                    IBV_QPT_UC => UC_OPS,
                    _ => 0,
                };
                if supported == 0 || a.send_ops_flags & !supported != 0 {
                    return Err(libc::EOPNOTSUPP);
                }
                a.send_ops_flags
            }
        };
        // An RC or UD QP needs its PD (the kernel refuses it without).
        if a.comp_mask & IBV_QP_INIT_ATTR_PD == 0 {
            return Err(libc::EINVAL);
        }
        // `ibv_qp_init_attr_ex` begins with an `ibv_qp_init_attr`, which
        // `ibv_create_qp` reads and writes the granted caps back to.
        // SAFETY: `attr` is live and begins with that structure.
        let q = unsafe { ibv_create_qp(a.pd, attr as *mut ibv_qp_init_attr) };
        if q.is_null() {
            return Err(std::io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EINVAL));
        }
        let me = qp(q)?;
        // SAFETY: `q` is not returned yet: the program has not seen it.
        unsafe { me.ex.enable(send_ops, &a.cap) };
        Ok(q)
    })())
}

/// `ibv_qp_to_qp_ex`: the QP as `struct ibv_qp_ex` if it was created by
/// `ibv_create_qp_ex` with more than a PD, else NULL (rdma-core's
/// `VERBS_QP_EX`); NULL with `EINVAL` for what is no QP.
#[no_mangle]
unsafe extern "C" fn ibv_qp_to_qp_ex(p: *mut ibv_qp) -> *mut ibv_qp_ex {
    match qp(p) {
        Ok(q) if q.ex.is_ex() => p.cast(),
        Ok(_) => null_mut(),
        Err(e) => {
            set_errno(e);
            null_mut()
        }
    }
}

/// The QP of `p` and its batch, if the calling thread holds the QP's
/// send lock.
fn locked<'a>(p: *mut ibv_qp_ex) -> Option<(&'a Qp, &'a mut Batch)> {
    let q = qp(p as *const ibv_qp).ok()?;
    Some((q, q.ex.batch()?))
}

/// A builder: one request of `opcode`, with the program's `wr_id` and
/// `wr_flags`, filled by `fill`.
fn build(p: *mut ibv_qp_ex, opcode: c_int, fill: impl FnOnce(&mut ibv_send_wr)) {
    let Some((q, b)) = locked(p) else { return };
    if b.err != 0 {
        return;
    }
    // rxe's `check_qp_queue_full`: the batch cannot hold more than the
    // send queue.
    if b.pending.len() >= b.max_send_wr {
        b.err = libc::ENOSPC;
        return;
    }
    let (wr_id, flags) = q.ex.wr_id_flags();
    // SAFETY: ibv_send_wr is integers and pointers: all-zero is valid.
    let mut wr: ibv_send_wr = unsafe { std::mem::zeroed() };
    wr.wr_id = wr_id;
    wr.opcode = opcode;
    wr.send_flags = flags;
    fill(&mut wr);
    b.pending.push(Pending {
        wr,
        first: 0,
        count: 0,
        inline: false,
        flags,
    });
}

/// A builder of an operation the QP was not created with.
fn refuse(p: *mut ibv_qp_ex) {
    if let Some((_, b)) = locked(p) {
        if b.err == 0 {
            b.err = libc::EOPNOTSUPP;
        }
    }
}

unsafe extern "C" fn wr_atomic_cmp_swp(
    p: *mut ibv_qp_ex,
    rkey: u32,
    remote_addr: u64,
    compare: u64,
    swap: u64,
) {
    build(p, IBV_WR_ATOMIC_CMP_AND_SWP, |w| {
        w.wr.remote_addr = remote_addr;
        w.wr.rdma_rkey_or_compare_add = compare;
        w.wr.swap = swap;
        w.wr.atomic_rkey = rkey;
    })
}

unsafe extern "C" fn wr_atomic_fetch_add(p: *mut ibv_qp_ex, rkey: u32, remote_addr: u64, add: u64) {
    build(p, IBV_WR_ATOMIC_FETCH_AND_ADD, |w| {
        w.wr.remote_addr = remote_addr;
        w.wr.rdma_rkey_or_compare_add = add;
        w.wr.atomic_rkey = rkey;
    })
}

/// `ibv_wr_atomic_write` (rxe `wr_atomic_write`): an ATOMIC WRITE of the
/// 8 bytes at `atomic_wr`, copied now (as rxe copies them into the WQE),
/// to `remote_addr` through `rkey`; no SGE. The request is posted as an
/// `IBV_WR_ATOMIC_WRITE` whose `wr.atomic.compare_add` holds the bytes,
/// big-endian (`queue_pairs::send_wr` reads them back, as
/// `SendWr::atomic_write` stores them). A NULL `atomic_wr` is `EINVAL`.
unsafe extern "C" fn wr_atomic_write(
    p: *mut ibv_qp_ex,
    rkey: u32,
    remote_addr: u64,
    atomic_wr: *const c_void,
) {
    if atomic_wr.is_null() {
        if let Some((_, b)) = locked(p) {
            if b.err == 0 {
                b.err = libc::EINVAL;
            }
        }
        return;
    }
    let mut value = [0u8; 8];
    // SAFETY: a non-NULL `atomic_wr` points to 8 readable bytes (the
    // contract of `ibv_wr_atomic_write`, point 1); unaligned is allowed.
    unsafe { std::ptr::copy_nonoverlapping(atomic_wr as *const u8, value.as_mut_ptr(), 8) };
    build(p, IBV_WR_ATOMIC_WRITE, |w| {
        w.wr.remote_addr = remote_addr;
        w.wr.rdma_rkey_or_compare_add = u64::from_be_bytes(value);
        w.wr.atomic_rkey = rkey;
    })
}

unsafe extern "C" fn wr_bind_mw(
    p: *mut ibv_qp_ex,
    mw: *mut ibv_mw,
    rkey: u32,
    info: *const ibv_mw_bind_info,
) {
    // SAFETY: a non-NULL `info` points to the bind (the contract, point 1).
    let Some(info) = (unsafe { info.as_ref() }) else {
        if let Some((_, b)) = locked(p) {
            b.err = libc::EINVAL;
        }
        return;
    };
    build(p, IBV_WR_BIND_MW, |w| {
        w.bind_mw.mw = mw;
        w.bind_mw.rkey = rkey;
        w.bind_mw.bind_info = *info;
    })
}

/// `wr.ex.invalidate_rkey` shares `imm_data`'s place (host order).
unsafe extern "C" fn wr_local_inv(p: *mut ibv_qp_ex, invalidate_rkey: u32) {
    build(p, IBV_WR_LOCAL_INV, |w| w.imm_data = invalidate_rkey)
}

unsafe extern "C" fn wr_rdma_read(p: *mut ibv_qp_ex, rkey: u32, remote_addr: u64) {
    build(p, IBV_WR_RDMA_READ, |w| {
        w.wr.remote_addr = remote_addr;
        w.wr.rdma_rkey_or_compare_add = rkey.into();
    })
}

unsafe extern "C" fn wr_rdma_write(p: *mut ibv_qp_ex, rkey: u32, remote_addr: u64) {
    build(p, IBV_WR_RDMA_WRITE, |w| {
        w.wr.remote_addr = remote_addr;
        w.wr.rdma_rkey_or_compare_add = rkey.into();
    })
}

/// `imm_data` is in network order, as the program gives it.
unsafe extern "C" fn wr_rdma_write_imm(p: *mut ibv_qp_ex, rkey: u32, remote_addr: u64, imm: u32) {
    build(p, IBV_WR_RDMA_WRITE_WITH_IMM, |w| {
        w.wr.remote_addr = remote_addr;
        w.wr.rdma_rkey_or_compare_add = rkey.into();
        w.imm_data = imm;
    })
}

unsafe extern "C" fn wr_send(p: *mut ibv_qp_ex) {
    build(p, IBV_WR_SEND, |_| {})
}

unsafe extern "C" fn wr_send_imm(p: *mut ibv_qp_ex, imm: u32) {
    build(p, IBV_WR_SEND_WITH_IMM, |w| w.imm_data = imm)
}

unsafe extern "C" fn wr_send_inv(p: *mut ibv_qp_ex, invalidate_rkey: u32) {
    build(p, IBV_WR_SEND_WITH_INV, |w| w.imm_data = invalidate_rkey)
}

// The builders of operations a QP was not created with, one per
// signature.
unsafe extern "C" fn refused_atomic_cmp_swp(p: *mut ibv_qp_ex, _: u32, _: u64, _: u64, _: u64) {
    refuse(p)
}
unsafe extern "C" fn refused_atomic_write(p: *mut ibv_qp_ex, _: u32, _: u64, _: *const c_void) {
    refuse(p)
}
unsafe extern "C" fn refused_rkey_addr_u64(p: *mut ibv_qp_ex, _: u32, _: u64, _: u64) {
    refuse(p)
}
unsafe extern "C" fn refused_bind_mw(
    p: *mut ibv_qp_ex,
    _: *mut ibv_mw,
    _: u32,
    _: *const ibv_mw_bind_info,
) {
    refuse(p)
}
unsafe extern "C" fn refused_u32(p: *mut ibv_qp_ex, _: u32) {
    refuse(p)
}
unsafe extern "C" fn refused_rkey_addr(p: *mut ibv_qp_ex, _: u32, _: u64) {
    refuse(p)
}
unsafe extern "C" fn refused_rkey_addr_u32(p: *mut ibv_qp_ex, _: u32, _: u64, _: u32) {
    refuse(p)
}
unsafe extern "C" fn refused_send(p: *mut ibv_qp_ex) {
    refuse(p)
}

/// `wr.ud` of `ibv_send_wr`: the AH where `remote_addr` is, then the
/// remote QPN and Q_Key in the two halves of the next word.
unsafe extern "C" fn wr_set_ud_addr(p: *mut ibv_qp_ex, ah: *mut c_void, qpn: u32, qkey: u32) {
    let Some((_, b)) = locked(p) else { return };
    if let Some(last) = b.last() {
        last.wr.wr.remote_addr = ah as u64;
        last.wr.wr.rdma_rkey_or_compare_add = (u64::from(qkey) << 32) | u64::from(qpn);
    }
}

unsafe extern "C" fn wr_set_sge(p: *mut ibv_qp_ex, lkey: u32, addr: u64, length: u32) {
    let Some((_, b)) = locked(p) else { return };
    let first = b.sges.len();
    let Some(last) = b.last() else { return };
    last.not_inline();
    // A zero-length SGE is no SGE (rxe).
    if length == 0 {
        last.count = 0;
        return;
    }
    last.first = first;
    last.count = 1;
    b.sges.push(ibv_sge { addr, length, lkey });
}

unsafe extern "C" fn wr_set_sge_list(p: *mut ibv_qp_ex, n: usize, list: *const ibv_sge) {
    let Some((_, b)) = locked(p) else { return };
    if b.err != 0 {
        return;
    }
    // rxe: more SGEs than the QP has is `ENOSPC`.
    if n > b.max_sge {
        b.err = libc::ENOSPC;
        return;
    }
    if n > 0 && list.is_null() {
        b.err = libc::EINVAL;
        return;
    }
    let first = b.sges.len();
    let Some(last) = b.last() else { return };
    last.not_inline();
    last.first = first;
    last.count = n;
    if n > 0 {
        // SAFETY: `list` holds `n` SGEs (the contract, point 1).
        let list = unsafe { std::slice::from_raw_parts(list, n) };
        b.sges.extend_from_slice(list);
    }
}

/// The last request's data: `bufs` copied now (the program may reuse them
/// once the call returns), sent inline as one SGE.
fn set_inline(p: *mut ibv_qp_ex, bufs: &[(*const u8, usize)]) {
    let Some((_, b)) = locked(p) else { return };
    let (first, start, max) = (b.sges.len(), b.inline.len(), b.max_inline);
    if b.last().is_none() {
        return;
    }
    let total = bufs
        .iter()
        .try_fold(0usize, |t, &(_, len)| t.checked_add(len));
    let Some(total) = total.filter(|&t| t <= max) else {
        b.err = libc::ENOSPC;
        return;
    };
    if bufs.iter().any(|&(a, len)| a.is_null() && len > 0) {
        b.err = libc::EINVAL;
        return;
    }
    for &(addr, len) in bufs.iter().filter(|&&(_, len)| len > 0) {
        // SAFETY: the program's buffer holds `len` bytes (point 1).
        b.inline
            .extend_from_slice(unsafe { std::slice::from_raw_parts(addr, len) });
    }
    let Some(last) = b.pending.last_mut() else {
        return;
    };
    last.wr.send_flags |= IBV_SEND_INLINE;
    last.inline = true;
    last.first = first;
    last.count = usize::from(total > 0);
    if total > 0 {
        // The address is the offset in `inline` until the batch is posted.
        b.sges.push(ibv_sge {
            addr: start as u64,
            length: total as u32,
            lkey: 0,
        });
    }
}

unsafe extern "C" fn wr_set_inline_data(p: *mut ibv_qp_ex, addr: *mut c_void, length: usize) {
    set_inline(p, &[(addr as *const u8, length)])
}

unsafe extern "C" fn wr_set_inline_data_list(
    p: *mut ibv_qp_ex,
    n: usize,
    bufs: *const ibv_data_buf,
) {
    if n > 0 && bufs.is_null() {
        if let Some((_, b)) = locked(p) {
            b.err = libc::EINVAL;
        }
        return;
    }
    let bufs = match n {
        0 => &[][..],
        // SAFETY: `bufs` holds `n` entries (the contract, point 1).
        _ => unsafe { std::slice::from_raw_parts(bufs, n) },
    };
    // At most a few buffers: the small copy of their pointers is not on
    // the one-SGE path.
    let list: Vec<(*const u8, usize)> = bufs
        .iter()
        .map(|d| (d.addr as *const u8, d.length))
        .collect();
    set_inline(p, &list)
}

/// `ibv_wr_start`: takes the QP's send lock (another thread's batch on
/// the QP finishes first) and starts an empty batch.
unsafe extern "C" fn wr_start(p: *mut ibv_qp_ex) {
    let Ok(q) = qp(p as *const ibv_qp) else {
        return;
    };
    let me = thread();
    if q.ex.owner.load(Ordering::Relaxed) == me {
        // A second start without complete/abort: the batch starts over.
        if let Some(b) = q.ex.batch() {
            b.clear();
        }
        return;
    }
    while q
        .ex
        .owner
        .compare_exchange_weak(0, me, Ordering::Acquire, Ordering::Relaxed)
        .is_err()
    {
        std::thread::yield_now();
    }
    if let Some(b) = q.ex.batch() {
        b.clear();
    }
}

/// `ibv_wr_complete`: posts the batch through `ops.post_send`, returns 0
/// or the errno, and releases the QP's send lock.
unsafe extern "C" fn wr_complete(p: *mut ibv_qp_ex) -> c_int {
    let Some((q, b)) = locked(p) else {
        return libc::EINVAL;
    };
    let r = if b.err != 0 {
        b.err
    } else {
        post(p as *mut ibv_qp, b)
    };
    b.clear();
    q.ex.owner.store(0, Ordering::Release);
    r
}

/// Links the batch's requests to their SGEs and each other, and posts
/// them as `ibv_post_send` would.
fn post(p: *mut ibv_qp, b: &mut Batch) -> c_int {
    if b.pending.is_empty() {
        return 0;
    }
    let base = b.inline.as_ptr() as u64;
    for pd in &b.pending {
        if pd.inline && pd.count == 1 {
            b.sges[pd.first].addr += base;
        }
    }
    let sges = b.sges.as_mut_ptr();
    b.wrs.clear();
    b.wrs.extend(b.pending.iter().map(|pd| {
        // SAFETY: ibv_send_wr is plain data (integers and pointers).
        let mut wr = unsafe { std::ptr::read(&pd.wr) };
        wr.num_sge = pd.count as c_int;
        wr.sg_list = match pd.count {
            0 => null_mut(),
            // SAFETY: the setters put `count` SGEs at `first` in `sges`.
            _ => unsafe { sges.add(pd.first) },
        };
        wr
    }));
    let n = b.wrs.len();
    let head = b.wrs.as_mut_ptr();
    for i in 0..n - 1 {
        // SAFETY: `i + 1 < n`: both are requests of `wrs`, which does not
        // move until the post returns.
        unsafe { (*head.add(i)).next = head.add(i + 1) };
    }
    let mut bad = null_mut();
    // SAFETY: `head` heads `n` linked requests whose SGE lists (in
    // `sges`) and inline data (in `inline`) stay put during the call.
    let r = unsafe { post_send(p, head, &mut bad) };
    // A full send queue is `ENOSPC` here (rxe's `check_qp_queue_full`),
    // `ENOMEM` from `ibv_post_send`.
    if r == libc::ENOMEM {
        libc::ENOSPC
    } else {
        r
    }
}

/// `ibv_wr_abort`: drops the batch and releases the QP's send lock.
unsafe extern "C" fn wr_abort(p: *mut ibv_qp_ex) {
    if let Some((q, b)) = locked(p) {
        b.clear();
        q.ex.owner.store(0, Ordering::Release);
    }
}
