//! The shared engine (`roce-xdp service`): programs under `roce-xdp exec`
//! attach to an interface's service instead of taking the interface, each
//! with its own engine over shared frame rings and a block of 65,536 QP
//! numbers; the service switches frames by destination QP, turns around
//! frames between processes of the host, checks what each process sends,
//! detaches a process whose socket ends or whose rings break the protocol,
//! and its own end reaches every program as a fatal device error.
//!
//! Each test creates its namespaces and veth (`drop_in::Pair`), starts
//! `roce-xdp service` on the interfaces it uses ([`Service`], killed at the
//! end, on failure too) and runs stock verbs programs (ibv_rc_pingpong,
//! ib_write_bw), a C program of ours (`shared_engine_hostile.c`) and a
//! hostile attachment written here (raw handshake, frames, ring indices)
//! against it. Needs root, ibverbs-utils and perftest, and the drop-in
//! built (`cargo build --release -p roce-xdp-ibverbs -p roce-xdp`).
//!
//! The per-process checks read the `"processes"` array of `roce-xdp stats
//! --json` (pid, command, uid, qpn_first, qpn_last, counters{frames_in,
//! frames_out, refused, ...}).

mod drop_in;

use drop_in::*;
use engine::io::frame_ring::{Direction, RingPair};
use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::Ipv4Addr;
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// `ROCE_XDP_SHARE=always`: a program that finds no service fails instead
/// of taking the interface itself (the tests would prove nothing then).
const SHARE: (&str, &str) = ("ROCE_XDP_SHARE", "always");

// ---------------------------------------------------------------------------
// The service and the programs, killed when the test ends, however it ends.

/// `roce-xdp service --iface IF` in a namespace of the test, SIGTERM then
/// SIGKILL on drop.
struct Service {
    child: Option<Child>,
    ns: String,
    iface: String,
    log: PathBuf,
    socket: PathBuf,
}

impl Service {
    /// Starts the service of side `i` and waits until its socket and its
    /// stats channel answer.
    fn start(pair: &Pair, i: usize) -> Service {
        Service::start_with(pair, i, &[])
    }

    /// [`Service::start`] with more options.
    fn start_with(pair: &Pair, i: usize, extra: &[&str]) -> Service {
        let (ns, iface) = (pair.ns[i].clone(), pair.ifs[i].clone());
        let log = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("service-{iface}.log"));
        let out = std::fs::File::create(&log).expect("creating the service's log");
        let err = out.try_clone().expect("dup of the log");
        let child = Command::new("ip")
            .args(["netns", "exec", &ns, env!("CARGO_BIN_EXE_roce-xdp")])
            .args(["service", "--iface", &iface])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .expect("starting roce-xdp service");
        let socket = in_netns(&ns, || engine::attach::service_socket(&iface))
            .expect("the service's socket path");
        let mut s = Service {
            child: Some(child),
            ns,
            iface,
            log,
            socket,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        // Its first report (its counters under queue 0) comes with its
        // first housekeeping, shortly after the stats channel opens.
        let ready = |s: &Service| {
            s.try_stats()
                .is_some_and(|d| d["queues"][0]["counters"]["service_attached"].is_u64())
        };
        while !s.socket.exists() || !ready(&s) {
            if let Ok(Some(st)) = s.child().try_wait() {
                panic!("roce-xdp service exited ({st}) at start:\n{}", s.log_text());
            }
            assert!(
                Instant::now() < deadline,
                "roce-xdp service did not answer within 30 s (socket {}):\n{}",
                s.socket.display(),
                s.log_text()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        s
    }

    fn child(&mut self) -> &mut Child {
        self.child.as_mut().expect("the service runs")
    }

    fn pid(&self) -> u32 {
        self.child.as_ref().expect("the service runs").id()
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// SIGKILL now (no chance to clean up: its socket file stays).
    fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// `roce-xdp stats --iface IF --json`, None while it does not answer.
    fn try_stats(&self) -> Option<Value> {
        let out = Command::new("ip")
            .args(["netns", "exec", &self.ns, env!("CARGO_BIN_EXE_roce-xdp")])
            .args(["stats", "--iface", &self.iface, "--json"])
            .output()
            .expect("running roce-xdp stats");
        if !out.status.success() {
            return None;
        }
        serde_json::from_slice(&out.stdout).ok()
    }

    fn stats(&self) -> Value {
        self.try_stats().unwrap_or_else(|| {
            panic!(
                "roce-xdp stats --iface {} does not answer:\n{}",
                self.iface,
                self.log_text()
            )
        })
    }

    /// Waits (10 s at most) until the stats satisfy `ok`; returns them.
    fn wait_for(&self, what: &str, ok: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let doc = self.stats();
            if ok(&doc) {
                return doc;
            }
            assert!(
                Instant::now() < deadline,
                "the service's stats never showed {what}:\n{doc:#}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        let Some(mut c) = self.child.take() else {
            return;
        };
        // SAFETY: kill(2) on the pid of our own child, not yet waited for.
        unsafe { libc::kill(c.id() as libc::pid_t, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = c.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = c.kill();
        let _ = c.wait();
        if std::thread::panicking() {
            eprintln!(
                "--- roce-xdp service of {} ---\n{}",
                self.iface,
                self.log_text()
            );
        }
    }
}

/// A program the test started, SIGKILLed on drop unless it was finished.
struct Program {
    child: Option<Child>,
}

impl Program {
    fn spawn(mut cmd: Command, what: &str) -> Program {
        let child = cmd
            .env(SHARE.0, SHARE.1)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {what}: {e}"));
        Program { child: Some(child) }
    }

    fn id(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    fn child(&mut self) -> &mut Child {
        self.child.as_mut().expect("running")
    }

    /// Waits at most `limit` (a hang fails the test).
    fn finish(mut self, limit: Duration) -> Output {
        finish(self.child.take().expect("running"), limit)
    }

    /// Waits at most `limit`; a program still running then fails the test
    /// with what its threads were doing (their states from /proc, and
    /// their stacks if gdb is installed) and the stats of `services`.
    fn finish_or_explain(mut self, limit: Duration, what: &str, services: &[&Service]) -> Output {
        let mut c = self.child.take().expect("running");
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = c.try_wait() {
                return c.wait_with_output().expect("collecting output");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let stats: Vec<String> = services
            .iter()
            .map(|s| match s.try_stats() {
                Some(doc) => format!("--- stats of the service of {} ---\n{doc:#}", s.iface),
                None => format!("--- the service of {} does not answer ---", s.iface),
            })
            .collect();
        let pid = c.id();
        let threads = threads_of(pid);
        let _ = c.kill();
        let out = c.wait_with_output().expect("collecting output");
        panic!(
            "{what} (pid {pid}) still ran after {limit:?}:\n{threads}\n--- its output ---\n{}\n{}",
            text(&out),
            stats.join("\n")
        );
    }

    /// Waits at most `limit`; None if it was still running (it is killed).
    fn finish_or_kill(mut self, limit: Duration) -> Option<Output> {
        let mut c = self.child.take().expect("running");
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = c.try_wait() {
                return c.wait_with_output().ok();
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = c.kill();
        let _ = c.wait();
        None
    }

    fn kill9(&mut self) {
        let _ = self.child().kill();
    }
}

impl Drop for Program {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// What the threads of `pid` do: name, state, CPU ticks and wait channel
/// of each (/proc), and the stacks gdb shows when it is installed.
fn threads_of(pid: u32) -> String {
    let mut out = String::new();
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for t in tasks.flatten() {
            let dir = t.path();
            let read = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap_or_default();
            let stat = read("stat");
            // Fields after the command's closing parenthesis: state is the
            // first, utime and stime the 12th and 13th.
            let rest: Vec<&str> = stat
                .rsplit_once(')')
                .map(|(_, r)| r.split_whitespace().collect())
                .unwrap_or_default();
            out.push_str(&format!(
                "thread {} {:?}: state {} utime {} stime {} wchan {}\n",
                t.file_name().to_string_lossy(),
                read("comm").trim(),
                rest.first().unwrap_or(&"?"),
                rest.get(11).unwrap_or(&"?"),
                rest.get(12).unwrap_or(&"?"),
                read("wchan"),
            ));
        }
    }
    if Path::new("/usr/bin/gdb").exists() {
        if let Ok(g) = Command::new("gdb")
            .args(["-p", &pid.to_string(), "-batch", "-nx"])
            .args(["-ex", "thread apply all bt"])
            .output()
        {
            out.push_str(&String::from_utf8_lossy(&g.stdout));
        }
    }
    out
}

/// Runs `f` on a thread inside network namespace `ns` (as `ip netns exec`
/// does for a program).
fn in_netns<T: Send>(ns: &str, f: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|s| {
        s.spawn(|| {
            let file = std::fs::File::open(format!("/run/netns/{ns}"))
                .unwrap_or_else(|e| panic!("opening /run/netns/{ns}: {e}"));
            engine::io::set_thread_netns(file.as_fd())
                .unwrap_or_else(|e| panic!("entering {ns}: {e}"));
            f()
        })
        .join()
        .unwrap_or_else(|p| std::panic::resume_unwind(p))
    })
}

// ---------------------------------------------------------------------------
// Reading the stats document.

/// Counter `name` of the service (queue 0's counters).
fn counter(doc: &Value, name: &str) -> u64 {
    doc["queues"][0]["counters"][name]
        .as_u64()
        .unwrap_or_else(|| panic!("no counter {name} under queue 0:\n{doc:#}"))
}

/// The `"processes"` array (the attached processes).
fn processes(doc: &Value) -> &Vec<Value> {
    doc["processes"]
        .as_array()
        .unwrap_or_else(|| panic!("no \"processes\" array in the stats:\n{doc:#}"))
}

fn process(doc: &Value, pid: u32) -> Option<&Value> {
    processes(doc)
        .iter()
        .find(|p| p["pid"].as_u64() == Some(u64::from(pid)))
}

fn process_counter(p: &Value, name: &str) -> u64 {
    p["counters"][name]
        .as_u64()
        .unwrap_or_else(|| panic!("no process counter {name}:\n{p:#}"))
}

// ---------------------------------------------------------------------------
// The programs' output.

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The QP number in ibv_rc_pingpong's "  local address: ..., QPN 0x..., "
/// line (`which` "local" or "remote").
fn pingpong_qpn(out: &str, which: &str) -> u32 {
    let line = out
        .lines()
        .find(|l| l.trim_start().starts_with(&format!("{which} address:")))
        .unwrap_or_else(|| panic!("no {which} address line:\n{out}"));
    let hex = line
        .split("QPN 0x")
        .nth(1)
        .and_then(|r| r.split(',').next())
        .unwrap_or_else(|| panic!("no QPN in {line:?}"));
    u32::from_str_radix(hex, 16).unwrap_or_else(|e| panic!("QPN in {line:?}: {e}"))
}

/// The average bandwidth (MB/s) of ib_write_bw's result row for `size`.
fn write_bw_average(out: &str, size: &str) -> f64 {
    let row = out
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|f| f.len() >= 5 && f[0] == size)
        .unwrap_or_else(|| panic!("no result row for {size} bytes:\n{out}"));
    row[3]
        .parse()
        .unwrap_or_else(|e| panic!("BW average {:?}: {e}\n{out}", row[3]))
}

/// Iterations of the ibv_rc_pingpong pair that runs while a test abuses
/// the service (about 90 us each here: 9 s, the abuse takes 1 or 2).
const PINGPONG_ITERS: &str = "100000";

/// The pingpong pair still runs (the abuse happened while it ran).
fn still_running(client: &mut Program, server: &mut Program) {
    for (what, p) in [("client", client), ("server", server)] {
        if let Ok(Some(st)) = p.child().try_wait() {
            panic!(
                "the ibv_rc_pingpong {what} ended ({st}) before the abuse did: \
                 raise PINGPONG_ITERS"
            );
        }
    }
}

/// An ibv_rc_pingpong pair both on side 0 (server first, then the client
/// to side 0's own address), both attached to side 0's service.
fn pingpong_pair(pair: &Pair, iters: &str) -> (Program, Program) {
    let args = ["ibv_rc_pingpong", "-g", "1", "-n", iters];
    let mut server = Program::spawn(pair.exec(0, &args), "ibv_rc_pingpong server");
    pair.wait_listening(0, 18515, server.child());
    let mut cargs = args.to_vec();
    cargs.push(&pair.ips[0]);
    let client = Program::spawn(pair.exec(0, &cargs), "ibv_rc_pingpong client");
    (server, client)
}

// ---------------------------------------------------------------------------
// 1. Two processes of one host reach each other through the service.

/// ibv_rc_pingpong's two ends in one namespace, both attached to its
/// service: both exit 0, each got its own block of QP numbers (the slots
/// differ), every frame between them was turned around by the service
/// (none reached the wire), and the service counted two attaches and two
/// detaches.
#[test]
#[ignore = "needs root"]
fn two_processes_of_one_host_reach_each_other_through_the_service() {
    prerequisites();
    let pair = Pair::create();
    let svc = Service::start(&pair, 0);
    let args = ["ibv_rc_pingpong", "-c", "-g", "1", "-n", "500"];
    let mut server = Program::spawn(pair.exec(0, &args), "ibv_rc_pingpong server");
    pair.wait_listening(0, 18515, server.child());
    let doc = svc.wait_for("the server attached", |d| {
        counter(d, "service_attached") == 1
    });
    assert_eq!(counter(&doc, "service_processes"), 1, "{doc:#}");
    let mut cargs = args.to_vec();
    cargs.push(&pair.ips[0]);
    let client = Program::spawn(pair.exec(0, &cargs), "ibv_rc_pingpong client");
    let c = client.finish_or_explain(LIMIT, "client", &[&svc]);
    let s = server.finish_or_explain(LIMIT, "server", &[&svc]);
    let (ct, st) = (assert_ok("client", &c), assert_ok("server", &s));
    for t in [&ct, &st] {
        assert!(t.contains("500 iters in"), "{t}");
        assert!(!t.contains("invalid data"), "{t}");
    }
    let (sq, cq) = (pingpong_qpn(&st, "local"), pingpong_qpn(&ct, "local"));
    assert_eq!(pingpong_qpn(&ct, "remote"), sq, "{ct}");
    assert_eq!(pingpong_qpn(&st, "remote"), cq, "{st}");
    assert_ne!(
        sq >> 16,
        0,
        "the server's QPN {sq:#x} is in no slot's block"
    );
    assert_ne!(
        cq >> 16,
        0,
        "the client's QPN {cq:#x} is in no slot's block"
    );
    assert_ne!(
        sq >> 16,
        cq >> 16,
        "server QPN {sq:#x} and client QPN {cq:#x} are in one block"
    );
    let doc = svc.wait_for("both detached", |d| {
        counter(d, "service_detached") == 2 && counter(d, "service_processes") == 0
    });
    assert_eq!(counter(&doc, "service_attached"), 2, "{doc:#}");
    assert_eq!(counter(&doc, "service_detached_for_ring_errors"), 0);
    assert_eq!(counter(&doc, "service_attach_refused"), 0);
    // 500 round trips: at least a request each way per iteration.
    let local = counter(&doc, "service_frames_local");
    assert!(local >= 1000, "service_frames_local {local}:\n{doc:#}");
    assert_eq!(
        counter(&doc, "xsk_tx_packets"),
        0,
        "frames between two processes of the host went to the wire:\n{doc:#}"
    );
}

// ---------------------------------------------------------------------------
// 2. Many stock programs at once, a service on each side.

/// `ib_write_bw` with `-p PORT` (and `extra`), on side `i`.
fn write_bw(pair: &Pair, i: usize, port: u16, extra: &[&str], server: Option<&str>) -> Command {
    let port = port.to_string();
    let mut args = vec![
        "ib_write_bw",
        "-d",
        "roce-xdp0",
        "-x",
        "1",
        "-s",
        "65536",
        "-p",
        &port,
    ];
    args.extend_from_slice(extra);
    args.extend(server);
    pair.exec(i, &args)
}

/// Four ib_write_bw servers in one namespace, four clients in the other,
/// all at once, a service on each side: every one exits 0 and every client
/// reports a bandwidth; each service saw four programs come and go.
#[test]
#[ignore = "needs root"]
fn four_ib_write_bw_pairs_at_once_through_two_services() {
    prerequisites();
    let pair = Pair::create();
    let svc = [Service::start(&pair, 0), Service::start(&pair, 1)];
    let ports: Vec<u16> = (0..4).map(|k| 18600 + k).collect();
    let extra = ["-n", "2000"];
    let mut servers: Vec<Program> = ports
        .iter()
        .map(|&p| Program::spawn(write_bw(&pair, 0, p, &extra, None), "ib_write_bw server"))
        .collect();
    for (s, &p) in servers.iter_mut().zip(&ports) {
        pair.wait_listening(0, p, s.child());
    }
    let clients: Vec<Program> = ports
        .iter()
        .map(|&p| {
            Program::spawn(
                write_bw(&pair, 1, p, &extra, Some(&pair.ips[0])),
                "ib_write_bw client",
            )
        })
        .collect();
    let both = [&svc[0], &svc[1]];
    for (k, c) in clients.into_iter().enumerate() {
        let what = format!("ib_write_bw client {k}");
        let out = c.finish_or_explain(LIMIT, &what, &both);
        let t = assert_ok(&what, &out);
        let bw = write_bw_average(&t, "65536");
        assert!(bw > 0.0, "client {k}: {bw} MB/s\n{t}");
    }
    for (k, s) in servers.into_iter().enumerate() {
        let what = format!("ib_write_bw server {k}");
        let out = s.finish_or_explain(LIMIT, &what, &both);
        assert_ok(&what, &out);
    }
    for s in &svc {
        let doc = s.wait_for("four programs come and go", |d| {
            counter(d, "service_detached") == 4 && counter(d, "service_processes") == 0
        });
        assert_eq!(counter(&doc, "service_attached"), 4, "{doc:#}");
        assert_eq!(counter(&doc, "service_detached_for_ring_errors"), 0);
        assert_eq!(counter(&doc, "service_frames_local"), 0, "{doc:#}");
    }
    let (s0, s1) = (svc[0].stats(), svc[1].stats());
    // 4 x 2000 x 64 KiB written from side 1 to side 0 (1 KiB MTU).
    for (doc, dir) in [(&s1, "xsk_tx_packets"), (&s0, "xsk_rx_packets")] {
        let n = counter(doc, dir);
        assert!(n >= 4 * 2000 * 64, "{dir} {n}:\n{doc:#}");
    }
}

// ---------------------------------------------------------------------------
// 3. A process killed mid-transfer.

/// Four ib_write_bw pairs running for seconds; one client SIGKILLed in the
/// middle: the service detaches it (its pid leaves the processes, the
/// detach is counted, not as a ring error) while the three others go on
/// and exit 0.
#[test]
#[ignore = "needs root"]
fn a_client_killed_mid_transfer_is_detached_and_the_others_finish() {
    prerequisites();
    let pair = Pair::create();
    let svc = [Service::start(&pair, 0), Service::start(&pair, 1)];
    let ports: Vec<u16> = (0..4).map(|k| 18620 + k).collect();
    let extra = ["-D", "6"];
    let mut servers: Vec<Program> = ports
        .iter()
        .map(|&p| Program::spawn(write_bw(&pair, 0, p, &extra, None), "ib_write_bw server"))
        .collect();
    for (s, &p) in servers.iter_mut().zip(&ports) {
        pair.wait_listening(0, p, s.child());
    }
    let mut clients: Vec<Program> = ports
        .iter()
        .map(|&p| {
            Program::spawn(
                write_bw(&pair, 1, p, &extra, Some(&pair.ips[0])),
                "ib_write_bw client",
            )
        })
        .collect();
    let pids: Vec<u32> = clients.iter().map(|c| c.id()).collect();
    // Every client attached and sending.
    svc[1].wait_for("the four clients sending", |d| {
        pids.iter()
            .all(|&pid| process(d, pid).is_some_and(|p| process_counter(p, "frames_out") > 1000))
    });
    let victim = pids[0];
    clients[0].kill9();
    let doc = svc[1].wait_for("the killed client detached", |d| {
        process(d, victim).is_none() && counter(d, "service_detached") == 1
    });
    for &pid in &pids[1..] {
        assert!(
            process(&doc, pid).is_some(),
            "client {pid} detached with the killed one:\n{doc:#}"
        );
    }
    assert_eq!(counter(&doc, "service_detached_for_ring_errors"), 0);
    let mut clients = clients.into_iter();
    let killed = clients.next().expect("four clients");
    let out = killed.finish(Duration::from_secs(5));
    assert!(!out.status.success(), "the killed client: {}", out.status);
    let both = [&svc[0], &svc[1]];
    for (k, c) in clients.enumerate() {
        let what = format!("ib_write_bw client {}", k + 1);
        let out = c.finish_or_explain(LIMIT, &what, &both);
        let t = assert_ok(&what, &out);
        let bw = write_bw_average(&t, "65536");
        assert!(bw > 0.0, "client {}: {bw} MB/s\n{t}", k + 1);
    }
    let mut servers = servers.into_iter();
    // The killed client's server: its peer is gone; it must end (any
    // status), not hang.
    let orphan = servers.next().expect("four servers");
    let out = orphan.finish_or_kill(Duration::from_secs(30));
    assert!(
        out.is_some(),
        "the killed client's server still ran 30 s after the others finished"
    );
    for (k, s) in servers.enumerate() {
        let what = format!("ib_write_bw server {}", k + 1);
        let out = s.finish_or_explain(LIMIT, &what, &both);
        assert_ok(&what, &out);
    }
    let doc = svc[1].wait_for("every client detached", |d| {
        counter(d, "service_processes") == 0
    });
    assert_eq!(counter(&doc, "service_attached"), 4, "{doc:#}");
    assert_eq!(counter(&doc, "service_detached"), 4, "{doc:#}");
    assert_eq!(counter(&doc, "service_detached_for_ring_errors"), 0);
}

// ---------------------------------------------------------------------------
// 4. The service killed under running programs.

/// The service SIGKILLed while an ibv_rc_pingpong pair attached to it runs
/// (100 million iterations: it would run for hours): both programs end
/// within 15 s (with an error: their QPs are moved to the error state),
/// and the drop-in says why.
#[test]
#[ignore = "needs root"]
fn the_service_killed_under_running_programs_ends_them_with_the_reason() {
    prerequisites();
    let pair = Pair::create();
    let mut svc = Service::start(&pair, 0);
    let (server, client) = pingpong_pair(&pair, "100000000");
    svc.wait_for("both ends attached and exchanging", |d| {
        counter(d, "service_attached") == 2 && counter(d, "service_frames_local") > 2000
    });
    svc.kill9();
    let c = client.finish_or_explain(Duration::from_secs(15), "the client", &[]);
    let s = server.finish_or_explain(Duration::from_secs(15), "the server", &[]);
    let (ct, st) = (text(&c), text(&s));
    let gone = format!("the roce-xdp service of {} is gone", pair.ifs[0]);
    assert!(
        ct.contains(&gone) || st.contains(&gone),
        "neither says {gone:?}:\n--- client ({}) ---\n{ct}\n--- server ({}) ---\n{st}",
        c.status,
        s.status
    );
}

// ---------------------------------------------------------------------------
// 5. A hostile attachment: the raw handshake, forged frames, forged indices.

const MAGIC: &[u8; 8] = b"RXDPATT1";
const WELCOME_LEN: usize = 192;

/// What the service answered an attach handshake.
struct RawAttachment {
    stream: UnixStream,
    ring: Arc<RingPair>,
    slot: u8,
    mac: [u8; 6],
    ip: Ipv4Addr,
}

/// Sends `hello` and reads the answer: Ok(attachment) for a welcome,
/// Err(reason) for a refusal.
fn raw_handshake(path: &Path, hello: &[u8]) -> Result<RawAttachment, String> {
    let stream = UnixStream::connect(path).expect("connecting to the service");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    (&stream).write_all(hello).expect("sending the hello");
    if hello.len() < 16 {
        // A hello shorter than its record, and nothing more.
        stream.shutdown(std::net::Shutdown::Write).unwrap();
    }
    let mut b = [0u8; WELCOME_LEN];
    let (n, fd) = engine::io::fd_passing::recv_with_fd(&stream, &mut b).expect("the answer");
    assert_eq!(n, WELCOME_LEN, "an answer of {n} bytes");
    assert_eq!(&b[..8], MAGIC, "the answer's magic");
    assert_eq!(u32::from_le_bytes(b[8..12].try_into().unwrap()), 1);
    match b[12] {
        0 => {
            assert_eq!(b[22], 4, "an IPv4 interface");
            let slots = u32::from_le_bytes(b[40..44].try_into().unwrap());
            let ring = RingPair::open(fd.expect("the rings' memfd"), slots).expect("the rings");
            Ok(RawAttachment {
                stream,
                ring: Arc::new(ring),
                slot: b[13],
                mac: b[16..22].try_into().unwrap(),
                ip: Ipv4Addr::new(b[24], b[25], b[26], b[27]),
            })
        }
        1 => {
            assert!(fd.is_none(), "a refusal came with a descriptor");
            Err(refusal_reason(&b))
        }
        s => panic!("an answer of status {s}"),
    }
}

/// The reason a refusal record carries (from byte 64, NUL-padded).
fn refusal_reason(b: &[u8; WELCOME_LEN]) -> String {
    let reason = &b[64..];
    let end = reason.iter().position(|&c| c == 0).unwrap_or(reason.len());
    String::from_utf8_lossy(&reason[..end]).into_owned()
}

fn hello(version: u32) -> Vec<u8> {
    let mut h = MAGIC.to_vec();
    h.extend_from_slice(&version.to_le_bytes());
    h.extend_from_slice(&[0; 4]);
    h
}

/// A RoCE v2 frame, every length and checksum right: from `src`, to
/// `dst`, for QP `dest_qp`, a UD SEND from `ud_src_qp` (a DETH) or an RC
/// SEND, with a 32-byte payload.
fn roce_frame(
    src: ([u8; 6], Ipv4Addr),
    dst: ([u8; 6], Ipv4Addr),
    dest_qp: u32,
    ud_src_qp: Option<u32>,
) -> Vec<u8> {
    use engine::wire::*;
    let opcode = if ud_src_qp.is_some() {
        Opcode::UdSendOnly
    } else {
        Opcode::SendOnly
    };
    let h = RoceHeaders {
        eth: EthRepr {
            dst: dst.0,
            src: src.0,
            vlan: None,
        },
        ip: IpRepr::V4 {
            src: src.1,
            dst: dst.1,
            dscp: 0,
            ecn: Ecn::NotEct,
            ttl: 64,
            ident: 0,
            dont_fragment: true,
        },
        udp: UdpRepr {
            src_port: 0xc000,
            dst_port: ROCE_V2_UDP_PORT,
        },
        bth: BthRepr {
            opcode,
            solicited: false,
            mig_req: false,
            pad_count: 0,
            pkey: DEFAULT_PKEY,
            fecn: false,
            becn: false,
            dest_qp,
            ack_req: false,
            psn: 0,
        },
        reth: None,
        aeth: None,
        atomic_eth: None,
        atomic_ack_eth: None,
        immdt: None,
        ieth: None,
        deth: ud_src_qp.map(|src_qp| DethRepr {
            qkey: 0x1111_1111,
            src_qp,
        }),
    };
    let payload = [0x42u8; 32];
    let mut buf = vec![0u8; frame_len(&h, payload.len())];
    let n = emit_frame(&h, &payload, &mut buf).expect("emitting a frame");
    buf.truncate(n);
    buf
}

/// A connection to the service that breaks the handshake (garbage, a
/// truncated hello, another version) is refused with the reason and
/// counted; one that sends frames the checks refuse (not RoCE, another
/// source address or MAC, a UD source QP of another block) has them
/// counted as its refusals while its good frames pass; one that writes an
/// impossible producer index is detached as a ring error. Meanwhile an
/// ibv_rc_pingpong pair attached to the same service runs and exits 0.
#[test]
#[ignore = "needs root"]
fn a_hostile_attachment_is_refused_counted_and_detached() {
    prerequisites();
    let pair = Pair::create();
    let svc = Service::start(&pair, 0);
    let (mut server, mut client) = pingpong_pair(&pair, PINGPONG_ITERS);
    svc.wait_for("the pingpong pair attached", |d| {
        counter(d, "service_attached") == 2
    });
    let me = std::process::id();
    let path = svc.socket.clone();
    let iface_ip: Ipv4Addr = pair.ips[0].parse().unwrap();

    // (b) Handshakes that are not ours.
    let refused_before = counter(&svc.stats(), "service_attach_refused");
    let mut garbage = b"GET / HTTP/1.0\r\n".to_vec();
    garbage.resize(16, 0);
    let wrong_version = hello(2);
    for (what, bytes) in [
        ("garbage", &garbage[..]),
        ("a truncated hello", &hello(1)[..5]),
        ("another version", &wrong_version[..]),
    ] {
        let why = match raw_handshake(&path, bytes) {
            Ok(a) => panic!("{what}: admitted in slot {}", a.slot),
            Err(why) => why,
        };
        assert!(
            why.contains("not a roce-xdp attach handshake"),
            "{what}: refused with {why:?}"
        );
    }
    svc.wait_for("three refused handshakes", |d| {
        counter(d, "service_attach_refused") == refused_before + 3
    });

    // A connection that says nothing: the others are admitted meanwhile
    // (it blocks nobody); it is refused after a while.
    let silent = UnixStream::connect(&path).expect("connecting to the service");

    // (a) Frames the checks refuse, and frames they pass.
    let a = raw_handshake(&path, &hello(1)).expect("a well-formed hello is admitted");
    assert_eq!(a.ip, iface_ip, "the welcome's address");
    assert_ne!(a.slot, 0);
    let block = u32::from(a.slot) << 16;
    let other_block = u32::from(a.slot ^ 0x80) << 16;
    // A QP number in a block nobody holds (the pingpong pair holds two
    // low slots, this attachment a third).
    let nobody = (0xf0 << 16) | 5;
    let me_ = (a.mac, a.ip);
    let refused: Vec<(&str, Vec<u8>)> = vec![
        ("an ARP frame", {
            let mut f = vec![0u8; 60];
            f[..6].copy_from_slice(&[0xff; 6]);
            f[6..12].copy_from_slice(&a.mac);
            f[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
            f
        }),
        (
            "random bytes",
            (0..200u32).map(|i| (i * 37 + 11) as u8).collect(),
        ),
        (
            "another source address",
            roce_frame((a.mac, Ipv4Addr::new(10, 99, 0, 9)), me_, nobody, None),
        ),
        (
            "another source MAC",
            roce_frame(([2, 0, 0, 0, 0x99, 1], a.ip), me_, nobody, None),
        ),
        (
            "a UD source QP of another block",
            roce_frame(me_, me_, nobody, Some(other_block | 3)),
        ),
    ];
    let passed = [
        roce_frame(me_, me_, nobody, None),
        roce_frame(me_, me_, nobody, Some(block | 3)),
    ];
    let before = svc.stats();
    let mut tx = a.ring.producer(Direction::ToService);
    assert!(tx.free().unwrap() as usize >= refused.len() + passed.len());
    for (what, f) in &refused {
        assert!(tx.write(f), "{what}: no room");
    }
    for f in &passed {
        assert!(tx.write(f));
    }
    tx.publish();
    (&a.stream).write_all(&[1]).expect("ringing the service");
    let doc = svc.wait_for("the attachment's refusals", |d| {
        process(d, me).is_some_and(|p| {
            process_counter(p, "refused") == refused.len() as u64
                && process_counter(p, "frames_out") == passed.len() as u64
        })
    });
    let p = process(&doc, me).unwrap();
    assert_eq!(p["qpn_first"].as_u64(), Some(u64::from(block)), "{p:#}");
    assert_eq!(p["qpn_last"].as_u64(), Some(u64::from(block | 0xffff)));
    assert_eq!(process_counter(p, "frames_in"), 0, "{p:#}");
    // The two it passed were for this host (its own MAC and address), for
    // nobody's QP.
    let grew = |n: &str| counter(&doc, n) - counter(&before, n);
    assert!(grew("service_frames_no_process") >= 2, "{doc:#}");
    assert!(grew("service_frames_local") >= 2, "{doc:#}");

    // The silent connection got its refusal.
    silent
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut b = [0u8; WELCOME_LEN];
    (&silent)
        .read_exact(&mut b)
        .expect("no answer to a connection that says nothing");
    assert_eq!(&b[..8], MAGIC);
    assert_eq!(b[12], 1, "a connection that says nothing is refused");
    let why = refusal_reason(&b);
    assert!(
        why.contains("not a roce-xdp attach handshake"),
        "a silent connection: refused with {why:?}"
    );
    svc.wait_for("the silent connection refused", |d| {
        counter(d, "service_attach_refused") == refused_before + 4
    });

    // (c) An impossible producer index: a ring error, the process detached.
    let before = svc.stats();
    assert!(
        process(&before, me).is_some(),
        "the attachment was detached before it broke its rings:\n{before:#}"
    );
    let head = a.ring.index_word(Direction::ToService, true);
    let now = head.load(std::sync::atomic::Ordering::Relaxed);
    head.store(
        now.wrapping_add(a.ring.slots() * 3 + 1),
        std::sync::atomic::Ordering::Release,
    );
    (&a.stream).write_all(&[1]).expect("ringing the service");
    let doc = svc.wait_for("the attachment detached for a ring error", |d| {
        process(d, me).is_none()
            && counter(d, "service_detached_for_ring_errors")
                == counter(&before, "service_detached_for_ring_errors") + 1
    });
    assert_eq!(
        counter(&doc, "service_detached"),
        counter(&before, "service_detached") + 1
    );
    // The service closed its end.
    a.stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut buf = [0u8; 64];
    loop {
        match (&a.stream).read(&mut buf) {
            // Closed (with our last doorbell unread: reset).
            Ok(0) => break,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => panic!("the service kept the detached process's socket open ({e})"),
        }
    }
    still_running(&mut client, &mut server);

    let c = client.finish_or_explain(LIMIT, "client", &[&svc]);
    let s = server.finish_or_explain(LIMIT, "server", &[&svc]);
    let t = assert_ok("client", &c);
    eprintln!("{t}");
    assert!(t.contains(&format!("{PINGPONG_ITERS} iters in")));
    assert!(assert_ok("server", &s).contains(&format!("{PINGPONG_ITERS} iters in")));
}

// ---------------------------------------------------------------------------
// 6. Another process's handles; memory unmapped under a registration.

/// Reads the first line `child` prints (60 s at most) and goes on
/// reading the rest (so that the program never writes into a closed pipe):
/// the line, and what follows once the program closes its output.
fn first_line(child: &mut Child) -> (String, std::thread::JoinHandle<String>) {
    let out = child.stdout.take().expect("piped stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    let rest = std::thread::spawn(move || {
        let mut out = BufReader::new(out);
        let mut line = String::new();
        let _ = out.read_line(&mut line);
        let _ = tx.send(line);
        let mut rest = String::new();
        let _ = out.read_to_string(&mut rest);
        rest
    });
    let line = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("no line within 60 s");
    (line, rest)
}

/// `name=0x...` in `line`.
fn hex_field(line: &str, name: &str) -> u32 {
    let v = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix(&format!("{name}=0x")))
        .unwrap_or_else(|| panic!("no {name} in {line:?}"));
    u32::from_str_radix(v, 16).unwrap_or_else(|e| panic!("{name} in {line:?}: {e}"))
}

/// A program posting with another attached process's lkey, to that
/// process's QP number, gets errors (the key means nothing in its own
/// engine); the other process's memory is untouched, it gets no stray
/// completion, and its own QP still works.
#[test]
#[ignore = "needs root"]
fn another_process_lkey_and_qp_number_get_errors() {
    prerequisites();
    let exe = compile_c("tests/shared_engine_hostile.c");
    let exe = exe.to_str().unwrap();
    let pair = Pair::create();
    let svc = Service::start(&pair, 0);
    let mut cmd = pair.exec(0, &[exe, "hold"]);
    cmd.stdin(Stdio::piped());
    let mut victim = Program::spawn(cmd, "shared_engine_hostile hold");
    let (line, rest) = first_line(victim.child());
    assert!(line.starts_with("hold "), "the victim: {line:?}");
    let (lkey, qpn) = (hex_field(&line, "lkey"), hex_field(&line, "qpn"));
    let vpid = victim.id();
    let doc = svc.wait_for("the victim attached", |d| process(d, vpid).is_some());
    let v = process(&doc, vpid).expect("the victim attached");
    assert!(
        u64::from(qpn) >= v["qpn_first"].as_u64().unwrap()
            && u64::from(qpn) <= v["qpn_last"].as_u64().unwrap(),
        "the victim's QPN {qpn:#x} is outside its block:\n{v:#}"
    );
    let hostile = Program::spawn(
        pair.exec(
            0,
            &[exe, "foreign", &format!("{lkey:#x}"), &format!("{qpn:#x}")],
        ),
        "shared_engine_hostile foreign",
    );
    let out = hostile.finish_or_explain(LIMIT, "hostile", &[&svc]);
    let t = assert_ok("shared_engine_hostile foreign", &out);
    eprintln!("shared_engine_hostile foreign:\n{t}");
    assert!(t.contains("send: ") && t.contains("rdma write: "), "{t}");
    // The victim checks itself now.
    let mut stdin = victim.child().stdin.take().expect("piped stdin");
    stdin.write_all(b"check\n").unwrap();
    drop(stdin);
    let out = victim.finish_or_explain(LIMIT, "victim", &[&svc]);
    let rest = rest.join().expect("the victim's output");
    let t = assert_ok("shared_engine_hostile hold", &out);
    assert!(rest.contains("ok"), "{rest}{t}");
    let doc = svc.wait_for("both detached", |d| counter(d, "service_processes") == 0);
    assert_eq!(counter(&doc, "service_attached"), 2, "{doc:#}");
    assert_eq!(counter(&doc, "service_detached_for_ring_errors"), 0);
}

/// A program that registers memory, unmaps it and posts a write from it
/// may crash (it hurts only itself: its engine runs in it) or get an error
/// completion; the service detaches it either way, and an ibv_rc_pingpong
/// pair attached meanwhile exits 0.
#[test]
#[ignore = "needs root"]
fn a_program_that_unmaps_registered_memory_hurts_only_itself() {
    prerequisites();
    let exe = compile_c("tests/shared_engine_hostile.c");
    let pair = Pair::create();
    let svc = Service::start(&pair, 0);
    let (mut server, mut client) = pingpong_pair(&pair, PINGPONG_ITERS);
    svc.wait_for("the pingpong pair attached", |d| {
        counter(d, "service_attached") == 2
    });
    let before = svc.stats();
    let hostile = Program::spawn(
        pair.exec(0, &[exe.to_str().unwrap(), "munmap"]),
        "shared_engine_hostile munmap",
    );
    let pid = hostile.id();
    let out = hostile.finish_or_explain(LIMIT, "hostile", &[&svc]);
    eprintln!(
        "shared_engine_hostile munmap: {}\n{}",
        out.status,
        text(&out)
    );
    let t = text(&out);
    assert!(t.contains("munmapped"), "it ended before it posted:\n{t}");
    let doc = svc.wait_for("the program detached", |d| {
        process(d, pid).is_none()
            && counter(d, "service_detached") > counter(&before, "service_detached")
    });
    assert_eq!(
        counter(&doc, "service_attached"),
        counter(&before, "service_attached") + 1
    );
    still_running(&mut client, &mut server);
    let c = client.finish_or_explain(LIMIT, "client", &[&svc]);
    let s = server.finish_or_explain(LIMIT, "server", &[&svc]);
    let t = assert_ok("client", &c);
    eprintln!("{t}");
    assert!(t.contains(&format!("{PINGPONG_ITERS} iters in")));
    assert!(assert_ok("server", &s).contains(&format!("{PINGPONG_ITERS} iters in")));
}

// ---------------------------------------------------------------------------
// 7. Attach and detach, a thousand times.

fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("the service's /proc/PID/fd")
        .count()
}

fn vm_rss_kb(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("VmRSS in /proc/PID/status")
}

/// A thousand attach/detach cycles leave the service as they found it:
/// the same open descriptors, no process attached, its resident memory
/// grown by less than 4 MB, and every attach counted.
#[test]
#[ignore = "needs root"]
fn a_thousand_attach_detach_cycles_leak_nothing() {
    let pair = Pair::create();
    let svc = Service::start(&pair, 0);
    let pid = svc.pid();
    let path = svc.socket.clone();
    let cycles = |n: u32| {
        in_netns(&pair.ns[0], || {
            assert_eq!(engine::attach::service_socket(&pair.ifs[0]).unwrap(), path);
            for k in 0..n {
                let port = engine::attach::AttachedPort::attach(&path)
                    .unwrap_or_else(|e| panic!("attach {k}: {e}"));
                drop(port);
            }
        })
    };
    let settled = |attached: u64| {
        svc.wait_for("every attachment detached", |d| {
            counter(d, "service_attached") == attached
                && counter(d, "service_detached") == attached
                && counter(d, "service_processes") == 0
        })
    };
    // Warm up (the first attaches grow the service's tables once).
    cycles(20);
    settled(20);
    let (fds, rss) = (open_fds(pid), vm_rss_kb(pid));
    cycles(1000);
    let doc = settled(1020);
    assert_eq!(counter(&doc, "service_attach_refused"), 0, "{doc:#}");
    assert_eq!(counter(&doc, "service_detached_for_ring_errors"), 0);
    let (fds_after, rss_after) = (open_fds(pid), vm_rss_kb(pid));
    assert_eq!(fds_after, fds, "open descriptors before and after");
    assert!(
        rss_after < rss + 4096,
        "VmRSS grew from {rss} kB to {rss_after} kB"
    );
}

// ---------------------------------------------------------------------------
// 8. serve, a verbs program and a CM program pair on one interface at once.

/// `roce-xdp ARGS` inside side `i`'s namespace.
fn roce_xdp_in(pair: &Pair, i: usize, args: &[&str]) -> Command {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", &pair.ns[i], env!("CARGO_BIN_EXE_roce-xdp")])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

/// With a service on side 0: `roce-xdp serve` attached there answers a
/// `write-bw` client from side 1 while an `ibv_rc_pingpong` pair and an
/// `rping` pair (connected through the RDMA CM, QP 1 shared through the
/// service) run between processes of side 0, all at once; every one exits
/// 0 and the service lists all of them.
#[test]
#[ignore = "needs root"]
fn serve_a_verbs_pair_and_a_cm_pair_share_one_interface() {
    prerequisites();
    rdmacm_prerequisites();
    let pair = Pair::create();
    let svc = Service::start(&pair, 0);
    let mut serve = Program::spawn(
        roce_xdp_in(
            &pair,
            0,
            &["serve", "--iface", &pair.ifs[0], "--share", "always"],
        ),
        "roce-xdp serve",
    );
    pair.wait_listening(0, 18515, serve.child());
    let pp = ["ibv_rc_pingpong", "-p", "18600", "-g", "1", "-n", "3000"];
    let mut pp_server = Program::spawn(pair.exec(0, &pp), "ibv_rc_pingpong server");
    pair.wait_listening(0, 18600, pp_server.child());
    let mut pp_client_args = pp.to_vec();
    pp_client_args.push(&pair.ips[0]);
    let pp_client = Program::spawn(pair.exec(0, &pp_client_args), "ibv_rc_pingpong client");
    let rping = ["rping", "-s", "-a", &pair.ips[0], "-C", "200", "-v"];
    let rping_server = Program::spawn(pair.exec(0, &rping), "rping server");
    svc.wait_for("serve, two pingpongs and the rping server attached", |d| {
        counter(d, "service_attached") >= 4
    });
    // rping_server listens once its CM published the listener: the client
    // retries a refused connect for a while.
    std::thread::sleep(Duration::from_millis(1000));
    let rping_client = Program::spawn(
        pair.exec(0, &["rping", "-c", "-a", &pair.ips[0], "-C", "200", "-v"]),
        "rping client",
    );
    let client = roce_xdp_in(
        &pair,
        1,
        &[
            "write-bw",
            "--iface",
            &pair.ifs[1],
            "--share",
            "never",
            "-s",
            "65536",
            "-n",
            "500",
            &pair.ips[0],
        ],
    )
    .output()
    .expect("running write-bw against serve");
    let bw = assert_ok("write-bw against the attached serve", &client);
    assert!(bw.contains("65536"), "{bw}");
    let during = svc.stats();
    let c = pp_client.finish_or_explain(LIMIT, "pingpong client", &[&svc]);
    let s = pp_server.finish_or_explain(LIMIT, "pingpong server", &[&svc]);
    for (what, out) in [("pingpong client", &c), ("pingpong server", &s)] {
        assert!(assert_ok(what, out).contains("3000 iters in"));
    }
    let rc = rping_client.finish_or_explain(LIMIT, "rping client", &[&svc]);
    let rs = rping_server.finish_or_explain(LIMIT, "rping server", &[&svc]);
    let rct = assert_ok("rping client", &rc);
    assert_ok("rping server", &rs);
    assert_eq!(
        rct.lines()
            .filter(|l| l.starts_with("ping data: rdma-ping-"))
            .count(),
        200,
        "{rct}"
    );
    let doc = svc.stats();
    assert!(counter(&doc, "service_frames_gsi") > 0, "{doc:#}");
    assert_eq!(counter(&doc, "service_frames_gsi_dropped"), 0, "{doc:#}");
    assert!(counter(&doc, "service_frames_local") > 6000, "{doc:#}");
    assert!(
        processes(&during)
            .iter()
            .any(|p| p["command"].as_str() == Some("roce-xdp")),
        "serve is not among the attached processes:\n{during:#}"
    );
    serve.kill9();
}

// ---------------------------------------------------------------------------
// 9. Who may attach: root, or the service's group.

/// `ibv_devinfo` under exec on side 0 as uid 65534 with primary group
/// `gid` and no other (`setpriv`), attaching or failing.
fn devinfo_as(pair: &Pair, gid: &str) -> Output {
    Command::new("ip")
        .args(["netns", "exec", &pair.ns[0], "setpriv", "--reuid", "65534"])
        .args([
            "--regid",
            gid,
            "--clear-groups",
            env!("CARGO_BIN_EXE_roce-xdp"),
        ])
        .args(["exec", "--iface", &pair.ifs[0], "--share", "always", "--"])
        .arg("ibv_devinfo")
        .output()
        .expect("running ibv_devinfo as another user")
}

/// Without `--group` the socket is root's alone (0600); with
/// `--group 65533` it is root:65533, 0660, and a user of that group (not
/// root, no capability) uses the device through the service, while a user
/// of another group is refused with the reason.
#[test]
#[ignore = "needs root"]
fn only_root_and_the_services_group_may_attach() {
    prerequisites();
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let pair = Pair::create();
    {
        let svc = Service::start(&pair, 0);
        let m = std::fs::metadata(&svc.socket).unwrap();
        assert_eq!(m.permissions().mode() & 0o777, 0o600);
        let out = devinfo_as(&pair, "65533");
        assert!(!out.status.success(), "{}", text(&out));
        assert!(text(&out).contains("Permission denied"), "{}", text(&out));
    }
    let svc = Service::start_with(&pair, 0, &["--group", "65533"]);
    let m = std::fs::metadata(&svc.socket).unwrap();
    assert_eq!((m.permissions().mode() & 0o777, m.gid()), (0o660, 65533));
    let member = devinfo_as(&pair, "65533");
    let t = assert_ok("ibv_devinfo as a member of the service's group", &member);
    assert!(t.contains("roce-xdp0"), "{t}");
    let other = devinfo_as(&pair, "65534");
    assert!(!other.status.success(), "{}", text(&other));
    assert!(
        text(&other).contains("Permission denied"),
        "{}",
        text(&other)
    );
    let doc = svc.wait_for("the member attached and left", |d| {
        counter(d, "service_attached") == 1 && counter(d, "service_processes") == 0
    });
    assert_eq!(counter(&doc, "service_attach_refused"), 0, "{doc:#}");
}
