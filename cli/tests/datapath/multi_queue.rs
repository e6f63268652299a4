//! Several queues as on a NIC with RSS (docs/multi-queue.md): the server's
//! veth has four queues and its traffic arrives through a Linux bridge that
//! spreads flows over them by hash (VethPair::create_bridged). `serve
//! --queues 0-3` then serves `write-bw`, `read-bw` and `send-bw` with eight
//! QPs each, whichever queue each QP's packets land on; and `loopback
//! --bridge --queues 4` moves 16 QPs' messages, every byte verified.

use std::time::Duration;

use crate::support::*;

/// Sum of a per-queue counter of a `stats --json` document.
fn total(v: &serde_json::Value, counter: &str) -> u64 {
    v["queues"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| q["counters"][counter].as_u64().unwrap_or(0))
        .sum()
}

#[test]
#[ignore = "needs root"]
fn serve_on_four_rss_spread_queues_serves_every_qp() {
    require_root();
    let _g = serial();
    let net = Net::bridged(1500, 4);
    let b = &net.pair.b;
    let serve = net.server(&["serve", "--iface", &b.ifname, "--queues", "0-3", "--json"]);
    net.wait_listening(18515);
    net.wait_engine();
    let ip = net.server_ip();
    for tool in ["write-bw", "read-bw", "send-bw"] {
        let out = net.client(&[
            tool,
            &ip,
            "-q",
            "8",
            "-s",
            "4096",
            "-n",
            "400",
            "--json",
            "--timeout",
            "20",
        ]);
        assert!(out.status.success(), "{tool}: {}", text(&out.stderr));
        let v: serde_json::Value = serde_json::from_str(&text(&out.stdout))
            .unwrap_or_else(|e| panic!("{tool}: {e}: {}", text(&out.stdout)));
        let row = &v["results"][0];
        assert_eq!(row["bytes"], 4096, "{tool}: {v}");
        assert!(
            row["bw_avg_gbps"].as_f64().unwrap_or(0.0) > 0.0,
            "{tool}: {v}"
        );
    }
    let v = net.server_stats();
    let queues = v["queues"].as_array().unwrap();
    assert_eq!(queues.len(), 4);
    let busy = queues
        .iter()
        .filter(|q| q["counters"]["xsk_rx_packets"].as_u64().unwrap_or(0) > 0)
        .count();
    assert!(busy > 1, "packets on one queue only: {v}");
    assert_eq!(total(&v, "dropped_unknown_qp"), 0, "{v}");
    // The QPs whose first packet arrived elsewhere moved there.
    assert!(total(&v, "qp_migrations") > 0, "{v}");
    // Detours happen only before a QP has moved: at most its first window
    // (128 messages of 4 packets at PMTU 1024) per QP that moved. (Their
    // share of all packets is measured by the bench's multi-queue row and
    // by engine/tests/datapath/multi_queue.rs, which checks that none
    // happen after the first messages.)
    let handoff = total(&v, "rx_handoff");
    let moved = total(&v, "qp_migrations");
    assert!(
        handoff <= moved * 128 * 4,
        "{handoff} detours for {moved} moved QPs: {v}"
    );
    assert!(std::process::Command::new("kill")
        .args(["-TERM", &serve.id().to_string()])
        .status()
        .unwrap()
        .success());
    let out = wait_output(serve, Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
}

#[test]
#[ignore = "needs root"]
fn loopback_over_a_bridge_with_four_queues_verifies_every_byte() {
    require_root();
    let _g = serial();
    for op in ["write", "read", "send"] {
        let out = roce_xdp(&[
            "loopback",
            "--op",
            op,
            "--qps",
            "16",
            "--queues",
            "4",
            "--bridge",
            "--messages",
            "800",
            "--size",
            "16384",
            "--json",
        ]);
        assert!(out.status.success(), "{op}: {}", text(&out.stderr));
        let v: serde_json::Value = serde_json::from_str(&text(&out.stdout))
            .unwrap_or_else(|e| panic!("{op}: {e}: {}", text(&out.stdout)));
        assert_eq!(v["messages_completed"], 800, "{op}: {v}");
        assert_eq!(v["bytes_verified"], 800 * 16384, "{op}: {v}");
        assert_eq!(v["data_errors"], 0, "{op}: {v}");
        assert_eq!(v["bridge"], true);
        for side in ["requester", "responder"] {
            let per_queue: Vec<u64> = v["rx_packets_per_queue"][side]
                .as_array()
                .unwrap()
                .iter()
                .map(|n| n.as_u64().unwrap())
                .collect();
            assert_eq!(per_queue.len(), 4);
            assert!(
                per_queue.iter().filter(|&&n| n > 0).count() > 1,
                "{op}: the {side} received on one queue only: {per_queue:?}"
            );
        }
    }
}
