//! rdma-core 44's verbs ABI (Debian 12): the public structures of
//! `<infiniband/verbs.h>`, byte for byte, and the constants the two
//! drop-ins use, shared by the drop-in libibverbs.so.1
//! (`roce-xdp-ibverbs`, which fills them) and the drop-in librdmacm.so.1
//! (`roce-xdp-rdmacm`, which reads them through the C ABI). Only what the
//! drop-ins read or write is spelled out; everything else is padding of
//! the right size. `tests/layout.rs` compiles a C program against the
//! installed `verbs.h` that compares every offset and size listed in
//! [`LAYOUT`] with `offsetof`/`sizeof`.
#![allow(non_camel_case_types)]

use std::ffi::{c_char, c_int, c_uint, c_void};

/// `pthread_mutex_t` on x86-64/aarch64 glibc (40 bytes, 8-aligned).
#[repr(C)]
pub struct PthreadMutex(pub [u64; 5]);
/// `pthread_cond_t` (48 bytes).
#[repr(C)]
pub struct PthreadCond(pub [u64; 6]);

pub type OpaqueFn = Option<unsafe extern "C" fn()>;

#[repr(C)]
pub struct ibv_device {
    pub _ops: [OpaqueFn; 2],
    pub node_type: c_int,
    pub transport_type: c_int,
    pub name: [c_char; 64],
    pub dev_name: [c_char; 64],
    pub dev_path: [c_char; 256],
    pub ibdev_path: [c_char; 256],
}

/// `struct ibv_context_ops`: the inline `ibv_poll_cq`, `ibv_req_notify_cq`,
/// `ibv_post_send`, `ibv_post_recv` (and `ibv_post_srq_recv`,
/// `ibv_alloc_mw`...) call through it.
#[repr(C)]
pub struct ibv_context_ops {
    pub _compat: [OpaqueFn; 7],
    pub alloc_mw: Option<unsafe extern "C" fn(*mut ibv_pd, c_int) -> *mut ibv_mw>,
    pub bind_mw: Option<unsafe extern "C" fn(*mut ibv_qp, *mut ibv_mw, *mut ibv_mw_bind) -> c_int>,
    pub dealloc_mw: Option<unsafe extern "C" fn(*mut ibv_mw) -> c_int>,
    pub _compat_create_cq: OpaqueFn,
    pub poll_cq: Option<unsafe extern "C" fn(*mut ibv_cq, c_int, *mut ibv_wc) -> c_int>,
    pub req_notify_cq: Option<unsafe extern "C" fn(*mut ibv_cq, c_int) -> c_int>,
    pub _compat2: [OpaqueFn; 7],
    pub post_srq_recv:
        Option<unsafe extern "C" fn(*mut c_void, *mut ibv_recv_wr, *mut *mut ibv_recv_wr) -> c_int>,
    pub _compat3: [OpaqueFn; 4],
    pub post_send:
        Option<unsafe extern "C" fn(*mut ibv_qp, *mut ibv_send_wr, *mut *mut ibv_send_wr) -> c_int>,
    pub post_recv:
        Option<unsafe extern "C" fn(*mut ibv_qp, *mut ibv_recv_wr, *mut *mut ibv_recv_wr) -> c_int>,
    pub _compat4: [OpaqueFn; 5],
}

#[repr(C)]
pub struct ibv_context {
    pub device: *mut ibv_device,
    pub ops: ibv_context_ops,
    pub cmd_fd: c_int,
    pub async_fd: c_int,
    pub num_comp_vectors: c_int,
    pub mutex: PthreadMutex,
    pub abi_compat: *mut c_void,
}

/// `struct verbs_context`: the extended ops in front of the context, read by
/// `verbs_get_ctx_op` (absent ones NULL), `sz` right before `context`.
#[repr(C)]
pub struct verbs_context {
    pub query_port:
        Option<unsafe extern "C" fn(*mut ibv_context, u8, *mut ibv_port_attr, usize) -> c_int>,
    /// advise_mr .. query_rt_values (24 ops).
    pub _ops1: [OpaqueFn; 24],
    /// The inline `ibv_create_cq_ex` calls it.
    pub create_cq_ex:
        Option<unsafe extern "C" fn(*mut ibv_context, *mut ibv_cq_init_attr_ex) -> *mut ibv_cq_ex>,
    pub _priv: *mut c_void,
    pub query_device_ex: Option<
        unsafe extern "C" fn(
            *mut ibv_context,
            *const ibv_query_device_ex_input,
            *mut ibv_device_attr_ex,
            usize,
        ) -> c_int,
    >,
    /// ibv_destroy_flow, ABI_placeholder2, ibv_create_flow,
    /// ABI_placeholder1, open_qp.
    pub _ops2: [OpaqueFn; 5],
    /// The inline `ibv_create_qp_ex` calls it (unless the only attribute
    /// is the PD: then `ibv_create_qp`).
    pub create_qp_ex:
        Option<unsafe extern "C" fn(*mut ibv_context, *mut ibv_qp_init_attr_ex) -> *mut ibv_qp>,
    pub get_srq_num: OpaqueFn,
    pub create_srq_ex: OpaqueFn,
    /// open_xrcd, close_xrcd.
    pub _ops3: [OpaqueFn; 2],
    pub _abi_placeholder3: u64,
    pub sz: usize,
    pub context: ibv_context,
}

/// `__VERBS_ABI_IS_EXTENDED`: `abi_compat` of a context with a
/// `verbs_context` around it.
pub const VERBS_ABI_IS_EXTENDED: *mut c_void = usize::MAX as *mut c_void;

#[repr(C)]
pub struct ibv_pd {
    pub context: *mut ibv_context,
    pub handle: u32,
}

#[repr(C)]
pub struct ibv_mr {
    pub context: *mut ibv_context,
    pub pd: *mut ibv_pd,
    pub addr: *mut c_void,
    pub length: usize,
    pub handle: u32,
    pub lkey: u32,
    pub rkey: u32,
}

#[repr(C)]
pub struct ibv_comp_channel {
    pub context: *mut ibv_context,
    pub fd: c_int,
    pub refcnt: c_int,
}

#[repr(C)]
pub struct ibv_cq {
    pub context: *mut ibv_context,
    pub channel: *mut ibv_comp_channel,
    pub cq_context: *mut c_void,
    pub handle: u32,
    pub cqe: c_int,
    pub mutex: PthreadMutex,
    pub cond: PthreadCond,
    pub comp_events_completed: u32,
    pub async_events_completed: u32,
}

#[repr(C)]
pub struct ibv_qp {
    pub context: *mut ibv_context,
    pub qp_context: *mut c_void,
    pub pd: *mut ibv_pd,
    pub send_cq: *mut ibv_cq,
    pub recv_cq: *mut ibv_cq,
    pub srq: *mut c_void,
    pub handle: u32,
    pub qp_num: u32,
    pub state: c_int,
    pub qp_type: c_int,
    pub mutex: PthreadMutex,
    pub cond: PthreadCond,
    pub events_completed: u32,
}

/// `struct ibv_srq`.
#[repr(C)]
pub struct ibv_srq {
    pub context: *mut ibv_context,
    pub srq_context: *mut c_void,
    pub pd: *mut ibv_pd,
    pub handle: u32,
    pub mutex: PthreadMutex,
    pub cond: PthreadCond,
    pub events_completed: u32,
}

/// `struct ibv_srq_attr`.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct ibv_srq_attr {
    pub max_wr: u32,
    pub max_sge: u32,
    pub srq_limit: u32,
}

/// `struct ibv_srq_init_attr`.
#[repr(C)]
pub struct ibv_srq_init_attr {
    pub srq_context: *mut c_void,
    pub attr: ibv_srq_attr,
}

/// `enum ibv_srq_attr_mask`.
pub const IBV_SRQ_MAX_WR: c_int = 1 << 0;
pub const IBV_SRQ_LIMIT: c_int = 1 << 1;

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct ibv_wc {
    pub wr_id: u64,
    pub status: c_int,
    pub opcode: c_int,
    pub vendor_err: u32,
    pub byte_len: u32,
    pub imm_data: u32,
    pub qp_num: u32,
    pub src_qp: u32,
    pub wc_flags: c_uint,
    pub pkey_index: u16,
    pub slid: u16,
    pub sl: u8,
    pub dlid_path_bits: u8,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_sge {
    pub addr: u64,
    pub length: u32,
    pub lkey: u32,
}

/// `wr.atomic` of `ibv_send_wr` (the largest member of the `wr` union;
/// `wr.rdma` is its prefix `remote_addr`, then `rkey` at offset 8).
#[repr(C)]
pub struct ibv_send_wr_wr {
    pub remote_addr: u64,
    /// `wr.rdma.rkey` (RDMA) or `wr.atomic.compare_add` (atomics).
    pub rdma_rkey_or_compare_add: u64,
    pub swap: u64,
    pub atomic_rkey: u32,
    pub _pad: u32,
}

#[repr(C)]
pub struct ibv_send_wr {
    pub wr_id: u64,
    pub next: *mut ibv_send_wr,
    pub sg_list: *mut ibv_sge,
    pub num_sge: c_int,
    pub opcode: c_int,
    pub send_flags: c_uint,
    pub imm_data: u32,
    pub wr: ibv_send_wr_wr,
    pub qp_type: u32,
    pub _pad: u32,
    /// The bind_mw / tso union (48 bytes): its bind_mw member.
    pub bind_mw: ibv_send_wr_bind_mw,
}

/// `ibv_send_wr.bind_mw`: the window, its new R_Key, the bind.
#[repr(C)]
pub struct ibv_send_wr_bind_mw {
    pub mw: *mut ibv_mw,
    pub rkey: u32,
    pub bind_info: ibv_mw_bind_info,
}

/// `struct ibv_mw`: a memory window.
#[repr(C)]
pub struct ibv_mw {
    pub context: *mut ibv_context,
    pub pd: *mut ibv_pd,
    pub rkey: u32,
    pub handle: u32,
    /// `enum ibv_mw_type`.
    pub type_: c_int,
}

/// `struct ibv_mw_bind_info`: the region, range and rights of a bind.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_mw_bind_info {
    pub mr: *mut ibv_mr,
    pub addr: u64,
    pub length: u64,
    pub mw_access_flags: c_uint,
}

/// `struct ibv_mw_bind`: what `ibv_bind_mw` posts.
#[repr(C)]
pub struct ibv_mw_bind {
    pub wr_id: u64,
    pub send_flags: c_uint,
    pub bind_info: ibv_mw_bind_info,
}

#[repr(C)]
pub struct ibv_recv_wr {
    pub wr_id: u64,
    pub next: *mut ibv_recv_wr,
    pub sg_list: *mut ibv_sge,
    pub num_sge: c_int,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct ibv_qp_cap {
    pub max_send_wr: u32,
    pub max_recv_wr: u32,
    pub max_send_sge: u32,
    pub max_recv_sge: u32,
    pub max_inline_data: u32,
}

#[repr(C)]
pub struct ibv_qp_init_attr {
    pub qp_context: *mut c_void,
    pub send_cq: *mut ibv_cq,
    pub recv_cq: *mut ibv_cq,
    pub srq: *mut c_void,
    pub cap: ibv_qp_cap,
    pub qp_type: c_int,
    pub sq_sig_all: c_int,
}

/// `union ibv_gid` has 64-bit members: 8-byte alignment.
#[repr(C, align(8))]
#[derive(Clone, Copy, Default)]
pub struct ibv_global_route {
    pub dgid: [u8; 16],
    pub flow_label: u32,
    pub sgid_index: u8,
    pub hop_limit: u8,
    pub traffic_class: u8,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct ibv_ah_attr {
    pub grh: ibv_global_route,
    pub dlid: u16,
    pub sl: u8,
    pub src_path_bits: u8,
    pub static_rate: u8,
    pub is_global: u8,
    pub port_num: u8,
}

/// `struct ibv_ah`: an address handle.
#[repr(C)]
pub struct ibv_ah {
    pub context: *mut ibv_context,
    pub pd: *mut ibv_pd,
    pub handle: u32,
}

/// `struct ibv_grh`: the 40 bytes a UD receive buffer begins with (an
/// IPv6 header, or over IPv4 20 bytes then the IPv4 header).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_grh {
    pub version_tclass_flow: u32,
    pub paylen: u16,
    pub next_hdr: u8,
    pub hop_limit: u8,
    pub sgid: [u8; 16],
    pub dgid: [u8; 16],
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct ibv_qp_attr {
    pub qp_state: c_int,
    pub cur_qp_state: c_int,
    pub path_mtu: c_int,
    pub path_mig_state: c_int,
    pub qkey: u32,
    pub rq_psn: u32,
    pub sq_psn: u32,
    pub dest_qp_num: u32,
    pub qp_access_flags: c_uint,
    pub cap: ibv_qp_cap,
    pub ah_attr: ibv_ah_attr,
    pub alt_ah_attr: ibv_ah_attr,
    pub pkey_index: u16,
    pub alt_pkey_index: u16,
    pub en_sqd_async_notify: u8,
    pub sq_draining: u8,
    pub max_rd_atomic: u8,
    pub max_dest_rd_atomic: u8,
    pub min_rnr_timer: u8,
    pub port_num: u8,
    pub timeout: u8,
    pub retry_cnt: u8,
    pub rnr_retry: u8,
    pub alt_port_num: u8,
    pub alt_timeout: u8,
    pub rate_limit: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct ibv_port_attr {
    pub state: c_int,
    pub max_mtu: c_int,
    pub active_mtu: c_int,
    pub gid_tbl_len: c_int,
    pub port_cap_flags: u32,
    pub max_msg_sz: u32,
    pub bad_pkey_cntr: u32,
    pub qkey_viol_cntr: u32,
    pub pkey_tbl_len: u16,
    pub lid: u16,
    pub sm_lid: u16,
    pub lmc: u8,
    pub max_vl_num: u8,
    pub sm_sl: u8,
    pub subnet_timeout: u8,
    pub init_type_reply: u8,
    pub active_width: u8,
    pub active_speed: u8,
    pub phys_state: u8,
    pub link_layer: u8,
    pub flags: u8,
    pub port_cap_flags2: u16,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_device_attr {
    pub fw_ver: [c_char; 64],
    pub node_guid: u64,
    pub sys_image_guid: u64,
    pub max_mr_size: u64,
    pub page_size_cap: u64,
    pub vendor_id: u32,
    pub vendor_part_id: u32,
    pub hw_ver: u32,
    pub max_qp: c_int,
    pub max_qp_wr: c_int,
    pub device_cap_flags: c_uint,
    pub max_sge: c_int,
    pub max_sge_rd: c_int,
    pub max_cq: c_int,
    pub max_cqe: c_int,
    pub max_mr: c_int,
    pub max_pd: c_int,
    pub max_qp_rd_atom: c_int,
    pub max_ee_rd_atom: c_int,
    pub max_res_rd_atom: c_int,
    pub max_qp_init_rd_atom: c_int,
    pub max_ee_init_rd_atom: c_int,
    pub atomic_cap: c_int,
    pub max_ee: c_int,
    pub max_rdd: c_int,
    pub max_mw: c_int,
    pub max_raw_ipv6_qp: c_int,
    pub max_raw_ethy_qp: c_int,
    pub max_mcast_grp: c_int,
    pub max_mcast_qp_attach: c_int,
    pub max_total_mcast_qp_attach: c_int,
    pub max_ah: c_int,
    pub max_fmr: c_int,
    pub max_map_per_fmr: c_int,
    pub max_srq: c_int,
    pub max_srq_wr: c_int,
    pub max_srq_sge: c_int,
    pub max_pkeys: u16,
    pub local_ca_ack_delay: u8,
    pub phys_port_cnt: u8,
}

#[repr(C)]
pub struct ibv_query_device_ex_input {
    pub comp_mask: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct ibv_odp_caps {
    pub general_caps: u64,
    pub rc_odp_caps: u32,
    pub uc_odp_caps: u32,
    pub ud_odp_caps: u32,
}

/// `struct ibv_device_attr_ex`: the extended attributes after
/// `orig_attr`. The capability structures the drop-in reports as zero
/// (TSO, RSS, packet pacing, tag matching, CQ moderation, device memory,
/// PCI atomics) are kept as plain words of their sizes.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_device_attr_ex {
    pub orig_attr: ibv_device_attr,
    pub comp_mask: u32,
    pub odp_caps: ibv_odp_caps,
    pub completion_timestamp_mask: u64,
    pub hca_core_clock: u64,
    pub device_cap_flags_ex: u64,
    /// tso_caps (8), rss_caps (32 with its padding), max_wq_type_rq (4),
    /// packet_pacing_caps (12), raw_packet_caps (4), tm_caps (20),
    /// cq_mod_caps (4), then padding to 8: 88 bytes.
    pub _caps: [u64; 11],
    pub max_dm_size: u64,
    pub pci_atomic_caps: [u16; 3],
    pub xrc_odp_caps: u32,
    pub phys_port_cnt_ex: u32,
}

#[repr(C)]
pub struct ibv_async_event {
    pub element: *mut c_void,
    pub event_type: c_int,
}

#[repr(C, align(8))]
pub struct ibv_gid_entry {
    pub gid: [u8; 16],
    pub gid_index: u32,
    pub port_num: u32,
    pub gid_type: u32,
    pub ndev_ifindex: u32,
}

/// `struct ibv_rx_hash_conf` (RSS QPs; read only to be refused).
#[repr(C)]
pub struct ibv_rx_hash_conf {
    pub rx_hash_function: u8,
    pub rx_hash_key_len: u8,
    pub rx_hash_key: *mut u8,
    pub rx_hash_fields_mask: u64,
}

/// `struct ibv_qp_init_attr_ex`: `ibv_qp_init_attr` and then the
/// extended attributes `comp_mask` says are set.
#[repr(C)]
pub struct ibv_qp_init_attr_ex {
    pub qp_context: *mut c_void,
    pub send_cq: *mut ibv_cq,
    pub recv_cq: *mut ibv_cq,
    pub srq: *mut c_void,
    pub cap: ibv_qp_cap,
    pub qp_type: c_int,
    pub sq_sig_all: c_int,
    pub comp_mask: u32,
    pub pd: *mut ibv_pd,
    pub xrcd: *mut c_void,
    pub create_flags: u32,
    pub max_tso_header: u16,
    pub rwq_ind_tbl: *mut c_void,
    pub rx_hash_conf: ibv_rx_hash_conf,
    pub source_qpn: u32,
    pub send_ops_flags: u64,
}

/// `struct ibv_data_buf`: one buffer of `ibv_wr_set_inline_data_list`.
#[repr(C)]
pub struct ibv_data_buf {
    pub addr: *mut c_void,
    pub length: usize,
}

/// `struct ibv_qp_ex` after its `qp_base` (an `ibv_qp`, 8-aligned, so
/// this follows it with no padding): the work request being built and
/// the builders the inline `ibv_wr_*` call through.
#[repr(C)]
pub struct ibv_qp_ex_ops {
    pub comp_mask: u64,
    /// The program writes these before each builder call.
    pub wr_id: u64,
    pub wr_flags: c_uint,
    pub wr_atomic_cmp_swp: Option<unsafe extern "C" fn(*mut ibv_qp_ex, u32, u64, u64, u64)>,
    pub wr_atomic_fetch_add: Option<unsafe extern "C" fn(*mut ibv_qp_ex, u32, u64, u64)>,
    pub wr_bind_mw:
        Option<unsafe extern "C" fn(*mut ibv_qp_ex, *mut ibv_mw, u32, *const ibv_mw_bind_info)>,
    pub wr_local_inv: Option<unsafe extern "C" fn(*mut ibv_qp_ex, u32)>,
    pub wr_rdma_read: Option<unsafe extern "C" fn(*mut ibv_qp_ex, u32, u64)>,
    pub wr_rdma_write: Option<unsafe extern "C" fn(*mut ibv_qp_ex, u32, u64)>,
    pub wr_rdma_write_imm: Option<unsafe extern "C" fn(*mut ibv_qp_ex, u32, u64, u32)>,
    pub wr_send: Option<unsafe extern "C" fn(*mut ibv_qp_ex)>,
    pub wr_send_imm: Option<unsafe extern "C" fn(*mut ibv_qp_ex, u32)>,
    pub wr_send_inv: Option<unsafe extern "C" fn(*mut ibv_qp_ex, u32)>,
    pub wr_send_tso: OpaqueFn,
    pub wr_set_ud_addr: Option<unsafe extern "C" fn(*mut ibv_qp_ex, *mut c_void, u32, u32)>,
    pub wr_set_xrc_srqn: OpaqueFn,
    pub wr_set_inline_data: Option<unsafe extern "C" fn(*mut ibv_qp_ex, *mut c_void, usize)>,
    pub wr_set_inline_data_list:
        Option<unsafe extern "C" fn(*mut ibv_qp_ex, usize, *const ibv_data_buf)>,
    pub wr_set_sge: Option<unsafe extern "C" fn(*mut ibv_qp_ex, u32, u64, u32)>,
    pub wr_set_sge_list: Option<unsafe extern "C" fn(*mut ibv_qp_ex, usize, *const ibv_sge)>,
    pub wr_start: Option<unsafe extern "C" fn(*mut ibv_qp_ex)>,
    pub wr_complete: Option<unsafe extern "C" fn(*mut ibv_qp_ex) -> c_int>,
    pub wr_abort: Option<unsafe extern "C" fn(*mut ibv_qp_ex)>,
    /// `(qp, rkey, remote_addr, atomic_wr)`: `atomic_wr` points to the 8
    /// bytes to write.
    pub wr_atomic_write: Option<unsafe extern "C" fn(*mut ibv_qp_ex, u32, u64, *const c_void)>,
}

/// `struct ibv_qp_ex`.
#[repr(C)]
pub struct ibv_qp_ex {
    pub qp_base: ibv_qp,
    pub ex: ibv_qp_ex_ops,
}

/// `struct verbs_qp` (rdma-core's driver.h): the QP or extended QP, then
/// what `ibv_qp_to_qp_ex` reads to tell them apart.
#[repr(C)]
pub struct verbs_qp {
    pub qp_ex: ibv_qp_ex,
    pub comp_mask: u32,
    pub xrcd: *mut c_void,
}

/// `VERBS_QP_EX` of `verbs_qp.comp_mask`.
pub const VERBS_QP_EX: u32 = 1 << 1;

/// `struct ibv_poll_cq_attr`.
#[repr(C)]
pub struct ibv_poll_cq_attr {
    pub comp_mask: u32,
}

/// `struct ibv_cq_ex` after the fields it shares with `ibv_cq` (which is
/// 8-aligned and ends on a multiple of 8: this follows it with no
/// padding): the completion being read and the polling ops.
#[repr(C)]
pub struct ibv_cq_ex_ops {
    pub comp_mask: u32,
    pub status: c_int,
    pub wr_id: u64,
    pub start_poll: Option<unsafe extern "C" fn(*mut ibv_cq_ex, *mut ibv_poll_cq_attr) -> c_int>,
    pub next_poll: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> c_int>,
    pub end_poll: Option<unsafe extern "C" fn(*mut ibv_cq_ex)>,
    pub read_opcode: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> c_int>,
    pub read_vendor_err: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> u32>,
    pub read_byte_len: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> u32>,
    pub read_imm_data: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> u32>,
    pub read_qp_num: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> u32>,
    pub read_src_qp: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> u32>,
    pub read_wc_flags: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> c_uint>,
    pub read_slid: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> u32>,
    pub read_sl: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> u8>,
    pub read_dlid_path_bits: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> u8>,
    /// read_completion_ts, read_cvlan, read_flow_tag, read_tm_info,
    /// read_completion_wallclock_ns: none (their `wc_flags` are refused).
    pub _unsupported: [OpaqueFn; 5],
}

/// `struct ibv_cq_ex`.
#[repr(C)]
pub struct ibv_cq_ex {
    pub cq: ibv_cq,
    pub ex: ibv_cq_ex_ops,
}

/// `struct ibv_cq_init_attr_ex`.
#[repr(C)]
pub struct ibv_cq_init_attr_ex {
    pub cqe: u32,
    pub cq_context: *mut c_void,
    pub channel: *mut ibv_comp_channel,
    pub comp_vector: u32,
    pub wc_flags: u64,
    pub comp_mask: u32,
    pub flags: u32,
    pub parent_domain: *mut ibv_pd,
}

// ---- constants (verbs.h enums) ----
pub const IBV_NODE_CA: c_int = 1;
pub const IBV_TRANSPORT_IB: c_int = 0;
pub const IBV_LINK_LAYER_ETHERNET: u8 = 2;
pub const IBV_ATOMIC_HCA: c_int = 1;
pub const IBV_QPT_RC: c_int = 2;
pub const IBV_QPT_UC: c_int = 3;
pub const IBV_GID_TYPE_ROCE_V2: u32 = 2;
pub const IBV_GID_TYPE_SYSFS_IB_ROCE_V1: c_int = 0;
pub const IBV_GID_TYPE_SYSFS_ROCE_V2: c_int = 1;

/// `enum ibv_qp_attr_mask`.
pub const IBV_QP_STATE: c_int = 1 << 0;
pub const IBV_QP_CUR_STATE: c_int = 1 << 1;
pub const IBV_QP_EN_SQD_ASYNC_NOTIFY: c_int = 1 << 2;
pub const IBV_QP_ACCESS_FLAGS: c_int = 1 << 3;
pub const IBV_QP_PKEY_INDEX: c_int = 1 << 4;
pub const IBV_QP_PORT: c_int = 1 << 5;
pub const IBV_QP_QKEY: c_int = 1 << 6;
pub const IBV_QP_AV: c_int = 1 << 7;
pub const IBV_QP_PATH_MTU: c_int = 1 << 8;
pub const IBV_QP_TIMEOUT: c_int = 1 << 9;
pub const IBV_QP_RETRY_CNT: c_int = 1 << 10;
pub const IBV_QP_RNR_RETRY: c_int = 1 << 11;
pub const IBV_QP_RQ_PSN: c_int = 1 << 12;
pub const IBV_QP_MAX_QP_RD_ATOMIC: c_int = 1 << 13;
pub const IBV_QP_ALT_PATH: c_int = 1 << 14;
pub const IBV_QP_MIN_RNR_TIMER: c_int = 1 << 15;
pub const IBV_QP_SQ_PSN: c_int = 1 << 16;
pub const IBV_QP_MAX_DEST_RD_ATOMIC: c_int = 1 << 17;
pub const IBV_QP_PATH_MIG_STATE: c_int = 1 << 18;
pub const IBV_QP_CAP: c_int = 1 << 19;
pub const IBV_QP_DEST_QPN: c_int = 1 << 20;
pub const IBV_QP_RATE_LIMIT: c_int = 1 << 25;

/// `enum ibv_qp_state`.
pub const IBV_QPS_RESET: c_int = 0;
pub const IBV_QPS_INIT: c_int = 1;
pub const IBV_QPS_RTR: c_int = 2;
pub const IBV_QPS_RTS: c_int = 3;
pub const IBV_QPS_SQD: c_int = 4;
pub const IBV_QPS_SQE: c_int = 5;
pub const IBV_QPS_ERR: c_int = 6;

/// `enum ibv_access_flags`.
pub const IBV_ACCESS_LOCAL_WRITE: c_uint = 1;
pub const IBV_ACCESS_REMOTE_WRITE: c_uint = 1 << 1;
pub const IBV_ACCESS_REMOTE_READ: c_uint = 1 << 2;
pub const IBV_ACCESS_REMOTE_ATOMIC: c_uint = 1 << 3;
pub const IBV_ACCESS_MW_BIND: c_uint = 1 << 4;
pub const IBV_ACCESS_ZERO_BASED: c_uint = 1 << 5;
pub const IBV_ACCESS_ON_DEMAND: c_uint = 1 << 6;

/// `enum ibv_rereg_mr_flags` and `enum ibv_rereg_mr_err_code`.
pub const IBV_REREG_MR_CHANGE_TRANSLATION: c_int = 1;
pub const IBV_REREG_MR_CHANGE_PD: c_int = 1 << 1;
pub const IBV_REREG_MR_CHANGE_ACCESS: c_int = 1 << 2;
pub const IBV_REREG_MR_ERR_INPUT: c_int = -1;
pub const IBV_REREG_MR_ERR_CMD: c_int = -4;

/// `enum ibv_device_cap_flags` the drop-in reports.
pub const IBV_DEVICE_RC_RNR_NAK_GEN: c_uint = 1 << 12;
pub const IBV_DEVICE_MEM_WINDOW: c_uint = 1 << 17;
pub const IBV_DEVICE_MEM_WINDOW_TYPE_2B: c_uint = 1 << 24;
pub const IBV_DEVICE_SYS_IMAGE_GUID: c_uint = 1 << 10;
pub const IBV_DEVICE_PORT_ACTIVE_EVENT: c_uint = 1 << 14;
/// `IB_UVERBS_DEVICE_ATOMIC_WRITE` of `device_cap_flags_ex` (rdma-core
/// `kernel-headers/rdma/ib_user_verbs.h`): the device executes ATOMIC WRITE.
pub const IB_UVERBS_DEVICE_ATOMIC_WRITE: u64 = 1 << 40;

pub const IBV_WR_RDMA_WRITE: c_int = 0;
pub const IBV_WR_RDMA_WRITE_WITH_IMM: c_int = 1;
pub const IBV_WR_SEND: c_int = 2;
pub const IBV_WR_SEND_WITH_IMM: c_int = 3;
pub const IBV_WR_RDMA_READ: c_int = 4;
pub const IBV_WR_ATOMIC_CMP_AND_SWP: c_int = 5;
pub const IBV_WR_ATOMIC_FETCH_AND_ADD: c_int = 6;
pub const IBV_WR_LOCAL_INV: c_int = 7;
pub const IBV_WR_BIND_MW: c_int = 8;
pub const IBV_WR_SEND_WITH_INV: c_int = 9;
pub const IBV_WR_ATOMIC_WRITE: c_int = 15;

/// `enum ibv_mw_type`.
pub const IBV_MW_TYPE_1: c_int = 1;
pub const IBV_MW_TYPE_2: c_int = 2;
pub const IBV_SEND_SIGNALED: c_uint = 1 << 1;
pub const IBV_SEND_SOLICITED: c_uint = 1 << 2;
pub const IBV_SEND_INLINE: c_uint = 1 << 3;

pub const IBV_WC_WITH_IMM: c_uint = 1 << 1;
pub const IBV_WC_WITH_INV: c_uint = 1 << 3;
/// The receive buffer begins with the 40-byte GRH area (every UD receive).
pub const IBV_WC_GRH: c_uint = 1 << 0;

pub const IBV_EVENT_QP_FATAL: c_int = 1;
pub const IBV_EVENT_DEVICE_FATAL: c_int = 8;
pub const IBV_EVENT_SRQ_LIMIT_REACHED: c_int = 15;
pub const IBV_EVENT_QP_LAST_WQE_REACHED: c_int = 16;

pub const IBV_QPT_UD: c_int = 4;

/// `enum ibv_qp_init_attr_mask`.
pub const IBV_QP_INIT_ATTR_PD: u32 = 1 << 0;
pub const IBV_QP_INIT_ATTR_CREATE_FLAGS: u32 = 1 << 2;
pub const IBV_QP_INIT_ATTR_SEND_OPS_FLAGS: u32 = 1 << 6;

/// `enum ibv_qp_create_send_ops_flags`.
pub const IBV_QP_EX_WITH_RDMA_WRITE: u64 = 1 << 0;
pub const IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM: u64 = 1 << 1;
pub const IBV_QP_EX_WITH_SEND: u64 = 1 << 2;
pub const IBV_QP_EX_WITH_SEND_WITH_IMM: u64 = 1 << 3;
pub const IBV_QP_EX_WITH_RDMA_READ: u64 = 1 << 4;
pub const IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP: u64 = 1 << 5;
pub const IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD: u64 = 1 << 6;
pub const IBV_QP_EX_WITH_LOCAL_INV: u64 = 1 << 7;
pub const IBV_QP_EX_WITH_BIND_MW: u64 = 1 << 8;
pub const IBV_QP_EX_WITH_SEND_WITH_INV: u64 = 1 << 9;
pub const IBV_QP_EX_WITH_ATOMIC_WRITE: u64 = 1 << 12;

/// `enum ibv_create_cq_wc_flags`: the standard ones (rxe's
/// `RXE_SUP_WC_FLAGS`).
pub const IBV_WC_STANDARD_FLAGS: u64 = 0x7f;
/// `enum ibv_cq_init_attr_mask`.
pub const IBV_CQ_INIT_ATTR_MASK_FLAGS: u32 = 1 << 0;
pub const IBV_CQ_INIT_ATTR_MASK_PD: u32 = 1 << 1;
/// `enum ibv_create_cq_attr_flags`.
pub const IBV_CREATE_CQ_ATTR_SINGLE_THREADED: u32 = 1 << 0;

/// `enum ibv_mtu`'s IBV_MTU_1024.
pub const IBV_MTU_1024: c_int = 3;
/// `enum ibv_wc_status`'s IBV_WC_SUCCESS.
pub const IBV_WC_SUCCESS: c_int = 0;
/// `enum ibv_wc_opcode`'s IBV_WC_RECV (receives have bit 7 set).
pub const IBV_WC_RECV: c_int = 1 << 7;
/// `struct ibv_srq_init_attr_ex` (only its `pd`/`cq` are read here,
/// through `comp_mask`).
#[repr(C)]
pub struct ibv_srq_init_attr_ex {
    pub srq_context: *mut c_void,
    pub attr: ibv_srq_attr,
    pub comp_mask: u32,
    pub srq_type: c_int,
    pub pd: *mut ibv_pd,
    pub xrcd: *mut c_void,
    pub cq: *mut ibv_cq,
    pub tm_cap: [u32; 2],
}
/// `enum ibv_srq_init_attr_mask`.
pub const IBV_SRQ_INIT_ATTR_TYPE: u32 = 1 << 0;
pub const IBV_SRQ_INIT_ATTR_PD: u32 = 1 << 1;
pub const IBV_SRQ_INIT_ATTR_CQ: u32 = 1 << 3;

/// Offsets and sizes the layout test compares with the installed
/// `verbs.h`: (C expression, value here).
pub const LAYOUT: &[(&str, usize)] = {
    use std::mem::{offset_of, size_of};
    &[
        ("sizeof(struct ibv_device)", size_of::<ibv_device>()),
        (
            "offsetof(struct ibv_device, name)",
            offset_of!(ibv_device, name),
        ),
        (
            "offsetof(struct ibv_device, ibdev_path)",
            offset_of!(ibv_device, ibdev_path),
        ),
        (
            "sizeof(struct ibv_context_ops)",
            size_of::<ibv_context_ops>(),
        ),
        (
            "offsetof(struct ibv_context_ops, alloc_mw)",
            offset_of!(ibv_context_ops, alloc_mw),
        ),
        (
            "offsetof(struct ibv_context_ops, poll_cq)",
            offset_of!(ibv_context_ops, poll_cq),
        ),
        (
            "offsetof(struct ibv_context_ops, req_notify_cq)",
            offset_of!(ibv_context_ops, req_notify_cq),
        ),
        (
            "offsetof(struct ibv_context_ops, post_srq_recv)",
            offset_of!(ibv_context_ops, post_srq_recv),
        ),
        (
            "offsetof(struct ibv_context_ops, post_send)",
            offset_of!(ibv_context_ops, post_send),
        ),
        (
            "offsetof(struct ibv_context_ops, post_recv)",
            offset_of!(ibv_context_ops, post_recv),
        ),
        ("sizeof(struct ibv_context)", size_of::<ibv_context>()),
        (
            "offsetof(struct ibv_context, ops)",
            offset_of!(ibv_context, ops),
        ),
        (
            "offsetof(struct ibv_context, cmd_fd)",
            offset_of!(ibv_context, cmd_fd),
        ),
        (
            "offsetof(struct ibv_context, async_fd)",
            offset_of!(ibv_context, async_fd),
        ),
        (
            "offsetof(struct ibv_context, num_comp_vectors)",
            offset_of!(ibv_context, num_comp_vectors),
        ),
        (
            "offsetof(struct ibv_context, abi_compat)",
            offset_of!(ibv_context, abi_compat),
        ),
        ("sizeof(struct verbs_context)", size_of::<verbs_context>()),
        (
            "offsetof(struct verbs_context, query_port)",
            offset_of!(verbs_context, query_port),
        ),
        (
            "offsetof(struct verbs_context, query_device_ex)",
            offset_of!(verbs_context, query_device_ex),
        ),
        (
            "sizeof(struct ibv_device_attr_ex)",
            size_of::<ibv_device_attr_ex>(),
        ),
        (
            "offsetof(struct ibv_device_attr_ex, comp_mask)",
            offset_of!(ibv_device_attr_ex, comp_mask),
        ),
        (
            "offsetof(struct ibv_device_attr_ex, odp_caps)",
            offset_of!(ibv_device_attr_ex, odp_caps),
        ),
        (
            "offsetof(struct ibv_device_attr_ex, device_cap_flags_ex)",
            offset_of!(ibv_device_attr_ex, device_cap_flags_ex),
        ),
        (
            "offsetof(struct ibv_device_attr_ex, tso_caps)",
            offset_of!(ibv_device_attr_ex, _caps),
        ),
        (
            "offsetof(struct ibv_device_attr_ex, max_dm_size)",
            offset_of!(ibv_device_attr_ex, max_dm_size),
        ),
        (
            "offsetof(struct ibv_device_attr_ex, pci_atomic_caps)",
            offset_of!(ibv_device_attr_ex, pci_atomic_caps),
        ),
        (
            "offsetof(struct ibv_device_attr_ex, xrc_odp_caps)",
            offset_of!(ibv_device_attr_ex, xrc_odp_caps),
        ),
        (
            "offsetof(struct ibv_device_attr_ex, phys_port_cnt_ex)",
            offset_of!(ibv_device_attr_ex, phys_port_cnt_ex),
        ),
        (
            "offsetof(struct verbs_context, priv)",
            offset_of!(verbs_context, _priv),
        ),
        (
            "offsetof(struct verbs_context, ibv_destroy_flow)",
            offset_of!(verbs_context, _ops2),
        ),
        (
            "offsetof(struct verbs_context, sz)",
            offset_of!(verbs_context, sz),
        ),
        (
            "offsetof(struct verbs_context, context)",
            offset_of!(verbs_context, context),
        ),
        ("sizeof(struct ibv_pd)", size_of::<ibv_pd>()),
        ("sizeof(struct ibv_mr)", size_of::<ibv_mr>()),
        ("offsetof(struct ibv_mr, addr)", offset_of!(ibv_mr, addr)),
        ("offsetof(struct ibv_mr, lkey)", offset_of!(ibv_mr, lkey)),
        ("offsetof(struct ibv_mr, rkey)", offset_of!(ibv_mr, rkey)),
        (
            "sizeof(struct ibv_comp_channel)",
            size_of::<ibv_comp_channel>(),
        ),
        (
            "offsetof(struct ibv_comp_channel, fd)",
            offset_of!(ibv_comp_channel, fd),
        ),
        ("sizeof(struct ibv_cq)", size_of::<ibv_cq>()),
        ("offsetof(struct ibv_cq, cqe)", offset_of!(ibv_cq, cqe)),
        ("offsetof(struct ibv_cq, cond)", offset_of!(ibv_cq, cond)),
        (
            "offsetof(struct ibv_cq, comp_events_completed)",
            offset_of!(ibv_cq, comp_events_completed),
        ),
        ("sizeof(struct ibv_qp)", size_of::<ibv_qp>()),
        (
            "offsetof(struct ibv_qp, qp_num)",
            offset_of!(ibv_qp, qp_num),
        ),
        ("offsetof(struct ibv_qp, state)", offset_of!(ibv_qp, state)),
        (
            "offsetof(struct ibv_qp, events_completed)",
            offset_of!(ibv_qp, events_completed),
        ),
        ("sizeof(struct ibv_srq)", size_of::<ibv_srq>()),
        (
            "offsetof(struct ibv_srq, handle)",
            offset_of!(ibv_srq, handle),
        ),
        ("offsetof(struct ibv_srq, cond)", offset_of!(ibv_srq, cond)),
        (
            "offsetof(struct ibv_srq, events_completed)",
            offset_of!(ibv_srq, events_completed),
        ),
        ("sizeof(struct ibv_srq_attr)", size_of::<ibv_srq_attr>()),
        (
            "sizeof(struct ibv_srq_init_attr)",
            size_of::<ibv_srq_init_attr>(),
        ),
        (
            "offsetof(struct ibv_srq_init_attr, attr)",
            offset_of!(ibv_srq_init_attr, attr),
        ),
        (
            "IBV_EVENT_SRQ_LIMIT_REACHED",
            IBV_EVENT_SRQ_LIMIT_REACHED as usize,
        ),
        (
            "IBV_EVENT_QP_LAST_WQE_REACHED",
            IBV_EVENT_QP_LAST_WQE_REACHED as usize,
        ),
        ("sizeof(struct ibv_wc)", size_of::<ibv_wc>()),
        (
            "offsetof(struct ibv_wc, imm_data)",
            offset_of!(ibv_wc, imm_data),
        ),
        (
            "offsetof(struct ibv_wc, wc_flags)",
            offset_of!(ibv_wc, wc_flags),
        ),
        (
            "offsetof(struct ibv_wc, dlid_path_bits)",
            offset_of!(ibv_wc, dlid_path_bits),
        ),
        ("sizeof(struct ibv_sge)", size_of::<ibv_sge>()),
        ("sizeof(struct ibv_send_wr)", size_of::<ibv_send_wr>()),
        (
            "offsetof(struct ibv_send_wr, imm_data)",
            offset_of!(ibv_send_wr, imm_data),
        ),
        (
            "offsetof(struct ibv_send_wr, wr.rdma.remote_addr)",
            offset_of!(ibv_send_wr, wr),
        ),
        (
            "offsetof(struct ibv_send_wr, wr.rdma.rkey)",
            offset_of!(ibv_send_wr, wr) + offset_of!(ibv_send_wr_wr, rdma_rkey_or_compare_add),
        ),
        (
            "offsetof(struct ibv_send_wr, wr.atomic.compare_add)",
            offset_of!(ibv_send_wr, wr) + offset_of!(ibv_send_wr_wr, rdma_rkey_or_compare_add),
        ),
        (
            "offsetof(struct ibv_send_wr, wr.atomic.swap)",
            offset_of!(ibv_send_wr, wr) + offset_of!(ibv_send_wr_wr, swap),
        ),
        (
            "offsetof(struct ibv_send_wr, wr.atomic.rkey)",
            offset_of!(ibv_send_wr, wr) + offset_of!(ibv_send_wr_wr, atomic_rkey),
        ),
        (
            "offsetof(struct ibv_send_wr, qp_type)",
            offset_of!(ibv_send_wr, qp_type),
        ),
        (
            "offsetof(struct ibv_send_wr, bind_mw)",
            offset_of!(ibv_send_wr, bind_mw),
        ),
        (
            "offsetof(struct ibv_send_wr, bind_mw.mw)",
            offset_of!(ibv_send_wr, bind_mw) + offset_of!(ibv_send_wr_bind_mw, mw),
        ),
        (
            "offsetof(struct ibv_send_wr, bind_mw.rkey)",
            offset_of!(ibv_send_wr, bind_mw) + offset_of!(ibv_send_wr_bind_mw, rkey),
        ),
        (
            "offsetof(struct ibv_send_wr, bind_mw.bind_info)",
            offset_of!(ibv_send_wr, bind_mw) + offset_of!(ibv_send_wr_bind_mw, bind_info),
        ),
        (
            "offsetof(struct ibv_send_wr, invalidate_rkey)",
            offset_of!(ibv_send_wr, imm_data),
        ),
        ("sizeof(struct ibv_send_wr)", size_of::<ibv_send_wr>()),
        ("sizeof(struct ibv_mw)", size_of::<ibv_mw>()),
        ("offsetof(struct ibv_mw, pd)", offset_of!(ibv_mw, pd)),
        ("offsetof(struct ibv_mw, rkey)", offset_of!(ibv_mw, rkey)),
        (
            "offsetof(struct ibv_mw, handle)",
            offset_of!(ibv_mw, handle),
        ),
        ("offsetof(struct ibv_mw, type)", offset_of!(ibv_mw, type_)),
        (
            "sizeof(struct ibv_mw_bind_info)",
            size_of::<ibv_mw_bind_info>(),
        ),
        (
            "offsetof(struct ibv_mw_bind_info, addr)",
            offset_of!(ibv_mw_bind_info, addr),
        ),
        (
            "offsetof(struct ibv_mw_bind_info, length)",
            offset_of!(ibv_mw_bind_info, length),
        ),
        (
            "offsetof(struct ibv_mw_bind_info, mw_access_flags)",
            offset_of!(ibv_mw_bind_info, mw_access_flags),
        ),
        ("sizeof(struct ibv_mw_bind)", size_of::<ibv_mw_bind>()),
        (
            "offsetof(struct ibv_mw_bind, send_flags)",
            offset_of!(ibv_mw_bind, send_flags),
        ),
        (
            "offsetof(struct ibv_mw_bind, bind_info)",
            offset_of!(ibv_mw_bind, bind_info),
        ),
        (
            "offsetof(struct ibv_context_ops, bind_mw)",
            offset_of!(ibv_context_ops, bind_mw),
        ),
        (
            "offsetof(struct ibv_context_ops, dealloc_mw)",
            offset_of!(ibv_context_ops, dealloc_mw),
        ),
        (
            "offsetof(struct ibv_wc, invalidated_rkey)",
            offset_of!(ibv_wc, imm_data),
        ),
        ("sizeof(struct ibv_recv_wr)", size_of::<ibv_recv_wr>()),
        (
            "sizeof(struct ibv_qp_init_attr)",
            size_of::<ibv_qp_init_attr>(),
        ),
        (
            "offsetof(struct ibv_qp_init_attr, cap)",
            offset_of!(ibv_qp_init_attr, cap),
        ),
        (
            "offsetof(struct ibv_qp_init_attr, sq_sig_all)",
            offset_of!(ibv_qp_init_attr, sq_sig_all),
        ),
        ("sizeof(struct ibv_ah_attr)", size_of::<ibv_ah_attr>()),
        (
            "offsetof(struct ibv_ah_attr, is_global)",
            offset_of!(ibv_ah_attr, is_global),
        ),
        (
            "offsetof(struct ibv_ah_attr, grh.hop_limit)",
            offset_of!(ibv_global_route, hop_limit),
        ),
        ("sizeof(struct ibv_qp_attr)", size_of::<ibv_qp_attr>()),
        (
            "offsetof(struct ibv_qp_attr, dest_qp_num)",
            offset_of!(ibv_qp_attr, dest_qp_num),
        ),
        (
            "offsetof(struct ibv_qp_attr, ah_attr)",
            offset_of!(ibv_qp_attr, ah_attr),
        ),
        (
            "offsetof(struct ibv_qp_attr, max_rd_atomic)",
            offset_of!(ibv_qp_attr, max_rd_atomic),
        ),
        (
            "offsetof(struct ibv_qp_attr, rnr_retry)",
            offset_of!(ibv_qp_attr, rnr_retry),
        ),
        (
            "offsetof(struct ibv_qp_attr, rate_limit)",
            offset_of!(ibv_qp_attr, rate_limit),
        ),
        ("sizeof(struct ibv_port_attr)", size_of::<ibv_port_attr>()),
        (
            "offsetof(struct ibv_port_attr, link_layer)",
            offset_of!(ibv_port_attr, link_layer),
        ),
        (
            "offsetof(struct ibv_port_attr, port_cap_flags2)",
            offset_of!(ibv_port_attr, port_cap_flags2),
        ),
        (
            "sizeof(struct ibv_device_attr)",
            size_of::<ibv_device_attr>(),
        ),
        (
            "offsetof(struct ibv_device_attr, node_guid)",
            offset_of!(ibv_device_attr, node_guid),
        ),
        (
            "offsetof(struct ibv_device_attr, atomic_cap)",
            offset_of!(ibv_device_attr, atomic_cap),
        ),
        (
            "offsetof(struct ibv_device_attr, phys_port_cnt)",
            offset_of!(ibv_device_attr, phys_port_cnt),
        ),
        (
            "sizeof(struct ibv_async_event)",
            size_of::<ibv_async_event>(),
        ),
        (
            "offsetof(struct ibv_async_event, event_type)",
            offset_of!(ibv_async_event, event_type),
        ),
        ("sizeof(struct ibv_gid_entry)", size_of::<ibv_gid_entry>()),
        (
            "offsetof(struct verbs_context, create_cq_ex)",
            offset_of!(verbs_context, create_cq_ex),
        ),
        (
            "offsetof(struct verbs_context, create_qp_ex)",
            offset_of!(verbs_context, create_qp_ex),
        ),
        (
            "offsetof(struct verbs_context, create_srq_ex)",
            offset_of!(verbs_context, create_srq_ex),
        ),
        (
            "sizeof(struct ibv_qp_init_attr_ex)",
            size_of::<ibv_qp_init_attr_ex>(),
        ),
        (
            "offsetof(struct ibv_qp_init_attr_ex, comp_mask)",
            offset_of!(ibv_qp_init_attr_ex, comp_mask),
        ),
        (
            "offsetof(struct ibv_qp_init_attr_ex, pd)",
            offset_of!(ibv_qp_init_attr_ex, pd),
        ),
        (
            "offsetof(struct ibv_qp_init_attr_ex, create_flags)",
            offset_of!(ibv_qp_init_attr_ex, create_flags),
        ),
        (
            "offsetof(struct ibv_qp_init_attr_ex, rx_hash_conf)",
            offset_of!(ibv_qp_init_attr_ex, rx_hash_conf),
        ),
        (
            "offsetof(struct ibv_qp_init_attr_ex, source_qpn)",
            offset_of!(ibv_qp_init_attr_ex, source_qpn),
        ),
        (
            "offsetof(struct ibv_qp_init_attr_ex, send_ops_flags)",
            offset_of!(ibv_qp_init_attr_ex, send_ops_flags),
        ),
        ("sizeof(struct ibv_data_buf)", size_of::<ibv_data_buf>()),
        ("sizeof(struct ibv_qp_ex)", size_of::<ibv_qp_ex>()),
        (
            "offsetof(struct ibv_qp_ex, comp_mask)",
            offset_of!(ibv_qp_ex, ex) + offset_of!(ibv_qp_ex_ops, comp_mask),
        ),
        (
            "offsetof(struct ibv_qp_ex, wr_id)",
            offset_of!(ibv_qp_ex, ex) + offset_of!(ibv_qp_ex_ops, wr_id),
        ),
        (
            "offsetof(struct ibv_qp_ex, wr_flags)",
            offset_of!(ibv_qp_ex, ex) + offset_of!(ibv_qp_ex_ops, wr_flags),
        ),
        (
            "offsetof(struct ibv_qp_ex, wr_atomic_cmp_swp)",
            offset_of!(ibv_qp_ex, ex) + offset_of!(ibv_qp_ex_ops, wr_atomic_cmp_swp),
        ),
        (
            "offsetof(struct ibv_qp_ex, wr_send)",
            offset_of!(ibv_qp_ex, ex) + offset_of!(ibv_qp_ex_ops, wr_send),
        ),
        (
            "offsetof(struct ibv_qp_ex, wr_set_ud_addr)",
            offset_of!(ibv_qp_ex, ex) + offset_of!(ibv_qp_ex_ops, wr_set_ud_addr),
        ),
        (
            "offsetof(struct ibv_qp_ex, wr_set_inline_data)",
            offset_of!(ibv_qp_ex, ex) + offset_of!(ibv_qp_ex_ops, wr_set_inline_data),
        ),
        (
            "offsetof(struct ibv_qp_ex, wr_set_sge_list)",
            offset_of!(ibv_qp_ex, ex) + offset_of!(ibv_qp_ex_ops, wr_set_sge_list),
        ),
        (
            "offsetof(struct ibv_qp_ex, wr_start)",
            offset_of!(ibv_qp_ex, ex) + offset_of!(ibv_qp_ex_ops, wr_start),
        ),
        (
            "offsetof(struct ibv_qp_ex, wr_abort)",
            offset_of!(ibv_qp_ex, ex) + offset_of!(ibv_qp_ex_ops, wr_abort),
        ),
        (
            "offsetof(struct ibv_qp_ex, wr_atomic_write)",
            offset_of!(ibv_qp_ex, ex) + offset_of!(ibv_qp_ex_ops, wr_atomic_write),
        ),
        // `struct verbs_qp` is in rdma-core's driver.h, not installed: its
        // `comp_mask` follows the union of ibv_qp and ibv_qp_ex.
        ("sizeof(struct ibv_qp_ex)", offset_of!(verbs_qp, comp_mask)),
        (
            "sizeof(struct ibv_poll_cq_attr)",
            size_of::<ibv_poll_cq_attr>(),
        ),
        ("sizeof(struct ibv_cq_ex)", size_of::<ibv_cq_ex>()),
        (
            "offsetof(struct ibv_cq_ex, comp_mask)",
            offset_of!(ibv_cq_ex, ex) + offset_of!(ibv_cq_ex_ops, comp_mask),
        ),
        (
            "offsetof(struct ibv_cq_ex, status)",
            offset_of!(ibv_cq_ex, ex) + offset_of!(ibv_cq_ex_ops, status),
        ),
        (
            "offsetof(struct ibv_cq_ex, wr_id)",
            offset_of!(ibv_cq_ex, ex) + offset_of!(ibv_cq_ex_ops, wr_id),
        ),
        (
            "offsetof(struct ibv_cq_ex, start_poll)",
            offset_of!(ibv_cq_ex, ex) + offset_of!(ibv_cq_ex_ops, start_poll),
        ),
        (
            "offsetof(struct ibv_cq_ex, read_opcode)",
            offset_of!(ibv_cq_ex, ex) + offset_of!(ibv_cq_ex_ops, read_opcode),
        ),
        (
            "offsetof(struct ibv_cq_ex, read_dlid_path_bits)",
            offset_of!(ibv_cq_ex, ex) + offset_of!(ibv_cq_ex_ops, read_dlid_path_bits),
        ),
        (
            "offsetof(struct ibv_cq_ex, read_completion_ts)",
            offset_of!(ibv_cq_ex, ex) + offset_of!(ibv_cq_ex_ops, _unsupported),
        ),
        (
            "sizeof(struct ibv_cq_init_attr_ex)",
            size_of::<ibv_cq_init_attr_ex>(),
        ),
        (
            "offsetof(struct ibv_cq_init_attr_ex, comp_vector)",
            offset_of!(ibv_cq_init_attr_ex, comp_vector),
        ),
        (
            "offsetof(struct ibv_cq_init_attr_ex, wc_flags)",
            offset_of!(ibv_cq_init_attr_ex, wc_flags),
        ),
        (
            "offsetof(struct ibv_cq_init_attr_ex, flags)",
            offset_of!(ibv_cq_init_attr_ex, flags),
        ),
        (
            "offsetof(struct ibv_cq_init_attr_ex, parent_domain)",
            offset_of!(ibv_cq_init_attr_ex, parent_domain),
        ),
        (
            "offsetof(struct ibv_gid_entry, gid_type)",
            offset_of!(ibv_gid_entry, gid_type),
        ),
        ("sizeof(struct ibv_ah)", size_of::<ibv_ah>()),
        (
            "offsetof(struct ibv_ah, handle)",
            offset_of!(ibv_ah, handle),
        ),
        ("sizeof(struct ibv_grh)", size_of::<ibv_grh>()),
        ("offsetof(struct ibv_grh, sgid)", offset_of!(ibv_grh, sgid)),
        (
            "offsetof(struct ibv_wc, src_qp)",
            offset_of!(ibv_wc, src_qp),
        ),
        (
            "sizeof(struct ibv_srq_init_attr_ex)",
            size_of::<ibv_srq_init_attr_ex>(),
        ),
        (
            "offsetof(struct ibv_srq_init_attr_ex, comp_mask)",
            offset_of!(ibv_srq_init_attr_ex, comp_mask),
        ),
        (
            "offsetof(struct ibv_srq_init_attr_ex, pd)",
            offset_of!(ibv_srq_init_attr_ex, pd),
        ),
        (
            "offsetof(struct ibv_srq_init_attr_ex, cq)",
            offset_of!(ibv_srq_init_attr_ex, cq),
        ),
        (
            "offsetof(struct ibv_ah_attr, dlid)",
            offset_of!(ibv_ah_attr, dlid),
        ),
        (
            "offsetof(struct ibv_ah_attr, grh)",
            offset_of!(ibv_ah_attr, grh),
        ),
        (
            "offsetof(struct ibv_ah_attr, port_num)",
            offset_of!(ibv_ah_attr, port_num),
        ),
        (
            "offsetof(struct ibv_ah_attr, sl)",
            offset_of!(ibv_ah_attr, sl),
        ),
        (
            "offsetof(struct ibv_context, device)",
            offset_of!(ibv_context, device),
        ),
        (
            "offsetof(struct ibv_qp, context)",
            offset_of!(ibv_qp, context),
        ),
        ("offsetof(struct ibv_qp, pd)", offset_of!(ibv_qp, pd)),
        (
            "offsetof(struct ibv_qp, qp_type)",
            offset_of!(ibv_qp, qp_type),
        ),
        (
            "offsetof(struct ibv_qp, recv_cq)",
            offset_of!(ibv_qp, recv_cq),
        ),
        (
            "offsetof(struct ibv_qp, send_cq)",
            offset_of!(ibv_qp, send_cq),
        ),
        ("offsetof(struct ibv_qp, srq)", offset_of!(ibv_qp, srq)),
        (
            "offsetof(struct ibv_qp_attr, cap)",
            offset_of!(ibv_qp_attr, cap),
        ),
        (
            "offsetof(struct ibv_qp_attr, max_dest_rd_atomic)",
            offset_of!(ibv_qp_attr, max_dest_rd_atomic),
        ),
        (
            "offsetof(struct ibv_qp_attr, min_rnr_timer)",
            offset_of!(ibv_qp_attr, min_rnr_timer),
        ),
        (
            "offsetof(struct ibv_qp_attr, path_mtu)",
            offset_of!(ibv_qp_attr, path_mtu),
        ),
        (
            "offsetof(struct ibv_qp_attr, pkey_index)",
            offset_of!(ibv_qp_attr, pkey_index),
        ),
        (
            "offsetof(struct ibv_qp_attr, port_num)",
            offset_of!(ibv_qp_attr, port_num),
        ),
        (
            "offsetof(struct ibv_qp_attr, qkey)",
            offset_of!(ibv_qp_attr, qkey),
        ),
        (
            "offsetof(struct ibv_qp_attr, qp_access_flags)",
            offset_of!(ibv_qp_attr, qp_access_flags),
        ),
        (
            "offsetof(struct ibv_qp_attr, qp_state)",
            offset_of!(ibv_qp_attr, qp_state),
        ),
        (
            "offsetof(struct ibv_qp_attr, retry_cnt)",
            offset_of!(ibv_qp_attr, retry_cnt),
        ),
        (
            "offsetof(struct ibv_qp_attr, rq_psn)",
            offset_of!(ibv_qp_attr, rq_psn),
        ),
        (
            "offsetof(struct ibv_qp_attr, sq_psn)",
            offset_of!(ibv_qp_attr, sq_psn),
        ),
        (
            "offsetof(struct ibv_qp_attr, timeout)",
            offset_of!(ibv_qp_attr, timeout),
        ),
        (
            "offsetof(struct ibv_qp_init_attr, qp_context)",
            offset_of!(ibv_qp_init_attr, qp_context),
        ),
        (
            "offsetof(struct ibv_qp_init_attr, qp_type)",
            offset_of!(ibv_qp_init_attr, qp_type),
        ),
        (
            "offsetof(struct ibv_qp_init_attr, recv_cq)",
            offset_of!(ibv_qp_init_attr, recv_cq),
        ),
        (
            "offsetof(struct ibv_qp_init_attr, send_cq)",
            offset_of!(ibv_qp_init_attr, send_cq),
        ),
        (
            "offsetof(struct ibv_qp_init_attr, srq)",
            offset_of!(ibv_qp_init_attr, srq),
        ),
        (
            "offsetof(struct ibv_send_wr, next)",
            offset_of!(ibv_send_wr, next),
        ),
        (
            "offsetof(struct ibv_send_wr, num_sge)",
            offset_of!(ibv_send_wr, num_sge),
        ),
        (
            "offsetof(struct ibv_send_wr, opcode)",
            offset_of!(ibv_send_wr, opcode),
        ),
        (
            "offsetof(struct ibv_send_wr, send_flags)",
            offset_of!(ibv_send_wr, send_flags),
        ),
        (
            "offsetof(struct ibv_send_wr, sg_list)",
            offset_of!(ibv_send_wr, sg_list),
        ),
        (
            "offsetof(struct ibv_send_wr, wr)",
            offset_of!(ibv_send_wr, wr),
        ),
        (
            "offsetof(struct ibv_send_wr, wr_id)",
            offset_of!(ibv_send_wr, wr_id),
        ),
        (
            "offsetof(struct ibv_srq_init_attr_ex, attr)",
            offset_of!(ibv_srq_init_attr_ex, attr),
        ),
        (
            "offsetof(struct ibv_srq_init_attr_ex, srq_type)",
            offset_of!(ibv_srq_init_attr_ex, srq_type),
        ),
        (
            "offsetof(struct ibv_srq_init_attr_ex, xrcd)",
            offset_of!(ibv_srq_init_attr_ex, xrcd),
        ),
        (
            "offsetof(struct ibv_wc, byte_len)",
            offset_of!(ibv_wc, byte_len),
        ),
        (
            "offsetof(struct ibv_wc, opcode)",
            offset_of!(ibv_wc, opcode),
        ),
        (
            "offsetof(struct ibv_wc, qp_num)",
            offset_of!(ibv_wc, qp_num),
        ),
        (
            "offsetof(struct ibv_wc, status)",
            offset_of!(ibv_wc, status),
        ),
        ("offsetof(struct ibv_wc, wr_id)", offset_of!(ibv_wc, wr_id)),
        ("IBV_MTU_1024", IBV_MTU_1024 as usize),
        ("IBV_WC_SUCCESS", IBV_WC_SUCCESS as usize),
        ("IBV_WC_RECV", IBV_WC_RECV as usize),
        ("IBV_SRQ_INIT_ATTR_TYPE", IBV_SRQ_INIT_ATTR_TYPE as usize),
        ("IBV_SRQ_INIT_ATTR_PD", IBV_SRQ_INIT_ATTR_PD as usize),
        ("IBV_SRQ_INIT_ATTR_CQ", IBV_SRQ_INIT_ATTR_CQ as usize),
    ]
};

/// The layout tests' harness (this crate's and the drop-in librdmacm's):
/// writes `layout` as `layout_values.h` (one `CHECK(expr, value);` a
/// line) into `dir`, compiles the C program `c_src` with `cc` (include
/// path: `dir` and this crate's `tests/`, which holds the `CHECK` macro
/// in `layout_check.h`), runs it and returns its output (one line per
/// check, then "N mismatches"), or why it could not run.
#[doc(hidden)]
pub fn compile_and_run_layout_check(
    c_src: &std::path::Path,
    dir: &std::path::Path,
    layout: &[(&str, usize)],
) -> Result<String, String> {
    use std::process::Command;
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let values: String = layout
        .iter()
        .map(|(expr, v)| format!("CHECK({expr}, {v});\n"))
        .collect();
    std::fs::write(dir.join("layout_values.h"), values).map_err(|e| e.to_string())?;
    let shared = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let exe = dir.join("layout_check");
    let cc = Command::new("cc")
        .arg("-Wall")
        .arg("-I")
        .arg(dir)
        .arg("-I")
        .arg(&shared)
        .arg(c_src)
        .arg("-o")
        .arg(&exe)
        .output()
        .map_err(|e| format!("running cc (install gcc): {e}"))?;
    if !cc.status.success() {
        return Err(format!(
            "compiling {} failed:\n{}",
            c_src.display(),
            String::from_utf8_lossy(&cc.stderr)
        ));
    }
    let run = Command::new(&exe).output().map_err(|e| e.to_string())?;
    let out = String::from_utf8_lossy(&run.stdout).into_owned();
    if run.status.success() {
        Ok(out)
    } else {
        Err(format!("layouts differ from the headers:\n{out}"))
    }
}
