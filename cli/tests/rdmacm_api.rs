//! The drop-in librdmacm (engine/rdmacm, docs/rdma-cm-drop-in.md) under
//! `roce-xdp exec`, in two network namespaces: our C program
//! (`rdmacm_api.c`: connect/accept with private data both ways, data,
//! disconnect; reject with private data; no listener -> REJECTED 8; no
//! route -> ADDR_ERROR; the UDP port space (SIDR) and a datagram; the
//! synchronous rdma_create_ep path; argument checks and errnos), then
//! Debian's rping, ucmatose, udaddy, rdma_server/rdma_client, perftest -R
//! and qperf -cm1. Needs root (namespaces), the packages
//! scripts/setup-deps.sh installs, and the archives of `cargo build
//! --release -p roce-xdp-ibverbs -p roce-xdp-rdmacm`.

mod drop_in;

use std::path::Path;
use std::process::Output;
use std::time::Duration;

use drop_in::{assert_ok, compile_c_linking, exports, finish, Pair, LIMIT};

/// Runs `server` in side 0 and, a moment later, `client` in side 1;
/// both must exit 0. Returns their outputs.
fn run_pair(pair: &Pair, server: &[&str], client: &[&str]) -> (String, String) {
    let s = pair.exec(0, server).spawn().expect("starting the server");
    std::thread::sleep(Duration::from_millis(1500));
    let c = pair.exec(1, client).spawn().expect("starting the client");
    let c: Output = finish(c, LIMIT);
    let s: Output = finish(s, LIMIT);
    let so = assert_ok(&server.join(" "), &s);
    let co = assert_ok(&client.join(" "), &c);
    (so, co)
}

#[test]
#[ignore = "needs root (network namespaces)"]
fn the_rdma_cm_api_connects_rejects_and_resolves_as_librdmacm() {
    drop_in::rdmacm_prerequisites();
    let exe = compile_c_linking("tests/rdmacm_api.c", &["-lrdmacm"]);
    let exe = exe.to_str().unwrap();
    let pair = Pair::create();
    let (s, c) = run_pair(
        &pair,
        &[exe, "server", &pair.ips[0], "20886"],
        &[exe, "client", &pair.ips[0], "20886"],
    );
    for step in [
        "ok established",
        "ok disconnected",
        "ok rejected",
        "ok udp",
        "ok sync",
        "server done",
    ] {
        assert!(s.contains(step), "server lacks {step:?}:\n{s}");
    }
    for step in [
        "ok established",
        "ok disconnected",
        "ok rejected",
        "ok no listener",
        "ok addr error",
        "ok udp",
        "ok sync",
        "client done",
    ] {
        assert!(c.contains(step), "client lacks {step:?}:\n{c}");
    }
}

#[test]
#[ignore = "needs root (network namespaces)"]
fn bad_arguments_get_librdmacms_errnos() {
    drop_in::rdmacm_prerequisites();
    let exe = compile_c_linking("tests/rdmacm_api.c", &["-lrdmacm"]);
    let pair = Pair::create();
    let out = finish(
        pair.exec(0, &[exe.to_str().unwrap(), "args", &pair.ips[0]])
            .spawn()
            .unwrap(),
        LIMIT,
    );
    let text = assert_ok("rdmacm_api args", &out);
    assert!(text.contains("args done"), "{text}");
}

#[test]
#[ignore = "needs root (network namespaces)"]
fn rping_pings_with_rdma_reads_and_writes() {
    drop_in::rdmacm_prerequisites();
    let pair = Pair::create();
    let (s, c) = run_pair(
        &pair,
        &["rping", "-s", "-a", "0.0.0.0", "-C", "10", "-v"],
        &["rping", "-c", "-a", &pair.ips[0], "-C", "10", "-v"],
    );
    for i in 0..10 {
        let line = format!("ping data: rdma-ping-{i}: ");
        assert!(c.contains(&line), "client lacks {line:?}:\n{c}");
        assert!(
            s.contains(&format!("server {line}")),
            "server lacks {line:?}:\n{s}"
        );
    }
    assert!(s.contains("server DISCONNECT EVENT"), "{s}");
}

#[test]
#[ignore = "needs root (network namespaces)"]
fn ucmatose_connects_four_and_exchanges_data() {
    drop_in::rdmacm_prerequisites();
    let pair = Pair::create();
    // Then again with every id migrated to a new channel (rdma_migrate_id)
    // and with TOS and ACK timeout options.
    for extra in [&[][..], &["-m"], &["-t", "32", "-a", "14"]] {
        let server: Vec<&str> = ["ucmatose", "-c", "4"]
            .iter()
            .chain(extra)
            .copied()
            .collect();
        let client: Vec<&str> = ["ucmatose", "-c", "4", "-s", &pair.ips[0]]
            .iter()
            .chain(extra)
            .copied()
            .collect();
        let (s, c) = run_pair(&pair, &server, &client);
        for t in [&s, &c] {
            assert!(
                t.contains("data transfers complete") && t.contains("return status 0"),
                "{extra:?}: {t}"
            );
        }
    }
}

#[test]
#[ignore = "needs root (network namespaces)"]
fn udaddy_resolves_a_ud_peer_by_sidr() {
    drop_in::rdmacm_prerequisites();
    let pair = Pair::create();
    let (s, c) = run_pair(&pair, &["udaddy"], &["udaddy", "-s", &pair.ips[0]]);
    for t in [&s, &c] {
        assert!(
            t.contains("data transfers complete") && t.contains("return status 0"),
            "{t}"
        );
    }
}

#[test]
#[ignore = "needs root (network namespaces)"]
fn rdma_server_and_rdma_client_run_synchronously() {
    drop_in::rdmacm_prerequisites();
    let pair = Pair::create();
    let (s, c) = run_pair(
        &pair,
        &["rdma_server"],
        &["rdma_client", "-s", &pair.ips[0]],
    );
    assert!(s.contains("rdma_server: end 0"), "{s}");
    assert!(c.contains("rdma_client: end 0"), "{c}");
}

#[test]
#[ignore = "needs root (network namespaces)"]
fn perftest_over_rdma_cm() {
    drop_in::rdmacm_prerequisites();
    let pair = Pair::create();
    for (tool, row) in [
        ("ib_write_bw", " 65536 "),
        ("ib_read_bw", " 65536 "),
        ("ib_send_lat", " 2 "),
    ] {
        let (s, c) = run_pair(
            &pair,
            &[tool, "-R", "-n", "500"],
            &[tool, "-R", "-n", "500", &pair.ips[0]],
        );
        for t in [&s, &c] {
            assert!(t.contains(row) && t.contains("rdma_cm"), "{tool}:\n{t}");
        }
    }
}

#[test]
fn exports_every_symbol_and_version_of_the_system_librdmacm() {
    let system = Path::new("/usr/lib/x86_64-linux-gnu/librdmacm.so.1");
    assert!(
        system.exists(),
        "{} is missing: apt-get install librdmacm1",
        system.display()
    );
    let bin = Path::new(env!("CARGO_BIN_EXE_roce-xdp"));
    assert!(
        bin.with_file_name("libroce_xdp_rdmacm.a").exists(),
        "the archive is missing: cargo build --release -p roce-xdp-ibverbs -p roce-xdp-rdmacm"
    );
    let out = std::process::Command::new(bin)
        .args(["exec", "--iface", "lo", "--", "true"])
        .output()
        .expect("running roce-xdp exec");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dir = bin.with_file_name("roce-xdp-ibverbs");
    let ours = exports(&dir.join("librdmacm.so.1"));
    let theirs = exports(system);
    // rdma-core 44: 72 entries (68 symbols, 4 version nodes).
    assert!(theirs.len() > 60, "{}", theirs.len());
    assert_eq!(ours, theirs);
    // Every librdmacm program of rdmacm-utils and perftest binds all its
    // symbols against the drop-in (ldd -r binds them all, as BIND_NOW).
    for prog in [
        "rping",
        "ucmatose",
        "udaddy",
        "rdma_server",
        "rdma_client",
        "ib_write_bw",
        "qperf",
    ] {
        let path = Path::new("/usr/bin").join(prog);
        let ldd = std::process::Command::new("ldd")
            .arg("-r")
            .arg(&path)
            .env("LD_LIBRARY_PATH", &dir)
            .output()
            .expect("ldd");
        let text = String::from_utf8_lossy(&ldd.stdout).to_string()
            + &String::from_utf8_lossy(&ldd.stderr);
        assert!(
            text.contains(&format!(
                "librdmacm.so.1 => {}",
                dir.join("librdmacm.so.1").display()
            )),
            "{prog}: {text}"
        );
        assert!(!text.contains("undefined symbol"), "{prog}: {text}");
    }
}

#[test]
#[ignore = "needs root (network namespaces)"]
fn qperf_connects_with_the_cm() {
    drop_in::rdmacm_prerequisites();
    assert!(
        Path::new("/usr/bin/qperf").exists(),
        "qperf is missing: apt-get install qperf"
    );
    let pair = Pair::create();
    // The server runs until killed (one child per test).
    let mut server = pair.exec(0, &["qperf"]).spawn().expect("starting qperf");
    pair.wait_listening(0, 19765, &mut server);
    for test in ["rc_bw", "rc_lat", "rc_rdma_read_bw"] {
        // qperf 0.4.11's server child sends its port before it listens:
        // a REQ that comes first is rejected (REJ, "invalid service ID"),
        // with the kernel's CM too. That race, and only it, is retried.
        let mut tries = 0;
        let text = loop {
            let client = pair
                .exec(
                    1,
                    &["qperf", "-cm1", "-t", "1", "-T", "30", &pair.ips[0], test],
                )
                .spawn()
                .expect("starting the client");
            let out = finish(client, LIMIT);
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            tries += 1;
            if out.status.success() || !text.contains("Event rejected") || tries == 3 {
                break assert_ok(&format!("qperf -cm1 {test}"), &out);
            }
        };
        assert!(text.contains(&format!("{test}:")), "{test}:\n{text}");
    }
    let _ = server.kill();
    let _ = server.wait();
}

#[test]
#[ignore = "needs root (network namespaces)"]
fn rping_with_its_own_qp_moves_it_by_rdma_init_qp_attr_and_rdma_establish() {
    drop_in::rdmacm_prerequisites();
    let pair = Pair::create();
    let (s, c) = run_pair(
        &pair,
        &["rping", "-s", "-q", "-a", "0.0.0.0", "-C", "5", "-v"],
        &["rping", "-c", "-q", "-a", &pair.ips[0], "-C", "5", "-v"],
    );
    for i in 0..5 {
        let line = format!("ping data: rdma-ping-{i}: ");
        assert!(c.contains(&line), "client lacks {line:?}:\n{c}");
        assert!(
            s.contains(&format!("server {line}")),
            "server lacks {line:?}:\n{s}"
        );
    }
}

/// Follows `child`'s stdout: returns once a line contains `needle`
/// (panics after `limit`, or when the output ends first), with a handle
/// whose join gives everything the child printed.
fn wait_for_line(
    child: &mut std::process::Child,
    needle: &str,
    limit: Duration,
) -> std::thread::JoinHandle<String> {
    use std::io::BufRead as _;
    let out = child.stdout.take().expect("piped stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    let want = needle.to_string();
    let reader = std::thread::spawn(move || {
        let mut all = String::new();
        for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            if line.contains(&want) {
                let _ = tx.send(());
            }
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    if rx.recv_timeout(limit).is_err() {
        let _ = child.kill();
        panic!(
            "no line with {needle:?} within {limit:?}:\n{}",
            reader.join().unwrap_or_default()
        );
    }
    reader
}

/// `roce-xdp stats --iface IF --json` in side `i`'s namespace.
fn stats_json(pair: &Pair, i: usize) -> serde_json::Value {
    let out = std::process::Command::new("ip")
        .args(["netns", "exec", &pair.ns[i], env!("CARGO_BIN_EXE_roce-xdp")])
        .args(["stats", "--iface", &pair.ifs[i], "--json"])
        .output()
        .expect("running roce-xdp stats");
    let text = assert_ok("roce-xdp stats --json", &out);
    serde_json::from_str(&text).expect("stats --json is JSON")
}

/// `roce-xdp stats --iface IF` (the table) in side `i`'s namespace.
fn stats_text(pair: &Pair, i: usize) -> String {
    let out = std::process::Command::new("ip")
        .args(["netns", "exec", &pair.ns[i], env!("CARGO_BIN_EXE_roce-xdp")])
        .args(["stats", "--iface", &pair.ifs[i]])
        .output()
        .expect("running roce-xdp stats");
    assert_ok("roce-xdp stats", &out)
}

/// The CM agent's counters reach `roce-xdp stats` (JSON under `cm`, and
/// the table's "RDMA CM" section): a listener's side receives 5 MADs of
/// base version 0x42 on QP 1 (a UD send of a verbs program) and counts
/// them `malformed`.
#[test]
#[ignore = "needs root (network namespaces)"]
fn garbage_mads_show_as_malformed_in_roce_xdp_stats() {
    drop_in::rdmacm_prerequisites();
    let exe = compile_c_linking("tests/rdmacm_api.c", &["-lrdmacm"]);
    let exe = exe.to_str().unwrap();
    let pair = Pair::create();
    let mut server = pair
        .exec(0, &[exe, "listen", "20896", "12"])
        .spawn()
        .expect("starting the listener");
    let server_out = wait_for_line(&mut server, "listening", LIMIT);
    let before = stats_json(&pair, 0);
    assert_eq!(before["cm"]["malformed"].as_u64(), Some(0), "{before}");
    assert_eq!(before["cm"]["mads_received"].as_u64(), Some(0), "{before}");
    let c = pair
        .exec(1, &[exe, "garbage", &pair.ips[0], "5"])
        .spawn()
        .unwrap();
    let co = assert_ok("rdmacm_api garbage", &finish(c, LIMIT));
    assert!(co.contains("sent 5"), "{co}");
    std::thread::sleep(Duration::from_millis(500));
    let after = stats_json(&pair, 0);
    assert_eq!(after["cm"]["malformed"].as_u64(), Some(5), "{after}");
    assert_eq!(after["cm"]["mads_received"].as_u64(), Some(5), "{after}");
    assert_eq!(after["cm"]["mads_sent"].as_u64(), Some(0), "{after}");
    let text = stats_text(&pair, 0);
    let cm = text.split("RDMA CM\n").nth(1).unwrap_or_default();
    assert!(
        cm.lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["malformed", "5"]),
        "{text}"
    );
    assert_ok("rdmacm_api listen", &finish(server, LIMIT));
    let so = server_out.join().unwrap();
    assert!(so.contains("listen done"), "{so}");
}

/// The kernel cma's MRA (CMA_CM_MRA_SETTING, service timeout 24: 68.7 s):
/// the server accepts 6 s after the REQ, beyond the client's REQ timeout
/// (2 x packet life 2^16 x 4.096 us + the CM response timeout 2^20 x
/// 4.096 us: 4.8 s; docs/connection-manager.md); the MRA it sent on the
/// REQ keeps the client from resending (retransmissions 0), and the
/// connection forms and carries data.
#[test]
#[ignore = "needs root (network namespaces)"]
fn a_slow_accept_gets_an_mra_and_the_peer_does_not_resend() {
    drop_in::rdmacm_prerequisites();
    let exe = compile_c_linking("tests/rdmacm_api.c", &["-lrdmacm"]);
    let exe = exe.to_str().unwrap();
    let pair = Pair::create();
    let mut s = pair
        .exec(0, &[exe, "slow-server", "20898", "6"])
        .spawn()
        .unwrap();
    let s_out = wait_for_line(&mut s, "listening", LIMIT);
    let mut c = pair
        .exec(1, &[exe, "slow-client", &pair.ips[0], "20898", "4"])
        .spawn()
        .unwrap();
    // Accepted 6 s after its REQ, the client holds the connection 4 s:
    // look at both sides meanwhile.
    let c_out = wait_for_line(&mut c, "ok slow established", LIMIT);
    let cs = stats_json(&pair, 1);
    let ss = stats_json(&pair, 0);
    assert_ok("slow-client", &finish(c, LIMIT));
    assert_ok("slow-server", &finish(s, LIMIT));
    let (co, so) = (c_out.join().unwrap(), s_out.join().unwrap());
    assert!(
        co.contains("ok slow established") && co.contains("client done"),
        "{co}"
    );
    assert!(
        so.contains("ok slow established") && so.contains("server done"),
        "{so}"
    );
    assert_eq!(cs["cm"]["established"].as_u64(), Some(1), "{cs}");
    assert_eq!(cs["cm"]["retransmissions"].as_u64(), Some(0), "{cs}");
    assert_eq!(cs["cm"]["mras_received"].as_u64(), Some(1), "{cs}");
    // The client's MRA for the REP reached the server.
    assert_eq!(ss["cm"]["mras_received"].as_u64(), Some(1), "{ss}");
    assert_eq!(ss["cm"]["duplicates"].as_u64(), Some(0), "{ss}");
}
