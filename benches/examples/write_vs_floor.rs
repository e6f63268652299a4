//! Focused comparison of engine goodput with the AF_XDP floor, measured in
//! the same run on one veth pair (needs root):
//!
//! `write_vs_floor [ROUNDS] [SECONDS] [OPS] [SIZES]`, e.g.
//! `write_vs_floor 3 2 write,send,read 64,1024,65536`: every round
//! measures the floor and then the engine at each size; prints every
//! figure and the best-of-rounds ratios engine / floor, of goodput and of
//! CPU time per packet of the thread that sends the data (floor: the
//! sender; engine: the requester's thread for WRITE and SEND, the
//! responder's for READ), which is what bounds each when that thread has
//! a core of its own, and varies far less with other load than goodput. `ENGINE_ONLY=1`
//! or `FLOOR_ONLY=1` measures one side only (for profiling).

use std::time::Duration;

use engine::io::PollMode;
use engine::netns::{PairConfig, VethPair};
use roce_xdp_benches::engine_path::{measure_points, Op};
use roce_xdp_benches::harness::{floor_point, LINK_MTU};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let rounds: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(3);
    let secs: f64 = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(2.0);
    let ops: Vec<Op> = args
        .get(3)
        .map(|a| a.as_str())
        .unwrap_or("write")
        .split(',')
        .map(|o| match o {
            "send" => Op::Send,
            "read" => Op::Read,
            _ => Op::Write,
        })
        .collect();
    let sizes: Vec<u64> = args
        .get(4)
        .map(|a| a.as_str())
        .unwrap_or("64,1024,65536")
        .split(',')
        .filter_map(|s| s.parse().ok())
        .collect();
    let point = Duration::from_secs_f64(secs);
    // ENGINE_ONLY=1 / FLOOR_ONLY=1: one side only (for profiling).
    let skip_floor = std::env::var_os("ENGINE_ONLY").is_some();
    let skip_engine = std::env::var_os("FLOOR_ONLY").is_some();
    let poll = PollMode::default();
    let pair = VethPair::create(&PairConfig {
        mtu: LINK_MTU,
        queues: 2,
    })
    .expect("creating the veth pair (needs root)");
    let mut best_floor = vec![0.0f64; sizes.len()];
    let mut best_engine = vec![vec![0.0f64; sizes.len()]; ops.len()];
    // Lowest CPU time per packet of the thread sending the data.
    let mut best_floor_ns = vec![f64::INFINITY; sizes.len()];
    let mut best_engine_ns = vec![vec![f64::INFINITY; sizes.len()]; ops.len()];
    for round in 0..rounds {
        for (i, &size) in sizes.iter().enumerate() {
            if skip_floor {
                continue;
            }
            let f = floor_point(&pair, size, point, poll).expect("floor");
            let (tx, rx) = f.thread_ns_per_packet.unwrap_or_default();
            println!(
                "round {round} floor {size} B: {:.2} Gb/s {:.3} Mpps; thread CPU per packet: sender {tx:.0} ns, receiver {rx:.0} ns",
                f.gbps, f.mpps
            );
            best_floor_ns[i] = best_floor_ns[i].min(tx);
            best_floor[i] = best_floor[i].max(f.gbps);
        }
        let pts = if skip_engine {
            Vec::new()
        } else {
            measure_points(&pair, &ops, &sizes, point, poll).expect("engine")
        };
        for p in pts {
            let i = sizes.iter().position(|&s| s == p.message_bytes).unwrap();
            let o = ops.iter().position(|&o| o == p.op).unwrap();
            let (ta, tb) = p.thread_ns_per_packet.unwrap_or_default();
            println!(
                "round {round} {:?} {} B: {:.2} Gb/s {:.3} Mmsg/s; process CPU per packet {:.0} ns; engine thread CPU per packet: a {ta:.0} ns, b {tb:.0} ns",
                p.op,
                p.message_bytes,
                p.gbps,
                p.mpps,
                p.cpu_ns_per_packet.unwrap_or(0.0)
            );
            let sender = if p.op == Op::Read { tb } else { ta };
            best_engine_ns[o][i] = best_engine_ns[o][i].min(sender);
            best_engine[o][i] = best_engine[o][i].max(p.gbps);
        }
    }
    for (o, op) in ops.iter().enumerate() {
        for (i, size) in sizes.iter().enumerate() {
            println!(
                "best {op:?} {size} B: engine {:.2} / floor {:.2} Gb/s = {:.2}; sending thread CPU per packet: floor {:.0} / engine {:.0} ns = {:.2}",
                best_engine[o][i],
                best_floor[i],
                best_engine[o][i] / best_floor[i],
                best_floor_ns[i],
                best_engine_ns[o][i],
                best_floor_ns[i] / best_engine_ns[o][i]
            );
        }
    }
}
