//! The `ibv_rc_pingpong` TCP exchange as stock rdma-core sent it between two
//! Soft-RoCE VMs (interop/captures/rxe_pingpong_tcp.pcap: four runs, server
//! 10.99.0.11, client 10.99.0.12, `-g 1 -m 1024 -n 5`, sizes 1, 100, 4096,
//! 8192). The expected values are what the two ibv_rc_pingpong processes
//! printed as their local/remote address lines.

use core::net::Ipv4Addr;

use engine::oob::pingpong::{is_done, Dest, DEFAULT_TCP_PORT, DEST_MSG_LEN, DONE};
use engine::oob::Gid;

use crate::support::{read_pcap, tcp_payload};

/// (client QPN, client PSN, server QPN, server PSN) printed by each run.
const RUNS: [(u32, u32, u32, u32); 4] = [
    (0x11, 0xe6c1cd, 0x11, 0xb0a5a1),
    (0x12, 0x1ff188, 0x12, 0xddcfee),
    (0x13, 0xaa030c, 0x13, 0xa12e2c),
    (0x14, 0x667212, 0x14, 0x8ebe42),
];

#[test]
fn real_exchange_parses_in_client_server_done_order() {
    let mut messages = Vec::new(); // (from client?, payload)
    for rec in read_pcap("rxe_pingpong_tcp.pcap") {
        if let Some(((sport, dport), payload)) = tcp_payload(&rec.data) {
            if !payload.is_empty() {
                assert!(sport == DEFAULT_TCP_PORT || dport == DEFAULT_TCP_PORT);
                messages.push((dport == DEFAULT_TCP_PORT, payload.to_vec()));
            }
        }
    }
    assert_eq!(messages.len(), 3 * RUNS.len());
    let client_gid = Gid::from_ipv4(Ipv4Addr::new(10, 99, 0, 12));
    let server_gid = Gid::from_ipv4(Ipv4Addr::new(10, 99, 0, 11));
    for (run, chunk) in messages.chunks(3).enumerate() {
        let (cqpn, cpsn, sqpn, spsn) = RUNS[run];
        // 1. The client speaks first: its 52-byte address.
        assert!(chunk[0].0, "run {run}: client sends first");
        assert_eq!(chunk[0].1.len(), DEST_MSG_LEN);
        let client = Dest::parse(&chunk[0].1).unwrap();
        assert_eq!(
            client,
            Dest {
                lid: 0,
                qpn: cqpn,
                psn: cpsn,
                gid: client_gid
            }
        );
        // Our formatter reproduces the bytes exactly.
        assert_eq!(&client.to_bytes()[..], &chunk[0].1[..]);
        // 2. The server answers with its address.
        assert!(!chunk[1].0, "run {run}: server answers second");
        let server = Dest::parse(&chunk[1].1).unwrap();
        assert_eq!(
            server,
            Dest {
                lid: 0,
                qpn: sqpn,
                psn: spsn,
                gid: server_gid
            }
        );
        assert_eq!(&server.to_bytes()[..], &chunk[1].1[..]);
        assert_eq!(
            server.to_string(),
            format!("LID 0x0000, QPN 0x{sqpn:06x}, PSN 0x{spsn:06x}, GID ::ffff:10.99.0.11")
        );
        // 3. The client closes with "done\0" in one segment.
        assert!(chunk[2].0, "run {run}: client sends done");
        assert!(is_done(&chunk[2].1));
        assert_eq!(&chunk[2].1[..], &DONE[..]);
    }
}

#[test]
fn literal_bytes_from_the_capture() {
    // Run 1, client -> server, copied from the capture's TCP payload.
    let msg = b"0000:000011:e6c1cd:00000000000000000000ffff0a63000c\0";
    let d = Dest::parse(msg).unwrap();
    assert_eq!(d.qpn, 0x11);
    assert_eq!(d.psn, 0xe6c1cd);
    assert_eq!(d.gid.to_ipv4_mapped(), Some(Ipv4Addr::new(10, 99, 0, 12)));
    assert_eq!(d.to_bytes(), *msg);
}
