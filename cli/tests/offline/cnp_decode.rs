//! `roce-xdp decode` reads the CNPs this engine sends: a CNP produced by an
//! endpoint answering a CE-marked packet, and the Scapy `cnp()` vectors the
//! engine is checked against (engine/proto/tests/cc/cnp_vectors.rs), written to a
//! pcap and decoded by the CLI binary.

use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;

use engine::endpoint::{ConnectOptions, Endpoint, EndpointConfig, RemoteQp, FIRST_QPN};
use engine::rc::{Access, QpInitAttr, RecvWr, SendOp, SendWr, Sge};
use engine::time::Instant;
use serde_json::Value;

use crate::roce_xdp;

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn scapy_vectors() -> Vec<Vec<u8>> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../engine/proto/tests/vectors/cnp/cnp_vectors.txt");
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter_map(|l| l.split_whitespace().find_map(|kv| kv.strip_prefix("hex=")))
        .map(unhex)
        .collect()
}

/// A CNP from the engine: endpoint B receives a CE-marked SEND from A's
/// QP and answers.
fn engine_cnp() -> Vec<u8> {
    let ip_a = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
    let ip_b = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));
    let (mac_a, mac_b) = ([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]);
    let mut a = Endpoint::new(EndpointConfig {
        local_mac: mac_a,
        local_ip: ip_a,
        ..Default::default()
    });
    let mut b = Endpoint::new(EndpointConfig {
        local_mac: mac_b,
        local_ip: ip_b,
        ..Default::default()
    });
    let (cqa, cqb) = (a.create_cq(16), b.create_cq(16));
    let init = |cq| QpInitAttr {
        send_cq: cq,
        recv_cq: cq,
        ..Default::default()
    };
    // QPN 0x11 on both sides, as the Scapy vectors have it.
    let qa = a.create_qp_numbered(FIRST_QPN, init(cqa)).unwrap();
    let qb = b.create_qp_numbered(FIRST_QPN, init(cqb)).unwrap();
    let remote = |qpn, mac, ip| RemoteQp {
        qpn,
        psn: 0,
        mac,
        ip,
    };
    a.connect(qa, &remote(qb, mac_b, ip_b), &ConnectOptions::default())
        .unwrap();
    let opts = ConnectOptions {
        udp_src_port: 0xC001,
        ..Default::default()
    };
    b.connect(qb, &remote(qa, mac_a, ip_a), &opts).unwrap();
    let rw = Access::LOCAL_WRITE | Access::REMOTE_WRITE;
    let ka = a.reg_mr(Box::new(vec![7u8; 4096]), 0x1000, rw).unwrap();
    let kb = b.reg_mr(Box::new(vec![0u8; 4096]), 0x1000, rw).unwrap();
    let sge = |lkey| Sge {
        lkey,
        addr: 0x1000,
        length: 64,
    };
    b.post_recv(
        qb,
        RecvWr {
            wr_id: 1,
            sge: sge(kb.lkey),
        },
    )
    .unwrap();
    a.post_send(qa, SendWr::new(1, SendOp::Send, sge(ka.lkey)))
        .unwrap();
    let mut buf = [0u8; 4200];
    let now = Instant::from_micros(1);
    let n = a.poll_transmit(now, &mut buf).unwrap();
    // A switch marks it CE: IPv4 TOS ECN bits, header checksum recomputed.
    buf[15] |= 0b11;
    buf[24] = 0;
    buf[25] = 0;
    let mut sum: u32 = (14..34)
        .step_by(2)
        .map(|i| u32::from(u16::from_be_bytes([buf[i], buf[i + 1]])))
        .sum();
    while sum > 0xFFFF {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    buf[24..26].copy_from_slice(&(!(sum as u16)).to_be_bytes());
    b.handle_packet(now, &buf[..n]);
    let m = b.poll_transmit(now, &mut buf).unwrap();
    buf[..m].to_vec()
}

#[test]
fn decode_reads_engine_and_scapy_cnps() {
    let mine = engine_cnp();
    let scapy = scapy_vectors();
    assert_eq!(scapy.len(), 6);
    // The engine's CNP is Scapy's v4_default vector, byte for byte.
    assert_eq!(mine, scapy[0]);
    let mut frames: Vec<(u64, &[u8])> = vec![(0, &mine[..])];
    frames.extend(
        scapy
            .iter()
            .enumerate()
            .map(|(i, f)| (1000 * (i as u64 + 1), &f[..])),
    );
    let pcap = engine::wire::pcap::write_classic(frames);
    let dir = std::env::temp_dir().join(format!("roce-xdp-cnp-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("cnp.pcap");
    std::fs::write(&path, pcap).unwrap();

    let out = roce_xdp(&["decode", path.to_str().unwrap(), "--json"]);
    std::fs::remove_dir_all(&dir).ok();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 7);
    let dqpns = [0x11, 0x11, 0x11, 0xFF_FFFE, 0xABCD, 0x11, 0x102];
    let dscps = [48, 48, 40, 48, 46, 48, 48];
    for (i, l) in lines.iter().enumerate() {
        assert_eq!(l["opcode"], 0x81, "frame {i}: {l}");
        assert_eq!(l["becn"], true, "frame {i}: {l}");
        assert_eq!(l["fecn"], false, "frame {i}: {l}");
        assert_eq!(l["psn"], 0, "frame {i}: {l}");
        assert_eq!(l["pkey"], 0xFFFF, "frame {i}: {l}");
        assert_eq!(l["dqpn"], dqpns[i], "frame {i}: {l}");
        assert_eq!(l["dscp"], dscps[i], "frame {i}: {l}");
        assert_eq!(l["ecn"], "Not-ECT", "frame {i}: {l}");
        assert_eq!(l["payload_len"], 16, "frame {i}: {l}");
        assert_eq!(l["icrc_ok"], true, "frame {i}: {l}");
    }
    assert_eq!(lines[0]["src"], "10.0.0.2");
    assert_eq!(lines[0]["dst"], "10.0.0.1");
}
