//! UCX's rows alone (needs root): Debian's stock `ucx_perftest -t
//! ucp_put_bw -s 65536` and `-t tag_lat -s 64` (UCP over `rc_verbs` and
//! `ud_verbs`) under `roce-xdp exec`, the drop-in libibverbs, against
//! `roce-xdp write-bw` and `roce-xdp send-lat`, on one veth pair, paired in
//! one run. The same code as `roce-xdp bench` (`ucx::measure`), printed as
//! the report's table, then every pair.
//!
//! `ucx [quick]`: 4 pairs (quick: 2). Build first: `cargo build --release
//! -p roce-xdp -p roce-xdp-ibverbs` (the tools come from `ROCE_XDP_BIN` or
//! `roce-xdp` next to this example's target directory; `exec` links the
//! drop-in from the archive beside it).

use engine::driver::PollMode;
use engine::testbed::netns::{PairConfig, VethPair};
use roce_xdp_benches::options::{Options, LINK_MTU};
use roce_xdp_benches::ucx;

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
    let start = std::time::Instant::now();
    let report = ucx::measure(&pair, &opts, &mut missing);
    let took = start.elapsed();
    for t in report.tables() {
        println!("{}", t.title);
        println!("| {} |", t.header.join(" | "));
        for r in &t.rows {
            println!("| {} |", r.join(" | "));
        }
    }
    for t in &report.targets {
        for p in &t.pairs {
            println!(
                "pair: {} {} B: ucx {:.2}, tool {:.2}, ratio {:.3} ({} first)",
                t.stock,
                t.message_bytes,
                p.stock,
                p.tool,
                p.ratio(),
                if p.stock_first { "ucx" } else { "tool" }
            );
        }
    }
    for m in missing {
        println!("missing: {m}");
    }
    println!("the step took {:.1} s", took.as_secs_f64());
}
