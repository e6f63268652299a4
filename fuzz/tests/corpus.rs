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
