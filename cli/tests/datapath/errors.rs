//! Every mistake a user can make gets one actionable message on stderr
//! and exit code 2, never a panic or backtrace.

use std::process::{Command, Output};
use std::time::Duration;

use crate::support::*;

fn assert_user_error(out: &Output, needles: &[&str]) {
    let err = text(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(2),
        "stderr: {err}\nstdout: {}",
        text(&out.stdout)
    );
    assert!(
        !err.contains("panicked") && !err.contains("stack backtrace"),
        "{err}"
    );
    for n in needles {
        assert!(err.contains(n), "{n:?} not in: {err}");
    }
}

#[test]
fn usage_mistakes() {
    // No namespace or privilege needed: options are checked first.
    let run = roce_xdp;
    assert_user_error(
        &run(&["write-bw", "--iface", "lo", "-m", "1500"]),
        &["256, 512, 1024, 2048, 4096"],
    );
    assert_user_error(&run(&["write-bw"]), &["--iface"]);
    assert_user_error(
        &run(&["write-bw", "-s", "lots", "10.0.0.1"]),
        &["not a size"],
    );
    assert_user_error(
        &run(&["--log-level", "loud=[", "stats", "--iface", "x"]),
        &["--log-level"],
    );
    assert_user_error(
        &run(&["serve", "--iface", "lo", "--max-qps-per-client", "70000"]),
        &["--max-qps-per-client 70000: between 1 and 65536"],
    );
    assert_user_error(
        &run(&["write-bw", "--iface", "lo", "-q", "70000"]),
        &["-q 70000: an engine holds at most 65536 QPs"],
    );
    assert_user_error(
        &run(&["stats", "--iface", "nothing-runs-here0"]),
        &["no roce-xdp engine is running on nothing-runs-here0"],
    );
}

#[test]
#[ignore = "needs root"]
fn missing_privileges_are_named() {
    require_root();
    // Unprivileged user: everything the datapath needs is missing.
    let out = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
            bin(),
            "write-bw",
            "--iface",
            "lo",
        ])
        .output()
        .unwrap();
    assert_user_error(&out, &["CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_BPF", "setcap"]);
    // Root without CAP_NET_ADMIN: only that one is named.
    let out = Command::new("setpriv")
        .args([
            "--inh-caps=-net_admin",
            "--bounding-set=-net_admin",
            bin(),
            "serve",
            "--iface",
            "lo",
        ])
        .output()
        .unwrap();
    assert_user_error(&out, &["missing: CAP_NET_ADMIN."]);
    assert!(
        !text(&out.stderr).contains("CAP_NET_RAW"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
#[ignore = "needs root"]
fn datapath_mistakes() {
    require_root();
    let _g = serial();
    let net = Net::new(1500);
    let (a, b) = (&net.pair.a, &net.pair.b);
    let in_a = |args: &[&str]| net.cmd(&a.netns, args).output().unwrap();

    assert_user_error(
        &in_a(&["write-bw", "--iface", "nosuch0"]),
        &["no network interface named \"nosuch0\""],
    );
    assert_user_error(
        &in_a(&["write-bw", "--iface", &a.ifname, "--queue", "3"]),
        &["queue 3 is out of range", "1 RX queue"],
    );
    assert_user_error(
        &in_a(&["write-bw", "--iface", &a.ifname, "-m", "2048"]),
        &["path MTU 2048", "MTU 1500", "-m 1024"],
    );
    assert_user_error(
        &in_a(&["serve", "--iface", &a.ifname, "--queues", "0-1"]),
        &["queue 1 is out of range"],
    );

    // Peer unreachable: no route to that network inside the namespace.
    assert_user_error(
        &in_a(&["write-bw", "10.200.0.1"]),
        &["unreachable", "ip route get 10.200.0.1"],
    );
    // Connection refused: the peer exists, nothing listens.
    let ip = net.server_ip();
    assert_user_error(&in_a(&["send-lat", &ip]), &["refused", "roce-xdp send-lat"]);

    // Zero-copy on veth (copy mode only).
    let out = in_a(&["serve", "--iface", &a.ifname, "--zero-copy", "on"]);
    assert_user_error(&out, &["zero-copy", "--zero-copy auto"]);
    assert!(!net.xdp_attached(false), "a failed start left XDP attached");

    // XDP attached by another tool (netlink, `ip link set ... xdp obj`):
    // refused with the fix, and --force replaces it.
    let obj = concat!(env!("CARGO_MANIFEST_DIR"), "/../ebpf/roce_steer.o");
    a.run_ip(&[
        "link",
        "set",
        "dev",
        &a.ifname,
        "xdpgeneric",
        "obj",
        obj,
        "sec",
        "xdp.frags",
    ])
    .expect("attaching a netlink XDP program");
    assert!(net.xdp_attached(false));
    assert_user_error(
        &in_a(&["serve", "--iface", &a.ifname]),
        &["another XDP program (roce_steer, id", "--force"],
    );
    let forced = net
        .cmd(
            &a.netns,
            &["serve", "--iface", &a.ifname, "--force", "-p", "18700"],
        )
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let sock = net.run_dir.join(format!("{}.sock", a.ifname));
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !sock.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "serve --force did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let pid = forced.id().to_string();
    assert!(Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
    let out = wait_output(forced, Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        !net.xdp_attached(false),
        "--force then exit left a program attached"
    );

    // XDP already attached: a running server holds the interface.
    let serve = net.server(&["serve", "--iface", &b.ifname]);
    net.wait_listening(18515);
    net.wait_engine();
    let out = net
        .cmd(&b.netns, &["read-bw", "--iface", &b.ifname, "-p", "18600"])
        .output()
        .unwrap();
    assert_user_error(&out, &["already attached", "--force"]);
    // The first server is unharmed: a client still runs against it.
    let out = net.client(&["write-bw", &ip, "-n", "10", "-s", "1024"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let pid = serve.id().to_string();
    assert!(Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
    let out = wait_output(serve, Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(!net.xdp_attached(true));
}
