//! Two agents and a hand-driven wire: every MAD is taken out of one agent
//! and given to the other (or dropped, duplicated, reordered) by the test.

use core::time::Duration;

use proto::cm::mad::MAD_SIZE;
use proto::cm::{AcceptParams, CmAgent, CmConfig, CmEvent, ConnectParams, MadAddress};
use proto::time::Instant;

pub const SID: u64 = 0x0000_0000_0106_4E20; // RDMA_PS_TCP, port 20000

pub fn gid(n: u8) -> [u8; 16] {
    [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF, 10, 0, 0, n]
}

pub fn config(n: u8) -> CmConfig {
    CmConfig {
        local_gid: gid(n),
        ca_guid: 0x0200_00FF_FE00_0000 | u64::from(n),
        max_half_open: 64,
        timewait: Duration::from_millis(10),
        first_comm_id: 0x1000 * u32::from(n),
        tid_seed: 0xAB00 + u32::from(n),
        // Short timers for tests: 4.096 us * 2^8 = 1 ms.
        packet_life_time: 8,
        ..CmConfig::default()
    }
}

pub fn addr(n: u8) -> MadAddress {
    MadAddress::gsi(gid(n))
}

/// REQ parameters towards agent 2 with 1 ms-scale timeouts.
pub fn connect_params<'a>(qpn: u32, pd: &'a [u8]) -> ConnectParams<'a> {
    ConnectParams {
        service_id: SID,
        peer: addr(2),
        local_qpn: qpn,
        starting_psn: 0x12_3456,
        responder_resources: 4,
        initiator_depth: 2,
        traffic_class: 0x28,
        hop_limit: 64,
        flow_label: 0xABCDE,
        local_cm_response_timeout: 8,
        remote_cm_response_timeout: 8,
        max_cm_retries: 3,
        private_data: pd,
        ..ConnectParams::default()
    }
}

pub fn accept_params(qpn: u32, pd: &[u8]) -> AcceptParams<'_> {
    AcceptParams {
        local_qpn: qpn,
        starting_psn: 0x65_4321,
        responder_resources: 2,
        initiator_depth: 4,
        rnr_retry_count: 7,
        srq: false,
        flow_control: true,
        failover_accepted: false,
        private_data: pd,
    }
}

/// Agent 1 (active, GID ...10.0.0.1) and agent 2 (passive, listening on
/// [`SID`]).
pub struct Pair {
    pub a: CmAgent,
    pub b: CmAgent,
    pub now: Instant,
}

pub fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

impl Pair {
    pub fn new() -> Pair {
        let a = CmAgent::new(config(1));
        let mut b = CmAgent::new(config(2));
        b.listen(SID, 8).unwrap();
        Pair {
            a,
            b,
            now: Instant::ZERO,
        }
    }

    pub fn advance(&mut self, d: Duration) {
        self.now += d;
        self.a.handle_timeout(self.now);
        self.b.handle_timeout(self.now);
    }
}

/// Every MAD the agent has to send, with its destination.
pub fn take(x: &mut CmAgent, now: Instant) -> Vec<(MadAddress, [u8; MAD_SIZE])> {
    let mut out = Vec::new();
    let mut buf = [0u8; MAD_SIZE];
    while let Some(to) = x.poll_transmit(now, &mut buf) {
        out.push((to, buf));
    }
    out
}

/// Exactly one MAD, of attribute `attr`.
pub fn take_one(x: &mut CmAgent, now: Instant, attr: u16) -> [u8; MAD_SIZE] {
    let v = take(x, now);
    assert_eq!(v.len(), 1, "expected one MAD, got {}", v.len());
    assert_eq!(attr_of(&v[0].1), attr, "attribute");
    v[0].1
}

pub fn attr_of(m: &[u8]) -> u16 {
    u16::from_be_bytes([m[16], m[17]])
}

pub fn tid_of(m: &[u8]) -> u64 {
    u64::from_be_bytes(m[8..16].try_into().unwrap())
}

pub fn events(x: &mut CmAgent) -> Vec<CmEvent> {
    let mut v = Vec::new();
    while let Some(e) = x.poll_event() {
        v.push(e);
    }
    v
}

pub const REQ: u16 = 0x10;
pub const MRA: u16 = 0x11;
pub const REJ: u16 = 0x12;
pub const REP: u16 = 0x13;
pub const RTU: u16 = 0x14;
pub const DREQ: u16 = 0x15;
pub const DREP: u16 = 0x16;
pub const SIDR_REQ: u16 = 0x17;
pub const SIDR_REP: u16 = 0x18;

/// Connects agent 1 to agent 2 without loss: returns (active conn,
/// passive conn), both established, no MAD left.
pub fn establish(p: &mut Pair, qa: u32, qb: u32) -> (u32, u32) {
    let ca = p.a.connect(p.now, &connect_params(qa, b"hello")).unwrap();
    let req = take_one(&mut p.a, p.now, REQ);
    p.b.handle_mad(p.now, &addr(1), &req);
    let cb = match events(&mut p.b).as_slice() {
        [CmEvent::ReqReceived { conn, .. }] => *conn,
        e => panic!("{e:?}"),
    };
    p.b.accept(p.now, cb, &accept_params(qb, b"world")).unwrap();
    let rep = take_one(&mut p.b, p.now, REP);
    p.a.handle_mad(p.now, &addr(2), &rep);
    assert!(matches!(
        events(&mut p.a).as_slice(),
        [CmEvent::RepReceived { .. }]
    ));
    p.a.send_rtu(p.now, ca, b"").unwrap();
    assert_eq!(events(&mut p.a), vec![CmEvent::Established { conn: ca }]);
    let rtu = take_one(&mut p.a, p.now, RTU);
    p.b.handle_mad(p.now, &addr(1), &rtu);
    assert_eq!(events(&mut p.b), vec![CmEvent::Established { conn: cb }]);
    (ca, cb)
}
