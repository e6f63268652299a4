//! Two connected endpoints, each both requester and responder, driven by
//! a program decoded from the input: deliver, drop, duplicate, mutate
//! (field by field, ICRC recomputed, or raw bytes), forge frames from the
//! peer's templates, post work and receives on either side, move time.
//! The state machines (responder, completer, requester, retries, timers)
//! see hostile sequences, not just hostile parses.
//!
//! Invariants after every step:
//! - no panic;
//! - no completion for work never posted, and none twice (every
//!   completion's `wr_id` must be outstanding on its side and queue);
//! - no write outside a region that allows it: on each side a region with
//!   REMOTE_READ only and a region with local rights only, which no work
//!   request names, keep their bytes.

use core::net::{IpAddr, Ipv4Addr};
use core::time::Duration;
use std::collections::{HashSet, VecDeque};

use proto::endpoint::{ConnectOptions, Endpoint, EndpointConfig, RemoteQp};
use proto::rc::{Access, Counters, MrKeys, Mtu, QpInitAttr, RecvWr, SendOp, SendWr, Sge, WcOpcode};
use proto::time::Instant;
use proto::wire::{emit_frame, parse_frame, Ecn, IpRepr, Opcode};

use crate::headers::{conform, flip, mutate_payload};
use crate::input::Input;

/// Steps of one input at most.
const MAX_STEPS: usize = 400;
/// Frames held per direction at most (older ones are lost).
const MAX_IN_FLIGHT: usize = 256;
/// Region sizes.
const DATA_LEN: usize = 64 * 1024;
const GUARD_LEN: usize = 4096;
const IOVA: u64 = 0x10_0000;

/// One side: its endpoint, QP, CQ, regions and what is outstanding.
struct Side {
    ep: Endpoint,
    qpn: u32,
    cq: u32,
    /// Every right: the peer's WRITEs, READs and atomics aim here, and
    /// local buffers live here.
    data: MrKeys,
    /// REMOTE_READ only: no peer may change it.
    read_only: MrKeys,
    /// Local rights only, never named by a work request.
    canary: MrKeys,
    sends: HashSet<u64>,
    recvs: HashSet<u64>,
    next_id: u64,
}

fn guard_bytes(seed: u8) -> Vec<u8> {
    (0..GUARD_LEN)
        .map(|i| (i as u8).wrapping_mul(31) ^ seed)
        .collect()
}

impl Side {
    fn new(mac: [u8; 6], ip: Ipv4Addr, seed: u8) -> Side {
        let mut ep = Endpoint::new(EndpointConfig {
            local_mac: mac,
            local_ip: IpAddr::V4(ip),
            max_qps: 4,
            ..Default::default()
        });
        let cq = ep.create_cq(4096);
        let qpn = ep
            .create_qp(QpInitAttr {
                send_cq: cq,
                recv_cq: cq,
                max_send_wr: 32,
                max_recv_wr: 32,
                sq_sig_all: false,
                srq: None,
            })
            .expect("a QP");
        let mut reg = |len: usize, iova: u64, access: Access, fill: Vec<u8>| {
            let mut mem = vec![0u8; len];
            mem[..fill.len()].copy_from_slice(&fill);
            ep.reg_mr(Box::new(mem), iova, access).expect("a region")
        };
        let data = reg(DATA_LEN, IOVA, Access::ALL, Vec::new());
        let read_only = reg(
            GUARD_LEN,
            IOVA + 0x10_0000,
            Access::REMOTE_READ,
            guard_bytes(seed),
        );
        let canary = reg(
            GUARD_LEN,
            IOVA + 0x20_0000,
            Access::LOCAL_WRITE,
            guard_bytes(seed ^ 0x5A),
        );
        Side {
            ep,
            qpn,
            cq,
            data,
            read_only,
            canary,
            sends: HashSet::new(),
            recvs: HashSet::new(),
            next_id: 1,
        }
    }

    fn id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    /// Every completion must be for outstanding work, once.
    fn check_completions(&mut self, who: &str) {
        while let Some(wc) = self.ep.poll_completion(self.cq) {
            let set = match wc.opcode {
                WcOpcode::Recv | WcOpcode::RecvRdmaWithImm => &mut self.recvs,
                _ => &mut self.sends,
            };
            assert!(
                set.remove(&wc.wr_id),
                "{who}: completion for work not outstanding (never posted, or completed twice): {wc:?}"
            );
        }
    }

    /// The regions no peer may change still hold their bytes.
    fn check_regions(&self, who: &str, seed: u8) {
        let mut buf = vec![0u8; GUARD_LEN];
        for (keys, iova, want) in [
            (self.read_only, IOVA + 0x10_0000, guard_bytes(seed)),
            (self.canary, IOVA + 0x20_0000, guard_bytes(seed ^ 0x5A)),
        ] {
            self.ep
                .mr_read(keys.lkey, iova, &mut buf)
                .expect("readable");
            assert!(buf == want, "{who}: a region without the right was written");
        }
    }
}

/// The two sides and the frames between them.
struct World {
    a: Side,
    b: Side,
    a_to_b: VecDeque<Vec<u8>>,
    b_to_a: VecDeque<Vec<u8>>,
    now: Instant,
    buf: Vec<u8>,
}

const SEED_A: u8 = 0x11;
const SEED_B: u8 = 0x22;

impl World {
    fn new(mtu: Mtu, max_rd: u8) -> World {
        let (mac_a, mac_b) = ([2, 0, 0, 0, 0, 0xA], [2, 0, 0, 0, 0, 0xB]);
        let (ip_a, ip_b) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
        let mut a = Side::new(mac_a, ip_a, SEED_A);
        let mut b = Side::new(mac_b, ip_b, SEED_B);
        let opts = |sq_psn| ConnectOptions {
            path_mtu: mtu,
            timeout: 8,
            retry_cnt: 3,
            rnr_retry: 3,
            min_rnr_timer: 1,
            max_rd_atomic: max_rd,
            max_dest_rd_atomic: max_rd,
            sq_psn,
            // Both sides run every operation on each other.
            access: Access::ALL,
            ..ConnectOptions::default()
        };
        // PSNs near the 24-bit wrap, so the wrap is exercised.
        let (psn_a, psn_b) = (0xFF_FFF0, 0x7F_FFF8);
        let remote = |s: &Side, ip, mac, psn| RemoteQp {
            qpn: s.qpn,
            psn,
            mac,
            ip: IpAddr::V4(ip),
        };
        let (ra, rb) = (
            remote(&b, ip_b, mac_b, psn_b),
            remote(&a, ip_a, mac_a, psn_a),
        );
        a.ep.connect(a.qpn, &ra, &opts(psn_a)).expect("connect A");
        b.ep.connect(b.qpn, &rb, &opts(psn_b)).expect("connect B");
        World {
            a,
            b,
            a_to_b: VecDeque::new(),
            b_to_a: VecDeque::new(),
            now: Instant::ZERO,
            buf: vec![0u8; 9000],
        }
    }

    /// Move what both sides have to send onto the wire.
    fn pump(&mut self) {
        for (ep, q) in [
            (&mut self.a.ep, &mut self.a_to_b),
            (&mut self.b.ep, &mut self.b_to_a),
        ] {
            for _ in 0..64 {
                let Some(n) = ep.poll_transmit(self.now, &mut self.buf) else {
                    break;
                };
                if q.len() >= MAX_IN_FLIGHT {
                    q.pop_front();
                }
                q.push_back(self.buf[..n].to_vec());
            }
        }
    }

    fn check(&mut self) {
        self.a.check_completions("A");
        self.b.check_completions("B");
        self.a.check_regions("A", SEED_A);
        self.b.check_regions("B", SEED_B);
    }

    fn step(&mut self, input: &mut Input<'_>) {
        let op = input.u8();
        let to_b = op & 1 == 0;
        match op >> 1 {
            // Deliver (most often), drop, duplicate.
            0..=39 => self.deliver(to_b, |f, _| Some(f)),
            40..=47 => {
                self.queue(to_b).pop_front();
            }
            48..=55 => {
                if let Some(f) = self.queue(to_b).front().cloned() {
                    self.receive(to_b, &f);
                }
            }
            // Deliver out of order: the second frame first.
            56..=61 => {
                let q = self.queue(to_b);
                if q.len() >= 2 {
                    q.swap(0, 1);
                }
                self.deliver(to_b, |f, _| Some(f));
            }
            // Mutate field by field (ICRC recomputed), or raw bytes.
            62..=85 => self.deliver_with(to_b, input, mutate),
            86..=91 => self.deliver_with(to_b, input, |mut f, input| {
                flip(&mut f, input);
                Some(f)
            }),
            // Forge a frame from the template of the other direction's
            // last frame (so from the peer's addresses).
            92..=99 => {
                let template = self.queue(!to_b).front().cloned();
                if let Some(t) = template {
                    if let Some(f) = mutate(t, input) {
                        self.receive(to_b, &f);
                    }
                }
            }
            // Work on A for an even op byte (A then sends to B), on B for
            // an odd one.
            100..=109 => self.post_send(!to_b, input),
            110..=115 => self.post_recv(!to_b, input),
            116..=121 => {
                let us = u64::from(input.u16()) * 8;
                self.now += Duration::from_micros(us);
                self.a.ep.handle_timeout(self.now);
                self.b.ep.handle_timeout(self.now);
            }
            _ => {
                // Jump to the next deadline.
                let next = [self.a.ep.poll_timeout(), self.b.ep.poll_timeout()]
                    .into_iter()
                    .flatten()
                    .min();
                if let Some(t) = next {
                    self.now = self.now.max(t);
                }
                self.a.ep.handle_timeout(self.now);
                self.b.ep.handle_timeout(self.now);
            }
        }
    }

    fn queue(&mut self, to_b: bool) -> &mut VecDeque<Vec<u8>> {
        if to_b {
            &mut self.a_to_b
        } else {
            &mut self.b_to_a
        }
    }

    fn receive(&mut self, to_b: bool, frame: &[u8]) {
        let ep = if to_b { &mut self.b.ep } else { &mut self.a.ep };
        ep.handle_packet(self.now, frame);
    }

    fn deliver(&mut self, to_b: bool, f: impl FnOnce(Vec<u8>, &mut ()) -> Option<Vec<u8>>) {
        if let Some(frame) = self.queue(to_b).pop_front() {
            if let Some(out) = f(frame, &mut ()) {
                self.receive(to_b, &out);
            }
        }
    }

    fn deliver_with(
        &mut self,
        to_b: bool,
        input: &mut Input<'_>,
        f: fn(Vec<u8>, &mut Input<'_>) -> Option<Vec<u8>>,
    ) {
        if let Some(frame) = self.queue(to_b).pop_front() {
            if let Some(out) = f(frame, input) {
                self.receive(to_b, &out);
            }
        }
    }

    /// A work request on A (`on_b` false) or B, to the peer's data region
    /// (or, now and then, to its other regions or with a wrong key).
    fn post_send(&mut self, on_b: bool, input: &mut Input<'_>) {
        let (me, peer) = if on_b {
            (&mut self.b, &self.a)
        } else {
            (&mut self.a, &self.b)
        };
        let kind = input.below(8);
        let opcode = [
            SendOp::Write,
            SendOp::WriteWithImm,
            SendOp::Send,
            SendOp::SendWithImm,
            SendOp::Read,
            SendOp::Read,
            SendOp::FetchAdd,
            SendOp::CompareSwap,
        ][kind as usize];
        let len = if opcode.is_atomic() {
            8
        } else {
            u32::from(input.u16()) % 9000
        };
        let local_off = (u64::from(input.u16()) % (DATA_LEN as u64 - 9000)) & !7;
        let remote_off = (u64::from(input.u16()) % (DATA_LEN as u64 - 9000)) & !7;
        let (rkey, remote_base) = match input.below(16) {
            0 => (peer.read_only.rkey, IOVA + 0x10_0000),
            1 => (peer.canary.rkey, IOVA + 0x20_0000),
            2 => (input.u32(), IOVA),
            _ => (peer.data.rkey, IOVA),
        };
        let id = me.id();
        let wr = SendWr {
            wr_id: id,
            opcode,
            local: Sge {
                lkey: me.data.lkey,
                addr: IOVA + local_off,
                length: len,
            },
            remote_addr: remote_base + remote_off,
            rkey,
            imm: input.u32(),
            compare_add: input.u64(),
            swap: input.u64(),
            signaled: true,
        };
        if me.ep.post_send(me.qpn, wr).is_ok() {
            me.sends.insert(id);
        }
    }

    fn post_recv(&mut self, on_b: bool, input: &mut Input<'_>) {
        let me = if on_b { &mut self.b } else { &mut self.a };
        let id = me.id();
        let length = u32::from(input.u16()) % 12_000;
        let off = u64::from(input.u16()) % (DATA_LEN as u64 - 12_000);
        let wr = RecvWr {
            wr_id: id,
            sge: Sge {
                lkey: me.data.lkey,
                addr: IOVA + off,
                length,
            },
        };
        if me.ep.post_recv(me.qpn, wr).is_ok() {
            me.recvs.insert(id);
        }
    }
}

/// `frame` with one to four fields changed, re-emitted with a valid ICRC
/// (so only the transport's checks can refuse it).
fn mutate(frame: Vec<u8>, input: &mut Input<'_>) -> Option<Vec<u8>> {
    let parsed = parse_frame(&frame).ok()?;
    let mut h = parsed.headers;
    let mut payload = parsed.payload.to_vec();
    for _ in 0..1 + input.below(4) {
        match input.below(16) {
            0 => h.bth.opcode = Opcode::ALL[input.below(Opcode::ALL.len() as u8) as usize],
            1 => h.bth.psn = h.bth.psn.wrapping_add(i32::from(input.u8() as i8) as u32) & 0xFF_FFFF,
            2 => h.bth.psn = input.u32() & 0xFF_FFFF,
            3 => h.bth.dest_qp ^= u32::from(input.below(4)),
            4 => h.bth.ack_req = !h.bth.ack_req,
            5 => h.bth.pkey = input.u16(),
            6 => {
                if let Some(r) = h.reth.as_mut() {
                    match input.below(3) {
                        0 => r.va = r.va.wrapping_add(u64::from(input.u16())),
                        1 => r.rkey ^= 1 << input.below(32),
                        _ => r.dma_len = input.u32() >> input.below(32),
                    }
                }
            }
            7 => {
                if let Some(a) = h.aeth.as_mut() {
                    a.syndrome = input.u8();
                    if input.u8() & 1 == 1 {
                        a.msn = input.u32() & 0xFF_FFFF;
                    }
                }
            }
            8 => {
                if let Some(a) = h.atomic_eth.as_mut() {
                    a.va = a.va.wrapping_add(u64::from(input.u8()));
                    a.compare = input.u64();
                }
            }
            9 => {
                if let Some(a) = h.atomic_ack_eth.as_mut() {
                    a.orig = input.u64();
                }
            }
            10 => mutate_payload(&mut payload, input),
            11 => {
                if let IpRepr::V4 { src, .. } = &mut h.ip {
                    *src = Ipv4Addr::from_bits(src.to_bits() ^ u32::from(input.u8()));
                }
            }
            12 => h.udp.src_port ^= input.u16(),
            13 => {
                if let Some(i) = h.immdt.as_mut() {
                    *i = input.u32();
                }
            }
            14 => {
                let bits = input.u8();
                h.bth.solicited = bits & 1 != 0;
                h.bth.mig_req = bits & 2 != 0;
                h.bth.fecn = bits & 4 != 0;
                h.bth.becn = bits & 8 != 0;
            }
            _ => {
                if let IpRepr::V4 { ecn, .. } = &mut h.ip {
                    *ecn = Ecn::Ce;
                }
            }
        }
    }
    conform(&mut h, input, IOVA);
    if !h.bth.opcode.has_payload() {
        payload.clear();
    }
    if h.bth.opcode == Opcode::Cnp {
        payload = vec![0; 16];
    }
    let mut buf = vec![0u8; payload.len() + 256];
    let n = emit_frame(&h, &payload, &mut buf).ok()?;
    buf.truncate(n);
    Some(buf)
}

pub fn run(data: &[u8]) {
    let _ = play(data);
}

/// [`run`], returning both sides' counters (A's, B's) at the end: what
/// the tests use to see that a seed reaches the transport.
pub fn play(data: &[u8]) -> (Counters, Counters) {
    let mut input = Input(data);
    let mtu = [Mtu::Mtu256, Mtu::Mtu1024, Mtu::Mtu4096][input.below(3) as usize];
    let max_rd = 1 + input.below(4);
    let mut w = World::new(mtu, max_rd);
    for _ in 0..MAX_STEPS {
        if input.is_empty() {
            break;
        }
        w.pump();
        w.step(&mut input);
        w.check();
    }
    // Let the pair run on its own for a while: whatever state the input
    // left, the invariants hold as it settles.
    for _ in 0..64 {
        w.pump();
        let (ab, ba) = (w.a_to_b.pop_front(), w.b_to_a.pop_front());
        if ab.is_none() && ba.is_none() {
            w.now += Duration::from_millis(2);
            w.a.ep.handle_timeout(w.now);
            w.b.ep.handle_timeout(w.now);
        }
        if let Some(f) = ab {
            w.receive(true, &f);
        }
        if let Some(f) = ba {
            w.receive(false, &f);
        }
        w.check();
    }
    (w.a.ep.counters(), w.b.ep.counters())
}
