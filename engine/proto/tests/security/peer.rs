//! Who may talk to a QP: only its connected peer (rxe `check_addr`: the
//! IP pair; optionally the peer's UDP source port), with the QP's P_Key
//! (rxe `check_keys`). CNPs pass the same checks before they cut a rate.

use core::net::{IpAddr, Ipv4Addr};

use proto::endpoint::RemoteQp;
use proto::rc::{QpAttr, QpAttrMask, QpInitAttr, QpState};
use proto::wire::DEFAULT_PKEY;

use crate::forge::{cnp_like, from_ip, STRANGER};
use crate::support::{hdr, opts, rewrite, write_wr, Pair, IOVA_B};

/// A's one WRITE of 16 bytes of 5s, sent but not delivered.
fn pending_write(p: &mut Pair) -> Vec<Vec<u8>> {
    p.a.mr_write(p.mr_a.lkey, crate::support::IOVA_A, &[5u8; 16])
        .unwrap();
    p.a.post_send(p.qa, write_wr(p, 1, 16, 0)).unwrap();
    p.tx_a()
}

#[test]
fn a_write_from_a_forged_source_is_dropped_and_writes_nothing() {
    let mut p = Pair::default_pair();
    let f = pending_write(&mut p);
    p.deliver_b(&[from_ip(&f[0], STRANGER)]);
    let c = p.b.counters();
    assert_eq!(c.dropped_wrong_peer, 1);
    assert_eq!(c.rcvd_pkts, 0);
    assert!(p.tx_b().is_empty(), "no answer to a stranger");
    assert_eq!(p.read_b(IOVA_B, 16), [0u8; 16]);
    // The real one still lands.
    p.deliver_b(&f);
    assert_eq!(p.read_b(IOVA_B, 16), [5u8; 16]);
}

#[test]
fn a_write_from_the_peers_address_but_another_udp_port_is_dropped_when_the_port_is_pinned() {
    let mut p = Pair::default_pair();
    let f = pending_write(&mut p);
    let port = hdr(&f[0]).udp.src_port;
    // B learns A's UDP source port (the option: RemoteAddress::udp_src_port).
    let mut attr: QpAttr = *p.b.qp(p.qb).unwrap().attr();
    attr.remote.udp_src_port = Some(port);
    p.b.modify_qp(p.qb, &attr, QpAttrMask::AV).unwrap();
    let other_port = rewrite(&f[0], |h| h.udp.src_port = port ^ 1);
    p.deliver_b(&[other_port]);
    assert_eq!(p.b.counters().dropped_wrong_peer, 1);
    assert!(p.tx_b().is_empty());
    assert_eq!(p.read_b(IOVA_B, 16), [0u8; 16]);
    p.deliver_b(&f);
    assert_eq!(p.read_b(IOVA_B, 16), [5u8; 16]);
    assert_eq!(p.b.counters().dropped_wrong_peer, 1);
}

#[test]
fn without_a_pinned_port_any_udp_source_port_of_the_peer_is_accepted() {
    // rxe checks the IP pair only; so does the default.
    let mut p = Pair::default_pair();
    let f = pending_write(&mut p);
    let port = hdr(&f[0]).udp.src_port;
    p.deliver_b(&[rewrite(&f[0], |h| h.udp.src_port = port ^ 1)]);
    assert_eq!(p.read_b(IOVA_B, 16), [5u8; 16]);
    assert_eq!(p.b.counters().dropped_wrong_peer, 0);
}

/// The rate of A's QP `qpn`, in bit/s.
fn rate(p: &Pair, qpn: u32) -> f64 {
    p.a.qp_rates().find(|&(q, _)| q == qpn).unwrap().1
}

#[test]
fn a_cnp_from_a_forged_source_or_for_a_qp_not_connected_to_it_cuts_no_rate() {
    let mut p = Pair::default_pair();
    // A frame from B to A, whose addresses the CNPs borrow.
    let f = pending_write(&mut p);
    p.deliver_b(&f);
    let from_b = p.tx_b();
    p.deliver_a(&from_b);
    // A second QP of A, connected to another host (10.0.0.3), and a third
    // one never connected.
    let init = QpInitAttr {
        send_cq: p.cq_a,
        recv_cq: p.cq_a,
        ..Default::default()
    };
    let qa2 = p.a.create_qp(init).unwrap();
    p.a.connect(
        qa2,
        &RemoteQp {
            qpn: 0x99,
            psn: 0,
            mac: [2, 0, 0, 0, 0, 0xC],
            ip: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 3)),
        },
        &opts(),
    )
    .unwrap();
    let qa3 = p.a.create_qp(init).unwrap();
    let (r1, r2) = (rate(&p, p.qa), rate(&p, qa2));

    // From a stranger, naming A's QP; from B, naming the QP connected to
    // 10.0.0.3; from B, naming the QP in RESET; from B with a bad P_Key.
    p.deliver_a(&[from_ip(&cnp_like(&from_b[0], p.qa, DEFAULT_PKEY), STRANGER)]);
    p.deliver_a(&[cnp_like(&from_b[0], qa2, DEFAULT_PKEY)]);
    p.deliver_a(&[cnp_like(&from_b[0], qa3, DEFAULT_PKEY)]);
    p.deliver_a(&[cnp_like(&from_b[0], p.qa, 0x1234)]);
    let c = p.a.counters();
    assert_eq!(c.dropped_wrong_peer, 2, "{c:?}");
    assert_eq!(c.dropped_malformed, 1, "the QP in RESET: {c:?}");
    assert_eq!(c.dropped_bad_pkey, 1, "{c:?}");
    assert_eq!(c.cnp_received, 0);
    assert_eq!(c.rp_cnp_handled, 0);
    assert_eq!((rate(&p, p.qa), rate(&p, qa2)), (r1, r2));

    // The peer's own CNP is obeyed.
    p.deliver_a(&[cnp_like(&from_b[0], p.qa, DEFAULT_PKEY)]);
    let c = p.a.counters();
    assert_eq!((c.cnp_received, c.rp_cnp_handled), (1, 1));
    assert!(rate(&p, p.qa) < r1);
    assert_eq!(rate(&p, qa2), r2);
    assert_eq!(p.a.qp_state(qa3), Some(QpState::Reset));
}

#[test]
fn a_write_with_another_p_key_is_dropped_and_counted() {
    let mut p = Pair::default_pair();
    let f = pending_write(&mut p);
    // 0x1234: another partition; 0x0000 / 0x8000: the invalid P_Key.
    for pkey in [0x1234, 0x9234, 0x0000, 0x8000] {
        p.deliver_b(&[rewrite(&f[0], |h| h.bth.pkey = pkey)]);
    }
    let c = p.b.counters();
    assert_eq!(c.dropped_bad_pkey, 4);
    assert_eq!(c.rcvd_pkts, 0);
    assert!(p.tx_b().is_empty(), "no ACK for another partition");
    assert_eq!(p.read_b(IOVA_B, 16), [0u8; 16]);
    // A limited member of the QP's partition (0x7FFF against the QP's
    // full-member 0xFFFF) matches (IBTA: one of the two is a full member).
    p.deliver_b(&[rewrite(&f[0], |h| h.bth.pkey = 0x7FFF)]);
    assert_eq!(p.read_b(IOVA_B, 16), [5u8; 16]);
    assert_eq!(p.b.counters().dropped_bad_pkey, 4);
}

#[test]
fn two_limited_members_of_a_partition_do_not_match() {
    let mut p = Pair::default_pair();
    let f = pending_write(&mut p);
    // B's QP becomes a limited member (0x7FFF) of the default partition.
    let mut attr: QpAttr = *p.b.qp(p.qb).unwrap().attr();
    attr.pkey = 0x7FFF;
    p.b.modify_qp(p.qb, &attr, QpAttrMask::PKEY).unwrap();
    p.deliver_b(&[rewrite(&f[0], |h| h.bth.pkey = 0x7FFF)]);
    assert_eq!(p.b.counters().dropped_bad_pkey, 1);
    assert_eq!(p.read_b(IOVA_B, 16), [0u8; 16]);
    // A full member (A's 0xFFFF) still talks to it.
    p.deliver_b(&f);
    assert_eq!(p.read_b(IOVA_B, 16), [5u8; 16]);
}
