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

/// Two namespaces `a` and `b` joined by a veth pair; removed on drop.
#[derive(Debug)]
pub struct VethPair {
    pub a: Side,
    pub b: Side,
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
        cleanup_stale();
        let pid = std::process::id();
        let k = COUNTER.fetch_add(1, Ordering::Relaxed);
        let ns_a = format!("{PREFIX}{pid}n{k}a");
        let ns_b = format!("{PREFIX}{pid}n{k}b");
        let if_a = format!("{PREFIX}{pid}v{k}a");
        let if_b = format!("{PREFIX}{pid}v{k}b");
        // Guard first, so a failure half-way removes what exists.
        let mut pair = VethPair {
            a: Side {
                netns: ns_a.clone(),
                ifname: if_a.clone(),
                mac: [0; 6],
                ipv4: Ipv4Addr::new(10, 47, 0, 1),
                ipv6: "fd00:47::1".parse().expect("literal"),
            },
            b: Side {
                netns: ns_b.clone(),
                ifname: if_b.clone(),
                mac: [0; 6],
                ipv4: Ipv4Addr::new(10, 47, 0, 2),
                ipv6: "fd00:47::2".parse().expect("literal"),
            },
        };
        ip(&["netns", "add", &ns_a])?;
        ip(&["netns", "add", &ns_b])?;
        let q = cfg.queues.max(1).to_string();
        ip(&[
            "link",
            "add",
            &if_a,
            "netns",
            &ns_a,
            "numtxqueues",
            &q,
            "numrxqueues",
            &q,
            "type",
            "veth",
            "peer",
            "name",
            &if_b,
            "netns",
            &ns_b,
            "numtxqueues",
            &q,
            "numrxqueues",
            &q,
        ])?;
        let mtu = cfg.mtu.to_string();
        for side in [&pair.a, &pair.b] {
            let (v4, v6) = (format!("{}/24", side.ipv4), format!("{}/64", side.ipv6));
            side.run_ip(&["link", "set", "lo", "up"])?;
            side.run_ip(&["link", "set", &side.ifname, "mtu", &mtu])?;
            side.run_ip(&["addr", "add", &v4, "dev", &side.ifname])?;
            side.run_ip(&["addr", "add", &v6, "dev", &side.ifname, "nodad"])?;
        }
        for side in [&pair.a, &pair.b] {
            side.run_ip(&["link", "set", &side.ifname, "up"])?;
        }
        pair.a.mac = interface_mac(Some(&ns_a), &if_a)?;
        pair.b.mac = interface_mac(Some(&ns_b), &if_b)?;
        Ok(pair)
    }
}

impl Drop for VethPair {
    fn drop(&mut self) {
        // Deleting a namespace destroys the veth end inside it (and so the pair).
        let _ = ip(&["netns", "del", &self.a.netns]);
        let _ = ip(&["netns", "del", &self.b.netns]);
    }
}
