//! The agent's MADs in a RoCE v2 frame (UD SEND_ONLY to QP 1, Q_Key
//! 0x80010000), decoded by tshark 4.0's InfiniBand dissector: every field
//! we set reads back as we meant it. Fails when tshark is not installed
//! (`scripts/setup-deps.sh` installs it), as `tests/wire/tshark.rs`.

use std::net::Ipv4Addr;
use std::process::Command;

use proto::cm::mad::*;
use proto::cm::CmAgent;
use proto::time::Instant;
use proto::wire::*;

use crate::support::*;

fn frame(mad: &[u8]) -> Vec<u8> {
    let headers = RoceHeaders {
        eth: EthRepr {
            dst: [2, 0, 0, 0, 0, 2],
            src: [2, 0, 0, 0, 0, 1],
            vlan: None,
        },
        ip: IpRepr::V4 {
            src: Ipv4Addr::new(10, 0, 0, 1),
            dst: Ipv4Addr::new(10, 0, 0, 2),
            dscp: 0,
            ecn: Ecn::NotEct,
            ttl: 64,
            ident: 1,
            dont_fragment: true,
        },
        udp: UdpRepr {
            src_port: 0xC000,
            dst_port: ROCE_V2_UDP_PORT,
        },
        bth: BthRepr {
            opcode: Opcode::UdSendOnly,
            solicited: false,
            mig_req: false,
            pad_count: 0,
            pkey: 0xFFFF,
            fecn: false,
            becn: false,
            dest_qp: 1,
            ack_req: false,
            psn: 0,
        },
        reth: None,
        aeth: None,
        atomic_eth: None,
        atomic_ack_eth: None,
        immdt: None,
        ieth: None,
        deth: Some(DethRepr {
            qkey: GSI_QKEY,
            src_qp: 1,
        }),
    };
    let mut buf = vec![0u8; frame_len(&headers, mad.len())];
    let n = emit_frame(&headers, mad, &mut buf).unwrap();
    buf.truncate(n);
    buf
}

/// tshark's verbose decode of the MADs (each in a frame of its own).
fn decode(mads: &[[u8; 256]]) -> String {
    let frames: Vec<Vec<u8>> = mads.iter().map(|m| frame(m)).collect();
    let pcap = pcap::write_classic(
        frames
            .iter()
            .enumerate()
            .map(|(i, f)| (i as u64 * 1000, &f[..])),
    );
    let path = std::env::temp_dir().join(format!("cm-tshark-{}.pcap", std::process::id()));
    std::fs::write(&path, pcap).unwrap();
    let out = Command::new("tshark")
        .args(["-o", "infiniband.identify_payload:TRUE", "-r"])
        .arg(&path)
        .arg("-V")
        .output()
        .expect("tshark (scripts/setup-deps.sh installs it)");
    let _ = std::fs::remove_file(&path);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Frame `n`'s (1-based) part of tshark's output.
fn frame_text(all: &str, n: usize) -> &str {
    let start = all.find(&format!("Frame {n}:")).unwrap();
    let end = all.find(&format!("Frame {}:", n + 1)).unwrap_or(all.len());
    &all[start..end]
}

fn has(text: &str, needle: &str) {
    assert!(
        text.lines().any(|l| l.trim_end().ends_with(needle)),
        "tshark output lacks {needle:?}:\n{text}"
    );
}

#[test]
fn tshark_decodes_every_field_of_req_rep_rtu_dreq_drep_rej() {
    let mut p = Pair::new();
    let mut pd = [0u8; 92];
    let hdr = proto::cm::ip::IpCmHeader {
        src_port: 0xC350,
        src: "10.0.0.1".parse().unwrap(),
        dst: "10.0.0.2".parse().unwrap(),
    };
    hdr.emit(&mut pd).unwrap();
    pd[36..].fill(0x5A);
    let mut cp = connect_params(0xAB_CDEF, &pd);
    cp.path_mtu = 5;
    cp.retry_count = 6;
    cp.rnr_retry_count = 5;
    cp.max_cm_retries = 9;
    cp.srq = true;
    let ca = p.a.connect(p.now, &cp).unwrap();
    let req = take_one(&mut p.a, p.now, REQ);
    p.b.handle_mad(p.now, &addr(1), &req);
    let cb = events(&mut p.b)[0].conn();
    p.b.accept(p.now, cb, &accept_params(0x12_3456, b""))
        .unwrap();
    let rep = take_one(&mut p.b, p.now, REP);
    p.a.handle_mad(p.now, &addr(2), &rep);
    events(&mut p.a);
    p.a.send_rtu(p.now, ca, b"").unwrap();
    let rtu = take_one(&mut p.a, p.now, RTU);
    p.b.handle_mad(p.now, &addr(1), &rtu);
    p.a.disconnect(p.now, ca, b"").unwrap();
    let dreq = take_one(&mut p.a, p.now, DREQ);
    p.b.handle_mad(p.now, &addr(1), &dreq);
    p.b.disconnect(p.now, cb, b"").unwrap();
    let drep = take_one(&mut p.b, p.now, DREP);
    let mut c = CmAgent::new(config(3));
    c.connect(Instant::ZERO, &connect_params(5, b"")).unwrap();
    take(&mut c, Instant::ZERO);
    let mut rej = [0u8; 256];
    let mut r = Rej::new_checked(&mut rej[..]).unwrap();
    r.header_mut().fill_cm(0x42, AttrId::Rej);
    r.set_remote_comm_id(ca);
    r.set_message_rejected(msg_code::REQ);
    r.set_reason(rej_reason::CONSUMER_DEFINED);
    let mra = {
        p.b.listen(0x0106_0001, 0).unwrap();
        let mut cp = connect_params(0x33, b"");
        cp.service_id = 0x0106_0001;
        p.a.connect(p.now, &cp).unwrap();
        let req2 = take_one(&mut p.a, p.now, REQ);
        p.b.handle_mad(p.now, &addr(1), &req2);
        let c2 = events(&mut p.b).last().unwrap().conn();
        p.b.send_mra(p.now, c2, 17).unwrap();
        take_one(&mut p.b, p.now, MRA)
    };
    let all = decode(&[req, rep, rtu, dreq, drep, rej, mra]);

    let tid = format!("Transaction ID: 0x0000ab01{ca:08x}");
    let t = frame_text(&all, 1);
    for f in [
        "Opcode: Unreliable Datagram (UD) - SEND only (100)",
        "Destination Queue Pair: 0x000001",
        "Queue Key: 0x0000000080010000",
        "Source Queue Pair: 0x00000001",
        "Base Version: 0x01",
        "Management Class: 0x07",
        "Class Version: 0x02",
        "Method: Send() (0x03)",
        "Status: 0x0000",
        &tid,
        "Attribute ID: 0x0010",
        "CM ConnectRequest",
        &format!("Local Communication ID: 0x{ca:08x}"),
        "Protocol: 0x06",
        "Destination Port: 0x4e20",
        "Local CA GUID: 0x020000fffe000001",
        "Local Q_Key: 0x00000000",
        "Local QPN: 0xabcdef",
        "Responder Resources: 0x04",
        "Initiator Depth: 0x02",
        "Remote CM Response Timeout: 0x08",
        "Transport Service Type: 0x0",
        "End-to-End Flow Control: 0x1",
        "Starting PSN: 0x123456",
        "Local CM Response Timeout: 0x08",
        "Retry Count: 0x6",
        "Partition Key: 0xffff",
        "Path Packet Payload MTU: 0x5",
        "RDC Exists: 0x0",
        "RNR Retry Count: 0x5",
        "Max CM Retries: 0x9",
        "SRQ: 0x1",
        "Extended Transport: 0x0",
        "Primary Local Port LID: 65535",
        "Primary Remote Port LID: 65535",
        "Primary Local Port GID: 10.0.0.1",
        "Primary Remote Port GID: 10.0.0.2",
        // (tshark 4.0 reads the flow label / packet rate word of bytes
        // 88..92 as 24 bits: those two are checked against the tables in
        // codec.rs instead.)
        "Primary Traffic Class: 0x28",
        "Primary Hop Limit: 0x40",
        "Primary SL: 0x0",
        "Primary Subnet Local: 0x0",
        "Primary Local ACK Timeout: 0x0f",
        "Alternate Local Port LID: 0",
        "IP CM Major Version: 0x0",
        "IP CM Minor Version: 0x0",
        "IP CM IP Version: 0x4",
        "IP CM Source Port: 0xc350",
    ] {
        has(t, f);
    }
    let t = frame_text(&all, 2);
    for f in [
        &tid,
        "Attribute ID: 0x0013",
        &format!("Local Communication ID: 0x{cb:08x}"),
        &format!("Remote Communication ID: 0x{ca:08x}"),
        "Local QPN: 0x123456",
        "Starting PSN: 0x654321",
        "Responder Resources: 0x02",
        "Initiator Depth: 0x04",
        "Target ACK Delay: 0x0f",
        "Failover Accepted: 0x0",
        "End-To-End Flow Control: 0x1",
        "RNR Retry Count: 0x7",
        "SRQ: 0x0",
        "Local CA GUID: 0x020000fffe000002",
    ] {
        has(t, f);
    }
    let t = frame_text(&all, 3);
    has(t, "Attribute ID: 0x0014");
    has(t, &format!("Local Communication ID: 0x{ca:08x}"));
    has(t, &format!("Remote Communication ID: 0x{cb:08x}"));
    let t = frame_text(&all, 4);
    has(t, "Attribute ID: 0x0015");
    has(t, &format!("Local Communication ID: 0x{ca:08x}"));
    has(t, &format!("Remote Communication ID: 0x{cb:08x}"));
    has(t, "Remote QPN/EECN: 0x123456");
    let t = frame_text(&all, 5);
    has(t, "Attribute ID: 0x0016");
    has(t, &tid);
    has(t, &format!("Local Communication ID: 0x{cb:08x}"));
    let t = frame_text(&all, 6);
    has(t, "Attribute ID: 0x0012");
    has(t, "Transaction ID: 0x0000000000000042");
    has(t, "Local Communication ID: 0x00000000");
    has(t, &format!("Remote Communication ID: 0x{ca:08x}"));
    has(t, "Reason: 0x001c");
    let t = frame_text(&all, 7);
    has(t, "Attribute ID: 0x0011");
    // tshark 4.0 has no MRA dissector: its raw data is our comm ID, the
    // REQ's, "REQ" (0) in bits 7:6 and the service timeout 17 in bits 7:3.
    has(t, "CM MsgRcptAck (Dissector Not Implemented)");
    let c2 = ca + 1;
    let raw = format!("MAD Data Payload: {:08x}{c2:08x}0088", cb + 1);
    assert!(t.contains(&raw), "{raw} not in {t}");
    for t in (1..=7).map(|n| frame_text(&all, n)) {
        assert!(
            !t.contains("Malformed") && !t.contains("Expert Info"),
            "{t}"
        );
    }
}
