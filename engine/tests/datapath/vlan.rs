//! 802.1Q end to end over a veth pair in fresh namespaces: QPs connected
//! with a VLAN tag send tagged frames, the XDP program steers them (RoCE in
//! one tag) into the AF_XDP sockets, and an RDMA WRITE and READ land byte
//! for byte. A capture on side a checks that every RoCE frame it sent and
//! received carried the tag.

use std::time::{Duration, Instant};

use engine::driver::capture_channel;
use engine::endpoint::{ConnectOptions, RemoteQp};
use engine::rc::{Access, Mtu, SendOp, SendWr, WcStatus, WorkCompletion};
use engine::verbs::{Device, QpCaps};
use engine::wire::{parse_frame, VlanTag};

/// Waits for the completion of `wr_id` on `dev`, checking it succeeded.
fn wait_for(dev: &Device, wr_id: u64) {
    let mut wcs = vec![WorkCompletion::default(); 16];
    let start = Instant::now();
    loop {
        let n = dev.poll_cq_wait(0, &mut wcs, Duration::from_millis(50));
        for wc in &wcs[..n] {
            assert_eq!(wc.status, WcStatus::Success, "{wc:?}");
            if wc.wr_id == wr_id {
                return;
            }
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "no completion for {wr_id}"
        );
    }
}

#[test]
#[ignore = "needs root"]
fn tagged_write_and_read_over_veth() {
    let pair = crate::support::veth_pair();
    let (sink, frames) = capture_channel(1 << 16);
    let mut cfg_a = crate::support::device_config(&pair.a);
    cfg_a.capture = Some(sink);
    let a = Device::open(cfg_a).unwrap();
    let b = Device::open(crate::support::device_config(&pair.b)).unwrap();
    let mac_b = a.resolve_mac(b.ip()).unwrap();
    let mac_a = b.resolve_mac(a.ip()).unwrap();
    let qa = a.create_qp(0, QpCaps::default()).unwrap();
    let qb = b.create_qp(0, QpCaps::default()).unwrap();
    const LEN: usize = 256 << 10;
    let la = a.register_memory(0, 2 * LEN, Access::ALL).unwrap();
    let rb = b.register_memory(0, 2 * LEN, Access::ALL).unwrap();
    let tag = VlanTag {
        pcp: 3,
        dei: false,
        vid: 100,
    };
    let o = ConnectOptions {
        path_mtu: Mtu::Mtu4096,
        sq_psn: 0x100,
        vlan: Some(tag),
        access: Access::REMOTE_WRITE | Access::REMOTE_READ,
        ..Default::default()
    };
    qa.connect(
        RemoteQp {
            qpn: qb.qpn(),
            psn: 0x900,
            mac: mac_b,
            ip: b.ip(),
        },
        o,
    )
    .unwrap();
    qb.connect(
        RemoteQp {
            qpn: qa.qpn(),
            psn: 0x100,
            mac: mac_a,
            ip: a.ip(),
        },
        ConnectOptions { sq_psn: 0x900, ..o },
    )
    .unwrap();

    let data: Vec<u8> = (0..LEN).map(|i| (i * 13 % 251) as u8).collect();
    assert!(la.write(0, &data));
    let mut w = SendWr::new(1, SendOp::Write, la.sge(0, LEN as u32));
    w.remote_addr = rb.addr();
    w.rkey = rb.rkey;
    qa.post_send(w).unwrap();
    wait_for(&a, 1);
    let mut got = vec![0u8; LEN];
    assert!(rb.read(0, &mut got));
    assert!(got == data, "WRITE landed byte for byte");

    // READ it back into the second half of a's region.
    let mut r = SendWr::new(2, SendOp::Read, la.sge(LEN, LEN as u32));
    r.remote_addr = rb.addr();
    r.rkey = rb.rkey;
    qa.post_send(r).unwrap();
    wait_for(&a, 2);
    assert!(la.read(LEN, &mut got));
    assert!(got == data, "READ returned byte for byte");

    let steer = b.steer_counters().unwrap();
    a.close();
    b.close();
    let (mut tagged, mut total) = (0, 0);
    for f in frames.try_iter() {
        let Ok(p) = parse_frame(&f.data) else {
            continue;
        };
        total += 1;
        tagged += usize::from(p.headers.eth.vlan == Some(tag));
    }
    // 64 WRITE packets out, 64 READ response packets in, plus ACKs.
    assert!(total >= 128, "captured {total} RoCE frames");
    assert_eq!(tagged, total, "every RoCE frame carried VLAN 100");
    assert!(steer.redirected >= 64, "{steer:?}");
}
