//! Tearing resources down through the verbs API, over a veth pair in fresh
//! namespaces: `Device::deregister_memory` (a WRITE naming the old R_Key is
//! NAKed, the memory is not written), `QueuePair::destroy` (the peer's
//! requests are dropped as unknown-QP and its WRITE ends with retry
//! exceeded; stale handles are refused) and `QueuePair::modify` to the
//! error state (outstanding receives complete as flushed).

use std::time::{Duration, Instant};

use engine::endpoint::{ConnectOptions, RemoteQp};
use engine::rc::{
    Access, Mtu, QpAttr, QpAttrMask, QpState, RecvWr, SendOp, SendWr, VerbsError, WcStatus,
    WorkCompletion,
};
use engine::testbed::netns::Side;
use engine::verbs::{Device, MemoryRegion, QpCaps, QueuePair};

const LEN: usize = 4096;

fn open(side: &Side) -> Device {
    Device::open(crate::support::device_config(side)).expect("opening the device")
}

/// Creates and connects a QP on each device (queue 0); `opts` for a's side.
fn connect(a: &Device, b: &Device, psn: u32, opts: ConnectOptions) -> (QueuePair, QueuePair) {
    let qa = a.create_qp(0, QpCaps::default()).unwrap();
    let qb = b.create_qp(0, QpCaps::default()).unwrap();
    let remote = |dev: &Device, qp: &QueuePair, psn: u32, peer: &Device| RemoteQp {
        qpn: qp.qpn(),
        psn,
        mac: peer.resolve_mac(dev.ip()).unwrap(),
        ip: dev.ip(),
    };
    qa.connect(
        remote(b, &qb, psn + 0x1000, a),
        ConnectOptions {
            sq_psn: psn,
            ..opts
        },
    )
    .unwrap();
    qb.connect(
        remote(a, &qa, psn, b),
        ConnectOptions {
            path_mtu: opts.path_mtu,
            sq_psn: psn + 0x1000,
            access: Access::REMOTE_WRITE,
            ..Default::default()
        },
    )
    .unwrap();
    (qa, qb)
}

/// The next completion on `dev`'s queue 0 (panics after 5 s).
fn next_completion(dev: &Device) -> WorkCompletion {
    let mut wc = [WorkCompletion::default(); 1];
    let start = Instant::now();
    loop {
        if dev.poll_cq_wait(0, &mut wc, Duration::from_millis(50)) == 1 {
            return wc[0];
        }
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "no completion within 5 s"
        );
    }
}

fn write(qa: &QueuePair, la: &MemoryRegion, rb: &MemoryRegion, id: u64) {
    let mut wr = SendWr::new(id, SendOp::Write, la.sge(0, LEN as u32));
    wr.remote_addr = rb.addr();
    wr.rkey = rb.rkey;
    wr.signaled = true;
    qa.post_send(wr).unwrap();
}

#[test]
#[ignore = "needs root"]
fn deregistered_memory_destroyed_qps_and_flushes() {
    let pair = crate::support::veth_pair();
    let a = open(&pair.a);
    let b = open(&pair.b);
    let opts = ConnectOptions {
        path_mtu: Mtu::Mtu4096,
        ..Default::default()
    };
    let la = a.register_memory(0, LEN, Access::ALL).unwrap();
    let mut buf = vec![0u8; LEN];

    // 1. A WRITE lands; after deregistration the same WRITE is NAKed with a
    //    remote access error and the region keeps the first WRITE's bytes.
    let rb = b.register_memory(0, LEN, Access::ALL).unwrap();
    let (qa, _qb) = connect(&a, &b, 0x100, opts);
    la.write(0, &[0x11; LEN]);
    write(&qa, &la, &rb, 1);
    let wc = next_completion(&a);
    assert_eq!((wc.wr_id, wc.status), (1, WcStatus::Success), "{wc:?}");
    assert!(rb.read(0, &mut buf));
    assert_eq!(buf, [0x11; LEN]);

    b.deregister_memory(&rb).unwrap();
    la.write(0, &[0x22; LEN]);
    write(&qa, &la, &rb, 2);
    let wc = next_completion(&a);
    assert_eq!(
        (wc.wr_id, wc.status),
        (2, WcStatus::RemoteAccessError),
        "{wc:?}"
    );
    assert!(rb.read(0, &mut buf));
    assert_eq!(buf, [0x11; LEN], "a deregistered region was written");
    assert_eq!(qa.state().unwrap(), Some(QpState::Error));
    // Deregistering twice is an error, not a crash.
    assert!(b.deregister_memory(&rb).is_err());

    // 2. Destroying the responder's QP: the requester's WRITE is dropped as
    //    addressed to an unknown QP until its retries run out.
    let rb2 = b.register_memory(0, LEN, Access::ALL).unwrap();
    let short_retry = ConnectOptions {
        timeout: 10, // 4.096 us * 2^10 = 4.2 ms
        retry_cnt: 1,
        ..opts
    };
    let (qa2, qb2) = connect(&a, &b, 0x2000, short_retry);
    write(&qa2, &la, &rb2, 3);
    assert_eq!(next_completion(&a).status, WcStatus::Success);
    let stale = qb2.clone();
    let dropped_before = b.total_stats().transport.dropped_unknown_qp;
    qb2.destroy().unwrap();
    assert_eq!(stale.state().unwrap(), None);
    stale
        .post_recv(RecvWr {
            wr_id: 7,
            sge: rb2.sge(0, 64),
        })
        .unwrap();
    let start = Instant::now();
    let refused = loop {
        if let Some(e) = b.poll_post_error(0) {
            break e;
        }
        assert!(start.elapsed() < Duration::from_secs(5), "post not refused");
        std::thread::sleep(Duration::from_millis(1));
    };
    assert_eq!((refused.wr_id, refused.error), (7, VerbsError::UnknownQp));
    write(&qa2, &la, &rb2, 4);
    let wc = next_completion(&a);
    assert_eq!(
        (wc.wr_id, wc.status),
        (4, WcStatus::RetryExceeded),
        "{wc:?}"
    );
    // Statistics are published every few milliseconds.
    let start = Instant::now();
    while b.total_stats().transport.dropped_unknown_qp < dropped_before + 2 {
        assert!(
            start.elapsed() < Duration::from_secs(2),
            "the destroyed QP's packets were not counted: {:?}",
            b.total_stats().transport
        );
        std::thread::sleep(Duration::from_millis(5));
    }

    // 3. Moving a QP to the error state flushes its outstanding receives.
    let (qa3, _qb3) = connect(&a, &b, 0x3000, opts);
    for id in 10..13 {
        qa3.post_recv(RecvWr {
            wr_id: id,
            sge: la.sge(0, 64),
        })
        .unwrap();
    }
    qa3.modify(
        QpAttr {
            state: QpState::Error,
            ..Default::default()
        },
        QpAttrMask::STATE,
    )
    .unwrap();
    for id in 10..13 {
        let wc = next_completion(&a);
        assert_eq!((wc.wr_id, wc.status), (id, WcStatus::Flushed), "{wc:?}");
    }
    a.close();
    b.close();
}
