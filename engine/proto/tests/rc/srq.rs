//! Shared receive queues (IBA 10.2.9.5, 11.5.2.4; rxe `rxe_srq.c`,
//! `get_srq_wqe`), driven packet by packet: B's QPs, each connected to one
//! of A's, take their receives from one SRQ. Each message takes the WQE at
//! the SRQ's head when its first packet executes and holds it to its last;
//! an empty SRQ is RNR NAKed; the limit fires once and disarms; the SRQ
//! cannot be destroyed while a QP uses it; a QP on it has no receive queue
//! of its own; a QP in error flushes what it took, not the SRQ.

use core::net::{IpAddr, Ipv4Addr};
use core::time::Duration;

use crate::support::*;

use proto::endpoint::{AsyncEvent, Endpoint, EndpointConfig, RemoteQp};
use proto::rc::{
    Access, MrKeys, Mtu, QpAttr, QpAttrMask, QpInitAttr, QpState, RecvWr, SendOp, SendWr, Sge,
    SrqAttr, SrqAttrMask, VerbsError, WcOpcode, WcStatus, WorkCompletion,
};
use proto::time::Instant;
use proto::wire::Opcode;

/// Where B's receive buffers are, one `SLOT` each.
const SLOT: u64 = 8192;

/// A and B with `n` connected QP pairs; B's QPs all on one SRQ.
struct Shared {
    a: Endpoint,
    b: Endpoint,
    cq_a: u32,
    cq_b: u32,
    srq: u32,
    /// (A's QP, B's QP) of each connection.
    qps: Vec<(u32, u32)>,
    mr_a: MrKeys,
    mr_b: MrKeys,
    now: Instant,
}

fn shared(n: usize, attr: SrqAttr) -> Shared {
    let ip = |x| IpAddr::V4(Ipv4Addr::new(10, 0, 0, x));
    let mut a = Endpoint::new(EndpointConfig {
        local_mac: MAC_A,
        local_ip: ip(1),
        ..Default::default()
    });
    let mut b = Endpoint::new(EndpointConfig {
        local_mac: MAC_B,
        local_ip: ip(2),
        ..Default::default()
    });
    let (cq_a, cq_b) = (a.create_cq(1024), b.create_cq(1024));
    let mr_a = a
        .reg_mr(Box::new(vec![0u8; MR_LEN]), IOVA_A, Access::ALL)
        .unwrap();
    let mr_b = b
        .reg_mr(Box::new(vec![0u8; MR_LEN]), IOVA_B, Access::ALL)
        .unwrap();
    let srq = b.create_srq(0, attr).unwrap();
    let init = |cq, srq| QpInitAttr {
        send_cq: cq,
        recv_cq: cq,
        max_send_wr: 64,
        max_recv_wr: 64,
        sq_sig_all: true,
        srq,
    };
    let mut qps = Vec::new();
    for _ in 0..n {
        let qa = a.create_qp(init(cq_a, None)).unwrap();
        let qb = b.create_qp(init(cq_b, Some(srq))).unwrap();
        let remote = |qpn, mac, x| RemoteQp {
            qpn,
            psn: 0,
            mac,
            ip: ip(x),
        };
        a.connect(qa, &remote(qb, MAC_B, 2), &opts()).unwrap();
        b.connect(qb, &remote(qa, MAC_A, 1), &opts()).unwrap();
        qps.push((qa, qb));
    }
    Shared {
        a,
        b,
        cq_a,
        cq_b,
        srq,
        qps,
        mr_a,
        mr_b,
        now: Instant::ZERO,
    }
}

fn srq_attr(max_wr: u32, srq_limit: u32) -> SrqAttr {
    SrqAttr {
        max_wr,
        max_sge: 1,
        srq_limit,
    }
}

impl Shared {
    /// B's receive `wr_id` into slot `slot` of B's region.
    fn recv(&self, wr_id: u64, slot: u64) -> RecvWr {
        RecvWr {
            wr_id,
            sge: Sge {
                lkey: self.mr_b.lkey,
                addr: IOVA_B + slot * SLOT,
                length: SLOT as u32,
            },
        }
    }

    fn post(&mut self, wr_id: u64, slot: u64) {
        let wr = self.recv(wr_id, slot);
        self.b.post_srq_recv(self.srq, wr).unwrap();
    }

    /// A's QP `i` sends `len` bytes of `bytes(len, seed)` (written at
    /// A's slot `i`); returns its frames.
    fn send(&mut self, i: usize, wr_id: u64, len: u32, seed: u8) -> Vec<Vec<u8>> {
        let at = IOVA_A + i as u64 * SLOT;
        self.a
            .mr_write(self.mr_a.lkey, at, &bytes(len as usize, seed))
            .unwrap();
        let wr = SendWr::new(
            wr_id,
            SendOp::Send,
            Sge {
                lkey: self.mr_a.lkey,
                addr: at,
                length: len,
            },
        );
        self.a.post_send(self.qps[i].0, wr).unwrap();
        drain(&mut self.a, self.now)
    }

    fn slot_b(&self, slot: u64, len: usize) -> Vec<u8> {
        let mut v = vec![0u8; len];
        self.b
            .mr_read(self.mr_b.lkey, IOVA_B + slot * SLOT, &mut v)
            .unwrap();
        v
    }

    fn deliver_b(&mut self, frames: &[Vec<u8>]) {
        for f in frames {
            self.b.handle_packet(self.now, f);
        }
    }

    /// Exchange frames both ways until both are quiet.
    fn settle(&mut self) {
        for _ in 0..1000 {
            let fa = drain(&mut self.a, self.now);
            let fb = drain(&mut self.b, self.now);
            if fa.is_empty() && fb.is_empty() {
                return;
            }
            self.deliver_b(&fa);
            for f in &fb {
                self.a.handle_packet(self.now, f);
            }
        }
        panic!("did not settle");
    }

    fn wcs_b(&mut self) -> Vec<WorkCompletion> {
        drain_cq(&mut self.b, self.cq_b)
    }

    fn events(&mut self) -> Vec<AsyncEvent> {
        std::iter::from_fn(|| self.b.poll_event()).collect()
    }
}

/// `(qpn, wr_id, status, byte_len)` of each completion.
fn recvs(wcs: &[WorkCompletion]) -> Vec<(u32, u64, WcStatus, u32)> {
    wcs.iter()
        .map(|w| (w.qpn, w.wr_id, w.status, w.byte_len))
        .collect()
}

#[test]
fn qps_take_the_srqs_receives_in_the_order_their_messages_arrive() {
    let mut s = shared(3, srq_attr(16, 0));
    for k in 0..6 {
        s.post(100 + k, k);
    }
    // QP 2, then 0, then 1, then 2 again: each single-packet SEND takes
    // the WQE at the SRQ's head.
    let order = [(2, 11), (0, 12), (1, 13), (2, 14)];
    for (i, seed) in order {
        let f = s.send(i, seed.into(), 200 + u32::from(seed), seed);
        assert_eq!(f.len(), 1);
        s.deliver_b(&f);
    }
    let wcs = s.wcs_b();
    let want: Vec<_> = order
        .iter()
        .enumerate()
        .map(|(k, &(i, seed))| {
            (
                s.qps[i].1,
                100 + k as u64,
                WcStatus::Success,
                200 + u32::from(seed),
            )
        })
        .collect();
    assert_eq!(recvs(&wcs), want);
    assert!(wcs.iter().all(|w| w.opcode == WcOpcode::Recv));
    for (k, &(_, seed)) in order.iter().enumerate() {
        let len = 200 + usize::from(seed);
        assert_eq!(s.slot_b(k as u64, len), bytes(len, seed), "slot {k}");
    }
    let srq = s.b.srq(s.srq).unwrap();
    assert_eq!(srq.posted(), 2);
    assert_eq!(srq.counters().taken, 4);
    assert_eq!(srq.qps(), 3);
    s.settle();
    assert!(drain_cq(&mut s.a, s.cq_a)
        .iter()
        .all(|w| w.status == WcStatus::Success));
}

#[test]
fn a_multi_packet_send_holds_its_wqe_while_another_qp_takes_the_next() {
    let mut s = shared(2, srq_attr(16, 0));
    s.post(1, 0);
    s.post(2, 1);
    s.post(3, 2);
    // QP 0's 3-packet SEND (MTU 1024) and QP 1's 2-packet SEND,
    // interleaved packet by packet: QP 0 took WQE 1 with its FIRST, QP 1
    // WQE 2 with its own FIRST, and each message fills its own buffer.
    let f0 = s.send(0, 10, 2500, 0x40);
    let f1 = s.send(1, 11, 1500, 0x80);
    assert_eq!((f0.len(), f1.len()), (3, 2));
    assert_eq!(opcode(&f0[0]), Opcode::SendFirst);
    s.deliver_b(&f0[..1]);
    s.deliver_b(&f1[..1]);
    s.deliver_b(&f0[1..2]);
    s.deliver_b(&f1[1..]);
    s.deliver_b(&f0[2..]);
    let (q0, q1) = (s.qps[0].1, s.qps[1].1);
    assert_eq!(
        recvs(&s.wcs_b()),
        [
            (q1, 2, WcStatus::Success, 1500),
            (q0, 1, WcStatus::Success, 2500)
        ]
    );
    assert_eq!(s.slot_b(0, 2500), bytes(2500, 0x40));
    assert_eq!(s.slot_b(1, 1500), bytes(1500, 0x80));
    assert_eq!(s.b.srq(s.srq).unwrap().posted(), 1, "WQE 3 left");
}

#[test]
fn an_empty_srq_is_rnr_naked_as_an_empty_receive_queue_and_the_retry_lands() {
    let mut s = shared(2, srq_attr(4, 0));
    let f = s.send(1, 7, 100, 3);
    s.deliver_b(&f);
    let n = drain(&mut s.b, s.now);
    assert_eq!(n.len(), 1);
    assert_eq!(opcode(&n[0]), Opcode::Acknowledge);
    // RNR NAK with the QP's min_rnr_timer (1).
    assert_eq!(syndrome(&n[0]), 0x21);
    assert_eq!(psn(&n[0]), psn(&f[0]));
    assert!(s.wcs_b().is_empty(), "nothing executed");
    let qb = s.qps[1].1;
    assert_eq!(s.b.qp_counters(qb).unwrap().send_rnr_err, 1);
    assert_eq!(s.b.srq(s.srq).unwrap().counters().rnr_naks, 1);
    assert_eq!(s.b.qp_state(qb), Some(QpState::Rts));
    for fb in &n {
        s.a.handle_packet(s.now, fb);
    }
    // A receive arrives; A's RNR timer fires and the SEND is retried.
    s.post(70, 0);
    let t = s.a.poll_timeout().expect("RNR timer");
    s.now = t;
    s.a.handle_timeout(s.now);
    s.settle();
    assert_eq!(recvs(&s.wcs_b()), [(qb, 70, WcStatus::Success, 100)]);
    assert_eq!(s.slot_b(0, 100), bytes(100, 3));
    let wa = drain_cq(&mut s.a, s.cq_a);
    assert_eq!(wa.len(), 1);
    assert_eq!((wa[0].wr_id, wa[0].status), (7, WcStatus::Success));
}

#[test]
fn the_limit_fires_once_when_fewer_remain_then_stays_disarmed_until_armed_again() {
    let mut s = shared(2, srq_attr(8, 0));
    for k in 0..5 {
        s.post(k, k);
    }
    s.b.modify_srq(s.srq, &srq_attr(0, 3), SrqAttrMask::LIMIT)
        .unwrap();
    assert_eq!(s.b.query_srq(s.srq).unwrap(), srq_attr(8, 3));
    assert!(s.events().is_empty(), "armed, not reached");
    // 5 -> 4 -> 3: not below 3.
    for (i, id) in [(0, 1), (1, 2)] {
        let f = s.send(i, id, 10, 0);
        s.deliver_b(&f);
    }
    assert!(s.events().is_empty());
    assert_eq!(s.b.query_srq(s.srq).unwrap().srq_limit, 3);
    // 3 -> 2: below the limit, by QP 0's message.
    let f = s.send(0, 3, 10, 0);
    s.deliver_b(&f);
    assert_eq!(s.events(), [AsyncEvent::SrqLimitReached { srq: s.srq }]);
    assert!(s.events().is_empty(), "reported once");
    assert_eq!(
        s.b.query_srq(s.srq).unwrap().srq_limit,
        0,
        "disarmed (ibv_query_srq reads 0)"
    );
    // Disarmed: 2 -> 1 raises nothing.
    let f = s.send(1, 4, 10, 0);
    s.deliver_b(&f);
    assert!(s.events().is_empty());
    // Armed again above what is posted: nothing until a WQE is taken
    // (rxe checks when it takes one), then once.
    s.b.modify_srq(s.srq, &srq_attr(0, 4), SrqAttrMask::LIMIT)
        .unwrap();
    assert!(s.events().is_empty());
    let f = s.send(0, 5, 10, 0);
    s.deliver_b(&f);
    assert_eq!(s.events(), [AsyncEvent::SrqLimitReached { srq: s.srq }]);
    assert_eq!(s.b.srq(s.srq).unwrap().counters().limit_events, 2);
    assert_eq!(s.wcs_b().len(), 5, "every SEND completed");
}

#[test]
fn modify_and_create_refuse_as_rxe() {
    let mut s = shared(1, srq_attr(8, 0));
    fn inval<T>(r: Result<T, VerbsError>) -> bool {
        matches!(r, Err(VerbsError::InvalidArgument(_)))
    }
    assert!(inval(s.b.create_srq(0, srq_attr(0, 0))));
    assert!(inval(s.b.create_srq(0, srq_attr(1 << 17, 0))));
    // The limit is taken unchecked at creation, as rxe.
    let other = s.b.create_srq(0, srq_attr(4, 5)).unwrap();
    assert_eq!(s.b.query_srq(other), Ok(srq_attr(4, 5)));
    assert!(inval(s.b.modify_srq(
        s.srq,
        &srq_attr(0, 9),
        SrqAttrMask::LIMIT
    )));
    for k in 0..6 {
        s.post(k, k);
    }
    // Smaller than what is posted.
    assert!(inval(s.b.modify_srq(
        s.srq,
        &srq_attr(5, 0),
        SrqAttrMask::MAX_WR
    )));
    // Resized: room for more.
    s.b.modify_srq(s.srq, &srq_attr(10, 0), SrqAttrMask::MAX_WR)
        .unwrap();
    for k in 6..10 {
        s.post(k, k);
    }
    let wr = s.recv(99, 0);
    assert_eq!(s.b.post_srq_recv(s.srq, wr), Err(VerbsError::QueueFull));
    assert_eq!(s.b.query_srq(s.srq).unwrap(), srq_attr(10, 0));
    // A receive whose buffer is outside every region is posted: rxe's
    // `rxe_post_srq_recv` looks at no key (it fails when a message lands:
    // `a_bad_srq_receive_is_posted_and_fails_the_qp_that_takes_it`).
    let mut bad = s.recv(98, 0);
    bad.sge.addr = 0x7777_0000;
    s.b.modify_srq(s.srq, &srq_attr(11, 0), SrqAttrMask::MAX_WR)
        .unwrap();
    assert_eq!(s.b.post_srq_recv(s.srq, bad), Ok(()));
    // Unknown ids.
    assert_eq!(s.b.query_srq(77), Err(VerbsError::UnknownSrq));
    assert_eq!(
        s.b.post_srq_recv(77, s.recv(1, 0)),
        Err(VerbsError::UnknownSrq)
    );
    let init = QpInitAttr {
        send_cq: s.cq_b,
        recv_cq: s.cq_b,
        srq: Some(77),
        ..QpInitAttr::default()
    };
    assert_eq!(s.b.create_qp(init), Err(VerbsError::UnknownSrq));
}

#[test]
fn destroy_is_busy_while_a_qp_uses_the_srq() {
    let mut s = shared(2, srq_attr(8, 0));
    s.post(1, 0);
    assert_eq!(s.b.destroy_srq(s.srq), Err(VerbsError::Busy));
    s.b.destroy_qp(s.qps[0].1).unwrap();
    assert_eq!(s.b.destroy_srq(s.srq), Err(VerbsError::Busy));
    assert_eq!(s.b.srq(s.srq).unwrap().qps(), 1);
    s.b.destroy_qp(s.qps[1].1).unwrap();
    assert_eq!(s.b.destroy_srq(s.srq), Ok(()));
    assert_eq!(s.b.query_srq(s.srq), Err(VerbsError::UnknownSrq));
    assert_eq!(s.b.destroy_srq(s.srq), Err(VerbsError::UnknownSrq));
    // Its id is free again.
    assert_eq!(s.b.create_srq(0, srq_attr(2, 0)), Ok(s.srq));
}

#[test]
fn a_qp_on_an_srq_refuses_receives_of_its_own() {
    let mut s = shared(1, srq_attr(8, 0));
    let qb = s.qps[0].1;
    let wr = s.recv(1, 0);
    assert!(matches!(
        s.b.post_recv(qb, wr),
        Err(VerbsError::InvalidArgument(_))
    ));
    assert_eq!(s.b.qp(qb).unwrap().srq(), Some(s.srq));
    assert_eq!(s.b.qp(qb).unwrap().posted_recv_wrs(), 0);
    // Nor can it move to another endpoint without its SRQ.
    assert!(s.b.take_qp(qb).is_none());
    assert!(s.b.has_qp(qb));
}

#[test]
fn a_write_with_immediate_consumes_a_receive_of_the_srq() {
    let mut s = shared(1, srq_attr(8, 0));
    s.post(5, 3);
    let at = IOVA_A;
    s.a.mr_write(s.mr_a.lkey, at, &bytes(64, 9)).unwrap();
    let mut wr = SendWr::new(
        1,
        SendOp::WriteWithImm,
        Sge {
            lkey: s.mr_a.lkey,
            addr: at,
            length: 64,
        },
    );
    wr.remote_addr = IOVA_B + 5 * SLOT;
    wr.rkey = s.mr_b.rkey;
    wr.imm = 0xABCD;
    s.a.post_send(s.qps[0].0, wr).unwrap();
    s.settle();
    let w = s.wcs_b();
    assert_eq!(w.len(), 1);
    assert_eq!(
        (w[0].wr_id, w[0].opcode, w[0].imm, w[0].byte_len),
        (5, WcOpcode::RecvRdmaWithImm, Some(0xABCD), 64)
    );
    assert_eq!(s.slot_b(5, 64), bytes(64, 9));
    assert_eq!(s.b.srq(s.srq).unwrap().posted(), 0);
}

#[test]
fn a_qp_in_error_flushes_the_receive_it_took_and_leaves_the_srq_to_the_others() {
    let mut s = shared(2, srq_attr(8, 0));
    for k in 0..3 {
        s.post(k, k);
    }
    // QP 0 takes WQE 0 with the FIRST of a 2-packet SEND, then goes to
    // error before its LAST.
    let f = s.send(0, 1, 1500, 1);
    s.deliver_b(&f[..1]);
    let q0 = s.qps[0].1;
    s.b.modify_qp(
        q0,
        &QpAttr {
            state: QpState::Error,
            ..QpAttr::default()
        },
        QpAttrMask::STATE,
    )
    .unwrap();
    assert_eq!(recvs(&s.wcs_b()), [(q0, 0, WcStatus::Flushed, 0)]);
    assert_eq!(
        s.b.srq(s.srq).unwrap().posted(),
        2,
        "the SRQ's WQEs are not flushed with the QP"
    );
    // QP 1 goes on with WQE 1.
    let f = s.send(1, 2, 300, 2);
    s.deliver_b(&f);
    let q1 = s.qps[1].1;
    assert_eq!(recvs(&s.wcs_b()), [(q1, 1, WcStatus::Success, 300)]);
    assert_eq!(s.slot_b(1, 300), bytes(300, 2));
}

#[test]
fn an_srq_at_another_mtu_and_many_qps_keeps_every_byte() {
    // 8 QPs, MTU 256, each sending two 3-packet messages, all their
    // packets interleaved round robin: 16 WQEs taken, each message in the
    // one it took with its FIRST.
    let mut s = shared(8, srq_attr(64, 0));
    for (qa, qb) in s.qps.clone() {
        let o = opts_mtu(Mtu::Mtu256);
        let ip = |x| IpAddr::V4(Ipv4Addr::new(10, 0, 0, x));
        for (ep, q, r, mac, x) in [(&mut s.a, qa, qb, MAC_B, 2), (&mut s.b, qb, qa, MAC_A, 1)] {
            ep.modify_qp(
                q,
                &QpAttr {
                    state: QpState::Reset,
                    ..QpAttr::default()
                },
                QpAttrMask::STATE,
            )
            .unwrap();
            let remote = RemoteQp {
                qpn: r,
                psn: 0,
                mac,
                ip: ip(x),
            };
            ep.connect(q, &remote, &o).unwrap();
        }
    }
    for k in 0..16 {
        s.post(1000 + k, k);
    }
    let mut frames: Vec<Vec<Vec<u8>>> = Vec::new();
    for i in 0..8 {
        let mut f = s.send(i, 2 * i as u64, 700, 2 * i as u8);
        f.extend(s.send(i, 2 * i as u64 + 1, 600, 2 * i as u8 + 1));
        assert_eq!(f.len(), 6);
        frames.push(f);
    }
    // Round robin over the QPs, one packet each.
    let mut taken = Vec::new();
    for k in 0..6 {
        for (i, f) in frames.iter().enumerate() {
            if opcode(&f[k]) == Opcode::SendFirst {
                taken.push(i);
            }
            s.b.handle_packet(s.now, &f[k]);
        }
    }
    let wcs = s.wcs_b();
    assert_eq!(wcs.len(), 16);
    // The k-th FIRST took WQE 1000 + k, slot k.
    for w in &wcs {
        assert_eq!(w.status, WcStatus::Success);
        let k = w.wr_id - 1000;
        let i = taken[k as usize];
        assert_eq!(w.qpn, s.qps[i].1);
        // The QP's first message took the earlier WQE.
        let first = taken.iter().position(|&x| x == i).unwrap() as u64 == k;
        let (len, seed) = if first {
            (700, 2 * i as u8)
        } else {
            (600, 2 * i as u8 + 1)
        };
        assert_eq!(w.byte_len, len as u32);
        assert_eq!(s.slot_b(k, len), bytes(len, seed), "WQE {k}");
    }
    // Each QP's completions in its messages' order.
    for i in 0..8 {
        let ids: Vec<u64> = wcs
            .iter()
            .filter(|w| w.qpn == s.qps[i].1)
            .map(|w| w.wr_id)
            .collect();
        assert_eq!(ids.len(), 2);
        assert!(ids[0] < ids[1]);
    }
    s.now += Duration::from_micros(1);
    s.settle();
}

// ---- receives with SGE lists (rxe RXE_MAX_SRQ_SGE) ----

fn srq_attr_sge(max_wr: u32, max_sge: u32) -> SrqAttr {
    SrqAttr {
        max_wr,
        max_sge,
        srq_limit: 0,
    }
}

/// The pieces of B's slot `slot` a list receive scatters into: `lens`
/// bytes each, 1000 bytes apart (gaps that must stay untouched).
fn pieces(s: &Shared, slot: u64, lens: &[u32]) -> Vec<Sge> {
    let mut at = IOVA_B + slot * SLOT;
    lens.iter()
        .map(|&length| {
            let g = Sge {
                lkey: s.mr_b.lkey,
                addr: at,
                length,
            };
            at += u64::from(length) + 1000;
            g
        })
        .collect()
}

/// What the pieces hold, end to end.
fn gathered(s: &Shared, list: &[Sge], len: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for g in list {
        let mut v = vec![0u8; g.length as usize];
        s.b.mr_read(s.mr_b.lkey, g.addr, &mut v).unwrap();
        out.extend(v);
    }
    out.truncate(len);
    out
}

#[test]
fn srq_receives_with_lists_scatter_each_message_across_its_pieces() {
    let mut s = shared(2, srq_attr_sge(16, 27));
    assert_eq!(s.b.query_srq(s.srq).unwrap().max_sge, 27);
    // WQE 1: three pieces; WQE 2: one SGE; WQE 3: 27 pieces of 100.
    let l1 = pieces(&s, 0, &[1000, 300, 1500]);
    let l3 = pieces(&s, 2, &[100; 27]);
    s.b.post_srq_recv_sgl(s.srq, 1, &l1).unwrap();
    s.post(2, 1);
    s.b.post_srq_recv_sgl(s.srq, 3, &l3).unwrap();
    assert_eq!(s.b.srq(s.srq).unwrap().posted(), 3);
    // QP 0's 3-packet SEND takes WQE 1 with its FIRST, QP 1's 2-packet
    // SEND WQE 2, packets interleaved; then QP 0's 3-packet 2700 bytes
    // fill all 27 pieces of WQE 3.
    let f0 = s.send(0, 10, 2500, 0x40);
    let f1 = s.send(1, 11, 1500, 0x80);
    s.deliver_b(&f0[..1]);
    s.deliver_b(&f1[..1]);
    s.deliver_b(&f0[1..2]);
    s.deliver_b(&f1[1..]);
    s.deliver_b(&f0[2..]);
    let f2 = s.send(0, 12, 2700, 0x11);
    assert_eq!(f2.len(), 3);
    s.deliver_b(&f2);
    let (q0, q1) = (s.qps[0].1, s.qps[1].1);
    assert_eq!(
        recvs(&s.wcs_b()),
        [
            (q1, 2, WcStatus::Success, 1500),
            (q0, 1, WcStatus::Success, 2500),
            (q0, 3, WcStatus::Success, 2700)
        ]
    );
    assert_eq!(gathered(&s, &l1, 2500), bytes(2500, 0x40));
    assert_eq!(s.slot_b(1, 1500), bytes(1500, 0x80));
    assert_eq!(gathered(&s, &l3, 2700), bytes(2700, 0x11));
    // The gaps between pieces are untouched.
    let gap = |s: &Shared, g: &Sge| {
        let mut v = vec![0xFFu8; 1000];
        s.b.mr_read(s.mr_b.lkey, g.addr + u64::from(g.length), &mut v)
            .unwrap();
        v
    };
    for g in l1.iter().chain(&l3) {
        assert_eq!(gap(&s, g), vec![0u8; 1000]);
    }
    s.settle();
    assert!(drain_cq(&mut s.a, s.cq_a)
        .iter()
        .all(|w| w.status == WcStatus::Success));
}

#[test]
fn an_srq_list_is_bounded_by_its_max_sge() {
    let mut s = shared(1, srq_attr_sge(8, 3));
    let four = pieces(&s, 0, &[10, 10, 10, 10]);
    assert!(matches!(
        s.b.post_srq_recv_sgl(s.srq, 1, &four),
        Err(VerbsError::InvalidArgument(_))
    ));
    assert_eq!(s.b.srq(s.srq).unwrap().posted(), 0, "nothing queued");
    // Creation beyond rxe's 27 is refused.
    assert!(matches!(
        s.b.create_srq(0, srq_attr_sge(8, 28)),
        Err(VerbsError::InvalidArgument(_))
    ));
    // A message longer than the list's total: the receive completes with
    // a length error (rxe -ENOSPC), nothing beyond the pieces written.
    let short = pieces(&s, 0, &[100, 100]);
    s.b.post_srq_recv_sgl(s.srq, 3, &short).unwrap();
    let f = s.send(0, 4, 300, 5);
    s.deliver_b(&f);
    let w = s.wcs_b();
    assert_eq!(w[0].wr_id, 3);
    assert_eq!(w[0].status, WcStatus::LocalLengthError);
    let mut after = vec![0xFFu8; 1000];
    s.b.mr_read(s.mr_b.lkey, short[1].addr + 100, &mut after)
        .unwrap();
    assert_eq!(after, vec![0u8; 1000]);
}

/// An SRQ receive whose buffer cannot take a message (a list entry
/// outside every region, one SGE whose key no region has) is posted, as
/// rxe (rdma-core providers/rxe/rxe.c `rxe_post_srq_recv` ->
/// `rxe_post_one_recv` looks at no key), and fails when a SEND reaches
/// the bad buffer, for the QP that took it (rxe_resp.c `send_data_in`:
/// `RESPST_ERR_MALFORMED_WQE`): the pieces before it filled, the receive
/// completed with a local QP operation error, NAK remote operational
/// error, that QP to error; the SRQ keeps its other receives.
#[test]
fn a_bad_srq_receive_is_posted_and_fails_the_qp_that_takes_it() {
    let mut s = shared(2, srq_attr_sge(8, 3));
    let mut list = pieces(&s, 0, &[10, 10]);
    list[1].addr = 0x7777_0000;
    s.b.post_srq_recv_sgl(s.srq, 2, &list).unwrap();
    let mut one = s.recv(3, 1);
    one.sge.lkey ^= 0x5A5A_0000;
    s.b.post_srq_recv(s.srq, one).unwrap();
    s.post(4, 2);
    assert_eq!(s.b.srq(s.srq).unwrap().posted(), 3);
    let (q0, q1) = (s.qps[0].1, s.qps[1].1);
    for (i, wr_id, landed) in [(0usize, 2u64, 10usize), (1, 3, 0)] {
        let qb = s.qps[i].1;
        let f = s.send(i, 1, 20, 0x51 + i as u8);
        assert_eq!(f.len(), 1);
        s.deliver_b(&f);
        assert_eq!(
            recvs(&s.wcs_b()),
            [(qb, wr_id, WcStatus::LocalQpOperationError, 0)],
            "QP {i}"
        );
        let n = drain(&mut s.b, s.now);
        assert_eq!(n.len(), 1, "QP {i}: one NAK");
        assert_eq!(
            (opcode(&n[0]), syndrome(&n[0])),
            (Opcode::Acknowledge, 0x63)
        );
        assert_eq!(psn(&n[0]), psn(&f[0]));
        assert_eq!(s.b.qp_state(qb), Some(QpState::Error), "QP {i}");
        s.a.handle_packet(s.now, &n[0]);
        let wa = drain_cq(&mut s.a, s.cq_a);
        assert_eq!(
            wa.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(),
            [(1, WcStatus::RemoteOperationalError)],
            "QP {i}"
        );
        // The slot holds what landed before the bad piece, no more.
        let mut want = vec![0u8; SLOT as usize];
        want[..landed].copy_from_slice(&bytes(20, 0x51 + i as u8)[..landed]);
        assert_eq!(s.slot_b(i as u64, SLOT as usize), want, "QP {i}");
    }
    assert_eq!(
        (s.b.qp_state(q0), s.b.qp_state(q1)),
        (Some(QpState::Error), Some(QpState::Error))
    );
    assert_eq!(s.b.srq(s.srq).unwrap().posted(), 1, "receive 4 stays");
    assert_eq!(s.slot_b(2, SLOT as usize), vec![0u8; SLOT as usize]);
}

#[test]
fn resizing_an_srq_keeps_its_queued_lists() {
    let mut s = shared(1, srq_attr_sge(3, 4));
    let lists: Vec<Vec<Sge>> = (0..3).map(|k| pieces(&s, k, &[50, 60, 70])).collect();
    for (k, l) in lists.iter().enumerate() {
        s.b.post_srq_recv_sgl(s.srq, k as u64, l).unwrap();
    }
    // Take one so that the ring has moved, then grow, then shrink.
    let f = s.send(0, 100, 180, 1);
    s.deliver_b(&f);
    s.b.modify_srq(s.srq, &srq_attr_sge(7, 0), SrqAttrMask::MAX_WR)
        .unwrap();
    let more: Vec<Vec<Sge>> = (3..6).map(|k| pieces(&s, k, &[90, 90])).collect();
    for (k, l) in more.iter().enumerate() {
        s.b.post_srq_recv_sgl(s.srq, 3 + k as u64, l).unwrap();
    }
    s.b.modify_srq(s.srq, &srq_attr_sge(5, 0), SrqAttrMask::MAX_WR)
        .unwrap();
    for k in 1..6u8 {
        let f = s.send(0, 100 + u64::from(k), 180, k + 1);
        s.deliver_b(&f);
    }
    let wcs = s.wcs_b();
    assert_eq!(
        wcs.iter().map(|w| (w.wr_id, w.status)).collect::<Vec<_>>(),
        (0..6).map(|k| (k, WcStatus::Success)).collect::<Vec<_>>()
    );
    for (k, l) in lists.iter().chain(&more).enumerate() {
        assert_eq!(gathered(&s, l, 180), bytes(180, k as u8 + 1), "WQE {k}");
    }
}

#[test]
fn a_qp_in_error_flushes_the_list_receive_it_took() {
    let mut s = shared(2, srq_attr_sge(8, 4));
    let l0 = pieces(&s, 0, &[700, 700, 700]);
    let l1 = pieces(&s, 1, &[200, 200]);
    s.b.post_srq_recv_sgl(s.srq, 0, &l0).unwrap();
    s.b.post_srq_recv_sgl(s.srq, 1, &l1).unwrap();
    let f = s.send(0, 1, 1500, 1);
    s.deliver_b(&f[..1]);
    let q0 = s.qps[0].1;
    s.b.modify_qp(
        q0,
        &QpAttr {
            state: QpState::Error,
            ..QpAttr::default()
        },
        QpAttrMask::STATE,
    )
    .unwrap();
    assert_eq!(recvs(&s.wcs_b()), [(q0, 0, WcStatus::Flushed, 0)]);
    // QP 1 takes the next list.
    let f = s.send(1, 2, 350, 2);
    s.deliver_b(&f);
    let q1 = s.qps[1].1;
    assert_eq!(recvs(&s.wcs_b()), [(q1, 1, WcStatus::Success, 350)]);
    assert_eq!(gathered(&s, &l1, 350), bytes(350, 2));
}

#[test]
fn a_qp_on_an_srq_that_enters_error_reports_its_last_wqe_once() {
    let mut s = shared(2, srq_attr(8, 0));
    s.post(1, 0);
    let (q0, q1) = (s.qps[0].1, s.qps[1].1);
    assert!(s.events().is_empty());
    // Moved to error by the program.
    let err = QpAttr {
        state: QpState::Error,
        ..QpAttr::default()
    };
    s.b.modify_qp(q0, &err, QpAttrMask::STATE).unwrap();
    assert_eq!(s.events(), [AsyncEvent::QpLastWqeReached { qpn: q0 }]);
    assert!(s.events().is_empty(), "reported once");
    // Moved to error by the peer's fault: a SEND longer than the SRQ's
    // receive is a length error at B (class C, the QP to error).
    let f = s.send(1, 2, 9000, 7);
    s.deliver_b(&f);
    let w = s.wcs_b();
    assert_eq!(recvs(&w)[0], (q1, 1, WcStatus::LocalLengthError, 9000));
    assert_eq!(s.b.qp_state(q1), Some(QpState::Error));
    assert_eq!(s.events(), [AsyncEvent::QpLastWqeReached { qpn: q1 }]);
    // Reset, back to error: reported again. A QP without an SRQ never is.
    let reset = QpAttr {
        state: QpState::Reset,
        ..QpAttr::default()
    };
    s.b.modify_qp(q0, &reset, QpAttrMask::STATE).unwrap();
    s.b.modify_qp(q0, &err, QpAttrMask::STATE).unwrap();
    assert_eq!(s.events(), [AsyncEvent::QpLastWqeReached { qpn: q0 }]);
    let qa = s.qps[0].0;
    s.a.modify_qp(qa, &err, QpAttrMask::STATE).unwrap();
    assert_eq!(s.a.poll_event(), None);
    // A destroyed QP's pending report goes with it.
    s.b.modify_qp(q0, &reset, QpAttrMask::STATE).unwrap();
    s.b.modify_qp(q0, &err, QpAttrMask::STATE).unwrap();
    s.b.destroy_qp(q0).unwrap();
    assert!(s.events().is_empty());
}

/// A and B with one UC QP pair, B's on an SRQ of `max_sge` SGEs.
fn uc_on_srq(max_sge: u32) -> Shared {
    let mut s = shared(0, srq_attr_sge(8, max_sge));
    let ip = |x| IpAddr::V4(Ipv4Addr::new(10, 0, 0, x));
    let init = |cq, srq| QpInitAttr {
        send_cq: cq,
        recv_cq: cq,
        max_send_wr: 64,
        max_recv_wr: 64,
        sq_sig_all: true,
        srq,
    };
    let qa = s.a.create_uc_qp_in(0, init(s.cq_a, None)).unwrap();
    let qb = s.b.create_uc_qp_in(0, init(s.cq_b, Some(s.srq))).unwrap();
    let remote = |qpn, mac, x| RemoteQp {
        qpn,
        psn: 0,
        mac,
        ip: ip(x),
    };
    s.a.connect(qa, &remote(qb, MAC_B, 2), &opts()).unwrap();
    s.b.connect(qb, &remote(qa, MAC_A, 1), &opts()).unwrap();
    s.qps.push((qa, qb));
    s
}

#[test]
fn a_uc_qp_takes_its_receives_from_an_srq_and_a_dropped_message_completes_its_wqe_in_error() {
    let mut s = uc_on_srq(4);
    let qb = s.qps[0].1;
    assert_eq!(s.b.srq(s.srq).unwrap().qps(), 1);
    let l0 = pieces(&s, 0, &[1000, 800, 900]);
    s.b.post_srq_recv_sgl(s.srq, 10, &l0).unwrap();
    s.post(11, 1);
    s.post(12, 2);
    s.post(13, 3);
    // A 3-packet SEND into the list WQE.
    let f = s.send(0, 1, 2500, 0x31);
    assert_eq!(f.len(), 3);
    s.deliver_b(&f);
    assert_eq!(recvs(&s.wcs_b()), [(qb, 10, WcStatus::Success, 2500)]);
    assert_eq!(gathered(&s, &l0, 2500), bytes(2500, 0x31));
    // A message whose LAST is lost: the next FIRST drops it; the WQE it
    // took completes with a remote invalid request error (class E), the
    // next message takes the next WQE, the QP stays.
    let f = s.send(0, 2, 2000, 0x32);
    s.deliver_b(&f[..1]);
    let g = s.send(0, 3, 1500, 0x33);
    s.deliver_b(&g);
    assert_eq!(
        recvs(&s.wcs_b()),
        [
            (qb, 11, WcStatus::RemoteInvalidRequest, 0),
            (qb, 12, WcStatus::Success, 1500)
        ]
    );
    assert_eq!(s.slot_b(2, 1500), bytes(1500, 0x33));
    assert_eq!(s.b.qp_state(qb), Some(QpState::Rts));
    // Longer than its receive: the same, no byte past the buffer.
    let mut short = s.recv(14, 4);
    short.sge.length = 100;
    s.b.post_srq_recv(s.srq, short).unwrap();
    let f = s.send(0, 4, 50, 0x34);
    s.deliver_b(&f);
    let f = s.send(0, 5, 300, 0x35);
    s.deliver_b(&f);
    assert_eq!(
        recvs(&s.wcs_b()),
        [
            (qb, 13, WcStatus::Success, 50),
            (qb, 14, WcStatus::RemoteInvalidRequest, 0)
        ]
    );
    assert_eq!(s.slot_b(4, 200)[100..], vec![0u8; 100][..]);
    assert_eq!(s.b.qp_state(qb), Some(QpState::Rts));
    // An empty SRQ: the message is dropped (class D, no RNR on UC).
    let f = s.send(0, 6, 10, 0x36);
    s.deliver_b(&f);
    assert!(s.wcs_b().is_empty());
    assert!(drain(&mut s.b, s.now).is_empty(), "UC answers nothing");
    // A WRITE with immediate takes the SRQ's next receive.
    s.post(15, 5);
    s.a.mr_write(s.mr_a.lkey, IOVA_A, &bytes(64, 9)).unwrap();
    let mut wr = SendWr::new(
        7,
        SendOp::WriteWithImm,
        Sge {
            lkey: s.mr_a.lkey,
            addr: IOVA_A,
            length: 64,
        },
    );
    wr.remote_addr = IOVA_B + 6 * SLOT;
    wr.rkey = s.mr_b.rkey;
    wr.imm = 0x1234;
    s.a.post_send(s.qps[0].0, wr).unwrap();
    let f = drain(&mut s.a, s.now);
    s.deliver_b(&f);
    let w = s.wcs_b();
    assert_eq!(
        (w[0].wr_id, w[0].opcode, w[0].imm, w[0].byte_len),
        (15, WcOpcode::RecvRdmaWithImm, Some(0x1234), 64)
    );
    assert_eq!(s.slot_b(6, 64), bytes(64, 9));
    // In error: the last WQE event, as for RC.
    s.b.modify_qp(
        qb,
        &QpAttr {
            state: QpState::Error,
            ..QpAttr::default()
        },
        QpAttrMask::STATE,
    )
    .unwrap();
    assert_eq!(s.events(), [AsyncEvent::QpLastWqeReached { qpn: qb }]);
}
