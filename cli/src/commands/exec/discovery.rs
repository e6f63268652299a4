//! The device as programs look for it on the filesystem, before or instead
//! of `ibv_get_device_list` (docs/verbs-drop-in.md, "Discovery"):
//!
//! - `/dev/infiniband/uverbs-roce-xdp0`: UCX lists a device only if this
//!   is a character device it may read and write (libuct_ib,
//!   `uct_ib_device_is_accessible`); rdma-core stats it. It is a node with
//!   /dev/null's numbers (1:3): it opens for anyone, has no driver state
//!   behind it and gives nothing back (reads end at once, ioctls fail with
//!   ENOTTY), so a library that does talk to it (rdma-core's own
//!   libibverbs, which the drop-in replaces) fails at its first command
//!   instead of touching a real device. A plain file would not pass UCX's
//!   check.
//! - `/sys/class/infiniband/roce-xdp0/...`: what UCX (GID types, the
//!   netdev of a RoCE GID, the PCI device), hwloc and Open MPI (the class
//!   directory, GUIDs, port state, LID, GIDs), rdma-core (node_type,
//!   node_guid, GIDs, P_Keys) and Mooncake read, with the values the
//!   drop-in's verbs report (`roce_xdp_ibverbs::identity`).
//! - `/sys/class/infiniband_verbs/uverbs-roce-xdp0/` (`ibdev`,
//!   `abi_version`, `dev`) and `/sys/class/infiniband_verbs/abi_version`:
//!   rdma-core's device enumeration.
//!
//! There is no kernel RDMA module behind any of it: the program runs in a
//! private mount namespace (`mount_ns.rs`) where an overlay on /dev adds
//! the node and a tmpfs on /sys/class holds the real classes (bound) and
//! the two InfiniBand ones (the host's devices, if any, plus this one).
//! sysfs cannot hold new files, and /sys/class/infiniband does not exist
//! without the module, hence the tmpfs on /sys/class itself.

use std::fs;
use std::net::{IpAddr, Ipv4Addr};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context as _};
use roce_xdp_ibverbs::identity::{self, UVERBS_NAME};
use roce_xdp_ibverbs::DEVICE_NAME;

use super::mount_ns::{self, PathHandle, PrivateNamespace, FILES_ONLY};

/// /dev/null's numbers, for the uverbs node (see the module's doc).
const UVERBS_NODE: (u32, u32) = (1, 3);
/// `IB_USER_VERBS_ABI_VERSION`: `/sys/class/infiniband_verbs/abi_version`.
const CLASS_ABI_VERSION: &str = "6";
/// A device's own uverbs ABI version (as mlx5's and rxe's).
const DEVICE_ABI_VERSION: &str = "1";
/// Where the overlay's upper layer is put together; unmounted again before
/// the program starts (the overlay keeps its own reference).
const STAGE: &str = "/tmp";

/// The interface the program's engine attaches to, as the view shows it.
#[derive(Debug, Clone)]
pub struct Interface {
    pub name: String,
    pub mac: [u8; 6],
    /// The first global IPv4 address: the drop-in's GID 1.
    pub ipv4: Ipv4Addr,
    /// Its sysfs directory (/sys/devices/.../net/IF).
    pub sysfs_dir: PathBuf,
    /// The device it belongs to (a PCI function, virtio...), whose `net/`
    /// holds it; none for veth, bridges and other virtual interfaces.
    pub parent: Option<PathBuf>,
}

impl Interface {
    /// Reads `name`'s addresses the way the drop-in does (engine::nic).
    pub fn read(name: &str) -> anyhow::Result<Interface> {
        let mac = engine::nic::interface_mac(None, name)
            .with_context(|| format!("reading the MAC address of {name}"))?;
        let ipv4 = match engine::nic::interface_addr(None, name, false) {
            Ok(IpAddr::V4(a)) => a,
            _ => bail!("{name} has no IPv4 address (the drop-in's RoCE v2 GIDs are IPv4): add one with `ip addr add A.B.C.D/N dev {name}`"),
        };
        let link = Path::new("/sys/class/net").join(name);
        let sysfs_dir =
            fs::canonicalize(&link).with_context(|| format!("resolving {}", link.display()))?;
        let parent = fs::canonicalize(link.join("device")).ok();
        Ok(Interface {
            name: name.to_string(),
            mac,
            ipv4,
            sysfs_dir,
            parent,
        })
    }
}

/// One entry of the view, by its path below the directory it goes in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Node {
    Dir(String),
    /// Read-only, as sysfs attributes are.
    File(String, String),
    Link(String, PathBuf),
}

impl Node {
    fn path(&self) -> &str {
        match self {
            Node::Dir(p) | Node::File(p, _) | Node::Link(p, _) => p,
        }
    }
}

/// `/sys/class/infiniband`'s entries for the device: what the kernel
/// writes for a one-port RoCE v2 HCA (drivers/infiniband/core/sysfs.c),
/// with the drop-in's values.
pub fn infiniband_class(i: &Interface, hostname: &str) -> Vec<Node> {
    let d = DEVICE_NAME;
    let guid = identity::guid_text(identity::eui64(i.mac));
    let p = format!("{d}/ports/{}", identity::PORT);
    let file = |path: String, text: String| Node::File(path, format!("{text}\n"));
    let mut v = vec![
        Node::Dir(d.to_string()),
        file(format!("{d}/node_type"), "1: CA".into()),
        file(format!("{d}/node_guid"), guid.clone()),
        file(format!("{d}/sys_image_guid"), guid),
        file(format!("{d}/fw_ver"), identity::FW_VER.into()),
        file(format!("{d}/hca_type"), "roce-xdp".into()),
        // rdma-ndd's default: host name and device name.
        file(format!("{d}/node_desc"), format!("{hostname} {d}")),
    ];
    // `device`: the kernel's link to the device the HCA belongs to, whose
    // `net/` holds the interface; a directory holding just that for an
    // interface that belongs to no device.
    match &i.parent {
        Some(parent) => v.push(Node::Link(format!("{d}/device"), parent.clone())),
        None => v.extend([
            Node::Dir(format!("{d}/device/net")),
            Node::Link(format!("{d}/device/net/{}", i.name), i.sysfs_dir.clone()),
        ]),
    }
    v.extend([
        Node::Dir(format!("{p}/gids")),
        Node::Dir(format!("{p}/gid_attrs/types")),
        Node::Dir(format!("{p}/gid_attrs/ndevs")),
        Node::Dir(format!("{p}/pkeys")),
        file(
            format!("{p}/state"),
            format!("{}: ACTIVE", identity::PORT_STATE_ACTIVE),
        ),
        file(
            format!("{p}/phys_state"),
            format!("{}: LinkUp", identity::PHYS_STATE_LINK_UP),
        ),
        file(format!("{p}/link_layer"), "Ethernet".into()),
        file(
            format!("{p}/rate"),
            identity::rate_text(identity::ACTIVE_WIDTH, identity::ACTIVE_SPEED),
        ),
        // RoCE ports have no LID and no subnet manager.
        file(format!("{p}/lid"), "0x0".into()),
        file(format!("{p}/sm_lid"), "0x0".into()),
        file(format!("{p}/sm_sl"), "0".into()),
        file(format!("{p}/lid_mask_count"), "0".into()),
        file(
            format!("{p}/cap_mask"),
            format!("0x{:08x}", identity::PORT_CAP_FLAGS),
        ),
        file(format!("{p}/pkeys/0"), format!("0x{:04x}", identity::PKEY)),
    ]);
    // Every entry of the table has its `gids/N`; an empty one reads as
    // the zero GID and has no type or netdev (the kernel's files for an
    // empty entry fail to read).
    for n in 0..identity::GID_TABLE_LEN {
        match identity::gid(i.mac, i.ipv4, n) {
            Some(gid) => v.extend([
                file(format!("{p}/gids/{n}"), identity::gid_text(gid)),
                file(format!("{p}/gid_attrs/types/{n}"), "RoCE v2".into()),
                file(format!("{p}/gid_attrs/ndevs/{n}"), i.name.clone()),
            ]),
            None => v.push(file(format!("{p}/gids/{n}"), identity::gid_text([0; 16]))),
        }
    }
    v
}

/// `/sys/class/infiniband_verbs`'s entries for the device (the class's
/// `abi_version` is added only where the host has none).
pub fn infiniband_verbs_class() -> Vec<Node> {
    let u = UVERBS_NAME;
    let file = |path: String, text: &str| Node::File(path, format!("{text}\n"));
    vec![
        file("abi_version".into(), CLASS_ABI_VERSION),
        Node::Dir(u.to_string()),
        file(format!("{u}/ibdev"), DEVICE_NAME),
        file(format!("{u}/abi_version"), DEVICE_ABI_VERSION),
        file(
            format!("{u}/dev"),
            &format!("{}:{}", UVERBS_NODE.0, UVERBS_NODE.1),
        ),
        Node::Link(
            format!("{u}/device"),
            PathBuf::from(format!("../../infiniband/{DEVICE_NAME}/device")),
        ),
    ]
}

/// Writes `nodes` below `dir`, leaving what is there already (the host's
/// own entries) as it is.
fn write_nodes(dir: &Path, nodes: &[Node]) -> anyhow::Result<()> {
    for n in nodes {
        let path = dir.join(n.path());
        if path.symlink_metadata().is_ok() {
            continue;
        }
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
        }
        let r = match n {
            Node::Dir(_) => fs::create_dir_all(&path),
            Node::File(_, text) => fs::write(&path, text)
                .and_then(|_| fs::set_permissions(&path, fs::Permissions::from_mode(0o444))),
            Node::Link(_, target) => std::os::unix::fs::symlink(target, &path),
        };
        r.with_context(|| format!("creating {}", path.display()))?;
    }
    Ok(())
}

/// Puts `source`'s entry at `target` on the tmpfs: directories bound,
/// symbolic links copied (a relative one resolves as from the original
/// place, its directory having the same name), files copied.
fn carry_over(source: &Path, target: &Path) -> anyhow::Result<()> {
    let meta = source
        .symlink_metadata()
        .with_context(|| format!("reading the host's {}", target.display()))?;
    let what = || format!("putting {} in the view", target.display());
    if meta.is_symlink() {
        let to = fs::read_link(source).with_context(what)?;
        std::os::unix::fs::symlink(to, target).with_context(what)?;
    } else if meta.is_dir() {
        fs::create_dir(target).with_context(what)?;
        mount_ns::bind(source, target).with_context(what)?;
    } else if meta.is_file() {
        fs::copy(source, target).with_context(what)?;
    } else {
        bail!(
            "{}: the host's entry is neither a directory, a link nor a file",
            target.display()
        );
    }
    Ok(())
}

/// The host's /sys/class again on a tmpfs, plus the two InfiniBand
/// classes with the device in them.
fn sys_view(i: &Interface) -> anyhow::Result<()> {
    let class = Path::new("/sys/class");
    let original = PathHandle::open(class).context("opening /sys/class")?;
    let mut names: Vec<_> = fs::read_dir(class)
        .context("listing /sys/class")?
        .map(|e| e.map(|e| e.file_name()))
        .collect::<Result<_, _>>()
        .context("listing /sys/class")?;
    names.sort();
    let hostname = fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    mount_ns::mount_tmpfs(class, "roce-xdp-sysfs", FILES_ONLY, "mode=0755")
        .context("mounting a tmpfs on /sys/class")?;
    for name in &names {
        if name != "infiniband" && name != "infiniband_verbs" {
            carry_over(&original.path().join(name), &class.join(name))?;
        }
    }
    for (name, nodes) in [
        ("infiniband", infiniband_class(i, hostname.trim())),
        ("infiniband_verbs", infiniband_verbs_class()),
    ] {
        let dir = class.join(name);
        fs::create_dir(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let host = original.path().join(name);
        if let Ok(entries) = fs::read_dir(&host) {
            for e in entries {
                let e = e.with_context(|| format!("listing /sys/class/{name}"))?;
                carry_over(&e.path(), &dir.join(e.file_name()))?;
            }
        }
        write_nodes(&dir, &nodes)?;
    }
    mount_ns::make_read_only(class, FILES_ONLY).context("making /sys/class read-only")
}

/// /dev as an overlay that adds `infiniband/uverbs-roce-xdp0`, with what
/// was mounted below /dev (pts, shm, mqueue...) bound on it again.
fn dev_view(stage: &Path) -> anyhow::Result<()> {
    let dev = Path::new("/dev");
    let mountinfo =
        fs::read_to_string("/proc/self/mountinfo").context("reading /proc/self/mountinfo")?;
    let below = mount_ns::top_mounts_below(&mountinfo, "/dev")
        .into_iter()
        .map(|p| {
            let h = PathHandle::open(&p).with_context(|| format!("opening {}", p.display()));
            h.map(|h| (p, h))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let upper = stage.join("dev");
    let work = stage.join("dev-work");
    let ib = upper.join("infiniband");
    fs::create_dir_all(&ib).with_context(|| format!("creating {}", ib.display()))?;
    fs::create_dir(&work).with_context(|| format!("creating {}", work.display()))?;
    // The overlay's root takes the upper directory's mode.
    let mode = fs::metadata(dev).context("reading /dev")?.permissions();
    fs::set_permissions(&upper, mode).context("setting the overlay's mode")?;
    fs::set_permissions(&ib, fs::Permissions::from_mode(0o755))
        .context("setting /dev/infiniband's mode")?;
    let (major, minor) = UVERBS_NODE;
    mount_ns::make_char_device(&ib.join(UVERBS_NAME), 0o666, major, minor)
        .context("creating the uverbs node")?;
    mount_ns::mount_overlay(dev, "roce-xdp-dev", dev, &upper, &work)
        .context("mounting an overlay on /dev")?;
    for (p, h) in below {
        mount_ns::bind(&h.path(), &p).with_context(|| format!("mounting {} again", p.display()))?;
    }
    Ok(())
}

fn build(i: &Interface) -> anyhow::Result<()> {
    let stage = Path::new(STAGE);
    mount_ns::mount_tmpfs(stage, "roce-xdp-stage", libc::MS_NOSUID, "mode=0755")
        .with_context(|| format!("mounting a tmpfs on {STAGE}"))?;
    let made = dev_view(stage).and_then(|()| sys_view(i));
    let unstaged = mount_ns::detach(stage).with_context(|| format!("unmounting {STAGE}"));
    made.and(unstaged)
}

/// What [`prepare`] did.
#[derive(Debug)]
pub enum View {
    /// The process is in its own mount namespace, with the device's files.
    Made,
    /// No namespace was made (or it was left again): why.
    Unavailable(anyhow::Error),
}

/// Moves this process into a private mount namespace where the device's
/// files exist, for the program it becomes. Without CAP_SYS_ADMIN, or if
/// the view cannot be built, the process stays where it was
/// ([`View::Unavailable`]); an error only if it could not go back.
pub fn prepare(iface: &str) -> anyhow::Result<View> {
    let interface = match Interface::read(iface) {
        Ok(i) => i,
        Err(e) => return Ok(View::Unavailable(e)),
    };
    let ns = match PrivateNamespace::enter() {
        Ok(ns) => ns,
        Err(e) if e.raw_os_error() == Some(libc::EPERM) => {
            return Ok(View::Unavailable(anyhow!(
                "a private mount namespace needs CAP_SYS_ADMIN: run `roce-xdp exec` as root"
            )))
        }
        Err(e) => {
            return Ok(View::Unavailable(
                anyhow!(e).context("making a private mount namespace"),
            ))
        }
    };
    match build(&interface) {
        Ok(()) => Ok(View::Made),
        Err(e) => match ns.leave() {
            Ok(()) => Ok(View::Unavailable(e)),
            Err(back) => Err(e.context(format!(
                "and going back to the original mount namespace failed ({back}): not starting the program in a half-made view"
            ))),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn veth() -> Interface {
        Interface {
            name: "vb1".into(),
            mac: [0x52, 0x54, 0x00, 0x12, 0x34, 0x56],
            ipv4: Ipv4Addr::new(10, 56, 0, 1),
            sysfs_dir: "/sys/devices/virtual/net/vb1".into(),
            parent: None,
        }
    }

    fn file<'a>(nodes: &'a [Node], path: &str) -> &'a str {
        nodes
            .iter()
            .find_map(|n| match n {
                Node::File(p, t) if p == path => Some(t.as_str()),
                _ => None,
            })
            .unwrap_or_else(|| panic!("no file {path}"))
    }

    #[test]
    fn the_device_as_the_kernel_writes_it() {
        let n = infiniband_class(&veth(), "host");
        assert_eq!(file(&n, "roce-xdp0/node_type"), "1: CA\n");
        assert_eq!(file(&n, "roce-xdp0/node_guid"), "5054:00ff:fe12:3456\n");
        assert_eq!(file(&n, "roce-xdp0/node_desc"), "host roce-xdp0\n");
        assert_eq!(file(&n, "roce-xdp0/ports/1/state"), "4: ACTIVE\n");
        assert_eq!(file(&n, "roce-xdp0/ports/1/phys_state"), "5: LinkUp\n");
        assert_eq!(file(&n, "roce-xdp0/ports/1/cap_mask"), "0x04010000\n");
        assert_eq!(file(&n, "roce-xdp0/ports/1/pkeys/0"), "0xffff\n");
        assert_eq!(
            file(&n, "roce-xdp0/ports/1/gids/0"),
            "fe80:0000:0000:0000:5054:00ff:fe12:3456\n"
        );
        assert_eq!(
            file(&n, "roce-xdp0/ports/1/gids/1"),
            "0000:0000:0000:0000:0000:ffff:0a38:0001\n"
        );
        assert_eq!(file(&n, "roce-xdp0/ports/1/gid_attrs/types/1"), "RoCE v2\n");
        assert_eq!(file(&n, "roce-xdp0/ports/1/gid_attrs/ndevs/0"), "vb1\n");
        assert!(n.contains(&Node::Link(
            "roce-xdp0/device/net/vb1".into(),
            "/sys/devices/virtual/net/vb1".into()
        )));
    }

    #[test]
    fn a_nic_with_a_device_links_to_it() {
        let mut i = veth();
        i.parent = Some("/sys/devices/pci0000:00/0000:00:03.0".into());
        let n = infiniband_class(&i, "host");
        assert!(n.contains(&Node::Link(
            "roce-xdp0/device".into(),
            "/sys/devices/pci0000:00/0000:00:03.0".into()
        )));
        assert!(!n.iter().any(|n| n.path().starts_with("roce-xdp0/device/")));
    }

    #[test]
    fn the_uverbs_entry_names_the_device_and_the_node() {
        let n = infiniband_verbs_class();
        assert_eq!(file(&n, "uverbs-roce-xdp0/ibdev"), "roce-xdp0\n");
        assert_eq!(file(&n, "uverbs-roce-xdp0/dev"), "1:3\n");
        assert_eq!(file(&n, "abi_version"), "6\n");
    }

    #[test]
    fn writes_the_nodes_and_keeps_what_is_there() {
        let dir = std::env::temp_dir().join(format!("roce-xdp-view-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("abi_version"), "7\n").unwrap();
        write_nodes(&dir, &infiniband_verbs_class()).unwrap();
        let read = |p: &str| fs::read_to_string(dir.join(p)).unwrap();
        assert_eq!(read("abi_version"), "7\n");
        assert_eq!(read("uverbs-roce-xdp0/ibdev"), "roce-xdp0\n");
        let mode = fs::metadata(dir.join("uverbs-roce-xdp0/dev"))
            .unwrap()
            .permissions();
        assert_eq!(mode.mode() & 0o777, 0o444);
        fs::remove_dir_all(&dir).unwrap();
    }
}
