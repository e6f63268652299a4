//! Two endpoints with one QP each, connected to each other: shared by the
//! `rc` tests (through `support`) and `cc_cnp_vectors.rs`.

use proto::endpoint::{ConnectOptions, Endpoint, EndpointConfig, RemoteQp, FIRST_QPN};
use proto::rc::QpInitAttr;

/// One side of a connection made by [`connect_endpoints`]: the endpoint,
/// its QP and the CQ that QP completes to.
pub struct Side {
    pub ep: Endpoint,
    pub qpn: u32,
    pub cq: u32,
}

/// Endpoints `cfg_a` and `cfg_b`, each with a CQ of `cq_depth` and a QP
/// created with `init` (its CQs replaced by that CQ), connected with `oa` /
/// `ob`; each side expects the other's `sq_psn`. Returns A's side and B's.
pub fn connect_endpoints(
    cfg_a: EndpointConfig,
    cfg_b: EndpointConfig,
    cq_depth: usize,
    init: QpInitAttr,
    oa: &ConnectOptions,
    ob: &ConnectOptions,
) -> (Side, Side) {
    let (mac_a, ip_a) = (cfg_a.local_mac, cfg_a.local_ip);
    let (mac_b, ip_b) = (cfg_b.local_mac, cfg_b.local_ip);
    let mut a = Endpoint::new(cfg_a);
    let mut b = Endpoint::new(cfg_b);
    let cq_a = a.create_cq(cq_depth);
    let cq_b = b.create_cq(cq_depth);
    // QPN 0x11 on both sides, whatever the seed: the test vectors name it.
    let qa = a
        .create_qp_numbered(
            FIRST_QPN,
            QpInitAttr {
                send_cq: cq_a,
                recv_cq: cq_a,
                ..init
            },
        )
        .unwrap();
    let qb = b
        .create_qp_numbered(
            FIRST_QPN,
            QpInitAttr {
                send_cq: cq_b,
                recv_cq: cq_b,
                ..init
            },
        )
        .unwrap();
    a.connect(
        qa,
        &RemoteQp {
            qpn: qb,
            psn: ob.sq_psn,
            mac: mac_b,
            ip: ip_b,
        },
        oa,
    )
    .unwrap();
    b.connect(
        qb,
        &RemoteQp {
            qpn: qa,
            psn: oa.sq_psn,
            mac: mac_a,
            ip: ip_a,
        },
        ob,
    )
    .unwrap();
    (
        Side {
            ep: a,
            qpn: qa,
            cq: cq_a,
        },
        Side {
            ep: b,
            qpn: qb,
            cq: cq_b,
        },
    )
}
