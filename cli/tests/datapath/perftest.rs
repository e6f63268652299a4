//! The six perftest-style tools, client to server between two network
//! namespaces over veth: table output (sizes, iterations, nonzero
//! bandwidth, every latency column) and the `--json` schema.

use std::process::Command;
use std::time::Duration;

use crate::support::*;

/// Runs `tool` server + client with the same extra args; returns (server
/// stdout, client stdout).
pub(crate) fn run_tool(net: &Net, tool: &str, extra: &[&str]) -> (String, String) {
    let server_ip = net.server_ip();
    let mut sargs = vec![tool, "--iface", &net.pair.b.ifname];
    sargs.extend_from_slice(extra);
    let server = net.server(&sargs);
    net.wait_listening(18515);
    let mut cargs = vec![tool, server_ip.as_str()];
    cargs.extend_from_slice(extra);
    let client = net.client(&cargs);
    let server = wait_output(server, Duration::from_secs(60));
    assert!(
        client.status.success() && server.status.success(),
        "{tool}: client {:?} server {:?}\nclient stderr: {}\nserver stderr: {}",
        client.status,
        server.status,
        text(&client.stderr),
        text(&server.stderr)
    );
    for o in [&client, &server] {
        assert!(!text(&o.stderr).contains("panicked"), "{}", text(&o.stderr));
    }
    (text(&server.stdout), text(&client.stdout))
}

/// The data lines of a table: the lines after the header up to the rule.
fn rows(out: &str, header_start: &str) -> Vec<Vec<f64>> {
    let mut lines = out
        .lines()
        .skip_while(|l| !l.starts_with(header_start))
        .skip(1);
    let mut v = Vec::new();
    for l in lines.by_ref() {
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

#[test]
#[ignore = "needs root"]
fn every_tool_between_two_namespaces() {
    require_root();
    let _g = serial();
    let net = Net::new(1500);
    for tool in ["write-bw", "read-bw", "send-bw"] {
        let (server, client) = run_tool(&net, tool, &["-s", "4096", "-n", "300"]);
        assert!(client.contains("#bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   BW average[MB/sec]   MsgRate[Mpps]"), "{client}");
        for out in [&client, &server] {
            let r = rows(out, " #bytes");
            assert_eq!(r.len(), 1, "{tool}: {out}");
            assert_eq!(r[0].len(), 6);
            assert_eq!((r[0][0], r[0][1]), (4096.0, 300.0), "{tool}: {out}");
            assert!(
                r[0][2] > 0.0 && r[0][3] > 0.0 && r[0][4] > 0.0 && r[0][5] > 0.0,
                "{tool}: {out}"
            );
            assert!(r[0][2] >= r[0][3], "peak >= average: {out}");
        }
    }
    for tool in ["write-lat", "read-lat", "send-lat"] {
        let (server, client) = run_tool(&net, tool, &["-s", "64", "-n", "100"]);
        assert!(client.contains("t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec]"), "{client}");
        for (side, out) in [("client", &client), ("server", &server)] {
            let r = rows(out, " #bytes #iterations");
            // As perftest: a read-lat server measures nothing; write-lat
            // has no answer to the client's last WRITE, and servers leave
            // out the wait for the client's first message.
            if side == "server" && tool == "read-lat" {
                assert!(r.is_empty(), "{out}");
                continue;
            }
            assert_eq!(r.len(), 1, "{tool}: {out}");
            let r = &r[0];
            assert_eq!(r.len(), 9, "{tool}: {out}");
            let full = side == "client" && tool != "write-lat";
            assert_eq!(
                (r[0], r[1]),
                (64.0, if full { 100.0 } else { 99.0 }),
                "{tool} {side}"
            );
            let (min, max, typ, avg, p99, p999) = (r[2], r[3], r[4], r[5], r[7], r[8]);
            assert!(
                min > 0.0 && min <= typ && typ <= max && min <= avg && avg <= max,
                "{out}"
            );
            assert!(typ <= p99 && p99 <= p999 && p999 <= max, "{out}");
        }
    }
    // Atomics: 8-byte FETCH_AND_ADDs whatever -s says; atomic-lat checks
    // that the returned old values increase.
    let (_, client) = run_tool(&net, "atomic-bw", &["-n", "200"]);
    let r = rows(&client, " #bytes");
    assert_eq!((r[0][0], r[0][1]), (8.0, 200.0), "{client}");
    assert!(r[0][5] > 0.0, "{client}");
    let (_, client) = run_tool(&net, "atomic-lat", &["-n", "200"]);
    let r = rows(&client, " #bytes #iterations");
    assert_eq!((r[0][0], r[0][1], r[0].len()), (8.0, 200.0, 9), "{client}");
    assert!(
        !net.xdp_attached(true) && !net.xdp_attached(false),
        "XDP left attached"
    );
}

#[test]
#[ignore = "needs root"]
fn json_schema_and_size_sweep() {
    require_root();
    let _g = serial();
    let net = Net::new(1500);
    // -a: every power of two from 2 B to 8 MiB.
    let (server, client) = run_tool(&net, "write-bw", &["-a", "-n", "2", "--json"]);
    for (side, out) in [("client", &client), ("server", &server)] {
        let v: serde_json::Value =
            serde_json::from_str(out).unwrap_or_else(|e| panic!("{e}: {out}"));
        assert_eq!(v["schema_version"], 1);
        assert_eq!(v["test"]["tool"], "write-bw");
        assert_eq!(v["test"]["verb"], "RDMA_Write");
        assert_eq!(v["test"]["kind"], "bw");
        assert_eq!(v["test"]["mtu"], 1024);
        let rows = v["results"].as_array().unwrap();
        let sizes: Vec<u64> = rows.iter().map(|r| r["bytes"].as_u64().unwrap()).collect();
        // perftest's server gets the client's last result only.
        let want: Vec<u64> = match side {
            "client" => (1..=23).map(|i| 1u64 << i).collect(),
            _ => vec![1 << 23],
        };
        assert_eq!(sizes, want);
        for r in rows {
            assert_eq!(r["iterations"], 2);
            for k in [
                "bw_peak_gbps",
                "bw_avg_gbps",
                "bw_avg_mbps",
                "msg_rate_mpps",
            ] {
                assert!(r[k].as_f64().unwrap() > 0.0, "{k} in {r}");
            }
        }
    }
    assert_eq!(client.lines().next(), Some("{"), "JSON only on stdout");

    let (_, client) = run_tool(&net, "read-lat", &["-s", "128", "-n", "50", "--json"]);
    let v: serde_json::Value = serde_json::from_str(&client).unwrap();
    assert_eq!(v["test"]["kind"], "lat");
    let r = &v["results"][0];
    assert_eq!(
        (r["bytes"].as_u64(), r["iterations"].as_u64()),
        (Some(128), Some(50))
    );
    for k in [
        "t_min_us",
        "t_max_us",
        "t_typical_us",
        "t_avg_us",
        "t_stdev_us",
        "p99_us",
        "p99_9_us",
    ] {
        assert!(r[k].is_number(), "{k} in {r}");
    }

    // IPv6: the client speaks to the server's IPv6 address; GIDs are IPv6.
    let server = net.server(&["send-lat", "--iface", &net.pair.b.ifname, "--json"]);
    net.wait_listening(18515);
    let v6 = net.pair.b.ipv6.to_string();
    let out = net.client(&[
        "send-lat",
        &v6,
        "-n",
        "20",
        "-s",
        "32",
        "--json",
        "--log-level",
        "info",
    ]);
    let _ = wait_output(server, Duration::from_secs(30));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_str(&text(&out.stdout)).unwrap();
    assert!(
        v["test"]["remote"]
            .as_str()
            .unwrap()
            .contains("GID fd00:47::2"),
        "{v}"
    );
    assert_eq!(v["results"][0]["iterations"], 20);
    // --log-level info shows the engine's start; the default is quiet.
    assert!(
        text(&out.stderr).contains("datapath open"),
        "{}",
        text(&out.stderr)
    );

    // -D: a timed run reports whatever iterations fit; -q spreads the
    // messages over several QPs, --tx-depth bounds each one's window.
    let (_, client) = run_tool(
        &net,
        "send-bw",
        &[
            "-s",
            "1024",
            "-D",
            "1",
            "-q",
            "3",
            "--tx-depth",
            "8",
            "--json",
        ],
    );
    let v: serde_json::Value = serde_json::from_str(&client).unwrap();
    assert!(v["results"][0]["iterations"].as_u64().unwrap() > 0);
    assert_eq!(
        (v["test"]["qps"].as_u64(), v["test"]["tx_depth"].as_u64()),
        (Some(3), Some(8))
    );
    let quiet = net
        .cmd(&net.pair.a.netns, &["write-bw", "--iface", "nosuch0"])
        .output()
        .unwrap();
    assert!(
        !text(&quiet.stderr).contains("INFO"),
        "{}",
        text(&quiet.stderr)
    );
}

#[test]
#[ignore = "needs root"]
fn pcap_capture_is_readable_by_decode_and_tshark() {
    require_root();
    let _g = serial();
    let net = Net::new(1500);
    let pcap = net.run_dir.join("client.pcap");
    let server = net.server(&["write-bw", "--iface", &net.pair.b.ifname]);
    net.wait_listening(18515);
    let ip = net.server_ip();
    let out = net.client(&[
        "write-bw",
        &ip,
        "-s",
        "2048",
        "-n",
        "20",
        "--pcap",
        pcap.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let _ = wait_output(server, Duration::from_secs(30));
    assert!(
        text(&out.stderr).contains("captured"),
        "{}",
        text(&out.stderr)
    );
    // 20 messages of 2 KiB at PMTU 1024 = 40 WRITE packets at least.
    let dec = roce_xdp(&["decode", pcap.to_str().unwrap()]);
    assert!(dec.status.success(), "{}", text(&dec.stderr));
    let d = text(&dec.stdout);
    assert!(d.matches("WRITE").count() >= 40, "{d}");
    let t = std::process::Command::new("tshark")
        .args([
            "-r",
            pcap.to_str().unwrap(),
            "-Y",
            "infiniband",
            "-T",
            "fields",
            "-e",
            "infiniband.bth.opcode",
        ])
        .output()
        .expect("this test needs tshark (scripts/setup-deps.sh installs it)");
    assert!(t.status.success(), "tshark: {}", text(&t.stderr));
    let n = text(&t.stdout).lines().count();
    assert!(n >= 40, "tshark saw {n} RoCE frames");
}

#[test]
#[ignore = "needs root"]
fn progress_bar_on_a_terminal_only() {
    require_root();
    assert!(
        Command::new("script").arg("--version").output().is_ok(),
        "this test needs script(1) (util-linux) to give the client a terminal"
    );
    let _g = serial();
    let net = Net::new(1500);
    let server = net.server(&["write-bw", "--iface", &net.pair.b.ifname]);
    net.wait_listening(18515);
    // script(1) gives the client a pseudo-terminal as stdout.
    let client = format!(
        "ip netns exec {} {} write-bw {} -D 2 -s 1024",
        net.pair.a.netns,
        bin(),
        net.server_ip()
    );
    let out = Command::new("script")
        .args(["-qec", &client, "/dev/null"])
        .env("ROCE_XDP_RUN_DIR", &net.run_dir)
        .output()
        .unwrap();
    let _ = wait_output(server, Duration::from_secs(30));
    let tty = text(&out.stdout);
    assert!(out.status.success(), "{tty}");
    assert!(tty.contains("1024 B [") && tty.contains(" of 2s"), "{tty}");
    // Piped (not a terminal): no bar, only the table.
    let server = net.server(&["write-bw", "--iface", &net.pair.b.ifname]);
    net.wait_listening(18515);
    let ip = net.server_ip();
    let out = net.client(&["write-bw", &ip, "-D", "2", "-s", "1024"]);
    let _ = wait_output(server, Duration::from_secs(30));
    assert!(out.status.success());
    assert!(
        !text(&out.stdout).contains("1024 B ["),
        "{}",
        text(&out.stdout)
    );
}
