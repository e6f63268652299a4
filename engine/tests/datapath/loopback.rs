//! Two engines over a veth pair in namespaces this test creates: WRITE,
//! SEND, READ and atomics, native and generic XDP, IPv4 and IPv6, PMTU
//! 1024 and 4096, with and without injected loss; every byte verified.
//! Needs root.

use engine::nic::AttachMode;
use engine::rc::Mtu;
use engine::testbed::scenarios::loopback::{run_loopback, LoopbackOp, LoopbackOptions};

use crate::support::require_root;

fn run(op: LoopbackOp, mode: AttachMode, ipv6: bool, mtu: Mtu, loss: f64) {
    let _exclusive = require_root();
    let messages = if loss > 0.0 { 150 } else { 300 };
    let opts = LoopbackOptions {
        op,
        messages,
        size: 3 * mtu.bytes() + 100,
        mtu,
        qps: 2,
        loss,
        mode,
        ipv6,
        // 4.2 ms: short enough for loss recovery, long enough for a loaded 2-core CI box.
        ack_timeout: 10,
        ..Default::default()
    };
    let r = run_loopback(&opts).expect("loopback runs");
    eprintln!(
        "{op:?} {mode:?} ipv6={ipv6} mtu={} loss={loss}: {} msgs, {} bytes, {} errors, {} retransmitted, {:.2} Gb/s, steer a {:?} b {:?}",
        mtu.bytes(),
        r.messages_completed,
        r.bytes_verified,
        r.data_errors,
        r.retransmitted_packets,
        r.gbps,
        r.steer_requester,
        r.steer_responder
    );
    assert!(r.success(messages), "{r:#?}");
    let size = if op == LoopbackOp::Atomic {
        8
    } else {
        opts.size as u64
    };
    assert_eq!(r.bytes_verified, messages * size);
    assert_eq!(
        r.attached_mode,
        if mode == AttachMode::Generic {
            "generic"
        } else {
            "native"
        }
    );
    if loss > 0.0 {
        assert!(r.steer_requester.dropped_impairment + r.steer_responder.dropped_impairment > 0);
        assert!(r.retransmitted_packets > 0);
    }
    if mtu == Mtu::Mtu4096 && op != LoopbackOp::Atomic {
        // Full-PMTU packets span two UMEM frames at the side that receives
        // the data; the fill ring hands out adjacent frames in order, so
        // they are read in place (the second piece moved back over the
        // frame's headroom), not copied out whole.
        let rx = if op == LoopbackOp::Read {
            &r.io_requester.socket
        } else {
            &r.io_responder.socket
        };
        eprintln!(
            "  multi-buffer packets received {}, linearized {}",
            rx.rx_multi_buffer, rx.rx_linearized
        );
        assert!(rx.rx_multi_buffer > 0, "{rx:?}");
        assert!(rx.rx_linearized * 10 <= rx.rx_multi_buffer, "{rx:?}");
    }
}

/// One test per row: name, operation, XDP attach mode, IPv6 or not, path
/// MTU, injected loss.
macro_rules! loopback_tests {
    ($($name:ident: $op:ident, $mode:ident, ipv6 $ipv6:literal, $mtu:ident, loss $loss:literal;)*) => {$(
        #[test]
        #[ignore = "needs root"]
        fn $name() {
            run(LoopbackOp::$op, AttachMode::$mode, $ipv6, Mtu::$mtu, $loss);
        }
    )*};
}

loopback_tests! {
    write_native_ipv4_pmtu4096: Write, Native, ipv6 false, Mtu4096, loss 0.0;
    write_generic_ipv6_pmtu1024: Write, Generic, ipv6 true, Mtu1024, loss 0.0;
    write_native_ipv6_pmtu1024_loss: Write, Native, ipv6 true, Mtu1024, loss 0.02;
    write_generic_ipv4_pmtu4096_loss: Write, Generic, ipv6 false, Mtu4096, loss 0.02;
    send_native_ipv4_pmtu4096: Send, Native, ipv6 false, Mtu4096, loss 0.0;
    send_generic_ipv6_pmtu1024: Send, Generic, ipv6 true, Mtu1024, loss 0.0;
    send_native_ipv6_pmtu1024_loss: Send, Native, ipv6 true, Mtu1024, loss 0.02;
    send_generic_ipv4_pmtu4096_loss: Send, Generic, ipv6 false, Mtu4096, loss 0.02;
    read_native_ipv4_pmtu4096: Read, Native, ipv6 false, Mtu4096, loss 0.0;
    read_generic_ipv6_pmtu1024: Read, Generic, ipv6 true, Mtu1024, loss 0.0;
    read_native_ipv6_pmtu1024_loss: Read, Native, ipv6 true, Mtu1024, loss 0.02;
    read_generic_ipv4_pmtu4096_loss: Read, Generic, ipv6 false, Mtu4096, loss 0.02;
    atomic_native_ipv4_pmtu4096: Atomic, Native, ipv6 false, Mtu4096, loss 0.0;
    atomic_generic_ipv6_pmtu1024: Atomic, Generic, ipv6 true, Mtu1024, loss 0.0;
    atomic_native_ipv6_pmtu1024_loss: Atomic, Native, ipv6 true, Mtu1024, loss 0.02;
    atomic_generic_ipv4_pmtu4096_loss: Atomic, Generic, ipv6 false, Mtu4096, loss 0.02;
}

/// Four QPs over two queues (two engine threads per side).
#[test]
#[ignore = "needs root"]
fn write_two_queues_four_qps() {
    let _exclusive = require_root();
    let opts = LoopbackOptions {
        op: LoopbackOp::Write,
        messages: 400,
        size: 8192,
        qps: 4,
        queues: 2,
        mode: AttachMode::Native,
        ..Default::default()
    };
    let r = run_loopback(&opts).unwrap();
    assert!(r.success(400), "{r:#?}");
    assert_eq!(r.bytes_verified, 400 * 8192);
}

/// Ping and a TCP exchange cross the same veth while a transfer runs.
#[test]
#[ignore = "needs root"]
fn kernel_traffic_flows_during_transfer() {
    let _exclusive = require_root();
    let opts = LoopbackOptions {
        op: LoopbackOp::Write,
        messages: 20_000,
        size: 4096,
        check_kernel_traffic: true,
        ..Default::default()
    };
    let r = run_loopback(&opts).unwrap();
    assert_eq!(
        r.kernel_traffic_ok,
        Some(true),
        "ping/TCP failed during the transfer"
    );
    assert!(r.success(20_000), "{r:#?}");
    // The kernel traffic was passed, not redirected.
    assert!(r.steer_responder.passed > 0 && r.steer_requester.passed > 0);
}

/// The XDP program's CE-marking impairment: marked frames still verify
/// (ICRC masks ECN; the IPv4 checksum is fixed incrementally) and the
/// responder sees the marks.
#[test]
#[ignore = "needs root"]
fn ce_marking_impairment_ipv4_and_ipv6() {
    let _exclusive = require_root();
    for ipv6 in [false, true] {
        let opts = LoopbackOptions {
            messages: 200,
            size: 4096,
            mtu: Mtu::Mtu1024,
            ce: 0.5,
            ipv6,
            ..Default::default()
        };
        let r = run_loopback(&opts).unwrap();
        assert!(r.success(200), "{r:#?}");
        assert!(r.steer_responder.ce_marked > 0, "{:?}", r.steer_responder);
        assert!(
            r.responder.np_ecn_marked_roce_packets > 0,
            "{:?}",
            r.responder
        );
        assert_eq!(r.responder.dropped_malformed, 0);
    }
}

/// `--pcap`: every RoCE frame both engines sent and received is captured
/// (each frame twice: once sent, once received) and parses with a valid ICRC.
#[test]
#[ignore = "needs root"]
fn capture_records_every_frame_both_ways() {
    let _exclusive = require_root();
    let (sink, rx) = engine::driver::capture_channel(1 << 16);
    let opts = LoopbackOptions {
        messages: 50,
        size: 5000,
        mtu: Mtu::Mtu1024,
        capture: Some(sink.clone()),
        ..Default::default()
    };
    let r = run_loopback(&opts).unwrap();
    assert!(r.success(50), "{r:#?}");
    drop(opts);
    drop(sink);
    let frames: Vec<_> = rx.into_iter().collect();
    let sent = r.requester.sent_pkts + r.responder.sent_pkts;
    assert_eq!(frames.len() as u64, 2 * sent);
    for f in &frames {
        engine::wire::parse_frame(&f.data).expect("captured frames are valid RoCE v2");
    }
}

/// `vlan`: every RoCE frame tagged (the XDP program steers RoCE inside one
/// 802.1Q tag), over IPv6 and with injected loss, byte-exact.
#[test]
#[ignore = "needs root"]
fn vlan_tagged_read_with_loss_ipv6() {
    let _exclusive = require_root();
    let opts = LoopbackOptions {
        op: LoopbackOp::Read,
        messages: 40,
        size: 100_000,
        mtu: engine::rc::Mtu::Mtu1024,
        ipv6: true,
        loss: 0.02,
        vlan: Some(engine::wire::VlanTag {
            pcp: 3,
            dei: false,
            vid: 100,
        }),
        ..Default::default()
    };
    let r = run_loopback(&opts).unwrap();
    assert!(r.success(40), "{r:#?}");
    assert_eq!(r.bytes_verified, 40 * 100_000);
    assert!(r.steer_requester.redirected > 0 && r.steer_responder.redirected > 0);
}
