//! Several queues as on a NIC with RSS: a 4-queue device whose traffic
//! arrives through a Linux bridge (the bridge picks the transmit queue of
//! its port by flow hash, and the veth delivers on the receive queue of the
//! same number, so flows spread over the queues as RSS spreads them), and a
//! 1-queue peer. Sixteen QPs, created on the server's four application
//! queues, do RDMA WRITE, READ and SEND; every byte is checked, every
//! completion arrives on the queue of the application that created its QP,
//! the QPs end up living on more than one queue, and packets that took a
//! detour through another queue are few (the first packets of each QP).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use engine::endpoint::{ConnectOptions, RemoteQp};
use engine::rc::{Access, Mtu, RecvWr, SendOp, SendWr, WcOpcode, WcStatus, WorkCompletion};
use engine::testbed::netns::{PairConfig, VethPair};
use engine::verbs::{Device, MemoryRegion, QpCaps, QueuePair};

const QUEUES: u32 = 4;
const QPS: usize = 16;
/// Bytes per QP per operation (16 packets at PMTU 4096).
const LEN: usize = 64 * 1024;

fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| {
            (i as u32)
                .wrapping_mul(2654435761)
                .rotate_left(seed as u32 % 31) as u8
                ^ seed
        })
        .collect()
}

/// Waits for the completion of `wr_id` on queue `q` of `dev`, returning
/// every other completion seen meanwhile to `others`.
fn wait(
    dev: &Device,
    q: u32,
    wr_id: u64,
    others: &mut Vec<WorkCompletion>,
    diag: &Device,
) -> WorkCompletion {
    if let Some(i) = others.iter().position(|w| w.wr_id == wr_id) {
        return others.remove(i);
    }
    let start = Instant::now();
    let mut wc = [WorkCompletion::default(); 16];
    loop {
        let n = dev.poll_cq_wait(q, &mut wc, Duration::from_millis(20));
        for w in &wc[..n] {
            others.push(*w);
        }
        if let Some(i) = others.iter().position(|w| w.wr_id == wr_id) {
            return others.remove(i);
        }
        if start.elapsed() > Duration::from_secs(20) {
            for (name, d) in [("waiting", dev), ("other", diag)] {
                for q in 0..d.queues() {
                    let s = d.stats(q).unwrap();
                    eprintln!(
                    "{name} queue {q}: rx {} tx {} handoff {} dropped {} received {} migrations {} forwarded {} transport {:?}",
                    s.socket.rx_packets,
                    s.socket.tx_packets,
                    s.rx_handoff,
                    s.rx_handoff_dropped,
                    s.handoff_received,
                    s.qp_migrations,
                    s.work_forwarded,
                    s.transport.iter().filter(|(_, v)| *v > 0).collect::<Vec<_>>()
                );
                }
            }
            panic!("no completion for wr {wr_id:#x} on queue {q} within 20 s");
        }
    }
}

fn connect(a: &QueuePair, b: &QueuePair, a_dev: &Device, b_dev: &Device, psn: u32) {
    let remote = |qp: &QueuePair, psn: u32, dev: &Device, peer: &Device| RemoteQp {
        qpn: qp.qpn(),
        psn,
        mac: peer.resolve_mac(dev.ip()).expect("neighbour"),
        ip: dev.ip(),
    };
    let opts = |sq_psn| ConnectOptions {
        path_mtu: Mtu::Mtu4096,
        sq_psn,
        access: Access::REMOTE_WRITE | Access::REMOTE_READ,
        ..Default::default()
    };
    a.connect(remote(b, psn + 0x100, b_dev, a_dev), opts(psn))
        .unwrap();
    b.connect(remote(a, psn, a_dev, b_dev), opts(psn + 0x100))
        .unwrap();
}

/// Server-side multi-queue counters, summed over queues (per queue for
/// packets received).
#[derive(Debug)]
#[allow(dead_code)] // read through Debug
struct Detours {
    received: Vec<u64>,
    handoff: u64,
    dropped: u64,
    migrations: u64,
}

fn detours(dev: &Device) -> Detours {
    std::thread::sleep(Duration::from_millis(30)); // a fresh stats snapshot
    let per_queue: Vec<_> = (0..dev.queues()).map(|q| dev.stats(q).unwrap()).collect();
    Detours {
        received: per_queue.iter().map(|s| s.socket.rx_packets).collect(),
        handoff: per_queue.iter().map(|s| s.rx_handoff).sum(),
        dropped: per_queue.iter().map(|s| s.rx_handoff_dropped).sum(),
        migrations: per_queue.iter().map(|s| s.qp_migrations).sum(),
    }
}

#[test]
#[ignore = "needs root"]
fn every_qp_works_whichever_queue_rss_delivers_it_to() {
    let _exclusive = crate::support::require_root();
    let pair = VethPair::create_bridged(
        &PairConfig {
            mtu: 4500,
            queues: QUEUES,
        },
        1,
    )
    .expect("creating the bridged veth pair");
    let mut cfg = crate::support::device_config(&pair.a);
    cfg.queues = QUEUES;
    let server = Device::open(cfg).expect("opening the 4-queue device");
    let client = Device::open(crate::support::device_config(&pair.b)).expect("opening the peer");

    let smem: Vec<MemoryRegion> = (0..QPS)
        .map(|i| {
            server
                .register_memory(i as u32 % QUEUES, 2 * LEN, Access::ALL)
                .unwrap()
        })
        .collect();
    let cmem = client
        .register_memory(0, 3 * LEN * QPS, Access::ALL)
        .unwrap();
    // Keys and QP numbers are the device's: never two alike.
    let keys: BTreeSet<u32> = smem.iter().map(|m| m.rkey).collect();
    assert_eq!(keys.len(), QPS);

    let mut sqps = Vec::new();
    let mut cqps = Vec::new();
    for i in 0..QPS {
        let s = server
            .create_qp(i as u32 % QUEUES, QpCaps::default())
            .unwrap();
        let c = client.create_qp(0, QpCaps::default()).unwrap();
        connect(&c, &s, &client, &server, 0x1000 * (i as u32 + 1));
        sqps.push(s);
        cqps.push(c);
    }
    let qpns: BTreeSet<u32> = sqps.iter().map(QueuePair::qpn).collect();
    assert_eq!(qpns.len(), QPS, "QP numbers unique across queues");

    // 1. WRITE: the client writes pattern A into each server region.
    for (i, c) in cqps.iter().enumerate() {
        let data = pattern(i as u8, LEN);
        assert!(cmem.write(i * LEN, &data));
        let mut wr = SendWr::new(
            0x100 + i as u64,
            SendOp::Write,
            cmem.sge(i * LEN, LEN as u32),
        );
        wr.remote_addr = smem[i].addr();
        wr.rkey = smem[i].rkey;
        wr.signaled = true;
        c.post_send(wr).unwrap();
    }
    let mut cwcs = Vec::new();
    for i in 0..QPS {
        let wc = wait(&client, 0, 0x100 + i as u64, &mut cwcs, &server);
        assert_eq!(wc.status, WcStatus::Success, "WRITE on QP {i}: {wc:?}");
    }
    for (i, m) in smem.iter().enumerate() {
        let mut got = vec![0u8; LEN];
        assert!(m.read(0, &mut got));
        assert!(got == pattern(i as u8, LEN), "WRITE bytes of QP {i}");
    }
    // Every QP has received its first packets: it lives where they arrive.
    let after_first = detours(&server);

    // 2. READ: the client reads pattern B back from each server region.
    for (i, m) in smem.iter().enumerate() {
        assert!(m.write(LEN, &pattern(100 + i as u8, LEN)));
    }
    let base = QPS * LEN;
    for (i, c) in cqps.iter().enumerate() {
        let mut wr = SendWr::new(
            0x200 + i as u64,
            SendOp::Read,
            cmem.sge(base + i * LEN, LEN as u32),
        );
        wr.remote_addr = smem[i].addr() + LEN as u64;
        wr.rkey = smem[i].rkey;
        wr.signaled = true;
        c.post_send(wr).unwrap();
    }
    for i in 0..QPS {
        let wc = wait(&client, 0, 0x200 + i as u64, &mut cwcs, &server);
        assert_eq!(wc.status, WcStatus::Success, "READ on QP {i}: {wc:?}");
        let mut got = vec![0u8; LEN];
        assert!(cmem.read(base + i * LEN, &mut got));
        assert!(got == pattern(100 + i as u8, LEN), "READ bytes of QP {i}");
    }

    // 3. SEND from the server's QPs (posted on their application's queue,
    //    wherever the QP lives now) into receives the client posted.
    let rbase = 2 * QPS * LEN;
    for (i, c) in cqps.iter().enumerate() {
        c.post_recv(RecvWr {
            wr_id: 0x300 + i as u64,
            sge: cmem.sge(rbase + i * LEN, LEN as u32),
        })
        .unwrap();
    }
    for (i, s) in sqps.iter().enumerate() {
        assert!(smem[i].write(0, &pattern(200 + i as u8, LEN)));
        let mut wr = SendWr::new(0x400 + i as u64, SendOp::Send, smem[i].sge(0, LEN as u32));
        wr.signaled = true;
        s.post_send(wr).unwrap();
    }
    let mut swcs = Vec::new();
    for (i, s) in sqps.iter().enumerate() {
        // The completion comes back to the queue of the QP's application.
        let wc = wait(&server, s.queue(), 0x400 + i as u64, &mut swcs, &client);
        assert_eq!(wc.status, WcStatus::Success, "SEND on QP {i}: {wc:?}");
        assert_eq!(wc.qpn, s.qpn());
    }
    for i in 0..QPS {
        let wc = wait(&client, 0, 0x300 + i as u64, &mut cwcs, &server);
        assert_eq!(wc.status, WcStatus::Success, "RECV on QP {i}: {wc:?}");
        assert_eq!(wc.opcode, WcOpcode::Recv);
        assert_eq!(wc.byte_len, LEN as u32);
        let mut got = vec![0u8; LEN];
        assert!(cmem.read(rbase + i * LEN, &mut got));
        assert!(got == pattern(200 + i as u8, LEN), "SEND bytes of QP {i}");
    }

    // Where the QPs live, and how many packets took a detour.
    let homes: BTreeSet<u32> = sqps.iter().filter_map(QueuePair::home_queue).collect();
    let end = detours(&server);
    eprintln!("homes {homes:?}; after the first WRITEs {after_first:?}; at the end {end:?}");
    assert!(homes.len() > 1, "all QPs on one queue: {homes:?}");
    assert!(
        end.received.iter().filter(|&&n| n > 0).count() > 1,
        "packets on one queue only: {end:?}"
    );
    // The QPs whose first packet arrived elsewhere than on their
    // application's queue moved (at most one move per QP)...
    assert!(
        end.migrations > 0 && end.migrations <= QPS as u64,
        "{end:?}"
    );
    // ... and once they had, no packet took a detour: the READs and the
    // SENDs' acknowledgements all arrived where their QP lives.
    assert_eq!(
        end.handoff, after_first.handoff,
        "{after_first:?} -> {end:?}"
    );
    assert_eq!(end.dropped, 0);
    let unknown: u64 = (0..QUEUES)
        .map(|q| server.stats(q).unwrap().transport.dropped_unknown_qp)
        .sum();
    assert_eq!(unknown, 0);
    // Still usable after the moves: destroy frees the numbers.
    for s in sqps {
        s.destroy().unwrap();
    }
    drop(server);
    drop(client);
    drop(pair);
}
