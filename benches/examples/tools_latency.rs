//! The latency tools' rows alone, measured in one run on one veth pair
//! (needs root): the AF_XDP floor's echo round trip, the latency tools'
//! own loops (run-to-completion and `--threaded`), the verbs Device with
//! the polling option, the idle cost. The same code as `roce-xdp bench`
//! (`tool_latency::measure`), printed as the report's tables.
//!
//! `tools_latency [quick]`: 20000 round trips per figure and 10 s idle
//! windows (quick: 2000 and 2 s), as the full (quick) bench. The
//! tools come from `ROCE_XDP_BIN` or `roce-xdp` next to this example's
//! target directory (build it first: `cargo build --release -p roce-xdp`).

use engine::driver::PollMode;
use engine::testbed::netns::{PairConfig, VethPair};
use roce_xdp_benches::baselines::floor::floor_pingpong;
use roce_xdp_benches::options::{Options, LINK_MTU, SMALL};
use roce_xdp_benches::tool_latency;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "quick");
    let pair = VethPair::create(&PairConfig {
        mtu: LINK_MTU,
        queues: 2,
    })
    .expect("creating the veth pair (needs root)");
    let poll = PollMode::default();
    let opts = Options {
        quick,
        progress: true,
        engine_poll: poll,
        pairs: None,
        only: None,
    };
    let floor = floor_pingpong(&pair, SMALL as usize, opts.pingpongs(), poll)
        .expect("the floor's ping-pong");
    let (mut notes, mut missing) = (Vec::new(), Vec::new());
    let rows = tool_latency::measure(&pair, &opts, &mut notes, &mut missing);
    for t in rows.tables(floor) {
        println!("{}", t.title);
        println!("| {} |", t.header.join(" | "));
        for r in &t.rows {
            println!("| {} |", r.join(" | "));
        }
        println!();
    }
    for m in missing {
        println!("missing: {m}");
    }
}
