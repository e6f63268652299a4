//! One `qp_scale` rig (`roce-xdp bench`'s "per-packet cost with N active
//! QPs" rows) for a profiler or a cache simulator: builds the rig of N QP
//! pairs, then runs PASSES responder (or, with `req`, requester) passes,
//! printing each pass's (fastest batch, mean) ns per packet. With `reset`,
//! the passes only reset the QPs (the untimed part), so that the
//! difference of two runs is the timed part alone. With `snapshot`, each
//! pass starts with the endpoint's counters summed and ends with the next
//! sum, as the driver's statistics take it every few milliseconds, and
//! prints both parts' ns per packet
//! ([`roce_xdp_benches::qp_scale::Rig::pass_with_snapshot`]):
//!
//! ```text
//! valgrind --tool=cachegrind --cache-sim=yes \
//!     target/release/examples/qp_scale_probe 65536 2 [req] [reset] [shuffled] [snapshot]
//! ```
//!
//! `qp_scale_probe rows [PASSES]` prints the rows `roce-xdp bench` reports
//! under `qp_scale` and `qp_scale_memory` (3 passes by default, as the
//! full run), alone. `qp_scale_probe mem [MIB...]` prints the dependent
//! load latency over buffers of those sizes (the memory rows' measure; 1
//! to 64 MiB by default), to find where this machine's caches end.
use roce_xdp_benches::qp_scale::{
    measure, memory_latency, memory_rows, QpOrder, Rig, QP_COUNTS, SIM_MESSAGES,
};

/// Large tables (an endpoint's QPs) in huge pages: `engine::io::HugePageAlloc`.
#[global_allocator]
static ALLOC: engine::io::HugePageAlloc = engine::io::HugePageAlloc;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("rows") {
        let passes = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(3);
        for r in measure(&QP_COUNTS, passes, SIM_MESSAGES).expect("qp_scale rows") {
            println!(
                "{:9} {:8} {:6} QPs {:8.1} ns {:5.2}x",
                r.path, r.order, r.qps, r.ns_per_packet, r.ratio
            );
        }
        for r in memory_rows(&QP_COUNTS, passes) {
            println!(
                "memory    {:9} B {:6} QPs {:8.1} ns a dependent load",
                r.bytes, r.qps, r.ns_per_load
            );
        }
        return;
    }
    if args.get(1).map(String::as_str) == Some("mem") {
        let mut sizes: Vec<f64> = args[2..].iter().filter_map(|a| a.parse().ok()).collect();
        if sizes.is_empty() {
            sizes = vec![1.0, 2.0, 4.0, 8.0, 12.0, 16.0, 24.0, 32.0, 64.0];
        }
        for mib in sizes {
            let bytes = (mib * (1 << 20) as f64) as usize;
            println!(
                "{mib:8.2} MiB {:8.1} ns a dependent load",
                memory_latency(bytes, 3)
            );
        }
        return;
    }
    let usage = "usage: qp_scale_probe QPS PASSES [req] [reset] [shuffled] [snapshot] | rows [PASSES] | mem [MIB...]";
    let n: u32 = args.get(1).and_then(|a| a.parse().ok()).expect(usage);
    let passes: usize = args.get(2).and_then(|a| a.parse().ok()).expect(usage);
    let req = args.iter().any(|a| a == "req");
    let reset_only = args.iter().any(|a| a == "reset");
    let snapshot = args.iter().any(|a| a == "snapshot");
    let order = if args.iter().any(|a| a == "shuffled") {
        QpOrder::Shuffled
    } else {
        QpOrder::Slot
    };
    let mut rig = Rig::with_order(n, order);
    for _ in 0..passes {
        if snapshot {
            let (pass, look) = rig.pass_with_snapshot(req);
            eprintln!(
                "pass {pass:.1} + snapshot {look:.1} = {:.1} ns/packet",
                pass + look
            );
            continue;
        }
        match (req, reset_only) {
            (false, false) => eprintln!("{:?}", rig.responder_pass()),
            (true, false) => eprintln!("{:?}", rig.requester_pass()),
            (false, true) => rig.reset_b(),
            (true, true) => rig.reset_a(),
        }
    }
    // How much of the process is in huge pages (engine::io::HugePageAlloc).
    if let Ok(s) = std::fs::read_to_string("/proc/self/smaps_rollup") {
        for l in s
            .lines()
            .filter(|l| l.starts_with("Rss") || l.starts_with("AnonHuge"))
        {
            eprintln!("{l}");
        }
    }
}
