//! Protection domains and memory regions: `ibv_alloc_pd`,
//! `ibv_dealloc_pd`, `ibv_reg_mr` (and its `_iova` forms), `ibv_rereg_mr`,
//! `ibv_dereg_mr`.

use std::cell::UnsafeCell;
use std::ffi::{c_int, c_uint, c_void};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;

use engine::rc::Access;

use super::{context, engine, errno_of, object, pointer, set_errno, status};
use crate::abi::*;
use crate::checks;
use crate::handles::{self, Kind, Object};
use crate::memory::ForeignMemory;

/// A protection domain, its number in the engine, and how many regions
/// and QPs use it (a PD in use cannot be freed: `EBUSY`, as the RDMA core
/// answers).
#[repr(C)]
pub(super) struct Pd {
    c: UnsafeCell<ibv_pd>,
    /// The engine's PD of its regions and QPs (`Endpoint::reg_mr_in`,
    /// `create_qp_in`): a key works only through a QP of its region's PD.
    pub(super) number: u32,
    pub(super) users: AtomicU32,
}
// SAFETY: `c` and `number` are written before the PD is handed out,
// read-only after; `users` is atomic.
unsafe impl Send for Pd {}
// SAFETY: as above.
unsafe impl Sync for Pd {}
// SAFETY: the program holds `&c`, at offset 0 (repr(C)).
unsafe impl Object for Pd {
    const KIND: Kind = Kind::Pd;
    const PUBLIC: usize = 0;
}

/// The next PD's number. From 1 (the engine's PD 0 is for callers that
/// name none; no PD of this library has it): every PD of the process gets
/// its own until 2^32 - 1 have been allocated.
static NEXT_PD: AtomicU32 = AtomicU32::new(1);

/// A number for a new PD; never 0.
fn pd_number() -> u32 {
    loop {
        let n = NEXT_PD.fetch_add(1, Ordering::Relaxed);
        if n != 0 {
            return n;
        }
    }
}

/// Checks that `pd` is a live PD of this library.
pub(super) fn pd<'a>(pd: *const ibv_pd) -> Result<&'a Pd, c_int> {
    object::<Pd, _>(pd)
}

#[no_mangle]
unsafe extern "C" fn ibv_alloc_pd(ctx: *mut ibv_context) -> *mut ibv_pd {
    pointer((|| {
        context(ctx)?;
        let number = pd_number();
        Ok(handles::publish(Box::new(Pd {
            // The handle is the engine's number, as a kernel PD's is the
            // kernel's.
            c: UnsafeCell::new(ibv_pd {
                context: ctx,
                handle: number,
            }),
            number,
            users: AtomicU32::new(0),
        })))
    })())
}

#[no_mangle]
unsafe extern "C" fn ibv_dealloc_pd(p: *mut ibv_pd) -> c_int {
    status((|| {
        if pd(p)?.users.load(Ordering::Acquire) > 0 {
            return Err(libc::EBUSY);
        }
        // SAFETY: the program frees the PD: it uses it no more.
        unsafe { handles::retire::<Pd, _>(p) }.map(drop)
    })())
}

/// A memory region. The program reads `lkey`, `rkey`, `addr`, `length`
/// from `c`; `ibv_rereg_mr` changes them (and the PD) under `state`.
#[repr(C)]
struct Mr {
    c: UnsafeCell<ibv_mr>,
    state: Mutex<MrState>,
}

struct MrState {
    iova: u64,
    access: c_uint,
}
// SAFETY: `c` is written before the MR is handed out and by
// `ibv_rereg_mr`, which holds `state` (the program does not use the MR
// during its rereg: the contract, point 4).
unsafe impl Send for Mr {}
// SAFETY: as above.
unsafe impl Sync for Mr {}
// SAFETY: the program holds `&c`, at offset 0 (repr(C)).
unsafe impl Object for Mr {
    const KIND: Kind = Kind::Mr;
    const PUBLIC: usize = 0;
}

/// The engine's rights for `IBV_ACCESS_*` flags.
pub(super) fn access_of(flags: c_uint) -> Access {
    let mut a = Access::NONE;
    for (bit, r) in [
        (IBV_ACCESS_LOCAL_WRITE, Access::LOCAL_WRITE),
        (IBV_ACCESS_REMOTE_WRITE, Access::REMOTE_WRITE),
        (IBV_ACCESS_REMOTE_READ, Access::REMOTE_READ),
        (IBV_ACCESS_REMOTE_ATOMIC, Access::REMOTE_ATOMIC),
        (IBV_ACCESS_MW_BIND, Access::MW_BIND),
    ] {
        if flags & bit != 0 {
            a = a | r;
        }
    }
    a
}

/// The L_Key and PD of the live region `m` (a memory window's bind names
/// it).
pub(super) fn mr_of(m: *const ibv_mr) -> Result<(u32, *mut ibv_pd), c_int> {
    let mr = object::<Mr, _>(m)?;
    // SAFETY: a live region's fields; `ibv_rereg_mr` does not run during
    // a verb on it (the contract, point 4).
    Ok(unsafe { ((*mr.c.get()).lkey, (*mr.c.get()).pd) })
}

/// The program's `len` bytes at `addr`, to register.
fn memory(addr: *mut c_void, len: usize) -> Result<Box<ForeignMemory>, c_int> {
    if addr.is_null() && len > 0 {
        return Err(libc::EINVAL);
    }
    // SAFETY: the verbs contract: the memory stays the program's and
    // mapped until ibv_dereg_mr (the contract, point 3).
    Ok(Box::new(unsafe {
        ForeignMemory::new(addr as *mut u8, len)
    }))
}

#[no_mangle]
unsafe extern "C" fn ibv_reg_mr_iova2(
    p: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    iova: u64,
    access: c_uint,
) -> *mut ibv_mr {
    pointer((|| {
        let shell = engine()?;
        let owner = pd(p)?;
        checks::mr_access(access)?;
        let keys = shell
            .reg_mr(owner.number, memory(addr, length)?, iova, access_of(access))
            .map_err(|e| errno_of(&e))?;
        owner.users.fetch_add(1, Ordering::AcqRel);
        Ok(handles::publish(Box::new(Mr {
            c: UnsafeCell::new(ibv_mr {
                // SAFETY: `owner` is live; its context was set at alloc.
                context: unsafe { (*owner.c.get()).context },
                pd: p,
                addr,
                length,
                handle: keys.lkey,
                lkey: keys.lkey,
                rkey: keys.rkey,
            }),
            state: Mutex::new(MrState { iova, access }),
        })))
    })())
}

#[no_mangle]
unsafe extern "C" fn ibv_reg_mr(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    access: c_int,
) -> *mut ibv_mr {
    // SAFETY: the same contract.
    unsafe { ibv_reg_mr_iova2(pd, addr, length, addr as u64, access as c_uint) }
}

/// `ibv_reg_mr_iova` (IBVERBS_1.7): `ibv_reg_mr_iova2` with `int` access.
#[no_mangle]
unsafe extern "C" fn ibv_reg_mr_iova(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    iova: u64,
    access: c_int,
) -> *mut ibv_mr {
    // SAFETY: the same contract.
    unsafe { ibv_reg_mr_iova2(pd, addr, length, iova, access as c_uint) }
}

/// `ibv_rereg_mr`: a new range, PD or rights for a region, its keys kept.
/// Input rdma-core refuses itself gives `IBV_REREG_MR_ERR_INPUT`; what the
/// kernel would refuse (a bad PD, invalid rights, no room) gives
/// `IBV_REREG_MR_ERR_CMD` and leaves the region as it was. `errno` says
/// why, as for rdma-core.
#[no_mangle]
unsafe extern "C" fn ibv_rereg_mr(
    m: *mut ibv_mr,
    flags: c_int,
    new_pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    access: c_int,
) -> c_int {
    let input = |e| {
        set_errno(e);
        IBV_REREG_MR_ERR_INPUT
    };
    let Ok(mr) = object::<Mr, _>(m) else {
        return input(libc::EINVAL);
    };
    let all = IBV_REREG_MR_CHANGE_TRANSLATION | IBV_REREG_MR_CHANGE_PD | IBV_REREG_MR_CHANGE_ACCESS;
    if flags & !all != 0
        || (flags & IBV_REREG_MR_CHANGE_TRANSLATION != 0 && (addr.is_null() || length == 0))
        || (access != 0 && flags & IBV_REREG_MR_CHANGE_ACCESS == 0)
    {
        return input(libc::EINVAL);
    }
    match rereg(mr, flags, new_pd, addr, length, access as c_uint) {
        Ok(()) => 0,
        Err(e) => {
            set_errno(e);
            IBV_REREG_MR_ERR_CMD
        }
    }
}

fn rereg(
    mr: &Mr,
    flags: c_int,
    new_pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    access: c_uint,
) -> Result<(), c_int> {
    let shell = engine()?;
    let mut st = mr.state.lock().unwrap_or_else(|e| e.into_inner());
    // SAFETY: `c` changes only here, under `state`; the program does not
    // use the region during its rereg (the contract, point 4).
    let c = unsafe { &mut *mr.c.get() };
    let change = |bit| flags & bit != 0;
    let to_pd = if change(IBV_REREG_MR_CHANGE_PD) {
        new_pd
    } else {
        c.pd
    };
    // Its own PD, or the new one: in the engine too, so that only QPs of
    // that PD use its keys from now on.
    let to_number = pd(to_pd)?.number;
    let to_access = if change(IBV_REREG_MR_CHANGE_ACCESS) {
        checks::mr_access(access)?;
        access
    } else {
        st.access
    };
    let (to_addr, to_len, to_iova) = if change(IBV_REREG_MR_CHANGE_TRANSLATION) {
        (addr, length, addr as u64)
    } else {
        (c.addr, c.length, st.iova)
    };
    shell
        .rereg_mr(
            c.lkey,
            to_number,
            memory(to_addr, to_len)?,
            to_iova,
            access_of(to_access),
        )
        .map_err(|e| errno_of(&e))?;
    if to_pd != c.pd {
        pd(c.pd)?.users.fetch_sub(1, Ordering::AcqRel);
        pd(to_pd)?.users.fetch_add(1, Ordering::AcqRel);
        c.pd = to_pd;
    }
    c.addr = to_addr;
    c.length = to_len;
    st.iova = to_iova;
    st.access = to_access;
    Ok(())
}

#[no_mangle]
unsafe extern "C" fn ibv_dereg_mr(m: *mut ibv_mr) -> c_int {
    status((|| {
        let shell = engine()?;
        let mr = object::<Mr, _>(m)?;
        // SAFETY: the program deregisters the region, so it neither uses
        // nor reregisters it now (the contract, point 4).
        let (lkey, owner) = unsafe { ((*mr.c.get()).lkey, (*mr.c.get()).pd) };
        shell.dereg_mr(lkey).map_err(|e| errno_of(&e))?;
        if let Ok(p) = pd(owner) {
            p.users.fetch_sub(1, Ordering::AcqRel);
        }
        // SAFETY: as above: the region is gone from the engine.
        unsafe { handles::retire::<Mr, _>(m) }.map(drop)
    })())
}
