//! `roce-xdp decode FILE`: print every RoCE v2 packet of a capture (classic
//! pcap or pcapng, Ethernet), one line each, or one JSON object per line
//! with `--json`. The ICRC is checked and reported, not used to drop the
//! frame. Frames that are not RoCE v2 are counted and skipped.

use std::fmt::Write as _;
use std::io::{self, BufWriter, Read, Write};
use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use engine::wire::pcap::{PcapError, Reader};
use engine::wire::{parse_frame_lenient, Ecn, IpRepr, ParseError, RoceFrame, Syndrome};
use serde_json::{json, Map, Value};

use crate::errors::UserError;

/// Decode the RoCE v2 packets of a capture file.
#[derive(Debug, Args)]
#[command(
    after_help = "Capture with e.g. `tcpdump -i eth0 -w roce.pcap udp port 4791`.\n\
JSON keys: frame, time_ns, src, dst, sport, dport, vlan, dscp, ecn, ttl|hop_limit, opcode, \
opcode_name, solicited, mig_req, pad, pkey, fecn, becn, dqpn, ack_req, psn, reth_va, reth_rkey, \
reth_len, atomic_va, atomic_rkey, atomic_swap_add, atomic_compare, immdt, ieth, aeth_syndrome, \
aeth_kind, aeth_msn, atomic_orig, payload_len, icrc, icrc_expected, icrc_ok \
(optional headers only when present); malformed RoCE frames give {frame, error}."
)]
pub struct DecodeArgs {
    /// Capture file (pcap or pcapng, Ethernet link type); `-` reads stdin
    /// (e.g. `tcpdump -w - udp port 4791 | roce-xdp decode -`).
    pub file: PathBuf,
    /// One JSON object per line instead of text.
    #[arg(long)]
    pub json: bool,
}

/// What was seen in the capture.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Totals {
    roce: u64,
    bad_icrc: u64,
    malformed: u64,
    not_roce: u64,
}

pub fn run(args: DecodeArgs) -> anyhow::Result<()> {
    let bytes = if args.file.as_os_str() == "-" {
        let mut buf = Vec::new();
        io::stdin()
            .read_to_end(&mut buf)
            .map_err(|e| UserError::Usage(format!("cannot read the capture from stdin: {e}")))?;
        buf
    } else {
        std::fs::read(&args.file)
            .map_err(|e| UserError::Usage(format!("cannot read {}: {e}", args.file.display())))?
    };
    let reader = Reader::new(&bytes)
        .map_err(|e| UserError::Usage(format!("{}: {e}", args.file.display())))?;
    let stdout = io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let mut totals = Totals::default();
    let mut truncated = None;
    for (index, record) in reader.enumerate() {
        let record = match record {
            Ok(r) => r,
            Err(e @ (PcapError::Truncated(_) | PcapError::BadBlock(_))) => {
                truncated = Some(e);
                break;
            }
            Err(e) => return Err(UserError::Usage(format!("{}: {e}", args.file.display())).into()),
        };
        let number = index as u64 + 1;
        let line = match parse_frame_lenient(record.data) {
            Ok((frame, expected)) => {
                totals.roce += 1;
                if frame.icrc != expected {
                    totals.bad_icrc += 1;
                }
                if args.json {
                    to_json(number, record.timestamp_ns, &frame, expected).to_string()
                } else {
                    to_text(number, &frame, expected)
                }
            }
            Err(ParseError::NotRoce) => {
                totals.not_roce += 1;
                continue;
            }
            Err(e) => {
                totals.malformed += 1;
                if args.json {
                    json!({ "frame": number, "error": e.to_string() }).to_string()
                } else {
                    format!("#{number} malformed RoCE v2 frame: {e}")
                }
            }
        };
        if let Err(e) = writeln!(out, "{line}") {
            // A closed pipe (`| head`) ends the listing quietly.
            if e.kind() == io::ErrorKind::BrokenPipe {
                return Ok(());
            }
            return Err(e).context("writing to stdout");
        }
    }
    match out.flush() {
        Err(e) if e.kind() != io::ErrorKind::BrokenPipe => {
            return Err(e).context("writing to stdout")
        }
        _ => {}
    }
    if let Some(e) = truncated {
        eprintln!(
            "roce-xdp: warning: {}: {e}; decoded the frames before it",
            args.file.display()
        );
    }
    if !args.json {
        eprintln!(
            "{} RoCE v2 frame(s), {} with a bad ICRC, {} malformed; {} non-RoCE frame(s) skipped",
            totals.roce, totals.bad_icrc, totals.malformed, totals.not_roce
        );
    }
    Ok(())
}

fn ecn_name(ecn: Ecn) -> &'static str {
    match ecn {
        Ecn::NotEct => "Not-ECT",
        Ecn::Ect0 => "ECT(0)",
        Ecn::Ect1 => "ECT(1)",
        Ecn::Ce => "CE",
    }
}

fn to_json(number: u64, time_ns: u64, frame: &RoceFrame<'_>, expected_icrc: u32) -> Value {
    let h = &frame.headers;
    let mut m = Map::new();
    m.insert("frame".into(), json!(number));
    m.insert("time_ns".into(), json!(time_ns));
    match h.ip {
        IpRepr::V4 { src, dst, ttl, .. } => {
            m.insert("src".into(), json!(src.to_string()));
            m.insert("dst".into(), json!(dst.to_string()));
            m.insert("ttl".into(), json!(ttl));
        }
        IpRepr::V6 {
            src,
            dst,
            hop_limit,
            flow_label,
            ..
        } => {
            m.insert("src".into(), json!(src.to_string()));
            m.insert("dst".into(), json!(dst.to_string()));
            m.insert("hop_limit".into(), json!(hop_limit));
            m.insert("flow_label".into(), json!(flow_label));
        }
    }
    m.insert("sport".into(), json!(h.udp.src_port));
    m.insert("dport".into(), json!(h.udp.dst_port));
    m.insert(
        "vlan".into(),
        match h.eth.vlan {
            Some(v) => json!({ "vid": v.vid, "pcp": v.pcp, "dei": v.dei }),
            None => Value::Null,
        },
    );
    m.insert("dscp".into(), json!(h.ip.dscp()));
    m.insert("ecn".into(), json!(ecn_name(h.ip.ecn())));
    let b = &h.bth;
    m.insert("opcode".into(), json!(b.opcode.as_u8()));
    m.insert("opcode_name".into(), json!(b.opcode.name()));
    m.insert("solicited".into(), json!(b.solicited));
    m.insert("mig_req".into(), json!(b.mig_req));
    m.insert("pad".into(), json!(frame.pad));
    m.insert("pkey".into(), json!(b.pkey));
    m.insert("fecn".into(), json!(b.fecn));
    m.insert("becn".into(), json!(b.becn));
    m.insert("dqpn".into(), json!(b.dest_qp));
    m.insert("ack_req".into(), json!(b.ack_req));
    m.insert("psn".into(), json!(b.psn));
    if let Some(d) = h.deth {
        m.insert("deth_qkey".into(), json!(d.qkey));
        m.insert("deth_src_qp".into(), json!(d.src_qp));
    }
    if let Some(r) = h.reth {
        m.insert("reth_va".into(), json!(r.va));
        m.insert("reth_rkey".into(), json!(r.rkey));
        m.insert("reth_len".into(), json!(r.dma_len));
    }
    if let Some(a) = h.atomic_eth {
        m.insert("atomic_va".into(), json!(a.va));
        m.insert("atomic_rkey".into(), json!(a.rkey));
        m.insert("atomic_swap_add".into(), json!(a.swap_add));
        m.insert("atomic_compare".into(), json!(a.compare));
    }
    if let Some(v) = h.immdt {
        m.insert("immdt".into(), json!(v));
    }
    if let Some(v) = h.ieth {
        m.insert("ieth".into(), json!(v));
    }
    if let Some(a) = h.aeth {
        m.insert("aeth_syndrome".into(), json!(a.syndrome));
        m.insert(
            "aeth_kind".into(),
            json!(Syndrome::from_u8(a.syndrome).name()),
        );
        m.insert("aeth_msn".into(), json!(a.msn));
    }
    if let Some(a) = h.atomic_ack_eth {
        m.insert("atomic_orig".into(), json!(a.orig));
    }
    m.insert("payload_len".into(), json!(frame.payload.len()));
    m.insert("icrc".into(), json!(frame.icrc));
    m.insert("icrc_expected".into(), json!(expected_icrc));
    m.insert("icrc_ok".into(), json!(frame.icrc == expected_icrc));
    Value::Object(m)
}

fn to_text(number: u64, frame: &RoceFrame<'_>, expected_icrc: u32) -> String {
    let h = &frame.headers;
    let mut s = String::with_capacity(160);
    let (src, dst) = match h.ip {
        IpRepr::V4 { src, dst, .. } => (src.to_string(), dst.to_string()),
        IpRepr::V6 { src, dst, .. } => (format!("[{src}]"), format!("[{dst}]")),
    };
    let _ = write!(
        s,
        "#{number} {src}:{} > {dst}:{}",
        h.udp.src_port, h.udp.dst_port
    );
    if let Some(v) = h.eth.vlan {
        let _ = write!(s, " vlan {}", v.vid);
    }
    if h.ip.ecn() != Ecn::NotEct {
        let _ = write!(s, " {}", ecn_name(h.ip.ecn()));
    }
    let b = &h.bth;
    let _ = write!(
        s,
        " {} qp {:#08x} psn {}",
        b.opcode.name(),
        b.dest_qp,
        b.psn
    );
    if b.ack_req {
        s.push_str(" A");
    }
    if b.solicited {
        s.push_str(" SE");
    }
    if b.fecn {
        s.push_str(" FECN");
    }
    if b.becn {
        s.push_str(" BECN");
    }
    if b.pkey != engine::wire::DEFAULT_PKEY {
        let _ = write!(s, " pkey {:#06x}", b.pkey);
    }
    if let Some(d) = h.deth {
        let _ = write!(s, " qkey {:#010x} src qp {:#08x}", d.qkey, d.src_qp);
    }
    if let Some(r) = h.reth {
        let _ = write!(
            s,
            " reth va {:#x} rkey {:#x} dmalen {}",
            r.va, r.rkey, r.dma_len
        );
    }
    if let Some(a) = h.atomic_eth {
        let _ = write!(
            s,
            " atomic va {:#x} rkey {:#x} swap_add {:#x} compare {:#x}",
            a.va, a.rkey, a.swap_add, a.compare
        );
    }
    if let Some(v) = h.immdt {
        let _ = write!(s, " imm {v:#010x}");
    }
    if let Some(v) = h.ieth {
        let _ = write!(s, " inv rkey {v:#x}");
    }
    if let Some(a) = h.aeth {
        let kind = Syndrome::from_u8(a.syndrome);
        let detail = match kind {
            Syndrome::Ack { credits } => format!("credits {credits}"),
            Syndrome::RnrNak { timer } => {
                format!(
                    "timer {timer} ({} us)",
                    engine::wire::rnr_timer_micros(timer)
                )
            }
            Syndrome::Nak(code) => format!("code {code}"),
            Syndrome::Reserved(raw) => format!("{raw:#04x}"),
        };
        let _ = write!(s, " aeth {} {detail} msn {}", kind.name(), a.msn);
    }
    if let Some(a) = h.atomic_ack_eth {
        let _ = write!(s, " orig {:#x}", a.orig);
    }
    let _ = write!(s, " payload {}", frame.payload.len());
    if frame.pad != 0 {
        let _ = write!(s, " pad {}", frame.pad);
    }
    if frame.icrc == expected_icrc {
        s.push_str(" icrc ok");
    } else {
        let _ = write!(
            s,
            " icrc BAD ({:#010x}, expected {:#010x})",
            frame.icrc, expected_icrc
        );
    }
    s
}
