//! SIDR: service ID resolution (IBA 12.11), for UD QPs.

use proto::cm::mad::*;
use proto::cm::{ip, CmEvent};

use crate::support::*;

const UDP_SID: u64 = 0x0111_4E20;

#[test]
fn sidr_request_reply_every_field() {
    let mut p = Pair::new();
    p.b.listen(UDP_SID, 0).unwrap();
    let hdr = ip::IpCmHeader {
        src_port: 7,
        src: "10.0.0.1".parse().unwrap(),
        dst: "10.0.0.2".parse().unwrap(),
    }
    .to_bytes()
    .unwrap();
    let ca =
        p.a.sidr_request(p.now, UDP_SID, addr(2), &hdr, 8, 2)
            .unwrap();
    let req = take_one(&mut p.a, p.now, SIDR_REQ);
    let r = SidrReq::new_checked(&req[..]).unwrap();
    assert_eq!(
        (r.request_id(), r.partition_key(), r.service_id()),
        (ca, 0xFFFF, UDP_SID)
    );
    assert_eq!(&r.private_data()[..36], &hdr);
    p.b.handle_mad(p.now, &addr(1), &req);
    let (cb, info) = match events(&mut p.b).as_slice() {
        [CmEvent::SidrReqReceived { conn, req, .. }] => (*conn, *req),
        e => panic!("{e:?}"),
    };
    assert_eq!(
        (info.request_id, info.service_id, info.pkey),
        (ca, UDP_SID, 0xFFFF)
    );
    assert_eq!(
        ip::IpCmHeader::parse(info.private_data.as_slice())
            .unwrap()
            .src_port,
        7
    );
    // A duplicate is dropped.
    p.b.handle_mad(p.now, &addr(1), &req);
    assert!(events(&mut p.b).is_empty());
    assert_eq!(p.b.counters().duplicates, 1);
    p.b.sidr_reply(p.now, cb, sidr_status::VALID, 0x4321, 0x1111_2222, b"ud")
        .unwrap();
    let rep = take_one(&mut p.b, p.now, SIDR_REP);
    assert_eq!(tid_of(&rep), tid_of(&req));
    let r = SidrRep::new_checked(&rep[..]).unwrap();
    assert_eq!(
        (r.request_id(), r.status(), r.qpn(), r.qkey()),
        (ca, 0, 0x4321, 0x1111_2222)
    );
    assert_eq!(r.service_id(), UDP_SID);
    assert_eq!(p.b.connection_count(), 0);
    p.a.handle_mad(p.now, &addr(2), &rep);
    match events(&mut p.a).as_slice() {
        [CmEvent::SidrRepReceived {
            conn,
            status,
            qpn,
            qkey,
            private_data,
        }] => {
            assert_eq!((*conn, *status, *qpn, *qkey), (ca, 0, 0x4321, 0x1111_2222));
            assert_eq!(&private_data.as_slice()[..2], b"ud");
        }
        e => panic!("{e:?}"),
    }
    assert_eq!(p.a.connection_count(), 0);
    // A late duplicate SIDR_REP: unmatched.
    p.a.handle_mad(p.now, &addr(2), &rep);
    assert!(events(&mut p.a).is_empty());
    assert_eq!(p.a.counters().unmatched, 1);
}

#[test]
fn sidr_without_listener_and_sidr_timeout_and_destroy() {
    let mut p = Pair::new();
    let ca =
        p.a.sidr_request(p.now, UDP_SID, addr(2), b"", 8, 2)
            .unwrap();
    let req = take_one(&mut p.a, p.now, SIDR_REQ);
    p.b.handle_mad(p.now, &addr(1), &req);
    let rep = take_one(&mut p.b, p.now, SIDR_REP);
    assert_eq!(
        SidrRep::new_checked(&rep[..]).unwrap().status(),
        sidr_status::UNSUPPORTED
    );
    assert_eq!(p.b.counters().no_listener, 1);
    // Lost answer: two retries 1 ms apart, then unreachable.
    let mut sent = 0;
    for _ in 0..10 {
        p.advance(ms(1));
        sent += take(&mut p.a, p.now).len();
    }
    assert_eq!(sent, 2);
    assert_eq!(
        events(&mut p.a),
        vec![CmEvent::SidrUnreachable { conn: ca }]
    );
    assert_eq!(p.a.connection_count(), 0);

    p.b.listen(UDP_SID, 0).unwrap();
    p.b.handle_mad(p.now, &addr(1), &req);
    let cb = events(&mut p.b)[0].conn();
    p.b.destroy(p.now, cb);
    let rep = take_one(&mut p.b, p.now, SIDR_REP);
    assert_eq!(
        SidrRep::new_checked(&rep[..]).unwrap().status(),
        sidr_status::REJECT
    );
}
