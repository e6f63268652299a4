//! The multi-queue row of `roce-xdp bench` alone (needs root):
//! `multi_queue [QUEUES] [ROUNDS]` (default 2 queues per side, 3 rounds):
//! 64 KiB RDMA WRITE on 8 QP pairs with one queue per side and with QUEUES,
//! over veths joined by a bridge that spreads flows over the queues by hash
//! (see `roce_xdp_benches::multi_queue`).

use engine::driver::PollMode;
use roce_xdp_benches::multi_queue;
use roce_xdp_benches::options::Options;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let queues = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(2);
    let rounds = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(3);
    let opts = Options {
        quick: false,
        progress: true,
        engine_poll: PollMode::default(),
        pairs: None,
        only: None,
    };
    match multi_queue::measure(&opts, opts.engine_poll, queues, rounds) {
        Ok(m) => {
            for r in &m.rows {
                println!(
                    "{} queue(s): {:.2} Gb/s, {:.2} % of packets handed to another queue, {:.0} ns engine CPU per packet",
                    r.queues,
                    r.gbps,
                    r.handoff_share * 100.0,
                    r.cpu_ns_per_packet
                );
            }
            if let Some(c) = m.cpu_ratio {
                println!("CPU per packet, {queues} queues / 1: {c:.3} (target <= 1.10)");
            }
        }
        Err(e) => {
            eprintln!("multi_queue: {e}");
            std::process::exit(1);
        }
    }
}
