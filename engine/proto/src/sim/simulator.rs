//! The [`Simulator`]: nodes (an endpoint and its egress link each), the
//! frames in flight between them, and the event loop that jumps from one
//! event to the next.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::bottleneck::Switch;
use super::impair;
use super::link::{Link, LinkConfig};
use super::rng::SplitMix64;
use crate::endpoint::Endpoint;
use crate::time::Instant;

/// Largest frame the simulator carries (PMTU 4096 + headers, with room).
pub const MAX_FRAME: usize = 4096 + 256;

/// One simulated node: an endpoint and its egress link.
pub struct Node {
    pub endpoint: Endpoint,
    pub link: Link,
}

struct InFlight {
    at: Instant,
    seq: u64,
    dst: usize,
    frame: Vec<u8>,
}

impl PartialEq for InFlight {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.seq) == (o.at, o.seq)
    }
}
impl Eq for InFlight {}
impl PartialOrd for InFlight {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for InFlight {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(o.at, o.seq))
    }
}

/// Simulator-wide counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SimStats {
    /// Frames handed to endpoints.
    pub delivered: u64,
    /// Frames whose destination MAC matched no node.
    pub unroutable: u64,
    /// Events processed.
    pub steps: u64,
}

/// The simulator.
pub struct Simulator {
    now: Instant,
    nodes: Vec<Node>,
    in_flight: BinaryHeap<Reverse<InFlight>>,
    seq: u64,
    rng: SplitMix64,
    pool: Vec<Vec<u8>>,
    tx_buf: Vec<u8>,
    pub stats: SimStats,
    /// Congestion: every frame passes this switch, if set (egress queues
    /// that mark CE and drop, random CE marking; see [`Switch`]).
    pub switch: Option<Switch>,
}

impl Simulator {
    /// An empty network whose randomness comes from `seed`.
    pub fn new(seed: u64) -> Simulator {
        Simulator {
            now: Instant::ZERO,
            nodes: Vec::new(),
            in_flight: BinaryHeap::new(),
            seq: 0,
            rng: SplitMix64::new(seed),
            pool: Vec::new(),
            tx_buf: vec![0u8; MAX_FRAME],
            stats: SimStats::default(),
            switch: None,
        }
    }

    /// Add a node; returns its index.
    pub fn add_node(&mut self, endpoint: Endpoint, egress: LinkConfig) -> usize {
        self.nodes.push(Node {
            endpoint,
            link: Link::new(egress),
        });
        self.nodes.len() - 1
    }

    /// Current simulated time.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// Move the clock forward to `t` without processing anything (for
    /// callers that act at times no event marks, e.g. a flow that starts
    /// later). Only valid while no event is due before `t`.
    pub fn advance_to(&mut self, t: Instant) {
        debug_assert!(self.next_event().is_none_or(|e| e >= t));
        if t > self.now {
            self.now = t;
        }
    }

    /// A node.
    pub fn node(&self, i: usize) -> &Node {
        &self.nodes[i]
    }

    /// A node, mutably (post work, poll completions).
    pub fn node_mut(&mut self, i: usize) -> &mut Node {
        &mut self.nodes[i]
    }

    /// The endpoint of node `i`.
    pub fn endpoint(&mut self, i: usize) -> &mut Endpoint {
        &mut self.nodes[i].endpoint
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// No nodes.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Frames on the wire.
    pub fn frames_in_flight(&self) -> usize {
        self.in_flight.len()
    }

    fn route(&self, frame: &[u8]) -> Option<usize> {
        let dst: [u8; 6] = frame.get(..6)?.try_into().ok()?;
        self.nodes
            .iter()
            .position(|n| n.endpoint.config().local_mac == dst)
    }

    /// Let every node with a free link transmit what it has at `now`.
    fn transmit_all(&mut self) {
        for i in 0..self.nodes.len() {
            while self.nodes[i].link.is_free(self.now) {
                let Some(len) = self.nodes[i]
                    .endpoint
                    .poll_transmit(self.now, &mut self.tx_buf)
                else {
                    break;
                };
                let Some(d) = self.nodes[i].link.transmit(self.now, len, &mut self.rng) else {
                    continue;
                };
                let Some(dst) = self.route(&self.tx_buf[..len]) else {
                    self.stats.unroutable += 1;
                    continue;
                };
                let mut frame = self.pool.pop().unwrap_or_default();
                frame.clear();
                frame.extend_from_slice(&self.tx_buf[..len]);
                if d.fate.corrupt {
                    impair::corrupt_covered_bit(&mut frame, &mut self.rng);
                }
                if d.fate.duplicate {
                    let mut copy = self.pool.pop().unwrap_or_default();
                    copy.clear();
                    copy.extend_from_slice(&frame);
                    // The copy arrives a little later (a frame's serialization time).
                    let at = d.at + self.nodes[i].link.serialization(len);
                    self.push(at, dst, copy);
                }
                let at = match self.switch.as_mut() {
                    None => d.at,
                    Some(sw) => match sw.forward(d.at, dst, &mut frame, &mut self.rng) {
                        Some(at) => at,
                        None => {
                            self.pool.push(frame);
                            continue;
                        }
                    },
                };
                self.push(at, dst, frame);
            }
        }
    }

    fn push(&mut self, at: Instant, dst: usize, frame: Vec<u8>) {
        self.seq += 1;
        self.in_flight.push(Reverse(InFlight {
            at,
            seq: self.seq,
            dst,
            frame,
        }));
    }

    /// The time of the next event, if any.
    pub fn next_event(&mut self) -> Option<Instant> {
        let mut t = self.in_flight.peek().map(|Reverse(f)| f.at);
        let mut fold = |x: Instant| t = Some(t.map_or(x, |t| t.min(x)));
        for n in &mut self.nodes {
            if let Some(x) = n.endpoint.poll_timeout() {
                fold(x);
            }
            if !n.link.is_free(self.now) && n.endpoint.has_pending_transmit() {
                fold(n.link.busy_until);
            }
        }
        t
    }

    /// Transmit what is ready, then jump to the next event and process
    /// everything due then. Returns `false` when nothing is left to happen.
    pub fn step(&mut self) -> bool {
        self.transmit_all();
        let Some(t) = self.next_event() else {
            return false;
        };
        if t > self.now {
            self.now = t;
        }
        self.stats.steps += 1;
        while let Some(Reverse(f)) = self.in_flight.peek() {
            if f.at > self.now {
                break;
            }
            let Some(Reverse(mut f)) = self.in_flight.pop() else {
                break;
            };
            if let Some(sw) = self.switch.as_mut() {
                sw.deliver(self.now, f.dst, &mut f.frame, &mut self.rng);
            }
            self.stats.delivered += 1;
            self.nodes[f.dst].endpoint.handle_packet(self.now, &f.frame);
            self.pool.push(f.frame);
        }
        for n in &mut self.nodes {
            if n.endpoint.poll_timeout().is_some_and(|x| x <= self.now) {
                n.endpoint.handle_timeout(self.now);
            }
        }
        true
    }

    /// Step until `done` returns true, nothing is left to happen, or the
    /// simulated time passes `deadline`. Returns whether `done` was reached.
    pub fn run_until(
        &mut self,
        deadline: Instant,
        mut done: impl FnMut(&mut Simulator) -> bool,
    ) -> bool {
        loop {
            if done(self) {
                return true;
            }
            if self.now > deadline || !self.step() {
                return done(self);
            }
        }
    }
}
