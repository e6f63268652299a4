//! REQ -> REP -> RTU, MAD by MAD: what each side sends (every field the
//! other side reads), the events, the states, the TIDs.

use proto::cm::mad::*;
use proto::cm::{CmEvent, Transport};

use crate::support::*;

#[test]
fn connect_accept_rtu_every_field_and_state() {
    let mut p = Pair::new();
    let pd: Vec<u8> = (100..192u8).collect();
    let ca = p.a.connect(p.now, &connect_params(0x11, &pd)).unwrap();
    assert_eq!(ca, 0x1000);
    assert_eq!(p.a.state_name(ca), Some("REQ_SENT"));
    let req = take_one(&mut p.a, p.now, REQ);
    assert_eq!(tid_of(&req), (0xAB01u64 << 32) | 0x1000);

    p.b.handle_mad(p.now, &addr(1), &req);
    let ev = events(&mut p.b);
    let (cb, info) = match ev.as_slice() {
        [CmEvent::ReqReceived {
            listener,
            conn,
            req,
        }] => {
            assert_eq!(*listener, 1);
            (*conn, *req)
        }
        e => panic!("{e:?}"),
    };
    assert_eq!(cb, 0x2000);
    assert_eq!(p.b.state_name(cb), Some("REQ_RCVD"));
    assert_eq!(info.peer, addr(1));
    assert_eq!(info.service_id, SID);
    assert_eq!(info.remote_comm_id, 0x1000);
    assert_eq!(info.remote_qpn, 0x11);
    assert_eq!(info.starting_psn, 0x12_3456);
    assert_eq!((info.responder_resources, info.initiator_depth), (4, 2));
    assert_eq!(
        (info.retry_count, info.rnr_retry_count, info.path_mtu),
        (7, 7, 3)
    );
    assert_eq!(info.transport, Transport::Rc);
    assert!(!info.srq && info.flow_control);
    assert_eq!(info.remote_ca_guid, 0x0200_00FF_FE00_0001);
    assert_eq!(info.primary_local_gid, gid(1));
    assert_eq!(info.primary_remote_gid, gid(2));
    assert_eq!(
        (info.traffic_class, info.hop_limit, info.flow_label),
        (0x28, 64, 0xABCDE)
    );
    assert_eq!(
        (info.remote_cm_response_timeout, info.max_cm_retries),
        (8, 3)
    );
    assert_eq!(info.private_data.as_slice(), &pd[..]);
    assert_eq!(p.b.half_open_count(), 1);
    assert!(
        take(&mut p.b, p.now).is_empty(),
        "nothing sent before accept"
    );

    p.b.accept(p.now, cb, &accept_params(0x22, b"world"))
        .unwrap();
    assert_eq!(p.b.state_name(cb), Some("REP_SENT"));
    let rep = take_one(&mut p.b, p.now, REP);
    assert_eq!(
        tid_of(&rep),
        tid_of(&req),
        "the REP answers the REQ's transaction"
    );
    let r = Rep::new_checked(&rep[..]).unwrap();
    assert_eq!((r.local_comm_id(), r.remote_comm_id()), (0x2000, 0x1000));
    assert_eq!((r.local_qpn(), r.starting_psn()), (0x22, 0x65_4321));
    assert_eq!((r.responder_resources(), r.initiator_depth()), (2, 4));
    assert_eq!(
        (
            r.target_ack_delay(),
            r.failover_accepted(),
            r.rnr_retry_count()
        ),
        (15, 0, 7)
    );
    assert!(r.end_to_end_flow_control() && !r.srq());
    assert_eq!(r.local_ca_guid(), 0x0200_00FF_FE00_0002);
    assert_eq!(&r.private_data()[..5], b"world");
    assert!(r.private_data()[5..].iter().all(|&b| b == 0));

    p.a.handle_mad(p.now, &addr(2), &rep);
    let rep_info = match events(&mut p.a).as_slice() {
        [CmEvent::RepReceived { conn, rep }] if *conn == ca => *rep,
        e => panic!("{e:?}"),
    };
    assert_eq!(rep_info.remote_comm_id, 0x2000);
    assert_eq!(
        (rep_info.remote_qpn, rep_info.starting_psn),
        (0x22, 0x65_4321)
    );
    assert_eq!(rep_info.remote_ca_guid, 0x0200_00FF_FE00_0002);
    assert_eq!(rep_info.private_data.len(), 196);
    assert_eq!(&rep_info.private_data.as_slice()[..5], b"world");
    assert_eq!(p.a.state_name(ca), Some("REP_RCVD"));

    p.a.send_rtu(p.now, ca, b"rtu!").unwrap();
    assert_eq!(p.a.state_name(ca), Some("ESTABLISHED"));
    assert_eq!(events(&mut p.a), vec![CmEvent::Established { conn: ca }]);
    let rtu = take_one(&mut p.a, p.now, RTU);
    assert_eq!(tid_of(&rtu), tid_of(&req));
    let r = Rtu::new_checked(&rtu[..]).unwrap();
    assert_eq!((r.local_comm_id(), r.remote_comm_id()), (0x1000, 0x2000));
    assert_eq!(&r.private_data()[..4], b"rtu!");

    p.b.handle_mad(p.now, &addr(1), &rtu);
    assert_eq!(events(&mut p.b), vec![CmEvent::Established { conn: cb }]);
    assert_eq!(p.b.state_name(cb), Some("ESTABLISHED"));
    assert_eq!(p.b.half_open_count(), 0);
    // Nothing left to send or to time: established connections are quiet.
    assert!(take(&mut p.a, p.now).is_empty() && take(&mut p.b, p.now).is_empty());
    assert_eq!(p.a.poll_timeout(), None);
    assert_eq!(p.b.poll_timeout(), None);
    assert_eq!(p.a.counters().established, 1);
    assert_eq!(p.b.counters().established, 1);
    assert_eq!(p.b.counters().mads_received, 2);
    assert_eq!(p.b.counters().received_accounted(), 2);
}

#[test]
fn calls_in_the_wrong_state_are_refused_and_change_nothing() {
    use proto::cm::CmError;
    let mut p = Pair::new();
    let ca = p.a.connect(p.now, &connect_params(0x11, b"")).unwrap();
    assert_eq!(
        p.a.accept(p.now, ca, &accept_params(3, b"")),
        Err(CmError::InvalidState)
    );
    assert_eq!(p.a.send_rtu(p.now, ca, b""), Err(CmError::InvalidState));
    assert_eq!(p.a.disconnect(p.now, ca, b""), Err(CmError::InvalidState));
    assert_eq!(p.a.establish(p.now, ca), Err(CmError::InvalidState));
    assert_eq!(p.a.send_mra(p.now, ca, 3), Err(CmError::InvalidState));
    assert_eq!(
        p.a.accept(p.now, 999, &accept_params(3, b"")),
        Err(CmError::UnknownConn)
    );
    assert_eq!(
        p.a.connect(p.now, &connect_params(0x11, &[0; 93])),
        Err(CmError::PrivateDataTooLong)
    );
    let mut bad = connect_params(0x11, b"");
    bad.path_mtu = 6;
    assert!(matches!(
        p.a.connect(p.now, &bad),
        Err(CmError::InvalidArgument(_))
    ));
    assert_eq!(p.a.state_name(ca), Some("REQ_SENT"));
    assert_eq!(take(&mut p.a, p.now).len(), 1, "only the REQ");
    assert_eq!(p.b.listen(SID, 1), Err(CmError::AddressInUse));
}

#[test]
fn lost_rep_the_req_is_resent_with_its_tid_and_the_duplicate_is_dropped() {
    let mut p = Pair::new();
    let ca = p.a.connect(p.now, &connect_params(0x11, b"")).unwrap();
    let req = take_one(&mut p.a, p.now, REQ);
    p.b.handle_mad(p.now, &addr(1), &req);
    let cb = events(&mut p.b)[0].conn();
    p.b.accept(p.now, cb, &accept_params(0x22, b"")).unwrap();
    let _lost_rep = take_one(&mut p.b, p.now, REP);
    // REQ timeout: 2 * 4.096us*2^8 + 4.096us*2^8 = 3.15 ms; the REP's
    // 4.096us*2^8 (the REQ's local CM response timeout) = 1.05 ms.
    p.advance(ms(3));
    assert!(take(&mut p.a, p.now).is_empty());
    let _lost_rep_retry = take_one(&mut p.b, p.now, REP);
    p.advance(ms(1));
    let again = take_one(&mut p.a, p.now, REQ);
    assert_eq!(again, req, "a retry is the same MAD, same TID");
    assert_eq!(p.a.counters().retransmissions, 1);
    // The passive side has it: a duplicate, nothing answered in REP_SENT
    // (cm_dup_req_handler), the REP comes from its own timer.
    p.b.handle_mad(p.now, &addr(1), &again);
    assert!(events(&mut p.b).is_empty());
    assert!(take(&mut p.b, p.now).is_empty());
    assert_eq!(p.b.counters().duplicates, 1);
    p.advance(ms(1));
    let rep2 = take_one(&mut p.b, p.now, REP);
    assert_eq!(tid_of(&rep2), tid_of(&req));
    p.a.handle_mad(p.now, &addr(2), &rep2);
    assert!(
        matches!(events(&mut p.a).as_slice(), [CmEvent::RepReceived { conn, .. }] if *conn == ca)
    );
}

#[test]
fn lost_rtu_rep_resent_then_the_duplicate_rep_gets_the_rtu_again() {
    let mut p = Pair::new();
    let ca = p.a.connect(p.now, &connect_params(0x11, b"")).unwrap();
    let req = take_one(&mut p.a, p.now, REQ);
    p.b.handle_mad(p.now, &addr(1), &req);
    let cb = events(&mut p.b)[0].conn();
    p.b.accept(p.now, cb, &accept_params(0x22, b"")).unwrap();
    let rep = take_one(&mut p.b, p.now, REP);
    p.a.handle_mad(p.now, &addr(2), &rep);
    events(&mut p.a);
    p.a.send_rtu(p.now, ca, b"once").unwrap();
    assert_eq!(events(&mut p.a), vec![CmEvent::Established { conn: ca }]);
    let _lost_rtu = take_one(&mut p.a, p.now, RTU);
    p.advance(ms(2));
    let rep2 = take_one(&mut p.b, p.now, REP);
    assert_eq!(rep2, rep);
    p.a.handle_mad(p.now, &addr(2), &rep2);
    assert!(events(&mut p.a).is_empty(), "no second RepReceived");
    let rtu2 = take_one(&mut p.a, p.now, RTU);
    assert_eq!(
        &Rtu::new_checked(&rtu2[..]).unwrap().private_data()[..4],
        b"once"
    );
    assert_eq!(p.a.counters().duplicates, 1);
    p.b.handle_mad(p.now, &addr(1), &rtu2);
    assert_eq!(events(&mut p.b), vec![CmEvent::Established { conn: cb }]);
    // A late duplicate RTU: counted, nothing else.
    p.b.handle_mad(p.now, &addr(1), &rtu2);
    assert!(events(&mut p.b).is_empty());
    assert_eq!(p.b.counters().duplicates, 1);
}

#[test]
fn establish_before_the_rtu_stops_the_rep() {
    let mut p = Pair::new();
    p.a.connect(p.now, &connect_params(0x11, b"")).unwrap();
    let req = take_one(&mut p.a, p.now, REQ);
    p.b.handle_mad(p.now, &addr(1), &req);
    let cb = events(&mut p.b)[0].conn();
    p.b.accept(p.now, cb, &accept_params(0x22, b"")).unwrap();
    take_one(&mut p.b, p.now, REP);
    p.b.establish(p.now, cb).unwrap();
    assert_eq!(events(&mut p.b), vec![CmEvent::Established { conn: cb }]);
    assert_eq!(p.b.establish(p.now, cb), Ok(()));
    assert!(events(&mut p.b).is_empty());
    p.advance(ms(50));
    assert!(take(&mut p.b, p.now).is_empty(), "no REP after establish");
}

#[test]
fn rep_lost_until_retries_run_out_is_unreachable_on_both_sides() {
    let mut p = Pair::new();
    let ca = p.a.connect(p.now, &connect_params(0x11, b"")).unwrap();
    let req = take_one(&mut p.a, p.now, REQ);
    p.b.handle_mad(p.now, &addr(1), &req);
    let cb = events(&mut p.b)[0].conn();
    p.b.accept(p.now, cb, &accept_params(0x22, b"")).unwrap();
    // Everything lost from now on.
    let mut reps = 0;
    let mut reqs = 0;
    for _ in 0..100 {
        p.advance(ms(1));
        for (_, m) in take(&mut p.b, p.now) {
            assert_eq!(attr_of(&m), REP);
            reps += 1;
        }
        for (_, m) in take(&mut p.a, p.now) {
            assert_eq!(attr_of(&m), REQ);
            reqs += 1;
        }
    }
    assert_eq!(reps, 1 + 3, "REP + max_cm_retries (3) retries");
    assert_eq!(reqs, 3);
    assert_eq!(events(&mut p.a), vec![CmEvent::Unreachable { conn: ca }]);
    assert_eq!(events(&mut p.b), vec![CmEvent::Unreachable { conn: cb }]);
    assert_eq!(p.a.connection_count(), 0);
    assert_eq!(p.b.connection_count(), 0);
    assert_eq!(p.b.half_open_count(), 0);
    assert_eq!(p.a.counters().timeouts, 1);
    assert_eq!(p.a.poll_timeout(), None);
}

#[test]
fn reordered_rtu_before_rep_retry_and_dreq_before_rtu() {
    // The RTU overtakes a REP retry: the late REP is answered with an RTU
    // again, and nothing changes.
    let mut p = Pair::new();
    let (ca, cb) = establish(&mut p, 0x11, 0x22);
    let _ = (ca, cb);
    // A REP retry that was in flight arrives after establishment.
    let mut m = [0u8; 256];
    let mut r = Rep::new_checked(&mut m[..]).unwrap();
    r.header_mut().fill_cm(1, AttrId::Rep);
    r.set_local_comm_id(cb);
    r.set_remote_comm_id(ca);
    r.set_local_qpn(0x22);
    p.a.handle_mad(p.now, &addr(2), &m);
    take_one(&mut p.a, p.now, RTU);
    assert!(events(&mut p.a).is_empty());
    assert_eq!(p.a.state_name(ca), Some("ESTABLISHED"));
}

#[test]
fn passive_dreq_when_rtu_was_lost_disconnects_from_rep_sent() {
    let mut p = Pair::new();
    let ca = p.a.connect(p.now, &connect_params(0x11, b"")).unwrap();
    let req = take_one(&mut p.a, p.now, REQ);
    p.b.handle_mad(p.now, &addr(1), &req);
    let cb = events(&mut p.b)[0].conn();
    p.b.accept(p.now, cb, &accept_params(0x22, b"")).unwrap();
    let rep = take_one(&mut p.b, p.now, REP);
    p.a.handle_mad(p.now, &addr(2), &rep);
    events(&mut p.a);
    p.a.send_rtu(p.now, ca, b"").unwrap();
    events(&mut p.a);
    let _lost = take_one(&mut p.a, p.now, RTU);
    p.a.disconnect(p.now, ca, b"bye").unwrap();
    let dreq = take_one(&mut p.a, p.now, DREQ);
    p.b.handle_mad(p.now, &addr(1), &dreq);
    match events(&mut p.b).as_slice() {
        [CmEvent::DisconnectRequested { conn, private_data }] => {
            assert_eq!(*conn, cb);
            assert_eq!(&private_data.as_slice()[..3], b"bye");
        }
        e => panic!("{e:?}"),
    }
    assert_eq!(p.b.half_open_count(), 0);
    p.advance(ms(20));
    assert!(
        take(&mut p.b, p.now).is_empty(),
        "the REP stopped with the DREQ"
    );
}

#[test]
fn loopback_one_agent_is_both_sides() {
    // Client and server on one port (rdma_cm loopback): the agent's MADs
    // come back to it.
    use proto::cm::CmAgent;
    let mut x = CmAgent::new(config(1));
    let mut now = proto::time::Instant::ZERO;
    x.listen(SID, 0).unwrap();
    let mut cp = connect_params(0x11, b"loop");
    cp.peer = addr(1);
    let ca = x.connect(now, &cp).unwrap();
    let mut cb = None;
    let (mut est, mut closed) = (0, 0);
    for _ in 0..20 {
        // Everything delivered before time moves: no retransmission.
        loop {
            let out = take(&mut x, now);
            let ev = events(&mut x);
            if out.is_empty() && ev.is_empty() {
                break;
            }
            for (to, m) in out {
                assert_eq!(to, addr(1));
                x.handle_mad(now, &addr(1), &m);
            }
            for e in ev {
                match e {
                    CmEvent::ReqReceived { conn, req, .. } => {
                        assert_eq!(req.remote_comm_id, ca);
                        cb = Some(conn);
                        x.accept(now, conn, &accept_params(0x22, b"")).unwrap();
                    }
                    CmEvent::RepReceived { conn, .. } => x.send_rtu(now, conn, b"").unwrap(),
                    CmEvent::Established { conn } => {
                        est += 1;
                        if conn == ca {
                            x.disconnect(now, conn, b"").unwrap();
                        }
                    }
                    CmEvent::DisconnectRequested { conn, .. } => {
                        x.disconnect(now, conn, b"").unwrap()
                    }
                    CmEvent::TimewaitExit { .. } => closed += 1,
                    _ => {}
                }
            }
        }
        now += ms(5);
        x.handle_timeout(now);
    }
    assert!(cb.is_some_and(|b| b != ca));
    assert_eq!((est, closed), (2, 2));
    assert_eq!(x.connection_count(), 0);
    let c = x.counters();
    assert_eq!(
        (c.unmatched, c.duplicates, c.retransmissions),
        (0, 0, 0),
        "{c:?}"
    );
    assert_eq!(
        (c.mads_received, c.accepted_mads),
        (5, 5),
        "REQ REP RTU DREQ DREP"
    );
}
