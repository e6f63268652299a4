//! DCQCN reaction point against hand-computed alpha and rate sequences.
//!
//! The parameters of the hand-computed tests are chosen so that every value
//! is a dyadic fraction: f64 holds them exactly and the asserts use `==`.
//! Rates below are in Mb/s (the code works in bit/s; `mbps()` converts).

use core::time::Duration;

use proto::cc::{CnpOutcome, Dcqcn, DcqcnParams, IncreaseStage};
use proto::time::Instant;

const LINE_MBPS: f64 = 100_000.0; // a 100 Gb/s link

fn us(t: u64) -> Instant {
    Instant::from_micros(t)
}

fn mbps(d: &Dcqcn) -> f64 {
    d.rate_bps() / 1e6
}

fn target_mbps(d: &Dcqcn) -> f64 {
    d.target_rate_bps() / 1e6
}

/// g = 1/4, initial alpha 1/2, alpha period 10 us, monitor period 4 us,
/// T = 100 us, F = 2, R_AI = 1000 Mb/s, R_HAI = 4000 Mb/s.
fn hand_params(byte_counter: u64) -> DcqcnParams {
    DcqcnParams {
        g: 0.25,
        initial_alpha: 0.5,
        alpha_update_period: Duration::from_micros(10),
        rate_reduce_monitor_period: Duration::from_micros(4),
        min_decrease_factor: 0.5,
        min_rate_mbps: 1.0,
        max_rate_mbps: 0.0,
        rate_increase_period: Duration::from_micros(100),
        byte_counter,
        fast_recovery_stages: 2,
        additive_increase_mbps: 1000.0,
        hyper_increase_mbps: 4000.0,
        pacer_burst_bytes: 8192,
    }
}

#[test]
fn cnp_reduction_alpha_and_monitor_period_hand_computed() {
    let mut d = Dcqcn::new(hand_params(0), LINE_MBPS * 1e6);
    assert_eq!(mbps(&d), 100_000.0);
    assert!(!d.is_limited());
    assert_eq!(d.next_deadline(), None);

    // t = 0, first CNP: alpha = initial 0.5.
    //   RT = RC = 100000; RC = 100000 * (1 - 0.5/2) = 75000
    //   alpha = 0.75 * 0.5 + 0.25 = 0.625
    assert_eq!(d.on_cnp(us(0)), CnpOutcome::Handled);
    assert_eq!(mbps(&d), 75_000.0);
    assert_eq!(target_mbps(&d), 100_000.0);
    assert_eq!(d.alpha(us(0)), 0.625);
    assert_eq!(d.next_deadline(), Some(us(100)));

    // t = 2 us: inside the 4 us monitor period -> ignored, nothing changes.
    assert_eq!(d.on_cnp(us(2)), CnpOutcome::Ignored);
    assert_eq!(mbps(&d), 75_000.0);
    assert_eq!(d.alpha(us(2)), 0.625);
    assert_eq!(d.next_deadline(), Some(us(100)));

    // t = 4 us: period over -> handled. No whole alpha period (10 us) has
    // passed, so alpha is still 0.625.
    //   RT = 75000; RC = 75000 * (1 - 0.3125) = 51562.5
    //   alpha = 0.75 * 0.625 + 0.25 = 0.71875
    assert_eq!(d.on_cnp(us(4)), CnpOutcome::Handled);
    assert_eq!(mbps(&d), 51_562.5);
    assert_eq!(target_mbps(&d), 75_000.0);
    assert_eq!(d.alpha(us(4)), 0.71875);

    // Alpha decays once per whole 10 us period without a CNP:
    //   t = 13 us: 0 periods -> 0.71875
    //   t = 14 us: 1 period  -> 0.71875 * 0.75   = 0.5390625
    //   t = 29 us: 2 periods -> 0.71875 * 0.5625 = 0.404296875
    assert_eq!(d.alpha(us(13)), 0.71875);
    assert_eq!(d.alpha(us(14)), 0.5390625);
    assert_eq!(d.alpha(us(29)), 0.404296875);

    // A CNP at t = 29 us uses the decayed alpha:
    //   RT = 51562.5; RC = 51562.5 * (1 - 0.404296875/2)
    //      = 51562.5 * 0.7978515625 = 41139.22119140625
    //   alpha = 0.75 * 0.404296875 + 0.25 = 0.55322265625
    assert_eq!(d.on_cnp(us(29)), CnpOutcome::Handled);
    assert_eq!(mbps(&d), 41_139.221_191_406_25);
    assert_eq!(target_mbps(&d), 51_562.5);
    assert_eq!(d.alpha(us(29)), 0.553_222_656_25);
    assert_eq!(d.next_deadline(), Some(us(129)));
}

#[test]
fn timer_only_recovery_hand_computed() {
    // Byte counter off: the byte stage stays 0, so after F = 2 fast-recovery
    // steps every timer event is an additive increase (never hyper).
    let mut d = Dcqcn::new(hand_params(0), LINE_MBPS * 1e6);
    d.on_cnp(us(0)); // RC 75000, RT 100000, alpha 0.625
    d.on_cnp(us(4)); // RC 51562.5, RT 75000, alpha 0.71875; timer at 104 us
    assert_eq!(d.next_deadline(), Some(us(104)));

    // Nothing before the deadline.
    d.on_timer(us(103));
    assert_eq!(mbps(&d), 51_562.5);
    assert_eq!(d.stages(), (0, 0));

    // t = 104: T = 1 <= F -> fast recovery: RC = (75000 + 51562.5)/2 = 63281.25
    d.on_timer(us(104));
    assert_eq!(d.stages(), (1, 0));
    assert_eq!(d.last_increase(), Some(IncreaseStage::FastRecovery));
    assert_eq!(mbps(&d), 63_281.25);
    assert_eq!(target_mbps(&d), 75_000.0);
    assert_eq!(d.next_deadline(), Some(us(204)));

    // t = 204: T = 2 <= F -> fast recovery: RC = (75000 + 63281.25)/2 = 69140.625
    d.on_timer(us(204));
    assert_eq!(d.last_increase(), Some(IncreaseStage::FastRecovery));
    assert_eq!(mbps(&d), 69_140.625);

    // t = 304: T = 3 > F, min(T, BC) = 0 -> additive:
    //   RT = 76000; RC = (76000 + 69140.625)/2 = 72570.3125
    // t = 404: T = 4 -> additive:
    //   RT = 77000; RC = (77000 + 72570.3125)/2 = 74785.15625
    // (one on_timer call late applies both expiries, in order)
    d.on_timer(us(450));
    assert_eq!(d.stages(), (4, 0));
    assert_eq!(d.last_increase(), Some(IncreaseStage::AdditiveIncrease));
    assert_eq!(target_mbps(&d), 77_000.0);
    assert_eq!(mbps(&d), 74_785.156_25);
    assert_eq!(d.next_deadline(), Some(us(504)));
}

#[test]
fn timer_and_byte_counter_reach_hyper_increase_hand_computed() {
    // B = 1 MB (10^6 bytes).
    let mut d = Dcqcn::new(hand_params(1_000_000), LINE_MBPS * 1e6);
    d.on_cnp(us(0));
    d.on_cnp(us(4)); // RC 51562.5, RT 75000; timer at 104 us

    // t = 10: 1 MB sent -> BC = 1, T = 0; max = 1 <= F -> fast recovery:
    //   RC = (75000 + 51562.5)/2 = 63281.25
    d.on_bytes_sent(us(10), 1_000_000);
    assert_eq!(d.stages(), (0, 1));
    assert_eq!(mbps(&d), 63_281.25);

    // t = 104: timer -> T = 1; max(1, 1) = 1 -> fast recovery:
    //   RC = (75000 + 63281.25)/2 = 69140.625
    d.on_timer(us(104));
    assert_eq!(d.stages(), (1, 1));
    assert_eq!(mbps(&d), 69_140.625);

    // t = 110: 2 MB sent -> two byte events.
    //   BC = 2: max = 2 <= F -> fast recovery: RC = (75000 + 69140.625)/2 = 72070.3125
    //   BC = 3: max = 3 > F, min = T = 1 <= F -> additive:
    //           RT = 76000; RC = (76000 + 72070.3125)/2 = 74035.15625
    d.on_bytes_sent(us(110), 2_000_000);
    assert_eq!(d.stages(), (1, 3));
    assert_eq!(d.last_increase(), Some(IncreaseStage::AdditiveIncrease));
    assert_eq!(target_mbps(&d), 76_000.0);
    assert_eq!(mbps(&d), 74_035.156_25);

    // Half a byte period does nothing.
    d.on_bytes_sent(us(150), 500_000);
    assert_eq!(d.stages(), (1, 3));

    // t = 204: T = 2; max = 3 > F, min = 2 <= F -> additive:
    //   RT = 77000; RC = (77000 + 74035.15625)/2 = 75517.578125
    d.on_timer(us(204));
    assert_eq!(d.last_increase(), Some(IncreaseStage::AdditiveIncrease));
    assert_eq!(mbps(&d), 75_517.578_125);

    // t = 304: T = 3; min(3, 3) = 3 > F -> hyper:
    //   RT = 77000 + 4000 = 81000; RC = (81000 + 75517.578125)/2 = 78258.7890625
    d.on_timer(us(304));
    assert_eq!(d.stages(), (3, 3));
    assert_eq!(d.last_increase(), Some(IncreaseStage::HyperIncrease));
    assert_eq!(target_mbps(&d), 81_000.0);
    assert_eq!(mbps(&d), 78_258.789_062_5);

    // t = 320: the 500 kB left over + 500 kB -> BC = 4; min(3, 4) = 3 > F -> hyper:
    //   RT = 85000; RC = (85000 + 78258.7890625)/2 = 81629.39453125
    d.on_bytes_sent(us(320), 500_000);
    assert_eq!(d.stages(), (3, 4));
    assert_eq!(d.last_increase(), Some(IncreaseStage::HyperIncrease));
    assert_eq!(mbps(&d), 81_629.394_531_25);

    // A CNP resets both stages and restarts the timer from now.
    assert_eq!(d.on_cnp(us(330)), CnpOutcome::Handled);
    assert_eq!(d.stages(), (0, 0));
    assert_eq!(d.next_deadline(), Some(us(430)));
}

#[test]
fn minimum_rate_and_minimum_decrease_factor() {
    // Alpha pinned at 1 (g = 1): each CNP would halve RC, but the minimum
    // decrease factor 0.75 allows only a 25 % cut, and RC never drops below
    // 40000 Mb/s.
    let params = DcqcnParams {
        g: 1.0,
        initial_alpha: 1.0,
        min_decrease_factor: 0.75,
        min_rate_mbps: 40_000.0,
        ..hand_params(0)
    };
    let mut d = Dcqcn::new(params, LINE_MBPS * 1e6);
    // 100000 -> 75000 -> 56250 -> 42187.5 -> max(31640.625, 40000) = 40000
    let expect = [75_000.0, 56_250.0, 42_187.5, 40_000.0, 40_000.0];
    for (i, e) in expect.iter().enumerate() {
        assert_eq!(d.on_cnp(us(4 * i as u64)), CnpOutcome::Handled);
        assert_eq!(mbps(&d), *e, "after CNP {}", i + 1);
    }
}

#[test]
fn max_rate_caps_below_line_rate() {
    let params = DcqcnParams {
        max_rate_mbps: 25_000.0,
        ..hand_params(0)
    };
    let mut d = Dcqcn::new(params, LINE_MBPS * 1e6);
    assert_eq!(mbps(&d), 25_000.0);
    d.on_cnp(us(0)); // 25000 * 0.75 = 18750
    assert_eq!(mbps(&d), 18_750.0);
    d.on_timer(us(100_000));
    assert_eq!(mbps(&d), 25_000.0);
    assert!(!d.is_limited());
}

#[test]
fn recovers_to_line_rate_and_stops_the_timer() {
    let mut d = Dcqcn::new(hand_params(0), LINE_MBPS * 1e6);
    d.on_cnp(us(0));
    assert!(d.is_limited());
    assert!(d.may_send(us(0), 1000).is_ok()); // full bucket
                                              // Gap halves every 100 us (RT = line rate): within 1e-6 of it after
                                              // ceil(log2(0.25e6)) = 18 events.
    d.on_timer(us(1_800));
    assert!(!d.is_limited());
    assert_eq!(mbps(&d), LINE_MBPS);
    assert_eq!(d.next_deadline(), None);
    assert_eq!(d.stages().0, 18);
}

#[test]
fn pacer_holds_a_limited_qp_to_its_rate() {
    // Increases off (T = 0, B = 0): the rate stays where the CNP put it.
    let params = DcqcnParams {
        rate_increase_period: Duration::ZERO,
        byte_counter: 0,
        ..hand_params(0)
    };
    let mut d = Dcqcn::new(params, LINE_MBPS * 1e6);
    d.on_cnp(us(0)); // 75 Gb/s
    let rate_bps = d.rate_bps();
    let frame = 1078u64; // a 1024-byte payload frame
    let (mut t, mut sent) = (Instant::ZERO, 0u64);
    let end = us(1_000);
    while t < end {
        match d.may_send(t, frame) {
            Ok(()) => {
                d.consume(t, frame);
                sent += frame;
            }
            Err(retry) => {
                assert!(retry > t, "retry time must be in the future");
                t = retry;
            }
        }
    }
    // In 1 ms at 75 Gb/s: 9375000 bytes, plus at most one bucket (8192)
    // and one frame of slack.
    let ideal = (rate_bps * 1e-3 / 8.0) as u64;
    assert!(sent <= ideal + 8192 + frame, "sent {sent} > ideal {ideal}");
    assert!(sent + frame >= ideal, "sent {sent} < ideal {ideal}");
}

#[test]
fn nvidia_preset_dynamics() {
    let p = DcqcnParams::nvidia_default();
    assert_eq!(p, DcqcnParams::default());
    assert_eq!(p.validate(), Ok(()));
    assert_eq!(DcqcnParams::paper().validate(), Ok(()));
    let mut d = Dcqcn::new(p, LINE_MBPS * 1e6);
    // First CNP: alpha = 1023/1024 -> RC = 100000 * (1 - 1023/2048)
    //   = 100000 * 1025/2048 = 50048.828125
    d.on_cnp(us(0));
    assert_eq!(mbps(&d), 50_048.828_125);
    // A CNP every 4 us (the NVIDIA notification point's pace) for 200 us:
    // alpha stays high and the rate falls hard, never below 1 Mb/s.
    for i in 1..=50 {
        assert_eq!(d.on_cnp(us(4 * i)), CnpOutcome::Handled);
    }
    let congested = mbps(&d);
    assert!(congested < 10_000.0, "{congested}");
    assert!(congested >= 1.0);
    // CNPs stop; the QP keeps sending at its current rate. Byte-counter
    // events (every 32767 B) then dominate and bring it back to line rate.
    let mut t = us(200);
    let mut recovered_at = None;
    while t < us(200_000) {
        match d.may_send(t, 4096) {
            Ok(()) => d.consume(t, 4096),
            Err(r) => t = r,
        }
        if !d.is_limited() {
            recovered_at = Some(t);
            break;
        }
    }
    let recovered_at = recovered_at.expect("back to line rate within 200 ms");
    // Alpha decays by 1019/1024 per us: 1 ms after the last CNP it is
    // below 1e-2.
    assert!(d.alpha(us(1_200)) < 1e-2);
    assert!(recovered_at > us(200));
}

#[test]
fn paper_preset_alpha_decays_every_55_us() {
    let mut d = Dcqcn::new(DcqcnParams::paper(), LINE_MBPS * 1e6);
    d.on_cnp(us(0));
    // alpha0 = 1: RC = 50000, alpha = 255/256 + 1/256 = 1
    assert_eq!(mbps(&d), 50_000.0);
    assert_eq!(d.alpha(us(54)), 1.0);
    assert_eq!(d.alpha(us(55)), 255.0 / 256.0);
    assert_eq!(d.alpha(us(110)), (255.0f64 / 256.0).powi(2));
    // No monitor period: two CNPs 1 us apart both reduce.
    assert_eq!(d.on_cnp(us(1)), CnpOutcome::Handled);
    assert_eq!(mbps(&d), 25_000.0);
}
