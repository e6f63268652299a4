//! UD QPs (`IBV_QPT_UD`) on the engine's UD API
//! (docs/unreliable-datagram.md, "The API a verbs layer maps onto"):
//! creation, the UD transitions and their masks, query, posts.
//!
//! The engine's UD request carries one SGE: a send with one SGE (or none)
//! goes as it is; an SGE list or inline data is gathered into the QP's
//! staging slot first (`Shell::post_ud_send_staged`), so a UD QP has
//! rxe's send caps (its SGEs and inline bytes). A receive of one SGE
//! goes as it is; a QP made with more receive SGEs takes its receives
//! through a staging area, scattered into the program's list when they
//! complete (`Shell::post_ud_recv_staged`).

use std::cell::UnsafeCell;
use std::ffi::c_int;
use std::sync::atomic::{AtomicU32, Ordering};

use engine::rc::{QpInitAttr, RecvWr, Sge, SgeCaps, VerbsError};
use engine::ud::{UdQpAttr, UdQpAttrMask, UdSendOp, UdSendWr};

use super::super::address_handles::ah;
use super::super::completions::Cq;
use super::super::qp_ex::QpEx;
use super::super::regions::Pd;
use super::super::{errno_of, mtu_enum, unsupported};
use super::{gather_inline, one_sge, sge_list, state_enum, state_of, Qp, MAX_SGE};
use crate::abi::*;
use crate::checks;
use crate::handles;
use crate::shell::{Shell, UdData};

/// `ibv_create_qp` of a UD QP (the common checks done by the caller);
/// `gsi`: QP 1 (`roce_xdp_create_gsi_qp`).
pub(super) fn create(
    shell: &Shell,
    p: *mut ibv_pd,
    owner: &Pd,
    (scq, rcq): (&Cq, &Cq),
    a: &mut ibv_qp_init_attr,
    init_attr: QpInitAttr,
    gsi: bool,
) -> Result<*mut ibv_qp, c_int> {
    // On an SRQ (rxe allows it for UD) the engine's UD QP takes the
    // SRQ's receives, lists included: no receive staging, receive
    // capacities 0 (the caller zeroed them).
    let on_srq = init_attr.srq.is_some();
    // What the QP has: its SGEs and inline bytes as rxe grants them (the
    // larger of the send SGEs and the inline data fills the WQE's room).
    let grants = SgeCaps {
        max_send_sge: a.cap.max_send_sge,
        max_recv_sge: a.cap.max_recv_sge.max(1),
        max_inline_data: a.cap.max_inline_data,
    }
    .as_rxe_grants();
    a.cap.max_send_wr = init_attr.max_send_wr;
    a.cap.max_send_sge = grants.max_send_sge;
    if !on_srq {
        a.cap.max_recv_wr = init_attr.max_recv_wr;
        a.cap.max_recv_sge = grants.max_recv_sge;
    }
    a.cap.max_inline_data = grants.max_inline_data;
    // SAFETY: ibv_qp is plain data (pointers, integers, and a pthread
    // mutex and condition whose all-zero value is their initializer).
    let mut c: ibv_qp = unsafe { std::mem::zeroed() };
    // SAFETY: `p` is a live PD; its context was set at alloc.
    c.context = unsafe { (*p).context };
    c.qp_context = a.qp_context;
    c.pd = p;
    c.send_cq = a.send_cq;
    c.recv_cq = a.recv_cq;
    c.state = IBV_QPS_RESET;
    c.qp_type = IBV_QPT_UD;
    c.srq = a.srq;
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
    let token = b.c.get() as usize;
    let qpn = match gsi {
        true => shell.create_gsi_qp(owner.number, init_attr, token),
        false => shell.create_ud_qp(owner.number, init_attr, token),
    }
    .map_err(|e| errno_of(&e))?;
    let staged = shell
        .stage_ud_sends(qpn, owner.number, init_attr.max_send_wr as usize)
        .and_then(|()| match a.cap.max_recv_sge > 1 && !on_srq {
            true => shell.stage_ud_recvs(
                qpn,
                owner.number,
                init_attr.max_recv_wr as usize,
                a.cap.max_recv_sge as usize,
            ),
            false => Ok(()),
        });
    if let Err(e) = staged {
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
}

/// `ibv_modify_qp`'s refusals: one line saying why, `EINVAL`.
fn modify_error(what: &str) -> c_int {
    eprintln!("roce-xdp: ibv_modify_qp (UD): {what}");
    libc::EINVAL
}

/// The attributes a UD QP takes (the UD column of the kernel's
/// `qp_state_table`); any other bit is `EINVAL` (`ib_modify_qp_is_ok`).
const UD_MASK: c_int =
    IBV_QP_STATE | IBV_QP_CUR_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY | IBV_QP_SQ_PSN;

/// `ibv_modify_qp` of a UD QP: RESET->INIT takes the P_Key index, port
/// and Q_Key, INIT->RTR the state alone (P_Key index, Q_Key optional),
/// RTR->RTS the send PSN; the engine checks each transition's mask
/// (IBA 11.2.4.2) and refuses a missing or extra attribute.
pub(super) fn modify(shell: &Shell, me: &Qp, a: &ibv_qp_attr, mask: c_int) -> Result<(), c_int> {
    let has = |bit: c_int| mask & bit != 0;
    if mask & !UD_MASK != 0 {
        return Err(modify_error(
            "an attribute a UD QP does not have (UD takes STATE, PKEY_INDEX, PORT, QKEY, SQ_PSN)",
        ));
    }
    checks::modify_values(
        mask,
        &checks::ModifyValues {
            port_num: a.port_num,
            pkey_index: a.pkey_index,
            path_mtu: 0,
            max_rd_atomic: 0,
            max_dest_rd_atomic: 0,
            timeout: 0,
            access: 0,
        },
    )
    .map_err(modify_error)?;
    let mut q = UdQpAttr::default();
    let mut m = UdQpAttrMask(0);
    let target = has(IBV_QP_STATE).then_some(a.qp_state);
    if let Some(s) = target {
        q.state =
            state_of(s).ok_or_else(|| unsupported!("ibv_modify_qp to SQD or SQE", libc::EINVAL))?;
        m = m | UdQpAttrMask::STATE;
        // The port's MTU bounds a datagram from the start.
        if q.state == engine::rc::QpState::Init {
            q.mtu = shell.active_mtu;
            m = m | UdQpAttrMask::MTU;
        }
    }
    if has(IBV_QP_PKEY_INDEX) {
        q.pkey_index = a.pkey_index;
        m = m | UdQpAttrMask::PKEY_INDEX;
    }
    if has(IBV_QP_PORT) {
        q.port = a.port_num;
        m = m | UdQpAttrMask::PORT;
    }
    if has(IBV_QP_QKEY) {
        q.qkey = a.qkey;
        m = m | UdQpAttrMask::QKEY;
    }
    if has(IBV_QP_SQ_PSN) {
        q.sq_psn = a.sq_psn & 0xff_ffff;
        m = m | UdQpAttrMask::SQ_PSN;
    }
    shell
        .modify_ud_qp(me.qp_num(), &q, m)
        .map_err(|e| match e {
            VerbsError::MissingAttribute => modify_error(
                "a required attribute is missing from the mask (UD: RESET->INIT needs PKEY_INDEX, PORT, QKEY; RTR->RTS needs SQ_PSN)",
            ),
            e => modify_error(&e.to_string()),
        })?;
    if let Some(s) = target {
        me.set_state(s);
    }
    Ok(())
}

/// `ibv_query_qp` of a UD QP.
///
/// # Safety
/// `attr` points to an ibv_qp_attr, `init` is NULL or points to an
/// ibv_qp_init_attr (the contract, point 1).
pub(super) unsafe fn query(
    shell: &Shell,
    me: &Qp,
    attr: *mut ibv_qp_attr,
    init: *mut ibv_qp_init_attr,
) -> Result<(), c_int> {
    let (q, _) = shell.query_ud_qp(me.qp_num()).ok_or(libc::EINVAL)?;
    let a = ibv_qp_attr {
        qp_state: state_enum(q.state),
        cur_qp_state: state_enum(q.state),
        path_mtu: mtu_enum(q.mtu),
        qkey: q.qkey,
        sq_psn: q.sq_psn,
        cap: me.cap,
        pkey_index: q.pkey_index,
        port_num: q.port.max(1),
        ..ibv_qp_attr::default()
    };
    // SAFETY: the function's contract.
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
                qp_type: IBV_QPT_UD,
                sq_sig_all: me.sq_sig_all,
            };
        }
    }
    me.set_state(a.qp_state);
    Ok(())
}

/// Posts one UD send (rxe `post_one_send` for UD): SEND or SEND_WITH_IMM
/// to `wr.ud.ah` (a live address handle: a NULL or destroyed one is
/// `EINVAL`; one of another PD than the QP's is posted and fails when
/// its datagram is built, `IBV_WC_LOC_QP_OP_ERR` and the QP to error, as
/// rxe_av.c `rxe_get_av` and rxe_req.c), `wr.ud.remote_qpn`,
/// `wr.ud.remote_qkey`; its SGE list
/// within the QP's `max_send_sge`, inline data within its
/// `max_inline_data` (more is `EINVAL`, as rxe).
///
/// # Safety
/// `w.sg_list` holds `w.num_sge` SGEs, and with `IBV_SEND_INLINE` each
/// names `length` readable bytes at `addr` (the contract, point 1).
pub(super) unsafe fn post_send(shell: &Shell, q: &Qp, w: &ibv_send_wr) -> Result<(), c_int> {
    let opcode = match w.opcode {
        IBV_WR_SEND => UdSendOp::Send,
        IBV_WR_SEND_WITH_IMM => UdSendOp::SendWithImm,
        _ => return Err(libc::EINVAL),
    };
    // wr.ud: the AH where `remote_addr` is, then the remote QPN and
    // Q_Key in the two halves of the next word.
    let handle = ah(w.wr.remote_addr as usize as *const ibv_ah)?;
    let word = w.wr.rdma_rkey_or_compare_add;
    let wr = UdSendWr {
        wr_id: w.wr_id,
        opcode,
        local: Sge::default(),
        imm: u32::from_be(w.imm_data),
        ah: handle.number,
        remote_qpn: word as u32,
        remote_qkey: (word >> 32) as u32,
        signaled: w.send_flags & IBV_SEND_SIGNALED != 0,
        solicited: w.send_flags & IBV_SEND_SOLICITED != 0,
    };
    let qpn = q.qp_num();
    if w.send_flags & IBV_SEND_INLINE == 0 {
        // One SGE or none: the request carries it.
        // SAFETY: the function's contract.
        if let Some(local) = unsafe { one_sge(w.sg_list, w.num_sge, q.cap.max_send_sge) }? {
            let wr = UdSendWr { local, ..wr };
            return shell.post_ud_send(qpn, wr).map_err(|e| errno_of(&e));
        }
    }
    let mut buf = [Sge::default(); MAX_SGE];
    // SAFETY: the function's contract.
    let sges = unsafe { sge_list(w.sg_list, w.num_sge, q.cap.max_send_sge, &mut buf) }?;
    if w.send_flags & IBV_SEND_INLINE == 0 {
        return shell
            .post_ud_send_staged(qpn, wr, UdData::Sges(sges))
            .map_err(|e| errno_of(&e));
    }
    // SAFETY: the SGEs are an inline request's (the contract).
    let (data, at) = unsafe { gather_inline(sges, q.cap.max_inline_data) }?;
    shell
        .post_ud_send_staged(qpn, wr, UdData::Inline(&data[..at]))
        .map_err(|e| errno_of(&e))
}

/// Posts one UD receive: the buffer gets the 40-byte GRH area, then the
/// message. A QP of one receive SGE gives the engine its SGE; one of more
/// takes every receive through its staging area (`Shell::post_ud_recv_staged`).
/// No key is looked at, as rxe (`rxe_post_one_recv`): a bad entry fails
/// the receive when a datagram lands (`IBV_WC_LOC_QP_OP_ERR`, the QP to
/// error; `ud/receive.rs`, and `UdRecvStaging::complete` for lists).
///
/// # Safety
/// `w.sg_list` holds `w.num_sge` SGEs (the contract, point 1).
pub(super) unsafe fn post_recv(shell: &Shell, q: &Qp, w: &ibv_recv_wr) -> Result<(), c_int> {
    let qpn = q.qp_num();
    if q.cap.max_recv_sge <= 1 {
        // SAFETY: the function's contract.
        let sge =
            unsafe { one_sge(w.sg_list, w.num_sge, q.cap.max_recv_sge) }?.ok_or(libc::EINVAL)?;
        return shell
            .post_ud_recv(
                qpn,
                RecvWr {
                    wr_id: w.wr_id,
                    sge,
                },
            )
            .map_err(|e| errno_of(&e));
    }
    let mut buf = [Sge::default(); MAX_SGE];
    // SAFETY: the function's contract.
    let sges = unsafe { sge_list(w.sg_list, w.num_sge, q.cap.max_recv_sge, &mut buf) }?;
    shell
        .post_ud_recv_staged(qpn, w.wr_id, sges)
        .map_err(|e| errno_of(&e))
}
