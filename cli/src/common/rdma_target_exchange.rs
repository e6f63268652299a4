//! The engine's side of the RDMA WRITE / READ exchange with
//! `interop/peer/rdma_target` (engine::oob::rdma_target), shared by
//! `roce-xdp interop rdma-client` (the engine is the requester) and
//! `roce-xdp interop rdma-target` (the engine is the target): the options
//! both take, opening our end (buffer, QP, address line), the connection
//! options `rdma_target.c` uses, connecting to the peer's address, and
//! reading its lines.

use std::io::{BufRead, Read};
use std::net::{IpAddr, Ipv4Addr};

use anyhow::{bail, Context as _, Result};
use clap::{Args, ValueEnum};

use engine::endpoint::{ConnectOptions, RemoteQp};
use engine::oob::pingpong::DEFAULT_TCP_PORT;
use engine::oob::rdma_target::{fill_pattern, TargetAddr, MAX_LINE};
use engine::oob::Gid;
use engine::rc::{Access, Mtu};
use engine::verbs::{Device, MemoryRegion, QpCaps, QueuePair};

use super::args::PeerDatapathArgs;
use super::verbs_peer::{device_ipv4, random_psn};

/// The RDMA operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RdmaOp {
    /// RDMA WRITE into the target's buffer.
    Write,
    /// RDMA READ from the target's buffer.
    Read,
}

/// The transfer both sides agree on (`-o -p -s -n -m`), worded from the
/// requester's side; `interop rdma-target` words them from its own
/// (`mut_arg`).
#[derive(Debug, Clone, Args)]
pub struct TransferArgs {
    /// WRITE or READ.
    #[arg(short = 'o', long = "op", value_enum)]
    pub op: RdmaOp,
    /// TCP port of the exchange.
    #[arg(short = 'p', long = "port", default_value_t = DEFAULT_TCP_PORT)]
    pub port: u16,
    /// Bytes per work request.
    #[arg(short = 's', long = "size", default_value_t = 4096)]
    pub size: u32,
    /// Work requests (the target's buffer is SIZE * ITERS bytes).
    #[arg(short = 'n', long = "iters", default_value_t = 10)]
    pub iters: u32,
    /// Path MTU: 256, 512, 1024, 2048 or 4096.
    #[arg(short = 'm', long = "mtu", default_value_t = 1024)]
    pub mtu: u32,
}

/// Target's max_dest_rd_atomic (rdma_target.c): READs in flight at most.
pub const TARGET_MAX_DEST_RD_ATOMIC: u8 = 16;

/// One end of the exchange on the engine: the datapath on `--iface`
/// (queue 0), the buffer the transfer moves, one QP, and our address line.
pub struct Endpoint {
    pub dev: Device,
    /// Queue coverage (`docs/queue-coverage.md`): dropped (removed) with
    /// the endpoint.
    pub steering: engine::nic::Steering,
    pub mr: MemoryRegion,
    pub qp: QueuePair,
    /// Our QP, a fresh PSN, our GID (the interface's IPv4 address) and the
    /// buffer.
    pub addr: TargetAddr,
}

impl Endpoint {
    /// Opens the datapath, registers a `len`-byte buffer with `access`
    /// that holds the test pattern when `pattern` (zeroes otherwise), and
    /// creates a QP for `max_send_wr` sends.
    pub fn open(
        datapath: &PeerDatapathArgs,
        len: usize,
        access: Access,
        pattern: bool,
        max_send_wr: u32,
    ) -> Result<Endpoint> {
        let (dev, steering) = datapath.open(1, None)?;
        let ip = device_ipv4(&dev, &datapath.iface)?;
        let q = 0;
        let mr = dev
            .register_memory(q, len, access)
            .context("registering the buffer")?;
        let mut buf = vec![0u8; len];
        if pattern {
            fill_pattern(&mut buf, 0);
        }
        mr.write(0, &buf);
        let qp = dev
            .create_qp(
                q,
                QpCaps {
                    max_send_wr,
                    max_recv_wr: 1,
                },
            )
            .context("creating the QP")?;
        let addr = TargetAddr {
            qpn: qp.qpn(),
            psn: random_psn(),
            gid: Gid::from_ipv4(ip),
            va: mr.addr(),
            rkey: mr.rkey,
            len: len as u32,
        };
        Ok(Endpoint {
            dev,
            steering,
            mr,
            qp,
            addr,
        })
    }

    /// Connects our QP (RTR/RTS) to the QP of `remote`, at `peer_ip` / `mac`.
    pub fn connect(
        &self,
        remote: &TargetAddr,
        mac: [u8; 6],
        peer_ip: Ipv4Addr,
        opts: ConnectOptions,
    ) -> Result<()> {
        self.qp
            .connect(
                RemoteQp {
                    qpn: remote.qpn,
                    psn: remote.psn,
                    mac,
                    ip: IpAddr::V4(peer_ip),
                },
                opts,
            )
            .context("connecting the QP (RTR/RTS)")
    }
}

/// Reads one line from the peer (newline included, at most `MAX_LINE`
/// bytes); `what` names it in the error.
pub fn read_line<R: BufRead>(r: &mut R, what: &str) -> Result<String> {
    let mut line = String::new();
    r.by_ref()
        .take(MAX_LINE as u64)
        .read_line(&mut line)
        .with_context(|| format!("reading the peer's {what}"))?;
    if !line.ends_with('\n') {
        bail!("the peer closed the connection or sent an over-long line instead of its {what}");
    }
    Ok(line)
}

/// The connection options `rdma_target.c` uses (timeout 14, 7 retries, 7
/// RNR retries, min RNR timer 12, access flags REMOTE_WRITE and
/// REMOTE_READ), with our read-atomic limits and PSN.
pub fn rdma_target_connect_options(
    mtu: u32,
    sq_psn: u32,
    max_rd_atomic: u8,
    max_dest_rd_atomic: u8,
) -> ConnectOptions {
    ConnectOptions {
        path_mtu: Mtu::from_bytes(mtu).expect("validated"),
        timeout: 14,
        retry_cnt: 7,
        rnr_retry: 7,
        min_rnr_timer: 12,
        max_rd_atomic,
        max_dest_rd_atomic,
        sq_psn,
        access: Access::REMOTE_WRITE | Access::REMOTE_READ,
        ..ConnectOptions::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    #[test]
    fn read_line_takes_one_line_at_a_time() {
        let mut r = Cursor::new(b"ok 40960\ndone\n".to_vec());
        assert_eq!(read_line(&mut r, "verdict").unwrap(), "ok 40960\n");
        assert_eq!(read_line(&mut r, "done").unwrap(), "done\n");
        assert!(read_line(&mut r, "more").is_err(), "EOF is an error");
    }

    #[test]
    fn read_line_refuses_unterminated_and_over_long_lines() {
        let mut r = Cursor::new(b"ok 40960".to_vec());
        assert!(read_line(&mut r, "verdict").is_err());
        let mut long = vec![b'a'; MAX_LINE + 10];
        long.push(b'\n');
        assert!(read_line(&mut Cursor::new(long), "address").is_err());
    }

    #[test]
    fn our_address_line_is_what_the_c_target_scans() {
        // rdma_target.c: sscanf("%6x:%6x:%32[0-9a-f]:%16llx:%8x:%8x").
        let a = TargetAddr {
            qpn: 0x11,
            psn: 0x123456,
            gid: Gid::from_ipv4(std::net::Ipv4Addr::new(10, 99, 0, 2)),
            va: 0x7f00_0000_1000,
            rkey: 0xabc,
            len: 40960,
        };
        let line = a.encode();
        let f: Vec<&str> = line.trim_end().split(':').collect();
        let widths: Vec<usize> = f.iter().map(|x| x.len()).collect();
        assert_eq!(widths, [6, 6, 32, 16, 8, 8]);
        assert!(line
            .trim_end()
            .bytes()
            .all(|b| b == b':' || b.is_ascii_digit() || (b'a'..=b'f').contains(&b)));
    }
}
