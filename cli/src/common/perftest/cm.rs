//! `-R`: the tools connect through the RDMA connection manager, as
//! perftest's `-R` does: no TCP at all. The exchange runs over a control
//! QP the CM connects first (perftest's `comm` QP: one RC QP, SEND /
//! RECV, connected with rdma_cm to the same `-p` port in `RDMA_PS_TCP`),
//! then every test QP is connected through the CM to the same port, the
//! server taking the connection requests in arrival order (perftest's
//! server binds request i to its QP i). The QPs reach RTS with the PSNs,
//! MTU, responder resources / initiator depth and retry counts the REQ /
//! REP settle (`engine::verbs::cm`).
//!
//! [`CmStream`] is the exchange's byte stream over the control QP: each
//! write is one SEND (perftest's `rdma_write_data`: one message a SEND),
//! each receive completion's bytes are read in order.

use std::io::{self, Read, Write};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use engine::rc::{Access, Mtu, RecvWr, SendOp, SendWr, WcStatus, WorkCompletion};
use engine::verbs::cm::{CmParams, CmService, CmServiceError, Connection};
use engine::verbs::{Device, MemoryRegion, QpCaps, QueuePair, SharedCq};

use super::conn::Stream;

/// Receives posted on the control QP.
const RECV_SLOTS: usize = 16;
/// Largest exchange message (one SEND).
const SLOT: usize = 4096;
/// The send's work request ID (a receive's is its slot).
const SEND_ID: u64 = u64::MAX;

/// The exchange's byte stream over a CM-connected control QP.
pub struct CmStream {
    cq: Arc<SharedCq>,
    qp: QueuePair,
    mr: MemoryRegion,
    /// Bytes received and not yet read.
    pending: std::collections::VecDeque<u8>,
    read_timeout: Option<Duration>,
    wcs: [WorkCompletion; 16],
}

impl CmStream {
    /// The control QP's memory and receives (the QP is connected).
    pub fn new(cq: Arc<SharedCq>, qp: QueuePair, mr: MemoryRegion) -> anyhow::Result<CmStream> {
        for slot in 0..RECV_SLOTS {
            qp.post_recv(RecvWr {
                wr_id: slot as u64,
                sge: mr.sge(slot * SLOT, SLOT as u32),
            })?;
        }
        Ok(CmStream {
            cq,
            qp,
            mr,
            pending: Default::default(),
            read_timeout: None,
            wcs: [WorkCompletion::default(); 16],
        })
    }

    /// The control QP's memory: the receive slots, then the send buffer.
    pub fn region(dev: &Device, q: u32) -> anyhow::Result<MemoryRegion> {
        Ok(dev.register_memory(q, (RECV_SLOTS + 1) * SLOT, Access::LOCAL_WRITE)?)
    }

    /// The control QP's depths.
    pub fn caps() -> QpCaps {
        QpCaps {
            max_send_wr: 16,
            max_recv_wr: RECV_SLOTS as u32,
        }
    }

    /// Takes the control QP's completions: received bytes queued,
    /// receives re-posted. Returns whether our send completed.
    fn drain(&mut self) -> io::Result<bool> {
        let qpn = self.qp.qpn();
        let n = self.cq.poll(|q| q == qpn, &mut self.wcs);
        let mut sent = false;
        for i in 0..n {
            let wc = self.wcs[i];
            if wc.status != WcStatus::Success {
                return Err(io::Error::new(
                    io::ErrorKind::ConnectionReset,
                    format!("control QP completion {:?}", wc.status),
                ));
            }
            if wc.wr_id == SEND_ID {
                sent = true;
                continue;
            }
            let slot = wc.wr_id as usize;
            let len = (wc.byte_len as usize).min(SLOT);
            let mut buf = vec![0u8; len];
            self.mr.read(slot * SLOT, &mut buf);
            self.pending.extend(buf);
            self.qp
                .post_recv(RecvWr {
                    wr_id: slot as u64,
                    sge: self.mr.sge(slot * SLOT, SLOT as u32),
                })
                .map_err(io::Error::other)?;
        }
        Ok(sent)
    }

    /// Waits (at most the read timeout) for received bytes.
    fn fill(&mut self) -> io::Result<()> {
        let deadline = self.read_timeout.map(|t| Instant::now() + t);
        let mut spins = 0u32;
        while self.pending.is_empty() {
            self.drain()?;
            if !self.pending.is_empty() {
                break;
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Err(io::ErrorKind::TimedOut.into());
            }
            spins += 1;
            if spins > 64 {
                std::thread::sleep(Duration::from_micros(50));
            }
        }
        Ok(())
    }

    /// Destroys the control QP.
    pub fn close(self) {
        let _ = self.qp.destroy();
        let _ = self.cq.device().deregister_memory(&self.mr);
    }
}

impl Read for CmStream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        self.fill()?;
        let n = buf.len().min(self.pending.len());
        for (i, b) in self.pending.drain(..n).enumerate() {
            buf[i] = b;
        }
        Ok(n)
    }
}

impl Write for CmStream {
    /// One SEND of up to [`SLOT`] bytes, waiting for its completion.
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = buf.len().min(SLOT);
        let at = RECV_SLOTS * SLOT;
        self.mr.write(at, &buf[..n]);
        let mut wr = SendWr::new(SEND_ID, SendOp::Send, self.mr.sge(at, n as u32));
        wr.signaled = true;
        let deadline = Instant::now() + self.read_timeout.unwrap_or(Duration::from_secs(30));
        loop {
            match self.qp.post_send(wr) {
                Ok(()) => break,
                Err(engine::verbs::DeviceError::WouldBlock(_)) if Instant::now() < deadline => {
                    std::thread::yield_now()
                }
                Err(e) => return Err(io::Error::other(e)),
            }
        }
        while !self.drain()? {
            if Instant::now() >= deadline {
                return Err(io::ErrorKind::TimedOut.into());
            }
            std::thread::yield_now();
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Stream for CmStream {
    fn set_read_timeout(&mut self, t: Option<Duration>) -> io::Result<()> {
        self.read_timeout = t;
        Ok(())
    }

    fn readable(&mut self) -> io::Result<bool> {
        if self.pending.is_empty() {
            self.drain()?;
        }
        Ok(!self.pending.is_empty())
    }

    fn peek(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.fill()?;
        let n = buf.len().min(self.pending.len());
        for (i, b) in self.pending.iter().take(n).enumerate() {
            buf[i] = *b;
        }
        Ok(n)
    }
}

/// The CM side of a tool run with `-R`: the service, the control
/// connection, the test QPs' connections.
pub struct CmSession {
    pub cq: Arc<SharedCq>,
    pub svc: CmService,
    pub peer: IpAddr,
    pub port: u16,
    /// The client's source port in the IP CM header.
    pub src_port: u16,
    pub client: bool,
    pub control: Option<Connection>,
    pub conns: Vec<Connection>,
    pub timeout: Duration,
}

/// The connection parameters of a tool's QPs (perftest's: responder
/// resources and initiator depth for READ and atomics only, retries 7).
pub fn params(mtu: u32, reads: bool, timeout: Duration) -> anyhow::Result<CmParams> {
    let depth = if reads {
        super::session::RESPONDER_DEPTH
    } else {
        0
    };
    Ok(CmParams {
        responder_resources: depth,
        initiator_depth: depth,
        retry_count: 7,
        rnr_retry_count: 7,
        path_mtu: Mtu::from_bytes(mtu).with_context(|| format!("invalid path MTU {mtu}"))?,
        access: Access::ALL,
        private_data: Vec::new(),
        timeout,
    })
}

fn cm_error(e: CmServiceError, what: &str, peer: IpAddr, port: u16) -> anyhow::Error {
    match e {
        CmServiceError::Rejected { .. }
        | CmServiceError::Unreachable
        | CmServiceError::TimedOut(_) => crate::errors::UserError::PeerUnreachable {
            addr: format!("{peer}:{port}"),
            detail: format!("{what}: {e} (is a server with -R listening on -p {port}?)"),
        }
        .into(),
        e => anyhow::Error::new(e).context(what.to_string()),
    }
}

impl CmSession {
    /// Client: connects the control QP to `peer`:`port` (retrying while the
    /// server is not listening yet, as perftest's `retry_rdma_connect`)
    /// and returns its stream.
    pub fn connect(
        dev: &Arc<Device>,
        q: u32,
        peer: IpAddr,
        port: u16,
        mtu: u32,
        timeout: Duration,
    ) -> anyhow::Result<(CmSession, CmStream)> {
        let cq = SharedCq::new(dev.clone(), q);
        let svc = CmService::new(cq.clone()).context("creating QP 1 (the CM's)")?;
        let src_port = 0xC000 | (std::process::id() as u16 & 0x3FFF);
        let mut s = CmSession {
            cq,
            svc,
            peer,
            port,
            src_port,
            client: true,
            control: None,
            conns: Vec::new(),
            timeout,
        };
        let mr = CmStream::region(dev, q)?;
        let p = params(mtu, false, timeout)?;
        let deadline = Instant::now() + timeout;
        let (qp, conn) = loop {
            let qp = dev.create_qp(q, CmStream::caps())?;
            match s.svc.connect(&qp, peer, port, src_port, &p) {
                Ok(c) => break (qp, c),
                Err(CmServiceError::Rejected { .. }) if Instant::now() < deadline => {
                    let _ = qp.destroy();
                    std::thread::sleep(Duration::from_millis(100));
                }
                Err(e) => {
                    let _ = qp.destroy();
                    return Err(cm_error(e, "connecting the control QP", peer, port));
                }
            }
        };
        s.control = Some(conn);
        let stream = CmStream::new(s.cq.clone(), qp, mr)?;
        Ok((s, stream))
    }

    /// Server: listens on `port` and accepts the first connection as the
    /// control QP's.
    pub fn accept(
        dev: &Arc<Device>,
        q: u32,
        port: u16,
        mtu: u32,
        timeout: Duration,
    ) -> anyhow::Result<(CmSession, CmStream)> {
        let cq = SharedCq::new(dev.clone(), q);
        let mut svc = CmService::new(cq.clone()).context("creating QP 1 (the CM's)")?;
        svc.listen(port, 64)
            .map_err(|e| anyhow::Error::new(e).context(format!("listening on port {port}")))?;
        // perftest's server waits for its client without a limit.
        let req = svc
            .get_request(Duration::from_secs(365 * 24 * 3600))
            .context("waiting for a connection request")?;
        let mr = CmStream::region(dev, q)?;
        let qp = dev.create_qp(q, CmStream::caps())?;
        let p = params(mtu, false, timeout)?;
        let conn = match svc.accept(&req, &qp, &p) {
            Ok(c) => c,
            Err(e) => {
                let _ = qp.destroy();
                return Err(cm_error(e, "accepting the control QP", req.peer_ip, port));
            }
        };
        let s = CmSession {
            cq,
            svc,
            peer: req.peer_ip,
            port,
            src_port: req.peer_port,
            client: false,
            control: Some(conn),
            conns: Vec::new(),
            timeout,
        };
        let stream = CmStream::new(s.cq.clone(), qp, mr)?;
        Ok((s, stream))
    }

    /// Connects (client) or accepts (server) each of `qps`, in order.
    pub fn connect_qps(&mut self, qps: &[QueuePair], mtu: u32, reads: bool) -> anyhow::Result<()> {
        let p = params(mtu, reads, self.timeout)?;
        for qp in qps {
            let c = if self.client {
                // A stock perftest server listens for the test QPs anew
                // after the handshake: retried as perftest's client does
                // (`rdma_cm_client_connection`: 10 times, 100 ms apart).
                let mut tries = 0;
                loop {
                    match self
                        .svc
                        .connect(qp, self.peer, self.port, self.src_port, &p)
                    {
                        Ok(c) => break c,
                        Err(CmServiceError::Rejected { .. }) if tries < 10 => {
                            tries += 1;
                            std::thread::sleep(Duration::from_millis(100));
                        }
                        Err(e) => {
                            return Err(cm_error(e, "connecting a test QP", self.peer, self.port))
                        }
                    }
                }
            } else {
                let req = self.svc.get_request(self.timeout).map_err(|e| {
                    cm_error(
                        e,
                        "waiting for a test QP's connection",
                        self.peer,
                        self.port,
                    )
                })?;
                self.svc
                    .accept(&req, qp, &p)
                    .map_err(|e| cm_error(e, "accepting a test QP", req.peer_ip, self.port))?
            };
            self.conns.push(c);
        }
        Ok(())
    }

    /// Disconnects everything (the client sends the DREQs, the server
    /// answers them; neither waits more than a second or two) and
    /// destroys QP 1.
    pub fn close(mut self, stream: Option<CmStream>) {
        let conns: Vec<_> = self.conns.drain(..).chain(self.control.take()).collect();
        for c in conns {
            let r = if self.client {
                self.svc.disconnect(c.conn, Duration::from_secs(1))
            } else {
                self.svc.await_disconnect(c.conn, Duration::from_secs(2))
            };
            if let Err(e) = r {
                tracing::debug!(error = %e, conn = c.conn, "CM disconnect");
            }
        }
        if let Some(s) = stream {
            s.close();
        }
        self.svc.close();
    }
}
