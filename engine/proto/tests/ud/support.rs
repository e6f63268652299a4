//! What the UD tests share: endpoints with one region each, UD QPs
//! brought to RTS, address handles between them.

use core::net::IpAddr;

use proto::endpoint::{Endpoint, EndpointConfig};
use proto::rc::{Access, MrKeys, QpInitAttr, QpState, RecvWr, Sge, WorkCompletion};
use proto::time::Instant;
use proto::ud::{AhAttr, UdQpAttr, UdQpAttrMask, UdSendWr};
use proto::wire::{parse_frame_view, RoceFrameView};

/// Where each endpoint's region starts, and its size.
pub const IOVA: u64 = 0x40_0000;
pub const MR_LEN: usize = 1 << 20;
/// The receive buffers' stride in the region.
pub const SLOT: u64 = 8192;

/// One endpoint with a region and a CQ.
pub struct Node {
    pub ep: Endpoint,
    pub mr: MrKeys,
    pub cq: u32,
    pub mac: [u8; 6],
    pub ip: IpAddr,
}

/// An endpoint at `mac` / `ip`, its region filled with a pattern of
/// `mac[5]`.
pub fn node(mac_last: u8, ip: IpAddr) -> Node {
    let mac = [2, 0, 0, 0, 0, mac_last];
    let mut ep = Endpoint::new(EndpointConfig {
        local_mac: mac,
        local_ip: ip,
        seed: [0x7564_0000 + u64::from(mac_last), 9],
        ..EndpointConfig::default()
    });
    let bytes: Vec<u8> = (0..MR_LEN)
        .map(|i| (i % 253) as u8 ^ mac_last.wrapping_mul(0x3D))
        .collect();
    let mr = ep
        .reg_mr(Box::new(bytes), IOVA, Access::LOCAL_WRITE)
        .unwrap();
    let cq = ep.create_cq(4096);
    Node {
        ep,
        mr,
        cq,
        mac,
        ip,
    }
}

/// Queue depths and CQs for a UD QP of `n`.
pub fn init(n: &Node, depth: u32) -> QpInitAttr {
    QpInitAttr {
        send_cq: n.cq,
        recv_cq: n.cq,
        max_send_wr: depth,
        max_recv_wr: depth,
        sq_sig_all: false,
        srq: None,
    }
}

/// Bring UD QP `qpn` of `ep` through INIT (Q_Key `qkey`) and RTR to RTS
/// (first PSN `psn`).
pub fn up(ep: &mut Endpoint, qpn: u32, qkey: u32, psn: u32) {
    let a = UdQpAttr {
        state: QpState::Init,
        qkey,
        sq_psn: psn,
        ..UdQpAttr::default()
    };
    ep.modify_ud_qp(
        qpn,
        &a,
        UdQpAttrMask::STATE | UdQpAttrMask::PKEY_INDEX | UdQpAttrMask::PORT | UdQpAttrMask::QKEY,
    )
    .unwrap();
    let rtr = UdQpAttr {
        state: QpState::Rtr,
        ..a
    };
    ep.modify_ud_qp(qpn, &rtr, UdQpAttrMask::STATE).unwrap();
    let rts = UdQpAttr {
        state: QpState::Rts,
        ..a
    };
    ep.modify_ud_qp(qpn, &rts, UdQpAttrMask::STATE | UdQpAttrMask::SQ_PSN)
        .unwrap();
}

/// A UD QP of `n` in RTS.
pub fn ud_qp(n: &mut Node, qkey: u32, psn: u32) -> u32 {
    let i = init(n, 256);
    let q = n.ep.create_ud_qp(0, i).unwrap();
    up(&mut n.ep, q, qkey, psn);
    q
}

/// An address handle on `from` to `to`.
pub fn ah_to(from: &mut Node, to: &Node) -> u32 {
    from.ep
        .create_ah(
            0,
            &AhAttr {
                remote: proto::rc::RemoteAddress {
                    mac: to.mac,
                    ip: to.ip,
                    ..Default::default()
                },
                hop_limit: 64,
                ..AhAttr::default()
            },
        )
        .unwrap()
}

/// A send of `len` bytes at offset `off` of `n`'s region.
pub fn send_wr(n: &Node, wr_id: u64, off: u64, len: u32, ah: u32, qpn: u32, qkey: u32) -> UdSendWr {
    UdSendWr::new(
        wr_id,
        Sge {
            lkey: n.mr.lkey,
            addr: IOVA + off,
            length: len,
        },
        ah,
        qpn,
        qkey,
    )
}

/// Post a receive of `len` bytes at slot `slot` of `n`'s region.
pub fn recv(n: &mut Node, qpn: u32, wr_id: u64, slot: u64, len: u32) {
    let lkey = n.mr.lkey;
    n.ep.post_ud_recv(
        qpn,
        RecvWr {
            wr_id,
            sge: Sge {
                lkey,
                addr: IOVA + slot * SLOT,
                length: len,
            },
        },
    )
    .unwrap();
}

/// Bytes of `n`'s region at `off`.
pub fn region(n: &Node, off: u64, len: usize) -> Vec<u8> {
    let mut out = vec![0u8; len];
    n.ep.mr_read(n.mr.lkey, IOVA + off, &mut out).unwrap();
    out
}

/// Every frame `n` has to send now.
pub fn frames(n: &mut Node) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut buf = vec![0u8; 9000];
    while let Some(len) = n.ep.poll_transmit(Instant::ZERO, &mut buf) {
        out.push(buf[..len].to_vec());
    }
    out
}

/// Every completion waiting on `n`'s CQ.
pub fn completions(n: &mut Node) -> Vec<WorkCompletion> {
    let mut out = Vec::new();
    while let Some(wc) = n.ep.poll_completion(n.cq) {
        out.push(wc);
    }
    out
}

/// The one frame `n` sends now.
pub fn one_frame(n: &mut Node) -> Vec<u8> {
    let f = frames(n);
    assert_eq!(f.len(), 1, "one frame expected");
    f.into_iter().next().unwrap()
}

/// The frame parsed (ICRC checked).
pub fn view(f: &[u8]) -> RoceFrameView<'_> {
    parse_frame_view(f).unwrap()
}
