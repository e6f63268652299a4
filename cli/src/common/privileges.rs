//! Which Linux capabilities the process holds (the `CapEff` mask of
//! /proc/self/status) and which ones a command needs, so a user who is not
//! root learns exactly what is missing instead of a raw EPERM.

/// A capability the datapath may need.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Capability {
    /// Attach XDP programs, configure interfaces.
    NetAdmin,
    /// Open AF_XDP sockets.
    NetRaw,
    /// Lock the UMEM in memory beyond RLIMIT_MEMLOCK.
    IpcLock,
    /// Enter network namespaces; also stands in for CAP_BPF on old kernels.
    SysAdmin,
    /// Load BPF programs and create BPF maps.
    Bpf,
}

impl Capability {
    /// Bit number in the capability masks (linux/capability.h).
    pub fn bit(self) -> u32 {
        match self {
            Capability::NetAdmin => 12,
            Capability::NetRaw => 13,
            Capability::IpcLock => 14,
            Capability::SysAdmin => 21,
            Capability::Bpf => 39,
        }
    }

    /// The name users see in `capsh`/`setcap`.
    pub fn name(self) -> &'static str {
        match self {
            Capability::NetAdmin => "CAP_NET_ADMIN",
            Capability::NetRaw => "CAP_NET_RAW",
            Capability::IpcLock => "CAP_IPC_LOCK",
            Capability::SysAdmin => "CAP_SYS_ADMIN",
            Capability::Bpf => "CAP_BPF",
        }
    }
}

/// Parses the hexadecimal `CapEff:` line of a /proc/PID/status text.
pub fn parse_cap_eff(status: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
}

/// Parses the soft "Max locked memory" limit of a /proc/PID/limits text:
/// `None` for unlimited.
pub fn parse_memlock_limit(limits: &str) -> Option<Option<u64>> {
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max locked memory"))?;
    let soft = line["Max locked memory".len()..]
        .split_whitespace()
        .next()?;
    if soft == "unlimited" {
        Some(None)
    } else {
        soft.parse().ok().map(Some)
    }
}

/// The effective capability mask of this process (0 if unreadable).
pub fn effective() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| parse_cap_eff(&s))
        .unwrap_or(0)
}

/// Bytes of UMEM (and BPF maps) the datapath locks per queue, generously.
pub const LOCKED_BYTES_PER_QUEUE: u64 = 32 << 20;

/// Capabilities the datapath needs and `mask` lacks. `queues` sizes the
/// locked-memory need: CAP_IPC_LOCK is only required when RLIMIT_MEMLOCK
/// is too small for the UMEMs.
pub fn missing_for_datapath(mask: u64, memlock: Option<u64>, queues: u32) -> Vec<Capability> {
    let has = |c: Capability| mask & (1u64 << c.bit()) != 0;
    let mut missing = Vec::new();
    for c in [Capability::NetAdmin, Capability::NetRaw] {
        if !has(c) {
            missing.push(c);
        }
    }
    // Kernels since 5.8 accept CAP_BPF; CAP_SYS_ADMIN covers it everywhere.
    if !has(Capability::Bpf) && !has(Capability::SysAdmin) {
        missing.push(Capability::Bpf);
    }
    let need = LOCKED_BYTES_PER_QUEUE * u64::from(queues.max(1));
    if !has(Capability::IpcLock) && memlock.is_some_and(|l| l < need) {
        missing.push(Capability::IpcLock);
    }
    missing
}

/// Checks this process; `Err(missing)` when something is missing.
pub fn check_datapath(queues: u32) -> Result<(), Vec<Capability>> {
    let memlock = std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|s| parse_memlock_limit(&s))
        .unwrap_or(Some(0));
    let missing = missing_for_datapath(effective(), memlock, queues);
    if missing.is_empty() {
        Ok(())
    } else {
        Err(missing)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_status_and_limits() {
        let status = "Name:\tx\nCapInh:\t0000000000000000\nCapEff:\t000001ffffffffff\n";
        assert_eq!(parse_cap_eff(status), Some(0x1ff_ffff_ffff));
        let limits = "Limit                     Soft Limit           Hard Limit           Units\nMax locked memory         8388608              8388608              bytes\n";
        assert_eq!(parse_memlock_limit(limits), Some(Some(8 << 20)));
        let unl = "Max locked memory         unlimited            unlimited            bytes\n";
        assert_eq!(parse_memlock_limit(unl), Some(None));
    }

    #[test]
    fn root_needs_nothing_nobody_needs_everything() {
        assert!(missing_for_datapath(0x1ff_ffff_ffff, Some(0), 4).is_empty());
        let names: Vec<_> = missing_for_datapath(0, Some(8 << 20), 1)
            .iter()
            .map(|c| c.name())
            .collect();
        assert_eq!(
            names,
            ["CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_BPF", "CAP_IPC_LOCK"]
        );
        // CAP_SYS_ADMIN stands in for CAP_BPF; a large memlock limit makes
        // CAP_IPC_LOCK unnecessary.
        let m = (1 << 12) | (1 << 13) | (1 << 21);
        assert!(missing_for_datapath(m, None, 8).is_empty());
    }
}
