//! One AF_XDP socket bound to one (interface, queue), with its own UMEM and
//! its four rings: batched receive and transmit, need_wakeup handling,
//! copy / zero-copy binding and multi-buffer (XDP_USE_SG) frames.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

use thiserror::Error;

use super::ring::{CompletionRing, FillRing, RxRing, TxRing};
use super::sys;
use super::umem::{FrameAccounting, FramePool, Umem, UmemConfig};

/// Zero-copy policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ZeroCopy {
    /// Zero-copy if the driver supports it, else copy mode.
    #[default]
    Auto,
    /// Zero-copy or fail.
    On,
    /// Copy mode.
    Off,
}

/// Socket configuration.
#[derive(Debug, Clone)]
pub struct XskConfig {
    /// Interface name (in the calling thread's network namespace).
    pub ifname: String,
    /// Queue index.
    pub queue: u32,
    /// UMEM geometry.
    pub umem: UmemConfig,
    /// RX and TX ring sizes (power of two).
    pub ring_size: u32,
    /// Fill and completion ring sizes (power of two).
    pub fill_size: u32,
    pub zero_copy: ZeroCopy,
    /// Bind with XDP_USE_SG: frames larger than one UMEM frame arrive and
    /// leave as several descriptors (needed for 4096-byte PMTU).
    pub multi_buffer: bool,
    /// Bind with XDP_USE_NEED_WAKEUP (fewer syscalls).
    pub need_wakeup: bool,
    /// How long [`XskSocket::open`] keeps retrying while the queue is
    /// busy (EBUSY): the kernel releases a closed socket's hold on its
    /// queue in deferred work, so a socket opened right after another one
    /// on the same queue closed (a restarted tool, the next test) may find
    /// it taken for a few milliseconds. Zero: fail at once.
    pub busy_wait: Duration,
}

impl XskConfig {
    /// Defaults for `ifname`/`queue`: 4096 frames of 4096 bytes, rings of
    /// 2048, zero-copy auto, multi-buffer and need_wakeup on, up to
    /// [`DEFAULT_BUSY_WAIT`] of retries while the queue is busy.
    pub fn new(ifname: &str, queue: u32) -> XskConfig {
        XskConfig {
            ifname: ifname.to_string(),
            queue,
            umem: UmemConfig::default(),
            ring_size: 2048,
            fill_size: 2048,
            zero_copy: ZeroCopy::Auto,
            multi_buffer: true,
            need_wakeup: true,
            busy_wait: DEFAULT_BUSY_WAIT,
        }
    }
}

/// Default of [`XskConfig::busy_wait`].
pub const DEFAULT_BUSY_WAIT: Duration = Duration::from_secs(2);
/// Pause between binding attempts while the queue is busy.
const BUSY_RETRY: Duration = Duration::from_millis(10);

/// Why a socket could not be opened.
#[derive(Debug, Error)]
pub enum XskError {
    #[error("invalid AF_XDP configuration: {0}")]
    Config(String),
    #[error("mapping the UMEM failed ({0}): run as root (or raise `ulimit -l` / grant CAP_IPC_LOCK), or use fewer frames")]
    Umem(io::Error),
    #[error("creating an AF_XDP socket failed ({0}): needs CAP_NET_RAW: run as root")]
    Socket(io::Error),
    #[error("no network interface named {0:?} in this network namespace: check `ip link`")]
    NoSuchInterface(String),
    #[error("AF_XDP setup step {step} failed: {source}")]
    Setup {
        step: &'static str,
        source: io::Error,
    },
    #[error("the driver of {ifname} does not support AF_XDP zero-copy ({source}): use zero-copy auto or off")]
    ZeroCopyUnsupported { ifname: String, source: io::Error },
    #[error("queue {queue} of {ifname} is taken by another AF_XDP socket (another roce-xdp engine?), still after {:.1} s: stop it or use another queue", .waited.as_secs_f64())]
    QueueBusy {
        ifname: String,
        queue: u32,
        waited: Duration,
    },
    #[error("binding the AF_XDP socket to {ifname} queue {queue} failed ({source}): is the queue index below the interface's queue count (`ethtool -l`)?")]
    Bind {
        ifname: String,
        queue: u32,
        source: io::Error,
    },
}

/// Kernel-side socket statistics (XDP_STATISTICS).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct XskStatistics {
    pub rx_dropped: u64,
    pub rx_invalid_descs: u64,
    pub tx_invalid_descs: u64,
    pub rx_ring_full: u64,
    pub rx_fill_ring_empty_descs: u64,
    pub tx_ring_empty_descs: u64,
}

impl XskStatistics {
    /// Adds `other`'s counts to these (totals over several sockets).
    pub fn accumulate(&mut self, other: &XskStatistics) {
        // Destructured without `..`: a new field must be added here too.
        let XskStatistics {
            rx_dropped,
            rx_invalid_descs,
            tx_invalid_descs,
            rx_ring_full,
            rx_fill_ring_empty_descs,
            tx_ring_empty_descs,
        } = *other;
        self.rx_dropped += rx_dropped;
        self.rx_invalid_descs += rx_invalid_descs;
        self.tx_invalid_descs += tx_invalid_descs;
        self.rx_ring_full += rx_ring_full;
        self.rx_fill_ring_empty_descs += rx_fill_ring_empty_descs;
        self.tx_ring_empty_descs += tx_ring_empty_descs;
    }
}

/// Counters kept by the socket itself.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct XskCounters {
    pub rx_packets: u64,
    pub rx_bytes: u64,
    /// Multi-buffer packets received (spanning several frames).
    pub rx_multi_buffer: u64,
    /// Multi-buffer packets whose frames were not adjacent in the UMEM,
    /// copied into one buffer to be read as one slice (the others are
    /// read in place).
    pub rx_linearized: u64,
    /// RX descriptors pointing outside the UMEM or oversized packets.
    pub rx_bad_descs: u64,
    pub tx_packets: u64,
    pub tx_bytes: u64,
    /// Packets not queued for lack of a free frame or TX slot.
    pub tx_full: u64,
    pub tx_kicks: u64,
    pub rx_kicks: u64,
    /// Frames the kernel returned on the completion ring: sent (or
    /// dropped) by the driver. Behind `tx_packets` (counted when queued)
    /// by what is still in flight; a gap that keeps growing means the
    /// driver does not send what it is given.
    pub tx_completed_frames: u64,
    /// Packets written in place ([`XskSocket::send_in_place`]), included
    /// in `tx_packets`.
    pub tx_in_place: u64,
}

impl XskCounters {
    /// Adds `other`'s counts to these (totals over several sockets).
    pub fn accumulate(&mut self, other: &XskCounters) {
        // Destructured without `..`: a new field must be added here too.
        let XskCounters {
            rx_packets,
            rx_bytes,
            rx_multi_buffer,
            rx_linearized,
            rx_bad_descs,
            tx_packets,
            tx_bytes,
            tx_full,
            tx_kicks,
            rx_kicks,
            tx_completed_frames,
            tx_in_place,
        } = *other;
        self.rx_packets += rx_packets;
        self.rx_bytes += rx_bytes;
        self.rx_multi_buffer += rx_multi_buffer;
        self.rx_linearized += rx_linearized;
        self.rx_bad_descs += rx_bad_descs;
        self.tx_packets += tx_packets;
        self.tx_bytes += tx_bytes;
        self.tx_full += tx_full;
        self.tx_kicks += tx_kicks;
        self.rx_kicks += rx_kicks;
        self.tx_completed_frames += tx_completed_frames;
        self.tx_in_place += tx_in_place;
    }
}

/// Outcome of [`XskSocket::send_in_place`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InPlace {
    /// A packet of this many bytes was queued.
    Sent(usize),
    /// The writer had nothing to send; every frame went back to the pool.
    Nothing,
    /// No run of adjacent free frames or no TX slots: the writer was not
    /// called.
    NoRoom,
}

/// Largest packet accepted in either direction (XDP multi-buffer carries
/// at most 17 fragments).
pub const MAX_PACKET: usize = 9216;

/// Where received data starts in a UMEM frame (the kernel's
/// XDP_PACKET_HEADROOM, ahead of the UMEM's own headroom, which is 0 here).
const RX_HEADROOM: u32 = 256;
/// Ethernet header and one VLAN tag on top of the MTU.
const L2_OVERHEAD: u32 = 14 + 4;

/// Whether every frame an interface of this MTU can receive fits the
/// data area of one UMEM frame of `frame_size` bytes (so XDP_USE_SG is not
/// needed).
fn fits_one_frame(mtu: u32, frame_size: u32) -> bool {
    mtu.saturating_add(L2_OVERHEAD) <= frame_size.saturating_sub(RX_HEADROOM)
}

/// The binds [`XskSocket::open`] tries in order, `(zero_copy, XDP_USE_SG)`,
/// going to the next one only when the kernel refuses zero-copy. The
/// kernel refuses zero-copy together with XDP_USE_SG when the driver has
/// no multi-buffer zero-copy (`xdp_zc_max_segs == 1`, e.g. virtio_net):
/// with `sg_optional` (every frame fits one UMEM frame), zero-copy without
/// XDP_USE_SG comes before copy mode.
fn bind_plan(policy: ZeroCopy, multi_buffer: bool, sg_optional: bool) -> Vec<(bool, bool)> {
    let mut plan = Vec::with_capacity(3);
    if policy != ZeroCopy::Off {
        plan.push((true, multi_buffer));
        if multi_buffer && sg_optional {
            plan.push((true, false));
        }
    }
    if policy != ZeroCopy::On {
        plan.push((false, multi_buffer));
    }
    plan
}

/// An open, bound AF_XDP socket.
pub struct XskSocket {
    // Field order is drop order: rings are unmapped before the socket is
    // closed, and the UMEM after the socket (the kernel releases its pins
    // on close).
    fill: FillRing,
    comp: CompletionRing,
    rx: RxRing,
    tx: TxRing,
    fd: OwnedFd,
    umem: Umem,
    pool: FramePool,
    tx_pending: u32,
    zero_copy: bool,
    need_wakeup: bool,
    multi_buffer: bool,
    scratch: Box<[u8]>,
    counters: XskCounters,
    ifname: String,
    queue: u32,
}

impl std::fmt::Debug for XskSocket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("XskSocket")
            .field("ifname", &self.ifname)
            .field("queue", &self.queue)
            .field("zero_copy", &self.zero_copy)
            .field("multi_buffer", &self.multi_buffer)
            .finish_non_exhaustive()
    }
}

fn setup(step: &'static str) -> impl FnOnce(io::Error) -> XskError {
    move |source| XskError::Setup { step, source }
}

/// What [`XskSocket::recv_ahead`] hands its callback.
#[derive(Debug, Clone, Copy)]
pub enum Rx<'a> {
    /// A received packet, to handle.
    Packet(&'a [u8]),
    /// A packet that comes [`Lookahead::near`] later, to prepare for
    /// (prefetch).
    Ahead(&'a [u8]),
    /// A packet that comes [`Lookahead::far`] later: an earlier look, for
    /// a first stage of preparing (a prefetch whose line the `Ahead` stage
    /// then reads).
    Far(&'a [u8]),
}

/// How far ahead [`XskSocket::recv_ahead`] shows packets: each packet is
/// shown as [`Rx::Far`] `far` descriptors before it is handed and as
/// [`Rx::Ahead`] `near` before (0: not shown that way).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Lookahead {
    pub near: u32,
    pub far: u32,
}

impl XskSocket {
    /// Creates the socket and UMEM, maps the rings, binds to
    /// `(cfg.ifname, cfg.queue)` and fills the fill ring. With
    /// [`ZeroCopy::Auto`], falls back to copy mode if zero-copy binding
    /// fails.
    pub fn open(cfg: &XskConfig) -> Result<XskSocket, XskError> {
        for (name, v) in [("ring_size", cfg.ring_size), ("fill_size", cfg.fill_size)] {
            if !v.is_power_of_two() || v < 8 {
                return Err(XskError::Config(format!(
                    "{name} must be a power of two >= 8 (got {v})"
                )));
            }
        }
        let ifindex = sys::if_index(&cfg.ifname)
            .map_err(|_| XskError::NoSuchInterface(cfg.ifname.clone()))?;
        // Multi-buffer is optional when every frame the interface can
        // carry fits one UMEM frame: then a zero-copy driver without
        // multi-buffer zero-copy (virtio_net) is bound without XDP_USE_SG
        // rather than refused (or dropped to copy mode).
        let sg_optional = cfg.multi_buffer
            && cfg.zero_copy != ZeroCopy::Off
            && sys::if_mtu(&cfg.ifname).is_ok_and(|mtu| fits_one_frame(mtu, cfg.umem.frame_size));
        let plan = bind_plan(cfg.zero_copy, cfg.multi_buffer, sg_optional);
        let start = Instant::now();
        loop {
            let mut r = Err(XskError::Config("empty bind plan".into()));
            for &(zero_copy, sg) in &plan {
                r = Self::open_once(cfg, ifindex, zero_copy, sg);
                if !matches!(r, Err(XskError::ZeroCopyUnsupported { .. })) {
                    break;
                }
            }
            match r {
                Err(XskError::QueueBusy { .. }) if start.elapsed() < cfg.busy_wait => {
                    std::thread::sleep(BUSY_RETRY);
                }
                Err(XskError::QueueBusy { ifname, queue, .. }) => {
                    return Err(XskError::QueueBusy {
                        ifname,
                        queue,
                        waited: start.elapsed(),
                    })
                }
                r => return r,
            }
        }
    }

    fn open_once(
        cfg: &XskConfig,
        ifindex: u32,
        zero_copy: bool,
        multi_buffer: bool,
    ) -> Result<XskSocket, XskError> {
        let fd = sys::xdp_socket().map_err(XskError::Socket)?;
        let umem = Umem::new(cfg.umem).map_err(|e| match e.kind() {
            io::ErrorKind::InvalidInput => XskError::Config(e.to_string()),
            _ => XskError::Umem(e),
        })?;
        let reg = libc::xdp_umem_reg {
            addr: umem.base() as u64,
            len: umem.len() as u64,
            chunk_size: umem.frame_size(),
            headroom: 0,
            flags: 0,
            tx_metadata_len: 0,
        };
        sys::set_xdp_opt(fd.as_fd(), libc::XDP_UMEM_REG, &reg).map_err(|e| {
            match e.raw_os_error() {
                Some(libc::ENOBUFS) | Some(libc::ENOMEM) | Some(libc::EPERM) => XskError::Umem(e),
                _ => XskError::Setup {
                    step: "XDP_UMEM_REG",
                    source: e,
                },
            }
        })?;
        sys::set_xdp_opt(fd.as_fd(), libc::XDP_UMEM_FILL_RING, &cfg.fill_size)
            .map_err(setup("XDP_UMEM_FILL_RING"))?;
        sys::set_xdp_opt(fd.as_fd(), libc::XDP_UMEM_COMPLETION_RING, &cfg.fill_size)
            .map_err(setup("XDP_UMEM_COMPLETION_RING"))?;
        sys::set_xdp_opt(fd.as_fd(), libc::XDP_RX_RING, &cfg.ring_size)
            .map_err(setup("XDP_RX_RING"))?;
        sys::set_xdp_opt(fd.as_fd(), libc::XDP_TX_RING, &cfg.ring_size)
            .map_err(setup("XDP_TX_RING"))?;
        let (off, len) =
            sys::get_xdp_opt::<libc::xdp_mmap_offsets>(fd.as_fd(), libc::XDP_MMAP_OFFSETS)
                .map_err(setup("XDP_MMAP_OFFSETS"))?;
        if len != std::mem::size_of::<libc::xdp_mmap_offsets>() {
            return Err(XskError::Setup {
                step: "XDP_MMAP_OFFSETS",
                source: io::Error::other("kernel too old (no ring flags; needs Linux >= 5.4)"),
            });
        }
        let fill =
            FillRing::fill(fd.as_fd(), &off, cfg.fill_size).map_err(setup("mmap fill ring"))?;
        let comp = CompletionRing::completion(fd.as_fd(), &off, cfg.fill_size)
            .map_err(setup("mmap completion ring"))?;
        let rx = RxRing::rx(fd.as_fd(), &off, cfg.ring_size).map_err(setup("mmap RX ring"))?;
        let tx = TxRing::tx(fd.as_fd(), &off, cfg.ring_size).map_err(setup("mmap TX ring"))?;

        let mut flags = if zero_copy {
            libc::XDP_ZEROCOPY
        } else {
            libc::XDP_COPY
        };
        if cfg.need_wakeup {
            flags |= libc::XDP_USE_NEED_WAKEUP;
        }
        if multi_buffer {
            flags |= libc::XDP_USE_SG;
        }
        if let Err(e) = sys::bind_xdp(fd.as_fd(), ifindex, cfg.queue, flags) {
            return Err(match e.raw_os_error() {
                Some(libc::EOPNOTSUPP) | Some(libc::EPROTONOSUPPORT) if zero_copy => {
                    XskError::ZeroCopyUnsupported {
                        ifname: cfg.ifname.clone(),
                        source: e,
                    }
                }
                // virtio_net refuses a zero-copy pool with EINVAL / EPERM
                // when its rings have no DMA device (no
                // VIRTIO_F_ACCESS_PLATFORM) or TX NAPI is off, and with
                // ENOENT in big-packets mode: zero-copy, not the bind, is
                // what the driver cannot do.
                Some(libc::EINVAL) | Some(libc::EPERM) | Some(libc::ENOENT) if zero_copy => {
                    XskError::ZeroCopyUnsupported {
                        ifname: cfg.ifname.clone(),
                        source: e,
                    }
                }
                Some(libc::EBUSY) => XskError::QueueBusy {
                    ifname: cfg.ifname.clone(),
                    queue: cfg.queue,
                    waited: Duration::ZERO,
                },
                _ => XskError::Bind {
                    ifname: cfg.ifname.clone(),
                    queue: cfg.queue,
                    source: e,
                },
            });
        }
        let zero_copy = sys::get_xdp_opt::<libc::xdp_options>(fd.as_fd(), libc::XDP_OPTIONS)
            .map(|(o, _)| o.flags & libc::XDP_OPTIONS_ZEROCOPY != 0)
            .unwrap_or(zero_copy);

        let pool = FramePool::new(umem.frame_count(), umem.frame_size());
        let mut sock = XskSocket {
            fill,
            comp,
            rx,
            tx,
            fd,
            umem,
            pool,
            tx_pending: 0,
            zero_copy,
            need_wakeup: cfg.need_wakeup,
            multi_buffer,
            scratch: vec![0u8; MAX_PACKET].into_boxed_slice(),
            counters: XskCounters::default(),
            ifname: cfg.ifname.clone(),
            queue: cfg.queue,
        };
        sock.refill();
        Ok(sock)
    }

    /// Interface name.
    pub fn ifname(&self) -> &str {
        &self.ifname
    }

    /// Queue index.
    pub fn queue(&self) -> u32 {
        self.queue
    }

    /// Whether the socket is bound in zero-copy mode.
    pub fn is_zero_copy(&self) -> bool {
        self.zero_copy
    }

    /// Whether multi-buffer frames are enabled.
    pub fn is_multi_buffer(&self) -> bool {
        self.multi_buffer
    }

    /// UMEM frame size.
    pub fn frame_size(&self) -> u32 {
        self.umem.frame_size()
    }

    /// Largest packet [`send`](Self::send) accepts.
    pub fn max_packet(&self) -> usize {
        if self.multi_buffer {
            MAX_PACKET
        } else {
            self.umem.frame_size() as usize
        }
    }

    /// Places free RX frames (the stash) into the fill ring; returns how
    /// many were placed.
    pub fn refill(&mut self) -> u32 {
        let want = self.pool.free_rx() as u32;
        if want == 0 {
            return 0;
        }
        let room = self.fill.free(want).min(want);
        let mut n = 0;
        while n < room {
            let Some(addr) = self.pool.take_rx() else {
                break;
            };
            self.fill.write(n, addr);
            n += 1;
        }
        self.fill.submit(n);
        n
    }

    /// Receives up to `max_packets` packets, calling `f` with each
    /// packet's bytes as one slice: a multi-buffer packet whose frames are
    /// adjacent (the usual case, see `gather_in_place`) is read in place,
    /// any other is copied into a scratch buffer (`rx_linearized`). Frames
    /// go back to the fill ring afterwards. Returns the number of packets
    /// received.
    pub fn recv<F: FnMut(&[u8])>(&mut self, max_packets: usize, mut f: F) -> usize {
        self.recv_ahead(max_packets, Lookahead::default(), |r| {
            if let Rx::Packet(b) = r {
                f(b)
            }
        })
    }

    /// As [`XskSocket::recv`], and `f` also sees, as [`Rx::Ahead`], the
    /// packet `ahead.near` descriptors after each one it is handed (the
    /// first `ahead.near` before the first), and as [`Rx::Far`] the one
    /// `ahead.far` after, so that it can prefetch what that packet will
    /// need: early looks, the packet comes again as [`Rx::Packet`]. Only
    /// single-frame packets are shown ahead.
    pub fn recv_ahead<F: FnMut(Rx<'_>)>(
        &mut self,
        max_packets: usize,
        ahead: Lookahead,
        mut f: F,
    ) -> usize {
        let avail = self.rx.available(u32::MAX);
        for k in 0..ahead.far.min(avail) {
            self.look_ahead(k, true, &mut f);
        }
        for k in 0..ahead.near.min(avail) {
            self.look_ahead(k, false, &mut f);
        }
        if avail == 0 {
            if self.need_wakeup && self.fill.needs_wakeup() {
                self.counters.rx_kicks += 1;
                sys::kick_rx(self.fd.as_fd());
            }
            return 0;
        }
        let mut i = 0u32;
        let mut packets = 0usize;
        while i < avail && packets < max_packets {
            if ahead.far > 0 && i + ahead.far < avail {
                self.look_ahead(i + ahead.far, true, &mut f);
            }
            if ahead.near > 0 && i + ahead.near < avail {
                self.look_ahead(i + ahead.near, false, &mut f);
            }
            // The packet spans descriptors i..=j (XDP_PKT_CONTD on all but the last).
            let mut j = i;
            while j < avail && self.rx.read(j).options & libc::XDP_PKT_CONTD != 0 {
                j += 1;
            }
            if j == avail {
                break; // the rest of this packet is not published yet
            }
            if i == j {
                let d = self.rx.read(i);
                match self.umem.bytes(d.addr, d.len) {
                    Some(b) => {
                        self.counters.rx_bytes += b.len() as u64;
                        self.counters.rx_packets += 1;
                        f(Rx::Packet(b))
                    }
                    None => self.counters.rx_bad_descs += 1,
                }
                self.pool.return_rx(d.addr);
            } else if let Some((addr, len)) = self.gather_in_place(i, j) {
                // The frames are adjacent (the fill ring hands them out in
                // order): the packet is one span of the UMEM, read in place.
                match self.umem.span(addr, len) {
                    Some(b) => {
                        self.counters.rx_bytes += len as u64;
                        self.counters.rx_packets += 1;
                        self.counters.rx_multi_buffer += 1;
                        f(Rx::Packet(b))
                    }
                    None => self.counters.rx_bad_descs += 1,
                }
                for k in i..=j {
                    let d = self.rx.read(k);
                    self.pool.return_rx(d.addr);
                }
            } else {
                let mut len = 0usize;
                let mut ok = true;
                for k in i..=j {
                    let d = self.rx.read(k);
                    match self.umem.bytes(d.addr, d.len) {
                        Some(b) if len + b.len() <= self.scratch.len() => {
                            self.scratch[len..len + b.len()].copy_from_slice(b);
                            len += b.len();
                        }
                        _ => ok = false,
                    }
                    self.pool.return_rx(d.addr);
                }
                if ok {
                    self.counters.rx_bytes += len as u64;
                    self.counters.rx_packets += 1;
                    self.counters.rx_multi_buffer += 1;
                    self.counters.rx_linearized += 1;
                    f(Rx::Packet(&self.scratch[..len]));
                } else {
                    self.counters.rx_bad_descs += 1;
                }
            }
            packets += 1;
            i = j + 1;
        }
        self.rx.release(i);
        self.refill();
        packets
    }

    /// Shows `f` the packet in RX descriptor `k` (published, not yet
    /// released) as [`Rx::Far`] or [`Rx::Ahead`], if it is one whole frame.
    #[inline]
    fn look_ahead<F: FnMut(Rx<'_>)>(&self, k: u32, far: bool, f: &mut F) {
        let d = self.rx.read(k);
        if d.options & libc::XDP_PKT_CONTD == 0 {
            if let Some(b) = self.umem.bytes(d.addr, d.len) {
                f(if far { Rx::Far(b) } else { Rx::Ahead(b) });
            }
        }
    }

    /// Makes the packet in RX descriptors `i..=j` one span of the UMEM if
    /// its frames are adjacent, and returns its start and length; `None`
    /// (nothing moved) otherwise, if a piece is out of bounds, or if it is
    /// longer than [`max_packet`](Self::max_packet). In copy mode the
    /// kernel starts every piece after the frame's headroom (256 bytes),
    /// so a piece following a full one is moved back over the next frame's
    /// headroom to where the previous piece ends: for a 4154-byte packet
    /// in two 4096-byte frames, about 314 bytes move instead of the whole
    /// packet being copied out.
    fn gather_in_place(&mut self, i: u32, j: u32) -> Option<(u64, usize)> {
        let fs = u64::from(self.umem.frame_size());
        let first = self.rx.read(i);
        self.umem.bytes(first.addr, first.len)?;
        let mut end = first.addr + u64::from(first.len);
        let mut frame = first.addr - first.addr % fs;
        // Check every piece before moving any: each in bounds, in the
        // frame after the previous piece's, at or after where it ends.
        for k in i + 1..=j {
            let d = self.rx.read(k);
            let base = d.addr - d.addr % fs;
            if base != frame + fs || d.addr < end || self.umem.bytes(d.addr, d.len).is_none() {
                return None;
            }
            frame = base;
            end += u64::from(d.len);
        }
        let len = (end - first.addr) as usize;
        if len > self.max_packet() {
            return None;
        }
        let mut at = first.addr + u64::from(first.len);
        for k in i + 1..=j {
            let d = self.rx.read(k);
            if d.addr != at {
                // In bounds: the piece was checked above, and `at` is
                // below it in the same or the previous frame.
                let moved = self.umem.move_within(d.addr, at, d.len as usize);
                debug_assert!(moved, "checked in bounds above");
            }
            at += u64::from(d.len);
        }
        Some((first.addr, len))
    }

    /// Frames that can be queued for transmission right now (in UMEM
    /// frames; a multi-buffer packet takes several).
    pub fn tx_room(&mut self) -> usize {
        let pending = self.tx_pending;
        let slots = self.tx.free(self.tx.size()).saturating_sub(pending) as usize;
        slots.min(self.pool.free_tx())
    }

    /// Queues one packet (copied into one or more UMEM frames). Returns
    /// false, counting `tx_full`, if there is no free frame or TX slot
    /// (call [`complete`](Self::complete) and retry), or if the packet is
    /// empty or larger than [`max_packet`](Self::max_packet).
    pub fn send(&mut self, packet: &[u8]) -> bool {
        if packet.is_empty() || packet.len() > self.max_packet() {
            self.counters.tx_full += 1;
            return false;
        }
        let fs = self.umem.frame_size() as usize;
        let chunks = packet.len().div_ceil(fs) as u32;
        if (self.pool.free_tx() as u32) < chunks {
            self.complete();
        }
        if (self.pool.free_tx() as u32) < chunks
            || self.tx.free(self.tx_pending + chunks) < self.tx_pending + chunks
        {
            self.counters.tx_full += 1;
            return false;
        }
        for (k, part) in packet.chunks(fs).enumerate() {
            let addr = self.pool.take_tx().expect("checked free_tx above");
            let buf = self
                .umem
                .bytes_mut(addr, part.len() as u32)
                .expect("pool frames are in bounds");
            buf.copy_from_slice(part);
            let last = k as u32 + 1 == chunks;
            let desc = libc::xdp_desc {
                addr,
                len: part.len() as u32,
                options: if last { 0 } else { libc::XDP_PKT_CONTD },
            };
            self.tx.write(self.tx_pending + k as u32, desc);
        }
        self.tx_pending += chunks;
        self.counters.tx_packets += 1;
        self.counters.tx_bytes += packet.len() as u64;
        true
    }

    /// Queues one packet written in place into a single UMEM frame: `f`
    /// gets the whole frame and returns the packet length (0 = nothing to
    /// send). Returns the length queued, or None if no frame or slot.
    pub fn send_with<F: FnOnce(&mut [u8]) -> usize>(&mut self, f: F) -> Option<usize> {
        if self.pool.free_tx() == 0 {
            self.complete();
        }
        if self.pool.free_tx() == 0 || self.tx.free(self.tx_pending + 1) < self.tx_pending + 1 {
            self.counters.tx_full += 1;
            return None;
        }
        let fs = self.umem.frame_size();
        let addr = self.pool.take_tx()?;
        let buf = self
            .umem
            .bytes_mut(addr, fs)
            .expect("pool frames are in bounds");
        let len = f(buf).min(fs as usize);
        if len == 0 {
            self.pool.untake_tx(addr);
            return Some(0);
        }
        self.tx.write(
            self.tx_pending,
            libc::xdp_desc {
                addr,
                len: len as u32,
                options: 0,
            },
        );
        self.tx_pending += 1;
        self.counters.tx_packets += 1;
        self.counters.tx_bytes += len as u64;
        Some(len)
    }

    /// Queues one packet written in place into the UMEM (no copy): reserves
    /// the smallest run of adjacent TX frames holding `room` bytes (at
    /// most [`max_packet`](Self::max_packet)), hands it to `f` as one
    /// slice, and queues the first `n` bytes if `f` returns `Some(n)` (as
    /// several descriptors when `n` exceeds a frame). Frames `f` did not
    /// fill, or all of them if it returns `None` or `Some(0)`, go back to
    /// the pool. [`InPlace::NoRoom`] (and `f` is not called) when the
    /// frames or TX slots are lacking or the free frames on top of the
    /// pool are not adjacent: use [`send`](Self::send) then.
    pub fn send_in_place<F: FnOnce(&mut [u8]) -> Option<usize>>(
        &mut self,
        room: usize,
        f: F,
    ) -> InPlace {
        let fs = self.umem.frame_size() as usize;
        if room == 0 || room > self.max_packet() {
            return InPlace::NoRoom;
        }
        let k = room.div_ceil(fs);
        if self.pool.free_tx() < k {
            self.complete();
        }
        let slots = self.tx_pending + k as u32;
        if self.tx.free(slots) < slots {
            self.counters.tx_full += 1;
            return InPlace::NoRoom;
        }
        let Some(base) = self.pool.take_tx_run(k) else {
            return InPlace::NoRoom;
        };
        let buf = self
            .umem
            .run_mut(base, k as u32)
            .expect("pool frames are in bounds");
        let len = f(buf).unwrap_or(0).min(k * fs);
        let used = len.div_ceil(fs);
        self.pool.untake_tx_run(base, used, k);
        if len == 0 {
            return InPlace::Nothing;
        }
        for i in 0..used {
            let last = i + 1 == used;
            let desc = libc::xdp_desc {
                addr: base + (i * fs) as u64,
                len: if last {
                    (len - i * fs) as u32
                } else {
                    fs as u32
                },
                options: if last { 0 } else { libc::XDP_PKT_CONTD },
            };
            self.tx.write(self.tx_pending + i as u32, desc);
        }
        self.tx_pending += used as u32;
        self.counters.tx_packets += 1;
        self.counters.tx_bytes += len as u64;
        self.counters.tx_in_place += 1;
        InPlace::Sent(len)
    }

    /// Publishes queued packets and wakes the kernel if it needs it. In
    /// copy mode the kernel transmits only when kicked, and a kick sends at
    /// most a small batch (32 frames), so it is kicked until the TX ring is
    /// drained or the kernel stops making progress (e.g. the completion
    /// ring is full: call [`complete`](Self::complete)).
    pub fn flush(&mut self) -> io::Result<()> {
        self.tx.submit(self.tx_pending);
        self.tx_pending = 0;
        if self.zero_copy && self.need_wakeup {
            if self.tx.needs_wakeup() {
                self.counters.tx_kicks += 1;
                sys::kick_tx(self.fd.as_fd())?;
            }
            return Ok(());
        }
        let mut left = self.tx_unconsumed();
        while left > 0 {
            self.counters.tx_kicks += 1;
            sys::kick_tx(self.fd.as_fd())?;
            let now = self.tx_unconsumed();
            if now >= left {
                break;
            }
            left = now;
        }
        Ok(())
    }

    /// TX descriptors published but not yet taken by the kernel.
    pub fn tx_unconsumed(&mut self) -> u32 {
        let size = self.tx.size();
        size - self.tx.free(size).min(size)
    }

    /// Takes transmitted frames back from the completion ring; returns how many.
    pub fn complete(&mut self) -> u32 {
        let n = self.comp.available(u32::MAX);
        // Last completed first: frames come back in the order they were
        // sent (ascending runs), so pushing them in reverse leaves the
        // lowest on top of the free stack and adjacent frames in order
        // below it, which is what `send_in_place` reserves. In send order,
        // a one-frame packet taken from a two-frame run would split every
        // following pair (measured: half the small packets fell back to
        // the copy path).
        for i in (0..n).rev() {
            let addr = self.comp.read(i);
            self.pool.return_tx(addr);
        }
        self.comp.release(n);
        self.counters.tx_completed_frames += u64::from(n);
        n
    }

    /// Frames given to the kernel for TX and not yet completed (plus the
    /// queued, unpublished ones).
    pub fn tx_in_flight(&self) -> u32 {
        self.pool.accounting().in_tx_or_completion
    }

    /// Blocks until a packet may be available or `timeout` passes.
    pub fn wait(&self, timeout: Duration) -> io::Result<bool> {
        sys::wait_readable(self.fd.as_fd(), timeout)
    }

    /// The kernel's statistics for this socket.
    pub fn statistics(&self) -> io::Result<XskStatistics> {
        let (s, _) =
            sys::get_xdp_opt::<libc::xdp_statistics>(self.fd.as_fd(), libc::XDP_STATISTICS)?;
        Ok(XskStatistics {
            rx_dropped: s.rx_dropped,
            rx_invalid_descs: s.rx_invalid_descs,
            tx_invalid_descs: s.tx_invalid_descs,
            rx_ring_full: s.rx_ring_full,
            rx_fill_ring_empty_descs: s.rx_fill_ring_empty_descs,
            tx_ring_empty_descs: s.tx_ring_empty_descs,
        })
    }

    /// The socket's own counters.
    pub fn counters(&self) -> XskCounters {
        self.counters
    }

    /// Where the UMEM frames are.
    pub fn accounting(&self) -> FrameAccounting {
        self.pool.accounting()
    }
}

impl AsFd for XskSocket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl AsRawFd for XskSocket {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

#[cfg(test)]
mod bind_plan_tests {
    use super::*;

    #[test]
    fn zero_copy_without_multi_buffer_comes_before_copy_mode() {
        // virtio_net refuses XDP_ZEROCOPY | XDP_USE_SG: with MTU 1500 and
        // 4 KiB frames the socket is bound zero-copy without SG.
        assert!(fits_one_frame(1500, 4096));
        assert_eq!(
            bind_plan(ZeroCopy::Auto, true, true),
            vec![(true, true), (true, false), (false, true)]
        );
        assert_eq!(
            bind_plan(ZeroCopy::On, true, true),
            vec![(true, true), (true, false)]
        );
    }

    #[test]
    fn multi_buffer_is_kept_when_frames_need_it() {
        // A 9000-byte MTU needs several frames: never bind without SG.
        assert!(!fits_one_frame(9000, 4096));
        // 3840 bytes of data after the 256-byte headroom: 3822 + 18 fits,
        // 3823 + 18 does not.
        assert!(fits_one_frame(3822, 4096));
        assert!(!fits_one_frame(3823, 4096));
        assert!(!fits_one_frame(u32::MAX, 4096));
        assert_eq!(
            bind_plan(ZeroCopy::Auto, true, false),
            vec![(true, true), (false, true)]
        );
        assert_eq!(bind_plan(ZeroCopy::On, true, false), vec![(true, true)]);
    }

    #[test]
    fn copy_mode_and_single_buffer_plans() {
        assert_eq!(bind_plan(ZeroCopy::Off, true, true), vec![(false, true)]);
        assert_eq!(bind_plan(ZeroCopy::Off, false, false), vec![(false, false)]);
        assert_eq!(
            bind_plan(ZeroCopy::Auto, false, true),
            vec![(true, false), (false, false)]
        );
    }

    #[test]
    fn reads_the_loopback_mtu() {
        // Every network namespace has `lo`; SIOCGIFMTU needs no privilege.
        let sysfs: u32 = std::fs::read_to_string("/sys/class/net/lo/mtu")
            .expect("sysfs")
            .trim()
            .parse()
            .expect("a number");
        assert_eq!(sys::if_mtu("lo").expect("SIOCGIFMTU on lo"), sysfs);
        assert!(sys::if_mtu("no-such-if0").is_err());
        assert!(sys::if_mtu("").is_err());
        assert!(sys::if_mtu("a-name-longer-than-ifnamsiz").is_err());
    }
}

#[cfg(test)]
mod counter_tests {
    use super::*;

    #[test]
    fn accumulate_adds_every_field() {
        let one = XskCounters {
            rx_packets: 1,
            rx_bytes: 2,
            rx_multi_buffer: 3,
            rx_linearized: 11,
            rx_bad_descs: 4,
            tx_packets: 5,
            tx_bytes: 6,
            tx_full: 7,
            tx_kicks: 8,
            rx_kicks: 9,
            tx_completed_frames: 12,
            tx_in_place: 10,
        };
        let mut sum = one;
        sum.accumulate(&one);
        assert_eq!(
            sum,
            XskCounters {
                rx_packets: 2,
                rx_bytes: 4,
                rx_multi_buffer: 6,
                rx_linearized: 22,
                rx_bad_descs: 8,
                tx_packets: 10,
                tx_bytes: 12,
                tx_full: 14,
                tx_kicks: 16,
                rx_kicks: 18,
                tx_completed_frames: 24,
                tx_in_place: 20,
            }
        );
        let k = XskStatistics {
            rx_dropped: 1,
            rx_invalid_descs: 2,
            tx_invalid_descs: 3,
            rx_ring_full: 4,
            rx_fill_ring_empty_descs: 5,
            tx_ring_empty_descs: 6,
        };
        let mut ks = XskStatistics::default();
        ks.accumulate(&k);
        ks.accumulate(&k);
        assert_eq!(
            ks,
            XskStatistics {
                rx_dropped: 2,
                rx_invalid_descs: 4,
                tx_invalid_descs: 6,
                rx_ring_full: 8,
                rx_fill_ring_empty_descs: 10,
                tx_ring_empty_descs: 12,
            }
        );
    }
}
