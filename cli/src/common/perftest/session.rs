//! The two sides of a test once the datapath is open.
//!
//! Each region is `2 * max_size` bytes: `[0, max)` is where the peer's
//! WRITEs and SENDs land (and where READ responses land), `[max, 2 max)`
//! is what this side sends from. Latency tests use one QP; bandwidth tests
//! spread the messages over every QP, `tx_depth` in flight on each.
//! Latency of write-lat and send-lat is half the round trip (as perftest
//! reports it); read-lat is the full READ round trip.

use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Receiver;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use engine::endpoint::{ConnectOptions, RemoteQp};
use engine::oob::perftest::Key;
use engine::oob::Gid;
use engine::rc::{Access, Mtu, RecvWr, SendOp, SendWr, WcOpcode, WcStatus, WorkCompletion};
use engine::verbs::{Device, MemoryRegion, QpCaps, QueuePair, SharedCq};

use super::bandwidth::BandwidthStats;
use super::conn::{PerfConn, Stream};
use super::kind::Kind;
use super::latency::LatencyStats;
use super::progress::Progress;
use super::report::{BwRow, LatRow};

/// Where a session's completions come from.
pub enum Cq {
    /// Straight from the queue's completion queue (the session owns it).
    Direct(Arc<Device>, u32),
    /// Routed by a dispatcher thread (several sessions share a queue).
    Routed(Receiver<WorkCompletion>),
    /// The queue's completions of these QPs, shared with other consumers
    /// of the queue (`-R`: QP 1 and the control QP).
    Shared(Arc<SharedCq>, Vec<u32>),
}

impl Cq {
    fn poll(&mut self, out: &mut [WorkCompletion]) -> usize {
        match self {
            Cq::Direct(dev, q) => dev.poll_cq(*q, out),
            Cq::Routed(rx) => {
                super::rtc::pump();
                let mut n = 0;
                while n < out.len() {
                    match rx.try_recv() {
                        Ok(wc) => {
                            out[n] = wc;
                            n += 1;
                        }
                        Err(_) => break,
                    }
                }
                n
            }
            Cq::Shared(cq, qpns) => cq.poll(|q| qpns.contains(&q), out),
        }
    }
}

/// Connection options for a test: the path MTU, a first PSN, RNR
/// retries without limit (a SEND that beats the receiver's re-post waits),
/// and every remote right on the QP, as perftest sets at INIT (the
/// region's rights are the test's own: `Kind::access`).
pub fn connect_options(mtu: u32, psn: u32) -> anyhow::Result<ConnectOptions> {
    Ok(ConnectOptions {
        path_mtu: Mtu::from_bytes(mtu).with_context(|| format!("invalid path MTU {mtu}"))?,
        sq_psn: psn,
        rnr_retry: 7,
        min_rnr_timer: 1,
        access: Access::ALL,
        ..ConnectOptions::default()
    })
}

fn check_wc(wc: &WorkCompletion, what: &str) -> anyhow::Result<()> {
    if wc.status == WcStatus::Success {
        return Ok(());
    }
    if wc.status == WcStatus::RemoteAccessError {
        // What the user fixes: the sizes (perftest's exchange does not
        // carry the peer's buffer length, so this is where it shows).
        return Err(crate::errors::UserError::Usage(format!(
            "{what}: the peer refused the access on QP 0x{:06x} (remote access error): its region is smaller than the messages (give both sides the same -s / -a; against roce-xdp serve, use serve --region) or the key is wrong",
            wc.qpn
        ))
        .into());
    }
    let hint = match wc.status {
        WcStatus::RetryExceeded => ": the peer stopped answering (is it still running? does the path MTU -m fit both links?)",
        WcStatus::RnrRetryExceeded => ": the peer had no receive posted",
        _ => "",
    };
    bail!(
        "{what}: work completion {:?} on QP 0x{:06x}{hint}",
        wc.status,
        wc.qpn
    )
}

fn check_post_errors(dev: &Device, q: u32, qps: &[QueuePair]) -> anyhow::Result<()> {
    if let Some(e) = dev.poll_post_error(q) {
        // Several sessions (serve) share a queue: another's is not ours.
        if !qps.iter().any(|qp| qp.qpn() == e.qpn) {
            tracing::debug!(qpn = e.qpn, error = %e.error, "post error of another session");
            return Ok(());
        }
        bail!(
            "the engine refused a work request on QP 0x{:06x}: {}",
            e.qpn,
            e.error
        );
    }
    Ok(())
}

/// Marker byte of latency iteration `i`: perftest's `(char)++scnt`, the
/// count of WRITEs posted so far (wrapping).
fn marker(i: u64) -> u8 {
    (i + 1) as u8
}

/// The responder depth this side offers (`max_dest_rd_atomic`, announced
/// as perftest's `out_reads`): the READs and atomics the peer may have in
/// flight on one QP.
pub const RESPONDER_DEPTH: u8 = 16;

/// How often a latency server, polling with nothing arriving, checks the
/// exchange connection (has the client sent its next message or left?),
/// its posts' errors and the time since the client's last packet.
const CHECK_EVERY: Duration = Duration::from_millis(5);

/// The landing area's size for messages of up to `max` bytes: at least
/// perftest's `BUFF_SIZE(size, cycle_buffer)`, whole cache lines, so a
/// stock perftest peer's cycling addresses stay inside it.
pub fn landing_size(max: u64, cycle_buffer: u32, cache_line: u32) -> u64 {
    let cl = u64::from(cache_line.max(1));
    max.div_ceil(cl)
        .saturating_mul(cl)
        .max(u64::from(cycle_buffer))
}

/// What the peer's keys say about it.
#[derive(Debug, Clone)]
pub struct Peer {
    /// One key per QP, in QP order.
    pub keys: Vec<Key>,
    pub ip: IpAddr,
    pub mac: [u8; 6],
}

/// One side's region and QPs before it is connected: what its keys
/// describe, and what [`Local::connect`] turns into a [`Side`].
pub struct Local {
    pub dev: Arc<Device>,
    pub queue: u32,
    /// `2 * half` bytes (see the module docs).
    pub mr: MemoryRegion,
    pub half: u64,
    pub qps: Vec<QueuePair>,
    /// The first PSN of each QP.
    pub psns: Vec<u32>,
    /// Where the messages this side sends start: `half` (the region's
    /// second half), or 0 for a region that is only a landing area (serve
    /// answers a SEND with what it received).
    pub send_at: u64,
    /// Written into every key's SRQ number (ignored by perftest for RC):
    /// which test a roce-xdp client runs, for `roce-xdp serve`.
    pub tag: u32,
}

impl Local {
    /// QP `i`'s key for the exchange: QPN, first PSN, the landing area's
    /// address and R_Key, our GID (the device's IP) and responder depth.
    pub fn key(&self, i: usize) -> Key {
        Key {
            lid: 0,
            out_reads: u32::from(RESPONDER_DEPTH),
            qpn: self.qps[i].qpn(),
            psn: self.psns[i],
            rkey: self.mr.rkey,
            vaddr: self.mr.addr(),
            gid: Gid::from_ip(self.dev.ip()),
            srqn: self.tag,
        }
    }

    pub fn keys(&self) -> Vec<Key> {
        (0..self.qps.len()).map(|i| self.key(i)).collect()
    }

    /// Connects our QPs to `peer`'s, pairwise, at path MTU `mtu`.
    pub fn connect(
        self,
        peer: Peer,
        cq: Cq,
        mtu: u32,
        stop: Arc<AtomicBool>,
        timeout: Duration,
    ) -> anyhow::Result<Side> {
        let side = Side {
            dev: self.dev,
            queue: self.queue,
            mr: self.mr,
            recvs: vec![0; self.qps.len()],
            qps: self.qps,
            cq,
            half: self.half,
            send_at: self.send_at,
            peer,
            stop,
            timeout,
        };
        side.connect(&self.psns, mtu)?;
        Ok(side)
    }

    /// The side of QPs already connected (by the CM, `-R`) to `peer`'s.
    pub fn connected(self, peer: Peer, cq: Cq, stop: Arc<AtomicBool>, timeout: Duration) -> Side {
        Side {
            dev: self.dev,
            queue: self.queue,
            mr: self.mr,
            recvs: vec![0; self.qps.len()],
            qps: self.qps,
            cq,
            half: self.half,
            send_at: self.send_at,
            peer,
            stop,
            timeout,
        }
    }
}

/// Everything one side needs during the runs.
pub struct Side {
    pub dev: Arc<Device>,
    pub queue: u32,
    pub mr: MemoryRegion,
    pub qps: Vec<QueuePair>,
    pub cq: Cq,
    /// Half the region: the landing area's size.
    pub half: u64,
    /// See [`Local::send_at`].
    pub send_at: u64,
    pub peer: Peer,
    pub stop: Arc<AtomicBool>,
    /// Seconds without progress before giving up.
    pub timeout: Duration,
    /// Receives posted and not yet completed, per QP.
    pub recvs: Vec<u32>,
}

/// What a server measured itself during a run (perftest's send-bw,
/// write-lat and send-lat servers print their own figures).
#[derive(Debug, Clone, Copy)]
pub enum Measured {
    Nothing,
    Bw(BwRow),
    Lat(LatRow),
}

impl Side {
    /// Creates `n` QPs on `queue`.
    pub fn create_qps(
        dev: &Device,
        queue: u32,
        n: usize,
        depth: u32,
    ) -> anyhow::Result<Vec<QueuePair>> {
        let caps = QpCaps {
            max_send_wr: depth.max(16),
            max_recv_wr: depth.max(16),
        };
        (0..n)
            .map(|_| dev.create_qp(queue, caps).context("creating a QP"))
            .collect()
    }

    /// Connects our QPs to the peer's, pairwise. The peer's READ / atomic
    /// responder depth bounds ours in flight.
    fn connect(&self, psns: &[u32], mtu: u32) -> anyhow::Result<()> {
        for (i, qp) in self.qps.iter().enumerate() {
            let k = self.peer.keys[i];
            let mut opts = connect_options(mtu, psns[i])?;
            opts.max_dest_rd_atomic = RESPONDER_DEPTH;
            opts.max_rd_atomic = k.out_reads.clamp(1, u32::from(RESPONDER_DEPTH)) as u8;
            qp.connect(
                RemoteQp {
                    qpn: k.qpn,
                    psn: k.psn,
                    mac: self.peer.mac,
                    ip: self.peer.ip,
                },
                opts,
            )
            .with_context(|| format!("connecting QP 0x{:06x}", qp.qpn()))?;
        }
        Ok(())
    }

    /// Destroys the QPs (a session's end, however it ends).
    pub fn destroy(self) -> MemoryRegion {
        for qp in self.qps {
            let _ = qp.destroy();
        }
        self.mr
    }

    fn post_send(&self, qp: &QueuePair, wr: SendWr) -> anyhow::Result<bool> {
        match qp.post_send(wr) {
            Ok(()) => Ok(true),
            Err(engine::verbs::DeviceError::WouldBlock(_)) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// Posts a receive covering the whole landing area (so receives left
    /// over from a smaller size fit any later size).
    fn post_recv(&mut self, qp: &QueuePair) -> anyhow::Result<()> {
        let wr = RecvWr {
            wr_id: 0,
            sge: self.mr.sge(0, self.half as u32),
        };
        qp.post_recv_within(wr, self.timeout)?;
        if let Some(i) = self.qps.iter().position(|q| q.qpn() == qp.qpn()) {
            self.recvs[i] += 1;
        }
        Ok(())
    }

    fn send_wr(&self, kind: Kind, size: u64, wr_id: u64) -> SendWr {
        let (opcode, local) = match kind {
            Kind::WriteBw | Kind::WriteLat => (
                SendOp::Write,
                self.mr.sge(self.send_at as usize, size as u32),
            ),
            Kind::ReadBw | Kind::ReadLat => (SendOp::Read, self.mr.sge(0, size as u32)),
            Kind::SendBw | Kind::SendLat => (
                SendOp::Send,
                self.mr.sge(self.send_at as usize, size as u32),
            ),
            // The old value lands in the first 8 bytes of our landing area.
            Kind::AtomicBw | Kind::AtomicLat => (SendOp::FetchAdd, self.mr.sge(0, 8)),
        };
        let mut wr = SendWr::new(wr_id, opcode, local);
        let k = self.peer.keys[(wr_id as usize).min(self.peer.keys.len() - 1)];
        wr.remote_addr = k.vaddr;
        wr.rkey = k.rkey;
        if kind.is_atomic() {
            wr.compare_add = 1;
        }
        wr
    }

    fn idle(&self, spins: &mut u32, last_progress: Instant, what: &str) -> anyhow::Result<()> {
        *spins = spins.wrapping_add(1);
        if *spins > 64 {
            std::thread::yield_now();
        }
        if (*spins).is_multiple_of(1024) {
            if self.stop.load(Ordering::Relaxed) {
                return Err(crate::errors::Interrupted.into());
            }
            check_post_errors(&self.dev, self.queue, &self.qps)?;
            if last_progress.elapsed() > self.timeout {
                bail!(
                    "{what}: no progress for {:.0} s: the peer stopped answering (check it, and `roce-xdp stats --iface IF` on both sides)",
                    self.timeout.as_secs_f64()
                );
            }
        }
        Ok(())
    }

    /// Client: one bandwidth run of `size`.
    pub fn run_bw(
        &mut self,
        kind: Kind,
        size: u64,
        iters: u64,
        duration: Option<Duration>,
        depth: u32,
        progress: &mut Progress,
    ) -> anyhow::Result<BwRow> {
        let nq = self.qps.len();
        let total = if duration.is_some() { u64::MAX } else { iters };
        let mut outstanding = vec![0u32; nq];
        let (mut posted, mut completed) = (0u64, 0u64);
        let mut completions = Vec::with_capacity(iters.min(1 << 22) as usize);
        let mut wcs = [WorkCompletion::default(); 64];
        let t0 = Instant::now();
        let end = duration.map(|d| t0 + d);
        let mut last_progress = t0;
        let mut spins = 0;
        loop {
            let posting = posted < total && end.is_none_or(|e| Instant::now() < e);
            if posting {
                for (i, qp) in self.qps.clone().iter().enumerate() {
                    while outstanding[i] < depth && posted < total {
                        if !self.post_send(qp, self.send_wr(kind, size, i as u64))? {
                            break;
                        }
                        outstanding[i] += 1;
                        posted += 1;
                    }
                }
            } else if completed == posted {
                break;
            }
            let n = self.cq.poll(&mut wcs);
            if n == 0 {
                self.idle(&mut spins, last_progress, kind.name())?;
                continue;
            }
            spins = 0;
            if self.stop.load(Ordering::Relaxed) {
                return Err(crate::errors::Interrupted.into());
            }
            let now = Instant::now();
            last_progress = now;
            let ns = now.duration_since(t0).as_nanos() as u64;
            for wc in &wcs[..n] {
                check_wc(wc, kind.name())?;
                if let Some(o) = outstanding.get_mut(wc.wr_id as usize) {
                    *o = o.saturating_sub(1);
                }
                completed += 1;
                completions.push(ns);
            }
            progress.update(completed);
        }
        progress.finish();
        let stats =
            BandwidthStats::from_completions(size, &completions).context("no message completed")?;
        Ok(BwRow {
            bytes: size,
            iterations: completed,
            stats,
        })
    }

    /// Client: one latency run of `size`.
    pub fn run_lat(
        &mut self,
        kind: Kind,
        size: u64,
        iters: u64,
        duration: Option<Duration>,
        progress: &mut Progress,
    ) -> anyhow::Result<LatRow> {
        let qp = self.qps[0].clone();
        let total = if duration.is_some() { u64::MAX } else { iters };
        // Run-to-completion unless --threaded: this thread's polls drive
        // the queue's engine until the end of the size.
        let rtc = super::rtc::claim(kind, &self.dev, self.queue);
        let t0 = Instant::now();
        let end = duration.map(|d| t0 + d);
        let mut samples = Vec::with_capacity(iters.min(1 << 22) as usize);
        let mut wcs = [WorkCompletion::default(); 16];
        if kind == Kind::SendLat && self.recvs[0] == 0 {
            self.post_recv(&qp)?;
        }
        if kind == Kind::WriteLat {
            self.await_first_write(size)?;
        }
        let mut i = 0u64;
        let (mut writes_done, mut sends_done) = (0u64, 0u64);
        let mut last_old: Option<u64> = None;
        while i < total && end.is_none_or(|e| Instant::now() < e) {
            if self.stop.load(Ordering::Relaxed) {
                return Err(crate::errors::Interrupted.into());
            }
            let start = Instant::now();
            if kind == Kind::WriteLat {
                self.mr.write((self.half + size - 1) as usize, &[marker(i)]);
            }
            let mut wr = self.send_wr(kind, size, 0);
            wr.signaled = true;
            while !self.post_send(&qp, wr)? {
                std::thread::yield_now();
            }
            let mut spins = 0;
            // write-lat: the server wrote first; no answer comes to our
            // last WRITE (perftest's order), which must still be
            // acknowledged before we leave.
            let last_write = kind == Kind::WriteLat && i + 1 == total;
            // perftest's loop (run_iter_lat_send, run_iter_lat_write):
            // after each post it polls the send CQ for that message's
            // completion, so a round trip ends when both the answer and
            // the ACK of our message are in. Without that wait, send-lat
            // and write-lat reported less than ib_send_lat and
            // ib_write_lat do on the same engine (here the ACK travels
            // behind the peer's answer).
            let ping_pong = matches!(kind, Kind::SendLat | Kind::WriteLat);
            let (mut answered, mut acked) = (false, false);
            let mut done = false;
            let mut byte = [0u8];
            while !done {
                let n = self.cq.poll(&mut wcs);
                for wc in &wcs[..n] {
                    check_wc(wc, kind.name())?;
                    match (kind, wc.opcode) {
                        (Kind::ReadLat, WcOpcode::Read) => done = true,
                        (Kind::AtomicLat, WcOpcode::FetchAdd) => {
                            // Each FETCH_AND_ADD returns the value before
                            // it: the sequence must increase.
                            let mut old = [0u8; 8];
                            self.mr.read(0, &mut old);
                            let old = u64::from_ne_bytes(old);
                            if last_old.is_some_and(|p| old <= p) {
                                bail!(
                                    "atomic-lat: FETCH_AND_ADD returned {old} after {}: the remote counter went backwards",
                                    last_old.unwrap_or(0)
                                );
                            }
                            last_old = Some(old);
                            done = true;
                        }
                        (Kind::SendLat, WcOpcode::Recv) => {
                            self.recvs[0] = self.recvs[0].saturating_sub(1);
                            self.post_recv(&qp)?;
                            answered = true;
                        }
                        (Kind::SendLat, WcOpcode::Send) => {
                            sends_done += 1;
                            acked |= sends_done == i + 1;
                        }
                        (Kind::WriteLat, WcOpcode::Write) => {
                            writes_done += 1;
                            acked |= writes_done == i + 1;
                        }
                        _ => {}
                    }
                }
                if kind == Kind::WriteLat && !answered {
                    self.mr.read((size - 1) as usize, &mut byte);
                    answered = last_write || byte[0] == marker(i + 1);
                }
                if ping_pong {
                    done = answered && acked;
                }
                if !done && n == 0 {
                    if rtc.is_some() && spins < 64 {
                        // Driving the engine: leave the core at every
                        // empty poll (`idle` does from the 65th on), as
                        // the library's run-to-completion ping-pong does.
                        std::thread::yield_now();
                    }
                    self.idle(&mut spins, start, kind.name())?;
                }
            }
            let rtt = start.elapsed().as_nanos() as u64;
            // READ and atomics: the full round trip (as perftest); WRITE
            // and SEND ping-pongs: half of it.
            let full = matches!(kind, Kind::ReadLat | Kind::AtomicLat);
            if !last_write {
                samples.push(if full { rtt } else { rtt / 2 });
            }
            i += 1;
            progress.update(i);
        }
        progress.finish();
        // Let the last send completions arrive before the next size.
        let settle = Instant::now();
        while settle.elapsed() < Duration::from_millis(2) {
            let n = self.cq.poll(&mut wcs);
            for wc in &wcs[..n] {
                check_wc(wc, kind.name())?;
            }
        }
        let stats = LatencyStats::from_nanos(&samples).context("no iteration completed")?;
        Ok(LatRow {
            bytes: size,
            iterations: samples.len() as u64,
            stats,
        })
    }

    /// write-lat: waits for the server's first WRITE of a size (perftest's
    /// server posts first).
    fn await_first_write(&mut self, size: u64) -> anyhow::Result<()> {
        let start = Instant::now();
        let (mut spins, mut byte) = (0, [0u8]);
        let mut wcs = [WorkCompletion::default(); 4];
        loop {
            // Polling drives the queue's engine when this thread holds it
            // (run-to-completion): the WRITE lands only through a poll.
            let n = self.cq.poll(&mut wcs);
            for wc in &wcs[..n] {
                check_wc(wc, "write-lat")?;
            }
            self.mr.read((size - 1) as usize, &mut byte);
            if byte[0] == marker(0) {
                return Ok(());
            }
            self.idle(&mut spins, start, "write-lat")?;
        }
    }

    fn rx_packets(&self) -> u64 {
        self.dev
            .stats(self.queue)
            .map(|s| s.socket.rx_packets)
            .unwrap_or(0)
    }

    /// Server side of one run of `size`: serves the client's messages
    /// (re-posts receives; write-lat and send-lat answer each message,
    /// `iters` times, or until the client stops with `-D`) until the
    /// client's next exchange message arrives or it closes the connection.
    /// Gives up when no packet arrives for the timeout.
    pub fn serve_run<S: Stream>(
        &mut self,
        kind: Kind,
        size: u64,
        iters: Option<u64>,
        conn: &mut PerfConn<S>,
    ) -> anyhow::Result<Measured> {
        if size > self.half {
            bail!(
                "the client's {size}-byte messages exceed this side's {}-byte region: give the server the same -s / -a",
                self.half
            );
        }
        let total = iters.unwrap_or(u64::MAX);
        // Latency tests run-to-completion unless --threaded (rtc.rs).
        let rtc = super::rtc::claim(kind, &self.dev, self.queue);
        let mut wcs = [WorkCompletion::default(); 64];
        let (mut scnt, mut rcnt) = (0u64, 0u64);
        let mut byte = [0u8];
        let mut spins = 0u32;
        let t0 = Instant::now();
        let mut last_post = t0;
        let mut last_check = t0;
        let mut samples = Vec::new();
        let mut arrivals = Vec::new();
        let (mut last_rx, mut last_seen) = (self.rx_packets(), Instant::now());
        let (mut sends_done, mut echo) = (0u64, true);
        let post = |side: &mut Side,
                    scnt: &mut u64,
                    last_post: &mut Instant,
                    size: u64|
         -> anyhow::Result<()> {
            if kind == Kind::WriteLat {
                side.mr
                    .write((side.half + size - 1) as usize, &[marker(*scnt)]);
            }
            let wr = side.send_wr(kind, size, 0);
            let qp = side.qps[0].clone();
            while !side.post_send(&qp, wr)? {
                std::thread::yield_now();
            }
            *scnt += 1;
            *last_post = Instant::now();
            Ok(())
        };
        if kind == Kind::WriteLat {
            // perftest's write-lat server writes first.
            post(self, &mut scnt, &mut last_post, size)?;
        }
        loop {
            let n = self.cq.poll(&mut wcs);
            // Our answers' completions first: a peer's ACK of our last
            // answer and its next message may arrive in one batch, in
            // either order.
            sends_done += wcs[..n]
                .iter()
                .filter(|wc| wc.opcode == WcOpcode::Send)
                .count() as u64;
            for wc in &wcs[..n] {
                check_wc(wc, kind.name())?;
                if wc.opcode != WcOpcode::Recv {
                    continue;
                }
                let Some(k) = self.qps.iter().position(|q| q.qpn() == wc.qpn) else {
                    continue;
                };
                let qp = self.qps[k].clone();
                self.recvs[k] = self.recvs[k].saturating_sub(1);
                self.post_recv(&qp)?;
                rcnt += 1;
                match kind {
                    Kind::SendLat => {
                        // The first message's wait includes the client's
                        // start: round trips only.
                        if scnt > 0 {
                            samples.push(last_post.elapsed().as_nanos() as u64 / 2);
                        }
                        // A ping-pong peer sends again only after our
                        // answer arrived: at most that answer is still
                        // unacknowledged (its ACK may leave after the
                        // peer's next message: a peer driving its engine
                        // run-to-completion sends them in one burst). Two
                        // answers pending means a streaming peer (send-bw;
                        // serve cannot tell them apart from the exchange),
                        // which gets no more answers.
                        echo &= scnt <= sends_done + 1;
                        if echo && scnt < total {
                            let n = u64::from(wc.byte_len).clamp(1, self.half);
                            post(self, &mut scnt, &mut last_post, n)?;
                        }
                    }
                    _ => arrivals.push(t0.elapsed().as_nanos() as u64),
                }
            }
            if kind == Kind::WriteLat {
                self.mr.read((size - 1) as usize, &mut byte);
                if rcnt < scnt && byte[0] == marker(rcnt) {
                    rcnt += 1;
                    if rcnt > 1 {
                        samples.push(last_post.elapsed().as_nanos() as u64 / 2);
                    }
                    if scnt < total {
                        post(self, &mut scnt, &mut last_post, size)?;
                    }
                }
            }
            let lat_done = matches!(kind, Kind::WriteLat | Kind::SendLat) && rcnt >= total;
            if lat_done {
                break;
            }
            if n > 0 {
                spins = 0;
                continue;
            }
            // Wrapping: a READ responder's count never resets, and 2^32
            // is a multiple of 256 (the checks keep their cadence).
            spins = spins.wrapping_add(1);
            if spins > 64 && rtc.is_none() {
                std::thread::yield_now();
            }
            // The checks below cost system calls (the exchange socket's
            // peek, three of them): at most one round every CHECK_EVERY.
            // Every 256 empty polls alone, a READ responder (no
            // completions, so no reset of `spins`) made them every few
            // round trips: 0.8 system calls per round trip.
            if spins.is_multiple_of(256) && last_check.elapsed() >= CHECK_EVERY {
                last_check = Instant::now();
                if self.stop.load(Ordering::Relaxed) {
                    return Err(crate::errors::Interrupted.into());
                }
                check_post_errors(&self.dev, self.queue, &self.qps)?;
                if conn.readable()? {
                    break;
                }
                let rx = self.rx_packets();
                if rx != last_rx {
                    (last_rx, last_seen) = (rx, Instant::now());
                } else if last_seen.elapsed() > self.timeout {
                    bail!(
                        "{}: no packet from the client {} for {:.0} s: it stopped (check it, and `roce-xdp stats --iface IF`)",
                        kind.name(),
                        conn.peer(),
                        self.timeout.as_secs_f64()
                    );
                }
            }
        }
        Ok(match kind {
            Kind::WriteLat | Kind::SendLat => match LatencyStats::from_nanos(&samples) {
                Some(stats) => Measured::Lat(LatRow {
                    bytes: size,
                    iterations: samples.len() as u64,
                    stats,
                }),
                None => Measured::Nothing,
            },
            Kind::SendBw => match BandwidthStats::from_completions(size, &arrivals) {
                Some(stats) => Measured::Bw(BwRow {
                    bytes: size,
                    iterations: arrivals.len() as u64,
                    stats,
                }),
                None => Measured::Nothing,
            },
            _ => Measured::Nothing,
        })
    }

    /// Server, send tests: receives for the next size, `per_qp` on each QP
    /// (before the client may send: perftest posts them before its sync).
    pub fn post_recvs(&mut self, per_qp: u32) -> anyhow::Result<()> {
        for (i, qp) in self.qps.clone().iter().enumerate() {
            while self.recvs[i] < per_qp {
                self.post_recv(qp)?;
            }
        }
        Ok(())
    }
}
