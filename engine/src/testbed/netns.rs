//! Network namespaces and veth pairs for tests and `roce-xdp loopback`:
//! two namespaces joined by a veth pair, with unique names (pid + counter)
//! and addresses that exist only inside those namespaces. Everything is
//! removed on drop (also when a test panics), and namespaces left behind by
//! dead processes are cleaned up when a new pair is created.
//!
//! Uses `ip` from iproute2; needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::nic::{enter_netns, interface_mac, ip, NetnsError};

/// Prefix of every namespace and interface this module creates.
const PREFIX: &str = "rx";

/// Whether this process runs as root (uid 0): what creating namespaces,
/// attaching XDP and binding AF_XDP sockets need.
pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .map(|s| {
            s.lines()
                .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false)
}

/// Options of a pair.
#[derive(Debug, Clone)]
pub struct PairConfig {
    /// Link MTU of both veth ends.
    pub mtu: u32,
    /// Number of RX/TX queues of each veth end.
    pub queues: u32,
}

impl Default for PairConfig {
    fn default() -> Self {
        PairConfig {
            mtu: 1500,
            queues: 1,
        }
    }
}

/// One side of the pair.
#[derive(Debug, Clone)]
pub struct Side {
    /// Namespace name (`ip netns`).
    pub netns: String,
    /// veth interface name inside the namespace.
    pub ifname: String,
    pub mac: [u8; 6],
    pub ipv4: Ipv4Addr,
    pub ipv6: Ipv6Addr,
}

impl Side {
    /// The address of the requested family.
    pub fn addr(&self, ipv6: bool) -> IpAddr {
        if ipv6 {
            IpAddr::V6(self.ipv6)
        } else {
            IpAddr::V4(self.ipv4)
        }
    }

    /// Runs `ip ARGS` inside this side's namespace.
    pub fn run_ip(&self, args: &[&str]) -> Result<String, NetnsError> {
        let mut v = vec!["-n", self.netns.as_str()];
        v.extend_from_slice(args);
        ip(&v)
    }

    /// A command (e.g. `ping`) to run inside this side's namespace.
    pub fn command(&self, program: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.netns, program]);
        c
    }

    /// Moves the calling thread into this side's namespace (see
    /// [`enter_netns`]).
    pub fn enter(&self) -> Result<(), NetnsError> {
        enter_netns(&self.netns)
    }
}

/// Two namespaces `a` and `b` joined by a veth pair, or by two veth pairs
/// and a Linux bridge in a third namespace ([`VethPair::create_bridged`]);
/// removed on drop.
#[derive(Debug)]
pub struct VethPair {
    pub a: Side,
    pub b: Side,
    /// The bridge's namespace, if bridged.
    switch: Option<String>,
    /// Namespaces of the hosts added with [`VethPair::add_host`].
    hosts: Vec<String>,
}

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// Removes namespaces named by this module whose creating process is gone.
pub fn cleanup_stale() {
    let Ok(list) = ip(&["netns", "list"]) else {
        return;
    };
    for line in list.lines() {
        let name = line.split_whitespace().next().unwrap_or("");
        let Some(rest) = name.strip_prefix(PREFIX) else {
            continue;
        };
        let pid: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
        if pid.is_empty() || !rest[pid.len()..].starts_with('n') {
            continue;
        }
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            let _ = ip(&["netns", "del", name]);
        }
    }
}

impl VethPair {
    /// Creates namespaces `rx<pid>n<k>a` / `...b` and a veth pair
    /// `rx<pid>v<k>a` / `...b`, addresses 10.47.0.1/24 + fd00:47::1/64 (a)
    /// and 10.47.0.2/24 + fd00:47::2/64 (b), links up, static neighbour
    /// entries not installed (the kernel resolves them with ARP/ND).
    pub fn create(cfg: &PairConfig) -> Result<VethPair, NetnsError> {
        let mut pair = VethPair::named(false);
        let q = cfg.queues.max(1).to_string();
        let (a, b) = (&pair.a, &pair.b);
        ip(&["netns", "add", &a.netns])?;
        ip(&["netns", "add", &b.netns])?;
        veth(&a.ifname, &a.netns, &b.ifname, &b.netns, &q)?;
        pair.configure(cfg)?;
        Ok(pair)
    }

    /// Like [`VethPair::create`], but `a` and `b` are joined through a Linux
    /// bridge in a third namespace `rx<pid>n<k>s`: each side's veth has its
    /// peer there as a bridge port; `a`'s veth has `cfg.queues` queues,
    /// `b`'s `b_queues`. A frame
    /// the bridge forwards into a side leaves its port on a transmit queue
    /// chosen by the flow's hash, and a veth delivers it on the receive
    /// queue of the same number: flows spread over a side's queues as RSS
    /// spreads them on a NIC (on a plain veth pair, a frame sent from queue
    /// q arrives on queue q, which hides that).
    pub fn create_bridged(cfg: &PairConfig, b_queues: u32) -> Result<VethPair, NetnsError> {
        let mut pair = VethPair::named(true);
        let q = cfg.queues.max(1).to_string();
        let qb = b_queues.max(1).to_string();
        let sw = pair.switch.clone().expect("bridged");
        let (a, b) = (&pair.a, &pair.b);
        ip(&["netns", "add", &a.netns])?;
        ip(&["netns", "add", &b.netns])?;
        ip(&["netns", "add", &sw])?;
        let (port_a, port_b) = (format!("{}p", a.ifname), format!("{}p", b.ifname));
        veth(&a.ifname, &a.netns, &port_a, &sw, &q)?;
        veth(&b.ifname, &b.netns, &port_b, &sw, &qb)?;
        let mtu = cfg.mtu.to_string();
        let in_sw = |args: &[&str]| {
            let mut v = vec!["-n", sw.as_str()];
            v.extend_from_slice(args);
            ip(&v)
        };
        in_sw(&["link", "set", "lo", "up"])?;
        in_sw(&["link", "add", "br0", "type", "bridge"])?;
        in_sw(&["link", "set", "br0", "mtu", &mtu])?;
        for port in [&port_a, &port_b] {
            in_sw(&["link", "set", port, "mtu", &mtu])?;
            in_sw(&["link", "set", port, "master", "br0"])?;
            in_sw(&["link", "set", port, "up"])?;
        }
        in_sw(&["link", "set", "br0", "up"])?;
        for (port, queues) in [(&port_a, cfg.queues), (&port_b, b_queues)] {
            if queues > 1 {
                spread_by_flow_hash(&sw, port)?;
            }
        }
        pair.configure(cfg)?;
        Ok(pair)
    }

    /// The names of a new pair (nothing created yet; dropping it removes
    /// whatever was created under them).
    fn named(bridged: bool) -> VethPair {
        cleanup_stale();
        let pid = std::process::id();
        let k = COUNTER.fetch_add(1, Ordering::Relaxed);
        VethPair {
            a: Side {
                netns: format!("{PREFIX}{pid}n{k}a"),
                ifname: format!("{PREFIX}{pid}v{k}a"),
                mac: [0; 6],
                ipv4: Ipv4Addr::new(10, 47, 0, 1),
                ipv6: "fd00:47::1".parse().expect("literal"),
            },
            b: Side {
                netns: format!("{PREFIX}{pid}n{k}b"),
                ifname: format!("{PREFIX}{pid}v{k}b"),
                mac: [0; 6],
                ipv4: Ipv4Addr::new(10, 47, 0, 2),
                ipv6: "fd00:47::2".parse().expect("literal"),
            },
            switch: bridged.then(|| format!("{PREFIX}{pid}n{k}s")),
            hosts: Vec::new(),
        }
    }

    /// A third host on the bridge of a bridged pair: namespace
    /// `rx<pid>n<k>h<i>`, its veth `rx<pid>v<k>h<i>` with the other end a
    /// bridge port, address `ipv4`/24 (pick one in 10.47.0.0/24 other than
    /// `a`'s and `b`'s), MTU `mtu`, link up. What a test uses to send
    /// frames at `a` and `b` from a host that is neither (it sees what the
    /// bridge floods to it). `None` for a pair without a bridge.
    pub fn add_host(&mut self, ipv4: Ipv4Addr, mtu: u32) -> Option<Result<Side, NetnsError>> {
        let sw = self.switch.clone()?;
        let i = self.hosts.len();
        let stem = self.a.netns.trim_end_matches('a');
        let netns = format!("{stem}h{i}");
        let ifname = self.a.ifname.trim_end_matches('a').to_string() + &format!("h{i}");
        self.hosts.push(netns.clone());
        let port = format!("{ifname}p");
        let mtu = mtu.to_string();
        let made = (|| {
            ip(&["netns", "add", &netns])?;
            veth(&ifname, &netns, &port, &sw, "1")?;
            for args in [
                &["link", "set", port.as_str(), "mtu", mtu.as_str()][..],
                &["link", "set", port.as_str(), "master", "br0"],
                &["link", "set", port.as_str(), "up"],
            ] {
                let mut v = vec!["-n", sw.as_str()];
                v.extend_from_slice(args);
                ip(&v)?;
            }
            let host = Side {
                netns: netns.clone(),
                ifname: ifname.clone(),
                mac: [0; 6],
                ipv4,
                ipv6: Ipv6Addr::UNSPECIFIED,
            };
            host.run_ip(&["link", "set", "lo", "up"])?;
            host.run_ip(&["link", "set", &ifname, "mtu", &mtu])?;
            host.run_ip(&["addr", "add", &format!("{ipv4}/24"), "dev", &ifname])?;
            host.run_ip(&["link", "set", &ifname, "up"])?;
            Ok(Side {
                mac: interface_mac(Some(&netns), &ifname)?,
                ..host
            })
        })();
        Some(made)
    }

    /// MTU, addresses, links up, MACs.
    fn configure(&mut self, cfg: &PairConfig) -> Result<(), NetnsError> {
        let mtu = cfg.mtu.to_string();
        for side in [&self.a, &self.b] {
            let (v4, v6) = (format!("{}/24", side.ipv4), format!("{}/64", side.ipv6));
            side.run_ip(&["link", "set", "lo", "up"])?;
            side.run_ip(&["link", "set", &side.ifname, "mtu", &mtu])?;
            side.run_ip(&["addr", "add", &v4, "dev", &side.ifname])?;
            side.run_ip(&["addr", "add", &v6, "dev", &side.ifname, "nodad"])?;
        }
        for side in [&self.a, &self.b] {
            side.run_ip(&["link", "set", &side.ifname, "up"])?;
        }
        self.a.mac = interface_mac(Some(&self.a.netns), &self.a.ifname)?;
        self.b.mac = interface_mac(Some(&self.b.netns), &self.b.ifname)?;
        Ok(())
    }
}

/// The test bed's tc program (`ebpf/testbed_rss.c`): makes the bridge port
/// it is attached to pick each frame's transmit queue, hence the receive
/// queue at the far end of its veth, by the frame's flow hash.
static TESTBED_RSS: &[u8] = include_bytes!("../../../ebpf/testbed_rss.o");

/// Attaches [`TESTBED_RSS`] to the egress of `port` in namespace `ns`.
fn spread_by_flow_hash(ns: &str, port: &str) -> Result<(), NetnsError> {
    let dir = std::env::temp_dir().join(format!("roce-xdp-testbed-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let obj = dir.join("testbed_rss.o");
    std::fs::write(&obj, TESTBED_RSS).map_err(|source| NetnsError::Io {
        what: format!("writing {}", obj.display()),
        source,
    })?;
    let obj = obj.to_string_lossy().into_owned();
    tc(&["-n", ns, "qdisc", "add", "dev", port, "clsact"])?;
    let r = tc(&[
        "-n",
        ns,
        "filter",
        "add",
        "dev",
        port,
        "egress",
        "bpf",
        "direct-action",
        "obj",
        &obj,
        "sec",
        "tc",
    ]);
    let _ = std::fs::remove_dir_all(&dir);
    r
}

/// Runs `tc ARGS`.
fn tc(args: &[&str]) -> Result<(), NetnsError> {
    let out = Command::new("tc")
        .args(args)
        .output()
        .map_err(|e| NetnsError::Tc {
            args: args.join(" "),
            detail: e.to_string(),
        })?;
    if out.status.success() {
        Ok(())
    } else {
        Err(NetnsError::Tc {
            args: args.join(" "),
            detail: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        })
    }
}

/// A veth pair `x` (in namespace `ns_x`) / `y` (in `ns_y`), `queues` RX and
/// TX queues on each end.
fn veth(x: &str, ns_x: &str, y: &str, ns_y: &str, queues: &str) -> Result<String, NetnsError> {
    ip(&[
        "link",
        "add",
        x,
        "netns",
        ns_x,
        "numtxqueues",
        queues,
        "numrxqueues",
        queues,
        "type",
        "veth",
        "peer",
        "name",
        y,
        "netns",
        ns_y,
        "numtxqueues",
        queues,
        "numrxqueues",
        queues,
    ])
}

impl Drop for VethPair {
    fn drop(&mut self) {
        // Deleting a namespace destroys the veth end inside it (and so the pair).
        let _ = ip(&["netns", "del", &self.a.netns]);
        let _ = ip(&["netns", "del", &self.b.netns]);
        for h in &self.hosts {
            let _ = ip(&["netns", "del", h]);
        }
        if let Some(sw) = &self.switch {
            let _ = ip(&["netns", "del", sw]);
        }
    }
}
