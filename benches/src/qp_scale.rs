//! Per-packet cost against the number of active QPs (the target: thousands
//! of QPs per engine at a flat per-packet cost): the in-memory protocol path
//! for 64 B RDMA WRITEs with 1, 1K, 16K and 64K connected QP pairs, every
//! QP active, and `roce-xdp sim`'s wall time per message for the same QP
//! counts. Each row's ratio is against the 1-QP row of the same run.
//!
//! How the protocol rows are measured: a generation pass drives both
//! endpoints for [`PACKETS`] messages, message `k` on QP `k % N` (so with N
//! QPs every QP is touched once every N packets, and with 64K QPs every
//! packet finds a QP whose state is out of the caches), and keeps every
//! data frame and every ACK. Each message is one WRITE_ONLY with AckReq
//! answered by one ACK, whatever N, so every row does the same protocol
//! work per packet. Then, with both sides reset to the same PSNs:
//! - responder: `handle_packet` of each data frame and the `poll_transmit`
//!   of its ACK;
//! - requester: `post_send` + `poll_transmit` of each message and the
//!   `handle_packet` of its ACK (unsignaled: no completion).
//!
//! Timed in batches of [`BATCH`] packets, best of several passes; the QP
//! resets between passes are not timed.
//!
//! Each batch's frames (data frames for the responder, ACKs for the
//! requester) are copied into a receive ring (`RxRing`) just before the
//! batch's timer starts, and handed to the endpoint from there, as the
//! engine finds them in its AF_XDP ring: written there by the kernel's
//! copy just before it polls (copy mode) or by the NIC into the
//! last-level cache (zero copy on NICs with DDIO). Read instead from where
//! the generation pass stored them, 65,536 frames and as many ACKs are out
//! of the caches once the QPs' state has streamed through: with 64K QPs
//! in shuffled order a third of the responder's time went to reading the
//! frames' headers (`perf record` of `examples/qp_scale_probe 65536 6
//! shuffled`), a cost of the rig, not of the engine.
//!
//! Two QP orders ([`QpOrder`]): message `k` on the `k % N`-th QP in slot
//! order (the QPs' state walked through memory front to back, which the
//! CPU's own prefetchers follow), and in a seeded shuffled order (as
//! traffic from many peers arrives: each packet's QP anywhere in memory).
//! The responder pass receives as the engine's driver does: with
//! [`engine::driver::PREFETCH_MIN_QPS`] QPs or more, each frame's QP is
//! prefetched in the two stages of [`engine::driver::PREFETCH_AHEAD`]
//! ([`engine::driver::prefetch_qp_index`], then
//! [`engine::driver::prefetch_qp_state`]); the requester pass takes its
//! posts as the driver takes the application's, [`BATCH`] at a time, each
//! post's QP (and its data) prefetched the same way a few posts ahead in
//! the batch, and the first posts' at the batch's start
//! ([`engine::driver::prefetch_posts`]). Stage two of both also asks for
//! the payload's memory (the WRITE's target, the message's data): the
//! region the messages cycle through stays in the caches at 1 QP and not
//! with 64K QPs (`docs/design/qp-layout.md`, "The payload's memory").
//!
//! The rows `responder+stats` and `requester+stats` (shuffled order) add
//! what the driver's statistics cost: it publishes the endpoint's counters
//! every few milliseconds while there is work. Each pass starts just
//! after such a sum and ends with the next, timed, its time shared over
//! the pass's packets ([`Rig::pass_with_snapshot`]): with 64K QPs, as
//! many QPs as packets, as a driver sees between two snapshots when that
//! many QPs are active. The sum reads one QP's counters, and the rest of
//! its work is paid as QPs are handed out, in the pass (`docs/architecture.md`, "The statistics' sum over active QPs"),
//! so these rows and the plain shuffled ones measure the same work.

use std::net::{IpAddr, Ipv4Addr};
use std::time::Instant as WallInstant;

use engine::driver::{
    prefetch_distance, prefetch_posts, prefetch_qp_index, prefetch_qp_state, PostHint,
};
use engine::endpoint::{ConnectOptions, Endpoint, EndpointConfig, RemoteQp};
use engine::io::Lookahead;
use engine::rc::{
    Access, MrKeys, Mtu, QpAttr, QpAttrMask, QpInitAttr, QpState, SendOp, SendWr, Sge,
};
use engine::sim::scenarios::{run_workload, WorkloadConfig};
use engine::sim::SplitMix64;
use engine::time::Instant;
use serde::{Deserialize, Serialize};

/// The QP counts of the rows.
pub const QP_COUNTS: [u32; 4] = [1, 1024, 16_384, 65_536];
/// Messages (= data packets) per pass.
pub const PACKETS: usize = 65_536;
/// Packets per timed batch.
pub const BATCH: usize = 32;
/// Message size.
pub const SIZE: u32 = 64;
/// Seed of the [`QpOrder::Shuffled`] order.
const SHUFFLE_SEED: u64 = 0x5EED_0A11_0C8E;
/// Messages of each `roce-xdp sim` row.
pub const SIM_MESSAGES: u64 = 262_144;

/// Bytes a slot of [`RxRing`] holds, as an AF_XDP frame.
const RING_SLOT: usize = 2048;

/// A receive ring: the frames of one batch (and those the prefetch looks
/// at ahead of it), each in a slot of its own in one buffer, as in an
/// AF_XDP UMEM. See the module's documentation.
struct RxRing {
    buf: Vec<u8>,
    lens: Vec<usize>,
}

impl RxRing {
    fn new(slots: usize) -> RxRing {
        RxRing {
            buf: vec![0; slots * RING_SLOT],
            lens: Vec::with_capacity(slots),
        }
    }

    /// Copies `frames` into the first slots (untimed: the kernel's or the
    /// NIC's work).
    fn fill(&mut self, frames: &[Vec<u8>]) {
        self.lens.clear();
        for (i, f) in frames.iter().enumerate() {
            self.buf[i * RING_SLOT..][..f.len()].copy_from_slice(f);
            self.lens.push(f.len());
        }
    }

    /// The frame in slot `i`, if one was filled.
    #[inline]
    fn get(&self, i: usize) -> Option<&[u8]> {
        let len = *self.lens.get(i)?;
        Some(&self.buf[i * RING_SLOT..][..len])
    }
}

/// Which QP each message goes to ([`Rig::with_order`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QpOrder {
    /// Message `k` on the `k % N`-th QP created: slot order.
    Slot,
    /// Message `k` on the `k % N`-th QP of a seeded shuffle of them.
    Shuffled,
}

impl QpOrder {
    /// The JSON value of [`QpScaleRow::order`].
    pub fn as_str(self) -> &'static str {
        match self {
            QpOrder::Slot => "slot",
            QpOrder::Shuffled => "shuffled",
        }
    }
}

fn slot_order() -> String {
    QpOrder::Slot.as_str().into()
}

/// One row of the JSON key `qp_scale`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct QpScaleRow {
    /// `responder`, `requester` (in-memory protocol path, per packet),
    /// `responder+stats`, `requester+stats` (the same, each pass followed
    /// by the statistics snapshot the driver takes every few milliseconds,
    /// its cost shared over the pass's packets) or `sim` (`roce-xdp sim`
    /// wall time per message, setup included).
    pub path: String,
    /// The order in which messages visit the QPs ([`QpOrder`]: `slot` or
    /// `shuffled`); `slot` for the sim rows and for results written before
    /// the field existed.
    #[serde(default = "slot_order")]
    pub order: String,
    pub qps: u32,
    pub ns_per_packet: f64,
    /// `ns_per_packet` / the same path's 1-QP row.
    pub ratio: f64,
}

const MAC_A: [u8; 6] = [2, 0, 0, 0, 0, 0xA];
const MAC_B: [u8; 6] = [2, 0, 0, 0, 0, 0xB];
const IOVA: u64 = 0x10_0000;
const REGION: usize = 1 << 20;
const PSN: u32 = 0xFF_F000;

/// N connected QP pairs and the frames of one pass ([`Rig::new`]).
pub struct Rig {
    a: Endpoint,
    b: Endpoint,
    qps: Vec<(u32, u32)>,
    src: MrKeys,
    dst: MrKeys,
    frames: Vec<Vec<u8>>,
    acks: Vec<Vec<u8>>,
}

fn ips() -> (IpAddr, IpAddr) {
    (
        IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
        IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)),
    )
}

fn opts() -> ConnectOptions {
    ConnectOptions {
        path_mtu: Mtu::Mtu1024,
        sq_psn: PSN,
        access: Access::REMOTE_WRITE,
        ..ConnectOptions::default()
    }
}

/// Message `k`: an unsignaled 64 B WRITE on QP `k % n`, at an offset of
/// the shared regions that cycles through them.
fn wr(k: usize, src: MrKeys, dst: MrKeys) -> SendWr {
    let off = (k as u64 * u64::from(SIZE)) % REGION as u64;
    let mut w = SendWr::new(
        k as u64,
        SendOp::Write,
        Sge {
            lkey: src.lkey,
            addr: IOVA + off,
            length: SIZE,
        },
    );
    w.remote_addr = IOVA + off;
    w.rkey = dst.rkey;
    w.signaled = false;
    w
}

/// RESET, then connected again at the first PSNs (both directions use [`PSN`]).
fn reconnect(ep: &mut Endpoint, qpn: u32, peer_qpn: u32, mac: [u8; 6], ip: IpAddr) {
    let reset = QpAttr {
        state: QpState::Reset,
        ..QpAttr::default()
    };
    ep.modify_qp(qpn, &reset, QpAttrMask::STATE)
        .expect("reset QP");
    ep.connect(qpn, &peer(peer_qpn, mac, ip), &opts())
        .expect("reconnect QP");
}

/// The other side's QP `qpn`, which starts at [`PSN`].
fn peer(qpn: u32, mac: [u8; 6], ip: IpAddr) -> RemoteQp {
    RemoteQp {
        qpn,
        psn: PSN,
        mac,
        ip,
    }
}

impl Rig {
    /// `n` connected QP pairs in slot order and the generation pass.
    pub fn new(n: u32) -> Rig {
        Rig::with_order(n, QpOrder::Slot)
    }

    /// `n` connected QP pairs, visited in `order`, and the generation pass.
    pub fn with_order(n: u32, order: QpOrder) -> Rig {
        let (ip_a, ip_b) = ips();
        let cfg = |mac, ip, seed| EndpointConfig {
            local_mac: mac,
            local_ip: ip,
            max_qps: n,
            seed: [seed, 0x5ca1e],
            ..Default::default()
        };
        let mut a = Endpoint::new(cfg(MAC_A, ip_a, 1));
        let mut b = Endpoint::new(cfg(MAC_B, ip_b, 2));
        let ca = a.create_cq(16);
        let cb = b.create_cq(16);
        let init = |cq| QpInitAttr {
            send_cq: cq,
            recv_cq: cq,
            max_send_wr: 4,
            max_recv_wr: 4,
            sq_sig_all: false,
            srq: None,
        };
        let mut qps = Vec::with_capacity(n as usize);
        for _ in 0..n {
            let qa = a.create_qp(init(ca)).expect("create QP on A");
            let qb = b.create_qp(init(cb)).expect("create QP on B");
            a.connect(qa, &peer(qb, MAC_B, ip_b), &opts())
                .expect("connect A");
            b.connect(qb, &peer(qa, MAC_A, ip_a), &opts())
                .expect("connect B");
            qps.push((qa, qb));
        }
        if order == QpOrder::Shuffled {
            seeded_shuffle(&mut qps);
        }
        let src = a
            .reg_mr(Box::new(vec![0x5Au8; REGION]), IOVA, Access::LOCAL_WRITE)
            .expect("register A");
        let dst = b
            .reg_mr(
                Box::new(vec![0u8; REGION]),
                IOVA,
                Access::LOCAL_WRITE | Access::REMOTE_WRITE,
            )
            .expect("register B");
        let mut rig = Rig {
            a,
            b,
            qps,
            src,
            dst,
            frames: Vec::with_capacity(PACKETS),
            acks: Vec::with_capacity(PACKETS),
        };
        rig.generate();
        rig
    }

    /// The generation pass: every data frame and every ACK, kept.
    fn generate(&mut self) {
        let mut buf = vec![0u8; 2048];
        let now = Instant::ZERO;
        for k in 0..PACKETS {
            let (qa, _) = self.qps[k % self.qps.len()];
            self.a
                .post_send(qa, wr(k, self.src, self.dst))
                .expect("post");
            let n = self.a.poll_transmit(now, &mut buf).expect("a data frame");
            self.frames.push(buf[..n].to_vec());
            self.b.handle_packet(now, &buf[..n]);
            let n = self.b.poll_transmit(now, &mut buf).expect("an ACK");
            self.acks.push(buf[..n].to_vec());
            self.a.handle_packet(now, &buf[..n]);
            assert!(self.a.poll_transmit(now, &mut buf).is_none());
            assert!(self.b.poll_transmit(now, &mut buf).is_none());
        }
    }

    /// The responder pass's untimed part: B's QPs back to the first PSNs.
    pub fn reset_b(&mut self) {
        let (ip_a, _) = ips();
        for &(qa, qb) in &self.qps {
            reconnect(&mut self.b, qb, qa, MAC_A, ip_a);
        }
    }

    /// The requester pass's untimed part: A's QPs back to the first PSNs.
    pub fn reset_a(&mut self) {
        let (_, ip_b) = ips();
        for &(qa, qb) in &self.qps {
            reconnect(&mut self.a, qa, qb, MAC_B, ip_b);
        }
    }

    /// A pass (responder, or requester with `requester`) that starts with
    /// every QP's counters summed, as after one of the driver's statistics
    /// snapshots (every few milliseconds), and ends with the next: the
    /// pass's mean ns per packet, and the snapshot's ns per packet. With
    /// N QPs and [`PACKETS`] packets, min(N, PACKETS) QPs change between
    /// the two snapshots, as between two of a driver's when that many are
    /// active.
    pub fn pass_with_snapshot(&mut self, requester: bool) -> (f64, f64) {
        let mean = if requester {
            self.reset_a();
            std::hint::black_box(self.a.counters());
            self.requester_run().1
        } else {
            self.reset_b();
            std::hint::black_box(self.b.counters());
            self.responder_run().1
        };
        let ep = if requester { &self.a } else { &self.b };
        let t = WallInstant::now();
        std::hint::black_box(ep.counters());
        (mean, t.elapsed().as_nanos() as f64 / PACKETS as f64)
    }

    /// One timed responder pass over [`PACKETS`] packets: the fastest
    /// batch's ns per packet, and the mean.
    pub fn responder_pass(&mut self) -> (f64, f64) {
        self.reset_b();
        self.responder_run()
    }

    /// The timed part of [`Rig::responder_pass`] (apart, so that a
    /// profiler can count it alone).
    #[inline(never)]
    fn responder_run(&mut self) -> (f64, f64) {
        let mut tx = vec![0u8; 2048];
        let now = Instant::ZERO;
        let (mut best, mut total) = (f64::MAX, 0u128);
        // As the driver receives (`engine::driver`, receive step): both
        // prefetch stages, each frame first `far` then `near` frames ahead.
        let ahead = prefetch_distance(&self.b);
        let (near, far) = (ahead.near as usize, ahead.far as usize);
        let mut ring = RxRing::new(BATCH + far);
        for k0 in (0..PACKETS).step_by(BATCH) {
            let end = (k0 + BATCH).min(PACKETS);
            ring.fill(&self.frames[k0..(end + far).min(PACKETS)]);
            let start = WallInstant::now();
            for j in 0..end - k0 {
                if far > 0 {
                    if let Some(next) = ring.get(j + far) {
                        prefetch_qp_index(&self.b, next);
                    }
                }
                if near > 0 {
                    if let Some(next) = ring.get(j + near) {
                        prefetch_qp_state(&self.b, next);
                    }
                }
                let f = ring.get(j).expect("a frame in the ring");
                self.b.handle_packet(now, f);
                std::hint::black_box(self.b.poll_transmit(now, &mut tx));
            }
            let ns = start.elapsed().as_nanos();
            total += ns;
            best = best.min(ns as f64 / (end - k0) as f64);
        }
        (best, total as f64 / PACKETS as f64)
    }

    /// One timed requester pass (as [`Rig::responder_pass`]).
    pub fn requester_pass(&mut self) -> (f64, f64) {
        self.reset_a();
        self.requester_run()
    }

    /// The timed part of [`Rig::requester_pass`].
    #[inline(never)]
    fn requester_run(&mut self) -> (f64, f64) {
        let mut tx = vec![0u8; 2048];
        let now = Instant::ZERO;
        let n = self.qps.len();
        let (mut best, mut total) = (f64::MAX, 0u128);
        // As the driver takes the application's posts, a batch at a time
        // (`engine::driver`, `take_work`): the QP of the post `far`, then
        // `near`, places ahead in the batch prefetched, and the first
        // posts' at the batch's start (`prefetch_posts`).
        let ahead = prefetch_distance(&self.a);
        let prefetch = ahead != Lookahead::default();
        let mut ring = RxRing::new(BATCH);
        let mut k = 0;
        while k < PACKETS {
            let end = (k + BATCH).min(PACKETS);
            ring.fill(&self.acks[k..end]);
            let start = WallInstant::now();
            // The batch's work requests, built once: the prefetch reads
            // each one's data range, as the driver reads the posts it took
            // (past `end`, a short last batch builds a few unused ones).
            let wrs: [SendWr; BATCH] = std::array::from_fn(|b| wr(k + b, self.src, self.dst));
            let mut posts = [None; BATCH];
            if prefetch {
                for (j, p) in (k..end).zip(posts.iter_mut()) {
                    *p = Some(PostHint {
                        qpn: self.qps[j % n].0,
                        payload: self.a.send_payload_hint(&wrs[j - k]),
                    });
                }
            }
            for j in k..end {
                if prefetch {
                    prefetch_posts(&self.a, &posts, j - k, ahead);
                }
                let (qa, _) = self.qps[j % n];
                let _ = self.a.post_send(qa, wrs[j - k]);
                std::hint::black_box(self.a.poll_transmit(now, &mut tx));
                let ack = ring.get(j - k).expect("an ACK in the ring");
                self.a.handle_packet(now, ack);
            }
            let ns = start.elapsed().as_nanos();
            total += ns;
            best = best.min(ns as f64 / (end - k) as f64);
            k = end;
        }
        (best, total as f64 / PACKETS as f64)
    }
}

/// Per-packet cost of each QP count of `counts`: (responder, requester) ns
/// per packet, the mean over each pass, best pass of `passes`. Every rig
/// is built first and the passes go round the rigs in turn (pass 1 of
/// every count, then pass 2, ...), so that a slow minute of a noisy
/// machine lands on every row, not on one.
pub fn protocol_points(counts: &[u32], passes: usize) -> Vec<(f64, f64)> {
    protocol_points_in(counts, passes, QpOrder::Slot)
}

/// [`protocol_points`] with the messages visiting the QPs in `order`.
pub fn protocol_points_in(counts: &[u32], passes: usize, order: QpOrder) -> Vec<(f64, f64)> {
    best_passes(counts, passes, order, |rig| {
        (rig.responder_pass().1, rig.requester_pass().1)
    })
}

/// [`protocol_points_in`] with each pass between two of the driver's
/// statistics snapshots ([`Rig::pass_with_snapshot`]): (responder,
/// requester) ns per packet, the pass and its share of the snapshot
/// together. The driver sums the counters of the QPs active since its last
/// snapshot every few milliseconds; with tens of thousands of active QPs
/// that read is a cost per packet the rows without it do not show.
pub fn protocol_points_with_snapshot(
    counts: &[u32],
    passes: usize,
    order: QpOrder,
) -> Vec<(f64, f64)> {
    best_passes(counts, passes, order, |rig| {
        let (resp, resp_sum) = rig.pass_with_snapshot(false);
        let (req, req_sum) = rig.pass_with_snapshot(true);
        (resp + resp_sum, req + req_sum)
    })
}

/// Builds a rig for each of `counts`, then runs `pass` (a responder and
/// a requester figure) round the rigs `passes` times and keeps each
/// rig's best of each figure; checks that no frame was dropped.
fn best_passes(
    counts: &[u32],
    passes: usize,
    order: QpOrder,
    mut pass: impl FnMut(&mut Rig) -> (f64, f64),
) -> Vec<(f64, f64)> {
    let mut rigs: Vec<Rig> = counts.iter().map(|&n| Rig::with_order(n, order)).collect();
    let mut best = vec![(f64::MAX, f64::MAX); rigs.len()];
    for _ in 0..passes.max(1) {
        for (rig, (resp, req)) in rigs.iter_mut().zip(best.iter_mut()) {
            let (a, b) = pass(rig);
            *resp = resp.min(a);
            *req = req.min(b);
        }
    }
    for rig in &rigs {
        let c = rig.b.counters();
        assert_eq!(c.dropped_malformed + c.dropped_unknown_qp, 0, "{c:?}");
    }
    best
}

/// `roce-xdp sim --messages SIM_MESSAGES --size 64 --qps n`: wall time per
/// message, setup included (the whole run as the command runs it).
pub fn sim_point(n: u32, messages: u64) -> Result<f64, String> {
    let cfg = WorkloadConfig {
        messages,
        size: SIZE,
        qps: n,
        ..WorkloadConfig::default()
    };
    let start = WallInstant::now();
    let r = run_workload(&cfg);
    let ns = start.elapsed().as_nanos() as f64;
    if !r.ok() {
        return Err(format!(
            "sim with {n} QPs failed verification: {}",
            r.first_error.unwrap_or_default()
        ));
    }
    Ok(ns / messages as f64)
}

/// Every row, for `counts` QP counts (the first is the baseline).
pub fn measure(
    counts: &[u32],
    passes: usize,
    sim_messages: u64,
) -> Result<Vec<QpScaleRow>, String> {
    // The sim rows as the protocol rows: passes round the counts in turn,
    // each row its best pass (one run each let a slow second of the
    // machine land on one row: the 1-QP row alone measured 541 and 967 ns
    // in two full runs).
    let mut sim: Vec<(u32, f64)> = counts.iter().map(|&n| (n, f64::MAX)).collect();
    for _ in 0..passes.max(1) {
        for (n, best) in sim.iter_mut() {
            *best = best.min(sim_point(*n, sim_messages)?);
        }
    }
    let mut rows = Vec::new();
    let row = |path: &str, order: QpOrder, n, ns: f64, base: f64| QpScaleRow {
        path: path.to_string(),
        order: order.as_str().into(),
        qps: n,
        ns_per_packet: ns,
        ratio: ns / base,
    };
    // Each kind of pass gives a responder and a requester row per count,
    // each against its own 1-QP row.
    let mut paired = |resp_path: &str, req_path: &str, order: QpOrder, points: Vec<(f64, f64)>| {
        let (base_resp, base_req) = points[0];
        for (&n, &(resp, _)) in counts.iter().zip(&points) {
            rows.push(row(resp_path, order, n, resp, base_resp));
        }
        for (&n, &(_, req)) in counts.iter().zip(&points) {
            rows.push(row(req_path, order, n, req, base_req));
        }
    };
    for order in [QpOrder::Slot, QpOrder::Shuffled] {
        let points = protocol_points_in(counts, passes, order);
        paired("responder", "requester", order, points);
    }
    // The shuffled order again, each pass with the driver's statistics
    // snapshot after it (`Rig::pass_with_snapshot`).
    let points = protocol_points_with_snapshot(counts, passes, QpOrder::Shuffled);
    paired(
        "responder+stats",
        "requester+stats",
        QpOrder::Shuffled,
        points,
    );
    let base_sim = sim[0].1;
    for &(n, ns) in &sim {
        rows.push(row("sim", QpOrder::Slot, n, ns, base_sim));
    }
    Ok(rows)
}

/// One row of the machine's memory latency behind the `qp_scale` rows:
/// dependent loads, one per cache line, in a seeded random order over a
/// buffer as large as `qps` QPs' state on one side (each QP
/// [`engine::endpoint::QP_SLOT_BYTES`]: the QP and its schedule entry),
/// as a packet of a shuffled pass finds its
/// QP. Whether 64K QPs' state comes from a cache or from memory is the
/// machine's, and this row says which: on the development VM the loads
/// took 35 ns up to 8 MiB and 124-139 ns from 16 MiB on (the figures of
/// `docs/performance-log.md`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemoryRow {
    /// QPs whose state the buffer is as large as.
    pub qps: u32,
    /// Bytes of the buffer.
    pub bytes: u64,
    /// Nanoseconds per dependent load (the best of the passes).
    pub ns_per_load: f64,
}

/// Fisher-Yates with the simulator's seeded generator from
/// [`SHUFFLE_SEED`]: the same order in every run.
fn seeded_shuffle<T>(v: &mut [T]) {
    let mut rng = SplitMix64::new(SHUFFLE_SEED);
    for i in (1..v.len()).rev() {
        v.swap(i, (rng.next_u64() % (i as u64 + 1)) as usize);
    }
}

/// Dependent loads per pass of [`memory_latency`].
const CHASE_LOADS: usize = 1 << 20;

/// Nanoseconds per dependent load over a buffer of `bytes` (at least one
/// cache line): each line holds the index of the next one to read, the
/// lines in one seeded random cycle. Best of `passes`.
pub fn memory_latency(bytes: usize, passes: usize) -> f64 {
    const WORDS_PER_LINE: usize = 64 / 8;
    let lines = (bytes / 64).max(1);
    let mut order: Vec<u32> = (0..lines as u32).collect();
    seeded_shuffle(&mut order);
    let mut next = vec![0u64; lines * WORDS_PER_LINE];
    for (i, &line) in order.iter().enumerate() {
        let to = order[(i + 1) % lines];
        next[line as usize * WORDS_PER_LINE] = u64::from(to) * WORDS_PER_LINE as u64;
    }
    let mut at = u64::from(order[0]) * WORDS_PER_LINE as u64;
    // One round first: the buffer's pages faulted in, the TLB as warm as
    // it gets.
    for _ in 0..lines {
        at = next[at as usize];
    }
    let mut best = f64::MAX;
    for _ in 0..passes.max(1) {
        let t = WallInstant::now();
        for _ in 0..CHASE_LOADS {
            at = next[at as usize];
        }
        best = best.min(t.elapsed().as_nanos() as f64 / CHASE_LOADS as f64);
    }
    std::hint::black_box(at);
    best
}

/// [`memory_latency`] for each of `counts` QPs' state.
pub fn memory_rows(counts: &[u32], passes: usize) -> Vec<MemoryRow> {
    counts
        .iter()
        .map(|&qps| {
            let bytes = qps as usize * engine::endpoint::QP_SLOT_BYTES;
            MemoryRow {
                qps,
                bytes: bytes as u64,
                ns_per_load: memory_latency(bytes, passes),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_rows_cover_each_count_with_a_latency() {
        let rows = memory_rows(&[1, 64], 1);
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[1].bytes, 64 * engine::endpoint::QP_SLOT_BYTES as u64);
        assert!(rows
            .iter()
            .all(|r| r.ns_per_load.is_finite() && r.ns_per_load > 0.0));
    }

    #[test]
    fn every_row_moves_its_packets_and_has_a_ratio() {
        let rows = measure(&[1, 64], 1, 512).unwrap();
        // responder and requester in both orders, the same shuffled with
        // the statistics snapshot, and the sim.
        assert_eq!(rows.len(), 14);
        assert_eq!(rows.iter().filter(|r| r.order == "shuffled").count(), 8);
        for path in ["responder+stats", "requester+stats"] {
            let with: Vec<_> = rows.iter().filter(|r| r.path == path).collect();
            assert_eq!(with.len(), 2, "{path}");
            assert!(with.iter().all(|r| r.order == "shuffled"), "{path}");
        }
        for r in &rows {
            assert!(r.ns_per_packet > 0.0 && r.ratio > 0.0, "{r:?}");
        }
        assert!(rows.iter().filter(|r| r.qps == 1).all(|r| r.ratio == 1.0));
    }
}
