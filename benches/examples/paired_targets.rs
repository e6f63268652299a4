//! The harness's paired target step alone (needs root): each target
//! comparison of `roce-xdp bench` (engine WRITE against the AF_XDP floor
//! at 64 B, 1 KiB and 64 KiB, against kernel UDP at 64 B message rate) as
//! PAIRS adjacent engine/baseline pairs of SECONDS each side, in
//! alternating order, then the comparisons measured for information;
//! prints every pair and the median, min and max of the per-pair ratios:
//!
//! `paired_targets [PAIRS] [SECONDS]` (default: the full run's, from
//! `options::Options`).

use std::time::Duration;

use engine::driver::PollMode;
use engine::testbed::netns::{PairConfig, VethPair};
use roce_xdp_benches::options::{Options, LINK_MTU};
use roce_xdp_benches::paired::{measure, PairedOptions};
use roce_xdp_benches::report::paired_tables;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let full = Options {
        quick: false,
        progress: true,
        engine_poll: PollMode::default(),
        pairs: None,
        only: None,
    };
    let pairs: usize = args
        .get(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(full.pairs());
    let point = args
        .get(2)
        .and_then(|a| a.parse().ok())
        .map_or(full.pair_point(), Duration::from_secs_f64);
    let pair = VethPair::create(&PairConfig {
        mtu: LINK_MTU,
        queues: 2,
    })
    .expect("creating the veth pair (needs root)");
    let opts = PairedOptions {
        pairs,
        point,
        poll: PollMode::default(),
    };
    let mut missing = Vec::new();
    let paired = measure(&pair, &opts, true, &mut missing);
    for t in paired_tables(&paired) {
        println!("{}", t.to_text());
    }
    for m in missing {
        println!("not measured: {m}");
    }
}
