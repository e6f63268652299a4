//! Garbage MADs: truncated, wrong versions, class, method or attribute,
//! lengths at their maximum, random bytes. Each is counted, none panics,
//! none touches a connection it does not name.

use proto::cm::mad::*;
use proto::cm::CmEvent;
use proto::sim::SplitMix64;

use crate::support::*;

#[test]
fn truncated_and_wrong_headers_are_malformed() {
    let mut p = Pair::new();
    let (ca, cb) = establish(&mut p, 0x11, 0x22);
    let base = p.b.counters().malformed;
    let mut good = [0u8; 256];
    let mut d = Dreq::new_checked(&mut good[..]).unwrap();
    d.header_mut().fill_cm(1, AttrId::Dreq);
    d.set_local_comm_id(ca);
    d.set_remote_comm_id(cb);
    d.set_remote_qpn(0x22);
    for len in [0, 1, 23, 24, 100, 255] {
        p.b.handle_mad(p.now, &addr(1), &good[..len]);
    }
    for (i, v) in [
        (0usize, 2u8),
        (1, 0x81),
        (2, 1),
        (2, 3),
        (3, 0x83),
        (3, 0x01),
    ] {
        let mut m = good;
        m[i] = v;
        p.b.handle_mad(p.now, &addr(1), &m);
    }
    assert_eq!(p.b.counters().malformed - base, 12);
    // LAP, APR, ClassPortInfo and unknown attributes.
    for a in [0x0001u16, 0x0019, 0x001A, 0x0000, 0x0020, 0xFFFF] {
        let mut m = good;
        m[16..18].copy_from_slice(&a.to_be_bytes());
        p.b.handle_mad(p.now, &addr(1), &m);
    }
    assert_eq!(p.b.counters().malformed - base, 18);
    assert!(events(&mut p.b).is_empty());
    assert!(take(&mut p.b, p.now).is_empty());
    assert_eq!(p.b.state_name(cb), Some("ESTABLISHED"));
    // A longer buffer is read as its first 256 bytes.
    let mut long = vec![0xAAu8; 300];
    long[..256].copy_from_slice(&good);
    p.b.handle_mad(p.now, &addr(1), &long);
    assert!(matches!(
        events(&mut p.b).as_slice(),
        [CmEvent::DisconnectRequested { .. }]
    ));
    assert_eq!(
        p.b.counters().received_accounted(),
        p.b.counters().mads_received
    );
}

#[test]
fn lengths_at_their_maximum_are_capped() {
    let mut p = Pair::new();
    let ca = p.a.connect(p.now, &connect_params(0x11, b"")).unwrap();
    take(&mut p.a, p.now);
    // A REJ "timeout" whose ARI length says 127: read as 72 bytes at most.
    let mut m = [0xFFu8; 256];
    let mut r = Rej::new_checked(&mut m[..]).unwrap();
    r.header_mut().fill_cm(1, AttrId::Rej);
    r.set_reason(rej_reason::TIMEOUT);
    r.set_reject_info_length(127);
    assert_eq!(r.ari().len(), 72);
    p.a.handle_mad(p.now, &addr(2), &m);
    // REJ naming our REQ, all private data bytes set.
    let mut r = Rej::new_checked(&mut m[..]).unwrap();
    r.set_reason(28);
    r.set_message_rejected(msg_code::REQ);
    r.set_remote_comm_id(ca);
    let mut m2 = m;
    Rej::new_checked(&mut m2[..]).unwrap().set_local_comm_id(9);
    p.a.handle_mad(p.now, &addr(2), &m2);
    match events(&mut p.a).as_slice() {
        [CmEvent::Rejected { private_data, .. }] => {
            assert_eq!(private_data.as_slice(), &[0xFF; 148][..]);
        }
        e => panic!("{e:?}"),
    }
}

#[test]
fn req_with_comm_id_zero_or_unsupported_transport() {
    let mut p = Pair::new();
    let mut m = [0u8; 256];
    let mut r = Req::new_checked(&mut m[..]).unwrap();
    r.header_mut().fill_cm(1, AttrId::Req);
    r.set_service_id(SID);
    r.set_local_qpn(5);
    p.b.handle_mad(p.now, &addr(1), &m);
    assert_eq!(p.b.counters().malformed, 1);
    let mut r = Req::new_checked(&mut m[..]).unwrap();
    r.set_local_comm_id(3);
    r.set_transport_service_type(2); // RD
    p.b.handle_mad(p.now, &addr(1), &m);
    let rej = take_one(&mut p.b, p.now, REJ);
    assert_eq!(
        Rej::new_checked(&rej[..]).unwrap().reason(),
        rej_reason::INVALID_TRANSPORT_TYPE
    );
    let mut r = Req::new_checked(&mut m[..]).unwrap();
    r.set_transport_service_type(0);
    r.set_extended_transport_type(1); // XRC
    p.b.handle_mad(p.now, &addr(1), &m);
    take_one(&mut p.b, p.now, REJ);
    assert_eq!(p.b.counters().unsupported, 2);
    assert_eq!(p.b.connection_count(), 0);
}

#[test]
fn random_mads_of_every_attribute_leave_established_connections_alone() {
    let mut p = Pair::new();
    let (ca, cb) = establish(&mut p, 0x11, 0x22);
    let mut rng = SplitMix64::new(7);
    for i in 0..20_000u32 {
        let mut m = [0u8; 256];
        for b in m.iter_mut() {
            *b = rng.next_u64() as u8;
        }
        let attr = 0x10 + (i % 9) as u16;
        MadHeader::new_checked(&mut m[..])
            .unwrap()
            .fill_cm(rng.next_u64(), AttrId::from_u16(attr).unwrap());
        // Keep the IDs away from the live connection's pair.
        if m[24..28] == ca.to_be_bytes() || m[28..32] == ca.to_be_bytes() {
            m[24] ^= 0x80;
        }
        let len = if i % 5 == 0 {
            (rng.next_u64() % 300) as usize
        } else {
            256
        };
        let mut buf = m.to_vec();
        buf.resize(len, 0);
        p.b.handle_mad(p.now, &addr(1), &buf);
        p.a.handle_mad(p.now, &addr(2), &buf);
        if i % 100 == 0 {
            p.advance(ms(1));
        }
        // Answer whatever the garbage started so the agents stay bounded.
        for x in [&mut p.a, &mut p.b] {
            take(x, p.now);
            for e in events(x) {
                if e.conn() == ca || e.conn() == cb {
                    panic!("garbage reached the live connection: {e:?}");
                }
                x.destroy(p.now, e.conn());
            }
        }
        for x in [&p.a, &p.b] {
            assert_eq!(
                x.counters().received_accounted(),
                x.counters().mads_received
            );
        }
    }
    assert_eq!(p.a.state_name(ca), Some("ESTABLISHED"));
    assert_eq!(p.b.state_name(cb), Some("ESTABLISHED"));
    assert!(p.b.counters().malformed > 0 && p.b.counters().accepted_mads > 0);
}
