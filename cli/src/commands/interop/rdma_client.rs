//! `roce-xdp interop rdma-client`: RDMA WRITE or READ from the engine into a
//! passive target on a stock libibverbs device (`interop/peer/rdma_target.c`
//! on Soft-RoCE), then byte-exact verification on both ends.
//!
//! The exchange (address lines, `done`, the target's verdict) is
//! `engine::oob::rdma_target`; this file does the I/O: TCP, the neighbour
//! table, and the datapath. Iteration `i` moves `size` bytes between local
//! and remote offset `i * size`, up to `--window` work requests in flight.

use std::io::{BufReader, Write};
use std::net::IpAddr;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context as _, Result};
use clap::Args;

use engine::oob::rdma_target::{first_mismatch, TargetAddr, Verdict, DONE_LINE};
use engine::rc::{Access, SendOp, SendWr, WcStatus, WorkCompletion};

use crate::common::args::{reword, PeerDatapathArgs};
use crate::common::rdma_target_exchange::{
    rdma_target_connect_options, read_line, Endpoint, RdmaOp, TransferArgs,
    TARGET_MAX_DEST_RD_ATOMIC,
};
use crate::common::verbs_peer::{
    check_mtu, close_datapath, connect_with_retry, peer_ipv4, peer_mac, set_drop_rate,
    wc_status_str, Recovery,
};

/// `roce-xdp interop rdma-client --op write|read [options] TARGET`.
#[derive(Debug, Args)]
#[command(
    about = "RDMA WRITE/READ against interop/peer/rdma_target on a libibverbs device (rxe)",
    long_about = "RDMA WRITE/READ against interop/peer/rdma_target on a libibverbs device.\n\n\
        The target (e.g. `rdma_target -o write -s 4096 -n 10 -g 1` on Soft-RoCE) exposes\n\
        SIZE * ITERS bytes; the engine WRITEs or READs them in ITERS requests of SIZE\n\
        bytes, then both sides check every byte (exchange: engine::oob::rdma_target).",
    mut_args(reword(&[
        (
            "drop_rate",
            "Test impairment: the XDP program drops this fraction (0..1) of the RoCE frames \
            the engine receives (ACKs, READ responses), for the whole transfer; prints the \
            recovery counters to stderr",
        ),
    ]))
)]
pub struct RdmaClientArgs {
    /// Host running rdma_target.
    pub target: String,
    /// -o, -p, -s, -n, -m.
    #[command(flatten)]
    pub transfer: TransferArgs,
    /// Work requests in flight (READs are also bounded by the target's
    /// max_dest_rd_atomic, 16).
    #[arg(long, default_value_t = 16)]
    pub window: u32,
    /// --iface, --mode, --force, --peer-mac, --drop-rate.
    #[command(flatten)]
    pub datapath: PeerDatapathArgs,
    /// Keep retrying the TCP connection for this many seconds.
    #[arg(long, value_name = "SECS", default_value_t = 0)]
    pub connect_retry: u64,
}

/// Run `roce-xdp interop rdma-client`.
pub fn run(args: RdmaClientArgs) -> Result<()> {
    check_mtu(args.transfer.mtu)?;
    if args.transfer.size == 0 || args.transfer.iters == 0 || args.window == 0 {
        bail!("-s, -n and --window must be > 0");
    }
    let len = u64::from(args.transfer.size) * u64::from(args.transfer.iters);
    if len > u64::from(u32::MAX) {
        bail!("-s * -n must fit in 32 bits (the exchange carries a 32-bit length)");
    }
    let len = len as usize;

    let window = args.window.min(args.transfer.iters);
    let write = args.transfer.op == RdmaOp::Write;
    let ep = Endpoint::open(&args.datapath, len, Access::LOCAL_WRITE, write, window)?;
    let (dev, mr, local) = (&ep.dev, &ep.mr, &ep.addr);
    let q = 0;
    let stream = connect_with_retry(
        &args.target,
        args.transfer.port,
        Duration::from_secs(args.connect_retry),
        "rdma_target",
    )?;
    let _ = stream.set_nodelay(true);
    let mut writer = stream.try_clone().context("cloning the TCP stream")?;
    let mut reader = BufReader::new(stream);
    writer
        .write_all(local.encode().as_bytes())
        .context("sending our address")?;
    let remote = TargetAddr::parse(&read_line(&mut reader, "address")?)
        .map_err(|e| anyhow!("target's address: {e}"))?;
    println!(
        "  local address:  QPN {:#08x}, PSN {:#08x}, GID {}",
        local.qpn, local.psn, local.gid
    );
    println!(
        "  remote address: QPN {:#08x}, PSN {:#08x}, GID {}, VA {:#x}, RKey {:#010x}, len {}",
        remote.qpn, remote.psn, remote.gid, remote.va, remote.rkey, remote.len
    );
    if (remote.len as usize) < len {
        bail!(
            "the target's buffer has {} bytes, this run needs {len}: give it the same -s and -n",
            remote.len
        );
    }
    let peer_ip = peer_ipv4(remote.gid, "the target")?;
    let mac = peer_mac(dev, args.datapath.peer_mac.as_deref(), IpAddr::V4(peer_ip))?;
    let opts =
        rdma_target_connect_options(args.transfer.mtu, local.psn, TARGET_MAX_DEST_RD_ATOMIC, 1);
    ep.connect(&remote, mac, peer_ip, opts)?;
    set_drop_rate(dev, args.datapath.drop_rate)?;

    let opcode = match args.transfer.op {
        RdmaOp::Write => SendOp::Write,
        RdmaOp::Read => SendOp::Read,
    };
    let post = |i: u32| -> Result<()> {
        let off = i as usize * args.transfer.size as usize;
        let mut wr = SendWr::new(u64::from(i), opcode, mr.sge(off, args.transfer.size));
        wr.remote_addr = remote.va + off as u64;
        wr.rkey = remote.rkey;
        ep.qp
            .post_send(wr)
            .with_context(|| format!("posting work request {i}"))
    };
    let start = Instant::now();
    let mut posted = 0;
    let mut completed = 0;
    while posted < window {
        post(posted)?;
        posted += 1;
    }
    let mut wcs = vec![WorkCompletion::default(); 64];
    let mut idle = Instant::now();
    while completed < args.transfer.iters {
        if let Some(e) = dev.poll_post_error(q) {
            bail!(
                "the engine refused work request {} on QP {:#x}: {}",
                e.wr_id,
                e.qpn,
                e.error
            );
        }
        let n = dev.poll_cq(q, &mut wcs);
        for wc in &wcs[..n] {
            if wc.status != WcStatus::Success {
                let (s, code) = wc_status_str(wc.status);
                bail!("Failed status {s} ({code}) for wr_id {}", wc.wr_id);
            }
            completed += 1;
            if posted < args.transfer.iters {
                post(posted)?;
                posted += 1;
            }
        }
        if n > 0 {
            idle = Instant::now();
        } else if idle.elapsed() < Duration::from_micros(200) {
            std::hint::spin_loop();
        } else {
            std::thread::sleep(Duration::from_micros(50));
        }
    }
    let secs = start.elapsed().as_secs_f64();
    let op_name = match args.transfer.op {
        RdmaOp::Write => "WRITE",
        RdmaOp::Read => "READ",
    };
    println!(
        "{op_name}: {len} bytes in {secs:.2} seconds = {:.2} Mbit/sec",
        len as f64 * 8.0 / secs / 1e6
    );
    println!(
        "{op_name}: {} iters in {secs:.2} seconds = {:.2} usec/iter",
        args.transfer.iters,
        secs * 1e6 / f64::from(args.transfer.iters)
    );
    let mut local_ok = true;
    if args.transfer.op == RdmaOp::Read {
        let mut local_buf = vec![0u8; len];
        if !mr.read(0, &mut local_buf) {
            bail!("reading back the local buffer failed");
        }
        match first_mismatch(&local_buf, 0) {
            None => println!("READ: verified {len} bytes read from the target"),
            Some(off) => {
                println!(
                    "READ: data mismatch at offset {off}: got {:#04x}, want {:#04x}",
                    local_buf[off],
                    engine::oob::rdma_target::pattern(off as u64)
                );
                local_ok = false;
            }
        }
    }

    writer
        .write_all(DONE_LINE.as_bytes())
        .context("sending done")?;
    let verdict = Verdict::parse(&read_line(&mut reader, "verdict")?)
        .map_err(|e| anyhow!("target's verdict: {e}"))?;
    let target_ok = match verdict {
        Verdict::Ok { bytes } => {
            println!("target: ok, {bytes} bytes hold the pattern");
            bytes as usize >= len
        }
        Verdict::Bad { offset, got, want } => {
            println!("target: data mismatch at offset {offset}: got {got:#04x}, want {want:#04x}");
            false
        }
    };

    close_datapath(ep.dev, args.datapath.drop_rate, Recovery::Requester);
    if let Err(e) = ep.steering.remove() {
        eprintln!("roce-xdp: warning: {e}");
    }
    if !(local_ok && target_ok) {
        bail!("data verification failed");
    }
    Ok(())
}
