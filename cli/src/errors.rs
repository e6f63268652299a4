//! User-facing error classification. Mistakes a user can fix (privileges,
//! interface, queue, MTU, an XDP program in the way, zero-copy, RX queues
//! RoCE would reach without an engine, an unreachable or refusing peer,
//! bad option values) print one actionable
//! message and exit with [`USER_ERROR_EXIT`]; everything else exits 1.
//! Neither prints a backtrace.

use std::io;

use engine::driver::DriverError;
use engine::io::ethtool::EthtoolError;
use engine::io::XskError;
use engine::nic::{LoaderError, SteerError};
use engine::verbs::DeviceError;

use crate::common::privileges::Capability;

/// Exit code for errors the user can act on (like clap's usage errors).
pub const USER_ERROR_EXIT: i32 = 2;
/// Exit code for anything else.
pub const INTERNAL_ERROR_EXIT: i32 = 1;
/// Exit code after Ctrl-C / SIGTERM ended a run (128 + SIGINT).
pub const INTERRUPTED_EXIT: i32 = 130;

/// A run ended by SIGINT or SIGTERM (after cleaning up).
#[derive(Debug, thiserror::Error)]
#[error("interrupted")]
pub struct Interrupted;

/// An error the user can fix, with the fix in its message.
#[derive(Debug, thiserror::Error)]
pub enum UserError {
    #[error("{what} needs {}; missing: {}. Run as root, or grant them: `sudo setcap {} $(which roce-xdp)`",
        caps_list(.missing), caps_list(.missing), setcap_list(.missing))]
    MissingCapabilities {
        what: String,
        missing: Vec<Capability>,
    },
    #[error("no network interface named {0:?} in this network namespace: check `ip link` (or use --iface)")]
    NoSuchInterface(String),
    #[error("queue {queue} is out of range for {iface}: it has {count} RX queue(s), 0..{last} (see `ethtool -l {iface}`)", last = .count.saturating_sub(1))]
    QueueOutOfRange {
        iface: String,
        queue: u32,
        count: u32,
    },
    #[error("path MTU {pmtu} needs a link MTU of at least {needed} bytes (RoCE v2 headers included), but {iface} has MTU {link_mtu}: use -m {suggest} or raise it (`ip link set dev {iface} mtu {needed}`)")]
    MtuTooLarge {
        iface: String,
        pmtu: u32,
        needed: u32,
        link_mtu: u32,
        suggest: u32,
    },
    #[error("another XDP program ({prog}) is already attached to {iface}: detach it (`ip link set dev {iface} xdp off`) or pass --force to replace it")]
    XdpAlreadyAttached { iface: String, prog: String },
    #[error("zero-copy AF_XDP is not supported on {iface} ({detail}): use --zero-copy auto or --zero-copy off")]
    ZeroCopyUnsupported { iface: String, detail: String },
    #[error("peer {addr} is unreachable ({detail}): check the address and the route (`ip route get {host}`)", host = host_of(.addr))]
    PeerUnreachable { addr: String, detail: String },
    #[error("connection to {addr} refused: is `roce-xdp {tool}` (the server side) running there, on this port (-p)?")]
    ConnectionRefused { addr: String, tool: String },
    #[error("{0}")]
    Usage(String),
}

fn caps_list(c: &[Capability]) -> String {
    c.iter().map(|c| c.name()).collect::<Vec<_>>().join(", ")
}

fn setcap_list(c: &[Capability]) -> String {
    let names: Vec<String> = c.iter().map(|c| c.name().to_ascii_lowercase()).collect();
    format!("{}+ep", names.join(","))
}

fn host_of(addr: &str) -> &str {
    // "10.0.0.1:18515" -> "10.0.0.1", "[fd00::1]:18515" -> "fd00::1"
    let h = match addr.rfind(':') {
        Some(i) if addr[..i].contains(']') || !addr[..i].contains(':') => &addr[..i],
        _ => addr,
    };
    h.trim_start_matches('[').trim_end_matches(']')
}

/// Maps an error from a connect attempt to `addr` into a user error when
/// it is one (refused, unreachable, timed out).
pub fn classify_connect(e: io::Error, addr: &str, tool: &str) -> anyhow::Error {
    match e.kind() {
        io::ErrorKind::ConnectionRefused => UserError::ConnectionRefused {
            addr: addr.to_string(),
            tool: tool.to_string(),
        }
        .into(),
        io::ErrorKind::HostUnreachable
        | io::ErrorKind::NetworkUnreachable
        | io::ErrorKind::TimedOut
        | io::ErrorKind::AddrNotAvailable => UserError::PeerUnreachable {
            addr: addr.to_string(),
            detail: e.to_string(),
        }
        .into(),
        _ => anyhow::Error::new(e).context(format!("connecting to {addr}")),
    }
}

fn loader_message(l: &LoaderError) -> Option<String> {
    match l {
        LoaderError::NeedsPrivileges(_)
        | LoaderError::NoSuchInterface(_)
        | LoaderError::ModeUnsupported { .. }
        | LoaderError::QueueOutOfRange(_) => Some(l.to_string()),
        LoaderError::AlreadyAttached(iface) => Some(
            UserError::XdpAlreadyAttached {
                iface: iface.clone(),
                prog: "held by another process".into(),
            }
            .to_string(),
        ),
        _ => None,
    }
}

fn xsk_message(x: &XskError) -> Option<String> {
    match x {
        XskError::Umem(_)
        | XskError::QueueBusy { .. }
        | XskError::Socket(_)
        | XskError::NoSuchInterface(_)
        | XskError::Bind { .. } => Some(x.to_string()),
        XskError::ZeroCopyUnsupported { ifname, source } => Some(
            UserError::ZeroCopyUnsupported {
                iface: ifname.clone(),
                detail: source.to_string(),
            }
            .to_string(),
        ),
        _ => None,
    }
}

fn driver_message(d: &DriverError) -> Option<String> {
    match d {
        DriverError::Xsk(x) => xsk_message(x),
        DriverError::Loader(l) => loader_message(l),
        _ => None,
    }
}

/// If the error (or one of its causes) is something the user can fix,
/// the message to print.
pub fn user_message(err: &anyhow::Error) -> Option<String> {
    for cause in err.chain() {
        // Transparent wrappers hide their inner error from `source()`:
        // look inside them explicitly.
        if let Some(d) = cause.downcast_ref::<DeviceError>() {
            return match d {
                DeviceError::Loader(l) => loader_message(l),
                DeviceError::Driver(dr) => driver_message(dr),
                _ => None,
            };
        }
        if let Some(d) = cause.downcast_ref::<DriverError>() {
            return driver_message(d);
        }
        if let Some(s) = cause.downcast_ref::<SteerError>() {
            return match s {
                SteerError::Uncovered(_) | SteerError::InUse { .. } | SteerError::State { .. } => {
                    Some(s.to_string())
                }
                SteerError::Queues {
                    source: EthtoolError::NoSuchInterface(iface),
                    ..
                } => Some(UserError::NoSuchInterface(iface.clone()).to_string()),
                _ => None,
            };
        }
        if let Some(u) = cause.downcast_ref::<UserError>() {
            return Some(u.to_string());
        }
        if let Some(l) = cause.downcast_ref::<LoaderError>() {
            return loader_message(l);
        }
        if let Some(x) = cause.downcast_ref::<XskError>() {
            return xsk_message(x);
        }
        if let Some(c) = cause.downcast_ref::<clap::Error>() {
            return Some(c.to_string());
        }
    }
    None
}

/// Prints `err` the way the user should see it and returns the exit code.
pub fn report(err: &anyhow::Error) -> i32 {
    if err.chain().any(|c| c.is::<Interrupted>()) {
        eprintln!("roce-xdp: interrupted");
        return INTERRUPTED_EXIT;
    }
    if let Some(msg) = user_message(err) {
        eprintln!("roce-xdp: error: {msg}");
        USER_ERROR_EXIT
    } else {
        eprintln!("roce-xdp: error: {err:#}");
        INTERNAL_ERROR_EXIT
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_say_what_to_do() {
        let e: anyhow::Error = UserError::MissingCapabilities {
            what: "attaching to eth0".into(),
            missing: vec![Capability::NetAdmin, Capability::Bpf],
        }
        .into();
        let m = user_message(&e).unwrap();
        assert!(m.contains("CAP_NET_ADMIN, CAP_BPF"), "{m}");
        assert!(m.contains("cap_net_admin,cap_bpf+ep"), "{m}");

        let e = classify_connect(
            io::ErrorKind::ConnectionRefused.into(),
            "10.0.0.2:18515",
            "write-bw",
        );
        assert!(user_message(&e).unwrap().contains("refused"));
        let e = classify_connect(
            io::ErrorKind::HostUnreachable.into(),
            "[fd00::2]:1",
            "write-bw",
        );
        assert!(user_message(&e).unwrap().contains("ip route get fd00::2"));

        let e = anyhow::anyhow!("something internal");
        assert!(user_message(&e).is_none());
        let e: anyhow::Error = UserError::QueueOutOfRange {
            iface: "v".into(),
            queue: 4,
            count: 2,
        }
        .into();
        assert!(user_message(&e.context("while starting"))
            .unwrap()
            .contains("0..1"));
    }
}
