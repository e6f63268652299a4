//! CNP bytes against an independent encoder, and the notification /
//! reaction point wired into the endpoint.
//!
//! `tests/vectors/cnp/cnp_vectors.txt` was written by Scapy's
//! `scapy.contrib.roce.cnp()` (script `tests/vectors/cnp/gen_cnp_vectors.py`).
//! Two checks use it:
//! - every vector: the wire emitter, given the same fields, writes the same
//!   bytes (ICRC included);
//! - `v4_default` / `v6_default`: an endpoint that receives a CE-marked
//!   packet answers with exactly that CNP.

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use core::time::Duration;

use proto::cc::CcConfig;
use proto::endpoint::{ConnectOptions, Endpoint, EndpointConfig, RemoteQp};
use proto::rc::{Access, QpInitAttr, RecvWr, SendOp, SendWr, Sge, WcStatus};
use proto::time::Instant;
use proto::wire::{
    emit_frame, parse_frame, BthRepr, Ecn, EthRepr, IpRepr, Opcode, RoceHeaders, UdpRepr, VlanTag,
    ROCE_V2_UDP_PORT,
};

use crate::connect::{connect_endpoints, Side};

const VECTORS: &str = include_str!("../vectors/cnp/cnp_vectors.txt");

struct Vector {
    fields: Vec<(String, String)>,
    bytes: Vec<u8>,
}

impl Vector {
    fn get(&self, k: &str) -> &str {
        &self
            .fields
            .iter()
            .find(|(n, _)| n == k)
            .unwrap_or_else(|| panic!("no {k}"))
            .1
    }
    fn num(&self, k: &str) -> u32 {
        self.get(k).parse().unwrap()
    }
}

fn mac(s: &str) -> [u8; 6] {
    let v: Vec<u8> = s
        .split(':')
        .map(|h| u8::from_str_radix(h, 16).unwrap())
        .collect();
    v.try_into().unwrap()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn vectors() -> Vec<Vector> {
    VECTORS
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let mut fields = Vec::new();
            let mut bytes = Vec::new();
            for kv in l.split_whitespace() {
                let (k, v) = kv.split_once('=').unwrap();
                if k == "hex" {
                    bytes = unhex(v);
                } else {
                    fields.push((k.to_string(), v.to_string()));
                }
            }
            Vector { fields, bytes }
        })
        .collect()
}

fn vector(name: &str) -> Vector {
    vectors()
        .into_iter()
        .find(|v| v.get("name") == name)
        .unwrap()
}

#[test]
fn wire_emitter_matches_scapy_cnp() {
    let all = vectors();
    assert_eq!(all.len(), 6);
    for v in &all {
        let vlan = match v.get("vlan") {
            "none" => None,
            s => {
                let (pcp, vid) = s.split_once(':').unwrap();
                Some(VlanTag {
                    pcp: pcp.parse().unwrap(),
                    dei: false,
                    vid: vid.parse().unwrap(),
                })
            }
        };
        let dscp = v.num("dscp") as u8;
        let ip = if v.get("ip") == "4" {
            IpRepr::V4 {
                src: v.get("src").parse().unwrap(),
                dst: v.get("dst").parse().unwrap(),
                dscp,
                ecn: Ecn::NotEct,
                ttl: v.num("ttl") as u8,
                ident: v.num("ident") as u16,
                dont_fragment: true,
            }
        } else {
            IpRepr::V6 {
                src: v.get("src").parse().unwrap(),
                dst: v.get("dst").parse().unwrap(),
                dscp,
                ecn: Ecn::NotEct,
                flow_label: v.num("flow"),
                hop_limit: v.num("ttl") as u8,
            }
        };
        let h = RoceHeaders {
            eth: EthRepr {
                dst: mac(v.get("dmac")),
                src: mac(v.get("smac")),
                vlan,
            },
            ip,
            udp: UdpRepr {
                src_port: v.num("sport") as u16,
                dst_port: ROCE_V2_UDP_PORT,
            },
            bth: BthRepr {
                opcode: Opcode::Cnp,
                solicited: false,
                mig_req: false,
                pad_count: 0,
                pkey: 0xFFFF,
                fecn: false,
                becn: true,
                dest_qp: v.num("dqpn"),
                ack_req: false,
                psn: 0,
            },
            reth: None,
            aeth: None,
            atomic_eth: None,
            atomic_ack_eth: None,
            immdt: None,
            ieth: None,
            deth: None,
        };
        let mut buf = [0u8; 128];
        let n = emit_frame(&h, &[0u8; 16], &mut buf).unwrap();
        assert_eq!(hex(&buf[..n]), hex(&v.bytes), "vector {}", v.get("name"));
        // And our parser accepts Scapy's bytes (ICRC verified).
        let f = parse_frame(&v.bytes).unwrap();
        assert_eq!(f.headers.bth.opcode, Opcode::Cnp);
        assert!(f.headers.bth.becn);
        assert_eq!(f.payload, &[0u8; 16]);
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

const MAC_A: [u8; 6] = [2, 0, 0, 0, 0, 1];
const MAC_B: [u8; 6] = [2, 0, 0, 0, 0, 2];

/// A (the data sender, QP 0x11) and B (the receiver / notification point,
/// QP 0x11, UDP source port 0xC001), connected, with B's receive posted.
struct Pair {
    a: Endpoint,
    b: Endpoint,
    qa: u32,
    qb: u32,
    cqb: u32,
    lkey_a: u32,
    lkey_b: u32,
}

fn pair(ip_a: IpAddr, ip_b: IpAddr, cc: CcConfig) -> Pair {
    let (
        Side {
            ep: mut a, qpn: qa, ..
        },
        Side {
            ep: mut b,
            qpn: qb,
            cq: cqb,
        },
    ) = connect_endpoints(
        EndpointConfig {
            local_mac: MAC_A,
            local_ip: ip_a,
            cc,
            ..Default::default()
        },
        EndpointConfig {
            local_mac: MAC_B,
            local_ip: ip_b,
            cc,
            ..Default::default()
        },
        256,
        QpInitAttr::default(),
        &ConnectOptions {
            udp_src_port: 0xC00A,
            ..Default::default()
        },
        &ConnectOptions {
            udp_src_port: 0xC001,
            ..Default::default()
        },
    );
    let rw = Access::LOCAL_WRITE | Access::REMOTE_WRITE;
    let ka = a
        .reg_mr(Box::new(vec![0x5Au8; 1 << 16]), 0x1000, rw)
        .unwrap();
    let kb = b.reg_mr(Box::new(vec![0u8; 1 << 16]), 0x1000, rw).unwrap();
    for i in 0..64 {
        b.post_recv(
            qb,
            RecvWr {
                wr_id: i,
                sge: Sge {
                    lkey: kb.lkey,
                    addr: 0x1000,
                    length: 1024,
                },
            },
        )
        .unwrap();
    }
    Pair {
        a,
        b,
        qa,
        qb,
        cqb,
        lkey_a: ka.lkey,
        lkey_b: kb.lkey,
    }
}

/// [`pair`] on 10.0.0.1 (A) and 10.0.0.2 (B).
fn pair_v4(cc: CcConfig) -> Pair {
    pair(
        IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
        IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)),
        cc,
    )
}

impl Pair {
    fn send(&mut self, wr_id: u64, len: u32) {
        let wr = SendWr::new(
            wr_id,
            SendOp::Send,
            Sge {
                lkey: self.lkey_a,
                addr: 0x1000,
                length: len,
            },
        );
        self.a.post_send(self.qa, wr).unwrap();
    }
}

/// Set the IP ECN field of an Ethernet frame (no VLAN) to CE, as a switch
/// would: IPv4 TOS low bits (and the header checksum), or IPv6 traffic class.
fn mark_ce(frame: &mut [u8]) {
    match frame[14] >> 4 {
        4 => {
            frame[15] |= 0b11;
            frame[24] = 0;
            frame[25] = 0;
            let mut sum = 0u32;
            for i in (14..34).step_by(2) {
                sum += u32::from(u16::from_be_bytes([frame[i], frame[i + 1]]));
            }
            while sum > 0xFFFF {
                sum = (sum & 0xFFFF) + (sum >> 16);
            }
            let c = !(sum as u16);
            frame[24..26].copy_from_slice(&c.to_be_bytes());
        }
        6 => frame[15] |= 0b11 << 4,
        v => panic!("IP version {v}"),
    }
}

fn tos(frame: &[u8]) -> u8 {
    match frame[14] >> 4 {
        4 => frame[15],
        _ => (frame[14] << 4) | (frame[15] >> 4),
    }
}

fn ce_marked_send_yields_scapy_cnp(ip_a: IpAddr, ip_b: IpAddr, vector_name: &str) {
    let mut p = pair(ip_a, ip_b, CcConfig::default());
    let now = Instant::from_micros(10);
    p.send(1, 100);
    let mut buf = [0u8; 4200];
    let n = p.a.poll_transmit(now, &mut buf).unwrap();
    let mut data = buf[..n].to_vec();
    // Senders mark data ECT(0) with DSCP 26: traffic class 106.
    assert_eq!(tos(&data), 106);
    mark_ce(&mut data);
    assert_eq!(parse_frame(&data).unwrap().headers.ip, {
        let mut ip = parse_frame(&buf[..n]).unwrap().headers.ip;
        match &mut ip {
            IpRepr::V4 { ecn, .. } | IpRepr::V6 { ecn, .. } => *ecn = Ecn::Ce,
        }
        ip
    });
    p.b.handle_packet(now, &data);
    // The first frame B sends is the CNP, byte for byte Scapy's.
    let mut out = [0u8; 4200];
    let m = p.b.poll_transmit(now, &mut out).unwrap();
    assert_eq!(hex(&out[..m]), hex(&vector(vector_name).bytes));
    // The CE-marked SEND was still processed: B acknowledges it and
    // completes the receive.
    let m2 = p.b.poll_transmit(now, &mut out).unwrap();
    let ack = parse_frame(&out[..m2]).unwrap();
    assert_eq!(ack.headers.bth.opcode, Opcode::Acknowledge);
    let wc = p.b.poll_completion(p.cqb).expect("receive completion");
    assert_eq!(
        (wc.wr_id, wc.status, wc.byte_len),
        (0, WcStatus::Success, 100)
    );
    let c = p.b.counters();
    assert_eq!((c.np_ecn_marked_roce_packets, c.np_cnp_sent), (1, 1));
    let _ = p.lkey_b;
}

#[test]
fn endpoint_cnp_matches_scapy_ipv4() {
    ce_marked_send_yields_scapy_cnp(
        IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
        IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)),
        "v4_default",
    );
}

#[test]
fn endpoint_cnp_matches_scapy_ipv6() {
    ce_marked_send_yields_scapy_cnp(
        IpAddr::V6("fd00::1".parse::<Ipv6Addr>().unwrap()),
        IpAddr::V6("fd00::2".parse::<Ipv6Addr>().unwrap()),
        "v6_default",
    );
}

#[test]
fn endpoint_cnp_dscp_is_configurable() {
    let cc = CcConfig {
        marking: proto::cc::EcnMarking {
            cnp_dscp: 40,
            ..Default::default()
        },
        ..Default::default()
    };
    let mut p = pair_v4(cc);
    p.send(1, 8);
    let mut buf = [0u8; 4200];
    let n = p.a.poll_transmit(Instant::ZERO, &mut buf).unwrap();
    mark_ce(&mut buf[..n]);
    p.b.handle_packet(Instant::ZERO, &buf[..n]);
    let mut out = [0u8; 256];
    let m = p.b.poll_transmit(Instant::ZERO, &mut out).unwrap();
    assert_eq!(hex(&out[..m]), hex(&vector("v4_dscp40").bytes));
}

/// Deliver `count` CE-marked SENDs from A to B at `now` (no B transmission
/// in between), then drain B: how many CNPs did it send?
fn cnps_for_marked_burst(cc: CcConfig, count: u64) -> (usize, proto::rc::Counters) {
    let mut p = pair_v4(cc);
    let mut buf = [0u8; 4200];
    for i in 0..count {
        p.send(i, 64);
        let now = Instant::from_nanos(100 * i); // all within 4 us
        let n = p.a.poll_transmit(now, &mut buf).unwrap();
        mark_ce(&mut buf[..n]);
        p.b.handle_packet(now, &buf[..n]);
    }
    let now = Instant::from_nanos(100 * count);
    let mut cnps = 0;
    while let Some(m) = p.b.poll_transmit(now, &mut buf) {
        if parse_frame(&buf[..m]).unwrap().headers.bth.opcode == Opcode::Cnp {
            cnps += 1;
        }
    }
    (cnps, p.b.counters())
}

#[test]
fn endpoint_paces_cnps_per_qp() {
    let (cnps, c) = cnps_for_marked_burst(CcConfig::default(), 20);
    assert_eq!(cnps, 1);
    assert_eq!((c.np_ecn_marked_roce_packets, c.np_cnp_sent), (20, 1));
    // min_time_between_cnps = 0: one CNP per marked packet.
    let cc = CcConfig {
        min_time_between_cnps: Duration::ZERO,
        ..Default::default()
    };
    let (cnps, c) = cnps_for_marked_burst(cc, 20);
    assert_eq!(cnps, 20);
    assert_eq!(c.np_cnp_sent, 20);
}

#[test]
fn cnp_slows_the_sender_and_dcqcn_can_be_switched_off() {
    for dcqcn_enabled in [true, false] {
        let cc = CcConfig {
            dcqcn_enabled,
            ..Default::default()
        };
        let mut p = pair_v4(cc);
        let now = Instant::from_micros(1);
        p.send(1, 64);
        let mut buf = [0u8; 4200];
        let n = p.a.poll_transmit(now, &mut buf).unwrap();
        mark_ce(&mut buf[..n]);
        p.b.handle_packet(now, &buf[..n]);
        let m = p.b.poll_transmit(now, &mut buf).unwrap();
        p.a.handle_packet(now, &buf[..m]);
        let c = p.a.counters();
        assert_eq!(c.cnp_received, 1);
        let rate = p.a.qp_congestion(p.qa).unwrap().rate_bps();
        assert_eq!(p.a.qp_rates().collect::<Vec<_>>(), vec![(p.qa, rate)]);
        if dcqcn_enabled {
            assert_eq!((c.rp_cnp_handled, c.rp_cnp_ignored), (1, 0));
            assert!(rate < 51e9, "{rate}");
        } else {
            assert_eq!((c.rp_cnp_handled, c.rp_cnp_ignored), (0, 1));
            assert_eq!(rate, 100e9);
        }
        // Post 64 KB in 16 x 4 KB SENDs... at 1024 B PMTU: 64 frames. With
        // DCQCN on, the 8 KB pacer bucket lets ~8 frames out at once, then
        // the endpoint must wait (and says until when).
        for i in 0..16 {
            p.send(10 + i, 4096);
        }
        let mut sent = 0;
        while p.a.poll_transmit(now, &mut buf).is_some() {
            sent += 1;
            if sent > 200 {
                break;
            }
        }
        if dcqcn_enabled {
            assert!((2..=10).contains(&sent), "sent {sent} frames in a burst");
            let wake = p.a.poll_timeout().expect("a deadline to resume sending");
            assert!(
                wake > now && wake < now + Duration::from_micros(5),
                "{wake:?}"
            );
            assert!(p.a.poll_transmit(wake, &mut buf).is_some());
        } else {
            // Bounded by the requester's outstanding-PSN window, not by rate.
            assert!(sent >= 64, "sent {sent}");
        }
        let _ = p.qb;
    }
}

#[test]
fn data_marking_follows_the_endpoint_config() {
    let cc = CcConfig {
        marking: proto::cc::EcnMarking {
            data_ecn: Ecn::Ect1,
            data_dscp: 10,
            ..Default::default()
        },
        ..Default::default()
    };
    let mut p = pair_v4(cc);
    p.send(1, 8);
    let mut buf = [0u8; 4200];
    let n = p.a.poll_transmit(Instant::ZERO, &mut buf).unwrap();
    assert_eq!(tos(&buf[..n]), (10 << 2) | 0b01);
    // A per-QP traffic class (connect options) wins over the endpoint's.
    let ip_a = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
    let mut a = Endpoint::new(EndpointConfig {
        local_mac: MAC_A,
        local_ip: ip_a,
        cc,
        ..Default::default()
    });
    let cq = a.create_cq(16);
    let qp = a
        .create_qp(QpInitAttr {
            send_cq: cq,
            recv_cq: cq,
            ..Default::default()
        })
        .unwrap();
    let remote = RemoteQp {
        qpn: 0x11,
        psn: 0,
        mac: MAC_B,
        ip: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)),
    };
    let opts = ConnectOptions {
        dscp: Some(46),
        ecn: Some(Ecn::NotEct),
        ..Default::default()
    };
    a.connect(qp, &remote, &opts).unwrap();
    let k = a
        .reg_mr(Box::new(vec![0u8; 64]), 0x1000, Access::LOCAL_WRITE)
        .unwrap();
    let wr = SendWr::new(
        1,
        SendOp::Send,
        Sge {
            lkey: k.lkey,
            addr: 0x1000,
            length: 8,
        },
    );
    a.post_send(qp, wr).unwrap();
    let n = a.poll_transmit(Instant::ZERO, &mut buf).unwrap();
    assert_eq!(tos(&buf[..n]), 46 << 2);
}
