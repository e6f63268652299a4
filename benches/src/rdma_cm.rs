//! The connection manager's rows ([`CmReport`]):
//!
//! - setup rate: engine against engine, in this process, one device per
//!   namespace (one queue each, the engine polling as the run's other
//!   engine rows do), each with its
//!   [`CmService`] (QP 1): the client
//!   (namespace a) creates an RC QP, connects it (REQ; the REP moves it to
//!   RTS; RTU), disconnects (DREQ, waits for the DREP) and destroys it, one
//!   connection at a time, for [`rate_seconds`]; the server (namespace b)
//!   accepts each on a fresh QP and answers the DREQ. The figure is
//!   connections per second. Its same-run baseline: the kernel's TCP
//!   connect / accept / close between the same namespaces, one at a time,
//!   for as long.
//! - `roce-xdp write-bw -R` / `roce-xdp write-bw` at 64 KiB: the tool with
//!   its QPs connected by the CM against the same tool with the TCP
//!   exchange, server in b, client in a, `-D` [`BW_SECONDS`] each, as
//!   pairs (order alternating, ratio = median of per-pair ratios of the
//!   "BW average" MB/s), target >= [`CM_WRITE_BW_TARGET`].
//! - stock `ib_write_bw -R` / `ib_write_bw` at 64 KiB, Debian's perftest
//!   under `roce-xdp exec` on both ends (the drop-in librdmacm and
//!   libibverbs), the same options on both sides as the drop-in's rows
//!   (`-x 1 -s 65536 -m 4096 -D` [`BW_SECONDS`]), paired the same way,
//!   target >= [`CM_WRITE_BW_TARGET`] (a row of the report's target
//!   ratios).
//! - stock `ucmatose -c` [`UCMATOSE_CONNECTIONS`] `-C`
//!   [`UCMATOSE_MESSAGES`] under `exec` on both ends: connections
//!   established and torn down per second = N / the client's wall time
//!   (its whole process: the engine's start included), and, from a `-c 1`
//!   run paired with it, the marginal rate (N - 1) / (wall(-c N) -
//!   wall(-c 1)).
//!
//! The runs under `exec` reuse the drop-in rows' runner and pairing
//! ([`exec_server_client`], [`one_pair`]); their clients start once the
//! server's engine runs (its `roce-xdp stats`) and [`LISTEN_GRACE`] more,
//! so that no REQ reaches the kernel before the server's engine and waits
//! for the CM's retry.

use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use engine::testbed::netns::{Side, VethPair};
use engine::verbs::cm::{CmParams, CmService};
use engine::verbs::{Device, DeviceConfig, QpCaps, SharedCq};

use crate::error::{EngineResult, HarnessError};
use crate::options::{Options, ROCE_PMTU};
use crate::report::{
    CmReport, CmSetupRate, CmUcmatose, DropInTarget, UcmatosePair, CM_WRITE_BW_TARGET,
};
use crate::stats::{abba_a_first, median};
use crate::threads::{join, spawn_in};
use crate::tool_run::{in_netns, server_client, tool_binary};
use crate::verbs_drop_in::{exec_server_client, one_pair, perftest_bw_average};

/// The CM port of the setup-rate loop (RDMA_PS_TCP).
const RATE_PORT: u16 = 18601;
/// The TCP port of the kernel baseline.
const TCP_PORT: u16 = 18602;
/// The tools' port.
const TOOL_PORT: u16 = 18603;
/// Each `write-bw` run's `-D`.
pub const BW_SECONDS: u32 = 2;
/// The bandwidth comparison's message size.
const BW_BYTES: u64 = 65536;
/// The engine options of every tool run on the test bed.
const ENGINE_ARGS: [&str; 3] = ["--steer", "off", "--force"];
/// What a client prints when its server is not listening yet.
const NOT_LISTENING: [&str; 3] = ["refused", "not listening", "-R listening"];
/// Stock perftest's port in these runs (its `-p`).
const STOCK_PORT: u16 = 18604;
/// `ucmatose`'s port (its `-p`).
const UCMATOSE_PORT: u16 = 18605;
/// `ucmatose -c`: the connections of a run (below the drop-in
/// librdmacm's 128 QP 1 receive slots: a burst of more REQs than those
/// loses some, which wait for the CM's retry, seconds).
pub const UCMATOSE_CONNECTIONS: u32 = 100;
/// `ucmatose -C`: SENDs each way on each connection.
pub const UCMATOSE_MESSAGES: u32 = 1;
/// `ucmatose -S` (its default).
pub const UCMATOSE_BYTES: u32 = 100;
/// How long after a server's engine runs under `exec` its client starts
/// (its `rdma_listen`, or its TCP listener, is the next few calls).
pub const LISTEN_GRACE: Duration = Duration::from_millis(300);
/// What the stock clients under `exec` print when their server is not
/// listening yet: perftest's TCP exchange (as the drop-in rows'), its
/// `-R` (a REJ), ucmatose's (a REJ).
const STOCK_NOT_LISTENING: [&str; 5] = [
    "refused",
    "Couldn't connect",
    "Unable to open file",
    "Unexpected CM event",
    "RDMA_CM_EVENT_REJECTED",
];

/// How long each side of the setup-rate figure runs.
pub fn rate_seconds(opts: &Options) -> Duration {
    if opts.quick {
        Duration::from_secs(1)
    } else {
        Duration::from_secs(3)
    }
}

/// Pairs of the bandwidth comparison: even (each order as often); 6 in a
/// full run (each pair is two tool runs, about 7 s on a loaded 2-core
/// machine).
fn pairs(opts: &Options) -> usize {
    if opts.quick {
        2
    } else {
        6
    }
}

fn device(side: &Side, poll: engine::driver::PollMode) -> Result<Arc<Device>, HarnessError> {
    let mut c = DeviceConfig::new(&side.ifname);
    c.netns = Some(side.netns.clone());
    c.queues = 1;
    c.force = true;
    c.poll = poll;
    Device::open(c)
        .map(Arc::new)
        .map_err(|e| HarnessError::Engine(format!("opening the device on {}: {e}", side.ifname)))
}

fn fail(what: &str, e: impl std::fmt::Display) -> HarnessError {
    HarnessError::Engine(format!("{what}: {e}"))
}

/// Connections per second through the CM, engine against engine.
pub fn cm_setup_rate(
    pair: &VethPair,
    seconds: Duration,
    poll: engine::driver::PollMode,
) -> Result<(u64, f64), HarnessError> {
    let stop = Arc::new(AtomicBool::new(false));
    let ready = Arc::new(AtomicBool::new(false));
    let server = {
        let (stop, ready) = (stop.clone(), ready.clone());
        let side = pair.b.clone();
        spawn_in(&pair.b, move || {
            let b = device(&side, poll)?;
            let cq = SharedCq::new(b.clone(), 0);
            let mut cm = CmService::new(cq).map_err(|e| fail("QP 1 on b", e))?;
            cm.listen(RATE_PORT, 64).map_err(|e| fail("listen", e))?;
            ready.store(true, Ordering::Release);
            let p = CmParams::default();
            let mut served = 0u64;
            while !stop.load(Ordering::Acquire) {
                let Ok(req) = cm.get_request(Duration::from_millis(100)) else {
                    continue;
                };
                let qp = b
                    .create_qp(0, QpCaps::default())
                    .map_err(|e| fail("QP on b", e))?;
                if cm.accept(&req, &qp, &p).is_ok() {
                    let _ = cm.await_disconnect(req.conn, Duration::from_secs(5));
                    served += 1;
                }
                let _ = qp.destroy();
            }
            cm.close();
            Ok(served)
        })
    };
    let client = {
        let stop = stop.clone();
        let peer = IpAddr::V4(pair.b.ipv4);
        let side = pair.a.clone();
        spawn_in(&pair.a, move || {
            let a = device(&side, poll)?;
            let cq = SharedCq::new(a.clone(), 0);
            let mut cm = CmService::new(cq).map_err(|e| fail("QP 1 on a", e))?;
            let deadline = Instant::now() + Duration::from_secs(20);
            while !ready.load(Ordering::Acquire) {
                if Instant::now() > deadline {
                    return Err(fail("the CM server", "did not start"));
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            let p = CmParams::default();
            // One connection first (ARP, address handles), then the clock.
            let one = |cm: &mut CmService| -> Result<(), HarnessError> {
                let qp = a
                    .create_qp(0, QpCaps::default())
                    .map_err(|e| fail("QP on a", e))?;
                let r = cm.connect(&qp, peer, RATE_PORT, 0xC001, &p);
                let r = r.and_then(|c| cm.disconnect(c.conn, Duration::from_secs(5)));
                let _ = qp.destroy();
                r.map_err(|e| fail("a CM connection", e))
            };
            one(&mut cm)?;
            let t = Instant::now();
            let mut n = 0u64;
            while t.elapsed() < seconds {
                one(&mut cm)?;
                n += 1;
            }
            let secs = t.elapsed().as_secs_f64();
            stop.store(true, Ordering::Release);
            cm.close();
            Ok((n, secs))
        })
    };
    let r = join(client);
    stop.store(true, Ordering::Release);
    let _ = join(server);
    r
}

/// Kernel TCP connect / accept / close per second between the namespaces.
pub fn tcp_setup_rate(pair: &VethPair, seconds: Duration) -> Result<(u64, f64), HarnessError> {
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = std::sync::mpsc::channel();
    let server = {
        let stop = stop.clone();
        spawn_in(&pair.b, move || {
            let l = TcpListener::bind(("0.0.0.0", TCP_PORT)).map_err(|e| fail("TCP bind", e))?;
            let _ = tx.send(());
            l.set_nonblocking(true).map_err(|e| fail("TCP", e))?;
            while !stop.load(Ordering::Acquire) {
                match l.accept() {
                    Ok((s, _)) => drop(s),
                    Err(_) => std::thread::yield_now(),
                }
            }
            Ok(())
        })
    };
    let _ = rx.recv_timeout(Duration::from_secs(10));
    let to = SocketAddr::new(IpAddr::V4(pair.b.ipv4), TCP_PORT);
    let client = spawn_in(&pair.a, move || {
        let t = Instant::now();
        let mut n = 0u64;
        while t.elapsed() < seconds {
            let s = TcpStream::connect_timeout(&to, Duration::from_secs(2))
                .map_err(|e| fail("TCP connect", e))?;
            drop(s);
            n += 1;
        }
        Ok((n, t.elapsed().as_secs_f64()))
    });
    let r = join(client);
    stop.store(true, Ordering::Release);
    let _ = join(server);
    r
}

/// One `write-bw` run, with or without `-R`: the client's BW average, MB/s.
fn run_write_bw(pair: &VethPair, exe: &Path, cm: bool) -> EngineResult<f64> {
    let side = |ns: &str, iface: &str, peer: Option<String>| {
        let mut cmd = in_netns(ns, exe);
        cmd.args(["write-bw", "--iface", iface])
            .args(ENGINE_ARGS)
            .args(["-s", &BW_BYTES.to_string(), "-m", &ROCE_PMTU.to_string()])
            .args(["-p", &TOOL_PORT.to_string(), "-D", &BW_SECONDS.to_string()])
            .arg("--json")
            .args(cm.then_some("-R"))
            .args(peer);
        cmd
    };
    let out = server_client(
        side(&pair.b.netns, &pair.b.ifname, None),
        || side(&pair.a.netns, &pair.a.ifname, Some(pair.b.ipv4.to_string())),
        &NOT_LISTENING,
        Duration::from_secs(30),
    )?;
    let what = if cm { "write-bw -R" } else { "write-bw" };
    if !out.success() {
        return Err(format!("{what}: {}", out.describe_failure()));
    }
    let doc: serde_json::Value = serde_json::from_slice(&out.client.stdout)
        .map_err(|e| format!("{what}: its --json does not parse: {e}"))?;
    doc["results"][0]["bw_avg_mbps"]
        .as_f64()
        .ok_or_else(|| format!("{what}: no bw_avg_mbps in its --json"))
}

/// One stock `ib_write_bw` run under `exec` on both ends, with or without
/// `-R`: the client's BW average, MB/s.
fn run_stock_write_bw(pair: &VethPair, exe: &Path, cm: bool) -> EngineResult<f64> {
    let mut server: Vec<String> = ["-x", "1", "-s", "65536", "-m"].map(String::from).to_vec();
    server.extend([
        ROCE_PMTU.to_string(),
        "-p".into(),
        STOCK_PORT.to_string(),
        "-D".into(),
        BW_SECONDS.to_string(),
    ]);
    if cm {
        server.push("-R".into());
    }
    let mut client = server.clone();
    client.push(pair.b.ipv4.to_string());
    let what = if cm { "ib_write_bw -R" } else { "ib_write_bw" };
    let out = exec_server_client(
        pair,
        exe,
        "ib_write_bw".as_ref(),
        &server,
        &client,
        &STOCK_NOT_LISTENING,
        Some(LISTEN_GRACE),
    )?;
    if !out.success() {
        return Err(format!("{what} under exec: {}", out.describe_failure()));
    }
    let stdout = String::from_utf8_lossy(&out.client.stdout);
    if cm && !stdout.contains("rdma_cm") {
        return Err(format!("{what}: its output does not say rdma_cm: {stdout}"));
    }
    perftest_bw_average(&stdout, BW_BYTES).ok_or_else(|| format!("{what}: no result row"))
}

/// One stock `ucmatose -c connections` run under `exec` on both ends: the
/// client's wall time, seconds.
fn run_ucmatose(pair: &VethPair, exe: &Path, connections: u32) -> EngineResult<f64> {
    let server: Vec<String> = [
        "-c".to_string(),
        connections.to_string(),
        "-C".into(),
        UCMATOSE_MESSAGES.to_string(),
        "-S".into(),
        UCMATOSE_BYTES.to_string(),
        "-p".into(),
        UCMATOSE_PORT.to_string(),
    ]
    .to_vec();
    let mut client = server.clone();
    client.extend(["-s".into(), pair.b.ipv4.to_string()]);
    let out = exec_server_client(
        pair,
        exe,
        "ucmatose".as_ref(),
        &server,
        &client,
        &STOCK_NOT_LISTENING,
        Some(LISTEN_GRACE),
    )?;
    let what = format!("ucmatose -c {connections}");
    if !out.success() {
        return Err(format!("{what} under exec: {}", out.describe_failure()));
    }
    let stdout = String::from_utf8_lossy(&out.client.stdout);
    let ok = ["data transfers complete", "return status 0"];
    if let Some(w) = ok.iter().find(|w| !stdout.contains(*w)) {
        return Err(format!("{what}: its client did not print {w:?}: {stdout}"));
    }
    Ok(out.client_seconds)
}

/// Why the stock rows cannot run here, if they cannot.
fn stock_unavailable(bin: &str) -> Option<String> {
    let found = std::process::Command::new("sh")
        .args(["-c", &format!("command -v {bin}")])
        .output()
        .is_ok_and(|o| o.status.success());
    (!found).then(|| format!("{bin} is not installed (scripts/setup-deps.sh installs it)"))
}

/// `n` pairs of `run` (see [`one_pair`]) as a [`DropInTarget`]; a failure
/// ends the comparison and goes to `missing` (the pairs before it kept).
fn paired_bw(
    stock: &str,
    tool: &str,
    n: usize,
    mut run: impl FnMut(bool) -> EngineResult<f64>,
    missing: &mut Vec<String>,
) -> DropInTarget {
    let mut row = DropInTarget {
        stock: stock.into(),
        tool: tool.into(),
        message_bytes: BW_BYTES,
        latency: false,
        pairs: Vec::new(),
        ratio: None,
        target_ratio: Some(CM_WRITE_BW_TARGET),
    };
    for k in 0..n {
        match one_pair(k, &mut run) {
            Ok(p) => row.pairs.push(p),
            Err(e) => {
                missing.push(format!(
                    "CM rows, {stock} vs {tool} (after {} pairs): {e}",
                    row.pairs.len()
                ));
                break;
            }
        }
    }
    row.ratio = median(&row.ratios());
    row
}

/// The `ucmatose` row: `n` pairs of a `-c` [`UCMATOSE_CONNECTIONS`] run
/// and a `-c 1` run, order alternating.
fn measure_ucmatose(
    pair: &VethPair,
    exe: &Path,
    n: usize,
    missing: &mut Vec<String>,
) -> CmUcmatose {
    let mut pairs = Vec::new();
    for k in 0..n {
        let many_first = abba_a_first(k);
        let run = |many: bool| run_ucmatose(pair, exe, if many { UCMATOSE_CONNECTIONS } else { 1 });
        match run(many_first).and_then(|a| Ok((a, run(!many_first)?))) {
            Ok((a, b)) => {
                let (many_seconds, one_seconds) = if many_first { (a, b) } else { (b, a) };
                pairs.push(UcmatosePair {
                    many_first,
                    many_seconds,
                    one_seconds,
                });
            }
            Err(e) => {
                missing.push(format!(
                    "CM rows, ucmatose (after {} pairs): {e}",
                    pairs.len()
                ));
                break;
            }
        }
    }
    CmUcmatose::new(
        UCMATOSE_CONNECTIONS,
        UCMATOSE_MESSAGES,
        UCMATOSE_BYTES,
        pairs,
    )
}

/// The whole step; what could not be measured goes to `missing`.
pub fn measure(pair: &VethPair, opts: &Options, missing: &mut Vec<String>) -> CmReport {
    let mut report = CmReport {
        bw_seconds: BW_SECONDS,
        ..CmReport::default()
    };
    let seconds = rate_seconds(opts);
    let rate = cm_setup_rate(pair, seconds, opts.engine_poll);
    let tcp = tcp_setup_rate(pair, seconds);
    match rate {
        Ok((n, secs)) => {
            report.setup_rate = Some(CmSetupRate {
                connections: n,
                seconds: secs,
                per_second: n as f64 / secs,
                kernel_tcp_per_second: match tcp {
                    Ok((k, ks)) => Some(k as f64 / ks),
                    Err(e) => {
                        missing.push(format!("CM rows, kernel TCP setup rate: {e}"));
                        None
                    }
                },
            })
        }
        Err(e) => missing.push(format!("CM rows, setup rate: {e}")),
    }
    let Some(exe) = tool_binary() else {
        let why = "the roce-xdp binary was not found (set ROCE_XDP_BIN)".to_string();
        missing.push(format!("CM rows, write-bw -R: {why}"));
        report.skipped = Some(why);
        return report;
    };
    report.write_bw = Some(paired_bw(
        "roce-xdp write-bw -R",
        "roce-xdp write-bw",
        pairs(opts),
        |cm| run_write_bw(pair, &exe, cm),
        missing,
    ));
    match stock_unavailable("ib_write_bw") {
        Some(why) => missing.push(format!("CM rows, ib_write_bw -R: {why}")),
        None => {
            report.stock_write_bw = Some(paired_bw(
                "ib_write_bw -R",
                "ib_write_bw",
                pairs(opts),
                |cm| run_stock_write_bw(pair, &exe, cm),
                missing,
            ))
        }
    }
    match stock_unavailable("ucmatose") {
        Some(why) => missing.push(format!("CM rows, ucmatose: {why}")),
        None => report.ucmatose = Some(measure_ucmatose(pair, &exe, pairs(opts), missing)),
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The setup rates alone (`... rdma_cm::tests::setup_rates -- --ignored`).
    #[test]
    #[ignore = "needs root"]
    fn setup_rates() {
        let pair = VethPair::create(&engine::testbed::netns::PairConfig {
            mtu: crate::options::LINK_MTU,
            queues: 2,
        })
        .expect("veth pair (root)");
        let d = Duration::from_secs(2);
        let cm = cm_setup_rate(&pair, d, Default::default()).unwrap();
        let tcp = tcp_setup_rate(&pair, d).unwrap();
        println!(
            "CM: {cm:?} ({:.0}/s); TCP: {tcp:?} ({:.0}/s)",
            cm.0 as f64 / cm.1,
            tcp.0 as f64 / tcp.1
        );
        assert!(cm.0 > 0 && tcp.0 > 0);
    }

    /// The step alone, once, on a fresh namespace pair: prints its tables
    /// and JSON (`cargo test --release -p roce-xdp-benches rdma_cm --
    /// --ignored --nocapture`, as root, after building the binary).
    #[test]
    #[ignore = "needs root and a built roce-xdp binary (ROCE_XDP_BIN)"]
    fn the_cm_rows_measured_alone() {
        let pair = VethPair::create(&engine::testbed::netns::PairConfig {
            mtu: crate::options::LINK_MTU,
            queues: 2,
        })
        .expect("veth pair (root)");
        let opts = Options {
            quick: false,
            progress: true,
            engine_poll: Default::default(),
            pairs: None,
            only: None,
        };
        let mut missing = Vec::new();
        let r = measure(&pair, &opts, &mut missing);
        for t in r.tables() {
            println!("{}\n{:?}", t.title, t.header);
            for row in &t.rows {
                println!("{row:?}");
            }
        }
        println!("{}", serde_json::to_string_pretty(&r).unwrap());
        println!("missing: {missing:?}");
        assert!(r.setup_rate.is_some(), "{missing:?}");
    }
}
