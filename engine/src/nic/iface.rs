//! The interface as the kernel knows it: its MAC and global address, the
//! kernel's neighbour table (ARP / ND) for a peer's MAC, and entering the
//! network namespace an interface lives in. The facts are read over
//! rtnetlink ([`crate::io::netlink`]), never by running `ip`: the drop-in
//! libraries call these from inside arbitrary programs, which a child
//! process would disturb (its SIGCHLD interrupts their blocking calls, their
//! `waitpid(-1)` would reap it). [`ip`] itself remains for the test beds and
//! tools that build namespaces.

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
    #[error(transparent)]
    Netlink(#[from] crate::io::netlink::NetlinkError),
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

#[cfg(test)]
fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let mut mac = [0u8; 6];
    let mut parts = s.split(':');
    for b in mac.iter_mut() {
        *b = u8::from_str_radix(parts.next()?, 16).ok()?;
    }
    Some(mac)
}

/// The index of `ifname` in the calling thread's namespace.
fn ifindex(ifname: &str) -> Result<u32, NetnsError> {
    crate::io::if_index(ifname).map_err(|source| NetnsError::Io {
        what: format!("looking up interface {ifname}"),
        source,
    })
}

/// MAC address of `ifname` (in `netns`, or the current namespace), read
/// over rtnetlink (`link/ether` of `ip link show dev IF`).
pub fn interface_mac(netns: Option<&str>, ifname: &str) -> Result<[u8; 6], NetnsError> {
    in_netns(netns, || {
        crate::io::netlink::link_mac(ifindex(ifname)?)?
            .ok_or_else(|| NetnsError::Parse(format!("{ifname} has no Ethernet address")))
    })?
}

/// First global address of the requested family on `ifname`, read over
/// rtnetlink (`ip -4|-6 addr show dev IF scope global`).
pub fn interface_addr(netns: Option<&str>, ifname: &str, ipv6: bool) -> Result<IpAddr, NetnsError> {
    in_netns(netns, || {
        crate::io::netlink::global_address(ifindex(ifname)?, ipv6)?.ok_or_else(|| {
            NetnsError::Parse(format!(
                "no global {} address on {ifname}",
                if ipv6 { "IPv6" } else { "IPv4" }
            ))
        })
    })?
}

/// The MAC of `addr` from the kernel's neighbour table, if resolved (an
/// rtnetlink neighbour dump: `ip neigh show to ADDR dev IF`, without the
/// `FAILED` and `INCOMPLETE` entries).
pub fn neighbour_mac(
    netns: Option<&str>,
    ifname: &str,
    addr: IpAddr,
) -> Result<Option<[u8; 6]>, NetnsError> {
    in_netns(netns, || {
        Ok(crate::io::netlink::neighbour_mac(ifindex(ifname)?, addr)?)
    })?
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

    use crate::testbed::netns::{PairConfig, Side, VethPair};

    /// What `ip` prints for a side: `link/ether`, the first global IPv4
    /// and IPv6 addresses.
    fn ip_says(side: &Side) -> ([u8; 6], IpAddr, IpAddr) {
        let link = side
            .run_ip(&["-o", "link", "show", "dev", &side.ifname])
            .unwrap();
        let mac = link
            .split_whitespace()
            .skip_while(|w| *w != "link/ether")
            .nth(1)
            .and_then(parse_mac)
            .unwrap();
        let addr = |fam: &str| -> IpAddr {
            let out = side
                .run_ip(&[
                    fam,
                    "-o",
                    "addr",
                    "show",
                    "dev",
                    &side.ifname,
                    "scope",
                    "global",
                ])
                .unwrap();
            out.split_whitespace()
                .skip_while(|w| *w != "inet" && *w != "inet6")
                .nth(1)
                .and_then(|a| a.split('/').next())
                .and_then(|a| a.parse().ok())
                .unwrap()
        };
        (mac, addr("-4"), addr("-6"))
    }

    #[test]
    #[ignore = "needs root"]
    fn interface_facts_and_neighbours_match_what_ip_says() {
        let pair = VethPair::create(&PairConfig::default()).unwrap();
        let (a, b) = (&pair.a, &pair.b);
        for side in [a, b] {
            let (mac, v4, v6) = ip_says(side);
            let ns = Some(side.netns.as_str());
            assert_eq!(interface_mac(ns, &side.ifname).unwrap(), mac);
            assert_eq!(mac, side.mac);
            assert_eq!(interface_addr(ns, &side.ifname, false).unwrap(), v4);
            assert_eq!(interface_addr(ns, &side.ifname, true).unwrap(), v6);
            assert_eq!(v4, IpAddr::V4(side.ipv4));
            assert_eq!(v6, IpAddr::V6(side.ipv6));
            // lo has no Ethernet address and only host-scope addresses.
            assert!(interface_mac(ns, "lo").is_err());
            assert!(interface_addr(ns, "lo", false).is_err());
            // An interface that does not exist is an error.
            assert!(interface_mac(ns, "rxnosuchif").is_err());
            assert!(neighbour_mac(ns, "rxnosuchif", b.ipv4.into()).is_err());
        }
        // The thread's own namespace is used when netns is None.
        let on_a = |f: fn(&Side) -> bool| {
            std::thread::scope(|s| {
                s.spawn(|| {
                    a.enter().unwrap();
                    f(a)
                })
                .join()
                .unwrap()
            })
        };
        assert!(on_a(|a| interface_mac(None, &a.ifname).unwrap() == a.mac));

        // Fresh namespaces: nothing resolved yet.
        let ns_a = Some(a.netns.as_str());
        assert_eq!(neighbour_mac(ns_a, &a.ifname, b.ipv4.into()).unwrap(), None);
        let ping = a
            .command("ping")
            .args(["-c", "1", "-W", "2", &b.ipv4.to_string()])
            .output()
            .unwrap();
        assert!(ping.status.success(), "{ping:?}");
        assert_eq!(
            neighbour_mac(ns_a, &a.ifname, b.ipv4.into()).unwrap(),
            Some(b.mac)
        );
        // The entry is on a's veth, not on lo, and only for b's address.
        assert_eq!(neighbour_mac(ns_a, "lo", b.ipv4.into()).unwrap(), None);
        let other: IpAddr = Ipv4Addr::new(10, 47, 0, 77).into();
        assert_eq!(neighbour_mac(ns_a, &a.ifname, other).unwrap(), None);
        // IPv6 through resolve_mac's UDP poke (ND), from b's side too.
        let t = std::time::Duration::from_secs(3);
        assert_eq!(
            resolve_mac(ns_a, &a.ifname, b.ipv6.into(), t).unwrap(),
            b.mac
        );
        let ns_b = Some(b.netns.as_str());
        assert_eq!(
            resolve_mac(ns_b, &b.ifname, a.ipv4.into(), t).unwrap(),
            a.mac
        );
        // The kernel table agrees with `ip neigh`.
        let neigh = a
            .run_ip(&["neigh", "show", "to", &b.ipv6.to_string(), "dev", &a.ifname])
            .unwrap();
        let lladdr = neigh
            .split_whitespace()
            .skip_while(|w| *w != "lladdr")
            .nth(1)
            .and_then(parse_mac);
        assert_eq!(lladdr, Some(b.mac), "{neigh}");
        // An address nobody has does not resolve: an error after the timeout.
        let none: IpAddr = Ipv4Addr::new(10, 47, 0, 99).into();
        let short = std::time::Duration::from_millis(300);
        assert!(resolve_mac(ns_a, &a.ifname, none, short).is_err());
    }

    const PROBE_ENV: &str = "ROCE_XDP_SIGCHLD_PROBE";
    const PROBE_OK: &str = "sigchld probe: none while resolving";

    /// The drop-in's calls (interface facts at open, `resolve_mac` per
    /// connection and address handle) spawn no process: a re-run of this
    /// test binary, holding only this test, counts the SIGCHLDs it gets
    /// while resolving a peer that is not yet in the neighbour table
    /// (ARP and ND), then spawns `true` to show the counter works.
    #[test]
    #[ignore = "needs root"]
    fn resolving_spawns_no_child_process() {
        use crate::io::netlink::sigchld;
        if let Ok(arg) = std::env::var(PROBE_ENV) {
            // The re-run: arg is "netns ifname peer-v4 peer-v6 peer-mac-hex".
            let v: Vec<&str> = arg.split(' ').collect();
            let (ns, ifname) = (v[0], v[1]);
            let (v4, v6): (IpAddr, IpAddr) = (v[2].parse().unwrap(), v[3].parse().unwrap());
            let mac = parse_mac(v[4]).unwrap();
            let before = sigchld::count();
            let t = std::time::Duration::from_secs(3);
            std::thread::scope(|s| {
                s.spawn(|| {
                    // As the drop-in: in the program's namespace, netns None.
                    enter_netns(ns).unwrap();
                    interface_mac(None, ifname).unwrap();
                    interface_addr(None, ifname, false).unwrap();
                    interface_addr(None, ifname, true).unwrap();
                    assert_eq!(resolve_mac(None, ifname, v4, t).unwrap(), mac);
                    assert_eq!(resolve_mac(None, ifname, v6, t).unwrap(), mac);
                    assert_eq!(neighbour_mac(None, ifname, v4).unwrap(), Some(mac));
                });
            });
            assert_eq!(interface_mac(Some(ns), ifname).unwrap().len(), 6);
            std::thread::sleep(std::time::Duration::from_millis(100));
            assert_eq!(sigchld::count(), before, "SIGCHLD while resolving");
            let st = std::process::Command::new("true").status().unwrap();
            assert!(st.success());
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
            while sigchld::count() == before && std::time::Instant::now() < deadline {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            assert!(sigchld::count() > before, "the SIGCHLD counter counts");
            println!("{PROBE_OK}");
            return;
        }
        let pair = VethPair::create(&PairConfig::default()).unwrap();
        let (a, b) = (&pair.a, &pair.b);
        let m = b.mac;
        let mac = format!(
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            m[0], m[1], m[2], m[3], m[4], m[5]
        );
        let arg = format!("{} {} {} {} {mac}", a.netns, a.ifname, b.ipv4, b.ipv6);
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "nic::iface::tests::resolving_spawns_no_child_process",
                "--include-ignored",
                "--test-threads",
                "1",
                "--nocapture",
            ])
            .env(PROBE_ENV, arg)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains(PROBE_OK),
            "{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
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
