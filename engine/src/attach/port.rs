//! The process's side of an attachment: [`AttachedPort`], a [`FramePort`]
//! over the frame rings the service handed it. The process's own engine
//! (its endpoint, its QPs, its memory) runs as it runs over an AF_XDP
//! socket; only the frames go through the service.

use std::io::{self, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crate::endpoint::QpnRange;
use crate::io::fd_passing::recv_with_fd;
use crate::io::frame_ring::{Consumer, Direction, Producer, RingPair, SLOT_ROOM};
use crate::io::{FramePort, InPlace, Lookahead, Rx, XskCounters};

use super::protocol::{
    qpn_block, ring_doorbell, take_doorbells, Answer, Hello, Welcome, VERSION, WELCOME_LEN,
};

/// Why attaching failed.
#[derive(Debug, thiserror::Error)]
pub enum AttachError {
    #[error(
        "no roce-xdp service listens at {path} (start one with `roce-xdp service --iface IF`)"
    )]
    NoService { path: String },
    #[error("cannot reach the roce-xdp service at {path}: {source}")]
    Connect { path: String, source: io::Error },
    #[error("the roce-xdp service refused this process: {0}")]
    Refused(String),
    #[error("the roce-xdp service answered something else than the attach handshake ({0})")]
    Protocol(String),
}

/// Counters a process reports to the service ([`RingPair::report`]): the
/// indices into the header page's counters.
pub mod reported {
    pub const QPS: usize = 0;
    pub const REGIONS: usize = 1;
}

/// Receives between two looks at the service's socket by a program that
/// never sleeps (a non-blocking read each time: about every few
/// milliseconds of busy polling).
const LIVENESS_POLLS: u64 = 4096;

/// The frame rings of one attached process (see the module documentation).
#[derive(Debug)]
pub struct AttachedPort {
    stream: UnixStream,
    pair: Arc<RingPair>,
    rx: Consumer,
    tx: Producer,
    welcome: Welcome,
    counters: XskCounters,
    /// The service is gone (its socket ended) or its rings broke the
    /// protocol: nothing moves any more.
    dead: bool,
    /// This side told the service it sleeps ([`AttachedPort::prepare_sleep`]);
    /// the next receive takes that back.
    sleeping: bool,
    /// Receives so far (the liveness check's clock).
    receives: u64,
}

impl AttachedPort {
    /// Attaches to the service listening at `path`.
    pub fn attach(path: &Path) -> Result<AttachedPort, AttachError> {
        let shown = path.display().to_string();
        let stream = UnixStream::connect(path).map_err(|e| match e.kind() {
            io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused => AttachError::NoService {
                path: shown.clone(),
            },
            _ => AttachError::Connect {
                path: shown.clone(),
                source: e,
            },
        })?;
        let connect = |e: io::Error| AttachError::Connect {
            path: shown.clone(),
            source: e,
        };
        // The handshake may wait for a busy service, not forever.
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .map_err(connect)?;
        (&stream)
            .write_all(&Hello { version: VERSION }.encode())
            .map_err(connect)?;
        let mut buf = [0u8; WELCOME_LEN];
        let (n, fd) = recv_with_fd(&stream, &mut buf).map_err(connect)?;
        let answer =
            Answer::decode(&buf[..n]).map_err(|e| AttachError::Protocol(format!("{e:?}")))?;
        let welcome = match answer {
            Answer::Welcome(w) => w,
            Answer::Refused(why) => return Err(AttachError::Refused(why)),
        };
        let fd = fd.ok_or_else(|| AttachError::Protocol("no ring memory came".into()))?;
        let pair = Arc::new(
            RingPair::open(fd, welcome.ring_slots)
                .map_err(|e| AttachError::Protocol(e.to_string()))?,
        );
        stream.set_read_timeout(None).map_err(connect)?;
        stream.set_nonblocking(true).map_err(connect)?;
        Ok(AttachedPort {
            rx: pair.consumer(Direction::ToProcess),
            tx: pair.producer(Direction::ToService),
            stream,
            pair,
            welcome,
            counters: XskCounters::default(),
            dead: false,
            sleeping: false,
            receives: 0,
        })
    }

    /// What the service said when it admitted this process.
    pub fn welcome(&self) -> &Welcome {
        &self.welcome
    }

    /// The QP numbers this process's endpoint must draw from.
    pub fn qpns(&self) -> QpnRange {
        qpn_block(self.welcome.slot)
    }

    /// Whether the service is gone (or broke the ring protocol).
    pub fn is_dead(&self) -> bool {
        self.dead
    }

    /// The slot the service gave this process: its QP numbers' and its
    /// connection manager's communication IDs' top byte.
    pub fn slot(&self) -> u8 {
        self.welcome.slot
    }

    /// The frame rings (shared with the service), for what reports to it
    /// from another thread ([`RingPair::report`], [`RingPair::set_listeners`]).
    pub fn rings(&self) -> Arc<RingPair> {
        self.pair.clone()
    }

    /// Publishes the service IDs this process's connection manager
    /// listens on: the service hands it the REQs for them.
    pub fn set_listeners(&self, ids: &[u64]) {
        self.pair.set_listeners(ids);
    }

    /// Reports counter `i` ([`reported`]) to the service.
    pub fn report(&self, i: usize, v: u64) {
        self.pair.report(i, v);
    }

    /// The descriptor to sleep on (poll(2) readable): the service's
    /// doorbell, or its end.
    pub fn fd(&self) -> RawFd {
        self.stream.as_raw_fd()
    }

    /// Frame counters of this port, in the AF_XDP socket's terms.
    pub fn counters(&self) -> XskCounters {
        self.counters
    }

    /// Takes the doorbells rung so far; notices the service's end.
    fn drain_bells(&mut self) {
        if take_doorbells(&self.stream) {
            self.dead = true;
        }
    }

    /// Before sleeping on [`AttachedPort::fd`]: takes the doorbells, tells
    /// the service this side sleeps, and returns false if frames arrived
    /// meanwhile (or the service is gone): do not sleep then.
    pub fn prepare_sleep(&mut self) -> bool {
        self.drain_bells();
        if self.dead {
            return false;
        }
        match self.rx.prepare_sleep() {
            Ok(sleep) => {
                self.sleeping = sleep;
                sleep
            }
            Err(_) => {
                self.dead = true;
                false
            }
        }
    }

    /// After a sleep (the next receive does it too).
    pub fn woke(&mut self) {
        self.sleeping = false;
        self.rx.woke();
    }

    /// Checks now whether the service is still there (a non-blocking read
    /// of its socket).
    pub fn check_alive(&mut self) -> bool {
        self.drain_bells();
        !self.dead
    }

    /// Sleeps until frames may have arrived, the service ended, or
    /// `timeout` passes.
    pub fn wait(&mut self, timeout: Duration) -> io::Result<bool> {
        if !self.prepare_sleep() {
            return Ok(true);
        }
        let r = crate::io::wait_readable_any(&[self.stream.as_fd()], timeout);
        self.woke();
        r.map(|w| w != 0)
    }
}

impl AsFd for AttachedPort {
    /// The service's socket: readable when it rang or ended.
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.stream.as_fd()
    }
}

impl FramePort for AttachedPort {
    fn recv_ahead<F: FnMut(Rx<'_>)>(
        &mut self,
        max_packets: usize,
        _ahead: Lookahead,
        mut f: F,
    ) -> usize {
        if self.dead {
            return 0;
        }
        if self.sleeping {
            self.woke();
        }
        // A program that polls and never sleeps learns of the service's
        // end here: its socket is looked at every LIVENESS_POLLS receives.
        self.receives = self.receives.wrapping_add(1);
        if self.receives.is_multiple_of(LIVENESS_POLLS) && !self.check_alive() {
            return 0;
        }
        let ready = match self.rx.available() {
            Ok(n) => (n as usize).min(max_packets),
            Err(_) => {
                self.dead = true;
                return 0;
            }
        };
        let mut taken = 0;
        for i in 0..ready as u32 {
            match self.rx.peek(i) {
                Ok(frame) => {
                    self.counters.rx_packets += 1;
                    self.counters.rx_bytes += frame.len() as u64;
                    f(Rx::Packet(frame));
                }
                Err(_) => self.counters.rx_bad_descs += 1,
            }
            taken += 1;
        }
        if taken > 0 {
            self.rx.release(taken);
        }
        taken as usize
    }

    fn complete(&mut self) -> u32 {
        0
    }

    fn tx_room(&mut self) -> usize {
        if self.dead {
            return 0;
        }
        match self.tx.free() {
            Ok(n) => n as usize,
            Err(_) => {
                self.dead = true;
                0
            }
        }
    }

    fn send_in_place<F: FnOnce(&mut [u8]) -> Option<usize>>(
        &mut self,
        room: usize,
        f: F,
    ) -> InPlace {
        if self.dead || room == 0 || room > SLOT_ROOM || self.tx.free_cached() == 0 {
            return InPlace::NoRoom;
        }
        match self.tx.write_with(|slot| f(&mut slot[..room])) {
            Some(len) => {
                self.counters.tx_packets += 1;
                self.counters.tx_bytes += len as u64;
                self.counters.tx_in_place += 1;
                InPlace::Sent(len)
            }
            None => InPlace::Nothing,
        }
    }

    fn send(&mut self, packet: &[u8]) -> bool {
        if self.dead || self.tx.free_cached() == 0 && self.tx_room() == 0 {
            self.counters.tx_full += 1;
            return false;
        }
        let ok = self.tx.write(packet);
        if ok {
            self.counters.tx_packets += 1;
            self.counters.tx_bytes += packet.len() as u64;
        } else {
            self.counters.tx_full += 1;
        }
        ok
    }

    fn flush(&mut self) -> io::Result<()> {
        if self.tx.publish() {
            self.counters.tx_kicks += 1;
            if let Err(e) = ring_doorbell(&self.stream) {
                self.dead = true;
                return Err(e);
            }
        }
        Ok(())
    }

    fn tx_in_flight(&self) -> u32 {
        self.tx.pending()
    }

    fn max_packet(&self) -> usize {
        SLOT_ROOM
    }

    fn frame_size(&self) -> u32 {
        SLOT_ROOM as u32
    }
}
