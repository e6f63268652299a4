//! UCX and Open MPI on the drop-in libibverbs, as Debian packages them
//! (ucx-utils 1.13, openmpi-bin 4.1): `ucx_info` finds the device's
//! `rc_verbs` and `ud_verbs` transports, `ucx_perftest` runs between two
//! network namespaces (tag matching, RMA put and get) with
//! `UCX_TLS=rc_verbs,ud_verbs` and with `ud_verbs` alone, and two MPI
//! ranks, one per namespace, move messages through Open MPI's UCX PML
//! (`mpi_exchange.c`, every byte checked). Every program runs under
//! `roce-xdp exec`. Needs root and the packages scripts/setup-deps.sh
//! installs.

mod drop_in;

use drop_in::*;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// The device and port UCX is pointed at.
const DEVICE: &str = "roce-xdp0:1";

fn ucx_prerequisites() {
    prerequisites();
    for bin in ["/usr/bin/ucx_info", "/usr/bin/ucx_perftest"] {
        assert!(
            Path::new(bin).exists(),
            "{bin} is missing: run scripts/setup-deps.sh (it installs ucx-utils)"
        );
    }
}

#[test]
#[ignore = "needs root"]
fn ucx_info_lists_rc_verbs_and_ud_verbs_on_the_device() {
    ucx_prerequisites();
    let pair = Pair::create();
    let out = finish(pair.exec(0, &["ucx_info", "-d"]).spawn().unwrap(), LIMIT);
    let text = assert_ok("ucx_info -d", &out);
    for tl in ["rc_verbs", "ud_verbs"] {
        let found = text.split("Transport: ").skip(1).any(|t| {
            t.starts_with(tl)
                && t.lines().nth(1).is_some_and(|l| {
                    l.trim_start_matches(['#', ' ']) == format!("Device: {DEVICE}")
                })
        });
        assert!(found, "ucx_info -d lists no {tl} on {DEVICE}:\n{text}");
    }
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// `ucx_perftest ARGS` served in side 0 and run against it from side 1,
/// with `env` (UCX_TLS, ...) on both; returns the client's output.
fn ucx_perftest(env: &[&str], args: &[&str]) -> String {
    ucx_prerequisites();
    let pair = Pair::create();
    let port = "13337";
    let net_devices = format!("UCX_NET_DEVICES={DEVICE}");
    let cmd = |peer: Option<&str>| -> Vec<String> {
        let mut v = vec!["env".to_string(), net_devices.clone()];
        v.extend(env.iter().map(|e| e.to_string()));
        v.extend(["ucx_perftest", "-p", port].map(String::from));
        v.extend(peer.map(String::from));
        v.extend(args.iter().map(|a| a.to_string()));
        v
    };
    let mut server = pair.exec(0, &strs(&cmd(None))).spawn().unwrap();
    pair.wait_listening(0, 13337, &mut server);
    let client = pair
        .exec(1, &strs(&cmd(Some(&pair.ips[0]))))
        .spawn()
        .unwrap();
    let c = finish(client, LIMIT);
    let s = finish(server, LIMIT);
    let what = format!("ucx_perftest {} {}", env.join(" "), args.join(" "));
    assert_ok(&format!("{what} (server)"), &s);
    let text = assert_ok(&format!("{what} (client)"), &c);
    let last = text
        .lines()
        .find(|l| l.starts_with("Final:"))
        .unwrap_or_else(|| panic!("{what}: no Final line:\n{text}"));
    // "Final: iterations p50 avg overall bw_avg bw_overall rate_avg rate_overall"
    let iterations: u64 = last
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{what}: {last}"));
    let wanted: u64 = args
        .iter()
        .position(|a| *a == "-n")
        .map(|i| args[i + 1].parse().unwrap())
        .unwrap();
    assert_eq!(iterations, wanted, "{what}: {last}");
    text
}

const RC_UD: &str = "UCX_TLS=rc_verbs,ud_verbs";
const UD: &str = "UCX_TLS=ud_verbs";

#[test]
#[ignore = "needs root"]
fn ucx_tag_lat_over_rc_and_ud() {
    ucx_perftest(&[RC_UD], &["-t", "tag_lat", "-s", "64", "-n", "2000"]);
}

#[test]
#[ignore = "needs root"]
fn ucx_tag_bw_over_rc_and_ud() {
    // 8 B (eager), 64 KiB (rendezvous: an RDMA READ of the sender's buffer).
    ucx_perftest(&[RC_UD], &["-t", "tag_bw", "-s", "8", "-n", "2000"]);
    ucx_perftest(&[RC_UD], &["-t", "tag_bw", "-s", "65536", "-n", "500"]);
}

#[test]
#[ignore = "needs root"]
fn ucx_put_bw_and_get_over_rc_and_ud() {
    ucx_perftest(&[RC_UD], &["-t", "ucp_put_bw", "-s", "65536", "-n", "500"]);
    ucx_perftest(&[RC_UD], &["-t", "ucp_get", "-s", "65536", "-n", "500"]);
}

#[test]
#[ignore = "needs root"]
fn ucx_over_ud_alone() {
    // UCX's own reliability over datagrams: tag matching, put and get.
    ucx_perftest(&[UD], &["-t", "tag_lat", "-s", "64", "-n", "2000"]);
    ucx_perftest(&[UD], &["-t", "tag_bw", "-s", "65536", "-n", "200"]);
    ucx_perftest(&[UD], &["-t", "ucp_put_bw", "-s", "65536", "-n", "200"]);
    ucx_perftest(&[UD], &["-t", "ucp_get", "-s", "65536", "-n", "200"]);
}

#[test]
#[ignore = "needs root"]
fn ucx_transport_level_active_messages_over_ud_verbs() {
    // UCT directly, no UCP: ud_verbs' own connection and acknowledgements.
    ucx_perftest(
        &[],
        &["-x", "ud_verbs", "-d", DEVICE, "-t", "am_lat", "-n", "2000"],
    );
}

/// Writes an executable shell script into the test's temporary directory.
fn script(name: &str, body: &str) -> PathBuf {
    let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    std::fs::write(&path, body).expect("writing a script");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

#[test]
#[ignore = "needs root"]
fn open_mpi_over_ucx_moves_messages_between_two_namespaces() {
    ucx_prerequisites();
    assert!(
        Path::new("/usr/bin/mpirun").exists() && Path::new("/usr/bin/mpicc").exists(),
        "Open MPI is missing: run scripts/setup-deps.sh (it installs openmpi-bin and libopenmpi-dev)"
    );
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mpi_exchange.c");
    let exe = Path::new(env!("CARGO_TARGET_TMPDIR")).join("mpi_exchange");
    let cc = Command::new("mpicc")
        .args(["-Wall", "-O2"])
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .output()
        .expect("running mpicc");
    assert!(
        cc.status.success(),
        "mpicc: {}",
        String::from_utf8_lossy(&cc.stderr)
    );
    let pair = Pair::create();
    // mpirun starts its daemons through an rsh agent: here the "host" is
    // a namespace, entered with ip netns exec.
    let agent = script(
        "mpi_netns_agent.sh",
        "#!/bin/sh\nhost=$1; shift\nexec ip netns exec \"$host\" sh -c \"$*\"\n",
    );
    // Each rank runs under exec on its namespace's one interface.
    let rank = script(
        "mpi_rank.sh",
        &format!(
            "#!/bin/sh\nIF=$(ls /sys/class/net | grep -v '^lo$' | head -1)\nexec {} exec --iface \"$IF\" -- \"$@\"\n",
            env!("CARGO_BIN_EXE_roce-xdp")
        ),
    );
    let hosts = format!("{}:1,{}:1", pair.ns[0], pair.ns[1]);
    let subnet = format!("{}/24", pair.ips[0]);
    let net_devices = format!("UCX_NET_DEVICES={DEVICE}");
    let mut mpirun = Command::new("ip");
    mpirun
        .args([
            "netns",
            "exec",
            &pair.ns[0],
            "mpirun",
            "--allow-run-as-root",
        ])
        .args(["-np", "2", "--host", &hosts])
        .args(["--mca", "plm_rsh_agent", agent.to_str().unwrap()])
        .args(["--mca", "plm_rsh_no_tree_spawn", "1"])
        .args(["--mca", "oob_tcp_if_include", &subnet])
        // UCX for point to point and one-sided; no other BTL that could
        // carry the messages (shared memory, TCP, the openib BTL).
        .args(["--mca", "pml", "ucx", "--mca", "osc", "ucx"])
        .args(["--mca", "btl", "self"])
        .args(["-x", "UCX_TLS=rc_verbs,ud_verbs", "-x", &net_devices])
        .args(["-x", "UCX_LOG_LEVEL=info"])
        .arg(&rank)
        .arg(&exe)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let out = finish(mpirun.spawn().unwrap(), Duration::from_secs(300));
    let text = assert_ok("mpirun mpi_exchange", &out);
    assert!(
        text.contains("mpi_exchange: ok"),
        "mpi_exchange did not finish:\n{text}"
    );
    // Both ranks chose the device's RC transport for their peer.
    let lanes = text.matches(&format!("tag(rc_verbs/{DEVICE})")).count();
    assert!(
        lanes >= 2,
        "UCX's lanes are not rc_verbs on {DEVICE}:\n{text}"
    );
}
