//! The perftest-style tools: `write-bw`, `read-bw`, `send-bw`,
//! `write-lat`, `read-lat`, `send-lat`. Without an address the tool is the
//! server (waits for one client on `-p PORT`); with the server's address
//! it is the client, which drives the sizes and measures. Both print
//! perftest's table (the server prints the client's results) or `--json`.

mod options;

use std::net::{IpAddr, ToSocketAddrs};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context as _};
use engine::oob::perftest::{Control, Hello};
use engine::rc::Access;

use crate::common::datapath::{Datapath, DatapathOpts};
use crate::common::perftest::conn::{listen, LineConn};
use crate::common::perftest::kind::Kind;
use crate::common::perftest::progress::{Goal, Progress};
use crate::common::perftest::report::{self, BwRow, LatRow, Rows, TableWriter, TestInfo};
use crate::common::perftest::rtc;
use crate::common::perftest::session::{initial_psn, Cq, Local, Side};
use crate::common::preflight;
use crate::errors::UserError;
pub use options::PerftestArgs;

/// A flag raised by SIGINT / SIGTERM, so a run stops, detaches and
/// finishes its pcap file; a second signal ends the process at once.
fn stop_flag() -> anyhow::Result<Arc<AtomicBool>> {
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register_conditional_shutdown(sig, 130, stop.clone())
            .context("installing the signal handler")?;
        signal_hook::flag::register(sig, stop.clone()).context("installing the signal handler")?;
    }
    Ok(stop)
}

/// Largest message the tools accept (the `-a` maximum).
const MAX_SIZE: u64 = crate::common::perftest::sizes::ALL_SIZES_MAX;

/// Runs one of the tools.
pub fn run(kind: Kind, args: PerftestArgs) -> anyhow::Result<()> {
    args.validate().map_err(UserError::Usage)?;
    rtc::configure(kind, args.threaded, args.queue_count()).map_err(UserError::Usage)?;
    if args.sizes().iter().any(|&s| s > MAX_SIZE) {
        return Err(
            UserError::Usage(format!("-s: messages are at most {MAX_SIZE} bytes (8 MiB)")).into(),
        );
    }
    match args.server.clone() {
        Some(addr) => client(kind, &args, &addr),
        None => server(kind, &args),
    }
}

fn datapath_opts(
    args: &PerftestArgs,
    iface: String,
    ipv6: bool,
    local_ip: Option<IpAddr>,
) -> DatapathOpts {
    DatapathOpts {
        iface,
        queues: args.queue_count(),
        cores: Vec::new(),
        engine: args.engine.clone(),
        pmtu: args.mtu,
        ipv6,
        local_ip,
        queue_option: engine::nic::QueueOption::Range,
    }
}

fn test_info(
    kind: Kind,
    args: &PerftestArgs,
    dp: &Datapath,
    role: &str,
    local: &Hello,
    remote: &Hello,
    mtu: u32,
) -> TestInfo {
    let describe = |h: &Hello| {
        let (qpn, psn) = h.qps[0];
        format!(
            "QPN 0x{qpn:06x} PSN 0x{psn:06x} RKey 0x{:08x} VAddr 0x{:016x} GID {}",
            h.rkey, h.va, h.ip
        )
    };
    TestInfo {
        tool: kind.name().into(),
        role: role.into(),
        verb: kind.verb().into(),
        kind: if kind.is_latency() { "lat" } else { "bw" }.into(),
        qps: local.qps.len() as u32,
        mtu,
        tx_depth: if kind.is_latency() { 1 } else { args.tx_depth },
        iface: dp.iface.clone(),
        local: describe(local),
        remote: describe(remote),
        xdp_mode: dp.dev.attached_mode().to_string(),
        zero_copy: dp.dev.is_zero_copy(args.queue),
    }
}

/// Prints rows as they come (table) or collects them (JSON).
struct Output {
    json: bool,
    table: Option<TableWriter>,
    bw: Vec<BwRow>,
    lat: Vec<LatRow>,
}

impl Output {
    fn new(info: &TestInfo, json: bool) -> Output {
        Output {
            json,
            table: (!json).then(|| TableWriter::start(info)),
            bw: Vec::new(),
            lat: Vec::new(),
        }
    }

    fn bw(&mut self, r: BwRow) {
        if let Some(t) = &self.table {
            t.bw(&r);
        }
        self.bw.push(r);
    }

    fn lat(&mut self, r: LatRow) {
        if let Some(t) = &self.table {
            t.lat(&r);
        }
        self.lat.push(r);
    }

    fn finish(self, info: &TestInfo, dp: &Datapath) {
        if let Some(t) = self.table {
            t.finish();
        }
        if self.json {
            let rows = if info.kind == "bw" {
                Rows::Bandwidth(self.bw)
            } else {
                Rows::Latency(self.lat)
            };
            println!("{}", report::to_json(info, &rows, &queue_summaries(dp)));
        }
    }
}

/// Per-queue counters of this side's engine for the JSON document (a fresh
/// snapshot: the engines publish every few milliseconds).
fn queue_summaries(dp: &Datapath) -> Vec<report::QueueSummary> {
    std::thread::sleep(Duration::from_millis(10));
    (0..dp.dev.queues())
        .filter_map(|q| {
            let s = dp.dev.stats(q).ok()?;
            Some(report::QueueSummary {
                queue: q,
                rx_packets: s.socket.rx_packets,
                rx_handoff: s.rx_handoff,
                rx_handoff_dropped: s.rx_handoff_dropped,
                qp_migrations: s.qp_migrations,
                dropped_unknown_qp: s.transport.dropped_unknown_qp,
                zero_copy: dp.dev.is_zero_copy(q),
            })
        })
        .collect()
}

fn resolve(addr: &str, port: u16) -> anyhow::Result<IpAddr> {
    if let Ok(ip) = addr.trim_matches(['[', ']']).parse::<IpAddr>() {
        return Ok(ip);
    }
    (addr, port)
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .map(|a| a.ip())
        .ok_or_else(|| {
            UserError::PeerUnreachable {
                addr: addr.to_string(),
                detail: "cannot resolve the name".into(),
            }
            .into()
        })
}

fn client(kind: Kind, args: &PerftestArgs, addr: &str) -> anyhow::Result<()> {
    let timeout = Duration::from_secs_f64(args.timeout);
    let peer_ip = resolve(addr, args.port)?;
    // The TCP exchange first: an unreachable or refusing server fails
    // fast, before anything is attached.
    let mut conn = LineConn::connect(
        &peer_ip.to_string(),
        args.port,
        timeout.min(Duration::from_secs(10)),
        kind.name(),
    )?;
    let (iface, src) = match &args.iface {
        Some(i) => (i.clone(), None),
        None => preflight::route_to(peer_ip)?,
    };
    let dp = Datapath::open(
        &datapath_opts(args, iface, peer_ip.is_ipv6(), src),
        &format!("{} on the client", kind.name()),
    )?;
    let result = client_session(kind, args, &dp, &mut conn, timeout);
    if let Err(e) = &result {
        // Tell the server why, so it ends with a reason instead of a
        // closed connection.
        let _ = conn.send_control(&Control::Error(format!("{e:#}")));
    }
    let closed = dp.close();
    result?;
    report_capture(closed?.pcap, args);
    Ok(())
}

fn client_session(
    kind: Kind,
    args: &PerftestArgs,
    dp: &Datapath,
    conn: &mut LineConn,
    timeout: Duration,
) -> anyhow::Result<()> {
    let q = args.queue;
    let sizes = if kind.is_atomic() {
        vec![8]
    } else {
        args.sizes()
    };
    let max = *sizes.iter().max().expect("at least one size");
    let mr = dp.dev.register_memory(q, (2 * max) as usize, Access::ALL)?;
    let nqps = if kind.is_latency() {
        1
    } else {
        args.qps as usize
    };
    let local = Local {
        dev: dp.dev.clone(),
        queue: q,
        mr,
        half: max,
        qps: Side::create_qps(&dp.dev, q, nqps, args.tx_depth)?,
        psns: (0..nqps as u32).map(initial_psn).collect(),
    };
    let hello = local.hello(kind.name(), args.mtu, args.tx_depth);
    conn.send_hello(&hello)?;
    let remote = conn.read_hello(timeout)?;
    if remote.test != kind.name() && remote.test != "serve" {
        bail!(
            "the server runs {}, not {}: start the same tool on both sides",
            remote.test,
            kind.name()
        );
    }
    if remote.qps.len() != nqps {
        bail!(
            "the server answered with {} QPs for our {nqps}",
            remote.qps.len()
        );
    }
    if remote.len < max {
        return Err(UserError::Usage(format!(
            "the server's region holds {} bytes, less than the {max}-byte messages asked for: use a smaller -s (or a larger --region on serve)",
            remote.len
        ))
        .into());
    }
    let mtu = args.mtu.min(remote.mtu);
    let cq = Cq::Direct(dp.dev.clone(), q);
    let mut side = local.connect(remote.clone(), cq, mtu, stop_flag()?, timeout)?;
    let info = test_info(kind, args, dp, "client", &hello, &remote, mtu);
    let mut out = Output::new(&info, args.json);
    let duration = args.run_duration();
    let iters = args.iterations(kind.is_latency());
    for &size in &sizes {
        let duration_ms = duration.map(|d| d.as_millis() as u64).unwrap_or(0);
        conn.send_control(&Control::Begin {
            size,
            iters,
            duration_ms,
        })?;
        match conn.read_control(timeout)? {
            Control::Ready => {}
            other => bail!("expected READY from the server, got {other:?}"),
        }
        let goal = match duration {
            Some(d) => Goal::Duration(d),
            None => Goal::Iterations(iters),
        };
        let mut progress = Progress::new(goal, format!("{size} B"), !args.json);
        let row_json = if kind.is_latency() {
            let r = side.run_lat(kind, size, iters, duration, &mut progress)?;
            out.lat(r);
            serde_json::to_string(&r)?
        } else {
            let r = side.run_bw(kind, size, iters, duration, args.tx_depth, &mut progress)?;
            out.bw(r);
            serde_json::to_string(&r)?
        };
        conn.send_control(&Control::End { row: row_json })?;
        match conn.read_control(timeout)? {
            Control::Ok => {}
            other => bail!("expected OK from the server, got {other:?}"),
        }
    }
    conn.send_control(&Control::Bye)?;
    out.finish(&info, dp);
    Ok(())
}

fn report_capture(frames: Option<(u64, u64)>, args: &PerftestArgs) {
    if let (Some((n, dropped)), Some(p)) = (frames, &args.engine.pcap) {
        eprintln!("captured {n} frames to {} ({dropped} dropped)", p.display());
    }
}

fn server(kind: Kind, args: &PerftestArgs) -> anyhow::Result<()> {
    let timeout = Duration::from_secs_f64(args.timeout);
    let iface = args
        .iface
        .clone()
        .expect("validated: the server has --iface");
    // Check what can be checked before waiting for a client; the engine
    // attaches once the client's hello says which IP family it speaks.
    preflight::check(&preflight::Plan {
        what: format!("{} on the server", kind.name()),
        iface: &iface,
        queues: &(0..args.queue_count()).collect::<Vec<_>>(),
        pmtu: args.mtu,
        ipv6: false,
        force: args.engine.force,
    })?;
    crate::common::steering::check_steer(
        &iface,
        args.queue_count(),
        args.engine.steer,
        args.engine.force,
        engine::nic::QueueOption::Range,
    )?;
    let listener = listen(args.port)?;
    if !args.json {
        println!("************************************");
        println!("* Waiting for client to connect... *");
        println!("************************************");
    }
    let (stream, _) = listener.accept().context("accepting the client")?;
    let mut conn = LineConn::new(stream);
    let remote = conn.read_hello(timeout)?;
    let dp = Datapath::open(
        &datapath_opts(args, iface, remote.ip.is_ipv6(), None),
        &format!("{} on the server", kind.name()),
    )?;
    let result = server_session(kind, args, &dp, &mut conn, timeout, remote);
    let closed = dp.close();
    result?;
    report_capture(closed?.pcap, args);
    Ok(())
}

fn server_session(
    kind: Kind,
    args: &PerftestArgs,
    dp: &Datapath,
    conn: &mut LineConn,
    timeout: Duration,
    remote: Hello,
) -> anyhow::Result<()> {
    let q = args.queue;
    if remote.test != kind.name() {
        let msg = format!(
            "this server runs {}, the client asked for {}",
            kind.name(),
            remote.test
        );
        conn.send_control(&Control::Error(msg.clone()))?;
        bail!("{msg}: start the same tool on both sides");
    }
    if remote.len > MAX_SIZE {
        conn.send_control(&Control::Error(format!(
            "messages are at most {MAX_SIZE} bytes"
        )))?;
        bail!(
            "the client asked for {}-byte messages (at most {MAX_SIZE})",
            remote.len
        );
    }
    let half = remote.len.max(1);
    let mr = dp
        .dev
        .register_memory(q, (2 * half) as usize, Access::ALL)?;
    let nqps = remote.qps.len();
    let local = Local {
        dev: dp.dev.clone(),
        queue: q,
        mr,
        half,
        qps: Side::create_qps(&dp.dev, q, nqps, remote.tx_depth.max(args.tx_depth))?,
        psns: (0..nqps as u32).map(|i| initial_psn(i + 100)).collect(),
    };
    let mtu = args.mtu.min(remote.mtu);
    let hello = local.hello(kind.name(), mtu, args.tx_depth);
    let cq = Cq::Direct(dp.dev.clone(), q);
    let mut side = local.connect(remote.clone(), cq, mtu, stop_flag()?, timeout)?;
    conn.send_hello(&hello)?;
    let info = test_info(kind, args, dp, "server", &hello, &remote, mtu);
    let mut out = Output::new(&info, args.json);
    let depth = remote.tx_depth.max(1);
    loop {
        // Between sizes the client answers at once; allow a long wait only
        // for the first BEGIN (the client may still be attaching).
        match conn.read_control(timeout)? {
            Control::Begin { size, .. } => {
                let row = side.serve_size(kind, size, depth, conn)?;
                if kind.is_latency() {
                    out.lat(serde_json::from_str(&row).context("the client's result row")?);
                } else {
                    out.bw(serde_json::from_str(&row).context("the client's result row")?);
                }
            }
            Control::Bye => break,
            other => bail!("unexpected {other:?} from the client"),
        }
    }
    out.finish(&info, dp);
    Ok(())
}
