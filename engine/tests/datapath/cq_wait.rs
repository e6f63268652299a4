//! `Device::poll_cq_wait` over a veth pair in fresh namespaces: it times out
//! with 0 on an empty queue and returns the completion the engine thread
//! pushes (waking the blocked application thread) during a SEND ping-pong;
//! and the queue statistics count those wake-ups, both ways.

use std::time::{Duration, Instant};

use engine::driver::CqWait;
use engine::endpoint::{ConnectOptions, RemoteQp};
use engine::rc::{Access, Mtu, RecvWr, SendOp, SendWr, WcOpcode, WcStatus, WorkCompletion};
use engine::verbs::{Device, MemoryRegion, QpCaps, QueuePair};

/// Waits for the next receive completion of `dev`, checking every
/// completion it takes; returns its byte count.
fn wait_recv(dev: &Device, wcs: &mut [WorkCompletion]) -> u32 {
    until_recv(wcs, |w| dev.poll_cq_wait(0, w, Duration::from_millis(50)))
}

/// Polls with `poll` (into `wcs`) until a receive completion arrives,
/// checking every completion it takes; returns its byte count.
pub(crate) fn until_recv(
    wcs: &mut [WorkCompletion],
    mut poll: impl FnMut(&mut [WorkCompletion]) -> usize,
) -> u32 {
    let start = Instant::now();
    loop {
        let n = poll(wcs);
        for wc in &wcs[..n] {
            assert_eq!(wc.status, WcStatus::Success, "{wc:?}");
            if wc.opcode == WcOpcode::Recv {
                return wc.byte_len;
            }
        }
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "no receive completion within 5 s"
        );
        if n == 0 {
            std::thread::yield_now();
        }
    }
}

pub(crate) fn recv(mr: &MemoryRegion, id: u64) -> RecvWr {
    RecvWr {
        wr_id: id,
        sge: mr.sge(0, 256),
    }
}

/// Two devices on `pair` with one RC QP each, connected (PMTU 4096), and
/// an 8 KiB region on each side.
pub(crate) struct Rig {
    pub(crate) a: Device,
    pub(crate) b: Device,
    pub(crate) qa: QueuePair,
    pub(crate) qb: QueuePair,
    pub(crate) la: MemoryRegion,
    pub(crate) rb: MemoryRegion,
}

fn rig(pair: &engine::testbed::netns::VethPair) -> Rig {
    rig_waiting(pair, CqWait::Park)
}

/// [`rig`] with both devices' `poll_cq_wait` waiting as `cq_wait` says.
pub(crate) fn rig_waiting(pair: &engine::testbed::netns::VethPair, cq_wait: CqWait) -> Rig {
    let mut ca = crate::support::device_config(&pair.a);
    ca.cq_wait = cq_wait;
    let mut cb = crate::support::device_config(&pair.b);
    cb.cq_wait = cq_wait;
    let a = Device::open(ca).unwrap();
    let b = Device::open(cb).unwrap();
    let mac_b = a.resolve_mac(b.ip()).unwrap();
    let mac_a = b.resolve_mac(a.ip()).unwrap();
    let qa = a.create_qp(0, QpCaps::default()).unwrap();
    let qb = b.create_qp(0, QpCaps::default()).unwrap();
    let la = a.register_memory(0, 8192, Access::ALL).unwrap();
    let rb = b.register_memory(0, 8192, Access::ALL).unwrap();
    let o = ConnectOptions {
        path_mtu: Mtu::Mtu4096,
        sq_psn: 0x100,
        access: Access::REMOTE_WRITE,
        ..Default::default()
    };
    let remote_b = RemoteQp {
        qpn: qb.qpn(),
        psn: 0x900,
        mac: mac_b,
        ip: b.ip(),
    };
    let remote_a = RemoteQp {
        qpn: qa.qpn(),
        psn: 0x100,
        mac: mac_a,
        ip: a.ip(),
    };
    qa.connect(remote_b, o).unwrap();
    qb.connect(remote_a, ConnectOptions { sq_psn: 0x900, ..o })
        .unwrap();
    Rig {
        a,
        b,
        qa,
        qb,
        la,
        rb,
    }
}

#[test]
#[ignore = "needs root"]
fn poll_cq_wait_times_out_empty_and_wakes_on_completions() {
    let pair = crate::support::veth_pair();
    let Rig {
        a,
        b,
        qa,
        qb,
        la,
        rb,
    } = rig(&pair);
    let mut wcs = vec![WorkCompletion::default(); 16];

    // Empty queue: returns 0 after (not before) the timeout.
    let t = Instant::now();
    assert_eq!(a.poll_cq_wait(0, &mut wcs, Duration::from_millis(30)), 0);
    assert!(t.elapsed() >= Duration::from_millis(30));

    la.write(4096, &[0xa5; 64]);
    rb.write(4096, &[0x5a; 100]);
    for i in 0..300u64 {
        qb.post_recv(recv(&rb, i)).unwrap();
        qa.post_recv(recv(&la, i)).unwrap();
        qa.post_send(SendWr::new(i, SendOp::Send, la.sge(4096, 64)))
            .unwrap();
        assert_eq!(wait_recv(&b, &mut wcs), 64);
        qb.post_send(SendWr::new(i, SendOp::Send, rb.sge(4096, 100)))
            .unwrap();
        assert_eq!(wait_recv(&a, &mut wcs), 100);
    }
    let mut got = [0u8; 100];
    assert!(la.read(0, &mut got));
    assert_eq!(got, [0x5a; 100]);
    assert!(rb.read(0, &mut got[..64]));
    assert_eq!(got[..64], [0xa5; 64]);
    a.close();
    b.close();
}

/// The queue statistics count the wake-ups between the application and
/// the engine thread: a post that finds the (idle, adaptive) engine
/// thread asleep wakes it (`woken_by_posts`), and a completion pushed
/// while the application is parked in `wait_cq` makes the engine thread
/// wake it (`app_wakes`).
#[test]
#[ignore = "needs root"]
fn wakes_between_the_application_and_the_engine_are_counted() {
    let pair = crate::support::veth_pair();
    let Rig {
        a, b, qa, la, rb, ..
    } = rig(&pair);
    let rounds = 5u64;
    for i in 0..rounds {
        std::thread::scope(|scope| {
            let waiter = scope.spawn(|| {
                let t = Instant::now();
                a.wait_cq(0, Duration::from_secs(5));
                t.elapsed()
            });
            // Idle long enough for a's engine thread to be asleep in
            // poll(2), and the waiter to be parked.
            std::thread::sleep(Duration::from_millis(100));
            let mut wr = SendWr::new(i, SendOp::Write, la.sge(0, 64));
            wr.remote_addr = rb.addr();
            wr.rkey = rb.rkey;
            qa.post_send(wr).unwrap();
            let waited = waiter.join().unwrap();
            assert!(
                waited < Duration::from_secs(4),
                "the completion did not wake the waiting thread ({waited:?})"
            );
        });
        let mut wcs = [WorkCompletion::default(); 4];
        assert_eq!(a.poll_cq(0, &mut wcs), 1);
        assert_eq!(wcs[0].status, WcStatus::Success, "{:?}", wcs[0]);
    }
    let s = a.close();
    b.close();
    eprintln!(
        "app_wakes {}, woken_by_posts {}, sleeps {}",
        s.app_wakes, s.woken_by_posts, s.sleeps
    );
    // Each round parked the application until its WRITE completed.
    assert!(s.app_wakes >= rounds, "{s:?}");
    // An idle engine thread sleeps within milliseconds: most of the
    // rounds' posts found it asleep (its brief spins between sleeps may
    // catch one).
    assert!(s.woken_by_posts >= rounds - 1, "{s:?}");
}
