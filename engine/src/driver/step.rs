//! The per-iteration I/O steps of an engine loop, shared by the engine
//! thread (`thread.rs`) and run-to-completion (`run_to_completion.rs`), or
//! any other loop that drives an [`Endpoint`] over a [`FramePort`] (an
//! AF_XDP socket, or the frame rings of a process attached to a shared
//! engine):
//!
//! 1. [`DriverStep::receive`]: `handle_packet` for a batch of received frames,
//! 2. [`DriverStep::timers`]: `handle_timeout` when `poll_timeout` has passed,
//! 3. [`DriverStep::transmit`]: `poll_transmit` into TX frames until the
//!    endpoint has nothing due or the ring is full, then publish them; a
//!    frame addressed to the engine itself is received from its TX frame
//!    instead ([`OwnAddress`]).
//!
//! [`DriverStep::step`] runs the three in that order.

use crate::endpoint::{Endpoint, MemoryRange, Received, PREFETCH_FAR, PREFETCH_NEAR};
use crate::io::{FramePort, InPlace, Lookahead, Rx, MAX_PACKET};
use crate::time::Instant;

use super::capture::CaptureSink;
use super::own_address::{Looped, OwnAddress};

/// Frames moved per batch (received packets, transmitted packets).
pub(crate) const BATCH: usize = 64;

/// Bytes reserved in the UMEM for each packet written in place: the
/// largest frame the endpoint emits (IBTA's largest path MTU, 4096 bytes,
/// plus at most 102 bytes of Ethernet, VLAN, IPv6, UDP, BTH, RETH,
/// ImmDt and ICRC), rounded up. Two adjacent 4096-byte frames.
const IN_PLACE_ROOM: usize = 4096 + 256;

/// How far ahead of the frame it hands the endpoint the receive step
/// prefetches, once the endpoint holds [`PREFETCH_MIN_QPS`] QPs or more:
/// then each frame finds its QP out of the caches, and frames from many
/// peers come in no order the CPU could guess. Two stages, as the lookup
/// is two dependent reads: [`PREFETCH_FAR`] frames ahead the bucket of the
/// QP number index ([`prefetch_qp_index`]), [`PREFETCH_NEAR`] ahead the
/// slot that the bucket names, the QP's state and its schedule entry
/// ([`prefetch_qp_state`]).
pub const PREFETCH_AHEAD: Lookahead = Lookahead {
    near: PREFETCH_NEAR,
    far: PREFETCH_FAR,
};

/// The fewest QPs for which the receive step prefetches: below, the QPs'
/// state stays in the caches and the early looks (two more header parses
/// a frame) are pure cost. Measured with `examples/qp_scale_probe N 3
/// [shuffled]` (responder, 64 B WRITEs, each QP once per pass, QP state
/// in huge pages), four alternating runs with and without, median of the
/// mean ns a packet, on the 2-core development VM: 1 QP 100 without, 117
/// with; 1,024 QPs in shuffled order 116 / 142; 4,096 shuffled 205 / 168;
/// 16,384 shuffled 246 / 192, but in slot order (where the CPU's own
/// prefetchers follow the QPs through memory) 141 / 155. Frames from many
/// peers come in no order, so from 4,096 QPs on.
pub const PREFETCH_MIN_QPS: usize = 4_096;

/// How far ahead the receive step looks for an endpoint of `ep`'s size.
#[inline]
pub fn prefetch_distance(ep: &Endpoint) -> Lookahead {
    if ep.qp_count() >= PREFETCH_MIN_QPS {
        PREFETCH_AHEAD
    } else {
        Lookahead::default()
    }
}

/// Stage one: prefetches where the lookup of `frame`'s QP reads
/// ([`Endpoint::qp_index_hint`]; nothing if the frame names no QP).
#[inline]
pub fn prefetch_qp_index(ep: &Endpoint, frame: &[u8]) {
    if let Some(r) = ep.qp_index_hint(frame) {
        crate::io::prefetch_range(r);
    }
}

/// Stage two: prefetches the state of the QP that `frame` is for
/// ([`Endpoint::qp_state_hint`]; nothing if it is for none).
#[inline]
pub fn prefetch_qp_state(ep: &Endpoint, frame: &[u8]) {
    if let Some(ranges) = ep.qp_state_hint(frame) {
        ranges.into_iter().for_each(crate::io::prefetch_range);
    }
}

/// [`prefetch_qp_index`] for QP `qpn` (a post's, taken in a batch).
#[inline]
pub fn prefetch_qpn_index(ep: &Endpoint, qpn: u32) {
    if let Some(r) = ep.qpn_index_hint(qpn) {
        crate::io::prefetch_range(r);
    }
}

/// [`prefetch_qp_state`] for QP `qpn` (a post's, taken in a batch).
#[inline]
pub fn prefetch_qpn_state(ep: &Endpoint, qpn: u32) {
    if let Some(r) = ep.qpn_state_hint(qpn) {
        crate::io::prefetch_range(r);
    }
}

/// The prefetches to issue before the post at `i` of a batch of posts
/// (`qpns`: each post's QP number, in order) is applied, `ahead` as
/// [`prefetch_distance`] gives it: stage one for the post `far` places
/// ahead, stage two for the one `near` ahead, as the receive step does.
/// At `i == 0` also those of the first posts, which no earlier post of
/// the batch asked for: stage one for the first `far`, then stage two for
/// the first `near` (its reads of their index buckets wait for the first
/// of them; the others come in meanwhile). Without that, the first
/// `far` posts of every batch (a quarter of a 32-post batch) found their
/// QP's index bucket out of the caches, and the first `near` their state.
///
/// Stage two also asks for the post's data, where it names some
/// ([`PostHint::payload`]): with many QPs the application's buffers are
/// out of the caches as their QPs are.
#[inline]
pub fn prefetch_posts(ep: &Endpoint, posts: &[Option<PostHint>], i: usize, ahead: Lookahead) {
    let (near, far) = (ahead.near as usize, ahead.far as usize);
    let at = |k: usize| posts.get(k).copied().flatten();
    let stage_two = |p: PostHint| {
        prefetch_qpn_state(ep, p.qpn);
        crate::io::prefetch_range(p.payload);
    };
    if i == 0 {
        for p in (0..far).filter_map(at) {
            prefetch_qpn_index(ep, p.qpn);
        }
        (0..near).filter_map(at).for_each(stage_two);
    }
    if far > 0 {
        if let Some(p) = at(i + far) {
            prefetch_qpn_index(ep, p.qpn);
        }
    }
    if near > 0 {
        if let Some(p) = at(i + near) {
            stage_two(p);
        }
    }
}

/// What [`prefetch_posts`] asks for of one post: its QP, and the memory
/// of its data ([`Endpoint::send_payload_hint`]; empty for a post with
/// none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PostHint {
    pub qpn: u32,
    pub payload: MemoryRange,
}

/// What one [`DriverStep::step`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct StepOutcome {
    /// Packets received and handed to the endpoint.
    pub received: usize,
    /// Whether `handle_timeout` ran.
    pub timers_fired: bool,
    /// Packets queued for transmission.
    pub sent: usize,
}

impl StepOutcome {
    /// Whether anything happened.
    pub fn progress(&self) -> bool {
        self.received > 0 || self.timers_fired || self.sent > 0
    }
}

/// State the I/O steps keep between iterations (a scratch buffer for
/// packets larger than one UMEM frame, the frame capture, the engine's own
/// address and the frames it sent itself).
pub(crate) struct DriverStep {
    tx_buf: Box<[u8]>,
    /// TX frames the largest packet may need (checked before each
    /// `poll_transmit` so that a packet the endpoint emits always finds room).
    frames_per_packet: usize,
    capture: Option<CaptureSink>,
    own: OwnAddress,
    looped: Looped,
}

impl DriverStep {
    /// Steps for `sock` of the engine at `own`, recording every frame to
    /// `capture` if set.
    pub(crate) fn new(
        sock: &impl FramePort,
        capture: Option<CaptureSink>,
        own: OwnAddress,
    ) -> DriverStep {
        DriverStep {
            tx_buf: vec![0u8; MAX_PACKET].into_boxed_slice(),
            frames_per_packet: sock.max_packet().div_ceil(sock.frame_size() as usize),
            capture,
            own,
            looped: Looped::default(),
        }
    }

    /// Frames [`DriverStep::transmit`] delivered to the engine itself.
    pub(crate) fn looped(&self) -> Looped {
        self.looped
    }

    /// Receive, timers, transmit (in that order). `clock` is read once
    /// before receiving and, if a packet was received, once after (timers
    /// and transmit use the later time): an iteration that finds nothing
    /// reads it once (a clock read is a good part of an empty iteration).
    pub(crate) fn step<P: FramePort>(
        &mut self,
        sock: &mut P,
        ep: &mut Endpoint,
        clock: impl Fn() -> Instant,
    ) -> StepOutcome {
        let now = clock();
        let received = self.receive(sock, ep, now);
        let now = if received > 0 { clock() } else { now };
        let timers_fired = self.timers(ep, now);
        let sent = self.transmit(sock, ep, now);
        StepOutcome {
            received,
            timers_fired,
            sent,
        }
    }

    /// Hands up to [`BATCH`] received packets to the endpoint; returns how
    /// many. A frame for a QP the endpoint does not hold is counted
    /// (`dropped_unknown_qp`), as [`Endpoint::handle_packet`] does.
    pub(crate) fn receive<P: FramePort>(
        &mut self,
        sock: &mut P,
        ep: &mut Endpoint,
        now: Instant,
    ) -> usize {
        self.receive_routed(sock, ep, now, note_unknown_qp)
    }

    /// Like [`DriverStep::receive`], but each frame goes through
    /// [`Endpoint::receive`] and `route` sees what became of it (with the
    /// frame): how a device with several queues hands a frame for a QP
    /// another queue holds to that queue.
    pub(crate) fn receive_routed<P: FramePort>(
        &mut self,
        sock: &mut P,
        ep: &mut Endpoint,
        now: Instant,
        mut route: impl FnMut(&mut Endpoint, &[u8], Received),
    ) -> usize {
        let capture = &self.capture;
        let ahead = prefetch_distance(ep);
        sock.recv_ahead(BATCH, ahead, |r| match r {
            Rx::Far(frame) => prefetch_qp_index(ep, frame),
            Rx::Ahead(frame) => prefetch_qp_state(ep, frame),
            Rx::Packet(frame) => {
                if let Some(c) = capture {
                    c.record(frame);
                }
                let r = ep.receive(now, frame);
                route(ep, frame, r);
            }
        })
    }

    /// Runs the endpoint's timers if their deadline has passed; returns
    /// whether they ran.
    pub(crate) fn timers(&mut self, ep: &mut Endpoint, now: Instant) -> bool {
        // Only timers that ran count: the endpoint's lazy heap leaves
        // stale entries that fall due with nothing to do.
        ep.poll_timeout().is_some_and(|t| t <= now) && ep.handle_timeout(now)
    }

    /// Queues up to [`BATCH`] packets the endpoint has due and publishes
    /// them to the kernel; returns how many were queued or looped back.
    /// Each packet is written straight into TX frames of the UMEM
    /// ([`FramePort::send_in_place`]); only when no run of adjacent free
    /// frames is at hand does it go through the scratch buffer and a copy.
    /// A packet addressed to the engine itself ([`OwnAddress`]) never
    /// leaves: it is received from where it was written, as
    /// [`DriverStep::receive`] receives (a frame for a QP the endpoint does
    /// not hold counted `dropped_unknown_qp`), its frames go back to the
    /// pool, and it is counted in [`DriverStep::looped`].
    pub(crate) fn transmit<P: FramePort>(
        &mut self,
        sock: &mut P,
        ep: &mut Endpoint,
        now: Instant,
    ) -> usize {
        self.transmit_routed(sock, ep, now, note_unknown_qp)
    }

    /// Like [`DriverStep::transmit`], but a packet addressed to the engine
    /// itself goes through [`Endpoint::receive`] and `route` sees what
    /// became of it, as in [`DriverStep::receive_routed`]: how a device
    /// with several queues hands a looped frame for a QP another queue
    /// holds to that queue.
    pub(crate) fn transmit_routed<P: FramePort>(
        &mut self,
        sock: &mut P,
        ep: &mut Endpoint,
        now: Instant,
        mut route: impl FnMut(&mut Endpoint, &[u8], Received),
    ) -> usize {
        sock.complete();
        let room = IN_PLACE_ROOM.min(sock.max_packet());
        let own = self.own;
        let (mut queued, mut looped) = (0, 0);
        while queued + looped < BATCH && sock.tx_room() >= self.frames_per_packet {
            let (capture, counted) = (&self.capture, &mut self.looped);
            let mut here = false;
            let outcome = sock.send_in_place(room, |buf| {
                let len = ep.poll_transmit(now, buf)?;
                let frame = &buf[..len];
                if let Some(c) = capture {
                    c.record(frame);
                }
                if own.is_destination_of(frame) {
                    loop_back(ep, now, frame, &mut route, counted);
                    here = true;
                    // Nothing to send: the frames go back to the pool.
                    return None;
                }
                Some(len)
            });
            match (outcome, here) {
                (InPlace::Sent(_), _) => queued += 1,
                (InPlace::Nothing, true) => looped += 1,
                (InPlace::Nothing, false) => break,
                (InPlace::NoRoom, _) => {
                    let Some(len) = ep.poll_transmit(now, &mut self.tx_buf) else {
                        break;
                    };
                    let frame = &self.tx_buf[..len];
                    if let Some(c) = &self.capture {
                        c.record(frame);
                    }
                    if own.is_destination_of(frame) {
                        loop_back(ep, now, frame, &mut route, &mut self.looped);
                        looped += 1;
                    } else {
                        let sent = sock.send(frame);
                        debug_assert!(sent, "room was checked");
                        queued += 1;
                    }
                }
            }
        }
        if queued > 0 || sock.tx_in_flight() > 0 {
            let _ = sock.flush();
        }
        queued + looped
    }
}

/// Receives `frame`, which the endpoint emitted to the engine's own
/// address, as a frame from the wire is received (`route` sees what became
/// of it), and counts it in `looped`.
#[inline]
fn loop_back(
    ep: &mut Endpoint,
    now: Instant,
    frame: &[u8],
    route: &mut impl FnMut(&mut Endpoint, &[u8], Received),
    looped: &mut Looped,
) {
    let r = ep.receive(now, frame);
    route(ep, frame, r);
    looped.count(frame.len());
}

/// What [`DriverStep::receive`] and [`DriverStep::transmit`] do with a
/// frame for a QP the endpoint does not hold: count it, as
/// [`Endpoint::handle_packet`] does.
fn note_unknown_qp(ep: &mut Endpoint, _frame: &[u8], r: Received) {
    if let Received::NotHere { .. } = r {
        ep.note_unknown_qp();
    }
}
