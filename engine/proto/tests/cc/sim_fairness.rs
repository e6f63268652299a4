//! DCQCN end to end in the simulator: three senders share one 25 Gb/s
//! switch queue toward one receiver (RED-ECN marking at dequeue, Kmin 5 KB,
//! Kmax 200 KB, Pmax 1 %, 1 MB buffer). With DCQCN (NVIDIA defaults) the
//! flows converge to a fair share and the queue stays shallow; without it
//! the queue sits near the buffer limit and drops. Every byte arrives
//! either way (verified WRITEs, go-back-N repairs the drops).

use core::time::Duration;

use proto::cc::CcConfig;
use proto::sim::scenarios::{run_incast as run, IncastConfig, IncastReport};
use proto::sim::{BottleneckConfig, LinkConfig, MarkPoint, RedEcn};

fn scenario(dcqcn_enabled: bool) -> IncastReport {
    let cfg = IncastConfig {
        senders: 3,
        bytes_per_flow: 16 << 20,
        message_size: 64 << 10,
        window: 16,
        link: LinkConfig {
            latency: Duration::from_micros(2),
            rate_bps: 25_000_000_000,
            ..LinkConfig::default()
        },
        bottleneck: Some(BottleneckConfig {
            rate_bps: 25e9,
            red: Some(RedEcn {
                kmin_bytes: 5_000,
                kmax_bytes: 200_000,
                pmax: 0.01,
            }),
            mark_point: MarkPoint::Dequeue,
            buffer_bytes: 1_000_000,
        }),
        cc: CcConfig {
            dcqcn_enabled,
            line_rate_gbps: 25.0,
            ..CcConfig::default()
        },
        seed: 7,
        ..IncastConfig::default()
    };
    run(&cfg)
}

fn describe(r: &IncastReport) -> String {
    format!(
        "ok {} jain {:.4} window {:?} queue: max {} window max {} window mean {:.0}; drops {} \
         CE {} CNP sent {} handled {} retransmitted {} flows {:?} error {:?}",
        r.ok(),
        r.jain_index,
        r.fairness_window_us,
        r.bottleneck.max_queue_bytes,
        r.window_max_queue_bytes,
        r.window_mean_queue_bytes,
        r.bottleneck.dropped,
        r.counters.np_ecn_marked_roce_packets,
        r.counters.np_cnp_sent,
        r.counters.rp_cnp_handled,
        r.counters.retransmitted_packets,
        r.flows
            .iter()
            .map(|f| (f.shared_throughput_gbps * 100.0).round() / 100.0)
            .collect::<Vec<_>>(),
        r.first_error,
    )
}

#[test]
fn dcqcn_flows_share_fairly_with_a_shallow_queue_and_without_drops_otherwise() {
    let on = scenario(true);
    let off = scenario(false);
    let (d_on, d_off) = (describe(&on), describe(&off));

    // Every byte arrives, verified, either way.
    assert!(on.ok(), "DCQCN on: {d_on}");
    assert!(off.ok(), "DCQCN off: {d_off}");
    assert_eq!(on.bytes_verified, 3 * (16 << 20));
    assert_eq!(off.bytes_verified, 3 * (16 << 20));

    // DCQCN on: fair share, bounded queue, the congestion loop ran.
    assert!(on.jain_index >= 0.95, "{d_on}");
    assert!(
        on.counters.np_cnp_sent > 0 && on.counters.rp_cnp_handled > 0,
        "{d_on}"
    );
    assert_eq!(on.counters.np_cnp_sent, on.counters.cnp_received, "{d_on}");
    assert_eq!(on.bottleneck.dropped, 0, "{d_on}");
    // Steady state: never beyond Kmax + a few frames, on average far less.
    assert!(on.window_max_queue_bytes <= 260_000, "{d_on}");
    assert!(on.window_mean_queue_bytes <= 50_000.0, "{d_on}");

    // DCQCN off: same traffic, CNPs sent but ignored, the queue sits near
    // the 1 MB buffer and overflows.
    assert!(off.counters.np_cnp_sent > 0, "{d_off}");
    assert_eq!(off.counters.rp_cnp_handled, 0, "{d_off}");
    assert_eq!(
        off.counters.rp_cnp_ignored, off.counters.cnp_received,
        "{d_off}"
    );
    assert!(off.bottleneck.dropped > 0, "{d_off}");
    assert!(off.counters.retransmitted_packets > 0, "{d_off}");
    assert!(
        off.window_mean_queue_bytes > 10.0 * on.window_mean_queue_bytes,
        "on: {d_on}\noff: {d_off}"
    );
    assert!(off.window_mean_queue_bytes > 500_000.0, "{d_off}");
    eprintln!("DCQCN on:  {d_on}\nDCQCN off: {d_off}");
}

#[test]
fn random_ce_marking_triggers_cnps_and_slows_senders() {
    let cfg = IncastConfig {
        senders: 1,
        bytes_per_flow: 4 << 20,
        ce_probability: 0.05,
        seed: 3,
        ..IncastConfig::default()
    };
    let r = run(&cfg);
    assert!(r.ok(), "{}", describe(&r));
    // About 5 % of ~1000 data frames are marked; each mark is counted, and
    // CNPs are paced (at most one per 4 us), so CNPs <= marks.
    assert!(r.random_ce > 20 && r.random_ce < 100, "{}", describe(&r));
    assert_eq!(r.counters.np_ecn_marked_roce_packets, r.random_ce);
    assert!(r.counters.np_cnp_sent > 0 && r.counters.np_cnp_sent <= r.random_ce);
    assert!(r.counters.rp_cnp_handled > 0);
    assert!(r.flows[0].mean_dcqcn_rate_gbps < 25.0);
}
