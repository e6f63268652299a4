//! One endpoint with UD QPs (QP 1, the GSI, and an ordinary one) and two
//! UC QPs connected to each other, fed frames built from the input:
//! mostly well-formed RoCE v2 frames with the UD (DETH) and UC opcodes and
//! fields chosen or mutated by the input (ICRC recomputed, so the QPs'
//! checks see them), frames taken from the input with their ICRC made
//! right, raw bytes, and the endpoint's own datagrams and UC packets sent
//! back to it (an address handle and a connection to itself), interleaved
//! with receives (of every size, some too small for the GRH and the
//! payload, some in regions without the right or of another PD), sends,
//! WRITEs, Q_Key changes, QP resets and timeouts.
//!
//! Invariants after every step:
//! - no panic;
//! - every completion is for work outstanding on its QP and queue, once;
//!   a receive's `byte_len` lies within the receive's length; a UD
//!   receive completion carries the sender (`ud`) exactly when it
//!   succeeded, and it then matches the frame just fed (source QP,
//!   immediate, length = 40 + payload) and its buffer holds the GRH area
//!   (20 zero bytes and the IPv4 header) and the payload; no other
//!   completion carries a sender;
//! - no byte outside what may be written changes: every region keeps its
//!   bytes except inside receive buffers posted to it (by a QP of its PD,
//!   with LOCAL_WRITE) and, in the one region with REMOTE_WRITE, when a UC
//!   QP allows remote WRITEs; the regions without LOCAL_WRITE, with
//!   REMOTE_READ only, or of another PD never change;
//! - the endpoint's counters never decrease.

use core::net::{IpAddr, Ipv4Addr};
use std::collections::{BTreeMap, VecDeque};

use proto::endpoint::{ConnectOptions, Endpoint, EndpointConfig, RemoteQp};
use proto::rc::{
    Access, Counters, MrKeys, Mtu, QpInitAttr, QpState, RecvWr, RemoteAddress, SendOp, SendWr, Sge,
    WcOpcode, WcStatus, WorkCompletion,
};
use proto::time::Instant;
use proto::ud::{AhAttr, UdQpAttr, UdQpAttrMask, UdSendOp, UdSendWr, GRH_LEN, GSI_QKEY, GSI_QPN};
use proto::wire::{
    emit_frame, frame_icrc, icrc, parse_frame, BthRepr, DethRepr, Ecn, EthRepr, IpRepr, Opcode,
    RethRepr, RoceHeaders, UdpRepr, ROCE_V2_UDP_PORT,
};

use crate::headers::{conform, flip, mutate_payload};
use crate::input::Input;

/// Steps of one input at most.
const MAX_STEPS: usize = 300;
/// Frames the endpoint sent, held for delivery, at most.
const MAX_QUEUED: usize = 64;

pub const MAC: [u8; 6] = [2, 0, 0, 0, 0, 0x1D];
pub const IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
/// The peer a synthesized frame comes from.
const PEER_MAC: [u8; 6] = [2, 0, 0, 0, 0, 0x2E];
const PEER_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
/// The ordinary UD QP's Q_Key at start.
pub const QKEY: u32 = 0x1234_5678;

/// The first byte of each kind of step (`World::step`): what the seed
/// writer (`src/bin/seeds.rs`) and the tests build programs from.
pub mod op {
    /// A frame from the input (`u16` length, the bytes), ICRC made right.
    pub const FRAME: u8 = 90;
    /// The endpoint's next own frame back to it.
    pub const OWN: u8 = 105;
    pub const UD_RECV: u8 = 150;
    pub const UD_SEND: u8 = 185;
    pub const UC_RECV: u8 = 205;
    pub const UC_SEND: u8 = 220;
    pub const MODIFY: u8 = 240;
}

/// A step feeding `frame` (shorter than 4200 bytes) as it is.
pub fn frame_step(frame: &[u8]) -> Vec<u8> {
    assert!(frame.len() < 4200);
    let mut v = vec![op::FRAME];
    v.extend_from_slice(&(frame.len() as u16).to_be_bytes());
    v.extend_from_slice(frame);
    v
}

/// A step posting a UD receive of size class `class` (`post_ud_recv`:
/// 3 is 40 bytes, 5 is 40 + 256, 6 is 40 + 1024, 7 is 40 + 4096) on QP 1
/// or the ordinary UD QP, at `off` in the receive region.
pub fn ud_recv_step(gsi: bool, class: u8, off: u16) -> Vec<u8> {
    let [hi, lo] = off.to_be_bytes();
    vec![op::UD_RECV, u8::from(gsi), class, 15, 1, hi, lo, 1]
}

/// A step posting a receive of `len` bytes on UC QP B at `off` in the
/// receive region.
pub fn uc_recv_step(len: u16, off: u16) -> Vec<u8> {
    let [lh, ll] = len.to_be_bytes();
    let [hi, lo] = off.to_be_bytes();
    vec![op::UC_RECV, 0, 2, lh, ll, 15, 1, hi, lo, 1]
}

/// The regions: where each starts (IOVA), its size, rights and PD.
struct RegionSpec {
    iova: u64,
    len: usize,
    access: Access,
    pd: u32,
}

const REGIONS: [RegionSpec; 6] = [
    // 0: receive buffers (UD and UC) and send sources.
    RegionSpec {
        iova: 0x10_0000,
        len: 8 * 1024,
        access: Access::LOCAL_WRITE,
        pd: 0,
    },
    // 1: the UC WRITE target (and receives).
    RegionSpec {
        iova: 0x20_0000,
        len: 8 * 1024,
        access: Access::from_bits_truncate(1 | 2),
        pd: 0,
    },
    // 2: local read only: a receive posted here is refused.
    RegionSpec {
        iova: 0x30_0000,
        len: 2048,
        access: Access::NONE,
        pd: 0,
    },
    // 3: REMOTE_READ only: a WRITE aimed here is refused.
    RegionSpec {
        iova: 0x40_0000,
        len: 2048,
        access: Access::REMOTE_READ,
        pd: 0,
    },
    // 4: every right, but of another PD than the QPs.
    RegionSpec {
        iova: 0x50_0000,
        len: 4096,
        access: Access::ALL,
        pd: 1,
    },
    // 5: local write and remote read, no remote write.
    RegionSpec {
        iova: 0x60_0000,
        len: 4096,
        access: Access::from_bits_truncate(1 | 4),
        pd: 0,
    },
];

/// The bytes a region starts with.
fn pattern(region: usize, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(29) ^ (region as u8).wrapping_mul(0x47) ^ (i >> 8) as u8)
        .collect()
}

/// A receive posted and not completed yet.
#[derive(Debug, Clone, Copy)]
struct PostedRecv {
    qpn: u32,
    sge: Sge,
}

/// A send posted and not completed yet.
#[derive(Debug, Clone, Copy)]
struct PostedSend {
    qpn: u32,
    length: u32,
}

/// The endpoint, its QPs and regions, and the model of what may change.
pub struct World {
    ep: Endpoint,
    cq: u32,
    mrs: Vec<MrKeys>,
    /// Per region: which bytes may have changed (a receive was posted
    /// over them, or remote WRITEs are allowed to the region).
    may_change: Vec<Vec<bool>>,
    /// Per region: the bytes it was registered with.
    initial: Vec<Vec<u8>>,
    pub gsi: u32,
    pub ud: u32,
    pub uc_a: u32,
    pub uc_b: u32,
    ah: u32,
    /// The Q_Key the ordinary UD QP wants now.
    qkey: u32,
    recvs: BTreeMap<u64, PostedRecv>,
    sends: BTreeMap<u64, PostedSend>,
    next_id: u64,
    sent: VecDeque<Vec<u8>>,
    counters: Counters,
    outcome: Outcome,
    now: Instant,
    buf: Vec<u8>,
}

impl World {
    /// The world; `uc_bits` chooses the UC QPs' access flags and
    /// `mtu_bits` the MTUs.
    pub fn new(uc_bits: u8, mtu_bits: u8) -> World {
        let mut ep = Endpoint::new(EndpointConfig {
            local_mac: MAC,
            local_ip: IpAddr::V4(IP),
            max_qps: 8,
            seed: [0x6461_7461, 0x6772_616d],
            ..Default::default()
        });
        let cq = ep.create_cq(4096);
        let mut mrs = Vec::new();
        let mut may_change = Vec::new();
        for (i, r) in REGIONS.iter().enumerate() {
            let keys = ep
                .reg_mr_in(r.pd, Box::new(pattern(i, r.len)), r.iova, r.access)
                .expect("a region");
            mrs.push(keys);
            may_change.push(vec![false; r.len]);
        }
        let init = |depth| QpInitAttr {
            send_cq: cq,
            recv_cq: cq,
            max_send_wr: depth,
            max_recv_wr: depth,
            sq_sig_all: false,
            srq: None,
        };
        let gsi = ep
            .create_ud_qp_numbered(0, GSI_QPN, init(16))
            .expect("QP 1");
        let ud = ep.create_ud_qp(0, init(16)).expect("a UD QP");
        let uc_a = ep.create_uc_qp_in(0, init(16)).expect("a UC QP");
        let uc_b = ep.create_uc_qp_in(0, init(16)).expect("a UC QP");
        let mtus = [Mtu::Mtu256, Mtu::Mtu1024, Mtu::Mtu4096, Mtu::Mtu512];
        let ud_mtu = mtus[usize::from(mtu_bits & 3)];
        let uc_mtu = mtus[usize::from((mtu_bits >> 2) & 3)];
        let access = |b: u8| match b & 3 {
            0 => Access::NONE,
            1 => Access::REMOTE_WRITE,
            2 => Access::REMOTE_READ,
            _ => Access::ALL,
        };
        let uc_access = [access(uc_bits), access(uc_bits >> 2)];
        for (me, peer, acc) in [(uc_a, uc_b, uc_access[0]), (uc_b, uc_a, uc_access[1])] {
            let opts = ConnectOptions {
                path_mtu: uc_mtu,
                sq_psn: 0xFF_FFF0,
                access: acc,
                ..ConnectOptions::default()
            };
            let remote = RemoteQp {
                qpn: peer,
                psn: 0xFF_FFF0,
                mac: MAC,
                ip: IpAddr::V4(IP),
            };
            ep.connect(me, &remote, &opts).expect("connect UC");
        }
        let ah = ep
            .create_ah(
                0,
                &AhAttr {
                    remote: RemoteAddress {
                        mac: MAC,
                        ip: IpAddr::V4(IP),
                        ..Default::default()
                    },
                    hop_limit: 64,
                    ..AhAttr::default()
                },
            )
            .expect("an address handle");
        let mut w = World {
            ep,
            cq,
            mrs,
            may_change,
            initial: REGIONS
                .iter()
                .enumerate()
                .map(|(i, r)| pattern(i, r.len))
                .collect(),
            gsi,
            ud,
            uc_a,
            uc_b,
            ah,
            qkey: QKEY,
            recvs: BTreeMap::new(),
            sends: BTreeMap::new(),
            next_id: 0,
            sent: VecDeque::new(),
            counters: Counters::default(),
            outcome: Outcome::default(),
            now: Instant::ZERO,
            buf: vec![0u8; 9000],
        };
        w.ud_up(gsi, QKEY, ud_mtu);
        w.ud_up(ud, QKEY, ud_mtu);
        // A UC QP that takes remote WRITEs may get them anywhere in a
        // region with REMOTE_WRITE of its PD.
        if uc_access.iter().any(|a| a.contains(Access::REMOTE_WRITE)) {
            for (i, r) in REGIONS.iter().enumerate() {
                if r.pd == 0 && r.access.contains(Access::REMOTE_WRITE) {
                    w.may_change[i].fill(true);
                }
            }
        }
        w.counters = w.ep.counters();
        w
    }

    /// RESET -> INIT -> RTR -> RTS.
    fn ud_up(&mut self, qpn: u32, qkey: u32, mtu: Mtu) {
        let a = UdQpAttr {
            state: QpState::Init,
            qkey,
            sq_psn: 0xFF_FFFE,
            mtu,
            ..UdQpAttr::default()
        };
        self.ep
            .modify_ud_qp(
                qpn,
                &a,
                UdQpAttrMask::STATE
                    | UdQpAttrMask::PKEY_INDEX
                    | UdQpAttrMask::PORT
                    | UdQpAttrMask::QKEY
                    | UdQpAttrMask::MTU,
            )
            .expect("INIT");
        for (state, mask) in [
            (QpState::Rtr, UdQpAttrMask::STATE),
            (QpState::Rts, UdQpAttrMask::STATE | UdQpAttrMask::SQ_PSN),
        ] {
            let s = UdQpAttr { state, ..a };
            self.ep.modify_ud_qp(qpn, &s, mask).expect("RTR, RTS");
        }
    }

    fn id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    /// Region index and address of a buffer chosen by the input.
    fn buffer(&mut self, input: &mut Input<'_>, len: u32) -> (usize, Sge) {
        let region = match input.below(16) {
            0 => 2,
            1 => 3,
            2 => 4,
            3 => 5,
            4..=6 => 1,
            _ => 0,
        };
        let r = &REGIONS[region];
        let off = match input.below(8) {
            // Now and then past the end of the region.
            0 => u64::from(input.u16()),
            _ => u64::from(input.u16()) % (r.len as u64).saturating_sub(u64::from(len)).max(1),
        };
        let lkey = match input.below(32) {
            0 => input.u32(),
            _ => self.mrs[region].lkey,
        };
        (
            region,
            Sge {
                lkey,
                addr: r.iova + off,
                length: len,
            },
        )
    }

    /// A receive posted: its buffer may change from now on, if its QP
    /// may write there (its PD's region, LOCAL_WRITE).
    fn note_recv(&mut self, id: u64, qpn: u32, region: usize, sge: Sge) {
        self.recvs.insert(id, PostedRecv { qpn, sge });
        let r = &REGIONS[region];
        if sge.lkey == self.mrs[region].lkey && r.pd == 0 && r.access.contains(Access::LOCAL_WRITE)
        {
            let start = (sge.addr - r.iova) as usize;
            let end = (start + sge.length as usize).min(r.len);
            if start < end {
                self.may_change[region][start..end].fill(true);
            }
        }
    }

    fn post_ud_recv(&mut self, input: &mut Input<'_>) {
        let qpn = if input.u8() & 1 == 0 {
            self.ud
        } else {
            self.gsi
        };
        // Sizes around the GRH and the MTUs: some too small for GRH +
        // payload.
        let len = match input.below(12) {
            0 => 0,
            1 => 1,
            2 => 39,
            3 => 40,
            4 => 41,
            5 => 40 + 256,
            6 => 40 + 1024,
            7 => 40 + 4096,
            8 => 1024,
            9 => 256,
            _ => u32::from(input.u16()) % 4200,
        };
        let (region, sge) = self.buffer(input, len);
        let id = self.id();
        if self.ep.post_ud_recv(qpn, RecvWr { wr_id: id, sge }).is_ok() {
            self.note_recv(id, qpn, region, sge);
        }
    }

    fn post_uc_recv(&mut self, input: &mut Input<'_>) {
        let qpn = if input.u8() & 1 == 0 {
            self.uc_b
        } else {
            self.uc_a
        };
        let len = match input.below(4) {
            0 => 0,
            1 => 64,
            _ => u32::from(input.u16()) % 6000,
        };
        let (region, sge) = self.buffer(input, len);
        let id = self.id();
        if self.ep.post_recv(qpn, RecvWr { wr_id: id, sge }).is_ok() {
            self.note_recv(id, qpn, region, sge);
        }
    }

    fn post_ud_send(&mut self, input: &mut Input<'_>) {
        let qpn = if input.u8() & 1 == 0 {
            self.ud
        } else {
            self.gsi
        };
        let len = match input.below(4) {
            0 => 0,
            1 => u32::from(input.u8()),
            _ => u32::from(input.u16()) % 4200,
        };
        let (_, local) = self.buffer(input, len);
        let remote_qpn = match input.below(8) {
            0 => GSI_QPN,
            1 => input.u32() & 0xFF_FFFF,
            2 => self.uc_b,
            _ => self.ud,
        };
        let remote_qkey = match input.below(8) {
            0 => GSI_QKEY,
            1 => input.u32(),
            2 => 0x8000_0000,
            _ => self.qkey,
        };
        let id = self.id();
        let wr = UdSendWr {
            wr_id: id,
            opcode: if input.u8() & 1 == 0 {
                UdSendOp::Send
            } else {
                UdSendOp::SendWithImm
            },
            local,
            imm: input.u32(),
            ah: if input.below(16) == 0 {
                u32::from(input.u8())
            } else {
                self.ah
            },
            remote_qpn,
            remote_qkey,
            signaled: true,
            solicited: input.u8() & 1 == 1,
        };
        if self.ep.post_ud_send(qpn, wr).is_ok() {
            self.sends.insert(id, PostedSend { qpn, length: len });
        }
    }

    fn post_uc_send(&mut self, input: &mut Input<'_>) {
        let qpn = if input.u8() & 1 == 0 {
            self.uc_a
        } else {
            self.uc_b
        };
        let opcode = [
            SendOp::Send,
            SendOp::SendWithImm,
            SendOp::Write,
            SendOp::WriteWithImm,
            SendOp::Read,
        ][usize::from(input.below(5))];
        let len = match input.below(4) {
            0 => 0,
            1 => u32::from(input.u8()),
            _ => u32::from(input.u16()) % 6000,
        };
        let (_, local) = self.buffer(input, len);
        let target = match input.below(8) {
            0 => 3,
            1 => 4,
            2 => 5,
            _ => 1,
        };
        let r = &REGIONS[target];
        let id = self.id();
        let mut wr = SendWr::new(id, opcode, local);
        wr.remote_addr = r.iova + u64::from(input.u16()) % r.len as u64;
        wr.rkey = match input.below(16) {
            0 => input.u32(),
            _ => self.mrs[target].rkey,
        };
        wr.imm = input.u32();
        wr.signaled = true;
        if self.ep.post_send(qpn, wr).is_ok() {
            self.sends.insert(id, PostedSend { qpn, length: len });
        }
    }

    /// Q_Key changes, and a QP to ERROR or RESET and back up.
    fn modify(&mut self, input: &mut Input<'_>) {
        let qpn = if input.u8() & 1 == 0 {
            self.ud
        } else {
            self.gsi
        };
        match input.below(4) {
            0 | 1 => {
                let qkey = match input.below(4) {
                    0 => GSI_QKEY,
                    1 => input.u32(),
                    _ => QKEY,
                };
                let a = UdQpAttr {
                    state: QpState::Rts,
                    qkey,
                    ..UdQpAttr::default()
                };
                if self.ep.modify_ud_qp(qpn, &a, UdQpAttrMask::QKEY).is_ok() && qpn == self.ud {
                    self.qkey = qkey;
                }
            }
            2 => {
                let a = UdQpAttr {
                    state: QpState::Error,
                    ..UdQpAttr::default()
                };
                let _ = self.ep.modify_ud_qp(qpn, &a, UdQpAttrMask::STATE);
            }
            _ => {
                let a = UdQpAttr::default();
                if self.ep.modify_ud_qp(qpn, &a, UdQpAttrMask::STATE).is_ok() {
                    // RESET drops the queues without completions.
                    self.recvs.retain(|_, r| r.qpn != qpn);
                    self.sends.retain(|_, s| s.qpn != qpn);
                }
                let mtu = [Mtu::Mtu256, Mtu::Mtu1024, Mtu::Mtu4096][usize::from(input.below(3))];
                if qpn == self.ud {
                    self.qkey = QKEY;
                }
                self.ud_up(qpn, QKEY, mtu);
            }
        }
    }

    /// Move what the endpoint sends into the queue of frames to deliver.
    fn pump(&mut self) {
        for _ in 0..32 {
            let Some(n) = self.ep.poll_transmit(self.now, &mut self.buf) else {
                break;
            };
            if self.sent.len() >= MAX_QUEUED {
                self.sent.pop_front();
            }
            self.sent.push_back(self.buf[..n].to_vec());
        }
    }

    /// Feed one frame, then check everything (with the frame, to match
    /// a UD receive completion against it).
    fn feed(&mut self, frame: &[u8]) {
        self.ep.handle_packet(self.now, frame);
        self.check(Some(frame));
        self.check_regions();
    }

    /// The invariants (see the module notes); `fed` is the frame just
    /// handled, if any.
    fn check(&mut self, fed: Option<&[u8]>) {
        while let Some(wc) = self.ep.poll_completion(self.cq) {
            self.check_completion(&wc, fed);
        }
        let c = self.ep.counters();
        for ((name, new), (_, old)) in c.iter().zip(self.counters.iter()) {
            assert!(new >= old, "counter {name} went down: {old} -> {new}");
        }
        self.counters = c;
    }

    /// No region changed outside what may change (only frames write).
    fn check_regions(&self) {
        for (i, r) in REGIONS.iter().enumerate() {
            let now = self
                .ep
                .mr_slice(self.mrs[i].lkey, r.iova, r.len)
                .expect("a region");
            if now == &self.initial[i][..] {
                continue;
            }
            for (k, (&a, &b)) in now.iter().zip(&self.initial[i]).enumerate() {
                assert!(
                    a == b || self.may_change[i][k],
                    "region {i} ({:?}, PD {}) byte {k} changed, outside every receive posted to it",
                    r.access,
                    r.pd
                );
            }
        }
    }

    fn check_completion(&mut self, wc: &WorkCompletion, fed: Option<&[u8]>) {
        let is_ud = wc.qpn == self.ud || wc.qpn == self.gsi;
        match wc.opcode {
            WcOpcode::Recv | WcOpcode::RecvRdmaWithImm => {
                let posted = self.recvs.remove(&wc.wr_id).unwrap_or_else(|| {
                    panic!("a receive completion for no outstanding receive: {wc:?}")
                });
                assert_eq!(posted.qpn, wc.qpn, "completion on another QP: {wc:?}");
                if wc.status == WcStatus::Success && wc.opcode == WcOpcode::Recv {
                    assert!(
                        wc.byte_len <= posted.sge.length,
                        "byte_len past the receive ({posted:?}): {wc:?}"
                    );
                }
                if is_ud {
                    assert_eq!(wc.opcode, WcOpcode::Recv, "{wc:?}");
                    assert_eq!(
                        wc.ud.is_some(),
                        wc.status == WcStatus::Success,
                        "a UD receive has its sender exactly when it succeeded: {wc:?}"
                    );
                    if wc.status == WcStatus::Success {
                        self.check_ud_receive(wc, posted, fed);
                        self.outcome.ud_received += 1;
                    }
                } else {
                    assert!(wc.ud.is_none(), "a UC completion with a sender: {wc:?}");
                    if wc.status == WcStatus::Success {
                        self.outcome.uc_received += 1;
                    }
                }
            }
            _ => {
                let posted = self
                    .sends
                    .remove(&wc.wr_id)
                    .unwrap_or_else(|| panic!("a send completion for no outstanding send: {wc:?}"));
                assert_eq!(posted.qpn, wc.qpn, "completion on another QP: {wc:?}");
                assert!(wc.ud.is_none(), "a send completion with a sender: {wc:?}");
                if wc.status == WcStatus::Success {
                    assert_eq!(wc.byte_len, posted.length, "{wc:?}");
                }
            }
        }
    }

    /// A successful UD receive matches the frame just fed, and its buffer
    /// holds the GRH area and the payload.
    fn check_ud_receive(&self, wc: &WorkCompletion, posted: PostedRecv, fed: Option<&[u8]>) {
        let src = wc.ud.expect("a sender");
        let fed = fed.unwrap_or_else(|| panic!("a UD receive completed with no frame fed: {wc:?}"));
        let f = parse_frame(fed).expect("the frame that completed a receive parses");
        let deth = f.headers.deth.expect("a DETH");
        assert!(
            wc.byte_len as usize >= GRH_LEN && wc.byte_len <= posted.sge.length,
            "{wc:?}"
        );
        assert_eq!(wc.byte_len as usize, GRH_LEN + f.payload.len(), "{wc:?}");
        assert_eq!(src.src_qp, deth.src_qp, "{wc:?}");
        assert!(src.src_qp <= 0xFF_FFFF);
        assert_eq!(wc.imm, f.headers.immdt, "{wc:?}");
        assert_eq!(f.headers.bth.dest_qp, wc.qpn, "{wc:?}");
        let qkey = if wc.qpn == GSI_QPN {
            GSI_QKEY
        } else {
            self.qkey
        };
        assert_eq!(
            deth.qkey, qkey,
            "a datagram with another Q_Key was taken: {wc:?}"
        );
        let got = self
            .ep
            .mr_slice(posted.sge.lkey, posted.sge.addr, wc.byte_len as usize)
            .expect("the receive buffer");
        let IpRepr::V4 { src: ip_src, .. } = f.headers.ip else {
            panic!("an IPv6 datagram taken by an IPv4 endpoint: {wc:?}");
        };
        assert_eq!(src.sgid, ip_src.to_ipv6_mapped().octets(), "{wc:?}");
        // The GRH area: 20 zero bytes, then the IPv4 header as received.
        let ip_at = if fed[12..14] == [0x81, 0x00] { 18 } else { 14 };
        assert!(
            got[..20].iter().all(|&b| b == 0),
            "GRH area: {:?}",
            &got[..20]
        );
        assert_eq!(
            &got[20..GRH_LEN],
            &fed[ip_at..ip_at + 20],
            "GRH area's IPv4 header"
        );
        assert_eq!(&got[GRH_LEN..], f.payload, "payload");
    }

    fn step(&mut self, input: &mut Input<'_>) {
        match input.u8() {
            0..=59 => {
                let f = synthesize_ud(self, input);
                self.feed(&f);
            }
            60..=89 => {
                let f = synthesize_uc(self, input);
                self.feed(&f);
            }
            // A frame from the input, its ICRC made right.
            op::FRAME..=99 => {
                let len = usize::from(input.u16()) % 4200;
                let mut f = input.take(len).to_vec();
                fix_icrc(&mut f);
                self.feed(&f);
            }
            // Raw bytes.
            100..=104 => {
                let len = usize::from(input.u8()) * 4;
                let f = input.take(len).to_vec();
                self.feed(&f);
            }
            // The endpoint's own frames back: as they are, field-mutated,
            // or with bytes flipped.
            op::OWN..=129 => {
                self.pump();
                if let Some(f) = self.sent.pop_front() {
                    self.feed(&f);
                }
            }
            130..=144 => {
                self.pump();
                if let Some(f) = self.sent.pop_front() {
                    if let Some(m) = mutate(&f, input) {
                        self.feed(&m);
                    }
                }
            }
            145..=149 => {
                self.pump();
                if let Some(mut f) = self.sent.pop_front() {
                    flip(&mut f, input);
                    self.feed(&f);
                }
            }
            op::UD_RECV..=184 => self.post_ud_recv(input),
            op::UD_SEND..=204 => self.post_ud_send(input),
            op::UC_RECV..=219 => self.post_uc_recv(input),
            op::UC_SEND..=239 => self.post_uc_send(input),
            op::MODIFY..=247 => self.modify(input),
            _ => {
                self.now += core::time::Duration::from_micros(u64::from(input.u16()) * 64);
                self.ep.handle_timeout(self.now);
            }
        }
        self.check(None);
    }
}

/// Payload bytes from the input: a length class, then a fill.
fn payload(input: &mut Input<'_>) -> Vec<u8> {
    let len = match input.below(10) {
        0 => 0,
        1 => 1,
        2 => 256,
        3 => 257,
        4 => 1024,
        5 => 1025,
        6 => 4096,
        7 => 4097,
        _ => usize::from(input.u16()) % 4200,
    };
    let seed = input.u8();
    (0..len).map(|i| (i as u8).wrapping_add(seed)).collect()
}

/// Ethernet, IPv4 (mostly to this endpoint) and UDP headers from the
/// peer, with a BTH for `opcode`.
fn base_headers(input: &mut Input<'_>, opcode: Opcode, dest_qp: u32) -> RoceHeaders {
    let bits = input.u8();
    // Now and then not to this endpoint (another MAC, another IP).
    let addr = input.u8();
    RoceHeaders {
        eth: EthRepr {
            dst: if addr & 7 == 0 { PEER_MAC } else { MAC },
            src: PEER_MAC,
            vlan: None,
        },
        ip: IpRepr::V4 {
            src: if addr & 0x40 != 0 { IP } else { PEER_IP },
            dst: if (addr >> 3) & 7 == 0 { PEER_IP } else { IP },
            dscp: bits & 0x1F,
            ecn: if bits & 0x10 != 0 { Ecn::Ce } else { Ecn::Ect0 },
            ttl: 64,
            ident: 0,
            dont_fragment: true,
        },
        udp: UdpRepr {
            src_port: 0xC000 | u16::from(input.u8()),
            dst_port: ROCE_V2_UDP_PORT,
        },
        bth: BthRepr {
            opcode,
            solicited: bits & 1 != 0,
            mig_req: bits & 2 != 0,
            pad_count: 0,
            pkey: match input.below(8) {
                0 => 0x7FFF,
                1 => input.u16(),
                _ => 0xFFFF,
            },
            fecn: false,
            becn: bits & 4 != 0,
            dest_qp,
            ack_req: bits & 8 != 0,
            psn: input.u32() & 0xFF_FFFF,
        },
        reth: None,
        aeth: None,
        atomic_eth: None,
        atomic_ack_eth: None,
        immdt: None,
        ieth: None,
        deth: None,
    }
}

/// A datagram to one of the QPs (or another number), with a Q_Key and
/// source QP from the input; now and then another opcode with a DETH's
/// number.
fn synthesize_ud(w: &World, input: &mut Input<'_>) -> Vec<u8> {
    let opcode = match input.below(8) {
        0..=3 => Opcode::UdSendOnly,
        4..=6 => Opcode::UdSendOnlyImm,
        _ => Opcode::ALL[usize::from(input.below(Opcode::ALL.len() as u8))],
    };
    let dest_qp = match input.below(8) {
        0..=2 => w.ud,
        3..=4 => GSI_QPN,
        5 => w.uc_b,
        6 => 0,
        _ => input.u32() & 0xFF_FFFF,
    };
    let mut h = base_headers(input, opcode, dest_qp);
    let qkey = match input.below(8) {
        0..=3 if dest_qp == GSI_QPN => GSI_QKEY,
        0..=3 => w.qkey,
        4 => GSI_QKEY,
        5 => w.qkey ^ 1,
        _ => input.u32(),
    };
    h.deth = Some(DethRepr {
        qkey,
        src_qp: input.u32() & 0xFF_FFFF,
    });
    let body = payload(input);
    emit(h, body, input)
}

/// A UC packet to one of the UC QPs (or an RC/UD number), PSN near the
/// expected one, RETH aimed at the regions.
fn synthesize_uc(w: &World, input: &mut Input<'_>) -> Vec<u8> {
    const UC: [Opcode; 12] = [
        Opcode::UcSendFirst,
        Opcode::UcSendMiddle,
        Opcode::UcSendLast,
        Opcode::UcSendLastImm,
        Opcode::UcSendOnly,
        Opcode::UcSendOnlyImm,
        Opcode::UcWriteFirst,
        Opcode::UcWriteMiddle,
        Opcode::UcWriteLast,
        Opcode::UcWriteLastImm,
        Opcode::UcWriteOnly,
        Opcode::UcWriteOnlyImm,
    ];
    let opcode = UC[usize::from(input.below(12))];
    let dest_qp = match input.below(8) {
        0..=3 => w.uc_b,
        4..=5 => w.uc_a,
        6 => w.ud,
        _ => input.u32() & 0xFF_FFFF,
    };
    let mut h = base_headers(input, opcode, dest_qp);
    // From the connected peer (itself), near the PSN it started at.
    if input.below(4) != 0 {
        h.eth.src = MAC;
        h.ip = IpRepr::V4 {
            src: IP,
            dst: IP,
            dscp: 0,
            ecn: Ecn::Ect0,
            ttl: 64,
            ident: 0,
            dont_fragment: true,
        };
        h.bth.psn = 0xFF_FFF0u32.wrapping_add(u32::from(input.u8() % 32)) & 0xFF_FFFF;
    }
    if opcode.has_reth() {
        let target = match input.below(8) {
            0 => 3,
            1 => 4,
            2 => 5,
            3 => 0,
            _ => 1,
        };
        let r = &REGIONS[target];
        h.reth = Some(RethRepr {
            va: r.iova.wrapping_add(u64::from(input.u16())),
            rkey: if input.below(16) == 0 {
                input.u32()
            } else {
                w.mrs[target].rkey
            },
            dma_len: match input.below(4) {
                0 => input.u32(),
                _ => u32::from(input.u16()) % 8192,
            },
        });
    }
    let body = payload(input);
    emit(h, body, input)
}

/// Emit `h` with `payload` (headers made to fit the opcode), ICRC right.
fn emit(mut h: RoceHeaders, mut payload: Vec<u8>, input: &mut Input<'_>) -> Vec<u8> {
    conform(&mut h, input, 0x20_0000);
    if !h.bth.opcode.has_payload() {
        payload.clear();
    }
    if h.bth.opcode == Opcode::Cnp {
        payload = vec![0; 16];
    }
    let mut buf = vec![0u8; payload.len() + 256];
    match emit_frame(&h, &payload, &mut buf) {
        Ok(n) => {
            buf.truncate(n);
            buf
        }
        Err(_) => Vec::new(),
    }
}

/// `frame` with one to four fields changed (the DETH's among them),
/// re-emitted with a valid ICRC.
fn mutate(frame: &[u8], input: &mut Input<'_>) -> Option<Vec<u8>> {
    let parsed = parse_frame(frame).ok()?;
    let mut h = parsed.headers;
    let mut payload = parsed.payload.to_vec();
    for _ in 0..1 + input.below(4) {
        match input.below(12) {
            0 => h.bth.opcode = Opcode::ALL[usize::from(input.below(Opcode::ALL.len() as u8))],
            1 => h.bth.psn = h.bth.psn.wrapping_add(u32::from(input.u8())) & 0xFF_FFFF,
            2 => h.bth.dest_qp = [GSI_QPN, 0, input.u32() & 0xFF_FFFF][usize::from(input.below(3))],
            3 => h.bth.pkey = input.u16(),
            4 => {
                if let Some(d) = h.deth.as_mut() {
                    d.qkey =
                        [GSI_QKEY, input.u32(), d.qkey ^ 0x8000_0000][usize::from(input.below(3))];
                }
            }
            5 => {
                if let Some(d) = h.deth.as_mut() {
                    d.src_qp = input.u32() & 0xFF_FFFF;
                }
            }
            6 => {
                if let Some(r) = h.reth.as_mut() {
                    match input.below(3) {
                        0 => r.va = r.va.wrapping_add(u64::from(input.u16())),
                        1 => r.rkey ^= 1 << input.below(32),
                        _ => r.dma_len = input.u32() >> input.below(32),
                    }
                }
            }
            7 => mutate_payload(&mut payload, input),
            8 => {
                if let IpRepr::V4 { dst, .. } = &mut h.ip {
                    *dst = Ipv4Addr::from_bits(dst.to_bits() ^ u32::from(input.u8()));
                }
            }
            9 => {
                if let Some(i) = h.immdt.as_mut() {
                    *i = input.u32();
                }
            }
            10 => h.bth.pad_count = input.below(4),
            _ => h.eth.dst = PEER_MAC,
        }
    }
    Some(emit(h, payload, input))
}

/// Make a frame's ICRC right, when the frame is whole enough to have one.
pub fn fix_icrc(f: &mut [u8]) {
    if let Ok(crc) = frame_icrc(f) {
        let mut t = [0u8; 4];
        icrc::write(crc, &mut t);
        let n = f.len();
        if n >= 4 {
            f[n - 4..].copy_from_slice(&t);
        }
    }
}

pub fn run(data: &[u8]) {
    let _ = play(data);
}

/// What a run did: the endpoint's counters at the end, and the receives
/// that completed successfully (what the tests use to see that a seed
/// reaches the QPs).
#[derive(Debug, Default, Clone, Copy)]
pub struct Outcome {
    pub counters: Counters,
    pub ud_received: u64,
    pub uc_received: u64,
}

/// [`run`], returning what it did.
pub fn play(data: &[u8]) -> Outcome {
    let mut input = Input(data);
    let uc_bits = input.u8();
    let mtu_bits = input.u8();
    let mut w = World::new(uc_bits, mtu_bits);
    for _ in 0..MAX_STEPS {
        if input.is_empty() {
            break;
        }
        w.step(&mut input);
    }
    // Whatever is left to send goes out and comes back.
    for _ in 0..16 {
        w.pump();
        let Some(f) = w.sent.pop_front() else { break };
        w.feed(&f);
    }
    Outcome {
        counters: w.ep.counters(),
        ..w.outcome
    }
}

/// What the seed writer needs: a world as the harness makes it, and its
/// frames (`src/bin/seeds.rs` builds the `datagram` corpus with the
/// core's own sender).
impl World {
    /// Post a UD send of `len` bytes from the ordinary QP (or QP 1) to
    /// `remote_qpn` with `remote_qkey`, immediate data if `imm`.
    pub fn seed_ud_send(
        &mut self,
        from_gsi: bool,
        len: u32,
        remote_qpn: u32,
        remote_qkey: u32,
        imm: Option<u32>,
    ) {
        let qpn = if from_gsi { self.gsi } else { self.ud };
        let lkey = self.mrs[0].lkey;
        let mut wr = UdSendWr::new(
            0,
            Sge {
                lkey,
                addr: REGIONS[0].iova,
                length: len,
            },
            self.ah,
            remote_qpn,
            remote_qkey,
        );
        if let Some(i) = imm {
            wr.opcode = UdSendOp::SendWithImm;
            wr.imm = i;
        }
        self.ep.post_ud_send(qpn, wr).expect("a UD send");
    }

    /// Post a UC SEND or WRITE of `len` bytes from A to B.
    pub fn seed_uc_send(&mut self, op: SendOp, len: u32) {
        let lkey = self.mrs[0].lkey;
        let mut wr = SendWr::new(
            0,
            op,
            Sge {
                lkey,
                addr: REGIONS[0].iova,
                length: len,
            },
        );
        wr.remote_addr = REGIONS[1].iova;
        wr.rkey = self.mrs[1].rkey;
        wr.imm = 0xABCD;
        self.ep.post_send(self.uc_a, wr).expect("a UC send");
    }

    /// Every frame the endpoint has to send now.
    pub fn seed_frames(&mut self) -> Vec<Vec<u8>> {
        self.pump();
        self.sent.drain(..).collect()
    }
}
