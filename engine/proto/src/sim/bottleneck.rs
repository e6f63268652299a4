//! A switch egress queue shared by several senders: drains at a fixed rate,
//! marks ECN-capable packets CE above a threshold (RED-like, as switches
//! configure it for DCQCN: Kmin / Kmax / Pmax) and tail-drops at a buffer
//! limit.
//!
//! Marking follows the DCQCN paper's RED-ECN profile: below Kmin never,
//! between Kmin and Kmax with probability rising linearly from 0 to Pmax,
//! above Kmax always. The decision is taken on enqueue, against the queue
//! depth the packet finds. Not-ECT packets are never marked (only dropped
//! when the buffer is full).
//!
//! The queue is FIFO with a deterministic service rate, so its state is one
//! number: when the last accepted packet finishes leaving (`busy_until`).
//! The backlog at any time is the work left until then, in bytes.
//!
//! [`Switch`] is what the simulator consults for every frame it carries
//! (`Simulator::switch`): the egress queues toward chosen nodes, plus a
//! random CE marker (`roce-xdp sim --ce P`).

use core::time::Duration;
use std::collections::VecDeque;

use super::rng::SplitMix64;
use crate::time::Instant;
use crate::wire::Ecn;

/// RED-ECN marking profile.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RedEcn {
    /// Depth (bytes) where marking starts.
    pub kmin_bytes: u64,
    /// Depth (bytes) at and above which every ECN-capable packet is marked.
    pub kmax_bytes: u64,
    /// Marking probability just below Kmax (0..=1).
    pub pmax: f64,
}

impl RedEcn {
    /// A profile from one threshold, the way `roce-xdp sim
    /// --ecn-threshold-kb K` sets it by default: Kmin = K, Kmax = 200 KB
    /// (or 2 K if K is larger), Pmax = 1 % (the DCQCN paper's switch
    /// settings for K = 5 KB).
    pub fn from_threshold(kmin_bytes: u64) -> Self {
        RedEcn {
            kmin_bytes,
            kmax_bytes: if kmin_bytes < 200_000 {
                200_000
            } else {
                kmin_bytes.saturating_mul(2)
            },
            pmax: 0.01,
        }
    }

    /// Marking probability at a queue depth of `depth` bytes.
    pub fn probability(&self, depth: u64) -> f64 {
        if depth <= self.kmin_bytes {
            0.0
        } else if depth >= self.kmax_bytes {
            1.0
        } else {
            let span = (self.kmax_bytes - self.kmin_bytes) as f64;
            self.pmax * (depth - self.kmin_bytes) as f64 / span
        }
    }
}

/// When the marking decision is taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MarkPoint {
    /// As the packet leaves, against the queue behind it: the congestion
    /// signal does not wait out the queueing delay (the default).
    #[default]
    Dequeue,
    /// As the packet arrives, against the queue in front of it (classic
    /// WRED-ECN): the mark reaches the receiver one queueing delay later.
    Enqueue,
}

/// Configuration of a [`Bottleneck`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BottleneckConfig {
    /// Drain rate, bit/s.
    pub rate_bps: f64,
    /// ECN marking; None = a switch without ECN (drops only).
    pub red: Option<RedEcn>,
    /// Where marking happens.
    pub mark_point: MarkPoint,
    /// Buffer size: a packet that would make the backlog exceed it is dropped.
    pub buffer_bytes: u64,
}

/// What the queue did with a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Leaves the switch at `depart_at` (its last bit). `ce`: marked on
    /// enqueue ([`MarkPoint::Enqueue`]; with dequeue marking the decision
    /// comes from [`Bottleneck::depart`]).
    Forward { depart_at: Instant, ce: bool },
    /// Tail-dropped: the buffer was full.
    Drop,
}

/// Counters and extremes of a [`Bottleneck`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BottleneckStats {
    pub forwarded_packets: u64,
    pub forwarded_bytes: u64,
    pub ce_marked: u64,
    pub dropped: u64,
    /// Largest backlog a packet found on arrival (itself included), bytes.
    pub max_queue_bytes: u64,
}

/// The shared queue (see the module docs).
#[derive(Debug, Clone)]
pub struct Bottleneck {
    config: BottleneckConfig,
    busy_until: Instant,
    /// (arrival time, `busy_until` after that arrival) of the packets not
    /// yet departed, plus the last departed one: the queue depth at any
    /// time in between. Arrivals are announced ahead of time (a frame is
    /// scheduled when sent), so this is what "the queue at time t" needs.
    arrivals: VecDeque<(Instant, Instant)>,
    stats: BottleneckStats,
}

impl Bottleneck {
    /// An empty queue.
    pub fn new(config: BottleneckConfig) -> Self {
        Bottleneck {
            config,
            busy_until: Instant::ZERO,
            arrivals: VecDeque::new(),
            stats: BottleneckStats::default(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &BottleneckConfig {
        &self.config
    }

    fn bytes_in(&self, d: Duration) -> u64 {
        (d.as_nanos() as f64 * self.config.rate_bps / 8e9).round() as u64
    }

    fn time_for(&self, bytes: u64) -> Duration {
        Duration::from_nanos((bytes as f64 * 8e9 / self.config.rate_bps).ceil() as u64)
    }

    /// Backlog at `now`, bytes: what arrived by `now` and has not left.
    pub fn queue_bytes(&self, now: Instant) -> u64 {
        let busy = self
            .arrivals
            .iter()
            .rev()
            .find(|(at, _)| *at <= now)
            .map_or(Instant::ZERO, |(_, b)| *b);
        self.bytes_in(busy.saturating_duration_since(now))
    }

    /// A packet of `len` bytes arrives at `at`. With enqueue marking,
    /// `ecn_capable` (its IP ECN field is ECT(0)/ECT(1)) and `uniform` (a
    /// sample from [0, 1); the caller owns the seeded RNG) decide the mark.
    pub fn enqueue(&mut self, at: Instant, len: u64, ecn_capable: bool, uniform: f64) -> Verdict {
        let backlog = self.bytes_in(self.busy_until.saturating_duration_since(at));
        if backlog + len > self.config.buffer_bytes {
            self.stats.dropped += 1;
            return Verdict::Drop;
        }
        let depth = backlog + len;
        self.stats.max_queue_bytes = self.stats.max_queue_bytes.max(depth);
        let ce = self.config.mark_point == MarkPoint::Enqueue
            && self.mark(backlog, ecn_capable, uniform);
        let start = self.busy_until.max(at);
        self.busy_until = start + self.time_for(len);
        self.arrivals.push_back((at, self.busy_until));
        self.stats.forwarded_packets += 1;
        self.stats.forwarded_bytes += len;
        Verdict::Forward {
            depart_at: self.busy_until,
            ce,
        }
    }

    /// The packet that [`Self::enqueue`] scheduled for `depart_at` leaves
    /// now. Returns true if it must be marked CE (dequeue marking, against
    /// the bytes queued behind it). Call once per forwarded packet, in
    /// departure order.
    pub fn depart(&mut self, depart_at: Instant, ecn_capable: bool, uniform: f64) -> bool {
        // Keep only the last arrival at or before `depart_at` and later ones.
        while self.arrivals.len() > 1 && self.arrivals[1].0 <= depart_at {
            self.arrivals.pop_front();
        }
        if self.config.mark_point != MarkPoint::Dequeue {
            return false;
        }
        let behind = self.queue_bytes(depart_at);
        self.mark(behind, ecn_capable, uniform)
    }

    fn mark(&mut self, depth: u64, ecn_capable: bool, uniform: f64) -> bool {
        let ce = ecn_capable
            && self
                .config
                .red
                .is_some_and(|red| uniform < red.probability(depth));
        if ce {
            self.stats.ce_marked += 1;
        }
        ce
    }

    /// Counters so far.
    pub fn stats(&self) -> BottleneckStats {
        self.stats
    }
}

/// The IP ECN field of an Ethernet frame (IPv4/IPv6, optional 802.1Q tag).
pub fn frame_ecn(frame: &[u8]) -> Option<Ecn> {
    let (ip, version) = ip_offset(frame)?;
    let bits = match version {
        4 => frame.get(ip + 1)? & 0b11,
        _ => (frame.get(ip + 1)? >> 4) & 0b11,
    };
    Some(match bits {
        0b00 => Ecn::NotEct,
        0b01 => Ecn::Ect1,
        0b10 => Ecn::Ect0,
        _ => Ecn::Ce,
    })
}

/// Set the IP ECN field of an Ethernet frame to CE, as a switch does
/// (updating the IPv4 header checksum; the ICRC masks these bits). Returns
/// false if the frame is not IP.
pub fn mark_frame_ce(frame: &mut [u8]) -> bool {
    let Some((ip, version)) = ip_offset(frame) else {
        return false;
    };
    if version == 4 {
        if frame.len() < ip + 20 {
            return false;
        }
        frame[ip + 1] |= 0b11;
        frame[ip + 10] = 0;
        frame[ip + 11] = 0;
        let mut sum = 0u32;
        for i in (ip..ip + 20).step_by(2) {
            sum += u32::from(u16::from_be_bytes([frame[i], frame[i + 1]]));
        }
        while sum > 0xFFFF {
            sum = (sum & 0xFFFF) + (sum >> 16);
        }
        frame[ip + 10..ip + 12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
    } else {
        if frame.len() < ip + 40 {
            return false;
        }
        frame[ip + 1] |= 0b11 << 4;
    }
    true
}

fn ip_offset(frame: &[u8]) -> Option<(usize, u8)> {
    let mut off = 12;
    let mut ethertype = u16::from_be_bytes([*frame.get(off)?, *frame.get(off + 1)?]);
    if ethertype == 0x8100 {
        off += 4;
        ethertype = u16::from_be_bytes([*frame.get(off)?, *frame.get(off + 1)?]);
    }
    let ip = off + 2;
    match (ethertype, frame.get(ip)? >> 4) {
        (0x0800, 4) => Some((ip, 4)),
        (0x86DD, 6) => Some((ip, 6)),
        _ => None,
    }
}

/// Counters of a [`Switch`] beyond its queues'.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SwitchStats {
    /// Frames marked CE by the random marker (`--ce P`).
    pub random_ce: u64,
}

/// What the simulator passes every frame through: egress queues toward
/// some nodes and a random CE marker.
#[derive(Debug, Clone, Default)]
pub struct Switch {
    /// Probability that an ECN-capable frame is marked CE regardless of any
    /// queue (`roce-xdp sim --ce P`).
    pub ce_probability: f64,
    /// Egress queues, by destination node index.
    pub egress: Vec<(usize, Bottleneck)>,
    pub stats: SwitchStats,
}

impl Switch {
    /// A switch that only marks frames CE at random with probability `p`.
    pub fn random_ce(p: f64) -> Self {
        Switch {
            ce_probability: p,
            ..Default::default()
        }
    }

    /// Put a queue in front of node `dst`.
    pub fn add_egress(&mut self, dst: usize, config: BottleneckConfig) {
        self.egress.push((dst, Bottleneck::new(config)));
    }

    /// The queue in front of node `dst`.
    pub fn queue(&self, dst: usize) -> Option<&Bottleneck> {
        self.egress.iter().find(|(d, _)| *d == dst).map(|(_, q)| q)
    }

    /// A frame bound for node `dst` reaches the switch at `at`: returns when
    /// it leaves toward `dst` (marked CE in place if enqueue marking or the
    /// random marker says so), or `None` if it was dropped. Pass it to
    /// [`Self::deliver`] when that time comes.
    pub fn forward(
        &mut self,
        at: Instant,
        dst: usize,
        frame: &mut [u8],
        rng: &mut SplitMix64,
    ) -> Option<Instant> {
        let ect = matches!(frame_ecn(frame), Some(Ecn::Ect0 | Ecn::Ect1));
        let mut leave = at;
        let mut ce = false;
        if let Some((_, q)) = self.egress.iter_mut().find(|(d, _)| *d == dst) {
            match q.enqueue(at, frame.len() as u64, ect, rng.next_f64()) {
                Verdict::Drop => return None,
                Verdict::Forward {
                    depart_at,
                    ce: marked,
                } => {
                    leave = depart_at;
                    ce = marked;
                }
            }
        }
        if ect && !ce && rng.chance(self.ce_probability) {
            ce = true;
            self.stats.random_ce += 1;
        }
        if ce {
            mark_frame_ce(frame);
        }
        Some(leave)
    }

    /// A frame that [`Self::forward`] accepted for `dst` leaves the switch
    /// now (dequeue marking happens here).
    pub fn deliver(&mut self, now: Instant, dst: usize, frame: &mut [u8], rng: &mut SplitMix64) {
        if let Some((_, q)) = self.egress.iter_mut().find(|(d, _)| *d == dst) {
            let ect = matches!(frame_ecn(frame), Some(Ecn::Ect0 | Ecn::Ect1));
            if q.depart(now, ect, rng.next_f64()) {
                mark_frame_ce(frame);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn us(t: u64) -> Instant {
        Instant::from_micros(t)
    }

    #[test]
    fn marks_ipv4_and_ipv6_frames_ce() {
        // Ethernet + IPv4 header with TOS 106 (DSCP 26, ECT(0)).
        let mut v4 = vec![0u8; 14 + 20];
        v4[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
        v4[14] = 0x45;
        v4[15] = 106;
        v4[22] = 64;
        v4[23] = 17;
        assert_eq!(frame_ecn(&v4), Some(Ecn::Ect0));
        assert!(mark_frame_ce(&mut v4));
        assert_eq!(frame_ecn(&v4), Some(Ecn::Ce));
        assert_eq!(v4[15] >> 2, 26, "DSCP kept");
        assert_eq!(crate::wire::checksum::checksum(&v4[14..34]), 0);
        // 802.1Q + IPv6, traffic class 106.
        let mut v6 = vec![0u8; 18 + 40];
        v6[12..14].copy_from_slice(&0x8100u16.to_be_bytes());
        v6[16..18].copy_from_slice(&0x86DDu16.to_be_bytes());
        v6[18] = 0x60 | (106 >> 4);
        v6[19] = (106 & 0xF) << 4;
        assert_eq!(frame_ecn(&v6), Some(Ecn::Ect0));
        assert!(mark_frame_ce(&mut v6));
        assert_eq!(frame_ecn(&v6), Some(Ecn::Ce));
        assert_eq!(((v6[18] & 0xF) << 2) | (v6[19] >> 6), 26);
        assert!(!mark_frame_ce(&mut [0u8; 10]));
    }

    #[test]
    fn dequeue_marking_sees_the_queue_behind() {
        // 8 Gb/s = 1 byte/ns; mark everything above 2500 B.
        let mut q = Bottleneck::new(BottleneckConfig {
            rate_bps: 8e9,
            red: Some(RedEcn {
                kmin_bytes: 2500,
                kmax_bytes: 2501,
                pmax: 1.0,
            }),
            mark_point: MarkPoint::Dequeue,
            buffer_bytes: 1 << 20,
        });
        // Five 1000-byte packets arrive 100 ns apart from t = 0; each takes
        // 1000 ns to leave: departures at 1000, 2000, ... 5000 ns.
        let mut departs = Vec::new();
        for i in 0..5u64 {
            match q.enqueue(Instant::from_nanos(100 * i), 1000, true, 0.0) {
                Verdict::Forward { depart_at, ce } => {
                    assert!(!ce, "no marking on enqueue");
                    departs.push(depart_at);
                }
                Verdict::Drop => panic!("dropped"),
            }
        }
        // At 1000 ns all five have arrived: 4000 B behind the first -> mark.
        // At 2000: 3000 B behind -> mark; at 3000: 2000 -> no; 4000, 5000 -> no.
        let marks: Vec<bool> = departs.iter().map(|&d| q.depart(d, true, 0.5)).collect();
        assert_eq!(marks, vec![true, true, false, false, false]);
        assert_eq!(q.stats().ce_marked, 2);
        // The queue seen by an observer at 50 ns: only the first packet
        // (1000 B, nothing served yet... 50 B served) has arrived.
        let mut q2 = Bottleneck::new(*q.config());
        q2.enqueue(Instant::ZERO, 1000, true, 0.0);
        q2.enqueue(Instant::from_nanos(500), 1000, true, 0.0);
        assert_eq!(q2.queue_bytes(Instant::from_nanos(50)), 950);
        assert_eq!(q2.queue_bytes(Instant::from_nanos(600)), 1400);
    }

    #[test]
    fn red_profile() {
        let red = RedEcn {
            kmin_bytes: 100,
            kmax_bytes: 300,
            pmax: 0.2,
        };
        assert_eq!(red.probability(50), 0.0);
        assert_eq!(red.probability(100), 0.0);
        assert_eq!(red.probability(200), 0.1);
        assert_eq!(red.probability(300), 1.0);
        let paper = RedEcn::from_threshold(5_000);
        assert_eq!(
            (paper.kmin_bytes, paper.kmax_bytes, paper.pmax),
            (5_000, 200_000, 0.01)
        );
        assert_eq!(RedEcn::from_threshold(300_000).kmax_bytes, 600_000);
    }

    #[test]
    fn drains_at_rate_marks_above_threshold_and_tail_drops() {
        // 8 Gb/s = 1 byte/ns; Kmin 2000 B, Kmax 4000 B; buffer 6000 B.
        let mut q = Bottleneck::new(BottleneckConfig {
            rate_bps: 8e9,
            red: Some(RedEcn {
                kmin_bytes: 2000,
                kmax_bytes: 4000,
                pmax: 0.5,
            }),
            mark_point: MarkPoint::Enqueue,
            buffer_bytes: 6000,
        });
        // Seven 1000-byte packets at t = 0: backlogs found 0..6000.
        let v: Vec<_> = (0..7).map(|_| q.enqueue(us(0), 1000, true, 0.3)).collect();
        // Found 0, 1000, 2000 -> p = 0 (no mark); 3000 -> p = 0.25 (0.3 no
        // mark); 4000, 5000 -> p = 1 (mark); 6000 + 1000 > buffer -> drop.
        let expect_ce = [false, false, false, false, true, true];
        for (i, ce) in expect_ce.iter().enumerate() {
            assert_eq!(
                v[i],
                Verdict::Forward {
                    depart_at: Instant::from_nanos(1000 * (i as u64 + 1)),
                    ce: *ce
                },
                "packet {i}"
            );
        }
        assert_eq!(v[6], Verdict::Drop);
        let s = q.stats();
        assert_eq!((s.forwarded_packets, s.ce_marked, s.dropped), (6, 2, 1));
        assert_eq!(s.max_queue_bytes, 6000);
        // Drains at 1 byte/ns.
        assert_eq!(q.queue_bytes(Instant::from_nanos(2500)), 3500);
        assert_eq!(q.queue_bytes(us(10)), 0);
        for i in 1..=6 {
            assert!(!q.depart(Instant::from_nanos(1000 * i), true, 0.0));
        }
        // Not-ECT packets are never marked.
        let mut q2 = q.clone();
        for _ in 0..5 {
            assert!(matches!(
                q2.enqueue(us(10), 1000, false, 0.0),
                Verdict::Forward { ce: false, .. }
            ));
        }
    }
}
