//! Queue coverage (`docs/queue-coverage.md`) on a 4-queue veth in
//! namespaces this file creates (`stc-*`, 10.93.x.x). veth has no ntuple
//! filters and no RSS contexts (and this kernel has no netdevsim), so the
//! real ethtool path can only refuse here: uncovered queues exit 2 with
//! the fix, `--force` starts with a warning, `--steer off` installs
//! nothing, all queues served needs nothing, and a stale state file of a
//! dead run is cleared at the next start.

use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use crate::support::*;

static NEXT: AtomicU32 = AtomicU32::new(0);

/// A veth pair with four RX/TX queues per end, one end per namespace.
struct Quad {
    ns: [String; 2],
    ifname: [String; 2],
    run_dir: std::path::PathBuf,
}

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("ip");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        text(&out.stderr)
    );
}

impl Quad {
    fn new() -> Quad {
        let (pid, k) = (std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
        let q = Quad {
            ns: [format!("stc-{pid}-{k}a"), format!("stc-{pid}-{k}b")],
            ifname: [format!("stc{pid}{k}a"), format!("stc{pid}{k}b")],
            run_dir: std::env::temp_dir().join(format!("roce-xdp-steer-{pid}-{k}")),
        };
        std::fs::create_dir_all(&q.run_dir).unwrap();
        for ns in &q.ns {
            ip(&["netns", "add", ns]);
        }
        #[rustfmt::skip]
        ip(&[
            "link", "add", &q.ifname[0], "netns", &q.ns[0], "numtxqueues", "4", "numrxqueues", "4",
            "type", "veth", "peer", "name", &q.ifname[1], "netns", &q.ns[1],
            "numtxqueues", "4", "numrxqueues", "4",
        ]);
        for i in 0..2 {
            let addr = format!("10.93.{}.{}/24", k % 250, i + 1);
            ip(&["-n", &q.ns[i], "link", "set", "lo", "up"]);
            ip(&["-n", &q.ns[i], "addr", "add", &addr, "dev", &q.ifname[i]]);
            ip(&["-n", &q.ns[i], "link", "set", &q.ifname[i], "up"]);
        }
        q
    }

    /// `roce-xdp ARGS` in the server's namespace (b).
    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.ns[1], bin()]).args(args);
        c.env("ROCE_XDP_RUN_DIR", &self.run_dir);
        c.env_remove("RUST_LOG");
        c
    }

    /// To completion, killed after 20 s (a refusal comes at once).
    fn run(&self, args: &[&str]) -> Output {
        let child = self
            .cmd(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        wait_output(child, Duration::from_secs(20))
    }

    fn iface(&self) -> &str {
        &self.ifname[1]
    }

    fn xdp_attached(&self) -> bool {
        let out = Command::new("ip")
            .args(["-n", &self.ns[1], "-j", "link", "show", "dev", self.iface()])
            .output()
            .unwrap();
        text(&out.stdout).contains("\"xdp\"")
    }

    fn state_file(&self) -> std::path::PathBuf {
        self.run_dir
            .join(format!("steer-{}-{}.state", self.ns[1], self.iface()))
    }

    /// Starts `serve ARGS`, waits for its stats channel, returns the
    /// child and `stats --json`.
    fn serve_and_stats(&self, args: &[&str]) -> (std::process::Child, serde_json::Value) {
        let mut full = vec!["serve", "--iface", self.iface(), "--region", "64K"];
        full.extend_from_slice(args);
        let mut child = self
            .cmd(&full)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let sock = self.run_dir.join(format!("{}.sock", self.iface()));
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while !sock.exists() {
            if let Some(st) = child.try_wait().unwrap() {
                let out = child.wait_with_output().unwrap();
                panic!("serve exited ({st}): {}", text(&out.stderr));
            }
            assert!(std::time::Instant::now() < deadline, "no engine started");
            std::thread::sleep(Duration::from_millis(50));
        }
        let st = self
            .cmd(&["stats", "--iface", self.iface(), "--json"])
            .output()
            .unwrap();
        assert!(st.status.success(), "{}", text(&st.stderr));
        let v = serde_json::from_str(&text(&st.stdout)).unwrap();
        (child, v)
    }

    fn stop(&self, child: std::process::Child) -> Output {
        let pid = child.id().to_string();
        assert!(Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success());
        let out = wait_output(child, Duration::from_secs(30));
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        out
    }
}

impl Drop for Quad {
    fn drop(&mut self) {
        for ns in &self.ns {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
        let _ = std::fs::remove_dir_all(&self.run_dir);
    }
}

fn assert_refused(out: &Output, needles: &[&str]) {
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "stderr: {err}");
    assert!(!err.contains("panicked"), "{err}");
    for n in needles {
        assert!(err.contains(n), "{n:?} not in: {err}");
    }
}

#[test]
#[ignore = "needs root"]
fn uncovered_queues_are_refused_with_the_fix() {
    require_root();
    let _g = serial();
    let q = Quad::new();
    let i = q.iface().to_string();
    let head = format!("{i} has 4 RX queues but only queue 0 is served");
    assert_refused(
        &q.run(&["serve", "--iface", &i, "--queues", "0"]),
        &[
            &head,
            "no steering could be installed",
            "has no ntuple filters",
            "queues 1-3",
            "`--queues 0-3`",
            &format!("`ethtool -L {i} rx 1`"),
            "pass --force to serve anyway",
        ],
    );
    assert!(!q.xdp_attached(), "a refused start left XDP attached");
    assert!(!q.state_file().exists());
    // Two of four: the same, with the served range.
    assert_refused(
        &q.run(&["serve", "--iface", &i, "--queues", "0-1"]),
        &[
            "only queues 0-1 are served",
            &format!("`ethtool -L {i} rx 2`"),
        ],
    );
    // A one-shot tool server refuses before waiting for its client; the
    // perftest-style tools take --queues as serve does, pingpong --queue.
    assert_refused(
        &q.run(&["write-bw", "--iface", &i]),
        &[&head, "`--queues 0-3`"],
    );
    assert_refused(
        &q.run(&["pingpong", "--iface", &i]),
        &[&head, "`--queue 3`"],
    );
    // --steer off: nothing is tried, still refused without --force.
    assert_refused(
        &q.run(&["serve", "--iface", &i, "--steer", "off"]),
        &["steering is off (--steer off)", "--force"],
    );
    // --steer ntuple: failing is an error even with --force.
    assert_refused(
        &q.run(&["serve", "--iface", &i, "--steer", "ntuple", "--force"]),
        &[
            "--steer ntuple could not steer RoCE there",
            "--force does not override --steer ntuple",
        ],
    );
    assert!(!q.xdp_attached());
}

#[test]
#[ignore = "needs root"]
fn force_starts_uncovered_and_stats_say_so() {
    require_root();
    let _g = serial();
    let q = Quad::new();
    let (child, v) = q.serve_and_stats(&["--queues", "0", "--force"]);
    let s = &v["steering"];
    assert_eq!(s["state"], "forced", "{v}");
    assert_eq!(s["mode"], "auto");
    assert_eq!(s["served_queues"], 1);
    assert_eq!(s["rx_queues"], 4);
    assert_eq!(s["uncovered_queues"], serde_json::json!([1, 2, 3]));
    assert_eq!(s["rules"], serde_json::json!([]));
    let table = q.cmd(&["stats", "--iface", q.iface()]).output().unwrap();
    assert!(
        text(&table.stdout).contains("steering: forced (--force)"),
        "{}",
        text(&table.stdout)
    );
    let out = q.stop(child);
    let err = text(&out.stderr);
    assert!(
        err.contains("warning: forced (--force): no steering")
            && err.contains("queues 1-3 of")
            && err.contains("reach the kernel, not the engine"),
        "{err}"
    );
    assert!(!q.state_file().exists());

    let (child, v) = q.serve_and_stats(&["--queues", "0", "--steer", "off", "--force"]);
    assert_eq!(v["steering"]["state"], "off", "{v}");
    assert_eq!(v["steering"]["mode"], "off");
    assert_eq!(
        v["steering"]["uncovered_queues"],
        serde_json::json!([1, 2, 3])
    );
    q.stop(child);
}

#[test]
#[ignore = "needs root"]
fn all_queues_need_no_steering_and_stale_state_is_cleared() {
    require_root();
    let _g = serial();
    let q = Quad::new();
    // What a run killed with SIGKILL would leave: its state file (pid
    // 2147483632 cannot exist). veth cannot hold rules, so there is
    // nothing to delete, but the file is read, reported and removed.
    std::fs::write(
        q.state_file(),
        format!(
            "pid 2147483632\nstart_time 1\niface {}\nrule 7 udp4 4791 queue 0\n",
            q.iface()
        ),
    )
    .unwrap();
    let (child, v) = q.serve_and_stats(&["--queues", "0-3"]);
    let s = &v["steering"];
    assert_eq!(s["state"], "none_needed", "{v}");
    assert_eq!(s["served_queues"], 4);
    assert_eq!(s["rx_queues"], 4);
    assert_eq!(s["uncovered_queues"], serde_json::json!([]));
    assert!(!q.state_file().exists(), "the stale state file stayed");
    let out = q.stop(child);
    let err = text(&out.stderr);
    assert!(
        err.contains("a previous roce-xdp (pid 2147483632)")
            && err.contains("exited without removing its steering")
            && err.contains("location 7"),
        "{err}"
    );
    assert!(!q.xdp_attached());
}
