//! `roce-xdp sim` congestion flags and `roce-xdp plot`, on the binary.

use serde_json::Value;

use crate::roce_xdp;

fn json(out: &std::process::Output) -> Value {
    assert!(
        out.status.success(),
        "stderr: {}\nstdout: {}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

const BOTTLENECK: &[&str] = &[
    "sim",
    "--bottleneck-gbps",
    "25",
    "--rate-gbps",
    "25",
    "--ecn-threshold-kb",
    "5",
    "--senders",
    "2",
    "--messages",
    "128",
    "--size",
    "65536",
    "--mtu",
    "4096",
    "--window",
    "8",
    "--latency-us",
    "2",
    "--json",
];

#[test]
fn bottleneck_summary_trace_and_plot() {
    let dir = std::env::temp_dir().join(format!("roce-xdp-cc-sim-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let trace = dir.join("trace.csv");
    let mut args = BOTTLENECK.to_vec();
    args.extend(["--trace", trace.to_str().unwrap()]);
    let j = json(&roce_xdp(&args));
    assert_eq!(j["ok"], true, "{j}");
    assert_eq!(j["bytes_verified"], 128 * 65536, "{j}");
    assert_eq!(j["dcqcn"], true);
    for key in [
        "cnp_sent",
        "cnp_received",
        "ce_marked",
        "max_queue_kb",
        "jain_index",
    ] {
        assert!(j[key].is_number(), "no {key}: {j}");
    }
    assert!(j["cnp_sent"].as_u64().unwrap() > 0, "{j}");
    assert_eq!(j["cnp_sent"], j["cnp_received"], "{j}");
    assert!(j["ce_marked"].as_u64().unwrap() >= j["cnp_sent"].as_u64().unwrap());
    let rates = j["qp_rates_gbps"].as_array().unwrap();
    assert_eq!(rates.len(), 2);
    assert!(rates.iter().all(|r| r.as_f64().unwrap() > 0.0), "{j}");

    // The trace: header + rows of (time, qp, rate, alpha, queue).
    let csv = std::fs::read_to_string(&trace).unwrap();
    let mut lines = csv.lines();
    assert_eq!(lines.next(), Some("time_us,qp,rate_gbps,alpha,queue_kb"));
    let rows: Vec<Vec<f64>> = lines
        .map(|l| l.split(',').map(|v| v.parse().unwrap()).collect())
        .collect();
    assert!(rows.len() > 100);
    assert!(rows.iter().all(|r| r.len() == 5));
    assert!(
        rows.iter().any(|r| r[2] < 25.0),
        "some rate below line rate"
    );

    // Plot it.
    let svg = dir.join("rate.svg");
    let out = roce_xdp(&[
        "plot",
        trace.to_str().unwrap(),
        "--out",
        svg.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.starts_with("<svg"));
    assert_eq!(text.matches("<polyline").count(), 3, "two QPs + queue");
    // Not an SVG name: refused with a hint.
    let out = roce_xdp(&["plot", trace.to_str().unwrap(), "--out", "x.png"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains(".svg"));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn dcqcn_off_keeps_the_queue_deeper() {
    let on = json(&roce_xdp(BOTTLENECK));
    let mut args = BOTTLENECK.to_vec();
    args.extend(["--dcqcn", "off"]);
    let off = json(&roce_xdp(&args));
    assert_eq!(off["ok"], true, "{off}");
    assert_eq!(off["rp_cnp_handled"], 0);
    assert!(
        off["steady_mean_queue_kb"].as_f64().unwrap()
            > 5.0 * on["steady_mean_queue_kb"].as_f64().unwrap(),
        "on {on}\noff {off}"
    );
}

#[test]
fn random_ce_and_usage_errors() {
    let j = json(&roce_xdp(&[
        "sim",
        "--ce",
        "0.05",
        "--messages",
        "64",
        "--size",
        "65536",
        "--mtu",
        "4096",
        "--json",
    ]));
    assert_eq!(j["ok"], true);
    assert_eq!(j["senders"], 1);
    assert!(j["ce_marked"].as_u64().unwrap() > 0, "{j}");
    assert!(j["cnp_sent"].as_u64().unwrap() > 0, "{j}");
    // Congestion runs WRITE streams only; a probability must be one.
    for bad in [
        &["sim", "--ce", "0.1", "--op", "read"][..],
        &["sim", "--ce", "1.5"][..],
    ] {
        let out = roce_xdp(bad);
        assert_eq!(out.status.code(), Some(2), "{bad:?}");
    }
}
