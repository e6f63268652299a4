//! A MAD-level network of CM agents for tests: every MAD an agent sends
//! goes through seeded [`Impairments`] (loss, duplication, reordering; no
//! corruption: MADs ride a RoCE frame whose ICRC would drop a corrupted
//! one) and a fixed latency to the agent whose GID it is addressed to.
//! Time jumps to the next delivery or agent timer.

use core::time::Duration;

use super::impair::Impairments;
use super::rng::SplitMix64;
use crate::cm::mad::MAD_SIZE;
use crate::cm::{CmAgent, CmEvent, MadAddress};
use crate::time::Instant;

/// A MAD on its way.
#[derive(Debug, Clone)]
struct InFlight {
    at: Instant,
    seq: u64,
    to: usize,
    from: MadAddress,
    mad: [u8; MAD_SIZE],
}

/// Agents joined by an impaired MAD channel.
#[derive(Debug)]
pub struct CmNet {
    /// The agents; agent `i` owns GID `gids[i]`.
    pub agents: Vec<CmAgent>,
    /// Each agent's GID.
    pub gids: Vec<[u8; 16]>,
    /// What happens to each MAD.
    pub impair: Impairments,
    /// One-way latency of every MAD.
    pub latency: Duration,
    /// The current time.
    pub now: Instant,
    /// MADs delivered, dropped by the impairments, duplicated, and sent to
    /// no agent.
    pub delivered: u64,
    /// MADs the impairments dropped.
    pub dropped: u64,
    /// MADs the impairments duplicated.
    pub duplicated: u64,
    /// MADs addressed to a GID no agent has.
    pub misaddressed: u64,
    rng: SplitMix64,
    seq: u64,
    flight: Vec<InFlight>,
}

impl CmNet {
    /// A network of `agents` (agent `i` has GID `gids[i]`).
    pub fn new(agents: Vec<CmAgent>, gids: Vec<[u8; 16]>, impair: Impairments, seed: u64) -> CmNet {
        CmNet {
            agents,
            gids,
            impair,
            latency: Duration::from_micros(5),
            now: Instant::ZERO,
            delivered: 0,
            dropped: 0,
            duplicated: 0,
            misaddressed: 0,
            rng: SplitMix64::new(seed),
            seq: 0,
            flight: Vec::new(),
        }
    }

    /// MADs still on the wire.
    pub fn in_flight(&self) -> usize {
        self.flight.len()
    }

    /// Moves every queued MAD of every agent onto the wire.
    fn drain_transmits(&mut self) {
        let mut buf = [0u8; MAD_SIZE];
        for i in 0..self.agents.len() {
            while let Some(to) = self.agents[i].poll_transmit(self.now, &mut buf) {
                let Some(dst) = self.gids.iter().position(|g| *g == to.gid) else {
                    self.misaddressed += 1;
                    continue;
                };
                let fate = self.impair.decide(&mut self.rng);
                if fate.drop {
                    self.dropped += 1;
                    continue;
                }
                let from = MadAddress::gsi(self.gids[i]);
                let at = self.now + self.latency + fate.extra_delay;
                let copies = if fate.duplicate { 2 } else { 1 };
                if fate.duplicate {
                    self.duplicated += 1;
                }
                for _ in 0..copies {
                    self.seq += 1;
                    self.flight.push(InFlight {
                        at,
                        seq: self.seq,
                        to: dst,
                        from,
                        mad: buf,
                    });
                }
            }
        }
    }

    /// The next instant something happens, if anything will.
    pub fn next_event_time(&self) -> Option<Instant> {
        let wire = self.flight.iter().map(|f| f.at).min();
        let timers = self.agents.iter().filter_map(|a| a.poll_timeout()).min();
        match (wire, timers) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Runs until nothing is left to happen or `until`; `on_event` sees
    /// every event of agent `i` with the agent to react on. Returns the
    /// number of steps taken.
    pub fn run<F>(&mut self, until: Instant, mut on_event: F) -> u64
    where
        F: FnMut(usize, &mut CmAgent, Instant, CmEvent),
    {
        let mut steps = 0;
        loop {
            self.drain_transmits();
            self.pump_events(&mut on_event);
            self.drain_transmits();
            let Some(t) = self.next_event_time() else {
                return steps;
            };
            if t > until {
                self.now = until;
                return steps;
            }
            self.now = self.now.max(t);
            steps += 1;
            // Deliver the MADs due now, oldest first.
            let now = self.now;
            let mut due: Vec<InFlight> = Vec::new();
            self.flight.retain(|f| {
                if f.at <= now {
                    due.push(f.clone());
                    false
                } else {
                    true
                }
            });
            due.sort_by_key(|f| (f.at, f.seq));
            for f in due {
                self.delivered += 1;
                self.agents[f.to].handle_mad(now, &f.from, &f.mad);
            }
            for a in &mut self.agents {
                if a.poll_timeout().is_some_and(|d| d <= now) {
                    a.handle_timeout(now);
                }
            }
        }
    }

    /// Hands every pending event to `on_event`.
    pub fn pump_events<F>(&mut self, on_event: &mut F)
    where
        F: FnMut(usize, &mut CmAgent, Instant, CmEvent),
    {
        loop {
            let mut any = false;
            for i in 0..self.agents.len() {
                while let Some(ev) = self.agents[i].poll_event() {
                    any = true;
                    on_event(i, &mut self.agents[i], self.now, ev);
                }
            }
            if !any {
                return;
            }
        }
    }
}
