//! Frames for unknown QPs, with bad ICRCs, or truncated reach a running
//! engine over veth (namespaces this test creates): each is counted and
//! dropped, and the engine keeps serving a connected QP afterwards.

use std::time::{Duration, Instant};

use engine::endpoint::ConnectOptions;
use engine::rc::{Access, SendOp, SendWr, WcStatus, WorkCompletion};
use engine::testbed::netns::{PairConfig, VethPair};
use engine::verbs::{Device, DeviceConfig, QpCaps};
use engine::wire::{
    emit_frame, BthRepr, Ecn, EthRepr, IpRepr, Opcode, RethRepr, RoceHeaders, UdpRepr,
};

use crate::support::{connect_qps, require_root, send_all};

fn write_only(pair: &VethPair, dest_qp: u32) -> Vec<u8> {
    let h = RoceHeaders {
        eth: EthRepr {
            dst: pair.b.mac,
            src: pair.a.mac,
            vlan: None,
        },
        ip: IpRepr::V4 {
            src: pair.a.ipv4,
            dst: pair.b.ipv4,
            dscp: 0,
            ecn: Ecn::Ect0,
            ttl: 64,
            ident: 1,
            dont_fragment: true,
        },
        udp: UdpRepr {
            src_port: 0xc000,
            dst_port: 4791,
        },
        bth: BthRepr {
            opcode: Opcode::WriteOnly,
            solicited: false,
            mig_req: false,
            pad_count: 0,
            pkey: 0xffff,
            fecn: false,
            becn: false,
            dest_qp,
            ack_req: true,
            psn: 0,
        },
        reth: Some(RethRepr {
            va: 0x1000,
            rkey: 0x1234,
            dma_len: 64,
        }),
        aeth: None,
        atomic_eth: None,
        atomic_ack_eth: None,
        immdt: None,
        ieth: None,
        deth: None,
    };
    let mut buf = vec![0u8; 2048];
    let n = emit_frame(&h, &[0x5a; 64], &mut buf).unwrap();
    buf.truncate(n);
    buf
}

#[test]
#[ignore = "needs root"]
fn bad_frames_are_counted_and_dropped_and_the_engine_keeps_running() {
    let _exclusive = require_root();
    let pair = VethPair::create(&PairConfig::default()).unwrap();
    let cfg = |side: &engine::testbed::netns::Side| {
        let mut c = DeviceConfig::new(&side.ifname);
        c.netns = Some(side.netns.clone());
        c.umem.frame_count = 512;
        c.ring_size = 256;
        c
    };
    let dev_b = Device::open(cfg(&pair.b)).unwrap();

    // Inject from a raw AF_XDP socket in namespace a.
    let unknown_qp = write_only(&pair, 0x7777);
    let mut bad_icrc = unknown_qp.clone();
    *bad_icrc.last_mut().unwrap() ^= 0xff;
    let truncated = unknown_qp[..14 + 20 + 8 + 6].to_vec();
    let a = pair.a.clone();
    std::thread::spawn(move || {
        a.enter().unwrap();
        let frames: Vec<&[u8]> = (0..10)
            .flat_map(|_| [&unknown_qp[..], &bad_icrc[..], &truncated[..]])
            .collect();
        send_all(&a, &frames);
    })
    .join()
    .unwrap();

    let deadline = Instant::now() + Duration::from_secs(3);
    let t = loop {
        let t = dev_b.stats(0).unwrap().transport;
        if t.dropped_unknown_qp >= 10 && t.dropped_bad_icrc >= 10 && t.dropped_malformed >= 10 {
            break t;
        }
        assert!(Instant::now() < deadline, "drops not counted: {t:?}");
        std::thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(
        (
            t.dropped_unknown_qp,
            t.dropped_bad_icrc,
            t.dropped_malformed
        ),
        (10, 10, 10)
    );

    // The engine still works: a WRITE from a fresh engine in namespace a.
    let dev_a = Device::open(cfg(&pair.a)).unwrap();
    let qa = dev_a.create_qp(0, QpCaps::default()).unwrap();
    let qb = dev_b.create_qp(0, QpCaps::default()).unwrap();
    let la = dev_a.register_memory(0, 8192, Access::ALL).unwrap();
    let rb = dev_b.register_memory(0, 8192, Access::ALL).unwrap();
    let opts = ConnectOptions {
        access: Access::REMOTE_WRITE,
        ..Default::default()
    };
    connect_qps((&dev_a, &qa, 100), (&dev_b, &qb, 200), opts);
    let data: Vec<u8> = (0..5000u32).map(|i| (i * 7 + 3) as u8).collect();
    la.write(0, &data);
    qa.post_send(SendWr {
        remote_addr: rb.addr() + 100,
        rkey: rb.rkey,
        ..SendWr::new(9, SendOp::Write, la.sge(0, 5000))
    })
    .unwrap();
    let mut wcs = [WorkCompletion::default(); 4];
    let deadline = Instant::now() + Duration::from_secs(5);
    let wc = loop {
        if dev_a.poll_cq(0, &mut wcs) > 0 {
            break wcs[0];
        }
        assert!(Instant::now() < deadline, "no completion");
        std::thread::sleep(Duration::from_millis(1));
    };
    assert_eq!((wc.wr_id, wc.status), (9, WcStatus::Success));
    let mut got = vec![0u8; 5000];
    rb.read(100, &mut got);
    assert_eq!(got, data);
    dev_a.close();
    dev_b.close();
}
