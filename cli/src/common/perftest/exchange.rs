//! Walks a test's exchange ([`engine::oob::perftest::schedule`]) over a
//! [`PerfConn`], calling the side's [`Hooks`] at the local steps (connect,
//! post receives, run a size, results).

use anyhow::bail;
use engine::oob::perftest::{is_early_key, BwReport, Key, Step};

use super::conn::{PerfConn, Stream};

/// What a side does at the schedule's local steps.
pub trait Hooks {
    /// Our key for QP `qp` (the QPs exist before the first key).
    fn key(&self, qp: usize) -> Key;
    /// Connect our QPs to the peer's setup keys (one per QP).
    fn connect(&mut self, peer: Vec<Key>) -> anyhow::Result<()>;
    /// `-R`: connect our QPs through the CM (between the two handshakes
    /// perftest's `create_rdma_cm_connection` makes).
    fn cm_connect(&mut self) -> anyhow::Result<()> {
        Ok(())
    }
    /// Server, send tests: the receives for size number `size`.
    fn post_recvs(&mut self, size: usize) -> anyhow::Result<()>;
    /// Run (client) or serve (server) size number `size`.
    fn run<S: Stream>(&mut self, size: usize, conn: &mut PerfConn<S>) -> anyhow::Result<()>;
    /// Our bandwidth result for the report exchange.
    fn report(&self) -> BwReport;
    /// The peer's.
    fn peer_report(&mut self, r: BwReport);
}

/// Runs `steps` after the preamble (version, cycle buffer, cache line and
/// MTU, which [`PerfConn::preamble`] exchanged).
///
/// With `rdma_cm` (`-R`, the exchange over a CM-connected control QP),
/// as perftest 4.5's rdma_cm mode runs it: before the first setup key, a
/// handshake, the QPs' CM connections ([`Hooks::cm_connect`]) and another
/// handshake (`create_rdma_cm_connection`); keys as `struct
/// pingpong_dest` ([`PerfConn::binary_keys`]); no `"done"` at the end
/// (`ctx_close_connection` sends none over rdma_cm).
pub fn drive<S: Stream, H: Hooks>(
    conn: &mut PerfConn<S>,
    steps: &[Step],
    hooks: &mut H,
    rdma_cm: bool,
) -> anyhow::Result<()> {
    conn.binary_keys = rdma_cm;
    let qps = steps
        .iter()
        .filter(|s| matches!(s, Step::SetupKey { .. }))
        .count();
    let mut setup: Vec<Option<Key>> = vec![None; qps];
    for (i, &step) in steps.iter().enumerate() {
        match step {
            Step::Version | Step::CycleBuffer | Step::CacheLine | Step::Mtu => {}
            Step::SetupKey { qp } => {
                if rdma_cm && qp == 0 {
                    conn.key(&hooks.key(0))?;
                    hooks.cm_connect()?;
                    conn.key(&hooks.key(0))?;
                }
                setup[qp] = Some(conn.key(&hooks.key(qp))?)
            }
            Step::Connect => {
                let keys: Vec<Key> = setup.iter().map(|k| k.expect("every setup key")).collect();
                hooks.connect(keys)?;
            }
            Step::Key { qp } => {
                let k = conn.key(&hooks.key(qp))?;
                // A barrier repeats the QP's key: anything else means the
                // two sides disagree about the test (other -q, other tool).
                if let Some(Some(s)) = setup.get(qp) {
                    if !is_early_key(steps, i) && k.qpn != s.qpn {
                        bail!(
                            "the perftest peer {} sent QP 0x{:06x} where QP 0x{:06x} was due: run the same test with the same -q / -a on both sides",
                            conn.peer(),
                            k.qpn,
                            s.qpn
                        );
                    }
                }
            }
            Step::PostRecvs { size } => hooks.post_recvs(size)?,
            Step::Run { size } => hooks.run(size, conn)?,
            Step::Report => {
                let r = conn.report(&hooks.report())?;
                hooks.peer_report(r);
            }
            Step::Done if rdma_cm => {}
            Step::Done => conn.done(),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use engine::oob::perftest::{schedule, step_len, Role, Test, DONE};
    use engine::oob::perftest_transcripts::TRANSCRIPTS;
    use engine::oob::Gid;

    use super::*;
    use crate::common::perftest::conn::replay::Replay;

    /// Counts the hook calls; never touches a datapath.
    #[derive(Default)]
    struct Dry {
        connected: Option<Vec<Key>>,
        runs: usize,
        recvs: usize,
        peer: Option<BwReport>,
    }

    impl Hooks for Dry {
        fn key(&self, qp: usize) -> Key {
            Key {
                lid: 0,
                out_reads: 16,
                qpn: 0x100 + qp as u32,
                psn: 0x1234,
                rkey: 0x55,
                vaddr: 0x7000,
                gid: Gid::from_ip("10.53.0.2".parse().unwrap()),
                srqn: 0,
            }
        }
        fn connect(&mut self, peer: Vec<Key>) -> anyhow::Result<()> {
            self.connected = Some(peer);
            Ok(())
        }
        fn post_recvs(&mut self, _: usize) -> anyhow::Result<()> {
            self.recvs += 1;
            Ok(())
        }
        fn run<S: Stream>(&mut self, _: usize, _: &mut PerfConn<S>) -> anyhow::Result<()> {
            self.runs += 1;
            Ok(())
        }
        fn report(&self) -> BwReport {
            BwReport::default()
        }
        fn peer_report(&mut self, r: BwReport) {
            self.peer = Some(r);
        }
    }

    /// Our side of each recorded session, in both roles, fed what the
    /// stock perftest peer sent: it consumes exactly the peer's bytes and
    /// writes exactly as many as stock perftest did in our place.
    #[test]
    fn our_side_speaks_stock_perftest_4_5_and_25_01_in_both_roles() {
        for tr in &TRANSCRIPTS {
            let (name, t, test, qps, sizes) = (tr.name, tr.text, tr.test, tr.qps, tr.sizes);
            for (role, peer_dir, our_dir) in [(Role::Client, "s", "c"), (Role::Server, "c", "s")] {
                let stock_ours = Replay::new(t, our_dir).input;
                let mut conn = PerfConn::new(
                    Replay::new(t, peer_dir),
                    role,
                    "stock perftest".into(),
                    Duration::from_secs(1),
                );
                let pre = conn.preamble(1024).unwrap();
                let v = if name.contains("25.01") {
                    "6.24"
                } else {
                    "6.06"
                };
                assert_eq!(
                    (
                        pre.peer_version.text.as_str(),
                        pre.cycle_buffer,
                        pre.cache_line,
                        pre.mtu
                    ),
                    (v, 4096, 64, 1024),
                    "{name}"
                );
                let steps = schedule(test, qps, sizes);
                let mut dry = Dry::default();
                drive(&mut conn, &steps, &mut dry, false)
                    .unwrap_or_else(|e| panic!("{name} {role:?}: {e:#}"));
                let replay = conn_into(conn);
                // Everything read but the peer's "done" (nobody reads it).
                let unread = &replay.input[replay.at..];
                assert!(
                    unread.is_empty() || unread == DONE,
                    "{name} {role:?}: unread {unread:?}"
                );
                // We write "done" as 4.5 does; 25.01 no longer does.
                let stock_done = stock_ours.ends_with(DONE) || !steps.contains(&Step::Done);
                let extra = if stock_done { 0 } else { DONE.len() };
                assert_eq!(
                    replay.written.len(),
                    stock_ours.len() + extra,
                    "{name} {role:?}"
                );
                let keys = dry.connected.expect("connected");
                assert_eq!(keys.len(), qps);
                assert!(
                    keys.iter().all(|k| k.ip().to_string().ends_with(".11")),
                    "{name}"
                );
                assert_eq!(dry.runs, sizes, "{name}");
                if !test.is_latency() && test != Test::SendBw {
                    let r = dry.peer.expect("a report");
                    if role == Role::Server {
                        // -n 5 per QP; -D: as many as fit.
                        if !name.contains("-D") {
                            assert_eq!(r.iters, 5 * qps as u64, "{name}");
                        }
                        assert!(r.bw_avg_mbs > 0.0);
                    }
                }
                // The schedule's lengths add up to what was written.
                let total: usize = steps.iter().map(|&s| step_len(s)).sum();
                assert_eq!(total, replay.written.len(), "{name}");
                if steps.contains(&Step::Done) {
                    assert!(replay.written.ends_with(DONE));
                }
            }
        }
    }

    fn conn_into(c: PerfConn<Replay>) -> Replay {
        c.into_inner()
    }

    #[test]
    fn truncated_or_foreign_peers_are_errors_not_hangs() {
        let t = TRANSCRIPTS[0].text;
        // The peer closes after its version.
        let mut r = Replay::new(t, "s");
        r.input.truncate(16);
        let mut conn = PerfConn::new(r, Role::Client, "peer".into(), Duration::from_millis(50));
        let e = conn.preamble(1024).unwrap_err();
        assert!(crate::errors::user_message(&e).is_some(), "{e:#}");
        assert!(format!("{e:#}").contains("closed the connection"), "{e:#}");
        // An old peer.
        let mut r = Replay::new(t, "s");
        r.input[..4].copy_from_slice(b"5.10");
        let mut conn = PerfConn::new(r, Role::Client, "peer".into(), Duration::from_millis(50));
        let e = format!("{:#}", conn.preamble(1024).unwrap_err());
        assert!(e.contains("5.10") && e.contains("6.06"), "{e}");
        // An HTTP client at our server.
        let mut r = Replay::new("", "c");
        r.input = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec();
        let mut conn = PerfConn::new(r, Role::Server, "peer".into(), Duration::from_millis(50));
        assert!(conn.preamble(1024).is_err());
    }
}
