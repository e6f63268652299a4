//! Running the project's and the distribution's binaries inside the test
//! bed's namespaces: where the `roce-xdp` binary is, a command inside a
//! namespace, waiting with a deadline, and a server/client pair run the
//! way perftest's tools are run (server first, the client retried while
//! the server is not listening yet).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

use crate::error::{context, EngineResult};

/// The `roce-xdp` binary: `ROCE_XDP_BIN`, this process if it is
/// `roce-xdp` (`roce-xdp bench`), or `roce-xdp` next to this executable.
pub fn tool_binary() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("ROCE_XDP_BIN") {
        return Some(PathBuf::from(p));
    }
    let me = std::env::current_exe().ok()?;
    if me.file_name().is_some_and(|n| n == "roce-xdp") {
        return Some(me);
    }
    // Test binaries live in target/<profile>/deps, the tool one level up.
    let dir = me.parent()?;
    [dir.join("roce-xdp"), dir.parent()?.join("roce-xdp")]
        .into_iter()
        .find(|p| p.is_file())
}

/// `exe args..` inside namespace `ns`.
pub fn in_netns(ns: &str, exe: &Path) -> Command {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", ns]).arg(exe);
    c
}

/// Waits for `child` up to `timeout`, killing it after that.
pub fn wait_or_kill(child: &mut Child, timeout: Duration) -> EngineResult<ExitStatus> {
    let t = Instant::now();
    loop {
        match child.try_wait().map_err(context("waiting for a tool"))? {
            Some(st) => return Ok(st),
            None if t.elapsed() > timeout => {
                let _ = child.kill();
                return child.wait().map_err(context("waiting for a killed tool"));
            }
            None => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

/// What a server/client run printed.
pub struct RunOutput {
    pub client: Output,
    /// Wall time of the client's (last) run, from spawning its command
    /// (`ip netns exec ...`) to its exit, seconds.
    pub client_seconds: f64,
    pub server_status: ExitStatus,
    pub server_stdout: String,
    pub server_stderr: String,
}

impl RunOutput {
    /// Both sides exited 0.
    pub fn success(&self) -> bool {
        self.client.status.success() && self.server_status.success()
    }

    /// Both sides' exit status and error output, for a `missing` line.
    pub fn describe_failure(&self) -> String {
        format!(
            "client {}: {}; server {}: {}",
            self.client.status,
            String::from_utf8_lossy(&self.client.stderr).trim(),
            self.server_status,
            self.server_stderr.trim()
        )
    }
}

/// Starts `server`, then runs `client` (a fresh command each attempt, from
/// `client()`), retrying while its error output says the server was not
/// listening yet (`not_listening` phrases); the server is waited for up to
/// `timeout` after the client ended.
pub fn server_client(
    server: Command,
    client: impl Fn() -> Command,
    not_listening: &[&str],
    timeout: Duration,
) -> EngineResult<RunOutput> {
    server_client_after(server, |_| Ok(()), client, not_listening, timeout)
}

/// [`server_client`], the client started once `ready(server)` returned
/// (an error from it ends the server and the run).
pub fn server_client_after(
    mut server: Command,
    ready: impl FnOnce(&mut Child) -> EngineResult<()>,
    client: impl Fn() -> Command,
    not_listening: &[&str],
    timeout: Duration,
) -> EngineResult<RunOutput> {
    let mut server = server
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(context("starting the server"))?;
    // Read the server's pipes on threads so that it never blocks on them.
    let drain = |r: Option<Box<dyn std::io::Read + Send>>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            if let Some(mut r) = r {
                let _ = r.read_to_string(&mut s);
            }
            s
        })
    };
    let out_t = drain(server.stdout.take().map(|r| Box::new(r) as _));
    let err_t = drain(server.stderr.take().map(|r| Box::new(r) as _));
    if let Err(e) = ready(&mut server) {
        let _ = server.kill();
        let _ = server.wait();
        let err = err_t.join().unwrap_or_default();
        return Err(format!("{e}; the server's error output: {}", err.trim()));
    }
    let mut last = None;
    let mut client_seconds = 0.0;
    for _ in 0..30 {
        std::thread::sleep(Duration::from_millis(200));
        let t = Instant::now();
        let o = client()
            .stdin(Stdio::null())
            .output()
            .map_err(context("running the client"))?;
        client_seconds = t.elapsed().as_secs_f64();
        let err =
            String::from_utf8_lossy(&o.stderr).into_owned() + &String::from_utf8_lossy(&o.stdout);
        let early = !o.status.success() && not_listening.iter().any(|p| err.contains(p));
        last = Some(o);
        if !early {
            break;
        }
        if server.try_wait().ok().flatten().is_some() {
            break;
        }
    }
    let server_status = wait_or_kill(&mut server, timeout)?;
    let client = last.ok_or("the client did not run")?;
    Ok(RunOutput {
        client,
        client_seconds,
        server_status,
        server_stdout: out_t.join().unwrap_or_default(),
        server_stderr: err_t.join().unwrap_or_default(),
    })
}

/// Waits (up to 30 s) until the engine of process `server` (a program
/// under `roce-xdp exec` in namespace `ns`, on `iface`) runs, as `roce-xdp
/// stats` shows, then `grace` more (the program's next calls, e.g. its
/// `rdma_listen`).
pub fn wait_engine(
    exe: &Path,
    ns: &str,
    iface: &str,
    server: &mut Child,
    grace: Duration,
) -> EngineResult<()> {
    let pid = format!("\"pid\": {}", server.id());
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(30) {
        let stats = in_netns(ns, exe)
            .args(["stats", "--iface", iface, "--json"])
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
            .map_err(context("running roce-xdp stats"))?;
        if stats.status.success() && String::from_utf8_lossy(&stats.stdout).contains(&pid) {
            std::thread::sleep(grace);
            return Ok(());
        }
        if let Some(st) = server
            .try_wait()
            .map_err(context("waiting for the server"))?
        {
            return Err(format!("the server exited ({st}) before its engine ran"));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Err(format!(
        "no engine of pid {} on {iface} after 30 s",
        server.id()
    ))
}
