//! `roce-xdp interop rdma-target`: the engine as the passive side of the RDMA
//! WRITE / READ interop test. It exposes SIZE * ITERS bytes to the peer
//! (`interop/peer/rdma_target -c HOST` on Soft-RoCE), which WRITEs into or
//! READs from them; on `done` it checks its buffer and answers with the
//! verdict. Exchange: `engine::oob::rdma_target` (the roles of
//! `roce-xdp interop rdma-client`, swapped).

use std::io::{BufReader, Write};
use std::net::{IpAddr, Ipv4Addr, TcpListener};

use anyhow::{anyhow, bail, Context as _, Result};
use clap::Args;

use engine::oob::rdma_target::{first_mismatch, pattern, TargetAddr, Verdict, DONE_LINE};
use engine::rc::Access;

use crate::common::args::{reword, PeerDatapathArgs};
use crate::common::rdma_target_exchange::{
    rdma_target_connect_options, read_line, Endpoint, RdmaOp, TransferArgs,
    TARGET_MAX_DEST_RD_ATOMIC,
};
use crate::common::verbs_peer::{
    check_mtu, close_datapath, peer_ipv4, peer_mac, set_drop_rate, Recovery,
};

/// `roce-xdp interop rdma-target --op write|read [options]`.
#[derive(Debug, Args)]
#[command(
    about = "Be the target of RDMA WRITE/READ from interop/peer/rdma_target -c (rxe)",
    long_about = "Be the target of RDMA WRITE/READ from interop/peer/rdma_target -c on a\n\
        libibverbs device. Exposes SIZE * ITERS bytes (READ: filled with the test\n\
        pattern; WRITE: zeroed), waits for one peer on TCP --port, and after the\n\
        peer's `done` checks every byte and answers ok/bad (engine::oob::rdma_target).",
    mut_args(reword(&[
        ("op", "What the peer does to our buffer"),
        ("iface", "Network interface the engine attaches to"),
        ("size", "Bytes per work request of the peer"),
        ("iters", "Work requests of the peer (the buffer is SIZE * ITERS bytes)"),
        (
            "drop_rate",
            "Test impairment: the XDP program drops this fraction (0..1) of the RoCE frames \
            the engine receives (WRITE packets, READ requests), for the whole transfer; \
            prints the recovery counters to stderr",
        ),
    ]))
)]
pub struct RdmaTargetArgs {
    /// -o, -p, -s, -n, -m.
    #[command(flatten)]
    pub transfer: TransferArgs,
    /// --iface, --mode, --force, --peer-mac, --drop-rate.
    #[command(flatten)]
    pub datapath: PeerDatapathArgs,
}

/// Run `roce-xdp interop rdma-target`.
pub fn run(args: RdmaTargetArgs) -> Result<()> {
    check_mtu(args.transfer.mtu)?;
    let len = u64::from(args.transfer.size) * u64::from(args.transfer.iters);
    if len == 0 || len > u64::from(u32::MAX) {
        bail!("-s * -n must be between 1 and 2^32 - 1 bytes");
    }
    let len = len as usize;

    let access = Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ;
    let read = args.transfer.op == RdmaOp::Read;
    let ep = Endpoint::open(&args.datapath, len, access, read, 1)?;
    let (dev, mr, local) = (&ep.dev, &ep.mr, &ep.addr);

    let listener = TcpListener::bind((Ipv4Addr::UNSPECIFIED, args.transfer.port))
        .with_context(|| format!("couldn't listen to port {}", args.transfer.port))?;
    let (stream, _) = listener.accept().context("accept() failed")?;
    drop(listener);
    let _ = stream.set_nodelay(true);
    let mut writer = stream.try_clone().context("cloning the TCP stream")?;
    let mut reader = BufReader::new(stream);
    let remote = TargetAddr::parse(&read_line(&mut reader, "address")?)
        .map_err(|e| anyhow!("peer's address: {e}"))?;
    println!(
        "  local address:  QPN {:#08x}, PSN {:#08x}, GID {}, VA {:#x}, RKey {:#010x}, len {len}",
        local.qpn, local.psn, local.gid, local.va, local.rkey
    );
    println!(
        "  remote address: QPN {:#08x}, PSN {:#08x}, GID {}",
        remote.qpn, remote.psn, remote.gid
    );
    let peer_ip = peer_ipv4(remote.gid, "the peer")?;
    let mac = peer_mac(dev, args.datapath.peer_mac.as_deref(), IpAddr::V4(peer_ip))?;
    let opts =
        rdma_target_connect_options(args.transfer.mtu, local.psn, 1, TARGET_MAX_DEST_RD_ATOMIC);
    ep.connect(&remote, mac, peer_ip, opts)?;
    set_drop_rate(dev, args.datapath.drop_rate)?;
    writer
        .write_all(local.encode().as_bytes())
        .context("sending our address")?;

    // The engine thread answers the peer's WRITEs / READs on its own; wait
    // for the peer to say it is done.
    let line = read_line(&mut reader, "done")?;
    if line != DONE_LINE {
        bail!("the peer sent {line:?} instead of {DONE_LINE:?}");
    }
    let mut buf = vec![0u8; len];
    if !mr.read(0, &mut buf) {
        bail!("reading back the buffer failed");
    }
    let verdict = match first_mismatch(&buf, 0) {
        None => Verdict::Ok { bytes: len as u64 },
        Some(off) => Verdict::Bad {
            offset: off as u64,
            got: buf[off],
            want: pattern(off as u64),
        },
    };
    writer
        .write_all(verdict.encode().as_bytes())
        .context("sending the verdict")?;
    let op_name = match args.transfer.op {
        RdmaOp::Write => "write-target",
        RdmaOp::Read => "read-target",
    };
    print!("{op_name} {len} bytes: {}", verdict.encode());

    close_datapath(ep.dev, args.datapath.drop_rate, Recovery::Responder);
    if let Err(e) = ep.steering.remove() {
        eprintln!("roce-xdp: warning: {e}");
    }
    if !matches!(verdict, Verdict::Ok { .. }) {
        bail!("data verification failed");
    }
    Ok(())
}
