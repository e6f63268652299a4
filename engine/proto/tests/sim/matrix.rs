//! Simulation matrix: every op, loss 0 / 0.1 % / 1 % / 5 % / 20 %, with and
//! without reordering, duplication and corruption, message sizes from 0 bytes
//! to 1 MiB, several QPs, several seeds. Every message must be delivered
//! once, byte-exact, in order.
//!
//! `ROCE_SIM_SOAK=1` runs many more seeds and larger messages.

use core::time::Duration;

use proto::rc::Mtu;
use proto::sim::scenarios::{run_workload as run, Op, WorkloadConfig, WorkloadReport};
use proto::sim::{Impairments, LinkConfig};

const LOSSES: [f64; 5] = [0.0, 0.001, 0.01, 0.05, 0.2];
const OPS: [Op; 4] = [Op::Write, Op::Send, Op::Read, Op::Atomic];

fn soak() -> bool {
    std::env::var_os("ROCE_SIM_SOAK").is_some_and(|v| v != "0")
}

fn link(loss: f64, messy: bool) -> LinkConfig {
    let impair = if messy {
        Impairments {
            loss,
            reorder: 0.05,
            reorder_delay: Duration::from_micros(3),
            duplicate: 0.02,
            corrupt: 0.02,
        }
    } else {
        Impairments {
            loss,
            ..Impairments::NONE
        }
    };
    LinkConfig {
        impair,
        ..LinkConfig::default()
    }
}

fn check(cfg: &WorkloadConfig, r: &WorkloadReport) {
    assert!(
        r.ok(),
        "{:?} size {} mtu {:?} qps {} seed {} loss {} impair {:?}:\n{r}\n{:?}",
        cfg.op,
        cfg.size,
        cfg.mtu,
        cfg.qps,
        cfg.seed,
        cfg.link.impair.loss,
        cfg.link.impair,
        r.counters
    );
    let size = if cfg.op == Op::Atomic {
        8
    } else {
        u64::from(cfg.size)
    };
    assert_eq!(r.bytes_verified, size * cfg.messages);
}

#[test]
fn every_op_every_loss_rate_with_and_without_mess() {
    let sizes = [0u32, 1, 1000, 4097, 65_536];
    let mtus = [
        Mtu::Mtu256,
        Mtu::Mtu1024,
        Mtu::Mtu4096,
        Mtu::Mtu512,
        Mtu::Mtu2048,
    ];
    let seeds: u64 = if soak() { 200 } else { 3 };
    let messages = if soak() { 64 } else { 24 };
    let mut runs = 0;
    let (mut lossy_retransmits, mut lossy_drops) = (0, 0);
    for (li, &loss) in LOSSES.iter().enumerate() {
        for messy in [false, true] {
            for op in OPS {
                for seed in 1..=seeds {
                    let k = (li as u64 * 7 + seed * 3 + op as u64) as usize;
                    let cfg = WorkloadConfig {
                        op,
                        messages,
                        size: sizes[k % sizes.len()],
                        mtu: mtus[(k / 2) % mtus.len()],
                        qps: 1 + (seed as u32 % 3),
                        link: link(loss, messy),
                        seed: seed * 1000 + li as u64,
                        max_sim_time: Duration::from_secs(60),
                        ..WorkloadConfig::default()
                    };
                    let r = run(&cfg);
                    check(&cfg, &r);
                    if loss > 0.0 {
                        lossy_retransmits += r.counters.retransmitted_packets;
                        lossy_drops += r.link.dropped;
                    }
                    runs += 1;
                }
            }
        }
    }
    assert_eq!(runs, 5 * 2 * 4 * seeds as usize);
    assert!(
        lossy_drops > 100 && lossy_retransmits > lossy_drops / 2,
        "{lossy_drops} drops, {lossy_retransmits} resent"
    );
}

#[test]
fn one_mib_messages_under_loss_reordering_duplication_and_corruption() {
    let losses: &[f64] = if soak() { &LOSSES } else { &[0.0, 0.01, 0.05] };
    for &loss in losses {
        for op in [Op::Write, Op::Send, Op::Read] {
            let cfg = WorkloadConfig {
                op,
                messages: 4,
                size: 1 << 20,
                mtu: Mtu::Mtu4096,
                qps: 2,
                window: 2,
                link: link(loss, true),
                seed: 77,
                max_sim_time: Duration::from_secs(60),
                ..WorkloadConfig::default()
            };
            check(&cfg, &run(&cfg));
        }
    }
}

#[test]
fn twenty_percent_loss_many_qps_small_messages() {
    for op in OPS {
        let cfg = WorkloadConfig {
            op,
            messages: 200,
            size: 300,
            mtu: Mtu::Mtu256,
            qps: 8,
            link: link(0.2, true),
            seed: 5,
            ..WorkloadConfig::default()
        };
        check(&cfg, &run(&cfg));
    }
}

#[test]
fn corruption_is_caught_by_the_icrc() {
    let cfg = WorkloadConfig {
        op: Op::Write,
        messages: 50,
        size: 8192,
        link: LinkConfig {
            impair: Impairments {
                corrupt: 0.1,
                ..Impairments::NONE
            },
            ..LinkConfig::default()
        },
        seed: 9,
        ..WorkloadConfig::default()
    };
    let r = run(&cfg);
    check(&cfg, &r);
    assert!(r.link.corrupted > 0);
    // Every corrupted frame was refused (by the ICRC, or earlier for a
    // flipped port/opcode); none was accepted.
    assert_eq!(
        r.counters.dropped_bad_icrc + r.counters.dropped_malformed,
        r.link.corrupted
    );
}

#[test]
fn same_seed_same_run() {
    let cfg = WorkloadConfig {
        op: Op::Read,
        messages: 30,
        size: 5000,
        link: link(0.05, true),
        seed: 3,
        ..WorkloadConfig::default()
    };
    let a = run(&cfg);
    let b = run(&cfg);
    assert_eq!(a, b);
    let c = run(&WorkloadConfig { seed: 4, ..cfg });
    assert_ne!(a.counters, c.counters);
}
