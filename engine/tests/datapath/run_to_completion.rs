//! Run-to-completion mode (`engine::driver::RunToCompletion`) over a veth pair in
//! namespaces this test creates: a SEND ping-pong with each side driven by
//! its own application thread (no engine thread), RDMA WRITEs of many sizes
//! with every byte checked, and clean-up on drop (the socket leaves the
//! XDP program's map, the queue can be opened again, the program detaches).
//! Needs root.

use std::time::{Duration, Instant};

use engine::driver::{InlineConfig, RunToCompletion};
use engine::endpoint::{ConnectOptions, RemoteQp};
use engine::rc::{Access, Mtu, RecvWr, SendOp, SendWr, WcOpcode, WcStatus, WorkCompletion};
use engine::testbed::netns::Side;
use engine::verbs::{MemoryRegion, QpCaps};

use crate::support::{veth_pair, Pair};

fn config(side: &Side) -> InlineConfig {
    let mut c = InlineConfig::new(&side.ifname);
    c.netns = Some(side.netns.clone());
    c
}

/// One side: its queue, one connected QP, one registered region.
struct End {
    q: RunToCompletion,
    qpn: u32,
    mr: MemoryRegion,
}

const REGION: usize = 1 << 20;

/// A fresh veth pair with a run-to-completion queue on each side and one
/// connected QP pair (fails the test, saying why, without root).
fn connected_pair() -> (Pair, End, End) {
    let pair = veth_pair();
    let a = RunToCompletion::open(config(&pair.a)).unwrap();
    let b = RunToCompletion::open(config(&pair.b)).unwrap();
    let (a, b) = connect(a, b);
    (pair, a, b)
}

/// Connects one QP pair between `a` and `b`, with a region on each side.
fn connect(a: RunToCompletion, b: RunToCompletion) -> (End, End) {
    let (mut a, mut b) = (a, b);
    let mac_b = a.resolve_mac(b.ip()).unwrap();
    let mac_a = b.resolve_mac(a.ip()).unwrap();
    let caps = QpCaps::default();
    let qpn_a = a.create_qp(caps).unwrap();
    let qpn_b = b.create_qp(caps).unwrap();
    let mr_a = a.register_memory(REGION, Access::ALL).unwrap();
    let mr_b = b.register_memory(REGION, Access::ALL).unwrap();
    let o = ConnectOptions {
        path_mtu: Mtu::Mtu4096,
        sq_psn: 0x100,
        access: Access::REMOTE_WRITE,
        ..Default::default()
    };
    a.connect(
        qpn_a,
        RemoteQp {
            qpn: qpn_b,
            psn: 0x900,
            mac: mac_b,
            ip: b.ip(),
        },
        o,
    )
    .unwrap();
    b.connect(
        qpn_b,
        RemoteQp {
            qpn: qpn_a,
            psn: 0x100,
            mac: mac_a,
            ip: a.ip(),
        },
        ConnectOptions { sq_psn: 0x900, ..o },
    )
    .unwrap();
    (
        End {
            q: a,
            qpn: qpn_a,
            mr: mr_a,
        },
        End {
            q: b,
            qpn: qpn_b,
            mr: mr_b,
        },
    )
}

/// Polls `q` (spinning, yielding the core) until a receive completion;
/// every completion must succeed. Returns the received byte count.
fn wait_recv(q: &mut RunToCompletion, wcs: &mut [WorkCompletion]) -> u32 {
    let start = Instant::now();
    loop {
        let n = q.poll_cq(wcs);
        for wc in &wcs[..n] {
            assert_eq!(wc.status, WcStatus::Success, "{wc:?}");
            if wc.opcode == WcOpcode::Recv {
                return wc.byte_len;
            }
        }
        if n == 0 {
            assert!(
                start.elapsed() < Duration::from_secs(5),
                "no receive completion within 5 s"
            );
            std::thread::yield_now();
        }
    }
}

#[test]
#[ignore = "needs root"]
fn send_pingpong_with_one_application_thread_per_side() {
    let pair = veth_pair();
    let a = RunToCompletion::open(config(&pair.a)).unwrap();
    let b = RunToCompletion::open(config(&pair.b)).unwrap();
    assert!(!a.is_zero_copy(), "veth has no zero-copy AF_XDP");
    let (mut a, mut b) = connect(a, b);
    const ROUNDS: u64 = 2000;
    const SIZES: [u32; 4] = [1, 64, 1000, 4096];
    let ping_at = 8192;

    // b: echoes every message back (received bytes copied to its send buffer).
    let echo = std::thread::spawn(move || {
        let mut wcs = vec![WorkCompletion::default(); 16];
        for i in 0..4u64 {
            b.q.post_recv(
                b.qpn,
                RecvWr {
                    wr_id: i,
                    sge: b.mr.sge(0, 4096),
                },
            )
            .unwrap();
        }
        let mut buf = vec![0u8; 4096];
        for i in 0..ROUNDS {
            let len = wait_recv(&mut b.q, &mut wcs);
            assert!(b.mr.read(0, &mut buf[..len as usize]));
            assert!(b.mr.write(ping_at, &buf[..len as usize]));
            b.q.post_recv(
                b.qpn,
                RecvWr {
                    wr_id: i + 4,
                    sge: b.mr.sge(0, 4096),
                },
            )
            .unwrap();
            let mut pong = SendWr::new(i, SendOp::Send, b.mr.sge(ping_at, len));
            pong.signaled = false;
            b.q.post_send(b.qpn, pong).unwrap();
        }
        // Serve until the last pong is acknowledged.
        let t = Instant::now();
        while t.elapsed() < Duration::from_millis(200) {
            b.q.poll_cq(&mut wcs);
            std::thread::yield_now();
        }
        b
    });

    let mut wcs = vec![WorkCompletion::default(); 16];
    for i in 0..4u64 {
        a.q.post_recv(
            a.qpn,
            RecvWr {
                wr_id: i,
                sge: a.mr.sge(0, 4096),
            },
        )
        .unwrap();
    }
    let mut ping = vec![0u8; 4096];
    let mut back = vec![0u8; 4096];
    let mut rtts = Vec::with_capacity(ROUNDS as usize);
    for i in 0..ROUNDS {
        let len = SIZES[i as usize % SIZES.len()];
        for (k, byte) in ping[..len as usize].iter_mut().enumerate() {
            *byte = (i as usize * 7 + k * 13) as u8;
        }
        assert!(a.mr.write(ping_at, &ping[..len as usize]));
        let t0 = Instant::now();
        let mut wr = SendWr::new(i, SendOp::Send, a.mr.sge(ping_at, len));
        wr.signaled = false;
        a.q.post_send(a.qpn, wr).unwrap();
        assert_eq!(wait_recv(&mut a.q, &mut wcs), len, "round {i}");
        rtts.push(t0.elapsed());
        assert!(a.mr.read(0, &mut back[..len as usize]));
        assert_eq!(back[..len as usize], ping[..len as usize], "round {i}");
        a.q.post_recv(
            a.qpn,
            RecvWr {
                wr_id: i + 4,
                sge: a.mr.sge(0, 4096),
            },
        )
        .unwrap();
    }
    // Keep polling while b serves (this call sends the ACK of the last
    // pong, which coalescing left for the next call).
    while !echo.is_finished() {
        a.q.poll_cq(&mut wcs);
        std::thread::yield_now();
    }
    let b = echo.join().unwrap();
    rtts.sort();
    eprintln!(
        "run-to-completion SEND ping-pong: p50 {:?}, p99 {:?}",
        rtts[rtts.len() / 2],
        rtts[rtts.len() * 99 / 100]
    );
    let (sa, sb) = (a.q.stats(), b.q.stats());
    assert_eq!(sa.transport.retransmitted_packets, 0, "{sa:?}");
    assert_eq!(sb.transport.retransmitted_packets, 0, "{sb:?}");
    assert!(sa.socket.rx_packets >= ROUNDS && sb.socket.rx_packets >= ROUNDS);
    let steer = a.q.steer_counters().unwrap();
    assert!(steer.redirected >= ROUNDS, "{steer:?}");
    // Reply coalescing (the default): the ACK of each message leaves in the
    // same TX kick as the answer, so most kicks carry two packets.
    for s in [sa, sb] {
        assert!(
            s.socket.tx_kicks * 4 <= s.socket.tx_packets * 3,
            "ACKs did not share kicks with the answers: {:?}",
            s.socket
        );
    }
}

#[test]
#[ignore = "needs root"]
fn without_coalescing_each_ack_leaves_in_its_own_kick() {
    let pair = veth_pair();
    let open = |side: &Side| {
        let mut c = config(side);
        c.coalesce_replies = false;
        RunToCompletion::open(c).unwrap()
    };
    let (mut a, mut b) = connect(open(&pair.a), open(&pair.b));
    let mut wcs = vec![WorkCompletion::default(); 16];
    const ROUNDS: u64 = 200;
    for i in 0..ROUNDS {
        b.q.post_recv(
            b.qpn,
            RecvWr {
                wr_id: i,
                sge: b.mr.sge(0, 64),
            },
        )
        .unwrap();
        a.q.post_send(a.qpn, SendWr::new(i, SendOp::Send, a.mr.sge(64, 64)))
            .unwrap();
        // a's poll transmits the SEND; b's receives it and, in the same
        // call, transmits the ACK before returning the completion.
        a.q.poll_cq(&mut wcs);
        assert_eq!(wait_recv(&mut b.q, &mut wcs), 64);
        let start = Instant::now();
        loop {
            let n = a.q.poll_cq(&mut wcs);
            if wcs[..n].iter().any(|wc| wc.opcode == WcOpcode::Send) {
                assert!(wcs[..n].iter().all(|wc| wc.status == WcStatus::Success));
                break;
            }
            assert!(start.elapsed() < Duration::from_secs(5), "no ACK for {i}");
        }
    }
    let s = b.q.stats().socket;
    assert!(s.tx_packets >= ROUNDS);
    assert!(
        s.tx_kicks >= s.tx_packets,
        "one kick per ACK expected: {s:?}"
    );
}

#[test]
#[ignore = "needs root"]
fn dropping_after_the_last_completion_still_sends_its_ack() {
    let (_pair, mut a, mut b) = connected_pair();
    let mut wcs = vec![WorkCompletion::default(); 16];
    b.q.post_recv(
        b.qpn,
        RecvWr {
            wr_id: 7,
            sge: b.mr.sge(0, 64),
        },
    )
    .unwrap();
    a.q.post_send(a.qpn, SendWr::new(9, SendOp::Send, a.mr.sge(64, 64)))
        .unwrap();
    a.q.poll_cq(&mut wcs);
    // b returns the receive completion and (coalescing) leaves the ACK for
    // its next call, which never comes: dropping b must send it.
    assert_eq!(wait_recv(&mut b.q, &mut wcs), 64);
    let sent_before_drop = b.q.stats().socket.tx_packets;
    drop(b);
    let start = Instant::now();
    loop {
        let n = a.q.poll_cq(&mut wcs);
        if let Some(wc) = wcs[..n].iter().find(|wc| wc.wr_id == 9) {
            assert_eq!(wc.status, WcStatus::Success, "{wc:?}");
            assert_eq!(wc.opcode, WcOpcode::Send);
            break;
        }
        assert!(
            start.elapsed() < Duration::from_millis(50),
            "the SEND was not acknowledged promptly (b sent {sent_before_drop} packets before the drop)"
        );
    }
    assert_eq!(a.q.stats().transport.retransmitted_packets, 0);
}

#[test]
#[ignore = "needs root"]
fn writes_of_every_size_land_byte_for_byte() {
    let (_pair, mut a, mut b) = connected_pair();
    let pattern: Vec<u8> = (0..REGION).map(|i| (i * 31 % 251) as u8 ^ 0x5a).collect();
    assert!(a.mr.write(0, &pattern));
    // Sizes around the PMTU and multi-packet messages, laid end to end.
    let sizes = [1u32, 63, 64, 4095, 4096, 4097, 12288, 65536, 300_001];
    let mut off = 0usize;
    let mut spans = Vec::new();
    for (i, &len) in sizes.iter().enumerate() {
        let mut wr = SendWr::new(i as u64, SendOp::Write, a.mr.sge(off, len));
        wr.remote_addr = b.mr.addr() + off as u64;
        wr.rkey = b.mr.rkey;
        wr.signaled = true;
        a.q.post_send(a.qpn, wr).unwrap();
        spans.push((off, len as usize));
        off += len as usize + 1; // one untouched byte between messages
    }
    let mut wcs = vec![WorkCompletion::default(); 16];
    let mut done = 0;
    let start = Instant::now();
    while done < sizes.len() {
        // One application thread may drive both queues in turn.
        let n = a.q.poll_cq(&mut wcs);
        for wc in &wcs[..n] {
            assert_eq!(wc.status, WcStatus::Success, "{wc:?}");
            assert_eq!(wc.opcode, WcOpcode::Write);
            assert_eq!(wc.wr_id, done as u64, "RC completes in order");
            done += 1;
        }
        assert_eq!(
            b.q.poll_cq(&mut wcs),
            0,
            "WRITE makes no responder completion"
        );
        assert!(start.elapsed() < Duration::from_secs(10), "{done} done");
    }
    let mut got = vec![0u8; REGION];
    assert!(b.mr.read(0, &mut got));
    let mut written = vec![false; REGION];
    for &(o, l) in &spans {
        assert_eq!(got[o..o + l], pattern[o..o + l], "WRITE of {l} B at {o}");
        written[o..o + l].iter_mut().for_each(|w| *w = true);
    }
    for (i, w) in written.iter().enumerate() {
        if !w {
            assert_eq!(got[i], 0, "byte {i} outside every WRITE changed");
        }
    }
    let s = b.q.close();
    assert_eq!(s.transport.retransmitted_packets, 0);
}

/// Whether an XDP program is attached to `side`'s veth end.
fn xdp_attached(side: &Side) -> bool {
    side.run_ip(&["link", "show", "dev", &side.ifname])
        .unwrap()
        .contains("xdp")
}

/// Whether the XDP program leaves `side` within a second. (A child process
/// another test forks holds copies of our descriptors, the link's among
/// them, until it execs: the detach can trail the drop by that long.)
fn xdp_detaches(side: &Side) -> bool {
    let start = Instant::now();
    while xdp_attached(side) {
        if start.elapsed() > Duration::from_secs(1) {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    true
}

#[test]
#[ignore = "needs root"]
fn drop_unregisters_the_socket_and_detaches_the_program() {
    let pair = veth_pair();
    let a = RunToCompletion::open(config(&pair.a)).unwrap();
    let b = RunToCompletion::open(config(&pair.b)).unwrap();
    assert!(xdp_attached(&pair.a) && xdp_attached(&pair.b));
    let program_a = a
        .program()
        .expect("an engine of its own has its program")
        .clone();
    let (a, mut b) = connect(a, b);
    let End {
        q: qa, qpn: qpn_a, ..
    } = a;
    drop(qa);
    // The program stays attached (we hold it) but no socket serves queue 0:
    // b's SEND (and its retransmissions) reach a's XDP program and go to
    // the kernel, counted as no_socket, never redirected.
    let before = program_a.lock().unwrap().counters().unwrap();
    let mut wr = SendWr::new(1, SendOp::Send, b.mr.sge(0, 64));
    wr.signaled = true;
    b.q.post_send(b.qpn, wr).unwrap();
    let mut wcs = vec![WorkCompletion::default(); 16];
    let start = Instant::now();
    loop {
        b.q.poll_cq(&mut wcs);
        let now = program_a.lock().unwrap().counters().unwrap();
        if now.no_socket > before.no_socket {
            assert_eq!(now.redirected, before.redirected, "{now:?}");
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(2),
            "no frame reached a's program: {now:?}"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    // The queue is free again: a new socket binds to it and is steered to.
    // (The kernel releases a closed socket's hold on the queue in deferred
    // work; the socket layer waits for it: `XskConfig::busy_wait`.)
    let mut again = RunToCompletion::open_on(config(&pair.a), program_a.clone())
        .expect("re-opening queue 0 right after its socket closed");
    let before = program_a.lock().unwrap().counters().unwrap();
    let start = Instant::now();
    loop {
        again.poll_cq(&mut wcs);
        b.q.poll_cq(&mut wcs);
        let now = program_a.lock().unwrap().counters().unwrap();
        if now.redirected > before.redirected {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "b's retransmission to QP {qpn_a} never reached the new socket: {now:?}"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    // The redirected frame is in the new socket's RX ring.
    while again.stats().socket.rx_packets == 0 {
        again.poll_cq(&mut wcs);
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "the new socket received nothing"
        );
    }
    // Last user gone: the program detaches from the interface.
    drop(again);
    drop(program_a);
    assert!(xdp_detaches(&pair.a), "XDP still attached to a after drop");
    assert!(xdp_attached(&pair.b));
    drop(b);
    assert!(xdp_detaches(&pair.b), "XDP still attached to b after drop");
}

#[test]
#[ignore = "needs root"]
fn wait_sleeps_until_a_packet_arrives_or_the_timeout() {
    let (_pair, mut a, mut b) = connected_pair();
    // Nothing due, nothing arriving: the full timeout.
    let t = Instant::now();
    a.q.wait(Duration::from_millis(30));
    assert!(
        t.elapsed() >= Duration::from_millis(25),
        "{:?}",
        t.elapsed()
    );
    // A packet on its way: back long before the timeout.
    a.q.post_recv(
        a.qpn,
        RecvWr {
            wr_id: 1,
            sge: a.mr.sge(0, 64),
        },
    )
    .unwrap();
    b.q.post_send(b.qpn, SendWr::new(1, SendOp::Send, b.mr.sge(64, 64)))
        .unwrap();
    let mut wcs = vec![WorkCompletion::default(); 16];
    b.q.poll_cq(&mut wcs);
    let t = Instant::now();
    a.q.wait(Duration::from_secs(2));
    assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
    assert_eq!(wait_recv(&mut a.q, &mut wcs), 64);
}

/// A poll after a post sends it before it handles what arrived meanwhile:
/// here a's SEND meets b's SEND in a's RX ring, whose completion the poll
/// returns (so, coalescing, it holds back the ACK), and b still gets a's
/// SEND while a does not poll again.
#[test]
#[ignore = "needs root"]
fn a_poll_sends_the_post_before_handling_what_arrived() {
    let (_pair, mut a, mut b) = connected_pair();
    let mut wcs = vec![WorkCompletion::default(); 16];
    assert!(a.mr.write(64, &[0xa5; 64]));
    for (e, id) in [(&mut a, 1), (&mut b, 2)] {
        let sge = e.mr.sge(0, 64);
        e.q.post_recv(e.qpn, RecvWr { wr_id: id, sge }).unwrap();
    }
    b.q.post_send(b.qpn, SendWr::new(3, SendOp::Send, b.mr.sge(128, 32)))
        .unwrap();
    b.q.poll_cq(&mut wcs);
    assert_eq!(b.q.stats().socket.tx_packets, 1);
    a.q.post_send(a.qpn, SendWr::new(4, SendOp::Send, a.mr.sge(64, 64)))
        .unwrap();
    let n = a.q.poll_cq(&mut wcs);
    assert!(
        wcs[..n]
            .iter()
            .any(|wc| wc.opcode == WcOpcode::Recv && wc.byte_len == 32),
        "the poll took b's SEND: {:?}",
        &wcs[..n]
    );
    assert_eq!(wait_recv(&mut b.q, &mut wcs), 64);
    let mut got = [0u8; 64];
    assert!(b.mr.read(0, &mut got));
    assert_eq!(got, [0xa5; 64]);
}
