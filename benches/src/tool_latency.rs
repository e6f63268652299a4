//! The latency of the tools users run, and what the engine costs idle.
//!
//! - [`tools`]: each latency tool (`send-lat`, `write-lat`, `read-lat`,
//!   `atomic-lat`) run as a user runs it: the `roce-xdp` binary, the
//!   server in namespace b, the client in namespace a, `-s 64 -n N
//!   --json`, run-to-completion (the tools' default) and `--threaded`. The
//!   figures are the tool's own (its JSON: the tool's measurement loop),
//!   not a loop of this harness.
//! - [`device_spin`]: the verbs `Device` ping-pong with the polling option
//!   (`CqWait::Spin`: the application thread spins on its CQ).
//! - [`idle`]: CPU time per wall second per queue of an open `Device` pair
//!   (with a connected, idle QP) and of `roce-xdp serve` (before and after
//!   a client connected QPs), from /proc; then the first round trip after
//!   the engines went to sleep.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use engine::driver::{CqWait, PollMode};
use engine::testbed::netns::VethPair;

use crate::baselines::floor::{floor_pingpong_frames, ACK_FRAME_LEN};
use crate::engine_path::{self, Rig};
use crate::error::{context, EngineResult};
use crate::options::SMALL;
use crate::report::{IdleCost, ToolLatency};
use crate::stats::Percentiles;
use crate::tool_run::{in_netns, tool_binary, wait_or_kill};

/// The latency tools, in the order of the report.
pub const TOOLS: [&str; 4] = ["send-lat", "write-lat", "read-lat", "atomic-lat"];
/// TCP port of the tools' connection exchange in these runs.
const PORT: u16 = 18577;
/// The test bed's veths have 2 RX queues and the tools serve queue 0:
/// no steering (veth has no ntuple rules), start anyway (a veth's RX queue
/// is its peer's TX queue, queue 0 here).
const ENGINE_ARGS: [&str; 3] = ["--steer", "off", "--force"];
/// How long a tool run may take before it is killed.
const TOOL_TIMEOUT: Duration = Duration::from_secs(60);

/// One latency tool, server and client, `iterations` round trips of 64 B.
fn run_tool(
    pair: &VethPair,
    exe: &Path,
    tool: &str,
    threaded: bool,
    iterations: usize,
) -> EngineResult<ToolLatency> {
    let mode: &[&str] = if threaded { &["--threaded"] } else { &[] };
    // Both sides get the same -s and -n, as with perftest: the exchange
    // carries no message size (the write-lat server's region is sized
    // from its own -s) and the send-lat and write-lat servers answer
    // their own -n messages.
    let common = ENGINE_ARGS.iter().map(|a| a.to_string()).chain([
        "-p".into(),
        PORT.to_string(),
        "-s".into(),
        SMALL.to_string(),
        "-n".into(),
        iterations.to_string(),
        "--json".into(),
    ]);
    let common: Vec<String> = common.collect();
    let mut server = in_netns(&pair.b.netns, exe)
        .arg(tool)
        .args(["--iface", &pair.b.ifname])
        .args(&common)
        .args(mode)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(context("starting the tool server"))?;
    // The server listens before it attaches; retry a refused connection.
    let mut out = None;
    for _ in 0..20 {
        std::thread::sleep(Duration::from_millis(150));
        let o = in_netns(&pair.a.netns, exe)
            .arg(tool)
            .arg(pair.b.ipv4.to_string())
            .args(&common)
            .args(mode)
            .output()
            .map_err(context("running the tool client"))?;
        let refused = String::from_utf8_lossy(&o.stderr).contains("refused");
        out = Some(o);
        if !refused {
            break;
        }
    }
    let st = wait_or_kill(&mut server, TOOL_TIMEOUT)?;
    let out = out.ok_or("the client did not run")?;
    if !out.status.success() || !st.success() {
        let mut server_err = String::new();
        if let Some(mut e) = server.stderr.take() {
            let _ = std::io::Read::read_to_string(&mut e, &mut server_err);
        }
        return Err(format!(
            "{tool}{}: client {}: {}; server {}: {}",
            if threaded { " --threaded" } else { "" },
            out.status,
            String::from_utf8_lossy(&out.stderr).trim(),
            st,
            server_err.trim()
        ));
    }
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout)
        .map_err(|e| format!("{tool}: its --json output does not parse: {e}"))?;
    let row = &doc["results"][0];
    let f = |k: &str| {
        row[k]
            .as_f64()
            .ok_or_else(|| format!("{tool}: no {k} in its --json output"))
    };
    // write-lat and send-lat report half the round trip (perftest's
    // convention), read-lat and atomic-lat the whole round trip.
    let half = matches!(tool, "send-lat" | "write-lat");
    Ok(ToolLatency {
        tool: tool.into(),
        threaded,
        iterations: row["iterations"].as_u64().unwrap_or(0),
        reports_half_round_trip: half,
        t_min_us: f("t_min_us")?,
        t_max_us: f("t_max_us")?,
        t_typical_us: f("t_typical_us")?,
        p99_us: f("p99_us")?,
        p99_9_us: f("p99_9_us")?,
        floor: None,
        pairs: Vec::new(),
    })
}

/// The AF_XDP echo floor's 64 B ping-pong (if `with_ack`, with the frames
/// of an RC ping-pong: an ACK-sized frame after the 64 B one each way,
/// each round trip until the answer and the ACK-sized frame are back),
/// `iterations` round trips; a failure is described in `missing` as
/// `what`.
fn echo_floor(
    pair: &VethPair,
    with_ack: bool,
    iterations: usize,
    poll: PollMode,
    what: &str,
    missing: &mut Vec<String>,
) -> Option<Percentiles> {
    floor_pingpong_frames(pair, SMALL as usize, with_ack, iterations, poll).unwrap_or_else(|e| {
        missing.push(format!("{what}: {e}"));
        None
    })
}

/// Every latency tool, run-to-completion then `--threaded`, `pairs` times
/// each, each time just after an AF_XDP echo floor ping-pong of as many
/// round trips (its ratios' baseline): the row of a tool is its median
/// run ([`ToolLatency::median_of`]), with every run's ratios. A run that
/// fails is described in `missing`.
pub fn tools(
    pair: &VethPair,
    iterations: usize,
    pairs: usize,
    poll: PollMode,
    missing: &mut Vec<String>,
) -> Vec<ToolLatency> {
    let Some(exe) = tool_binary() else {
        missing.push("latency tools: the roce-xdp binary was not found (set ROCE_XDP_BIN)".into());
        return Vec::new();
    };
    let mut rows = Vec::new();
    for threaded in [false, true] {
        for tool in TOOLS {
            let mut runs = Vec::with_capacity(pairs);
            for _ in 0..pairs.max(1) {
                let floor = echo_floor(
                    pair,
                    false,
                    iterations,
                    poll,
                    &format!("AF_XDP floor before {tool}"),
                    missing,
                );
                match run_tool(pair, &exe, tool, threaded, iterations) {
                    Ok(r) => runs.push(ToolLatency { floor, ..r }),
                    Err(e) => missing.push(format!("latency tool {e}")),
                }
            }
            rows.extend(ToolLatency::median_of(runs));
        }
    }
    rows
}

/// The 64 B SEND ping-pong through the verbs `Device` with the polling
/// option (`CqWait::Spin`), warm-up dropped.
pub fn device_spin(
    pair: &VethPair,
    iterations: usize,
    poll: PollMode,
) -> EngineResult<Percentiles> {
    let warm = iterations / 10;
    let mut rtts =
        engine_path::pingpong_threaded_with(pair, SMALL, iterations + warm, poll, CqWait::Spin)?;
    Percentiles::of(&mut rtts[warm..]).ok_or_else(|| "no round trip".into())
}

/// CPU time (ns) the threads of process `pid` whose name starts with
/// `prefix` have used (all of them with an empty prefix), from
/// /proc/PID/task/*/schedstat.
fn threads_cpu_ns(pid: &str, prefix: &str) -> u64 {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    tasks
        .flatten()
        .filter(|t| {
            std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.starts_with(prefix))
        })
        .filter_map(|t| std::fs::read_to_string(t.path().join("schedstat")).ok())
        .filter_map(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

/// CPU seconds per wall second of `pid`'s threads named `prefix*` over
/// `window`.
fn cpu_share(pid: &str, prefix: &str, window: Duration) -> f64 {
    let c0 = threads_cpu_ns(pid, prefix);
    let t0 = Instant::now();
    std::thread::sleep(window);
    let c1 = threads_cpu_ns(pid, prefix);
    (c1.saturating_sub(c0)) as f64 / 1e9 / t0.elapsed().as_secs_f64()
}

/// Rounds of "idle for `gap`, then one round trip" after the idle window.
const FIRST_PACKETS: usize = 5;

/// Idle cost of an open `Device` pair (one queue each, a connected QP,
/// engine threads only: the `Device` has no other threads) and of `roce-xdp
/// serve` (one queue; the whole process), each over `window`; then the
/// first round trip after the Device pair's engines slept for `gap`.
pub fn idle(
    pair: &VethPair,
    window: Duration,
    gap: Duration,
    poll: PollMode,
    missing: &mut Vec<String>,
) -> IdleCost {
    let mut cost = IdleCost {
        window_s: window.as_secs_f64(),
        ..IdleCost::default()
    };
    match device_idle(pair, window, gap, poll, &mut cost) {
        Ok(()) => {}
        Err(e) => missing.push(format!("idle Device: {e}")),
    }
    match tool_binary() {
        Some(exe) => {
            if let Err(e) = serve_idle(pair, &exe, window, &mut cost) {
                missing.push(format!("idle serve: {e}"));
            }
        }
        None => missing.push("idle serve: the roce-xdp binary was not found".into()),
    }
    cost
}

fn device_idle(
    pair: &VethPair,
    window: Duration,
    gap: Duration,
    poll: PollMode,
    cost: &mut IdleCost,
) -> EngineResult<()> {
    let rig = Rig::open_with_qps(pair, 1, poll, 1)?;
    let qp = rig.connect(0)?;
    let mut warm = engine_path::pingpong_on(&rig, &qp, SMALL, 2000)?;
    cost.warm_rtt = Percentiles::of(&mut warm[200..]);
    // Two devices, one queue each: per queue is half of both.
    std::thread::sleep(Duration::from_millis(50));
    cost.device_cpu_per_queue = Some(cpu_share("self", "roce-q", window) / 2.0);
    let mut first = Vec::new();
    for _ in 0..FIRST_PACKETS {
        std::thread::sleep(gap);
        first.extend(engine_path::pingpong_on(&rig, &qp, SMALL, 1)?);
    }
    cost.first_after_idle_us = first.iter().map(|d| d.as_secs_f64() * 1e6).collect();
    cost.gap_s = gap.as_secs_f64();
    rig.close();
    Ok(())
}

fn serve_idle(
    pair: &VethPair,
    exe: &Path,
    window: Duration,
    cost: &mut IdleCost,
) -> EngineResult<()> {
    let port = (PORT + 1).to_string();
    let mut serve = in_netns(&pair.b.netns, exe)
        .args(["serve", "--iface", &pair.b.ifname, "-p", &port])
        .args(ENGINE_ARGS)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(context("starting roce-xdp serve"))?;
    let pid = serve.id().to_string();
    let r = (|| -> EngineResult<()> {
        // Let it attach and settle.
        std::thread::sleep(Duration::from_millis(1500));
        let alive = |serve: &mut Child| -> EngineResult<()> {
            match serve.try_wait() {
                Ok(None) => Ok(()),
                _ => Err("roce-xdp serve ended early".into()),
            }
        };
        alive(&mut serve)?;
        cost.serve_cpu_per_queue = Some(cpu_share(&pid, "", window));
        alive(&mut serve)?;
        // A client connects QPs and runs; they stay, connected and idle.
        let o = in_netns(&pair.a.netns, exe)
            .args(["send-lat", &pair.b.ipv4.to_string(), "-p", &port])
            .args(["-s", "64", "-n", "1000", "--json"])
            .args(ENGINE_ARGS)
            .output()
            .map_err(context("running send-lat against serve"))?;
        if !o.status.success() {
            return Err(format!(
                "send-lat against serve: {}",
                String::from_utf8_lossy(&o.stderr).trim()
            ));
        }
        std::thread::sleep(Duration::from_millis(200));
        cost.serve_connected_cpu_per_queue = Some(cpu_share(&pid, "", window));
        alive(&mut serve)
    })();
    let _ = Command::new("kill").args(["-INT", &pid]).status();
    let _ = wait_or_kill(&mut serve, Duration::from_secs(5));
    r
}

/// Everything of this module for one full run: the tools (as many round
/// trips as the run's ping-pongs), the Device polling option, the idle
/// cost (10 s windows; 2 s in a quick run).
pub fn measure(
    pair: &VethPair,
    opts: &crate::options::Options,
    notes: &mut Vec<String>,
    missing: &mut Vec<String>,
) -> crate::report::ToolsReport {
    let n = opts.pingpongs();
    let floor_with_ack = echo_floor(
        pair,
        true,
        n,
        opts.engine_poll,
        "AF_XDP floor with an ACK-sized frame",
        missing,
    );
    let pairs = opts.latency_pairs();
    let tools = tools(pair, n, pairs, opts.engine_poll, missing);
    let device_spin = match device_spin(pair, n, opts.engine_poll) {
        Ok(p) => Some(p),
        Err(e) => {
            missing.push(format!("Device ping-pong, CqWait::Spin: {e}"));
            None
        }
    };
    let window = if opts.quick {
        Duration::from_secs(2)
    } else {
        Duration::from_secs(10)
    };
    let idle = idle(
        pair,
        window,
        Duration::from_secs(2),
        opts.engine_poll,
        missing,
    );
    notes.push(format!(
        "latency tools: each of {} run as a user runs it (the roce-xdp binary; server `TOOL --iface IF -s 64 -n {n} --json` in namespace b, client `TOOL ADDR -s 64 -n {n} --json` in namespace a, --steer off --force: the test bed's veths have 2 RX queues and the tools serve queue 0), run-to-completion (the default) and --threaded; the figures are the tool's own JSON (t_min, t_typical = median, 99 %, 99.9 %, t_max; send-lat and write-lat report half the round trip, as perftest; their round trip, compared with the floor's, is twice that), so every sample comes from the tool's measurement loop, first iterations included; each tool runs {pairs} times, each right after an AF_XDP echo ping-pong of as many round trips, the floor that run's ratios are taken against (a machine whose speed drifts over a run moves both); its row is the run whose p50 / floor is the median, the last column every run's",
        TOOLS.join(", ")
    ));
    notes.push(format!(
        "Device polling option: the 'engine threads + app thread' SEND ping-pong with DeviceConfig::cq_wait = CqWait::Spin (the application thread spins on its CQ, yielding between polls, instead of parking), {n} round trips after {} warm-up ones",
        n / 10
    ));
    notes.push(format!(
        "idle cost: CPU time per wall second per queue over {:.0} s, from /proc/PID/task/*/schedstat: an open Device pair (one queue each, a connected idle QP, its engine threads; divided by 2), roce-xdp serve --iface IF (one queue, every thread of the process) before any client and after a send-lat client connected QPs and left; then {} times: {:.0} s idle and one 64 B SEND round trip through the Device pair (both engines and the application asleep)",
        window.as_secs_f64(),
        FIRST_PACKETS,
        2.0
    ));
    notes.push(format!(
        "request+ACK floor: the AF_XDP ping-pong of an RC SEND ping-pong's frames: each ping the 64 B frame then an ACK-sized one ({} B) in one TX kick, the peer answering each 64 B frame with its echo then an ACK-sized frame of its own in one kick (the ACK-sized frames it receives get no answer), {n} round trips, each ending when both the answer and the ACK-sized frame are back (send-lat and write-lat, as perftest's latency loops, wait for the peer's answer and for the ACK of their own message, which leaves behind that answer), measured once before the tools: the wire cost of a SEND or WRITE ping-pong (send-lat and write-lat are compared with it in a column of their own; the targets stay against the one-frame floor)",
        ACK_FRAME_LEN
    ));
    crate::report::ToolsReport {
        tools,
        device_spin,
        idle: Some(idle),
        floor_with_ack,
    }
}
