//! Notification point: CE-marked packets -> CNPs, at most one per QP per
//! `min_time_between_cnps`.

use core::time::Duration;

use proto::cc::{CnpPacer, DEFAULT_MIN_TIME_BETWEEN_CNPS};
use proto::time::Instant;

fn ns(t: u64) -> Instant {
    Instant::from_nanos(t)
}

#[test]
fn marked_packets_within_one_interval_give_exactly_one_cnp() {
    assert_eq!(DEFAULT_MIN_TIME_BETWEEN_CNPS, Duration::from_micros(4));
    let mut p = CnpPacer::default();
    let every = DEFAULT_MIN_TIME_BETWEEN_CNPS;
    // 100 marked packets 39 ns apart: all within [0, 3.861 us] < 4 us.
    let cnps = (0..100).filter(|i| p.allow(ns(i * 39), every)).count();
    assert_eq!(cnps, 1);
    // Just before 4 us after the first CNP: still paced; at 4 us: a new one.
    assert!(!p.allow(ns(3_999), every));
    assert!(p.allow(ns(4_000), every));
    assert!(!p.allow(ns(4_001), every));
    // The interval restarts from the last CNP sent, not from the last mark.
    assert!(!p.allow(ns(7_999), every));
    assert!(p.allow(ns(8_000), every));
}

#[test]
fn several_qps_are_paced_independently() {
    let every = Duration::from_micros(4);
    let mut pacers = [CnpPacer::default(); 4];
    let mut per_qp = [0u32; 4];
    // Interleaved marks, 10 ns apart, for 12 us: each QP gets a CNP at its
    // first mark and then every 4 us (its marks come every 40 ns).
    for i in 0..1200u64 {
        let q = (i % 4) as usize;
        if pacers[q].allow(ns(i * 10), every) {
            per_qp[q] += 1;
        }
    }
    // First marks at 0/10/20/30 ns, then CNPs at +4000 and +8000 ns: 3 each
    // (the next would be at +12000 ns >= 12 us, outside the run).
    assert_eq!(per_qp, [3, 3, 3, 3]);
    // A burst on one QP does not delay another QP's first CNP.
    let mut pacers = [CnpPacer::default(); 2];
    for i in 0..50 {
        pacers[0].allow(ns(i), every);
    }
    assert!(pacers[1].allow(ns(50), every));
}

#[test]
fn zero_interval_sends_one_cnp_per_marked_packet() {
    let mut p = CnpPacer::default();
    let cnps = (0..50).filter(|_| p.allow(ns(0), Duration::ZERO)).count();
    assert_eq!(cnps, 50);
}

#[test]
fn interval_is_configurable() {
    // The DCQCN paper's 50 us.
    let mut p = CnpPacer::default();
    let sent: Vec<u64> = (0..=100u64)
        .map(|i| i * 1_000)
        .filter(|&t| p.allow(ns(t), Duration::from_micros(50)))
        .collect();
    assert_eq!(sent, vec![0, 50_000, 100_000]);
    // A shorter interval takes effect for the next mark.
    assert!(!p.allow(ns(109_999), Duration::from_micros(10)));
    assert!(p.allow(ns(110_000), Duration::from_micros(10)));
}
