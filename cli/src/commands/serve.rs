//! `roce-xdp serve`: attach to an interface's queues (one pinned engine
//! per queue), register one memory region per queue, and answer the
//! connection exchange on a TCP port: each client gets its own QPs on a
//! queue (round robin) and the region's address and R_Key, and may then
//! WRITE, READ, SEND and run atomics against it — in particular run the
//! perftest-style tools (`roce-xdp write-bw SERVER`, ...) against it.
//! SIGINT / SIGTERM: stop accepting, end the sessions, drain, print the
//! final counters and detach.

use std::collections::HashMap;
use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{bail, Context as _};
use clap::Args;
use engine::oob::perftest::Control;
use engine::rc::{Access, WorkCompletion};
use engine::verbs::{Device, MemoryRegion};

use crate::common::args::{reword, EngineArgs, VALID_PMTUS};
use crate::common::datapath::{Datapath, DatapathOpts};
use crate::common::lists::{parse_list, CpuList};
use crate::common::perftest::conn::{listen, LineConn};
use crate::common::perftest::kind::Kind;
use crate::common::perftest::rtc;
use crate::common::perftest::session::{initial_psn, Cq, Local, Side};
use crate::common::perftest::sizes::parse_size;
use crate::common::snapshot::queue_counters;
use crate::common::stats_document;
use crate::errors::UserError;

/// Options of `roce-xdp serve`.
#[derive(Debug, Args)]
#[command(mut_args(reword(&[
    ("busy_poll", "Spin on the rings instead of sleeping when idle (one core per queue)"),
])))]
pub struct ServeArgs {
    /// Interface to attach to.
    #[arg(short = 'd', long = "iface", value_name = "IF")]
    pub iface: String,
    /// NIC queues to serve, starting at 0: `0-3`, `0,1` or `0`.
    #[arg(long = "queues", default_value = "0", value_parser = parse_list)]
    pub queues: CpuList,
    /// Cores to pin the engines to (queue i -> i-th core), e.g. `2-5`.
    #[arg(long = "cores", value_parser = parse_list)]
    pub cores: Option<CpuList>,
    /// Largest path MTU offered to clients.
    #[arg(short = 'm', long = "mtu", default_value_t = 1024)]
    pub mtu: u32,
    /// TCP port of the connection exchange.
    #[arg(short = 'p', long = "port", default_value_t = 18515)]
    pub port: u16,
    /// Bytes of each queue's region clients may target (K, M suffixes).
    #[arg(long = "region", value_parser = parse_size, default_value = "8M")]
    pub region: u64,
    /// Attach mode, zero-copy, --force, --steer, --pcap, --busy-poll.
    #[command(flatten)]
    pub engine: EngineArgs,
    /// Serve IPv6 clients (the GID is the interface's global IPv6
    /// address) instead of IPv4.
    #[arg(short = '6', long = "ipv6")]
    pub ipv6: bool,
    /// Print the final counters as JSON.
    #[arg(long = "json")]
    pub json: bool,
}

/// Prints a log line of the server: to stdout, or to stderr with `--json`
/// (stdout then holds only the final JSON document).
macro_rules! say {
    ($json:expr, $($arg:tt)*) => {
        if $json {
            eprintln!($($arg)*);
        } else {
            println!($($arg)*);
        }
    };
}

type Routes = Arc<Mutex<HashMap<u32, Sender<WorkCompletion>>>>;

/// How long the dispatcher of an idle queue sleeps between looks at the
/// stop flag (completions wake it at once).
const DISPATCH_IDLE: Duration = Duration::from_millis(100);

/// How long the dispatcher keeps polling (yielding) after a completion
/// before it parks: a stream's next completion is usually that close.
const DISPATCH_SPIN: Duration = Duration::from_micros(50);

/// Moves each queue's completions to the session owning the QP. Idle (no
/// completion for [`DISPATCH_SPIN`]), it parks until the engine thread
/// pushes one (an idle `serve` costs a wake-up per [`DISPATCH_IDLE`]). While a latency session
/// drives the queue itself (run-to-completion, `perftest/rtc.rs`), that
/// session routes the completions it takes, through the same routes, and
/// the dispatcher stands aside.
fn dispatcher(dev: Arc<Device>, q: u32, routes: Routes, stop: Arc<AtomicBool>) {
    let route = {
        let routes = routes.clone();
        move |wc: &WorkCompletion| route_completion(&routes, wc)
    };
    rtc::set_router(q, Some(Arc::new(route)));
    let mut wcs = [WorkCompletion::default(); 64];
    let mut last = std::time::Instant::now();
    while !stop.load(Ordering::Relaxed) {
        if dev.is_driven(q) {
            std::thread::sleep(Duration::from_millis(1));
            continue;
        }
        let n = dev.poll_cq(q, &mut wcs);
        if n == 0 {
            if last.elapsed() < DISPATCH_SPIN {
                std::thread::yield_now();
            } else {
                dev.wait_cq(q, DISPATCH_IDLE);
            }
            continue;
        }
        last = std::time::Instant::now();
        for wc in &wcs[..n] {
            route_completion(&routes, wc);
        }
    }
    rtc::set_router(q, None);
}

/// Sends a completion to the session owning its QP.
fn route_completion(routes: &Routes, wc: &WorkCompletion) {
    let r = routes.lock().unwrap_or_else(|e| e.into_inner());
    match r.get(&wc.qpn) {
        Some(tx) => {
            let _ = tx.send(*wc);
        }
        None => tracing::debug!(qpn = wc.qpn, "completion for a QP without a session"),
    }
}

/// Removes a session's routes when it ends.
struct RouteGuard<'a> {
    routes: &'a Routes,
    qpns: Vec<u32>,
}

impl Drop for RouteGuard<'_> {
    fn drop(&mut self) {
        let mut r = self.routes.lock().unwrap_or_else(|e| e.into_inner());
        for q in &self.qpns {
            r.remove(q);
        }
    }
}

struct Shared {
    dev: Arc<Device>,
    regions: Vec<MemoryRegion>,
    routes: Vec<Routes>,
    half: u64,
    mtu: u32,
    stop: Arc<AtomicBool>,
    /// `--json`: log lines go to stderr.
    json: bool,
}

/// One client's session: exchange, QPs, then the perftest control loop
/// until BYE, an error, or shutdown.
fn session(sh: &Shared, fallback_queue: u32, mut conn: LineConn) -> anyhow::Result<()> {
    let json = sh.json;
    let timeout = Duration::from_secs(30);
    let remote = conn.read_hello(Duration::from_secs(10))?;
    // The client's frames arrive on the RX queue matching the one it sends
    // from when the path is symmetric (veth, one flow per queue pair):
    // use that queue when it exists; otherwise round robin.
    let n = sh.regions.len() as u32;
    let q = if remote.queue < n {
        remote.queue
    } else {
        fallback_queue
    };
    let kind = Kind::from_name(&remote.test);
    if remote.len > sh.half {
        let msg = format!(
            "the server's region holds {} bytes, the client wants {}: use a smaller -s (or serve --region)",
            sh.half, remote.len
        );
        conn.send_control(&Control::Error(msg.clone()))?;
        bail!("{msg}");
    }
    let nqps = remote.qps.len();
    let qps = Side::create_qps(&sh.dev, q, nqps, remote.tx_depth.max(64))?;
    let (tx, rx) = channel();
    {
        let mut r = sh.routes[q as usize]
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        for qp in &qps {
            r.insert(qp.qpn(), tx.clone());
        }
    }
    // However the session ends, its completions stop being routed. (The
    // verbs API has no QP destruction yet: the QPs stay, idle.)
    let _routes = RouteGuard {
        routes: &sh.routes[q as usize],
        qpns: qps.iter().map(|qp| qp.qpn()).collect(),
    };
    let qpns: Vec<String> = qps.iter().map(|qp| format!("0x{:06x}", qp.qpn())).collect();
    let local = Local {
        dev: sh.dev.clone(),
        queue: q,
        mr: sh.regions[q as usize].clone(),
        half: sh.half,
        qps,
        psns: (0..nqps as u32).map(|i| initial_psn(i + 7)).collect(),
    };
    let mtu = sh.mtu.min(remote.mtu);
    let hello = local.hello("serve", mtu, remote.tx_depth);
    let cq = Cq::Routed(rx);
    let mut side = local.connect(remote.clone(), cq, mtu, sh.stop.clone(), timeout)?;
    conn.send_hello(&hello)?;
    say!(
        json,
        "client {}: {}, {nqps} QP(s) {} on queue {q}, MTU {mtu}",
        conn.peer(),
        remote.test,
        qpns.join(",")
    );
    let mut sizes = 0u64;
    loop {
        let line = loop {
            if sh.stop.load(Ordering::Relaxed) {
                let _ = conn.send_control(&Control::Error("the server is shutting down".into()));
                return Err(crate::errors::Interrupted.into());
            }
            match conn.poll_line()? {
                Some(l) => break l,
                None => std::thread::sleep(Duration::from_millis(5)),
            }
        };
        match Control::decode(&line)? {
            Control::Begin { size, .. } => {
                let Some(kind) = kind else {
                    conn.send_control(&Control::Error(format!("unknown test {:?}", remote.test)))?;
                    bail!("unknown test {:?}", remote.test);
                };
                let row = side.serve_size(kind, size, remote.tx_depth.max(1), &mut conn)?;
                tracing::info!(peer = conn.peer(), size, row = %row, "size done");
                sizes += 1;
            }
            Control::Bye => break,
            other => bail!("unexpected {other:?} from the client"),
        }
    }
    say!(json, "client {}: done ({sizes} size(s))", conn.peer());
    Ok(())
}

/// Runs `roce-xdp serve`.
pub fn run(args: ServeArgs) -> anyhow::Result<()> {
    if !VALID_PMTUS.contains(&args.mtu) {
        return Err(UserError::Usage(format!(
            "-m {}: the path MTU must be one of 256, 512, 1024, 2048, 4096",
            args.mtu
        ))
        .into());
    }
    let n = args.queues.0.len() as u32;
    if args.queues.0.iter().enumerate().any(|(i, &q)| q != i) {
        return Err(UserError::Usage(format!(
            "--queues must start at 0 and have no gaps (0-{}); this version serves queues 0..N",
            n.saturating_sub(1)
        ))
        .into());
    }
    if args.region == 0 || args.region > (1 << 30) {
        return Err(UserError::Usage("--region must be between 1 byte and 1 GiB".into()).into());
    }
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        // A second signal while draining ends the process at once.
        signal_hook::flag::register_conditional_shutdown(sig, 130, stop.clone())
            .context("installing the signal handler")?;
        signal_hook::flag::register(sig, stop.clone()).context("installing the signal handler")?;
    }
    let listener = listen(args.port)?;
    listener.set_nonblocking(true)?;
    let dp = Datapath::open(
        &DatapathOpts {
            iface: args.iface.clone(),
            queues: n,
            cores: args.cores.clone().map(|c| c.0).unwrap_or_default(),
            engine: args.engine.clone(),
            pmtu: args.mtu,
            ipv6: args.ipv6,
            local_ip: None,
            queue_option: engine::nic::QueueOption::Range,
        },
        &format!("serve on {}", args.iface),
    )?;
    let result = serve_loop(&args, &dp, &listener, &stop);
    // Drain: let the engines send the last ACKs / READ responses.
    std::thread::sleep(Duration::from_millis(200));
    let closed = dp.close()?;
    let (snap, totals, frames) = (closed.snapshot, closed.totals, closed.pcap);
    result?;
    let doc = serde_json::from_str::<stats_document::Snapshot>(&snap.to_json())?;
    if args.json {
        let mut v = stats_document::json_document(&doc, None);
        v["final_totals"] = serde_json::Value::Object(
            queue_counters(&totals)
                .into_iter()
                .map(|(k, n)| (k, n.into()))
                .collect(),
        );
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        println!("final counters:");
        print!("{}", stats_document::render(&doc, None));
        println!("detached from {}", args.iface);
    }
    if let (Some((n, dropped)), Some(p)) = (frames, &args.engine.pcap) {
        eprintln!("captured {n} frames to {} ({dropped} dropped)", p.display());
    }
    Ok(())
}

fn serve_loop(
    args: &ServeArgs,
    dp: &Datapath,
    listener: &TcpListener,
    stop: &Arc<AtomicBool>,
) -> anyhow::Result<()> {
    let json = args.json;
    let n = dp.dev.queues();
    let regions = (0..n)
        .map(|q| {
            dp.dev
                .register_memory(q, (2 * args.region) as usize, Access::ALL)
        })
        .collect::<Result<Vec<_>, _>>()?;
    let routes: Vec<Routes> = (0..n)
        .map(|_| Arc::new(Mutex::new(HashMap::new())))
        .collect();
    let sh = Arc::new(Shared {
        dev: dp.dev.clone(),
        regions,
        routes: routes.clone(),
        half: args.region,
        mtu: args.mtu,
        stop: stop.clone(),
        json: args.json,
    });
    let dispatchers: Vec<JoinHandle<()>> = (0..n)
        .map(|q| {
            let (dev, r, s) = (dp.dev.clone(), routes[q as usize].clone(), stop.clone());
            std::thread::spawn(move || dispatcher(dev, q, r, s))
        })
        .collect();
    say!(
        json,
        "roce-xdp serve: {} (XDP {}, {}), queues 0-{}, TCP port {}, path MTU up to {}",
        args.iface,
        dp.dev.attached_mode(),
        if (0..n).all(|q| dp.dev.is_zero_copy(q)) {
            "zero-copy"
        } else {
            "copy"
        },
        n - 1,
        args.port,
        args.mtu
    );
    for (q, r) in sh.regions.iter().enumerate() {
        say!(
            json,
            " queue {q}: region VAddr 0x{:016x} len {} RKey 0x{:08x} (WRITE, READ, SEND, atomics)",
            r.addr(),
            args.region,
            r.rkey
        );
    }
    say!(json, "GID {}; stop with Ctrl-C", dp.dev.ip());
    let mut sessions: Vec<JoinHandle<()>> = Vec::new();
    let mut next_queue = 0u32;
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((stream, _)) => {
                let _ = stream.set_nonblocking(false);
                let q = next_queue % n;
                next_queue += 1;
                let sh = sh.clone();
                sessions.push(std::thread::spawn(move || {
                    let conn = LineConn::new(stream);
                    let peer = conn.peer().to_string();
                    if let Err(e) = session(&sh, q, conn) {
                        say!(json, "client {peer}: ended: {e:#}");
                    }
                }));
                sessions.retain(|h| !h.is_finished());
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(20))
            }
            Err(e) => return Err(e).context("accepting a client"),
        }
    }
    say!(json, "stopping: ending sessions and draining");
    stop.store(true, Ordering::Relaxed);
    for h in sessions {
        let _ = h.join();
    }
    for h in dispatchers {
        let _ = h.join();
    }
    drop(sh);
    Ok(())
}
