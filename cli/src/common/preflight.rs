//! Checks run before touching the datapath, so that the common mistakes
//! surface as [`UserError`]s with a fix instead of errno values from deep
//! inside the loader: privileges, interface, queue range, MTU, and an XDP
//! program already attached. All link facts come from `ip -j -d link`,
//! which answers for the calling thread's network namespace.

use anyhow::Context as _;
use serde::Deserialize;

use super::privileges;
use crate::errors::UserError;

/// What `ip -j -d link show dev IF` says about an interface (the fields
/// the checks use).
#[derive(Debug, Clone, Deserialize)]
pub struct LinkInfo {
    pub mtu: u32,
    #[serde(default)]
    pub num_rx_queues: Option<u32>,
    #[serde(default)]
    pub xdp: Option<XdpInfo>,
}

/// The `xdp` object of `ip -j link`.
#[derive(Debug, Clone, Deserialize)]
pub struct XdpInfo {
    #[serde(default)]
    pub prog: Option<XdpProg>,
    #[serde(default)]
    pub attached: Option<Vec<XdpAttached>>,
}

/// One program of the `xdp` object.
#[derive(Debug, Clone, Deserialize)]
pub struct XdpProg {
    pub id: u32,
    #[serde(default)]
    pub name: Option<String>,
}

/// An entry of `xdp.attached` (several modes at once).
#[derive(Debug, Clone, Deserialize)]
pub struct XdpAttached {
    #[serde(default)]
    pub prog: Option<XdpProg>,
}

impl LinkInfo {
    /// `name (id N)` of the attached XDP program, if any.
    pub fn xdp_program(&self) -> Option<String> {
        let x = self.xdp.as_ref()?;
        let p = x
            .prog
            .clone()
            .or_else(|| x.attached.as_ref()?.iter().find_map(|a| a.prog.clone()))?;
        Some(match p.name {
            Some(n) => format!("{n}, id {}", p.id),
            None => format!("id {}", p.id),
        })
    }
}

/// Looks `iface` up; [`UserError::NoSuchInterface`] if it does not exist.
pub fn link_info(iface: &str) -> anyhow::Result<LinkInfo> {
    let out = std::process::Command::new("ip")
        .args(["-j", "-d", "link", "show", "dev", iface])
        .output()
        .context("running `ip` (install iproute2)")?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        if err.contains("does not exist") || err.contains("Cannot find device") {
            return Err(UserError::NoSuchInterface(iface.into()).into());
        }
        anyhow::bail!("`ip link show dev {iface}` failed: {}", err.trim());
    }
    let mut v: Vec<LinkInfo> =
        serde_json::from_slice(&out.stdout).context("parsing `ip -j link` output")?;
    v.pop()
        .ok_or_else(|| UserError::NoSuchInterface(iface.into()).into())
}

/// The kernel's route to `addr`: `(interface, preferred source address)`.
pub fn route_to(addr: std::net::IpAddr) -> anyhow::Result<(String, Option<std::net::IpAddr>)> {
    #[derive(Deserialize)]
    struct Route {
        dev: String,
        #[serde(default)]
        prefsrc: Option<std::net::IpAddr>,
    }
    let out = std::process::Command::new("ip")
        .args(["-j", "route", "get", &addr.to_string()])
        .output()
        .context("running `ip` (install iproute2)")?;
    if !out.status.success() {
        return Err(UserError::PeerUnreachable {
            addr: addr.to_string(),
            detail: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        }
        .into());
    }
    let mut v: Vec<Route> =
        serde_json::from_slice(&out.stdout).context("parsing `ip -j route get`")?;
    let r = v.pop().ok_or_else(|| UserError::PeerUnreachable {
        addr: addr.to_string(),
        detail: "no route".into(),
    })?;
    Ok((r.dev, r.prefsrc))
}

/// RoCE v2 bytes on top of the payload inside the IP MTU: IP header,
/// UDP (8), BTH (12), the largest data-packet extension (RETH 16 +
/// ImmDt 4) and ICRC (4). See `docs/wire-format.md`, "Frame layout".
pub fn roce_overhead(ipv6: bool) -> u32 {
    (if ipv6 { 40 } else { 20 }) + 8 + 12 + 16 + 4 + 4
}

/// The largest valid path MTU that fits `link_mtu`.
pub fn largest_pmtu(link_mtu: u32, ipv6: bool) -> Option<u32> {
    [4096, 2048, 1024, 512, 256]
        .into_iter()
        .find(|p| p + roce_overhead(ipv6) <= link_mtu)
}

/// What a datapath command is about to do.
#[derive(Debug, Clone)]
pub struct Plan<'a> {
    /// For messages: "write-bw on veth0".
    pub what: String,
    pub iface: &'a str,
    pub queues: &'a [u32],
    pub pmtu: u32,
    pub ipv6: bool,
    pub force: bool,
}

/// Runs every check in the order a user would fix them.
pub fn check(plan: &Plan<'_>) -> anyhow::Result<LinkInfo> {
    if let Err(missing) = privileges::check_datapath(plan.queues.len() as u32) {
        return Err(UserError::MissingCapabilities {
            what: plan.what.clone(),
            missing,
        }
        .into());
    }
    let link = link_info(plan.iface)?;
    check_link(plan, &link)?;
    Ok(link)
}

/// The checks that only need the link facts.
pub fn check_link(plan: &Plan<'_>, link: &LinkInfo) -> Result<(), UserError> {
    let count = rx_queue_count(plan.iface)
        .or(link.num_rx_queues)
        .unwrap_or(1);
    // The largest: the one the user named (tools open 0..=queue).
    if let Some(&q) = plan.queues.iter().rev().find(|&&q| q >= count) {
        return Err(UserError::QueueOutOfRange {
            iface: plan.iface.into(),
            queue: q,
            count,
        });
    }
    let needed = plan.pmtu + roce_overhead(plan.ipv6);
    if needed > link.mtu {
        return Err(UserError::MtuTooLarge {
            iface: plan.iface.into(),
            pmtu: plan.pmtu,
            needed,
            link_mtu: link.mtu,
            suggest: largest_pmtu(link.mtu, plan.ipv6).unwrap_or(256),
        });
    }
    if !plan.force {
        if let Some(prog) = link.xdp_program() {
            return Err(UserError::XdpAlreadyAttached {
                iface: plan.iface.into(),
                prog,
            });
        }
    }
    Ok(())
}

/// RX queues of `iface` from /sys/class/net/IF/queues (right only when
/// /sys belongs to the current namespace, as under `ip netns exec`).
fn rx_queue_count(iface: &str) -> Option<u32> {
    let dir = std::fs::read_dir(format!("/sys/class/net/{iface}/queues")).ok()?;
    let n = dir
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("rx-"))
        .count() as u32;
    (n > 0).then_some(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_ip_json_with_xdp() {
        let j = r#"[{"ifindex":5,"ifname":"v0","mtu":1500,"address":"02:00:00:00:00:01","num_tx_queues":2,"num_rx_queues":2,
            "xdp":{"mode":2,"prog":{"id":42,"name":"xdp_dummy","tag":"aa","jited":1}}}]"#;
        let v: Vec<LinkInfo> = serde_json::from_str(j).unwrap();
        assert_eq!(v[0].xdp_program().as_deref(), Some("xdp_dummy, id 42"));
        assert_eq!(v[0].num_rx_queues, Some(2));
    }

    #[test]
    fn mtu_rule() {
        assert_eq!(largest_pmtu(1500, false), Some(1024));
        assert_eq!(largest_pmtu(9000, false), Some(4096));
        assert_eq!(largest_pmtu(4160, false), Some(4096));
        assert_eq!(largest_pmtu(4159, false), Some(2048));
        let link = LinkInfo {
            mtu: 1500,
            num_rx_queues: Some(1),
            xdp: None,
        };
        let plan = Plan {
            what: "t".into(),
            iface: "nonexistent-test-if",
            queues: &[0],
            pmtu: 2048,
            ipv6: false,
            force: false,
        };
        let e = check_link(&plan, &link).unwrap_err();
        assert!(e.to_string().contains("use -m 1024"), "{e}");
        let plan = Plan {
            pmtu: 1024,
            queues: &[1],
            ..plan
        };
        assert!(matches!(
            check_link(&plan, &link),
            Err(UserError::QueueOutOfRange { count: 1, .. })
        ));
    }
}
