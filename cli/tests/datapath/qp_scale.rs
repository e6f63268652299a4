//! Thousands of QPs over veth (issue "Thousands of QPs per engine at a
//! flat per-packet cost"): `loopback --qps 4096` with its default 64 KiB
//! messages (WRITE, SEND, READ) and `write-bw -q 1000` complete, every
//! byte verified. (SEND also stopped at setup before: 4096 QPs' receives
//! filled the engine's work queue, and the loopback now waits for room.) Before
//! the endpoint's in-flight limit, a thousand QPs starting a 16-packet
//! message at once overflowed the responder's AF_XDP ring, and their
//! retransmit timers fired before the round robin reached their last
//! packets: `loopback --qps 4096` stalled with 5 of 1000 messages done.

use crate::support::*;

#[test]
#[ignore = "needs root"]
fn loopback_with_4096_qps_completes_and_the_in_flight_limit_holds_qps_back() {
    require_root();
    let _g = serial();
    for op in ["write", "send", "read"] {
        let out = roce_xdp(&["loopback", "--op", op, "--qps", "4096", "--json"]);
        assert!(out.status.success(), "{op}: {}", text(&out.stderr));
        let v: serde_json::Value = serde_json::from_str(&text(&out.stdout)).unwrap();
        assert_eq!(v["qps"], 4096, "{op}: {v}");
        assert_eq!(v["messages_completed"], 1000, "{op}: {v}");
        assert_eq!(v["bytes_verified"], 1000 * 65536, "{op}: {v}");
        assert_eq!(v["data_errors"], 0, "{op}: {v}");
        // Memory for what each QP has in flight, no more: the 1000 QPs
        // with a message a slot on each side, not a 16-message window (3
        // GiB for WRITE, 12 GiB for SEND's receives before), and the 3096
        // with none one slot on each side between them (one queue).
        assert_eq!(v["registered_bytes"], 1001 * 2 * 65536, "{op}: {v}");
        // A thousand QPs had a message at once: the limit made most wait.
        assert!(
            v["requester"]["tx_inflight_waits"].as_u64().unwrap_or(0) > 0,
            "{op}: {v}"
        );
    }
}

#[test]
#[ignore = "needs root"]
fn write_bw_with_1000_qps_between_two_namespaces() {
    require_root();
    let _g = serial();
    let net = Net::new(1500);
    let (_, client) = crate::perftest::run_tool(
        &net,
        "write-bw",
        &["-q", "1000", "-s", "65536", "-n", "4000", "--json"],
    );
    let v: serde_json::Value = serde_json::from_str(&client).unwrap();
    assert_eq!(v["test"]["qps"], 1000, "{v}");
    let row = &v["results"][0];
    assert_eq!(row["iterations"], 4000, "{v}");
    assert!(row["bw_avg_gbps"].as_f64().unwrap_or(0.0) > 0.0, "{v}");
}
