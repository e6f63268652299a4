//! Times the engine's per-packet protocol path in memory, with no I/O:
//! a requester endpoint segments RDMA WRITEs into 4096-byte-payload
//! packets, a responder endpoint parses, verifies (ICRC), checks and
//! places them and returns ACKs, the requester's completer retires them.
//! Requester and responder time are kept apart, because on a real host one
//! core runs one side. This is the "cycles per packet" the projection is
//! built on.

use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant as WallInstant};

use engine::endpoint::{ConnectOptions, Endpoint, EndpointConfig, RemoteQp};
use engine::rc::{Access, Mtu, QpInitAttr, SendOp, SendWr, Sge, WcStatus, WorkCompletion};
use engine::time::Instant;

/// Per-packet wall time of each side.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PathTiming {
    /// Data packets moved.
    pub packets: u64,
    /// Payload bytes per data packet.
    pub payload: u32,
    /// Requester: `post_send` + `poll_transmit` of the data packets, plus
    /// handling the ACKs and polling the completions.
    pub requester_ns_per_packet: f64,
    /// Responder: `handle_packet` of the data packets, plus `poll_transmit`
    /// of the ACKs.
    pub responder_ns_per_packet: f64,
}

const MESSAGE: usize = 64 * 1024;
const SLOT: usize = 4096 + 128;

/// Runs WRITE messages of 64 KiB (16 packets of 4096 B) through two
/// endpoints in memory for about `duration` and returns the timing.
pub fn measure(duration: Duration) -> Result<PathTiming, String> {
    let ip_a = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
    let ip_b = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));
    let (mac_a, mac_b) = ([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]);
    let mut a = Endpoint::new(EndpointConfig {
        local_mac: mac_a,
        local_ip: ip_a,
        ..Default::default()
    });
    let mut b = Endpoint::new(EndpointConfig {
        local_mac: mac_b,
        local_ip: ip_b,
        ..Default::default()
    });
    let e = |e: engine::rc::VerbsError| format!("{e:?}");
    let cq_a = a.create_cq(4096);
    let cq_b = b.create_cq(4096);
    let init = |cq| QpInitAttr {
        send_cq: cq,
        recv_cq: cq,
        max_send_wr: 1024,
        max_recv_wr: 1024,
        sq_sig_all: false,
        srq: None,
    };
    let qa = a.create_qp(init(cq_a)).map_err(e)?;
    let qb = b.create_qp(init(cq_b)).map_err(e)?;
    let opts = ConnectOptions {
        path_mtu: Mtu::Mtu4096,
        access: Access::REMOTE_WRITE,
        ..Default::default()
    };
    a.connect(
        qa,
        &RemoteQp {
            qpn: qb,
            psn: opts.sq_psn,
            mac: mac_b,
            ip: ip_b,
        },
        &opts,
    )
    .map_err(e)?;
    b.connect(
        qb,
        &RemoteQp {
            qpn: qa,
            psn: opts.sq_psn,
            mac: mac_a,
            ip: ip_a,
        },
        &opts,
    )
    .map_err(e)?;
    let src = a
        .reg_mr(Box::new(vec![0x5Au8; MESSAGE]), 0x1000, Access::LOCAL_WRITE)
        .map_err(e)?;
    let dst = b
        .reg_mr(
            Box::new(vec![0u8; MESSAGE]),
            0x10_0000,
            Access::LOCAL_WRITE | Access::REMOTE_WRITE,
        )
        .map_err(e)?;

    let mut frames = vec![0u8; SLOT * (MESSAGE / 4096 + 4)];
    let mut lens: Vec<usize> = Vec::with_capacity(MESSAGE / 4096 + 4);
    let mut acks = vec![0u8; SLOT * 8];
    let mut ack_lens: Vec<usize> = Vec::with_capacity(8);
    let mut wcs = [WorkCompletion::default(); 8];
    let (mut req, mut resp) = (Duration::ZERO, Duration::ZERO);
    let mut packets = 0u64;
    let start = WallInstant::now();
    let now = || Instant::from_nanos(start.elapsed().as_nanos() as u64);
    let mut wr_id = 0u64;
    while start.elapsed() < duration || packets == 0 {
        // Requester: post and segment one message.
        let t0 = WallInstant::now();
        wr_id += 1;
        let mut wr = SendWr::new(
            wr_id,
            SendOp::Write,
            Sge {
                lkey: src.lkey,
                addr: 0x1000,
                length: MESSAGE as u32,
            },
        );
        wr.remote_addr = 0x10_0000;
        wr.rkey = dst.rkey;
        wr.signaled = true;
        a.post_send(qa, wr).map_err(e)?;
        lens.clear();
        let t = now();
        transmit_all(&mut a, t, &mut frames, &mut lens);
        let t1 = WallInstant::now();
        // Responder: take every packet, emit the ACKs.
        let t = now();
        for (i, &n) in lens.iter().enumerate() {
            b.handle_packet(t, &frames[i * SLOT..i * SLOT + n]);
        }
        ack_lens.clear();
        transmit_all(&mut b, t, &mut acks, &mut ack_lens);
        let t2 = WallInstant::now();
        // Requester again: the ACKs and the completion.
        let t = now();
        for (i, &n) in ack_lens.iter().enumerate() {
            a.handle_packet(t, &acks[i * SLOT..i * SLOT + n]);
        }
        let got = a.poll_cq(cq_a, &mut wcs);
        let t3 = WallInstant::now();
        req += (t1 - t0) + (t3 - t2);
        resp += t2 - t1;
        if got != 1 || wcs[0].status != WcStatus::Success || wcs[0].wr_id != wr_id {
            return Err(format!(
                "in-memory WRITE {wr_id} did not complete once with success: {} completions, {:?}; {} data packets, {} ACKs",
                got,
                &wcs[..got],
                lens.len(),
                ack_lens.len()
            ));
        }
        packets += lens.len() as u64;
        let _ = b.poll_cq(cq_b, &mut wcs);
    }
    Ok(PathTiming {
        packets,
        payload: 4096,
        requester_ns_per_packet: req.as_nanos() as f64 / packets as f64,
        responder_ns_per_packet: resp.as_nanos() as f64 / packets as f64,
    })
}

/// Lets `ep` transmit into consecutive `SLOT`-byte slots of `slots` until
/// it has nothing more to send or the slots run out; appends each frame's
/// length to `lens` (which the caller cleared).
fn transmit_all(ep: &mut Endpoint, now: Instant, slots: &mut [u8], lens: &mut Vec<usize>) {
    while lens.len() * SLOT < slots.len() {
        let off = lens.len() * SLOT;
        match ep.poll_transmit(now, &mut slots[off..off + SLOT]) {
            Some(n) => lens.push(n),
            None => break,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_memory_writes_complete_and_are_timed() {
        let t = measure(Duration::from_millis(20)).unwrap();
        assert!(t.packets >= 16 && t.packets.is_multiple_of(16), "{t:?}");
        assert!(t.requester_ns_per_packet > 0.0);
        assert!(t.responder_ns_per_packet > 0.0);
    }
}
