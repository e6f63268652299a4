//! CI smoke test of the benchmark harness: `roce-xdp bench --quick --json`
//! runs end to end on a veth pair in namespaces it creates, and its JSON
//! has the documented shape. No speed thresholds (figures on shared CI
//! machines drift); only that every figure was measured or is listed as
//! missing with a reason. Needs root (ignored unless asked for).

use std::process::Command;
use std::time::Instant;

use roce_xdp_benches::report::{Report, SCHEMA_VERSION};

use crate::support::{bin, require_root, serial};

fn positive(v: Option<f64>) -> bool {
    v.is_some_and(|x| x.is_finite() && x > 0.0)
}

#[test]
#[ignore = "needs root"]
fn bench_quick_json_has_the_documented_shape() {
    require_root();
    // Measures: no other engine test runs meanwhile.
    let _g = serial();
    let out_dir = std::env::temp_dir().join(format!("roce-xdp-bench-smoke-{}", std::process::id()));
    let start = Instant::now();
    let out = Command::new(bin())
        .args(["bench", "--quick", "--json", "--out"])
        .arg(&out_dir)
        .output()
        .expect("running roce-xdp bench");
    let elapsed = start.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "roce-xdp bench failed: {stderr}");
    eprintln!("roce-xdp bench --quick took {elapsed:?}");

    // stdout is exactly one JSON document of the report's schema.
    let stdout = String::from_utf8(out.stdout).expect("UTF-8 JSON");
    let value: serde_json::Value = serde_json::from_str(&stdout).expect("stdout is JSON");
    for key in [
        "schema",
        "machine",
        "setup",
        "goodput",
        "message_rate",
        "latency",
        "ratios",
        "sge_paths",
        "ucx",
        "cm",
        "scaling",
        "projection",
        "notes",
        "missing",
    ] {
        assert!(value.get(key).is_some(), "JSON lacks {key:?}");
    }
    let r: Report = serde_json::from_value(value).expect("JSON matches the Report schema");
    assert_eq!(r.schema, SCHEMA_VERSION);
    assert!(r.setup.quick);
    assert!(!r.machine.kernel.is_empty() && !r.machine.date_utc.is_empty());

    // The sweep: 64 B .. 1 MiB, ascending, with 64 KiB in it.
    let sizes: Vec<u64> = r.goodput.iter().map(|g| g.message_bytes).collect();
    assert_eq!(sizes.first(), Some(&64));
    assert_eq!(sizes.last(), Some(&(1 << 20)));
    assert!(sizes.contains(&65536));
    assert!(sizes.windows(2).all(|w| w[0] < w[1]));

    // The baselines are always measured.
    for g in &r.goodput {
        assert!(
            positive(g.kernel_udp_gbps),
            "kernel UDP at {} B",
            g.message_bytes
        );
        assert!(
            positive(g.floor_gbps),
            "AF_XDP floor at {} B",
            g.message_bytes
        );
    }
    assert!(positive(r.message_rate.kernel_udp_mpps));
    assert!(positive(r.message_rate.floor_mpps));
    assert!(r
        .latency
        .kernel_udp
        .is_some_and(|p| p.samples > 0 && p.p50_us > 0.0));
    assert!(r
        .latency
        .floor
        .is_some_and(|p| p.samples > 0 && p.p50_us > 0.0));

    // Engine figures: measured, or listed as missing with a reason.
    let engine_missing = r.missing.iter().any(|m| m.starts_with("engine"));
    for g in &r.goodput {
        for (op, v) in [
            ("WRITE", g.write_gbps),
            ("SEND", g.send_gbps),
            ("READ", g.read_gbps),
        ] {
            assert!(
                positive(v) || engine_missing,
                "engine {op} at {} B neither measured nor listed as missing",
                g.message_bytes
            );
        }
    }
    // Both engine ping-pong modes: measured, or missing with a reason.
    for (mode, p, prefix) in [
        (
            "run-to-completion",
            r.latency.engine_send_rtc,
            "engine SEND ping-pong, run-to-completion",
        ),
        (
            "engine threads",
            r.latency.engine_send,
            "engine SEND ping-pong:",
        ),
    ] {
        assert!(
            p.is_some_and(|p| p.samples > 0 && p.p50_us > 0.0)
                || r.missing
                    .iter()
                    .any(|m| m.contains(prefix) || m.contains("engine (all figures)")),
            "engine SEND ping-pong ({mode}) neither measured nor listed as missing"
        );
    }
    // The target ratios, each computed from its figures: the four paired
    // throughput targets, the latency one, the two SGE rows (8 SGEs / 1
    // SGE, inline / registered buffer), engine CPU per packet, 2 queues /
    // 1, of the multi-queue row, and the RDMA CM's stock ib_write_bw -R /
    // ib_write_bw (where perftest is installed; else a line in `missing`),
    // and the shared engine's paired rows (attached against in-process:
    // ib_write_bw 64 KiB, ib_send_lat 64 B, 8 x 8 QPs against 1 x 64), or
    // none with the reason the step did not run.
    let cm_rows = usize::from(r.cm.stock_write_bw.is_some());
    let shared_rows = r.shared.rows.len();
    assert!(
        shared_rows == 3 || r.shared.skipped.is_some(),
        "shared engine rows: {shared_rows}, skipped: {:?}",
        r.shared.skipped
    );
    assert_eq!(r.ratios.len(), 8 + cm_rows + shared_rows, "{:?}", r.missing);
    // Scatter/gather lists and inline data against the one-SGE path: two
    // paired rows with figures (or listed as missing with the reason), in
    // the Markdown and among the target rows.
    let sge_names: Vec<&str> = r.sge_paths.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(
        sge_names,
        [
            "64 KiB WRITE from 8 SGEs of 8 KiB / from 1 SGE, goodput (engine on veth)",
            "64 B SEND inline / from a registered buffer, message rate (engine on veth)",
        ]
    );
    for p in &r.sge_paths {
        assert_eq!(p.target, ">= 0.95");
        let measured = p.pairs.len() == 2
            && p.pairs.iter().all(|q| q.engine > 0.0 && q.baseline > 0.0)
            && p.median.is_some_and(|m| m > 0.0);
        assert!(
            measured || r.missing.iter().any(|m| m.starts_with("sge paths")),
            "{p:?} {:?}",
            r.missing
        );
        assert!(
            r.ratios
                .iter()
                .any(|x| x.name == format!("{} [paired median]", p.name) && x.value == p.median),
            "{:?}",
            r.ratios
        );
    }
    let mq = r.multi_queue.as_ref().expect("the multi-queue row");
    assert_eq!(
        mq.rows.iter().map(|row| row.queues).collect::<Vec<_>>(),
        [1, 2]
    );
    assert!(mq
        .rows
        .iter()
        .all(|row| row.gbps > 0.0 && row.cpu_ns_per_packet > 0.0));
    assert!(mq.cpu_ratio.is_some());
    // The paired step: one entry per throughput target and two for
    // information (no target: against the floor re-sending one frame, and
    // every message in its own range), each with its pairs, or listed as
    // missing.
    assert_eq!(r.paired.len(), 6);
    assert_eq!(
        r.paired
            .iter()
            .filter(|p| p.target == "none (information)")
            .count(),
        2
    );
    assert!(r
        .paired
        .iter()
        .any(|p| p.name.contains("against the floor re-sending one frame")));
    for p in &r.paired {
        assert!(
            !p.pairs.is_empty() || r.missing.iter().any(|m| m.starts_with("paired")),
            "{p:?}"
        );
        // --quick's 2 pairs are too few for a 95 % interval of the median.
        assert_eq!(
            (p.ci95_low, p.ci95_high, p.ci95_decides),
            (None, None, None)
        );
    }
    for ratio in &r.ratios {
        assert_eq!(ratio.value.is_some(), ratio.met.is_some(), "{ratio:?}");
        assert!(ratio.value.is_some() || !r.missing.is_empty(), "{ratio:?}");
    }
    let md = std::fs::read_to_string(out_dir.join("results.md")).expect("results.md");
    assert!(md.contains("SGE lists and inline data against the one-SGE path (engine on veth"));
    for p in &r.sge_paths {
        assert!(md.contains(&format!("| {} | 2 x ", p.name)), "{md}");
    }
    // Stock perftest and the transfer-engine pattern (posting threads
    // that spin or yield, a polling thread) on the drop-in: seven
    // comparisons, each with its pairs and a ratio, or a line in
    // `missing` saying why not.
    let drop_in = &r.verbs_drop_in;
    if drop_in.targets.is_empty() {
        assert!(
            r.missing.iter().any(|m| m.starts_with("verbs drop-in")),
            "{:?}",
            r.missing
        );
    } else {
        let names: Vec<(&str, u64)> = drop_in
            .targets
            .iter()
            .map(|t| (t.stock.as_str(), t.message_bytes))
            .collect();
        assert_eq!(
            names,
            [
                ("ib_write_bw", 64),
                ("ib_write_bw", 65536),
                ("ib_send_lat", 64),
                ("threaded_rdma_bw -o read -w spin", 65536),
                ("threaded_rdma_bw -o write -w spin", 65536),
                ("threaded_rdma_bw -o read -w yield", 65536),
                ("threaded_rdma_bw -o write -w yield", 65536),
            ]
        );
        for t in &drop_in.targets {
            assert!(
                t.ratio.is_some_and(|x| x > 0.0) || r.missing.iter().any(|m| m.contains(&t.stock)),
                "{t:?} {:?}",
                r.missing
            );
        }
        assert!(md.contains("on the drop-in libibverbs (`roce-xdp exec`)"));
    }
    // UCX's ucx_perftest on the drop-in against the tools: put bandwidth
    // and tag latency, each with its pairs and a ratio, or the reason.
    let ucx = &r.ucx;
    if let Some(why) = &ucx.skipped {
        assert!(r.missing.iter().any(|m| m.starts_with("UCX rows")), "{why}");
    } else {
        let names: Vec<(&str, u64)> = ucx
            .targets
            .iter()
            .map(|t| (t.stock.as_str(), t.message_bytes))
            .collect();
        assert_eq!(
            names,
            [
                ("ucx_perftest -t ucp_put_bw", 65536),
                ("ucx_perftest -t tag_lat", 64),
            ]
        );
        for t in &ucx.targets {
            assert!(
                t.ratio.is_some_and(|x| x > 0.0) || r.missing.iter().any(|m| m.contains("UCX")),
                "{t:?} {:?}",
                r.missing
            );
        }
        assert!(md.contains("on the drop-in libibverbs (`roce-xdp exec`, server in one namespace"));
    }
    // The RDMA CM's stock rows: ib_write_bw -R / ib_write_bw (paired,
    // among the target ratios) and ucmatose's connections per second, each
    // with its pairs and figures, or a line in `missing` saying why not.
    let cm_missing = || r.missing.iter().any(|m| m.starts_with("CM rows"));
    match &r.cm.stock_write_bw {
        Some(w) => {
            assert!(
                w.ratio.is_some_and(|x| x > 0.0) || cm_missing(),
                "{w:?} {:?}",
                r.missing
            );
            assert!(r
                .ratios
                .iter()
                .any(|x| x.name.starts_with("ib_write_bw -R / ib_write_bw") && x.value == w.ratio));
        }
        None => assert!(cm_missing(), "{:?}", r.missing),
    }
    match &r.cm.ucmatose {
        Some(u) => assert!(
            u.per_second.is_some_and(|x| x > 0.0) || cm_missing(),
            "{u:?} {:?}",
            r.missing
        ),
        None => assert!(cm_missing(), "{:?}", r.missing),
    }
    let projection = r.projection.as_ref().expect("projection section");
    assert!(!projection.rows.is_empty());
    assert!(projection.rows.iter().all(|p| p.cycles_per_packet > 0.0));

    // --out wrote the three files, the SVG plots three series.
    assert!(md.contains("Goodput"));
    let svg = std::fs::read_to_string(out_dir.join("goodput.svg")).expect("goodput.svg");
    assert!(svg.starts_with("<svg") && svg.contains("kernel UDP") && svg.contains("AF_XDP floor"));
    let json = std::fs::read_to_string(out_dir.join("results.json")).expect("results.json");
    let again: Report = serde_json::from_str(&json).expect("results.json parses");
    assert_eq!(again, r);
    let _ = std::fs::remove_dir_all(&out_dir);
}
