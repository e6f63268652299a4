//! Focused comparison of the 64 B ping-pong round trips, measured in the
//! same run on one veth pair (needs root): kernel UDP, the AF_XDP floor,
//! the engine in run-to-completion mode and the engine through its
//! threads (verbs `Device`), the four latency rows of `roce-xdp bench`.
//!
//! `latency [ROUNDS] [ROUND_TRIPS]`, e.g. `latency 3 20000`: prints every
//! round's percentiles and each path's best-p50 round. `ONLY=rtc` (or
//! `udp`, `floor`, `threads`) measures one path only (for profiling).

use engine::driver::PollMode;
use engine::testbed::netns::{PairConfig, VethPair};
use roce_xdp_benches::baselines::floor::floor_pingpong;
use roce_xdp_benches::baselines::kernel_udp::kernel_pingpong;
use roce_xdp_benches::engine_path::pingpong_threaded;
use roce_xdp_benches::options::{LINK_MTU, SMALL};
use roce_xdp_benches::stats::Percentiles;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let rounds: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(3);
    let n: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(20_000);
    let only = std::env::var("ONLY").ok();
    let want = |p: &str| only.as_deref().is_none_or(|o| o == p);
    let pair = VethPair::create(&PairConfig {
        mtu: LINK_MTU,
        queues: 2,
    })
    .expect("creating the veth pair (needs root)");
    let poll = PollMode::default();
    let warm = n / 10;
    let of = |r: Result<Vec<std::time::Duration>, String>| -> Option<Percentiles> {
        match r {
            Ok(mut v) => Percentiles::of(&mut v[warm..]),
            Err(e) => {
                eprintln!("  failed: {e}");
                None
            }
        }
    };
    let mut best: Vec<(&str, Option<Percentiles>)> = Vec::new();
    let mut keep = |name: &'static str, p: Option<Percentiles>| {
        println!(
            "  {name:<8} {}",
            p.map_or("n/a".into(), |p| format!(
                "p50 {:6.1}  p99 {:7.1}  p99.9 {:8.1} us",
                p.p50_us, p.p99_us, p.p999_us
            ))
        );
        match best.iter_mut().find(|(k, _)| *k == name) {
            Some((_, b)) => {
                if p.is_some_and(|p| b.is_none_or(|b| p.p50_us < b.p50_us)) {
                    *b = p;
                }
            }
            None => best.push((name, p)),
        }
    };
    for k in 0..rounds {
        println!("round {} of {rounds} (load {})", k + 1, load());
        if want("udp") {
            let p = kernel_pingpong(&pair, SMALL as usize, n).expect("UDP ping-pong");
            keep("udp", p);
        }
        if want("floor") {
            let p = floor_pingpong(&pair, SMALL as usize, n, poll).expect("floor ping-pong");
            keep("floor", p);
        }
        if want("rtc") {
            keep(
                "rtc",
                of(roce_xdp_benches::engine_rtc::pingpong(
                    &pair,
                    SMALL,
                    n + warm,
                )),
            );
        }
        if want("threads") {
            keep(
                "threads",
                of(pingpong_threaded(&pair, SMALL, n + warm, poll)),
            );
        }
    }
    println!("best p50 of {rounds} rounds:");
    let udp = best.iter().find(|(k, _)| *k == "udp").and_then(|(_, p)| *p);
    for (name, p) in &best {
        if let Some(p) = p {
            let ratio = udp.map_or(String::new(), |u| {
                format!("  ({:.2} x UDP p50)", p.p50_us / u.p50_us)
            });
            println!(
                "  {name:<8} p50 {:6.1}  p99 {:7.1}  p99.9 {:8.1} us{ratio}",
                p.p50_us, p.p99_us, p.p999_us
            );
        }
    }
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}
