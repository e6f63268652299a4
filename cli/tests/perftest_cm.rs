//! `-R`: the perftest-style tools connecting through the RDMA connection
//! manager (IB CM MADs on QP 1 over RoCE v2) between two network
//! namespaces, tool to tool, and against stock perftest's `-R` under
//! `roce-xdp exec` (the drop-in librdmacm).
//!
//! Every test needs root (`#[ignore = "needs root"]`): run them as root
//! with `cargo test --release -p roce-xdp --test perftest_cm -- --include-ignored`.

mod drop_in;
#[allow(dead_code)]
#[path = "datapath/support.rs"]
mod support;

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

use support::*;

const PORT: u16 = 18515;

/// Runs `tool -R` server and client with the same extra args (the client
/// also records its frames to `pcap`); checks that the server's side used
/// no TCP listener; returns (server stdout, client stdout).
fn run_cm(net: &Net, tool: &str, extra: &[&str], pcap: &str) -> (String, String) {
    let server_ip = net.server_ip();
    let mut sargs = vec![tool, "-R", "--iface", &net.pair.b.ifname];
    sargs.extend_from_slice(extra);
    let server = net.server(&sargs);
    net.wait_engine();
    // QP 1 and the listener come right after the datapath.
    std::thread::sleep(Duration::from_millis(300));
    let ss = Command::new("ip")
        .args(["netns", "exec", &net.pair.b.netns, "ss", "-Hltn"])
        .output()
        .expect("ss");
    assert!(
        !text(&ss.stdout).contains(&format!(":{PORT} ")),
        "-R must not listen on TCP: {}",
        text(&ss.stdout)
    );
    // `roce-xdp stats` shows the CM agent's counters while it listens.
    let st = net.server_stats();
    for key in [
        "mads_received",
        "malformed",
        "retransmissions",
        "established",
    ] {
        assert!(st["cm"][key].is_u64(), "stats lacks cm.{key}: {st}");
    }
    let mut cargs = vec![tool, "-R", server_ip.as_str(), "--pcap", pcap];
    cargs.extend_from_slice(extra);
    let client = net.client(&cargs);
    let server = wait_output(server, Duration::from_secs(60));
    assert!(
        client.status.success() && server.status.success(),
        "{tool} -R: client {:?} server {:?}\nclient stderr: {}\nserver stderr: {}\nclient stdout: {}",
        client.status,
        server.status,
        text(&client.stderr),
        text(&server.stderr),
        text(&client.stdout),
    );
    for o in [&client, &server] {
        assert!(!text(&o.stderr).contains("panicked"), "{}", text(&o.stderr));
    }
    (text(&server.stdout), text(&client.stdout))
}

/// The CM MADs in a pcap of RoCE v2 frames (IPv4, untagged): attribute
/// ID -> count, for UD SENDs to QP 1 whose MAD is of the CM class.
fn cm_mads(pcap: &str) -> BTreeMap<u16, usize> {
    let b = std::fs::read(pcap).expect("the client's pcap");
    assert!(b.len() >= 24, "pcap header");
    let mut at = 24;
    let mut mads = BTreeMap::new();
    while at + 16 <= b.len() {
        let incl = u32::from_le_bytes(b[at + 8..at + 12].try_into().unwrap()) as usize;
        let f = &b[at + 16..(at + 16 + incl).min(b.len())];
        at += 16 + incl;
        // Ethernet 14, IPv4 20, UDP 8, BTH 12, DETH 8, MAD 256.
        if f.len() < 14 + 20 + 8 + 12 + 8 + 24 || f[12..14] != [0x08, 0x00] {
            continue;
        }
        let udp = &f[34..];
        if u16::from_be_bytes([udp[2], udp[3]]) != 4791 {
            continue;
        }
        let bth = &udp[8..];
        let dest_qp = u32::from_be_bytes([0, bth[5], bth[6], bth[7]]);
        // UD SEND Only (0x64) to QP 1.
        if bth[0] != 0x64 || dest_qp != 1 {
            continue;
        }
        let mad = &bth[12 + 8..];
        // Base version 1, class 0x07 (CM), class version 2.
        if mad[0] != 1 || mad[1] != 0x07 || mad[2] != 2 {
            continue;
        }
        let attr = u16::from_be_bytes([mad[16], mad[17]]);
        *mads.entry(attr).or_default() += 1;
    }
    mads
}

/// The data lines of a table: the lines after the header up to the rule.
fn rows(out: &str, header_start: &str) -> Vec<Vec<f64>> {
    let mut v = Vec::new();
    for l in out
        .lines()
        .skip_while(|l| !l.starts_with(header_start))
        .skip(1)
    {
        if l.starts_with("---") {
            break;
        }
        v.push(
            l.split_whitespace()
                .map(|x| x.parse::<f64>().expect("numeric column"))
                .collect(),
        );
    }
    v
}

/// REQ, REP, RTU for the control QP and each test QP, then DREQ / DREP
/// for each: what the client sent and received on QP 1.
fn assert_cm_exchange(mads: &BTreeMap<u16, usize>, connections: usize, what: &str) {
    let n = |a: u16| mads.get(&a).copied().unwrap_or(0);
    assert_eq!(n(0x10), connections, "{what}: REQs in {mads:x?}");
    assert_eq!(n(0x13), connections, "{what}: REPs in {mads:x?}");
    assert_eq!(n(0x14), connections, "{what}: RTUs in {mads:x?}");
    assert_eq!(n(0x12), 0, "{what}: no REJ in {mads:x?}");
    assert!(n(0x15) >= connections, "{what}: DREQs in {mads:x?}");
    assert!(n(0x16) >= connections, "{what}: DREPs in {mads:x?}");
}

#[test]
#[ignore = "needs root"]
fn write_bw_read_bw_and_send_lat_tool_to_tool_with_r() {
    require_root();
    let _g = serial();
    let net = Net::new(1500);
    let dir = tempdir();
    for (tool, qps) in [("write-bw", 2usize), ("read-bw", 1)] {
        let pcap = format!("{dir}/{tool}.pcap");
        let q = qps.to_string();
        let (server, client) = run_cm(&net, tool, &["-s", "65536", "-n", "500", "-q", &q], &pcap);
        for out in [&client, &server] {
            let r = rows(out, " #bytes");
            assert_eq!(r.len(), 1, "{tool}: {out}");
            assert_eq!((r[0][0], r[0][1]), (65536.0, 500.0), "{tool}: {out}");
            assert!(r[0][3] > 0.0 && r[0][5] > 0.0, "{tool}: {out}");
        }
        // The control QP's connection and one per test QP.
        assert_cm_exchange(&cm_mads(&pcap), 1 + qps, tool);
    }
    let pcap = format!("{dir}/send-lat.pcap");
    let (server, client) = run_cm(&net, "send-lat", &["-s", "64", "-n", "200"], &pcap);
    for (side, out) in [("client", &client), ("server", &server)] {
        let r = rows(out, " #bytes #iterations");
        assert_eq!(r.len(), 1, "{side}: {out}");
        assert_eq!(r[0].len(), 9, "{side}: {out}");
        assert_eq!(r[0][0], 64.0, "{side}: {out}");
        assert!(r[0][2] > 0.0 && r[0][2] <= r[0][3], "{side}: {out}");
    }
    assert_cm_exchange(&cm_mads(&pcap), 2, "send-lat");
    assert!(
        !net.xdp_attached(true) && !net.xdp_attached(false),
        "XDP left attached"
    );
}

#[test]
#[ignore = "needs root"]
fn the_other_tools_with_r() {
    require_root();
    let _g = serial();
    let net = Net::new(1500);
    let dir = tempdir();
    let pcap = format!("{dir}/send-bw.pcap");
    let (server, client) = run_cm(&net, "send-bw", &["-s", "4096", "-n", "300"], &pcap);
    for out in [&client, &server] {
        let r = rows(out, " #bytes");
        assert_eq!(r.len(), 1, "send-bw: {out}");
        assert_eq!((r[0][0], r[0][1]), (4096.0, 300.0), "send-bw: {out}");
    }
    assert_cm_exchange(&cm_mads(&pcap), 2, "send-bw");
    for tool in ["write-lat", "read-lat"] {
        let pcap = format!("{dir}/{tool}.pcap");
        let (_, client) = run_cm(&net, tool, &["-s", "64", "-n", "100"], &pcap);
        let r = rows(&client, " #bytes #iterations");
        assert_eq!(r.len(), 1, "{tool}: {client}");
        assert_eq!((r[0][0], r[0].len()), (64.0, 9), "{tool}: {client}");
        assert_cm_exchange(&cm_mads(&pcap), 2, tool);
    }
    let pcap = format!("{dir}/write-bw-a.pcap");
    let (_, client) = run_cm(&net, "write-bw", &["-a", "-n", "5", "--json"], &pcap);
    let v: serde_json::Value = serde_json::from_str(&client).unwrap();
    assert_eq!(v["results"].as_array().map(Vec::len), Some(23), "{client}");
    assert_cm_exchange(&cm_mads(&pcap), 2, "write-bw -a");
    assert!(
        !net.xdp_attached(true) && !net.xdp_attached(false),
        "XDP left attached"
    );
}

#[test]
#[ignore = "needs root"]
fn a_client_with_r_and_no_server_fails_with_a_message() {
    require_root();
    let _g = serial();
    let net = Net::new(1500);
    let ip = net.server_ip();
    // Nothing listens through the CM in b: the REQs go unanswered.
    let out = net.client(&["write-bw", "-R", &ip, "--timeout", "3", "-n", "10"]);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert!(err.contains("-R"), "names the option: {err}");
}

/// Our tool in side `ours` of a drop-in pair (not under exec: the tool
/// is the engine), stock perftest under `roce-xdp exec` in the other;
/// the server first. Returns (our output, stock output).
fn against_stock(
    pair: &drop_in::Pair,
    tool: &str,
    stock: &str,
    args: &[&str],
    ours_is_server: bool,
) -> (String, String) {
    use std::process::Stdio;
    let (ours, theirs) = if ours_is_server { (0, 1) } else { (1, 0) };
    let ours_cmd = |extra: Option<&str>| {
        let mut c = Command::new("ip");
        c.args([
            "netns",
            "exec",
            &pair.ns[ours],
            bin(),
            tool,
            "-R",
            "--iface",
        ])
        .arg(&pair.ifs[ours])
        .args(args)
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
        c
    };
    let mut stock_args = vec![stock, "-R"];
    stock_args.extend_from_slice(args);
    let (ours_out, stock_out) = if ours_is_server {
        let s = ours_cmd(None).spawn().expect("our server");
        std::thread::sleep(Duration::from_millis(1500));
        stock_args.push(&pair.ips[0]);
        let c = pair
            .exec(theirs, &stock_args)
            .spawn()
            .expect("stock client");
        let c = drop_in::finish(c, drop_in::LIMIT);
        (drop_in::finish(s, drop_in::LIMIT), c)
    } else {
        let s = pair
            .exec(theirs, &stock_args)
            .spawn()
            .expect("stock server");
        std::thread::sleep(Duration::from_millis(1500));
        let c = ours_cmd(Some(&pair.ips[0])).spawn().expect("our client");
        let c = drop_in::finish(c, drop_in::LIMIT);
        let s = drop_in::finish(s, drop_in::LIMIT);
        (c, s)
    };
    let o = drop_in::assert_ok(&format!("roce-xdp {tool} -R"), &ours_out);
    let t = drop_in::assert_ok(&format!("{stock} -R"), &stock_out);
    (o, t)
}

/// Stock perftest 4.5's `-R` against ours, both ways, under `roce-xdp
/// exec` with the drop-in librdmacm: write-bw, read-bw, send-lat.
#[test]
#[ignore = "needs root, perftest and the drop-in archives (cargo build --release -p roce-xdp-ibverbs -p roce-xdp-rdmacm)"]
fn stock_perftest_r_against_our_tools_r() {
    require_root();
    let _g = serial();
    drop_in::prerequisites();
    let pair = drop_in::Pair::create();
    for (tool, stock, row) in [
        ("write-bw", "ib_write_bw", " 65536 "),
        ("read-bw", "ib_read_bw", " 65536 "),
        ("send-lat", "ib_send_lat", " 2 "),
    ] {
        let args: &[&str] = if tool == "send-lat" {
            &["-n", "200", "-s", "2"]
        } else {
            &["-n", "300", "-s", "65536"]
        };
        for ours_is_server in [true, false] {
            let (o, t) = against_stock(&pair, tool, stock, args, ours_is_server);
            println!("--- {tool} (ours the server: {ours_is_server})\n{o}\n--- {stock}\n{t}");
            assert!(
                t.contains(row) && t.contains("rdma_cm"),
                "{stock}:\n{t}\nours:\n{o}"
            );
            assert!(
                o.contains(row),
                "{tool} (server: {ours_is_server}):\n{o}\nstock:\n{t}"
            );
        }
    }
}

fn tempdir() -> String {
    let d = std::env::temp_dir().join(format!("roce-xdp-perftest-cm-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.to_string_lossy().into_owned()
}
