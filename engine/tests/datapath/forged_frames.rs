//! A transfer between two engines while a third host on the same bridge
//! sends them forged RoCE frames (`docs/security.md`): WRITEs
//! from its own and from a spoofed address, WRITEs to guessed QP numbers,
//! WRITEs with the peer's address but another P_Key, CNPs and ACKs aimed
//! at the requester. Every byte of the transfer arrives, nothing lands
//! where the forged WRITEs aimed, and every forged frame is counted.

use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use engine::endpoint::ConnectOptions;
use engine::io::{XskConfig, XskSocket};
use engine::rc::{Access, SendOp, SendWr, WcStatus, WorkCompletion};
use engine::testbed::netns::{PairConfig, Side, VethPair};
use engine::verbs::{Device, DeviceConfig, QpCaps};
use engine::wire::{
    cnp_headers, emit_frame, AethRepr, BthRepr, Ecn, EthRepr, IpRepr, Opcode, RethRepr,
    RoceHeaders, UdpRepr, CNP_RESERVED, DEFAULT_PKEY,
};

use crate::support::{connect_qps, require_root};

/// Forged frames of each kind.
const EACH: usize = 100;
/// Bytes of the transfer: 64 WRITEs of 4 KiB.
const CHUNK: usize = 4096;
const CHUNKS: usize = 64;
/// Where in B's region the forged WRITEs aim (past the transfer).
const AIM: u64 = 512 * 1024;

/// A frame from `from` (its MAC) to `to`, with IP source `src`.
fn forged(from: &Side, to: &Side, src: Ipv4Addr, bth: BthRepr) -> RoceHeaders {
    RoceHeaders {
        eth: EthRepr {
            dst: to.mac,
            src: from.mac,
            vlan: None,
        },
        ip: IpRepr::V4 {
            src,
            dst: to.ipv4,
            dscp: 26,
            ecn: Ecn::Ect0,
            ttl: 64,
            ident: 0,
            dont_fragment: true,
        },
        udp: UdpRepr {
            src_port: 0xC0DE,
            dst_port: 4791,
        },
        bth,
        reth: None,
        aeth: None,
        atomic_eth: None,
        atomic_ack_eth: None,
        immdt: None,
        ieth: None,
        deth: None,
    }
}

fn bth(opcode: Opcode, dest_qp: u32, psn: u32, pkey: u16) -> BthRepr {
    BthRepr {
        opcode,
        solicited: false,
        mig_req: false,
        pad_count: 0,
        pkey,
        fecn: false,
        becn: opcode == Opcode::Cnp,
        dest_qp,
        ack_req: true,
        psn,
    }
}

fn emit(h: &RoceHeaders, payload: &[u8]) -> Vec<u8> {
    let mut buf = vec![0u8; 2048];
    let n = emit_frame(h, payload, &mut buf).unwrap();
    buf.truncate(n);
    buf
}

/// A WRITE ONLY of 64 bytes of 0xEE at `va` with `rkey`.
fn write_only(mut h: RoceHeaders, va: u64, rkey: u32) -> Vec<u8> {
    h.reth = Some(RethRepr {
        va,
        rkey,
        dma_len: 64,
    });
    emit(&h, &[0xEE; 64])
}

/// What the third host sends, and what each side must count.
struct Attack {
    frames: Vec<Vec<u8>>,
    /// At B: `dropped_wrong_peer`, `dropped_unknown_qp`, `dropped_bad_pkey`.
    at_b: (u64, u64, u64),
    /// At A: `dropped_wrong_peer`.
    at_a: u64,
}

/// The forged frames: the attacker knows both QP numbers, B's region
/// address and R_Key (the worst case: a peer that saw the exchange).
fn attack(c: &Side, a: &Side, b: &Side, qa: u32, qb: u32, va: u64, rkey: u32) -> Attack {
    let mut frames = Vec::new();
    let mut unknown = 0;
    for i in 0..EACH as u32 {
        let psn = (i * 7919) & 0xFF_FFFF;
        // From the attacker's own address, and from a spoofed one.
        for src in [c.ipv4, Ipv4Addr::new(10, 47, 0, 77)] {
            let h = forged(c, b, src, bth(Opcode::WriteOnly, qb, psn, DEFAULT_PKEY));
            frames.push(write_only(h, va + AIM, rkey));
        }
        // Guessed QP numbers (the ones B has not).
        for qpn in [0x11 + i, 0x1000 + i * 0x101] {
            if qpn == qb {
                continue;
            }
            unknown += 1;
            let h = forged(c, b, a.ipv4, bth(Opcode::WriteOnly, qpn, psn, DEFAULT_PKEY));
            frames.push(write_only(h, va + AIM, rkey));
        }
        // The peer's address, another partition.
        let h = forged(c, b, a.ipv4, bth(Opcode::WriteOnly, qb, psn, 0x1234));
        frames.push(write_only(h, va + AIM, rkey));
        // At the requester: a CNP (it would cut A's rate) and an ACK.
        let h = forged(c, a, c.ipv4, bth(Opcode::Cnp, qa, 0, DEFAULT_PKEY));
        frames.push(emit(
            &cnp_headers(h.eth, h.ip, h.udp.src_port, qa, DEFAULT_PKEY),
            &CNP_RESERVED,
        ));
        let mut h = forged(
            c,
            a,
            c.ipv4,
            bth(Opcode::Acknowledge, qa, psn, DEFAULT_PKEY),
        );
        h.aeth = Some(AethRepr {
            syndrome: 0x62, // NAK remote access error: would fail A's QP
            msn: 0,
        });
        frames.push(emit(&h, &[]));
    }
    let n = EACH as u64;
    Attack {
        frames,
        at_b: (2 * n, unknown, n),
        at_a: 2 * n,
    }
}

fn cfg(side: &Side) -> DeviceConfig {
    let mut c = DeviceConfig::new(&side.ifname);
    c.netns = Some(side.netns.clone());
    c.umem.frame_count = 1024;
    c.ring_size = 512;
    c
}

#[test]
#[ignore = "needs root"]
fn a_transfer_survives_forged_frames_from_a_third_host_and_counts_them() {
    let _exclusive = require_root();
    let mut pair = VethPair::create_bridged(
        &PairConfig {
            mtu: 1500,
            queues: 1,
        },
        1,
    )
    .unwrap();
    let c = pair
        .add_host(Ipv4Addr::new(10, 47, 0, 3), 1500)
        .expect("bridged")
        .unwrap();
    let dev_a = Device::open(cfg(&pair.a)).unwrap();
    let dev_b = Device::open(cfg(&pair.b)).unwrap();
    let qa = dev_a.create_qp(0, QpCaps::default()).unwrap();
    let qb = dev_b.create_qp(0, QpCaps::default()).unwrap();
    let la = dev_a
        .register_memory(0, CHUNK * CHUNKS, Access::ALL)
        .unwrap();
    let rb = dev_b.register_memory(0, 1 << 20, Access::ALL).unwrap();
    let opts = ConnectOptions {
        access: Access::REMOTE_WRITE,
        ..Default::default()
    };
    connect_qps((&dev_a, &qa, 100), (&dev_b, &qb, 200), opts);
    let data: Vec<u8> = (0..CHUNK * CHUNKS)
        .map(|i| (i * 31 + i / 4096) as u8)
        .collect();
    assert!(la.write(0, &data));
    let write = |k: usize| {
        qa.post_send(SendWr {
            remote_addr: rb.addr() + (k * CHUNK) as u64,
            rkey: rb.rkey,
            ..SendWr::new(k as u64, SendOp::Write, la.sge(k * CHUNK, CHUNK as u32))
        })
        .unwrap();
        let mut wcs = [WorkCompletion::default(); 1];
        let deadline = Instant::now() + Duration::from_secs(10);
        while dev_a.poll_cq(0, &mut wcs) == 0 {
            assert!(Instant::now() < deadline, "WRITE {k} did not complete");
            std::thread::sleep(Duration::from_micros(200));
        }
        assert_eq!((wcs[0].wr_id, wcs[0].status), (k as u64, WcStatus::Success));
    };
    // The first WRITE also teaches the bridge both MACs, so the forged
    // frames go only to the host they name.
    write(0);

    let att = attack(&c, &pair.a, &pair.b, qa.qpn(), qb.qpn(), rb.addr(), rb.rkey);
    let (frames, at_b, at_a) = (att.frames, att.at_b, att.at_a);
    let host = c.clone();
    let attacker = std::thread::spawn(move || {
        host.enter().unwrap();
        let mut s = XskSocket::open(&XskConfig::new(&host.ifname, 0)).unwrap();
        // Batches of 16 with a pause: the receivers' rings never overflow,
        // so every frame reaches a counter.
        for batch in frames.chunks(16) {
            for f in batch {
                while !s.send(f) {
                    s.flush().unwrap();
                    s.complete();
                }
            }
            s.flush().unwrap();
            s.complete();
            std::thread::sleep(Duration::from_millis(1));
        }
        while s.tx_in_flight() > 0 {
            s.flush().unwrap();
            s.complete();
        }
    });
    for k in 1..CHUNKS {
        write(k);
    }
    attacker.join().unwrap();

    let mut got = vec![0u8; CHUNK * CHUNKS];
    assert!(rb.read(0, &mut got));
    assert!(got == data, "the transfer's bytes differ");
    let mut aimed = vec![0u8; 64];
    assert!(rb.read(AIM as usize, &mut aimed));
    assert_eq!(aimed, vec![0u8; 64], "a forged WRITE landed");

    let deadline = Instant::now() + Duration::from_secs(5);
    let (tb, ta) = loop {
        let tb = dev_b.stats(0).unwrap().transport;
        let ta = dev_a.stats(0).unwrap().transport;
        let seen_b = (
            tb.dropped_wrong_peer,
            tb.dropped_unknown_qp,
            tb.dropped_bad_pkey,
        );
        if seen_b == at_b && ta.dropped_wrong_peer == at_a {
            break (tb, ta);
        }
        assert!(
            Instant::now() < deadline,
            "forged frames not all counted: B {seen_b:?} of {at_b:?}, A {} of {at_a}\nB {tb:?}\nA {ta:?}",
            ta.dropped_wrong_peer
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    // Nothing forged reached the transport: no CNP obeyed, no NAK taken.
    assert_eq!(
        (ta.cnp_received, ta.rcvd_seq_err, ta.rp_cnp_handled),
        (0, 0, 0)
    );
    assert_eq!(tb.naks_sent, 0, "{tb:?}");
    dev_a.close();
    dev_b.close();
}
