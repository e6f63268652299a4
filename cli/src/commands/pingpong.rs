//! `roce-xdp pingpong`: rdma-core's `ibv_rc_pingpong`, on the engine.
//!
//! Same TCP exchange (port 18515, the 52-byte address message, `done`),
//! same RC SEND/RECV ping-pong and the same result lines, so it runs
//! against stock `ibv_rc_pingpong` on any RoCE v2 device (Soft-RoCE, a
//! real NIC) in either role. The protocol pieces live in
//! `engine::oob::pingpong` (message format, report) and
//! `engine::oob::pingpong_loop` (the SEND/RECV schedule); this file does
//! the I/O: TCP, the neighbour table, and the datapath.

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, TcpListener};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context as _, Result};
use clap::Args;

use engine::endpoint::{ConnectOptions, RemoteQp};
use engine::nic::Impairment;
use engine::oob::pingpong::{
    is_done, is_valid_mtu, report_lines, Dest, DEFAULT_ITERS, DEFAULT_MTU, DEFAULT_RX_DEPTH,
    DEFAULT_SIZE, DEFAULT_TCP_PORT, DEST_MSG_LEN, DONE, FILL_BYTE, RC_PINGPONG_QP_ATTRS,
};
use engine::oob::pingpong_loop::{Completion, PingPong, Role};
use engine::oob::Gid;
use engine::rc::{Access, Mtu, RecvWr, SendOp, SendWr, WcStatus, WorkCompletion};
use engine::verbs::{Device, MemoryRegion, QpCaps, QueuePair};

use crate::common::args::{reword, PeerDatapathArgs};
use crate::common::verbs_peer::{
    close_datapath, connect_with_retry, peer_mac, random_psn, set_drop_rate, wc_status_str,
    Recovery,
};

/// `roce-xdp pingpong [options] [SERVER]`: options as `ibv_rc_pingpong`.
#[derive(Debug, Args)]
#[command(
    about = "RC SEND/RECV ping-pong, wire-compatible with rdma-core's ibv_rc_pingpong",
    long_about = "RC SEND/RECV ping-pong, wire-compatible with rdma-core's ibv_rc_pingpong.\n\n\
        Without SERVER: wait for a client on TCP --port. With SERVER: connect to it.\n\
        The peer must run ibv_rc_pingpong with -g set to its RoCE v2 GID index\n\
        (1 on Soft-RoCE), the same -s and -n, and a -m no larger than ours.",
    mut_args(reword(&[
        (
            "peer_mac",
            "Peer MAC address (default: the kernel's neighbour table, which the TCP exchange \
            has just filled)",
        ),
        (
            "drop_rate",
            "Test impairment: the XDP program drops this fraction (0..1) of the RoCE frames \
            the engine receives, to exercise go-back-N recovery with the peer, until the \
            last SEND is posted (the protocol has no closing handshake, so a lost final ACK \
            would be retried against a peer that has exited). Prints the recovery counters \
            to stderr",
        ),
    ]))
)]
pub struct PingpongArgs {
    /// Server to connect to (client role); none = be the server.
    pub server: Option<String>,
    /// TCP port of the address exchange.
    #[arg(short = 'p', long = "port", default_value_t = DEFAULT_TCP_PORT)]
    pub port: u16,
    /// Size of each message, bytes.
    #[arg(short = 's', long = "size", default_value_t = DEFAULT_SIZE)]
    pub size: u32,
    /// Number of exchanges.
    #[arg(short = 'n', long = "iters", default_value_t = DEFAULT_ITERS)]
    pub iters: u32,
    /// Path MTU: 256, 512, 1024, 2048 or 4096.
    #[arg(short = 'm', long = "mtu", default_value_t = DEFAULT_MTU)]
    pub mtu: u32,
    /// Receives posted at a time.
    #[arg(short = 'r', long = "rx-depth", default_value_t = DEFAULT_RX_DEPTH)]
    pub rx_depth: u32,
    /// GID index (accepted for compatibility; the engine's GID is always
    /// its interface's IPv4-mapped address).
    #[arg(short = 'g', long = "gid-idx", value_name = "INDEX")]
    pub gid_idx: Option<i32>,
    /// IB device (accepted for compatibility; use --iface).
    #[arg(short = 'd', long = "ib-dev", value_name = "DEV")]
    pub ib_dev: Option<String>,
    /// IB port (accepted for compatibility).
    #[arg(short = 'i', long = "ib-port", default_value_t = 1)]
    pub ib_port: u32,
    /// Service level (accepted; RoCE v2 over IPv4 does not carry it).
    #[arg(short = 'l', long = "sl", default_value_t = 0)]
    pub sl: u8,
    /// Sleep on CQ events (accepted; the engine always polls).
    #[arg(short = 'e', long = "events")]
    pub events: bool,

    /// --iface, --mode, --force, --peer-mac, --drop-rate.
    #[command(flatten)]
    pub datapath: PeerDatapathArgs,
    /// RX queue of --iface to serve.
    #[arg(long, default_value_t = 0)]
    pub queue: u32,
    /// Local IP address (default: the first IPv4 address of --iface).
    #[arg(long, value_name = "IP")]
    pub local_ip: Option<Ipv4Addr>,
    /// Client: keep retrying the TCP connection for this many seconds
    /// (ibv_rc_pingpong gives up at once).
    #[arg(long, value_name = "SECS", default_value_t = 0)]
    pub connect_retry: u64,
}

impl PingpongArgs {
    fn role(&self) -> Role {
        if self.server.is_some() {
            Role::Client
        } else {
            Role::Server
        }
    }

    fn validate(&self) -> Result<()> {
        if !is_valid_mtu(self.mtu) {
            bail!(
                "-m {}: the path MTU must be 256, 512, 1024, 2048 or 4096",
                self.mtu
            );
        }
        if self.iters == 0 {
            bail!("-n 0: at least one iteration is needed");
        }
        if self.rx_depth == 0 {
            bail!("-r 0: at least one receive must be posted");
        }
        if !(0.0..1.0).contains(&self.datapath.drop_rate) {
            bail!(
                "--drop-rate {}: must be at least 0 and below 1",
                self.datapath.drop_rate
            );
        }
        Ok(())
    }
}

// ---------------------------------------------------------------- TCP exchange

/// Client side: send our address, read the server's, send `done\0`.
pub fn client_exchange<S: Read + Write>(stream: &mut S, local: &Dest) -> Result<Dest> {
    stream
        .write_all(&local.to_bytes())
        .context("couldn't send local address")?;
    let mut msg = [0u8; DEST_MSG_LEN];
    stream.read_exact(&mut msg).context(
        "couldn't read remote address (did the server close? compare -s/-m/-g on both sides)",
    )?;
    let remote = Dest::parse(&msg).map_err(|e| anyhow!("server's address: {e}"))?;
    // One write: the server expects exactly 5 bytes from one read().
    stream.write_all(DONE).context("couldn't send done")?;
    stream.flush()?;
    Ok(remote)
}

/// Server side, first half: read the client's address.
pub fn server_read_remote<S: Read>(stream: &mut S) -> Result<Dest> {
    let mut msg = [0u8; DEST_MSG_LEN];
    stream
        .read_exact(&mut msg)
        .context("couldn't read remote address")?;
    Dest::parse(&msg).map_err(|e| anyhow!("client's address: {e}"))
}

/// Server side, second half (after connecting the QP): send our address and
/// wait for `done\0`.
pub fn server_finish<S: Read + Write>(stream: &mut S, local: &Dest) -> Result<()> {
    stream
        .write_all(&local.to_bytes())
        .context("couldn't send local address")?;
    let mut done = [0u8; DONE.len()];
    stream
        .read_exact(&mut done)
        .context("couldn't read done from the client")?;
    if !is_done(&done) {
        bail!(
            "client sent {:?} instead of \"done\\0\"",
            String::from_utf8_lossy(&done)
        );
    }
    Ok(())
}

// ---------------------------------------------------------------- datapath

/// rc_pingpong's work request ids.
const RECV_WRID: u64 = 1;
const SEND_WRID: u64 = 2;

/// The ping-pong QP on the engine: one buffer of `size` bytes for both
/// SEND and RECV (as rc_pingpong), filled with 0x7b.
struct PingpongQp {
    dev: Device,
    qp: QueuePair,
    mr: MemoryRegion,
    size: u32,
    queue: u32,
    wcs: Vec<WorkCompletion>,
    ready: std::collections::VecDeque<WorkCompletion>,
    iters: u32,
    sends_posted: u32,
    drop_rate: f64,
    /// Queue coverage (`docs/queue-coverage.md`): removed after the device.
    steering: engine::nic::Steering,
}

impl PingpongQp {
    fn open(args: &PingpongArgs) -> Result<PingpongQp> {
        let (dev, steering) = args
            .datapath
            .open(args.queue + 1, args.local_ip.map(IpAddr::V4))?;
        if !dev.ip().is_ipv4() {
            bail!(
                "{} has no IPv4 address: add one or pass --local-ip",
                args.datapath.iface
            );
        }
        set_drop_rate(&dev, args.datapath.drop_rate)?;
        let q = args.queue;
        let mr = dev
            .register_memory(q, args.size.max(1) as usize, Access::LOCAL_WRITE)
            .context("registering the message buffer")?;
        mr.write(0, &vec![FILL_BYTE; args.size as usize]);
        let qp = dev
            .create_qp(
                q,
                QpCaps {
                    max_send_wr: RC_PINGPONG_QP_ATTRS.max_send_wr,
                    max_recv_wr: args.rx_depth,
                },
            )
            .context("creating the QP")?;
        tracing::info!(
            iface = %args.datapath.iface,
            mode = %dev.xdp_mode(),
            zero_copy = dev.is_zero_copy(q),
            qpn = qp.qpn(),
            "datapath open"
        );
        Ok(PingpongQp {
            dev,
            qp,
            mr,
            size: args.size,
            queue: q,
            wcs: vec![WorkCompletion::default(); 64],
            ready: Default::default(),
            iters: args.iters,
            sends_posted: 0,
            drop_rate: args.datapath.drop_rate,
            steering,
        })
    }

    fn qpn(&self) -> u32 {
        self.qp.qpn()
    }

    fn gid(&self) -> Gid {
        Gid::from_ip(self.dev.ip())
    }

    fn connect(&self, args: &PingpongArgs, local: &Dest, remote: &Dest) -> Result<()> {
        let ip = remote.gid.to_ip();
        let mac = peer_mac(&self.dev, args.datapath.peer_mac.as_deref(), ip)?;
        let a = RC_PINGPONG_QP_ATTRS;
        let opts = ConnectOptions {
            path_mtu: Mtu::from_bytes(args.mtu).expect("validated"),
            timeout: a.timeout,
            retry_cnt: a.retry_cnt,
            rnr_retry: a.rnr_retry,
            min_rnr_timer: a.min_rnr_timer,
            max_rd_atomic: a.max_rd_atomic,
            max_dest_rd_atomic: a.max_dest_rd_atomic,
            sq_psn: local.psn,
            // No remote rights (the default): SENDs only, and
            // ibv_rc_pingpong gives its QP qp_access_flags 0.
            ..ConnectOptions::default()
        };
        let peer = RemoteQp {
            qpn: remote.qpn,
            psn: remote.psn,
            mac,
            ip,
        };
        self.qp
            .connect(peer, opts)
            .context("connecting the QP (RTR/RTS)")
    }

    fn post_recvs(&self, n: u32) -> Result<()> {
        for _ in 0..n {
            self.qp.post_recv(RecvWr {
                wr_id: RECV_WRID,
                sge: self.mr.sge(0, self.size),
            })?;
        }
        Ok(())
    }

    fn post_send(&mut self) -> Result<()> {
        self.sends_posted += 1;
        if self.sends_posted == self.iters && self.drop_rate > 0.0 {
            // ibv_rc_pingpong has no closing handshake: the peer exits once
            // its own work is done, so a dropped final ACK (or final SEND)
            // would leave this side retrying an exited peer forever
            // (retry_cnt 7 is infinite, as on rxe). Stop dropping for the
            // last exchange.
            self.dev
                .set_impairment(Impairment::default())
                .context("clearing the XDP drop impairment")?;
        }
        self.qp.post_send(SendWr::new(
            SEND_WRID,
            SendOp::Send,
            self.mr.sge(0, self.size),
        ))?;
        Ok(())
    }

    /// The next successful completion; a failed one ends the run as in
    /// rc_pingpong ("Failed status ... for wr_id ...").
    fn next_completion(&mut self) -> Result<Completion> {
        let mut idle = Instant::now();
        loop {
            if let Some(wc) = self.ready.pop_front() {
                if wc.status != WcStatus::Success {
                    let (s, n) = wc_status_str(wc.status);
                    bail!("Failed status {s} ({n}) for wr_id {}", wc.wr_id);
                }
                return match wc.wr_id {
                    SEND_WRID => Ok(Completion::Send),
                    RECV_WRID => Ok(Completion::Recv),
                    other => bail!("Completion for unknown wr_id {other}"),
                };
            }
            if let Some(e) = self.dev.poll_post_error(self.queue) {
                bail!(
                    "the engine refused work request {} on QP {:#x}: {}",
                    e.wr_id,
                    e.qpn,
                    e.error
                );
            }
            let n = self.dev.poll_cq(self.queue, &mut self.wcs);
            if n > 0 {
                self.ready.extend(self.wcs[..n].iter().copied());
                continue;
            }
            // Spin briefly, then back off: the engine thread and the peer
            // may share our cores.
            if idle.elapsed() < Duration::from_micros(200) {
                std::hint::spin_loop();
            } else if idle.elapsed() < Duration::from_millis(2) {
                std::thread::yield_now();
            } else {
                std::thread::sleep(Duration::from_micros(50));
            }
            if idle.elapsed() > Duration::from_secs(3600) {
                idle = Instant::now();
            }
        }
    }

    /// Stops the datapath; after a run with `--drop-rate`, prints what the
    /// impairment did and how the transport recovered.
    fn close(self) {
        close_datapath(self.dev, self.drop_rate, Recovery::Both);
        if let Err(e) = self.steering.remove() {
            eprintln!("roce-xdp: warning: {e}");
        }
    }
}

// ---------------------------------------------------------------- the command

/// Run `roce-xdp pingpong`.
pub fn run(args: PingpongArgs) -> Result<()> {
    args.validate()?;
    let role = args.role();

    // ibv_rc_pingpong moves its QP to INIT and posts the receives before
    // the exchange. The engine's verbs connect a QP in one step (RESET to
    // RTS), so the receives go in right after `connect`: still before the
    // peer can send, since in both roles the peer's first SEND waits for
    // something we do after connecting (our address, or our first SEND).
    let mut dp = PingpongQp::open(&args)?;
    let mut schedule = PingPong::new(args.iters, args.rx_depth);
    let initial_recvs = schedule.initial_actions().post_recvs;

    let local = Dest {
        lid: 0,
        qpn: dp.qpn(),
        psn: random_psn(),
        gid: dp.gid(),
    };
    println!("  local address:  {local}");

    let remote = match &args.server {
        Some(host) => {
            let mut s = connect_with_retry(
                host,
                args.port,
                Duration::from_secs(args.connect_retry),
                "ibv_rc_pingpong",
            )?;
            let remote = client_exchange(&mut s, &local)?;
            drop(s);
            check_remote(&remote)?;
            dp.connect(&args, &local, &remote)?;
            dp.post_recvs(initial_recvs)?;
            remote
        }
        None => {
            let listener = TcpListener::bind((Ipv4Addr::UNSPECIFIED, args.port))
                .with_context(|| format!("couldn't listen to port {}", args.port))?;
            let (mut s, _) = listener.accept().context("accept() failed")?;
            drop(listener);
            let remote = server_read_remote(&mut s)?;
            check_remote(&remote)?;
            // ibv_rc_pingpong's server connects before answering.
            dp.connect(&args, &local, &remote)?;
            dp.post_recvs(initial_recvs)?;
            server_finish(&mut s, &local)?;
            remote
        }
    };
    println!("  remote address: {remote}");

    let start = Instant::now();
    if schedule.start(role).post_send {
        dp.post_send()?;
    }
    while !schedule.is_finished() {
        let completion = dp.next_completion()?;
        let actions = schedule
            .on_completion(completion)
            .map_err(|e| anyhow!("ping-pong out of step: {e:?}"))?;
        if actions.post_recvs > 0 {
            dp.post_recvs(actions.post_recvs)?;
        }
        if actions.post_send {
            dp.post_send()?;
        }
    }
    // gettimeofday() resolution, as rc_pingpong.
    let elapsed_usec = start.elapsed().as_micros() as u64;
    for line in report_lines(args.size, args.iters, elapsed_usec) {
        println!("{line}");
    }
    dp.close();
    Ok(())
}

fn check_remote(remote: &Dest) -> Result<()> {
    if remote.gid.is_zero() {
        bail!(
            "the peer sent an all-zero GID: run ibv_rc_pingpong with -g <index of its RoCE v2 \
             IPv4 GID> (1 on Soft-RoCE; see /sys/class/infiniband/*/ports/1/gids)"
        );
    }
    if remote.gid.to_ipv4_mapped().is_none() {
        bail!(
            "the peer's GID {} is not IPv4-mapped: only RoCE v2 over IPv4 is supported here",
            remote.gid
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpStream;
    use std::thread;

    fn dest(qpn: u32, ip: [u8; 4]) -> Dest {
        Dest {
            lid: 0,
            qpn,
            psn: 0x123456,
            gid: Gid::from_ipv4(Ipv4Addr::from(ip)),
        }
    }

    #[test]
    fn exchange_over_loopback_tcp() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let server_local = dest(0x11, [10, 99, 0, 11]);
        let client_local = dest(0x12, [10, 99, 0, 2]);
        let server = thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let remote = server_read_remote(&mut s).unwrap();
            server_finish(&mut s, &server_local).unwrap();
            remote
        });
        let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
        let got_server = client_exchange(&mut c, &client_local).unwrap();
        assert_eq!(got_server, server_local);
        assert_eq!(server.join().unwrap(), client_local);
    }

    /// What ibv_rc_pingpong's server does (rc_pingpong.c): read 52 bytes,
    /// write 52, then one read() that must return exactly 5.
    #[test]
    fn client_sends_done_as_rc_pingpong_server_expects() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut msg = [0u8; DEST_MSG_LEN];
            s.read_exact(&mut msg).unwrap();
            s.write_all(b"0000:000011:b0a5a1:00000000000000000000ffff0a63000b\0")
                .unwrap();
            let mut buf = [0u8; DEST_MSG_LEN];
            let n = s.read(&mut buf).unwrap();
            (msg, buf[..n].to_vec())
        });
        let mut c = TcpStream::connect(("127.0.0.1", port)).unwrap();
        let local = dest(0x12, [10, 99, 0, 2]);
        let remote = client_exchange(&mut c, &local).unwrap();
        assert_eq!(remote.psn, 0xb0a5a1);
        let (msg, done) = server.join().unwrap();
        assert_eq!(msg, local.to_bytes());
        assert_eq!(done, DONE.to_vec());
    }
}
