//! Frames emitted by an independent RoCE v2 stack (Linux Soft-RoCE, rdma-core
//! tools, two VMs on a bridge; see interop/README.md) must parse with a
//! correct ICRC, and carry what we observed rxe to send.

use std::collections::{BTreeMap, HashMap};

use engine::wire::{parse_frame, IpRepr, Opcode, RoceFrame};

use crate::support::read_pcap;

fn parse_all(name: &str) -> Vec<(u64, RoceFrame<'static>)> {
    // Leak the records: the capture is small and lives for the test.
    let recs: &'static [crate::support::Record] = Box::leak(read_pcap(name).into_boxed_slice());
    recs.iter()
        .enumerate()
        .map(|(i, r)| {
            let f =
                parse_frame(&r.data).unwrap_or_else(|e| panic!("{name} frame {}: {e:?}", i + 1));
            (r.ts_usec, f)
        })
        .collect()
}

fn src(f: &RoceFrame<'_>) -> [u8; 4] {
    match f.headers.ip {
        IpRepr::V4 { src, .. } => src.octets(),
        IpRepr::V6 { .. } => panic!("rxe captures are IPv4"),
    }
}

fn opcode_counts(frames: &[(u64, RoceFrame<'_>)]) -> BTreeMap<u8, usize> {
    let mut m = BTreeMap::new();
    for (_, f) in frames {
        *m.entry(f.headers.bth.opcode as u8).or_insert(0) += 1;
    }
    m
}

#[test]
fn pingpong_frames_parse_with_correct_icrc() {
    // ibv_rc_pingpong -g 1 -m 1024 -n 5, sizes 1, 100, 4096, 8192.
    let frames = parse_all("rxe_pingpong.pcap");
    assert_eq!(frames.len(), 180);
    let counts = opcode_counts(&frames);
    let expect: BTreeMap<u8, usize> = [
        (Opcode::SendFirst as u8, 20),
        (Opcode::SendMiddle as u8, 80),
        (Opcode::SendLast as u8, 20),
        (Opcode::SendOnly as u8, 20),
        (Opcode::Acknowledge as u8, 40),
    ]
    .into_iter()
    .collect();
    assert_eq!(counts, expect);

    for (_, f) in &frames {
        let h = &f.headers;
        // What rxe sends: DF, TTL 64, DSCP 0 / Not-ECT, source port >= 0xC000.
        match h.ip {
            IpRepr::V4 {
                ttl,
                dont_fragment,
                dscp,
                ecn,
                ..
            } => {
                assert_eq!(ttl, 64);
                assert!(dont_fragment);
                assert_eq!(dscp, 0);
                assert_eq!(ecn, engine::wire::Ecn::NotEct);
            }
            IpRepr::V6 { .. } => unreachable!(),
        }
        assert!(h.udp.src_port >= 0xC000);
        assert_eq!(h.udp.dst_port, 4791);
        assert_eq!(h.bth.pkey, 0xFFFF);
        match h.bth.opcode {
            Opcode::Acknowledge => {
                let aeth = h.aeth.expect("ACK has an AETH");
                assert_eq!(aeth.syndrome, 0x1F, "rxe ACKs with unlimited credits");
                assert!(!h.bth.ack_req);
            }
            Opcode::SendFirst | Opcode::SendMiddle => {
                assert_eq!(f.payload.len(), 1024, "FIRST/MIDDLE carry one PMTU");
                assert!(!h.bth.ack_req, "rxe sets no AckReq before LAST");
            }
            Opcode::SendLast | Opcode::SendOnly => {
                assert!(h.bth.ack_req, "rxe sets AckReq on the last packet");
            }
            other => panic!("unexpected opcode {other:?}"),
        }
        if h.bth.opcode != Opcode::Acknowledge {
            assert!(
                f.payload.iter().all(|&b| b == 0x7b),
                "rc_pingpong fills with 0x7b"
            );
        }
    }
    // SEND_ONLY sizes 1 and 100: pad to 4 bytes.
    let only: Vec<(usize, u8)> = frames
        .iter()
        .filter(|(_, f)| f.headers.bth.opcode == Opcode::SendOnly)
        .map(|(_, f)| (f.payload.len(), f.pad))
        .collect();
    assert!(only.iter().all(|&p| p == (1, 3) || p == (100, 0)));
    assert_eq!(only.iter().filter(|&&p| p == (1, 3)).count(), 10);
}

#[test]
fn pingpong_acks_carry_the_psn_of_the_last_packet_and_count_messages() {
    let frames = parse_all("rxe_pingpong.pcap");
    // Per (sender, QP): the last request PSN with AckReq; the peer ACKs that
    // PSN, and MSN counts messages from 1.
    let mut last_ackreq: HashMap<([u8; 4], u32), u32> = HashMap::new();
    let mut msn_seen: HashMap<([u8; 4], u32), u32> = HashMap::new();
    let mut next_psn: HashMap<([u8; 4], u32), u32> = HashMap::new();
    for (_, f) in &frames {
        let h = &f.headers;
        let key = (src(f), h.bth.dest_qp);
        if h.bth.opcode == Opcode::Acknowledge {
            // The ACK travels the other way: find the request sender.
            let peer = frames
                .iter()
                .map(|(_, g)| src(g))
                .find(|s| *s != src(f))
                .unwrap();
            let req_key = (peer, h.bth.dest_qp);
            assert_eq!(Some(&h.bth.psn), last_ackreq.get(&req_key));
            let msn = msn_seen.entry(key).or_insert(0);
            *msn += 1;
            assert_eq!(h.aeth.unwrap().msn, *msn);
        } else {
            if let Some(&n) = next_psn.get(&key) {
                assert_eq!(h.bth.psn, n, "requests use consecutive PSNs");
            }
            next_psn.insert(key, (h.bth.psn + 1) & 0xFF_FFFF);
            if h.bth.ack_req {
                last_ackreq.insert(key, h.bth.psn);
            }
        }
    }
}

#[test]
fn retransmissions_and_naks_under_loss() {
    // 15 % egress loss on the server VM, 4096-byte messages, 10 iterations.
    let frames = parse_all("rxe_pingpong_loss.pcap");
    assert_eq!(frames.len(), 133);
    let naks = frames
        .iter()
        .filter_map(|(_, f)| f.headers.aeth)
        .filter(|a| a.syndrome == 0x60)
        .count();
    assert_eq!(naks, 3, "NAK PSN sequence error (syndrome 0x60)");
    // A retransmitted request PSN carries a new IP ID and so a new ICRC.
    // (source, opcode, PSN) -> (time, IP ID, ICRC) of its first transmission.
    type Key = ([u8; 4], u8, u32);
    let mut first: HashMap<Key, (u64, u16, u32)> = HashMap::new();
    let mut retransmits = 0;
    let mut timeout_gaps = Vec::new();
    for (ts, f) in &frames {
        let h = &f.headers;
        if h.bth.opcode == Opcode::Acknowledge {
            continue;
        }
        let IpRepr::V4 { ident, .. } = h.ip else {
            unreachable!()
        };
        let key = (src(f), h.bth.opcode as u8, h.bth.psn);
        if let Some(&(t0, id0, icrc0)) = first.get(&key) {
            retransmits += 1;
            assert_ne!(ident, id0);
            assert_ne!(f.icrc, icrc0);
            timeout_gaps.push(ts - t0);
        } else {
            first.insert(key, (*ts, ident, f.icrc));
        }
    }
    assert!(retransmits >= 10, "{retransmits} retransmissions");
    // Timeout 14 = 67.1 ms: the first retransmission of the run came after
    // 61-76 ms (rxe's timer runs in jiffies).
    assert!(timeout_gaps.iter().any(|&g| (60_000..80_000).contains(&g)));
}

#[test]
fn write_and_read_frames_from_perftest() {
    // ib_write_lat then ib_read_lat, -s 2048 -n 5 -m 1024.
    let frames = parse_all("rxe_write_read_lat.pcap");
    assert_eq!(frames.len(), 45);
    let counts = opcode_counts(&frames);
    assert_eq!(counts.get(&(Opcode::WriteFirst as u8)), Some(&10));
    assert_eq!(counts.get(&(Opcode::WriteLast as u8)), Some(&10));
    assert_eq!(counts.get(&(Opcode::ReadRequest as u8)), Some(&5));
    assert_eq!(counts.get(&(Opcode::ReadRespFirst as u8)), Some(&5));
    assert_eq!(counts.get(&(Opcode::ReadRespLast as u8)), Some(&5));
    assert_eq!(counts.get(&(Opcode::Acknowledge as u8)), Some(&10));
    for (_, f) in &frames {
        let h = &f.headers;
        match h.bth.opcode {
            Opcode::WriteFirst | Opcode::ReadRequest => {
                assert_eq!(h.reth.expect("RETH").dma_len, 2048);
            }
            Opcode::ReadRespFirst | Opcode::ReadRespLast => {
                assert_eq!(f.payload.len(), 1024);
                assert!(h.aeth.is_some());
            }
            _ => {}
        }
    }
}

#[test]
fn engine_and_rxe_frames_both_parse() {
    // interop/run.sh, sizes 1 and 4096, -n 5, both directions: roce-xdp
    // pingpong (10.99.0.2) against ibv_rc_pingpong on rxe (10.99.0.11).
    let recs = read_pcap("engine_rxe_pingpong.pcap");
    let mut from_engine = 0;
    let mut from_rxe = 0;
    for (i, r) in recs.iter().enumerate() {
        // The capture also holds the TCP exchange (port 18515).
        if r.data.len() < 38 || r.data[23] != 17 || r.data[36..38] != 4791u16.to_be_bytes() {
            continue;
        }
        let f = parse_frame(&r.data).unwrap_or_else(|e| panic!("frame {}: {e:?}", i + 1));
        match src(&f) {
            [10, 99, 0, 2] => from_engine += 1,
            [10, 99, 0, 11] => from_rxe += 1,
            other => panic!("unexpected source {other:?}"),
        }
        if f.headers.bth.opcode == Opcode::Acknowledge {
            assert_eq!(f.headers.aeth.unwrap().syndrome, 0x1F);
        } else {
            assert!(f.payload.iter().all(|&b| b == 0x7b));
        }
    }
    assert_eq!((from_engine, from_rxe), (70, 75));
}

#[test]
fn engine_naks_and_rxe_goes_back_n() {
    // interop/run.sh go-back-N phase, 4096-byte messages, both directions,
    // the engine's XDP program dropping 5 % of the RoCE frames it receives
    // (the capture is on the bridge, so the dropped frames are in it).
    let frames = parse_all("engine_rxe_gbn_drop5.pcap");
    assert_eq!(frames.len(), 247);
    let naks: Vec<(usize, u32, u32)> = frames
        .iter()
        .enumerate()
        .filter(|(_, (_, f))| src(f) == [10, 99, 0, 2])
        .filter_map(|(i, (_, f))| {
            let a = f.headers.aeth?;
            (a.syndrome == 0x60).then_some((i, f.headers.bth.dest_qp, f.headers.bth.psn))
        })
        .collect();
    assert_eq!(naks.len(), 2, "the engine NAKs each gap once");
    for (at, qpn, psn) in naks {
        // rxe resends from the NAK'd PSN (its ePSN at the engine) on that QP.
        let resent = frames[at + 1..].iter().any(|(_, f)| {
            src(f) == [10, 99, 0, 11]
                && f.headers.bth.dest_qp != qpn
                && f.headers.bth.opcode != Opcode::Acknowledge
                && f.headers.bth.psn == psn
        });
        assert!(resent, "rxe retransmits PSN {psn} after the NAK");
    }
}
