//! The connection manager's rows ([`CmReport`]):
//!
//! - setup rate: engine against engine, in this process, one device per
//!   namespace (one queue each, the engine polling as the run's other
//!   engine rows do), each with its
//!   [`CmService`](engine::verbs::cm::CmService) (QP 1): the client
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
use crate::report::{CmReport, CmSetupRate, DropInPair, DropInTarget, CM_WRITE_BW_TARGET};
use crate::stats::{abba_a_first, median};
use crate::threads::{join, spawn_in};
use crate::tool_run::{in_netns, server_client, tool_binary};

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
    let mut row = DropInTarget {
        stock: "roce-xdp write-bw -R".into(),
        tool: "roce-xdp write-bw".into(),
        message_bytes: BW_BYTES,
        latency: false,
        pairs: Vec::new(),
        ratio: None,
        target_ratio: Some(CM_WRITE_BW_TARGET),
    };
    for k in 0..pairs(opts) {
        let cm_first = !abba_a_first(k);
        let r = run_write_bw(pair, &exe, cm_first)
            .and_then(|x| Ok((x, run_write_bw(pair, &exe, !cm_first)?)));
        match r {
            Ok((x, y)) => {
                let (with_cm, tcp) = if cm_first { (x, y) } else { (y, x) };
                row.pairs.push(DropInPair {
                    stock_first: cm_first,
                    stock: with_cm,
                    tool: tcp,
                });
            }
            Err(e) => {
                missing.push(format!(
                    "CM rows, write-bw -R vs write-bw (after {} pairs): {e}",
                    row.pairs.len()
                ));
                break;
            }
        }
    }
    let ratios: Vec<f64> = row.pairs.iter().map(DropInPair::ratio).collect();
    row.ratio = median(&ratios);
    report.write_bw = Some(row);
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
