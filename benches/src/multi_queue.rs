//! The multi-queue row of `roce-xdp bench` (`docs/multi-queue.md`): RDMA
//! WRITE with one queue per side and with several, on the bridged test bed
//! (`VethPair::create_bridged`), whose bridge spreads flows over each
//! side's queues by a hash of the flow as RSS spreads them over a NIC's.
//! Per queue count: goodput, the share of received packets that took a
//! detour through another queue (`rx_handoff`), and the CPU time of both
//! sides' engine threads per data packet, which must not grow by more than
//! 10 % from one queue to several. The queue counts alternate over the
//! rounds (1, N, 1, N, ...) and each figure is the median of its rounds.

use engine::driver::PollMode;
use engine::testbed::netns::{PairConfig, VethPair};

use crate::engine_path::{stream, Op, Rig};
use crate::options::{Options, LINK_MTU};
use crate::report::{MultiQueue, MultiQueueRow};
use crate::sources::SourceLayout;

/// Message size of the row.
pub const SIZE: u64 = 64 * 1024;
/// QP pairs in every run (QP i on queue i % queues).
pub const QPS: u32 = 8;

/// Measures 1 and `queues` queues per side, `rounds` times each.
pub fn measure(
    opts: &Options,
    poll: PollMode,
    queues: u32,
    rounds: u32,
) -> Result<MultiQueue, String> {
    let counts = [1, queues.max(2)];
    let mut runs: Vec<Vec<MultiQueueRow>> = vec![Vec::new(); counts.len()];
    for round in 0..rounds.max(1) {
        for (i, &q) in counts.iter().enumerate() {
            let row = run(opts, poll, q)?;
            if opts.progress {
                eprintln!(
                    "bench: multi-queue round {}: {q} queue(s): {:.2} Gb/s, {:.2} % handed off, {:.0} ns CPU/packet",
                    round + 1,
                    row.gbps,
                    row.handoff_share * 100.0,
                    row.cpu_ns_per_packet
                );
            }
            runs[i].push(row);
        }
    }
    let rows: Vec<MultiQueueRow> = runs
        .into_iter()
        .zip(counts)
        .map(|(rs, queues)| MultiQueueRow {
            queues,
            gbps: med(&rs, |r| r.gbps),
            handoff_share: med(&rs, |r| r.handoff_share),
            cpu_ns_per_packet: med(&rs, |r| r.cpu_ns_per_packet),
        })
        .collect();
    let cpu_ratio = match (rows.first(), rows.last()) {
        (Some(one), Some(many)) if one.cpu_ns_per_packet > 0.0 => {
            Some(many.cpu_ns_per_packet / one.cpu_ns_per_packet)
        }
        _ => None,
    };
    Ok(MultiQueue {
        message_bytes: SIZE,
        qps: QPS,
        rounds: rounds.max(1),
        rows,
        cpu_ratio,
    })
}

/// One run on a fresh bridged pair with `queues` queues per side.
fn run(opts: &Options, poll: PollMode, queues: u32) -> Result<MultiQueueRow, String> {
    let pair = VethPair::create_bridged(
        &PairConfig {
            mtu: LINK_MTU,
            queues,
        },
        queues,
    )
    .map_err(|e| format!("creating the bridged veth pairs: {e}"))?;
    let rig = Rig::open_with_qps(&pair, queues, poll, QPS)?;
    let r = stream(&rig, Op::Write, SIZE, SourceLayout::Perftest, opts.point());
    rig.close();
    let r = r?;
    let p = r.point(Op::Write, SIZE);
    let (requester, responder) = p.thread_ns_per_packet.unwrap_or_default();
    Ok(MultiQueueRow {
        queues,
        gbps: p.gbps,
        handoff_share: if r.received > 0 {
            r.handed_off as f64 / r.received as f64
        } else {
            0.0
        },
        cpu_ns_per_packet: requester + responder,
    })
}

/// The median of one figure over rounds.
fn med(rows: &[MultiQueueRow], f: impl Fn(&MultiQueueRow) -> f64) -> f64 {
    let v: Vec<f64> = rows.iter().map(f).collect();
    crate::stats::median(&v).unwrap_or(0.0)
}
