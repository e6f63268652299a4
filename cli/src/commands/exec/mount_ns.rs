//! A private mount namespace for the program `exec` runs, and the mount(2)
//! calls that build its view of the filesystem (tmpfs, overlay, bind).
//!
//! Mount events of the host still propagate into the namespace (it is a
//! slave of the one `exec` started in) but none propagate out, so other
//! processes see nothing change. If building the view fails halfway, the
//! process goes back to the namespace it came from
//! ([`PrivateNamespace::leave`]), and what was built goes away with the
//! new one.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

fn c_path(p: &Path) -> io::Result<CString> {
    CString::new(p.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a path holds a NUL byte"))
}

fn c_text(s: &str) -> io::Result<CString> {
    CString::new(s)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a string holds a NUL byte"))
}

fn check(rc: libc::c_int) -> io::Result<()> {
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn open(path: &Path, flags: libc::c_int) -> io::Result<OwnedFd> {
    let p = c_path(path)?;
    // SAFETY: `p` is a NUL-terminated path that outlives the call.
    let fd = unsafe { libc::open(p.as_ptr(), flags | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: open(2) returned a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A file or directory held open without reading it (O_PATH): it stays
/// reachable through [`PathHandle::path`] after something is mounted over
/// its name.
pub struct PathHandle(OwnedFd);

impl PathHandle {
    pub fn open(path: &Path) -> io::Result<PathHandle> {
        open(path, libc::O_PATH).map(PathHandle)
    }

    /// `/proc/self/fd/N`: the kernel follows it to the file itself, not to
    /// whatever its name shows now.
    pub fn path(&self) -> PathBuf {
        PathBuf::from(format!("/proc/self/fd/{}", self.0.as_raw_fd()))
    }
}

/// The process in a mount namespace of its own; [`PrivateNamespace::leave`]
/// goes back to the one it came from.
pub struct PrivateNamespace {
    original: OwnedFd,
    root: OwnedFd,
    cwd: OwnedFd,
}

impl PrivateNamespace {
    /// unshare(CLONE_NEWNS), then every mount a slave: EPERM without
    /// CAP_SYS_ADMIN.
    pub fn enter() -> io::Result<PrivateNamespace> {
        let original = open(Path::new("/proc/self/ns/mnt"), libc::O_RDONLY)?;
        let root = open(Path::new("/"), libc::O_PATH | libc::O_DIRECTORY)?;
        let cwd = open(Path::new("."), libc::O_PATH | libc::O_DIRECTORY)?;
        // SAFETY: unshare takes no pointers; it gives this process a copy
        // of its mount namespace.
        check(unsafe { libc::unshare(libc::CLONE_NEWNS) })?;
        let ns = PrivateNamespace {
            original,
            root,
            cwd,
        };
        // SAFETY: constant NUL-terminated "/"; NULL source, type and data
        // are what a propagation change takes.
        let rc = unsafe {
            libc::mount(
                std::ptr::null(),
                c"/".as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_SLAVE,
                std::ptr::null(),
            )
        };
        if let Err(e) = check(rc) {
            let _ = ns.leave();
            return Err(e);
        }
        Ok(ns)
    }

    /// Back to the original namespace, with the root and working
    /// directories the process had (setns moves both to the namespace's
    /// root).
    pub fn leave(self) -> io::Result<()> {
        // SAFETY: `original` is an open /proc/self/ns/mnt descriptor.
        check(unsafe { libc::setns(self.original.as_raw_fd(), libc::CLONE_NEWNS) })?;
        // SAFETY: `root` is an open directory descriptor.
        check(unsafe { libc::fchdir(self.root.as_raw_fd()) })?;
        // SAFETY: "." is a constant NUL-terminated path.
        check(unsafe { libc::chroot(c".".as_ptr()) })?;
        // SAFETY: `cwd` is an open directory descriptor.
        check(unsafe { libc::fchdir(self.cwd.as_raw_fd()) })
    }
}

fn mount(
    source: &str,
    target: &Path,
    fstype: &str,
    flags: libc::c_ulong,
    data: &str,
) -> io::Result<()> {
    let (s, t, f, d) = (
        c_text(source)?,
        c_path(target)?,
        c_text(fstype)?,
        c_text(data)?,
    );
    // SAFETY: four NUL-terminated strings that outlive the call.
    check(unsafe {
        libc::mount(
            s.as_ptr(),
            t.as_ptr(),
            f.as_ptr(),
            flags,
            d.as_ptr() as *const libc::c_void,
        )
    })
}

/// Flags of a mount that holds files only (as sysfs: no devices, no
/// set-uid, nothing to run).
pub const FILES_ONLY: libc::c_ulong = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;

/// A tmpfs named `name` (the source column of /proc/mounts) on `target`.
pub fn mount_tmpfs(target: &Path, name: &str, flags: libc::c_ulong, data: &str) -> io::Result<()> {
    mount(name, target, "tmpfs", flags, data)
}

/// An overlay of `upper` (writable, `work` beside it) on `lower` at
/// `target`; device nodes in it open.
pub fn mount_overlay(
    target: &Path,
    name: &str,
    lower: &Path,
    upper: &Path,
    work: &Path,
) -> io::Result<()> {
    let data = format!(
        "lowerdir={},upperdir={},workdir={}",
        lower.display(),
        upper.display(),
        work.display()
    );
    mount(name, target, "overlay", libc::MS_NOSUID, &data)
}

/// `source`'s tree, with what is mounted below it, also at `target`.
pub fn bind(source: &Path, target: &Path) -> io::Result<()> {
    let (s, t) = (c_path(source)?, c_path(target)?);
    // SAFETY: two NUL-terminated paths that outlive the call; a bind takes
    // no type or data.
    check(unsafe {
        libc::mount(
            s.as_ptr(),
            t.as_ptr(),
            std::ptr::null(),
            libc::MS_BIND | libc::MS_REC,
            std::ptr::null(),
        )
    })
}

/// The mount at `target` read-only, keeping `flags` (a bind remount
/// changes the mount, not the file system).
pub fn make_read_only(target: &Path, flags: libc::c_ulong) -> io::Result<()> {
    let t = c_path(target)?;
    // SAFETY: a NUL-terminated path that outlives the call.
    check(unsafe {
        libc::mount(
            std::ptr::null(),
            t.as_ptr(),
            std::ptr::null(),
            libc::MS_REMOUNT | libc::MS_BIND | libc::MS_RDONLY | flags,
            std::ptr::null(),
        )
    })
}

/// Unmounts `target` (lazily: a file still open there keeps its mount).
pub fn detach(target: &Path) -> io::Result<()> {
    let t = c_path(target)?;
    // SAFETY: a NUL-terminated path that outlives the call.
    check(unsafe { libc::umount2(t.as_ptr(), libc::MNT_DETACH) })
}

/// A character device node `major:minor` with exactly `mode`.
pub fn make_char_device(path: &Path, mode: u32, major: u32, minor: u32) -> io::Result<()> {
    let p = c_path(path)?;
    // SAFETY: a NUL-terminated path that outlives the call.
    check(unsafe {
        libc::mknod(
            p.as_ptr(),
            libc::S_IFCHR | mode,
            libc::makedev(major, minor),
        )
    })?;
    // mknod applied the umask.
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
}

/// A mount point of /proc/self/mountinfo (`\ooo` escapes undone).
fn unescape(field: &str) -> String {
    let b = field.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let octal = b
            .get(i + 1..i + 4)
            .filter(|d| b[i] == b'\\' && d.iter().all(|c| (b'0'..=b'7').contains(c)))
            .map(|d| d.iter().fold(0u32, |v, c| v * 8 + u32::from(c - b'0')));
        match octal.and_then(|v| u8::try_from(v).ok()) {
            Some(v) => {
                out.push(v);
                i += 4;
            }
            None => {
                out.push(b[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The mount points strictly below `dir` in a /proc/self/mountinfo text
/// that none of the others contains: binding each of them again (with
/// what is below it) brings back everything mounted below `dir`.
pub fn top_mounts_below(mountinfo: &str, dir: &str) -> Vec<PathBuf> {
    let prefix = format!("{}/", dir.trim_end_matches('/'));
    let mut points: Vec<String> = mountinfo
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .map(unescape)
        .filter(|p| p.starts_with(&prefix))
        .collect();
    points.sort();
    points.dedup();
    points
        .iter()
        .filter(|p| !points.iter().any(|q| p.starts_with(&format!("{q}/"))))
        .map(PathBuf::from)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_outermost_mounts_below_a_directory() {
        let info = "\
24 27 0:6 / /dev rw,relatime - devtmpfs devtmpfs rw
25 24 0:23 / /dev/shm rw,relatime - tmpfs tmpfs rw
26 24 0:24 / /dev/pts rw,relatime - devpts devpts rw
29 26 0:26 / /dev/pts rw,relatime - devpts devpts rw
30 26 0:27 / /dev/pts/x rw,relatime - tmpfs tmpfs rw
31 24 0:28 / /dev/my\\040disk rw,relatime - tmpfs tmpfs rw
32 27 0:29 / /devices rw,relatime - tmpfs tmpfs rw
33 27 0:30 / /sys rw,relatime - sysfs sysfs rw
";
        assert_eq!(
            top_mounts_below(info, "/dev"),
            ["/dev/my disk", "/dev/pts", "/dev/shm"].map(PathBuf::from)
        );
        assert!(top_mounts_below(info, "/sys").is_empty());
    }

    #[test]
    #[ignore = "needs root"]
    fn leaving_the_namespace_takes_its_mounts_away() {
        // A thread of its own: until exec, a mount namespace is a thread's.
        std::thread::spawn(|| {
            let dir = std::env::temp_dir().join(format!("roce-xdp-ns-{}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            let cwd = std::env::current_dir().unwrap();
            let ns = PrivateNamespace::enter().unwrap();
            mount_tmpfs(&dir, "roce-xdp-test", FILES_ONLY, "mode=0755").unwrap();
            std::fs::write(dir.join("inside"), "x").unwrap();
            let mounts = std::fs::read_to_string("/proc/thread-self/mountinfo").unwrap();
            assert!(mounts.contains("roce-xdp-test"));
            ns.leave().unwrap();
            assert!(!dir.join("inside").exists());
            assert_eq!(std::env::current_dir().unwrap(), cwd);
            let mounts = std::fs::read_to_string("/proc/thread-self/mountinfo").unwrap();
            assert!(!mounts.contains("roce-xdp-test"));
            std::fs::remove_dir(&dir).unwrap();
        })
        .join()
        .unwrap();
    }

    #[test]
    fn undoes_octal_escapes_only() {
        assert_eq!(unescape("a\\040b\\134c"), "a b\\c");
        assert_eq!(unescape("a\\09b\\"), "a\\09b\\");
    }
}
