//! Wireshark as an independent check of the *encoder*: every opcode emitted
//! by `emit_frame` (IPv4/IPv6, with and without VLAN, pads 0-3) is decoded
//! by tshark as InfiniBand with the same opcode, DestQP and PSN, a good IPv4
//! header checksum, a good IPv6 UDP checksum, and no expert warning.
//! Fails when tshark is not installed: `scripts/setup-deps.sh` installs it,
//! and a check that silently passes is no check.

use core::net::{Ipv4Addr, Ipv6Addr};
use std::process::Command;

use proto::wire::{
    emit_frame, frame_len, pcap, AethRepr, AtomicAckEthRepr, AtomicEthRepr, BthRepr, DethRepr, Ecn,
    EthRepr, IpRepr, Opcode, RethRepr, RoceHeaders, UdpRepr, VlanTag, ROCE_V2_UDP_PORT,
};

fn headers(op: Opcode, v6: bool, vlan: bool, seed: u32) -> RoceHeaders {
    let ip = if v6 {
        IpRepr::V6 {
            src: Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1),
            dst: Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2),
            dscp: 26,
            ecn: Ecn::Ect0,
            flow_label: seed * 101,
            hop_limit: 64,
        }
    } else {
        IpRepr::V4 {
            src: Ipv4Addr::new(10, 9, 0, 1),
            dst: Ipv4Addr::new(10, 9, 0, 2),
            dscp: 26,
            ecn: Ecn::Ce,
            ttl: 64,
            ident: seed as u16,
            dont_fragment: true,
        }
    };
    RoceHeaders {
        eth: EthRepr {
            dst: [2, 0, 0, 0, 0, 2],
            src: [2, 0, 0, 0, 0, 1],
            vlan: vlan.then_some(VlanTag {
                pcp: 3,
                dei: false,
                vid: 10,
            }),
        },
        ip,
        udp: UdpRepr {
            src_port: 0xC000 + seed as u16,
            dst_port: ROCE_V2_UDP_PORT,
        },
        bth: BthRepr {
            opcode: op,
            solicited: false,
            mig_req: true,
            pad_count: 0,
            pkey: 0xFFFF,
            fecn: false,
            becn: op == Opcode::Cnp,
            dest_qp: 0x10_0000 + seed,
            ack_req: op.is_request(),
            psn: if op == Opcode::Cnp {
                0
            } else {
                0xFF_FF00 + seed
            },
        },
        reth: op.has_reth().then_some(RethRepr {
            va: 0x7000_0000,
            rkey: 9,
            dma_len: 64,
        }),
        aeth: op.has_aeth().then_some(AethRepr {
            syndrome: 0x1F,
            msn: seed,
        }),
        atomic_eth: op.has_atomic_eth().then_some(AtomicEthRepr {
            va: 0x7000_0008,
            rkey: 9,
            swap_add: 1,
            compare: 0,
        }),
        atomic_ack_eth: op
            .has_atomic_ack_eth()
            .then_some(AtomicAckEthRepr { orig: 5 }),
        immdt: op.has_immdt().then_some(0xABCD),
        ieth: op.has_ieth().then_some(9),
        deth: op.has_deth().then_some(DethRepr {
            qkey: 0x8001_0000,
            src_qp: 0x12_3456,
        }),
    }
}

#[test]
fn tshark_accepts_every_frame_the_encoder_writes() {
    let tshark = "tshark";
    let installed = Command::new(tshark)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        installed,
        "tshark is not installed: run scripts/setup-deps.sh (or apt-get install tshark)"
    );
    let mut frames = Vec::new();
    let mut expected = Vec::new();
    let mut seed = 0u32;
    for op in Opcode::ALL {
        for (v6, vlan) in [(false, false), (false, true), (true, false), (true, true)] {
            let h = headers(op, v6, vlan, seed);
            let len = if op.has_payload() {
                29 + seed as usize % 4
            } else {
                0
            };
            let len = if op.is_first() || op.is_middle() {
                256
            } else {
                len
            };
            let payload: Vec<u8> = (0..len).map(|i| i as u8).collect();
            let mut buf = vec![0u8; frame_len(&h, len)];
            emit_frame(&h, &payload, &mut buf).unwrap();
            frames.push(buf);
            expected.push((op.as_u8(), h.bth.dest_qp, h.bth.psn, v6));
            seed += 1;
        }
    }
    let file = pcap::write_classic(frames.iter().map(|f| (0u64, &f[..])));
    let path =
        std::env::temp_dir().join(format!("roce-xdp-wire-tshark-{}.pcap", std::process::id()));
    std::fs::write(&path, file).unwrap();
    let out = Command::new(tshark)
        .args(["-r", path.to_str().unwrap(), "-o", "ip.check_checksum:TRUE"])
        .args([
            "-o",
            "udp.check_checksum:TRUE",
            "-T",
            "fields",
            "-E",
            "separator=|",
        ])
        .args(["-e", "frame.protocols", "-e", "infiniband.bth.opcode"])
        .args(["-e", "infiniband.bth.destqp", "-e", "infiniband.bth.psn"])
        .args(["-e", "ip.checksum.status", "-e", "udp.checksum.status"])
        .args(["-e", "_ws.expert.severity", "-e", "_ws.malformed"])
        .output()
        .unwrap();
    std::fs::remove_file(&path).ok();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), expected.len());
    let num = |s: &str| {
        u32::from_str_radix(
            s.trim_start_matches("0x"),
            if s.starts_with("0x") { 16 } else { 10 },
        )
        .unwrap()
    };
    for (i, (line, (op, qp, psn, v6))) in lines.iter().zip(expected).enumerate() {
        let f: Vec<&str> = line.split('|').collect();
        let ctx = format!("frame {} ({line})", i + 1);
        assert!(f[0].split(':').any(|p| p == "infiniband"), "{ctx}");
        assert_eq!(num(f[1]), op as u32, "{ctx}");
        assert_eq!(num(f[2]), qp, "{ctx}");
        assert_eq!(num(f[3]), psn, "{ctx}");
        if v6 {
            assert_eq!(f[5], "1", "IPv6 UDP checksum good: {ctx}");
        } else {
            assert_eq!(f[4], "1", "IPv4 header checksum good: {ctx}");
            assert_eq!(f[5], "3", "IPv4 UDP checksum absent (0): {ctx}");
        }
        assert_eq!(f[6], "", "no expert info: {ctx}");
        assert_eq!(f[7], "", "not malformed: {ctx}");
    }
}

/// The ICRC of a whole frame as the RoCE v2 annex (A17.4) defines it,
/// computed here from the bytes alone, knowing nothing of opcodes: CRC-32
/// over 8 bytes of 0xFF, the IP header with its variant fields set to
/// ones (IPv4 TOS, TTL, checksum; IPv6 traffic class, flow label, hop
/// limit), the UDP header with its checksum set to ones, the BTH with its
/// reserved/FECN/BECN byte set to ones, and everything after it up to
/// the ICRC; sent least significant byte first.
fn spec_icrc(frame: &[u8]) -> [u8; 4] {
    let ip_at = if frame[12..14] == [0x81, 0x00] {
        18
    } else {
        14
    };
    let mut p = frame[ip_at..frame.len() - 4].to_vec();
    let udp_at = if p[0] >> 4 == 4 {
        p[1] = 0xFF;
        p[8] = 0xFF;
        p[10] = 0xFF;
        p[11] = 0xFF;
        20
    } else {
        p[0] |= 0x0F;
        p[1] = 0xFF;
        p[2] = 0xFF;
        p[3] = 0xFF;
        p[7] = 0xFF;
        40
    };
    p[udp_at + 6] = 0xFF;
    p[udp_at + 7] = 0xFF;
    p[udp_at + 8 + 4] = 0xFF;
    let mut h = crc32fast::Hasher::new();
    h.update(&[0xFF; 8]);
    h.update(&p);
    h.finalize().to_le_bytes()
}

#[test]
fn the_spec_icrc_agrees_with_the_encoder_on_every_opcode() {
    for (seed, op) in Opcode::ALL.into_iter().enumerate() {
        for (v6, vlan) in [(false, false), (true, true)] {
            let h = headers(op, v6, vlan, seed as u32);
            let len = if op.has_payload() { 33 } else { 0 };
            let mut buf = vec![0u8; frame_len(&h, len)];
            emit_frame(&h, &vec![7u8; len], &mut buf).unwrap();
            assert_eq!(buf[buf.len() - 4..], spec_icrc(&buf), "{op} v6 {v6}");
        }
    }
}

/// The UD frames the encoder writes, as Wireshark reads them: InfiniBand
/// UD SEND ONLY (with immediate), the DETH's Q_Key and source QP, the
/// ImmDt, the payload, no expert warning, not malformed; and their ICRC
/// as the annex computes it ([`spec_icrc`]).
#[test]
fn tshark_dissects_ud_sends_with_their_deth() {
    let mut frames = Vec::new();
    let mut expected = Vec::new();
    let mut seed = 0u32;
    for op in [Opcode::UdSendOnly, Opcode::UdSendOnlyImm] {
        for (v6, vlan) in [(false, false), (false, true), (true, false), (true, true)] {
            for len in [0usize, 1, 2, 3, 64, 1024] {
                let mut h = headers(op, v6, vlan, seed);
                let deth = DethRepr {
                    qkey: 0x1000_0000 + seed,
                    src_qp: 0x20_0000 + seed,
                };
                h.deth = Some(deth);
                h.immdt = op.has_immdt().then_some(0xCAFE_0000 + seed);
                let payload: Vec<u8> = (0..len).map(|i| (i as u32 ^ seed) as u8).collect();
                let mut buf = vec![0u8; frame_len(&h, len)];
                emit_frame(&h, &payload, &mut buf).unwrap();
                assert_eq!(buf[buf.len() - 4..], spec_icrc(&buf));
                frames.push(buf);
                expected.push((op, h.bth.dest_qp, deth, h.immdt, payload));
                seed += 1;
            }
        }
    }
    let file = pcap::write_classic(frames.iter().map(|f| (0u64, &f[..])));
    let path = std::env::temp_dir().join(format!("roce-xdp-wire-ud-{}.pcap", std::process::id()));
    std::fs::write(&path, file).unwrap();
    let out = Command::new("tshark")
        .args([
            "-r",
            path.to_str().unwrap(),
            "-T",
            "fields",
            "-E",
            "separator=|",
        ])
        // A UD payload is opaque bytes: keep Wireshark's guesses at what
        // it carries (Mellanox EoIB, SDP, iSER, NVMe, SMB Direct) out.
        .args(["--disable-heuristic", "mellanox_eoib"])
        .args(["--disable-heuristic", "sdp_infiniband"])
        .args(["--disable-heuristic", "iser_infiniband"])
        .args(["--disable-heuristic", "nvme_rdma"])
        .args(["--disable-heuristic", "smb_direct_infiniband"])
        .args(["-e", "frame.protocols", "-e", "infiniband.bth.opcode"])
        .args(["-e", "infiniband.bth.destqp", "-e", "infiniband.deth.q_key"])
        .args(["-e", "infiniband.deth.srcqp", "-e", "infiniband.immdt"])
        .args(["-e", "data.data", "-e", "_ws.col.Info"])
        .args(["-e", "_ws.expert.severity", "-e", "_ws.malformed"])
        .output()
        .expect("tshark is not installed: run scripts/setup-deps.sh");
    std::fs::remove_file(&path).ok();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), expected.len());
    let num = |s: &str| {
        u64::from_str_radix(
            s.trim_start_matches("0x"),
            if s.starts_with("0x") { 16 } else { 10 },
        )
        .unwrap()
    };
    let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
    for (line, (op, qp, deth, imm, payload)) in lines.iter().zip(expected) {
        let f: Vec<&str> = line.split('|').collect();
        let ctx = line.to_string();
        assert!(f[0].split(':').any(|p| p == "infiniband"), "{ctx}");
        assert_eq!(num(f[1]), u64::from(op.as_u8()), "{ctx}");
        assert_eq!(num(f[2]), u64::from(qp), "{ctx}");
        assert_eq!(num(f[3]), u64::from(deth.qkey), "{ctx}");
        assert_eq!(num(f[4]), u64::from(deth.src_qp), "{ctx}");
        match imm {
            // (TShark 4.0 lists a UD ImmDt twice.)
            Some(v) => assert!(
                f[5].split(',')
                    .all(|x| x.replace(':', "") == format!("{v:08x}")),
                "{ctx}"
            ),
            None => assert_eq!(f[5], "", "{ctx}"),
        }
        // Wireshark shows the pad as payload.
        let mut padded = payload.clone();
        padded.resize(payload.len().div_ceil(4) * 4, 0);
        assert_eq!(f[6].replace(':', ""), hex(&padded), "{ctx}");
        let name = if op == Opcode::UdSendOnly {
            "UD Send Only"
        } else {
            "UD Send Only Immediate"
        };
        assert!(f[7].contains(name), "{ctx}");
        assert_eq!(f[8], "", "no expert info: {ctx}");
        assert_eq!(f[9], "", "not malformed: {ctx}");
    }
}

/// The UC frames the encoder writes (IBA 9.2 table 38, 0x20-0x2B), as
/// Wireshark reads them: its UC opcode name, the RETH of WRITE FIRST/ONLY
/// (VA, R_Key, length), the ImmDt of the `_WITH_IMMEDIATE` ones, the
/// payload, no expert warning, not malformed; and their ICRC as the
/// annex computes it ([`spec_icrc`]).
#[test]
fn tshark_dissects_uc_sends_and_writes_with_their_headers() {
    let ops: Vec<Opcode> = Opcode::ALL.into_iter().filter(|o| o.is_uc()).collect();
    assert_eq!(ops.len(), 12);
    let mut frames = Vec::new();
    let mut expected = Vec::new();
    let mut seed = 0u32;
    for &op in &ops {
        for (v6, vlan) in [(false, false), (true, true)] {
            let mut h = headers(op, v6, vlan, seed);
            h.bth.ack_req = false;
            if let Some(r) = h.reth.as_mut() {
                r.va = 0x1_2345_6789_AB00 + u64::from(seed);
                r.rkey = 0x00AB_0000 + seed;
                r.dma_len = 4096 + seed;
            }
            h.immdt = op.has_immdt().then_some(0xBEEF_0000 + seed);
            let len = if op.is_first() || op.is_middle() {
                256
            } else {
                1 + seed as usize % 61
            };
            let payload: Vec<u8> = (0..len).map(|i| ((i as u32 * 3) ^ seed) as u8).collect();
            let mut buf = vec![0u8; frame_len(&h, len)];
            emit_frame(&h, &payload, &mut buf).unwrap();
            assert_eq!(buf[buf.len() - 4..], spec_icrc(&buf), "{op}");
            frames.push(buf);
            expected.push((op, h.bth.psn, h.reth, h.immdt, payload));
            seed += 1;
        }
    }
    let file = pcap::write_classic(frames.iter().map(|f| (0u64, &f[..])));
    let path = std::env::temp_dir().join(format!("roce-xdp-wire-uc-{}.pcap", std::process::id()));
    std::fs::write(&path, file).unwrap();
    let out = Command::new("tshark")
        .args(["-r", path.to_str().unwrap(), "-T", "fields"])
        .args(["-E", "separator=|"])
        .args(["--disable-heuristic", "mellanox_eoib"])
        .args(["--disable-heuristic", "sdp_infiniband"])
        .args(["--disable-heuristic", "iser_infiniband"])
        .args(["--disable-heuristic", "nvme_rdma"])
        .args(["--disable-heuristic", "smb_direct_infiniband"])
        .args(["-e", "infiniband.bth.opcode", "-e", "infiniband.bth.psn"])
        .args(["-e", "infiniband.reth.va", "-e", "infiniband.reth.r_key"])
        .args(["-e", "infiniband.reth.dmalen", "-e", "infiniband.immdt"])
        .args(["-e", "data.data", "-e", "_ws.col.Info"])
        .args(["-e", "_ws.expert.severity", "-e", "_ws.malformed"])
        .output()
        .expect("tshark is not installed: run scripts/setup-deps.sh");
    std::fs::remove_file(&path).ok();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), expected.len());
    let num = |s: &str| {
        u64::from_str_radix(
            s.trim_start_matches("0x"),
            if s.starts_with("0x") { 16 } else { 10 },
        )
        .unwrap()
    };
    let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
    for (line, (op, psn, reth, imm, payload)) in lines.iter().zip(expected) {
        let f: Vec<&str> = line.split('|').collect();
        let ctx = line.to_string();
        assert_eq!(num(f[0]), u64::from(op.as_u8()), "{ctx}");
        assert_eq!(num(f[1]), u64::from(psn), "{ctx}");
        match reth {
            Some(r) => {
                assert_eq!(num(f[2]), r.va, "{ctx}");
                assert_eq!(num(f[3]), u64::from(r.rkey), "{ctx}");
                assert_eq!(num(f[4]), u64::from(r.dma_len), "{ctx}");
            }
            None => assert_eq!((f[2], f[3], f[4]), ("", "", ""), "{ctx}"),
        }
        match imm {
            Some(v) => assert!(
                f[5].split(',')
                    .all(|x| x.replace(':', "") == format!("{v:08x}")),
                "{ctx}"
            ),
            None => assert_eq!(f[5], "", "{ctx}"),
        }
        let mut padded = payload.clone();
        padded.resize(payload.len().div_ceil(4) * 4, 0);
        assert_eq!(f[6].replace(':', ""), hex(&padded), "{ctx}");
        assert!(f[7].starts_with("UC "), "{ctx}");
        assert_eq!(f[8], "", "no expert info: {ctx}");
        assert_eq!(f[9], "", "not malformed: {ctx}");
    }
}
