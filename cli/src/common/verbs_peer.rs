//! What the commands facing a libibverbs peer (`pingpong`, `interop
//! rdma-client`, `interop rdma-target`) share, besides their options
//! (`common::args::PeerDatapathArgs`): the TCP connection to the peer, the
//! peer's MAC and IPv4 address, the device's IPv4 address, the test drop
//! impairment and its report, and small helpers (MAC parsing, a random
//! PSN, rdma-core's names of completion statuses).

use std::hash::{BuildHasher, Hasher};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context as _, Result};
use engine::nic::Impairment;
use engine::oob::pingpong::is_valid_mtu;
use engine::oob::Gid;
use engine::rc::WcStatus;
use engine::verbs::Device;

/// The device's IPv4 address (its GID), or an error telling the user to
/// add one to `iface`.
pub fn device_ipv4(dev: &Device, iface: &str) -> Result<Ipv4Addr> {
    match dev.ip() {
        IpAddr::V4(v4) => Ok(v4),
        IpAddr::V6(_) => bail!("{iface} has no IPv4 address: add one"),
    }
}

/// Refuses a `-m` that is not an IB path MTU.
pub fn check_mtu(mtu: u32) -> Result<()> {
    if !is_valid_mtu(mtu) {
        bail!("-m {mtu}: the path MTU must be 256, 512, 1024, 2048 or 4096");
    }
    Ok(())
}

/// The peer's IPv4 address from its GID; `who` names the peer in the error.
pub fn peer_ipv4(gid: Gid, who: &str) -> Result<Ipv4Addr> {
    gid.to_ipv4_mapped().ok_or_else(|| {
        anyhow!(
            "{who}'s GID {gid} is not IPv4-mapped: run it with -g <RoCE v2 IPv4 GID index> (1 on rxe)"
        )
    })
}

/// The peer's MAC: `--peer-mac` if given, else the kernel's neighbour table.
pub fn peer_mac(dev: &Device, peer_mac: Option<&str>, ip: IpAddr) -> Result<[u8; 6]> {
    match peer_mac {
        Some(m) => {
            parse_mac(m).ok_or_else(|| anyhow!("--peer-mac {m:?}: expected aa:bb:cc:dd:ee:ff"))
        }
        None => dev
            .resolve_mac(ip)
            .with_context(|| format!("finding the MAC of {ip} (or give --peer-mac)")),
    }
}

/// Starts the `--drop-rate` test impairment (nothing when it is 0).
pub fn set_drop_rate(dev: &Device, drop_rate: f64) -> Result<()> {
    if drop_rate > 0.0 {
        dev.set_impairment(Impairment {
            drop_ppm: Impairment::ppm(drop_rate),
            ce_ppm: 0,
        })
        .context("setting the XDP drop impairment")?;
    }
    Ok(())
}

/// Which side's recovery counters [`close_datapath`] reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recovery {
    Requester,
    Responder,
    Both,
}

/// Stops the datapath. After a run with the `--drop-rate` impairment,
/// prints to stderr (stdout stays the peer tool's format) how many
/// received RoCE frames it dropped and how the transport recovered.
pub fn close_datapath(dev: Device, drop_rate: f64, recovery: Recovery) {
    let steer = dev.steer_counters().ok();
    let stats = dev.close();
    tracing::info!(?stats.transport, "datapath closed");
    if drop_rate <= 0.0 {
        return;
    }
    if let Some(sc) = steer {
        eprintln!(
            "roce-xdp: XDP drop impairment: {} of {} received RoCE frames dropped",
            sc.dropped_impairment,
            sc.dropped_impairment + sc.redirected
        );
    }
    let t = &stats.transport;
    let responder = format!(
        "responder out_of_seq_request {} duplicate_request {} naks_sent {}",
        t.out_of_seq_request, t.duplicate_request, t.naks_sent
    );
    let requester = format!(
        "requester rcvd_seq_err {} timeouts {} retransmitted_packets {} duplicate_response {}",
        t.rcvd_seq_err, t.timeouts, t.retransmitted_packets, t.duplicate_response
    );
    let counters = match recovery {
        Recovery::Requester => requester,
        Recovery::Responder => responder,
        Recovery::Both => format!("{responder}; {requester}"),
    };
    eprintln!("roce-xdp: recovery: {counters}");
}

/// Connects to `host:port`, retrying for `retry`; `peer_program` names what
/// should be listening there, for the error.
pub fn connect_with_retry(
    host: &str,
    port: u16,
    retry: Duration,
    peer_program: &str,
) -> Result<TcpStream> {
    let addrs: Vec<SocketAddr> = (host, port)
        .to_socket_addrs()
        .with_context(|| format!("can't resolve {host}"))?
        .collect();
    let deadline = Instant::now() + retry;
    loop {
        let mut last = None;
        for a in &addrs {
            match TcpStream::connect_timeout(a, Duration::from_secs(5)) {
                Ok(s) => return Ok(s),
                Err(e) => last = Some(e),
            }
        }
        if Instant::now() >= deadline {
            let e = last.map(|e| e.to_string()).unwrap_or_default();
            bail!("couldn't connect to {host}:{port}: {e} (is {peer_program} listening there?)");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `ibv_wc_status_str()` and the `enum ibv_wc_status` value, for the
/// `Failed status ...` line rc_pingpong prints.
pub fn wc_status_str(status: WcStatus) -> (&'static str, u32) {
    match status {
        WcStatus::Success => ("success", 0),
        WcStatus::LocalLengthError => ("local length error", 1),
        WcStatus::LocalProtectionError => ("local protection error", 4),
        WcStatus::Flushed => ("Work Request Flushed Error", 5),
        WcStatus::RemoteInvalidRequest => ("remote invalid request error", 9),
        WcStatus::RemoteAccessError => ("remote access error", 10),
        WcStatus::RemoteOperationalError => ("remote operation error", 11),
        WcStatus::RetryExceeded => ("transport retry counter exceeded", 12),
        WcStatus::RnrRetryExceeded => ("RNR retry counter exceeded", 13),
        WcStatus::LocalQpOperationError => ("local QP operation error", 2),
        WcStatus::MwBindError => ("memory bind operation error", 6),
    }
}

/// `aa:bb:cc:dd:ee:ff` -> bytes.
pub fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let mut mac = [0u8; 6];
    let mut parts = s.split(':');
    for b in &mut mac {
        *b = u8::from_str_radix(parts.next()?, 16).ok()?;
    }
    if parts.next().is_some() {
        return None;
    }
    Some(mac)
}

/// `lrand48() & 0xffffff` without a PRNG dependency: std's randomly keyed
/// hasher.
pub fn random_psn() -> u32 {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    (h.finish() & 0xFF_FFFF) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mac_parsing() {
        assert_eq!(parse_mac("02:00:0a:63:00:02"), Some([2, 0, 10, 99, 0, 2]));
        assert_eq!(parse_mac("02:00:0a:63:00"), None);
        assert_eq!(parse_mac("02:00:0a:63:00:02:01"), None);
    }

    #[test]
    fn psn_is_24_bits() {
        for _ in 0..100 {
            assert!(random_psn() <= 0xFF_FFFF);
        }
    }
}
