//! `roce-xdp sim`: the JSON summary and the exit code.

use crate::roce_xdp;

fn sim(args: &[&str]) -> (i32, String) {
    let out = roce_xdp(&[&["sim"], args].concat());
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn json_summary_under_loss_verifies_every_byte() {
    let (code, out) = sim(&[
        "--op",
        "write",
        "--messages",
        "50",
        "--size",
        "10000",
        "--mtu",
        "1024",
        "--qps",
        "2",
        "--loss",
        "0.05",
        "--reorder",
        "0.02",
        "--duplicate",
        "0.02",
        "--corrupt",
        "0.02",
        "--latency-us",
        "3",
        "--seed",
        "11",
        "--json",
    ]);
    assert_eq!(code, 0, "{out}");
    let v: serde_json::Value = serde_json::from_str(out.trim()).expect("one JSON object");
    assert_eq!(v["messages_completed"], 50);
    assert_eq!(v["bytes_verified"], 500_000);
    assert_eq!(v["data_errors"], 0);
    assert_eq!(v["duplicate_completions"], 0);
    assert!(v["packets_sent"].as_u64().unwrap() > 0);
    assert!(v["retransmitted_packets"].as_u64().unwrap() > 0);
    for k in ["naks_sent", "timeouts", "sim_time_us"] {
        assert!(v[k].is_u64(), "{k}");
    }
}

#[test]
fn every_op_runs_in_text_mode() {
    for op in ["send", "read", "atomic"] {
        let (code, out) = sim(&[
            "--op",
            op,
            "--messages",
            "20",
            "--size",
            "3000",
            "--loss",
            "0.01",
        ]);
        assert_eq!(code, 0, "{out}");
        assert!(out.contains("OK: every message delivered once"), "{out}");
    }
}

#[test]
fn bad_options_exit_2_and_lost_messages_exit_nonzero() {
    assert_eq!(sim(&["--mtu", "300"]).0, 2);
    assert_eq!(sim(&["--loss", "1.5"]).0, 2);
    // Every frame lost: nothing can complete within the time limit.
    let (code, out) = sim(&[
        "--messages",
        "3",
        "--loss",
        "1",
        "--max-sim-seconds",
        "1",
        "--json",
    ]);
    assert_ne!(code, 0);
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["ok"], false);
    assert_eq!(v["messages_completed"], 0);
}
