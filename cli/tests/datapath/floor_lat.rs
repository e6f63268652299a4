//! `roce-xdp floor-lat`, the bare AF_XDP round trip between two hosts:
//! the echo on four queues a bridge spreads flows over (as RSS does on a
//! NIC), pings from several UDP source ports, with and without the
//! request+ACK pattern, over IPv4 and IPv6, a report in the latency
//! tools' JSON schema, and the echo's count per queue when Ctrl-C ends
//! it.

use std::process::Command;
use std::time::Duration;

use crate::support::*;

#[test]
#[ignore = "needs root"]
fn floor_lat_echoes_on_every_queue_and_reports_like_the_latency_tools() {
    require_root();
    let _g = serial();
    let net = Net::bridged(1500, 4);
    let b = &net.pair.b;
    let echo = net.server(&["floor-lat", "--iface", &b.ifname, "--queues", "0-3"]);
    let ip = net.server_ip();
    let a = net.pair.a.ifname.clone();
    let sports = [
        "49152", "49153", "49154", "49155", "50000", "50001", "50002", "50003",
    ];
    for (i, sport) in sports.iter().enumerate() {
        let acks = i % 2 == 1;
        let mut args = vec![
            "floor-lat",
            &ip,
            "--iface",
            &a,
            "--sport",
            sport,
            "-n",
            "200",
            "-s",
            "32",
            "--json",
        ];
        if acks {
            args.push("--acks");
        }
        let out = net.client(&args);
        assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
        let v: serde_json::Value = serde_json::from_str(&text(&out.stdout)).unwrap();
        assert_eq!(v["test"]["tool"], "floor-lat", "{v}");
        assert_eq!(v["test"]["kind"], "lat", "{v}");
        assert_eq!(
            v["test"]["verb"],
            if acks {
                "AF_XDP echo, request+ACK"
            } else {
                "AF_XDP echo"
            },
            "{v}"
        );
        let r = &v["results"][0];
        assert_eq!(
            (r["bytes"].as_u64(), r["iterations"].as_u64()),
            (Some(32), Some(200))
        );
        let (min, typ, p99, max) = (
            r["t_min_us"].as_f64().unwrap(),
            r["t_typical_us"].as_f64().unwrap(),
            r["p99_us"].as_f64().unwrap(),
            r["t_max_us"].as_f64().unwrap(),
        );
        assert!(0.0 < min && min <= typ && typ <= p99 && p99 <= max, "{r}");
    }
    // IPv6: the same, to the echo's IPv6 address.
    let v6 = net.pair.b.ipv6.to_string();
    for acks in [false, true] {
        let mut args = vec!["floor-lat", &v6, "--iface", &a, "-n", "100", "--json"];
        if acks {
            args.push("--acks");
        }
        let out = net.client(&args);
        assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
        let v: serde_json::Value = serde_json::from_str(&text(&out.stdout)).unwrap();
        assert_eq!(v["test"]["remote"], v6.as_str(), "{v}");
        assert_eq!(v["results"][0]["iterations"], 100, "{v}");
    }
    // The table, as the latency tools print it.
    let out = net.client(&["floor-lat", &ip, "--iface", &a, "-n", "50"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let table = text(&out.stdout);
    assert!(table.contains("t_typical[usec]"), "{table}");
    assert!(table.contains("AF_XDP echo Latency Test"), "{table}");

    assert!(Command::new("kill")
        .args(["-INT", &echo.id().to_string()])
        .status()
        .unwrap()
        .success());
    let out = wait_output(echo, Duration::from_secs(10));
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    // Every ping was echoed once (the first ping of a run may have been
    // sent again while the echo started: at least as many), and the
    // bridge's hash put the flows on more than one queue.
    let line = err
        .lines()
        .find(|l| l.contains("echoed"))
        .unwrap_or_else(|| panic!("no summary: {err}"));
    let counts: Vec<u64> = (0..4)
        .map(|q| {
            let key = format!("queue {q}: ");
            let at = line.find(&key).unwrap_or_else(|| panic!("{key} in {line}")) + key.len();
            line[at..]
                .split(|c: char| !c.is_ascii_digit())
                .next()
                .unwrap()
                .parse()
                .unwrap()
        })
        .collect();
    let expected = sports.len() as u64 * (200 + 20 + 1) + 2 * (100 + 10 + 1) + 50 + 5 + 1;
    assert!(counts.iter().sum::<u64>() >= expected, "{line}");
    assert!(
        counts.iter().filter(|&&n| n > 0).count() > 1,
        "one queue only: {line}"
    );
    let acked: u64 = line
        .split("), ")
        .nth(1)
        .and_then(|t| t.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no ACK count: {line}"));
    let acked_pings = 4 * (200 + 20 + 1) + (100 + 10 + 1);
    assert!(acked >= acked_pings, "{line}");
}
