//! The exported `rdma_*` functions: C pointers in, state and agent calls
//! out, with librdmacm's return conventions.
//!
//! # The contract with C callers
//!
//! Every exported function is `unsafe extern "C"`, and `rdma_cma.h` is
//! its contract. As rdma-core, this library relies on its callers for:
//! 1. **data pointers** (socket addresses, connection parameters, QP
//!    attributes, option values, out-pointers) being NULL or pointing to
//!    live memory of their type's size (a socket address: its family's
//!    size; an option value: `optlen` bytes; private data:
//!    `private_data_len` bytes) for the duration of the call;
//! 2. **threads**: calls on different ids may run concurrently (one lock
//!    serializes them); the fields of `rdma_cm_id` this library writes
//!    after handing it out are written as librdmacm writes them.
//!
//! Object pointers (ids, channels, events) may be anything: each is looked
//! up among the objects this library handed out before it is read, and
//! refused with `EINVAL` otherwise. Failures: `int` functions return -1
//! with `errno` set, as librdmacm's `ERR()`; pointer functions NULL with
//! `errno`.

use std::collections::VecDeque;
use std::ffi::{c_char, c_int, c_void};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::ptr::null_mut;

use proto::cm::ip::{self, IpCmHeader};
use proto::cm::mad::{rej_reason, sidr_status};
use proto::cm::{
    AcceptParams, CmError, ConnId, ConnectParams, ListenerId, MadAddress, ReqInfo, SidrReqInfo,
    Transport,
};

use crate::abi::*;
use crate::addr;
use crate::device::{self, conn_param, random_u32, ud_param, Device};
use crate::ibv::*;
use crate::qp;
use crate::state::{self, fix_private, Channel, Event, Guard, Id, IdState, Phase, State};

/// REQ, REP, REJ, SIDR_REQ and SIDR_REP private data sizes (IBTA 12.6).
const REQ_PRIVATE: usize = 92;
const REP_PRIVATE: usize = 196;
const REJ_PRIVATE: usize = 148;
const SIDR_REQ_PRIVATE: usize = 216;
const SIDR_REP_PRIVATE: usize = 136;
/// The kernel cma's CMA_CM_RESPONSE_TIMEOUT and CMA_MAX_CM_RETRIES.
const CM_RESPONSE_TIMEOUT: u8 = 20;
const MAX_CM_RETRIES: u8 = 15;

fn set_errno(e: c_int) {
    // SAFETY: the thread's errno.
    unsafe { *libc::__errno_location() = e };
}

/// librdmacm's `int` convention: 0, or -1 with errno.
fn status(r: Result<(), c_int>) -> c_int {
    match r {
        Ok(()) => 0,
        Err(e) => {
            set_errno(e);
            -1
        }
    }
}

fn pointer<T>(r: Result<*mut T, c_int>) -> *mut T {
    r.unwrap_or_else(|e| {
        set_errno(e);
        null_mut()
    })
}

fn cm_errno(e: CmError) -> c_int {
    match e {
        CmError::AddressInUse => libc::EADDRINUSE,
        CmError::PrivateDataTooLong => libc::EINVAL,
        CmError::TooManyConnections => libc::ENOMEM,
        CmError::UnknownConn
        | CmError::UnknownListener
        | CmError::InvalidState
        | CmError::InvalidArgument(_) => libc::EINVAL,
    }
}

fn agent(st: &mut State) -> Result<&mut proto::cm::CmAgent, c_int> {
    st.agent.as_mut().ok_or(libc::ENODEV)
}

// ---------------------------------------------------------------- channels

fn new_channel(st: &mut State) -> Result<*mut rdma_event_channel, c_int> {
    // SAFETY: eventfd with constant flags.
    let fd = unsafe { libc::eventfd(0, libc::EFD_SEMAPHORE | libc::EFD_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EMFILE));
    }
    let ch = Box::into_raw(Box::new(Channel {
        c: rdma_event_channel { fd },
    }))
    .cast::<rdma_event_channel>();
    st.channels.insert(ch as usize, VecDeque::new());
    Ok(ch)
}

/// Destroys a channel: its queued events are freed at once; the channel
/// itself (box and eventfd) is retired, and the oldest retired one beyond
/// [`state::RETIRED_CHANNELS`] is freed (`State::retired_channels` says
/// why).
fn free_channel(st: &mut State, ch: *mut rdma_event_channel) {
    if let Some(q) = st.channels.remove(&(ch as usize)) {
        for e in q {
            // SAFETY: queued events are our boxes, not handed out.
            drop(unsafe { Box::from_raw(e as *mut Event) });
        }
        st.retired_channels.push_back(ch as usize);
        if st.retired_channels.len() > state::RETIRED_CHANNELS {
            let old = st.retired_channels.pop_front().unwrap_or_default() as *mut Channel;
            // SAFETY: a retired channel is our box and its eventfd, in no
            // table any more; freed once, here.
            unsafe {
                libc::close((*old).c.fd);
                drop(Box::from_raw(old));
            }
        }
    }
}

#[no_mangle]
unsafe extern "C" fn rdma_create_event_channel() -> *mut rdma_event_channel {
    // As librdmacm's ucma_init: no device, no channel (ENODEV).
    pointer(device::device().and_then(|_| new_channel(&mut state::lock())))
}

#[no_mangle]
unsafe extern "C" fn rdma_destroy_event_channel(channel: *mut rdma_event_channel) {
    free_channel(&mut state::lock(), channel);
}

/// Takes queued events of `id` off `ch` (and their counts off its fd).
/// Boxed: an event's private data pointer points into its own box, so it
/// must not move when it is queued elsewhere.
#[allow(clippy::vec_box)]
fn unqueue(
    st: &mut State,
    ch: *mut rdma_event_channel,
    pred: impl Fn(&Event) -> bool,
) -> Vec<Box<Event>> {
    let Some(q) = st.channels.get_mut(&(ch as usize)) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    q.retain(|&e| {
        // SAFETY: queued events are our live boxes.
        let ev = unsafe { &*(e as *const Event) };
        if pred(ev) {
            // SAFETY: as above; taken out of the queue here.
            out.push(unsafe { Box::from_raw(e as *mut Event) });
            false
        } else {
            true
        }
    });
    for _ in &out {
        let mut v = 0u64;
        // SAFETY: a nonblocking-semaphore read of our eventfd.
        unsafe {
            let fd = (*ch).fd;
            let fl = libc::fcntl(fd, libc::F_GETFL);
            libc::fcntl(fd, libc::F_SETFL, fl | libc::O_NONBLOCK);
            libc::read(fd, (&raw mut v).cast(), 8);
            libc::fcntl(fd, libc::F_SETFL, fl);
        }
    }
    out
}

#[no_mangle]
unsafe extern "C" fn rdma_get_cm_event(
    channel: *mut rdma_event_channel,
    event: *mut *mut rdma_cm_event,
) -> c_int {
    let known = {
        let st = state::lock();
        let key = channel as usize;
        st.channels.contains_key(&key) || st.retired_channels.contains(&key)
    };
    if event.is_null() || !known {
        return status(Err(libc::EINVAL));
    }
    // SAFETY: a registered or retired channel is our live box. A retired
    // one's eventfd is open and never signalled: the read waits until a
    // signal interrupts it (EINTR), as a wait in a closed ucma file does.
    let fd = unsafe { (*channel).fd };
    loop {
        let mut v = 0u64;
        // SAFETY: reads 8 bytes into a live u64 (blocking unless the
        // program made the fd nonblocking: then EAGAIN when nothing is
        // queued).
        let n = unsafe { libc::read(fd, (&raw mut v).cast(), 8) };
        if n != 8 {
            if n >= 0 {
                set_errno(libc::ENODATA);
            }
            return -1;
        }
        let mut st = state::lock();
        let Some(q) = st.channels.get_mut(&(channel as usize)) else {
            // Destroyed meanwhile: a count left by its freed events; wait
            // on, as on any destroyed channel (above).
            if st.retired_channels.contains(&(channel as usize)) {
                continue;
            }
            return status(Err(libc::EINVAL));
        };
        // Empty when rdma_destroy_id took the event between the count and
        // here (its own take of the count found none left): wait again.
        let Some(e) = q.pop_front() else {
            continue;
        };
        st.events.insert(e);
        // SAFETY: the caller's out-pointer.
        unsafe { *event = e as *mut rdma_cm_event };
        return 0;
    }
}

#[no_mangle]
unsafe extern "C" fn rdma_ack_cm_event(event: *mut rdma_cm_event) -> c_int {
    let mut st = state::lock();
    if !st.events.remove(&(event as usize)) {
        return status(Err(libc::EINVAL));
    }
    // SAFETY: a handed-out event is our box; removed from the set above.
    drop(unsafe { Box::from_raw(event.cast::<Event>()) });
    0
}

#[no_mangle]
unsafe extern "C" fn rdma_event_str(event: c_int) -> *const c_char {
    let s: &'static [u8] = match event {
        RDMA_CM_EVENT_ADDR_RESOLVED => b"RDMA_CM_EVENT_ADDR_RESOLVED\0",
        RDMA_CM_EVENT_ADDR_ERROR => b"RDMA_CM_EVENT_ADDR_ERROR\0",
        RDMA_CM_EVENT_ROUTE_RESOLVED => b"RDMA_CM_EVENT_ROUTE_RESOLVED\0",
        RDMA_CM_EVENT_ROUTE_ERROR => b"RDMA_CM_EVENT_ROUTE_ERROR\0",
        RDMA_CM_EVENT_CONNECT_REQUEST => b"RDMA_CM_EVENT_CONNECT_REQUEST\0",
        RDMA_CM_EVENT_CONNECT_RESPONSE => b"RDMA_CM_EVENT_CONNECT_RESPONSE\0",
        RDMA_CM_EVENT_CONNECT_ERROR => b"RDMA_CM_EVENT_CONNECT_ERROR\0",
        RDMA_CM_EVENT_UNREACHABLE => b"RDMA_CM_EVENT_UNREACHABLE\0",
        RDMA_CM_EVENT_REJECTED => b"RDMA_CM_EVENT_REJECTED\0",
        RDMA_CM_EVENT_ESTABLISHED => b"RDMA_CM_EVENT_ESTABLISHED\0",
        RDMA_CM_EVENT_DISCONNECTED => b"RDMA_CM_EVENT_DISCONNECTED\0",
        RDMA_CM_EVENT_DEVICE_REMOVAL => b"RDMA_CM_EVENT_DEVICE_REMOVAL\0",
        RDMA_CM_EVENT_MULTICAST_JOIN => b"RDMA_CM_EVENT_MULTICAST_JOIN\0",
        RDMA_CM_EVENT_MULTICAST_ERROR => b"RDMA_CM_EVENT_MULTICAST_ERROR\0",
        RDMA_CM_EVENT_ADDR_CHANGE => b"RDMA_CM_EVENT_ADDR_CHANGE\0",
        RDMA_CM_EVENT_TIMEWAIT_EXIT => b"RDMA_CM_EVENT_TIMEWAIT_EXIT\0",
        _ => b"UNKNOWN EVENT\0",
    };
    s.as_ptr().cast()
}

// --------------------------------------------------------------------- ids

/// A new id on `channel` (NULL: a private one, synchronous).
fn new_id(
    st: &mut State,
    channel: *mut rdma_event_channel,
    context: *mut c_void,
    ps: c_int,
    qp_type: c_int,
) -> Result<*mut rdma_cm_id, c_int> {
    let sync = channel.is_null();
    let channel = match sync {
        true => new_channel(st)?,
        false if st.channels.contains_key(&(channel as usize)) => channel,
        false => return Err(libc::EINVAL),
    };
    // SAFETY: Id is plain data (pointers and integers); zero is valid.
    let mut b: Box<Id> = Box::new(unsafe { std::mem::zeroed() });
    b.c.channel = channel;
    b.c.context = context;
    b.c.ps = ps;
    b.c.qp_type = qp_type;
    let p = Box::into_raw(b).cast::<rdma_cm_id>();
    let mut s = IdState::new(sync);
    s.qkey = RDMA_UDP_QKEY;
    // The starting PSN, drawn when the id is made (the kernel's seq_num):
    // a program moving its own QP (rdma_init_qp_attr) before rdma_accept
    // sees the one the REP announces.
    s.psn = random_u32() & 0xff_ffff;
    st.ids.insert(p as usize, s);
    Ok(p)
}

fn qp_type_of(ps: c_int) -> Result<c_int, c_int> {
    match ps {
        RDMA_PS_TCP | RDMA_PS_IB => Ok(IBV_QPT_RC),
        RDMA_PS_UDP => Ok(IBV_QPT_UD),
        // IPoIB's port space needs multicast (not served).
        RDMA_PS_IPOIB => Err(libc::EPROTONOSUPPORT),
        _ => Err(libc::EINVAL),
    }
}

#[no_mangle]
unsafe extern "C" fn rdma_create_id(
    channel: *mut rdma_event_channel,
    id: *mut *mut rdma_cm_id,
    context: *mut c_void,
    ps: c_int,
) -> c_int {
    status((|| {
        if id.is_null() {
            return Err(libc::EINVAL);
        }
        let t = qp_type_of(ps)?;
        device::device()?;
        let p = new_id(&mut state::lock(), channel, context, ps, t)?;
        // SAFETY: the caller's out-pointer.
        unsafe { *id = p };
        Ok(())
    })())
}

/// Forgets the id's connection, listener and port (what destroy does
/// before freeing).
/// Tells the shared engine this process may be attached to which
/// service IDs it listens on (it hands us the REQs for them; nothing
/// happens when the engine is the process's own).
fn publish_listeners(st: &State) {
    if let Some(a) = st.agent.as_ref() {
        let ids: Vec<u64> = a.service_ids().collect();
        // SAFETY: `ids` holds `ids.len()` u64s for the call.
        unsafe { crate::ibv::roce_xdp_share_cm(ids.as_ptr(), ids.len()) };
    }
}

fn release(st: &mut State, p: *mut rdma_cm_id, now: proto::time::Instant) {
    let Some(s) = st.ids.get_mut(&(p as usize)) else {
        return;
    };
    let (conn, listener, port) = (s.conn.take(), s.listener.take(), s.port.take());
    // SAFETY: a registered id.
    let ps = unsafe { (*p).ps };
    if let Some(c) = conn {
        st.conns.remove(&c);
        if let Some(a) = st.agent.as_mut() {
            a.destroy(now, c);
        }
    }
    if let Some(l) = listener {
        st.listeners.remove(&l);
        if let Some(a) = st.agent.as_mut() {
            a.unlisten(l);
        }
        publish_listeners(st);
    }
    if let Some(port) = port {
        if let Some(v) = st.ports.get_mut(&(ps, port)) {
            v.retain(|&i| i != p as usize);
            if v.is_empty() {
                st.ports.remove(&(ps, port));
            }
        }
    }
}

fn destroy_id(st: &mut State, p: *mut rdma_cm_id) -> Result<(), c_int> {
    let now = device::opened().map(Device::now).unwrap_or_default();
    let sync = st.id(p)?.0.sync;
    release(st, p, now);
    // SAFETY: a registered id.
    let (ch, ev) = unsafe { ((*p).channel, (*p).event) };
    // Its unreported events go; a listener's pending requests take their
    // ids with them (REJ), as the kernel's ucma_cleanup_ctx_events.
    let gone = unqueue(st, ch, |e| e.c.id == p || e.c.listen_id == p);
    for e in gone {
        if e.c.listen_id == p && e.c.id != p {
            let _ = destroy_id(st, e.c.id);
        }
    }
    if !ev.is_null() && st.events.remove(&(ev as usize)) {
        // SAFETY: a handed-out event of ours (the sync id's last one).
        drop(unsafe { Box::from_raw(ev.cast::<Event>()) });
    }
    let Some(s) = st.ids.remove(&(p as usize)) else {
        return Err(libc::EINVAL);
    };
    if sync {
        free_channel(st, ch);
    }
    // SAFETY: our Box<Id>, unregistered above.
    let mut b = unsafe { Box::from_raw(p.cast::<Id>()) };
    destroy_cqs(&mut b.c, s.own_cqs);
    device::wake();
    Ok(())
}

#[no_mangle]
unsafe extern "C" fn rdma_destroy_id(id: *mut rdma_cm_id) -> c_int {
    status(destroy_id(&mut state::lock(), id))
}

/// The device's address matching `ip`, if it is one.
fn is_device_ip(dev: &Device, ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v) => v == dev.ip,
        IpAddr::V6(v) => v.octets() == dev.gid0 || v.to_ipv4_mapped() == Some(dev.ip),
    }
}

/// Takes `port` (0: an ephemeral one) of the id's port space.
fn take_port(st: &mut State, p: *mut rdma_cm_id, port: u16) -> Result<u16, c_int> {
    let (s, id) = st.id(p)?;
    let (ps, reuse) = (id.c.ps, s.reuseaddr);
    let port = if port == 0 {
        let mut tries = 0;
        loop {
            let cand = 32768 + (random_u32() % 28232) as u16;
            if !st.ports.contains_key(&(ps, cand)) {
                break cand;
            }
            tries += 1;
            if tries > 1000 {
                return Err(libc::EADDRNOTAVAIL);
            }
        }
    } else {
        if let Some(v) = st.ports.get(&(ps, port)) {
            let all_reuse = reuse
                && v.iter().all(|i| {
                    st.ids
                        .get(i)
                        .is_some_and(|s| s.reuseaddr && s.phase != Phase::Listen)
                });
            if !all_reuse {
                return Err(libc::EADDRINUSE);
            }
        }
        port
    };
    st.ports.entry((ps, port)).or_default().push(p as usize);
    st.id(p)?.0.port = Some(port);
    Ok(port)
}

fn bind(st: &mut State, p: *mut rdma_cm_id, a: SocketAddr) -> Result<(), c_int> {
    let dev = device::device()?;
    let (s, _) = st.id(p)?;
    if s.phase != Phase::Idle {
        return Err(libc::EINVAL);
    }
    let ip = a.ip();
    // The kernel's rdma_bind_addr looks up no device for cma_any_addr
    // (cma_zero_addr || cma_loopback_addr): a loopback address (127/8,
    // ::1) binds as the wildcard does, `verbs` NULL (libfabric's verbs
    // provider binds 127.0.0.1 to find its devices).
    let any = ip.is_unspecified() || ip.is_loopback();
    let on_device = !any && is_device_ip(dev, ip);
    if !any && !on_device {
        // An address of another interface: no RDMA device has it.
        return Err(if addr::is_local(ip) {
            libc::ENODEV
        } else {
            libc::EADDRNOTAVAIL
        });
    }
    let port = take_port(st, p, a.port())?;
    let (s, id) = st.id(p)?;
    let mut a = a;
    a.set_port(port);
    addr::write(a, &mut id.c.route.addr.src);
    if on_device {
        id.c.verbs = dev.ctx;
        // As rdma-core's ucma_get_device: an id on a device has its PD
        // (pyverbs wraps `id->pd` after bind and route resolution).
        if id.c.pd.is_null() {
            id.c.pd = dev.pd;
        }
        id.c.port_num = 1;
        id.c.route.addr.ibaddr.sgid = dev.gid;
        id.c.route.addr.ibaddr.pkey = 0xffff;
    }
    s.phase = Phase::AddrBound;
    Ok(())
}

#[no_mangle]
unsafe extern "C" fn rdma_bind_addr(id: *mut rdma_cm_id, a: *mut libc::sockaddr) -> c_int {
    status((|| {
        let mut st = state::lock();
        st.id(id)?;
        // SAFETY: the caller's address (point 1).
        let a = unsafe { addr::read(a) }?;
        bind(&mut st, id, a)
    })())
}

/// Waits for the sync id's own event (librdmacm's `ucma_complete`).
fn complete(p: *mut rdma_cm_id) -> Result<(), c_int> {
    let (sync, ch) = {
        let mut st = state::lock();
        let (s, id) = st.id(p)?;
        (s.sync, id.c.channel)
    };
    if !sync {
        return Ok(());
    }
    {
        let mut st = state::lock();
        let (_, id) = st.id(p)?;
        let old = std::mem::replace(&mut id.c.event, null_mut());
        if !old.is_null() && st.events.remove(&(old as usize)) {
            // SAFETY: our handed-out event.
            drop(unsafe { Box::from_raw(old.cast::<Event>()) });
        }
    }
    let mut e = null_mut();
    // SAFETY: our channel; `e` a local out-pointer.
    if unsafe { rdma_get_cm_event(ch, &mut e) } != 0 {
        // SAFETY: the thread's errno.
        return Err(unsafe { *libc::__errno_location() });
    }
    let mut st = state::lock();
    if let Ok((_, id)) = st.id(p) {
        id.c.event = e;
    }
    // SAFETY: the event just returned.
    let ev = unsafe { &*e };
    match ev.status {
        0 => Ok(()),
        _ if ev.event == RDMA_CM_EVENT_REJECTED => Err(libc::ECONNREFUSED),
        s if s < 0 => Err(-s),
        s => Err(s),
    }
}

fn queue_own(st: &mut State, p: *mut rdma_cm_id, ty: c_int, status: c_int) {
    // SAFETY: a registered id.
    let ch = unsafe { (*p).channel };
    st.push(ch, State::event(p, ty, status, &[]));
}

#[no_mangle]
unsafe extern "C" fn rdma_resolve_addr(
    id: *mut rdma_cm_id,
    src: *mut libc::sockaddr,
    dst: *mut libc::sockaddr,
    _timeout_ms: c_int,
) -> c_int {
    status((|| {
        {
            let mut st = state::lock();
            let dev = device::device()?;
            st.id(id)?;
            // SAFETY: the caller's addresses (point 1).
            let dst = unsafe { addr::read(dst) }?;
            if !src.is_null() {
                // SAFETY: as above.
                let src = unsafe { addr::read(src) }?;
                if st.id(id)?.0.phase == Phase::Idle {
                    bind(&mut st, id, src)?;
                }
            }
            let (s, c) = st.id(id)?;
            if !matches!(s.phase, Phase::Idle | Phase::AddrBound) {
                return Err(libc::EINVAL);
            }
            let bound = addr::stored(&c.c.route.addr.src)
                .map(|a| a.ip())
                .filter(|i| !i.is_unspecified());
            // The kernel's route lookup: its failure is an ADDR_ERROR.
            let source = match bound {
                Some(ip) => Ok(ip),
                None => addr::route_source(dst.ip()),
            }
            .and_then(|ip| match is_device_ip(dev, ip) {
                true => Ok(ip),
                false => Err(libc::ENODEV),
            });
            let source = match source {
                Ok(ip) => ip,
                Err(e) => {
                    queue_own(&mut st, id, RDMA_CM_EVENT_ADDR_ERROR, -e);
                    drop(st);
                    return complete(id);
                }
            };
            if s.phase == Phase::Idle {
                let any: SocketAddr = (source, 0).into();
                bind(&mut st, id, any)?;
            }
            let (s, c) = st.id(id)?;
            let port = s.port.unwrap_or(0);
            addr::write((source, port).into(), &mut c.c.route.addr.src);
            addr::write(dst, &mut c.c.route.addr.dst);
            c.c.verbs = dev.ctx;
            if c.c.pd.is_null() {
                c.c.pd = dev.pd;
            }
            c.c.port_num = 1;
            s.peer_gid = addr::gid_of(dst.ip());
            c.c.route.addr.ibaddr.sgid = dev.gid;
            c.c.route.addr.ibaddr.dgid = s.peer_gid;
            c.c.route.addr.ibaddr.pkey = 0xffff;
            s.phase = Phase::AddrResolved;
            queue_own(&mut st, id, RDMA_CM_EVENT_ADDR_RESOLVED, 0);
        }
        complete(id)
    })())
}

#[no_mangle]
unsafe extern "C" fn rdma_resolve_route(id: *mut rdma_cm_id, _timeout_ms: c_int) -> c_int {
    status((|| {
        {
            let mut st = state::lock();
            let dev = device::device()?;
            let (s, c) = st.id(id)?;
            if s.phase != Phase::AddrResolved {
                return Err(libc::EINVAL);
            }
            let path = &mut c.path;
            path.dgid = s.peer_gid;
            path.sgid = dev.gid;
            path.flow_label = 0;
            path.hop_limit = 64;
            path.traffic_class = s.tos;
            path.reversible = 1;
            path.numb_path = 1;
            path.pkey = 0xffff;
            path.mtu_selector = 2;
            path.mtu = dev.active_mtu as u8;
            path.rate_selector = 2;
            path.rate = 2;
            path.packet_life_time_selector = 2;
            path.packet_life_time = 16;
            c.c.route.path_rec = &mut c.path;
            c.c.route.num_paths = 1;
            s.phase = Phase::RouteResolved;
            queue_own(&mut st, id, RDMA_CM_EVENT_ROUTE_RESOLVED, 0);
        }
        complete(id)
    })())
}

#[no_mangle]
unsafe extern "C" fn rdma_listen(id: *mut rdma_cm_id, backlog: c_int) -> c_int {
    status((|| {
        let mut st = state::lock();
        device::device()?;
        let phase = st.id(id)?.0.phase;
        if phase == Phase::Idle {
            bind(&mut st, id, (Ipv4Addr::UNSPECIFIED, 0).into())?;
        } else if phase != Phase::AddrBound {
            return Err(libc::EINVAL);
        }
        let (s, c) = st.id(id)?;
        let sid = ip::service_id(c.c.ps as u16, s.port.unwrap_or(0));
        let backlog = if backlog <= 0 { 1024 } else { backlog as u32 };
        let l = agent(&mut st)?.listen(sid, backlog).map_err(cm_errno)?;
        st.listeners.insert(l, id as usize);
        publish_listeners(&st);
        let (s, _) = st.id(id)?;
        s.listener = Some(l);
        s.phase = Phase::Listen;
        Ok(())
    })())
}

/// librdmacm's `ucma_valid_param` for the TCP port space.
fn valid_param(
    dev: &Device,
    ps: c_int,
    has_qp: bool,
    p: Option<&rdma_conn_param>,
) -> Result<(), c_int> {
    if ps != RDMA_PS_TCP {
        return Ok(());
    }
    let Some(p) = p else {
        return if has_qp { Ok(()) } else { Err(libc::EINVAL) };
    };
    if p.initiator_depth != RDMA_MAX_INIT_DEPTH && p.initiator_depth > dev.max_qp_init_rd_atom {
        return Err(libc::EINVAL);
    }
    if p.responder_resources != RDMA_MAX_RESP_RES && p.responder_resources > dev.max_qp_rd_atom {
        return Err(libc::EINVAL);
    }
    Ok(())
}

/// The private data the program passes (NULL with a length: EINVAL).
///
/// # Safety
/// `data` is NULL or holds `len` bytes.
unsafe fn private<'a>(data: *const c_void, len: u8) -> Result<&'a [u8], c_int> {
    match (data.is_null(), len) {
        (_, 0) => Ok(&[]),
        (true, _) => Err(libc::EINVAL),
        // SAFETY: the caller's contract (point 1).
        (false, n) => Ok(unsafe { std::slice::from_raw_parts(data.cast::<u8>(), usize::from(n)) }),
    }
}

#[no_mangle]
unsafe extern "C" fn rdma_connect(id: *mut rdma_cm_id, param: *mut rdma_conn_param) -> c_int {
    status((|| {
        {
            let mut st = state::lock();
            let dev = device::device()?;
            let now = dev.now();
            // SAFETY: the caller's parameters (point 1).
            let param = unsafe { param.as_ref() };
            let (s, c) = st.id(id)?;
            if s.phase != Phase::RouteResolved {
                return Err(libc::EINVAL);
            }
            let qp = c.c.qp;
            valid_param(dev, c.c.ps, !qp.is_null(), param)?;
            // SAFETY: the caller's data (point 1).
            let user = match param {
                Some(p) => unsafe { private(p.private_data, p.private_data_len) }?,
                None => &[],
            };
            let mut data = s.connect_data.clone();
            data.extend_from_slice(user);
            let src = addr::stored(&c.c.route.addr.src).ok_or(libc::EINVAL)?;
            let dst = addr::stored(&c.c.route.addr.dst).ok_or(libc::EINVAL)?;
            let hdr = IpCmHeader {
                src_port: src.port(),
                src: src.ip(),
                dst: dst.ip(),
            }
            .to_bytes()
            .map_err(|_| libc::EINVAL)?;
            let mut pd = hdr.to_vec();
            pd.extend_from_slice(&data);
            let sid = ip::service_id(c.c.ps as u16, dst.port());
            let peer = MadAddress::gsi(s.peer_gid);
            s.active = true;
            if c.c.qp_type == IBV_QPT_UD {
                if pd.len() > SIDR_REQ_PRIVATE {
                    return Err(libc::EINVAL);
                }
                let conn = agent(&mut st)?
                    .sidr_request(now, sid, peer, &pd, CM_RESPONSE_TIMEOUT, MAX_CM_RETRIES)
                    .map_err(cm_errno)?;
                st.conns.insert(conn, id as usize);
                let (s, _) = st.id(id)?;
                s.conn = Some(conn);
                s.phase = Phase::Connect;
            } else {
                if pd.len() > REQ_PRIVATE {
                    return Err(libc::EINVAL);
                }
                let resp = match param.map(|p| p.responder_resources) {
                    None | Some(RDMA_MAX_RESP_RES) => dev.max_qp_rd_atom,
                    Some(r) => r.min(dev.max_qp_rd_atom),
                };
                let init = match param.map(|p| p.initiator_depth) {
                    None | Some(RDMA_MAX_INIT_DEPTH) => dev.max_qp_init_rd_atom,
                    Some(r) => r.min(dev.max_qp_init_rd_atom),
                };
                s.responder_resources = resp;
                s.initiator_depth = init;
                s.retry_count = param.map_or(7, |p| p.retry_count.min(7));
                s.rnr_retry_count = param.map_or(7, |p| p.rnr_retry_count.min(7));
                s.path_mtu = dev.active_mtu;
                // SAFETY: the id's QP is live (or NULL).
                let (qpn, srq, ty) = match unsafe { qp.as_ref() } {
                    Some(q) => (q.qp_num, !q.srq.is_null(), q.qp_type),
                    None => (
                        param.map_or(0, |p| p.qp_num),
                        param.is_some_and(|p| p.srq != 0),
                        c.c.qp_type,
                    ),
                };
                let cp = ConnectParams {
                    service_id: sid,
                    peer,
                    local_qpn: qpn & 0xff_ffff,
                    starting_psn: s.psn,
                    transport: if ty == IBV_QPT_UC {
                        Transport::Uc
                    } else {
                        Transport::Rc
                    },
                    responder_resources: resp,
                    initiator_depth: init,
                    retry_count: s.retry_count,
                    rnr_retry_count: s.rnr_retry_count,
                    path_mtu: dev.active_mtu as u8,
                    srq,
                    flow_control: param.is_none_or(|p| p.flow_control != 0),
                    traffic_class: s.tos,
                    hop_limit: 64,
                    flow_label: 0,
                    local_cm_response_timeout: CM_RESPONSE_TIMEOUT,
                    remote_cm_response_timeout: CM_RESPONSE_TIMEOUT,
                    max_cm_retries: MAX_CM_RETRIES,
                    private_data: &pd,
                };
                let conn = agent(&mut st)?.connect(now, &cp).map_err(cm_errno)?;
                st.conns.insert(conn, id as usize);
                let (s, _) = st.id(id)?;
                s.conn = Some(conn);
                s.phase = Phase::Connect;
            }
        }
        device::wake();
        complete(id)
    })())
}

#[no_mangle]
unsafe extern "C" fn rdma_accept(id: *mut rdma_cm_id, param: *mut rdma_conn_param) -> c_int {
    status((|| {
        let sync = {
            let mut st = state::lock();
            let dev = device::device()?;
            let now = dev.now();
            // SAFETY: the caller's parameters (point 1).
            let param = unsafe { param.as_ref() };
            let (s, c) = st.id(id)?;
            if s.phase != Phase::ConnectRequest {
                return Err(libc::EINVAL);
            }
            let conn = s.conn.ok_or(libc::EINVAL)?;
            let qp = c.c.qp;
            valid_param(dev, c.c.ps, !qp.is_null(), param)?;
            // SAFETY: the caller's data (point 1).
            let pd = match param {
                Some(p) => unsafe { private(p.private_data, p.private_data_len) }?,
                None => &[],
            };
            // SAFETY: the id's QP is live (or NULL).
            let q = unsafe { qp.as_ref() };
            let qpn = q.map_or(param.map_or(0, |p| p.qp_num), |q| q.qp_num) & 0xff_ffff;
            if c.c.qp_type == IBV_QPT_UD {
                if pd.len() > SIDR_REP_PRIVATE {
                    return Err(libc::EINVAL);
                }
                let qkey = s.qkey;
                s.phase = Phase::Established;
                s.conn = None;
                st.conns.remove(&conn);
                agent(&mut st)?
                    .sidr_reply(now, conn, sidr_status::VALID, qpn, qkey, pd)
                    .map_err(cm_errno)?;
                drop(st);
                device::wake();
                return Ok(());
            }
            if pd.len() > REP_PRIVATE {
                return Err(libc::EINVAL);
            }
            if let Some(p) = param.filter(|p| p.initiator_depth != RDMA_MAX_INIT_DEPTH) {
                s.initiator_depth = p.initiator_depth;
            } else {
                s.initiator_depth = s.initiator_depth.min(dev.max_qp_init_rd_atom);
            }
            if let Some(p) = param.filter(|p| p.responder_resources != RDMA_MAX_RESP_RES) {
                s.responder_resources = p.responder_resources;
            } else {
                s.responder_resources = s.responder_resources.min(dev.max_qp_rd_atom);
            }
            if !qp.is_null() {
                if let Err(e) = qp::modify_rtr(s, dev, qp, s.responder_resources)
                    .and_then(|()| qp::modify_rts(s, qp, s.initiator_depth))
                {
                    qp::modify_err(qp);
                    let _ = agent(&mut st)?.reject(now, conn, rej_reason::CONSUMER_DEFINED, &[]);
                    return Err(e);
                }
            }
            let (s, _) = st.id(id)?;
            let ap = AcceptParams {
                local_qpn: qpn,
                starting_psn: s.psn,
                responder_resources: s.responder_resources,
                initiator_depth: s.initiator_depth,
                rnr_retry_count: param.map_or(7, |p| p.rnr_retry_count.min(7)),
                srq: q.map_or(param.is_some_and(|p| p.srq != 0), |q| !q.srq.is_null()),
                flow_control: param.is_none_or(|p| p.flow_control != 0),
                failover_accepted: false,
                private_data: pd,
            };
            s.phase = Phase::Accepted;
            let sync = s.sync;
            agent(&mut st)?.accept(now, conn, &ap).map_err(cm_errno)?;
            sync
        };
        device::wake();
        if sync {
            complete(id)
        } else {
            Ok(())
        }
    })())
}

#[no_mangle]
unsafe extern "C" fn rdma_reject(id: *mut rdma_cm_id, data: *const c_void, len: u8) -> c_int {
    status((|| {
        let mut st = state::lock();
        let dev = device::device()?;
        let (s, c) = st.id(id)?;
        if s.phase != Phase::ConnectRequest {
            return Err(libc::EINVAL);
        }
        // SAFETY: the caller's data (point 1).
        let pd = unsafe { private(data, len) }?;
        let conn = s.conn.ok_or(libc::EINVAL)?;
        s.phase = Phase::Disconnected;
        let ud = c.c.qp_type == IBV_QPT_UD;
        let r = if ud {
            if pd.len() > SIDR_REP_PRIVATE {
                return Err(libc::EINVAL);
            }
            s.conn = None;
            st.conns.remove(&conn);
            agent(&mut st)?.sidr_reply(dev.now(), conn, sidr_status::REJECT, 0, 0, pd)
        } else {
            if pd.len() > REJ_PRIVATE {
                return Err(libc::EINVAL);
            }
            agent(&mut st)?.reject(dev.now(), conn, rej_reason::CONSUMER_DEFINED, pd)
        };
        drop(st);
        device::wake();
        r.map_err(cm_errno)
    })())
}

#[no_mangle]
unsafe extern "C" fn rdma_reject_ece(id: *mut rdma_cm_id, data: *const c_void, len: u8) -> c_int {
    // SAFETY: same contract.
    unsafe { rdma_reject(id, data, len) }
}

#[no_mangle]
unsafe extern "C" fn rdma_disconnect(id: *mut rdma_cm_id) -> c_int {
    status((|| {
        let sync = {
            let mut st = state::lock();
            let dev = device::device()?;
            let (s, c) = st.id(id)?;
            // As the kernel's rdma_disconnect: any id with a CM ID (a
            // connection, even one past its DREQ or in timewait) succeeds;
            // the DREQ, or the DREP after one, goes when the state allows.
            if s.conn.is_none() && !s.disconnect_reported {
                return Err(libc::EINVAL);
            }
            if !c.c.qp.is_null() {
                qp::modify_err(c.c.qp);
            }
            let sync = s.sync;
            if let Some(conn) = s.conn {
                let _ = agent(&mut st)?.disconnect(dev.now(), conn, &[]);
            }
            sync
        };
        device::wake();
        if sync {
            complete(id)
        } else {
            Ok(())
        }
    })())
}

#[no_mangle]
unsafe extern "C" fn rdma_establish(id: *mut rdma_cm_id) -> c_int {
    status((|| {
        {
            let mut st = state::lock();
            let dev = device::device()?;
            let (s, _) = st.id(id)?;
            let conn = s.conn.ok_or(libc::EINVAL)?;
            if !s.active || s.phase != Phase::Connect {
                return Err(libc::EINVAL);
            }
            s.phase = Phase::Established;
            agent(&mut st)?
                .send_rtu(dev.now(), conn, &[])
                .map_err(cm_errno)?;
        }
        device::wake();
        Ok(())
    })())
}

#[no_mangle]
unsafe extern "C" fn rdma_notify(id: *mut rdma_cm_id, event: c_int) -> c_int {
    /// IBV_EVENT_COMM_EST.
    const COMM_EST: c_int = 7;
    status((|| {
        let mut st = state::lock();
        let dev = device::device()?;
        let (s, _) = st.id(id)?;
        let conn = s.conn.ok_or(libc::EINVAL)?;
        if event == COMM_EST && s.phase == Phase::Accepted {
            agent(&mut st)?
                .establish(dev.now(), conn)
                .map_err(cm_errno)?;
            drop(st);
            device::wake();
        }
        Ok(())
    })())
}

// -------------------------------------------------------- passive requests

/// A REQ or SIDR_REQ for a listener: a new id and its CONNECT_REQUEST on
/// the listener's channel (the kernel's cma_ib_req_handler /
/// cma_ib_new_conn_id and librdmacm's ucma_process_conn_req).
pub fn conn_request(
    st: &mut State,
    dev: &Device,
    listener: ListenerId,
    conn: ConnId,
    req: Option<&ReqInfo>,
    sidr: Option<&SidrReqInfo>,
) {
    let now = dev.now();
    let reject = |st: &mut State| {
        if let Some(a) = st.agent.as_mut() {
            match sidr {
                Some(_) => {
                    let _ = a.sidr_reply(now, conn, sidr_status::REJECT, 0, 0, &[]);
                }
                None => {
                    let _ = a.reject(now, conn, rej_reason::CONSUMER_DEFINED, &[]);
                }
            }
        }
    };
    let Some(&lp) = st.listeners.get(&listener) else {
        return reject(st);
    };
    let lp = lp as *mut rdma_cm_id;
    let private = match (req, sidr) {
        (Some(r), _) => r.private_data,
        (_, Some(r)) => r.private_data,
        _ => return,
    };
    let Ok(hdr) = IpCmHeader::parse(private.as_slice()) else {
        return reject(st);
    };
    let Ok((ls, l)) = st.id(lp) else {
        return reject(st);
    };
    let (lsync, lch, lctx, ps, qpt, lport) = (
        ls.sync,
        l.c.channel,
        l.c.context,
        l.c.ps,
        l.c.qp_type,
        ls.port.unwrap_or(0),
    );
    let local_ip = addr::stored(&l.c.route.addr.src)
        .map(|a| a.ip())
        .filter(|i| !i.is_unspecified())
        .unwrap_or(IpAddr::V4(dev.ip));
    // A synchronous listener's requests get their own channels
    // (rdma_get_request's ids are synchronous too).
    let ch = if lsync { null_mut() } else { lch };
    let Ok(p) = new_id(st, ch, lctx, ps, qpt) else {
        return reject(st);
    };
    st.conns.insert(conn, p as usize);
    let Ok((s, c)) = st.id(p) else {
        return reject(st);
    };
    c.c.verbs = dev.ctx;
    if c.c.pd.is_null() {
        c.c.pd = dev.pd;
    }
    c.c.port_num = 1;
    let local_ip = match (hdr.dst, local_ip) {
        (IpAddr::V4(_), IpAddr::V6(v)) if v.is_unspecified() => IpAddr::V4(dev.ip),
        (_, l) => l,
    };
    addr::write((local_ip, lport).into(), &mut c.c.route.addr.src);
    addr::write((hdr.src, hdr.src_port).into(), &mut c.c.route.addr.dst);
    s.phase = Phase::ConnectRequest;
    s.conn = Some(conn);
    let user = &private.as_slice()[ip::HEADER_LEN.min(private.len())..];
    let mut e = State::event(p, RDMA_CM_EVENT_CONNECT_REQUEST, 0, user);
    e.c.listen_id = lp;
    match (req, sidr) {
        (Some(r), _) => {
            s.peer_gid = r.peer.gid;
            s.remote_qpn = r.remote_qpn;
            s.remote_psn = r.starting_psn;
            // From our side: we answer the peer's reads (its initiator
            // depth) and issue up to its responder resources.
            s.responder_resources = r.initiator_depth;
            s.initiator_depth = r.responder_resources;
            s.retry_count = r.retry_count;
            s.rnr_retry_count = r.rnr_retry_count;
            s.path_mtu = c_int::from(r.path_mtu);
            s.tos = r.traffic_class;
            c.c.route.addr.ibaddr.sgid = dev.gid;
            c.c.route.addr.ibaddr.dgid = r.peer.gid;
            c.c.route.addr.ibaddr.pkey = 0xffff;
            conn_param(
                &mut e,
                r.initiator_depth,
                r.responder_resources,
                r.flow_control,
                r.rnr_retry_count,
                r.srq,
                r.remote_qpn,
            );
            e.c.param.conn.retry_count = r.retry_count;
            fix_private(&mut e, false);
            // The kernel's cma_ib_req_handler: a connected port space's
            // request waiting for the program gets an MRA, so a slow
            // rdma_accept does not make the peer resend or time out.
            if let Some(a) = st.agent.as_mut() {
                let _ = a.send_mra(now, conn, crate::device::CMA_CM_MRA_SETTING);
            }
        }
        (_, Some(r)) => {
            s.peer_gid = r.peer.gid;
            c.c.route.addr.ibaddr.sgid = dev.gid;
            c.c.route.addr.ibaddr.dgid = r.peer.gid;
            c.c.route.addr.ibaddr.pkey = 0xffff;
            let s: &IdState = s;
            ud_param(&mut e, s, dev, user, 0, 0);
        }
        _ => {}
    }
    // SAFETY: a registered listener.
    st.push(lch, e);
}

#[no_mangle]
unsafe extern "C" fn rdma_get_request(listen: *mut rdma_cm_id, id: *mut *mut rdma_cm_id) -> c_int {
    status((|| {
        if id.is_null() {
            return Err(libc::EINVAL);
        }
        let (ch, attr, pd) = {
            let mut st = state::lock();
            let (s, c) = st.id(listen)?;
            if !s.sync {
                return Err(libc::EINVAL);
            }
            let old = std::mem::replace(&mut c.c.event, null_mut());
            let attr = s.qp_init_attr.as_deref().map(|a| ibv_qp_init_attr { ..*a });
            let (ch, pd) = (c.c.channel, c.c.pd);
            if !old.is_null() && st.events.remove(&(old as usize)) {
                // SAFETY: our handed-out event.
                drop(unsafe { Box::from_raw(old.cast::<Event>()) });
            }
            (ch, attr, pd)
        };
        let mut e = null_mut();
        // SAFETY: the listener's channel; a local out-pointer.
        if unsafe { rdma_get_cm_event(ch, &mut e) } != 0 {
            // SAFETY: the thread's errno.
            return Err(unsafe { *libc::__errno_location() });
        }
        // SAFETY: the event just returned.
        let ev = unsafe { &*e };
        let fail = |err: c_int| {
            if let Ok((_, c)) = state::lock().id(listen) {
                c.c.event = e;
            }
            Err(err)
        };
        if ev.event == RDMA_CM_EVENT_REJECTED {
            return fail(libc::ECONNREFUSED);
        }
        if ev.status != 0 {
            return fail(-ev.status);
        }
        if ev.event != RDMA_CM_EVENT_CONNECT_REQUEST {
            return fail(libc::EINVAL);
        }
        if let Some(mut a) = attr {
            // SAFETY: the new id; our attributes.
            if unsafe { rdma_create_qp(ev.id, pd, &mut a) } != 0 {
                // SAFETY: the thread's errno.
                return fail(unsafe { *libc::__errno_location() });
            }
        }
        if let Ok((_, c)) = state::lock().id(ev.id) {
            c.c.event = e;
        }
        // SAFETY: the caller's out-pointer.
        unsafe { *id = ev.id };
        Ok(())
    })())
}

// --------------------------------------------------------------------- QPs

/// Destroys the CQs (and their channels) rdma_create_qp made for the id:
/// `own` says which, (send, recv); the fields are cleared.
fn destroy_cqs(c: &mut rdma_cm_id, own: (bool, bool)) {
    // SAFETY: CQs and channels rdma_create_qp made for the id.
    unsafe {
        if own.0 {
            ibv_destroy_cq(c.send_cq);
            ibv_destroy_comp_channel(c.send_cq_channel);
            c.send_cq = null_mut();
            c.send_cq_channel = null_mut();
        }
        if own.1 {
            ibv_destroy_cq(c.recv_cq);
            ibv_destroy_comp_channel(c.recv_cq_channel);
            c.recv_cq = null_mut();
            c.recv_cq_channel = null_mut();
        }
    }
}

/// A CQ with its own completion channel, its context the id (librdmacm's
/// ucma_create_cqs: rdma_get_send_comp checks both).
fn cq_for(
    ctx: *mut ibv_context,
    id: *mut rdma_cm_id,
    size: u32,
) -> Result<(*mut ibv_comp_channel, *mut ibv_cq), c_int> {
    // SAFETY: public verbs on the live context.
    unsafe {
        let ch = ibv_create_comp_channel(ctx);
        if ch.is_null() {
            return Err(libc::ENOMEM);
        }
        let cq = ibv_create_cq(ctx, size.max(1) as c_int, id.cast(), ch, 0);
        if cq.is_null() {
            ibv_destroy_comp_channel(ch);
            return Err(*libc::__errno_location());
        }
        Ok((ch, cq))
    }
}

/// `ibv_create_qp_ex` (inline in verbs.h: the context's extended op).
///
/// # Safety
/// `ctx` is the drop-in's live context; `attr` valid.
unsafe fn create_qp_ex(ctx: *mut ibv_context, attr: *mut ibv_qp_init_attr_ex) -> *mut ibv_qp {
    let off = std::mem::offset_of!(verbs_context, context);
    // SAFETY: the drop-in's contexts are verbs_contexts (abi_compat says
    // so); the op is set.
    unsafe {
        if (*ctx).abi_compat != VERBS_ABI_IS_EXTENDED {
            *libc::__errno_location() = libc::EOPNOTSUPP;
            return null_mut();
        }
        let vc = ctx.cast::<u8>().sub(off).cast::<verbs_context>();
        match (*vc).create_qp_ex {
            Some(f) => f(ctx, attr),
            None => {
                *libc::__errno_location() = libc::EOPNOTSUPP;
                null_mut()
            }
        }
    }
}

/// librdmacm's rdma_create_qp_ex.
unsafe fn create_qp(p: *mut rdma_cm_id, attr: &mut ibv_qp_init_attr_ex) -> Result<(), c_int> {
    let dev = device::device()?;
    let mut st = state::lock();
    let (_, c) = st.id(p)?;
    if !c.c.qp.is_null() {
        return Err(libc::EINVAL);
    }
    let ctx = c.c.verbs;
    if ctx.is_null() {
        return Err(libc::EINVAL);
    }
    if attr.comp_mask & IBV_QP_INIT_ATTR_PD == 0 || attr.pd.is_null() {
        attr.pd = if c.c.pd.is_null() { dev.pd } else { c.c.pd };
        attr.comp_mask |= IBV_QP_INIT_ATTR_PD;
    }
    // SAFETY: the program's PD (point 1: a PD of the drop-in).
    if unsafe { (*attr.pd).context } != ctx {
        return Err(libc::EINVAL);
    }
    let mut own = (false, false);
    {
        if attr.recv_cq.is_null() {
            own.1 = true;
            let (ch, cq) = cq_for(ctx, p, attr.cap.max_recv_wr)?;
            c.c.recv_cq_channel = ch;
            c.c.recv_cq = cq;
            attr.recv_cq = cq;
        }
        if attr.send_cq.is_null() {
            own.0 = true;
            let (ch, cq) = cq_for(ctx, p, attr.cap.max_send_wr)?;
            c.c.send_cq_channel = ch;
            c.c.send_cq = cq;
            attr.send_cq = cq;
        }
    }
    if attr.srq.is_null() && !c.c.srq.is_null() {
        attr.srq = c.c.srq.cast();
    }
    let qp = if attr.comp_mask & !IBV_QP_INIT_ATTR_PD == 0 {
        // SAFETY: ibv_qp_init_attr is the prefix of the _ex struct.
        unsafe { ibv_create_qp(attr.pd, (attr as *mut ibv_qp_init_attr_ex).cast()) }
    } else {
        // SAFETY: the drop-in's context; valid attributes.
        unsafe { create_qp_ex(ctx, attr) }
    };
    let (s, c) = st.id(p)?;
    s.own_cqs = (s.own_cqs.0 | own.0, s.own_cqs.1 | own.1);
    if qp.is_null() {
        // SAFETY: the thread's errno.
        return Err(unsafe { *libc::__errno_location() });
    }
    if let Err(e) = qp::init_new(s, dev, qp) {
        // SAFETY: the QP just made.
        unsafe { ibv_destroy_qp(qp) };
        return Err(e);
    }
    c.c.qp = qp;
    c.c.pd = attr.pd;
    Ok(())
}

#[no_mangle]
unsafe extern "C" fn rdma_create_qp(
    id: *mut rdma_cm_id,
    pd: *mut ibv_pd,
    attr: *mut ibv_qp_init_attr,
) -> c_int {
    status((|| {
        // SAFETY: the caller's attributes (point 1).
        let a = unsafe { attr.as_mut() }.ok_or(libc::EINVAL)?;
        // SAFETY: ibv_qp_init_attr_ex is plain data.
        let mut ex: ibv_qp_init_attr_ex = unsafe { std::mem::zeroed() };
        ex.qp_context = a.qp_context;
        ex.send_cq = a.send_cq;
        ex.recv_cq = a.recv_cq;
        ex.srq = a.srq;
        ex.cap = a.cap;
        ex.qp_type = a.qp_type;
        ex.sq_sig_all = a.sq_sig_all;
        if !pd.is_null() {
            ex.comp_mask = IBV_QP_INIT_ATTR_PD;
            ex.pd = pd;
        }
        // SAFETY: the id is checked inside.
        unsafe { create_qp(id, &mut ex) }?;
        a.send_cq = ex.send_cq;
        a.recv_cq = ex.recv_cq;
        a.srq = ex.srq;
        a.cap = ex.cap;
        Ok(())
    })())
}

#[no_mangle]
unsafe extern "C" fn rdma_create_qp_ex(
    id: *mut rdma_cm_id,
    attr: *mut ibv_qp_init_attr_ex,
) -> c_int {
    status((|| {
        // SAFETY: the caller's attributes (point 1).
        let a = unsafe { attr.as_mut() }.ok_or(libc::EINVAL)?;
        // SAFETY: the id is checked inside.
        unsafe { create_qp(id, a) }
    })())
}

#[no_mangle]
unsafe extern "C" fn rdma_destroy_qp(id: *mut rdma_cm_id) {
    let mut st = state::lock();
    let Ok((s, c)) = st.id(id) else {
        return;
    };
    if !c.c.qp.is_null() {
        // SAFETY: the id's QP.
        unsafe { ibv_destroy_qp(c.c.qp) };
        c.c.qp = null_mut();
    }
    destroy_cqs(&mut c.c, std::mem::take(&mut s.own_cqs));
}

#[no_mangle]
unsafe extern "C" fn rdma_create_srq(
    id: *mut rdma_cm_id,
    pd: *mut ibv_pd,
    attr: *mut ibv_srq_init_attr,
) -> c_int {
    status((|| {
        let dev = device::device()?;
        let mut st = state::lock();
        let (_, c) = st.id(id)?;
        // SAFETY: the caller's attributes (point 1).
        let a = unsafe { attr.as_mut() }.ok_or(libc::EINVAL)?;
        if c.c.verbs.is_null() || !c.c.srq.is_null() {
            return Err(libc::EINVAL);
        }
        let pd = if !pd.is_null() {
            pd
        } else if !c.c.pd.is_null() {
            c.c.pd
        } else {
            dev.pd
        };
        // SAFETY: a PD of the drop-in; valid attributes.
        let srq = unsafe { ibv_create_srq(pd, a) };
        if srq.is_null() {
            // SAFETY: the thread's errno.
            return Err(unsafe { *libc::__errno_location() });
        }
        c.c.srq = srq;
        c.c.pd = pd;
        Ok(())
    })())
}

#[no_mangle]
unsafe extern "C" fn rdma_create_srq_ex(
    id: *mut rdma_cm_id,
    attr: *mut ibv_srq_init_attr_ex,
) -> c_int {
    status((|| {
        // SAFETY: the caller's attributes (point 1).
        let a = unsafe { attr.as_mut() }.ok_or(libc::EINVAL)?;
        if a.comp_mask & IBV_SRQ_INIT_ATTR_TYPE != 0 && a.srq_type != 0 {
            return Err(libc::EOPNOTSUPP); // XRC and tag matching SRQs
        }
        let pd = if a.comp_mask & IBV_SRQ_INIT_ATTR_PD != 0 {
            a.pd
        } else {
            null_mut()
        };
        let mut basic = ibv_srq_init_attr {
            srq_context: a.srq_context,
            attr: ibv_srq_attr { ..a.attr },
        };
        // SAFETY: same contract.
        match unsafe { rdma_create_srq(id, pd, &mut basic) } {
            0 => {
                a.attr = basic.attr;
                Ok(())
            }
            // SAFETY: the thread's errno.
            _ => Err(unsafe { *libc::__errno_location() }),
        }
    })())
}

#[no_mangle]
unsafe extern "C" fn rdma_destroy_srq(id: *mut rdma_cm_id) {
    let mut st = state::lock();
    if let Ok((_, c)) = st.id(id) {
        if !c.c.srq.is_null() {
            // SAFETY: the id's SRQ.
            unsafe { ibv_destroy_srq(c.c.srq) };
            c.c.srq = null_mut();
        }
    }
}

#[no_mangle]
unsafe extern "C" fn rdma_init_qp_attr(
    id: *mut rdma_cm_id,
    attr: *mut ibv_qp_attr,
    mask: *mut c_int,
) -> c_int {
    status((|| {
        let dev = device::device()?;
        let mut st = state::lock();
        let (s, c) = st.id(id)?;
        // SAFETY: the caller's out-structures (point 1).
        let (a, m) = unsafe {
            (
                attr.as_mut().ok_or(libc::EINVAL)?,
                mask.as_mut().ok_or(libc::EINVAL)?,
            )
        };
        if c.c.verbs.is_null() {
            return Err(libc::EINVAL);
        }
        *m = qp::init_attr(s, dev, c.c.qp_type, a)?;
        Ok(())
    })())
}

// ----------------------------------------------------------- options, misc

#[no_mangle]
unsafe extern "C" fn rdma_set_option(
    id: *mut rdma_cm_id,
    level: c_int,
    name: c_int,
    val: *mut c_void,
    len: usize,
) -> c_int {
    status((|| {
        let mut st = state::lock();
        let (s, _) = st.id(id)?;
        if val.is_null() {
            return Err(libc::EINVAL);
        }
        // SAFETY: the caller's value of `len` bytes (point 1), read as the
        // type the option names once the length matches.
        unsafe {
            match (level, name) {
                (RDMA_OPTION_ID, RDMA_OPTION_ID_TOS) if len == 1 => s.tos = *val.cast::<u8>(),
                (RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR) if len == 4 => {
                    // The kernel's cma_set_reuseaddr: on an idle id, or
                    // set on one that does not listen.
                    let reuse = *val.cast::<c_int>() != 0;
                    if !(s.phase == Phase::Idle || (reuse && s.phase != Phase::Listen)) {
                        return Err(libc::EINVAL);
                    }
                    s.reuseaddr = reuse
                }
                (RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY) if len == 4 => {
                    // cma_set_afonly: before or right after the bind.
                    if !matches!(s.phase, Phase::Idle | Phase::AddrBound) {
                        return Err(libc::EINVAL);
                    }
                    s.afonly = *val.cast::<c_int>() != 0
                }
                (RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT) if len == 1 => {
                    s.ack_timeout = Some((*val.cast::<u8>()).min(31))
                }
                (
                    RDMA_OPTION_ID,
                    RDMA_OPTION_ID_TOS
                    | RDMA_OPTION_ID_REUSEADDR
                    | RDMA_OPTION_ID_AFONLY
                    | RDMA_OPTION_ID_ACK_TIMEOUT,
                ) => return Err(libc::EINVAL),
                // Path records come from rdma_resolve_route here.
                (RDMA_OPTION_IB, RDMA_OPTION_IB_PATH) => return Err(libc::EOPNOTSUPP),
                _ => return Err(libc::ENOSYS),
            }
        }
        Ok(())
    })())
}

#[no_mangle]
unsafe extern "C" fn rdma_migrate_id(
    id: *mut rdma_cm_id,
    channel: *mut rdma_event_channel,
) -> c_int {
    status((|| {
        let mut st = state::lock();
        let (s, c) = st.id(id)?;
        let old = c.c.channel;
        let was_sync = s.sync;
        let new = if channel.is_null() {
            new_channel(&mut st)?
        } else if st.channels.contains_key(&(channel as usize)) {
            channel
        } else {
            return Err(libc::EINVAL);
        };
        let moved = unqueue(&mut st, old, |e| e.c.id == id);
        for e in moved {
            st.push(new, e);
        }
        let (s, c) = st.id(id)?;
        c.c.channel = new;
        s.sync = channel.is_null();
        if was_sync && old != new {
            free_channel(&mut st, old);
        }
        Ok(())
    })())
}

fn port_of(s: &SockaddrStorage) -> u16 {
    addr::stored(s).map_or(0, |a| a.port().to_be())
}

#[no_mangle]
unsafe extern "C" fn rdma_get_src_port(id: *mut rdma_cm_id) -> u16 {
    let mut st = state::lock();
    st.id(id).map_or(0, |(_, c)| port_of(&c.c.route.addr.src))
}

#[no_mangle]
unsafe extern "C" fn rdma_get_dst_port(id: *mut rdma_cm_id) -> u16 {
    let mut st = state::lock();
    st.id(id).map_or(0, |(_, c)| port_of(&c.c.route.addr.dst))
}

#[no_mangle]
unsafe extern "C" fn rdma_get_devices(num: *mut c_int) -> *mut *mut ibv_context {
    let ctx = device::device().ok().map(|d| d.ctx);
    let n = usize::from(ctx.is_some());
    // SAFETY: malloc of n+1 pointers; freed by rdma_free_devices.
    let list = unsafe { libc::malloc((n + 1) * std::mem::size_of::<*mut ibv_context>()) }
        .cast::<*mut ibv_context>();
    if list.is_null() {
        set_errno(libc::ENOMEM);
        return null_mut();
    }
    // SAFETY: n+1 slots.
    unsafe {
        if let Some(c) = ctx {
            *list = c;
        }
        *list.add(n) = null_mut();
        if !num.is_null() {
            *num = n as c_int;
        }
    }
    list
}

#[no_mangle]
unsafe extern "C" fn rdma_free_devices(list: *mut *mut ibv_context) {
    // SAFETY: a list rdma_get_devices malloc'd (or NULL).
    unsafe { libc::free(list.cast()) };
}

#[no_mangle]
unsafe extern "C" fn rdma_getaddrinfo(
    node: *const c_char,
    service: *const c_char,
    hints: *const rdma_addrinfo,
    res: *mut *mut rdma_addrinfo,
) -> c_int {
    // SAFETY: the caller's contract is getaddrinfo's.
    status(unsafe { addr::getaddrinfo(node, service, hints, res) })
}

#[no_mangle]
unsafe extern "C" fn rdma_freeaddrinfo(res: *mut rdma_addrinfo) {
    // SAFETY: a list rdma_getaddrinfo returned.
    unsafe { addr::freeaddrinfo(res) }
}

#[no_mangle]
unsafe extern "C" fn rdma_create_ep(
    id: *mut *mut rdma_cm_id,
    res: *mut rdma_addrinfo,
    pd: *mut ibv_pd,
    attr: *mut ibv_qp_init_attr,
) -> c_int {
    status((|| {
        // SAFETY: the caller's addrinfo (point 1).
        let r = unsafe { res.as_ref() }.ok_or(libc::EINVAL)?;
        if id.is_null() {
            return Err(libc::EINVAL);
        }
        device::device()?;
        let t = if r.ai_qp_type != 0 {
            r.ai_qp_type
        } else {
            qp_type_of(r.ai_port_space)?
        };
        qp_type_of(r.ai_port_space)?;
        let p = new_id(
            &mut state::lock(),
            null_mut(),
            null_mut(),
            r.ai_port_space,
            t,
        )?;
        let undo = |e: c_int| {
            // SAFETY: the id just made.
            unsafe { rdma_destroy_ep(p) };
            Err(e)
        };
        let last = || {
            // SAFETY: the thread's errno.
            unsafe { *libc::__errno_location() }
        };
        if r.ai_flags & RAI_PASSIVE != 0 {
            // SAFETY: the addrinfo's address.
            if unsafe { rdma_bind_addr(p, r.ai_src_addr) } != 0 {
                return undo(last());
            }
            let mut st = state::lock();
            let (s, c) = st.id(p)?;
            if !pd.is_null() {
                c.c.pd = pd;
            }
            // SAFETY: the caller's attributes (point 1).
            if let Some(a) = unsafe { attr.as_ref() } {
                let mut b = Box::new(ibv_qp_init_attr { ..*a });
                b.qp_type = t;
                s.qp_init_attr = Some(b);
            }
        } else {
            // SAFETY: the addrinfo's addresses.
            if unsafe { rdma_resolve_addr(p, r.ai_src_addr, r.ai_dst_addr, 2000) } != 0
                // SAFETY: the id just made.
                || unsafe { rdma_resolve_route(p, 2000) } != 0
            {
                return undo(last());
            }
            // SAFETY: the caller's attributes (point 1).
            if let Some(a) = unsafe { attr.as_mut() } {
                a.qp_type = t;
                // SAFETY: same contract.
                if unsafe { rdma_create_qp(p, pd, a) } != 0 {
                    return undo(last());
                }
            }
            if r.ai_connect_len > 0 && !r.ai_connect.is_null() {
                // SAFETY: ai_connect holds ai_connect_len bytes.
                let d = unsafe {
                    std::slice::from_raw_parts(r.ai_connect.cast::<u8>(), r.ai_connect_len)
                };
                if let Ok((s, _)) = state::lock().id(p) {
                    s.connect_data = d.to_vec();
                }
            }
        }
        // SAFETY: the caller's out-pointer.
        unsafe { *id = p };
        Ok(())
    })())
}

#[no_mangle]
unsafe extern "C" fn rdma_destroy_ep(id: *mut rdma_cm_id) {
    // SAFETY: each checks the id.
    unsafe {
        rdma_destroy_qp(id);
        rdma_destroy_srq(id);
        rdma_destroy_id(id);
    }
}

/// At exit, what the kernel does when the process's rdma_cm file closes:
/// every id destroyed (DREP after a DREQ, DREQ when connected, REJ when
/// pending), and the process waits (at most [`EXIT_DRAIN`]) until the CM
/// thread has sent those MADs and seen them complete: a peer waiting for
/// the DREP would otherwise wait out its DREQ retries (seconds each).
pub extern "C" fn at_exit() {
    let Some(dev) = device::opened() else {
        return;
    };
    let quiet_before = {
        let mut st: Guard = state::lock();
        let now = dev.now();
        let conns: Vec<ConnId> = st.conns.keys().copied().collect();
        st.conns.clear();
        if let Some(a) = st.agent.as_mut() {
            for c in conns {
                a.destroy(now, c);
            }
        }
        device::quiet_passes()
    };
    device::wake();
    let deadline = std::time::Instant::now() + EXIT_DRAIN;
    while device::quiet_passes() == quiet_before && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// The longest `at_exit` waits for the last MADs to leave.
const EXIT_DRAIN: std::time::Duration = std::time::Duration::from_secs(1);
