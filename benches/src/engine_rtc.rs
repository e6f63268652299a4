//! The engine's ping-pong in run-to-completion mode
//! (`engine::driver::RunToCompletion`): each side's application thread owns its
//! queue's engine and drives it itself, with no engine thread and no queue
//! between threads. Two threads, one per side, as the kernel UDP
//! ping-pong has; both busy-poll with the UDP baseline's idle policy
//! (poll, and yield the core when nothing arrived).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use engine::driver::{InlineConfig, RunToCompletion};
use engine::endpoint::{ConnectOptions, RemoteQp};
use engine::rc::{Access, Mtu, RecvWr, SendOp, SendWr, WcOpcode, WcStatus, WorkCompletion};
use engine::testbed::netns::{Side, VethPair};
use engine::verbs::{MemoryRegion, QpCaps};

use crate::error::{context, EngineResult};

/// Receives kept posted on each side.
const RECEIVES: u64 = 8;
/// Offset of the outgoing message in each side's region (receives land at 0).
const SEND_AT: usize = 4096;
/// Longest wait for one answer before the run fails (loss is not hidden).
const ANSWER_TIMEOUT: Duration = Duration::from_secs(2);

/// One side: its run-to-completion queue, QP and region.
struct End {
    q: RunToCompletion,
    qpn: u32,
    mr: MemoryRegion,
}

/// Opens `side`'s queue 0 (the socket layer waits for a queue another
/// measurement just closed: `XskConfig::busy_wait`).
fn open(side: &Side) -> EngineResult<RunToCompletion> {
    let mut c = InlineConfig::new(&side.ifname);
    c.netns = Some(side.netns.clone());
    c.multi_buffer = true;
    RunToCompletion::open(c).map_err(|err| format!("opening a run-to-completion queue: {err}"))
}

/// Opens both sides' queue 0 and connects one RC QP pair (PMTU 4096).
fn connect(pair: &VethPair) -> EngineResult<(End, End)> {
    let mut a = open(&pair.a)?;
    let mut b = open(&pair.b)?;
    let mac_b = a
        .resolve_mac(b.ip())
        .map_err(context("resolving b's MAC"))?;
    let mac_a = b
        .resolve_mac(a.ip())
        .map_err(context("resolving a's MAC"))?;
    let caps = QpCaps::default();
    let qpn_a = a.create_qp(caps).map_err(context("creating QP a"))?;
    let qpn_b = b.create_qp(caps).map_err(context("creating QP b"))?;
    let mr_a = a
        .register_memory(2 * SEND_AT, Access::ALL)
        .map_err(context("registering memory a"))?;
    let mr_b = b
        .register_memory(2 * SEND_AT, Access::ALL)
        .map_err(context("registering memory b"))?;
    let opts = ConnectOptions {
        path_mtu: Mtu::Mtu4096,
        sq_psn: 0x100,
        ..Default::default()
    };
    let psn_b = 0x9_0000;
    let remote_b = RemoteQp {
        qpn: qpn_b,
        psn: psn_b,
        mac: mac_b,
        ip: b.ip(),
    };
    let remote_a = RemoteQp {
        qpn: qpn_a,
        psn: opts.sq_psn,
        mac: mac_a,
        ip: a.ip(),
    };
    a.connect(qpn_a, remote_b, opts)
        .map_err(context("connecting QP a"))?;
    b.connect(
        qpn_b,
        remote_a,
        ConnectOptions {
            sq_psn: psn_b,
            ..opts
        },
    )
    .map_err(context("connecting QP b"))?;
    let a = End {
        q: a,
        qpn: qpn_a,
        mr: mr_a,
    };
    let b = End {
        q: b,
        qpn: qpn_b,
        mr: mr_b,
    };
    Ok((a, b))
}

impl End {
    fn post_recv(&mut self, id: u64, size: u32) -> EngineResult<()> {
        let wr = RecvWr {
            wr_id: id,
            sge: self.mr.sge(0, size),
        };
        self.q
            .post_recv(self.qpn, wr)
            .map_err(context("posting a receive"))
    }

    fn post_send(&mut self, id: u64, size: u32) -> EngineResult<()> {
        let mut wr = SendWr::new(id, SendOp::Send, self.mr.sge(SEND_AT, size));
        wr.signaled = false;
        self.q
            .post_send(self.qpn, wr)
            .map_err(context("posting a SEND"))
    }

    /// Receive completions taken by one `poll_cq` (each checked).
    fn poll_recvs(&mut self, wcs: &mut [WorkCompletion]) -> EngineResult<usize> {
        let n = self.q.poll_cq(wcs);
        let mut recvs = 0;
        for wc in &wcs[..n] {
            if wc.status != WcStatus::Success {
                return Err(format!("ping-pong completion {:?}", wc.status));
            }
            if wc.opcode == WcOpcode::Recv {
                recvs += 1;
            }
        }
        Ok(recvs)
    }
}

/// `size`-byte SEND ping-pong in run-to-completion mode: a's thread sends
/// a ping and polls until the pong arrives, b's thread answers every ping
/// with a pong. Returns a's round-trip times (`iterations` of them).
pub fn pingpong(pair: &VethPair, size: u64, iterations: usize) -> EngineResult<Vec<Duration>> {
    let size = size as u32;
    let (mut a, mut b) = connect(pair)?;
    for i in 0..RECEIVES {
        a.post_recv(i, size)?;
        b.post_recv(i, size)?;
    }
    let stop = Arc::new(AtomicBool::new(false));
    let stop_b = stop.clone();
    let responder = std::thread::Builder::new()
        .name("rtc-pong".into())
        .spawn(move || -> EngineResult<u64> {
            let mut wcs = vec![WorkCompletion::default(); 16];
            let mut answered = 0u64;
            while !stop_b.load(Ordering::Relaxed) {
                let recvs = b.poll_recvs(&mut wcs)?;
                for _ in 0..recvs {
                    b.post_recv(RECEIVES + answered, size)?;
                    b.post_send(answered, size)?;
                    answered += 1;
                }
                if recvs == 0 {
                    std::thread::yield_now();
                }
            }
            Ok(answered)
        })
        .map_err(context("spawning the responder thread"))?;
    let requester = std::thread::Builder::new()
        .name("rtc-ping".into())
        .spawn(move || -> EngineResult<Vec<Duration>> {
            let mut wcs = vec![WorkCompletion::default(); 16];
            let mut rtts = Vec::with_capacity(iterations);
            for i in 0..iterations as u64 {
                let t0 = Instant::now();
                a.post_send(i, size)?;
                while a.poll_recvs(&mut wcs)? == 0 {
                    if t0.elapsed() > ANSWER_TIMEOUT {
                        return Err(format!("ping {i}: no answer within {ANSWER_TIMEOUT:?}"));
                    }
                    std::thread::yield_now();
                }
                rtts.push(t0.elapsed());
                a.post_recv(RECEIVES + i, size)?;
            }
            Ok(rtts)
        })
        .map_err(context("spawning the requester thread"))?;
    let rtts = requester
        .join()
        .unwrap_or_else(|_| Err("the requester thread panicked".into()));
    stop.store(true, Ordering::Relaxed);
    let answered = responder
        .join()
        .unwrap_or_else(|_| Err("the responder thread panicked".into()));
    let rtts = rtts?;
    let answered = answered?;
    if answered != iterations as u64 {
        return Err(format!("{answered} pongs for {iterations} pings"));
    }
    Ok(rtts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::veth_pair;

    #[test]
    #[ignore = "needs root"]
    fn run_to_completion_pingpong_over_veth() {
        let pair = veth_pair();
        let mut rtts = pingpong(&pair, 64, 2000).unwrap();
        assert_eq!(rtts.len(), 2000);
        let p = crate::stats::Percentiles::of(&mut rtts[200..]).unwrap();
        eprintln!("engine SEND ping-pong, run-to-completion: {p:?}");
        // The queues were released: a second run opens them again.
        assert_eq!(pingpong(&pair, 64, 10).unwrap().len(), 10);
    }
}
