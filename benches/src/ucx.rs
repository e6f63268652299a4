//! UCX's rows: Debian's stock `ucx_perftest` (ucx-utils), unmodified, on
//! the engine through the drop-in libibverbs (`roce-xdp exec`), against
//! the engine's own tools between the same two namespaces, paired in one
//! run:
//!
//! - `ucx_perftest -t ucp_put_bw -s 65536` (UCP puts, a stream of them
//!   ended by a flush) / `roce-xdp write-bw -s 65536`: the figure is UCX's
//!   overall bandwidth (the `Final:` line's `bw_overall`, MB/s of 2^20
//!   bytes over every measured iteration, warm-up excluded) against the
//!   tool's "BW average" (MB/s, 2^20 bytes, over its `-D` seconds); target
//!   ratio >= [`UCX_PUT_BW_TARGET`];
//! - `ucx_perftest -t tag_lat -s 64` (a UCP tag-matching ping-pong) /
//!   `roce-xdp send-lat -s 64`: both figures are one-way latency, half the
//!   round trip (UCX divides its ping-pong's round trip by 2; send-lat's
//!   `t_typical` is half the round trip, as perftest's), UCX's the `Final:`
//!   line's p50 (the median of its last 2048 iterations), the tool's
//!   `t_typical` (its median); target ratio <= [`UCX_TAG_LAT_TARGET`].
//!
//! Every `ucx_perftest` runs with `UCX_TLS=rc_verbs,ud_verbs` and
//! `UCX_NET_DEVICES=roce-xdp0:1` on both sides ([`UCX_ENV`]), as a user
//! points UCX at an RDMA device; nothing else of UCX is tuned (its
//! rendezvous thresholds, progress modes and so on are its defaults).
//! The server runs in namespace b (`ucx_perftest -p PORT -t ...`), the
//! client in namespace a (`ucx_perftest -p PORT B_ADDRESS -t ...`), each
//! under `roce-xdp exec --iface IF --steer off --force --` on queue 0 of
//! the test bed's veths, as the drop-in's rows run perftest; the tools
//! run the same way (server in b, client in a, the same options).
//!
//! Each comparison is measured as pairs, the two runs of a pair back to
//! back, the tool first in even-numbered pairs (the first pair is pair 0)
//! and `ucx_perftest` first in odd ones (a drift linear in time cancels
//! over an even number of pairs); the pairs of the two comparisons are
//! interleaved (pair 1 of each, then pair 2, ...); a comparison's ratio
//! (UCX / tool) is the median of its per-pair ratios.
//!
//! `ucx_perftest` (1.13) has no time limit, only an iteration count: each
//! `ucp_put_bw` run takes as many puts as the tool moved in its `-D`
//! seconds in the latest pair ([`put_iterations`]; the first pair runs the
//! tool first), so that both sides of a pair last about as long whatever
//! the machine's speed at the time (on a shared machine it moves by 5x).
//! `tag_lat` and `send-lat` run `lat_iterations()` round trips each; UCX's
//! p50 is the median of its last 2048 iterations whatever `-n`, the
//! tool's of all of them.
//!
//! Needs root, `ucx_perftest` and `ucx_info` (Debian's ucx-utils:
//! `scripts/setup-deps.sh` installs it; without them the rows say so and
//! `missing` says why) and the drop-in's archive (`cargo build --release
//! -p roce-xdp-ibverbs`).

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use engine::testbed::netns::VethPair;

use crate::error::EngineResult;
use crate::options::{Options, ROCE_PMTU, SMALL};
use crate::report::{DropInPair, DropInTarget, UcxReport, UCX_PUT_BW_TARGET, UCX_TAG_LAT_TARGET};
use crate::stats::{abba_a_first, median};
use crate::tool_run::{in_netns, server_client, tool_binary, RunOutput};

/// TCP port of the programs' exchange in these runs.
const PORT: u16 = 18593;
/// The engine options of every run on the test bed (see the module's doc).
const ENGINE_ARGS: [&str; 3] = ["--steer", "off", "--force"];
/// The environment of every `ucx_perftest` run, both sides: UCX's RC and
/// UD verbs transports on the drop-in's device, port 1.
pub const UCX_ENV: [(&str, &str); 2] = [
    ("UCX_TLS", "rc_verbs,ud_verbs"),
    ("UCX_NET_DEVICES", "roce-xdp0:1"),
];
/// How long a server may take after its client ended.
const SERVER_TIMEOUT: Duration = Duration::from_secs(30);
/// What a client prints when its server is not listening yet (perftest's
/// and ucx_perftest's wordings).
const NOT_LISTENING: [&str; 3] = ["refused", "Couldn't connect", "connect() failed"];
/// The bandwidth comparison's message size.
const PUT_BYTES: u64 = 65536;

/// Bounds of `ucp_put_bw`'s iterations (see [`put_iterations`]).
const PUT_ITERATIONS_MIN: u64 = 500;
const PUT_ITERATIONS_MAX: u64 = 200_000;

/// One comparison of the step.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Comparison {
    PutBw,
    TagLat,
}

impl Comparison {
    const ALL: [Comparison; 2] = [Comparison::PutBw, Comparison::TagLat];

    fn ucx_test(self) -> &'static str {
        match self {
            Comparison::PutBw => "ucp_put_bw",
            Comparison::TagLat => "tag_lat",
        }
    }

    fn tool(self) -> &'static str {
        match self {
            Comparison::PutBw => "write-bw",
            Comparison::TagLat => "send-lat",
        }
    }

    fn bytes(self) -> u64 {
        match self {
            Comparison::PutBw => PUT_BYTES,
            Comparison::TagLat => SMALL,
        }
    }

    /// `ucx_perftest`'s measured iterations (`-n`) and warm-up (`-w`, a
    /// tenth: its default, 10000, would be longer than many a run), given
    /// `ucp_put_bw`'s.
    fn iterations(self, opts: &Options, put: u64) -> (u64, u64) {
        let n = match self {
            Comparison::PutBw => put,
            Comparison::TagLat => lat_iterations(opts),
        };
        (n, n / 10)
    }

    /// `ucx_perftest`'s options after `-p PORT [SERVER]`, both sides.
    fn ucx_args(self, opts: &Options, put: u64) -> Vec<String> {
        let (n, w) = self.iterations(opts, put);
        [
            "-t",
            self.ucx_test(),
            "-s",
            &self.bytes().to_string(),
            "-n",
            &n.to_string(),
            "-w",
            &w.to_string(),
        ]
        .map(String::from)
        .to_vec()
    }

    /// The tool's options, both sides.
    fn tool_args(self, opts: &Options) -> Vec<String> {
        let mut a = vec![
            "-s".to_string(),
            self.bytes().to_string(),
            "-m".into(),
            ROCE_PMTU.to_string(),
            "-p".into(),
            PORT.to_string(),
        ];
        match self {
            Comparison::PutBw => a.extend(["-D".into(), bw_seconds(opts).to_string()]),
            Comparison::TagLat => a.extend(["-n".into(), lat_iterations(opts).to_string()]),
        }
        a
    }

    fn target(self) -> f64 {
        match self {
            Comparison::PutBw => UCX_PUT_BW_TARGET,
            Comparison::TagLat => UCX_TAG_LAT_TARGET,
        }
    }

    /// The report's row, before any pair.
    fn row(self) -> DropInTarget {
        DropInTarget {
            stock: format!("ucx_perftest -t {}", self.ucx_test()),
            tool: format!("roce-xdp {}", self.tool()),
            message_bytes: self.bytes(),
            latency: self == Comparison::TagLat,
            pairs: Vec::new(),
            ratio: None,
            target_ratio: Some(self.target()),
        }
    }
}

/// `ucp_put_bw`'s iterations: as many 64 KiB puts as `tool_mbps` (the
/// tool's latest figure, MB/s of 2^20 bytes) moves in `seconds`.
pub fn put_iterations(tool_mbps: f64, seconds: u32) -> u64 {
    let n = tool_mbps * f64::from(seconds) * (1u64 << 20) as f64 / PUT_BYTES as f64;
    (n.max(0.0) as u64).clamp(PUT_ITERATIONS_MIN, PUT_ITERATIONS_MAX)
}

/// Round trips of each latency run, both programs: UCX's p50 covers its
/// last 2048 whatever the count, so more would only lengthen the step.
fn lat_iterations(opts: &Options) -> u64 {
    if opts.quick {
        2_000
    } else {
        5_000
    }
}

/// Length of each `write-bw` run (`-D` takes whole seconds).
fn bw_seconds(_opts: &Options) -> u32 {
    1
}

/// Pairs per comparison: even, so that each order runs as often (4 keep
/// the step within about 40 s of a full run on a loaded 2-core machine:
/// each run starts a program and its engine, about 1 s).
fn pairs(opts: &Options) -> usize {
    if opts.quick {
        2
    } else {
        4
    }
}

/// The numbers of `ucx_perftest`'s `Final:` line: iterations, p50, average
/// and overall latency (µs), average and overall bandwidth (MB/s), average
/// and overall message rate (msg/s); `|` separators, where a version
/// prints them, are skipped.
fn final_line(stdout: &str) -> Option<Vec<f64>> {
    let line = stdout
        .lines()
        .find_map(|l| l.trim_start_matches(['|', ' ']).strip_prefix("Final:"))?;
    let cols: Vec<f64> = line
        .split(|c: char| c.is_whitespace() || c == '|')
        .filter(|c| !c.is_empty())
        .map(|c| c.replace(',', "").parse().ok())
        .collect::<Option<_>>()?;
    (cols.len() >= 8).then_some(cols)
}

/// `side(namespace, interface, peer)` as the server in namespace b, then
/// as the client in namespace a (with b's address as the peer).
fn server_then_client(
    pair: &VethPair,
    side: impl Fn(&str, &str, Option<String>) -> Command,
) -> EngineResult<RunOutput> {
    server_client(
        side(&pair.b.netns, &pair.b.ifname, None),
        || side(&pair.a.netns, &pair.a.ifname, Some(pair.b.ipv4.to_string())),
        &NOT_LISTENING,
        SERVER_TIMEOUT,
    )
}

/// One `ucx_perftest` run under `exec` (`put`: `ucp_put_bw`'s
/// iterations): its figure.
fn run_ucx(
    pair: &VethPair,
    exe: &Path,
    c: Comparison,
    opts: &Options,
    put: u64,
) -> EngineResult<f64> {
    let side = |ns: &str, iface: &str, peer: Option<String>| {
        let mut cmd = in_netns(ns, exe);
        cmd.args(["exec", "--iface", iface])
            .args(ENGINE_ARGS)
            .args(["--", "ucx_perftest", "-p", &PORT.to_string()])
            .args(peer)
            .args(c.ucx_args(opts, put))
            .envs(UCX_ENV);
        cmd
    };
    let out = server_then_client(pair, side)?;
    let what = format!("ucx_perftest -t {} under exec", c.ucx_test());
    if !out.success() {
        return Err(format!("{what}: {}", out.describe_failure()));
    }
    let stdout = String::from_utf8_lossy(&out.client.stdout);
    let cols = final_line(&stdout).ok_or_else(|| format!("{what}: no Final: line"))?;
    let wanted = c.iterations(opts, put).0 as f64;
    if cols[0] != wanted {
        return Err(format!("{what}: {} iterations, not {wanted}", cols[0]));
    }
    // iterations p50 avg overall bw_avg bw_overall rate_avg rate_overall
    Ok(match c {
        Comparison::PutBw => cols[5],
        Comparison::TagLat => cols[1],
    })
}

/// One run of the engine's own tool: its figure (from its `--json`).
fn run_tool(pair: &VethPair, exe: &Path, c: Comparison, opts: &Options) -> EngineResult<f64> {
    let side = |ns: &str, iface: &str, peer: Option<String>| {
        let mut cmd = in_netns(ns, exe);
        cmd.args([c.tool(), "--iface", iface])
            .args(ENGINE_ARGS)
            .args(c.tool_args(opts))
            .arg("--json")
            .args(peer);
        cmd
    };
    let out = server_then_client(pair, side)?;
    if !out.success() {
        return Err(format!("roce-xdp {}: {}", c.tool(), out.describe_failure()));
    }
    let doc: serde_json::Value = serde_json::from_slice(&out.client.stdout)
        .map_err(|e| format!("roce-xdp {}: its --json does not parse: {e}", c.tool()))?;
    let key = match c {
        Comparison::PutBw => "bw_avg_mbps",
        Comparison::TagLat => "t_typical_us",
    };
    doc["results"][0][key]
        .as_f64()
        .ok_or_else(|| format!("roce-xdp {}: no {key} in its --json", c.tool()))
}

/// `ucx_info -v`'s library version, if UCX's tools are installed.
fn ucx_version() -> Option<String> {
    let out = Command::new("ucx_info").arg("-v").output().ok()?;
    version_of(&String::from_utf8_lossy(&out.stdout))
}

/// The version in `ucx_info -v`'s output (`# Version 1.13.1`; older
/// releases: `# Library version: 1.8.0`).
fn version_of(text: &str) -> Option<String> {
    text.lines()
        .map(|l| l.trim_start_matches(['#', ' ']))
        .find_map(|l| {
            l.strip_prefix("Version ")
                .or_else(|| l.strip_prefix("Library version:"))
        })
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

/// Why the step cannot run here, if it cannot.
fn unavailable() -> Option<String> {
    let found = |bin: &str| {
        Command::new("sh")
            .args(["-c", &format!("command -v {bin}")])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    ["ucx_perftest", "ucx_info"]
        .into_iter()
        .find(|b| !found(b))
        .map(|b| {
            format!("{b} is not installed (Debian's ucx-utils: scripts/setup-deps.sh installs it)")
        })
}

/// The whole step. When it cannot run, its rows stay unmeasured with the
/// reason in `skipped` and in `missing`; a comparison whose runs failed
/// keeps the pairs that did run, and `missing` says why.
pub fn measure(pair: &VethPair, opts: &Options, missing: &mut Vec<String>) -> UcxReport {
    let mut report = UcxReport {
        ucx_version: ucx_version(),
        env: UCX_ENV.iter().map(|(k, v)| format!("{k}={v}")).collect(),
        bw_seconds: bw_seconds(opts),
        put_iterations: Vec::new(),
        lat_iterations: lat_iterations(opts),
        targets: Comparison::ALL.iter().map(|c| c.row()).collect(),
        skipped: None,
    };
    let skip = tool_binary()
        .is_none()
        .then(|| "the roce-xdp binary was not found (set ROCE_XDP_BIN)".to_string())
        .or_else(unavailable);
    if let Some(why) = skip {
        missing.push(format!("UCX rows: {why}"));
        report.skipped = Some(why);
        return report;
    }
    let exe = tool_binary().expect("checked above");
    let mut failed: Vec<Option<String>> = vec![None; Comparison::ALL.len()];
    // The tool's latest 64 KiB figure, which sizes the next ucp_put_bw run.
    let mut tool_mbps = None;
    for k in 0..pairs(opts) {
        for (i, &c) in Comparison::ALL.iter().enumerate() {
            if failed[i].is_some() {
                continue;
            }
            let ucx_first = !abba_a_first(k);
            let mut put = 0;
            let mut run = |ucx: bool| {
                if ucx {
                    put = put_iterations(tool_mbps.unwrap_or(0.0), bw_seconds(opts));
                    run_ucx(pair, &exe, c, opts, put)
                } else {
                    let f = run_tool(pair, &exe, c, opts)?;
                    if c == Comparison::PutBw {
                        tool_mbps = Some(f);
                    }
                    Ok(f)
                }
            };
            match run(ucx_first).and_then(|a| Ok((a, run(!ucx_first)?))) {
                Ok((a, b)) => {
                    if c == Comparison::PutBw {
                        report.put_iterations.push(put);
                    }
                    let (ucx, tool) = if ucx_first { (a, b) } else { (b, a) };
                    report.targets[i].pairs.push(DropInPair {
                        stock_first: ucx_first,
                        stock: ucx,
                        tool,
                    });
                }
                Err(e) => failed[i] = Some(e),
            }
        }
    }
    for (t, f) in report.targets.iter_mut().zip(failed) {
        let ratios: Vec<f64> = t.pairs.iter().map(DropInPair::ratio).collect();
        t.ratio = median(&ratios);
        if let Some(e) = f {
            missing.push(format!(
                "UCX rows, {} vs {}, {} B (after {} pairs): {e}",
                t.stock,
                t.tool,
                t.message_bytes,
                t.pairs.len()
            ));
        }
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(quick: bool) -> Options {
        Options {
            quick,
            progress: false,
            engine_poll: Default::default(),
            pairs: None,
            only: None,
        }
    }

    #[test]
    fn the_final_line_is_read_with_or_without_separators() {
        let plain = "Waiting\nFinal:                  2000     3.120     3.311     3.311      18.43      18.43      302005      302005\n";
        let cols = final_line(plain).unwrap();
        assert_eq!(cols.len(), 8);
        assert_eq!((cols[0], cols[1], cols[5]), (2000.0, 3.12, 18.43));
        let bars =
            "| Final:  |  500 |  0.000 | 58.1 | 58.1 | 1075.83 | 1,075.83 | 17213 | 17213 |\n";
        let cols = final_line(bars).unwrap();
        assert_eq!((cols[0], cols[4], cols[5]), (500.0, 1075.83, 1075.83));
        assert_eq!(final_line("Final: 10 oops\n"), None);
        assert_eq!(final_line("no result\n"), None);
    }

    #[test]
    fn the_version_is_read_from_ucx_info() {
        let v = "# Version 1.13.1\n# Git branch '<unknown>', revision 0000000\n# Configured with: --build=x86_64-linux-gnu\n";
        assert_eq!(version_of(v).as_deref(), Some("1.13.1"));
        assert_eq!(
            version_of("# UCT version=1.8.0 revision \n# Library version: 1.8.0\n").as_deref(),
            Some("1.8.0")
        );
        assert_eq!(version_of("nothing\n"), None);
    }

    #[test]
    fn both_programs_run_with_the_same_size_and_round_trips() {
        let o = opts(true);
        assert_eq!(
            Comparison::TagLat.ucx_args(&o, 0).join(" "),
            "-t tag_lat -s 64 -n 2000 -w 200"
        );
        assert_eq!(
            Comparison::TagLat.tool_args(&o).join(" "),
            "-s 64 -m 4096 -p 18593 -n 2000"
        );
        assert_eq!(
            Comparison::TagLat.tool_args(&opts(false)).join(" "),
            "-s 64 -m 4096 -p 18593 -n 5000"
        );
        assert_eq!(
            Comparison::PutBw.ucx_args(&opts(false), 4800).join(" "),
            "-t ucp_put_bw -s 65536 -n 4800 -w 480"
        );
        assert_eq!(
            Comparison::PutBw.tool_args(&opts(false)).join(" "),
            "-s 65536 -m 4096 -p 18593 -D 1"
        );
        let r = Comparison::TagLat.row();
        assert!(r.latency);
        assert_eq!(
            (r.target(), r.stock.as_str()),
            (1.3, "ucx_perftest -t tag_lat")
        );
        assert_eq!(Comparison::PutBw.row().target(), 0.9);
        // As many puts as the tool moved in -D seconds: 300 MB/s for 1 s
        // is 4800 messages of 64 KiB; no figure yet, the least.
        assert_eq!(put_iterations(300.0, 1), 4800);
        assert_eq!(put_iterations(0.0, 1), PUT_ITERATIONS_MIN);
        assert_eq!(put_iterations(1e9, 2), PUT_ITERATIONS_MAX);
        assert_eq!(pairs(&opts(true)) % 2, 0);
        assert_eq!(pairs(&opts(false)) % 2, 0);
    }
}
