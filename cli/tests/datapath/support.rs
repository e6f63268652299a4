//! What the datapath tests share: run `roce-xdp` inside the network
//! namespaces a test creates (engine::testbed::netns::VethPair), wait for a server
//! to listen, serialise the tests that attach engines (the machine may
//! have only two cores), and fail a root test run without root.

use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use engine::testbed::netns::{PairConfig, VethPair};

/// The binary under test.
pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_roce-xdp")
}

/// `roce-xdp ARGS` in this namespace, to completion.
pub fn roce_xdp(args: &[&str]) -> Output {
    Command::new(bin())
        .args(args)
        .output()
        .expect("running roce-xdp")
}

static SERIAL: Mutex<()> = Mutex::new(());

/// Held by every test that runs engines.
pub fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// A veth pair in two fresh namespaces plus a private stats directory.
pub struct Net {
    pub pair: VethPair,
    pub run_dir: PathBuf,
}

impl Net {
    pub fn new(mtu: u32) -> Net {
        Net::with_queues(mtu, 1)
    }

    /// As [`Net::new`] with `queues` RX/TX queues on each veth end.
    pub fn with_queues(mtu: u32, queues: u32) -> Net {
        let pair = VethPair::create(&PairConfig { mtu, queues })
            .expect("creating the veth pair (needs root)");
        Net::on(pair)
    }

    /// A `Net` on `pair`, with its private stats directory.
    fn on(pair: VethPair) -> Net {
        let run_dir = std::env::temp_dir().join(format!(
            "roce-xdp-cli-test-{}-{}",
            std::process::id(),
            pair.a.netns
        ));
        std::fs::create_dir_all(&run_dir).unwrap();
        Net { pair, run_dir }
    }

    /// Namespaces a (client, one queue) and b (server, `server_queues`
    /// queues) joined through a Linux bridge that spreads flows over b's
    /// queues by hash, as RSS does ([`VethPair::create_bridged`]).
    pub fn bridged(mtu: u32, server_queues: u32) -> Net {
        let pair = VethPair::create_bridged(&PairConfig { mtu, queues: 1 }, server_queues)
            .expect("creating the bridged veth pairs (needs root)");
        Net::on(pair)
    }

    /// `roce-xdp ARGS` inside namespace `ns`.
    pub fn cmd(&self, ns: &str, args: &[&str]) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", ns, bin()]).args(args);
        c.env("ROCE_XDP_RUN_DIR", &self.run_dir);
        c.env_remove("RUST_LOG");
        c
    }

    /// `roce-xdp stats --iface IF --json` for the server's interface
    /// (namespace b), parsed; fails the test if it does not succeed.
    pub fn server_stats(&self) -> serde_json::Value {
        let b = &self.pair.b;
        let st = self
            .cmd(&b.netns, &["stats", "--iface", &b.ifname, "--json"])
            .output()
            .unwrap();
        assert!(st.status.success(), "{}", text(&st.stderr));
        serde_json::from_str(&text(&st.stdout)).unwrap()
    }

    /// Server side (namespace b), killed if the test ends (or fails)
    /// while it still runs.
    pub fn server(&self, args: &[&str]) -> Server {
        Server(Some(
            self.cmd(&self.pair.b.netns, args)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawning the server"),
        ))
    }

    /// Client side (namespace a), to completion.
    pub fn client(&self, args: &[&str]) -> Output {
        self.cmd(&self.pair.a.netns, args)
            .output()
            .expect("running the client")
    }

    /// The server's address as the client sees it.
    pub fn server_ip(&self) -> String {
        self.pair.b.ipv4.to_string()
    }

    /// Waits until something listens on TCP `port` in namespace b.
    pub fn wait_listening(&self, port: u16) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            let out = Command::new("ip")
                .args(["netns", "exec", &self.pair.b.netns, "ss", "-Hltn"])
                .output()
                .expect("ss");
            if String::from_utf8_lossy(&out.stdout).contains(&format!(":{port} ")) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("nothing listens on port {port} in {}", self.pair.b.netns);
    }

    /// Waits until the engine on namespace b's interface serves its stats
    /// socket (the datapath is open).
    pub fn wait_engine(&self) {
        let path = self.run_dir.join(format!("{}.sock", self.pair.b.ifname));
        let deadline = Instant::now() + Duration::from_secs(20);
        while !path.exists() {
            assert!(
                Instant::now() < deadline,
                "no engine on {}",
                self.pair.b.ifname
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Whether an XDP program is attached to `side`'s interface.
    pub fn xdp_attached(&self, b_side: bool) -> bool {
        let s = if b_side { &self.pair.b } else { &self.pair.a };
        let out = s.run_ip(&["-j", "link", "show", "dev", &s.ifname]).unwrap();
        out.contains("\"xdp\"")
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.run_dir);
    }
}

/// Waits for a child with a deadline, killing it on timeout.
/// A server process of a test ([`Net::server`]): a `Child` that is killed
/// and reaped when dropped still running, so that a test that fails
/// before it stops its server does not leave it behind, holding its
/// namespace, its XDP program and the binary. [`wait_output`] takes it
/// (then the test waits for it as before).
pub struct Server(Option<Child>);

impl std::ops::Deref for Server {
    type Target = Child;
    fn deref(&self) -> &Child {
        self.0.as_ref().expect("a server not yet taken")
    }
}

impl std::ops::DerefMut for Server {
    fn deref_mut(&mut self) -> &mut Child {
        self.0.as_mut().expect("a server not yet taken")
    }
}

impl From<Server> for Child {
    fn from(mut s: Server) -> Child {
        s.0.take().expect("a server not yet taken")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(c) = self.0.as_mut() {
            if matches!(c.try_wait(), Ok(None)) {
                let _ = c.kill();
            }
            let _ = c.wait();
        }
    }
}

pub fn wait_output(child: impl Into<Child>, timeout: Duration) -> Output {
    let mut child: Child = child.into();
    let deadline = Instant::now() + timeout;
    loop {
        if child.try_wait().expect("try_wait").is_some() {
            return child.wait_with_output().expect("output");
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().expect("output");
            panic!(
                "timed out; stdout:\n{}\nstderr:\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Fails the calling test, saying why, unless it runs as root. The tests
/// that call it are `#[ignore = "needs root"]`: `cargo test` leaves them
/// out and says so; `cargo test -- --include-ignored` runs them.
pub fn require_root() {
    assert!(
        engine::testbed::netns::is_root(),
        "this test needs root (network namespaces, XDP, AF_XDP): run it as root"
    );
}
