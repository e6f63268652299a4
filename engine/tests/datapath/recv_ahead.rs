//! `XskSocket::recv_ahead`, the receive loop's early look at the packets
//! that come next (the driver prefetches their QPs' state with it): over a
//! veth pair in namespaces this test creates, every packet is handed once,
//! in order and intact, and each one was shown far ahead, then ahead, with
//! its own bytes, before it was handed and at most `far` (`near`) packets
//! early. Needs root.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use engine::io::{Lookahead, Rx};
use engine::testbed::netns::Side;

use crate::support::{attach_queue0, flush_until_completed, veth_pair, write_frame};

const PACKETS: u8 = 24;
const AHEAD: Lookahead = Lookahead { near: 3, far: 6 };

/// Packet `tag`: a UDP/4791 frame of 60 + tag bytes (its first payload
/// byte is `tag`: [`write_frame`]'s pattern).
fn frame(buf: &mut [u8], src: &Side, dst: &Side, tag: u8) -> usize {
    write_frame(buf, src, dst, 60 + usize::from(tag), tag)
}

#[test]
#[ignore = "needs root"]
fn packets_shown_ahead_come_in_order_and_each_was_shown_first() {
    let pair = veth_pair();
    let (ready, sent) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );

    let b = pair.b.clone();
    let (ready2, sent2) = (ready.clone(), sent.clone());
    let (a_side, b_side) = (pair.a.clone(), pair.b.clone());
    let receiver = std::thread::spawn(move || {
        b.enter().unwrap();
        let (_prog, mut sock) = attach_queue0(&b);
        ready2.store(true, Ordering::SeqCst);
        // Let most packets queue up, so that calls see several at once.
        while !sent2.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(1));
        }
        std::thread::sleep(Duration::from_millis(50));
        let mut expect = vec![0u8; 2048];
        let (mut handed, mut shown) = (Vec::new(), vec![false; usize::from(PACKETS)]);
        let mut shown_far = vec![false; usize::from(PACKETS)];
        let (mut ahead_events, mut far_events) = (0, 0);
        let deadline = Instant::now() + Duration::from_secs(5);
        while handed.len() < usize::from(PACKETS) && Instant::now() < deadline {
            sock.recv_ahead(64, AHEAD, |r| match r {
                Rx::Far(p) | Rx::Ahead(p) => {
                    let far = matches!(r, Rx::Far(_));
                    let (limit, how) = if far {
                        (AHEAD.far, "far ahead")
                    } else {
                        (AHEAD.near, "ahead")
                    };
                    let tag = p[42];
                    let next = handed.len() as u8;
                    assert!(
                        tag >= next && u32::from(tag - next) <= limit,
                        "packet {tag} shown {how} while {next} is next"
                    );
                    let n = frame(&mut expect, &a_side, &b_side, tag);
                    assert_eq!(p, &expect[..n], "packet {tag} shown with its own bytes");
                    let t = usize::from(tag);
                    if far {
                        shown_far[t] = true;
                        far_events += 1;
                    } else {
                        assert!(
                            shown_far[t],
                            "packet {tag} was shown far ahead before ahead"
                        );
                        shown[t] = true;
                        ahead_events += 1;
                    }
                }
                Rx::Packet(p) => {
                    let tag = handed.len() as u8;
                    let n = frame(&mut expect, &a_side, &b_side, tag);
                    assert_eq!(p, &expect[..n], "packet {tag} handed intact and in order");
                    assert!(
                        shown[usize::from(tag)],
                        "packet {tag} was shown ahead first"
                    );
                    handed.push(tag);
                }
            });
            std::thread::sleep(Duration::from_millis(1));
        }
        (
            handed,
            (ahead_events, far_events),
            sock.counters().rx_packets,
        )
    });
    while !ready.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(5));
    }

    let a = pair.a.clone();
    let (src, dst) = (pair.a.clone(), pair.b.clone());
    let sender = std::thread::spawn(move || {
        a.enter().unwrap();
        let (prog, mut sock) = attach_queue0(&a);
        let mut buf = vec![0u8; 2048];
        for tag in 0..PACKETS {
            let n = frame(&mut buf, &src, &dst, tag);
            assert!(sock.send(&buf[..n]), "room for packet {tag}");
        }
        flush_until_completed(&mut sock);
        sent.store(true, Ordering::SeqCst);
        // Attached until the receiver is done.
        (prog, sock)
    });

    let (handed, (ahead_events, far_events), rx_packets) = receiver.join().expect("receiver");
    assert_eq!(
        handed,
        (0..PACKETS).collect::<Vec<_>>(),
        "every packet once, in order"
    );
    assert_eq!(
        rx_packets,
        u64::from(PACKETS),
        "an early look is not a packet"
    );
    assert!(
        ahead_events >= usize::from(PACKETS) && far_events >= usize::from(PACKETS),
        "{ahead_events} looks ahead, {far_events} far ahead"
    );
    drop(sender.join().expect("sender"));
}
