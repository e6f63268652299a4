//! Loads the `roce_steer` XDP program (ebpf/roce_steer.c, compiled object
//! committed beside it and embedded here) with aya, attaches it to an
//! interface through a **bpf_link**, fills the XSKMAP, reads the per-CPU
//! counters and sets the test impairments.
//!
//! Attachment is always link-based: the link is a file descriptor owned by
//! this process, so the kernel detaches the program when the process exits,
//! however it exits (even SIGKILL). aya 0.14 falls back to a netlink
//! attachment (which would outlive the process) when `BPF_LINK_CREATE`
//! fails with EINVAL; [`SteerProgram::attach`] refuses that fallback.

use std::os::fd::AsRawFd;
use std::process::Command;

use aya::maps::{Array, MapData, PerCpuArray, XskMap};
use aya::programs::links::FdLink;
use aya::programs::{ProgramError, Xdp, XdpMode};
use aya::{Ebpf, EbpfError};
use thiserror::Error;

/// The compiled XDP object, embedded (8-byte aligned, as the ELF parser needs).
static ROCE_STEER_OBJ: &[u8] = aya::include_bytes_aligned!("../../../ebpf/roce_steer.o");

/// Number of entries of the program's XSKMAP (queues 0..63).
pub const MAX_QUEUES: u32 = 64;

/// How to attach the program.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AttachMode {
    /// Native (driver) mode, falling back to generic mode if the driver
    /// has no XDP support.
    #[default]
    Auto,
    /// Native (driver) mode only.
    Native,
    /// Generic (SKB) mode only.
    Generic,
}

/// The mode the program was actually attached in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttachedMode {
    Native,
    Generic,
}

impl std::fmt::Display for AttachedMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            AttachedMode::Native => "native",
            AttachedMode::Generic => "generic",
        })
    }
}

/// Counters of the XDP program, summed over CPUs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SteerCounters {
    /// Frames the program ran on.
    pub seen: u64,
    /// RoCE frames redirected to an AF_XDP socket.
    pub redirected: u64,
    /// Non-RoCE frames passed to the kernel.
    pub passed: u64,
    /// RoCE frames for a queue with no socket bound (passed to the kernel).
    pub no_socket: u64,
    /// RoCE frames dropped by the drop impairment.
    pub dropped_impairment: u64,
    /// RoCE frames marked CE by the marking impairment.
    pub ce_marked: u64,
}

/// Test impairments applied by the XDP program to RoCE frames it receives.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Impairment {
    /// Drop probability in parts per million.
    pub drop_ppm: u32,
    /// CE-marking probability in parts per million (ECN-capable frames only).
    pub ce_ppm: u32,
}

impl Impairment {
    /// Converts a probability in 0.0..=1.0 into parts per million.
    pub fn ppm(probability: f64) -> u32 {
        (probability.clamp(0.0, 1.0) * 1e6).round() as u32
    }
}

/// Why the XDP program could not be loaded, attached or configured.
#[derive(Debug, Error)]
pub enum LoaderError {
    #[error("loading the XDP program needs CAP_BPF and CAP_NET_ADMIN: run as root ({0})")]
    NeedsPrivileges(String),
    #[error("the kernel rejected the XDP program: {0}")]
    Load(String),
    #[error("no network interface named {0:?} (in this network namespace): check `ip link`")]
    NoSuchInterface(String),
    #[error("an XDP program is already attached to {0}: detach it (`ip link set dev {0} xdp off`) or use --force")]
    AlreadyAttached(String),
    #[error("{ifname} does not support XDP in {mode} mode ({source}): try --mode generic")]
    ModeUnsupported {
        ifname: String,
        mode: AttachedMode,
        source: std::io::Error,
    },
    #[error("this kernel cannot attach XDP through a bpf_link (needs Linux >= 5.9); refusing a netlink attachment that would outlive the process")]
    NoBpfLink,
    #[error("attaching XDP to {ifname} failed: {source}")]
    Attach {
        ifname: String,
        source: std::io::Error,
    },
    #[error("queue {0} is out of range: the XSKMAP has {MAX_QUEUES} entries")]
    QueueOutOfRange(u32),
    #[error("BPF map {map} operation failed: {detail}")]
    Map { map: &'static str, detail: String },
}

/// The loaded `roce_steer` program attached to one interface. Dropping it
/// closes the link and detaches the program.
pub struct SteerProgram {
    ebpf: Ebpf,
    link: Option<FdLink>,
    ifname: String,
    mode: AttachedMode,
}

impl std::fmt::Debug for SteerProgram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SteerProgram")
            .field("ifname", &self.ifname)
            .field("mode", &self.mode)
            .finish_non_exhaustive()
    }
}

fn is_perm(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EPERM) | Some(libc::EACCES))
}

impl SteerProgram {
    /// Loads the program and attaches it to `ifname` (resolved in the
    /// calling thread's network namespace). With `force`, an XDP program
    /// attached by netlink (e.g. `ip link set dev IF xdp obj ...`) is
    /// removed first; a program held by another process's bpf_link cannot
    /// be removed and yields [`LoaderError::AlreadyAttached`].
    pub fn attach(ifname: &str, mode: AttachMode, force: bool) -> Result<Self, LoaderError> {
        let mut ebpf = Ebpf::load(ROCE_STEER_OBJ).map_err(|e| match &e {
            EbpfError::MapError(aya::maps::MapError::CreateError { io_error, .. })
                if is_perm(io_error) =>
            {
                LoaderError::NeedsPrivileges(e.to_string())
            }
            _ => LoaderError::Load(e.to_string()),
        })?;
        let prog: &mut Xdp = ebpf
            .program_mut("roce_steer")
            .ok_or_else(|| LoaderError::Load("program roce_steer missing from object".into()))?
            .try_into()
            .map_err(|e: ProgramError| LoaderError::Load(e.to_string()))?;
        prog.load().map_err(|e| match &e {
            ProgramError::LoadError { io_error, .. } if is_perm(io_error) => {
                LoaderError::NeedsPrivileges(e.to_string())
            }
            _ => LoaderError::Load(e.to_string()),
        })?;

        if force {
            // Best effort: remove netlink-attached programs in every mode.
            for kind in ["xdpgeneric", "xdpdrv"] {
                let _ = Command::new("ip")
                    .args(["link", "set", "dev", ifname, kind, "off"])
                    .output();
            }
        }

        let tries: &[AttachedMode] = match mode {
            AttachMode::Auto => &[AttachedMode::Native, AttachedMode::Generic],
            AttachMode::Native => &[AttachedMode::Native],
            AttachMode::Generic => &[AttachedMode::Generic],
        };
        let mut last_err = None;
        for &m in tries {
            let xdp_mode = match m {
                AttachedMode::Native => XdpMode::Driver,
                AttachedMode::Generic => XdpMode::Skb,
            };
            match prog.attach(ifname, xdp_mode) {
                Ok(id) => {
                    let link = prog
                        .take_link(id)
                        .map_err(|e| LoaderError::Load(e.to_string()))?;
                    // Refuse aya's netlink fallback: dropping the XdpLink
                    // detaches it again.
                    let link: FdLink = link.try_into().map_err(|_| LoaderError::NoBpfLink)?;
                    return Ok(SteerProgram {
                        ebpf,
                        link: Some(link),
                        ifname: ifname.to_string(),
                        mode: m,
                    });
                }
                Err(ProgramError::UnknownInterface { .. }) => {
                    return Err(LoaderError::NoSuchInterface(ifname.to_string()))
                }
                Err(ProgramError::SyscallError(se)) => {
                    let errno = se.io_error.raw_os_error();
                    match errno {
                        Some(libc::EBUSY) | Some(libc::EEXIST) => {
                            return Err(LoaderError::AlreadyAttached(ifname.to_string()))
                        }
                        Some(libc::EPERM) | Some(libc::EACCES) => {
                            return Err(LoaderError::NeedsPrivileges(se.to_string()))
                        }
                        Some(libc::ENODEV) => {
                            return Err(LoaderError::NoSuchInterface(ifname.to_string()))
                        }
                        Some(libc::EOPNOTSUPP) => {
                            last_err = Some(LoaderError::ModeUnsupported {
                                ifname: ifname.to_string(),
                                mode: m,
                                source: se.io_error,
                            });
                        }
                        _ => {
                            last_err = Some(LoaderError::Attach {
                                ifname: ifname.to_string(),
                                source: se.io_error,
                            })
                        }
                    }
                }
                Err(e) => {
                    last_err = Some(LoaderError::Attach {
                        ifname: ifname.to_string(),
                        source: std::io::Error::other(e.to_string()),
                    })
                }
            }
        }
        Err(last_err.unwrap_or(LoaderError::NoBpfLink))
    }

    /// The interface the program is attached to.
    pub fn ifname(&self) -> &str {
        &self.ifname
    }

    /// The mode the program was attached in.
    pub fn mode(&self) -> AttachedMode {
        self.mode
    }

    fn xsks(&mut self) -> Result<XskMap<&mut MapData>, LoaderError> {
        let map = self.ebpf.map_mut("xsks_map").ok_or(LoaderError::Map {
            map: "xsks_map",
            detail: "missing from object".into(),
        })?;
        XskMap::try_from(map).map_err(|e| LoaderError::Map {
            map: "xsks_map",
            detail: e.to_string(),
        })
    }

    /// Steers RoCE frames received on `queue` to the AF_XDP socket `fd`.
    pub fn register_socket(&mut self, queue: u32, fd: &impl AsRawFd) -> Result<(), LoaderError> {
        if queue >= MAX_QUEUES {
            return Err(LoaderError::QueueOutOfRange(queue));
        }
        let raw = fd.as_raw_fd();
        self.xsks()?
            .set(queue, raw, 0)
            .map_err(|e| LoaderError::Map {
                map: "xsks_map",
                detail: e.to_string(),
            })
    }

    /// Stops steering `queue` (its RoCE frames then go to the kernel and
    /// count as `no_socket`).
    pub fn unregister_socket(&mut self, queue: u32) -> Result<(), LoaderError> {
        if queue >= MAX_QUEUES {
            return Err(LoaderError::QueueOutOfRange(queue));
        }
        self.xsks()?.unset(queue).map_err(|e| LoaderError::Map {
            map: "xsks_map",
            detail: e.to_string(),
        })
    }

    /// Reads the program's counters, summed over CPUs.
    pub fn counters(&self) -> Result<SteerCounters, LoaderError> {
        let map = self.ebpf.map("counters").ok_or(LoaderError::Map {
            map: "counters",
            detail: "missing from object".into(),
        })?;
        let arr: PerCpuArray<&MapData, u64> =
            PerCpuArray::try_from(map).map_err(|e| LoaderError::Map {
                map: "counters",
                detail: e.to_string(),
            })?;
        let mut v = [0u64; 6];
        for (i, slot) in v.iter_mut().enumerate() {
            let per_cpu = arr.get(&(i as u32), 0).map_err(|e| LoaderError::Map {
                map: "counters",
                detail: e.to_string(),
            })?;
            *slot = per_cpu.iter().sum();
        }
        Ok(SteerCounters {
            seen: v[0],
            redirected: v[1],
            passed: v[2],
            no_socket: v[3],
            dropped_impairment: v[4],
            ce_marked: v[5],
        })
    }

    /// Sets the test impairments (zero = off, the default).
    pub fn set_impairment(&mut self, imp: Impairment) -> Result<(), LoaderError> {
        let map = self.ebpf.map_mut("config").ok_or(LoaderError::Map {
            map: "config",
            detail: "missing from object".into(),
        })?;
        let mut arr: Array<&mut MapData, [u32; 2]> =
            Array::try_from(map).map_err(|e| LoaderError::Map {
                map: "config",
                detail: e.to_string(),
            })?;
        arr.set(0, [imp.drop_ppm, imp.ce_ppm], 0)
            .map_err(|e| LoaderError::Map {
                map: "config",
                detail: e.to_string(),
            })
    }

    /// Detaches the program now (dropping does the same).
    pub fn detach(mut self) {
        self.link.take();
    }
}

impl Drop for SteerProgram {
    fn drop(&mut self) {
        // Closing the link fd detaches the program.
        self.link.take();
    }
}
