//! Completion channels, completion queues and events:
//! `ibv_create_comp_channel`, `ibv_create_cq`, the inline `ibv_poll_cq`
//! and `ibv_req_notify_cq` (through the context's ops), `ibv_get_cq_event`,
//! `ibv_get_async_event` and their acks.

use std::cell::UnsafeCell;
use std::ffi::{c_int, c_uint, c_void};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use engine::rc::{WcOpcode, WcStatus, WorkCompletion};
use engine::ud::NetworkHeader;

use super::cq_ex::CqEx;
use super::{context, engine, engine_of, errno_of, minus_one, object, pointer, status};
use crate::abi::*;
use crate::checks;
use crate::handles::{self, Kind, Object};
use crate::shell::Channel;

/// A completion channel: an eventfd the program polls, and how many CQs
/// report to it (a channel in use cannot be destroyed: `EBUSY`).
#[repr(C)]
struct CompChannel {
    c: UnsafeCell<ibv_comp_channel>,
    inner: Arc<Channel>,
    cqs: AtomicU32,
}
// SAFETY: `c` is written before the channel is handed out, read-only
// after; `inner` is thread-safe and `cqs` atomic.
unsafe impl Send for CompChannel {}
// SAFETY: as above.
unsafe impl Sync for CompChannel {}
// SAFETY: the program holds `&c`, at offset 0 (repr(C)).
unsafe impl Object for CompChannel {
    const KIND: Kind = Kind::Channel;
    const PUBLIC: usize = 0;
}

#[no_mangle]
unsafe extern "C" fn ibv_create_comp_channel(ctx: *mut ibv_context) -> *mut ibv_comp_channel {
    pointer((|| {
        context(ctx)?;
        let inner = Arc::new(Channel::new().map_err(|e| e.raw_os_error().unwrap_or(libc::ENOMEM))?);
        Ok(handles::publish(Box::new(CompChannel {
            c: UnsafeCell::new(ibv_comp_channel {
                context: ctx,
                fd: inner.fd.raw(),
                refcnt: 0,
            }),
            inner,
            cqs: AtomicU32::new(0),
        })))
    })())
}

#[no_mangle]
unsafe extern "C" fn ibv_destroy_comp_channel(ch: *mut ibv_comp_channel) -> c_int {
    status((|| {
        if object::<CompChannel, _>(ch)?.cqs.load(Ordering::Acquire) > 0 {
            return Err(libc::EBUSY);
        }
        // SAFETY: the program destroys the channel: it uses it no more.
        unsafe { handles::retire::<CompChannel, _>(ch) }.map(drop)
    })())
}

/// A completion queue: the engine's CQ `id`, its channel, and how many QPs
/// use it (a CQ in use cannot be destroyed: `EBUSY`).
#[repr(C)]
pub(super) struct Cq {
    c: UnsafeCell<ibv_cq>,
    /// The rest of `ibv_cq_ex` (`ibv_cq_ex_to_cq` is a cast).
    pub(super) ex: CqEx,
    pub(super) id: u32,
    channel: Option<*const CompChannel>,
    pub(super) qps: AtomicU32,
}
// SAFETY: `c` is written before the CQ is handed out, then only its event
// counters, atomically ([`ibv_ack_cq_events`]); the rest is immutable or
// atomic, or (`ex`) guarded by the poll lock it holds.
unsafe impl Send for Cq {}
// SAFETY: as above.
unsafe impl Sync for Cq {}
// SAFETY: the program holds `&c`, at offset 0 (repr(C)).
unsafe impl Object for Cq {
    const KIND: Kind = Kind::Cq;
    const PUBLIC: usize = 0;
}

/// Checks that `cq` is a live CQ of this library.
pub(super) fn cq<'a>(cq: *const ibv_cq) -> Result<&'a Cq, c_int> {
    object::<Cq, _>(cq)
}

#[no_mangle]
pub(super) unsafe extern "C" fn ibv_create_cq(
    ctx: *mut ibv_context,
    cqe: c_int,
    cq_context: *mut c_void,
    channel: *mut ibv_comp_channel,
    comp_vector: c_int,
) -> *mut ibv_cq {
    pointer((|| {
        let shell = engine_of(ctx)?;
        checks::cq_attr(cqe, comp_vector)?;
        let ch = match channel.is_null() {
            true => None,
            false => Some(object::<CompChannel, _>(channel)?),
        };
        // SAFETY: ibv_cq is plain data (pointers, integers, and a pthread
        // mutex and condition whose all-zero value is their initializer).
        let mut c: ibv_cq = unsafe { std::mem::zeroed() };
        c.context = ctx;
        c.channel = channel;
        c.cq_context = cq_context;
        c.cqe = cqe;
        let mut b = Box::new(Cq {
            c: UnsafeCell::new(c),
            ex: CqEx::new(),
            id: 0,
            channel: ch.map(|c| c as *const CompChannel),
            qps: AtomicU32::new(0),
        });
        // The engine hands the public address back with the CQ's events.
        b.id = shell.create_cq(cqe as usize, b.c.get() as usize);
        b.c.get_mut().handle = b.id;
        if let Some(ch) = ch {
            ch.cqs.fetch_add(1, Ordering::AcqRel);
            shell.set_cq_channel(b.id, Some(ch.inner.clone()));
        }
        Ok(handles::publish(b))
    })())
}

#[no_mangle]
unsafe extern "C" fn ibv_destroy_cq(p: *mut ibv_cq) -> c_int {
    status((|| {
        let shell = engine()?;
        let c = cq(p)?;
        if c.qps.load(Ordering::Acquire) > 0 {
            return Err(libc::EBUSY);
        }
        shell.destroy_cq(c.id);
        if let Some(ch) = c.channel {
            // SAFETY: a channel with CQs cannot be destroyed (its `cqs`
            // counts this one), so it is alive.
            unsafe { (*ch).cqs.fetch_sub(1, Ordering::AcqRel) };
        }
        // SAFETY: the program destroys the CQ: it uses it no more.
        unsafe { handles::retire::<Cq, _>(p) }.map(drop)
    })())
}

/// `ibv_resize_cq`: room for `cqe` completions (1..`max_cqe`), refused
/// (`EINVAL`) while more than that wait, as rxe's `rxe_cq_chk_attr`.
#[no_mangle]
unsafe extern "C" fn ibv_resize_cq(p: *mut ibv_cq, cqe: c_int) -> c_int {
    status((|| {
        let shell = engine()?;
        let c = cq(p)?;
        checks::cq_attr(cqe, 0)?;
        shell
            .resize_cq(c.id, cqe as usize)
            .map_err(|e| errno_of(&e))?;
        // SAFETY: the program does not use the CQ during its resize (the
        // contract, point 4); `cqe` is the field rdma-core's resize sets.
        unsafe { (&raw mut (*c.c.get()).cqe).write(cqe) };
        Ok(())
    })())
}

fn wc_status(s: WcStatus) -> c_int {
    match s {
        WcStatus::Success => 0,
        WcStatus::LocalLengthError => 1,
        WcStatus::LocalProtectionError => 4,
        WcStatus::Flushed => 5,
        WcStatus::RemoteInvalidRequest => 9,
        WcStatus::RemoteAccessError => 10,
        WcStatus::RemoteOperationalError => 11,
        WcStatus::RetryExceeded => 12,
        WcStatus::RnrRetryExceeded => 13,
        WcStatus::LocalQpOperationError => 2,
        WcStatus::MwBindError => 6,
    }
}

fn wc_opcode(o: WcOpcode) -> c_int {
    match o {
        WcOpcode::Send => 0,
        WcOpcode::Write => 1,
        WcOpcode::Read => 2,
        WcOpcode::CompareSwap => 3,
        WcOpcode::FetchAdd => 4,
        WcOpcode::BindMw => 5,
        WcOpcode::LocalInv => 6,
        // IBV_WC_ATOMIC_WRITE (rxe wr_to_wc_opcode: IB_WC_ATOMIC_WRITE).
        WcOpcode::AtomicWrite => 9,
        WcOpcode::Recv => 128,
        WcOpcode::RecvRdmaWithImm => 129,
    }
}

pub(super) fn to_wc(w: &WorkCompletion) -> ibv_wc {
    ibv_wc {
        wr_id: w.wr_id,
        status: wc_status(w.status),
        opcode: wc_opcode(w.opcode),
        byte_len: w.byte_len,
        // One union in `struct ibv_wc`: the immediate data (network
        // order) or the invalidated R_Key (host order).
        imm_data: match (w.imm, w.invalidated_rkey) {
            (Some(imm), _) => imm.to_be(),
            (None, Some(rkey)) => rkey,
            (None, None) => 0,
        },
        qp_num: w.qpn,
        wc_flags: if w.imm.is_some() {
            IBV_WC_WITH_IMM
        } else if w.invalidated_rkey.is_some() {
            IBV_WC_WITH_INV
        } else {
            0
        } | if w.ud.is_some() { IBV_WC_GRH } else { 0 },
        // A UD receive: the sender's QP; its buffer begins with the GRH
        // area (rxe sets IB_WC_GRH on every one). slid and pkey_index are
        // 0, as rxe reports them on RoCE.
        src_qp: w.ud.map_or(0, |u| u.src_qp),
        sl: w.ud.map_or(0, |u| roce_packet_type(u.network)),
        ..ibv_wc::default()
    }
}

/// What a UD receive completion reports in `sl`: RoCE has no service
/// level (no LRH), and ConnectX NICs report there the kind of frame the
/// datagram came in (their CQE's `roce_pkt_type`, which mlx5's provider
/// copies into `sl`): bit 3 set when the frame had a UDP header (RoCE v2),
/// bits 2:0 the network header (1 IPv6, 2 IPv4). rxe reports 0, but UCX
/// reads it (1.11 to 1.17, Debian 12's 1.13 among them): `ud_verbs` on
/// RoCE takes the GRH area's address family from it, compares the
/// destination GID it finds there with the interface's, and drops the
/// datagram on a mismatch, so with 0 it drops every datagram that came
/// over IPv4 and never connects. The engine reports what ConnectX does.
pub(super) fn roce_packet_type(network: NetworkHeader) -> u8 {
    const ROCE_V2_UDP: u8 = 1 << 3;
    match network {
        NetworkHeader::Ipv6 => ROCE_V2_UDP | 1,
        NetworkHeader::Ipv4 => ROCE_V2_UDP | 2,
    }
}

/// `ops.poll_cq`: up to `n` completions into `wc`; a negative value for a
/// bad CQ or arguments.
pub(super) unsafe extern "C" fn poll_cq(p: *mut ibv_cq, n: c_int, wc: *mut ibv_wc) -> c_int {
    let (Ok(shell), Ok(c)) = (engine(), cq(p)) else {
        return -libc::EINVAL;
    };
    if n < 0 || (wc.is_null() && n > 0) {
        return -libc::EINVAL;
    }
    // SAFETY: the program gave room for `n` completions at `wc` (the
    // contract, point 1); `i < n`.
    shell.poll_cq(c.id, n as usize, |i, w| unsafe {
        wc.add(i).write(to_wc(w))
    }) as c_int
}

/// `ops.req_notify_cq`: the CQ's channel gets an event at its next
/// completion (solicited-only is treated as every completion, as rxe
/// reports every completion of a solicited-only CQ that carries one).
pub(super) unsafe extern "C" fn req_notify_cq(p: *mut ibv_cq, _solicited_only: c_int) -> c_int {
    status((|| {
        let shell = engine()?;
        shell.req_notify(cq(p)?.id);
        Ok(())
    })())
}

#[no_mangle]
unsafe extern "C" fn ibv_get_cq_event(
    ch: *mut ibv_comp_channel,
    out_cq: *mut *mut ibv_cq,
    cq_context: *mut *mut c_void,
) -> c_int {
    minus_one((|| {
        let channel = object::<CompChannel, _>(ch)?;
        let token = channel
            .inner
            .get_event()
            .map_err(|e| e.raw_os_error().unwrap_or(libc::EIO))?;
        let c = token as *mut ibv_cq;
        // SAFETY: `token` is the public address of a CQ on this channel,
        // alive (the program destroys a CQ only after acking its events);
        // the out pointers are NULL or valid (the contract, point 1).
        unsafe {
            if !out_cq.is_null() {
                *out_cq = c;
            }
            if !cq_context.is_null() {
                *cq_context = (*c).cq_context;
            }
        }
        Ok(())
    })())
}

#[no_mangle]
unsafe extern "C" fn ibv_ack_cq_events(p: *mut ibv_cq, n: c_uint) {
    if let Ok(c) = cq(p) {
        // SAFETY: the field is a u32 in the live CQ, and every write to it
        // is this atomic add.
        let events = unsafe { AtomicU32::from_ptr(&raw mut (*c.c.get()).comp_events_completed) };
        events.fetch_add(n, Ordering::AcqRel);
    }
}

#[no_mangle]
unsafe extern "C" fn ibv_get_async_event(
    ctx: *mut ibv_context,
    event: *mut ibv_async_event,
) -> c_int {
    minus_one((|| {
        let c = context(ctx)?;
        if event.is_null() {
            return Err(libc::EINVAL);
        }
        let (ty, token) = c
            .async_events
            .get()
            .map_err(|e| e.raw_os_error().unwrap_or(libc::EIO))?;
        // SAFETY: `event` points to an ibv_async_event (point 1).
        unsafe {
            (*event).element = token as *mut c_void;
            (*event).event_type = ty;
        }
        Ok(())
    })())
}

#[no_mangle]
unsafe extern "C" fn ibv_ack_async_event(event: *mut ibv_async_event) {
    if event.is_null() {
        return;
    }
    // SAFETY: `event` points to an event `ibv_get_async_event` filled
    // (the contract, point 1).
    let (ty, element) = unsafe { ((*event).event_type, (*event).element) };
    if ty == IBV_EVENT_QP_FATAL || ty == IBV_EVENT_QP_LAST_WQE_REACHED {
        if let Ok(qp) = super::queue_pairs::qp(element as *const ibv_qp) {
            qp.ack_event();
        }
    }
    if ty == IBV_EVENT_SRQ_LIMIT_REACHED {
        if let Ok(srq) = super::srq::srq(element as *const ibv_srq) {
            srq.ack_event();
        }
    }
}
