//! The drop-in `libibverbs.so.1` against the system's, rdma-core 44 as
//! Debian 12 ships it: the same exported symbols under the same version
//! nodes (`objdump -T`), and every ELF file of Debian's verbs packages that
//! links libibverbs resolves all its symbols against the drop-in as
//! against the system library (`ldd -r`, which binds every symbol now, as
//! `LD_BIND_NOW=1` does). Needs the packages scripts/setup-deps.sh
//! installs and the drop-in's archive (`cargo build --release -p
//! roce-xdp-ibverbs`); `roce-xdp exec` links the shared object.

mod drop_in;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use drop_in::exports;

const SYSTEM: &str = "/usr/lib/x86_64-linux-gnu/libibverbs.so.1";

/// The Debian 12 packages whose programs and libraries link libibverbs:
/// rdma-core's own (its providers, pyverbs, librdmacm and its tools),
/// perftest, qperf, libfabric, UCX and Open MPI.
const PACKAGES: &[&str] = &[
    "ibverbs-utils",
    "ibverbs-providers",
    "python3-pyverbs",
    "librdmacm1",
    "rdmacm-utils",
    "perftest",
    "qperf",
    "libfabric1",
    "libfabric-bin",
    "libucx0",
    "ucx-utils",
    "libopenmpi3",
    "openmpi-bin",
];

fn run(cmd: &mut Command) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("running {cmd:?}: {e}"));
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The directory holding the drop-in `libibverbs.so.1`, linked by
/// `roce-xdp exec` (on `lo`, running `true`: only the link matters).
fn drop_in_dir() -> PathBuf {
    let bin = Path::new(env!("CARGO_BIN_EXE_roce-xdp"));
    assert!(
        bin.with_file_name("libroce_xdp_ibverbs.a").exists(),
        "the drop-in's archive is missing: cargo build --release -p roce-xdp-ibverbs"
    );
    let out = Command::new(bin)
        .args(["exec", "--iface", "lo", "--", "true"])
        .output()
        .expect("running roce-xdp exec");
    assert!(
        out.status.success(),
        "roce-xdp exec failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dir = bin.with_file_name("roce-xdp-ibverbs");
    assert!(dir.join("libibverbs.so.1").exists());
    dir
}

#[test]
fn exports_every_symbol_and_version_of_the_system_libibverbs() {
    assert!(
        Path::new(SYSTEM).exists(),
        "{SYSTEM} is missing: run scripts/setup-deps.sh (libibverbs1)"
    );
    let system = exports(Path::new(SYSTEM));
    let ours = exports(&drop_in_dir().join("libibverbs.so.1"));
    // rdma-core 44: 193 entries, the 33 IBVERBS_1.0 compat versions and
    // the 72 symbols of IBVERBS_PRIVATE_34 among them.
    assert!(system.len() > 150, "{SYSTEM}: {} exports", system.len());
    let missing: Vec<_> = system.difference(&ours).collect();
    // The drop-in's own exports, for the drop-in librdmacm: the GSI, the
    // CM counters' reader and QP 1 shared through a service
    // (docs/rdma-cm-drop-in.md), under a private
    // node (which objdump lists as a symbol of its own too).
    let node = "ROCE_XDP_PRIVATE_1".to_string();
    let private = [
        (node.clone(), "roce_xdp_create_gsi_qp".to_string()),
        (node.clone(), "roce_xdp_set_cm_counters".to_string()),
        (node.clone(), "roce_xdp_share_cm".to_string()),
        (node.clone(), node),
    ];
    for p in &private {
        assert!(ours.contains(p), "the drop-in lacks {p:?}");
    }
    let extra: Vec<_> = ours
        .difference(&system)
        .filter(|e| !private.contains(e))
        .collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "the drop-in lacks {missing:?} and adds {extra:?}"
    );
    assert!(ours.contains(&("(IBVERBS_1.0)".into(), "ibv_create_qp".into())));
    assert!(ours.contains(&("IBVERBS_1.13".into(), "ibv_is_fork_initialized".into())));
}

/// What `ldd -r FILE` reports missing with `LD_LIBRARY_PATH=dir` (or the
/// system library with None).
fn unresolved(file: &Path, dir: Option<&Path>) -> BTreeSet<String> {
    let mut c = Command::new("ldd");
    c.arg("-r").arg(file).env_remove("LD_LIBRARY_PATH");
    if let Some(d) = dir {
        c.env("LD_LIBRARY_PATH", d);
    }
    run(&mut c)
        .lines()
        .filter(|l| l.contains("undefined symbol") || l.contains("not found"))
        .map(str::to_string)
        .collect()
}

#[test]
fn every_debian_verbs_binary_resolves_against_the_drop_in() {
    let dir = drop_in_dir();
    let mut checked = 0;
    let mut failures = Vec::new();
    for pkg in PACKAGES {
        let files = run(Command::new("dpkg").args(["-L", pkg]));
        assert!(
            !files.contains("is not installed"),
            "{pkg} is not installed: run scripts/setup-deps.sh"
        );
        for f in files.lines().map(Path::new).filter(|p| p.is_file()) {
            let is_elf = std::fs::read(f).is_ok_and(|b| b.starts_with(b"\x7fELF"));
            if !is_elf {
                continue;
            }
            let ldd = run(Command::new("ldd").arg(f));
            if !ldd.contains("libibverbs.so.1") {
                continue;
            }
            let ours = unresolved(f, Some(&dir));
            let theirs = unresolved(f, None);
            let new: Vec<_> = ours.difference(&theirs).collect();
            if !new.is_empty() {
                failures.push(format!("{} ({pkg}): {new:?}", f.display()));
            }
            checked += 1;
        }
    }
    // 86 files on Debian 12 with the packages above.
    assert!(checked >= 40, "only {checked} files link libibverbs");
    assert!(
        failures.is_empty(),
        "{} of {checked} files do not resolve against the drop-in:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
