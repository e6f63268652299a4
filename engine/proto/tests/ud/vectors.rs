//! UD datagrams made by an independent implementation (Scapy,
//! `tests/vectors/ud/make_ud_vectors.py`, with the fields rxe's requester
//! sends): each parses with its ICRC, carries the manifest's BTH, DETH,
//! ImmDt and payload, is re-emitted byte for byte by the encoder, and
//! lands in a UD QP's receive with its GRH area.

use core::net::IpAddr;

use proto::endpoint::{Endpoint, EndpointConfig};
use proto::rc::{Access, QpInitAttr, RecvWr, Sge, WcOpcode, WcStatus};
use proto::time::Instant;
use proto::ud::{NetworkHeader, GRH_LEN};
use proto::wire::pcap::Reader;
use proto::wire::{emit_frame, frame_len, parse_frame, Opcode};
use serde_json::Value;

use crate::support::up;

const PCAP: &[u8] = include_bytes!("../vectors/ud/ud_vectors.pcap");
const MANIFEST: &str = include_str!("../vectors/ud/ud_vectors.json");

fn vectors() -> Vec<(&'static [u8], Value)> {
    let m: Value = serde_json::from_str(MANIFEST).unwrap();
    let frames: Vec<&[u8]> = Reader::new(PCAP)
        .unwrap()
        .map(|r| r.unwrap().data)
        .collect();
    let entries = m["frames"].as_array().unwrap().clone();
    assert_eq!(frames.len(), entries.len());
    assert_eq!(frames.len(), 64);
    frames.into_iter().zip(entries).collect()
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap()
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

#[test]
fn scapys_ud_datagrams_parse_and_re_emit_byte_for_byte() {
    for (i, (f, e)) in vectors().into_iter().enumerate() {
        let p = parse_frame(f).unwrap_or_else(|err| panic!("vector {i}: {err:?}"));
        let h = p.headers;
        let op = if u(&e["opcode"]) == 0x64 {
            Opcode::UdSendOnly
        } else {
            Opcode::UdSendOnlyImm
        };
        assert_eq!(h.bth.opcode, op, "vector {i}");
        assert_eq!(u64::from(h.bth.dest_qp), u(&e["dqpn"]));
        assert_eq!(u64::from(h.bth.psn), u(&e["psn"]));
        assert_eq!(h.bth.pkey, 0xFFFF);
        assert!(!h.bth.ack_req);
        assert_eq!(h.bth.solicited, e["solicited"].as_bool().unwrap());
        assert_eq!(u64::from(p.pad), u(&e["pad"]));
        let d = h.deth.expect("a DETH");
        assert_eq!(u64::from(d.qkey), u(&e["qkey"]));
        assert_eq!(u64::from(d.src_qp), u(&e["src_qp"]));
        assert_eq!(h.immdt.map(u64::from), e["immdt"].as_u64());
        assert_eq!(p.payload, &hex(e["payload_hex"].as_str().unwrap())[..]);
        assert_eq!(u64::from(p.icrc), u(&e["icrc"]));
        let mut out = vec![0u8; frame_len(&h, p.payload.len())];
        emit_frame(&h, p.payload, &mut out).unwrap();
        assert_eq!(out, f, "vector {i} re-emitted");
    }
}

#[test]
fn scapys_ud_datagrams_land_in_a_ud_qp() {
    for (i, (f, e)) in vectors().into_iter().enumerate() {
        let dst: IpAddr = e["dst"].as_str().unwrap().parse().unwrap();
        let mut ep = Endpoint::new(EndpointConfig {
            local_mac: [2, 0, 0, 0, 0x0a, 2],
            local_ip: dst,
            ..EndpointConfig::default()
        });
        let mr = ep
            .reg_mr(Box::new(vec![0xEEu8; 4096]), 0x1000, Access::LOCAL_WRITE)
            .unwrap();
        let cq = ep.create_cq(8);
        let init = QpInitAttr {
            send_cq: cq,
            recv_cq: cq,
            max_send_wr: 4,
            max_recv_wr: 4,
            sq_sig_all: false,
            srq: None,
        };
        let qpn = u(&e["dqpn"]) as u32;
        ep.create_ud_qp_numbered(0, qpn, init).unwrap();
        up(&mut ep, qpn, u(&e["qkey"]) as u32, 0);
        let sge = Sge {
            lkey: mr.lkey,
            addr: 0x1000,
            length: 2048,
        };
        ep.post_ud_recv(qpn, RecvWr { wr_id: 7, sge }).unwrap();
        ep.handle_packet(Instant::ZERO, f);
        let wc = ep
            .poll_completion(cq)
            .unwrap_or_else(|| panic!("vector {i}: no completion"));
        assert_eq!(
            (wc.status, wc.opcode),
            (WcStatus::Success, WcOpcode::Recv),
            "vector {i}"
        );
        let payload = hex(e["payload_hex"].as_str().unwrap());
        assert_eq!(wc.byte_len as usize, GRH_LEN + payload.len());
        assert_eq!(wc.imm.map(u64::from), e["immdt"].as_u64());
        let src = wc.ud.unwrap();
        assert_eq!(u64::from(src.src_qp), u(&e["src_qp"]));
        assert_eq!(
            src.src_ip(),
            e["src"].as_str().unwrap().parse::<IpAddr>().unwrap()
        );
        let mut got = vec![0u8; GRH_LEN + payload.len() + 1];
        ep.mr_read(mr.lkey, 0x1000, &mut got).unwrap();
        let ip_at = if e["vlan"].as_bool().unwrap() { 18 } else { 14 };
        if u(&e["ip_version"]) == 4 {
            assert_eq!(src.network, NetworkHeader::Ipv4);
            assert_eq!(&got[..20], &[0u8; 20]);
            assert_eq!(&got[20..40], &f[ip_at..ip_at + 20]);
        } else {
            assert_eq!(src.network, NetworkHeader::Ipv6);
            assert_eq!(&got[..40], &f[ip_at..ip_at + 40]);
        }
        assert_eq!(&got[40..40 + payload.len()], &payload[..]);
        assert_eq!(got[40 + payload.len()], 0xEE, "nothing past the message");
    }
}
