//! REJ in every form, MRA, stale connections, destroy, and MADs that
//! belong to no connection.

use proto::cm::mad::*;
use proto::cm::CmEvent;

use crate::support::*;

#[test]
fn req_for_no_listener_is_rejected_invalid_service_id() {
    let mut p = Pair::new();
    let mut cp = connect_params(0x11, b"");
    cp.service_id = 0x0106_0001;
    let ca = p.a.connect(p.now, &cp).unwrap();
    let req = take_one(&mut p.a, p.now, REQ);
    p.b.handle_mad(p.now, &addr(1), &req);
    assert!(events(&mut p.b).is_empty());
    let rej = take_one(&mut p.b, p.now, REJ);
    assert_eq!(tid_of(&rej), tid_of(&req));
    let r = Rej::new_checked(&rej[..]).unwrap();
    assert_eq!((r.local_comm_id(), r.remote_comm_id()), (0, ca));
    assert_eq!(r.message_rejected(), msg_code::REQ);
    assert_eq!(r.reason(), rej_reason::INVALID_SERVICE_ID);
    assert_eq!(p.b.counters().no_listener, 1);
    assert_eq!(p.b.connection_count(), 0);
    p.a.handle_mad(p.now, &addr(2), &rej);
    match events(&mut p.a).as_slice() {
        [CmEvent::Rejected { conn, reason, .. }] => assert_eq!((*conn, *reason), (ca, 8)),
        e => panic!("{e:?}"),
    }
    assert_eq!(p.a.connection_count(), 0);
    assert_eq!(p.a.poll_timeout(), None, "no REQ retry after the REJ");
}

#[test]
fn consumer_reject_carries_private_data_from_req_rcvd_and_mra_req_sent() {
    for mra_first in [false, true] {
        let mut p = Pair::new();
        let ca = p.a.connect(p.now, &connect_params(0x11, b"")).unwrap();
        let req = take_one(&mut p.a, p.now, REQ);
        p.b.handle_mad(p.now, &addr(1), &req);
        let cb = events(&mut p.b)[0].conn();
        if mra_first {
            p.b.send_mra(p.now, cb, 10).unwrap();
            let mra = take_one(&mut p.b, p.now, MRA);
            p.a.handle_mad(p.now, &addr(2), &mra);
            assert_eq!(p.a.state_name(ca), Some("MRA_REQ_RCVD"));
        }
        p.b.reject(p.now, cb, rej_reason::CONSUMER_DEFINED, b"go away")
            .unwrap();
        let rej = take_one(&mut p.b, p.now, REJ);
        let r = Rej::new_checked(&rej[..]).unwrap();
        // cm_format_rej: our comm ID is 0 in REQ_RCVD, ours after an MRA.
        assert_eq!(r.local_comm_id(), if mra_first { cb } else { 0 });
        assert_eq!(r.remote_comm_id(), ca);
        assert_eq!(r.message_rejected(), msg_code::REQ);
        assert_eq!(r.reason(), 28);
        assert_eq!(&r.private_data()[..7], b"go away");
        assert_eq!(p.b.connection_count(), 0);
        assert_eq!(p.b.half_open_count(), 0);
        p.a.handle_mad(p.now, &addr(2), &rej);
        match events(&mut p.a).as_slice() {
            [CmEvent::Rejected {
                conn,
                reason,
                private_data,
            }] => {
                assert_eq!((*conn, *reason), (ca, 28));
                assert_eq!(private_data.len(), 148);
                assert_eq!(&private_data.as_slice()[..7], b"go away");
            }
            e => panic!("{e:?}"),
        }
        assert_eq!(p.a.connection_count(), 0);
        assert_eq!(p.a.counters().rejects_received, 1);
    }
}

#[test]
fn active_rejects_the_rep() {
    let mut p = Pair::new();
    let ca = p.a.connect(p.now, &connect_params(0x11, b"")).unwrap();
    let req = take_one(&mut p.a, p.now, REQ);
    p.b.handle_mad(p.now, &addr(1), &req);
    let cb = events(&mut p.b)[0].conn();
    p.b.accept(p.now, cb, &accept_params(0x22, b"")).unwrap();
    let rep = take_one(&mut p.b, p.now, REP);
    p.a.handle_mad(p.now, &addr(2), &rep);
    events(&mut p.a);
    p.a.reject(p.now, ca, rej_reason::CONSUMER_DEFINED, b"no")
        .unwrap();
    let rej = take_one(&mut p.a, p.now, REJ);
    let r = Rej::new_checked(&rej[..]).unwrap();
    assert_eq!((r.local_comm_id(), r.remote_comm_id()), (ca, cb));
    assert_eq!(r.message_rejected(), msg_code::REP);
    p.b.handle_mad(p.now, &addr(1), &rej);
    assert!(matches!(
        events(&mut p.b).as_slice(),
        [CmEvent::Rejected { reason: 28, .. }]
    ));
    assert_eq!(p.b.connection_count(), 0);
    assert_eq!(p.b.poll_timeout(), None, "the REP is not resent");
}

#[test]
fn mra_extends_the_req_timer_and_a_duplicate_req_gets_the_mra_again() {
    let mut p = Pair::new();
    let ca = p.a.connect(p.now, &connect_params(0x11, b"")).unwrap();
    let req = take_one(&mut p.a, p.now, REQ);
    p.b.handle_mad(p.now, &addr(1), &req);
    let cb = events(&mut p.b)[0].conn();
    p.b.send_mra(p.now, cb, 14).unwrap();
    assert_eq!(p.b.state_name(cb), Some("MRA_REQ_SENT"));
    let mra = take_one(&mut p.b, p.now, MRA);
    assert_eq!(tid_of(&mra), tid_of(&req));
    let v = Mra::new_checked(&mra[..]).unwrap();
    assert_eq!((v.local_comm_id(), v.remote_comm_id()), (cb, ca));
    assert_eq!(
        (v.message_mraed(), v.service_timeout()),
        (msg_code::REQ, 14)
    );
    p.a.handle_mad(p.now, &addr(2), &mra);
    assert_eq!(p.a.counters().mras_received, 1);
    // Now the REQ waits 4.096us*2^14 (67 ms) + the ACK timeout
    // 4.096us*2^15 (134 ms; cm_ack_timeout(15, 8) = 15) instead of 3 ms.
    let deadline = p.a.poll_timeout().unwrap();
    assert_eq!(
        deadline - p.now,
        proto::cm::iba_time(14) + proto::cm::iba_time(15)
    );
    p.advance(ms(200));
    assert!(take(&mut p.a, p.now).is_empty());
    p.advance(ms(2));
    let again = take_one(&mut p.a, p.now, REQ);
    // A second MRA is a duplicate.
    p.a.handle_mad(p.now, &addr(2), &mra);
    assert_eq!(p.a.counters().duplicates, 1);
    p.b.handle_mad(p.now, &addr(1), &again);
    let mra2 = take_one(&mut p.b, p.now, MRA);
    assert_eq!(mra2, mra);
    // Accept from MRA_REQ_SENT works.
    p.b.accept(p.now, cb, &accept_params(0x22, b"")).unwrap();
    let rep = take_one(&mut p.b, p.now, REP);
    p.a.handle_mad(p.now, &addr(2), &rep);
    assert!(matches!(
        events(&mut p.a).as_slice(),
        [CmEvent::RepReceived { .. }]
    ));
}

#[test]
fn mra_of_the_rep_then_rtu() {
    let mut p = Pair::new();
    let ca = p.a.connect(p.now, &connect_params(0x11, b"")).unwrap();
    let req = take_one(&mut p.a, p.now, REQ);
    p.b.handle_mad(p.now, &addr(1), &req);
    let cb = events(&mut p.b)[0].conn();
    p.b.accept(p.now, cb, &accept_params(0x22, b"")).unwrap();
    let rep = take_one(&mut p.b, p.now, REP);
    p.a.handle_mad(p.now, &addr(2), &rep);
    events(&mut p.a);
    p.a.send_mra(p.now, ca, 16).unwrap();
    let mra = take_one(&mut p.a, p.now, MRA);
    assert_eq!(
        Mra::new_checked(&mra[..]).unwrap().message_mraed(),
        msg_code::REP
    );
    p.b.handle_mad(p.now, &addr(1), &mra);
    assert_eq!(p.b.state_name(cb), Some("MRA_REP_RCVD"));
    p.advance(ms(100));
    assert!(
        take(&mut p.b, p.now).is_empty(),
        "the REP waits the MRA's time"
    );
    // A REP duplicate while MRA_REP_SENT: the MRA again.
    p.a.handle_mad(p.now, &addr(2), &rep);
    assert_eq!(take_one(&mut p.a, p.now, MRA), mra);
    p.a.send_rtu(p.now, ca, b"").unwrap();
    let rtu = take_one(&mut p.a, p.now, RTU);
    p.b.handle_mad(p.now, &addr(1), &rtu);
    assert_eq!(events(&mut p.b), vec![CmEvent::Established { conn: cb }]);
}

#[test]
fn stale_req_with_a_qpn_in_use_is_rejected_and_the_old_connection_disconnected() {
    let mut p = Pair::new();
    let (ca, cb) = establish(&mut p, 0x11, 0x22);
    // The active side's QP 0x11 connects again while the passive side
    // still holds the old connection.
    let ca2 = p.a.connect(p.now, &connect_params(0x11, b"")).unwrap();
    let req = take_one(&mut p.a, p.now, REQ);
    p.b.handle_mad(p.now, &addr(1), &req);
    assert!(events(&mut p.b).is_empty());
    let out = take(&mut p.b, p.now);
    assert_eq!(out.len(), 2);
    assert_eq!(attr_of(&out[0].1), REJ);
    let r = Rej::new_checked(&out[0].1[..]).unwrap();
    assert_eq!(r.reason(), rej_reason::STALE_CONNECTION);
    assert_eq!(r.remote_comm_id(), ca2);
    assert_eq!(attr_of(&out[1].1), DREQ);
    assert_eq!(p.b.state_name(cb), Some("DREQ_SENT"));
    assert_eq!(p.b.counters().stale, 1);
    p.a.handle_mad(p.now, &addr(2), &out[0].1);
    assert!(matches!(
        events(&mut p.a).as_slice(),
        [CmEvent::Rejected { reason: 10, .. }]
    ));
    // A stale REJ sends the connection to timewait (cm_rej_handler).
    assert_eq!(p.a.state_name(ca2), Some("TIMEWAIT"));
    p.a.handle_mad(p.now, &addr(2), &out[1].1);
    assert!(matches!(
        events(&mut p.a).as_slice(),
        [CmEvent::DisconnectRequested { conn, .. }] if *conn == ca
    ));
}

#[test]
fn duplicate_req_in_timewait_is_rejected_stale() {
    let mut p = Pair::new();
    let ca = p.a.connect(p.now, &connect_params(0x11, b"")).unwrap();
    let req = take_one(&mut p.a, p.now, REQ);
    p.b.handle_mad(p.now, &addr(1), &req);
    let cb = events(&mut p.b)[0].conn();
    p.b.accept(p.now, cb, &accept_params(0x22, b"")).unwrap();
    take_one(&mut p.b, p.now, REP);
    // The passive side gives up on the REP: REJ, timewait.
    p.b.reject(p.now, cb, rej_reason::CONSUMER_DEFINED, b"")
        .unwrap();
    take_one(&mut p.b, p.now, REJ);
    assert_eq!(p.b.state_name(cb), Some("TIMEWAIT"));
    p.b.handle_mad(p.now, &addr(1), &req);
    let rej = take_one(&mut p.b, p.now, REJ);
    let r = Rej::new_checked(&rej[..]).unwrap();
    assert_eq!(r.reason(), rej_reason::STALE_CONNECTION);
    assert_eq!((r.local_comm_id(), r.remote_comm_id()), (cb, ca));
    p.advance(ms(11));
    assert_eq!(events(&mut p.b), vec![CmEvent::TimewaitExit { conn: cb }]);
    assert_eq!(p.b.connection_count(), 0);
}

#[test]
fn destroy_in_req_sent_rejects_timeout_with_our_guid() {
    let mut p = Pair::new();
    let ca = p.a.connect(p.now, &connect_params(0x11, b"")).unwrap();
    let req = take_one(&mut p.a, p.now, REQ);
    p.b.handle_mad(p.now, &addr(1), &req);
    let cb = events(&mut p.b)[0].conn();
    p.b.send_mra(p.now, cb, 20).unwrap();
    take_one(&mut p.b, p.now, MRA);
    p.a.destroy(p.now, ca);
    let rej = take_one(&mut p.a, p.now, REJ);
    let r = Rej::new_checked(&rej[..]).unwrap();
    assert_eq!(r.reason(), rej_reason::TIMEOUT);
    assert_eq!(r.ari(), &0x0200_00FF_FE00_0001u64.to_be_bytes());
    assert_eq!((r.local_comm_id(), r.remote_comm_id()), (ca, 0));
    assert_eq!(p.a.connection_count(), 0);
    assert!(events(&mut p.a).is_empty());
    // Matched on the passive side by the ARI's GUID and our comm ID.
    p.b.handle_mad(p.now, &addr(1), &rej);
    assert!(
        matches!(events(&mut p.b).as_slice(), [CmEvent::Rejected { reason: 4, conn, .. }] if *conn == cb)
    );
    assert_eq!(p.b.connection_count(), 0);
    p.a.destroy(p.now, ca); // gone: ignored
    assert!(take(&mut p.a, p.now).is_empty());
}

#[test]
fn destroy_of_a_received_req_rejects_consumer_defined() {
    let mut p = Pair::new();
    p.a.connect(p.now, &connect_params(0x11, b"")).unwrap();
    let req = take_one(&mut p.a, p.now, REQ);
    p.b.handle_mad(p.now, &addr(1), &req);
    let cb = events(&mut p.b)[0].conn();
    p.b.destroy(p.now, cb);
    let rej = take_one(&mut p.b, p.now, REJ);
    assert_eq!(Rej::new_checked(&rej[..]).unwrap().reason(), 28);
    assert_eq!(p.b.connection_count(), 0);
    assert_eq!(p.b.half_open_count(), 0);
}

#[test]
fn mads_for_no_connection_are_counted_and_change_nothing() {
    let mut p = Pair::new();
    let (ca, cb) = establish(&mut p, 0x11, 0x22);
    let before = p.a.counters().unmatched;
    // REJ, RTU, REP, MRA, DREP naming our ID with the wrong remote ID,
    // or IDs we never gave.
    for (local, remote) in [(cb ^ 1, ca), (cb, ca ^ 1), (0, 0), (0xFFFF_FFFF, 7)] {
        let mut m = [0u8; 256];
        let mut r = Rej::new_checked(&mut m[..]).unwrap();
        r.header_mut().fill_cm(5, AttrId::Rej);
        r.set_local_comm_id(local);
        r.set_remote_comm_id(remote);
        r.set_message_rejected(msg_code::OTHER);
        r.set_reason(28);
        p.a.handle_mad(p.now, &addr(2), &m);
        for attr in [AttrId::Rtu, AttrId::Drep, AttrId::Mra] {
            let mut x = m;
            x[16..18].copy_from_slice(&(attr as u16).to_be_bytes());
            p.a.handle_mad(p.now, &addr(2), &x);
        }
    }
    assert_eq!(p.a.counters().unmatched - before, 16);
    assert!(events(&mut p.a).is_empty());
    assert!(take(&mut p.a, p.now).is_empty());
    assert_eq!(p.a.state_name(ca), Some("ESTABLISHED"));
    assert_eq!(
        p.a.counters().received_accounted(),
        p.a.counters().mads_received
    );
}
