//! The two sides of a test once the datapath is open.
//!
//! Each region is `2 * max_size` bytes: `[0, max)` is where the peer's
//! WRITEs and SENDs land (and where READ responses land), `[max, 2 max)`
//! is what this side sends from. Latency tests use one QP; bandwidth tests
//! spread the messages over every QP, `tx_depth` in flight on each.
//! Latency of write-lat and send-lat is half the round trip (as perftest
//! reports it); read-lat is the full READ round trip.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Receiver;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _};
use engine::endpoint::{ConnectOptions, RemoteQp};
use engine::oob::perftest::{Control, Hello};
use engine::rc::{Mtu, RecvWr, SendOp, SendWr, WcOpcode, WcStatus, WorkCompletion};
use engine::verbs::{Device, MemoryRegion, QpCaps, QueuePair};

use super::bandwidth::BandwidthStats;
use super::conn::LineConn;
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
        }
    }
}

/// A random-enough 24-bit starting PSN.
pub fn initial_psn(salt: u32) -> u32 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    (t ^ std::process::id().rotate_left(8) ^ salt.wrapping_mul(0x9e37_79b9)) & 0xff_ffff
}

/// Connection options for a test: the path MTU, a first PSN, and RNR
/// retries without limit (a SEND that beats the receiver's re-post waits).
pub fn connect_options(mtu: u32, psn: u32) -> anyhow::Result<ConnectOptions> {
    Ok(ConnectOptions {
        path_mtu: Mtu::from_bytes(mtu).with_context(|| format!("invalid path MTU {mtu}"))?,
        sq_psn: psn,
        rnr_retry: 7,
        min_rnr_timer: 1,
        ..ConnectOptions::default()
    })
}

fn check_wc(wc: &WorkCompletion, what: &str) -> anyhow::Result<()> {
    if wc.status == WcStatus::Success {
        return Ok(());
    }
    let hint = match wc.status {
        WcStatus::RetryExceeded => ": the peer stopped answering (is it still running? does the path MTU -m fit both links?)",
        WcStatus::RemoteAccessError => ": the peer refused the access (region too small or wrong key)",
        WcStatus::RnrRetryExceeded => ": the peer had no receive posted",
        _ => "",
    };
    bail!(
        "{what}: work completion {:?} on QP 0x{:06x}{hint}",
        wc.status,
        wc.qpn
    )
}

fn check_post_errors(dev: &Device, q: u32) -> anyhow::Result<()> {
    if let Some(e) = dev.poll_post_error(q) {
        bail!(
            "the engine refused a work request on QP 0x{:06x}: {}",
            e.qpn,
            e.error
        );
    }
    Ok(())
}

/// Marker byte of latency iteration `i` (never zero).
fn marker(i: u64) -> u8 {
    (i % 255) as u8 + 1
}

/// One side's region and QPs before it is connected: what its hello
/// describes, and what [`Local::connect`] turns into a [`Side`].
pub struct Local {
    pub dev: Arc<Device>,
    pub queue: u32,
    /// `2 * half` bytes (see the module docs).
    pub mr: MemoryRegion,
    pub half: u64,
    pub qps: Vec<QueuePair>,
    /// The first PSN of each QP.
    pub psns: Vec<u32>,
}

impl Local {
    /// Our hello for the connection exchange: the test, our QPs with their
    /// first PSNs, the device's address, and the region's landing area.
    pub fn hello(&self, test: &str, mtu: u32, tx_depth: u32) -> Hello {
        Hello {
            test: test.into(),
            qps: self
                .qps
                .iter()
                .zip(&self.psns)
                .map(|(qp, &p)| (qp.qpn(), p))
                .collect(),
            ip: self.dev.ip(),
            mac: self.dev.mac(),
            va: self.mr.addr(),
            rkey: self.mr.rkey,
            len: self.half,
            mtu,
            tx_depth,
            queue: self.queue,
        }
    }

    /// Connects our QPs to `peer`'s, pairwise, at path MTU `mtu`.
    pub fn connect(
        self,
        peer: Hello,
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
            peer,
            stop,
            timeout,
        };
        side.connect(&self.psns, mtu)?;
        Ok(side)
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
    pub peer: Hello,
    pub stop: Arc<AtomicBool>,
    /// Seconds without progress before giving up.
    pub timeout: Duration,
    /// Receives posted and not yet completed, per QP.
    pub recvs: Vec<u32>,
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

    /// Connects our QPs to the peer's, pairwise.
    fn connect(&self, psns: &[u32], mtu: u32) -> anyhow::Result<()> {
        for (i, qp) in self.qps.iter().enumerate() {
            let (rqpn, rpsn) = self.peer.qps[i];
            qp.connect(
                RemoteQp {
                    qpn: rqpn,
                    psn: rpsn,
                    mac: self.peer.mac,
                    ip: self.peer.ip,
                },
                connect_options(mtu, psns[i])?,
            )
            .with_context(|| format!("connecting QP 0x{:06x}", qp.qpn()))?;
        }
        Ok(())
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
        let deadline = Instant::now() + self.timeout;
        loop {
            match qp.post_recv(wr) {
                Ok(()) => {
                    if let Some(i) = self.qps.iter().position(|q| q.qpn() == qp.qpn()) {
                        self.recvs[i] += 1;
                    }
                    return Ok(());
                }
                Err(engine::verbs::DeviceError::WouldBlock(_)) if Instant::now() < deadline => {
                    std::thread::yield_now()
                }
                Err(e) => return Err(e.into()),
            }
        }
    }

    fn send_wr(&self, kind: Kind, size: u64, wr_id: u64) -> SendWr {
        let (opcode, local) = match kind {
            Kind::WriteBw | Kind::WriteLat => {
                (SendOp::Write, self.mr.sge(self.half as usize, size as u32))
            }
            Kind::ReadBw | Kind::ReadLat => (SendOp::Read, self.mr.sge(0, size as u32)),
            Kind::SendBw | Kind::SendLat => {
                (SendOp::Send, self.mr.sge(self.half as usize, size as u32))
            }
            // The old value lands in the first 8 bytes of our landing area.
            Kind::AtomicBw | Kind::AtomicLat => (SendOp::FetchAdd, self.mr.sge(0, 8)),
        };
        let mut wr = SendWr::new(wr_id, opcode, local);
        wr.remote_addr = self.peer.va;
        wr.rkey = self.peer.rkey;
        if kind.is_atomic() {
            wr.compare_add = 1;
        }
        wr
    }

    fn idle(&self, spins: &mut u32, last_progress: Instant, what: &str) -> anyhow::Result<()> {
        *spins += 1;
        if *spins > 64 {
            std::thread::yield_now();
        }
        if (*spins).is_multiple_of(1024) {
            if self.stop.load(Ordering::Relaxed) {
                return Err(crate::errors::Interrupted.into());
            }
            check_post_errors(&self.dev, self.queue)?;
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
        let mut i = 0u64;
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
                            done = true;
                        }
                        _ => {}
                    }
                }
                if kind == Kind::WriteLat {
                    self.mr.read((size - 1) as usize, &mut byte);
                    done = byte[0] == marker(i);
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
            samples.push(if full { rtt } else { rtt / 2 });
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

    /// Server side of one size: prepare, say READY, then serve the
    /// client's messages until its END line; returns the END row.
    pub fn serve_size(
        &mut self,
        kind: Kind,
        size: u64,
        depth: u32,
        conn: &mut LineConn,
    ) -> anyhow::Result<String> {
        if size > self.half {
            conn.send_control(&Control::Error(format!(
                "size {size} exceeds the server's region ({} bytes)",
                self.half
            )))?;
            bail!(
                "the client asked for {size}-byte messages; the region holds {}",
                self.half
            );
        }
        // Landing area cleared for write-lat markers.
        self.mr.write((size - 1) as usize, &[0]);
        let recvs_per_qp = match kind {
            Kind::SendBw => depth.max(16),
            Kind::SendLat => 4,
            _ => 0,
        };
        for (i, qp) in self.qps.clone().iter().enumerate() {
            while self.recvs[i] < recvs_per_qp {
                self.post_recv(qp)?;
            }
        }
        // Latency tests run-to-completion unless --threaded (rtc.rs).
        let rtc = super::rtc::claim(kind, &self.dev, self.queue);
        conn.send_control(&Control::Ready)?;
        let mut wcs = [WorkCompletion::default(); 64];
        let mut i = 0u64;
        let mut byte = [0u8];
        let mut spins = 0u32;
        loop {
            let n = self.cq.poll(&mut wcs);
            for wc in &wcs[..n] {
                check_wc(wc, kind.name())?;
                if wc.opcode == WcOpcode::Recv {
                    let Some(k) = self.qps.iter().position(|q| q.qpn() == wc.qpn) else {
                        continue;
                    };
                    let qp = self.qps[k].clone();
                    self.recvs[k] = self.recvs[k].saturating_sub(1);
                    self.post_recv(&qp)?;
                    if kind == Kind::SendLat {
                        let wr = self.send_wr(kind, size, 0);
                        while !self.post_send(&qp, wr)? {
                            std::thread::yield_now();
                        }
                    }
                }
            }
            if kind == Kind::WriteLat {
                self.mr.read((size - 1) as usize, &mut byte);
                if byte[0] == marker(i) {
                    self.mr.write((self.half + size - 1) as usize, &[marker(i)]);
                    let wr = self.send_wr(kind, size, 0);
                    let qp = self.qps[0].clone();
                    while !self.post_send(&qp, wr)? {
                        std::thread::yield_now();
                    }
                    i += 1;
                }
            }
            if n == 0 {
                spins += 1;
                // Driving the engine: leave the core at every empty poll
                // (the client's loop and the engine share it).
                if spins > 64 || rtc.is_some() {
                    std::thread::yield_now();
                }
                if spins.is_multiple_of(256) {
                    if self.stop.load(Ordering::Relaxed) {
                        return Err(crate::errors::Interrupted.into());
                    }
                    check_post_errors(&self.dev, self.queue)?;
                    if let Some(line) = conn.poll_line()? {
                        match Control::decode(&line)? {
                            Control::End { row } => {
                                conn.send_control(&Control::Ok)?;
                                return Ok(row);
                            }
                            Control::Error(e) => bail!("the client gave up: {e}"),
                            other => bail!("unexpected {other:?} from the client during a run"),
                        }
                    }
                }
            } else {
                spins = 0;
            }
        }
    }
}
