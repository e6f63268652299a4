//! 802.1Q: a QP connected with a VLAN tag sends every frame (requests,
//! ACKs, READ responses) tagged, and the peer, tagged too, takes them.

use crate::support::*;

use proto::rc::SendOp;
use proto::wire::{parse_frame, VlanTag};

#[test]
fn every_frame_of_a_tagged_qp_carries_its_tag() {
    let tag = VlanTag {
        pcp: 3,
        dei: false,
        vid: 100,
    };
    let o = proto::endpoint::ConnectOptions {
        vlan: Some(tag),
        ..opts()
    };
    let mut p = Pair::new(o, o);
    let data = bytes(3000, 7);
    p.a.mr_write(p.mr_a.lkey, IOVA_A, &data).unwrap();
    p.a.post_send(p.qa, write_wr(&p, 1, 3000, 0)).unwrap();
    p.a.post_send(p.qa, read_wr(&p, 2, 3000, 8192)).unwrap();
    p.b.post_recv(p.qb, recv_wr_b(&p, 3, 64)).unwrap();
    p.a.post_send(p.qa, send_wr_a(&p, 4, SendOp::Send, 64))
        .unwrap();
    let mut seen = 0;
    for _ in 0..16 {
        let fa = p.tx_a();
        let fb = p.tx_b();
        if fa.is_empty() && fb.is_empty() {
            break;
        }
        for f in fa.iter().chain(&fb) {
            let h = parse_frame(f).unwrap().headers;
            assert_eq!(h.eth.vlan, Some(tag), "{:?}", h.bth.opcode);
            seen += 1;
        }
        p.deliver_b(&fa);
        p.deliver_a(&fb);
    }
    assert!(
        seen >= 6,
        "requests, ACKs and READ responses: {seen} frames"
    );
    assert_eq!(p.read_b(IOVA_B, 3000), data);
    let wcs = p.wcs_a();
    assert_eq!(wcs.len(), 3, "{wcs:?}");
    assert!(wcs
        .iter()
        .all(|wc| wc.status == proto::rc::WcStatus::Success));
    assert_eq!(p.wcs_b().len(), 1);
}
