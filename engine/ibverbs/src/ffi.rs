//! The exported `ibv_*` functions: C pointers in, [`Shell`] calls out.
//! Nothing here decides anything about the protocol; it converts the
//! structures of `verbs.h` to the engine's and back.
#![allow(clippy::missing_safety_doc)]

use std::ffi::{c_char, c_int, c_uint, c_void};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::ptr::{null_mut, NonNull};
use std::sync::{Arc, OnceLock};

use engine::rc::{
    Access, Mtu, QpAttr, QpAttrMask, QpInitAttr, QpState, RecvWr, RemoteAddress, SendOp, SendWr,
    Sge, VerbsError, WcOpcode, WcStatus, WorkCompletion,
};

use crate::abi::*;
use crate::config::Config;
use crate::memory::ForeignMemory;
use crate::shell::{Channel, Shell};

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

fn set_errno(e: c_int) {
    // SAFETY: errno is thread-local and always valid.
    unsafe { *libc::__errno_location() = e };
}

fn errno_of(e: &VerbsError) -> c_int {
    match e {
        VerbsError::QueueFull | VerbsError::ResourceExhausted => libc::ENOMEM,
        _ => libc::EINVAL,
    }
}

// ---- the device ----

struct Device {
    /// Owns what `list[0]` points to.
    _dev: Box<ibv_device>,
    list: Box<[*mut ibv_device; 2]>,
}
// SAFETY: written once before it is shared, read-only afterwards.
unsafe impl Send for Device {}
unsafe impl Sync for Device {}

static SHELL: OnceLock<Result<Arc<Shell>, String>> = OnceLock::new();
static DEVICE: OnceLock<Device> = OnceLock::new();
static EMPTY: OnceLock<EmptyList> = OnceLock::new();
struct EmptyList(Box<[*mut ibv_device; 1]>);
// SAFETY: an immutable array holding a NULL.
unsafe impl Send for EmptyList {}
unsafe impl Sync for EmptyList {}

/// The device name programs see.
pub const DEVICE_NAME: &str = "roce-xdp0";

fn shell() -> Result<&'static Arc<Shell>, &'static String> {
    SHELL
        .get_or_init(|| Config::from_env().and_then(|c| Shell::open(&c)))
        .as_ref()
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
        copy_name(&mut dev.dev_name, "uverbs-roce-xdp0");
        copy_name(
            &mut dev.dev_path,
            "/sys/class/infiniband_verbs/uverbs-roce-xdp0",
        );
        copy_name(&mut dev.ibdev_path, "/sys/class/infiniband/roce-xdp0");
        let p = &mut *dev as *mut ibv_device;
        Device {
            _dev: dev,
            list: Box::new([p, null_mut()]),
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn ibv_get_device_list(num: *mut c_int) -> *mut *mut ibv_device {
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
        *num = n;
    }
    list
}

#[no_mangle]
pub extern "C" fn ibv_free_device_list(_list: *mut *mut ibv_device) {}

#[no_mangle]
pub unsafe extern "C" fn ibv_get_device_name(dev: *mut ibv_device) -> *const c_char {
    if dev.is_null() {
        return std::ptr::null();
    }
    (*dev).name.as_ptr()
}

#[no_mangle]
pub extern "C" fn ibv_get_device_index(_dev: *mut ibv_device) -> c_int {
    0
}

fn eui64(mac: [u8; 6]) -> [u8; 8] {
    [
        mac[0] ^ 2,
        mac[1],
        mac[2],
        0xff,
        0xfe,
        mac[3],
        mac[4],
        mac[5],
    ]
}

fn node_guid() -> u64 {
    shell().map_or(0, |s| u64::from_ne_bytes(eui64(s.mac)))
}

#[no_mangle]
pub extern "C" fn ibv_get_device_guid(_dev: *mut ibv_device) -> u64 {
    node_guid()
}

/// `struct verbs_context` and what the shell needs back from a context.
#[repr(C)]
struct Context {
    vctx: verbs_context,
}

unsafe fn zeroed<T>() -> T {
    std::mem::zeroed()
}

#[no_mangle]
pub unsafe extern "C" fn ibv_open_device(dev: *mut ibv_device) -> *mut ibv_context {
    let Ok(shell) = shell() else {
        set_errno(libc::ENODEV);
        return null_mut();
    };
    let mut c: Box<Context> = Box::new(zeroed());
    c.vctx.query_port = Some(query_port_ex);
    c.vctx.sz = std::mem::size_of::<verbs_context>();
    let ctx = &mut c.vctx.context;
    ctx.device = dev;
    ctx.cmd_fd = -1;
    ctx.async_fd = shell.async_events.fd.raw();
    ctx.num_comp_vectors = 1;
    ctx.abi_compat = VERBS_ABI_IS_EXTENDED;
    ctx.ops.poll_cq = Some(poll_cq);
    ctx.ops.req_notify_cq = Some(req_notify_cq);
    ctx.ops.post_send = Some(post_send);
    ctx.ops.post_recv = Some(post_recv);
    ctx.ops.post_srq_recv = Some(post_srq_recv);
    ctx.ops.bind_mw = Some(bind_mw);
    let c = Box::into_raw(c);
    &mut (*c).vctx.context
}

#[no_mangle]
pub unsafe extern "C" fn ibv_close_device(ctx: *mut ibv_context) -> c_int {
    if ctx.is_null() {
        return libc::EINVAL;
    }
    let off = std::mem::offset_of!(verbs_context, context);
    drop(Box::from_raw((ctx as *mut u8).sub(off) as *mut Context));
    0
}

#[no_mangle]
pub unsafe extern "C" fn ibv_query_device(
    _ctx: *mut ibv_context,
    attr: *mut ibv_device_attr,
) -> c_int {
    if attr.is_null() {
        return libc::EINVAL;
    }
    let mut a: ibv_device_attr = zeroed();
    copy_name(
        &mut a.fw_ver,
        concat!("roce-xdp ", env!("CARGO_PKG_VERSION")),
    );
    a.node_guid = node_guid();
    a.sys_image_guid = a.node_guid;
    a.max_mr_size = u64::MAX;
    a.page_size_cap = !0xfff;
    a.max_qp = engine::endpoint::EndpointConfig::default().max_qps as c_int;
    a.max_qp_wr = 1 << 16;
    a.max_sge = 1;
    a.max_sge_rd = 1;
    a.max_cq = 1 << 16;
    a.max_cqe = 1 << 20;
    a.max_mr = 1 << 16;
    a.max_pd = 1 << 16;
    a.max_qp_rd_atom = 16;
    a.max_qp_init_rd_atom = 16;
    a.max_res_rd_atom = 16 * a.max_qp;
    a.atomic_cap = IBV_ATOMIC_HCA;
    a.max_pkeys = 1;
    a.local_ca_ack_delay = 15;
    a.phys_port_cnt = 1;
    *attr = a;
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

fn port_attr(shell: &Shell) -> ibv_port_attr {
    ibv_port_attr {
        state: IBV_PORT_ACTIVE,
        max_mtu: mtu_enum(Mtu::Mtu4096),
        active_mtu: mtu_enum(shell.active_mtu),
        gid_tbl_len: GID_TABLE_LEN as c_int,
        // IB_PORT_CM_SUP | IB_PORT_IP_BASED_GIDS, as rxe.
        port_cap_flags: (1 << 16) | (1 << 26),
        max_msg_sz: engine::rc::MAX_MESSAGE_LEN,
        pkey_tbl_len: 1,
        max_vl_num: 1,
        active_width: 1,
        active_speed: 1,
        phys_state: 5,
        link_layer: IBV_LINK_LAYER_ETHERNET,
        ..ibv_port_attr::default()
    }
}

unsafe extern "C" fn query_port_ex(
    _ctx: *mut ibv_context,
    port: u8,
    attr: *mut ibv_port_attr,
    len: usize,
) -> c_int {
    let Ok(shell) = shell() else {
        return libc::ENODEV;
    };
    if port != 1 || attr.is_null() {
        return libc::EINVAL;
    }
    let a = port_attr(shell);
    let n = len.min(std::mem::size_of::<ibv_port_attr>());
    std::ptr::copy_nonoverlapping(&a as *const _ as *const u8, attr as *mut u8, n);
    0
}

/// The compat entry point (`_compat_ibv_port_attr` ends at `link_layer`).
#[no_mangle]
pub unsafe extern "C" fn ibv_query_port(
    ctx: *mut ibv_context,
    port: u8,
    attr: *mut ibv_port_attr,
) -> c_int {
    query_port_ex(
        ctx,
        port,
        attr,
        std::mem::offset_of!(ibv_port_attr, link_layer) + 1,
    )
}

/// GID 0: the IPv6 link-local address from the MAC; GID 1: the
/// IPv4-mapped address, both RoCE v2 (as `-g 1` on Soft-RoCE).
const GID_TABLE_LEN: u32 = 2;

fn gid(shell: &Shell, index: c_int) -> Option<[u8; 16]> {
    match index {
        0 => {
            let mut g = [0u8; 16];
            g[0] = 0xfe;
            g[1] = 0x80;
            g[8..].copy_from_slice(&eui64(shell.mac));
            Some(g)
        }
        1 => Some(shell.ip.to_ipv6_mapped().octets()),
        _ => None,
    }
}

#[no_mangle]
pub unsafe extern "C" fn ibv_query_gid(
    _ctx: *mut ibv_context,
    port: u8,
    index: c_int,
    out: *mut [u8; 16],
) -> c_int {
    let Ok(shell) = shell() else { return -1 };
    match gid(shell, index) {
        Some(g) if port == 1 && !out.is_null() => {
            *out = g;
            0
        }
        _ => {
            set_errno(libc::EINVAL);
            -1
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn _ibv_query_gid_ex(
    _ctx: *mut ibv_context,
    port: u32,
    index: u32,
    entry: *mut ibv_gid_entry,
    _flags: u32,
    entry_size: usize,
) -> c_int {
    let Ok(shell) = shell() else {
        return libc::ENODEV;
    };
    if entry.is_null() || entry_size < std::mem::size_of::<ibv_gid_entry>() || port != 1 {
        return libc::EINVAL;
    }
    let Some(g) = gid(shell, index as c_int) else {
        return libc::ENODATA;
    };
    *entry = ibv_gid_entry {
        gid: g,
        gid_index: index,
        port_num: port,
        gid_type: IBV_GID_TYPE_ROCE_V2,
        ndev_ifindex: shell.ifindex,
    };
    0
}

#[no_mangle]
pub unsafe extern "C" fn ibv_query_gid_type(
    _ctx: *mut ibv_context,
    _port: u8,
    index: c_uint,
    ty: *mut c_int,
) -> c_int {
    if index >= GID_TABLE_LEN || ty.is_null() {
        set_errno(libc::EINVAL);
        return -1;
    }
    *ty = IBV_GID_TYPE_SYSFS_ROCE_V2;
    0
}

/// The default P_Key, 0xffff (network order is the same bytes).
const PKEY: u16 = 0xffff;

#[no_mangle]
pub unsafe extern "C" fn ibv_query_pkey(
    _ctx: *mut ibv_context,
    _port: u8,
    index: c_int,
    pkey: *mut u16,
) -> c_int {
    if index != 0 || pkey.is_null() {
        set_errno(libc::EINVAL);
        return -1;
    }
    *pkey = PKEY;
    0
}

#[no_mangle]
pub extern "C" fn ibv_get_pkey_index(_ctx: *mut ibv_context, _port: u8, pkey: u16) -> c_int {
    if pkey == PKEY {
        0
    } else {
        set_errno(libc::ENOENT);
        -1
    }
}

// ---- protection domains and memory ----

#[no_mangle]
pub unsafe extern "C" fn ibv_alloc_pd(ctx: *mut ibv_context) -> *mut ibv_pd {
    Box::into_raw(Box::new(ibv_pd {
        context: ctx,
        handle: 0,
    }))
}

#[no_mangle]
pub unsafe extern "C" fn ibv_dealloc_pd(pd: *mut ibv_pd) -> c_int {
    if !pd.is_null() {
        drop(Box::from_raw(pd));
    }
    0
}

fn access_of(flags: c_uint) -> Access {
    let mut a = Access::NONE;
    for (bit, r) in [
        (1, Access::LOCAL_WRITE),
        (2, Access::REMOTE_WRITE),
        (4, Access::REMOTE_READ),
        (8, Access::REMOTE_ATOMIC),
    ] {
        if flags & bit != 0 {
            a = a | r;
        }
    }
    a
}

#[no_mangle]
pub unsafe extern "C" fn ibv_reg_mr_iova2(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    iova: u64,
    access: c_uint,
) -> *mut ibv_mr {
    let Ok(shell) = shell() else {
        set_errno(libc::ENODEV);
        return null_mut();
    };
    if pd.is_null() || (addr.is_null() && length > 0) {
        set_errno(libc::EINVAL);
        return null_mut();
    }
    // SAFETY: the verbs contract: the memory stays the program's and
    // mapped until ibv_dereg_mr.
    let memory = Box::new(ForeignMemory::new(addr as *mut u8, length));
    match shell.reg_mr(memory, iova, access_of(access)) {
        Ok(keys) => Box::into_raw(Box::new(ibv_mr {
            context: (*pd).context,
            pd,
            addr,
            length,
            handle: keys.lkey,
            lkey: keys.lkey,
            rkey: keys.rkey,
        })),
        Err(e) => {
            set_errno(errno_of(&e));
            null_mut()
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn ibv_reg_mr(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    access: c_int,
) -> *mut ibv_mr {
    ibv_reg_mr_iova2(pd, addr, length, addr as u64, access as c_uint)
}

#[no_mangle]
pub unsafe extern "C" fn ibv_dereg_mr(mr: *mut ibv_mr) -> c_int {
    let Ok(shell) = shell() else {
        return libc::ENODEV;
    };
    if mr.is_null() {
        return libc::EINVAL;
    }
    match shell.dereg_mr((*mr).lkey) {
        Ok(()) => {
            drop(Box::from_raw(mr));
            0
        }
        Err(e) => errno_of(&e),
    }
}

// ---- completion channels and CQs ----

#[repr(C)]
struct CompChannel {
    ch: ibv_comp_channel,
    inner: Arc<Channel>,
}

#[no_mangle]
pub unsafe extern "C" fn ibv_create_comp_channel(ctx: *mut ibv_context) -> *mut ibv_comp_channel {
    match Channel::new() {
        Ok(inner) => {
            let inner = Arc::new(inner);
            let c = Box::new(CompChannel {
                ch: ibv_comp_channel {
                    context: ctx,
                    fd: inner.fd.raw(),
                    refcnt: 0,
                },
                inner,
            });
            Box::into_raw(c) as *mut ibv_comp_channel
        }
        Err(e) => {
            set_errno(e.raw_os_error().unwrap_or(libc::ENOMEM));
            null_mut()
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn ibv_destroy_comp_channel(ch: *mut ibv_comp_channel) -> c_int {
    if ch.is_null() {
        return libc::EINVAL;
    }
    if (*ch).refcnt > 0 {
        return libc::EBUSY;
    }
    drop(Box::from_raw(ch as *mut CompChannel));
    0
}

#[repr(C)]
struct Cq {
    cq: ibv_cq,
    id: u32,
}

#[no_mangle]
pub unsafe extern "C" fn ibv_create_cq(
    ctx: *mut ibv_context,
    cqe: c_int,
    cq_context: *mut c_void,
    channel: *mut ibv_comp_channel,
    _comp_vector: c_int,
) -> *mut ibv_cq {
    let Ok(shell) = shell() else {
        set_errno(libc::ENODEV);
        return null_mut();
    };
    if cqe <= 0 {
        set_errno(libc::EINVAL);
        return null_mut();
    }
    let mut c: Box<Cq> = Box::new(zeroed());
    c.cq.context = ctx;
    c.cq.channel = channel;
    c.cq.cq_context = cq_context;
    c.cq.cqe = cqe;
    let p = Box::into_raw(c);
    let id = shell.create_cq(cqe as usize, p as usize);
    (*p).id = id;
    (*p).cq.handle = id;
    if !channel.is_null() {
        (*channel).refcnt += 1;
        let ch = (*(channel as *mut CompChannel)).inner.clone();
        shell.set_cq_channel(id, Some(ch));
    }
    p as *mut ibv_cq
}

#[no_mangle]
pub unsafe extern "C" fn ibv_destroy_cq(cq: *mut ibv_cq) -> c_int {
    let Ok(shell) = shell() else {
        return libc::ENODEV;
    };
    if cq.is_null() {
        return libc::EINVAL;
    }
    let c = Box::from_raw(cq as *mut Cq);
    shell.destroy_cq(c.id);
    if !c.cq.channel.is_null() {
        (*c.cq.channel).refcnt -= 1;
    }
    0
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
    }
}

fn wc_opcode(o: WcOpcode) -> c_int {
    match o {
        WcOpcode::Send => 0,
        WcOpcode::Write => 1,
        WcOpcode::Read => 2,
        WcOpcode::CompareSwap => 3,
        WcOpcode::FetchAdd => 4,
        WcOpcode::Recv => 128,
        WcOpcode::RecvRdmaWithImm => 129,
    }
}

fn to_wc(w: &WorkCompletion) -> ibv_wc {
    ibv_wc {
        wr_id: w.wr_id,
        status: wc_status(w.status),
        opcode: wc_opcode(w.opcode),
        byte_len: w.byte_len,
        imm_data: w.imm.map_or(0, u32::to_be),
        qp_num: w.qpn,
        wc_flags: if w.imm.is_some() { IBV_WC_WITH_IMM } else { 0 },
        ..ibv_wc::default()
    }
}

unsafe extern "C" fn poll_cq(cq: *mut ibv_cq, n: c_int, wc: *mut ibv_wc) -> c_int {
    let Ok(shell) = shell() else { return -1 };
    if cq.is_null() || n < 0 || (wc.is_null() && n > 0) {
        return -1;
    }
    let id = (*(cq as *mut Cq)).id;
    // SAFETY: the program gave room for `n` entries at `wc`.
    shell.poll_cq(id, n as usize, |i, w| unsafe { *wc.add(i) = to_wc(w) }) as c_int
}

unsafe extern "C" fn req_notify_cq(cq: *mut ibv_cq, _solicited_only: c_int) -> c_int {
    let Ok(shell) = shell() else {
        return libc::ENODEV;
    };
    if cq.is_null() {
        return libc::EINVAL;
    }
    shell.req_notify((*(cq as *mut Cq)).id);
    0
}

#[no_mangle]
pub unsafe extern "C" fn ibv_get_cq_event(
    ch: *mut ibv_comp_channel,
    cq: *mut *mut ibv_cq,
    cq_context: *mut *mut c_void,
) -> c_int {
    if ch.is_null() {
        return -1;
    }
    match (*(ch as *mut CompChannel)).inner.get_event() {
        Ok(token) => {
            let c = token as *mut ibv_cq;
            if !cq.is_null() {
                *cq = c;
            }
            if !cq_context.is_null() {
                *cq_context = (*c).cq_context;
            }
            0
        }
        Err(e) => {
            set_errno(e.raw_os_error().unwrap_or(libc::EIO));
            -1
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn ibv_ack_cq_events(cq: *mut ibv_cq, n: c_uint) {
    if !cq.is_null() {
        (*cq).comp_events_completed = (*cq).comp_events_completed.wrapping_add(n);
    }
}

#[no_mangle]
pub unsafe extern "C" fn ibv_get_async_event(
    _ctx: *mut ibv_context,
    event: *mut ibv_async_event,
) -> c_int {
    let Ok(shell) = shell() else { return -1 };
    match shell.async_events.get() {
        Ok((ty, token)) => {
            if !event.is_null() {
                (*event).element = token as *mut c_void;
                (*event).event_type = ty;
            }
            0
        }
        Err(e) => {
            set_errno(e.raw_os_error().unwrap_or(libc::EIO));
            -1
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn ibv_ack_async_event(event: *mut ibv_async_event) {
    if !event.is_null() && (*event).event_type == IBV_EVENT_QP_FATAL {
        let qp = (*event).element as *mut ibv_qp;
        if !qp.is_null() {
            (*qp).events_completed += 1;
        }
    }
}

// ---- queue pairs ----

#[repr(C)]
struct Qp {
    qp: ibv_qp,
    cap: ibv_qp_cap,
    sq_sig_all: c_int,
    access: c_uint,
}

#[no_mangle]
pub unsafe extern "C" fn ibv_create_qp(
    pd: *mut ibv_pd,
    init: *mut ibv_qp_init_attr,
) -> *mut ibv_qp {
    let Ok(shell) = shell() else {
        set_errno(libc::ENODEV);
        return null_mut();
    };
    if pd.is_null() || init.is_null() || (*init).send_cq.is_null() || (*init).recv_cq.is_null() {
        set_errno(libc::EINVAL);
        return null_mut();
    }
    let a = &mut *init;
    if a.qp_type != IBV_QPT_RC {
        set_errno(unsupported!(
            "ibv_create_qp of a QP type other than RC (UC, UD, XRC, raw packet)",
            libc::EOPNOTSUPP
        ));
        return null_mut();
    }
    if !a.srq.is_null() {
        set_errno(unsupported!("ibv_create_qp with an SRQ", libc::EOPNOTSUPP));
        return null_mut();
    }
    if a.cap.max_send_sge > 1 || a.cap.max_recv_sge > 1 {
        set_errno(unsupported!(
            "ibv_create_qp with more than one SGE per work request",
            libc::EINVAL
        ));
        return null_mut();
    }
    let init_attr = QpInitAttr {
        send_cq: (*(a.send_cq as *mut Cq)).id,
        recv_cq: (*(a.recv_cq as *mut Cq)).id,
        max_send_wr: a.cap.max_send_wr.max(1),
        max_recv_wr: a.cap.max_recv_wr.max(1),
        sq_sig_all: a.sq_sig_all != 0,
    };
    let mut q: Box<Qp> = Box::new(zeroed());
    let p = &mut *q as *mut Qp as usize;
    let qpn = match shell.create_qp(init_attr, p) {
        Ok(n) => n,
        Err(e) => {
            set_errno(errno_of(&e));
            return null_mut();
        }
    };
    // Report what the QP has (one SGE; inline data is sent from the
    // registered buffer, see docs/verbs-drop-in.md).
    a.cap.max_send_wr = init_attr.max_send_wr;
    a.cap.max_recv_wr = init_attr.max_recv_wr;
    a.cap.max_send_sge = 1;
    a.cap.max_recv_sge = 1;
    q.qp.context = (*pd).context;
    q.qp.qp_context = a.qp_context;
    q.qp.pd = pd;
    q.qp.send_cq = a.send_cq;
    q.qp.recv_cq = a.recv_cq;
    q.qp.handle = qpn;
    q.qp.qp_num = qpn;
    q.qp.state = 0;
    q.qp.qp_type = IBV_QPT_RC;
    q.cap = a.cap;
    q.sq_sig_all = a.sq_sig_all;
    Box::into_raw(q) as *mut ibv_qp
}

#[no_mangle]
pub unsafe extern "C" fn ibv_destroy_qp(qp: *mut ibv_qp) -> c_int {
    let Ok(shell) = shell() else {
        return libc::ENODEV;
    };
    if qp.is_null() {
        return libc::EINVAL;
    }
    match shell.destroy_qp((*qp).qp_num) {
        Ok(()) => {
            drop(Box::from_raw(qp as *mut Qp));
            0
        }
        Err(e) => errno_of(&e),
    }
}

fn state_of(s: c_int) -> Option<QpState> {
    Some(match s {
        0 => QpState::Reset,
        1 => QpState::Init,
        2 => QpState::Rtr,
        3 => QpState::Rts,
        6 => QpState::Error,
        _ => return None,
    })
}

fn state_enum(s: QpState) -> c_int {
    match s {
        QpState::Reset => 0,
        QpState::Init => 1,
        QpState::Rtr => 2,
        QpState::Rts => 3,
        QpState::Error => 6,
    }
}

fn ip_of_gid(g: [u8; 16]) -> IpAddr {
    let v6 = Ipv6Addr::from(g);
    match v6.to_ipv4_mapped() {
        Some(v4) => IpAddr::V4(v4),
        None => IpAddr::V6(v6),
    }
}

fn modify_error(what: &str) -> c_int {
    eprintln!("roce-xdp: ibv_modify_qp: {what}");
    libc::EINVAL
}

#[no_mangle]
pub unsafe extern "C" fn ibv_modify_qp(
    qp: *mut ibv_qp,
    attr: *mut ibv_qp_attr,
    mask: c_int,
) -> c_int {
    let Ok(shell) = shell() else {
        return libc::ENODEV;
    };
    if qp.is_null() || attr.is_null() {
        return libc::EINVAL;
    }
    let a = &*attr;
    let mut q = QpAttr::default();
    let mut m = QpAttrMask(0);
    let has = |bit: c_int| mask & bit != 0;
    if has(IBV_QP_STATE) {
        let Some(s) = state_of(a.qp_state) else {
            return unsupported!("ibv_modify_qp to SQD/SQE", libc::EINVAL);
        };
        q.state = s;
        m = m | QpAttrMask::STATE;
    }
    if has(IBV_QP_PATH_MTU) {
        let Some(mtu) = mtu_of(a.path_mtu) else {
            return modify_error("path_mtu is not one of IBV_MTU_256..IBV_MTU_4096");
        };
        q.path_mtu = mtu;
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
            return modify_error(
                "the address vector has no GRH (is_global 0): on RoCE give a GID index (-g 1 / -x 1)",
            );
        }
        let ip = ip_of_gid(ah.grh.dgid);
        if !ip.is_ipv4() {
            return modify_error("the destination GID is not an IPv4-mapped RoCE v2 GID");
        }
        let mac = match shell.resolve_mac(ip) {
            Ok(mac) => mac,
            Err(e) => return modify_error(&format!("cannot resolve the MAC of {ip}: {e}")),
        };
        q.remote = RemoteAddress {
            mac,
            ip,
            vlan: None,
            ..RemoteAddress::default()
        };
        m = m | QpAttrMask::AV;
        if ah.grh.hop_limit > 0 {
            q.hop_limit = ah.grh.hop_limit;
            m = m | QpAttrMask::HOP_LIMIT;
        }
    }
    let me = &mut *(qp as *mut Qp);
    if has(IBV_QP_ACCESS_FLAGS) {
        me.access = a.qp_access_flags;
    }
    // IBV_QP_PKEY_INDEX (one P_Key), IBV_QP_PORT (one port), IBV_QP_QKEY
    // (UD only): nothing to apply.
    match shell.modify_qp(me.qp.qp_num, &q, m) {
        Ok(()) => {
            if has(IBV_QP_STATE) {
                me.qp.state = a.qp_state;
            }
            0
        }
        Err(e) => modify_error(&e.to_string()),
    }
}

#[no_mangle]
pub unsafe extern "C" fn ibv_query_qp(
    qp: *mut ibv_qp,
    attr: *mut ibv_qp_attr,
    _mask: c_int,
    init: *mut ibv_qp_init_attr,
) -> c_int {
    let Ok(shell) = shell() else {
        return libc::ENODEV;
    };
    if qp.is_null() || attr.is_null() {
        return libc::EINVAL;
    }
    let me = &mut *(qp as *mut Qp);
    let Some((state, q)) = shell.query_qp(me.qp.qp_num) else {
        return libc::EINVAL;
    };
    let mut a = ibv_qp_attr {
        qp_state: state_enum(state),
        cur_qp_state: state_enum(state),
        path_mtu: mtu_enum(q.path_mtu),
        rq_psn: q.rq_psn,
        sq_psn: q.sq_psn,
        dest_qp_num: q.dest_qpn,
        qp_access_flags: me.access,
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
    *attr = a;
    me.qp.state = a.qp_state;
    if !init.is_null() {
        *init = ibv_qp_init_attr {
            qp_context: me.qp.qp_context,
            send_cq: me.qp.send_cq,
            recv_cq: me.qp.recv_cq,
            srq: null_mut(),
            cap: me.cap,
            qp_type: IBV_QPT_RC,
            sq_sig_all: me.sq_sig_all,
        };
    }
    0
}

unsafe fn one_sge(list: *mut ibv_sge, n: c_int) -> Result<Sge, c_int> {
    match n {
        0 => Ok(Sge::default()),
        1 if !list.is_null() => {
            let s = &*list;
            Ok(Sge {
                lkey: s.lkey,
                addr: s.addr,
                length: s.length,
            })
        }
        _ => Err(unsupported!(
            "a work request with more than one SGE",
            libc::EINVAL
        )),
    }
}

unsafe fn send_wr(w: &ibv_send_wr) -> Result<SendWr, c_int> {
    let opcode = match w.opcode {
        IBV_WR_RDMA_WRITE => SendOp::Write,
        IBV_WR_RDMA_WRITE_WITH_IMM => SendOp::WriteWithImm,
        IBV_WR_SEND => SendOp::Send,
        IBV_WR_SEND_WITH_IMM => SendOp::SendWithImm,
        IBV_WR_RDMA_READ => SendOp::Read,
        IBV_WR_ATOMIC_CMP_AND_SWP => SendOp::CompareSwap,
        IBV_WR_ATOMIC_FETCH_AND_ADD => SendOp::FetchAdd,
        _ => {
            return Err(unsupported!(
                "ibv_post_send of LOCAL_INV, BIND_MW, SEND_WITH_INV or TSO",
                libc::EINVAL
            ))
        }
    };
    let mut wr = SendWr::new(w.wr_id, opcode, one_sge(w.sg_list, w.num_sge)?);
    wr.signaled = w.send_flags & IBV_SEND_SIGNALED != 0;
    wr.imm = u32::from_be(w.imm_data);
    wr.remote_addr = w.wr.remote_addr;
    if opcode.is_atomic() {
        wr.compare_add = w.wr.rdma_rkey_or_compare_add;
        wr.swap = w.wr.swap;
        wr.rkey = w.wr.atomic_rkey;
    } else {
        // wr.rdma.rkey: the low half of the second word (little endian).
        wr.rkey = w.wr.rdma_rkey_or_compare_add as u32;
    }
    Ok(wr)
}

/// Posts the linked list of work requests at `first` one by one with
/// `post`; at the first refusal points `bad` at that request and returns
/// its errno (the verbs contract of `ibv_post_send`/`ibv_post_recv`).
unsafe fn post_list<W>(
    first: *mut W,
    bad: *mut *mut W,
    next: impl Fn(&W) -> *mut W,
    mut post: impl FnMut(&W) -> Result<(), c_int>,
) -> c_int {
    let mut cur = first;
    while let Some(w) = NonNull::new(cur) {
        let w = w.as_ptr();
        if let Err(e) = post(&*w) {
            if !bad.is_null() {
                *bad = w;
            }
            return e;
        }
        cur = next(&*w);
    }
    0
}

unsafe extern "C" fn post_send(
    qp: *mut ibv_qp,
    wr: *mut ibv_send_wr,
    bad: *mut *mut ibv_send_wr,
) -> c_int {
    let Ok(shell) = shell() else {
        return libc::ENODEV;
    };
    let qpn = (*qp).qp_num;
    post_list(
        wr,
        bad,
        |w| w.next,
        |w| {
            let s = send_wr(w)?;
            shell.post_send(qpn, s).map_err(|e| errno_of(&e))
        },
    )
}

unsafe extern "C" fn post_recv(
    qp: *mut ibv_qp,
    wr: *mut ibv_recv_wr,
    bad: *mut *mut ibv_recv_wr,
) -> c_int {
    let Ok(shell) = shell() else {
        return libc::ENODEV;
    };
    let qpn = (*qp).qp_num;
    post_list(
        wr,
        bad,
        |w| w.next,
        |w| {
            let sge = one_sge(w.sg_list, w.num_sge)?;
            let wr = RecvWr {
                wr_id: w.wr_id,
                sge,
            };
            shell.post_recv(qpn, wr).map_err(|e| errno_of(&e))
        },
    )
}

unsafe extern "C" fn post_srq_recv(
    _srq: *mut c_void,
    wr: *mut ibv_recv_wr,
    bad: *mut *mut ibv_recv_wr,
) -> c_int {
    if !bad.is_null() {
        *bad = wr;
    }
    unsupported!(
        "ibv_post_srq_recv (shared receive queues)",
        libc::EOPNOTSUPP
    )
}

unsafe extern "C" fn bind_mw(_qp: *mut ibv_qp, _mw: *mut c_void, _bind: *mut c_void) -> c_int {
    unsupported!("ibv_bind_mw (memory windows)", libc::EOPNOTSUPP)
}

#[no_mangle]
pub extern "C" fn ibv_wc_status_str(status: c_int) -> *const c_char {
    const S: [&str; 23] = [
        "success\0",
        "local length error\0",
        "local QP operation error\0",
        "local EE context operation error\0",
        "local protection error\0",
        "Work Request Flushed Error\0",
        "memory management operation error\0",
        "bad response error\0",
        "local access error\0",
        "remote invalid request error\0",
        "remote access error\0",
        "remote operation error\0",
        "transport retry counter exceeded\0",
        "RNR retry counter exceeded\0",
        "local RDD violation error\0",
        "remote invalid RD request\0",
        "aborted error\0",
        "invalid EE context number\0",
        "invalid EE context state\0",
        "fatal error\0",
        "response timeout error\0",
        "general error\0",
        "TM error\0",
    ];
    S.get(status as usize)
        .copied()
        .unwrap_or("unknown\0")
        .as_ptr() as *const c_char
}
