//! AF_XDP echo over a veth pair in namespaces this test creates: the XDP
//! program steers UDP 4791 to the socket, the echo loop sends it back,
//! the generator counts the echoes. Needs root.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use engine::driver::PollMode;
use engine::io::{XskConfig, XskSocket, ZeroCopy};
use engine::nic::{AttachMode, AttachedMode, SteerProgram};
use engine::testbed::echo::{echo, generate};
use engine::testbed::floor::udp_frame;
use engine::testbed::netns::{PairConfig, VethPair};

use crate::support::{frames_conserved, require_root};

fn run_echo(mode: AttachMode, frame_len: usize, mtu: u32) {
    let _exclusive = require_root();
    let pair = VethPair::create(&PairConfig {
        mtu,
        ..Default::default()
    })
    .expect("veth pair");
    let ready = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));

    // Echo side: namespace b.
    let b = pair.b.clone();
    let (ready2, stop2) = (ready.clone(), stop.clone());
    let echo_thread = std::thread::spawn(move || {
        b.enter().unwrap();
        let mut prog = SteerProgram::attach(&b.ifname, mode, false).unwrap();
        let mut cfg = XskConfig::new(&b.ifname, 0);
        cfg.zero_copy = ZeroCopy::Auto;
        let mut sock = XskSocket::open(&cfg).unwrap();
        prog.register_socket(0, &sock).unwrap();
        ready2.store(true, Ordering::SeqCst);
        let stats = echo(&mut sock, &stop2, PollMode::default());
        (
            stats,
            prog.counters().unwrap(),
            prog.mode(),
            sock.accounting(),
        )
    });
    while !ready.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(5));
    }

    // Generator side: namespace a.
    let a = pair.a.clone();
    let frame = udp_frame(&pair.a, &pair.b, 4791, frame_len);
    let gen = std::thread::spawn(move || {
        a.enter().unwrap();
        let mut prog = SteerProgram::attach(&a.ifname, mode, false).unwrap();
        let mut sock = XskSocket::open(&XskConfig::new(&a.ifname, 0)).unwrap();
        prog.register_socket(0, &sock).unwrap();
        let stats = generate(
            &mut sock,
            &frame,
            20_000,
            256,
            PollMode::default(),
            Duration::from_secs(5),
        );
        (stats, sock.accounting(), sock.counters())
    });
    let (gen_stats, gen_acc, gen_counters) = gen.join().unwrap();
    stop.store(true, Ordering::SeqCst);
    let (echo_stats, steer, attached, echo_acc) = echo_thread.join().unwrap();
    eprintln!(
        "echo {:?} frame {frame_len}: sent {} received {} in {:?} ({:.3} Mpps); steer {:?}; gen {:?}",
        attached,
        gen_stats.packets_sent,
        gen_stats.packets_received,
        gen_stats.elapsed,
        gen_stats.mpps(),
        steer,
        gen_counters
    );
    assert_eq!(gen_stats.packets_received, 20_000, "every packet echoed");
    assert_eq!(echo_stats.packets_received, 20_000);
    assert_eq!(gen_stats.bytes_received, 20_000 * frame_len as u64);
    assert!(steer.redirected >= 20_000);
    match mode {
        AttachMode::Native => assert_eq!(attached, AttachedMode::Native),
        AttachMode::Generic => assert_eq!(attached, AttachedMode::Generic),
        AttachMode::Auto => {}
    }
    for acc in [gen_acc, echo_acc] {
        frames_conserved(acc);
    }
}

#[test]
#[ignore = "needs root"]
fn echo_native_small_frames() {
    run_echo(AttachMode::Native, 128, 1500);
}

#[test]
#[ignore = "needs root"]
fn echo_generic_small_frames() {
    run_echo(AttachMode::Generic, 128, 1500);
}

#[test]
#[ignore = "needs root"]
fn echo_native_multi_buffer_frames() {
    // 4154 bytes: a 4096-byte PMTU RoCE frame, two UMEM frames.
    run_echo(AttachMode::Native, 4154, 4200);
}

#[test]
#[ignore = "needs root"]
fn echo_floor_runs_on_a_fresh_pair() {
    let _exclusive = require_root();
    let opts = engine::testbed::floor::FloorOptions {
        packets: 20_000,
        ..Default::default()
    };
    let r = engine::testbed::floor::run_echo_floor(&opts).unwrap();
    eprintln!(
        "echo floor: {:.3} Mpps, {:.2} Gb/s ({:?})",
        r.mpps, r.gbps, r.stats
    );
    assert_eq!(r.stats.packets_received, 20_000);
    assert_eq!(r.stats.bytes_received, 20_000 * opts.frame_len as u64);
}

/// veth has no AF_XDP zero-copy: `On` fails with a clear error, `Auto`
/// falls back to copy mode.
#[test]
#[ignore = "needs root"]
fn zero_copy_on_veth_errors_or_falls_back() {
    let _exclusive = require_root();
    let pair = VethPair::create(&PairConfig::default()).unwrap();
    let b = pair.b.clone();
    std::thread::spawn(move || {
        b.enter().unwrap();
        let _prog = SteerProgram::attach(&b.ifname, AttachMode::Native, false).unwrap();
        let mut cfg = XskConfig::new(&b.ifname, 0);
        cfg.zero_copy = ZeroCopy::On;
        let err = XskSocket::open(&cfg).unwrap_err();
        assert!(
            matches!(err, engine::io::XskError::ZeroCopyUnsupported { .. }),
            "{err}"
        );
        assert!(err.to_string().contains("zero-copy"), "{err}");
        cfg.zero_copy = ZeroCopy::Auto;
        let s = XskSocket::open(&cfg).unwrap();
        assert!(!s.is_zero_copy());
    })
    .join()
    .unwrap();
}
