//! The interface as the kernel knows it: its MAC and global address, the
//! kernel's neighbour table (ARP / ND) for a peer's MAC, and entering the
//! network namespace an interface lives in. Read with `ip` from iproute2,
//! as an operator would; nothing here is on the datapath.

use std::fs::File;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::fd::AsFd;
use std::process::Command;

use thiserror::Error;

/// Why an `ip` command, an interface lookup or entering a namespace failed.
#[derive(Debug, Error)]
pub enum NetnsError {
    #[error("`ip {args}` failed: {stderr}; creating network namespaces needs root")]
    Ip { args: String, stderr: String },
    #[error("running `ip` failed ({0}): install iproute2")]
    Spawn(std::io::Error),
    #[error("entering network namespace {name} failed: {source}")]
    Enter {
        name: String,
        source: std::io::Error,
    },
    #[error("unexpected output from `ip`: {0}")]
    Parse(String),
    #[error("`tc {args}` failed: {detail}; the bridged test bed needs tc (iproute2) and root")]
    Tc { args: String, detail: String },
    #[error("{what} failed: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
}

/// Runs `ip ARGS`, returning stdout.
pub fn ip(args: &[&str]) -> Result<String, NetnsError> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(NetnsError::Spawn)?;
    if !out.status.success() {
        return Err(NetnsError::Ip {
            args: args.join(" "),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Moves the calling thread into the named namespace; sockets, interface
/// lookups and XDP attachments made afterwards by this thread happen there.
pub fn enter_netns(name: &str) -> Result<(), NetnsError> {
    let path = format!("/var/run/netns/{name}");
    let f = File::open(&path).map_err(|source| NetnsError::Enter {
        name: name.into(),
        source,
    })?;
    crate::io::set_thread_netns(f.as_fd()).map_err(|source| NetnsError::Enter {
        name: name.into(),
        source,
    })
}

/// Runs `f` on a thread inside `netns` (or directly when None).
pub(crate) fn in_netns<R: Send>(
    netns: Option<&str>,
    f: impl FnOnce() -> R + Send,
) -> Result<R, NetnsError> {
    match netns {
        None => Ok(f()),
        Some(ns) => std::thread::scope(|s| {
            s.spawn(|| {
                enter_netns(ns)?;
                Ok(f())
            })
            .join()
            .unwrap_or_else(|_| Err(NetnsError::Parse("setup thread panicked".into())))
        }),
    }
}

fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let mut mac = [0u8; 6];
    let mut parts = s.split(':');
    for b in mac.iter_mut() {
        *b = u8::from_str_radix(parts.next()?, 16).ok()?;
    }
    Some(mac)
}

fn ip_in(netns: Option<&str>, args: &[&str]) -> Result<String, NetnsError> {
    let mut v: Vec<&str> = Vec::new();
    if let Some(ns) = netns {
        v.extend_from_slice(&["-n", ns]);
    }
    v.extend_from_slice(args);
    ip(&v)
}

/// MAC address of `ifname` (in `netns`, or the current namespace).
pub fn interface_mac(netns: Option<&str>, ifname: &str) -> Result<[u8; 6], NetnsError> {
    let out = ip_in(netns, &["-o", "link", "show", "dev", ifname])?;
    out.split_whitespace()
        .skip_while(|w| *w != "link/ether")
        .nth(1)
        .and_then(parse_mac)
        .ok_or_else(|| NetnsError::Parse(out.clone()))
}

/// First global address of the requested family on `ifname`.
pub fn interface_addr(netns: Option<&str>, ifname: &str, ipv6: bool) -> Result<IpAddr, NetnsError> {
    let fam = if ipv6 { "-6" } else { "-4" };
    let out = ip_in(
        netns,
        &[fam, "-o", "addr", "show", "dev", ifname, "scope", "global"],
    )?;
    out.split_whitespace()
        .skip_while(|w| *w != "inet" && *w != "inet6")
        .nth(1)
        .and_then(|a| a.split('/').next())
        .and_then(|a| a.parse().ok())
        .ok_or_else(|| {
            NetnsError::Parse(format!(
                "no {} address on {ifname}: {out}",
                if ipv6 { "IPv6" } else { "IPv4" }
            ))
        })
}

/// The MAC of `addr` from the kernel's neighbour table, if resolved.
pub fn neighbour_mac(
    netns: Option<&str>,
    ifname: &str,
    addr: IpAddr,
) -> Result<Option<[u8; 6]>, NetnsError> {
    let a = addr.to_string();
    let out = ip_in(netns, &["neigh", "show", "to", &a, "dev", ifname])?;
    Ok(out
        .lines()
        .filter(|l| !l.contains("FAILED") && !l.contains("INCOMPLETE"))
        .find_map(|l| {
            l.split_whitespace()
                .skip_while(|w| *w != "lladdr")
                .nth(1)
                .and_then(parse_mac)
        }))
}

/// Resolves `addr` to a MAC through the kernel's neighbour table: looks it
/// up, and if absent makes the kernel resolve it (ARP or ND) by sending a
/// UDP datagram to the discard port from inside `netns`, then polls the
/// table for up to `timeout`.
pub fn resolve_mac(
    netns: Option<&str>,
    ifname: &str,
    addr: IpAddr,
    timeout: std::time::Duration,
) -> Result<[u8; 6], NetnsError> {
    if let Some(mac) = neighbour_mac(netns, ifname, addr)? {
        return Ok(mac);
    }
    let ns = netns.map(str::to_string);
    let deadline = std::time::Instant::now() + timeout;
    let poke = move || {
        if let Some(ns) = &ns {
            enter_netns(ns)?;
        }
        let bind: IpAddr = if addr.is_ipv6() {
            Ipv6Addr::UNSPECIFIED.into()
        } else {
            Ipv4Addr::UNSPECIFIED.into()
        };
        if let Ok(s) = std::net::UdpSocket::bind((bind, 0)) {
            let _ = s.send_to(b"arp", (addr, 9));
        }
        Ok::<(), NetnsError>(())
    };
    loop {
        let p = poke.clone();
        std::thread::spawn(p).join().unwrap_or(Ok(()))?;
        std::thread::sleep(std::time::Duration::from_millis(20));
        if let Some(mac) = neighbour_mac(netns, ifname, addr)? {
            return Ok(mac);
        }
        if std::time::Instant::now() > deadline {
            return Err(NetnsError::Parse(format!(
                "{addr} did not resolve on {ifname} (ARP/ND): is the peer up?"
            )));
        }
    }
}

/// The hop limit the kernel's route to `addr` gives (IPv4: the socket
/// default, `net.ipv4.ip_default_ttl`; IPv6: the route's hop limit),
/// read from a UDP socket connected to it in the caller's namespace. The
/// kernel's RDMA core puts this in every RoCE address it resolves
/// (`ib_resolve_unicast_gid_dmac`, for `ibv_create_ah` and `ibv_modify_qp`
/// with an address vector), in place of the hop limit the program gave.
pub fn route_hop_limit(addr: IpAddr) -> std::io::Result<u8> {
    let bind: IpAddr = match addr {
        IpAddr::V4(_) => Ipv4Addr::UNSPECIFIED.into(),
        IpAddr::V6(_) => Ipv6Addr::UNSPECIFIED.into(),
    };
    let s = std::net::UdpSocket::bind((bind, 0))?;
    s.connect((addr, 9))?;
    let (level, name) = match addr {
        IpAddr::V4(_) => (libc::IPPROTO_IP, libc::IP_TTL),
        IpAddr::V6(_) => (libc::IPPROTO_IPV6, libc::IPV6_UNICAST_HOPS),
    };
    let v = crate::io::int_sockopt(s.as_fd(), level, name)?;
    u8::try_from(v).map_err(|_| std::io::Error::other(format!("hop limit {v}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_route_hop_limit_is_the_kernel_default() {
        let ttl: u8 = std::fs::read_to_string("/proc/sys/net/ipv4/ip_default_ttl")
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert_eq!(route_hop_limit(Ipv4Addr::LOCALHOST.into()).unwrap(), ttl);
        let hops = route_hop_limit(Ipv6Addr::LOCALHOST.into());
        // Without IPv6 on lo the connect fails: an error, never a guess.
        if let Ok(h) = hops {
            assert!(h > 0, "IPv6 hop limit {h}");
        }
    }

    #[test]
    fn parses_macs() {
        assert_eq!(
            parse_mac("02:ab:00:01:ff:10"),
            Some([2, 0xab, 0, 1, 0xff, 0x10])
        );
        assert_eq!(parse_mac("02:ab"), None);
    }
}
