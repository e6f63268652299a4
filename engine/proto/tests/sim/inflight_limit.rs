//! The endpoint's in-flight limit (`EndpointConfig::max_inflight_packets`):
//! many QPs with a message each never have more request packets
//! outstanding together than the limit, the QPs held back go in turn, and
//! streaming QPs (messages queued behind messages, whose last packets do
//! not all ask for an ACK) are never left waiting for an ACK nothing asked
//! for. Time never advances here: a QP stuck waiting would need its
//! retransmit timer, and the run would not finish.

use std::net::{IpAddr, Ipv4Addr};

use proto::endpoint::{ConnectOptions, Endpoint, EndpointConfig, RemoteQp};
use proto::rc::{Access, Mtu, QpInitAttr, SendOp, SendWr, Sge, WcStatus, WorkCompletion};
use proto::time::Instant;

const IOVA: u64 = 0x10_0000;
const REGION: usize = 1 << 20;

struct Rig {
    a: Endpoint,
    b: Endpoint,
    qps: Vec<u32>,
    cq: u32,
    lkey: u32,
    rkey: u32,
}

fn rig(n: u32, limit: u32) -> Rig {
    let ip = |x| IpAddr::V4(Ipv4Addr::new(10, 0, 0, x));
    let cfg = |mac: u8, x, limit| EndpointConfig {
        local_mac: [2, 0, 0, 0, 0, mac],
        local_ip: ip(x),
        max_inflight_packets: limit,
        seed: [u64::from(mac), 9],
        ..EndpointConfig::default()
    };
    let mut a = Endpoint::new(cfg(0xA, 1, limit));
    let mut b = Endpoint::new(cfg(0xB, 2, 0));
    let (ca, cb) = (a.create_cq(1 << 16), b.create_cq(16));
    let init = |cq| QpInitAttr {
        send_cq: cq,
        recv_cq: cq,
        max_send_wr: 16,
        max_recv_wr: 4,
        sq_sig_all: true,
        srq: None,
    };
    let opts = ConnectOptions {
        path_mtu: Mtu::Mtu1024,
        ..ConnectOptions::default()
    };
    let mut qps = Vec::new();
    for _ in 0..n {
        let qa = a.create_qp(init(ca)).unwrap();
        let qb = b.create_qp(init(cb)).unwrap();
        let remote = |qpn, ep: &Endpoint, mac: u8, x| RemoteQp {
            qpn,
            psn: ep.initial_psn(qpn).unwrap(),
            mac: [2, 0, 0, 0, 0, mac],
            ip: ip(x),
        };
        let (ra, rb) = (remote(qa, &a, 0xA, 1), remote(qb, &b, 0xB, 2));
        a.connect(
            qa,
            &rb,
            &ConnectOptions {
                sq_psn: ra.psn,
                ..opts
            },
        )
        .unwrap();
        b.connect(
            qb,
            &ra,
            &ConnectOptions {
                sq_psn: rb.psn,
                access: Access::REMOTE_WRITE,
                ..opts
            },
        )
        .unwrap();
        qps.push(qa);
    }
    let src = a
        .reg_mr(Box::new(vec![0x5A; REGION]), IOVA, Access::LOCAL_WRITE)
        .unwrap();
    let dst = b
        .reg_mr(Box::new(vec![0; REGION]), IOVA, Access::ALL)
        .unwrap();
    Rig {
        a,
        b,
        qps,
        cq: ca,
        lkey: src.lkey,
        rkey: dst.rkey,
    }
}

impl Rig {
    /// `per_qp` WRITEs of `len` bytes on every QP, posted up front.
    fn post(&mut self, per_qp: u64, len: u32) {
        for (k, &qpn) in self.qps.iter().enumerate() {
            for m in 0..per_qp {
                let off = (k as u64 * per_qp + m) * u64::from(len) % REGION as u64;
                let mut wr = SendWr::new(
                    m,
                    SendOp::Write,
                    Sge {
                        lkey: self.lkey,
                        addr: IOVA + off,
                        length: len,
                    },
                );
                wr.remote_addr = IOVA + off;
                wr.rkey = self.rkey;
                self.a.post_send(qpn, wr).unwrap();
            }
        }
    }

    /// Exchanges frames losslessly until every message completed; returns
    /// the most request packets A had outstanding at any time.
    fn run(&mut self, messages: usize) -> u64 {
        let now = Instant::ZERO;
        let (mut buf, mut done, mut peak) = (vec![0u8; 2048], 0, 0);
        let mut wcs = vec![WorkCompletion::default(); 256];
        for round in 0.. {
            assert!(round < 100_000, "{done} of {messages} messages completed");
            let mut to_b = Vec::new();
            while let Some(n) = self.a.poll_transmit(now, &mut buf) {
                peak = peak.max(self.a.inflight_packets());
                to_b.push(buf[..n].to_vec());
            }
            for f in &to_b {
                self.b.handle_packet(now, f);
            }
            let mut to_a = Vec::new();
            while let Some(n) = self.b.poll_transmit(now, &mut buf) {
                to_a.push(buf[..n].to_vec());
            }
            for f in &to_a {
                self.a.handle_packet(now, f);
            }
            loop {
                let n = self.a.poll_cq(self.cq, &mut wcs);
                if n == 0 {
                    break;
                }
                assert!(wcs[..n].iter().all(|w| w.status == WcStatus::Success));
                done += n;
            }
            if done == messages {
                break;
            }
        }
        assert_eq!(self.a.inflight_packets(), 0);
        peak
    }
}

#[test]
fn a_thousand_qps_with_a_message_each_stay_within_the_limit() {
    let (n, limit) = (1000, 64);
    let mut r = rig(n, limit);
    r.post(1, 8 * 1024); // 8 packets each at PMTU 1024
    let peak = r.run(n as usize);
    assert!(
        peak <= u64::from(limit),
        "{peak} outstanding, limit {limit}"
    );
    assert!(peak >= u64::from(limit) - 8, "the limit was used: {peak}");
    let c = r.a.counters();
    assert!(c.tx_inflight_waits > 0, "{c:?}");
    assert_eq!((c.retransmitted_packets, c.timeouts), (0, 0), "{c:?}");
    // The limit is the endpoint's, and so is the count: a QP's own
    // counters leave it at 0 (counting it there allocated the QP's other
    // counters on the transmit path, once for every QP that waited).
    for &qpn in &r.qps {
        assert_eq!(r.a.qp_counters(qpn).unwrap().tx_inflight_waits, 0);
    }
}

#[test]
fn streaming_qps_are_never_left_waiting_for_an_unrequested_ack() {
    // Several messages queued per QP: their last packets ask for an ACK
    // only now and then (the stream rule), so a QP that reaches the limit
    // mid-stream first sends one more message, which asks.
    let (n, per_qp, limit) = (100, 8, 32);
    let mut r = rig(n, limit);
    r.post(per_qp, 4 * 1024);
    let peak = r.run((n as u64 * per_qp) as usize);
    // At most one message beyond the limit per QP.
    assert!(peak <= u64::from(limit) + u64::from(n) * 4, "{peak}");
    let c = r.a.counters();
    assert!(c.tx_inflight_waits > 0, "{c:?}");
    assert_eq!((c.retransmitted_packets, c.timeouts), (0, 0), "{c:?}");
}

#[test]
fn no_limit_lets_every_qp_send_at_once() {
    let mut r = rig(100, 0);
    r.post(1, 8 * 1024);
    let peak = r.run(100);
    assert_eq!(peak, 800);
    assert_eq!(r.a.counters().tx_inflight_waits, 0);
}

#[test]
fn a_qp_that_leaves_while_waiting_does_not_hide_the_next_one() {
    // Three QPs of one 8-packet message each under a limit of 8: the
    // first sends, the other two wait. The second leaves (as a QP handed
    // to another queue does); once the first is ACKed, the third's
    // message fits, and the endpoint must say it has something to send.
    let now = Instant::ZERO;
    let mut r = rig(3, 8);
    r.post(1, 8 * 1024);
    let mut buf = vec![0u8; 2048];
    let mut to_b = Vec::new();
    while let Some(n) = r.a.poll_transmit(now, &mut buf) {
        to_b.push(buf[..n].to_vec());
    }
    assert_eq!(to_b.len(), 8, "the first QP's message alone");
    assert!(r.a.take_qp(r.qps[1]).is_some());
    for f in &to_b {
        r.b.handle_packet(now, f);
    }
    while let Some(n) = r.b.poll_transmit(now, &mut buf) {
        r.a.handle_packet(now, &buf[..n]);
    }
    assert_eq!(r.a.inflight_packets(), 0);
    assert!(
        r.a.has_pending_transmit(),
        "the third QP's message fits now"
    );
    let mut sent = 0;
    while r.a.poll_transmit(now, &mut buf).is_some() {
        sent += 1;
    }
    assert_eq!(sent, 8, "the third QP's message");
}
