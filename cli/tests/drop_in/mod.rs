//! What the drop-in's test programs share: two network namespaces joined
//! by a veth, `roce-xdp exec` in either, a program's run with a time
//! limit, and our C programs compiled against the installed headers.
//! Each test crate uses part of it.
#![allow(dead_code)]

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Namespaces `vb<pid>n<k>a/b`, veths `vb<pid>v<k>a/b`, 10.55.<k>.1/.2.
pub struct Pair {
    pub ns: [String; 2],
    pub ifs: [String; 2],
    pub ips: [String; 2],
}

static COUNTER: AtomicU32 = AtomicU32::new(0);

pub fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("running ip");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

impl Pair {
    pub fn create() -> Pair {
        Pair::with_queues(1)
    }

    /// veths with `queues` RX and TX queues each.
    pub fn with_queues(queues: u32) -> Pair {
        let pid = std::process::id() % 100_000;
        let k = COUNTER.fetch_add(1, Ordering::Relaxed);
        let p = Pair {
            ns: [format!("vb{pid}n{k}a"), format!("vb{pid}n{k}b")],
            ifs: [format!("vb{pid}v{k}a"), format!("vb{pid}v{k}b")],
            ips: [format!("10.55.{k}.1"), format!("10.55.{k}.2")],
        };
        for ns in &p.ns {
            ip(&["netns", "add", ns]);
        }
        let q = queues.to_string();
        ip(&[
            "link",
            "add",
            &p.ifs[0],
            "netns",
            &p.ns[0],
            "numrxqueues",
            &q,
            "numtxqueues",
            &q,
            "type",
            "veth",
            "peer",
            "name",
            &p.ifs[1],
            "netns",
            &p.ns[1],
            "numrxqueues",
            &q,
            "numtxqueues",
            &q,
        ]);
        for i in 0..2 {
            let addr = format!("{}/24", p.ips[i]);
            ip(&["-n", &p.ns[i], "addr", "add", &addr, "dev", &p.ifs[i]]);
            ip(&["-n", &p.ns[i], "link", "set", "lo", "up"]);
            ip(&["-n", &p.ns[i], "link", "set", &p.ifs[i], "up"]);
        }
        p
    }

    /// `roce-xdp exec --iface IF -- ARGS` inside side `i`'s namespace.
    pub fn exec(&self, i: usize, args: &[&str]) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.ns[i], env!("CARGO_BIN_EXE_roce-xdp")])
            .args(["exec", "--iface", &self.ifs[i], "--"])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c
    }

    /// Waits until a TCP socket listens on `port` in side `i`'s namespace.
    pub fn wait_listening(&self, i: usize, port: u16, server: &mut Child) {
        let deadline = Instant::now() + Duration::from_secs(30);
        let needle = format!(":{port} ");
        while Instant::now() < deadline {
            let ss = Command::new("ip")
                .args(["netns", "exec", &self.ns[i], "ss", "-ltnH"])
                .output()
                .expect("running ss");
            if String::from_utf8_lossy(&ss.stdout).contains(&needle) {
                return;
            }
            if let Ok(Some(st)) = server.try_wait() {
                panic!("the server exited ({st}) before listening");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("nothing listens on port {port} in {}", self.ns[i]);
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        for ns in &self.ns {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
        }
    }
}

/// Waits for `child` at most `limit` (a hang fails, not a speed figure).
pub fn finish(mut child: Child, limit: Duration) -> Output {
    let deadline = Instant::now() + limit;
    loop {
        if child.try_wait().expect("waiting").is_some() {
            return child.wait_with_output().expect("collecting output");
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().expect("collecting output");
            panic!(
                "did not finish within {limit:?}:\n{}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

pub fn assert_ok(what: &str, out: &Output) -> String {
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{text}",
        out.status
    );
    text
}

pub fn prerequisites() {
    for bin in ["/usr/bin/ibv_rc_pingpong", "/usr/bin/ib_write_bw"] {
        assert!(
            Path::new(bin).exists(),
            "{bin} is missing: run scripts/setup-deps.sh (it installs ibverbs-utils and perftest)"
        );
    }
    let bin = Path::new(env!("CARGO_BIN_EXE_roce-xdp"));
    let archive = bin.with_file_name("libroce_xdp_ibverbs.a");
    assert!(
        archive.exists(),
        "{} is missing: cargo build --release -p roce-xdp-ibverbs",
        archive.display()
    );
}

pub const LIMIT: Duration = Duration::from_secs(120);

/// Compiles a C program of ours (`SRC`, relative to this crate, e.g.
/// `tests/NAME.c`) against the installed `verbs.h`, once per test
/// process: the tests run in parallel, and a compiler rewriting the
/// executable another test is starting makes that start fail (EACCES,
/// ETXTBSY).
pub fn compile_c(src: &str) -> std::path::PathBuf {
    compile_c_linking(src, &[])
}

impl Pair {
    /// Waits until the engine of `child` (a program under `roce-xdp exec`
    /// on side `i`) answers `roce-xdp stats` with the child's pid, then
    /// `grace` more. For servers that listen through the RDMA CM: the
    /// listen happens inside the process right after the device opens,
    /// and nothing outside it shows the listen (no TCP socket).
    pub fn wait_engine(&self, i: usize, child: &mut Child, grace: Duration) {
        let deadline = Instant::now() + Duration::from_secs(30);
        let pid = format!("\"pid\": {}", child.id());
        while Instant::now() < deadline {
            let stats = Command::new("ip")
                .args(["netns", "exec", &self.ns[i], env!("CARGO_BIN_EXE_roce-xdp")])
                .args(["stats", "--iface", &self.ifs[i], "--json"])
                .output()
                .expect("running roce-xdp stats");
            if stats.status.success() && String::from_utf8_lossy(&stats.stdout).contains(&pid) {
                std::thread::sleep(grace);
                return;
            }
            if let Ok(Some(st)) = child.try_wait() {
                let mut text = String::new();
                if let Some(mut o) = child.stdout.take() {
                    let _ = o.read_to_string(&mut text);
                }
                if let Some(mut e) = child.stderr.take() {
                    let _ = e.read_to_string(&mut text);
                }
                panic!("the server exited ({st}) before its engine ran:\n{text}");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("no engine of pid {} on {}", child.id(), self.ifs[i]);
    }
}

/// The librdmacm consumers' binaries (rdmacm-utils, perftest, qperf,
/// libfabric-bin) and both drop-ins.
pub fn rdmacm_prerequisites() {
    prerequisites();
    let bin = Path::new(env!("CARGO_BIN_EXE_roce-xdp"));
    let archive = bin.with_file_name("libroce_xdp_rdmacm.a");
    assert!(
        archive.exists(),
        "{} is missing: cargo build --release -p roce-xdp-rdmacm",
        archive.display()
    );
    for (bin, package) in [
        ("/usr/bin/rping", "rdmacm-utils"),
        ("/usr/bin/ucmatose", "rdmacm-utils"),
        ("/usr/bin/udaddy", "rdmacm-utils"),
        ("/usr/bin/rdma_server", "rdmacm-utils"),
        ("/usr/bin/rdma_client", "rdmacm-utils"),
        ("/usr/bin/qperf", "qperf"),
        ("/usr/bin/fi_pingpong", "libfabric-bin"),
    ] {
        assert!(
            Path::new(bin).exists(),
            "{bin} is missing: run scripts/setup-deps.sh (it installs {package})"
        );
    }
}

/// As [`compile_c`], linked with `libs` too (e.g. `-lrdmacm`).
pub fn compile_c_linking(src: &str, libs: &[&str]) -> std::path::PathBuf {
    static COMPILED: Mutex<Vec<(String, PathBuf)>> = Mutex::new(Vec::new());
    let mut compiled = COMPILED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, exe)) = compiled.iter().find(|(s, _)| s == src) {
        return exe.clone();
    }
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(src);
    let name = path.file_stem().expect("a C file");
    let exe = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let cc = Command::new("cc")
        .args(["-Wall", "-O2", "-pthread"])
        .arg(&path)
        .arg("-o")
        .arg(&exe)
        .args(libs)
        .arg("-libverbs")
        .output()
        .expect("running cc (install gcc)");
    assert!(
        cc.status.success(),
        "compiling {}: {}",
        path.display(),
        String::from_utf8_lossy(&cc.stderr)
    );
    compiled.push((src.to_string(), exe.clone()));
    exe
}

/// (version node, symbol) of every function and object the shared object
/// `lib` defines (`objdump -T`); a version in parentheses is a non-default
/// one (`sym@NODE`).
pub fn exports(lib: &Path) -> std::collections::BTreeSet<(String, String)> {
    let out = Command::new("objdump")
        .arg("-T")
        .arg(lib)
        .output()
        .expect("running objdump (install binutils)");
    assert!(
        out.status.success(),
        "objdump -T {}: {}",
        lib.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.contains("*UND*") && (l.contains(" DF ") || l.contains(" DO ")))
        .filter_map(|l| {
            let mut f = l.split_whitespace().rev();
            let sym = f.next()?;
            let ver = f.next()?;
            Some((ver.to_string(), sym.to_string()))
        })
        .collect()
}
