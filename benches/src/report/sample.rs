//! Sample reports for the tests of the report's modules: every kind of
//! figure, some missing; [`sample_paired`] adds paired measurements.

use super::*;
use crate::stats::Percentiles;
use crate::sysinfo::Machine;

/// A report of a quick run with every kind of figure, some missing (no
/// READ, no floor latency), and no paired measurements.
pub(crate) fn sample() -> Report {
    let mut r = Report {
        schema: SCHEMA_VERSION,
        machine: Machine {
            date_utc: "2026-11-29 20:00:00 UTC".into(),
            cpu_model: "Test CPU".into(),
            cpu_mhz: 2000.0,
            cores: 2,
            kernel: "6.18".into(),
        },
        setup: Setup {
            quick: true,
            link_mtu: 4200,
            roce_pmtu: 4096,
            udp_chunk: 4172,
            xdp_mode: "native".into(),
            xsk_zero_copy: false,
            batch: 64,
            seconds_per_point: 0.25,
            pingpong_iterations: 1000,
        },
        goodput: vec![
            GoodputRow {
                message_bytes: 64,
                kernel_udp_gbps: Some(0.5),
                floor_gbps: Some(1.0),
                write_gbps: Some(0.9),
                send_gbps: None,
                read_gbps: None,
            },
            GoodputRow {
                message_bytes: 65536,
                kernel_udp_gbps: Some(10.0),
                floor_gbps: Some(20.0),
                write_gbps: Some(17.0),
                send_gbps: None,
                read_gbps: None,
            },
        ],
        message_rate: MessageRate {
            message_bytes: 64,
            kernel_udp_mpps: Some(1.0),
            floor_mpps: Some(2.5),
            write_mpps: Some(2.25),
            send_mpps: None,
            read_mpps: None,
        },
        latency: Latency {
            message_bytes: 64,
            kernel_udp: Some(Percentiles {
                samples: 10,
                p50_us: 20.0,
                p99_us: 40.0,
                p999_us: 50.0,
            }),
            floor: None,
            engine_send: Some(Percentiles {
                samples: 10,
                p50_us: 30.0,
                p99_us: 60.0,
                p999_us: 70.0,
            }),
            engine_send_rtc: Some(Percentiles {
                samples: 10,
                p50_us: 10.0,
                p99_us: 30.0,
                p999_us: 35.0,
            }),
        },
        ratios: vec![],
        paired: vec![],
        scaling: None,
        multi_queue: None,
        tools: ToolsReport::default(),
        projection: None,
        qp_scale: vec![],
        qp_scale_memory: vec![],
        verbs_drop_in: Default::default(),
        ucx: Default::default(),
        sge_paths: vec![],
        cm: Default::default(),
        shared: Default::default(),
        section: None,
        notes: vec!["a note".into()],
        missing: vec!["READ: not built".into()],
    };
    r.ratios = r.target_ratios();
    r
}

/// The sample with paired measurements for the three floor targets
/// (the kernel UDP one left out, as if it had failed).
pub(crate) fn sample_paired() -> Report {
    let mut r = sample();
    let floor = |size: u64| {
        PAIRED_TARGETS
            .iter()
            .find(|s| s.baseline == Baseline::Floor && s.message_bytes == size)
            .unwrap()
    };
    r.paired = vec![
        // Ratios 0.5, 1.0, 0.875, 0.75: median 0.8125.
        floor(64).summarise(
            1.0,
            vec![
                Pair::new(false, 1.0, 2.0),
                Pair::new(true, 2.0, 2.0),
                Pair::new(false, 1.75, 2.0),
                Pair::new(true, 1.5, 2.0),
            ],
        ),
        // Ratios 0.75, 0.5, 0.25: median 0.5.
        floor(1024).summarise(
            1.0,
            vec![
                Pair::new(false, 1.5, 2.0),
                Pair::new(true, 1.0, 2.0),
                Pair::new(false, 0.5, 2.0),
            ],
        ),
        floor(65536).summarise(1.0, vec![]),
        // Ratios 0.6, 0.7: median 0.65, no target.
        PAIRED_INFO[0].summarise(
            1.0,
            vec![Pair::new(false, 6.0, 10.0), Pair::new(true, 7.0, 10.0)],
        ),
    ];
    r.ratios = r.target_ratios();
    r
}
