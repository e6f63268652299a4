//! The SGE-list and inline rows of `roce-xdp bench` alone (needs root):
//! a 64 KiB WRITE gathered from 8 SGEs of 8 KiB against the same WRITE
//! from one SGE (goodput), and a 64 B SEND posted inline against the same
//! SEND from a registered buffer (message rate), on the engine over a
//! fresh veth pair, as PAIRS pairs of SECONDS per side in alternating
//! order; prints every pair and each row's median ratio:
//!
//! `sge_paths [PAIRS] [SECONDS]` (default: the full run's, from
//! `options::Options`).

use std::time::Duration;

use engine::driver::PollMode;
use engine::testbed::netns::{PairConfig, VethPair};
use roce_xdp_benches::options::{Options, LINK_MTU};
use roce_xdp_benches::paired::PairedOptions;
use roce_xdp_benches::report::sge_tables;
use roce_xdp_benches::sge_paths::{measure, SGE_ROWS};

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
    let rows = measure(&pair, &SGE_ROWS, &opts, true, &mut missing);
    for t in sge_tables(&rows) {
        println!("{}", t.to_text());
    }
    for m in missing {
        println!("not measured: {m}");
    }
}
