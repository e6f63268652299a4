//! Queue coverage (`docs/queue-coverage.md`): when an interface has more
//! RX queues than the engine serves (queues `0..N` of `R`), RSS hands some
//! RoCE flows to queues no socket listens on; the XDP program passes them
//! to the kernel and their clients stall. [`Steering::establish`] decides
//! what to do about it and installs it:
//!
//! - `N >= R`, or the default RSS table only uses queues below `N`:
//!   nothing is needed;
//! - `--steer auto` / `ntuple`: an RSS context over queues `0..N` and
//!   ntuple rules sending UDP 4791 (IPv4 and IPv6) into it; with one
//!   served queue (or no RSS contexts), rules straight to queue 0. If the
//!   NIC cannot, `auto` refuses unless `force`, `ntuple` always refuses;
//! - `--steer off`: nothing is installed; refuses unless `force`.
//!
//! What was installed is recorded in a state file (pid, rule locations,
//! context id) and removed when the [`Steering`] guard is removed or
//! dropped; a later start finds the file of a process that died without
//! removing it and removes what it lists first.
//!
//! The ethtool operations sit behind [`SteerOps`] ([`EthtoolOps`] is the
//! real one) so that the policy is tested without a NIC.

use std::fmt::{self, Write as _};
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};

use thiserror::Error;

use super::{in_netns, NetnsError};
use crate::io::ethtool::{
    Ethtool, EthtoolError, FlowFamily, RuleAction, RuleLocation, RuleTable, UdpPortRule,
};

/// The RoCE v2 UDP destination port.
pub const ROCE_V2_PORT: u16 = 4791;

/// `--steer`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SteerMode {
    /// Install steering where the NIC can; refuse where it cannot.
    #[default]
    Auto,
    /// Install steering; failing to is an error even with `force`.
    Ntuple,
    /// Install nothing.
    Off,
}

impl SteerMode {
    pub fn name(self) -> &'static str {
        match self {
            SteerMode::Auto => "auto",
            SteerMode::Ntuple => "ntuple",
            SteerMode::Off => "off",
        }
    }
}

/// How the command names the queues it serves, for the fix in messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueOption {
    /// `--queues 0-M` (`serve`).
    Range,
    /// `--queue M`: queues `0..=M` (the tools, `pingpong`).
    UpTo,
    /// Queue 0 only: a program under `roce-xdp exec` (one queue per
    /// program).
    One,
}

impl QueueOption {
    fn all(self, rx_queues: u32) -> String {
        let last = rx_queues.saturating_sub(1);
        match self {
            QueueOption::Range => format!("`--queues 0-{last}`"),
            QueueOption::UpTo => format!("`--queue {last}`: queues 0-{last}"),
            QueueOption::One => format!(
                "a program under `roce-xdp exec` serves one; `roce-xdp serve --queues 0-{last}` serves all"
            ),
        }
    }
}

/// Which `ethtool -L` count sets the interface's RX queues.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChannelKind {
    /// `ethtool -L IF combined N` (most NICs).
    Combined,
    /// `ethtool -L IF rx N` (separate RX channels, e.g. veth).
    Rx,
}

/// The interface's RX queues.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RxQueues {
    pub count: u32,
    pub kind: ChannelKind,
}

/// The ethtool operations the policy uses.
pub trait SteerOps: Send {
    /// RX queues in use.
    fn rx_queues(&self) -> Result<RxQueues, EthtoolError>;
    /// Indirection table of RSS context `context` (0: the default).
    fn rss_indirection(&self, context: u32) -> Result<Vec<u32>, EthtoolError>;
    fn rule_table(&self) -> Result<RuleTable, EthtoolError>;
    fn rule_locations(&self) -> Result<Vec<u32>, EthtoolError>;
    /// The rule at `location` if it is a plain UDP-port rule.
    fn rule(&self, location: u32) -> Result<Option<UdpPortRule>, EthtoolError>;
    fn insert_rule(&self, rule: &UdpPortRule, at: RuleLocation) -> Result<u32, EthtoolError>;
    fn delete_rule(&self, location: u32) -> Result<(), EthtoolError>;
    /// A new RSS context spreading over queues `0..queues`; its id.
    fn create_rss_context(&self, queues: u32) -> Result<u32, EthtoolError>;
    fn delete_rss_context(&self, context: u32) -> Result<(), EthtoolError>;
}

/// [`SteerOps`] through the kernel's ethtool ioctl.
#[derive(Debug)]
pub struct EthtoolOps {
    eth: Ethtool,
    /// The interface is in our namespace, so /sys/class/net describes it.
    sysfs: bool,
}

impl EthtoolOps {
    /// An ethtool socket for `ifname` in `netns` (None: the calling
    /// thread's namespace).
    pub fn open(netns: Option<&str>, ifname: &str) -> Result<EthtoolOps, SteerError> {
        let eth = in_netns(netns, || Ethtool::open(ifname))?.map_err(SteerError::Ethtool)?;
        Ok(EthtoolOps {
            eth,
            sysfs: netns.is_none(),
        })
    }
}

impl SteerOps for EthtoolOps {
    fn rx_queues(&self) -> Result<RxQueues, EthtoolError> {
        match self.eth.channels() {
            Ok(c) if c.rx_queues() > 0 => {
                let kind = if c.combined > 0 || c.rx == 0 {
                    ChannelKind::Combined
                } else {
                    ChannelKind::Rx
                };
                return Ok(RxQueues {
                    count: c.rx_queues(),
                    kind,
                });
            }
            Ok(_) => {}
            Err(e) if !e.is_not_supported() => return Err(e),
            Err(_) => {}
        }
        match self.eth.rx_rings() {
            Ok(n) if n > 0 => {
                return Ok(RxQueues {
                    count: n,
                    kind: ChannelKind::Combined,
                })
            }
            Ok(_) => {}
            Err(e) if !e.is_not_supported() => return Err(e),
            Err(_) => {}
        }
        let sysfs = self
            .sysfs
            .then(|| std::fs::read_dir(format!("/sys/class/net/{}/queues", self.eth.ifname())).ok())
            .flatten()
            .map(|d| {
                d.filter_map(|e| e.ok())
                    .filter(|e| e.file_name().to_string_lossy().starts_with("rx-"))
                    .count() as u32
            })
            .unwrap_or(0);
        // An interface without channel counts has one queue unless sysfs
        // says otherwise.
        Ok(RxQueues {
            count: sysfs.max(1),
            kind: ChannelKind::Combined,
        })
    }
    fn rss_indirection(&self, context: u32) -> Result<Vec<u32>, EthtoolError> {
        self.eth.rss_indirection(context)
    }
    fn rule_table(&self) -> Result<RuleTable, EthtoolError> {
        self.eth.rule_table()
    }
    fn rule_locations(&self) -> Result<Vec<u32>, EthtoolError> {
        self.eth.rule_locations()
    }
    fn rule(&self, location: u32) -> Result<Option<UdpPortRule>, EthtoolError> {
        self.eth.rule(location)
    }
    fn insert_rule(&self, rule: &UdpPortRule, at: RuleLocation) -> Result<u32, EthtoolError> {
        self.eth.insert_rule(rule, at)
    }
    fn delete_rule(&self, location: u32) -> Result<(), EthtoolError> {
        self.eth.delete_rule(location)
    }
    fn create_rss_context(&self, queues: u32) -> Result<u32, EthtoolError> {
        let (size, _) = self.eth.rss_sizes()?;
        if size == 0 {
            return Err(EthtoolError::NotSupported {
                iface: self.eth.ifname().into(),
                what: "RSS indirection tables",
            });
        }
        let table: Vec<u32> = (0..size).map(|i| i % queues.max(1)).collect();
        self.eth.create_rss_context(&table)
    }
    fn delete_rss_context(&self, context: u32) -> Result<(), EthtoolError> {
        self.eth.delete_rss_context(context)
    }
}

/// What a datapath asks for.
#[derive(Debug, Clone)]
pub struct SteerRequest {
    pub iface: String,
    /// The interface's network namespace (`ip netns` name); None: ours.
    pub netns: Option<String>,
    /// Queues `0..served` have engines.
    pub served: u32,
    pub mode: SteerMode,
    /// Serve even when RoCE may reach queues without an engine.
    pub force: bool,
    /// The family served (its rule is required; the other one's is not).
    pub ipv6: bool,
    pub queue_option: QueueOption,
    /// Where the state file goes (the stats channel's run directory).
    pub state_dir: PathBuf,
}

impl SteerRequest {
    /// Defaults: auto, IPv4, `--queues`, the stats run directory.
    pub fn new(iface: &str, served: u32) -> SteerRequest {
        SteerRequest {
            iface: iface.into(),
            netns: None,
            served,
            mode: SteerMode::Auto,
            force: false,
            ipv6: false,
            queue_option: QueueOption::Range,
            state_dir: crate::stats::run_dir(),
        }
    }
}

/// Which steering is in place.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SteeringState {
    /// The engine serves every RX queue.
    #[default]
    NoneNeeded,
    /// The default RSS table only uses served queues.
    RssTable,
    /// ntuple rules send RoCE to one queue.
    Ntuple,
    /// An RSS context over the served queues, ntuple rules into it.
    RssContext,
    /// `--steer off --force`: nothing installed, queues uncovered.
    Off,
    /// `--force`: steering failed, queues uncovered.
    Forced,
}

impl SteeringState {
    /// The name in `stats --json`.
    pub fn name(self) -> &'static str {
        match self {
            SteeringState::NoneNeeded => "none_needed",
            SteeringState::RssTable => "rss_table",
            SteeringState::Ntuple => "ntuple",
            SteeringState::RssContext => "rss_context",
            SteeringState::Off => "off",
            SteeringState::Forced => "forced",
        }
    }
}

/// What `stats` shows about steering.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SteeringStatus {
    pub state: SteeringState,
    pub mode: SteerMode,
    pub iface: String,
    pub served: u32,
    pub rx_queues: u32,
    /// `(location, rule)` of the rules installed.
    pub rules: Vec<(u32, UdpPortRule)>,
    pub rss_context: Option<u32>,
    /// Why steering failed ([`SteeringState::Forced`]) or is reduced (no
    /// RSS contexts: one queue).
    pub reason: Option<String>,
}

fn queue_span(first: u32, last: u32) -> String {
    if first == last {
        format!("queue {first}")
    } else {
        format!("queues {first}-{last}")
    }
}

impl SteeringStatus {
    /// RX queues RoCE may reach without an engine there.
    pub fn uncovered(&self) -> std::ops::Range<u32> {
        match self.state {
            SteeringState::Off | SteeringState::Forced => self.served..self.rx_queues,
            _ => 0..0,
        }
    }

    /// One line for `stats`.
    pub fn summary(&self) -> String {
        let served = queue_span(0, self.served.saturating_sub(1));
        let rules = || {
            self.rules
                .iter()
                .map(|(l, r)| format!("{} at location {l}", r.family.name()))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let uncovered = || {
            let u = self.uncovered();
            queue_span(u.start, u.end.saturating_sub(1))
        };
        match self.state {
            SteeringState::NoneNeeded => format!(
                "none needed: the engine serves all {} RX queue(s) of {}",
                self.rx_queues, self.iface
            ),
            SteeringState::RssTable => format!(
                "none needed: the RSS table of {} only uses the served {served}",
                self.iface
            ),
            SteeringState::Ntuple => {
                let mut s = format!("ntuple rules send UDP {ROCE_V2_PORT} to queue 0: {}", rules());
                if let Some(r) = &self.reason {
                    let _ = write!(s, " ({r})");
                }
                s
            }
            SteeringState::RssContext => format!(
                "RSS context {} spreads over {served}; ntuple rules send UDP {ROCE_V2_PORT} into it: {}",
                self.rss_context.unwrap_or(0),
                rules()
            ),
            SteeringState::Off => format!(
                "off (--steer off --force): RoCE flows hashed to {} of {} reach the kernel, not the engine",
                uncovered(),
                self.iface
            ),
            SteeringState::Forced => format!(
                "forced (--force): no steering ({}); RoCE flows hashed to {} of {} reach the kernel, not the engine",
                self.reason.as_deref().unwrap_or("not installed"),
                uncovered(),
                self.iface
            ),
        }
    }
}

/// A refusal: queues without an engine and no steering for them.
#[derive(Debug, Clone, PartialEq)]
pub struct Uncovered {
    pub iface: String,
    pub served: u32,
    pub rx_queues: RxQueues,
    pub mode: SteerMode,
    /// Why no steering could be installed (None with `--steer off`).
    pub reason: Option<String>,
    pub queue_option: QueueOption,
}

impl fmt::Display for Uncovered {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (n, r) = (self.served, self.rx_queues.count);
        let served = queue_span(0, n.saturating_sub(1));
        let uncovered = queue_span(n, r.saturating_sub(1));
        let why = match (self.mode, &self.reason) {
            (SteerMode::Off, _) => "steering is off (--steer off)".to_string(),
            (SteerMode::Ntuple, Some(r)) => {
                format!("--steer ntuple could not steer RoCE there: {r}")
            }
            (_, Some(r)) => format!("no steering could be installed: {r}"),
            (_, None) => "no steering is installed".to_string(),
        };
        let kind = match self.rx_queues.kind {
            ChannelKind::Combined => "combined",
            ChannelKind::Rx => "rx",
        };
        write!(
            f,
            "{iface} has {r} RX queues but only {served} {verb} served, and {why}. RSS would put some \
             RoCE flows on {uncovered}, where the XDP program passes them to the kernel and their \
             clients stall. Serve every queue ({all}), or give {iface} {n} RX queue(s) (`ethtool -L \
             {iface} {kind} {n}`)",
            iface = self.iface,
            verb = if n == 1 { "is" } else { "are" },
            all = self.queue_option.all(r),
        )?;
        match self.mode {
            SteerMode::Ntuple => write!(
                f,
                "; --force does not override --steer ntuple (`--steer auto --force` serves anyway)"
            ),
            _ => write!(
                f,
                ", or pass --force to serve anyway (the RoCE flows RSS puts on {uncovered} then reach \
                 the kernel instead of the engine, and those clients stall)"
            ),
        }
    }
}

/// Why steering could not be settled.
#[derive(Debug, Error)]
pub enum SteerError {
    /// Queues uncovered and nothing installed (the message says what to do).
    #[error("{0}")]
    Uncovered(Box<Uncovered>),
    #[error(
        "another roce-xdp (pid {pid}) steers RoCE on {iface} (state file {path}): stop it first"
    )]
    InUse {
        iface: String,
        pid: u32,
        path: String,
    },
    #[error("counting the RX queues of {iface}: {source}")]
    Queues { iface: String, source: EthtoolError },
    #[error("{0}")]
    Ethtool(EthtoolError),
    #[error("{0}")]
    Netns(#[from] NetnsError),
    #[error(
        "the steering state file {path}: {source}: run as root or set {}",
        crate::stats::RUN_DIR_ENV
    )]
    State {
        path: String,
        source: std::io::Error,
    },
    #[error("removing the steering installed on {iface}: {}; the next start retries", .failures.join("; "))]
    Remove {
        iface: String,
        failures: Vec<String>,
    },
}

/// What one process installed (the state file's content).
#[derive(Debug, Clone, Default, PartialEq)]
struct Installed {
    /// `(id, queues)`: the context spreads over queues `0..queues`.
    context: Option<(u32, u32)>,
    rules: Vec<(u32, UdpPortRule)>,
}

impl Installed {
    fn is_empty(&self) -> bool {
        self.context.is_none() && self.rules.is_empty()
    }
}

/// A state file read back.
#[derive(Debug, Clone, PartialEq)]
struct StateFile {
    pid: u32,
    start_time: u64,
    installed: Installed,
}

fn format_state(pid: u32, start_time: u64, iface: &str, inst: &Installed) -> String {
    let mut s = String::from(
        "# roce-xdp steering (docs/queue-coverage.md): removed when this process stops,\n\
         # or by the next start on this interface if it did not\n",
    );
    let _ = writeln!(s, "pid {pid}");
    let _ = writeln!(s, "start_time {start_time}");
    let _ = writeln!(s, "iface {iface}");
    if let Some((id, q)) = inst.context {
        let _ = writeln!(s, "rss_context {id} {q}");
    }
    for (loc, r) in &inst.rules {
        let action = match r.action {
            RuleAction::Queue(q) => format!("queue {q}"),
            RuleAction::RssContext(c) => format!("context {c}"),
        };
        let _ = writeln!(s, "rule {loc} {} {} {action}", r.family.name(), r.dst_port);
    }
    s
}

fn parse_state(text: &str) -> Option<StateFile> {
    let (mut pid, mut start_time) = (None, 0u64);
    let mut inst = Installed::default();
    for line in text.lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        match w.as_slice() {
            [] => {}
            [c, ..] if c.starts_with('#') => {}
            ["pid", p] => pid = Some(p.parse().ok()?),
            ["start_time", t] => start_time = t.parse().ok()?,
            ["iface", _] => {}
            ["rss_context", id, q] => inst.context = Some((id.parse().ok()?, q.parse().ok()?)),
            ["rule", loc, fam, port, kind, n] => {
                let n: u32 = n.parse().ok()?;
                let action = match *kind {
                    "queue" => RuleAction::Queue(n),
                    "context" => RuleAction::RssContext(n),
                    _ => return None,
                };
                inst.rules.push((
                    loc.parse().ok()?,
                    UdpPortRule {
                        family: FlowFamily::from_name(fam)?,
                        dst_port: port.parse().ok()?,
                        action,
                    },
                ));
            }
            _ => return None,
        }
    }
    Some(StateFile {
        pid: pid?,
        start_time,
        installed: inst,
    })
}

/// Field 22 of /proc/PID/stat: when the process started (clock ticks
/// since boot), to tell a live process from a reused pid.
fn start_time(pid: &str) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &s[s.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

fn own_start_time() -> u64 {
    start_time("self").unwrap_or(0)
}

/// Whether the process that wrote a state file still runs.
fn process_alive(pid: u32, started: u64) -> bool {
    match start_time(&pid.to_string()) {
        None => false,
        Some(t) => started == 0 || t == started,
    }
}

/// A name for the network namespace `netns` (or the calling thread's):
/// its `ip netns` name, `init`, or `ns<inode>`.
pub fn netns_label(netns: Option<&str>) -> String {
    if let Some(n) = netns {
        return n.replace('/', "_");
    }
    let id = |p: &Path| std::fs::metadata(p).ok().map(|m| (m.dev(), m.ino()));
    let Some(me) = id(Path::new("/proc/thread-self/ns/net")) else {
        return "unknown".into();
    };
    if let Ok(dir) = std::fs::read_dir("/var/run/netns") {
        for e in dir.filter_map(|e| e.ok()) {
            if id(&e.path()) == Some(me) {
                return e.file_name().to_string_lossy().replace('/', "_");
            }
        }
    }
    if id(Path::new("/proc/1/ns/net")) == Some(me) {
        return "init".into();
    }
    format!("ns{}", me.1)
}

/// The state file of `iface` in `netns`.
pub fn state_path(dir: &Path, netns: Option<&str>, iface: &str) -> PathBuf {
    dir.join(format!("steer-{}-{iface}.state", netns_label(netns)))
}

fn write_state(path: &Path, iface: &str, inst: &Installed) -> Result<(), SteerError> {
    let err = |source| SteerError::State {
        path: path.display().to_string(),
        source,
    };
    if inst.is_empty() {
        return match std::fs::remove_file(path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(err(e)),
            _ => Ok(()),
        };
    }
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d).map_err(err)?;
    }
    let tmp = path.with_extension("state.tmp");
    std::fs::write(
        &tmp,
        format_state(std::process::id(), own_start_time(), iface, inst),
    )
    .map_err(err)?;
    std::fs::rename(&tmp, path).map_err(err)
}

/// Queue coverage settled for one datapath: what is installed, removed
/// by [`Steering::remove`] or on drop.
pub struct Steering {
    status: SteeringStatus,
    ops: Option<Box<dyn SteerOps>>,
    installed: Installed,
    state: Option<PathBuf>,
    notes: Vec<String>,
}

impl fmt::Debug for Steering {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Steering")
            .field("status", &self.status)
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}

/// Why installing failed.
enum Failure {
    /// The NIC could not (the reason, for messages).
    Nic(String),
    State(SteerError),
}

impl Steering {
    /// Through the kernel's ethtool interface (in `req.netns`).
    pub fn establish_on_nic(req: &SteerRequest) -> Result<Steering, SteerError> {
        let ops = EthtoolOps::open(req.netns.as_deref(), &req.iface)?;
        Steering::establish(Box::new(ops), req)
    }

    /// Removes what a dead process left (see [`Steering::notes`]), then
    /// settles coverage for `req`: installs steering, or refuses with
    /// [`SteerError::Uncovered`].
    pub fn establish(ops: Box<dyn SteerOps>, req: &SteerRequest) -> Result<Steering, SteerError> {
        let path = state_path(&req.state_dir, req.netns.as_deref(), &req.iface);
        let mut notes = Vec::new();
        recover(&*ops, req, &path, &mut notes)?;
        let rxq = ops.rx_queues().map_err(|source| SteerError::Queues {
            iface: req.iface.clone(),
            source,
        })?;
        let mut status = SteeringStatus {
            mode: req.mode,
            iface: req.iface.clone(),
            served: req.served,
            rx_queues: rxq.count,
            ..Default::default()
        };
        let plain = |status: SteeringStatus, notes: Vec<String>| Steering {
            status,
            ops: None,
            installed: Installed::default(),
            state: None,
            notes,
        };
        if req.served >= rxq.count {
            return Ok(plain(status, notes));
        }
        let refuse = |reason: Option<String>| {
            SteerError::Uncovered(Box::new(Uncovered {
                iface: req.iface.clone(),
                served: req.served,
                rx_queues: rxq,
                mode: req.mode,
                reason,
                queue_option: req.queue_option,
            }))
        };
        if req.mode == SteerMode::Off {
            if !req.force {
                return Err(refuse(None));
            }
            status.state = SteeringState::Off;
            notes.push(status.summary());
            return Ok(plain(status, notes));
        }
        if rss_table_covers(&*ops, req.served) {
            status.state = SteeringState::RssTable;
            return Ok(plain(status, notes));
        }
        match install(&*ops, req, &path) {
            Ok((installed, reason)) => {
                status.state = if installed.context.is_some() {
                    SteeringState::RssContext
                } else {
                    SteeringState::Ntuple
                };
                status.rss_context = installed.context.map(|c| c.0);
                status.rules = installed.rules.clone();
                status.reason = reason;
                Ok(Steering {
                    status,
                    ops: Some(ops),
                    installed,
                    state: Some(path),
                    notes,
                })
            }
            Err(Failure::State(e)) => Err(e),
            Err(Failure::Nic(reason)) => {
                if req.mode == SteerMode::Ntuple || !req.force {
                    return Err(refuse(Some(reason)));
                }
                status.state = SteeringState::Forced;
                status.reason = Some(reason);
                notes.push(status.summary());
                Ok(plain(status, notes))
            }
        }
    }

    /// The same decisions as [`Steering::establish`] without installing
    /// anything (a one-shot server checks before it waits for a client):
    /// refuses where `establish` certainly would.
    pub fn check(ops: &dyn SteerOps, req: &SteerRequest) -> Result<(), SteerError> {
        let rxq = ops.rx_queues().map_err(|source| SteerError::Queues {
            iface: req.iface.clone(),
            source,
        })?;
        if req.served >= rxq.count {
            return Ok(());
        }
        let refuse = |reason: Option<String>| {
            Err(SteerError::Uncovered(Box::new(Uncovered {
                iface: req.iface.clone(),
                served: req.served,
                rx_queues: rxq,
                mode: req.mode,
                reason,
                queue_option: req.queue_option,
            })))
        };
        match req.mode {
            SteerMode::Off if !req.force => refuse(None),
            SteerMode::Off => Ok(()),
            _ if rss_table_covers(ops, req.served) => Ok(()),
            mode => match ops.rule_table() {
                Ok(_) => Ok(()),
                Err(_) if mode == SteerMode::Auto && req.force => Ok(()),
                Err(e) => refuse(Some(no_ntuple(&req.iface, &e))),
            },
        }
    }

    /// [`Steering::check`] through the kernel's ethtool interface.
    pub fn check_on_nic(req: &SteerRequest) -> Result<(), SteerError> {
        let ops = EthtoolOps::open(req.netns.as_deref(), &req.iface)?;
        Steering::check(&ops, req)
    }

    /// What is in place.
    pub fn status(&self) -> &SteeringStatus {
        &self.status
    }

    /// What the caller should tell the user: what was removed after a
    /// crash, and the warning of a forced start.
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// Removes what was installed (rules, then the context, then the state
    /// file); what could not be removed stays in the state file for the
    /// next start.
    pub fn remove(mut self) -> Result<(), SteerError> {
        let failures = self.remove_installed();
        if failures.is_empty() {
            Ok(())
        } else {
            Err(SteerError::Remove {
                iface: self.status.iface.clone(),
                failures,
            })
        }
    }

    fn remove_installed(&mut self) -> Vec<String> {
        let Some(ops) = self.ops.take() else {
            return Vec::new();
        };
        let mut failures = Vec::new();
        let mut left = Installed::default();
        for (loc, rule) in self.installed.rules.drain(..).rev() {
            if let Err(e) = ops.delete_rule(loc) {
                failures.push(format!("rule at location {loc}: {e}"));
                left.rules.insert(0, (loc, rule));
            }
        }
        if let Some((id, q)) = self.installed.context.take() {
            if let Err(e) = ops.delete_rss_context(id) {
                failures.push(format!("RSS context {id}: {e}"));
                left.context = Some((id, q));
            }
        }
        if let Some(p) = &self.state {
            if let Err(e) = write_state(p, &self.status.iface, &left) {
                failures.push(e.to_string());
            }
        }
        failures
    }
}

impl Drop for Steering {
    fn drop(&mut self) {
        let _ = self.remove_installed();
    }
}

fn no_ntuple(iface: &str, e: &EthtoolError) -> String {
    if e.is_not_supported() {
        format!("{iface} has no ntuple filters (`ethtool -n {iface}`: not supported)")
    } else {
        format!("{e}")
    }
}

/// The default RSS table only sends to queues `0..served`.
fn rss_table_covers(ops: &dyn SteerOps, served: u32) -> bool {
    matches!(ops.rss_indirection(0), Ok(t) if !t.is_empty() && t.iter().all(|&q| q < served))
}

/// Installs the context (two or more queues) and the rules, recording
/// each step in the state file; undoes everything on failure. Returns
/// what was installed and, when reduced to one queue, why.
fn install(
    ops: &dyn SteerOps,
    req: &SteerRequest,
    path: &Path,
) -> Result<(Installed, Option<String>), Failure> {
    let table = ops
        .rule_table()
        .map_err(|e| Failure::Nic(no_ntuple(&req.iface, &e)))?;
    let mut used = if table.special_locations {
        Vec::new()
    } else {
        ops.rule_locations()
            .map_err(|e| Failure::Nic(e.to_string()))?
    };
    let mut inst = Installed::default();
    let undo = |inst: &mut Installed| {
        for (loc, _) in inst.rules.drain(..).rev() {
            let _ = ops.delete_rule(loc);
        }
        if let Some((id, _)) = inst.context.take() {
            let _ = ops.delete_rss_context(id);
        }
        let _ = write_state(path, &req.iface, inst);
    };
    let mut reason = None;
    let action = if req.served == 1 {
        RuleAction::Queue(0)
    } else {
        match ops.create_rss_context(req.served) {
            Ok(id) => {
                inst.context = Some((id, req.served));
                if let Err(e) = write_state(path, &req.iface, &inst) {
                    undo(&mut inst);
                    return Err(Failure::State(e));
                }
                RuleAction::RssContext(id)
            }
            Err(e) => {
                reason = Some(format!(
                    "no RSS context ({e}): every RoCE flow goes to queue 0"
                ));
                RuleAction::Queue(0)
            }
        }
    };
    let served_family = if req.ipv6 {
        FlowFamily::Udp6
    } else {
        FlowFamily::Udp4
    };
    let other = if req.ipv6 {
        FlowFamily::Udp4
    } else {
        FlowFamily::Udp6
    };
    for family in [served_family, other] {
        let rule = UdpPortRule {
            family,
            dst_port: ROCE_V2_PORT,
            action,
        };
        let at = if table.special_locations {
            Some(RuleLocation::Any)
        } else {
            // As ethtool does: the last free location (lowest priority).
            (0..table.size)
                .rev()
                .find(|l| !used.contains(l))
                .map(RuleLocation::At)
        };
        let result = match at {
            Some(at) => ops.insert_rule(&rule, at),
            None => Err(EthtoolError::Failed {
                iface: req.iface.clone(),
                what: "inserting an ntuple rule",
                source: std::io::Error::other("the rule table is full"),
            }),
        };
        match result {
            Ok(loc) => {
                used.push(loc);
                inst.rules.push((loc, rule));
                if let Err(e) = write_state(path, &req.iface, &inst) {
                    undo(&mut inst);
                    return Err(Failure::State(e));
                }
            }
            Err(e) if family == served_family => {
                undo(&mut inst);
                let hint = if matches!(e, EthtoolError::Failed { .. }) {
                    format!(
                        " (if the NIC has ntuple filters, enable them: `ethtool -K {} ntuple on`)",
                        req.iface
                    )
                } else {
                    String::new()
                };
                return Err(Failure::Nic(format!("{e}{hint}")));
            }
            // The other family's rule is a bonus.
            Err(_) => {}
        }
    }
    Ok((inst, reason))
}

/// Removes what the state file at `path` lists if the process that wrote
/// it is gone; refuses if it still runs.
fn recover(
    ops: &dyn SteerOps,
    req: &SteerRequest,
    path: &Path,
    notes: &mut Vec<String>,
) -> Result<(), SteerError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(source) => {
            return Err(SteerError::State {
                path: path.display().to_string(),
                source,
            })
        }
    };
    let remove_file = || {
        std::fs::remove_file(path).map_err(|source| SteerError::State {
            path: path.display().to_string(),
            source,
        })
    };
    let Some(st) = parse_state(&text) else {
        notes.push(format!(
            "ignored the unreadable steering state file {}",
            path.display()
        ));
        return remove_file();
    };
    if process_alive(st.pid, st.start_time) {
        return Err(SteerError::InUse {
            iface: req.iface.clone(),
            pid: st.pid,
            path: path.display().to_string(),
        });
    }
    let mut done = Vec::new();
    for (loc, rule) in &st.installed.rules {
        match ops.rule(*loc) {
            Ok(Some(r)) if r == *rule => match ops.delete_rule(*loc) {
                Ok(()) => done.push(format!(
                    "removed its {} rule at location {loc}",
                    rule.family.name()
                )),
                Err(e) => done.push(format!("could not remove its rule at location {loc}: {e}")),
            },
            Ok(_) => done.push(format!(
                "left location {loc} alone (it no longer holds that run's rule)"
            )),
            Err(e) => done.push(format!("could not check its rule at location {loc}: {e}")),
        }
    }
    if let Some((id, q)) = st.installed.context {
        match ops.rss_indirection(id) {
            Ok(t) if !t.is_empty() && t.iter().enumerate().all(|(i, &x)| x == i as u32 % q) => {
                match ops.delete_rss_context(id) {
                    Ok(()) => done.push(format!("removed its RSS context {id}")),
                    Err(e) => done.push(format!("could not remove its RSS context {id}: {e}")),
                }
            }
            Ok(_) => done.push(format!(
                "left RSS context {id} alone (its table changed since)"
            )),
            Err(e) => done.push(format!("could not check its RSS context {id}: {e}")),
        }
    }
    remove_file()?;
    notes.push(format!(
        "a previous roce-xdp (pid {}) on {} exited without removing its steering: {}",
        st.pid,
        req.iface,
        if done.is_empty() {
            "it listed nothing".to_string()
        } else {
            done.join("; ")
        }
    ));
    Ok(())
}

#[cfg(test)]
mod tests;
