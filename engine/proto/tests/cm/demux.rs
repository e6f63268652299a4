//! Several agents sharing one port's QP 1 (the shared engine's service
//! switches their MADs): with distinct communication ID prefixes, every
//! MAD two agents exchange names its receiver, by the service ID it asks
//! for (REQ, SIDR_REQ) or by the receiver's own ID (every other one).

use proto::cm::mad::rej_reason;
use proto::cm::mad::sidr_status;
use proto::cm::{mad_owner, CmAgent, CmEvent, MadOwner};

use crate::support::*;

const PREFIX_A: u8 = 0x03;
const PREFIX_B: u8 = 0xA7;
const UDP_SID: u64 = 0x0111_4E20;

fn prefixed_pair() -> Pair {
    let mut ca = config(1);
    ca.comm_id_prefix = Some(PREFIX_A);
    let mut cb = config(2);
    cb.comm_id_prefix = Some(PREFIX_B);
    let mut b = CmAgent::new(cb);
    b.listen(SID, 8).unwrap();
    b.listen(UDP_SID, 8).unwrap();
    Pair {
        a: CmAgent::new(ca),
        b,
        now: proto::time::Instant::ZERO,
    }
}

/// Every MAD `from` has to send, each checked to be owned by the agent
/// whose prefix is `to_prefix` (or by the service it asks for), then
/// handed to `to`.
fn relay(
    from: &mut CmAgent,
    to: &mut CmAgent,
    to_prefix: u8,
    from_n: u8,
    p_now: proto::time::Instant,
) -> Vec<u16> {
    let mut attrs = Vec::new();
    for (_, mad) in take(from, p_now) {
        let attr = attr_of(&mad);
        match mad_owner(&mad) {
            MadOwner::Service(sid) => {
                assert!(attr == REQ || attr == SIDR_REQ, "{attr:#x}");
                assert!(sid == SID || sid == UDP_SID);
            }
            MadOwner::CommId(id) => {
                assert_eq!((id >> 24) as u8, to_prefix, "attr {attr:#x} id {id:#x}");
            }
            MadOwner::Nobody => panic!("attr {attr:#x} has no owner"),
        }
        to.handle_mad(p_now, &addr(from_n), &mad);
        attrs.push(attr);
    }
    attrs
}

#[test]
fn every_mad_names_its_receiver() {
    let mut p = prefixed_pair();
    let now = p.now;
    // REQ, MRA, REP, RTU, DREQ, DREP.
    let ca = p.a.connect(now, &connect_params(0x11, b"x")).unwrap();
    assert_eq!((ca >> 24) as u8, PREFIX_A);
    assert_eq!(relay(&mut p.a, &mut p.b, PREFIX_B, 1, now), vec![REQ]);
    let cb = match events(&mut p.b).as_slice() {
        [CmEvent::ReqReceived { conn, .. }] => *conn,
        e => panic!("{e:?}"),
    };
    assert_eq!(
        (cb >> 24) as u8,
        PREFIX_B,
        "passive IDs keep the prefix too"
    );
    p.b.send_mra(now, cb, 20).unwrap();
    p.b.accept(now, cb, &accept_params(0x22, b"y")).unwrap();
    let sent = relay(&mut p.b, &mut p.a, PREFIX_A, 2, now);
    assert_eq!(sent, vec![MRA, REP]);
    events(&mut p.a);
    p.a.send_rtu(now, ca, b"").unwrap();
    assert_eq!(relay(&mut p.a, &mut p.b, PREFIX_B, 1, now), vec![RTU]);
    p.a.disconnect(now, ca, b"").unwrap();
    assert_eq!(relay(&mut p.a, &mut p.b, PREFIX_B, 1, now), vec![DREQ]);
    events(&mut p.b);
    // The passive consumer answers the DREQ (rdma_disconnect).
    p.b.disconnect(now, cb, b"").unwrap();
    assert_eq!(relay(&mut p.b, &mut p.a, PREFIX_A, 2, now), vec![DREP]);
    // REJ.
    p.a.connect(now, &connect_params(0x33, b"")).unwrap();
    relay(&mut p.a, &mut p.b, PREFIX_B, 1, now);
    let cb = match events(&mut p.b).as_slice() {
        [.., CmEvent::ReqReceived { conn, .. }] => *conn,
        e => panic!("{e:?}"),
    };
    p.b.reject(now, cb, rej_reason::CONSUMER_DEFINED, b"no")
        .unwrap();
    assert_eq!(relay(&mut p.b, &mut p.a, PREFIX_A, 2, now), vec![REJ]);
    // SIDR_REQ, SIDR_REP.
    p.a.sidr_request(now, UDP_SID, addr(2), b"", 8, 2).unwrap();
    assert_eq!(relay(&mut p.a, &mut p.b, PREFIX_B, 1, now), vec![SIDR_REQ]);
    let cb = match events(&mut p.b).as_slice() {
        [.., CmEvent::SidrReqReceived { conn, .. }] => *conn,
        e => panic!("{e:?}"),
    };
    p.b.sidr_reply(now, cb, sidr_status::VALID, 0x4321, 0x1111_2222, b"")
        .unwrap();
    assert_eq!(relay(&mut p.b, &mut p.a, PREFIX_A, 2, now), vec![SIDR_REP]);
}

#[test]
fn garbage_and_other_classes_are_nobodys() {
    assert_eq!(mad_owner(&[]), MadOwner::Nobody);
    assert_eq!(mad_owner(&[0u8; 10]), MadOwner::Nobody);
    let mut m = [0u8; 256];
    m[0] = 1;
    m[1] = 0x04; // Performance management, not CM
    m[2] = 1;
    m[3] = 3;
    m[17] = 0x13;
    assert_eq!(mad_owner(&m), MadOwner::Nobody);
    for len in 0..256 {
        let _ = mad_owner(&[0xffu8; 256][..len]);
    }
}
