//! The perftest-style tools: `write-bw`, `read-bw`, `send-bw`,
//! `write-lat`, `read-lat`, `send-lat`. Without an address the tool is the
//! server (waits for one client on `-p PORT`); with the server's address
//! it is the client, which drives the sizes and measures. Both print
//! perftest's table (the server prints the client's results) or `--json`.

mod options;

use std::net::IpAddr;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use engine::oob::perftest::{schedule, schedule_duplex, BwReport, Key, Role, Step};

use crate::common::datapath::{Datapath, DatapathOpts};
use crate::common::perftest::bandwidth::BandwidthStats;
use crate::common::perftest::cm::{CmSession, CmStream};
use crate::common::perftest::conn::{listen, resolve, PerfConn, Preamble, Stream};
use crate::common::perftest::exchange::{drive, Hooks};
use crate::common::perftest::kind::Kind;
use crate::common::perftest::progress::{Goal, Progress};
use crate::common::perftest::report::{self, BwRow, LatRow, Rows, TableWriter, TestInfo};
use crate::common::perftest::rtc;
use crate::common::perftest::session::{landing_size, Cq, Local, Measured, Peer, Side};
use crate::common::{preflight, verbs_peer};
use crate::errors::UserError;
pub use options::PerftestArgs;

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
    if args.bidirectional && (kind.is_latency() || kind == Kind::SendBw) {
        return Err(UserError::Usage(format!(
            "-b: {} has no bidirectional mode here (write-bw, read-bw and atomic-bw have)",
            kind.name()
        ))
        .into());
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
    local: &[Key],
    remote: &[Key],
    mtu: u32,
) -> TestInfo {
    let describe = |k: &Key| {
        format!(
            "QPN 0x{:06x} PSN 0x{:06x} OUT 0x{:02x} RKey 0x{:08x} VAddr 0x{:016x} GID {}",
            k.qpn,
            k.psn,
            k.out_reads,
            k.rkey,
            k.vaddr,
            k.ip()
        )
    };
    TestInfo {
        tool: kind.name().into(),
        role: role.into(),
        verb: kind.verb().into(),
        kind: if kind.is_latency() { "lat" } else { "bw" }.into(),
        qps: local.len() as u32,
        mtu,
        tx_depth: if kind.is_latency() { 1 } else { args.tx_depth },
        iface: dp.iface.clone(),
        local: describe(&local[0]),
        remote: describe(&remote[0]),
        xdp_mode: dp.dev.xdp_mode(),
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

/// Converts a stock perftest report (MB/s = 2^20 B/s) into a table row.
fn row_from_report(r: &BwReport) -> BwRow {
    let gbps = |mbs: f64| mbs * 1_048_576.0 * 8.0 / 1e9;
    BwRow {
        bytes: r.size,
        iterations: r.iters,
        stats: BandwidthStats {
            bw_peak_gbps: gbps(r.bw_peak_mbs),
            bw_avg_gbps: gbps(r.bw_avg_mbs),
            bw_avg_mbps: r.bw_avg_mbs,
            msg_rate_mpps: r.msg_rate_mpps,
        },
    }
}

/// The report perftest sends for a row.
fn report_from_row(r: &BwRow) -> BwReport {
    let mbs = |gbps: f64| gbps * 1e9 / 8.0 / 1_048_576.0;
    BwReport {
        size: r.bytes,
        iters: r.iterations,
        bw_peak_mbs: mbs(r.stats.bw_peak_gbps),
        bw_avg_mbs: r.stats.bw_avg_mbps,
        msg_rate_mpps: r.stats.msg_rate_mpps,
    }
}

/// One tool's side of a test, driven by the exchange's schedule.
struct Tool<'a> {
    kind: Kind,
    args: &'a PerftestArgs,
    dp: &'a Datapath,
    role: Role,
    sizes: Vec<u64>,
    keys: Vec<Key>,
    local: Option<Local>,
    side: Option<Side>,
    mtu: u32,
    stop: Arc<AtomicBool>,
    timeout: Duration,
    out: Option<(TestInfo, Output)>,
    /// Our last bandwidth row (the report we send).
    last: Option<BwRow>,
    /// `-R`: the CM connects the QPs.
    cm: Option<CmSession>,
}

impl Tool<'_> {
    fn side(&mut self) -> &mut Side {
        self.side.as_mut().expect("connected before the runs")
    }

    fn out(&mut self) -> &mut Output {
        &mut self.out.as_mut().expect("connected before the runs").1
    }

    fn iters(&self) -> Option<u64> {
        self.args
            .run_duration()
            .is_none()
            .then(|| self.args.iterations(self.kind.is_latency()))
    }

    /// Prints the results, disconnects (`-R`) and destroys the QPs; the
    /// CM session, if any, is handed back for the control QP's close.
    fn finish(mut self) -> Option<CmSession> {
        if let Some((info, out)) = self.out.take() {
            out.finish(&info, self.dp);
        }
        self.cleanup()
    }

    fn cleanup(mut self) -> Option<CmSession> {
        let cm = self.cm.take();
        if let Some(side) = self.side {
            side.destroy();
        }
        cm
    }
}

impl Hooks for Tool<'_> {
    fn key(&self, qp: usize) -> Key {
        self.keys[qp]
    }

    fn connect(&mut self, peer: Vec<Key>) -> anyhow::Result<()> {
        let ip = peer[0].ip();
        let mac = verbs_peer::peer_mac(&self.dp.dev, None, ip)?;
        let local = self.local.take().expect("connect once");
        let role = if self.role == Role::Client {
            "client"
        } else {
            "server"
        };
        let info = test_info(
            self.kind, self.args, self.dp, role, &self.keys, &peer, self.mtu,
        );
        let peer = Peer {
            keys: peer,
            ip,
            mac,
        };
        let side = match self.cm.as_mut() {
            Some(cm) => {
                // -R: the CM connected them already (cm_connect).
                let qpns = local.qps.iter().map(|qp| qp.qpn()).collect();
                let cq = Cq::Shared(cm.cq.clone(), qpns);
                local.connected(peer, cq, self.stop.clone(), self.timeout)
            }
            None => {
                let cq = Cq::Direct(self.dp.dev.clone(), self.args.queue);
                local.connect(peer, cq, self.mtu, self.stop.clone(), self.timeout)?
            }
        };
        self.side = Some(side);
        let out = Output::new(&info, self.args.json);
        self.out = Some((info, out));
        Ok(())
    }

    fn cm_connect(&mut self) -> anyhow::Result<()> {
        let (Some(cm), Some(local)) = (self.cm.as_mut(), self.local.as_ref()) else {
            return Ok(());
        };
        // The CM moves each QP to RTS with what REQ / REP say.
        let reads = matches!(self.kind, Kind::ReadBw | Kind::ReadLat) || self.kind.is_atomic();
        cm.connect_qps(&local.qps, self.mtu, reads)
    }

    fn post_recvs(&mut self, _: usize) -> anyhow::Result<()> {
        if self.role == Role::Server {
            let per_qp = match self.kind {
                Kind::SendBw => self.args.tx_depth.max(16),
                _ => 4,
            };
            self.side().post_recvs(per_qp)?;
        }
        Ok(())
    }

    fn run<S: Stream>(&mut self, i: usize, conn: &mut PerfConn<S>) -> anyhow::Result<()> {
        let (kind, size) = (self.kind, self.sizes[i]);
        let duplex = self.args.bidirectional;
        if self.role == Role::Server && !duplex {
            let iters = self.iters();
            match self.side().serve_run(kind, size, iters, conn)? {
                Measured::Bw(r) => self.out().bw(r),
                Measured::Lat(r) => self.out().lat(r),
                Measured::Nothing => {}
            }
            return Ok(());
        }
        let duration = self.args.run_duration();
        let iters = self.args.iterations(kind.is_latency());
        let goal = match duration {
            Some(d) => Goal::Duration(d),
            None => Goal::Iterations(iters),
        };
        let mut progress = Progress::new(goal, format!("{size} B"), !self.args.json);
        let depth = self.args.tx_depth;
        if kind.is_latency() {
            let r = self
                .side()
                .run_lat(kind, size, iters, duration, &mut progress)?;
            self.out().lat(r);
        } else {
            let r = self
                .side()
                .run_bw(kind, size, iters, duration, depth, &mut progress)?;
            self.last = Some(r);
            if !duplex {
                self.out().bw(r);
            }
        }
        Ok(())
    }

    fn report(&self) -> BwReport {
        self.last.as_ref().map(report_from_row).unwrap_or_default()
    }

    fn peer_report(&mut self, r: BwReport) {
        if self.args.bidirectional {
            // perftest prints both directions' sum.
            let mut row = self.last.unwrap_or_else(|| row_from_report(&r));
            let theirs = row_from_report(&r);
            row.stats.bw_peak_gbps += theirs.stats.bw_peak_gbps;
            row.stats.bw_avg_gbps += theirs.stats.bw_avg_gbps;
            row.stats.bw_avg_mbps += theirs.stats.bw_avg_mbps;
            row.stats.msg_rate_mpps += theirs.stats.msg_rate_mpps;
            self.out().bw(row);
        } else if self.role == Role::Server {
            // The client's result, as perftest's server prints it.
            let row = row_from_report(&r);
            self.out().bw(row);
        }
    }
}

/// Opens our side once the preamble is done: the region (landing area at
/// least the message size and the cycle buffer), the QPs and their keys.
fn setup<'a>(
    kind: Kind,
    args: &'a PerftestArgs,
    dp: &'a Datapath,
    role: Role,
    pre: &Preamble,
    timeout: Duration,
) -> anyhow::Result<Tool<'a>> {
    let q = args.queue;
    let sizes = if kind.is_atomic() {
        vec![8]
    } else {
        args.sizes()
    };
    let max = *sizes.iter().max().expect("at least one size");
    let half = landing_size(max, pre.cycle_buffer, pre.cache_line);
    let mr = dp
        .dev
        .register_memory(q, (2 * half) as usize, kind.access())?;
    let nqps = if kind.is_latency() {
        1
    } else {
        args.qps as usize
    };
    let qps = Side::create_qps(&dp.dev, q, nqps, args.tx_depth)?;
    let local = Local {
        dev: dp.dev.clone(),
        queue: q,
        mr,
        half,
        send_at: half,
        // The device's random first PSNs (from the OS CSPRNG).
        psns: qps.iter().map(|qp| qp.psn()).collect(),
        qps,
        tag: kind.tag(),
    };
    Ok(Tool {
        kind,
        args,
        dp,
        role,
        sizes,
        keys: local.keys(),
        local: Some(local),
        side: None,
        mtu: pre.mtu,
        stop: crate::common::signals::stop_flag()?,
        timeout,
        out: None,
        last: None,
        cm: None,
    })
}

/// The exchange's steps for these options.
fn steps(kind: Kind, args: &PerftestArgs) -> Vec<Step> {
    let nqps = if kind.is_latency() {
        1
    } else {
        args.qps as usize
    };
    let sizes = if kind.is_atomic() {
        1
    } else {
        args.sizes().len()
    };
    if args.bidirectional {
        schedule_duplex(kind.test(), nqps, sizes)
    } else {
        schedule(kind.test(), nqps, sizes)
    }
}

fn client(kind: Kind, args: &PerftestArgs, addr: &str) -> anyhow::Result<()> {
    let timeout = Duration::from_secs_f64(args.timeout);
    let peer_ip = resolve(addr, args.port)?;
    if args.rdma_cm {
        return client_cm(kind, args, peer_ip, timeout);
    }
    // The TCP exchange first: an unreachable or refusing server fails
    // fast, before anything is attached.
    let mut conn = PerfConn::connect(peer_ip, args.port, timeout, kind.name())?;
    let pre = conn.preamble(args.mtu)?;
    let (iface, src) = match &args.iface {
        Some(i) => (i.clone(), None),
        None => preflight::route_to(peer_ip)?,
    };
    let dp = Datapath::open(
        &datapath_opts(args, iface, peer_ip.is_ipv6(), src),
        &format!("{} on the client", kind.name()),
    )?;
    session(kind, args, dp, Role::Client, Some(pre), timeout, conn, None)
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
    // attaches once the client's address says which IP family it speaks.
    // (A shared engine's service owns the interface: nothing to check.)
    if !engine::attach::would_attach(args.engine.attach.share.into(), &iface) {
        preflight::check(&preflight::Plan {
            what: format!("{} on the server", kind.name()),
            iface: &iface,
            queues: &(0..args.queue_count()).collect::<Vec<_>>(),
            pmtu: args.mtu,
            ipv6: false,
            force: args.engine.attach.force,
        })?;
        crate::common::steering::check_steer(
            &iface,
            args.queue_count(),
            args.engine.attach.steer,
            args.engine.attach.force,
            engine::nic::QueueOption::Range,
        )?;
    }
    if args.rdma_cm {
        return server_cm(kind, args, iface, timeout);
    }
    let listener = listen(args.port)?;
    if !args.json {
        println!("************************************");
        println!("* Waiting for client to connect... *");
        println!("************************************");
    }
    let (stream, addr) = listener.accept().context("accepting the client")?;
    let ipv6 = match addr.ip() {
        IpAddr::V6(a) => a.to_ipv4_mapped().is_none(),
        IpAddr::V4(_) => false,
    };
    let mut conn = PerfConn::accepted(stream, timeout);
    let pre = conn.preamble(args.mtu)?;
    let dp = Datapath::open(
        &datapath_opts(args, iface, ipv6, None),
        &format!("{} on the server", kind.name()),
    )?;
    session(kind, args, dp, Role::Server, Some(pre), timeout, conn, None)
}

/// `-R` client: the datapath first (the CM runs on it), then the control
/// QP through the CM, the preamble over it, the session.
fn client_cm(
    kind: Kind,
    args: &PerftestArgs,
    peer_ip: IpAddr,
    timeout: Duration,
) -> anyhow::Result<()> {
    if peer_ip.is_ipv6() {
        return Err(UserError::Usage(
            "-R: the RDMA CM path runs over IPv4 here (as perftest's -R)".into(),
        )
        .into());
    }
    let (iface, src) = match &args.iface {
        Some(i) => (i.clone(), None),
        None => preflight::route_to(peer_ip)?,
    };
    let dp = Datapath::open(
        &datapath_opts(args, iface, false, src),
        &format!("{} on the client", kind.name()),
    )?;
    let opened = CmSession::connect(&dp.dev, args.queue, peer_ip, args.port, args.mtu, timeout);
    let (cm, stream) = match opened {
        Ok(x) => x,
        Err(e) => {
            let _ = dp.close();
            return Err(e);
        }
    };
    let conn = PerfConn::new(
        stream,
        Role::Client,
        format!("{peer_ip}:{} (RDMA CM)", args.port),
        timeout,
    );
    session(kind, args, dp, Role::Client, None, timeout, conn, Some(cm))
}

/// `-R` server: listens through the CM on `-p`; the first connection is
/// the control QP's.
fn server_cm(
    kind: Kind,
    args: &PerftestArgs,
    iface: String,
    timeout: Duration,
) -> anyhow::Result<()> {
    let dp = Datapath::open(
        &datapath_opts(args, iface, false, None),
        &format!("{} on the server", kind.name()),
    )?;
    if !args.json {
        println!("************************************");
        println!("* Waiting for client to connect... *");
        println!("************************************");
    }
    let (cm, stream) = match CmSession::accept(&dp.dev, args.queue, args.port, args.mtu, timeout) {
        Ok(x) => x,
        Err(e) => {
            let _ = dp.close();
            return Err(e);
        }
    };
    let peer = format!("{} (RDMA CM)", cm.peer);
    let conn = PerfConn::new(stream, Role::Server, peer, timeout);
    session(kind, args, dp, Role::Server, None, timeout, conn, Some(cm))
}

/// Our side of the exchange once the datapath is open (the preamble
/// first unless done already: `-R` exchanges it over the control QP);
/// detaches however it ends.
#[allow(clippy::too_many_arguments)]
fn session<S: Stream + 'static>(
    kind: Kind,
    args: &PerftestArgs,
    dp: Datapath,
    role: Role,
    pre: Option<Preamble>,
    timeout: Duration,
    mut conn: PerfConn<S>,
    cm: Option<CmSession>,
) -> anyhow::Result<()> {
    let mut cm = cm;
    let result = (|| {
        let pre = match pre {
            Some(p) => p,
            None => conn.preamble(args.mtu)?,
        };
        let mut tool = setup(kind, args, &dp, role, &pre, timeout)?;
        tool.cm = cm.take();
        let r = drive(&mut conn, &steps(kind, args), &mut tool, args.rdma_cm);
        cm = if r.is_ok() {
            tool.finish()
        } else {
            tool.cleanup()
        };
        r
    })();
    match cm {
        Some(cm) => {
            // The control QP goes last (the peer may still read from it).
            let stream: Box<dyn std::any::Any> = Box::new(conn.into_inner());
            cm.close(stream.downcast::<CmStream>().ok().map(|s| *s));
        }
        None => drop(conn),
    }
    let closed = dp.close();
    result?;
    report_capture(closed?.pcap, args);
    Ok(())
}
