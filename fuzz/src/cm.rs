//! The Communication Manager's agent (`proto::cm::CmAgent`) fed a program
//! decoded from the input, next to a well-behaved peer agent: raw MADs
//! from the input, MADs forged on the IDs of live connections, the peer's
//! MADs delivered, dropped, duplicated, held back or mutated byte by byte,
//! every consumer call on either side (connect, accept, reject, MRA, RTU,
//! establish, disconnect, destroy, SIDR, listen / unlisten), time moved.
//!
//! Invariants after every step:
//! - no panic;
//! - the agent's bookkeeping matches its connections
//!   (`check_invariants`: timers, half-open and backlog counts, tables);
//! - every received MAD ends in exactly one counter
//!   (`received_accounted() == mads_received`), counters never decrease;
//! - every MAD the agent sends is a well-formed CM MAD to a GSI;
//! - an event names a connection the agent held before the step or one
//!   the step created (a REQ / SIDR_REQ, a connect), never one the
//!   consumer destroyed; after `handle_mad`, an event is about the
//!   connection the MAD names (its comm ID in the MAD, or the MAD's sender
//!   ID is the connection's peer ID) or a new passive one;
//! - at the end, once every connection is destroyed and the timers have
//!   run, nothing is left (connections, half-open count, timers).

use core::time::Duration;
use std::collections::{HashMap, HashSet, VecDeque};

use proto::cm::mad::{AttrId, MadHeader, GSI_QKEY, GSI_QPN, MAD_SIZE};
use proto::cm::{
    AcceptParams, CmAgent, CmConfig, CmCounters, CmEvent, ConnId, ConnectParams, MadAddress,
};
use proto::time::Instant;

use crate::input::Input;

/// Steps of one input at most.
const MAX_STEPS: usize = 300;
/// MADs held per direction at most.
const MAX_IN_FLIGHT: usize = 64;
/// The service both agents listen on (RDMA_PS_TCP, port 20000).
pub const SID: u64 = 0x0106_4E20;

fn gid(n: u8) -> [u8; 16] {
    [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 10, 0, 0, n]
}

fn config(n: u8) -> CmConfig {
    CmConfig {
        local_gid: gid(n),
        ca_guid: 0x0200_00FF_FE00_0000 | u64::from(n),
        max_half_open: 8,
        max_connections: 32,
        timewait: Duration::from_millis(5),
        first_comm_id: 0x100 * u32::from(n),
        tid_seed: u32::from(n),
        packet_life_time: 8,
        max_tx_queue: 128,
        max_events: 128,
        ..CmConfig::default()
    }
}

/// One agent and what its consumer knows.
struct Side {
    agent: CmAgent,
    /// Connections the consumer holds (from connect and events).
    known: HashSet<ConnId>,
    destroyed: HashSet<ConnId>,
    /// Received REQs / DREQs / REPs / SIDR_REQs waiting for an answer.
    pending: VecDeque<(ConnId, u8)>,
    counters: CmCounters,
}

/// What a pending conn waits for.
const ANSWER_REQ: u8 = 0;
const ANSWER_REP: u8 = 1;
const ANSWER_DREQ: u8 = 2;
const ANSWER_SIDR: u8 = 3;

impl Side {
    fn new(n: u8) -> Side {
        let mut agent = CmAgent::new(config(n));
        agent.listen(SID, 4).expect("listen");
        Side {
            agent,
            known: HashSet::new(),
            destroyed: HashSet::new(),
            pending: VecDeque::new(),
            counters: CmCounters::default(),
        }
    }

    /// Checks the counters and takes the events of one step.
    /// The connections held and their peers' IDs, before a step.
    fn held(&self) -> HashMap<ConnId, u32> {
        self.agent
            .connection_ids()
            .map(|id| (id, self.agent.remote_comm_id(id).unwrap_or(0)))
            .collect()
    }

    fn after_step(&mut self, before: &HashMap<ConnId, u32>, mad: Option<&[u8; MAD_SIZE]>) {
        let c = *self.agent.counters();
        assert_eq!(c.received_accounted(), c.mads_received, "{c:?}");
        if let Err(e) = self.agent.check_invariants() {
            panic!("{e}");
        }
        let old = self.counters;
        for (new, old) in [
            (c.mads_received, old.mads_received),
            (c.mads_sent, old.mads_sent),
            (c.retransmissions, old.retransmissions),
            (c.malformed, old.malformed),
            (c.unmatched, old.unmatched),
            (c.duplicates, old.duplicates),
            (c.timeouts, old.timeouts),
        ] {
            assert!(new >= old, "a counter decreased: {c:?} / {old:?}");
        }
        self.counters = c;
        while let Some(ev) = self.agent.poll_event() {
            let id = ev.conn();
            assert!(
                !self.destroyed.contains(&id),
                "event for a destroyed connection: {ev:?}"
            );
            let new = matches!(
                ev,
                CmEvent::ReqReceived { .. } | CmEvent::SidrReqReceived { .. }
            );
            if new {
                assert!(
                    !before.contains_key(&id),
                    "a REQ event for a connection already held: {ev:?}"
                );
            } else {
                assert!(
                    before.contains_key(&id) || self.known.contains(&id),
                    "event for an unknown connection: {ev:?}"
                );
            }
            if let (Some(m), false) = (mad, new) {
                // The MAD names the connection: our ID in one of its two
                // ID fields, or its sender's ID is the connection's peer.
                let f0 = u32::from_be_bytes([m[24], m[25], m[26], m[27]]);
                let f1 = u32::from_be_bytes([m[28], m[29], m[30], m[31]]);
                let peer = before.get(&id).copied();
                assert!(
                    f0 == id || f1 == id || peer == Some(f0),
                    "event {ev:?} from a MAD naming {f0:#x}/{f1:#x}"
                );
            }
            self.known.insert(id);
            match ev {
                CmEvent::ReqReceived { .. } => self.pending.push_back((id, ANSWER_REQ)),
                CmEvent::RepReceived { .. } => self.pending.push_back((id, ANSWER_REP)),
                CmEvent::DisconnectRequested { .. } => self.pending.push_back((id, ANSWER_DREQ)),
                CmEvent::SidrReqReceived { .. } => self.pending.push_back((id, ANSWER_SIDR)),
                CmEvent::TimewaitExit { .. }
                | CmEvent::Unreachable { .. }
                | CmEvent::SidrRepReceived { .. }
                | CmEvent::SidrUnreachable { .. } => {
                    self.known.remove(&id);
                }
                _ => {}
            }
        }
    }

    /// A consumer call chosen by the input.
    fn consumer(&mut self, now: Instant, peer: u8, input: &mut Input) {
        let n = usize::from(input_len(input));
        let pd = input.take(n).to_vec();
        match input.below(10) {
            0 => {
                let p = ConnectParams {
                    service_id: if input.u8() < 200 {
                        SID
                    } else {
                        u64::from(input.u16())
                    },
                    peer: MadAddress::gsi(gid(peer)),
                    local_qpn: 2 + u32::from(input.u16()),
                    starting_psn: input.u32() & 0xFF_FFFF,
                    path_mtu: 1 + input.below(5),
                    local_cm_response_timeout: input.below(12),
                    remote_cm_response_timeout: input.below(12),
                    max_cm_retries: input.below(16),
                    private_data: &pd,
                    ..ConnectParams::default()
                };
                if let Ok(id) = self.agent.connect(now, &p) {
                    assert!(self.known.insert(id), "connect reused a held ID");
                }
            }
            1 => {
                let Some((id, what)) = self.pending.pop_front() else {
                    return;
                };
                let _ = match what {
                    ANSWER_REQ => self.agent.accept(
                        now,
                        id,
                        &AcceptParams {
                            local_qpn: 2 + u32::from(input.u16()),
                            private_data: &pd,
                            ..AcceptParams::default()
                        },
                    ),
                    ANSWER_REP => self.agent.send_rtu(now, id, &pd),
                    ANSWER_DREQ => self.agent.disconnect(now, id, &pd),
                    _ => self.agent.sidr_reply(
                        now,
                        id,
                        input.below(6),
                        u32::from(input.u16()),
                        GSI_QKEY,
                        &pd,
                    ),
                };
            }
            2 => {
                let Some((id, _)) = self.pending.pop_front() else {
                    return;
                };
                let _ = self.agent.reject(now, id, u16::from(input.u8()), &pd);
            }
            3 => {
                let Some(&(id, _)) = self.pending.front() else {
                    return;
                };
                let _ = self.agent.send_mra(now, id, input.below(24));
            }
            4 | 5 => {
                let id = self.pick(input);
                let _ = self.agent.disconnect(now, id, &pd);
                let _ = self.agent.establish(now, id);
            }
            6 => {
                let id = self.pick(input);
                self.agent.destroy(now, id);
                if self.known.remove(&id) {
                    self.destroyed.insert(id);
                }
            }
            7 => {
                let sid = if input.u8() & 1 == 1 {
                    SID
                } else {
                    0x0111_4E20
                };
                if let Ok(id) = self.agent.sidr_request(
                    now,
                    sid,
                    MadAddress::gsi(gid(peer)),
                    &pd,
                    input.below(10),
                    input.below(4),
                ) {
                    self.known.insert(id);
                }
            }
            8 => {
                let _ = self
                    .agent
                    .listen(u64::from(input.u16()), u32::from(input.u8()));
            }
            _ => self.agent.unlisten(u32::from(input.below(4))),
        }
    }

    fn pick(&self, input: &mut Input) -> ConnId {
        let mut ids: Vec<_> = self.known.iter().copied().collect();
        ids.sort_unstable();
        if ids.is_empty() {
            return input.u32();
        }
        ids[usize::from(input.u8()) % ids.len()]
    }
}

fn input_len(input: &mut Input) -> u8 {
    match input.below(4) {
        0 => 0,
        1 => input.u8(),
        _ => input.below(40),
    }
}

/// Moves everything `from` sends into `wire`, checking each MAD.
fn drain(side: &mut Side, now: Instant, wire: &mut VecDeque<[u8; MAD_SIZE]>) {
    let mut buf = [0u8; MAD_SIZE];
    while let Some(to) = side.agent.poll_transmit(now, &mut buf) {
        assert_eq!((to.qpn, to.qkey), (GSI_QPN, GSI_QKEY));
        let attr = MadHeader::new_checked(&buf[..]).and_then(|h| h.check_cm());
        assert!(
            attr.is_ok(),
            "the agent sent a MAD it would refuse: {attr:?}"
        );
        if wire.len() >= MAX_IN_FLIGHT {
            wire.pop_front();
        }
        wire.push_back(buf);
    }
}

/// Runs one program (the AFL entry point).
pub fn run(data: &[u8]) {
    play(data);
}

/// Runs one program; returns both agents' counters before the final
/// clean-up (A's first).
pub fn play(data: &[u8]) -> (CmCounters, CmCounters) {
    let mut input = Input(data);
    let mut a = Side::new(1);
    let mut b = Side::new(2);
    let mut now = Instant::ZERO;
    let mut to_a: VecDeque<[u8; MAD_SIZE]> = VecDeque::new();
    let mut to_b: VecDeque<[u8; MAD_SIZE]> = VecDeque::new();
    let from_a = MadAddress::gsi(gid(1));
    let from_b = MadAddress::gsi(gid(2));
    for _ in 0..MAX_STEPS {
        if input.is_empty() {
            break;
        }
        let before_a = a.held();
        let before_b = b.held();
        let mut mad_a: Option<[u8; MAD_SIZE]> = None;
        let mut mad_b: Option<[u8; MAD_SIZE]> = None;
        let op = input.u8();
        match op {
            // Deliver the oldest MAD each way.
            0..=79 => {
                if op & 1 == 0 {
                    if let Some(m) = to_b.pop_front() {
                        b.agent.handle_mad(now, &from_a, &m);
                        mad_b = Some(m);
                    }
                } else if let Some(m) = to_a.pop_front() {
                    a.agent.handle_mad(now, &from_b, &m);
                    mad_a = Some(m);
                }
            }
            // Drop, duplicate, hold back (reorder).
            80..=89 => {
                to_a.pop_front();
            }
            90..=95 => {
                if let Some(m) = to_a.front().copied() {
                    to_a.push_back(m);
                }
            }
            96..=99 => {
                if let Some(m) = to_a.pop_front() {
                    to_a.push_back(m);
                }
            }
            // Mutate a MAD to A byte by byte.
            100..=119 => {
                if let Some(mut m) = to_a.pop_front() {
                    for _ in 0..=input.below(4) {
                        let i = usize::from(input.u8());
                        m[i] ^= input.u8() | 1;
                    }
                    a.agent.handle_mad(now, &from_b, &m);
                    mad_a = Some(m);
                }
            }
            // A raw MAD (any length) from the input, header made CM now and then.
            120..=139 => {
                let len = if input.u8() < 230 {
                    MAD_SIZE
                } else {
                    usize::from(input.u8())
                };
                let mut m = [0u8; MAD_SIZE];
                let raw = input.take(len.min(MAD_SIZE));
                m[..raw.len()].copy_from_slice(raw);
                if op & 1 == 0 {
                    let attr =
                        AttrId::from_u16(0x10 + u16::from(input.below(9))).unwrap_or(AttrId::Req);
                    let tid = input.u64();
                    MadHeader::new_checked(&mut m[..])
                        .unwrap()
                        .fill_cm(tid, attr);
                }
                let n = len.min(MAD_SIZE);
                a.agent.handle_mad(now, &from_b, &m[..n]);
                if n == MAD_SIZE {
                    mad_a = Some(m);
                }
            }
            // Forged on a live connection's IDs: our ID and its peer's.
            140..=159 => {
                let id = a.pick(&mut input);
                let remote = a.agent.remote_comm_id(id).unwrap_or(0);
                let mut m = [0u8; MAD_SIZE];
                let attr =
                    AttrId::from_u16(0x10 + u16::from(input.below(9))).unwrap_or(AttrId::Rtu);
                MadHeader::new_checked(&mut m[..])
                    .unwrap()
                    .fill_cm(input.u64(), attr);
                m[24..28].copy_from_slice(&remote.to_be_bytes());
                m[28..32].copy_from_slice(&id.to_be_bytes());
                let rest = input.take(24);
                m[32..32 + rest.len()].copy_from_slice(rest);
                a.agent.handle_mad(now, &from_b, &m);
                mad_a = Some(m);
            }
            // Consumer calls.
            160..=209 => a.consumer(now, 2, &mut input),
            210..=239 => b.consumer(now, 1, &mut input),
            // Time: a little, or to the next deadline.
            _ => {
                if op & 1 == 0 {
                    now += Duration::from_micros(u64::from(input.u16()) * 4);
                } else if let Some(t) = [a.agent.poll_timeout(), b.agent.poll_timeout()]
                    .into_iter()
                    .flatten()
                    .min()
                {
                    now = now.max(t);
                }
                a.agent.handle_timeout(now);
                b.agent.handle_timeout(now);
            }
        }
        a.after_step(&before_a, mad_a.as_ref());
        b.after_step(&before_b, mad_b.as_ref());
        drain(&mut a, now, &mut to_b);
        drain(&mut b, now, &mut to_a);
    }
    let seen = (*a.agent.counters(), *b.agent.counters());
    // Everything destroyed, the timers run: nothing is left.
    for side in [&mut a, &mut b] {
        let ids: Vec<_> = side.agent.connection_ids().collect();
        for id in ids {
            side.agent.destroy(now, id);
            side.destroyed.insert(id);
        }
        side.known.clear();
    }
    for _ in 0..40 {
        now += Duration::from_secs(60);
        a.agent.handle_timeout(now);
        b.agent.handle_timeout(now);
    }
    for side in [&mut a, &mut b] {
        side.after_step(&HashMap::new(), None);
        assert_eq!(side.agent.connection_count(), 0, "leaked connections");
        assert_eq!(side.agent.half_open_count(), 0);
        assert_eq!(side.agent.poll_timeout(), None);
    }
    seen
}

/// Program steps (`run`'s op byte).
const DELIVER_TO_B: u8 = 0;
const DELIVER_TO_A: u8 = 1;
const DROP_TO_A: u8 = 80;
const DUP_TO_A: u8 = 90;
const RAW_TO_A: u8 = 121;
const FORGE_TO_A: u8 = 140;
const ON_A: u8 = 160;
const ON_B: u8 = 210;
const JUMP: u8 = 241;

/// A connect from A: no private data, SID, QPN, PSN, MTU 1024, timeouts
/// 8, `retries` retries.
fn connect(retries: u8) -> Vec<u8> {
    vec![ON_A, 0, 0, 0, 0x00, 0x11, 0, 0, 0, 1, 2, 8, 8, retries]
}

/// A MAD forged on the IDs of A's first live connection: attribute
/// `0x10 + attr`, TID 1, then up to 24 bytes after the two IDs.
fn forge(attr: u8, rest: &[u8]) -> Vec<u8> {
    let mut v = vec![FORGE_TO_A, 0, attr, 0, 0, 0, 0, 0, 0, 0, 1];
    let mut r = rest.to_vec();
    r.resize(24, 0);
    v.extend_from_slice(&r);
    v
}

/// A real MAD sequence (REQ, REP, RTU, DREQ, DREP, REJ, MRA, SIDR_REQ,
/// SIDR_REP) from two agents, each as a raw MAD step to A.
fn real_mads() -> Vec<u8> {
    use proto::cm::mad::rej_reason;
    let mut x = CmAgent::new(config(2));
    let mut y = CmAgent::new(config(1));
    x.listen(SID, 0).unwrap();
    y.listen(SID, 0).unwrap();
    let now = Instant::ZERO;
    let mut out = Vec::new();
    let mut buf = [0u8; MAD_SIZE];
    let mut pass = |from: &mut CmAgent, to: &mut CmAgent, out: &mut Vec<u8>, addr: u8| {
        while from.poll_transmit(now, &mut buf).is_some() {
            out.push(RAW_TO_A);
            out.push(0);
            out.extend_from_slice(&buf);
            to.handle_mad(now, &MadAddress::gsi(gid(addr)), &buf);
        }
    };
    let p = ConnectParams {
        service_id: SID,
        peer: MadAddress::gsi(gid(1)),
        local_qpn: 0x33,
        private_data: b"seed",
        ..ConnectParams::default()
    };
    let c = x.connect(now, &p).unwrap();
    pass(&mut x, &mut y, &mut out, 2);
    let d = y.poll_event().unwrap().conn();
    y.send_mra(now, d, 12).unwrap();
    pass(&mut y, &mut x, &mut out, 1);
    y.accept(
        now,
        d,
        &AcceptParams {
            local_qpn: 0x44,
            ..AcceptParams::default()
        },
    )
    .unwrap();
    pass(&mut y, &mut x, &mut out, 1);
    x.send_rtu(now, c, b"").unwrap();
    pass(&mut x, &mut y, &mut out, 2);
    x.disconnect(now, c, b"").unwrap();
    pass(&mut x, &mut y, &mut out, 2);
    y.disconnect(now, d, b"").unwrap();
    pass(&mut y, &mut x, &mut out, 1);
    let c2 = x
        .connect(
            now,
            &ConnectParams {
                local_qpn: 0x35,
                ..p
            },
        )
        .unwrap();
    let _ = c2;
    pass(&mut x, &mut y, &mut out, 2);
    while let Some(e) = y.poll_event() {
        if let CmEvent::ReqReceived { conn, .. } = e {
            y.reject(now, conn, rej_reason::CONSUMER_DEFINED, b"no")
                .unwrap();
        }
    }
    pass(&mut y, &mut x, &mut out, 1);
    x.sidr_request(now, SID, MadAddress::gsi(gid(1)), b"", 8, 1)
        .unwrap();
    pass(&mut x, &mut y, &mut out, 2);
    while let Some(e) = y.poll_event() {
        if let CmEvent::SidrReqReceived { conn, .. } = e {
            y.sidr_reply(now, conn, 0, 0x55, GSI_QKEY, b"").unwrap();
        }
    }
    pass(&mut y, &mut x, &mut out, 1);
    out
}

/// The committed seeds of the `cm` target (`fuzz/corpus/cm/`, written by
/// `cargo run --release --bin seeds`).
pub fn seed_programs() -> Vec<(&'static str, Vec<u8>)> {
    let handshake = [
        connect(3),
        vec![DELIVER_TO_B],
        vec![ON_B, 0, 1, 0x00, 0x22],
        vec![DELIVER_TO_A],
        vec![ON_A, 0, 1],
        vec![DELIVER_TO_B],
    ]
    .concat();
    vec![
        (
            "connect-disconnect",
            [
                handshake.clone(),
                vec![
                    ON_A,
                    0,
                    4,
                    0,
                    DELIVER_TO_B,
                    ON_B,
                    0,
                    1,
                    DELIVER_TO_A,
                    JUMP,
                    JUMP,
                ],
            ]
            .concat(),
        ),
        (
            "passive-disconnects",
            [
                handshake.clone(),
                vec![ON_B, 0, 4, 0, DELIVER_TO_A, ON_A, 0, 1, DELIVER_TO_B, JUMP],
            ]
            .concat(),
        ),
        (
            "reject",
            [connect(3), vec![DELIVER_TO_B, ON_B, 0, 2, 28, DELIVER_TO_A]].concat(),
        ),
        (
            "mra-loss-retries",
            [
                connect(5),
                vec![
                    DELIVER_TO_B,
                    ON_B,
                    0,
                    3,
                    10,
                    DELIVER_TO_A,
                    JUMP,
                    DELIVER_TO_B,
                    DUP_TO_A,
                ],
                vec![
                    DELIVER_TO_A,
                    ON_B,
                    0,
                    1,
                    0,
                    0x22,
                    DROP_TO_A,
                    JUMP,
                    DELIVER_TO_A,
                    ON_A,
                    0,
                    1,
                ],
                vec![JUMP, JUMP, JUMP, JUMP],
            ]
            .concat(),
        ),
        (
            "sidr",
            vec![
                ON_A,
                0,
                7,
                1,
                8,
                2,
                DELIVER_TO_B,
                ON_B,
                0,
                1,
                0,
                0,
                0x66,
                DELIVER_TO_A,
                JUMP,
            ],
        ),
        (
            "destroy-each-state",
            [
                handshake.clone(),
                connect(2),
                vec![
                    DELIVER_TO_B,
                    ON_A,
                    0,
                    6,
                    0,
                    ON_A,
                    0,
                    6,
                    1,
                    ON_B,
                    0,
                    6,
                    0,
                    JUMP,
                    JUMP,
                ],
            ]
            .concat(),
        ),
        (
            "forged-on-live",
            [
                handshake,
                forge(6, &[]),               // RTU
                forge(5, &[0, 0, 0x11]),     // DREQ naming our QPN
                forge(3, &[]),               // REP (a duplicate)
                forge(2, &[0x80, 0, 0, 28]), // REJ
            ]
            .concat(),
        ),
        ("real-mads", real_mads()),
    ]
}
