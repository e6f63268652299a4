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

use drop_in::{assert_ok, compile_c_linking, finish, Pair, LIMIT};

fn prerequisites() {
    drop_in::prerequisites();
    let bin = Path::new(env!("CARGO_BIN_EXE_roce-xdp"));
    let archive = bin.with_file_name("libroce_xdp_rdmacm.a");
    assert!(
        archive.exists(),
        "{} is missing: cargo build --release -p roce-xdp-rdmacm",
        archive.display()
    );
    for b in ["/usr/bin/rping", "/usr/bin/ucmatose", "/usr/bin/udaddy"] {
        assert!(
            Path::new(b).exists(),
            "{b} is missing: apt-get install rdmacm-utils"
        );
    }
}

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
    prerequisites();
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
    prerequisites();
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
    prerequisites();
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
    prerequisites();
    let pair = Pair::create();
    let (s, c) = run_pair(
        &pair,
        &["ucmatose", "-c", "4"],
        &["ucmatose", "-c", "4", "-s", &pair.ips[0]],
    );
    for t in [&s, &c] {
        assert!(
            t.contains("data transfers complete") && t.contains("return status 0"),
            "{t}"
        );
    }
}

#[test]
#[ignore = "needs root (network namespaces)"]
fn udaddy_resolves_a_ud_peer_by_sidr() {
    prerequisites();
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
    prerequisites();
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
    prerequisites();
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
