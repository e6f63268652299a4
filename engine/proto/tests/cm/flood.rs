//! Caps under a REQ flood: the listener's backlog (REQs dropped as the
//! kernel drops them), `max_half_open` (REJ "no resources"),
//! `max_connections`.

use proto::cm::mad::*;
use proto::cm::{CmAgent, CmEvent};
use proto::time::Instant;

use crate::support::*;

/// A REQ from peer comm ID `id` (QPN `id`) for [`SID`].
fn req(id: u32) -> [u8; 256] {
    let mut m = [0u8; 256];
    let mut r = Req::new_checked(&mut m[..]).unwrap();
    r.header_mut().fill_cm(u64::from(id), AttrId::Req);
    r.set_local_comm_id(id);
    r.set_service_id(SID);
    r.set_local_ca_guid(0x77);
    r.set_local_qpn(id);
    r.set_path_mtu(3);
    r.set_local_cm_response_timeout(8);
    r.set_max_cm_retries(2);
    m
}

#[test]
fn backlog_full_drops_reqs_until_one_is_answered() {
    let mut b = CmAgent::new(config(2));
    b.listen(SID, 8).unwrap();
    let now = Instant::ZERO;
    for id in 1..=20 {
        b.handle_mad(now, &addr(1), &req(id));
    }
    let ev = events(&mut b);
    assert_eq!(ev.len(), 8);
    assert!(
        take(&mut b, now).is_empty(),
        "dropped, not rejected (ucma's backlog)"
    );
    assert_eq!(b.counters().backlog_refused, 12);
    // Answering one frees a place: a REQ retry gets in.
    b.accept(now, ev[0].conn(), &accept_params(0x100, b""))
        .unwrap();
    take_one(&mut b, now, REP);
    b.handle_mad(now, &addr(1), &req(9));
    assert!(
        matches!(events(&mut b).as_slice(), [CmEvent::ReqReceived { req, .. }] if req.remote_comm_id == 9)
    );
    b.handle_mad(now, &addr(1), &req(10));
    assert!(events(&mut b).is_empty());
    assert_eq!(b.counters().backlog_refused, 13);
    assert_eq!(
        b.counters().received_accounted(),
        b.counters().mads_received
    );
}

#[test]
fn half_open_cap_rejects_no_resources_and_frees_with_rtu_or_timeout() {
    let mut cfg = config(2);
    cfg.max_half_open = 16;
    let mut b = CmAgent::new(cfg);
    b.listen(SID, 1000).unwrap();
    let mut now = Instant::ZERO;
    for id in 1..=40 {
        b.handle_mad(now, &addr(1), &req(id));
    }
    let ev = events(&mut b);
    assert_eq!(ev.len(), 16);
    let out = take(&mut b, now);
    assert_eq!(out.len(), 24);
    for (i, (to, m)) in out.iter().enumerate() {
        assert_eq!(*to, addr(1));
        let r = Rej::new_checked(&m[..]).unwrap();
        assert_eq!(r.reason(), rej_reason::NO_RESOURCES);
        assert_eq!(r.remote_comm_id(), 17 + i as u32);
        assert_eq!(tid_of(m), 17 + i as u64);
    }
    assert_eq!(b.counters().half_open_refused, 24);
    assert_eq!(b.half_open_count(), 16);
    // Accepted but no RTU: still half-open; the REP times out (3 sends)
    // and the places free up.
    for e in &ev {
        b.accept(now, e.conn(), &accept_params(0x100 + e.conn(), b""))
            .unwrap();
    }
    assert_eq!(b.half_open_count(), 16);
    for _ in 0..10 {
        now += ms(1);
        b.handle_timeout(now);
    }
    let ev2 = events(&mut b);
    assert_eq!(ev2.len(), 16);
    assert!(ev2.iter().all(|e| matches!(e, CmEvent::Unreachable { .. })));
    assert_eq!(b.half_open_count(), 0);
    assert_eq!(b.connection_count(), 0);
    take(&mut b, now);
    b.handle_mad(now, &addr(1), &req(100));
    assert_eq!(events(&mut b).len(), 1);
}

#[test]
fn connection_cap_rejects_reqs_and_refuses_connects() {
    let mut cfg = config(2);
    cfg.max_connections = 4;
    let mut b = CmAgent::new(cfg);
    b.listen(SID, 100).unwrap();
    let now = Instant::ZERO;
    for id in 1..=6 {
        b.handle_mad(now, &addr(1), &req(id));
    }
    assert_eq!(events(&mut b).len(), 4);
    assert_eq!(take(&mut b, now).len(), 2);
    assert_eq!(b.counters().connections_refused, 2);
    assert_eq!(
        b.connect(now, &connect_params(0x11, b"")),
        Err(proto::cm::CmError::TooManyConnections)
    );
}

#[test]
fn a_flood_of_duplicates_creates_one_connection() {
    let mut b = CmAgent::new(config(2));
    b.listen(SID, 8).unwrap();
    let now = Instant::ZERO;
    for _ in 0..1000 {
        b.handle_mad(now, &addr(1), &req(5));
    }
    assert_eq!(events(&mut b).len(), 1);
    assert_eq!(b.connection_count(), 1);
    assert_eq!(b.counters().duplicates, 999);
    assert!(
        take(&mut b, now).is_empty(),
        "REQ_RCVD answers duplicates with nothing"
    );
}
