//! Memory windows: `ibv_alloc_mw`, `ibv_dealloc_mw` and `ibv_bind_mw`
//! (inline in `verbs.h` over `ops.alloc_mw`, `ops.dealloc_mw`,
//! `ops.bind_mw`), and the forms of the BIND_MW, LOCAL_INV and
//! SEND_WITH_INV work requests `ibv_post_send` hands the engine. As
//! rdma-core's rxe provider (`providers/rxe/rxe.c`): a type 1 bind is a
//! BIND_MW work request posted on the QP with the window's key byte
//! incremented (`ibv_inc_rkey`), and the window's `rkey` takes the new key
//! once it is posted; the engine checks the bind when the QP's send queue
//! reaches it (`MrTable::bind_window`) and a refused one completes with
//! `IBV_WC_MW_BIND_ERR`.

use std::cell::UnsafeCell;
use std::ffi::c_int;
use std::sync::atomic::{AtomicU32, Ordering};

use engine::rc::{MwBind, MwType, SendOp, SendWr, Sge};

use super::queue_pairs::qp;
use super::regions::{access_of, mr_of, pd, Pd};
use super::{engine, errno_of, object, pointer, status};
use crate::abi::*;
use crate::handles::{self, Kind, Object};

/// A memory window: what the program sees, and its PD.
#[repr(C)]
pub(super) struct Mw {
    c: UnsafeCell<ibv_mw>,
    pd: *const Pd,
}
// SAFETY: `c` is written before the window is handed out, then only its
// `rkey` by `ibv_bind_mw` (the program does not bind a window from two
// threads at once, nor use it while it frees it: the contract, point 4);
// `pd` is immutable.
unsafe impl Send for Mw {}
// SAFETY: as above.
unsafe impl Sync for Mw {}
// SAFETY: the program holds `&c`, at offset 0 (repr(C)).
unsafe impl Object for Mw {
    const KIND: Kind = Kind::Mw;
    const PUBLIC: usize = 0;
}

impl Mw {
    /// The window's R_Key as the program has it (`mw->rkey`).
    fn rkey(&self) -> u32 {
        // SAFETY: a u32 of the live window (see `Sync`).
        unsafe { (*self.c.get()).rkey }
    }
}

/// The next window's `handle`.
static NEXT_HANDLE: AtomicU32 = AtomicU32::new(1);

/// `ops.alloc_mw`: a window of type 1 or 2 in the PD (any other type:
/// `EINVAL`, as uverbs' `ib_uverbs_alloc_mw`). The PD is in use while the
/// window lives.
pub(super) unsafe extern "C" fn alloc_mw(p: *mut ibv_pd, type_: c_int) -> *mut ibv_mw {
    pointer((|| {
        let shell = engine()?;
        let owner = pd(p)?;
        let kind = match type_ {
            IBV_MW_TYPE_1 => MwType::One,
            IBV_MW_TYPE_2 => MwType::Two,
            _ => return Err(libc::EINVAL),
        };
        let rkey = shell
            .alloc_mw(owner.number, kind)
            .map_err(|e| errno_of(&e))?;
        owner.users.fetch_add(1, Ordering::AcqRel);
        Ok(handles::publish(Box::new(Mw {
            c: UnsafeCell::new(ibv_mw {
                // SAFETY: a live PD's context (written before it was
                // handed out).
                context: unsafe { (*p).context },
                pd: p,
                rkey,
                handle: NEXT_HANDLE.fetch_add(1, Ordering::Relaxed),
                type_,
            }),
            pd: owner as *const Pd,
        })))
    })())
}

/// `ops.dealloc_mw`: frees the window; an access through its keys is
/// refused from then on.
pub(super) unsafe extern "C" fn dealloc_mw(m: *mut ibv_mw) -> c_int {
    status((|| {
        let shell = engine()?;
        let w = object::<Mw, _>(m)?;
        shell.dealloc_mw(w.rkey()).map_err(|e| errno_of(&e))?;
        // SAFETY: a window holds its PD in use, so the PD is alive.
        unsafe { (*w.pd).users.fetch_sub(1, Ordering::AcqRel) };
        // SAFETY: the program frees the window: it uses it no more.
        unsafe { handles::retire::<Mw, _>(m) }.map(drop)
    })())
}

/// `ops.bind_mw` (`ibv_bind_mw` has checked the type, the region and the
/// PDs): rdma-core's `rxe_bind_mw`. A zero-based bind is `EINVAL`; the
/// bind is posted on `q` as a BIND_MW work request with the key byte
/// incremented, and the window's `rkey` is the new key from then on (if
/// the bind then fails, its completion says so and the program restores
/// the key, as with rxe).
pub(super) unsafe extern "C" fn bind_mw(
    q: *mut ibv_qp,
    m: *mut ibv_mw,
    b: *mut ibv_mw_bind,
) -> c_int {
    status((|| {
        let shell = engine()?;
        let qpn = qp(q)?.qp_num();
        let w = object::<Mw, _>(m)?;
        if b.is_null() {
            return Err(libc::EINVAL);
        }
        // SAFETY: `b` points to an ibv_mw_bind (the contract, point 1).
        let b = unsafe { &*b };
        let info = &b.bind_info;
        if info.mr.is_null() && (info.addr != 0 || info.length != 0) {
            return Err(libc::EINVAL);
        }
        if info.mw_access_flags & IBV_ACCESS_ZERO_BASED != 0 {
            return Err(libc::EINVAL);
        }
        let lkey = if info.mr.is_null() {
            0
        } else {
            let (lkey, mr_pd) = mr_of(info.mr)?;
            // SAFETY: a live window's `pd` (written before it was handed out).
            if mr_pd != unsafe { (*m).pd } {
                return Err(libc::EPERM);
            }
            lkey
        };
        let old = w.rkey();
        let new = inc_rkey(old);
        let bind = window_bind(old, new, lkey, info);
        let mut wr = SendWr::bind_mw(b.wr_id, &bind);
        wr.signaled = b.send_flags & IBV_SEND_SIGNALED != 0;
        shell.post_send(qpn, wr).map_err(|e| errno_of(&e))?;
        // SAFETY: the program does not use the window from another thread
        // while it binds it (see `Sync`).
        unsafe { (&raw mut (*w.c.get()).rkey).write(new) };
        Ok(())
    })())
}

/// `ibv_inc_rkey`: the next key byte.
fn inc_rkey(rkey: u32) -> u32 {
    (rkey & !0xFF) | (rkey.wrapping_add(1) & 0xFF)
}

/// The engine's bind of window `mw_rkey` to the region of `lkey`, new key
/// `rkey`, as `info` says.
fn window_bind(mw_rkey: u32, rkey: u32, lkey: u32, info: &ibv_mw_bind_info) -> MwBind {
    MwBind {
        mw_rkey,
        rkey,
        lkey,
        addr: info.addr,
        len: info.length,
        access: access_of(info.mw_access_flags),
        zero_based: info.mw_access_flags & IBV_ACCESS_ZERO_BASED != 0,
    }
}

/// The engine's form of a BIND_MW, LOCAL_INV or SEND_WITH_INV work
/// request (`ibv_post_send`), after rdma-core's rxe `validate_send_wr`: a
/// BIND_MW carries no SGE and no immediate data (`EINVAL`); its window
/// and region must be live objects of this library (`EINVAL`). The R_Key
/// to invalidate is `invalidate_rkey`, in host order. `sge` is the
/// request's SGE (none for the local operations).
pub(super) fn window_wr(w: &ibv_send_wr, sge: Sge) -> Result<SendWr, c_int> {
    let mut wr = match w.opcode {
        IBV_WR_BIND_MW => {
            if w.num_sge != 0 || w.imm_data != 0 {
                return Err(libc::EINVAL);
            }
            let m = object::<Mw, _>(w.bind_mw.mw)?;
            let info = &w.bind_mw.bind_info;
            let lkey = if info.mr.is_null() {
                if info.length != 0 {
                    return Err(libc::EINVAL);
                }
                0
            } else {
                mr_of(info.mr)?.0
            };
            SendWr::bind_mw(w.wr_id, &window_bind(m.rkey(), w.bind_mw.rkey, lkey, info))
        }
        IBV_WR_LOCAL_INV => SendWr {
            imm: w.imm_data,
            ..SendWr::new(w.wr_id, SendOp::LocalInv, Sge::default())
        },
        _ => SendWr {
            imm: w.imm_data,
            ..SendWr::new(w.wr_id, SendOp::SendWithInv, sge)
        },
    };
    wr.signaled = w.send_flags & IBV_SEND_SIGNALED != 0;
    Ok(wr)
}
