//! Command-line options and values that several commands share: the XDP
//! attach mode and zero-copy policy, the RDMA operation of the verified
//! transfers, and the option blocks that commands flatten into theirs
//! (`#[command(flatten)]`), with what they turn into for the engine.

use std::net::IpAddr;
use std::path::PathBuf;

use anyhow::{Context as _, Result};
use clap::{Arg, Args, ValueEnum};
use engine::io::ZeroCopy;
use engine::nic::{AttachMode, QueueOption, Steering};
use engine::verbs::{Device, DeviceConfig};

pub use super::steering::SteerArg;

/// XDP attach mode on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum ModeArg {
    /// Native (driver) mode, falling back to generic if the driver has no
    /// XDP support.
    #[default]
    Auto,
    /// Native (driver) mode only: the fastest (veth, most NICs).
    Native,
    /// Generic (SKB) mode only: works on every interface, slower.
    Generic,
}

impl From<ModeArg> for AttachMode {
    fn from(m: ModeArg) -> AttachMode {
        match m {
            ModeArg::Auto => AttachMode::Auto,
            ModeArg::Native => AttachMode::Native,
            ModeArg::Generic => AttachMode::Generic,
        }
    }
}

/// AF_XDP zero-copy policy on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum ZeroCopyArg {
    #[default]
    Auto,
    On,
    Off,
}

impl From<ZeroCopyArg> for ZeroCopy {
    fn from(z: ZeroCopyArg) -> ZeroCopy {
        match z {
            ZeroCopyArg::Auto => ZeroCopy::Auto,
            ZeroCopyArg::On => ZeroCopy::On,
            ZeroCopyArg::Off => ZeroCopy::Off,
        }
    }
}

/// The RDMA operation of a verified transfer (`sim`, `loopback`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OpArg {
    Write,
    Send,
    Read,
    Atomic,
}

/// Valid path MTUs (`docs/wire-format.md`, "Frame layout").
pub const VALID_PMTUS: [u32; 5] = [256, 512, 1024, 2048, 4096];

/// How a command attaches to its interface's queues: XDP mode, zero-copy,
/// `--force` and queue coverage (`--steer`).
#[derive(Debug, Clone, Args)]
pub struct AttachArgs {
    /// XDP attach mode.
    #[arg(long = "mode", value_enum, default_value_t = ModeArg::Auto)]
    pub mode: ModeArg,
    /// AF_XDP zero-copy.
    #[arg(long = "zero-copy", value_enum, default_value_t = ZeroCopyArg::Auto)]
    pub zero_copy: ZeroCopyArg,
    /// Replace an XDP program another tool attached to the interface, and
    /// start even if RoCE may reach RX queues without an engine.
    #[arg(long = "force")]
    pub force: bool,
    /// Keep RoCE on the served queues when the interface has more RX
    /// queues: ntuple rules / an RSS context (auto, ntuple), or nothing (off).
    #[arg(long = "steer", value_enum, default_value_t = SteerArg::Auto)]
    pub steer: SteerArg,
    /// Attach to the interface's shared engine (`roce-xdp service`):
    /// auto when one runs, always (or fail), never (own the queues).
    #[arg(long = "share", value_enum, default_value_t = ShareArg::Auto)]
    pub share: ShareArg,
}

/// `--share`: whether to attach to the interface's `roce-xdp service`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Default)]
pub enum ShareArg {
    #[default]
    Auto,
    Always,
    Never,
}

impl From<ShareArg> for engine::attach::Share {
    fn from(s: ShareArg) -> Self {
        match s {
            ShareArg::Auto => engine::attach::Share::Auto,
            ShareArg::Always => engine::attach::Share::Always,
            ShareArg::Never => engine::attach::Share::Never,
        }
    }
}

/// How the perftest-style tools and `serve` run the engine on their
/// interface.
#[derive(Debug, Clone, Args)]
pub struct EngineArgs {
    /// Attach mode, zero-copy, --force, --steer.
    #[command(flatten)]
    pub attach: AttachArgs,
    /// Record the RoCE frames sent and received to this pcap file.
    #[arg(long = "pcap", value_name = "FILE")]
    pub pcap: Option<PathBuf>,
    /// Spin on the rings instead of sleeping when idle (lower latency; one
    /// core per engine).
    #[arg(long = "busy-poll")]
    pub busy_poll: bool,
}

/// The datapath of the commands facing a libibverbs peer (`pingpong`,
/// `interop rdma-client`, `interop rdma-target`): the interface, how to
/// attach, the peer's MAC, and the test drop impairment. Each command
/// says in its own help which frames `--drop-rate` drops ([`reword`]).
#[derive(Debug, Clone, Args)]
pub struct PeerDatapathArgs {
    /// Network interface the engine attaches to (its first IPv4 address is
    /// the GID).
    #[arg(long, value_name = "IF")]
    pub iface: String,
    /// XDP attach mode.
    #[arg(long, value_enum, default_value_t = ModeArg::Auto)]
    pub mode: ModeArg,
    /// Replace an XDP program already attached to --iface, and start even
    /// if RoCE may reach RX queues without an engine.
    #[arg(long)]
    pub force: bool,
    /// Keep RoCE on the served queues when --iface has more RX queues:
    /// ntuple rules (auto, ntuple), or nothing (off).
    #[arg(long = "steer", value_enum, default_value_t = SteerArg::Auto)]
    pub steer: SteerArg,
    /// Peer MAC address (default: the kernel's neighbour table).
    #[arg(long, value_name = "MAC")]
    pub peer_mac: Option<String>,
    /// Test impairment: the XDP program drops this fraction (0..1) of the
    /// RoCE frames the engine receives; prints the recovery counters to
    /// stderr.
    #[arg(long, value_name = "FRACTION", default_value_t = 0.0)]
    pub drop_rate: f64,
}

impl PeerDatapathArgs {
    /// Opens the datapath on `--iface` with queues `0..queues` (queue
    /// coverage settled first; keep the [`Steering`] as long as the
    /// device); `local_ip` overrides the interface's first IPv4 address.
    pub fn open(&self, queues: u32, local_ip: Option<IpAddr>) -> Result<(Device, Steering)> {
        let steering = super::steering::steer(
            &self.iface,
            queues,
            self.steer,
            self.force,
            local_ip.is_some_and(|ip| ip.is_ipv6()),
            QueueOption::UpTo,
        )?;
        let mut cfg = DeviceConfig::new(&self.iface);
        cfg.attach = self.mode.into();
        cfg.force = self.force;
        cfg.queues = queues;
        cfg.local_ip = local_ip;
        let dev =
            Device::open(cfg).with_context(|| format!("opening the datapath on {}", self.iface))?;
        Ok((dev, steering))
    }
}

/// For `#[command(mut_args(reword(&[(ID, HELP), ...])))]`: a command words
/// some options of a flattened block its own way. The options keep their
/// place (`Command::mut_arg` would move them to the end of the usage line).
pub fn reword(helps: &'static [(&'static str, &'static str)]) -> impl FnMut(Arg) -> Arg {
    move |a| match helps.iter().find(|(id, _)| a.get_id() == *id) {
        Some((_, help)) => a.help(*help),
        None => a,
    }
}
