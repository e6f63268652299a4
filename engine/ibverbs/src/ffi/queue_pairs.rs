//! Queue pairs: `ibv_create_qp`, `ibv_modify_qp`, `ibv_query_qp`,
//! `ibv_destroy_qp`, and the inline `ibv_post_send` / `ibv_post_recv`
//! (through the context's ops).

use std::cell::UnsafeCell;
use std::ffi::c_int;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};

use engine::rc::{
    Mtu, QpAttr, QpAttrMask, QpInitAttr, QpState, RecvWr, RemoteAddress, SendOp, SendWr, Sge,
    SgeCaps,
};

use super::completions::{cq, Cq};
use super::qp_ex::QpEx;
use super::regions::{access_of, pd, Pd};
use super::{engine, errno_of, mtu_enum, object, pointer, status, unsupported};
use crate::abi::*;
use crate::checks;
use crate::handles::{self, Kind, Object};
use crate::shell::Shell;

mod ud;

/// A QP: the engine's QP `qp_num`, what it was created with, its access
/// flags (`IBV_QP_ACCESS_FLAGS`, as the program last set them).
#[repr(C)]
pub(super) struct Qp {
    c: UnsafeCell<ibv_qp>,
    /// The rest of `ibv_qp_ex` and `verbs_qp` (`ibv_qp_to_qp_ex`).
    pub(super) ex: QpEx,
    cap: ibv_qp_cap,
    sq_sig_all: c_int,
    access: AtomicU32,
    pd: *const Pd,
    send_cq: *const Cq,
    recv_cq: *const Cq,
}
// SAFETY: `c` is written before the QP is handed out, then only its
// `state` (by `ibv_modify_qp`/`ibv_query_qp`, as rdma-core writes it) and
// its event count (atomically); the rest is immutable or atomic, or
// (`ex`) guarded by the send lock it holds.
unsafe impl Send for Qp {}
// SAFETY: as above.
unsafe impl Sync for Qp {}
// SAFETY: the program holds `&c`, at offset 0 (repr(C)).
unsafe impl Object for Qp {
    const KIND: Kind = Kind::Qp;
    const PUBLIC: usize = 0;
}

/// Checks that `qp` is a live QP of this library.
pub(super) fn qp<'a>(qp: *const ibv_qp) -> Result<&'a Qp, c_int> {
    object::<Qp, _>(qp)
}

impl Qp {
    pub(super) fn qp_num(&self) -> u32 {
        // SAFETY: `qp_num` is written before the QP is handed out.
        unsafe { (*self.c.get()).qp_num }
    }

    /// `IBV_QPT_RC`, `IBV_QPT_UC` or `IBV_QPT_UD`.
    pub(super) fn qp_type(&self) -> c_int {
        // SAFETY: `qp_type` is written before the QP is handed out.
        unsafe { (*self.c.get()).qp_type }
    }

    /// Mirrors the engine's state into `qp->state`, which programs read.
    fn set_state(&self, s: c_int) {
        // SAFETY: written as rdma-core writes it (the contract, point 4).
        unsafe { (&raw mut (*self.c.get()).state).write(s) };
    }

    /// `ibv_ack_async_event` of an event on this QP.
    pub(super) fn ack_event(&self) {
        // SAFETY: the field is a u32 in the live QP, and every write to it
        // is this atomic add.
        let n = unsafe { AtomicU32::from_ptr(&raw mut (*self.c.get()).events_completed) };
        n.fetch_add(1, Ordering::AcqRel);
    }
}

#[no_mangle]
pub(super) unsafe extern "C" fn ibv_create_qp(
    p: *mut ibv_pd,
    init: *mut ibv_qp_init_attr,
) -> *mut ibv_qp {
    // SAFETY: the caller's contract is ibv_create_qp's.
    unsafe { create_qp(p, init, false) }
}

/// The drop-in librdmacm's one private entry point (version node
/// `ROCE_XDP_PRIVATE_1`): creates QP 1, the GSI its connection manager
/// sends and receives MADs on, as a UD QP of `init` (`qp_type` must be
/// `IBV_QPT_UD`, no SRQ). `EINVAL` if the GSI exists already (its number is in use). Public verbs
/// have no way to name a QP number; rdma-core's librdmacm reaches the
/// kernel's GSI through /dev/infiniband/rdma_cm instead.
#[no_mangle]
unsafe extern "C" fn roce_xdp_create_gsi_qp(
    p: *mut ibv_pd,
    init: *mut ibv_qp_init_attr,
) -> *mut ibv_qp {
    // SAFETY: the caller's contract is ibv_create_qp's.
    unsafe { create_qp(p, init, true) }
}

/// `ibv_create_qp`, or the GSI's creation (`gsi`: a UD QP numbered 1).
unsafe fn create_qp(p: *mut ibv_pd, init: *mut ibv_qp_init_attr, gsi: bool) -> *mut ibv_qp {
    pointer((|| {
        let shell = engine()?;
        let owner = pd(p)?;
        // SAFETY: a non-NULL `init` points to the attributes (point 1).
        let a = unsafe { init.as_mut() }.ok_or(libc::EINVAL)?;
        let (scq, rcq) = (cq(a.send_cq)?, cq(a.recv_cq)?);
        if a.qp_type != IBV_QPT_RC && a.qp_type != IBV_QPT_UC && a.qp_type != IBV_QPT_UD {
            return Err(unsupported!(
                "ibv_create_qp of a QP type other than RC, UC and UD (XRC, raw packet)",
                libc::EOPNOTSUPP
            ));
        }
        // A QP on an SRQ takes its receives from it: its receive
        // capacities are ignored (rxe_qp_chk_cap) and read 0.
        let srq = match a.srq.is_null() {
            true => None,
            false => Some(super::srq::srq(a.srq)?),
        };
        if srq.is_some() {
            (a.cap.max_recv_wr, a.cap.max_recv_sge) = (0, 0);
        }
        checks::qp_cap(
            a.cap.max_send_wr,
            a.cap.max_recv_wr,
            (a.cap.max_send_sge, a.cap.max_recv_sge),
            a.cap.max_inline_data,
        )?;
        let init_attr = QpInitAttr {
            send_cq: scq.id,
            recv_cq: rcq.id,
            max_send_wr: a.cap.max_send_wr.max(1),
            max_recv_wr: a.cap.max_recv_wr.max(1),
            sq_sig_all: a.sq_sig_all != 0,
            srq: srq.map(|s| s.id),
        };
        if gsi && (a.qp_type != IBV_QPT_UD || srq.is_some()) {
            return Err(libc::EINVAL);
        }
        if a.qp_type == IBV_QPT_UD {
            return ud::create(shell, p, owner, (scq, rcq), a, init_attr, gsi);
        }
        // Report what the QP has: its SGEs and inline bytes as rxe grants
        // them (rxe_qp_init_req: the send WQE's room is the larger of the
        // SGEs and the inline data asked for, and both may fill it).
        let sge_caps = SgeCaps {
            max_send_sge: a.cap.max_send_sge,
            max_recv_sge: a.cap.max_recv_sge,
            max_inline_data: a.cap.max_inline_data,
        }
        .as_rxe_grants();
        a.cap.max_send_wr = init_attr.max_send_wr;
        a.cap.max_send_sge = sge_caps.max_send_sge;
        a.cap.max_inline_data = sge_caps.max_inline_data;
        if srq.is_none() {
            a.cap.max_recv_wr = init_attr.max_recv_wr;
            a.cap.max_recv_sge = sge_caps.max_recv_sge;
        }
        // SAFETY: ibv_qp is plain data (pointers, integers, and a pthread
        // mutex and condition whose all-zero value is their initializer).
        let mut c: ibv_qp = unsafe { std::mem::zeroed() };
        // SAFETY: `owner` is live; its context was set at alloc.
        c.context = unsafe { (*(p as *const ibv_pd)).context };
        c.qp_context = a.qp_context;
        c.pd = p;
        c.send_cq = a.send_cq;
        c.recv_cq = a.recv_cq;
        c.srq = a.srq;
        c.state = IBV_QPS_RESET;
        c.qp_type = a.qp_type;
        let b = Box::new(Qp {
            c: UnsafeCell::new(c),
            ex: QpEx::new(),
            cap: a.cap,
            sq_sig_all: a.sq_sig_all,
            access: AtomicU32::new(0),
            pd: owner,
            send_cq: scq,
            recv_cq: rcq,
        });
        // The engine hands the public address back with the QP's events.
        let token = b.c.get() as usize;
        let qpn = if a.qp_type == IBV_QPT_UC {
            shell.create_uc_qp(owner.number, init_attr, token)
        } else {
            shell.create_qp(owner.number, init_attr, token)
        }
        .map_err(|e| errno_of(&e))?;
        if let Err(e) = shell.set_qp_sge_caps(qpn, sge_caps) {
            let _ = shell.destroy_qp(qpn);
            return Err(errno_of(&e));
        }
        // SAFETY: not handed out yet: this is the only reference.
        unsafe {
            (*b.c.get()).handle = qpn;
            (*b.c.get()).qp_num = qpn;
        }
        owner.users.fetch_add(1, Ordering::AcqRel);
        scq.qps.fetch_add(1, Ordering::AcqRel);
        rcq.qps.fetch_add(1, Ordering::AcqRel);
        Ok(handles::publish(b))
    })())
}

#[no_mangle]
unsafe extern "C" fn ibv_destroy_qp(p: *mut ibv_qp) -> c_int {
    status((|| {
        let shell = engine()?;
        let q = qp(p)?;
        shell.destroy_qp(q.qp_num()).map_err(|e| errno_of(&e))?;
        // SAFETY: a PD or CQ with QPs cannot be freed (their counts hold
        // this QP), so they are alive.
        unsafe {
            (*q.pd).users.fetch_sub(1, Ordering::AcqRel);
            (*q.send_cq).qps.fetch_sub(1, Ordering::AcqRel);
            (*q.recv_cq).qps.fetch_sub(1, Ordering::AcqRel);
        }
        // SAFETY: the program destroys the QP: it uses it no more.
        unsafe { handles::retire::<Qp, _>(p) }.map(drop)
    })())
}

fn state_of(s: c_int) -> Option<QpState> {
    Some(match s {
        IBV_QPS_RESET => QpState::Reset,
        IBV_QPS_INIT => QpState::Init,
        IBV_QPS_RTR => QpState::Rtr,
        IBV_QPS_RTS => QpState::Rts,
        IBV_QPS_ERR => QpState::Error,
        _ => return None,
    })
}

fn state_enum(s: QpState) -> c_int {
    match s {
        QpState::Reset => IBV_QPS_RESET,
        QpState::Init => IBV_QPS_INIT,
        QpState::Rtr => IBV_QPS_RTR,
        QpState::Rts => IBV_QPS_RTS,
        QpState::Error => IBV_QPS_ERR,
    }
}

fn mtu_of(e: c_int) -> Option<Mtu> {
    Some(match e {
        1 => Mtu::Mtu256,
        2 => Mtu::Mtu512,
        3 => Mtu::Mtu1024,
        4 => Mtu::Mtu2048,
        5 => Mtu::Mtu4096,
        _ => return None,
    })
}

pub(super) fn ip_of_gid(g: [u8; 16]) -> IpAddr {
    let v6 = Ipv6Addr::from(g);
    match v6.to_ipv4_mapped() {
        Some(v4) => IpAddr::V4(v4),
        None => IpAddr::V6(v6),
    }
}

/// `ibv_modify_qp`'s refusals: one line saying why (rxe says nothing; a
/// user of the drop-in learns what to change), `EINVAL`.
fn modify_error(what: &str) -> c_int {
    eprintln!("roce-xdp: ibv_modify_qp: {what}");
    libc::EINVAL
}

#[no_mangle]
unsafe extern "C" fn ibv_modify_qp(p: *mut ibv_qp, attr: *mut ibv_qp_attr, mask: c_int) -> c_int {
    status((|| {
        let shell = engine()?;
        let me = qp(p)?;
        // SAFETY: a non-NULL `attr` points to the attributes (point 1).
        let a = unsafe { attr.as_ref() }.ok_or(libc::EINVAL)?;
        if me.qp_type() == IBV_QPT_UD {
            return ud::modify(shell, me, a, mask);
        }
        let has = |bit: c_int| mask & bit != 0;
        let (cur, _) = shell.query_qp(me.qp_num()).ok_or(libc::EINVAL)?;
        let target = has(IBV_QP_STATE).then_some(a.qp_state);
        if let Some(s) = target {
            if state_of(s).is_none() {
                return Err(unsupported!("ibv_modify_qp to SQD or SQE", libc::EINVAL));
            }
        }
        if me.qp_type() == IBV_QPT_UC {
            if !checks::uc_modify_is_ok(state_enum(cur), target, mask) {
                return Err(modify_error(
                    "the attribute mask does not fit the state transition (IBA 11.2.4.2 for UC: RESET->INIT needs PKEY_INDEX, PORT, ACCESS_FLAGS; INIT->RTR AV, PATH_MTU, DEST_QPN, RQ_PSN; RTR->RTS SQ_PSN; no timeout, retry, RNR or rd_atomic attributes)",
                ));
            }
        } else if !checks::rc_modify_is_ok(state_enum(cur), target, mask) {
            return Err(modify_error(
                "the attribute mask does not fit the state transition (IBA 11.2.4.2: RESET->INIT needs PKEY_INDEX, PORT, ACCESS_FLAGS; INIT->RTR AV, PATH_MTU, DEST_QPN, RQ_PSN, MAX_DEST_RD_ATOMIC, MIN_RNR_TIMER; RTR->RTS SQ_PSN, TIMEOUT, RETRY_CNT, RNR_RETRY, MAX_QP_RD_ATOMIC)",
            ));
        }
        checks::modify_values(
            mask,
            &checks::ModifyValues {
                port_num: a.port_num,
                pkey_index: a.pkey_index,
                path_mtu: a.path_mtu,
                max_rd_atomic: a.max_rd_atomic,
                max_dest_rd_atomic: a.max_dest_rd_atomic,
                timeout: a.timeout,
                access: a.qp_access_flags,
            },
        )
        .map_err(modify_error)?;
        let mut q = QpAttr::default();
        let mut m = QpAttrMask(0);
        if let Some(s) = target.and_then(state_of) {
            q.state = s;
            m = m | QpAttrMask::STATE;
        }
        if has(IBV_QP_PATH_MTU) {
            // Checked by `modify_values`.
            q.path_mtu = mtu_of(a.path_mtu).ok_or(libc::EINVAL)?;
            m = m | QpAttrMask::PATH_MTU;
        }
        if has(IBV_QP_TIMEOUT) {
            q.timeout = a.timeout;
            m = m | QpAttrMask::TIMEOUT;
        }
        if has(IBV_QP_RETRY_CNT) {
            q.retry_cnt = a.retry_cnt;
            m = m | QpAttrMask::RETRY_CNT;
        }
        if has(IBV_QP_RNR_RETRY) {
            q.rnr_retry = a.rnr_retry;
            m = m | QpAttrMask::RNR_RETRY;
        }
        if has(IBV_QP_MIN_RNR_TIMER) {
            q.min_rnr_timer = a.min_rnr_timer;
            m = m | QpAttrMask::MIN_RNR_TIMER;
        }
        if has(IBV_QP_MAX_QP_RD_ATOMIC) {
            q.max_rd_atomic = a.max_rd_atomic.max(1);
            m = m | QpAttrMask::MAX_QP_RD_ATOMIC;
        }
        if has(IBV_QP_MAX_DEST_RD_ATOMIC) {
            q.max_dest_rd_atomic = a.max_dest_rd_atomic.max(1);
            m = m | QpAttrMask::MAX_DEST_RD_ATOMIC;
        }
        if has(IBV_QP_SQ_PSN) {
            q.sq_psn = a.sq_psn & 0xff_ffff;
            m = m | QpAttrMask::SQ_PSN;
        }
        if has(IBV_QP_RQ_PSN) {
            q.rq_psn = a.rq_psn & 0xff_ffff;
            m = m | QpAttrMask::RQ_PSN;
        }
        if has(IBV_QP_DEST_QPN) {
            q.dest_qpn = a.dest_qp_num & 0xff_ffff;
            m = m | QpAttrMask::DEST_QPN;
        }
        if has(IBV_QP_AV) {
            let ah = &a.ah_attr;
            if ah.is_global == 0 {
                return Err(modify_error(
                    "the address vector has no GRH (is_global 0): on RoCE give a GID index (-g 1 / -x 1)",
                ));
            }
            let ip = ip_of_gid(ah.grh.dgid);
            if !ip.is_ipv4() {
                return Err(modify_error(
                    "the destination GID is not an IPv4-mapped RoCE v2 GID",
                ));
            }
            let mac = shell
                .resolve_mac(ip)
                .map_err(|e| modify_error(&format!("cannot resolve the MAC of {ip}: {e}")))?;
            q.remote = RemoteAddress {
                mac,
                ip,
                vlan: None,
                ..RemoteAddress::default()
            };
            // The route's hop limit, not the program's: the kernel's RDMA
            // core replaces it as it resolves the address (rxe's frames
            // carry TTL 64 where ibv_rc_pingpong asks for 1).
            q.hop_limit = shell.route_hop_limit(ip);
            m = m | QpAttrMask::AV | QpAttrMask::HOP_LIMIT;
        }
        if has(IBV_QP_ACCESS_FLAGS) {
            q.access = access_of(a.qp_access_flags);
            m = m | QpAttrMask::ACCESS_FLAGS;
        }
        // IBV_QP_PKEY_INDEX (one P_Key) and IBV_QP_PORT (one port) were
        // checked above and have nothing to set.
        shell
            .modify_qp(me.qp_num(), &q, m)
            .map_err(|e| modify_error(&e.to_string()))?;
        if has(IBV_QP_ACCESS_FLAGS) {
            me.access.store(a.qp_access_flags, Ordering::Release);
        }
        if let Some(s) = target {
            me.set_state(s);
        }
        Ok(())
    })())
}

#[no_mangle]
unsafe extern "C" fn ibv_query_qp(
    p: *mut ibv_qp,
    attr: *mut ibv_qp_attr,
    _mask: c_int,
    init: *mut ibv_qp_init_attr,
) -> c_int {
    status((|| {
        let shell = engine()?;
        let me = qp(p)?;
        if attr.is_null() {
            return Err(libc::EINVAL);
        }
        if me.qp_type() == IBV_QPT_UD {
            // SAFETY: the contract, point 1, as below.
            return unsafe { ud::query(shell, me, attr, init) };
        }
        let (state, q) = shell.query_qp(me.qp_num()).ok_or(libc::EINVAL)?;
        let mut a = ibv_qp_attr {
            qp_state: state_enum(state),
            cur_qp_state: state_enum(state),
            path_mtu: mtu_enum(q.path_mtu),
            rq_psn: q.rq_psn,
            sq_psn: q.sq_psn,
            dest_qp_num: q.dest_qpn,
            qp_access_flags: me.access.load(Ordering::Acquire),
            cap: me.cap,
            max_rd_atomic: q.max_rd_atomic,
            max_dest_rd_atomic: q.max_dest_rd_atomic,
            min_rnr_timer: q.min_rnr_timer,
            port_num: 1,
            timeout: q.timeout,
            retry_cnt: q.retry_cnt,
            rnr_retry: q.rnr_retry,
            ..ibv_qp_attr::default()
        };
        if let IpAddr::V4(v4) = q.remote.ip {
            if v4 != Ipv4Addr::UNSPECIFIED {
                a.ah_attr.is_global = 1;
                a.ah_attr.grh.dgid = v4.to_ipv6_mapped().octets();
                a.ah_attr.grh.sgid_index = 1;
                a.ah_attr.grh.hop_limit = q.hop_limit;
            }
        }
        a.ah_attr.port_num = 1;
        // SAFETY: `attr` points to an ibv_qp_attr, `init` is NULL or
        // points to an ibv_qp_init_attr (the contract, point 1).
        unsafe {
            attr.write(a);
            if let Some(init) = init.as_mut() {
                let c = &*me.c.get();
                *init = ibv_qp_init_attr {
                    qp_context: c.qp_context,
                    send_cq: c.send_cq,
                    recv_cq: c.recv_cq,
                    srq: c.srq,
                    cap: me.cap,
                    qp_type: c.qp_type,
                    sq_sig_all: me.sq_sig_all,
                };
            }
        }
        me.set_state(a.qp_state);
        Ok(())
    })())
}

/// The work request's SGE list, as the engine's SGEs, in `out`; `num_sge`
/// above the QP's `cap` (rxe: `max_send_sge`/`max_recv_sge`, as
/// granted) or negative is `EINVAL` (rxe `validate_send_wr`,
/// `rxe_post_one_recv`).
///
/// # Safety
/// `list` is NULL or points to `n` SGEs (the contract, point 1).
unsafe fn sge_list(
    list: *const ibv_sge,
    n: c_int,
    cap: u32,
    out: &mut [Sge; MAX_SGE],
) -> Result<&[Sge], c_int> {
    let n = usize::try_from(n).map_err(|_| libc::EINVAL)?;
    if n as u64 > u64::from(cap) || n > MAX_SGE {
        return Err(libc::EINVAL);
    }
    if n == 0 {
        return Ok(&[]);
    }
    if list.is_null() {
        return Err(libc::EINVAL);
    }
    // SAFETY: `n` SGEs at a non-NULL `list` (the function's contract).
    let src = unsafe { std::slice::from_raw_parts(list, n) };
    for (o, s) in out.iter_mut().zip(src) {
        *o = Sge {
            lkey: s.lkey,
            addr: s.addr,
            length: s.length,
        };
    }
    Ok(&out[..n])
}

/// The request's one SGE (a zero-length one for none), or `None` when it
/// has a list; `EINVAL` as [`sge_list`] says.
///
/// # Safety
/// `list` is NULL or points to `n` SGEs (the contract, point 1).
#[inline]
/// An inline request's bytes, copied at post from the program's memory
/// its SGEs name, in order: EINVAL beyond the QP's `max_inline_data`.
/// Returns the buffer and how much of it holds the data.
///
/// # Safety
/// Each SGE names `length` readable bytes at `addr` (the contract of an
/// `IBV_SEND_INLINE` request).
unsafe fn gather_inline(
    sges: &[Sge],
    max_inline_data: u32,
) -> Result<([u8; crate::limits::MAX_INLINE_DATA as usize], usize), c_int> {
    let total: u64 = sges.iter().map(|s| u64::from(s.length)).sum();
    if total > u64::from(max_inline_data) {
        return Err(libc::EINVAL);
    }
    let mut data = [0u8; crate::limits::MAX_INLINE_DATA as usize];
    let mut at = 0;
    for s in sges.iter().filter(|s| s.length > 0) {
        let n = s.length as usize;
        // SAFETY: the caller's contract: `length` readable bytes at
        // `addr`; `at + n` <= total <= max_inline_data <= data.len().
        let src = unsafe { std::slice::from_raw_parts(s.addr as usize as *const u8, n) };
        data[at..at + n].copy_from_slice(src);
        at += n;
    }
    Ok((data, at))
}

unsafe fn one_sge(list: *const ibv_sge, n: c_int, cap: u32) -> Result<Option<Sge>, c_int> {
    match n {
        0 => Ok(Some(Sge::default())),
        1 if cap >= 1 && !list.is_null() => {
            // SAFETY: one SGE at a non-NULL `list` (the function's contract).
            let s = unsafe { &*list };
            Ok(Some(Sge {
                lkey: s.lkey,
                addr: s.addr,
                length: s.length,
            }))
        }
        n if n > 1 => Ok(None),
        _ => Err(libc::EINVAL),
    }
}

/// Most SGEs a request carries (`limits::MAX_SGE`).
const MAX_SGE: usize = crate::limits::MAX_SGE as usize;

/// The engine's form of a send work request whose data is `local` (its
/// one SGE; a zero-length one when it has a list or none).
fn send_wr(w: &ibv_send_wr, local: Sge) -> Result<SendWr, c_int> {
    let opcode = match w.opcode {
        IBV_WR_RDMA_WRITE => SendOp::Write,
        IBV_WR_RDMA_WRITE_WITH_IMM => SendOp::WriteWithImm,
        IBV_WR_SEND => SendOp::Send,
        IBV_WR_SEND_WITH_IMM => SendOp::SendWithImm,
        IBV_WR_RDMA_READ => SendOp::Read,
        IBV_WR_ATOMIC_CMP_AND_SWP => SendOp::CompareSwap,
        IBV_WR_ATOMIC_FETCH_AND_ADD => SendOp::FetchAdd,
        // ATOMIC WRITE: built by `ibv_wr_atomic_write` (ffi/qp_ex.rs), its
        // 8 bytes in `wr.atomic.compare_add`, big-endian.
        IBV_WR_ATOMIC_WRITE => SendOp::AtomicWrite,
        IBV_WR_BIND_MW | IBV_WR_LOCAL_INV | IBV_WR_SEND_WITH_INV => {
            return super::windows::window_wr(w, local);
        }
        _ => {
            return Err(unsupported!(
                "ibv_post_send of TSO or a driver opcode",
                libc::EINVAL
            ))
        }
    };
    let mut wr = SendWr::new(w.wr_id, opcode, local);
    wr.signaled = w.send_flags & IBV_SEND_SIGNALED != 0;
    wr.imm = u32::from_be(w.imm_data);
    wr.remote_addr = w.wr.remote_addr;
    if opcode.is_atomic() || opcode == SendOp::AtomicWrite {
        wr.compare_add = w.wr.rdma_rkey_or_compare_add;
        wr.swap = w.wr.swap;
        wr.rkey = w.wr.atomic_rkey;
    } else {
        // wr.rdma.rkey: the low half of the second word (little endian).
        wr.rkey = w.wr.rdma_rkey_or_compare_add as u32;
    }
    Ok(wr)
}

/// Posts one send work request to QP `q` (rxe `post_one_send`): its SGE
/// list checked against the QP's `max_send_sge`; with `IBV_SEND_INLINE`
/// (a SEND or WRITE, with or without immediate) its bytes copied now, up
/// to the QP's `max_inline_data` (more is `EINVAL`, as rxe), no key
/// checked; otherwise one SGE (or none) as the request's own, more as a
/// list the engine gathers from.
///
/// # Safety
/// `w.sg_list` holds `w.num_sge` SGEs, and with `IBV_SEND_INLINE` each
/// names `length` readable bytes at `addr` (the contract, point 1).
unsafe fn post_one_send(shell: &Shell, q: &Qp, w: &ibv_send_wr) -> Result<(), c_int> {
    if q.qp_type() == IBV_QPT_UD {
        // SAFETY: the function's contract.
        return unsafe { ud::post_send(shell, q, w) };
    }
    let qpn = q.qp_num();
    // One SGE or none, not inline: the request carries it (no list).
    if w.send_flags & IBV_SEND_INLINE == 0 {
        // SAFETY: the function's contract.
        if let Some(sge) = unsafe { one_sge(w.sg_list, w.num_sge, q.cap.max_send_sge) }? {
            let wr = send_wr(w, sge)?;
            return shell.post_send(qpn, wr).map_err(|e| errno_of(&e));
        }
    }
    let mut buf = [Sge::default(); MAX_SGE];
    // SAFETY: the function's contract.
    let sges = unsafe { sge_list(w.sg_list, w.num_sge, q.cap.max_send_sge, &mut buf) }?;
    let inline = w.send_flags & IBV_SEND_INLINE != 0
        && matches!(
            w.opcode,
            IBV_WR_SEND | IBV_WR_SEND_WITH_IMM | IBV_WR_RDMA_WRITE | IBV_WR_RDMA_WRITE_WITH_IMM
        );
    if inline {
        // SAFETY: the SGEs are an inline request's (the contract).
        let (data, at) = unsafe { gather_inline(sges, q.cap.max_inline_data) }?;
        let wr = send_wr(w, Sge::default())?;
        return shell
            .post_send_inline(qpn, wr, &data[..at])
            .map_err(|e| errno_of(&e));
    }
    match sges {
        [] | [_] => {
            let wr = send_wr(w, sges.first().copied().unwrap_or_default())?;
            shell.post_send(qpn, wr).map_err(|e| errno_of(&e))
        }
        _ => {
            let wr = send_wr(w, Sge::default())?;
            shell.post_send_sgl(qpn, wr, sges).map_err(|e| errno_of(&e))
        }
    }
}

/// Posts one receive work request to QP `q` (rxe `rxe_post_one_recv`):
/// its SGE list checked against the QP's `max_recv_sge`, no entry's key
/// looked at (rdma-core providers/rxe/rxe.c `rxe_post_one_recv` checks
/// the queue and `num_sge` only): a key of no region, of another PD, a
/// range out of its region or a region without LOCAL_WRITE fails the
/// receive when a message's bytes reach it, as rxe_resp.c `send_data_in`
/// does (`IBV_WC_LOC_QP_OP_ERR`, NAK remote operational error on RC, the
/// QP to error; `rc/responder.rs`).
///
/// # Safety
/// `w.sg_list` holds `w.num_sge` SGEs (the contract, point 1).
unsafe fn post_one_recv(shell: &Shell, q: &Qp, w: &ibv_recv_wr) -> Result<(), c_int> {
    if q.qp_type() == IBV_QPT_UD {
        // SAFETY: the function's contract.
        return unsafe { ud::post_recv(shell, q, w) };
    }
    let qpn = q.qp_num();
    // SAFETY: the function's contract.
    if let Some(sge) = unsafe { one_sge(w.sg_list, w.num_sge, q.cap.max_recv_sge) }? {
        let wr = RecvWr {
            wr_id: w.wr_id,
            sge,
        };
        return shell.post_recv(qpn, wr).map_err(|e| errno_of(&e));
    }
    let mut buf = [Sge::default(); MAX_SGE];
    // SAFETY: the function's contract.
    let sges = unsafe { sge_list(w.sg_list, w.num_sge, q.cap.max_recv_sge, &mut buf) }?;
    match sges {
        [] | [_] => {
            let wr = RecvWr {
                wr_id: w.wr_id,
                sge: sges.first().copied().unwrap_or_default(),
            };
            shell.post_recv(qpn, wr).map_err(|e| errno_of(&e))
        }
        _ => shell
            .post_recv_sgl(qpn, w.wr_id, sges)
            .map_err(|e| errno_of(&e)),
    }
}

/// Posts the linked list of work requests at `first` one by one with
/// `post`; at the first refusal points `bad` at that request and returns
/// its errno (the verbs contract of `ibv_post_send`/`ibv_post_recv`).
///
/// # Safety
/// `first` is NULL or the head of a list of live work requests; `bad` is
/// NULL or writable (the contract, point 1).
pub(super) unsafe fn post_list<W>(
    first: *mut W,
    bad: *mut *mut W,
    next: impl Fn(&W) -> *mut W,
    mut post: impl FnMut(&W) -> Result<(), c_int>,
) -> c_int {
    let mut cur = first;
    while let Some(w) = NonNull::new(cur) {
        // SAFETY: a live request of the list (the function's contract).
        let r = unsafe { w.as_ref() };
        if let Err(e) = post(r) {
            if !bad.is_null() {
                // SAFETY: `bad` is writable (the function's contract).
                unsafe { *bad = w.as_ptr() };
            }
            return e;
        }
        cur = next(r);
    }
    0
}

/// The engine and QP number a post goes to; if `p` is no live QP, `bad`
/// points at the first request and the errno comes back (the verbs
/// contract of a refused post).
///
/// # Safety
/// `bad` is NULL or writable.
unsafe fn post_target<'q, W>(
    p: *mut ibv_qp,
    first: *mut W,
    bad: *mut *mut W,
) -> Result<(&'static Shell, &'q Qp), c_int> {
    let r = engine().and_then(|s| Ok((s, qp(p)?)));
    if r.is_err() && !bad.is_null() {
        // SAFETY: the function's contract.
        unsafe { *bad = first };
    }
    r
}

/// `ops.post_send`.
pub(super) unsafe extern "C" fn post_send(
    p: *mut ibv_qp,
    wr: *mut ibv_send_wr,
    bad: *mut *mut ibv_send_wr,
) -> c_int {
    // SAFETY: `bad` is NULL or writable (the contract, point 1).
    let (shell, q) = match unsafe { post_target(p, wr, bad) } {
        Ok(x) => x,
        Err(e) => return e,
    };
    // SAFETY: `wr` heads a list of live requests whose SGE lists hold
    // `num_sge` entries, readable when inline (the contract, point 1).
    let r = unsafe { post_list(wr, bad, |w| w.next, |w| post_one_send(shell, q, w)) };
    shell.doorbell();
    r
}

/// `ops.post_recv`.
pub(super) unsafe extern "C" fn post_recv(
    p: *mut ibv_qp,
    wr: *mut ibv_recv_wr,
    bad: *mut *mut ibv_recv_wr,
) -> c_int {
    // SAFETY: `bad` is NULL or writable (the contract, point 1).
    let (shell, q) = match unsafe { post_target(p, wr, bad) } {
        Ok(x) => x,
        Err(e) => return e,
    };
    // SAFETY: as in `post_send`.
    unsafe { post_list(wr, bad, |w| w.next, |w| post_one_recv(shell, q, w)) }
}

/// The engine's form of a receive work request of one SGE or none (an
/// SRQ's: its receives carry one, `rc/srq.rs`); `EINVAL` for a list.
///
/// # Safety
/// `w.sg_list` holds `w.num_sge` SGEs (the contract, point 1).
pub(super) unsafe fn recv_wr(w: &ibv_recv_wr) -> Result<RecvWr, c_int> {
    // SAFETY: the function's contract.
    let sge = unsafe { one_sge(w.sg_list, w.num_sge, 1) }?.ok_or(libc::EINVAL)?;
    Ok(RecvWr {
        wr_id: w.wr_id,
        sge,
    })
}
