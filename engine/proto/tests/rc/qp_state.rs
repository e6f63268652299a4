//! QP state machine, attribute checks, posting rules and flush.

use crate::support::*;

use proto::endpoint::{Endpoint, EndpointConfig};
use proto::rc::{
    Access, QpAttr, QpAttrMask, QpInitAttr, QpState, SendOp, SendWr, Sge, VerbsError, WcStatus,
};

/// An endpoint with one QP, in RESET.
fn endpoint_with_a_qp() -> (Endpoint, u32) {
    let mut ep = Endpoint::new(EndpointConfig::default());
    let cq = ep.create_cq(16);
    let q = ep
        .create_qp(QpInitAttr {
            send_cq: cq,
            recv_cq: cq,
            ..Default::default()
        })
        .unwrap();
    (ep, q)
}

#[test]
fn transitions_follow_the_verbs_state_machine() {
    let (mut ep, q) = endpoint_with_a_qp();
    assert_eq!(ep.qp_state(q), Some(QpState::Reset));
    let to = |s| QpAttr {
        state: s,
        ..QpAttr::default()
    };
    assert_eq!(
        ep.modify_qp(q, &to(QpState::Rts), QpAttrMask::STATE),
        Err(VerbsError::InvalidTransition)
    );
    ep.modify_qp(q, &to(QpState::Init), QpAttrMask::STATE)
        .unwrap();
    // INIT -> RTR needs the remote QPN, PSN and address.
    assert_eq!(
        ep.modify_qp(q, &to(QpState::Rtr), QpAttrMask::STATE),
        Err(VerbsError::MissingAttribute)
    );
    let m = QpAttrMask::STATE | QpAttrMask::DEST_QPN | QpAttrMask::RQ_PSN | QpAttrMask::AV;
    let bad = QpAttr {
        state: QpState::Rtr,
        dest_qpn: 1 << 24,
        ..QpAttr::default()
    };
    assert!(matches!(
        ep.modify_qp(q, &bad, m),
        Err(VerbsError::InvalidArgument(_))
    ));
    let v6 = QpAttr {
        state: QpState::Rtr,
        remote: proto::rc::RemoteAddress {
            mac: MAC_B,
            ip: "fe80::1".parse().unwrap(),
            vlan: None,
            udp_src_port: None,
        },
        ..QpAttr::default()
    };
    assert!(
        matches!(ep.modify_qp(q, &v6, m), Err(VerbsError::InvalidArgument(_))),
        "address family must match"
    );
    let rtr = QpAttr {
        state: QpState::Rtr,
        remote: proto::rc::RemoteAddress {
            mac: MAC_B,
            ip: "10.0.0.2".parse().unwrap(),
            vlan: None,
            udp_src_port: None,
        },
        ..QpAttr::default()
    };
    ep.modify_qp(q, &rtr, m).unwrap();
    assert_eq!(ep.qp_state(q), Some(QpState::Rtr));
    let sge = Sge {
        lkey: 0,
        addr: 0,
        length: 0,
    };
    assert_eq!(
        ep.post_send(q, SendWr::new(1, SendOp::Send, sge)),
        Err(VerbsError::InvalidState),
        "no sends before RTS"
    );
    assert_eq!(
        ep.modify_qp(
            q,
            &QpAttr {
                state: QpState::Rts,
                retry_cnt: 9,
                ..QpAttr::default()
            },
            QpAttrMask::STATE | QpAttrMask::SQ_PSN | QpAttrMask::RETRY_CNT
        ),
        Err(VerbsError::InvalidArgument("retry_cnt must be 0..=7"))
    );
    ep.modify_qp(
        q,
        &QpAttr {
            state: QpState::Rts,
            ..QpAttr::default()
        },
        QpAttrMask::STATE | QpAttrMask::SQ_PSN,
    )
    .unwrap();
    assert_eq!(
        ep.modify_qp(q, &to(QpState::Rtr), QpAttrMask::STATE),
        Err(VerbsError::InvalidTransition)
    );
    ep.modify_qp(q, &to(QpState::Error), QpAttrMask::STATE)
        .unwrap();
    assert_eq!(
        ep.modify_qp(q, &to(QpState::Rts), QpAttrMask::STATE),
        Err(VerbsError::InvalidTransition)
    );
    ep.modify_qp(q, &to(QpState::Reset), QpAttrMask::STATE)
        .unwrap();
    assert_eq!(ep.qp_state(q), Some(QpState::Reset));
}

/// The access flags are taken in RESET->INIT, INIT->INIT, INIT->RTR,
/// RTR->RTS and RTS->RTS (the kernel's verbs table for RC), refused on
/// the way to ERROR or RESET, and kept by a modify that does not name
/// them.
#[test]
fn access_flags_are_taken_only_where_verbs_takes_them() {
    let (mut ep, q) = endpoint_with_a_qp();
    let access = |ep: &Endpoint| ep.qp(q).unwrap().attr().access;
    assert_eq!(access(&ep), Access::NONE);
    let remote = proto::rc::RemoteAddress {
        mac: MAC_B,
        ip: "10.0.0.2".parse().unwrap(),
        vlan: None,
        udp_src_port: None,
    };
    let flags = QpAttrMask::STATE | QpAttrMask::ACCESS_FLAGS;
    let steps = [
        (QpState::Init, Access::REMOTE_WRITE, QpAttrMask(0)),
        (QpState::Init, Access::REMOTE_READ, QpAttrMask(0)),
        (
            QpState::Rtr,
            Access::REMOTE_ATOMIC,
            QpAttrMask::DEST_QPN | QpAttrMask::RQ_PSN | QpAttrMask::AV,
        ),
        (QpState::Rts, Access::ALL, QpAttrMask::SQ_PSN),
        (QpState::Rts, Access::REMOTE_WRITE, QpAttrMask(0)),
    ];
    for (state, a, required) in steps {
        let attr = QpAttr {
            state,
            access: a,
            remote,
            ..QpAttr::default()
        };
        ep.modify_qp(q, &attr, flags | required).unwrap();
        assert_eq!((ep.qp_state(q), access(&ep)), (Some(state), a));
    }
    // Not named: kept.
    let rts = QpAttr {
        state: QpState::Rts,
        timeout: 10,
        ..QpAttr::default()
    };
    ep.modify_qp(q, &rts, QpAttrMask::STATE | QpAttrMask::TIMEOUT)
        .unwrap();
    assert_eq!(access(&ep), Access::REMOTE_WRITE);
    // Refused with ERROR and RESET as targets; nothing changes.
    for state in [QpState::Error, QpState::Reset] {
        let attr = QpAttr {
            state,
            access: Access::ALL,
            ..QpAttr::default()
        };
        assert!(matches!(
            ep.modify_qp(q, &attr, flags),
            Err(VerbsError::InvalidArgument(_))
        ));
        assert_eq!(
            (ep.qp_state(q), access(&ep)),
            (Some(QpState::Rts), Access::REMOTE_WRITE)
        );
    }
}

#[test]
fn moving_to_error_flushes_posted_work() {
    let mut p = Pair::default_pair();
    for i in 0..3 {
        p.b.post_recv(p.qb, recv_wr_b(&p, i, 64)).unwrap();
    }
    p.b.modify_qp(
        p.qb,
        &QpAttr {
            state: QpState::Error,
            ..QpAttr::default()
        },
        QpAttrMask::STATE,
    )
    .unwrap();
    let wc = p.wcs_b();
    assert_eq!(wc.len(), 3);
    assert!(wc.iter().all(|w| w.status == WcStatus::Flushed));
    assert_eq!(wc.iter().map(|w| w.wr_id).collect::<Vec<_>>(), [0, 1, 2]);
}

#[test]
fn posts_check_queue_depth_and_atomic_alignment() {
    let mut p = Pair::default_pair();
    let mut at = send_wr_a(&p, 1, SendOp::FetchAdd, 8);
    at.remote_addr = IOVA_B + 4;
    assert!(matches!(
        p.a.post_send(p.qa, at),
        Err(VerbsError::InvalidArgument(_))
    ));
    for i in 0..64 {
        p.a.post_send(p.qa, send_wr_a(&p, i, SendOp::Send, 1))
            .unwrap();
    }
    let wr = send_wr_a(&p, 99, SendOp::Send, 1);
    assert_eq!(p.a.post_send(p.qa, wr), Err(VerbsError::QueueFull));
    assert_eq!(p.a.post_send(0x999, wr), Err(VerbsError::UnknownQp));
}

/// As rxe (whose `validate_send_wr` looks at no key), a send request's
/// local key is not checked at post: a READ into a region without
/// LOCAL_WRITE is posted, goes out, and completes with a local protection
/// error when its answer cannot be placed (rxe_comp.c `do_read`); a SEND
/// whose range leaves its region is posted and completes with a local QP
/// operation error when its packet cannot be built (rxe_req.c
/// `finish_packet`). Either moves the QP to error, flushing what follows.
#[test]
fn a_bad_local_buffer_is_posted_and_fails_its_request_when_it_runs() {
    let mut p = Pair::default_pair();
    let ro =
        p.a.reg_mr(Box::new(vec![0u8; 64]), 0x7000, Access::NONE)
            .unwrap();
    let mut rd = SendWr::new(
        1,
        SendOp::Read,
        Sge {
            lkey: ro.lkey,
            addr: 0x7000,
            length: 8,
        },
    );
    rd.rkey = p.mr_b.rkey;
    rd.remote_addr = IOVA_B;
    rd.signaled = true;
    p.a.post_send(p.qa, rd).unwrap();
    p.a.post_send(p.qa, send_wr_a(&p, 2, SendOp::Send, 1))
        .unwrap();
    p.settle();
    let wc = p.wcs_a();
    assert_eq!(
        wc.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(),
        [(1, WcStatus::LocalProtectionError), (2, WcStatus::Flushed)]
    );
    assert_eq!(p.a.qp_state(p.qa), Some(QpState::Error));
    let mut back = [1u8; 64];
    p.a.mr_read(ro.lkey, 0x7000, &mut back).unwrap();
    assert_eq!(back, [0u8; 64], "the READ's answer did not land");

    let mut p = Pair::default_pair();
    let mut wr = SendWr::new(
        1,
        SendOp::Send,
        Sge {
            lkey: p.mr_a.lkey,
            addr: IOVA_A + MR_LEN as u64 - 4,
            length: 8,
        },
    );
    wr.signaled = true;
    p.a.post_send(p.qa, wr).unwrap();
    assert!(p.tx_a().is_empty(), "no packet of the SEND left");
    assert_eq!(
        p.wcs_a()
            .iter()
            .map(|w| (w.wr_id, w.status))
            .collect::<Vec<_>>(),
        [(1, WcStatus::LocalQpOperationError)]
    );
    assert_eq!(p.a.qp_state(p.qa), Some(QpState::Error));
    assert!(p.wcs_b().is_empty());
}

#[test]
fn deregistered_region_is_unreachable_by_its_old_key() {
    let mut p = Pair::default_pair();
    let k =
        p.b.reg_mr(Box::new(vec![0u8; 64]), 0x9000, Access::ALL)
            .unwrap();
    let mem = p.b.dereg_mr(k.lkey).unwrap();
    assert_eq!(mem.len(), 64);
    p.a.mr_write(p.mr_a.lkey, IOVA_A, &[1; 8]).unwrap();
    let mut wr = send_wr_a(&p, 1, SendOp::Write, 8);
    wr.rkey = k.rkey;
    wr.remote_addr = 0x9000;
    p.a.post_send(p.qa, wr).unwrap();
    p.settle();
    assert_eq!(p.wcs_a()[0].status, WcStatus::RemoteAccessError);
}

#[test]
fn counters_iterate_with_rxe_names() {
    let p = Pair::default_pair();
    let c = p.a.counters();
    let names: Vec<&str> = c.iter().map(|(n, _)| n).collect();
    for want in [
        "sent_pkts",
        "rcvd_pkts",
        "duplicate_request",
        "out_of_seq_request",
        "rcvd_seq_err",
        "rcvd_rnr_err",
        "send_rnr_err",
        "retry_exceeded_err",
        "retry_rnr_exceeded_err",
        "completer_retry_err",
        "retransmitted_packets",
        "naks_sent",
        "qp_access_violation",
        "timeouts",
        "dropped_bad_icrc",
        "dropped_unknown_qp",
        "dropped_malformed",
    ] {
        assert!(names.contains(&want), "{want}");
    }
}

/// An endpoint given a block of QP numbers (as each process attached to a
/// shared engine is) draws every RC, UC and UD QP number from it, refuses
/// a chosen number outside it, and reports the block exhausted.
#[test]
fn qp_numbers_come_from_the_endpoints_range() {
    use proto::endpoint::QpnRange;
    let range = QpnRange {
        first: 0x05_0000,
        last: 0x05_003f,
    };
    let mut ep = Endpoint::new(EndpointConfig {
        qpns: range,
        ..EndpointConfig::default()
    });
    let cq = ep.create_cq(16);
    let init = QpInitAttr {
        send_cq: cq,
        recv_cq: cq,
        ..Default::default()
    };
    // PDs are the caller's numbers; 0 is every endpoint's first.
    let pd = 0;
    let mut seen = std::collections::HashSet::new();
    for k in 0..64 {
        let q = match k % 3 {
            0 => ep.create_qp(init).unwrap(),
            1 => ep.create_uc_qp_in(pd, init).unwrap(),
            _ => ep.create_ud_qp(pd, init).unwrap(),
        };
        assert!(range.contains(q), "QP {q:#x} outside {range:?}");
        assert!(seen.insert(q), "QP number {q:#x} given twice");
    }
    assert_eq!(ep.create_qp(init), Err(VerbsError::ResourceExhausted));
    assert!(matches!(
        ep.create_qp_numbered(0x06_0000, init),
        Err(VerbsError::InvalidArgument(_))
    ));
    // The GSI keeps its number whatever the range.
    assert_eq!(
        ep.create_ud_qp_numbered(pd, 1, init),
        Ok(1),
        "QP 1 is every endpoint's"
    );
}
