//! Frames made by an independent implementation (Scapy, see
//! `tests/vectors/make_vectors.py`) parse to the values in the manifest,
//! corrupted ICRCs are caught, and emitting the manifest's headers
//! reproduces Scapy's bytes exactly (IPv4 header checksum, IPv6 UDP
//! checksum and ICRC included).

use core::net::{Ipv4Addr, Ipv6Addr};

use proto::wire::pcap::Reader;
use proto::wire::{
    emit_frame, frame_icrc, parse_frame, parse_frame_lenient, AethRepr, AtomicAckEthRepr,
    AtomicEthRepr, BthRepr, Ecn, EthRepr, IpRepr, Opcode, ParseError, RethRepr, RoceHeaders,
    UdpRepr, VlanTag,
};
use serde_json::Value;

const PCAP: &[u8] = include_bytes!("../vectors/roce_vectors.pcap");
const MANIFEST: &str = include_str!("../vectors/roce_vectors.json");

fn manifest() -> Vec<Value> {
    let v: Value = serde_json::from_str(MANIFEST).expect("manifest is JSON");
    v["frames"].as_array().expect("frames").clone()
}

fn frames() -> Vec<&'static [u8]> {
    Reader::new(PCAP)
        .expect("pcap")
        .map(|r| r.expect("record").data)
        .collect()
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a u64: {v}"))
}
fn b(v: &Value) -> bool {
    v.as_bool().unwrap_or_else(|| panic!("not a bool: {v}"))
}

fn ecn(bits: u64) -> Ecn {
    match bits {
        0 => Ecn::NotEct,
        1 => Ecn::Ect1,
        2 => Ecn::Ect0,
        _ => Ecn::Ce,
    }
}

/// The headers the manifest describes.
fn expected_headers(e: &Value) -> RoceHeaders {
    let vlan = (!e["vlan"].is_null()).then(|| VlanTag {
        pcp: u(&e["vlan"]["pcp"]) as u8,
        dei: b(&e["vlan"]["dei"]),
        vid: u(&e["vlan"]["vid"]) as u16,
    });
    let ip = if u(&e["ip_version"]) == 4 {
        IpRepr::V4 {
            src: e["src"].as_str().unwrap().parse::<Ipv4Addr>().unwrap(),
            dst: e["dst"].as_str().unwrap().parse::<Ipv4Addr>().unwrap(),
            dscp: u(&e["dscp"]) as u8,
            ecn: ecn(u(&e["ecn"])),
            ttl: u(&e["ttl"]) as u8,
            ident: u(&e["ident"]) as u16,
            dont_fragment: b(&e["dont_fragment"]),
        }
    } else {
        IpRepr::V6 {
            src: e["src"].as_str().unwrap().parse::<Ipv6Addr>().unwrap(),
            dst: e["dst"].as_str().unwrap().parse::<Ipv6Addr>().unwrap(),
            dscp: u(&e["dscp"]) as u8,
            ecn: ecn(u(&e["ecn"])),
            flow_label: u(&e["flow_label"]) as u32,
            hop_limit: u(&e["hop_limit"]) as u8,
        }
    };
    let opt = |k: &str| (!e[k].is_null()).then(|| &e[k]);
    RoceHeaders {
        eth: EthRepr {
            dst: [2, 0, 0, 0, 0, 2],
            src: [2, 0, 0, 0, 0, 1],
            vlan,
        },
        ip,
        udp: UdpRepr {
            src_port: u(&e["udp_sport"]) as u16,
            dst_port: u(&e["udp_dport"]) as u16,
        },
        bth: BthRepr {
            opcode: Opcode::from_u8(u(&e["opcode"]) as u8).expect("known opcode"),
            solicited: b(&e["solicited"]),
            mig_req: b(&e["mig_req"]),
            pad_count: u(&e["pad"]) as u8,
            pkey: u(&e["pkey"]) as u16,
            fecn: b(&e["fecn"]),
            becn: b(&e["becn"]),
            dest_qp: u(&e["dqpn"]) as u32,
            ack_req: b(&e["ack_req"]),
            psn: u(&e["psn"]) as u32,
        },
        reth: opt("reth").map(|r| RethRepr {
            va: u(&r["va"]),
            rkey: u(&r["rkey"]) as u32,
            dma_len: u(&r["len"]) as u32,
        }),
        aeth: opt("aeth").map(|a| AethRepr {
            syndrome: u(&a["syndrome"]) as u8,
            msn: u(&a["msn"]) as u32,
        }),
        atomic_eth: opt("atomic_eth").map(|a| AtomicEthRepr {
            va: u(&a["va"]),
            rkey: u(&a["rkey"]) as u32,
            swap_add: u(&a["swap_add"]),
            compare: u(&a["compare"]),
        }),
        atomic_ack_eth: opt("atomic_ack_eth").map(|a| AtomicAckEthRepr {
            orig: u(&a["orig"]),
        }),
        immdt: opt("immdt").map(|v| u(v) as u32),
        ieth: opt("ieth").map(|v| u(v) as u32),
        deth: None,
    }
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

#[test]
fn manifest_and_pcap_agree_in_size_and_cover_every_opcode() {
    let m = manifest();
    assert_eq!(frames().len(), m.len());
    // The Scapy vectors cover RC and CNP; UD and UC frames are checked
    // against tshark (`tshark.rs`) and the UD and UC tests, and so is
    // ATOMIC WRITE (IBA 1.5), which Scapy's RoCE layer does not know.
    for op in Opcode::ALL
        .into_iter()
        .filter(|op| !op.is_ud() && !op.is_uc() && *op != Opcode::AtomicWrite)
    {
        for ip in [4, 6] {
            for vlan in [false, true] {
                assert!(
                    m.iter().any(|e| e["roce"] == true
                        && u(&e["opcode"]) == op.as_u8() as u64
                        && u(&e["ip_version"]) == ip
                        && e["vlan"].is_null() != vlan
                        && e["expect"] == "ok"),
                    "no valid vector for {op} IPv{ip} vlan {vlan}"
                );
            }
        }
    }
    for pad in 0..4 {
        assert!(
            m.iter().any(|e| e["expect"] == "ok" && e["pad"] == pad),
            "pad {pad}"
        );
    }
    assert!(m.iter().filter(|e| e["expect"] == "bad_icrc").count() >= 5);
}

#[test]
fn every_vector_parses_to_the_manifest_values() {
    for (frame, e) in frames().into_iter().zip(manifest()) {
        let n = u(&e["frame"]);
        match e["expect"].as_str().unwrap() {
            "not_roce" => {
                assert_eq!(
                    parse_frame(frame).unwrap_err(),
                    ParseError::NotRoce,
                    "frame {n}"
                )
            }
            "ok" => {
                let f = parse_frame(frame).unwrap_or_else(|err| panic!("frame {n}: {err:?}"));
                assert_eq!(f.headers, expected_headers(&e), "frame {n}");
                assert_eq!(
                    f.payload,
                    &hex(e["payload_hex"].as_str().unwrap())[..],
                    "frame {n}"
                );
                assert_eq!(f.payload.len() as u64, u(&e["payload_len"]), "frame {n}");
                assert_eq!(f.pad as u64, u(&e["pad"]), "frame {n}");
                assert_eq!(f.icrc as u64, u(&e["icrc"]), "frame {n}");
                assert_eq!(frame_icrc(frame), Ok(f.icrc), "frame {n}");
                assert_eq!(f.headers.bth.opcode.name(), e["opcode_name"], "frame {n}");
            }
            "bad_icrc" => {
                match parse_frame(frame) {
                    Err(ParseError::BadIcrc { carried, computed }) => {
                        assert_eq!(carried as u64, u(&e["icrc"]), "frame {n}");
                        assert_ne!(carried, computed);
                    }
                    other => panic!("frame {n}: expected BadIcrc, got {other:?}"),
                }
                // The lenient parse still decodes every field.
                let (f, computed) = parse_frame_lenient(frame).unwrap();
                assert_ne!(f.icrc, computed);
                assert_eq!(f.headers, expected_headers(&e), "frame {n}");
            }
            other => panic!("unknown expectation {other}"),
        }
    }
}

#[test]
fn emitting_the_manifest_headers_reproduces_scapys_bytes() {
    let mut buf = [0u8; 2048];
    let mut checked = 0;
    for (frame, e) in frames().into_iter().zip(manifest()) {
        if e["expect"] != "ok" {
            continue;
        }
        let payload = hex(e["payload_hex"].as_str().unwrap());
        let len = emit_frame(&expected_headers(&e), &payload, &mut buf).unwrap();
        assert_eq!(&buf[..len], frame, "frame {}", e["frame"]);
        checked += 1;
    }
    assert!(checked >= 100);
}

#[test]
fn tshark_decoded_every_roce_vector_without_complaint() {
    // Recorded by make_vectors.py when tshark is installed.
    for e in manifest().iter().filter(|e| e["roce"] == true) {
        let Some(t) = e.get("tshark") else { continue };
        assert_eq!(t["infiniband"], true, "frame {}", e["frame"]);
        assert_eq!(t["malformed"], false, "frame {}", e["frame"]);
        assert_eq!(t["expert"], "", "frame {}", e["frame"]);
        assert_eq!(t["opcode"], e["opcode"], "frame {}", e["frame"]);
    }
}
