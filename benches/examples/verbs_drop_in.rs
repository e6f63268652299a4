//! The drop-in libibverbs' rows alone (needs root): Debian's stock `ib_write_bw`
//! (64 B, 64 KiB) and `ib_send_lat` (64 B) under `roce-xdp exec`, the
//! drop-in libibverbs, against `roce-xdp write-bw` and `roce-xdp send-lat`,
//! and the transfer-engine pattern (`benches/programs/threaded_rdma_bw.c`,
//! 64 KiB READ and WRITE; compiled with `cc`, needs libibverbs-dev) against
//! `roce-xdp read-bw` / `write-bw`, on one veth pair, paired in one run.
//! The same code as `roce-xdp bench` (`verbs_drop_in::measure`), printed as
//! the report's table.
//!
//! `verbs_drop_in [quick]`: 6 pairs of 2 s bandwidth runs and 20000-round
//! trip latency runs (quick: 2 pairs, 1 s, 2000). Build first:
//! `cargo build --release -p roce-xdp -p roce-xdp-ibverbs` (the tools come
//! from `ROCE_XDP_BIN` or `roce-xdp` next to this example's target
//! directory; `exec` links the drop-in from the archive beside it).

use engine::driver::PollMode;
use engine::testbed::netns::{PairConfig, VethPair};
use roce_xdp_benches::options::{Options, LINK_MTU};
use roce_xdp_benches::verbs_drop_in;

fn main() {
    let quick = std::env::args().any(|a| a == "quick");
    let pair = VethPair::create(&PairConfig {
        mtu: LINK_MTU,
        queues: 2,
    })
    .expect("creating the veth pair (needs root)");
    let opts = Options {
        quick,
        progress: true,
        engine_poll: PollMode::default(),
        pairs: None,
        only: None,
    };
    let mut missing = Vec::new();
    let report = verbs_drop_in::measure(&pair, &opts, &mut missing);
    for t in report.tables() {
        println!("{}", t.title);
        println!("| {} |", t.header.join(" | "));
        for r in &t.rows {
            println!("| {} |", r.join(" | "));
        }
    }
    for p in report.targets.iter().flat_map(|t| {
        t.pairs
            .iter()
            .map(move |p| (t.stock.as_str(), t.message_bytes, p))
    }) {
        println!(
            "pair: {} {} B: stock {:.2}, tool {:.2}, ratio {:.3} ({} first)",
            p.0,
            p.1,
            p.2.stock,
            p.2.tool,
            p.2.ratio(),
            if p.2.stock_first { "stock" } else { "tool" }
        );
    }
    for m in missing {
        println!("missing: {m}");
    }
}
