//! Many QPs: the simulator's verified run with the engine's per-queue QP
//! limit, and the endpoint's number allocation across the 24-bit space.

use std::collections::HashSet;

use proto::endpoint::{Endpoint, EndpointConfig, FIRST_QPN, MAX_QPN, MAX_QPS_PER_ENGINE};
use proto::rc::{Access, QpInitAttr, VerbsError};
use proto::sim::scenarios::{run_workload, Op, WorkloadConfig};

#[test]
fn sixty_four_k_qps_every_byte_verified() {
    for op in [Op::Write, Op::Send] {
        let cfg = WorkloadConfig {
            op,
            messages: 2 * u64::from(MAX_QPS_PER_ENGINE),
            size: 64,
            qps: MAX_QPS_PER_ENGINE,
            ..WorkloadConfig::default()
        };
        let r = run_workload(&cfg);
        assert!(r.ok(), "{op:?}: {r}");
        assert_eq!(r.bytes_verified, 64 * cfg.messages);
    }
}

#[test]
fn qp_numbers_are_drawn_from_the_whole_space_and_unique() {
    let mut ep = Endpoint::new(EndpointConfig {
        max_qps: 20_000,
        seed: [7, 7],
        ..EndpointConfig::default()
    });
    let cq = ep.create_cq(4);
    let init = QpInitAttr {
        send_cq: cq,
        recv_cq: cq,
        max_send_wr: 1,
        max_recv_wr: 1,
        sq_sig_all: false,
        srq: None,
    };
    let qpns: Vec<u32> = (0..20_000).map(|_| ep.create_qp(init).unwrap()).collect();
    assert_eq!(qpns.iter().collect::<HashSet<_>>().len(), qpns.len());
    assert!(qpns.iter().all(|q| (FIRST_QPN..=MAX_QPN).contains(q)));
    // Spread over the space, not counted up from 0x11.
    assert!(qpns.iter().any(|&q| q > 0x80_0000) && qpns.iter().any(|&q| q < 0x80_0000));
    assert_eq!(ep.create_qp(init), Err(VerbsError::ResourceExhausted));
    // Every one is found; a destroyed one is gone, and its slot serves anew.
    assert!(qpns.iter().all(|&q| ep.has_qp(q)));
    ep.destroy_qp(qpns[5]).unwrap();
    assert!(!ep.has_qp(qpns[5]));
    let again = ep.create_qp(init).unwrap();
    assert!(ep.has_qp(again) && ep.qp_count() == 20_000);
    // A chosen number anywhere in the space (a device numbers its QPs).
    let mut big = Endpoint::new(EndpointConfig::default());
    let cq = big.create_cq(4);
    let init = QpInitAttr {
        send_cq: cq,
        recv_cq: cq,
        ..init
    };
    assert_eq!(big.create_qp_numbered(MAX_QPN, init), Ok(MAX_QPN));
    assert!(big.create_qp_numbered(MAX_QPN + 1, init).is_err());
    assert!(big.create_qp_numbered(MAX_QPN, init).is_err());
}

#[test]
fn initial_psns_and_keys_differ_between_seeds() {
    let make = |seed| {
        let mut ep = Endpoint::new(EndpointConfig {
            seed,
            ..EndpointConfig::default()
        });
        let cq = ep.create_cq(4);
        let q = ep
            .create_qp(QpInitAttr {
                send_cq: cq,
                recv_cq: cq,
                ..QpInitAttr::default()
            })
            .unwrap();
        let k = ep.reg_mr(Box::new(vec![0u8; 8]), 0, Access::ALL).unwrap();
        (q, ep.initial_psn(q).unwrap(), k)
    };
    let (qa, pa, ka) = make([1, 1]);
    let (qb, pb, kb) = make([1, 2]);
    assert!(qa != qb && pa != pb && ka != kb);
    assert_ne!(ka.lkey, ka.rkey);
    // The same seed, the same numbers: seeded runs are reproducible.
    assert_eq!(make([1, 1]), (qa, pa, ka));
}
