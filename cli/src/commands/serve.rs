//! `roce-xdp serve`: attach to an interface's queues (one pinned engine
//! per queue) and answer perftest's connection exchange on a TCP port
//! (`docs/connection-setup.md`), for stock perftest clients (`ib_write_bw
//! SERVER`, ...) and the perftest-named tools alike, many in a row or at
//! once: each client gets its own QPs on a queue (round robin) and its
//! own region with only the rights its test needs, all destroyed when its
//! session ends, however it ends; `--max-qps-per-client`, `--max-clients`
//! and `--timeout` bound what one client holds.
//! `--metrics ADDR:PORT` serves the counters for Prometheus
//! (`common::metrics`).
//! SIGINT / SIGTERM: stop accepting, end the sessions, drain, print the
//! final counters and detach.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{bail, Context as _};
use clap::Args;
use engine::oob::perftest::{
    BwReport, Key, DONE, KEY_LEN, REPORT_FIELDS, REPORT_FIELD_LEN, VERSION_LEN,
};
use engine::oob::Gid;
use engine::rc::{Access, WorkCompletion};
use engine::verbs::{Device, MemoryRegion, QueuePair};

use crate::common::args::{reword, EngineArgs, VALID_PMTUS};
use crate::common::datapath::{Datapath, DatapathOpts};
use crate::common::lists::{parse_list, CpuList};
use crate::common::metrics;
use crate::common::perftest::conn::{listen, PerfConn};
use crate::common::perftest::kind::Kind;
use crate::common::perftest::rtc;
use crate::common::perftest::session::{landing_size, Cq, Local, Peer, Side, RESPONDER_DEPTH};
use crate::common::perftest::sizes::parse_size;
use crate::common::stats_document;
use crate::common::verbs_peer;
use crate::errors::UserError;
use engine::stats::queue_counters;

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
    /// Bytes of each client's region (K, M suffixes): the largest
    /// message a client may use.
    #[arg(long = "region", value_parser = parse_size, default_value = "8M")]
    pub region: u64,
    /// Most QPs one client may create (a client asking for more is
    /// refused).
    #[arg(long = "max-qps-per-client", default_value_t = 64)]
    pub max_qps_per_client: u32,
    /// Most clients served at once (more are refused until one ends).
    #[arg(long = "max-clients", default_value_t = 64)]
    pub max_clients: u32,
    /// Seconds a client may stall (mid-exchange, or no packet during its
    /// test) before its session ends.
    #[arg(long = "timeout", default_value_t = 30.0)]
    pub timeout: f64,
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
    /// Serve the counters for Prometheus on http://ADDR:PORT/metrics
    /// (e.g. 127.0.0.1:9464): the snapshot `roce-xdp stats --json` shows.
    #[arg(long = "metrics", value_name = "ADDR:PORT", value_parser = metrics::parse_addr)]
    pub metrics: Option<SocketAddr>,
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

/// How long the dispatcher of an idle queue and the accepting thread sleep
/// at most: completions wake the dispatcher, a client or a stop signal the
/// accepting thread, and the stop wakes both (an idle `serve` must cost
/// nothing; 20 ms and 100 ms polls here were 60 wake-ups a second). The
/// bound only covers a wake-up that went missing.
const IDLE_WAIT: Duration = Duration::from_secs(1);

/// How long a client that finds the server at `--max-clients` waits for a
/// session that is ending (its client gone, its QPs and region being
/// released) before it is refused. The accepting thread wakes at once
/// when a session ends (polling every 20 ms hid that race).
const SESSION_END_GRACE: Duration = Duration::from_millis(200);

/// How long the dispatcher keeps polling (yielding) after a completion
/// before it parks: a stream's next completion is usually that close.
const DISPATCH_SPIN: Duration = Duration::from_micros(50);

/// Moves each queue's completions to the session owning the QP. Idle (no
/// completion for [`DISPATCH_SPIN`]), it parks until the engine thread
/// pushes one or the server stops (an idle `serve` costs a wake-up per [`IDLE_WAIT`]). While a latency session
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
                dev.wait_cq(q, IDLE_WAIT);
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

struct Shared {
    dev: Arc<Device>,
    routes: Vec<Routes>,
    half: u64,
    mtu: u32,
    max_qps: usize,
    timeout: Duration,
    /// Regions registered for sessions and not yet deregistered.
    regions: AtomicUsize,
    stop: Arc<AtomicBool>,
    /// `--json`: log lines go to stderr.
    json: bool,
}

/// The test a client runs: named by a roce-xdp client's keys, inferred for
/// stock perftest (which does not say): a responder depth above 1 is a
/// READ or atomic test, anything else WRITE or SEND.
fn client_test(k: &Key) -> (Option<Kind>, Access) {
    match Kind::from_tag(k.srqn) {
        Some(kind) => (Some(kind), kind.access()),
        None if k.out_reads > 1 => (
            None,
            Access::LOCAL_WRITE | Access::REMOTE_READ | Access::REMOTE_ATOMIC,
        ),
        None => (None, Access::LOCAL_WRITE | Access::REMOTE_WRITE),
    }
}

/// A session's resources; dropped however the session ends: its routes
/// removed, its QPs destroyed, its region deregistered.
struct Resources<'a> {
    sh: &'a Shared,
    q: u32,
    qps: Vec<QueuePair>,
    mr: Option<MemoryRegion>,
    side: Option<Side>,
}

impl Drop for Resources<'_> {
    fn drop(&mut self) {
        let mut qps = std::mem::take(&mut self.qps);
        if let Some(side) = self.side.take() {
            qps.extend(side.qps.iter().cloned());
            self.mr = Some(side.destroy());
        }
        {
            let mut r = self.sh.routes[self.q as usize]
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            for qp in &qps {
                r.remove(&qp.qpn());
            }
        }
        for qp in qps {
            let _ = qp.destroy();
        }
        if let Some(mr) = self.mr.take() {
            if self.sh.dev.deregister_memory(&mr).is_ok() {
                self.sh.regions.fetch_sub(1, Ordering::Relaxed);
            }
        }
    }
}

/// One client's session, a stock perftest client or a roce-xdp tool: the
/// exchange answered message by message (serve does not know the test's
/// order in advance: a new QPN is a QP to create, the first repeated one
/// means the client connected), the datapath served between messages.
fn session(sh: &Shared, q: u32, stream: TcpStream) -> anyhow::Result<String> {
    let json = sh.json;
    let tcp_peer = stream
        .peer_addr()
        .map(|a| canonical(a.ip()))
        .context("the client's address")?;
    let mut conn = PerfConn::accepted(stream, sh.timeout);
    let pre = conn.preamble(sh.mtu)?;
    let (tx, rx) = channel();
    let mut res = Resources {
        sh,
        q,
        qps: Vec::new(),
        mr: None,
        side: None,
    };
    let mut rx = Some(rx);
    let mut mine: Vec<Key> = Vec::new();
    let mut theirs: Vec<Key> = Vec::new();
    let mut kind = None;
    let mut reports = 0;
    let mut access = Access::NONE;
    loop {
        if let Some(side) = res.side.as_mut() {
            // Serve until the client's next message (or its close).
            let k = match kind {
                Some(k) => k,
                None if access.contains(Access::REMOTE_WRITE) => Kind::SendLat,
                None => Kind::ReadBw,
            };
            side.serve_run(k, 1, None, &mut conn)?;
        }
        let Some(head) = conn.peek_head(5)? else {
            break; // closed (latency tests end so)
        };
        if head[4] == b':' {
            let k = conn.recv(KEY_LEN, "QP key")?;
            let k = Key::parse(&k).map_err(|e| anyhow::anyhow!("{e}"))?;
            if canonical(k.ip()) != tcp_peer {
                let why = format!("announced GID {} is not its TCP address {tcp_peer}", k.ip());
                conn.refuse(KEY_LEN, &why);
                bail!("refused: {why}");
            }
            let i = match theirs.iter().position(|t| t.qpn == k.qpn) {
                Some(i) => i,
                None if res.side.is_some() => bail!("a new QP 0x{:06x} after connecting", k.qpn),
                None => {
                    if theirs.len() >= sh.max_qps {
                        let why = format!(
                            "refused: more than {} QPs per client (serve --max-qps-per-client)",
                            sh.max_qps
                        );
                        conn.refuse(KEY_LEN, &why[9..]);
                        bail!("{why}");
                    }
                    if res.mr.is_none() {
                        let (k_kind, rights) = client_test(&k);
                        access = rights;
                        if k_kind == Some(Kind::WriteLat) {
                            let why = "serve cannot answer write-lat (its server writes first, with the client's -s): run `roce-xdp write-lat --iface IF` there instead";
                            conn.refuse(KEY_LEN, why);
                            bail!("refused: {why}");
                        }
                        kind = k_kind;
                        let half = landing_size(sh.half, pre.cycle_buffer, pre.cache_line) as usize;
                        res.mr = Some(sh.dev.register_memory(q, half, access)?);
                        sh.regions.fetch_add(1, Ordering::Relaxed);
                    }
                    let qp = Side::create_qps(&sh.dev, q, 1, 128)?.remove(0);
                    sh.routes[q as usize]
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .insert(qp.qpn(), tx.clone());
                    let mr = res.mr.as_ref().expect("registered");
                    mine.push(Key {
                        lid: 0,
                        out_reads: u32::from(RESPONDER_DEPTH),
                        qpn: qp.qpn(),
                        psn: qp.psn(),
                        rkey: mr.rkey,
                        vaddr: mr.addr(),
                        gid: Gid::from_ip(sh.dev.ip()),
                        srqn: 0,
                    });
                    res.qps.push(qp);
                    theirs.push(k);
                    conn.send(&mine[theirs.len() - 1].encode())?;
                    continue;
                }
            };
            if res.side.is_none() {
                // The first repeated QP: the client has connected its QPs.
                let mac = verbs_peer::peer_mac(&sh.dev, None, tcp_peer)?;
                let half = landing_size(sh.half, pre.cycle_buffer, pre.cache_line);
                let local = Local {
                    dev: sh.dev.clone(),
                    queue: q,
                    mr: res.mr.take().expect("registered"),
                    half,
                    send_at: 0,
                    qps: std::mem::take(&mut res.qps),
                    psns: mine.iter().map(|k| k.psn).collect(),
                    tag: 0,
                };
                let rx = rx.take().expect("once");
                let side = local.connect(
                    Peer {
                        keys: theirs.clone(),
                        ip: tcp_peer,
                        mac,
                    },
                    Cq::Routed(rx),
                    pre.mtu,
                    sh.stop.clone(),
                    sh.timeout,
                )?;
                let recvs = match kind {
                    None if access.contains(Access::REMOTE_WRITE) => 64,
                    Some(Kind::SendBw) => 128,
                    Some(Kind::SendLat) => 4,
                    _ => 0,
                };
                res.side = Some(side);
                let side = res.side.as_mut().expect("just set");
                side.post_recvs(recvs)?;
                let qpns: Vec<String> = mine.iter().map(|k| format!("0x{:06x}", k.qpn)).collect();
                say!(
                    json,
                    "client {}: {}, {} QP(s) {} on queue {q}, MTU {}, region {:?}",
                    conn.peer(),
                    kind.map(|k| k.name()).unwrap_or("perftest"),
                    mine.len(),
                    qpns.join(","),
                    pre.mtu,
                    access
                );
            }
            conn.send(&mine[i].encode())?;
        } else if head.starts_with(b"done") {
            conn.recv(DONE.len(), "done")?;
            break;
        } else {
            // The results, field by field; the client's are logged.
            let mut fields = Vec::new();
            for _ in 0..REPORT_FIELDS {
                fields.push(conn.recv(REPORT_FIELD_LEN, "results")?);
                conn.send(&[0u8; REPORT_FIELD_LEN])?;
            }
            let f: Vec<&[u8]> = fields.iter().map(|f| &f[..]).collect();
            if let Ok(r) = BwReport::parse(&f) {
                tracing::info!(
                    peer = conn.peer(),
                    size = r.size,
                    iters = r.iters,
                    mbs = r.bw_avg_mbs,
                    "results"
                );
            }
            reports += 1;
        }
    }
    drop(res);
    Ok(format!(
        "done ({} QP(s){})",
        mine.len(),
        if reports > 0 {
            ", results received"
        } else {
            ""
        }
    ))
}

/// What the server holds for its sessions: QPs (the engine's QP numbers
/// in use) and regions.
fn in_use(sh: &Shared) -> String {
    format!(
        "{} QPs, {} regions",
        sh.dev.live_qps(),
        sh.regions.load(Ordering::Relaxed)
    )
}

/// An IPv4-mapped IPv6 address as IPv4.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(a) => a.to_ipv4_mapped().map(IpAddr::V4).unwrap_or(ip),
        v4 => v4,
    }
}

/// Refuses a client beyond `--max-clients`, in its version's slot.
fn refuse_client(stream: TcpStream, why: &str) {
    let mut conn = PerfConn::accepted(stream, Duration::from_secs(2));
    if conn.recv(VERSION_LEN, "version").is_ok() {
        conn.refuse(VERSION_LEN, why);
    }
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
    if !(args.timeout > 0.0 && args.timeout.is_finite()) {
        return Err(
            UserError::Usage("--timeout must be a positive number of seconds".into()).into(),
        );
    }
    let max_qps = engine::endpoint::MAX_QPS_PER_ENGINE;
    if args.max_qps_per_client == 0 || args.max_qps_per_client > max_qps {
        return Err(UserError::Usage(format!(
            "--max-qps-per-client {}: between 1 and {max_qps} (an engine holds at most {max_qps} QPs)",
            args.max_qps_per_client
        ))
        .into());
    }
    if args.region == 0 || args.region > (1 << 30) {
        return Err(UserError::Usage("--region must be between 1 byte and 1 GiB".into()).into());
    }
    let stop = Arc::new(AtomicBool::new(false));
    // The accepting thread sleeps until a client comes or a signal writes
    // a byte to this pipe (it sets `stop` first).
    let (signalled, signal_pipe) = UnixStream::pair().context("creating the signal pipe")?;
    signalled.set_nonblocking(true)?;
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        // A second signal while draining ends the process at once.
        signal_hook::flag::register_conditional_shutdown(sig, 130, stop.clone())
            .context("installing the signal handler")?;
        signal_hook::flag::register(sig, stop.clone()).context("installing the signal handler")?;
        signal_hook::low_level::pipe::register(sig, signal_pipe.try_clone()?)
            .context("installing the signal handler")?;
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
    // `--metrics`: the stats channel's snapshot, over HTTP.
    let metrics = match args
        .metrics
        .map(|a| metrics::start(a, dp.snapshot_source()))
        .transpose()
    {
        Ok(m) => m,
        Err(e) => {
            let _ = dp.close();
            return Err(e);
        }
    };
    if let Some(m) = &metrics {
        say!(args.json, "metrics: {}", metrics::url(m));
    }
    let result = serve_loop(&args, &dp, &listener, &signalled, &stop);
    // It holds the device, which closing takes.
    drop(metrics);
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
    signalled: &UnixStream,
    stop: &Arc<AtomicBool>,
) -> anyhow::Result<()> {
    let json = args.json;
    let n = dp.dev.queues();
    let routes: Vec<Routes> = (0..n)
        .map(|_| Arc::new(Mutex::new(HashMap::new())))
        .collect();
    let sh = Arc::new(Shared {
        dev: dp.dev.clone(),
        routes: routes.clone(),
        half: args.region,
        mtu: args.mtu,
        max_qps: args.max_qps_per_client as usize,
        regions: AtomicUsize::new(0),
        timeout: Duration::from_secs_f64(args.timeout),
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
        dp.dev.xdp_mode(),
        if (0..n).all(|q| dp.dev.is_zero_copy(q)) {
            "zero-copy"
        } else {
            "copy"
        },
        n - 1,
        args.port,
        args.mtu
    );
    say!(
        json,
        " each client: its own region of {} bytes with the rights its test needs, at most {} QPs; at most {} clients at once",
        args.region,
        args.max_qps_per_client,
        args.max_clients
    );
    say!(json, "GID {}; stop with Ctrl-C", dp.dev.ip());
    let mut sessions: Vec<JoinHandle<()>> = Vec::new();
    let mut next_queue = 0u32;
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((stream, addr)) => {
                let _ = stream.set_nonblocking(false);
                sessions.retain(|h| !h.is_finished());
                // At the limit, a session whose client has already gone may
                // still be releasing its QPs and region: a client that
                // connects right after another one ended is not refused for
                // it (back-to-back clients, each alone under --max-clients).
                let grace = std::time::Instant::now() + SESSION_END_GRACE;
                while sessions.len() >= args.max_clients as usize
                    && std::time::Instant::now() < grace
                {
                    std::thread::sleep(Duration::from_millis(1));
                    sessions.retain(|h| !h.is_finished());
                }
                if sessions.len() >= args.max_clients as usize {
                    let why = format!(
                        "{} clients are connected, the most this server takes (serve --max-clients): try again later",
                        sessions.len()
                    );
                    say!(json, "client {addr}: refused: {why}");
                    std::thread::spawn(move || refuse_client(stream, &why));
                    continue;
                }
                let q = next_queue % n;
                next_queue += 1;
                let sh = sh.clone();
                sessions.push(std::thread::spawn(move || {
                    let how = match session(&sh, q, stream) {
                        Ok(how) => how,
                        Err(e) => format!("ended: {e:#}"),
                    };
                    say!(json, "client {addr}: {how}; in use: {}", in_use(&sh));
                }));
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                // Until a client connects or a signal comes (no polling).
                engine::io::wait_readable_any(&[listener.as_fd(), signalled.as_fd()], IDLE_WAIT)
                    .context("waiting for a client")?;
            }
            Err(e) => return Err(e).context("accepting a client"),
        }
    }
    say!(json, "stopping: ending sessions and draining");
    sessions.retain(|h| !h.is_finished());
    if sessions.is_empty() {
        say!(json, "in use: {}", in_use(&sh));
    }
    stop.store(true, Ordering::Relaxed);
    for h in sessions {
        let _ = h.join();
    }
    for h in dispatchers {
        h.thread().unpark(); // it may sleep in `wait_cq`
        let _ = h.join();
    }
    drop(sh);
    Ok(())
}
