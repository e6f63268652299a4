//! A queue held by a live AF_XDP socket: a second socket on it waits
//! `busy_wait` and then fails with `XskError::QueueBusy` (a message that
//! says what to do, not a raw EBUSY); once the first socket closes, the
//! queue can be bound again straight away (the socket layer waits out the
//! kernel's deferred release). Over a veth pair in namespaces this test
//! creates. Needs root.

use std::time::{Duration, Instant};

use engine::io::{XskConfig, XskError, XskSocket, DEFAULT_BUSY_WAIT};

#[test]
#[ignore = "needs root"]
fn a_busy_queue_is_waited_for_then_reported_and_a_released_one_rebinds() {
    let pair = crate::support::veth_pair();
    let a = pair.a.clone();
    std::thread::spawn(move || {
        a.enter().unwrap();
        let mut cfg = XskConfig::new(&a.ifname, 0);
        assert_eq!(cfg.busy_wait, DEFAULT_BUSY_WAIT);
        let first = XskSocket::open(&cfg).expect("first socket");

        // Held: the second waits its busy_wait, then says who holds it.
        cfg.busy_wait = Duration::from_millis(150);
        let start = Instant::now();
        let err = XskSocket::open(&cfg).expect_err("queue 0 is taken");
        let waited = start.elapsed();
        match &err {
            XskError::QueueBusy {
                ifname,
                queue,
                waited: reported,
            } => {
                assert_eq!((ifname.as_str(), *queue), (a.ifname.as_str(), 0));
                assert!(*reported >= Duration::from_millis(150), "{reported:?}");
            }
            other => panic!("expected QueueBusy, got {other:?}"),
        }
        assert!(waited >= Duration::from_millis(150), "{waited:?}");
        assert!(waited < Duration::from_secs(2), "{waited:?}");
        let msg = err.to_string();
        assert!(msg.contains("taken by another AF_XDP socket"), "{msg}");
        assert!(msg.contains("stop it or use another queue"), "{msg}");

        // With no wait, it fails at once.
        cfg.busy_wait = Duration::ZERO;
        let start = Instant::now();
        assert!(matches!(
            XskSocket::open(&cfg),
            Err(XskError::QueueBusy { .. })
        ));
        assert!(start.elapsed() < Duration::from_millis(150));

        // Released: a new socket binds at once, several times in a row
        // (each close's release is deferred in the kernel).
        drop(first);
        let cfg = XskConfig::new(&a.ifname, 0);
        for round in 0..5 {
            let s = XskSocket::open(&cfg)
                .unwrap_or_else(|e| panic!("round {round}: rebinding right after close: {e}"));
            drop(s);
        }
    })
    .join()
    .unwrap();
}
