//! Run-to-completion on a threaded `Device` (`Device::run_to_completion`)
//! and the polling option (`CqWait::Spin`) over a veth pair in fresh
//! namespaces: a thread that drives its queue's engine runs a verified
//! SEND ping-pong against a threaded peer, a second claim and a control
//! operation from the driving thread are refused, and after the claim
//! ends the engine thread serves the queue again.

use std::time::{Duration, Instant};

use engine::driver::CqWait;
use engine::io::XskCounters;
use engine::rc::{SendOp, SendWr, WcOpcode, WorkCompletion};
use engine::verbs::{DeviceError, QpCaps};

use crate::cq_wait::{recv, rig_waiting as rig, until_recv, Rig};

/// One SEND ping (a -> b, 64 B) and pong (b -> a, 100 B); `poll_a`
/// takes a's completions (and drives a's engine if a's thread does:
/// nothing moves on a driven queue unless its thread polls, so it polls
/// while it waits for b too).
fn ping_pong(r: &Rig, i: u64, poll_a: &mut dyn FnMut(&mut [WorkCompletion]) -> usize) {
    r.qa.post_recv(recv(&r.la, i)).unwrap();
    ping_pong_received(r, i, poll_a);
}

/// [`ping_pong`] with a's receive for the pong posted already.
fn ping_pong_received(r: &Rig, i: u64, poll_a: &mut dyn FnMut(&mut [WorkCompletion]) -> usize) {
    r.qb.post_recv(recv(&r.rb, i)).unwrap();
    r.qa.post_send(SendWr::new(i, SendOp::Send, r.la.sge(4096, 64)))
        .unwrap();
    let mut spare = [WorkCompletion::default(); 16];
    let mut wcs = [WorkCompletion::default(); 16];
    assert_eq!(
        until_recv(&mut wcs, |w| {
            // Only a's SEND completions can arrive before b answers.
            let k = poll_a(&mut spare);
            assert!(spare[..k].iter().all(|wc| wc.opcode == WcOpcode::Send));
            r.b.poll_cq(0, w)
        }),
        64
    );
    r.qb.post_send(SendWr::new(i, SendOp::Send, r.rb.sge(4096, 100)))
        .unwrap();
    assert_eq!(until_recv(&mut wcs, |w| poll_a(w)), 100);
}

#[test]
#[ignore = "needs root"]
fn a_driving_thread_runs_its_queue_and_hands_it_back() {
    let pair = crate::support::veth_pair();
    let r = rig(&pair, CqWait::Park);
    r.la.write(4096, &[0xa5; 64]);
    r.rb.write(4096, &[0x5a; 100]);
    {
        let mut driven = r.a.run_to_completion(0).unwrap();
        assert!(r.a.is_driven(0));
        // One thread drives a queue at a time.
        let other = std::thread::scope(|s| s.spawn(|| r.a.run_to_completion(0).err()).join());
        assert!(matches!(other.unwrap(), Some(DeviceError::Driven(0))));
        // A control operation would wait for the engine this thread runs.
        assert!(matches!(
            r.a.create_qp(0, QpCaps::default()),
            Err(DeviceError::ControlWhileDriven(0))
        ));
        for i in 0..200 {
            ping_pong(&r, i, &mut |w| driven.poll_cq(w));
        }
        // Device::poll_cq from the driving thread drives too.
        for i in 200..300 {
            ping_pong(&r, i, &mut |w| r.a.poll_cq(0, w));
        }
    }
    assert!(!r.a.is_driven(0));
    // The engine thread has the queue back.
    for i in 300..400 {
        ping_pong(&r, i, &mut |w| {
            r.a.poll_cq_wait(0, w, Duration::from_millis(50))
        });
    }
    let mut got = [0u8; 100];
    assert!(r.la.read(0, &mut got));
    assert_eq!(got, [0x5a; 100]);
    assert!(r.rb.read(0, &mut got[..64]));
    assert_eq!(got[..64], [0xa5; 64]);
    assert!(r.a.create_qp(0, QpCaps::default()).is_ok());
    r.a.close();
    r.b.close();
}

#[test]
#[ignore = "needs root"]
fn spinning_cq_wait_times_out_empty_and_returns_completions() {
    let pair = crate::support::veth_pair();
    let r = rig(&pair, CqWait::Spin);
    let mut wcs = [WorkCompletion::default(); 4];
    let t = Instant::now();
    assert_eq!(r.a.poll_cq_wait(0, &mut wcs, Duration::from_millis(30)), 0);
    assert!(t.elapsed() >= Duration::from_millis(30));
    for i in 0..200 {
        ping_pong(&r, i, &mut |w| {
            r.a.poll_cq_wait(0, w, Duration::from_millis(50))
        });
    }
    // Spinning never parks, so the engine never had to wake a.
    assert_eq!(r.a.total_stats().app_wakes, 0);
    r.a.close();
    r.b.close();
}

/// A poll of a driven queue that takes the application's post sends it
/// at once, even when packets that complete work wait in the RX ring
/// (they are handled after it): the answer of a ping-pong does not wait
/// for another poll because the peer's ACK of the last message came
/// meanwhile. Here a's post meets the peer's SEND in a's ring; b gets
/// a's SEND while a does not poll again.
#[test]
#[ignore = "needs root"]
fn a_driven_poll_sends_the_post_before_handling_what_arrived() {
    let pair = crate::support::veth_pair();
    let r = rig(&pair, CqWait::Park);
    r.la.write(4096, &[0xa5; 64]);
    r.rb.write(4096, &[0x5a; 100]);
    r.qb.post_recv(recv(&r.rb, 1)).unwrap();
    let mut wcs = [WorkCompletion::default(); 16];
    let mut driven = r.a.run_to_completion(0).unwrap();
    r.qa.post_recv(recv(&r.la, 2)).unwrap();
    assert_eq!(driven.poll_cq(&mut wcs), 0);
    // b's SEND lands in a's RX ring; nothing takes it while a does not poll.
    r.qb.post_send(SendWr::new(3, SendOp::Send, r.rb.sge(4096, 100)))
        .unwrap();
    let t = Instant::now();
    while r.b.stats(0).unwrap().socket.tx_packets == 0 {
        assert!(t.elapsed() < Duration::from_secs(5), "b did not send");
        std::thread::sleep(Duration::from_millis(1));
    }
    std::thread::sleep(Duration::from_millis(20));
    // One poll: it takes a's SEND and b's, and sends a's.
    r.qa.post_send(SendWr::new(4, SendOp::Send, r.la.sge(4096, 64)))
        .unwrap();
    let n = driven.poll_cq(&mut wcs);
    assert!(
        wcs[..n]
            .iter()
            .any(|wc| wc.opcode == WcOpcode::Recv && wc.byte_len == 100),
        "the poll took b's SEND: {:?}",
        &wcs[..n]
    );
    assert_eq!(until_recv(&mut wcs, |w| r.b.poll_cq(0, w)), 64);
    let mut got = [0u8; 64];
    assert!(r.rb.read(0, &mut got));
    assert_eq!(got, [0xa5; 64]);
    drop(driven);
    r.a.close();
    r.b.close();
}

/// Since `before`, a sent 100 pings and the ACKs of b's pongs, the ACKs
/// in the pings' TX kicks: fewer kicks than packets by a margin (an ACK
/// that leaves on its own makes one kick per packet; `why` says what
/// that would mean).
fn assert_acks_left_with_pings(r: &Rig, before: XskCounters, why: &str) {
    let after = r.a.stats(0).unwrap().socket;
    let (kicks, packets) = (
        after.tx_kicks - before.tx_kicks,
        after.tx_packets - before.tx_packets,
    );
    assert!(packets >= 199, "a sent 100 pings and their ACKs: {packets}");
    assert!(
        (kicks as f64) < 0.75 * packets as f64,
        "{kicks} kicks for {packets} packets: {why}"
    );
}

/// A driven queue holds the ACK of the peer's message for the
/// application's answer across the polls in between (at most
/// `ANSWER_HOLD`, 20 µs): a loop that polls a few more times before it
/// answers (perftest's latency loops wait for the ACK of their own
/// message first) still sends its answer and that ACK in one TX kick.
/// Released at the first such poll, each ACK took a kick of its own.
#[test]
#[ignore = "needs root"]
fn a_held_ack_waits_for_the_answer_across_empty_polls() {
    let pair = crate::support::veth_pair();
    let r = rig(&pair, CqWait::Park);
    let before = r.a.stats(0).unwrap().socket;
    {
        let mut driven = r.a.run_to_completion(0).unwrap();
        let mut spare = [WorkCompletion::default(); 16];
        for i in 0..100 {
            ping_pong(&r, i, &mut |w| driven.poll_cq(w));
            // Polls that find nothing to answer, as a loop waiting for
            // its own ACK makes (it came with the pong here).
            for _ in 0..3 {
                driven.poll_cq(&mut spare);
            }
        }
    }
    assert_acks_left_with_pings(&r, before, "the held ACKs left on their own");
    r.a.close();
    r.b.close();
}

/// A receive the application posts between the peer's message and its
/// answer does not release the ACK held for that answer: the send-lat
/// client re-posts its receive as soon as the pong lands, then polls for
/// the ACK of its own ping before it sends again. A receive makes no
/// packet; released by it, each ACK took a TX kick of its own, on the
/// round trip's path.
#[test]
#[ignore = "needs root"]
fn a_posted_receive_does_not_release_the_held_ack() {
    let pair = crate::support::veth_pair();
    let r = rig(&pair, CqWait::Park);
    let before = r.a.stats(0).unwrap().socket;
    {
        let mut driven = r.a.run_to_completion(0).unwrap();
        let mut spare = [WorkCompletion::default(); 16];
        r.qa.post_recv(recv(&r.la, 0)).unwrap();
        for i in 0..100 {
            ping_pong_received(&r, i, &mut |w| driven.poll_cq(w));
            // The next receive at once, alone in the work queue.
            r.qa.post_recv(recv(&r.la, i + 1)).unwrap();
            for _ in 0..3 {
                driven.poll_cq(&mut spare);
            }
        }
    }
    assert_acks_left_with_pings(&r, before, "a posted receive released the held ACKs");
    r.a.close();
    r.b.close();
}
