//! Packets written in place into TX frames (`XskSocket::send_in_place`)
//! over a veth pair in namespaces this test creates: frames a writer does
//! not fill go back to the pool, packets larger than one frame leave as
//! two descriptors of adjacent frames, every frame comes back on
//! completion, and the peer receives exactly the bytes written. Needs
//! root.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use engine::io::InPlace;

use crate::support::{
    attach_queue0, flush_until_completed, frames_conserved, veth_pair, write_frame,
};

#[test]
#[ignore = "needs root"]
fn in_place_packets_keep_frame_accounting_exact_and_arrive_intact() {
    let pair = veth_pair();
    let ready = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));

    // Receiver: namespace b, records every packet's length and checks its bytes.
    let b = pair.b.clone();
    let (ready2, stop2) = (ready.clone(), stop.clone());
    let (a_side, b_side) = (pair.a.clone(), pair.b.clone());
    let receiver = std::thread::spawn(move || {
        b.enter().unwrap();
        let (_prog, mut sock) = attach_queue0(&b);
        ready2.store(true, Ordering::SeqCst);
        let mut got = Vec::new();
        let mut expect = vec![0u8; 9216];
        let deadline = Instant::now() + Duration::from_secs(5);
        while !(stop2.load(Ordering::SeqCst) && got.len() >= 7) && Instant::now() < deadline {
            sock.recv(64, |p| {
                let tag = got.len() as u8;
                write_frame(&mut expect, &a_side, &b_side, p.len(), tag);
                assert_eq!(p, &expect[..p.len()], "packet {tag} arrives as written");
                got.push(p.len());
            });
            std::thread::sleep(Duration::from_millis(1));
        }
        got
    });
    while !ready.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(5));
    }

    let a = pair.a.clone();
    let (src, dst) = (pair.a.clone(), pair.b.clone());
    let sender = std::thread::spawn(move || {
        a.enter().unwrap();
        let (_prog, mut sock) = attach_queue0(&a);
        let fs = sock.frame_size() as usize;
        let before = sock.accounting();
        assert_eq!(before.in_tx_or_completion, 0);

        // A writer with nothing to send: both reserved frames go back.
        let mut called = false;
        let r = sock.send_in_place(2 * fs, |buf| {
            called = true;
            assert_eq!(buf.len(), 2 * fs, "one slice over two adjacent frames");
            None
        });
        assert_eq!(r, InPlace::Nothing);
        assert!(called);
        assert_eq!(sock.accounting(), before, "nothing taken");
        assert_eq!(sock.send_in_place(2 * fs, |_| Some(0)), InPlace::Nothing);
        assert_eq!(sock.accounting(), before);
        // Room beyond the largest packet: refused without calling the writer.
        assert_eq!(
            sock.send_in_place(sock.max_packet() + 1, |_| unreachable!()),
            InPlace::NoRoom
        );

        // A small packet in a two-frame reservation: one frame queued, one back.
        let r = sock.send_in_place(2 * fs, |buf| Some(write_frame(buf, &src, &dst, 100, 0)));
        assert_eq!(r, InPlace::Sent(100));
        assert_eq!(sock.accounting().in_tx_or_completion, 1);
        assert_eq!(sock.accounting().free_tx, before.free_tx - 1);
        // A packet larger than one frame: two descriptors.
        let r = sock.send_in_place(2 * fs, |buf| Some(write_frame(buf, &src, &dst, 4154, 1)));
        assert_eq!(r, InPlace::Sent(4154));
        assert_eq!(sock.accounting().in_tx_or_completion, 3);
        // Exactly one frame.
        let r = sock.send_in_place(2 * fs, |buf| Some(write_frame(buf, &src, &dst, fs, 2)));
        assert_eq!(r, InPlace::Sent(fs));
        assert_eq!(sock.accounting().in_tx_or_completion, 4);
        frames_conserved(sock.accounting());

        flush_until_completed(&mut sock);
        let after = sock.accounting();
        frames_conserved(after);
        assert_eq!(after.in_tx_or_completion, 0, "every frame completed");
        assert_eq!(
            after.free_tx, before.free_tx,
            "every frame back in the pool"
        );
        let c = sock.counters();
        assert_eq!((c.tx_packets, c.tx_in_place), (3, 3));
        assert_eq!(c.tx_bytes, (100 + 4154 + fs) as u64);
        // Three packets in four frames, all back on the completion ring.
        assert_eq!(c.tx_completed_frames, 4);

        // Completed frames go back so that small packets keep finding a
        // run of two adjacent frames (none falls back to a copy).
        for tag in 3..7u8 {
            let r = sock.send_in_place(2 * fs, |buf| Some(write_frame(buf, &src, &dst, 100, tag)));
            assert_eq!(r, InPlace::Sent(100), "packet {tag}");
        }
        flush_until_completed(&mut sock);
        let last = sock.accounting();
        frames_conserved(last);
        assert_eq!(last.free_tx, before.free_tx);
        assert_eq!(sock.counters().tx_in_place, 7);
        fs
    });
    let fs = sender.join().unwrap();
    stop.store(true, Ordering::SeqCst);
    let got = receiver.join().unwrap();
    assert_eq!(
        got,
        vec![100, 4154, fs, 100, 100, 100, 100],
        "the peer got every packet, in order"
    );
}
