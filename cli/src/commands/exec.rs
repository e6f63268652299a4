//! `roce-xdp exec --iface IF [--queues Q] [--mode M] -- PROGRAM ARGS...`:
//! runs an unmodified, dynamically linked verbs program on the engine. It
//! puts the drop-in `libibverbs.so.1` (crate `engine/ibverbs`) first on
//! `LD_LIBRARY_PATH`, passes the configuration in the `ROCE_XDP_*`
//! variables the drop-in reads, and replaces itself with the program
//! (docs/verbs-drop-in.md).
//!
//! The drop-in is the staticlib `libroce_xdp_ibverbs.a` (built next to this
//! binary by `cargo build --release -p roce-xdp-ibverbs`) linked with
//! rdma-core's symbol versions (`engine/ibverbs/libibverbs.map`) by `cc`;
//! `exec` links it on first use into `roce-xdp-ibverbs/` beside the archive,
//! again whenever the archive is newer. `ROCE_XDP_IBVERBS_DIR` names a
//! directory holding a ready `libibverbs.so.1` instead.
//!
//! The drop-in `librdmacm.so.1` (crate `engine/rdmacm`, archive
//! `libroce_xdp_rdmacm.a` from `cargo build --release -p
//! roce-xdp-rdmacm`) is linked the same way into the same directory,
//! against the drop-in `libibverbs.so.1` (docs/rdma-cm-drop-in.md); without
//! its archive, RDMA CM programs find the system's librdmacm.
//!
//! Before it becomes the program, `exec` moves into a private mount
//! namespace where the device also exists as files, for programs that look
//! for it under /dev/infiniband and /sys/class/infiniband
//! (`exec/discovery.rs`); without CAP_SYS_ADMIN it says so and runs the
//! program without them.

mod discovery;
mod mount_ns;

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context as _};
use clap::{Args, ValueEnum};

use crate::common::args::ShareArg;
use crate::common::steering::SteerArg;
use crate::errors::UserError;

/// The version script the drop-in is linked with.
const VERSION_SCRIPT: &str = include_str!("../../../engine/ibverbs/libibverbs.map");
/// The archive cargo builds for the drop-in's crate.
const ARCHIVE: &str = "libroce_xdp_ibverbs.a";
/// The version script and archive of the drop-in librdmacm.
const RDMACM_VERSION_SCRIPT: &str = include_str!("../../../engine/rdmacm/librdmacm.map");
const RDMACM_ARCHIVE: &str = "libroce_xdp_rdmacm.a";
/// Where a prebuilt drop-in lives (overrides linking one).
const ENV_DIR: &str = "ROCE_XDP_IBVERBS_DIR";

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Mode {
    Auto,
    Native,
    Generic,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ZeroCopyArg {
    Auto,
    On,
    Off,
}

/// Options of `roce-xdp exec`.
#[derive(Debug, Args)]
pub struct ExecArgs {
    /// Interface the program's engine attaches to.
    #[arg(short = 'd', long = "iface", value_name = "IF")]
    pub iface: String,
    /// The interface queue the program's engine owns (one queue per
    /// program: `N`, or `N-N`).
    #[arg(long = "queues", value_name = "Q", default_value = "0")]
    pub queues: String,
    /// XDP attach mode.
    #[arg(long = "mode", value_enum, default_value = "auto")]
    pub mode: Mode,
    /// AF_XDP zero-copy.
    #[arg(long = "zero-copy", value_enum, default_value = "auto")]
    pub zero_copy: ZeroCopyArg,
    /// Replace an XDP program another tool attached, and start even if
    /// RoCE may reach RX queues without an engine (as the tools' --force).
    #[arg(long = "force")]
    pub force: bool,
    /// How RoCE reaches the program's queue when the interface has more RX
    /// queues: ntuple rules where the NIC has them (auto), required
    /// (ntuple), or nothing (off); docs/queue-coverage.md.
    #[arg(long = "steer", value_enum, default_value_t = SteerArg::Auto)]
    pub steer: SteerArg,
    /// Attach to the interface's shared engine (`roce-xdp service`): when
    /// one runs (auto, the default), always (fail without one), or never
    /// (the program's engine owns the queue). Sets ROCE_XDP_SHARE;
    /// without this option the variable as set (default auto) holds.
    #[arg(long = "share", value_enum)]
    pub share: Option<ShareArg>,
    /// The program and its arguments (after `--`).
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "PROGRAM"
    )]
    pub program: Vec<OsString>,
}

/// One queue from `N` or `N-N`.
fn one_queue(s: &str) -> Result<u32, UserError> {
    let bad = || {
        UserError::Usage(format!(
            "--queues {s}: the drop-in serves one queue per program; give one queue number, e.g. --queues 0"
        ))
    };
    let (a, b) = s.split_once('-').unwrap_or((s, s));
    let (a, b): (u32, u32) = (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
    if a != b {
        return Err(bad());
    }
    Ok(a)
}

/// The directory holding `libibverbs.so.1`: `ROCE_XDP_IBVERBS_DIR`, or
/// the drop-in linked (when missing or stale) beside this binary.
fn drop_in_dir() -> anyhow::Result<PathBuf> {
    if let Some(d) = std::env::var_os(ENV_DIR) {
        let d = PathBuf::from(d);
        if !d.join("libibverbs.so.1").exists() {
            bail!(UserError::Usage(format!(
                "{ENV_DIR}={} holds no libibverbs.so.1",
                d.display()
            )));
        }
        return Ok(d);
    }
    let exe = std::env::current_exe().context("locating the roce-xdp binary")?;
    let bin = exe.parent().unwrap_or(Path::new("."));
    let archive = bin.join(ARCHIVE);
    let dir = bin.join("roce-xdp-ibverbs");
    let so = dir.join("libibverbs.so.1");
    match (modified(&archive), modified(&so)) {
        (None, Some(_)) => {}
        (None, None) => bail!(UserError::Usage(format!(
            "the drop-in libibverbs is not built: run `cargo build --release -p roce-xdp-ibverbs` (it puts {ARCHIVE} beside {}), or set {ENV_DIR}",
            exe.display()
        ))),
        (Some(a), Some(s)) if s >= a => {}
        _ => link(&archive, &dir)?,
    }
    let rdmacm = bin.join(RDMACM_ARCHIVE);
    if let Some(a) = modified(&rdmacm) {
        if modified(&dir.join("librdmacm.so.1")).is_none_or(|s| s < a) {
            link_rdmacm(&rdmacm, &dir)?;
        }
    }
    Ok(dir)
}

fn modified(p: &Path) -> Option<std::time::SystemTime> {
    std::fs::metadata(p).and_then(|m| m.modified()).ok()
}

/// Links the drop-in librdmacm's archive into `dir/librdmacm.so.1` with
/// rdma-core's symbol versions, against `dir/libibverbs.so.1` (the verbs
/// it calls are the drop-in's; the engine lives there, once).
fn link_rdmacm(archive: &Path, dir: &Path) -> anyhow::Result<()> {
    link_library(
        "librdmacm.so.1",
        RDMACM_VERSION_SCRIPT,
        archive,
        dir,
        &[dir.join("libibverbs.so.1")],
    )
}

/// Links the archive into `dir/libibverbs.so.1` with rdma-core's symbol
/// versions (a staticlib through `cc`: rustc's own version script on a
/// cdylib cannot carry version nodes).
fn link(archive: &Path, dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    link_library("libibverbs.so.1", VERSION_SCRIPT, archive, dir, &[])
}

/// Links `archive` whole into the shared object `dir/soname` with the
/// version script `script` and the shared objects `with`. Every file is
/// written under a name of this process first and renamed into place, so
/// programs started by other `exec`s at the same moment (tests run several
/// at once) never see a half-written library or version script.
fn link_library(
    soname: &str,
    script: &str,
    archive: &Path,
    dir: &Path,
    with: &[PathBuf],
) -> anyhow::Result<()> {
    let pid = std::process::id();
    let map = dir.join(format!("{soname}.map.{pid}"));
    std::fs::write(&map, script).with_context(|| format!("writing {}", map.display()))?;
    let tmp = dir.join(format!("{soname}.{pid}"));
    let mut version_script = OsString::from("-Wl,--version-script=");
    version_script.push(&map);
    let out = Command::new("cc")
        .args(["-shared", "-o"])
        .arg(&tmp)
        .arg(format!("-Wl,-soname,{soname}"))
        .arg(version_script)
        .arg("-Wl,--whole-archive")
        .arg(archive)
        .args(["-Wl,--no-whole-archive", "-Wl,--gc-sections"])
        .args(with)
        .args(["-lpthread", "-ldl", "-lm", "-lrt", "-lgcc_s"])
        .output()
        .with_context(|| {
            format!("running cc to link the drop-in {soname} (install a C compiler: apt-get install gcc)")
        });
    let _ = std::fs::remove_file(&map);
    let out = out?;
    if !out.status.success() {
        let _ = std::fs::remove_file(&tmp);
        bail!(
            "linking {} failed:\n{}",
            tmp.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    std::fs::rename(&tmp, dir.join(soname))
        .with_context(|| format!("installing the drop-in {soname}"))?;
    Ok(())
}

pub fn run(a: ExecArgs) -> anyhow::Result<()> {
    let queue = one_queue(&a.queues)?;
    if !Path::new("/sys/class/net").join(&a.iface).exists() {
        bail!(UserError::NoSuchInterface(a.iface));
    }
    let dir = drop_in_dir()?;
    let mut path = dir.into_os_string();
    if let Some(old) = std::env::var_os("LD_LIBRARY_PATH").filter(|p| !p.is_empty()) {
        path.push(":");
        path.push(old);
    }
    let mode = match a.mode {
        Mode::Auto => "auto",
        Mode::Native => "native",
        Mode::Generic => "generic",
    };
    let zero_copy = match a.zero_copy {
        ZeroCopyArg::Auto => "auto",
        ZeroCopyArg::On => "on",
        ZeroCopyArg::Off => "off",
    };
    let (program, args) = a.program.split_first().expect("clap requires PROGRAM");
    if let discovery::View::Unavailable(why) = discovery::prepare(&a.iface)? {
        eprintln!(
            "roce-xdp exec: discovery by filesystem is unavailable ({why:#}): {} finds {} through ibv_get_device_list only",
            program.to_string_lossy(),
            roce_xdp_ibverbs::DEVICE_NAME
        );
    }
    let mut cmd = Command::new(program);
    if let Some(share) = a.share {
        cmd.env(
            "ROCE_XDP_SHARE",
            match share {
                ShareArg::Auto => "auto",
                ShareArg::Always => "always",
                ShareArg::Never => "never",
            },
        );
    }
    let err = cmd
        .args(args)
        .env("LD_LIBRARY_PATH", path)
        .env("ROCE_XDP_IFACE", &a.iface)
        .env("ROCE_XDP_QUEUE", queue.to_string())
        .env("ROCE_XDP_MODE", mode)
        .env("ROCE_XDP_ZERO_COPY", zero_copy)
        .env("ROCE_XDP_FORCE", if a.force { "1" } else { "0" })
        .env(
            "ROCE_XDP_STEER",
            match a.steer {
                SteerArg::Auto => "auto",
                SteerArg::Ntuple => "ntuple",
                SteerArg::Off => "off",
            },
        )
        .exec();
    Err(anyhow::Error::new(err).context(format!("starting {}", program.to_string_lossy())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn takes_one_queue() {
        assert_eq!(one_queue("3").unwrap(), 3);
        assert_eq!(one_queue("2-2").unwrap(), 2);
        let e = one_queue("0-3").unwrap_err().to_string();
        assert!(e.contains("one queue per program"), "{e}");
    }

    #[test]
    fn the_version_script_has_rdma_cores_nodes() {
        for node in [
            "IBVERBS_1.0 {",
            "IBVERBS_1.1 {",
            "IBVERBS_1.8 {",
            "IBVERBS_PRIVATE_34 {",
        ] {
            assert!(VERSION_SCRIPT.contains(node), "{node}");
        }
        for node in ["RDMACM_1.0 {", "} RDMACM_1.2;"] {
            assert!(RDMACM_VERSION_SCRIPT.contains(node), "{node}");
        }
    }
}
