//! Writes the seed corpora (`fuzz/corpus/TARGET/`) from the interop
//! captures (`interop/captures/`): `cargo run --release --bin seeds` in
//! `fuzz/`. Small on purpose (the repository keeps them):
//! - `frame`: one RoCE frame per opcode and size class seen;
//! - `pcap`: short classic captures of those frames, the same as pcapng
//!   (both byte orders' magic), and the smallest capture as it is;
//! - `pingpong`: the TCP payloads of the `ibv_rc_pingpong` exchange;
//! - `perftest_exchange`: both sides' streams of the recorded stock
//!   perftest sessions (`interop/perftest/transcripts/`);
//! - `cm`: programs of the CM harness (`fuzz::cm`): handshakes,
//!   rejects, MRA and loss, SIDR, destroy, forged MADs, real MADs;
//! - `pair`: short programs of the pair harness (post each kind of work,
//!   deliver, drop, mutate, time out; `fuzz::pair`);
//! - `datagram`: programs of the datagram harness (`fuzz::datagram`) that
//!   post receives and feed real UD and UC frames, written by the core's
//!   own sender (the harness's endpoint sending to itself).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use proto::wire::parse_frame_view;
use proto::wire::pcap::{write_classic, Reader};

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let captures = root.join("../interop/captures");
    let corpus = root.join("corpus");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&captures)
        .expect("interop/captures")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "pcap"))
        .collect();
    files.sort();

    // frame: the first frame of each (opcode, size class), at most 2 KiB.
    let mut frames: BTreeMap<(u8, usize), Vec<u8>> = BTreeMap::new();
    let mut tcp_payloads: Vec<Vec<u8>> = Vec::new();
    for f in &files {
        let bytes = std::fs::read(f).unwrap();
        for r in Reader::new(&bytes).unwrap().flatten() {
            if let Ok(v) = parse_frame_view(r.data) {
                let class = r.data.len().next_power_of_two();
                if r.data.len() <= 2048 {
                    frames
                        .entry((v.opcode().as_u8(), class))
                        .or_insert_with(|| r.data.to_vec());
                }
            } else if let Some(p) = tcp_payload(r.data) {
                if !tcp_payloads.contains(&p.to_vec()) {
                    tcp_payloads.push(p.to_vec());
                }
            }
        }
    }
    let dir = fresh(&corpus, "frame");
    for ((op, class), bytes) in &frames {
        std::fs::write(dir.join(format!("op{op:02x}-{class}")), bytes).unwrap();
    }

    // pcap: a few frames as classic pcap and as pcapng, both byte orders.
    let dir = fresh(&corpus, "pcap");
    let some: Vec<&Vec<u8>> = frames.values().take(6).collect();
    let classic = write_classic(
        some.iter()
            .enumerate()
            .map(|(i, f)| (1_700_000_000_000_000_000 + i as u64 * 1000, f.as_slice())),
    );
    std::fs::write(dir.join("classic-le"), &classic).unwrap();
    std::fs::write(dir.join("classic-be"), swap_classic(&classic)).unwrap();
    std::fs::write(dir.join("pcapng-le"), pcapng(&some, false)).unwrap();
    std::fs::write(dir.join("pcapng-be"), pcapng(&some, true)).unwrap();
    let smallest = files
        .iter()
        .min_by_key(|f| std::fs::metadata(f).unwrap().len())
        .unwrap();
    std::fs::copy(smallest, dir.join("smallest-capture")).unwrap();

    // pingpong: the exchange messages.
    let dir = fresh(&corpus, "pingpong");
    for (i, p) in tcp_payloads.iter().enumerate() {
        std::fs::write(dir.join(format!("msg{i}")), p).unwrap();
    }

    // perftest_exchange: each side's stream of the recorded stock perftest
    // sessions (its first 4 KiB: version, sizes, MTU, keys, a report).
    let dir = fresh(&corpus, "perftest_exchange");
    let mut streams = 0;
    for t in engine::oob::perftest_transcripts::TRANSCRIPTS {
        for side in ["c", "s"] {
            let mut b = t.stream(side);
            b.truncate(4096);
            std::fs::write(dir.join(format!("{}-{side}", t.name)), b).unwrap();
            streams += 1;
        }
    }

    // datagram: receives, then the core's own frames.
    let dir = fresh(&corpus, "datagram");
    let programs = datagram_programs();
    for (name, program) in &programs {
        std::fs::write(dir.join(name), program).unwrap();
    }
    println!("seeds: {} datagram programs", programs.len());

    // cm: programs of the CM harness (`fuzz::cm`), real MADs among them.
    let dir = fresh(&corpus, "cm");
    for (name, program) in fuzz::cm::seed_programs() {
        std::fs::write(dir.join(name), program).unwrap();
    }

    // pair: programs.
    let dir = fresh(&corpus, "pair");
    for (name, program) in pair_programs() {
        std::fs::write(dir.join(name), program).unwrap();
    }
    println!(
        "seeds: {} frames, {} pingpong messages, {streams} perftest streams, {} pair programs",
        frames.len(),
        tcp_payloads.len(),
        pair_programs().len()
    );
}

/// `corpus/NAME`, emptied.
fn fresh(corpus: &Path, name: &str) -> PathBuf {
    let dir = corpus.join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The TCP payload of an untagged IPv4 Ethernet frame, if non-empty.
fn tcp_payload(f: &[u8]) -> Option<&[u8]> {
    if f.len() < 14 + 20 || f[12..14] != [0x08, 0x00] || f[14 + 9] != 6 {
        return None;
    }
    let ihl = usize::from(f[14] & 0x0F) * 4;
    let total = usize::from(u16::from_be_bytes([f[16], f[17]]));
    let tcp = 14 + ihl;
    let off = usize::from(*f.get(tcp + 12)? >> 4) * 4;
    let p = f.get(tcp + off..14 + total)?;
    (!p.is_empty()).then_some(p)
}

/// A classic little-endian capture rewritten big-endian.
fn swap_classic(le: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(le.len());
    let word = |b: &[u8]| [b[3], b[2], b[1], b[0]];
    out.extend_from_slice(&word(&le[0..4]));
    out.extend_from_slice(&[le[5], le[4], le[7], le[6]]);
    for i in (8..24).step_by(4) {
        out.extend_from_slice(&word(&le[i..i + 4]));
    }
    let mut at = 24;
    while at + 16 <= le.len() {
        for i in (at..at + 16).step_by(4) {
            out.extend_from_slice(&word(&le[i..i + 4]));
        }
        let len = u32::from_le_bytes(le[at + 8..at + 12].try_into().unwrap()) as usize;
        out.extend_from_slice(&le[at + 16..at + 16 + len]);
        at += 16 + len;
    }
    out
}

/// A pcapng of `frames`: section header, one Ethernet interface, the
/// frames as enhanced packet blocks and the last one as a simple one.
fn pcapng(frames: &[&Vec<u8>], big_endian: bool) -> Vec<u8> {
    let w = |v: u32| {
        if big_endian {
            v.to_be_bytes()
        } else {
            v.to_le_bytes()
        }
    };
    let mut out = Vec::new();
    let mut block = |kind: u32, body: &[u8]| {
        let padded = body.len().div_ceil(4) * 4;
        let total = (12 + padded) as u32;
        out.extend_from_slice(&w(kind));
        out.extend_from_slice(&w(total));
        out.extend_from_slice(body);
        out.resize(out.len() + padded - body.len(), 0);
        out.extend_from_slice(&w(total));
    };
    let mut shb = Vec::new();
    shb.extend_from_slice(&w(0x1A2B_3C4D));
    shb.extend_from_slice(&if big_endian {
        [0, 1, 0, 0]
    } else {
        [1, 0, 0, 0]
    });
    shb.extend_from_slice(&[0xFF; 8]);
    block(0x0A0D_0D0A, &shb);
    let mut idb = Vec::new();
    let link = if big_endian {
        [0, 1, 0, 0]
    } else {
        [1, 0, 0, 0]
    };
    idb.extend_from_slice(&link);
    idb.extend_from_slice(&w(0));
    block(1, &idb);
    for (i, f) in frames.iter().enumerate() {
        if i + 1 == frames.len() {
            let mut spb = w(f.len() as u32).to_vec();
            spb.extend_from_slice(f);
            block(3, &spb);
            continue;
        }
        let mut epb = Vec::new();
        epb.extend_from_slice(&w(0));
        epb.extend_from_slice(&w(0x0006_0000));
        epb.extend_from_slice(&w(i as u32 * 1000));
        epb.extend_from_slice(&w(f.len() as u32));
        epb.extend_from_slice(&w(f.len() as u32));
        epb.extend_from_slice(f);
        block(6, &epb);
    }
    out
}

/// Steps of `fuzz::pair` (the op byte is `class << 1 | to_b_or_on_b`).
const DELIVER_TO_B: u8 = 0;
const DELIVER_TO_A: u8 = 1;
const DROP_TO_B: u8 = 80;
const DUP_TO_B: u8 = 96;
const MUTATE_TO_B: u8 = 124;
const MUTATE_TO_A: u8 = 125;
const FORGE_TO_A: u8 = 185;
const POST_ON_A: u8 = 200;
const POST_ON_B: u8 = 201;
const RECV_ON_A: u8 = 220;
const RECV_ON_B: u8 = 221;
const JUMP: u8 = 244;

/// A post_send step: kind (0 WRITE, 1 WRITE_IMM, 2 SEND, 3 SEND_IMM, 4
/// READ, 6 FETCH_ADD, 7 CMP_SWAP), length, offsets, key 3 = the data
/// region's, then imm, compare/add, swap.
fn post(on: u8, kind: u8, len: u16, off: u16) -> Vec<u8> {
    let mut v = vec![on, kind];
    if kind < 6 {
        v.extend_from_slice(&len.to_be_bytes());
    }
    v.extend_from_slice(&off.to_be_bytes());
    v.extend_from_slice(&off.to_be_bytes());
    v.push(3);
    v.extend_from_slice(&[0, 0, 0, 7]);
    v.extend_from_slice(&[0; 7]);
    v.push(1);
    v.extend_from_slice(&[0; 8]);
    v
}

fn deliver_all(n: usize) -> Vec<u8> {
    [DELIVER_TO_B, DELIVER_TO_A].repeat(n)
}

fn pair_programs() -> Vec<(&'static str, Vec<u8>)> {
    let head = vec![1, 3]; // MTU 1024, max_rd_atomic 4
    let recv = |on| vec![on, 0x10, 0x00, 0x00, 0x00]; // 4 KiB at offset 0
    let p = |parts: &[Vec<u8>]| [vec![head.clone()], parts.to_vec()].concat().concat();
    vec![
        ("write", p(&[post(POST_ON_A, 0, 3000, 0), deliver_all(12)])),
        ("read", p(&[post(POST_ON_A, 4, 5000, 64), deliver_all(16)])),
        (
            "send",
            p(&[recv(RECV_ON_B), post(POST_ON_A, 2, 2000, 0), deliver_all(8)]),
        ),
        (
            "write-imm-both-ways",
            p(&[
                recv(RECV_ON_A),
                recv(RECV_ON_B),
                post(POST_ON_A, 1, 100, 0),
                post(POST_ON_B, 3, 40, 128),
                deliver_all(8),
            ]),
        ),
        (
            "atomics",
            p(&[
                post(POST_ON_A, 6, 8, 256),
                post(POST_ON_A, 7, 8, 512),
                deliver_all(6),
            ]),
        ),
        (
            "loss-and-timeout",
            p(&[
                post(POST_ON_A, 0, 4000, 0),
                vec![DROP_TO_B, DELIVER_TO_B, DUP_TO_B],
                deliver_all(4),
                vec![JUMP],
                deliver_all(8),
            ]),
        ),
        (
            "mutated-request",
            p(&[
                post(POST_ON_A, 0, 1500, 0),
                vec![MUTATE_TO_B, 0, 1, 0x10],
                deliver_all(6),
            ]),
        ),
        (
            "mutated-response",
            p(&[
                post(POST_ON_A, 4, 3000, 0),
                vec![DELIVER_TO_B, MUTATE_TO_A, 1, 0, 0x20],
                deliver_all(6),
            ]),
        ),
        (
            "forged-atomic-ack",
            p(&[
                post(POST_ON_A, 0, 100, 0),
                post(POST_ON_A, 2, 10, 0),
                vec![FORGE_TO_A, 0, 0, 18],
                deliver_all(6),
            ]),
        ),
    ]
}

/// Programs of `fuzz::datagram`: the header (UC QPs' access flags, MTUs),
/// receives, then frames the harness's own endpoint sent (UD datagrams to
/// itself, UC packets from its QP A to its QP B).
fn datagram_programs() -> Vec<(&'static str, Vec<u8>)> {
    use fuzz::datagram::{frame_step, uc_recv_step, ud_recv_step, World, QKEY};
    use proto::rc::SendOp;
    use proto::ud::{GSI_QKEY, GSI_QPN};
    // UC: both QPs take WRITEs (access bits 1 and 1); UD MTU 1024 or
    // 4096, UC MTU 1024.
    const UC_WRITE: u8 = 0b0101;
    const MTU_1024: u8 = 0b0101;
    const MTU_UD_4096: u8 = 0b0110;
    let program = |mtu: u8, steps: Vec<Vec<u8>>, send: &dyn Fn(&mut World)| {
        let mut w = World::new(UC_WRITE, mtu);
        send(&mut w);
        let frames = w.seed_frames();
        assert!(!frames.is_empty());
        let mut p = vec![UC_WRITE, mtu];
        p.extend(steps.concat());
        for f in frames {
            p.extend(frame_step(&f));
        }
        p
    };
    let ud = |w: &World| w.ud;
    vec![
        (
            "ud-send",
            program(MTU_1024, vec![ud_recv_step(false, 6, 0)], &|w| {
                w.seed_ud_send(false, 100, ud(w), QKEY, None)
            }),
        ),
        (
            "ud-send-imm",
            program(MTU_1024, vec![ud_recv_step(false, 6, 0)], &|w| {
                w.seed_ud_send(false, 1024, ud(w), QKEY, Some(0x1234_5678))
            }),
        ),
        (
            "gsi",
            program(MTU_1024, vec![ud_recv_step(true, 5, 2048)], &|w| {
                w.seed_ud_send(true, 256, GSI_QPN, GSI_QKEY, None)
            }),
        ),
        (
            "ud-receives-too-small",
            program(
                MTU_1024,
                vec![ud_recv_step(false, 3, 0), ud_recv_step(false, 4, 100)],
                &|w| {
                    w.seed_ud_send(false, 1, ud(w), QKEY, None);
                    w.seed_ud_send(false, 1, ud(w), QKEY, None);
                },
            ),
        ),
        (
            "ud-mtu-4096",
            program(MTU_UD_4096, vec![ud_recv_step(false, 7, 0)], &|w| {
                w.seed_ud_send(false, 3000, ud(w), QKEY, None)
            }),
        ),
        (
            "uc-send",
            program(MTU_1024, vec![uc_recv_step(4096, 0)], &|w| {
                w.seed_uc_send(SendOp::Send, 2500)
            }),
        ),
        (
            "uc-write-imm",
            program(MTU_1024, vec![uc_recv_step(64, 4096)], &|w| {
                w.seed_uc_send(SendOp::WriteWithImm, 1500)
            }),
        ),
        (
            "uc-write",
            program(MTU_1024, vec![], &|w| w.seed_uc_send(SendOp::Write, 3000)),
        ),
    ]
}
