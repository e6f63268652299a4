//! The process's RDMA CM objects behind one lock: ids (`rdma_cm_id` at the
//! head of an [`Id`]), event channels and their queues, events handed out
//! and not yet acked, bound ports, and the CM agent's connections and
//! listeners. Every pointer a program passes in is looked up here before
//! it is read: NULL or anything this library did not hand out is refused
//! with `EINVAL` (rdma-core would crash; the errno is its argument check's).

use std::collections::{HashMap, HashSet, VecDeque};
use std::ffi::{c_int, c_void};
use std::sync::{Mutex, MutexGuard};

use crate::fork::PerGeneration;

use proto::cm::{CmAgent, ConnId, ListenerId};

use crate::abi::*;
use crate::ibv::*;

/// Where an id stands (the kernel cma's `rdma_cm_state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Idle,
    AddrBound,
    AddrResolved,
    RouteResolved,
    Listen,
    /// REQ / SIDR_REQ sent.
    Connect,
    /// Passive: REQ received, not yet accepted or rejected.
    ConnectRequest,
    /// Passive: REP sent, waiting for the RTU.
    Accepted,
    Established,
    Disconnected,
}

/// What an id holds beyond `rdma_cm_id`.
pub struct IdState {
    /// Its channel was made for it (`rdma_create_id` with NULL): the calls
    /// wait for their own events (`ucma_complete`).
    pub sync: bool,
    pub phase: Phase,
    pub port: Option<u16>,
    pub conn: Option<ConnId>,
    pub listener: Option<ListenerId>,
    /// The active side (sent the REQ).
    pub active: bool,
    pub peer_gid: [u8; 16],
    /// The Starting PSN our REQ/REP announces (the kernel's `seq_num`):
    /// the PSN our receive queue expects first (`rq_psn`).
    pub psn: u32,
    pub remote_qpn: u32,
    /// The peer's REQ/REP Starting PSN: the PSN our send queue starts
    /// from (`sq_psn`).
    pub remote_psn: u32,
    pub responder_resources: u8,
    pub initiator_depth: u8,
    pub retry_count: u8,
    pub rnr_retry_count: u8,
    pub path_mtu: c_int,
    pub tos: u8,
    pub reuseaddr: bool,
    pub afonly: bool,
    pub ack_timeout: Option<u8>,
    pub qkey: u32,
    pub disconnect_reported: bool,
    /// The QP's (send, recv) CQs and channels were made by `rdma_create_qp`.
    pub own_cqs: (bool, bool),
    /// rdma_create_ep's passive attributes, for `rdma_get_request`.
    pub qp_init_attr: Option<Box<ibv_qp_init_attr>>,
    /// `ai_connect` of rdma_create_ep, prefixed to rdma_connect's data.
    pub connect_data: Vec<u8>,
}

impl IdState {
    pub fn new(sync: bool) -> IdState {
        IdState {
            sync,
            phase: Phase::Idle,
            port: None,
            conn: None,
            listener: None,
            active: false,
            peer_gid: [0; 16],
            psn: 0,
            remote_qpn: 0,
            remote_psn: 0,
            responder_resources: 0,
            initiator_depth: 0,
            retry_count: 7,
            rnr_retry_count: 7,
            path_mtu: IBV_MTU_1024,
            tos: 0,
            reuseaddr: false,
            afonly: false,
            ack_timeout: None,
            qkey: 0,
            disconnect_reported: false,
            own_cqs: (false, false),
            qp_init_attr: None,
            connect_data: Vec::new(),
        }
    }
}

/// The object handed to the program: `rdma_cm_id` first, then its path
/// record (`route.path_rec` points at it).
#[repr(C)]
pub struct Id {
    pub c: rdma_cm_id,
    pub path: ibv_sa_path_rec,
}

/// An event handed to the program: `rdma_cm_event` first, then the
/// private data its `param` points at.
#[repr(C)]
pub struct Event {
    pub c: rdma_cm_event,
    pub data: [u8; 256],
}

/// An event channel: `rdma_event_channel` (its `fd` an eventfd counting
/// the queued events, in semaphore mode) and nothing else.
#[repr(C)]
pub struct Channel {
    pub c: rdma_event_channel,
}

/// How many destroyed channels are kept (see `State::retired_channels`).
pub const RETIRED_CHANNELS: usize = 16;

#[derive(Default)]
pub struct State {
    pub ids: HashMap<usize, IdState>,
    /// Channel address -> events not yet returned by rdma_get_cm_event.
    pub channels: HashMap<usize, VecDeque<usize>>,
    /// Destroyed channels, oldest first, kept (box and eventfd) for a
    /// while: a thread of the program that waits on a channel while
    /// another destroys it (rping's CM thread as its main thread ends)
    /// keeps waiting, as a thread in the kernel's file does when the file
    /// is closed under it, instead of reading a closed descriptor or a
    /// freed box. At most [`RETIRED_CHANNELS`].
    pub retired_channels: VecDeque<usize>,
    /// Events returned and not yet acked.
    pub events: HashSet<usize>,
    /// (port space, port) -> ids bound to it.
    pub ports: HashMap<(c_int, u16), Vec<usize>>,
    pub conns: HashMap<ConnId, usize>,
    pub listeners: HashMap<ListenerId, usize>,
    /// The CM agent of the device's port (made when the device opens).
    pub agent: Option<CmAgent>,
}

// SAFETY: the raw pointers in the state (rdma_create_ep's QP attributes)
// are the program's objects, usable from any thread as verbs allow; the
// state is only reached through the lock.
unsafe impl Send for State {}

/// The process's state; a forked child's is its own (`fork.rs`).
static STATE: PerGeneration<Mutex<State>> = PerGeneration::new();

pub type Guard = MutexGuard<'static, State>;

/// The state, locked (a panic while holding it leaves it usable).
pub fn lock() -> Guard {
    STATE
        .get(|| Mutex::new(State::default()))
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

impl State {
    /// The live id at `p` (and its `rdma_cm_id`), or EINVAL.
    pub fn id(&mut self, p: *mut rdma_cm_id) -> Result<(&mut IdState, &mut Id), c_int> {
        let st = self.ids.get_mut(&(p as usize)).ok_or(libc::EINVAL)?;
        // SAFETY: a registered id is a live Box<Id> this library made;
        // the lock serializes this library's writes to it.
        Ok((st, unsafe { &mut *(p as *mut Id) }))
    }

    /// Queues `ev` on `channel` and counts it on the channel's eventfd.
    pub fn push(&mut self, channel: *mut rdma_event_channel, ev: Box<Event>) {
        let Some(q) = self.channels.get_mut(&(channel as usize)) else {
            return; // the channel is gone: nobody can read the event
        };
        q.push_back(Box::into_raw(ev) as usize);
        // SAFETY: a registered channel is live; its fd is our eventfd.
        let fd = unsafe { (*channel).fd };
        let one = 1u64;
        // SAFETY: writes 8 bytes from a live u64.
        unsafe { libc::write(fd, (&raw const one).cast::<c_void>(), 8) };
    }

    /// A fresh event of `ty` for `id` (private data copied in).
    pub fn event(id: *mut rdma_cm_id, ty: c_int, status: c_int, private: &[u8]) -> Box<Event> {
        // SAFETY: rdma_cm_event and the byte array are plain data; zero is
        // a valid value of each (NULL pointers, 0 integers).
        let mut e: Box<Event> = Box::new(unsafe { std::mem::zeroed() });
        e.c.id = id;
        e.c.event = ty;
        e.c.status = status;
        let n = private.len().min(e.data.len());
        e.data[..n].copy_from_slice(&private[..n]);
        e.c.param.conn.private_data_len = n as u8;
        if n > 0 {
            e.c.param.conn.private_data = e.data.as_ptr().cast();
        }
        e
    }
}

/// Points an event's private data at its own copy (after it is boxed, so
/// the address is final): the ud member when `ud`.
pub fn fix_private(e: &mut Event, ud: bool) {
    let p = e.data.as_ptr().cast::<c_void>();
    // SAFETY: plain data members of a union.
    unsafe {
        if ud {
            if e.c.param.ud.private_data_len > 0 {
                e.c.param.ud.private_data = p;
            }
        } else if e.c.param.conn.private_data_len > 0 {
            e.c.param.conn.private_data = p;
        }
    }
}
