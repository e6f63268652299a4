//! Two endpoints joined by a hand-driven wire: tests move every frame
//! themselves, with explicit times, and may drop, reorder, duplicate or
//! rewrite frames on the way.

use core::net::{IpAddr, Ipv4Addr};
use core::time::Duration;

use proto::endpoint::{ConnectOptions, Endpoint, EndpointConfig};
use proto::rc::{Access, MrKeys, Mtu, QpInitAttr, RecvWr, SendOp, SendWr, Sge, WorkCompletion};
use proto::time::Instant;
use proto::wire::{emit_frame, parse_frame, Opcode, RoceHeaders};

mod connect;
pub mod remote_ops;
pub use connect::{connect_endpoints, Side};

pub const MAC_A: [u8; 6] = [2, 0, 0, 0, 0, 0xA];
pub const MAC_B: [u8; 6] = [2, 0, 0, 0, 0, 0xB];
pub const IOVA_A: u64 = 0x10_0000;
pub const IOVA_B: u64 = 0x20_0000;
pub const MR_LEN: usize = 1 << 20;

pub struct Pair {
    pub a: Endpoint,
    pub b: Endpoint,
    pub qa: u32,
    pub qb: u32,
    pub cq_a: u32,
    pub cq_b: u32,
    pub mr_a: MrKeys,
    pub mr_b: MrKeys,
    pub now: Instant,
}

/// Connection options for tests: small timeouts, infinite RNR retry,
/// every remote right on the QP (as perftest sets them).
pub fn opts() -> ConnectOptions {
    ConnectOptions {
        timeout: 8,
        min_rnr_timer: 1,
        access: Access::ALL,
        ..ConnectOptions::default()
    }
}

/// Test options with path MTU `m`.
pub fn opts_mtu(m: Mtu) -> ConnectOptions {
    ConnectOptions {
        path_mtu: m,
        ..opts()
    }
}

/// A's `op` work request `wr_id` of `len` bytes at offset `off` of A's
/// region, to the same offset of B's region.
pub fn rdma_wr(p: &Pair, wr_id: u64, op: SendOp, len: u32, off: u64) -> SendWr {
    let mut wr = SendWr::new(
        wr_id,
        op,
        Sge {
            lkey: p.mr_a.lkey,
            addr: IOVA_A + off,
            length: len,
        },
    );
    wr.remote_addr = IOVA_B + off;
    wr.rkey = p.mr_b.rkey;
    wr
}

/// A's `op` work request `wr_id` on the first `len` bytes of A's region
/// (no remote address).
pub fn send_wr_a(p: &Pair, wr_id: u64, op: SendOp, len: u32) -> SendWr {
    SendWr::new(
        wr_id,
        op,
        Sge {
            lkey: p.mr_a.lkey,
            addr: IOVA_A,
            length: len,
        },
    )
}

/// B's receive `wr_id` into the first `len` bytes of B's region.
pub fn recv_wr_b(p: &Pair, wr_id: u64, len: u32) -> RecvWr {
    RecvWr {
        wr_id,
        sge: Sge {
            lkey: p.mr_b.lkey,
            addr: IOVA_B,
            length: len,
        },
    }
}

/// RDMA WRITE of A's `[off, off + len)` to the same offset at B.
pub fn write_wr(p: &Pair, wr_id: u64, len: u32, off: u64) -> SendWr {
    rdma_wr(p, wr_id, SendOp::Write, len, off)
}

/// RDMA READ of B's `[off, off + len)` into the same offset at A.
pub fn read_wr(p: &Pair, wr_id: u64, len: u32, off: u64) -> SendWr {
    rdma_wr(p, wr_id, SendOp::Read, len, off)
}

impl Pair {
    /// A and B connected with `oa` / `ob`; each has one 1 MiB region with
    /// every right.
    pub fn new(oa: ConnectOptions, ob: ConnectOptions) -> Pair {
        Pair::seeded(
            oa,
            ob,
            proto::endpoint::DEFAULT_SEED,
            proto::endpoint::DEFAULT_SEED,
        )
    }

    /// As [`Pair::new`], A's and B's numbers and keys drawn under
    /// `seed_a` / `seed_b` (what a device's OS-CSPRNG secret is to it).
    pub fn seeded(
        oa: ConnectOptions,
        ob: ConnectOptions,
        seed_a: [u64; 2],
        seed_b: [u64; 2],
    ) -> Pair {
        let (a, b) = connect_endpoints(
            EndpointConfig {
                local_mac: MAC_A,
                local_ip: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
                seed: seed_a,
                ..Default::default()
            },
            EndpointConfig {
                local_mac: MAC_B,
                local_ip: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)),
                seed: seed_b,
                ..Default::default()
            },
            1024,
            QpInitAttr {
                send_cq: 0,
                recv_cq: 0,
                max_send_wr: 64,
                max_recv_wr: 64,
                sq_sig_all: false,
                srq: None,
            },
            &oa,
            &ob,
        );
        Pair::with_regions(a, b, 0)
    }

    /// Connected sides `a` and `b` as a pair, each given a 1 MiB region
    /// with every right in protection domain `pd`.
    pub fn with_regions(a: Side, b: Side, pd: u32) -> Pair {
        let (
            Side {
                ep: mut a,
                qpn: qa,
                cq: cq_a,
            },
            Side {
                ep: mut b,
                qpn: qb,
                cq: cq_b,
            },
        ) = (a, b);
        let region = |ep: &mut Endpoint, iova| {
            ep.reg_mr_in(pd, Box::new(vec![0u8; MR_LEN]), iova, Access::ALL)
                .unwrap()
        };
        let (mr_a, mr_b) = (region(&mut a, IOVA_A), region(&mut b, IOVA_B));
        Pair {
            a,
            b,
            qa,
            qb,
            cq_a,
            cq_b,
            mr_a,
            mr_b,
            now: Instant::ZERO,
        }
    }

    /// Default pair.
    pub fn default_pair() -> Pair {
        Pair::new(opts(), opts())
    }

    /// Every frame A has to send now.
    pub fn tx_a(&mut self) -> Vec<Vec<u8>> {
        drain(&mut self.a, self.now)
    }

    /// Every frame B has to send now.
    pub fn tx_b(&mut self) -> Vec<Vec<u8>> {
        drain(&mut self.b, self.now)
    }

    pub fn deliver_b(&mut self, frames: &[Vec<u8>]) {
        for f in frames {
            self.b.handle_packet(self.now, f);
        }
    }

    pub fn deliver_a(&mut self, frames: &[Vec<u8>]) {
        for f in frames {
            self.a.handle_packet(self.now, f);
        }
    }

    /// Exchange frames both ways, losslessly, until both are quiet.
    pub fn settle(&mut self) {
        for _ in 0..10_000 {
            let fa = self.tx_a();
            let fb = self.tx_b();
            if fa.is_empty() && fb.is_empty() {
                return;
            }
            self.deliver_b(&fa);
            self.deliver_a(&fb);
        }
        panic!("pair did not settle");
    }

    /// Move time forward and run due timers on both sides.
    pub fn advance(&mut self, d: Duration) {
        self.now += d;
        self.a.handle_timeout(self.now);
        self.b.handle_timeout(self.now);
    }

    /// Jump to A's next deadline and run its timers.
    pub fn fire_a_timer(&mut self) {
        let t = self.a.poll_timeout().expect("A has a timer armed");
        assert!(t >= self.now);
        self.now = t;
        self.a.handle_timeout(self.now);
        self.b.handle_timeout(self.now);
    }

    pub fn wcs_a(&mut self) -> Vec<WorkCompletion> {
        drain_cq(&mut self.a, self.cq_a)
    }

    pub fn wcs_b(&mut self) -> Vec<WorkCompletion> {
        drain_cq(&mut self.b, self.cq_b)
    }

    pub fn read_b(&self, iova: u64, len: usize) -> Vec<u8> {
        let mut v = vec![0u8; len];
        self.b.mr_read(self.mr_b.lkey, iova, &mut v).unwrap();
        v
    }

    pub fn read_a(&self, iova: u64, len: usize) -> Vec<u8> {
        let mut v = vec![0u8; len];
        self.a.mr_read(self.mr_a.lkey, iova, &mut v).unwrap();
        v
    }
}

pub fn drain(ep: &mut Endpoint, now: Instant) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut buf = vec![0u8; 9000];
    while let Some(n) = ep.poll_transmit(now, &mut buf) {
        out.push(buf[..n].to_vec());
        assert!(out.len() < 100_000, "endpoint never stops transmitting");
    }
    out
}

pub fn drain_cq(ep: &mut Endpoint, cq: u32) -> Vec<WorkCompletion> {
    let mut out = Vec::new();
    while let Some(wc) = ep.poll_completion(cq) {
        out.push(wc);
    }
    out
}

/// Headers of a frame (panics if it does not parse).
pub fn hdr(frame: &[u8]) -> RoceHeaders {
    parse_frame(frame).expect("valid frame").headers
}

pub fn opcode(frame: &[u8]) -> Opcode {
    hdr(frame).bth.opcode
}

pub fn psn(frame: &[u8]) -> u32 {
    hdr(frame).bth.psn
}

pub fn payload(frame: &[u8]) -> Vec<u8> {
    parse_frame(frame).unwrap().payload.to_vec()
}

/// AETH syndrome of a frame.
pub fn syndrome(frame: &[u8]) -> u8 {
    hdr(frame).aeth.expect("AETH").syndrome
}

/// `frames` from A reach B, which refuses the first of them: B answers
/// one NAK of `syndrome` at its PSN and goes to error. Returns the NAK.
pub fn refused_by_b(p: &mut Pair, frames: &[Vec<u8>], syndrome: u8, what: &str) -> Vec<Vec<u8>> {
    p.deliver_b(frames);
    let n = p.tx_b();
    assert_eq!(n.len(), 1, "{what}: one answer");
    assert_eq!(opcode(&n[0]), Opcode::Acknowledge, "{what}");
    assert_eq!(self::syndrome(&n[0]), syndrome, "{what}: the NAK");
    assert_eq!(psn(&n[0]), psn(&frames[0]), "{what}: at the request's PSN");
    assert_eq!(
        p.b.qp_state(p.qb),
        Some(proto::rc::QpState::Error),
        "{what}"
    );
    n
}

/// Re-emit `frame` with its headers changed by `f` (ICRC recomputed).
pub fn rewrite(frame: &[u8], f: impl FnOnce(&mut RoceHeaders)) -> Vec<u8> {
    let p = parse_frame(frame).unwrap();
    let mut h = p.headers;
    f(&mut h);
    let mut buf = vec![0u8; 9000];
    let n = emit_frame(&h, p.payload, &mut buf).unwrap();
    buf.truncate(n);
    buf
}

/// Bytes `0, 1, 2, ...` (mod 251) of length `n`, offset by `seed`.
pub fn bytes(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| ((i % 251) as u8).wrapping_add(seed))
        .collect()
}
