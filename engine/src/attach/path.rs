//! Where the service of an interface listens: one Unix socket per
//! (network namespace, interface), `/run/roce-xdp/net-INODE/IFNAME.sock`,
//! INODE being the network namespace's (as `ls -iL /proc/self/ns/net`
//! shows it), so that the same interface name in two namespaces names two
//! services. `ROCE_XDP_RUN_DIR` replaces `/run/roce-xdp`.

use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

/// The environment variable that moves the services' directory.
pub const ENV_RUN_DIR: &str = "ROCE_XDP_RUN_DIR";
const DEFAULT_RUN_DIR: &str = "/run/roce-xdp";

/// The calling thread's network namespace, as an inode number.
pub fn netns_inode() -> std::io::Result<u64> {
    Ok(std::fs::metadata("/proc/thread-self/ns/net")?.ino())
}

/// The directory of this network namespace's services.
pub fn service_dir() -> std::io::Result<PathBuf> {
    let root = std::env::var_os(ENV_RUN_DIR)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(DEFAULT_RUN_DIR));
    Ok(root.join(format!("net-{}", netns_inode()?)))
}

/// The socket of `ifname`'s service in this network namespace.
pub fn service_socket(ifname: &str) -> std::io::Result<PathBuf> {
    Ok(service_dir()?.join(format!("{ifname}.sock")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_path_names_the_namespace_and_the_interface() {
        let p = service_socket("veth7").unwrap();
        let s = p.to_string_lossy();
        assert!(s.ends_with("/veth7.sock"), "{s}");
        assert!(
            s.contains(&format!("net-{}", netns_inode().unwrap())),
            "{s}"
        );
    }
}
