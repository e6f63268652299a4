//! Unreliable Datagram end to end: UD QPs of two devices on a veth pair
//! (each on a two-queue device, so datagrams RSS puts on the other queue
//! are handed over), many to one, and datagrams a device sends to its own
//! address. Every received message checked byte for byte, its GRH area
//! (20 zero bytes and the sender's IPv4 header) and its completion's
//! source QP and address. Needs root.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use engine::rc::{Access, RecvWr, RemoteAddress, WcOpcode, WcStatus, WorkCompletion};
use engine::testbed::netns::{PairConfig, VethPair};
use engine::ud::{AhAttr, UdSendWr, GRH_LEN};
use engine::verbs::{Device, QpCaps, UdQueuePair};

use crate::support::{device_config, require_root};

const QKEY: u32 = 0x1111_2222;
const REGION: usize = 4 << 20;
const SLOT: usize = 2048;
const MSGS: u32 = 200;

fn message(src_qp: u32, seq: u32) -> Vec<u8> {
    let len = 16 + (seq as usize * 37) % 1000;
    let mut m = Vec::with_capacity(len);
    m.extend_from_slice(&src_qp.to_be_bytes());
    m.extend_from_slice(&seq.to_be_bytes());
    m.extend((8..len).map(|i| (i as u32 ^ seq ^ src_qp) as u8));
    m
}

/// Polls queues `qs` of `dev` until `n` completions came or 10 s passed.
fn collect(dev: &Device, qs: &[u32], n: usize) -> Vec<WorkCompletion> {
    let mut out = Vec::new();
    let mut buf = vec![WorkCompletion::default(); 64];
    let start = Instant::now();
    while out.len() < n && start.elapsed() < Duration::from_secs(10) {
        for &q in qs {
            let k = dev.poll_cq_wait(q, &mut buf, Duration::from_millis(2));
            out.extend_from_slice(&buf[..k]);
        }
    }
    out
}

#[test]
#[ignore = "needs root"]
fn ud_datagrams_between_devices_and_to_the_own_address() {
    let _exclusive = require_root();
    let pair = VethPair::create(&PairConfig {
        mtu: 4500,
        queues: 2,
    })
    .expect("creating the veth pair");
    let open = |side| {
        let mut cfg = device_config(side);
        cfg.queues = 2;
        Device::open(cfg).expect("opening the 2-queue device")
    };
    let (a, b) = (open(&pair.a), open(&pair.b));
    // The receiver: a UD QP on each queue of A.
    let rx: Vec<UdQueuePair> = (0..2)
        .map(|q| {
            a.create_ud_qp(
                q,
                0,
                QpCaps {
                    max_send_wr: 64,
                    max_recv_wr: 512,
                },
            )
            .unwrap()
        })
        .collect();
    let rmem = a.register_memory(0, REGION, Access::LOCAL_WRITE).unwrap();
    for (k, qp) in rx.iter().enumerate() {
        qp.ready(QKEY, 0).unwrap();
        for i in 0..500usize {
            let slot = k * 500 + i;
            let wr = RecvWr {
                wr_id: slot as u64,
                sge: rmem.sge(slot * SLOT, SLOT as u32),
            };
            qp.post_recv_within_retry(wr);
        }
    }
    // Senders: two UD QPs on B (one per queue) and one on A itself,
    // which sends to its own address.
    let to_a = |dev: &Device| {
        let mac = dev.resolve_mac(a.ip()).unwrap();
        dev.create_ah(
            0,
            AhAttr {
                remote: RemoteAddress {
                    mac,
                    ip: a.ip(),
                    ..RemoteAddress::default()
                },
                ..AhAttr::default()
            },
        )
        .unwrap()
    };
    let (ah_b, ah_self) = (to_a(&b), to_a(&a));
    let smem_b = b.register_memory(0, REGION, Access::LOCAL_WRITE).unwrap();
    let smem_a = a.register_memory(1, REGION, Access::LOCAL_WRITE).unwrap();
    let senders = [
        (&b, 0u32, &smem_b, ah_b),
        (&b, 1, &smem_b, ah_b),
        (&a, 1, &smem_a, ah_self),
    ];
    let mut src_qps = Vec::new();
    for (n, &(dev, q, mem, ah)) in senders.iter().enumerate() {
        let qp = dev
            .create_ud_qp(
                q,
                0,
                QpCaps {
                    max_send_wr: 256,
                    max_recv_wr: 1,
                },
            )
            .unwrap();
        qp.ready(0, 0x10 * n as u32).unwrap();
        for seq in 0..MSGS {
            let m = message(qp.qpn(), seq);
            let off = (n * MSGS as usize + seq as usize) * 1024;
            assert!(mem.write(off, &m));
            let wr = UdSendWr::new(
                u64::from(seq),
                mem.sge(off, m.len() as u32),
                ah.id(),
                rx[seq as usize % 2].qpn(),
                QKEY,
            );
            while qp.post_send(wr).is_err() {
                std::thread::yield_now();
            }
        }
        src_qps.push((qp, dev.ip()));
    }
    // Every send completes, on its sender's queue; on a veth nothing is
    // lost, so every message arrives, once.
    let sends_b = collect(&b, &[0, 1], 2 * MSGS as usize);
    assert_eq!(sends_b.len(), 2 * MSGS as usize);
    let at_a = collect(&a, &[0, 1], 4 * MSGS as usize);
    let (recvs, sends_a): (Vec<WorkCompletion>, Vec<WorkCompletion>) =
        at_a.into_iter().partition(|w| w.opcode == WcOpcode::Recv);
    assert_eq!(sends_a.len(), MSGS as usize);
    for wc in sends_b.iter().chain(&sends_a) {
        assert_eq!(
            (wc.status, wc.opcode),
            (WcStatus::Success, WcOpcode::Send),
            "{wc:?}"
        );
    }
    assert_eq!(recvs.len(), 3 * MSGS as usize);
    let mut seen = HashSet::new();
    for wc in &recvs {
        assert_eq!(
            (wc.status, wc.opcode),
            (WcStatus::Success, WcOpcode::Recv),
            "{wc:?}"
        );
        let src = wc.ud.expect("the sender of a UD receive");
        let mut buf = vec![0u8; wc.byte_len as usize];
        assert!(rmem.read(wc.wr_id as usize * SLOT, &mut buf));
        let (grh, data) = buf.split_at(GRH_LEN);
        let qpn = u32::from_be_bytes(data[..4].try_into().unwrap());
        let seq = u32::from_be_bytes(data[4..8].try_into().unwrap());
        assert_eq!(data, &message(qpn, seq)[..]);
        assert_eq!(src.src_qp, qpn);
        assert!(seen.insert((qpn, seq)), "({qpn:#x}, {seq}) twice");
        assert_eq!(wc.qpn, rx[seq as usize % 2].qpn());
        let sender_ip = src_qps.iter().find(|(q, _)| q.qpn() == qpn).unwrap().1;
        assert_eq!(src.src_ip(), sender_ip);
        assert_eq!(&grh[..20], &[0u8; 20]);
        assert_eq!(
            std::net::IpAddr::from([grh[32], grh[33], grh[34], grh[35]]),
            sender_ip
        );
    }
    for qp in rx {
        qp.destroy().unwrap();
    }
    for (qp, _) in src_qps {
        qp.destroy().unwrap();
    }
    let (sa, sb) = (a.close(), b.close());
    eprintln!(
        "A: handed over {} (dropped {}), looped back {}",
        sa.rx_handoff, sa.rx_handoff_dropped, sa.loopback_frames
    );
    assert_eq!(
        sa.transport.dropped_no_receive + sa.transport.dropped_bad_qkey,
        0
    );
    assert_eq!(sa.transport.rcvd_pkts, 3 * u64::from(MSGS));
    assert_eq!(sa.transport.sent_pkts, u64::from(MSGS));
    assert!(
        sa.loopback_frames >= u64::from(MSGS),
        "sent to its own address"
    );
    assert_eq!(sb.transport.sent_pkts, 2 * u64::from(MSGS));
}

trait PostRecvRetry {
    fn post_recv_within_retry(&self, wr: RecvWr);
}

impl PostRecvRetry for UdQueuePair {
    /// Posts, yielding while the queue's work queue is full.
    fn post_recv_within_retry(&self, wr: RecvWr) {
        let start = Instant::now();
        while self.post_recv(wr).is_err() {
            assert!(start.elapsed() < Duration::from_secs(5), "work queue stuck");
            std::thread::yield_now();
        }
    }
}
