//! Congestion-control costs.
//!
//! Run: `cargo bench -p roce-xdp-benches --bench cc`.
//! Target: CE detection and CNP pacing add under 5 % to the
//! responder's per-packet cost at 64 B, marking on vs off in the same run.
//!
//! `responder_64B/{ect0,ce}`: an endpoint receives 64-byte RDMA WRITE_ONLY
//! frames (AckReq on every 16th) for one QP and drains what it has to send
//! (ACKs, and CNPs when marked), time advancing 5 ns per frame (64 B at
//! ~100 Gb/s). The frames differ only in the IP ECN field: ECT(0), or CE on
//! every frame (the worst case: every packet is counted and asks the per-QP
//! pacer; one CNP per 4 us is built and sent). Frames are prepared outside
//! the timed region, in chunks with fresh PSNs.
//!
//! `np_on_ce_marked`, `rp_may_send_consume`: the per-packet calls alone.
//!
//! Last, a paired measurement that is robust to a busy machine: two
//! responders (ECT(0) frames and CE frames) take turns, one 4096-frame chunk
//! each per round, and the per-round ratio CE / ECT(0) is reported as a
//! median with its quartiles (`ROUNDS` env var, default 300).

use core::net::{IpAddr, Ipv4Addr};
use std::hint::black_box;
use std::time::{Duration, Instant as WallInstant};

use criterion::{criterion_group, Criterion, Throughput};
use engine::cc::{CcConfig, QpCongestion};
use engine::endpoint::{ConnectOptions, Endpoint, EndpointConfig, RemoteQp};
use engine::rc::{Access, QpInitAttr};
use engine::time::Instant;
use engine::wire::{
    emit_frame, frame_len, BthRepr, Ecn, EthRepr, IpRepr, Opcode, RethRepr, RoceHeaders, UdpRepr,
    DEFAULT_PKEY, ROCE_V2_UDP_PORT,
};

const MAC_A: [u8; 6] = [2, 0, 0, 0, 0, 1];
const MAC_B: [u8; 6] = [2, 0, 0, 0, 0, 2];
const IP_A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const IP_B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const CHUNK: usize = 4096;
const PAYLOAD: usize = 64;

struct Responder {
    ep: Endpoint,
    qpn: u32,
    rkey: u32,
    next_psn: u32,
    now_ns: u64,
}

fn responder() -> Responder {
    let mut ep = Endpoint::new(EndpointConfig {
        local_mac: MAC_B,
        local_ip: IpAddr::V4(IP_B),
        cc: CcConfig::default(),
        ..Default::default()
    });
    let cq = ep.create_cq(1024);
    let qpn = ep
        .create_qp(QpInitAttr {
            send_cq: cq,
            recv_cq: cq,
            ..Default::default()
        })
        .expect("qp");
    ep.connect(
        qpn,
        &RemoteQp {
            qpn: 0x11,
            psn: 0,
            mac: MAC_A,
            ip: IpAddr::V4(IP_A),
        },
        &ConnectOptions::default(),
    )
    .expect("connect");
    let keys = ep
        .reg_mr(
            Box::new(vec![0u8; 1 << 16]),
            0x10_0000,
            Access::LOCAL_WRITE | Access::REMOTE_WRITE,
        )
        .expect("mr");
    Responder {
        ep,
        qpn,
        rkey: keys.rkey,
        next_psn: 0,
        now_ns: 0,
    }
}

/// `CHUNK` WRITE_ONLY frames with consecutive PSNs, concatenated.
fn frames(r: &mut Responder, ecn: Ecn) -> (Vec<u8>, usize) {
    let mut h = RoceHeaders {
        eth: EthRepr {
            dst: MAC_B,
            src: MAC_A,
            vlan: None,
        },
        ip: IpRepr::V4 {
            src: IP_A,
            dst: IP_B,
            dscp: 26,
            ecn,
            ttl: 64,
            ident: 0,
            dont_fragment: true,
        },
        udp: UdpRepr {
            src_port: 0xC011,
            dst_port: ROCE_V2_UDP_PORT,
        },
        bth: BthRepr {
            opcode: Opcode::WriteOnly,
            solicited: false,
            mig_req: false,
            pad_count: 0,
            pkey: DEFAULT_PKEY,
            fecn: false,
            becn: false,
            dest_qp: r.qpn,
            ack_req: false,
            psn: 0,
        },
        reth: Some(RethRepr {
            va: 0x10_0000,
            rkey: r.rkey,
            dma_len: PAYLOAD as u32,
        }),
        aeth: None,
        atomic_eth: None,
        atomic_ack_eth: None,
        immdt: None,
        ieth: None,
        deth: None,
    };
    let len = frame_len(&h, PAYLOAD);
    let payload = [0xA5u8; PAYLOAD];
    let mut out = vec![0u8; len * CHUNK];
    for (i, buf) in out.chunks_mut(len).enumerate() {
        h.bth.psn = r.next_psn;
        h.bth.ack_req = i % 16 == 15;
        r.next_psn = (r.next_psn + 1) & 0xFF_FFFF;
        emit_frame(&h, &payload, buf).expect("emit");
    }
    (out, len)
}

/// Push one prepared chunk through the responder; returns the time taken.
fn timed_chunk(r: &mut Responder, batch: &[u8], len: usize, n: usize, tx: &mut [u8]) -> Duration {
    let start = WallInstant::now();
    for f in batch.chunks(len).take(n) {
        let now = Instant::from_nanos(r.now_ns);
        r.ep.handle_packet(now, black_box(f));
        while let Some(k) = r.ep.poll_transmit(now, tx) {
            black_box(&tx[..k]);
        }
        r.now_ns += 5;
    }
    start.elapsed()
}

fn check(r: &Responder, ecn: Ecn) {
    let c = r.ep.counters();
    assert_eq!(c.dropped_malformed + c.out_of_seq_request, 0, "{c:?}");
    if ecn == Ecn::Ce && r.next_psn as usize >= CHUNK {
        assert!(c.np_cnp_sent > 0 && c.np_ecn_marked_roce_packets > 0);
    }
}

/// Time `iters` frames through the responder (handle + drain transmits).
fn run_responder(iters: u64, ecn: Ecn) -> Duration {
    let mut r = responder();
    let mut tx = vec![0u8; 4200];
    let mut total = Duration::ZERO;
    let mut left = iters;
    while left > 0 {
        let (batch, len) = frames(&mut r, ecn);
        let n = (left as usize).min(CHUNK);
        total += timed_chunk(&mut r, &batch, len, n, &mut tx);
        left -= n as u64;
    }
    check(&r, ecn);
    total
}

fn quartiles(v: &mut [f64]) -> (f64, f64, f64) {
    v.sort_by(|a, b| a.total_cmp(b));
    let q = |p: f64| v[((v.len() - 1) as f64 * p).round() as usize];
    (q(0.25), q(0.5), q(0.75))
}

/// The paired ECT(0)/CE comparison (see the module docs).
fn paired_overhead() {
    let rounds: usize = std::env::var("ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(300);
    let (mut plain, mut marked) = (responder(), responder());
    let mut tx = vec![0u8; 4200];
    let (mut t_plain, mut t_marked, mut ratio) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds {
        let (bp, len) = frames(&mut plain, Ecn::Ect0);
        let (bm, _) = frames(&mut marked, Ecn::Ce);
        let (a, b) = if round % 2 == 0 {
            let a = timed_chunk(&mut plain, &bp, len, CHUNK, &mut tx);
            (a, timed_chunk(&mut marked, &bm, len, CHUNK, &mut tx))
        } else {
            let b = timed_chunk(&mut marked, &bm, len, CHUNK, &mut tx);
            (timed_chunk(&mut plain, &bp, len, CHUNK, &mut tx), b)
        };
        let (a, b) = (
            a.as_nanos() as f64 / CHUNK as f64,
            b.as_nanos() as f64 / CHUNK as f64,
        );
        t_plain.push(a);
        t_marked.push(b);
        ratio.push(b / a);
    }
    check(&plain, Ecn::Ect0);
    check(&marked, Ecn::Ce);
    let cm = marked.ep.counters();
    let (_, p50, _) = quartiles(&mut t_plain);
    let (_, m50, _) = quartiles(&mut t_marked);
    let (r25, r50, r75) = quartiles(&mut ratio);
    println!(
        "responder_64B paired, {rounds} rounds x {CHUNK} frames: ECT(0) median {p50:.1} ns/frame, \
         CE median {m50:.1} ns/frame; CE/ECT(0) per round: median {:+.2} % (quartiles {:+.2} % .. {:+.2} %); \
         CNPs sent {} for {} CE frames",
        (r50 - 1.0) * 100.0,
        (r25 - 1.0) * 100.0,
        (r75 - 1.0) * 100.0,
        cm.np_cnp_sent,
        cm.np_ecn_marked_roce_packets,
    );
}

fn responder_benches(c: &mut Criterion) {
    let mut g = c.benchmark_group("responder_64B");
    g.throughput(Throughput::Elements(1));
    g.bench_function("ect0", |b| {
        b.iter_custom(|iters| run_responder(iters, Ecn::Ect0))
    });
    g.bench_function("ce", |b| {
        b.iter_custom(|iters| run_responder(iters, Ecn::Ce))
    });
    g.finish();
}

fn per_call_benches(c: &mut Criterion) {
    let mut g = c.benchmark_group("cc");
    g.bench_function("np_on_ce_marked", |b| {
        let mut q = QpCongestion::new();
        let mut t = 0u64;
        b.iter(|| {
            t += 5;
            q.on_packet_received(Instant::from_nanos(t), black_box(Ecn::Ce));
            black_box(q.poll_cnp(Instant::from_nanos(t)))
        })
    });
    // The reaction point's per-packet check, rate-limited (after a CNP)
    // and not.
    for (name, limited) in [
        ("rp_may_send_consume_limited", true),
        ("rp_may_send_consume_unlimited", false),
    ] {
        g.bench_function(name, |b| {
            let mut q = QpCongestion::new();
            if limited {
                q.on_cnp(Instant::ZERO);
            }
            let mut t = 0u64;
            b.iter(|| {
                t += 100;
                let now = Instant::from_nanos(t);
                if q.may_send(now, black_box(1078)) {
                    q.on_sent(now, 1078);
                }
            })
        });
    }
    g.finish();
}

criterion_group!(benches, responder_benches, per_call_benches);

fn main() {
    benches();
    paired_overhead();
    Criterion::default().configure_from_args().final_summary();
}
