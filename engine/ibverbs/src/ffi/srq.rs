//! Shared receive queues: `ibv_create_srq`, `ibv_modify_srq`,
//! `ibv_query_srq`, `ibv_destroy_srq`, and the inline `ibv_post_srq_recv`
//! (through the context's ops). The engine's SRQ (`rc/srq.rs`) does the
//! work; here are rxe's argument checks and errnos. `ibv_create_srq_ex`
//! is the inline verb of `verbs.h`, which finds no `create_srq_ex` in the
//! context and answers `EOPNOTSUPP` (basic SRQs only: no XRC).
//!
//! A QP created with `ibv_qp_init_attr.srq` takes its receives from the
//! SRQ (`queue_pairs.rs`); its own `ibv_post_recv` is refused (`EINVAL`,
//! as rxe's provider: such a QP has no receive queue). A receive carries
//! up to the SRQ's `max_sge` SGEs (at most rxe's 27). The SRQ's limit
//! event comes through `ibv_get_async_event` as
//! `IBV_EVENT_SRQ_LIMIT_REACHED`, its element the `ibv_srq`; a QP on the
//! SRQ that enters the error state raises `IBV_EVENT_QP_LAST_WQE_REACHED`
//! once, its element the `ibv_qp` (IBA 10.3.1, 11.6.3).

use std::cell::UnsafeCell;
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicU32, Ordering};

use engine::rc::{Sge, SrqAttr, SrqAttrMask};

use super::queue_pairs::{post_list, recv_wr};
use super::regions::{pd, Pd};
use super::{engine, errno_of, object, pointer, status};
use crate::abi::*;
use crate::handles::{self, Kind, Object};
use crate::limits;

/// An SRQ: the engine's SRQ `id`, its PD, and the `max_sge` a posted
/// receive may use (as created: rxe's provider checks `num_sge` against
/// it).
#[repr(C)]
pub(super) struct Srq {
    c: UnsafeCell<ibv_srq>,
    pub(super) id: u32,
    max_sge: u32,
    pd: *const Pd,
}
// SAFETY: `c` is written before the SRQ is handed out, then only its
// event count (atomically, [`Srq::ack_event`]); the rest is immutable.
unsafe impl Send for Srq {}
// SAFETY: as above.
unsafe impl Sync for Srq {}
// SAFETY: the program holds `&c`, at offset 0 (repr(C)).
unsafe impl Object for Srq {
    const KIND: Kind = Kind::Srq;
    const PUBLIC: usize = 0;
}

/// Checks that `srq` is a live SRQ of this library.
pub(super) fn srq<'a, P>(srq: *const P) -> Result<&'a Srq, c_int> {
    object::<Srq, _>(srq)
}

impl Srq {
    /// `ibv_ack_async_event` of an event on this SRQ.
    pub(super) fn ack_event(&self) {
        // SAFETY: the field is a u32 in the live SRQ, and every write to
        // it is this atomic add.
        let n = unsafe { AtomicU32::from_ptr(&raw mut (*self.c.get()).events_completed) };
        n.fetch_add(1, Ordering::AcqRel);
    }
}

/// The creation attributes rxe accepts (`rxe_srq_chk_init`): `max_wr`
/// 1..=`max_srq_wr`, `max_sge` up to `max_srq_sge`; else `EINVAL`.
fn check_init(a: &ibv_srq_attr) -> Result<(), c_int> {
    if a.max_wr == 0 || a.max_wr > limits::MAX_SRQ_WR as u32 {
        return Err(libc::EINVAL);
    }
    if a.max_sge > limits::MAX_SRQ_SGE as u32 {
        return Err(libc::EINVAL);
    }
    Ok(())
}

#[no_mangle]
unsafe extern "C" fn ibv_create_srq(p: *mut ibv_pd, init: *mut ibv_srq_init_attr) -> *mut ibv_srq {
    pointer((|| {
        let shell = engine()?;
        let owner = pd(p)?;
        // SAFETY: a non-NULL `init` points to the attributes (point 1).
        let a = unsafe { init.as_mut() }.ok_or(libc::EINVAL)?;
        check_init(&a.attr)?;
        // SAFETY: ibv_srq is plain data (pointers, integers, and a pthread
        // mutex and condition whose all-zero value is their initializer).
        let mut c: ibv_srq = unsafe { std::mem::zeroed() };
        // SAFETY: `owner` is live; its context was set at alloc.
        c.context = unsafe { (*(p as *const ibv_pd)).context };
        c.srq_context = a.srq_context;
        c.pd = p;
        let b = Box::new(Srq {
            c: UnsafeCell::new(c),
            id: 0,
            max_sge: a.attr.max_sge.max(1),
            pd: owner,
        });
        let attr = SrqAttr {
            max_wr: a.attr.max_wr,
            max_sge: a.attr.max_sge,
            srq_limit: a.attr.srq_limit,
        };
        // The engine hands the public address back with the SRQ's events.
        let (id, got) = shell
            .create_srq(owner.number, attr, b.c.get() as usize)
            .map_err(|e| errno_of(&e))?;
        let mut b = b;
        b.id = id;
        // SAFETY: not handed out yet: this is the only reference.
        unsafe { (*b.c.get()).handle = id };
        // What the SRQ holds goes back to the caller (libibverbs copies
        // the kernel's answer into `init->attr`).
        a.attr.max_wr = got.max_wr;
        a.attr.max_sge = got.max_sge;
        owner.users.fetch_add(1, Ordering::AcqRel);
        Ok(handles::publish(b))
    })())
}

#[no_mangle]
unsafe extern "C" fn ibv_modify_srq(
    s: *mut ibv_srq,
    attr: *mut ibv_srq_attr,
    mask: c_int,
) -> c_int {
    status((|| {
        let shell = engine()?;
        let me = srq(s)?;
        // SAFETY: a non-NULL `attr` points to the attributes (point 1).
        let a = unsafe { attr.as_ref() }.ok_or(libc::EINVAL)?;
        if mask & !(IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT) != 0 {
            return Err(libc::EINVAL);
        }
        let mut m = SrqAttrMask(0);
        if mask & IBV_SRQ_MAX_WR != 0 {
            // rxe_srq_chk_attr: beyond the device's max_srq_wr.
            if a.max_wr > limits::MAX_SRQ_WR as u32 {
                return Err(libc::EINVAL);
            }
            m = m | SrqAttrMask::MAX_WR;
        }
        if mask & IBV_SRQ_LIMIT != 0 {
            m = m | SrqAttrMask::LIMIT;
        }
        let q = SrqAttr {
            max_wr: a.max_wr,
            max_sge: a.max_sge,
            srq_limit: a.srq_limit,
        };
        shell.modify_srq(me.id, &q, m).map_err(|e| errno_of(&e))
    })())
}

#[no_mangle]
unsafe extern "C" fn ibv_query_srq(s: *mut ibv_srq, attr: *mut ibv_srq_attr) -> c_int {
    status((|| {
        let shell = engine()?;
        let me = srq(s)?;
        if attr.is_null() {
            return Err(libc::EINVAL);
        }
        let q = shell.query_srq(me.id).map_err(|e| errno_of(&e))?;
        // SAFETY: `attr` points to an ibv_srq_attr (the contract, point 1).
        unsafe {
            attr.write(ibv_srq_attr {
                max_wr: q.max_wr,
                max_sge: q.max_sge,
                srq_limit: q.srq_limit,
            })
        };
        Ok(())
    })())
}

#[no_mangle]
unsafe extern "C" fn ibv_destroy_srq(s: *mut ibv_srq) -> c_int {
    status((|| {
        let shell = engine()?;
        let me = srq(s)?;
        // EBUSY while a QP uses it (the engine counts them).
        shell.destroy_srq(me.id).map_err(|e| errno_of(&e))?;
        // SAFETY: a PD with SRQs cannot be freed (its count holds this
        // SRQ), so it is alive.
        unsafe { (*me.pd).users.fetch_sub(1, Ordering::AcqRel) };
        // SAFETY: the program destroys the SRQ: it uses it no more.
        unsafe { handles::retire::<Srq, _>(s) }.map(drop)
    })())
}

/// Most SGEs an SRQ receive carries (rxe `RXE_MAX_SRQ_SGE`).
const MAX_SRQ_SGE: usize = limits::MAX_SRQ_SGE as usize;

/// `ops.post_srq_recv`: the linked list of receives, one by one (rxe's
/// provider: `ENOMEM` when full, `EINVAL` for more SGEs than the SRQ's
/// `max_sge`); at the first refusal `bad` points at that request. A
/// receive's SGE list, up to the SRQ's `max_sge` entries, is copied: the
/// program may reuse its `sg_list` at once. No entry's key is looked at,
/// as rxe (rdma-core providers/rxe/rxe.c `rxe_post_srq_recv` ->
/// `rxe_post_one_recv`): a key of no region, of another PD than the
/// taking QP's, a range out of its region or a region without
/// LOCAL_WRITE fails the receive when a message lands in it
/// (`IBV_WC_LOC_QP_OP_ERR`, that QP to error; `rc/srq.rs`).
pub(super) unsafe extern "C" fn post_srq_recv(
    s: *mut c_void,
    wr: *mut ibv_recv_wr,
    bad: *mut *mut ibv_recv_wr,
) -> c_int {
    let target = engine().and_then(|shell| Ok((shell, srq(s as *const ibv_srq)?)));
    let (shell, me) = match target {
        Ok(x) => x,
        Err(e) => {
            if !bad.is_null() {
                // SAFETY: `bad` is writable (the contract, point 1).
                unsafe { *bad = wr };
            }
            return e;
        }
    };
    // SAFETY: `wr` heads a list of live requests whose SGE lists hold
    // `num_sge` entries; `bad` is NULL or writable (the contract, point 1).
    unsafe {
        post_list(
            wr,
            bad,
            |w| w.next,
            |w| {
                let n = usize::try_from(w.num_sge).map_err(|_| libc::EINVAL)?;
                if n as u64 > u64::from(me.max_sge) || n > MAX_SRQ_SGE {
                    return Err(libc::EINVAL);
                }
                if n > 0 && w.sg_list.is_null() {
                    return Err(libc::EINVAL);
                }
                if n <= 1 {
                    let r = recv_wr(w)?;
                    return shell.post_srq_recv(me.id, r).map_err(|e| errno_of(&e));
                }
                // `w.sg_list` holds `w.num_sge` SGEs (the contract, point
                // 1), checked non-NULL above.
                let src = std::slice::from_raw_parts(w.sg_list, n);
                let mut list = [Sge::default(); MAX_SRQ_SGE];
                for (o, s) in list.iter_mut().zip(src) {
                    *o = Sge {
                        lkey: s.lkey,
                        addr: s.addr,
                        length: s.length,
                    };
                }
                shell
                    .post_srq_recv_sgl(me.id, w.wr_id, &list[..n])
                    .map_err(|e| errno_of(&e))
            },
        )
    }
}
