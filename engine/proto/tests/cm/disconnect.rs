//! DREQ / DREP from either side, simultaneous DREQs, lost DREQ and DREP,
//! timewait, destroy.

use proto::cm::mad::*;
use proto::cm::CmEvent;

use crate::support::*;

#[test]
fn dreq_drep_timewait_exit_on_both_sides() {
    let mut p = Pair::new();
    let (ca, cb) = establish(&mut p, 0x11, 0x22);
    p.a.disconnect(p.now, ca, b"bye").unwrap();
    assert_eq!(p.a.state_name(ca), Some("DREQ_SENT"));
    let dreq = take_one(&mut p.a, p.now, DREQ);
    let d = Dreq::new_checked(&dreq[..]).unwrap();
    assert_eq!(
        (d.local_comm_id(), d.remote_comm_id(), d.remote_qpn()),
        (ca, cb, 0x22)
    );
    assert_eq!(&d.private_data()[..3], b"bye");
    assert_eq!(tid_of(&dreq), (0xAB01u64 << 32) | u64::from(ca));
    p.b.handle_mad(p.now, &addr(1), &dreq);
    assert!(
        matches!(events(&mut p.b).as_slice(), [CmEvent::DisconnectRequested { conn, .. }] if *conn == cb)
    );
    assert_eq!(p.b.state_name(cb), Some("DREQ_RCVD"));
    p.b.disconnect(p.now, cb, b"ok").unwrap();
    let drep = take_one(&mut p.b, p.now, DREP);
    assert_eq!(
        tid_of(&drep),
        tid_of(&dreq),
        "the DREP answers the DREQ's transaction"
    );
    let d = Drep::new_checked(&drep[..]).unwrap();
    assert_eq!((d.local_comm_id(), d.remote_comm_id()), (cb, ca));
    assert_eq!(&d.private_data()[..2], b"ok");
    assert_eq!(p.b.state_name(cb), Some("TIMEWAIT"));
    p.a.handle_mad(p.now, &addr(2), &drep);
    assert_eq!(events(&mut p.a), vec![CmEvent::Disconnected { conn: ca }]);
    assert_eq!(p.a.state_name(ca), Some("TIMEWAIT"));
    // A second disconnect is a no-op.
    assert_eq!(p.a.disconnect(p.now, ca, b""), Ok(()));
    assert!(take(&mut p.a, p.now).is_empty());
    p.advance(ms(9));
    assert!(events(&mut p.a).is_empty());
    p.advance(ms(2));
    assert_eq!(events(&mut p.a), vec![CmEvent::TimewaitExit { conn: ca }]);
    assert_eq!(events(&mut p.b), vec![CmEvent::TimewaitExit { conn: cb }]);
    assert_eq!((p.a.connection_count(), p.b.connection_count()), (0, 0));
    assert_eq!((p.a.poll_timeout(), p.b.poll_timeout()), (None, None));
}

#[test]
fn simultaneous_dreqs_both_answer_and_both_leave() {
    let mut p = Pair::new();
    let (ca, cb) = establish(&mut p, 0x11, 0x22);
    p.a.disconnect(p.now, ca, b"").unwrap();
    p.b.disconnect(p.now, cb, b"").unwrap();
    let da = take_one(&mut p.a, p.now, DREQ);
    let db = take_one(&mut p.b, p.now, DREQ);
    p.a.handle_mad(p.now, &addr(2), &db);
    p.b.handle_mad(p.now, &addr(1), &da);
    assert!(matches!(
        events(&mut p.a).as_slice(),
        [CmEvent::DisconnectRequested { .. }]
    ));
    assert!(matches!(
        events(&mut p.b).as_slice(),
        [CmEvent::DisconnectRequested { .. }]
    ));
    p.advance(ms(20));
    assert!(
        take(&mut p.a, p.now).is_empty(),
        "our DREQ stopped: theirs answers it"
    );
    p.a.disconnect(p.now, ca, b"").unwrap();
    p.b.disconnect(p.now, cb, b"").unwrap();
    let ra = take_one(&mut p.a, p.now, DREP);
    let rb = take_one(&mut p.b, p.now, DREP);
    p.a.handle_mad(p.now, &addr(2), &rb);
    p.b.handle_mad(p.now, &addr(1), &ra);
    assert_eq!(p.a.counters().duplicates, 1, "a DREP in timewait");
    assert!(events(&mut p.a).is_empty() && events(&mut p.b).is_empty());
    p.advance(ms(11));
    assert_eq!(events(&mut p.a), vec![CmEvent::TimewaitExit { conn: ca }]);
    assert_eq!(events(&mut p.b), vec![CmEvent::TimewaitExit { conn: cb }]);
}

#[test]
fn lost_drep_the_dreq_retry_gets_it_again_from_timewait_or_after() {
    let mut p = Pair::new();
    let (ca, cb) = establish(&mut p, 0x11, 0x22);
    p.a.disconnect(p.now, ca, b"").unwrap();
    let dreq = take_one(&mut p.a, p.now, DREQ);
    p.b.handle_mad(p.now, &addr(1), &dreq);
    events(&mut p.b);
    p.b.disconnect(p.now, cb, b"x").unwrap();
    let _lost = take_one(&mut p.b, p.now, DREP);
    p.advance(ms(4)); // DREQ timeout 3.15 ms
    let dreq2 = take_one(&mut p.a, p.now, DREQ);
    assert_eq!(dreq2, dreq);
    p.b.handle_mad(p.now, &addr(1), &dreq2);
    let drep = take_one(&mut p.b, p.now, DREP);
    assert_eq!(
        &Drep::new_checked(&drep[..]).unwrap().private_data()[..1],
        b"x"
    );
    assert_eq!(p.b.counters().duplicates, 1);
    // After the passive side forgot it: a DREQ for no connection still
    // gets a DREP (cm_issue_drep) with the IDs swapped.
    p.advance(ms(11));
    events(&mut p.b);
    assert_eq!(p.b.connection_count(), 0);
    p.b.handle_mad(p.now, &addr(1), &dreq2);
    let drep2 = take_one(&mut p.b, p.now, DREP);
    let d = Drep::new_checked(&drep2[..]).unwrap();
    assert_eq!((d.local_comm_id(), d.remote_comm_id()), (cb, ca));
    assert_eq!(tid_of(&drep2), tid_of(&dreq2));
    p.a.handle_mad(p.now, &addr(2), &drep2);
    assert_eq!(events(&mut p.a), vec![CmEvent::Disconnected { conn: ca }]);
}

#[test]
fn dreq_retries_exhausted_is_disconnected_then_timewait() {
    let mut p = Pair::new();
    let (ca, _cb) = establish(&mut p, 0x11, 0x22);
    p.a.disconnect(p.now, ca, b"").unwrap();
    let mut sent = 0;
    for _ in 0..40 {
        sent += take(&mut p.a, p.now).len();
        p.advance(ms(1));
    }
    assert_eq!(sent, 4, "DREQ + 3 retries");
    let ev = events(&mut p.a);
    assert_eq!(ev[0], CmEvent::Disconnected { conn: ca });
    assert_eq!(ev[1], CmEvent::TimewaitExit { conn: ca });
    assert_eq!(p.a.counters().timeouts, 1);
}

#[test]
fn dreq_with_another_qpn_is_dropped() {
    let mut p = Pair::new();
    let (ca, cb) = establish(&mut p, 0x11, 0x22);
    p.a.disconnect(p.now, ca, b"").unwrap();
    let mut dreq = take_one(&mut p.a, p.now, DREQ);
    Dreq::new_checked(&mut dreq[..])
        .unwrap()
        .set_remote_qpn(0x23);
    p.b.handle_mad(p.now, &addr(1), &dreq);
    assert!(events(&mut p.b).is_empty());
    assert!(take(&mut p.b, p.now).is_empty());
    assert_eq!(p.b.state_name(cb), Some("ESTABLISHED"));
    assert_eq!(p.b.counters().unmatched, 1);
}

#[test]
fn destroy_established_sends_one_dreq_and_no_more_events() {
    let mut p = Pair::new();
    let (ca, cb) = establish(&mut p, 0x11, 0x22);
    p.a.destroy(p.now, ca);
    let dreq = take_one(&mut p.a, p.now, DREQ);
    assert_eq!(p.a.state_name(ca), Some("TIMEWAIT"));
    p.advance(ms(5));
    assert!(
        take(&mut p.a, p.now).is_empty(),
        "no DREQ retry after destroy"
    );
    p.b.handle_mad(p.now, &addr(1), &dreq);
    events(&mut p.b);
    p.b.disconnect(p.now, cb, b"").unwrap();
    let drep = take_one(&mut p.b, p.now, DREP);
    p.a.handle_mad(p.now, &addr(2), &drep);
    p.advance(ms(20));
    assert!(
        events(&mut p.a).is_empty(),
        "a destroyed connection reports nothing"
    );
    assert_eq!(p.a.connection_count(), 0);
    use proto::cm::CmError;
    assert_eq!(p.a.disconnect(p.now, ca, b""), Err(CmError::UnknownConn));
}
