//! Memory per QP: RSS growth of one endpoint holding 65,536 connected QPs.
//!
//! `qp_memory WR [created|rts|full]`: WR send and receive work requests
//! per QP; the QPs left in RESET (`created`, the default), connected and
//! idle (`rts`), or connected with both queues full (`full`).
use engine::endpoint::{ConnectOptions, Endpoint, EndpointConfig, RemoteQp};
use engine::rc::{QpInitAttr, RecvWr, SendOp, SendWr, Sge};
use std::net::{IpAddr, Ipv4Addr};

fn rss() -> u64 {
    let s = std::fs::read_to_string("/proc/self/statm").unwrap();
    s.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() * 4096
}

/// Large tables (an endpoint's QPs) in huge pages: `engine::io::HugePageAlloc`.
#[global_allocator]
static ALLOC: engine::io::HugePageAlloc = engine::io::HugePageAlloc;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let mode = args.get(2).map_or("created", String::as_str);
    let wr = args.get(1).and_then(|w| w.parse::<u32>().ok());
    let (Some(wr), true) = (wr, matches!(mode, "created" | "rts" | "full")) else {
        eprintln!(
            "usage: qp_memory WR [created|rts|full]: resident memory per QP of 65,536 QPs \
             with WR send and receive work requests each (e.g. `qp_memory 64 rts`)"
        );
        std::process::exit(2);
    };
    let connect = mode == "rts";
    let full = mode == "full";
    let n = 65_536u32;
    let before = rss();
    let mut ep = Endpoint::new(EndpointConfig {
        max_qps: n,
        ..Default::default()
    });
    let cq = ep.create_cq(16);
    for k in 0..n {
        let q = ep
            .create_qp(QpInitAttr {
                send_cq: cq,
                recv_cq: cq,
                max_send_wr: wr,
                max_recv_wr: wr,
                sq_sig_all: false,
                srq: None,
            })
            .unwrap();
        if connect || full {
            let remote = RemoteQp {
                qpn: 0x100 + k,
                psn: 0,
                mac: [2, 0, 0, 0, 0, 2],
                ip: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)),
            };
            ep.connect(q, &remote, &ConnectOptions::default()).unwrap();
        }
        if full {
            for i in 0..wr {
                let mut w = SendWr::new(u64::from(i), SendOp::Write, Sge::default());
                w.signaled = false;
                ep.post_send(q, w).unwrap();
                ep.post_recv(
                    q,
                    RecvWr {
                        wr_id: 0,
                        sge: Sge::default(),
                    },
                )
                .unwrap();
            }
        }
    }
    let after = rss();
    println!(
        "{n} QPs, {wr}/{wr} WRs, {}: {} bytes per QP ({} MiB total)",
        if full {
            "connected, both queues full"
        } else if connect {
            "connected (RTS), idle"
        } else {
            "created (RESET)"
        },
        (after - before) / u64::from(n),
        (after - before) >> 20
    );
}
