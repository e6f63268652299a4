//! Focused comparison of engine goodput with the AF_XDP floor, measured in
//! the same run on one veth pair (needs root):
//!
//! `write_vs_floor [ROUNDS] [SECONDS] [OPS] [SIZES]`, e.g.
//! `write_vs_floor 3 2 write,send,read 64,1024,65536`: every round
//! measures, size by size, the floor and the engine back to back (a pair),
//! alternating which runs first from round to round (floor first in round
//! 0, engine first in round 1, ...: a drift linear in time cancels). It
//! prints every figure and, per op and size, the median of the per-round
//! ratios engine / floor (each from one adjacent pair, so it does not
//! depend on the machine's speed drifting between rounds) next to the
//! best-of-rounds ratio, of goodput and of CPU time per packet of the
//! thread that sends the data (floor: the sender; engine: the requester's
//! thread for WRITE and SEND, the responder's for READ), which is what
//! bounds each when that thread has a core of its own, and varies far
//! less with other load than goodput. `ENGINE_ONLY=1` or `FLOOR_ONLY=1`
//! measures one side only (for profiling); `SPREAD=1` places every message
//! in flight (the engine's, and the floor's payloads) in a range of its
//! own instead of perftest's layout (see `roce_xdp_benches::sources`);
//! `ONE_FRAME=1` makes the floor re-send one frame instead of reading the
//! messages (`FloorPayload::OneFrame`).

use std::time::Duration;

use engine::driver::PollMode;
use engine::testbed::netns::{PairConfig, VethPair};
use roce_xdp_benches::baselines::floor::{floor_point, FloorPayload};
use roce_xdp_benches::engine_path::{measure_points, Op};
use roce_xdp_benches::options::LINK_MTU;
use roce_xdp_benches::sources::SourceLayout;
use roce_xdp_benches::stats::{abba_a_first, median, median_ci, min_max};

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
    let layout = if std::env::var_os("SPREAD").is_some() {
        SourceLayout::Spread
    } else {
        SourceLayout::Perftest
    };
    // ONE_FRAME=1: the floor re-sends one frame instead of reading the
    // messages' bytes where the engine reads them.
    let floor_payload = if std::env::var_os("ONE_FRAME").is_some() {
        FloorPayload::OneFrame
    } else {
        FloorPayload::Messages(layout)
    };
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
    // Per op and size, the ratio engine / floor of each round's pair.
    let mut ratios = vec![vec![Vec::new(); sizes.len()]; ops.len()];
    let mut ns_ratios = vec![vec![Vec::new(); sizes.len()]; ops.len()];
    for round in 0..rounds {
        let floor_first = abba_a_first(round);
        for (i, &size) in sizes.iter().enumerate() {
            let measure_floor = || {
                if skip_floor {
                    return None;
                }
                let f = floor_point(&pair, size, floor_payload, point, poll).expect("floor");
                let (tx, rx) = f.thread_ns_per_packet.unwrap_or_default();
                println!(
                    "round {round} floor {size} B: {:.2} Gb/s {:.3} Mpps; thread CPU per packet: sender {tx:.0} ns, receiver {rx:.0} ns",
                    f.gbps, f.mpps
                );
                Some((f.gbps, tx))
            };
            let measure_engine = || {
                if skip_engine {
                    return Vec::new();
                }
                measure_points(&pair, &ops, &[size], layout, point, poll).expect("engine")
            };
            let (floor, pts) = if floor_first {
                let f = measure_floor();
                (f, measure_engine())
            } else {
                let e = measure_engine();
                (measure_floor(), e)
            };
            if let Some((gbps, tx)) = floor {
                best_floor_ns[i] = best_floor_ns[i].min(tx);
                best_floor[i] = best_floor[i].max(gbps);
            }
            for p in pts {
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
                if let Some((gbps, tx)) = floor {
                    if gbps > 0.0 {
                        ratios[o][i].push(p.gbps / gbps);
                    }
                    if sender > 0.0 {
                        ns_ratios[o][i].push(tx / sender);
                    }
                }
            }
        }
    }
    let show = |v: Option<f64>| v.map_or("n/a".to_string(), |x| format!("{x:.2}"));
    for (o, op) in ops.iter().enumerate() {
        for (i, size) in sizes.iter().enumerate() {
            let range = min_max(&ratios[o][i])
                .map_or("n/a".to_string(), |(lo, hi)| format!("{lo:.2}-{hi:.2}"));
            let ci = median_ci(&ratios[o][i], 0.95)
                .map_or("n/a".to_string(), |(lo, hi)| format!("{lo:.3}-{hi:.3}"));
            let all: Vec<String> = ratios[o][i].iter().map(|r| format!("{r:.3}")).collect();
            println!(
                "{op:?} {size} B: per-pair ratios engine / floor: {}",
                all.join(" ")
            );
            println!(
                "{op:?} {size} B: paired median engine / floor {} (95 % CI of the median {ci}, min-max {range}, {} pairs); best-of: engine {:.2} / floor {:.2} Gb/s = {:.2}; sending thread CPU per packet floor / engine: paired median {}, best-of {:.0} / {:.0} ns = {:.2}",
                show(median(&ratios[o][i])),
                ratios[o][i].len(),
                best_engine[o][i],
                best_floor[i],
                best_engine[o][i] / best_floor[i],
                show(median(&ns_ratios[o][i])),
                best_floor_ns[i],
                best_engine_ns[o][i],
                best_floor_ns[i] / best_engine_ns[o][i]
            );
        }
    }
}
