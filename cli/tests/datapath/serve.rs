//! `roce-xdp serve`: clients run the perftest-style tools against it,
//! `roce-xdp stats` reads its counters through the stats channel, and
//! SIGINT during a transfer ends it cleanly: exit 0, final counters
//! printed, nothing left attached, the stats socket removed. With
//! `--metrics`, Prometheus scrapes the same counters over HTTP.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::Stdio;
use std::time::Duration;

use engine::testbed::netns::Side;

use crate::support::*;

#[test]
#[ignore = "needs root"]
fn serve_stats_and_sigint_during_a_transfer() {
    require_root();
    let _g = serial();
    let net = Net::new(1500);
    let b = &net.pair.b;
    let serve = net.server(&[
        "serve", "--iface", &b.ifname, "--queues", "0", "--region", "1M",
    ]);
    net.wait_listening(18515);
    net.wait_engine();
    let ip = net.server_ip();

    // On-demand capture of the running engine's frames.
    let pcap = net.run_dir.join("serve.pcap");
    let capture = net.server(&[
        "capture",
        "--iface",
        &b.ifname,
        "-w",
        pcap.to_str().unwrap(),
        "-c",
        "40",
    ]);
    std::thread::sleep(Duration::from_millis(500));

    // Finished runs of three tools against the same server.
    for tool in ["write-bw", "read-lat", "send-bw", "atomic-lat"] {
        let out = net.client(&[tool, &ip, "-n", "50", "-s", "4096"]);
        assert!(out.status.success(), "{tool}: {}", text(&out.stderr));
    }
    let cap = wait_output(capture, Duration::from_secs(30));
    assert!(cap.status.success(), "{}", text(&cap.stderr));
    assert!(
        text(&cap.stderr).contains("captured 40 frames"),
        "{}",
        text(&cap.stderr)
    );
    let dec = roce_xdp(&["decode", pcap.to_str().unwrap()]);
    assert!(dec.status.success(), "{}", text(&dec.stderr));
    let d = text(&dec.stdout);
    assert!(
        d.contains("RDMA_WRITE_FIRST") && d.contains("icrc ok"),
        "{d}"
    );
    assert_eq!(d.lines().filter(|l| l.starts_with('#')).count(), 40, "{d}");

    // Messages larger than the region are refused with a reason.
    let out = net.client(&["write-bw", &ip, "-n", "5", "-s", "2M"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("its region is smaller than the messages"),
        "{}",
        text(&out.stderr)
    );

    // Stats through the channel: by name, per queue and totalled.
    let v = net.server_stats();
    assert_eq!(v["schema_version"], 1);
    assert_eq!(v["iface"], b.ifname.as_str());
    assert!(
        v["queues"][0]["counters"]["rcvd_pkts"].as_u64().unwrap() > 0,
        "{v}"
    );
    assert!(v["totals"]["sent_pkts"].as_u64().unwrap() > 0, "{v}");
    assert!(v["xdp"]["redirected"].as_u64().unwrap() > 0, "{v}");
    let st = net
        .cmd(
            &b.netns,
            &["stats", "--iface", &b.ifname, "--watch", "--count", "2"],
        )
        .output()
        .unwrap();
    let t = text(&st.stdout);
    assert!(st.status.success(), "{}", text(&st.stderr));
    assert_eq!(t.matches("rate/s").count(), 2, "{t}");
    assert!(t.lines().any(|l| l.starts_with("rcvd_pkts")), "{t}");

    // A long transfer, interrupted half-way: SIGINT once the server's
    // counters show the transfer running (and the client still at it).
    let rcvd = || -> u64 {
        let v = net.server_stats();
        v["totals"]["rcvd_pkts"].as_u64().unwrap()
    };
    let baseline = rcvd();
    let mut client = net
        .cmd(
            &net.pair.a.netns,
            &["write-bw", &ip, "-D", "30", "-s", "4096", "--timeout", "3"],
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let mut rcvd_mid = baseline;
    while rcvd_mid < baseline + 2000 {
        assert!(
            std::time::Instant::now() < deadline,
            "the transfer never started"
        );
        std::thread::sleep(Duration::from_millis(200));
        rcvd_mid = rcvd();
    }
    assert!(
        client.try_wait().unwrap().is_none(),
        "the client ended early"
    );
    // The connected QP's current DCQCN rate, per queue, in Gb/s.
    let v = net.server_stats();
    let qp_rates = v["queues"][0]["qp_rates_gbps"]
        .as_object()
        .unwrap_or_else(|| panic!("no qp_rates_gbps: {v}"));
    assert!(
        qp_rates
            .iter()
            .any(|(qpn, r)| qpn.parse::<u32>().is_ok() && r.as_f64().unwrap_or(0.0) > 0.0),
        "{v}"
    );
    let out = net
        .cmd(&b.netns, &["stats", "--iface", &b.ifname])
        .output()
        .unwrap();
    assert!(
        text(&out.stdout).contains("rate (Gb/s)"),
        "{}",
        text(&out.stdout)
    );
    // A reader that stops early (`stats --json | head -1`) ends stats
    // quietly: exit 0, nothing on stderr (it panicked on the broken pipe).
    let mut reader = net
        .cmd(&b.netns, &["stats", "--iface", &b.ifname, "--json"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(reader.stdout.take());
    let out = reader.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stderr), "", "stats on a closed pipe");
    let pid = serve.id().to_string();
    assert!(std::process::Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .unwrap()
        .success());
    let killed = std::time::Instant::now();
    let out = wait_output(serve, Duration::from_secs(30));
    let stop_time = killed.elapsed();
    let so = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "stdout: {so}\nstderr: {}",
        text(&out.stderr)
    );
    assert!(
        so.contains("stopping: ending sessions and draining"),
        "{so}"
    );
    assert!(
        so.contains("final counters:") && so.contains("detached from"),
        "{so}"
    );
    let final_rcvd: u64 = so
        .lines()
        .find(|l| l.starts_with("rcvd_pkts"))
        .and_then(|l| l.split_whitespace().last())
        .and_then(|x| x.parse().ok())
        .expect("rcvd_pkts in the final counters");
    assert!(
        final_rcvd >= rcvd_mid && rcvd_mid > 0,
        "{final_rcvd} {rcvd_mid}"
    );
    assert!(!net.xdp_attached(true), "serve left XDP attached");
    assert!(
        !net.run_dir.join(format!("{}.sock", b.ifname)).exists(),
        "stats socket left behind"
    );
    // The client notices the server went away and says so (not a panic).
    let c = wait_output(client, Duration::from_secs(30));
    assert!(
        !c.status.success(),
        "client survived the server (which stopped {stop_time:?} after SIGINT): {}\n{}\nserve: {so}",
        text(&c.stdout),
        text(&c.stderr)
    );
    assert!(!text(&c.stderr).contains("panicked"), "{}", text(&c.stderr));
}

#[test]
#[ignore = "needs root"]
fn serve_two_queues_pinned() {
    require_root();
    let _g = serial();
    let net = Net::with_queues(1500, 2);
    let b = &net.pair.b;
    let serve = net.server(&[
        "serve", "--iface", &b.ifname, "--queues", "0-1", "--cores", "0-1", "--json",
    ]);
    net.wait_listening(18515);
    net.wait_engine();
    let ip = net.server_ip();
    // One client per queue: its QP lands on the queue it sends from.
    for (tool, q) in [("write-bw", "1"), ("send-lat", "0")] {
        // On queue 0 the client leaves queue 1 of its veth uncovered and
        // veth has no ntuple filters (docs/queue-coverage.md): --force.
        let mut args = vec![tool, &ip, "-n", "50", "-s", "2048", "--queue", q];
        if q == "0" {
            args.push("--force");
        }
        let out = net.client(&args);
        assert!(out.status.success(), "{tool}: {}", text(&out.stderr));
    }
    let v = net.server_stats();
    let queues = v["queues"].as_array().unwrap();
    assert_eq!(queues.len(), 2);
    for (i, q) in queues.iter().enumerate() {
        assert_eq!(q["queue"], i);
        assert_eq!(q["core"], i);
        assert!(q["counters"]["rcvd_pkts"].as_u64().unwrap() > 0, "{v}");
        assert_eq!(q["counters"]["dropped_unknown_qp"], 0, "{v}");
    }
    let pid = serve.id().to_string();
    assert!(std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
    let out = wait_output(serve, Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    // --json: stdout is one JSON document (the log lines go to stderr).
    let so = text(&out.stdout);
    let v: serde_json::Value = serde_json::from_str(&so).unwrap_or_else(|e| panic!("{e}: {so}"));
    assert!(
        text(&out.stderr).contains("client "),
        "{}",
        text(&out.stderr)
    );
    assert!(v["final_totals"]["rcvd_pkts"].as_u64().unwrap() > 0, "{v}");
    assert!(!net.xdp_attached(true));
}

/// Context switches of every thread of process `pid` so far (each one a
/// wake-up: a thread that sleeps until something happens has few).
fn context_switches(pid: u32) -> u64 {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).expect("the server's threads");
    tasks
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("status")).ok())
        .flat_map(|s| {
            s.lines()
                .filter(|l| l.contains("ctxt_switches:"))
                .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
                .collect::<Vec<_>>()
        })
        .sum()
}

/// An idle `serve` sleeps until something happens (issue "Latency and idle
/// cost of the tools"): before a client, and after one connected QPs and
/// left, its threads wake about once a second (a bound for a lost
/// wake-up), not on 20 ms and 100 ms polls (about 120 wake-ups a second
/// before). It still answers the stats channel and SIGINT at once.
#[test]
#[ignore = "needs root"]
fn an_idle_serve_sleeps_and_still_answers() {
    require_root();
    let _g = serial();
    let net = Net::new(1500);
    let b = &net.pair.b;
    let serve = net.server(&["serve", "--iface", &b.ifname, "--queues", "0"]);
    net.wait_listening(18515);
    net.wait_engine();
    let ip = net.server_ip();
    let pid = serve.id();
    let threads = || {
        std::fs::read_dir(format!("/proc/{pid}/task"))
            .unwrap()
            .count() as u64
    };
    let window = Duration::from_secs(3);
    // At most 3 wake-ups per thread per second: the 1 s bounds give about
    // 1, the old polls 10 to 50.
    let bound = 3 * threads() * window.as_secs();
    for phase in ["no client yet", "after a client left"] {
        if phase != "no client yet" {
            let out = net.client(&["send-lat", &ip, "-n", "200", "-s", "64"]);
            assert!(out.status.success(), "{}", text(&out.stderr));
            std::thread::sleep(Duration::from_millis(300));
        }
        let before = context_switches(pid);
        std::thread::sleep(window);
        let woke = context_switches(pid) - before;
        assert!(
            woke <= bound,
            "{phase}: {woke} wake-ups in {window:?} over {} threads (bound {bound})",
            threads()
        );
    }
    // Asleep, it still answers at once.
    let t = std::time::Instant::now();
    let v = net.server_stats();
    assert!(v["totals"]["rcvd_pkts"].as_u64().unwrap() > 0, "{v}");
    assert!(
        t.elapsed() < Duration::from_millis(900),
        "{:?}",
        t.elapsed()
    );
    let t = std::time::Instant::now();
    assert!(std::process::Command::new("kill")
        .args(["-INT", &pid.to_string()])
        .status()
        .unwrap()
        .success());
    let out = wait_output(serve, Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("stopping: ending sessions"),
        "{}",
        text(&out.stdout)
    );
    // The drain (200 ms) and detaching, with no 1 s wait on the way.
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
}

/// Runs `f` on a thread inside `side`'s namespace.
fn in_netns<R: Send + 'static>(side: &Side, f: impl FnOnce() -> R + Send + 'static) -> R {
    let side = side.clone();
    std::thread::spawn(move || {
        side.enter().expect("entering the namespace");
        f()
    })
    .join()
    .expect("the namespace thread")
}

/// One HTTP request to 127.0.0.1:`port` in `side`'s namespace: the
/// answer's head and body.
fn http(side: &Side, port: u16, request: &str) -> (String, String) {
    let request = request.to_string();
    let answer = in_netns(side, move || {
        let mut c = TcpStream::connect(("127.0.0.1", port)).expect("connecting to --metrics");
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        c.write_all(request.as_bytes()).unwrap();
        let mut out = Vec::new();
        c.read_to_end(&mut out).unwrap();
        String::from_utf8(out).unwrap()
    });
    let (head, body) = answer
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("not an HTTP answer: {answer:?}"));
    (head.to_string(), body.to_string())
}

/// The value of the sample `series` (name and labels, as written) in a
/// scrape.
fn sample(body: &str, series: &str) -> u64 {
    body.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no sample {series} in:\n{body}"))
}

/// `serve --metrics 127.0.0.1:PORT` serves, over HTTP in the text format
/// Prometheus scrapes, the snapshot `roce-xdp stats --json` shows: the
/// same per-queue counters with the interface and queue as labels; other
/// paths get 404; the port is closed once serve has stopped.
#[test]
#[ignore = "needs root"]
fn serve_metrics_for_prometheus() {
    require_root();
    let _g = serial();
    let net = Net::new(1500);
    let b = &net.pair.b;
    // A free port in the server's namespace.
    let port = in_netns(b, || {
        TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .unwrap()
            .port()
    });
    let addr = format!("127.0.0.1:{port}");
    let serve = net.server(&[
        "serve",
        "--iface",
        &b.ifname,
        "--queues",
        "0",
        "--region",
        "1M",
        "--metrics",
        &addr,
    ]);
    net.wait_listening(18515);
    net.wait_engine();
    net.wait_listening(port);
    let out = net.client(&["write-bw", &net.server_ip(), "-n", "50", "-s", "4096"]);
    assert!(out.status.success(), "{}", text(&out.stderr));

    let (head, before) = http(b, port, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
    assert!(
        head.contains("\r\nContent-Type: text/plain; version=0.0.4"),
        "{head}"
    );
    let v = net.server_stats();
    let (_, after) = http(b, port, "GET /metrics HTTP/1.1\r\n\r\n");
    let iface = &b.ifname;
    let rcvd = format!("roce_xdp_queue_rcvd_pkts_total{{iface=\"{iface}\",queue=\"0\"}}");
    let (r0, r1) = (sample(&before, &rcvd), sample(&after, &rcvd));
    let json = v["queues"][0]["counters"]["rcvd_pkts"].as_u64().unwrap();
    assert!(r0 > 0 && r0 <= json && json <= r1, "{r0} {json} {r1}");
    assert!(
        before
            .lines()
            .any(|l| l == "# TYPE roce_xdp_queue_rcvd_pkts_total counter"),
        "{before}"
    );
    assert!(
        sample(
            &before,
            &format!("roce_xdp_xdp_redirected_total{{iface=\"{iface}\"}}")
        ) > 0,
        "{before}"
    );
    assert_eq!(
        sample(&before, &format!("roce_xdp_processes{{iface=\"{iface}\"}}")),
        0
    );
    // The engine named: serve's own pid (`ip netns exec` runs it in place).
    let info = format!("roce_xdp_info{{iface=\"{iface}\",pid=\"{}\",", serve.id());
    assert!(before.lines().any(|l| l.starts_with(&info)), "{before}");
    let (head, _) = http(b, port, "GET / HTTP/1.1\r\n\r\n");
    assert!(head.starts_with("HTTP/1.1 404 "), "{head}");

    let pid = serve.id().to_string();
    assert!(std::process::Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .unwrap()
        .success());
    let out = wait_output(serve, Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains(&format!("metrics: http://{addr}/metrics")),
        "{}",
        text(&out.stdout)
    );
    assert!(!net.xdp_attached(true), "serve left XDP attached");
    let closed = in_netns(b, move || TcpStream::connect(("127.0.0.1", port)).is_err());
    assert!(closed, "the metrics port still listens after serve stopped");

    // A port already taken: serve says so, exits 2 and leaves nothing
    // attached.
    let taken = in_netns(b, move || TcpListener::bind(("127.0.0.1", port)).unwrap());
    let out = net
        .cmd(
            &b.netns,
            &[
                "serve",
                "--iface",
                &b.ifname,
                "--queues",
                "0",
                "--metrics",
                &addr,
            ],
        )
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains(&format!("--metrics {addr}: cannot listen there")),
        "{}",
        text(&out.stderr)
    );
    assert!(!net.xdp_attached(true), "serve left XDP attached");
    assert!(!net.run_dir.join(format!("{iface}.sock")).exists());
    drop(taken);
}
