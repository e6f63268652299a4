//! `roce-xdp decode` on the committed Scapy vectors: JSON lines parse, carry
//! the documented keys, and `icrc_ok` is false exactly on the frames the
//! manifest says were corrupted; a file that is not a capture exits 2.

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

use crate::roce_xdp;

fn vectors() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../engine/proto/tests/vectors")
}

fn manifest() -> Vec<Value> {
    let text = std::fs::read_to_string(vectors().join("roce_vectors.json")).unwrap();
    let v: Value = serde_json::from_str(&text).unwrap();
    v["frames"].as_array().unwrap().clone()
}

fn decode(args: &[&str]) -> std::process::Output {
    roce_xdp(&[&["decode"], args].concat())
}

#[test]
fn json_lines_match_the_manifest() {
    let pcap = vectors().join("roce_vectors.pcap");
    let out = decode(&[pcap.to_str().unwrap(), "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let manifest = manifest();
    let roce: Vec<&Value> = manifest.iter().filter(|e| e["roce"] == true).collect();
    assert_eq!(
        lines.len(),
        roce.len(),
        "one line per RoCE frame, non-RoCE skipped"
    );
    for (line, e) in lines.iter().zip(roce) {
        for key in [
            "frame",
            "opcode",
            "opcode_name",
            "dqpn",
            "psn",
            "ack_req",
            "payload_len",
            "icrc_ok",
        ] {
            assert!(line.get(key).is_some(), "frame {}: no {key}", e["frame"]);
        }
        assert_eq!(line["frame"], e["frame"]);
        assert_eq!(line["opcode"], e["opcode"]);
        assert_eq!(line["opcode_name"], e["opcode_name"]);
        assert_eq!(line["dqpn"], e["dqpn"]);
        assert_eq!(line["psn"], e["psn"]);
        assert_eq!(line["ack_req"], e["ack_req"]);
        assert_eq!(line["payload_len"], e["payload_len"]);
        assert_eq!(line["src"], e["src"]);
        assert_eq!(line["icrc_ok"], e["expect"] == "ok", "frame {}", e["frame"]);
        if !e["aeth"].is_null() {
            assert_eq!(line["aeth_syndrome"], e["aeth"]["syndrome"]);
            assert_eq!(line["aeth_msn"], e["aeth"]["msn"]);
        } else {
            assert!(line.get("aeth_syndrome").is_none());
        }
        if !e["reth"].is_null() {
            assert_eq!(line["reth_va"], e["reth"]["va"]);
            assert_eq!(line["reth_rkey"], e["reth"]["rkey"]);
            assert_eq!(line["reth_len"], e["reth"]["len"]);
        } else {
            assert!(line.get("reth_va").is_none());
        }
        if !e["vlan"].is_null() {
            assert_eq!(line["vlan"]["vid"], e["vlan"]["vid"]);
        }
    }
    assert!(lines.iter().any(|l| l["icrc_ok"] == false));
}

#[test]
fn text_mode_prints_one_line_per_packet_and_a_summary() {
    let pcap = vectors().join("roce_vectors.pcap");
    let out = decode(&[pcap.to_str().unwrap()]);
    assert!(out.status.success());
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    let m = manifest();
    let roce = m.iter().filter(|e| e["roce"] == true).count();
    let bad = m.iter().filter(|e| e["expect"] == "bad_icrc").count();
    let skipped = m.len() - roce;
    assert_eq!(stdout.lines().count(), roce);
    assert_eq!(
        stdout.lines().filter(|l| l.contains("icrc BAD")).count(),
        bad
    );
    assert!(stdout
        .lines()
        .next()
        .unwrap()
        .starts_with("#1 192.168.7.1:49152 > 192.168.7.2:4791"));
    assert!(stdout.contains("RDMA_READ_REQUEST") && stdout.contains("CNP"));
    assert!(
        stderr.contains(&format!("{roce} RoCE v2 frame(s), {bad} with a bad ICRC"))
            && stderr.contains(&format!("{skipped} non-RoCE frame(s) skipped")),
        "{stderr}"
    );
}

#[test]
fn a_file_that_is_not_a_capture_exits_2_with_one_line() {
    let path =
        std::env::temp_dir().join(format!("roce-xdp-decode-test-{}.txt", std::process::id()));
    std::fs::write(&path, b"this is not a pcap file\n").unwrap();
    let out = decode(&[path.to_str().unwrap()]);
    std::fs::remove_file(&path).ok();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("not a pcap"), "{stderr}");

    let out = decode(&["/nonexistent/capture.pcap"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn help_works() {
    let out = decode(&["--help"]);
    assert!(out.status.success());
    assert!(String::from_utf8(out.stdout).unwrap().contains("--json"));
}

#[test]
fn reads_the_capture_from_stdin() {
    use std::io::Write;
    use std::process::Stdio;
    let pcap = std::fs::read(vectors().join("roce_vectors.pcap")).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_roce-xdp"))
        .args(["decode", "-", "--json"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(&pcap).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let roce = manifest().iter().filter(|e| e["roce"] == true).count();
    assert_eq!(String::from_utf8(out.stdout).unwrap().lines().count(), roce);
}

#[test]
fn frames_captured_from_linux_rxe_all_have_a_good_icrc() {
    // Captured from the kernel's Soft-RoCE (see interop/): an independent
    // ICRC implementation, including NAKs after loss.
    let capture = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../interop/captures/rxe_pingpong_loss.pcap");
    let out = decode(&[capture.to_str().unwrap(), "--json"]);
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
    assert!(lines.len() > 100);
    assert!(lines.iter().all(|l| l["icrc_ok"] == true));
    assert!(lines.iter().any(|l| l["aeth_kind"] == "NAK_PSN_SEQ"));
    assert!(lines.iter().any(|l| l["opcode_name"] == "SEND_MIDDLE"));
}

/// The Scapy-made UD datagrams (`vectors/ud/`): each line names the UD
/// opcode and carries the DETH's Q_Key and source QP, with a good ICRC.
#[test]
fn ud_datagrams_show_their_deth() {
    let dir = vectors().join("ud");
    let text = std::fs::read_to_string(dir.join("ud_vectors.json")).unwrap();
    let manifest: Value = serde_json::from_str(&text).unwrap();
    let manifest = manifest["frames"].as_array().unwrap();
    let out = decode(&[dir.join("ud_vectors.pcap").to_str().unwrap(), "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), manifest.len());
    for (line, e) in lines.iter().zip(manifest) {
        assert_eq!(line["opcode"], e["opcode"]);
        let name = if e["opcode"] == 0x64 {
            "UD_SEND_ONLY"
        } else {
            "UD_SEND_ONLY_WITH_IMMEDIATE"
        };
        assert_eq!(line["opcode_name"], name);
        assert_eq!(line["deth_qkey"], e["qkey"]);
        assert_eq!(line["deth_src_qp"], e["src_qp"]);
        assert_eq!(line["dqpn"], e["dqpn"]);
        assert_eq!(line["icrc_ok"], true);
    }
}
