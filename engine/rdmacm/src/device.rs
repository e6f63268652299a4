//! The one device (the drop-in libibverbs' `roce-xdp0`), opened on first
//! use, its GSI (QP 1) and the CM thread.
//!
//! The CM thread owns the GSI's CQ, buffers and address handles; the
//! agent (`roce_xdp_proto::cm::CmAgent`) lives in the state
//! (`state.rs`), so the program's calls (connect, accept, ...) drive it
//! under the same lock and then wake the thread ([`wake`]), which sends
//! what the agent queued, turns its events into the program's
//! (`deliver`) and sleeps on the CQ's completion channel, the wake
//! eventfd and the agent's next timeout.

use crate::fork::PerGeneration;
use std::collections::HashMap;
use std::ffi::{c_int, c_void};
use std::net::Ipv4Addr;
use std::ptr::null_mut;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use proto::cm::mad::rej_reason;
use proto::cm::{CmAgent, CmConfig, CmEvent, MadAddress};
use proto::time::Instant;

use crate::abi::*;
use crate::ibv::*;
use crate::qp;
use crate::state::{self, fix_private, IdState, Phase, State};

/// The GSI's Q_Key (IBA 9.6.1.1).
const GSI_QKEY: u32 = 0x8001_0000;
const GRH_LEN: usize = 40;
const MAD_LEN: usize = 256;
/// Receives kept posted on QP 1, so that a burst of REQs is not dropped
/// and left to the peer's retry seconds later. The kernel's MAD layer
/// keeps 512 (`IB_MAD_QP_RECV_SIZE`, ib_mad's `recv_queue_size`) and
/// empties them in softirq context; this library's CM thread shares the
/// program's cores, and `ucmatose -c 512` (512 REQs, then 512 MRAs and
/// 512 RTUs) overflowed 512 now and then on a busy 2-core host. A dropped
/// RTU behind an MRA of 68.7 s (`CMA_CM_MRA_SETTING`, which this library
/// sends at once where the kernel's cma delays it) held a connection that
/// long. 2,048 receives of 296 bytes: 592 KiB per process.
const RECV_SLOTS: usize = 2048;
const SEND_SLOTS: usize = 64;
/// The source GID index of the MADs and of the consumers' paths: the
/// IPv4-mapped GID (RoCE v2).
pub const SGID_INDEX: u8 = 1;
/// How long a closed connection's IDs stay in timewait (the kernel's is
/// about twice the packet lifetime plus the ACK delay: about a second).
const TIMEWAIT: Duration = Duration::from_secs(1);

/// The opened device and what the ids read of it.
pub struct Device {
    pub ctx: *mut ibv_context,
    /// The PD of ids whose program gives none (`ucma_get_pd`).
    pub pd: *mut ibv_pd,
    /// GID 1: the IPv4-mapped address.
    pub gid: [u8; 16],
    /// GID 0: the link-local IPv6 address.
    pub gid0: [u8; 16],
    pub ip: Ipv4Addr,
    pub max_qp_rd_atom: u8,
    pub max_qp_init_rd_atom: u8,
    pub active_mtu: c_int,
    wake_fd: c_int,
    start: std::time::Instant,
}
// SAFETY: the pointers are the drop-in's objects, usable from any thread
// (verbs are thread-safe); the rest is immutable.
unsafe impl Send for Device {}
// SAFETY: as above.
unsafe impl Sync for Device {}

/// The device; a forked child's is its own (`fork.rs`).
static DEVICE: PerGeneration<Result<Device, c_int>> = PerGeneration::new();

/// Passes of the CM thread that ended with nothing to send and no MAD in
/// flight (every send slot free), counted under the state lock: `at_exit`
/// waits for one that began after it destroyed the connections, so their
/// DREQs, DREPs and REJs have left before the process does.
static QUIET_PASSES: AtomicU64 = AtomicU64::new(0);

/// [`QUIET_PASSES`] now (read it with the state lock held).
pub fn quiet_passes() -> u64 {
    QUIET_PASSES.load(Ordering::Acquire)
}

/// The device, opened (and the CM thread started) on first use; ENODEV
/// when the drop-in libibverbs has no device (its engine failed to start).
pub fn device() -> Result<&'static Device, c_int> {
    DEVICE.get(open).as_ref().map_err(|e| *e)
}

/// The device if it is open already.
pub fn opened() -> Option<&'static Device> {
    DEVICE.made().and_then(|d| d.as_ref().ok())
}

impl Device {
    pub fn now(&self) -> Instant {
        Instant::from_nanos(self.start.elapsed().as_nanos() as u64)
    }
}

/// Wakes the CM thread: the agent has something to send or deliver.
pub fn wake() {
    if let Some(d) = opened() {
        let one = 1u64;
        // SAFETY: writes 8 bytes from a live u64 to our eventfd.
        unsafe { libc::write(d.wake_fd, (&raw const one).cast::<c_void>(), 8) };
    }
}

fn open() -> Result<Device, c_int> {
    // SAFETY: the public verbs with valid arguments; every result checked.
    unsafe {
        let mut n = 0;
        let list = ibv_get_device_list(&mut n);
        if list.is_null() || n < 1 {
            if !list.is_null() {
                ibv_free_device_list(list);
            }
            return Err(libc::ENODEV);
        }
        let ctx = ibv_open_device(*list);
        ibv_free_device_list(list);
        if ctx.is_null() {
            return Err(libc::ENODEV);
        }
        let mut da: ibv_device_attr = std::mem::zeroed();
        let mut pa: ibv_port_attr = std::mem::zeroed();
        let (mut gid, mut gid0) = ([0u8; 16], [0u8; 16]);
        if ibv_query_device(ctx, &mut da) != 0
            || ibv_query_port(ctx, 1, &mut pa) != 0
            || ibv_query_gid(ctx, 1, c_int::from(SGID_INDEX), &mut gid) != 0
            || ibv_query_gid(ctx, 1, 0, &mut gid0) != 0
        {
            return Err(libc::ENODEV);
        }
        let pd = ibv_alloc_pd(ctx);
        if pd.is_null() {
            return Err(libc::ENOMEM);
        }
        let wake_fd = libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK);
        if wake_fd < 0 {
            return Err(libc::EMFILE);
        }
        let gsi = Gsi::create(ctx)?;
        let dev = Device {
            ctx,
            pd,
            gid,
            gid0,
            ip: Ipv4Addr::new(gid[12], gid[13], gid[14], gid[15]),
            max_qp_rd_atom: da.max_qp_rd_atom.clamp(0, 255) as u8,
            max_qp_init_rd_atom: da.max_qp_init_rd_atom.clamp(0, 255) as u8,
            active_mtu: pa.active_mtu,
            wake_fd,
            start: std::time::Instant::now(),
        };
        // Attached to a shared engine, the service finds our MADs by our
        // communication IDs' top byte (docs/shared-engine.md).
        let prefix = roce_xdp_share_cm(std::ptr::null(), 0);
        let config = CmConfig {
            local_gid: gid,
            ca_guid: da.node_guid,
            timewait: TIMEWAIT,
            tid_seed: std::process::id(),
            first_comm_id: random_u32() | 1,
            comm_id_prefix: (1..=255).contains(&prefix).then_some(prefix as u8),
            ..CmConfig::default()
        };
        state::lock().agent = Some(CmAgent::new(config));
        // `roce-xdp stats` shows the agent's counters (the stats channel
        // is the drop-in libibverbs').
        // (Inside this function's unsafe block: a function of ours that
        // stays valid while the library is loaded.)
        roce_xdp_set_cm_counters(Some(cm_counters));
        // The kernel destroys a process's ids when it exits (DREP, DREQ,
        // REJ): so does this library.
        libc::atexit(crate::ffi::at_exit);
        // The CM thread takes none of the program's signals: the calling
        // thread's mask is widened around the spawn (the new thread
        // inherits it) and put back. The drop-in libibverbs' threads do the
        // same (`engine::io::spawn_without_signals` says why; this crate
        // does not link the engine). Faults stay deliverable.
        let mut blocked: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut blocked);
        for s in [
            libc::SIGSEGV,
            libc::SIGBUS,
            libc::SIGFPE,
            libc::SIGILL,
            libc::SIGTRAP,
        ] {
            libc::sigdelset(&mut blocked, s);
        }
        libc::pthread_sigmask(libc::SIG_BLOCK, &blocked, &mut old);
        let spawned = std::thread::Builder::new()
            .name("rdmacm".into())
            .spawn(move || gsi.run());
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        spawned.map_err(|_| libc::EAGAIN)?;
        Ok(dev)
    }
}

/// A random 32-bit number (starting PSNs, comm IDs).
pub fn random_u32() -> u32 {
    let mut v = 0u32;
    // SAFETY: writes 4 bytes into a live u32.
    let n = unsafe { libc::getrandom((&raw mut v).cast(), 4, 0) };
    if n != 4 {
        v = std::process::id().wrapping_mul(2_654_435_761);
    }
    v
}

/// The GSI QP and what the CM thread uses with it.
struct Gsi {
    pd: *mut ibv_pd,
    channel: *mut ibv_comp_channel,
    cq: *mut ibv_cq,
    qp: *mut ibv_qp,
    mr: *mut ibv_mr,
    buf: Vec<u8>,
    free_sends: Vec<usize>,
    ahs: HashMap<[u8; 16], *mut ibv_ah>,
}
// SAFETY: moved once into the CM thread, which alone uses it.
unsafe impl Send for Gsi {}

impl Gsi {
    /// Creates QP 1 on its own PD and CQ, moves it to RTS and posts its
    /// receives.
    unsafe fn create(ctx: *mut ibv_context) -> Result<Gsi, c_int> {
        // SAFETY: public verbs on the live context; results checked.
        unsafe {
            let pd = ibv_alloc_pd(ctx);
            let channel = ibv_create_comp_channel(ctx);
            if pd.is_null() || channel.is_null() {
                return Err(libc::ENOMEM);
            }
            let cq = ibv_create_cq(
                ctx,
                (RECV_SLOTS + SEND_SLOTS) as c_int,
                null_mut(),
                channel,
                0,
            );
            if cq.is_null() {
                return Err(libc::ENOMEM);
            }
            let mut init: ibv_qp_init_attr = std::mem::zeroed();
            init.send_cq = cq;
            init.recv_cq = cq;
            init.cap.max_send_wr = SEND_SLOTS as u32;
            init.cap.max_recv_wr = RECV_SLOTS as u32;
            init.cap.max_send_sge = 1;
            init.cap.max_recv_sge = 1;
            init.qp_type = IBV_QPT_UD;
            let qp = roce_xdp_create_gsi_qp(pd, &mut init);
            if qp.is_null() {
                return Err(*libc::__errno_location());
            }
            let mut a: ibv_qp_attr = std::mem::zeroed();
            a.qp_state = IBV_QPS_INIT;
            a.port_num = 1;
            a.qkey = GSI_QKEY;
            let mut r = ibv_modify_qp(
                qp,
                &mut a,
                IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY,
            );
            a.qp_state = IBV_QPS_RTR;
            r |= ibv_modify_qp(qp, &mut a, IBV_QP_STATE);
            a.qp_state = IBV_QPS_RTS;
            r |= ibv_modify_qp(qp, &mut a, IBV_QP_STATE | IBV_QP_SQ_PSN);
            if r != 0 {
                return Err(libc::EINVAL);
            }
            let mut buf = vec![0u8; RECV_SLOTS * (GRH_LEN + MAD_LEN) + SEND_SLOTS * MAD_LEN];
            let mr = ibv_reg_mr(
                pd,
                buf.as_mut_ptr().cast(),
                buf.len(),
                IBV_ACCESS_LOCAL_WRITE as c_int,
            );
            if mr.is_null() {
                return Err(libc::ENOMEM);
            }
            let g = Gsi {
                pd,
                channel,
                cq,
                qp,
                mr,
                buf,
                free_sends: (0..SEND_SLOTS).collect(),
                ahs: HashMap::new(),
            };
            for i in 0..RECV_SLOTS {
                g.post_recv(i)?;
            }
            if ibv_req_notify_cq(cq, 0) != 0 {
                return Err(libc::EINVAL);
            }
            Ok(g)
        }
    }

    fn recv_offset(i: usize) -> usize {
        i * (GRH_LEN + MAD_LEN)
    }

    fn send_offset(i: usize) -> usize {
        RECV_SLOTS * (GRH_LEN + MAD_LEN) + i * MAD_LEN
    }

    fn post_recv(&self, i: usize) -> Result<(), c_int> {
        let mut sge = ibv_sge {
            addr: self.buf.as_ptr() as u64 + Self::recv_offset(i) as u64,
            length: (GRH_LEN + MAD_LEN) as u32,
            // SAFETY: the MR is live for the thread's life.
            lkey: unsafe { (*self.mr).lkey },
        };
        let mut wr = ibv_recv_wr {
            wr_id: i as u64,
            next: null_mut(),
            sg_list: &mut sge,
            num_sge: 1,
        };
        // SAFETY: the live GSI QP; the WR and SGE outlive the call.
        match unsafe { ibv_post_recv(self.qp, &mut wr) } {
            0 => Ok(()),
            e => Err(e),
        }
    }

    /// The address handle toward `gid` (made once per peer).
    fn ah(&mut self, gid: [u8; 16]) -> *mut ibv_ah {
        if let Some(&a) = self.ahs.get(&gid) {
            return a;
        }
        let mut attr = ibv_ah_attr {
            is_global: 1,
            port_num: 1,
            ..Default::default()
        };
        attr.grh.dgid = gid;
        attr.grh.sgid_index = SGID_INDEX;
        attr.grh.hop_limit = 64;
        // SAFETY: the live PD; the attributes outlive the call.
        let a = unsafe { ibv_create_ah(self.pd, &mut attr) };
        if !a.is_null() {
            self.ahs.insert(gid, a);
        }
        a
    }

    /// Sends what the agent queued, as long as a send slot is free.
    fn transmit(&mut self, st: &mut State, now: Instant) {
        let Some(agent) = st.agent.as_mut() else {
            return;
        };
        while let Some(&slot) = self.free_sends.last() {
            let mut mad = [0u8; MAD_LEN];
            let Some(to) = agent.poll_transmit(now, &mut mad) else {
                break;
            };
            let off = Self::send_offset(slot);
            self.buf[off..off + MAD_LEN].copy_from_slice(&mad);
            let ah = self.ah(to.gid);
            if ah.is_null() {
                continue; // no route to the peer: as a lost MAD
            }
            let mut sge = ibv_sge {
                addr: self.buf.as_ptr() as u64 + off as u64,
                length: MAD_LEN as u32,
                // SAFETY: the MR is live.
                lkey: unsafe { (*self.mr).lkey },
            };
            // SAFETY: ibv_send_wr is plain data.
            let mut wr: ibv_send_wr = unsafe { std::mem::zeroed() };
            wr.wr_id = (RECV_SLOTS + slot) as u64;
            wr.sg_list = &mut sge;
            wr.num_sge = 1;
            wr.opcode = IBV_WR_SEND;
            wr.send_flags = IBV_SEND_SIGNALED;
            // wr.ud: ah, remote_qpn, remote_qkey.
            wr.wr.remote_addr = ah as u64;
            wr.wr.rdma_rkey_or_compare_add = u64::from(to.qpn) | (u64::from(to.qkey) << 32);
            // SAFETY: the live GSI QP; WR and SGE outlive the call.
            if unsafe { ibv_post_send(self.qp, &mut wr) } == 0 {
                self.free_sends.pop();
            }
        }
    }

    /// Takes the GSI's completions: MADs received go to the agent.
    fn complete(&mut self, st: &mut State, now: Instant) {
        let mut wcs = [ibv_wc::default(); 16];
        loop {
            // SAFETY: the live CQ; the array holds 16.
            let n = unsafe { ibv_poll_cq(self.cq, 16, wcs.as_mut_ptr()) };
            if n <= 0 {
                return;
            }
            for wc in &wcs[..n as usize] {
                let id = wc.wr_id as usize;
                if id >= RECV_SLOTS {
                    self.free_sends.push(id - RECV_SLOTS);
                    continue;
                }
                if wc.status == IBV_WC_SUCCESS && wc.byte_len as usize > GRH_LEN {
                    let off = Self::recv_offset(id);
                    let grh = &self.buf[off..off + GRH_LEN];
                    let gid = source_gid(grh);
                    let len = (wc.byte_len as usize - GRH_LEN).min(MAD_LEN);
                    let from = MadAddress {
                        gid,
                        qpn: wc.src_qp,
                        qkey: GSI_QKEY,
                        pkey_index: wc.pkey_index,
                    };
                    if let Some(agent) = st.agent.as_mut() {
                        agent.handle_mad(now, &from, &self.buf[off + GRH_LEN..off + GRH_LEN + len]);
                    }
                }
                let _ = self.post_recv(id);
            }
        }
    }

    /// The CM thread.
    fn run(mut self) {
        let dev = loop {
            // The device is published right after this thread starts.
            match opened() {
                Some(d) => break d,
                None => std::thread::sleep(Duration::from_millis(1)),
            }
        };
        // SAFETY: the channel is live; its fd is ours to poll.
        let cfd = unsafe { (*self.channel).fd };
        loop {
            let timeout = {
                let mut st = state::lock();
                let now = dev.now();
                if let Some(a) = st.agent.as_mut() {
                    if a.poll_timeout().is_some_and(|t| t <= now) {
                        a.handle_timeout(now);
                    }
                }
                self.complete(&mut st, now);
                // Events may make the agent send (RTU, REJ): loop until
                // neither has anything.
                loop {
                    self.transmit(&mut st, now);
                    let Some(ev) = st.agent.as_mut().and_then(|a| a.poll_event()) else {
                        break;
                    };
                    deliver(&mut st, dev, now, ev);
                }
                if self.free_sends.len() == SEND_SLOTS {
                    QUIET_PASSES.fetch_add(1, Ordering::Release);
                }
                st.agent
                    .as_ref()
                    .and_then(|a| a.poll_timeout())
                    .map(|t| t.saturating_duration_since(now))
            };
            let ms = match timeout {
                None => -1,
                Some(d) => d.as_millis().min(1000) as c_int + 1,
            };
            let mut fds = [
                libc::pollfd {
                    fd: cfd,
                    events: libc::POLLIN,
                    revents: 0,
                },
                libc::pollfd {
                    fd: dev.wake_fd,
                    events: libc::POLLIN,
                    revents: 0,
                },
            ];
            // SAFETY: two live pollfds.
            unsafe { libc::poll(fds.as_mut_ptr(), 2, ms) };
            if fds[1].revents != 0 {
                let mut v = 0u64;
                // SAFETY: reads 8 bytes into a live u64.
                unsafe { libc::read(dev.wake_fd, (&raw mut v).cast(), 8) };
            }
            if fds[0].revents != 0 {
                let (mut cq, mut cctx) = (null_mut(), null_mut());
                // SAFETY: the live channel; out-pointers to locals.
                if unsafe { ibv_get_cq_event(self.channel, &mut cq, &mut cctx) } == 0 {
                    // SAFETY: the CQ the event names is ours.
                    unsafe {
                        ibv_ack_cq_events(cq, 1);
                        ibv_req_notify_cq(cq, 0);
                    }
                }
            }
        }
    }
}

/// The agent's counters for `roce-xdp stats` (called by the drop-in
/// libibverbs' stats thread): up to `cap` static names and values.
unsafe extern "C" fn cm_counters(
    names: *mut *const std::ffi::c_char,
    values: *mut u64,
    cap: usize,
) -> usize {
    let c = match state::lock().agent.as_ref() {
        Some(a) => *a.counters(),
        None => return 0,
    };
    let all = c.named();
    let n = all.len().min(cap);
    for (i, (name, v)) in all[..n].iter().enumerate() {
        // SAFETY: the caller's arrays hold `cap` >= n entries.
        unsafe {
            *names.add(i) = name.as_ptr();
            *values.add(i) = *v;
        }
    }
    n
}

/// The sender's GID from a UD receive's 40-byte GRH area: over IPv4 (20
/// zero bytes, then the IPv4 header) the IPv4-mapped source address, else
/// the IPv6 header's source.
fn source_gid(grh: &[u8]) -> [u8; 16] {
    let mut g = [0u8; 16];
    if grh[..20].iter().all(|&b| b == 0) && grh[20] >> 4 == 4 {
        g[10] = 0xff;
        g[11] = 0xff;
        g[12..].copy_from_slice(&grh[32..36]);
    } else {
        g.copy_from_slice(&grh[8..24]);
    }
    g
}

/// The service timeout of the MRAs the CM sends for a request or reply
/// the program has not answered yet: 2^24 x 4.096 us (68.7 s), the
/// kernel cma's CMA_CM_MRA_SETTING (IBA 12.6.6: the peer waits that
/// long plus its ACK timeout before resending).
pub const CMA_CM_MRA_SETTING: u8 = 24;

/// `-ETIMEDOUT`, the status of UNREACHABLE events after retries.
const ETIMEDOUT: c_int = -libc::ETIMEDOUT;

/// Turns one agent event into the program's `rdma_cm_event` (the kernel
/// cma's `cma_ib_handler` / `cma_ib_req_handler` / `cma_sidr_rep_handler`
/// and librdmacm's `ucma_process_conn_resp`).
fn deliver(st: &mut State, dev: &Device, now: Instant, ev: CmEvent) {
    match ev {
        CmEvent::ReqReceived {
            listener,
            conn,
            req,
        } => crate::ffi::conn_request(st, dev, listener, conn, Some(&req), None),
        CmEvent::SidrReqReceived {
            listener,
            conn,
            req,
        } => crate::ffi::conn_request(st, dev, listener, conn, None, Some(&req)),
        _ => {
            let Some(&idp) = st.conns.get(&ev.conn()) else {
                return; // its id is gone
            };
            let p = idp as *mut rdma_cm_id;
            let Ok((s, id)) = st.id(p) else {
                return;
            };
            let channel = id.c.channel;
            let qp = id.c.qp;
            let mut e = match ev {
                CmEvent::RepReceived { conn, rep } => {
                    s.remote_qpn = rep.remote_qpn;
                    s.remote_psn = rep.starting_psn;
                    // REP's view: its initiator depth bounds what we
                    // answer, its responder resources what we send.
                    s.responder_resources = s.responder_resources.min(rep.initiator_depth);
                    s.initiator_depth = s.initiator_depth.min(rep.responder_resources);
                    s.rnr_retry_count = rep.rnr_retry_count;
                    // The kernel's cma_ib_handler (IB_CM_REP_RECEIVED, a
                    // connected QP): an MRA before the program answers.
                    if let Some(agent) = st.agent.as_mut() {
                        let _ = agent.send_mra(now, conn, CMA_CM_MRA_SETTING);
                    }
                    let Ok((s, _)) = st.id(p) else {
                        return;
                    };
                    let mut e = State::event(
                        p,
                        RDMA_CM_EVENT_CONNECT_RESPONSE,
                        0,
                        rep.private_data.as_slice(),
                    );
                    conn_param(
                        &mut e,
                        rep.responder_resources,
                        rep.initiator_depth,
                        rep.flow_control,
                        rep.rnr_retry_count,
                        rep.srq,
                        rep.remote_qpn,
                    );
                    if !qp.is_null() {
                        // librdmacm's ucma_process_conn_resp: RTR, RTS,
                        // then the RTU; the program sees ESTABLISHED.
                        let r = qp::modify_rtr(s, dev, qp, RDMA_MAX_RESP_RES)
                            .and_then(|()| qp::modify_rts(s, qp, RDMA_MAX_INIT_DEPTH));
                        let Some(agent) = st.agent.as_mut() else {
                            return;
                        };
                        match r {
                            Ok(()) => {
                                let _ = agent.send_rtu(now, conn, &[]);
                                e.c.event = RDMA_CM_EVENT_ESTABLISHED;
                            }
                            Err(err) => {
                                qp::modify_err(qp);
                                let _ = agent.reject(now, conn, rej_reason::CONSUMER_DEFINED, &[]);
                                e.c.event = RDMA_CM_EVENT_CONNECT_ERROR;
                                e.c.status = -err;
                            }
                        }
                        let Ok((s, _)) = st.id(p) else {
                            return;
                        };
                        s.phase = if e.c.event == RDMA_CM_EVENT_ESTABLISHED {
                            Phase::Established
                        } else {
                            Phase::Disconnected
                        };
                    }
                    e
                }
                CmEvent::Established { .. } => {
                    if s.active {
                        return; // reported with the REP (or left to rdma_establish)
                    }
                    s.phase = Phase::Established;
                    State::event(p, RDMA_CM_EVENT_ESTABLISHED, 0, &[])
                }
                CmEvent::Rejected {
                    reason,
                    private_data,
                    ..
                } => {
                    s.phase = Phase::Disconnected;
                    if !qp.is_null() {
                        qp::modify_err(qp);
                    }
                    State::event(
                        p,
                        RDMA_CM_EVENT_REJECTED,
                        c_int::from(reason),
                        private_data.as_slice(),
                    )
                }
                CmEvent::Unreachable { .. } => {
                    s.phase = Phase::Disconnected;
                    if !qp.is_null() {
                        qp::modify_err(qp);
                    }
                    State::event(p, RDMA_CM_EVENT_UNREACHABLE, ETIMEDOUT, &[])
                }
                CmEvent::DisconnectRequested { private_data, .. } => {
                    if s.disconnect_reported {
                        return;
                    }
                    s.disconnect_reported = true;
                    s.phase = Phase::Disconnected;
                    State::event(p, RDMA_CM_EVENT_DISCONNECTED, 0, private_data.as_slice())
                }
                CmEvent::Disconnected { .. } => {
                    if s.disconnect_reported {
                        return;
                    }
                    s.disconnect_reported = true;
                    s.phase = Phase::Disconnected;
                    State::event(p, RDMA_CM_EVENT_DISCONNECTED, 0, &[])
                }
                CmEvent::TimewaitExit { conn } => {
                    st.conns.remove(&conn);
                    let Ok((s, _)) = st.id(p) else {
                        return;
                    };
                    s.conn = None;
                    State::event(p, RDMA_CM_EVENT_TIMEWAIT_EXIT, 0, &[])
                }
                CmEvent::SidrRepReceived {
                    conn,
                    status,
                    qpn,
                    qkey,
                    private_data,
                } => {
                    st.conns.remove(&conn);
                    let Ok((s, _)) = st.id(p) else {
                        return;
                    };
                    s.conn = None;
                    if status != 0 {
                        s.phase = Phase::Disconnected;
                        State::event(p, RDMA_CM_EVENT_UNREACHABLE, c_int::from(status), &[])
                    } else {
                        s.phase = Phase::Established;
                        let mut e = State::event(p, RDMA_CM_EVENT_ESTABLISHED, 0, &[]);
                        ud_param(&mut e, s, dev, private_data.as_slice(), qpn, qkey);
                        e
                    }
                }
                CmEvent::SidrUnreachable { conn } => {
                    st.conns.remove(&conn);
                    let Ok((s, _)) = st.id(p) else {
                        return;
                    };
                    s.conn = None;
                    s.phase = Phase::Disconnected;
                    State::event(p, RDMA_CM_EVENT_UNREACHABLE, ETIMEDOUT, &[])
                }
                // Handled above.
                CmEvent::ReqReceived { .. } | CmEvent::SidrReqReceived { .. } => return,
            };
            fix_private(&mut e, false);
            st.push(channel, e);
        }
    }
}

/// Fills `param.conn` (private data set by [`State::event`]).
pub fn conn_param(
    e: &mut state::Event,
    resp: u8,
    init: u8,
    flow: bool,
    rnr: u8,
    srq: bool,
    qpn: u32,
) {
    // SAFETY: the conn member of the union is plain data.
    let c = unsafe { &mut e.c.param.conn };
    c.responder_resources = resp;
    c.initiator_depth = init;
    c.flow_control = u8::from(flow);
    c.rnr_retry_count = rnr;
    c.srq = u8::from(srq);
    c.qp_num = qpn;
}

/// Fills `param.ud` for a UD peer: the address handle attributes toward
/// it, its QP number and Q_Key, the private data.
pub fn ud_param(
    e: &mut state::Event,
    s: &IdState,
    _dev: &Device,
    private: &[u8],
    qpn: u32,
    qkey: u32,
) {
    let n = private.len().min(e.data.len());
    e.data[..n].copy_from_slice(&private[..n]);
    // SAFETY: the ud member of the union is plain data.
    let u = unsafe { &mut e.c.param.ud };
    u.private_data = if n > 0 {
        e.data.as_ptr().cast()
    } else {
        std::ptr::null()
    };
    u.private_data_len = n as u8;
    u.ah_attr = qp::ah_attr(s);
    u.qp_num = qpn;
    u.qkey = qkey;
}

#[cfg(test)]
mod tests {
    use super::source_gid;

    #[test]
    fn the_sender_gid_comes_from_the_grh_area() {
        // RoCE v2 over IPv4: 20 zero bytes, then the IPv4 header (source
        // at its bytes 12..16).
        let mut grh = [0u8; 40];
        grh[20] = 0x45;
        grh[32..36].copy_from_slice(&[10, 55, 0, 2]);
        assert_eq!(
            source_gid(&grh),
            [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 55, 0, 2]
        );
        // Over IPv6: the IPv6 header's source address (bytes 8..24).
        let mut grh = [0u8; 40];
        grh[0] = 0x60;
        grh[8] = 0xfe;
        grh[9] = 0x80;
        grh[23] = 7;
        let g = source_gid(&grh);
        assert_eq!((g[0], g[1], g[15]), (0xfe, 0x80, 7));
    }
}
