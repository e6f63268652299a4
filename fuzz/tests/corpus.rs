//! Every committed seed (`corpus/TARGET/`) and every input a fuzzer once
//! crashed on (`regressions/TARGET/`) through its harness, on stable Rust
//! without AFL: `cargo test --release` in `fuzz/`.

use std::path::Path;

fn replay(target: &str, run: fn(&[u8])) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut n = 0;
    for dir in ["corpus", "regressions"] {
        let Ok(entries) = std::fs::read_dir(root.join(dir).join(target)) else {
            continue;
        };
        for e in entries {
            let path = e.unwrap().path();
            if path
                .file_name()
                .is_some_and(|f| f.to_string_lossy().starts_with('.'))
            {
                continue;
            }
            let data = std::fs::read(&path).unwrap();
            eprintln!("{}", path.display());
            run(&data);
            n += 1;
        }
    }
    assert!(n > 0, "no corpus for {target}");
}

#[test]
fn frame() {
    replay("frame", fuzz::frame::run);
}

#[test]
fn cm() {
    replay("cm", fuzz::cm::run);
}

/// Each seed does what it is named for.
#[test]
fn cm_seeds_reach_the_state_machines() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus/cm");
    let play = |seed: &str| fuzz::cm::play(&std::fs::read(root.join(seed)).unwrap());
    for seed in ["connect-disconnect", "passive-disconnects"] {
        let (a, b) = play(seed);
        assert_eq!(
            (a.established, b.established),
            (1, 1),
            "{seed}: {a:?} {b:?}"
        );
        assert_eq!((a.timewaits, b.timewaits), (1, 1), "{seed}: {a:?} {b:?}");
    }
    let (a, b) = play("reject");
    assert_eq!((a.rejects_received, b.rejects_sent), (1, 1));
    let (a, b) = play("mra-loss-retries");
    assert_eq!(a.mras_received, 1);
    assert!(a.retransmissions > 0 && b.duplicates > 0, "{a:?} {b:?}");
    let (a, b) = play("sidr");
    assert_eq!((b.accepted_mads, a.accepted_mads), (1, 1), "{a:?} {b:?}");
    let (a, _) = play("real-mads");
    assert_eq!(a.malformed, 0);
    // Its two REQs and its SIDR_REQ start connections on A.
    assert!(a.accepted_mads >= 3, "{a:?}");
    let (a, _) = play("forged-on-live");
    assert_eq!(a.mads_received, 5, "{a:?}");
    assert_eq!(a.accepted_mads, 2, "the REP and the forged DREQ: {a:?}");
}

/// Random programs and byte-flipped seeds, deterministic: the invariants
/// of `fuzz::cm` hold without AFL too.
#[test]
fn cm_random_programs() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus/cm");
    let seeds: Vec<Vec<u8>> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| std::fs::read(e.unwrap().path()).unwrap())
        .collect();
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for i in 0..20_000 {
        let data: Vec<u8> = if i % 2 == 0 {
            let len = (next() % 3000) as usize;
            (0..len).map(|_| next() as u8).collect()
        } else {
            let mut d = seeds[i / 2 % seeds.len()].clone();
            for _ in 0..=(next() % 6) {
                if d.is_empty() {
                    break;
                }
                let at = (next() as usize) % d.len();
                d[at] ^= next() as u8 | 1;
            }
            d
        };
        fuzz::cm::run(&data);
    }
}

#[test]
fn datagram() {
    replay("datagram", fuzz::datagram::run);
}

/// Each seed gets its frames into a QP (not only the validator): the UD
/// ones complete a receive there (checked against the frame), the UC
/// SEND and WRITE with immediate one, the WRITE none.
#[test]
fn datagram_seeds_reach_the_qps() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus/datagram");
    for (seed, ud, uc) in [
        ("ud-send", 1, 0),
        ("ud-send-imm", 1, 0),
        ("gsi", 1, 0),
        // 40 and 41 bytes: too small for GRH + 1 byte, the second never
        // used (the first's error moves the QP to ERROR, flushing it).
        ("ud-receives-too-small", 0, 0),
        ("ud-mtu-4096", 1, 0),
        ("uc-send", 0, 1),
        ("uc-write-imm", 0, 1),
        ("uc-write", 0, 0),
    ] {
        let o = fuzz::datagram::play(&std::fs::read(root.join(seed)).unwrap());
        assert!(o.counters.rcvd_pkts > 0, "{seed}: {o:?}");
        assert_eq!((o.ud_received, o.uc_received), (ud, uc), "{seed}: {o:?}");
    }
}

#[test]
fn pair() {
    replay("pair", fuzz::pair::run);
}

#[test]
fn pingpong() {
    replay("pingpong", fuzz::pingpong::run);
}

#[test]
fn pcap() {
    replay("pcap", fuzz::pcap::run);
}

#[test]
fn pair_seeds_reach_the_transport() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus/pair");
    for (seed, acks) in [
        ("write", true),
        ("read", false),
        ("send", true),
        ("atomics", false),
    ] {
        let data = std::fs::read(root.join(seed)).unwrap();
        let (a, b) = fuzz::pair::play(&data);
        assert!(
            a.sent_pkts > 0 && b.rcvd_pkts > 0,
            "{seed}: A {a:?}\nB {b:?}"
        );
        assert!(
            b.sent_pkts > 0 && a.rcvd_pkts > 0,
            "{seed}: nothing answered: B {b:?}"
        );
        if acks {
            assert!(b.acks_sent > 0, "{seed}: B {b:?}");
        }
        assert_eq!(b.naks_sent, 0, "{seed}: B {b:?}");
    }
}

#[test]
fn perftest_exchange() {
    replay("perftest_exchange", fuzz::perftest_exchange::run);
}
