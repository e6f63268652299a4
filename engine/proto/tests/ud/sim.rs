//! UD in the simulator: three senders with two UD QPs each, to two UD QPs
//! of one receiver (many to one), over links that lose, reorder,
//! duplicate and corrupt frames. UD recovers nothing: messages are lost,
//! and a frame the network duplicates arrives twice (UD checks no PSN,
//! as rxe); but no message is corrupted, no work request completes twice,
//! and every received message matches what its sender sent, byte for
//! byte, GRH area included.

use core::net::{IpAddr, Ipv4Addr};
use core::time::Duration;
use std::collections::{HashMap, HashSet};

use proto::endpoint::{Endpoint, EndpointConfig};
use proto::rc::{Access, QpInitAttr, RecvWr, RemoteAddress, Sge, WcOpcode, WcStatus};
use proto::sim::{Impairments, LinkConfig, Simulator};
use proto::time::Instant;
use proto::ud::{AhAttr, UdSendWr, GRH_LEN};

use crate::support::up;

const QKEY: u32 = 0x0BAD_F00D;
const IOVA: u64 = 0x1000_0000;
const MR_LEN: usize = 1 << 21;
const RECV_LEN: u32 = 1024 + GRH_LEN as u32;
const PER_QP: u32 = 60;

fn ip(x: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(10, 1, 0, x))
}

fn mac(x: u8) -> [u8; 6] {
    [2, 0, 0, 0, 1, x]
}

fn lossy() -> LinkConfig {
    LinkConfig {
        latency: Duration::from_micros(5),
        rate_bps: 10_000_000_000,
        impair: Impairments {
            loss: 0.05,
            reorder: 0.1,
            reorder_delay: Duration::from_micros(30),
            duplicate: 0.05,
            corrupt: 0.03,
        },
    }
}

/// The length of message `seq` of sender QP `qpn`: 8 to 1024 bytes.
fn msg_len(qpn: u32, seq: u32) -> usize {
    8 + (qpn as usize * 7 + seq as usize * 131) % 1017
}

/// Message `seq` of sender QP `qpn`: its number and sequence, then a
/// pattern of both.
fn message(qpn: u32, seq: u32) -> Vec<u8> {
    let mut m = Vec::with_capacity(msg_len(qpn, seq));
    m.extend_from_slice(&qpn.to_be_bytes());
    m.extend_from_slice(&seq.to_be_bytes());
    m.extend(
        (8..msg_len(qpn, seq))
            .map(|i| (i as u32 ^ qpn.rotate_left(5) ^ seq.wrapping_mul(0x9E37)) as u8),
    );
    m
}

struct Sender {
    node: usize,
    qps: [u32; 2],
    cq: u32,
}

fn new_node(sim: &mut Simulator, x: u8, seed: u64) -> (usize, u32, u32) {
    let mut ep = Endpoint::new(EndpointConfig {
        local_mac: mac(x),
        local_ip: ip(x),
        seed: [seed, u64::from(x)],
        ..EndpointConfig::default()
    });
    let lkey = ep
        .reg_mr(Box::new(vec![0u8; MR_LEN]), IOVA, Access::LOCAL_WRITE)
        .unwrap()
        .lkey;
    let cq = ep.create_cq(8192);
    (sim.add_node(ep, lossy()), cq, lkey)
}

fn run(seed: u64) {
    let mut sim = Simulator::new(seed);
    // The receiver: node 0, two UD QPs, receives posted for every
    // message and its possible duplicate.
    let (rx, rx_cq, rx_lkey) = new_node(&mut sim, 0x10, seed);
    let init = |cq, depth| QpInitAttr {
        send_cq: cq,
        recv_cq: cq,
        max_send_wr: depth,
        max_recv_wr: depth,
        sq_sig_all: true,
        srq: None,
    };
    let mut rx_qps = [0u32; 2];
    for q in &mut rx_qps {
        *q = sim.endpoint(rx).create_ud_qp(0, init(rx_cq, 1024)).unwrap();
        up(sim.endpoint(rx), *q, QKEY, 0);
    }
    let mut slots = 0u64;
    let mut post_recvs = |sim: &mut Simulator, qpn: u32, n: u32| {
        for _ in 0..n {
            let wr = RecvWr {
                wr_id: slots,
                sge: Sge {
                    lkey: rx_lkey,
                    addr: IOVA + slots * u64::from(RECV_LEN),
                    length: RECV_LEN,
                },
            };
            sim.endpoint(rx).post_ud_recv(qpn, wr).unwrap();
            slots += 1;
        }
    };
    // Three senders, each QP sends PER_QP messages to each receiver QP
    // in turn.
    let mut senders = Vec::new();
    for x in 1..=3u8 {
        let (n, cq, lkey) = new_node(&mut sim, x, seed);
        let ah = sim
            .endpoint(n)
            .create_ah(
                0,
                &AhAttr {
                    remote: RemoteAddress {
                        mac: mac(0x10),
                        ip: ip(0x10),
                        ..RemoteAddress::default()
                    },
                    ..AhAttr::default()
                },
            )
            .unwrap();
        let mut qps = [0u32; 2];
        for q in &mut qps {
            *q = sim.endpoint(n).create_ud_qp(0, init(cq, 256)).unwrap();
            up(sim.endpoint(n), *q, QKEY, u32::from(x) << 12);
        }
        for (k, &q) in qps.iter().enumerate() {
            for seq in 0..PER_QP {
                let m = message(q, seq);
                let off = ((k as u64) * u64::from(PER_QP) + u64::from(seq)) * 1024;
                sim.endpoint(n).mr_write(lkey, IOVA + off, &m).unwrap();
                let wr = UdSendWr::new(
                    u64::from(seq),
                    Sge {
                        lkey,
                        addr: IOVA + off,
                        length: m.len() as u32,
                    },
                    ah,
                    rx_qps[seq as usize % 2],
                    QKEY,
                );
                sim.endpoint(n).post_ud_send(q, wr).unwrap();
            }
        }
        senders.push(Sender { node: n, qps, cq });
    }
    let total = 3 * 2 * PER_QP;
    for &q in &rx_qps {
        post_recvs(&mut sim, q, total);
    }
    // Run until the network is quiet.
    let deadline = Instant::ZERO + Duration::from_millis(50);
    sim.run_until(deadline, |_| false);

    // Senders: every send completed once, successfully.
    for s in &senders {
        let mut seen: HashMap<u32, HashSet<u64>> = HashMap::new();
        while let Some(wc) = sim.endpoint(s.node).poll_completion(s.cq) {
            assert_eq!((wc.status, wc.opcode), (WcStatus::Success, WcOpcode::Send));
            assert!(
                seen.entry(wc.qpn).or_default().insert(wc.wr_id),
                "{wc:?} twice"
            );
        }
        for q in s.qps {
            assert_eq!(seen[&q].len(), PER_QP as usize, "QP {q:#x}");
        }
    }
    // Receiver: each completion a distinct receive, its bytes exactly
    // one message.
    let mut wr_ids = HashSet::new();
    let mut got: HashMap<(u32, u32), u32> = HashMap::new();
    let sender_ip: HashMap<u32, IpAddr> = senders
        .iter()
        .flat_map(|s| s.qps.iter().map(move |&q| (q, ip(s.node as u8))))
        .collect();
    while let Some(wc) = sim.endpoint(rx).poll_completion(rx_cq) {
        assert_eq!(
            (wc.status, wc.opcode),
            (WcStatus::Success, WcOpcode::Recv),
            "{wc:?}"
        );
        assert!(
            wr_ids.insert(wc.wr_id),
            "receive {} completed twice",
            wc.wr_id
        );
        let src = wc.ud.unwrap();
        let mut buf = vec![0u8; wc.byte_len as usize];
        let addr = IOVA + wc.wr_id * u64::from(RECV_LEN);
        sim.endpoint(rx).mr_read(rx_lkey, addr, &mut buf).unwrap();
        let (grh, data) = buf.split_at(GRH_LEN);
        let qpn = u32::from_be_bytes(data[..4].try_into().unwrap());
        let seq = u32::from_be_bytes(data[4..8].try_into().unwrap());
        assert_eq!(src.src_qp, qpn);
        assert_eq!(data, &message(qpn, seq)[..], "message {seq} of QP {qpn:#x}");
        // The GRH area: 20 zero bytes, then the sender's IPv4 header.
        assert_eq!(&grh[..20], &[0u8; 20]);
        assert_eq!(grh[20] >> 4, 4);
        let src_ip = IpAddr::V4(Ipv4Addr::new(grh[32], grh[33], grh[34], grh[35]));
        assert_eq!(src_ip, sender_ip[&qpn]);
        assert_eq!(src.src_ip(), src_ip);
        // It came to the receiver QP it was sent to.
        assert_eq!(wc.qpn, rx_qps[seq as usize % 2]);
        *got.entry((qpn, seq)).or_default() += 1;
    }
    let c = sim.endpoint(rx).counters();
    let delivered = got.len() as u32;
    let copies: u32 = got.values().sum();
    let links: Vec<_> = senders
        .iter()
        .map(|s| sim.node(s.node).link.stats)
        .collect();
    let impaired: u64 = links.iter().map(|l| l.dropped + l.corrupted).sum();
    let corrupted: u64 = links.iter().map(|l| l.corrupted).sum();
    // Losses and corruptions happened, and only they kept messages away.
    assert!(impaired > 0, "the links impaired nothing");
    assert!(
        delivered < total && u64::from(delivered) + impaired >= u64::from(total),
        "{delivered} of {total} delivered, {impaired} frames impaired"
    );
    assert!(copies >= delivered);
    // Every corrupted frame was refused before any QP saw it (its ICRC,
    // or a header the parser rejects); no Q_Key or receive was missing.
    assert_eq!((c.dropped_bad_qkey, c.dropped_no_receive), (0, 0), "{c:?}");
    assert!(corrupted == 0 || c.dropped_bad_icrc + c.dropped_malformed > 0);
}

#[test]
fn many_to_one_under_loss_reordering_duplication_and_corruption() {
    for seed in [1, 2, 3] {
        run(seed);
    }
}
