//! The exported `ibv_*` functions: C pointers in, [`Shell`] calls out.
//! Nothing here decides anything about the protocol; it checks what the
//! program passes, converts the structures of `verbs.h` to the engine's and
//! back, and answers with rdma-core's return conventions.
//!
//! # The contract with C callers
//!
//! Every exported function is `unsafe extern "C"`, and `verbs.h` is its
//! contract. The drop-in relies on this of its callers, as rdma-core does,
//! and on nothing else:
//!
//! 1. **Data pointers** (attribute structures, work request lists and
//!    their SGE arrays, output arrays, names) are NULL or point to live,
//!    aligned memory of the size `verbs.h` gives their type, for the
//!    duration of the call; `ibv_poll_cq`'s array has room for
//!    `num_entries` completions, `_ibv_query_gid_table`'s for
//!    `max_entries` entries of `entry_size` bytes. NULL where a verb needs
//!    data is refused (`EINVAL`).
//! 2. **Object pointers** (device, context, PD, MR, completion channel,
//!    CQ, QP) may be anything: each is looked up among the objects the
//!    drop-in handed out ([`handles::get`]) before it is read, and NULL, a
//!    pointer it never returned, an object of another kind or one already
//!    destroyed is refused (`EINVAL`). Not detectable: a verb on an object
//!    running concurrently with that object's destroy verb (the program's
//!    race, as on rdma-core).
//! 3. **Registered memory** stays mapped and is not freed until
//!    `ibv_dereg_mr` (`memory.rs`); the engine reads and writes it in
//!    place.
//! 4. **Threads**: any verb may run on any thread, concurrently with any
//!    other, as rdma-core allows; the engine sits behind one lock
//!    (`shell.rs`). The fields of a `verbs.h` structure the drop-in writes
//!    after handing it out (`qp->state`, an MR's `addr`/`length`/`pd` on
//!    `ibv_rereg_mr`) are written as rdma-core writes them: not
//!    synchronized with the program's own reads of those fields.
//!
//! Failures follow rdma-core: `int` verbs return the errno (0 on
//! success); verbs returning a pointer return NULL with `errno` set; the
//! `ibv_query_gid`/`ibv_query_pkey`/event calls return -1 with `errno`;
//! `ibv_poll_cq` returns a negative value. The errnos are those rxe's
//! kernel driver returns for the same arguments (`checks.rs`).
//!
//! The verbs are grouped by what they act on: the device and its context
//! here, then `regions` (PDs, MRs), `completions` (channels, CQs, events),
//! `cq_ex` (`ibv_create_cq_ex` and its polling ops), `queue_pairs` (QPs,
//! posting), `qp_ex` (`ibv_create_qp_ex` and the `ibv_wr_*` builders) and
//! `srq` (shared receive queues).

mod address_handles;
pub(crate) mod cm_stats;
mod completions;
mod cq_ex;
mod qp_ex;
mod queue_pairs;
mod regions;
mod srq;
mod windows;

use std::cell::UnsafeCell;
use std::ffi::{c_char, c_int, c_uint};
use std::ptr::null_mut;
use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use engine::rc::{Mtu, VerbsError};

use crate::abi::*;
use crate::config::Config;
use crate::handles::{self, Kind, Object};
use crate::identity::{self, GIDS_IN_USE, GID_TABLE_LEN};
use crate::limits;
use crate::os::EventFd;
use crate::shell::{ContextEvents, Shell};

pub use crate::identity::DEVICE_NAME;

/// Prints one line naming an unsupported verb, once per verb, and gives
/// the errno to return.
macro_rules! unsupported {
    ($verb:expr, $errno:expr) => {{
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            eprintln!(
                "roce-xdp: {} is not supported by the roce-xdp drop-in libibverbs (docs/verbs-drop-in.md)",
                $verb
            )
        });
        $errno
    }};
}
pub(crate) use unsupported;

pub(crate) fn set_errno(e: c_int) {
    // SAFETY: errno is thread-local and always valid.
    unsafe { *libc::__errno_location() = e };
}

/// An `int` verb's answer: 0, or the errno.
fn status(r: Result<(), c_int>) -> c_int {
    r.err().unwrap_or(0)
}

/// A pointer verb's answer: the pointer, or NULL with `errno` set.
fn pointer<T>(r: Result<*mut T, c_int>) -> *mut T {
    r.unwrap_or_else(|e| {
        set_errno(e);
        null_mut()
    })
}

/// A verb answering -1 with `errno` (`ibv_query_gid`, the event calls).
fn minus_one(r: Result<(), c_int>) -> c_int {
    match r {
        Ok(()) => 0,
        Err(e) => {
            set_errno(e);
            -1
        }
    }
}

/// The errno an engine refusal maps to (rxe's for the same condition).
fn errno_of(e: &VerbsError) -> c_int {
    match e {
        VerbsError::QueueFull | VerbsError::ResourceExhausted => libc::ENOMEM,
        VerbsError::Busy => libc::EBUSY,
        _ => libc::EINVAL,
    }
}

/// Borrows the live object of type `T` at `p` (the contract, point 2).
fn object<'a, T: Object, P>(p: *const P) -> Result<&'a T, c_int> {
    // SAFETY: `handles::get` reads nothing at `p` unless the drop-in
    // handed out an object of kind `T` there that is not destroyed; the
    // program does not destroy it during this verb (the contract).
    unsafe { handles::get::<T, P>(p) }
}

// ---- the device ----

struct Device {
    /// Owns what `list[0]` points to.
    dev: Box<ibv_device>,
    list: Box<[*mut ibv_device; 2]>,
}
// SAFETY: written once before it is shared, read-only afterwards.
unsafe impl Send for Device {}
// SAFETY: as above.
unsafe impl Sync for Device {}

/// The process's engine (or why it could not open), leaked: every verb
/// holds `&'static` to it. A forked child gets one of its own at its first
/// verb ([`forked_child`]).
static SHELL: AtomicPtr<Result<Arc<Shell>, String>> = AtomicPtr::new(std::ptr::null_mut());
/// Set in a child of `fork` whose parent had an engine.
static FORKED: AtomicBool = AtomicBool::new(false);
/// Held while an engine opens.
static OPENING: Mutex<()> = Mutex::new(());
static DEVICE: OnceLock<Device> = OnceLock::new();
static EMPTY: OnceLock<EmptyList> = OnceLock::new();
struct EmptyList(Box<[*mut ibv_device; 1]>);
// SAFETY: an immutable array holding a NULL.
unsafe impl Send for EmptyList {}
// SAFETY: as above.
unsafe impl Sync for EmptyList {}

fn shell() -> Result<&'static Arc<Shell>, &'static String> {
    let mut p = SHELL.load(Ordering::Acquire);
    if p.is_null() || FORKED.load(Ordering::Relaxed) {
        p = open_shell();
    }
    // SAFETY: a non-null pointer is a leaked Box, never freed (see SHELL).
    unsafe { &*p }.as_ref()
}

/// Opens the process's engine, once; again in a forked child. The child
/// of a process with an engine cannot use it: the engine's threads did
/// not follow it, and its rings, socket and memory are the parent's. As
/// with rdma-core, the parent's verbs objects are not the child's; the
/// child's first verb opens an engine of its own: attached to the
/// interface's service (docs/shared-engine.md) it gets its own slot, as
/// any process does; otherwise it finds the interface in use and says
/// so. The parent's engine stays with the parent (the child leaks its
/// copy, never touching it).
#[cold]
fn open_shell() -> *mut Result<Arc<Shell>, String> {
    let _opening = OPENING.lock().unwrap_or_else(|e| e.into_inner());
    let p = SHELL.load(Ordering::Acquire);
    if !p.is_null() && !FORKED.swap(false, Ordering::AcqRel) {
        return p;
    }
    let opened = Box::into_raw(Box::new(Config::from_env().and_then(|c| Shell::open(&c))));
    SHELL.store(opened, Ordering::Release);
    static AT_FORK: std::sync::Once = std::sync::Once::new();
    // SAFETY: registers a plain function without arguments, for the child
    // only; it only stores to an atomic (async-signal-safe).
    AT_FORK.call_once(|| unsafe {
        libc::pthread_atfork(None, None, Some(forked_child));
    });
    opened
}

/// In the child of a `fork`: the next verb opens an engine of its own.
extern "C" fn forked_child() {
    if !SHELL.load(Ordering::Relaxed).is_null() {
        FORKED.store(true, Ordering::Relaxed);
    }
}

/// The engine, or `ENODEV` when it could not be opened (the reason was
/// printed by `ibv_get_device_list`).
pub(crate) fn engine() -> Result<&'static Shell, c_int> {
    shell().map(|s| &**s).map_err(|_| libc::ENODEV)
}

/// The engine, for a verb on context `ctx` (checked).
fn engine_of(ctx: *const ibv_context) -> Result<&'static Shell, c_int> {
    let shell = engine()?;
    context(ctx)?;
    Ok(shell)
}

fn copy_name(dst: &mut [c_char], s: &str) {
    for (d, b) in dst.iter_mut().zip(s.bytes().chain(std::iter::once(0))) {
        *d = b as c_char;
    }
}

fn device() -> &'static Device {
    DEVICE.get_or_init(|| {
        // SAFETY: ibv_device is plain data; all-zero is a valid value.
        let mut dev: Box<ibv_device> = Box::new(unsafe { std::mem::zeroed() });
        dev.node_type = IBV_NODE_CA;
        dev.transport_type = IBV_TRANSPORT_IB;
        copy_name(&mut dev.name, DEVICE_NAME);
        copy_name(&mut dev.dev_name, identity::UVERBS_NAME);
        copy_name(
            &mut dev.dev_path,
            &format!("/sys/class/infiniband_verbs/{}", identity::UVERBS_NAME),
        );
        copy_name(
            &mut dev.ibdev_path,
            &format!("/sys/class/infiniband/{DEVICE_NAME}"),
        );
        let p = &mut *dev as *mut ibv_device;
        Device {
            dev,
            list: Box::new([p, null_mut()]),
        }
    })
}

/// `dev` is the one device this library lists.
fn our_device(dev: *const ibv_device) -> Result<&'static Device, c_int> {
    match DEVICE.get() {
        Some(d) if std::ptr::eq(dev, &*d.dev) => Ok(d),
        _ => Err(libc::EINVAL),
    }
}

#[no_mangle]
unsafe extern "C" fn ibv_get_device_list(num: *mut c_int) -> *mut *mut ibv_device {
    let (list, n) = match shell() {
        Ok(_) => (device().list.as_ptr() as *mut *mut ibv_device, 1),
        Err(reason) => {
            static ONCE: std::sync::Once = std::sync::Once::new();
            ONCE.call_once(|| eprintln!("roce-xdp: no device: {reason}"));
            let e = EMPTY.get_or_init(|| EmptyList(Box::new([null_mut()])));
            (e.0.as_ptr() as *mut *mut ibv_device, 0)
        }
    };
    if !num.is_null() {
        // SAFETY: a non-NULL `num` points to an int (the contract, point 1).
        unsafe { *num = n };
    }
    list
}

/// The list is static: nothing to free.
#[no_mangle]
extern "C" fn ibv_free_device_list(_list: *mut *mut ibv_device) {}

#[no_mangle]
extern "C" fn ibv_get_device_name(dev: *mut ibv_device) -> *const c_char {
    match our_device(dev) {
        Ok(d) => d.dev.name.as_ptr(),
        Err(e) => {
            set_errno(e);
            std::ptr::null()
        }
    }
}

#[no_mangle]
extern "C" fn ibv_get_device_index(dev: *mut ibv_device) -> c_int {
    match our_device(dev) {
        Ok(_) => 0,
        Err(_) => -1,
    }
}

fn node_guid() -> u64 {
    shell().map_or(0, |s| identity::node_guid(s.mac))
}

#[no_mangle]
extern "C" fn ibv_get_device_guid(dev: *mut ibv_device) -> u64 {
    match our_device(dev) {
        Ok(_) => node_guid(),
        Err(_) => 0,
    }
}

// ---- the context ----

/// A device context: `struct verbs_context` (its extended ops in front of
/// the `ibv_context` the program holds).
#[repr(C)]
struct Context {
    vctx: UnsafeCell<verbs_context>,
    /// The context's `cmd_fd`: rdma-core's is the opened uverbs device,
    /// which programs may poll or `dup` (pyverbs' shared-PD tests dup it
    /// to import the context). Here a descriptor that never becomes
    /// readable, closed with the context; `ibv_import_device` of it
    /// refuses with EOPNOTSUPP.
    _cmd: EventFd,
    /// The context's asynchronous events; `async_fd` is their eventfd.
    async_events: Arc<ContextEvents>,
}
// SAFETY: the context is filled in before it is handed out and only read
// afterwards, by the program and by the drop-in.
unsafe impl Send for Context {}
// SAFETY: as above.
unsafe impl Sync for Context {}
// SAFETY: the program holds `&vctx.context`.
unsafe impl Object for Context {
    const KIND: Kind = Kind::Context;
    const PUBLIC: usize = std::mem::offset_of!(verbs_context, context);
}

/// Checks that `ctx` is a context this library opened.
fn context(ctx: *const ibv_context) -> Result<&'static Context, c_int> {
    object::<Context, _>(ctx)
}

#[no_mangle]
unsafe extern "C" fn ibv_open_device(dev: *mut ibv_device) -> *mut ibv_context {
    pointer(open_device(dev))
}

fn open_device(dev: *mut ibv_device) -> Result<*mut ibv_context, c_int> {
    let shell = engine()?;
    our_device(dev)?;
    // SAFETY: verbs_context is plain data (pointers, integers, optional
    // function pointers); all-zero is a valid value.
    let mut v: verbs_context = unsafe { std::mem::zeroed() };
    v.query_port = Some(query_port_ex);
    v.query_device_ex = Some(query_device_ex);
    v.create_cq_ex = Some(cq_ex::create_cq_ex);
    v.create_qp_ex = Some(qp_ex::create_qp_ex);
    v.sz = std::mem::size_of::<verbs_context>();
    let ctx = &mut v.context;
    ctx.device = dev;
    let cmd = EventFd::new().map_err(|e| e.raw_os_error().unwrap_or(libc::EMFILE))?;
    ctx.cmd_fd = cmd.raw();
    let events = ContextEvents::new()
        .map(Arc::new)
        .map_err(|e| e.raw_os_error().unwrap_or(libc::EMFILE))?;
    ctx.async_fd = events.fd.raw();
    ctx.num_comp_vectors = limits::NUM_COMP_VECTORS;
    ctx.abi_compat = VERBS_ABI_IS_EXTENDED;
    ctx.ops.poll_cq = Some(completions::poll_cq);
    ctx.ops.req_notify_cq = Some(completions::req_notify_cq);
    ctx.ops.post_send = Some(queue_pairs::post_send);
    ctx.ops.post_recv = Some(queue_pairs::post_recv);
    ctx.ops.post_srq_recv = Some(srq::post_srq_recv);
    ctx.ops.alloc_mw = Some(windows::alloc_mw);
    ctx.ops.bind_mw = Some(windows::bind_mw);
    ctx.ops.dealloc_mw = Some(windows::dealloc_mw);
    let public = handles::publish(Box::new(Context {
        vctx: UnsafeCell::new(v),
        _cmd: cmd,
        async_events: Arc::clone(&events),
    }));
    shell.async_events.attach(public as usize, events);
    Ok(public)
}

#[no_mangle]
unsafe extern "C" fn ibv_close_device(ctx: *mut ibv_context) -> c_int {
    // SAFETY: the program closes the context: it uses it no more.
    let closed = unsafe { handles::retire::<Context, _>(ctx) }.map(drop);
    if let (Ok(()), Ok(shell)) = (closed, engine()) {
        shell.async_events.detach(ctx as usize);
    }
    status(closed)
}

// ---- device and port attributes ----

fn device_attr(shell: &Shell) -> ibv_device_attr {
    // SAFETY: ibv_device_attr is plain data; all-zero is a valid value.
    let mut a: ibv_device_attr = unsafe { std::mem::zeroed() };
    copy_name(&mut a.fw_ver, identity::FW_VER);
    a.node_guid = identity::node_guid(shell.mac);
    a.sys_image_guid = a.node_guid;
    a.max_mr_size = u64::MAX;
    a.page_size_cap = !0xfff;
    a.vendor_id = limits::VENDOR_ID;
    a.max_qp = limits::MAX_QP;
    a.max_qp_wr = limits::MAX_QP_WR;
    // Memory windows of type 1 and 2B, as rxe (RXE_DEVICE_CAP_FLAGS).
    a.device_cap_flags = IBV_DEVICE_RC_RNR_NAK_GEN
        | IBV_DEVICE_SYS_IMAGE_GUID
        | IBV_DEVICE_PORT_ACTIVE_EVENT
        | IBV_DEVICE_MEM_WINDOW
        | IBV_DEVICE_MEM_WINDOW_TYPE_2B;
    a.max_sge = limits::MAX_SGE;
    a.max_sge_rd = limits::MAX_SGE;
    a.max_cq = limits::MAX_CQ;
    a.max_cqe = limits::MAX_CQE;
    a.max_mr = limits::MAX_MR;
    a.max_mw = limits::MAX_MW;
    a.max_pd = limits::MAX_PD;
    a.max_srq = limits::MAX_SRQ;
    a.max_srq_wr = limits::MAX_SRQ_WR;
    a.max_srq_sge = limits::MAX_SRQ_SGE;
    a.max_qp_rd_atom = limits::MAX_QP_RD_ATOM;
    a.max_qp_init_rd_atom = limits::MAX_QP_RD_ATOM;
    a.max_res_rd_atom = limits::MAX_QP_RD_ATOM * limits::MAX_QP;
    a.atomic_cap = IBV_ATOMIC_HCA;
    a.max_pkeys = 1;
    a.local_ca_ack_delay = 15;
    a.phys_port_cnt = 1;
    a
}

#[no_mangle]
unsafe extern "C" fn ibv_query_device(ctx: *mut ibv_context, attr: *mut ibv_device_attr) -> c_int {
    let shell = match engine_of(ctx) {
        Ok(s) => s,
        Err(e) => return e,
    };
    if attr.is_null() {
        return libc::EINVAL;
    }
    // SAFETY: `attr` points to an ibv_device_attr (the contract, point 1).
    unsafe { attr.write(device_attr(shell)) };
    0
}

/// `verbs_context.query_device_ex`, which the inline `ibv_query_device_ex`
/// calls: the attributes of `ibv_query_device` and the extended ones,
/// written up to `attr_size` bytes (a program built against an older
/// `verbs.h` passes a shorter structure; a newer one's extra bytes are
/// zeroed).
unsafe extern "C" fn query_device_ex(
    ctx: *mut ibv_context,
    input: *const ibv_query_device_ex_input,
    attr: *mut ibv_device_attr_ex,
    attr_size: usize,
) -> c_int {
    let shell = match engine_of(ctx) {
        Ok(s) => s,
        Err(e) => return e,
    };
    // SAFETY: a non-NULL `input` points to the input structure (point 1).
    if !input.is_null() && unsafe { (*input).comp_mask } != 0 {
        return libc::EINVAL;
    }
    if attr.is_null() || attr_size < std::mem::size_of::<ibv_device_attr>() {
        return libc::EINVAL;
    }
    // SAFETY: ibv_device_attr_ex is plain data; all-zero is valid.
    let mut a: ibv_device_attr_ex = unsafe { std::mem::zeroed() };
    a.orig_attr = device_attr(shell);
    // The 64-bit flags: the 32 of `ibv_query_device` and, as rxe on a
    // 64-bit kernel (RXE_DEVICE_CAP_FLAGS: IB_DEVICE_ATOMIC_WRITE under
    // CONFIG_64BIT), ATOMIC WRITE. No FLUSH: the drop-in has none.
    a.device_cap_flags_ex = u64::from(a.orig_attr.device_cap_flags) | IB_UVERBS_DEVICE_ATOMIC_WRITE;
    a.phys_port_cnt_ex = 1;
    let ours = std::mem::size_of::<ibv_device_attr_ex>();
    // SAFETY: `attr` has `attr_size` writable bytes (point 1); the copy
    // takes at most `ours` bytes from `a` and zeroes the rest.
    unsafe {
        std::ptr::write_bytes(attr as *mut u8, 0, attr_size);
        std::ptr::copy_nonoverlapping(
            &a as *const ibv_device_attr_ex as *const u8,
            attr as *mut u8,
            attr_size.min(ours),
        );
    }
    0
}

fn mtu_enum(m: Mtu) -> c_int {
    match m {
        Mtu::Mtu256 => 1,
        Mtu::Mtu512 => 2,
        Mtu::Mtu1024 => 3,
        Mtu::Mtu2048 => 4,
        Mtu::Mtu4096 => 5,
    }
}

fn port_attr(shell: &Shell) -> ibv_port_attr {
    ibv_port_attr {
        state: identity::PORT_STATE_ACTIVE.into(),
        max_mtu: mtu_enum(Mtu::Mtu4096),
        active_mtu: mtu_enum(shell.active_mtu),
        gid_tbl_len: GID_TABLE_LEN as c_int,
        port_cap_flags: identity::PORT_CAP_FLAGS,
        max_msg_sz: engine::rc::MAX_MESSAGE_LEN,
        pkey_tbl_len: 1,
        max_vl_num: 1,
        active_width: identity::ACTIVE_WIDTH,
        active_speed: identity::ACTIVE_SPEED,
        phys_state: identity::PHYS_STATE_LINK_UP,
        link_layer: IBV_LINK_LAYER_ETHERNET,
        ..ibv_port_attr::default()
    }
}

/// `verbs_context.query_port`: the port's attributes, `len` bytes of them
/// (programs built against older headers pass a shorter structure).
unsafe extern "C" fn query_port_ex(
    ctx: *mut ibv_context,
    port: u8,
    attr: *mut ibv_port_attr,
    len: usize,
) -> c_int {
    let shell = match engine_of(ctx) {
        Ok(s) => s,
        Err(e) => return e,
    };
    if port != identity::PORT || attr.is_null() {
        return libc::EINVAL;
    }
    let a = port_attr(shell);
    let n = len.min(std::mem::size_of::<ibv_port_attr>());
    // SAFETY: `attr` has `len` writable bytes (the contract, point 1).
    unsafe { std::ptr::copy_nonoverlapping(&a as *const _ as *const u8, attr as *mut u8, n) };
    0
}

/// The compat entry point (`_compat_ibv_port_attr` ends at `link_layer`).
#[no_mangle]
unsafe extern "C" fn ibv_query_port(
    ctx: *mut ibv_context,
    port: u8,
    attr: *mut ibv_port_attr,
) -> c_int {
    let len = std::mem::offset_of!(ibv_port_attr, link_layer) + 1;
    // SAFETY: the compat structure has `len` bytes (the contract).
    unsafe { query_port_ex(ctx, port, attr, len) }
}

/// GID `index` of port `port`, or the errno: `ENODATA` for an empty
/// entry of the table, `EINVAL` past its end (rdma-core's
/// `_ibv_query_gid_ex`).
fn gid(ctx: *const ibv_context, port: u32, index: u32) -> Result<[u8; 16], c_int> {
    let shell = engine_of(ctx)?;
    if port != u32::from(identity::PORT) || index >= GID_TABLE_LEN {
        return Err(libc::EINVAL);
    }
    identity::gid(shell.mac, shell.ip, index).ok_or(libc::ENODATA)
}

#[no_mangle]
unsafe extern "C" fn ibv_query_gid(
    ctx: *mut ibv_context,
    port: u8,
    index: c_int,
    out: *mut [u8; 16],
) -> c_int {
    minus_one((|| {
        if out.is_null() || index < 0 {
            return Err(libc::EINVAL);
        }
        // An empty entry reads as the zero GID (rdma-core keeps that).
        let g = match gid(ctx, port.into(), index as u32) {
            Err(libc::ENODATA) => [0; 16],
            g => g.map_err(|_| libc::EINVAL)?,
        };
        // SAFETY: `out` points to a union ibv_gid (the contract, point 1).
        unsafe { out.write(g) };
        Ok(())
    })())
}

fn gid_entry(ctx: *const ibv_context, port: u32, index: u32) -> Result<ibv_gid_entry, c_int> {
    Ok(ibv_gid_entry {
        gid: gid(ctx, port, index)?,
        gid_index: index,
        port_num: port,
        gid_type: IBV_GID_TYPE_ROCE_V2,
        ndev_ifindex: engine()?.ifindex,
    })
}

#[no_mangle]
unsafe extern "C" fn _ibv_query_gid_ex(
    ctx: *mut ibv_context,
    port: u32,
    index: u32,
    entry: *mut ibv_gid_entry,
    flags: u32,
    entry_size: usize,
) -> c_int {
    status((|| {
        if entry.is_null() || entry_size < std::mem::size_of::<ibv_gid_entry>() || flags != 0 {
            return Err(libc::EINVAL);
        }
        let e = gid_entry(ctx, port, index)?;
        // SAFETY: `entry` has `entry_size` bytes, at least one entry
        // (checked above; the contract, point 1).
        unsafe { entry.write(e) };
        Ok(())
    })())
}

/// `_ibv_query_gid_table` (IBVERBS_1.11): every GID in use, as
/// `_ibv_query_gid_ex` gives each; the count, or a negative errno
/// (`-EINVAL` when `max_entries` cannot hold them).
#[no_mangle]
unsafe extern "C" fn _ibv_query_gid_table(
    ctx: *mut ibv_context,
    entries: *mut ibv_gid_entry,
    max_entries: usize,
    flags: u32,
    entry_size: usize,
) -> isize {
    let r = (|| {
        if flags != 0
            || entries.is_null()
            || entry_size < std::mem::size_of::<ibv_gid_entry>()
            || max_entries < GIDS_IN_USE as usize
        {
            return Err(libc::EINVAL);
        }
        for i in 0..GIDS_IN_USE {
            let e = gid_entry(ctx, 1, i)?;
            // SAFETY: `entries` has `max_entries` entries of `entry_size`
            // bytes (point 1), and `i < GIDS_IN_USE <= max_entries`.
            unsafe {
                let at = (entries as *mut u8).add(i as usize * entry_size);
                (at as *mut ibv_gid_entry).write_unaligned(e);
            }
        }
        Ok(GIDS_IN_USE as isize)
    })();
    r.unwrap_or_else(|e| -(e as isize))
}

#[no_mangle]
unsafe extern "C" fn ibv_query_gid_type(
    ctx: *mut ibv_context,
    port: u8,
    index: c_uint,
    ty: *mut c_int,
) -> c_int {
    minus_one((|| {
        if ty.is_null() {
            return Err(libc::EINVAL);
        }
        // An empty entry's type reads as RoCE v1 (rdma-core keeps that).
        let t = match gid(ctx, port.into(), index) {
            Ok(_) => IBV_GID_TYPE_SYSFS_ROCE_V2,
            Err(libc::ENODATA) => IBV_GID_TYPE_SYSFS_IB_ROCE_V1,
            Err(e) => return Err(e),
        };
        // SAFETY: `ty` points to an int (the contract, point 1).
        unsafe { ty.write(t) };
        Ok(())
    })())
}

#[no_mangle]
unsafe extern "C" fn ibv_query_pkey(
    ctx: *mut ibv_context,
    port: u8,
    index: c_int,
    pkey: *mut u16,
) -> c_int {
    minus_one((|| {
        context(ctx)?;
        if port != identity::PORT || index != 0 || pkey.is_null() {
            return Err(libc::EINVAL);
        }
        // SAFETY: `pkey` points to a __be16 (the contract, point 1).
        unsafe { pkey.write(identity::PKEY) };
        Ok(())
    })())
}

#[no_mangle]
extern "C" fn ibv_get_pkey_index(ctx: *mut ibv_context, port: u8, pkey: u16) -> c_int {
    match context(ctx) {
        Ok(_) if port == identity::PORT && pkey == identity::PKEY => 0,
        Ok(_) => {
            set_errno(libc::ENOENT);
            -1
        }
        Err(e) => {
            set_errno(e);
            -1
        }
    }
}
