//! What a program under `roce-xdp exec` finds on the filesystem: the
//! device's /dev and /sys entries, with the values the drop-in's verbs
//! report, in a mount namespace of its own (nothing for other processes),
//! and UCX listing the device. Each test makes a network namespace holding
//! a veth pair and runs `exec` there on one end. Needs root, the drop-in
//! built (`cargo build --release -p roce-xdp-ibverbs`), ibverbs-utils and
//! ucx-utils (scripts/setup-deps.sh).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::net::Ipv6Addr;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

use roce_xdp_ibverbs::identity;

static COUNTER: AtomicU32 = AtomicU32::new(0);

fn run_sh(script: &str) -> Output {
    Command::new("sh")
        .args(["-ec", script])
        .output()
        .expect("running sh")
}

/// Namespace `xd<pid>n<k>` holding veth `xd<pid>a<k>` (10.56.<k>.1/24)
/// and its peer `xd<pid>b<k>`.
struct Netns {
    name: String,
    iface: String,
    ip: String,
}

impl Netns {
    fn create() -> Netns {
        let pid = std::process::id() % 100_000;
        let k = COUNTER.fetch_add(1, Ordering::Relaxed);
        let n = Netns {
            name: format!("xd{pid}n{k}"),
            iface: format!("xd{pid}a{k}"),
            ip: format!("10.56.{k}.1"),
        };
        let (ns, a) = (&n.name, &n.iface);
        let out = run_sh(&format!(
            "ip netns add {ns}
             ip -n {ns} link add {a} type veth peer name xd{pid}b{k}
             ip -n {ns} addr add {}/24 dev {a}
             for l in lo {a} xd{pid}b{k}; do ip -n {ns} link set $l up; done",
            n.ip
        ));
        assert!(
            out.status.success(),
            "setting up {ns}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        n
    }

    /// `roce-xdp exec --iface IF -- PROGRAM...` in the namespace, run as
    /// `prefix` (e.g. setpriv) says.
    fn exec(&self, prefix: &[&str], program: &[&str]) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.name])
            .args(prefix)
            .arg(env!("CARGO_BIN_EXE_roce-xdp"))
            .args(["exec", "--iface", &self.iface, "--"])
            .args(program)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c
    }

    fn exec_ok(&self, program: &[&str]) -> String {
        let out = self.exec(&[], program).output().expect("running exec");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "{program:?} failed ({}):\n{text}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        text
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .output();
    }
}

fn drop_in_built() {
    let bin = Path::new(env!("CARGO_BIN_EXE_roce-xdp"));
    let archive = bin.with_file_name("libroce_xdp_ibverbs.a");
    assert!(
        archive.exists(),
        "{} is missing: cargo build --release -p roce-xdp-ibverbs",
        archive.display()
    );
}

/// Device files the view has, below /sys/class.
const FILES: &[&str] = &[
    "infiniband/roce-xdp0/node_type",
    "infiniband/roce-xdp0/node_guid",
    "infiniband/roce-xdp0/sys_image_guid",
    "infiniband/roce-xdp0/fw_ver",
    "infiniband/roce-xdp0/hca_type",
    "infiniband/roce-xdp0/node_desc",
    "infiniband/roce-xdp0/ports/1/state",
    "infiniband/roce-xdp0/ports/1/phys_state",
    "infiniband/roce-xdp0/ports/1/link_layer",
    "infiniband/roce-xdp0/ports/1/rate",
    "infiniband/roce-xdp0/ports/1/lid",
    "infiniband/roce-xdp0/ports/1/sm_lid",
    "infiniband/roce-xdp0/ports/1/lid_mask_count",
    "infiniband/roce-xdp0/ports/1/cap_mask",
    "infiniband/roce-xdp0/ports/1/pkeys/0",
    "infiniband/roce-xdp0/ports/1/gids/0",
    "infiniband/roce-xdp0/ports/1/gids/1",
    "infiniband/roce-xdp0/ports/1/gid_attrs/types/0",
    "infiniband/roce-xdp0/ports/1/gid_attrs/types/1",
    "infiniband/roce-xdp0/ports/1/gid_attrs/ndevs/0",
    "infiniband/roce-xdp0/ports/1/gid_attrs/ndevs/1",
    "infiniband_verbs/abi_version",
    "infiniband_verbs/uverbs-roce-xdp0/ibdev",
    "infiniband_verbs/uverbs-roce-xdp0/abi_version",
    "infiniband_verbs/uverbs-roce-xdp0/dev",
];

/// `path=first line` for each of FILES, as the program reads them.
fn read_view(n: &Netns) -> BTreeMap<String, String> {
    let script = format!(
        "cd /sys/class; for f in {}; do printf '%s=' $f; head -n 1 $f; done",
        FILES.join(" ")
    );
    n.exec_ok(&["sh", "-c", &script])
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The value after `key` on `text`'s line holding it (ibv_devinfo -v).
fn field<'a>(text: &'a str, key: &str) -> &'a str {
    text.lines()
        .find_map(|l| l.split_once(key).map(|(_, v)| v.trim()))
        .unwrap_or_else(|| panic!("no {key} in:\n{text}"))
}

fn gid(sysfs: &str) -> Ipv6Addr {
    assert_eq!(sysfs.len(), 39, "8 groups of 4 hex digits: {sysfs}");
    sysfs.parse().unwrap()
}

#[test]
#[ignore = "needs root"]
fn the_program_sees_the_device_files_with_the_verbs_values() {
    drop_in_built();
    let n = Netns::create();
    let v = read_view(&n);
    for f in FILES {
        assert!(v.contains_key(*f), "{f} missing from the view: {v:#?}");
    }
    let ifc = n.iface.as_str();
    for (f, want) in [
        ("infiniband/roce-xdp0/node_type", "1: CA"),
        ("infiniband/roce-xdp0/ports/1/state", "4: ACTIVE"),
        ("infiniband/roce-xdp0/ports/1/phys_state", "5: LinkUp"),
        ("infiniband/roce-xdp0/ports/1/link_layer", "Ethernet"),
        ("infiniband/roce-xdp0/ports/1/rate", "2.5 Gb/sec (1X SDR)"),
        ("infiniband/roce-xdp0/ports/1/lid", "0x0"),
        ("infiniband/roce-xdp0/ports/1/gid_attrs/types/0", "RoCE v2"),
        ("infiniband/roce-xdp0/ports/1/gid_attrs/types/1", "RoCE v2"),
        ("infiniband/roce-xdp0/ports/1/gid_attrs/ndevs/0", ifc),
        ("infiniband/roce-xdp0/ports/1/gid_attrs/ndevs/1", ifc),
        ("infiniband_verbs/abi_version", "6"),
        ("infiniband_verbs/uverbs-roce-xdp0/ibdev", "roce-xdp0"),
        ("infiniband_verbs/uverbs-roce-xdp0/dev", "1:3"),
    ] {
        assert_eq!(v[f], want, "{f}");
    }
    // The same GUID and GIDs as the drop-in's ibv_devinfo.
    let info = n.exec_ok(&["ibv_devinfo", "-v"]);
    let guid = &v["infiniband/roce-xdp0/node_guid"];
    assert_eq!(guid, field(&info, "node_guid:"));
    assert_eq!(guid, &v["infiniband/roce-xdp0/sys_image_guid"]);
    assert_eq!(
        v["infiniband/roce-xdp0/fw_ver"],
        field(&info, "fw_ver:"),
        "fw_ver"
    );
    for i in 0..2 {
        let verbs = field(&info, &format!("GID[  {i}]:"));
        let verbs: Ipv6Addr = verbs.trim_end_matches(", RoCE v2").parse().unwrap();
        assert_eq!(
            gid(&v[&format!("infiniband/roce-xdp0/ports/1/gids/{i}")]),
            verbs,
            "GID {i}"
        );
    }
    assert_eq!(
        gid(&v["infiniband/roce-xdp0/ports/1/gids/1"]),
        format!("::ffff:{}", n.ip).parse::<Ipv6Addr>().unwrap()
    );
    // The uverbs node opens; the netdev is under `device/net`; the host's
    // classes are still there.
    let script = format!(
        "stat -c '%F %t:%T %a' /dev/infiniband/uverbs-roce-xdp0
         : < /dev/infiniband/uverbs-roce-xdp0 > /dev/infiniband/uverbs-roce-xdp0
         cat /sys/class/infiniband/roce-xdp0/device/net/{ifc}/address
         ls /sys/class/net
         ls /sys/class/infiniband"
    );
    let out = n.exec_ok(&["sh", "-ec", &script]);
    let mut lines = out.lines();
    assert_eq!(lines.next(), Some("character special file 1:3 666"));
    let mac = lines.next().unwrap();
    let mac: Vec<u8> = mac
        .split(':')
        .map(|b| u8::from_str_radix(b, 16).unwrap())
        .collect();
    let eui = identity::eui64(mac.try_into().unwrap());
    assert_eq!(guid, &identity::guid_text(eui), "node_guid from the MAC");
    let rest: Vec<&str> = lines.collect();
    assert!(rest.contains(&ifc) && rest.contains(&"lo"), "{rest:?}");
    assert!(rest.contains(&"roce-xdp0"), "{rest:?}");
}

/// Neither the host nor the program's network namespace (another process
/// in it) has the device's files.
fn absent_outside(n: &Netns) {
    for p in [
        "/sys/class/infiniband/roce-xdp0",
        "/sys/class/infiniband_verbs/uverbs-roce-xdp0",
        "/dev/infiniband/uverbs-roce-xdp0",
    ] {
        assert!(!Path::new(p).exists(), "{p} is visible on the host");
        let out = Command::new("ip")
            .args(["netns", "exec", &n.name, "test", "-e", p])
            .status()
            .unwrap();
        assert!(!out.success(), "{p} is visible in {}", n.name);
    }
}

#[test]
#[ignore = "needs root"]
fn other_processes_see_nothing_during_and_after() {
    drop_in_built();
    let n = Netns::create();
    // The program says it sees the files, then waits for the checks
    // (until its standard input closes).
    let mut child = n
        .exec(
            &[],
            &[
                "sh",
                "-c",
                "test -e /sys/class/infiniband/roce-xdp0 && echo seen; cat > /dev/null",
            ],
        )
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "seen");
    absent_outside(&n);
    drop(child.stdin.take());
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
    absent_outside(&n);
}

#[test]
#[ignore = "needs root"]
fn without_cap_sys_admin_the_program_runs_without_the_files() {
    drop_in_built();
    let n = Netns::create();
    let nobody = [
        "setpriv",
        "--reuid",
        "65534",
        "--regid",
        "65534",
        "--clear-groups",
    ];
    let out = n
        .exec(
            &nobody,
            &[
                "sh",
                "-c",
                "test -e /sys/class/infiniband/roce-xdp0 || echo absent",
            ],
        )
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "absent");
    let err = String::from_utf8_lossy(&out.stderr);
    let notes: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("discovery by filesystem is unavailable"))
        .collect();
    assert_eq!(notes.len(), 1, "{err}");
    assert!(notes[0].contains("CAP_SYS_ADMIN"), "{err}");
}

#[test]
#[ignore = "needs root"]
fn ucx_info_lists_roce_xdp0() {
    drop_in_built();
    assert!(
        Path::new("/usr/bin/ucx_info").exists(),
        "ucx_info is missing: run scripts/setup-deps.sh (it installs ucx-utils)"
    );
    let n = Netns::create();
    let out = n.exec(&[], &["ucx_info", "-d"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        text.contains("# Memory domain: roce-xdp0"),
        "ucx_info -d lists no roce-xdp0 ({}):\n{text}\n{err}",
        out.status
    );
    assert!(text.contains("Device: roce-xdp0:1"), "{text}\n{err}");
}
