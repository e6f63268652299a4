//! The shared engine's rows ([`SharedReport`]): Debian's stock perftest
//! under `roce-xdp exec --share always`, each program attached to the
//! `roce-xdp service` of its namespace (the service owns queue 0 of the
//! test bed's veth, the program's engine exchanges frames with it over
//! shared-memory rings), against the same binaries under `exec --share
//! never` (each program's engine owns queue 0, as the drop-in rows run),
//! between the same two namespaces, paired in one run:
//!
//! - `ib_write_bw -s 65536 -D` [`bw_seconds`], one QP: BW average (MB/s),
//!   target ratio >= [`SHARED_WRITE_BW_TARGET`];
//! - `ib_send_lat -s 64 -n N`: t_typical (perftest's median, µs), target
//!   ratio <= [`SHARED_SEND_LAT_TARGET`];
//! - [`MANY_PROGRAMS`] `ib_write_bw -q` [`MANY_QPS`] pairs at once (ports
//!   [`MANY_PORT`]..), all attached, their BW averages summed, against
//!   one in-process `ib_write_bw -q` (`MANY_PROGRAMS x MANY_QPS`) (the
//!   baseline is in-process), target ratio >= [`SHARED_MANY_TARGET`];
//! - idle: a service in namespace b with [`MANY_PROGRAMS`] attached
//!   `ib_write_bw` servers waiting for a client; the service's utime +
//!   stime (/proc/PID/stat) over [`IDLE_SECONDS`] of wall time, as % of a
//!   core; target <= [`SHARED_IDLE_TARGET_PERCENT`].
//!
//! Each pair runs the attached side and its baseline back to back, the
//! attached side first in even-numbered pairs (a drift linear in time
//! cancels); the services are started before each attached run (and
//! waited for: their `roce-xdp stats` answers) and stopped (SIGTERM) after
//! it, so that the baseline's programs own the interface as they would
//! without a service. The pairs of the three comparisons are interleaved.

use std::ffi::OsStr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use engine::testbed::netns::{Side, VethPair};

use crate::error::{context, EngineResult};
use crate::options::{Options, ROCE_PMTU, SMALL};
use crate::report::{
    SharedIdle, SharedPair, SharedReport, SharedRow, SHARED_IDLE_TARGET_PERCENT,
    SHARED_MANY_TARGET, SHARED_SEND_LAT_TARGET, SHARED_WRITE_BW_TARGET,
};
use crate::stats::abba_a_first;
use crate::tool_run::{in_netns, server_client, tool_binary, wait_or_kill};
use crate::verbs_drop_in::perftest_missing;
use crate::verbs_drop_in::{perftest_bw_average, perftest_row};

/// perftest's port of the one-program runs.
const PORT: u16 = 18611;
/// First port of the many-program runs (one per program).
pub const MANY_PORT: u16 = 18620;
/// Programs of the many-program row and of the idle row.
pub const MANY_PROGRAMS: usize = 8;
/// QPs of each of them (`-q`).
pub const MANY_QPS: u32 = 8;
/// Wall time of the idle measurement.
pub const IDLE_SECONDS: Duration = Duration::from_secs(10);
/// The bandwidth comparison's message size.
const BW_BYTES: u64 = 65536;
/// The options of every engine on the test bed (the drop-in rows').
const ENGINE_ARGS: [&str; 3] = ["--steer", "off", "--force"];
/// What a client prints when its server is not listening yet.
const NOT_LISTENING: [&str; 3] = ["refused", "Couldn't connect", "Unable to open file"];
/// How long a server may take after its client ended.
const SERVER_TIMEOUT: Duration = Duration::from_secs(60);

/// Length of each bandwidth run, seconds (perftest's `-D`).
pub fn bw_seconds(opts: &Options) -> u32 {
    if opts.quick {
        2
    } else {
        3
    }
}

/// Pairs per comparison: `--pairs N` (rounded up to even), else 6 (2
/// with `--quick`); each pair is two perftest runs and two service starts.
fn pairs(opts: &Options) -> usize {
    match opts.pairs {
        Some(_) => opts.pairs(),
        None if opts.quick => 2,
        None => 6,
    }
}

/// A running `roce-xdp service` in a side's namespace, stopped on drop.
struct Service {
    child: Child,
}

impl Service {
    /// Starts the service of `side`'s interface (queue 0, the queue the
    /// in-process runs serve) and waits until its `roce-xdp stats` answers.
    fn start(exe: &Path, side: &Side) -> EngineResult<Service> {
        let child = in_netns(&side.netns, exe)
            .args(["service", "--iface", &side.ifname, "--queues", "1"])
            .args(ENGINE_ARGS)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(context("starting roce-xdp service"))?;
        let mut s = Service { child };
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(30) {
            if stats(exe, side).is_ok_and(|d| d.get("processes").is_some()) {
                return Ok(s);
            }
            if let Some(st) = s
                .child
                .try_wait()
                .map_err(context("waiting for the service"))?
            {
                return Err(format!(
                    "roce-xdp service on {} exited ({st}) before it answered",
                    side.ifname
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Err(format!(
            "roce-xdp service on {}: no stats after 30 s",
            side.ifname
        ))
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let _ = wait_or_kill(&mut self.child, Duration::from_secs(10));
    }
}

/// `roce-xdp stats --iface IF --json` in `side`'s namespace, parsed.
fn stats(exe: &Path, side: &Side) -> EngineResult<serde_json::Value> {
    let out = in_netns(&side.netns, exe)
        .args(["stats", "--iface", &side.ifname, "--json"])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .map_err(context("running roce-xdp stats"))?;
    if !out.status.success() {
        return Err("roce-xdp stats failed".into());
    }
    serde_json::from_slice(&out.stdout).map_err(|e| format!("roce-xdp stats --json: {e}"))
}

/// Both sides' services, for one attached run.
fn services(exe: &Path, pair: &VethPair) -> EngineResult<[Service; 2]> {
    let a = Service::start(exe, &pair.a)?;
    let b = Service::start(exe, &pair.b)?;
    Ok([a, b])
}

/// `program args..` under `roce-xdp exec --share SHARE` in `side`'s
/// namespace.
fn exec(exe: &Path, side: &Side, attached: bool, program: &str, args: &[String]) -> Command {
    let mut cmd = in_netns(&side.netns, exe);
    cmd.args(["exec", "--iface", &side.ifname])
        .args(ENGINE_ARGS)
        .args(["--share", if attached { "always" } else { "never" }])
        .arg("--")
        .arg(OsStr::new(program))
        .args(args);
    cmd
}

/// Server in b, client in a (b's address appended to its options): the
/// client's standard output.
fn run_perftest(
    pair: &VethPair,
    exe: &Path,
    attached: bool,
    program: &str,
    args: &[String],
) -> EngineResult<String> {
    let mut client = args.to_vec();
    client.push(pair.b.ipv4.to_string());
    let out = server_client(
        exec(exe, &pair.b, attached, program, args),
        || exec(exe, &pair.a, attached, program, &client),
        &NOT_LISTENING,
        SERVER_TIMEOUT,
    )?;
    let how = if attached { "attached" } else { "in-process" };
    if !out.success() {
        return Err(format!("{program} ({how}): {}", out.describe_failure()));
    }
    Ok(String::from_utf8_lossy(&out.client.stdout).into_owned())
}

fn bw_args(port: u16, qps: u32, seconds: u32) -> Vec<String> {
    let mut a: Vec<String> = ["-x", "1", "-s"].map(String::from).to_vec();
    a.extend([
        BW_BYTES.to_string(),
        "-m".into(),
        ROCE_PMTU.to_string(),
        "-p".into(),
        port.to_string(),
        "-D".into(),
        seconds.to_string(),
        "-q".into(),
        qps.to_string(),
    ]);
    a
}

/// One `ib_write_bw -q qps` run: the client's BW average, MB/s.
fn write_bw(
    pair: &VethPair,
    exe: &Path,
    attached: bool,
    port: u16,
    qps: u32,
    seconds: u32,
) -> EngineResult<f64> {
    let stdout = run_perftest(
        pair,
        exe,
        attached,
        "ib_write_bw",
        &bw_args(port, qps, seconds),
    )?;
    perftest_bw_average(&stdout, BW_BYTES)
        .ok_or_else(|| format!("ib_write_bw -q {qps}: no result row: {stdout}"))
}

/// One `ib_send_lat -s 64` run: the client's t_typical, µs.
fn send_lat(pair: &VethPair, exe: &Path, attached: bool, iters: usize) -> EngineResult<f64> {
    let args: Vec<String> = [
        "-x".to_string(),
        "1".into(),
        "-s".into(),
        SMALL.to_string(),
        "-m".into(),
        ROCE_PMTU.to_string(),
        "-p".into(),
        PORT.to_string(),
        "-n".into(),
        iters.to_string(),
    ]
    .to_vec();
    let stdout = run_perftest(pair, exe, attached, "ib_send_lat", &args)?;
    // #bytes #iterations t_min t_max t_typical ...
    perftest_row(&stdout, SMALL)
        .and_then(|r| r.get(4).copied())
        .ok_or_else(|| format!("ib_send_lat: no result row: {stdout}"))
}

/// [`MANY_PROGRAMS`] `ib_write_bw -q` [`MANY_QPS`] pairs at once, each on
/// its own port: the sum of their clients' BW averages, MB/s.
fn many_write_bw(pair: &VethPair, exe: &Path, seconds: u32) -> EngineResult<f64> {
    std::thread::scope(|s| {
        let runs: Vec<_> = (0..MANY_PROGRAMS)
            .map(|i| {
                s.spawn(move || write_bw(pair, exe, true, MANY_PORT + i as u16, MANY_QPS, seconds))
            })
            .collect();
        let mut sum = 0.0;
        for (i, r) in runs.into_iter().enumerate() {
            let bw = r
                .join()
                .map_err(|_| format!("program {i} of {MANY_PROGRAMS}: its thread panicked"))??;
            sum += bw;
        }
        Ok(sum)
    })
}

/// The comparisons of the step.
#[derive(Clone, Copy)]
enum Row {
    WriteBw,
    SendLat,
    Many,
}

impl Row {
    fn empty(self, seconds: u32) -> SharedRow {
        let (attached, baseline, bytes, unit, latency, target) = match self {
            Row::WriteBw => (
                format!("ib_write_bw -s 65536 -D {seconds}, attached"),
                "in-process (--share never)".to_string(),
                BW_BYTES,
                "BW average MB/s",
                false,
                SHARED_WRITE_BW_TARGET,
            ),
            Row::SendLat => (
                "ib_send_lat -s 64, attached".into(),
                "in-process (--share never)".into(),
                SMALL,
                "t_typical µs",
                true,
                SHARED_SEND_LAT_TARGET,
            ),
            Row::Many => (
                format!(
                    "{MANY_PROGRAMS} x ib_write_bw -q {MANY_QPS} -D {seconds} at once, attached"
                ),
                format!(
                    "1 x ib_write_bw -q {} in-process (--share never)",
                    MANY_PROGRAMS as u32 * MANY_QPS
                ),
                BW_BYTES,
                "BW average MB/s, summed",
                false,
                SHARED_MANY_TARGET,
            ),
        };
        SharedRow {
            attached,
            baseline,
            message_bytes: bytes,
            unit: unit.into(),
            latency,
            pairs: Vec::new(),
            ratio: None,
            target_ratio: target,
        }
    }

    /// One run: attached (services started for it) or in-process.
    fn run(self, pair: &VethPair, exe: &Path, attached: bool, opts: &Options) -> EngineResult<f64> {
        let _services = if attached {
            Some(services(exe, pair)?)
        } else {
            None
        };
        let seconds = bw_seconds(opts);
        match (self, attached) {
            (Row::WriteBw, _) => write_bw(pair, exe, attached, PORT, 1, seconds),
            (Row::SendLat, _) => send_lat(pair, exe, attached, opts.pingpongs()),
            (Row::Many, true) => many_write_bw(pair, exe, seconds),
            (Row::Many, false) => write_bw(
                pair,
                exe,
                false,
                PORT,
                MANY_PROGRAMS as u32 * MANY_QPS,
                seconds,
            ),
        }
    }
}

/// utime + stime of process `pid`, seconds.
fn cpu_seconds(pid: u32, ticks_per_second: f64) -> EngineResult<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map_err(|e| format!("reading /proc/{pid}/stat: {e}"))?;
    // Fields after the command's closing parenthesis start at field 3;
    // utime and stime are fields 14 and 15 (proc(5)).
    let rest = stat
        .rsplit_once(')')
        .map(|(_, r)| r)
        .ok_or("/proc/PID/stat without a command")?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let field = |n: usize| -> EngineResult<f64> {
        f.get(n - 3)
            .and_then(|v| v.parse::<f64>().ok())
            .ok_or_else(|| format!("/proc/{pid}/stat: no field {n}"))
    };
    Ok((field(14)? + field(15)?) / ticks_per_second)
}

/// Clock ticks per second (`getconf CLK_TCK`; 100 if it cannot tell).
fn clock_ticks() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(100.0)
}

/// The idle row: a service in b, [`MANY_PROGRAMS`] attached `ib_write_bw`
/// servers waiting for a client, the service's CPU over `wall`.
fn idle(pair: &VethPair, exe: &Path, wall: Duration) -> EngineResult<SharedIdle> {
    let service = Service::start(exe, &pair.b)?;
    let mut servers: Vec<Child> = Vec::new();
    let result = (|| {
        for i in 0..MANY_PROGRAMS {
            let c = exec(
                exe,
                &pair.b,
                true,
                "ib_write_bw",
                &bw_args(MANY_PORT + i as u16, 1, 1),
            )
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(context("starting an idle ib_write_bw server"))?;
            servers.push(c);
        }
        // Wait until every server is attached.
        let t = Instant::now();
        let attached = loop {
            let n = stats(exe, &pair.b)
                .ok()
                .and_then(|d| d.get("processes")?.as_array().map(Vec::len))
                .unwrap_or(0);
            if n >= MANY_PROGRAMS {
                break n;
            }
            if t.elapsed() > Duration::from_secs(60) {
                return Err(format!(
                    "{n} of {MANY_PROGRAMS} idle servers attached after 60 s"
                ));
            }
            for s in &mut servers {
                if let Ok(Some(st)) = s.try_wait() {
                    return Err(format!("an idle ib_write_bw server exited ({st})"));
                }
            }
            std::thread::sleep(Duration::from_millis(100));
        };
        // Let the attach settle (the programs' last setup calls).
        std::thread::sleep(Duration::from_secs(1));
        let ticks = clock_ticks();
        let (c0, t0) = (cpu_seconds(service.pid(), ticks)?, Instant::now());
        std::thread::sleep(wall);
        let (c1, seconds) = (
            cpu_seconds(service.pid(), ticks)?,
            t0.elapsed().as_secs_f64(),
        );
        let cpu = c1 - c0;
        Ok(SharedIdle {
            programs: attached as u32,
            seconds,
            cpu_seconds: cpu,
            percent_of_core: 100.0 * cpu / seconds,
            target_percent: SHARED_IDLE_TARGET_PERCENT,
        })
    })();
    for mut s in servers {
        let _ = s.kill();
        let _ = s.wait();
    }
    drop(service);
    result
}

/// The whole step; what could not be measured goes to `missing`.
pub fn measure(pair: &VethPair, opts: &Options, missing: &mut Vec<String>) -> SharedReport {
    let progress = |m: &str| {
        if opts.progress {
            eprintln!("bench: shared engine: {m}");
        }
    };
    let seconds = bw_seconds(opts);
    let mut report = SharedReport {
        bw_seconds: seconds,
        ..SharedReport::default()
    };
    let why = match (tool_binary(), perftest_missing()) {
        (_, Some(why)) => Some(why),
        (None, _) => Some("the roce-xdp binary was not found (set ROCE_XDP_BIN)".to_string()),
        (Some(_), None) => None,
    };
    if let Some(why) = why {
        missing.push(format!("shared engine rows: {why}"));
        report.skipped = Some(why);
        return report;
    }
    let exe = tool_binary().expect("checked above");
    let kinds = [Row::WriteBw, Row::SendLat, Row::Many];
    let mut rows: Vec<SharedRow> = kinds.iter().map(|k| k.empty(seconds)).collect();
    let mut failed = [false; 3];
    for k in 0..pairs(opts) {
        for (i, kind) in kinds.iter().enumerate() {
            if failed[i] {
                continue;
            }
            let attached_first = abba_a_first(k);
            let run = |attached| kind.run(pair, &exe, attached, opts);
            match run(attached_first).and_then(|a| Ok((a, run(!attached_first)?))) {
                Ok((x, y)) => {
                    let (attached, baseline) = if attached_first { (x, y) } else { (y, x) };
                    progress(&format!(
                        "{} pair {}: attached {attached:.2}, baseline {baseline:.2} ({:.3})",
                        rows[i].unit,
                        k + 1,
                        attached / baseline
                    ));
                    rows[i].pairs.push(SharedPair {
                        attached_first,
                        attached,
                        baseline,
                    });
                }
                Err(e) => {
                    failed[i] = true;
                    missing.push(format!(
                        "shared engine, {} (after {} pairs): {e}",
                        rows[i].attached,
                        rows[i].pairs.len()
                    ));
                }
            }
        }
    }
    for r in &mut rows {
        r.summarise();
    }
    report.rows = rows;
    progress(&format!(
        "idle: service with {MANY_PROGRAMS} attached servers, {} s",
        IDLE_SECONDS.as_secs()
    ));
    match idle(pair, &exe, IDLE_SECONDS) {
        Ok(i) => report.idle = Some(i),
        Err(e) => missing.push(format!("shared engine, idle service: {e}")),
    }
    report
}
