//! The simulator's speed: simulated events and frames per second of wall
//! time.
//!
//! Run: `cargo bench -p roce-xdp-benches --bench sim`.
//!
//! Each iteration builds two endpoints joined by 100 Gb/s, 5 us links in a
//! seeded [`Simulator`], posts 64 RDMA WRITEs of 64 KiB (PMTU 4096: 1 024
//! data frames plus ACKs) with 8 in flight, and steps the simulator until
//! every WRITE has completed; once on clean links and once with 1 % loss
//! and 1 % reordering (so retransmissions, NAKs and timers are exercised).
//! Throughput is counted in simulator events (`Simulator::step` calls), and
//! in frames delivered in a second group; both are deterministic for the
//! seed, so they are counted once before timing. No payload verification
//! runs inside the timed loop (the `sim_*` tests verify every byte); what
//! is timed is the sans-IO path of both endpoints plus the event queue.
//!
//! `sim_qp_scale/write_64B_{1,1024,16384,65536}_qps`: the whole verified
//! `run_workload` of 65,536 64 B WRITEs spread over N QPs, as `roce-xdp
//! sim --qps N` runs it (throughput in messages).

use core::net::{IpAddr, Ipv4Addr};
use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use engine::endpoint::{ConnectOptions, Endpoint, EndpointConfig, RemoteQp};
use engine::rc::{Access, Mtu, QpInitAttr, SendOp, SendWr, Sge, WcStatus, WorkCompletion};
use engine::sim::{Impairments, LinkConfig, Simulator};

const MESSAGES: u64 = 64;
const SIZE: u32 = 64 * 1024;
const WINDOW: u64 = 8;

/// Steps, frames delivered.
fn run(impair: Impairments) -> (u64, u64) {
    let link = LinkConfig {
        latency: Duration::from_micros(5),
        rate_bps: 100_000_000_000,
        impair,
    };
    let mut sim = Simulator::new(7);
    let ips = [
        IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
        IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)),
    ];
    let macs = [[2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]];
    let mut qpn = [0u32; 2];
    let mut keys = Vec::new();
    for i in 0..2 {
        let mut ep = Endpoint::new(EndpointConfig {
            local_mac: macs[i],
            local_ip: ips[i],
            ..Default::default()
        });
        let cq = ep.create_cq(1024);
        qpn[i] = ep
            .create_qp(QpInitAttr {
                send_cq: cq,
                recv_cq: cq,
                max_send_wr: 64,
                max_recv_wr: 64,
                sq_sig_all: false,
                srq: None,
            })
            .expect("create_qp");
        keys.push(
            ep.reg_mr(
                Box::new(vec![0x5Au8; SIZE as usize]),
                0x10000,
                Access::LOCAL_WRITE | Access::REMOTE_WRITE,
            )
            .expect("reg_mr"),
        );
        sim.add_node(ep, link);
    }
    for i in 0..2 {
        let o = 1 - i;
        let opts = ConnectOptions {
            path_mtu: Mtu::Mtu4096,
            timeout: 8,
            sq_psn: 100 * (i as u32 + 1),
            access: Access::REMOTE_WRITE,
            ..Default::default()
        };
        let remote = RemoteQp {
            qpn: qpn[o],
            psn: 100 * (o as u32 + 1),
            mac: macs[o],
            ip: ips[o],
        };
        sim.endpoint(i)
            .connect(qpn[i], &remote, &opts)
            .expect("connect");
    }
    let (mut posted, mut completed) = (0u64, 0u64);
    let mut wcs = [WorkCompletion::default(); 16];
    while completed < MESSAGES {
        while posted < MESSAGES && posted - completed < WINDOW {
            let mut wr = SendWr::new(
                posted,
                SendOp::Write,
                Sge {
                    lkey: keys[0].lkey,
                    addr: 0x10000,
                    length: SIZE,
                },
            );
            wr.remote_addr = 0x10000;
            wr.rkey = keys[1].rkey;
            sim.endpoint(0).post_send(qpn[0], wr).expect("post_send");
            posted += 1;
        }
        if !sim.step() {
            panic!("simulation ran dry with {completed} of {MESSAGES} WRITEs completed");
        }
        let n = sim.endpoint(0).poll_cq(0, &mut wcs);
        for wc in &wcs[..n] {
            assert_eq!(wc.status, WcStatus::Success);
            completed += 1;
        }
    }
    (sim.stats.steps, sim.stats.delivered)
}

fn simulator(c: &mut Criterion) {
    let cases = [
        ("clean", Impairments::NONE),
        (
            "loss1%_reorder1%",
            Impairments {
                loss: 0.01,
                reorder: 0.01,
                reorder_delay: Duration::from_micros(20),
                ..Impairments::NONE
            },
        ),
    ];
    for (unit, pick) in [("events", 0usize), ("frames", 1usize)] {
        let mut group = c.benchmark_group(format!("sim_write_64KiB_x64_{unit}"));
        for (name, impair) in cases {
            let (steps, frames) = run(impair);
            group.throughput(Throughput::Elements(if pick == 0 { steps } else { frames }));
            group.bench_function(name, |b| b.iter(|| black_box(run(black_box(impair)))));
        }
        group.finish();
    }
}

/// `roce-xdp sim --messages 65536 --size 64 --qps N` (every byte
/// verified, setup included), N = 1 / 1K / 16K / 64K: wall time per
/// message against the 1-QP row (target: <= 2x at 64K;
/// `roce_xdp_benches::qp_scale`).
fn sim_qp_scale(c: &mut Criterion) {
    use roce_xdp_benches::qp_scale::{sim_point, QP_COUNTS};
    const MSGS: u64 = 65_536;
    let mut g = c.benchmark_group("sim_qp_scale");
    g.sample_size(10);
    g.throughput(Throughput::Elements(MSGS));
    for n in QP_COUNTS {
        g.bench_function(format!("write_64B_{n}_qps"), |b| {
            b.iter(|| black_box(sim_point(n, MSGS).expect("verified run")))
        });
    }
    g.finish();
}

criterion_group!(benches, simulator, sim_qp_scale);

/// Large tables (an endpoint's QPs) in huge pages: `engine::io::HugePageAlloc`.
#[global_allocator]
static ALLOC: engine::io::HugePageAlloc = engine::io::HugePageAlloc;

criterion_main!(benches);
