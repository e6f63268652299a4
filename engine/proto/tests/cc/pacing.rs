//! Notification point: CE-marked packets -> CNPs, at most one per QP per
//! `min_time_between_cnps`.

use core::time::Duration;

use proto::cc::{
    CcConfig, CongestionControl, NotificationPoint, NpCounters, DEFAULT_MIN_TIME_BETWEEN_CNPS,
};
use proto::time::Instant;

fn ns(t: u64) -> Instant {
    Instant::from_nanos(t)
}

#[test]
fn marked_packets_within_one_interval_give_exactly_one_cnp() {
    assert_eq!(DEFAULT_MIN_TIME_BETWEEN_CNPS, Duration::from_micros(4));
    let mut np = NotificationPoint::new(DEFAULT_MIN_TIME_BETWEEN_CNPS, 16);
    // 100 marked packets 39 ns apart: all within [0, 3.861 us] < 4 us.
    let cnps = (0..100).filter(|i| np.on_ce_marked(ns(i * 39), 7)).count();
    assert_eq!(cnps, 1);
    assert_eq!(
        np.counters(),
        NpCounters {
            np_ecn_marked_roce_packets: 100,
            np_cnp_sent: 1,
            np_cnp_unpaced: 0
        }
    );
    // Just before 4 us after the first CNP: still paced; at 4 us: a new one.
    assert!(!np.on_ce_marked(ns(3_999), 7));
    assert!(np.on_ce_marked(ns(4_000), 7));
    assert!(!np.on_ce_marked(ns(4_001), 7));
    // The interval restarts from the last CNP sent, not from the last mark.
    assert!(!np.on_ce_marked(ns(7_999), 7));
    assert!(np.on_ce_marked(ns(8_000), 7));
    assert_eq!(np.counters().np_cnp_sent, 3);
    assert_eq!(np.counters().np_ecn_marked_roce_packets, 105);
}

#[test]
fn several_qps_are_paced_independently() {
    let mut np = NotificationPoint::new(Duration::from_micros(4), 16);
    let qps = [1u32, 2, 0x00ff_fffe, 1000];
    let mut per_qp = [0u32; 4];
    // Interleaved marks, 10 ns apart, for 12 us: each QP gets a CNP at its
    // first mark and then every 4 us (its marks come every 40 ns).
    for i in 0..1200u64 {
        let q = (i % 4) as usize;
        if np.on_ce_marked(ns(i * 10), qps[q]) {
            per_qp[q] += 1;
        }
    }
    // First marks at 0/10/20/30 ns, then CNPs at +4000 and +8000 ns: 3 each
    // (the next would be at +12000 ns >= 12 us, outside the run).
    assert_eq!(per_qp, [3, 3, 3, 3]);
    assert_eq!(np.counters().np_cnp_sent, 12);
    // A burst on one QP does not delay another QP's first CNP.
    let mut np = NotificationPoint::new(Duration::from_micros(4), 16);
    for i in 0..50 {
        np.on_ce_marked(ns(i), 1);
    }
    assert!(np.on_ce_marked(ns(50), 2));
}

#[test]
fn zero_interval_sends_one_cnp_per_marked_packet() {
    let mut np = NotificationPoint::new(Duration::ZERO, 4);
    let cnps = (0..50).filter(|_| np.on_ce_marked(ns(0), 3)).count();
    assert_eq!(cnps, 50);
    assert_eq!(np.counters().np_cnp_sent, 50);
}

#[test]
fn interval_is_configurable() {
    // The DCQCN paper's 50 us.
    let mut np = NotificationPoint::new(Duration::from_micros(50), 4);
    let sent: Vec<u64> = (0..=100u64)
        .map(|i| i * 1_000)
        .filter(|&t| np.on_ce_marked(ns(t), 9))
        .collect();
    assert_eq!(sent, vec![0, 50_000, 100_000]);
    np.set_min_time_between_cnps(Duration::from_micros(10));
    assert!(!np.on_ce_marked(ns(109_999), 9));
    assert!(np.on_ce_marked(ns(110_000), 9));
}

#[test]
fn full_table_fails_open_and_counts() {
    let mut np = NotificationPoint::new(Duration::from_micros(4), 2);
    assert!(np.on_ce_marked(ns(0), 1));
    assert!(np.on_ce_marked(ns(0), 2));
    // A third QP cannot be tracked: every mark yields a CNP, counted.
    assert!(np.on_ce_marked(ns(1), 3));
    assert!(np.on_ce_marked(ns(2), 3));
    assert_eq!(np.counters().np_cnp_unpaced, 2);
    // Destroying a QP frees its slot.
    np.remove_qp(1);
    assert!(np.on_ce_marked(ns(3), 3));
    assert!(!np.on_ce_marked(ns(4), 3));
    assert_eq!(np.counters().np_cnp_unpaced, 2);
}

#[test]
fn endpoint_level_notification_point_works_with_dcqcn_off() {
    let config = CcConfig {
        dcqcn_enabled: false,
        ..CcConfig::default()
    };
    let mut cc = CongestionControl::new(config, 8);
    assert!(cc.on_ce_marked(ns(0), 5));
    assert!(!cc.on_ce_marked(ns(100), 5));
    let c = cc.counters();
    assert_eq!((c.np_ecn_marked_roce_packets, c.np_cnp_sent), (2, 1));
}
