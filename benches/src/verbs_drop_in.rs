//! The drop-in's targets: Debian's stock perftest binaries, unmodified,
//! on the engine through the drop-in libibverbs (`roce-xdp exec`), against
//! the engine's own perftest-style tools between the same two namespaces,
//! paired in one run:
//!
//! - goodput: `ib_write_bw` under `exec` / `roce-xdp write-bw`, at 64 B and
//!   64 KiB, each run `-D` seconds, both sides with the same options
//!   (`-s`, `-m` the link's IB MTU, one QP, perftest's default depth);
//!   the figure is the client's "BW average" (MB/s, 2^20 bytes, both
//!   tools); target ratio >= [`GOODPUT_TARGET`](crate::report::GOODPUT_TARGET);
//! - latency: `ib_send_lat` under `exec` / `roce-xdp send-lat`, 64 B, the
//!   same `-n`; the figure is the client's `t_typical` (perftest's median,
//!   half the round trip, both tools); target ratio <= [`LATENCY_TARGET`](crate::report::LATENCY_TARGET);
//! - the transfer-engine pattern: `threaded_rdma_bw` (`benches/programs/`,
//!   compiled here with `cc ... -libverbs`), 4 posting threads with an RC
//!   QP each, batches of 16 signaled 64 KiB RDMA READs (WRITEs), one
//!   thread polling the CQ the QPs share, as Mooncake's transfer engine
//!   and UCX's progress thread drive verbs, under `exec` (its server
//!   passive) / `roce-xdp read-bw` (`write-bw`) `-s 65536`, each run `-D`
//!   seconds; the posting threads spin while they wait for their batch
//!   (`-w spin`, as Mooncake's submission threads) or yield (`-w yield`);
//!   the figure is MB/s (2^20 bytes: the program's JSON line, the tool's
//!   `--json`); target ratio >=
//!   [`THREADED_GOODPUT_TARGET`].
//!
//! Each comparison is measured as pairs, the two runs of a pair back to
//! back, the stock binary first in even-numbered pairs and the tool first
//! in odd ones (a drift linear in time cancels); the ratio of a
//! comparison is the median of its per-pair ratios. The pairs of the
//! three comparisons are interleaved (pair 1 of each, then pair 2, ...).
//!
//! Needs root, Debian's `perftest` (`scripts/setup-deps.sh` installs it)
//! and the drop-in's archive (`cargo build --release -p roce-xdp-ibverbs`;
//! `exec` links `libibverbs.so.1` from it on first use). The tools' engine
//! serves queue 0 of the test bed's 2-queue veths with `--steer off
//! --force`, as in `tool_latency.rs`; the drop-in serves queue 0 too, with
//! the same options.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use engine::testbed::netns::VethPair;

use crate::error::EngineResult;
use crate::options::{Options, ROCE_PMTU, SMALL};
use crate::report::{DropInPair, DropInReport, DropInTarget, THREADED_GOODPUT_TARGET};
use crate::stats::{abba_a_first, median};
use crate::tool_run::{
    in_netns, server_client, server_client_after, tool_binary, wait_engine, RunOutput,
};

/// TCP port of the perftest exchange in these runs.
const PORT: u16 = 18591;
/// The tools' engine options on the test bed (see the module's doc).
const ENGINE_ARGS: [&str; 3] = ["--steer", "off", "--force"];
/// How long a server may take after its client ended.
const SERVER_TIMEOUT: Duration = Duration::from_secs(30);
/// What a client prints when its server is not listening yet.
const NOT_LISTENING: [&str; 3] = ["refused", "Couldn't connect", "Unable to open file"];
/// The transfer-engine pattern's program (see the module's doc).
const THREADED_SOURCE: &str = include_str!("../programs/threaded_rdma_bw.c");
/// Its message size, threads (one QP each) and batch.
const THREADED_BYTES: u64 = 65536;
const THREADED_THREADS: u32 = 4;
const THREADED_BATCH: u32 = 16;

/// One comparison of the step.
#[derive(Clone, Copy)]
enum Comparison {
    WriteBw(u64),
    SendLat,
    /// `threaded_rdma_bw` against `read-bw` (`read`) or `write-bw`, its
    /// posting threads spinning while they wait for their batch (as
    /// Mooncake's) or yielding (`-w yield`).
    Threaded {
        read: bool,
        yielding: bool,
    },
}

impl Comparison {
    fn stock(self) -> &'static str {
        match self {
            Comparison::WriteBw(_) => "ib_write_bw",
            Comparison::SendLat => "ib_send_lat",
            Comparison::Threaded {
                read: true,
                yielding: false,
            } => "threaded_rdma_bw -o read -w spin",
            Comparison::Threaded {
                read: false,
                yielding: false,
            } => "threaded_rdma_bw -o write -w spin",
            Comparison::Threaded {
                read: true,
                yielding: true,
            } => "threaded_rdma_bw -o read -w yield",
            Comparison::Threaded {
                read: false,
                yielding: true,
            } => "threaded_rdma_bw -o write -w yield",
        }
    }

    fn tool(self) -> &'static str {
        match self {
            Comparison::WriteBw(_) | Comparison::Threaded { read: false, .. } => "write-bw",
            Comparison::SendLat => "send-lat",
            Comparison::Threaded { read: true, .. } => "read-bw",
        }
    }

    fn bytes(self) -> u64 {
        match self {
            Comparison::WriteBw(s) => s,
            Comparison::SendLat => SMALL,
            Comparison::Threaded { .. } => THREADED_BYTES,
        }
    }

    /// The tool's options of a run, the same for both sides (and
    /// perftest's, which takes the same).
    fn args(self, opts: &Options) -> Vec<String> {
        let mut a = vec![
            "-s".to_string(),
            self.bytes().to_string(),
            "-m".into(),
            ROCE_PMTU.to_string(),
            "-p".into(),
            PORT.to_string(),
        ];
        match self {
            Comparison::WriteBw(_) | Comparison::Threaded { .. } => {
                a.extend(["-D".into(), bw_seconds(opts).to_string()])
            }
            Comparison::SendLat => a.extend(["-n".into(), opts.pingpongs().to_string()]),
        }
        a
    }

    /// The stock binary's (or the program's) options of a run, both sides.
    fn stock_args(self, opts: &Options) -> Vec<String> {
        match self {
            Comparison::Threaded { read, yielding } => [
                "-o",
                if read { "read" } else { "write" },
                "-w",
                if yielding { "yield" } else { "spin" },
                "-s",
                &THREADED_BYTES.to_string(),
                "-t",
                &THREADED_THREADS.to_string(),
                "-b",
                &THREADED_BATCH.to_string(),
                "-D",
                &bw_seconds(opts).to_string(),
                "-p",
                &PORT.to_string(),
                "-x",
                "1",
            ]
            .map(String::from)
            .to_vec(),
            _ => {
                let mut a = vec!["-x".to_string(), "1".into()];
                a.extend(self.args(opts));
                a
            }
        }
    }

    /// The ratio's target where it is not its kind's.
    fn target_ratio(self) -> Option<f64> {
        matches!(self, Comparison::Threaded { .. }).then_some(THREADED_GOODPUT_TARGET)
    }
}

/// Compiles the transfer-engine pattern's program into `dir`; its path.
fn compile_threaded(dir: &Path) -> EngineResult<PathBuf> {
    std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let src = dir.join("threaded_rdma_bw.c");
    let exe = dir.join("threaded_rdma_bw");
    std::fs::write(&src, THREADED_SOURCE).map_err(|e| format!("writing {}: {e}", src.display()))?;
    let out = Command::new("cc")
        .args(["-O2", "-Wall", "-pthread"])
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .arg("-libverbs")
        .output()
        .map_err(|e| format!("running cc (install gcc and libibverbs-dev): {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "compiling threaded_rdma_bw.c (needs libibverbs-dev): {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(exe)
}

/// The figure of the program's JSON line (`bw_avg_mbps`).
fn threaded_figure(stdout: &str) -> Option<f64> {
    stdout
        .lines()
        .filter(|l| l.starts_with('{'))
        .find_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .and_then(|doc| doc["bw_avg_mbps"].as_f64())
}

/// Length of each bandwidth run, seconds (perftest's `-D` takes whole
/// seconds).
fn bw_seconds(opts: &Options) -> u32 {
    if opts.quick {
        1
    } else {
        2
    }
}

/// Pairs per comparison.
fn pairs(opts: &Options) -> usize {
    if opts.quick {
        2
    } else {
        6
    }
}

/// The client's row of a perftest table: the line whose first column is
/// `bytes`, as numbers.
pub fn perftest_row(stdout: &str, bytes: u64) -> Option<Vec<f64>> {
    stdout.lines().find_map(|l| {
        let cols: Vec<&str> = l.split_whitespace().collect();
        if cols.len() < 4 || cols[0].parse::<u64>().ok()? != bytes {
            return None;
        }
        cols.iter().map(|c| c.parse::<f64>().ok()).collect()
    })
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

/// `program server_args..` under `roce-xdp exec` in namespace b, then
/// `program client_args..` under `exec` in namespace a (the caller puts
/// b's address in them), the engine options of the step's tool runs on
/// both ends. With `engine_grace`, the client starts once the server's
/// engine runs and that much more has passed (a client through the RDMA
/// CM finds no one to answer its REQ before, and waits for its retry);
/// either way it is run again while it finds the server not listening yet
/// (`not_listening`, what it prints then). Shared with the CM's rows
/// (`rdma_cm.rs`).
pub fn exec_server_client(
    pair: &VethPair,
    exe: &Path,
    program: &OsStr,
    server_args: &[String],
    client_args: &[String],
    not_listening: &[&str],
    engine_grace: Option<Duration>,
) -> EngineResult<RunOutput> {
    let side = |ns: &str, iface: &str, args: &[String]| {
        let mut cmd = in_netns(ns, exe);
        cmd.args(["exec", "--iface", iface])
            .args(ENGINE_ARGS)
            .arg("--")
            .arg(program)
            .args(args);
        cmd
    };
    let ready = |server: &mut std::process::Child| match engine_grace {
        Some(grace) => wait_engine(exe, &pair.b.netns, &pair.b.ifname, server, grace),
        None => Ok(()),
    };
    server_client_after(
        side(&pair.b.netns, &pair.b.ifname, server_args),
        ready,
        || side(&pair.a.netns, &pair.a.ifname, client_args),
        not_listening,
        SERVER_TIMEOUT,
    )
}

/// One pair of a paired comparison, the `k`-th: `run(true)` (the stock
/// side) and `run(false)` back to back, the stock side first when
/// [`abba_a_first`]`(k)`. Shared with the CM's rows (`rdma_cm.rs`).
pub fn one_pair(
    k: usize,
    mut run: impl FnMut(bool) -> EngineResult<f64>,
) -> EngineResult<DropInPair> {
    let stock_first = abba_a_first(k);
    let a = run(stock_first)?;
    let b = run(!stock_first)?;
    let (stock, tool) = if stock_first { (a, b) } else { (b, a) };
    Ok(DropInPair {
        stock_first,
        stock,
        tool,
    })
}

/// The "BW average" (MB/s) of an `ib_*_bw` client's result row for
/// `bytes`-byte messages.
pub fn perftest_bw_average(stdout: &str, bytes: u64) -> Option<f64> {
    // #bytes #iterations peak average rate
    perftest_row(stdout, bytes)?.get(3).copied()
}

/// One run of the stock binary (the program at `program` for
/// [`Comparison::Threaded`]) under `exec`: its figure.
fn run_stock(
    pair: &VethPair,
    exe: &Path,
    program: Option<&Path>,
    c: Comparison,
    opts: &Options,
) -> EngineResult<f64> {
    let stock = match (c, program) {
        (Comparison::Threaded { .. }, Some(p)) => p.as_os_str().to_owned(),
        (Comparison::Threaded { .. }, None) => return Err("threaded_rdma_bw is not built".into()),
        _ => c.stock().into(),
    };
    let server = c.stock_args(opts);
    let mut client = server.clone();
    client.push(pair.b.ipv4.to_string());
    let out = exec_server_client(pair, exe, &stock, &server, &client, &NOT_LISTENING, None)?;
    if !out.success() {
        return Err(format!(
            "{} under exec: {}",
            c.stock(),
            out.describe_failure()
        ));
    }
    let stdout = String::from_utf8_lossy(&out.client.stdout);
    let figure = match c {
        Comparison::Threaded { .. } => threaded_figure(&stdout),
        Comparison::WriteBw(_) => perftest_bw_average(&stdout, c.bytes()),
        // #bytes #iterations t_min t_max t_typical ...
        Comparison::SendLat => perftest_row(&stdout, c.bytes()).and_then(|r| r.get(4).copied()),
    };
    figure.ok_or_else(|| format!("{}: no result in its output", c.stock()))
}

/// One run of the engine's own tool: its figure (from its `--json`).
fn run_tool(pair: &VethPair, exe: &Path, c: Comparison, opts: &Options) -> EngineResult<f64> {
    let side = |ns: &str, iface: &str, peer: Option<String>| {
        let mut cmd = in_netns(ns, exe);
        cmd.args([c.tool(), "--iface", iface])
            .args(ENGINE_ARGS)
            .args(c.args(opts))
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
        Comparison::WriteBw(_) | Comparison::Threaded { .. } => "bw_avg_mbps",
        Comparison::SendLat => "t_typical_us",
    };
    doc["results"][0][key]
        .as_f64()
        .ok_or_else(|| format!("roce-xdp {}: no {key} in its --json", c.tool()))
}

/// Why a step that runs stock perftest (`ib_write_bw`, `ib_send_lat`)
/// cannot run here, if it cannot (this step and the shared engine's).
pub(crate) fn perftest_missing() -> Option<String> {
    for bin in ["ib_write_bw", "ib_send_lat"] {
        let found = Command::new("sh")
            .args(["-c", &format!("command -v {bin}")])
            .output()
            .is_ok_and(|o| o.status.success());
        if !found {
            return Some(format!(
                "{bin} is not installed (Debian's perftest: scripts/setup-deps.sh installs it)"
            ));
        }
    }
    None
}

/// The whole step; a comparison whose runs failed is described in
/// `missing` (and kept with the pairs that did run).
pub fn measure(pair: &VethPair, opts: &Options, missing: &mut Vec<String>) -> DropInReport {
    let mut report = DropInReport {
        bw_seconds: bw_seconds(opts),
        lat_iterations: opts.pingpongs() as u64,
        targets: Vec::new(),
    };
    let Some(exe) = tool_binary() else {
        missing.push("verbs drop-in: the roce-xdp binary was not found (set ROCE_XDP_BIN)".into());
        return report;
    };
    if let Some(why) = perftest_missing() {
        missing.push(format!("verbs drop-in: {why}"));
        return report;
    }
    let comparisons = [
        Comparison::WriteBw(SMALL),
        Comparison::WriteBw(65536),
        Comparison::SendLat,
        Comparison::Threaded {
            read: true,
            yielding: false,
        },
        Comparison::Threaded {
            read: false,
            yielding: false,
        },
        Comparison::Threaded {
            read: true,
            yielding: true,
        },
        Comparison::Threaded {
            read: false,
            yielding: true,
        },
    ];
    report.targets = comparisons
        .iter()
        .map(|&c| DropInTarget {
            stock: c.stock().into(),
            tool: format!("roce-xdp {}", c.tool()),
            message_bytes: c.bytes(),
            latency: matches!(c, Comparison::SendLat),
            pairs: Vec::new(),
            ratio: None,
            target_ratio: c.target_ratio(),
        })
        .collect();
    let dir = std::env::temp_dir().join(format!("roce-xdp-bench-{}", std::process::id()));
    let program = compile_threaded(&dir);
    let mut failed: Vec<Option<String>> = comparisons
        .iter()
        .map(|c| match (c, &program) {
            (Comparison::Threaded { .. }, Err(e)) => Some(e.to_string()),
            _ => None,
        })
        .collect();
    let program = program.ok();
    for k in 0..pairs(opts) {
        for (i, &c) in comparisons.iter().enumerate() {
            if failed[i].is_some() {
                continue;
            }
            let run = |stock: bool| {
                if stock {
                    run_stock(pair, &exe, program.as_deref(), c, opts)
                } else {
                    run_tool(pair, &exe, c, opts)
                }
            };
            match one_pair(k, run) {
                Ok(p) => report.targets[i].pairs.push(p),
                Err(e) => failed[i] = Some(e),
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    for (t, f) in report.targets.iter_mut().zip(failed) {
        let ratios: Vec<f64> = t.pairs.iter().map(DropInPair::ratio).collect();
        t.ratio = median(&ratios);
        if let Some(e) = f {
            missing.push(format!(
                "verbs drop-in, {} vs {}, {} B (after {} pairs): {e}",
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

    #[test]
    fn perftest_rows_are_found_by_their_size() {
        let bw = " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n 65536      5000             1169.80            1054.33\t\t   0.016869\n";
        assert_eq!(
            perftest_row(bw, 65536).map(|r| r[3]),
            Some(1054.33),
            "the BW average column"
        );
        assert_eq!(perftest_row(bw, 64), None);
        let lat = " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] \n 64      1000          2.16           346.81         2.63             3.06           10.92           4.62                   346.81\n";
        assert_eq!(perftest_row(lat, 64).map(|r| r[4]), Some(2.63));
        // A header or a note with a number first is not a result row.
        assert_eq!(perftest_row(" 64 bytes were sent\n", 64), None);
    }

    #[test]
    fn the_threaded_programs_figure_is_its_json_lines() {
        let out = "READ 65536 B, 4 threads: 1.2 Gb/s\n{\"op\":\"read\",\"bw_avg_mbps\":572.500,\"gbps\":4.8}\n";
        assert_eq!(threaded_figure(out), Some(572.5));
        assert_eq!(threaded_figure("no figure\n"), None);
    }

    #[test]
    fn the_threaded_program_runs_as_the_tool_does() {
        let opts = Options {
            quick: true,
            progress: false,
            engine_poll: Default::default(),
            pairs: None,
            only: None,
        };
        let c = Comparison::Threaded {
            read: true,
            yielding: false,
        };
        let a = c.stock_args(&opts).join(" ");
        assert_eq!(a, "-o read -w spin -s 65536 -t 4 -b 16 -D 1 -p 18591 -x 1");
        assert_eq!(c.tool(), "read-bw");
        assert_eq!(c.args(&opts).join(" "), "-s 65536 -m 4096 -p 18591 -D 1");
        assert_eq!(c.target_ratio(), Some(THREADED_GOODPUT_TARGET));
        assert_eq!(Comparison::SendLat.target_ratio(), None);
    }
}
