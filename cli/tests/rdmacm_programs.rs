//! Debian's librdmacm consumers, unmodified, on the engine: rdmacm-utils
//! (rping, ucmatose, udaddy, rdma_server/rdma_client), perftest with
//! `-R`, qperf with `-cm1` and libfabric's verbs provider (fi_pingpong),
//! each under `roce-xdp exec` on both ends (the drop-in libibverbs and
//! librdmacm), between two network namespaces joined by veth. Each test
//! asserts both ends exit 0 and what the program reports (its data,
//! bytes, iterations).
//! Needs root, the packages scripts/setup-deps.sh installs, and the
//! drop-ins built (`cargo build --release -p roce-xdp-ibverbs -p
//! roce-xdp-rdmacm -p roce-xdp`).

mod drop_in;

use drop_in::*;
use std::process::Child;
use std::time::Duration;

/// How long after its engine runs a CM server is given to reach
/// `rdma_listen` (it is the next few calls).
const LISTEN_GRACE: Duration = Duration::from_millis(1000);

/// How a server shows it is ready for its client.
enum Ready {
    /// Its engine runs (`wait_engine`): servers listening through the CM.
    Engine,
    /// A TCP socket listens on this port (qperf's and fi_pingpong's
    /// out-of-band channels).
    Tcp(u16),
}

fn wait_ready(pair: &Pair, server: &mut Child, ready: &Ready) {
    match ready {
        Ready::Engine => pair.wait_engine(0, server, LISTEN_GRACE),
        Ready::Tcp(port) => pair.wait_listening(0, *port, server),
    }
}

/// `server` on side 0, then `client` on side 1 (`SRV` in its arguments
/// becomes side 0's address), both under exec with `env`; both must exit
/// 0. Returns (server's output, client's output).
fn run_both(
    server: &[&str],
    client: &[&str],
    ready: Ready,
    env: &[(&str, &str)],
) -> (String, String) {
    rdmacm_prerequisites();
    let pair = Pair::create();
    let mut scmd = pair.exec(0, server);
    scmd.envs(
        env.iter()
            .map(|(k, v)| (k.to_string(), v.replace("IF", &pair.ifs[0]))),
    );
    let mut s = scmd.spawn().expect("starting the server");
    wait_ready(&pair, &mut s, &ready);
    let cargs: Vec<String> = client
        .iter()
        .map(|a| a.replace("SRV", &pair.ips[0]))
        .collect();
    let cargs: Vec<&str> = cargs.iter().map(String::as_str).collect();
    let mut ccmd = pair.exec(1, &cargs);
    ccmd.envs(
        env.iter()
            .map(|(k, v)| (k.to_string(), v.replace("IF", &pair.ifs[1]))),
    );
    let c = finish(ccmd.spawn().expect("starting the client"), LIMIT);
    let s = finish(s, LIMIT);
    let text = |o: &std::process::Output| {
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    };
    let (st, ct) = (text(&s), text(&c));
    assert!(
        s.status.success() && c.status.success(),
        "server {} ({}):\n{st}\nclient {} ({}):\n{ct}",
        server.join(" "),
        s.status,
        client.join(" "),
        c.status
    );
    (st, ct)
}

/// The line rping's client prints for ping `n` (`ping data: ...`) and its
/// server for the same ping (`server ping data: ...`): "rdma-ping-N: "
/// then ASCII from 'A' + n (mod 58) counting up and wrapping after 'z'
/// back to 'A', to byte 63 of the 64-byte buffer (its NUL).
fn rping_data(n: u32) -> String {
    const SIZE: usize = 64;
    let mut s = format!("rdma-ping-{n}: ");
    let mut c = 65 + (n % 58) as u8;
    while s.len() < SIZE - 1 {
        s.push(c as char);
        c += 1;
        if c > 122 {
            c = 65;
        }
    }
    s
}

/// rping: 100 pings, each an RDMA READ by the server of the client's
/// buffer and an RDMA WRITE back; the client validates every buffer
/// (`-V`) and both print every ping's data, which must be rping's pattern
/// byte for byte.
#[test]
#[ignore = "needs root"]
fn rping_100_pings_with_the_data_checked() {
    let (s, c) = run_both(
        &["rping", "-s", "-a", "0.0.0.0", "-C", "100", "-v"],
        &["rping", "-c", "-a", "SRV", "-C", "100", "-v", "-V"],
        Ready::Engine,
        &[],
    );
    let client_lines: Vec<&str> = c.lines().filter(|l| l.starts_with("ping data: ")).collect();
    let server_lines: Vec<&str> = s
        .lines()
        .filter(|l| l.starts_with("server ping data: "))
        .collect();
    assert_eq!(client_lines.len(), 100, "{c}");
    assert_eq!(server_lines.len(), 100, "{s}");
    for n in 0..100u32 {
        let want = rping_data(n);
        assert_eq!(client_lines[n as usize], format!("ping data: {want}"));
        assert_eq!(
            server_lines[n as usize],
            format!("server ping data: {want}")
        );
    }
    assert!(!c.contains("data mismatch"), "{c}");
}

/// ucmatose: four RC connections on one event channel, 10 SENDs of 100
/// bytes each way on each, every completion successful, the server
/// disconnects all four.
#[test]
#[ignore = "needs root"]
fn ucmatose_four_connections() {
    let s = ucmatose(&["-c", "4"]);
    assert!(s.contains("disconnected"), "{s}");
}

/// `ucmatose ARGS` on both sides (the client with `-s SRV`): both report
/// every transfer complete and status 0, no unexpected CM event; returns
/// the server's output.
fn ucmatose(args: &[&str]) -> String {
    let server: Vec<&str> = std::iter::once("ucmatose")
        .chain(args.iter().copied())
        .collect();
    let mut client = server.clone();
    client.extend(["-s", "SRV"]);
    let (s, c) = run_both(&server, &client, Ready::Engine, &[]);
    for (side, text) in [("server", &s), ("client", &c)] {
        for want in [
            "data transfers complete",
            "test complete",
            "return status 0",
        ] {
            assert!(text.contains(want), "{side} lacks {want:?}:\n{text}");
        }
        assert!(!text.contains("cmatose: event:"), "{side}:\n{text}");
    }
    s
}

/// ucmatose with 512 connections made at once (the REQs arrive in one
/// burst, as many as the kernel's MAD layer keeps receives posted for):
/// every one established, used and torn down on both sides. A Soft-RoCE
/// complaint users make is a CM that stops answering around a thousand.
#[test]
#[ignore = "needs root"]
fn ucmatose_512_connections_at_once() {
    ucmatose(&["-c", "512", "-C", "1"]);
}

/// udaddy: a UD QP on each side found through SIDR (the client's
/// ESTABLISHED carries the server's QPN, Q_Key and address), 10 SENDs
/// with immediate of 100 bytes each way; the server answers through an
/// address handle made from the first completion's GRH.
#[test]
#[ignore = "needs root"]
fn udaddy_ud_through_sidr() {
    let (s, c) = run_both(&["udaddy"], &["udaddy", "-s", "SRV"], Ready::Engine, &[]);
    for (side, text) in [("server", &s), ("client", &c)] {
        for want in [
            "data transfers complete",
            "test complete",
            "return status 0",
        ] {
            assert!(text.contains(want), "{side} lacks {want:?}:\n{text}");
        }
        assert!(!text.contains("udaddy: event:"), "{side}:\n{text}");
    }
}

/// rdma_server and rdma_client: the synchronous API (rdma_create_ep,
/// rdma_get_request, rdma_connect/rdma_accept blocking until ESTABLISHED)
/// and rdma_verbs.h's inlines on the id's own PD, QP, CQs and completion
/// channels; a 16-byte inline SEND each way.
#[test]
#[ignore = "needs root"]
fn rdma_server_and_rdma_client() {
    let (s, c) = run_both(
        &["rdma_server"],
        &["rdma_client", "-s", "SRV"],
        Ready::Engine,
        &[],
    );
    assert!(s.contains("rdma_server: end 0"), "{s}");
    assert!(c.contains("rdma_client: end 0"), "{c}");
    for text in [&s, &c] {
        assert!(!text.contains("doesn't support IBV_SEND_INLINE"), "{text}");
    }
}

/// A perftest tool with `-R`: the control channel and the data QP both
/// connected through the CM (two connections to port 18515 in turn).
/// The client's result table has the row `SIZE ITERS ...`.
fn perftest_cm(tool: &str, size: &str, iters: &str) {
    let (s, c) = run_both(
        &[tool, "-R", "-n", iters],
        &[tool, "-R", "-n", iters, "SRV"],
        Ready::Engine,
        &[],
    );
    for (side, text) in [("server", &s), ("client", &c)] {
        assert!(
            text.contains("rdma_cm QPs\t : ON") && text.contains("Data ex. method : rdma_cm"),
            "{tool} {side} did not use the CM:\n{text}"
        );
    }
    let row = c.lines().any(|l| {
        let mut words = l.split_whitespace();
        words.next() == Some(size) && words.next() == Some(iters)
    });
    assert!(row, "{tool}: no row {size} {iters}:\n{c}\n{s}");
}

#[test]
#[ignore = "needs root"]
fn ib_write_bw_through_the_cm() {
    perftest_cm("ib_write_bw", "65536", "1000");
}

#[test]
#[ignore = "needs root"]
fn ib_read_bw_through_the_cm() {
    perftest_cm("ib_read_bw", "65536", "1000");
}

#[test]
#[ignore = "needs root"]
fn ib_send_lat_through_the_cm() {
    perftest_cm("ib_send_lat", "2", "1000");
}

/// `qperf -cm1 SRV TEST` against a `qperf` server (which runs until
/// killed: it forks a child per test); the client exits 0, its report has
/// `want`, and the server is still there.
fn qperf_cm(test: &str, want: &str) {
    rdmacm_prerequisites();
    let pair = Pair::create();
    let mut server = pair.exec(0, &["qperf"]).spawn().expect("starting qperf");
    pair.wait_listening(0, 19765, &mut server);
    // qperf 0.4.11's server sends its CM port to the client before it
    // calls rdma_listen: a REQ that wins that race is rejected, as the
    // kernel rejects it ("unexpected event from RDMA CM: Event rejected");
    // the client is run again then, at most three times in all.
    let mut attempts = 0;
    let c = loop {
        attempts += 1;
        let client = pair
            .exec(
                1,
                &["qperf", "-cm1", "-t", "2", "-to", "10", &pair.ips[0], test],
            )
            .spawn()
            .expect("starting the qperf client");
        let c = finish(client, LIMIT);
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&c.stdout),
            String::from_utf8_lossy(&c.stderr)
        );
        let raced = said.contains("unexpected event from RDMA CM: Event rejected");
        if c.status.success() || !raced || attempts == 3 {
            break c;
        }
    };
    let still_running = server.try_wait().expect("waiting").is_none();
    let _ = server.kill();
    let s = server.wait_with_output().expect("collecting output");
    let st = format!(
        "{}{}",
        String::from_utf8_lossy(&s.stdout),
        String::from_utf8_lossy(&s.stderr)
    );
    let ct = assert_ok(&format!("qperf -cm1 {test}"), &c);
    assert!(still_running, "the qperf server exited:\n{st}");
    assert!(!ct.contains("set but not used"), "{ct}");
    assert!(
        ct.contains(&format!("{test}:")) && ct.contains(want),
        "qperf {test} lacks {want:?}:\n{ct}\n{st}"
    );
    assert!(!st.contains("failed"), "{st}");
}

#[test]
#[ignore = "needs root"]
fn qperf_rc_bw_through_the_cm() {
    qperf_cm("rc_bw", "bw  =");
}

#[test]
#[ignore = "needs root"]
fn qperf_rc_lat_through_the_cm() {
    qperf_cm("rc_lat", "latency  =");
}

/// qperf 0.4.11 connects through the CM for RC only: `-cm1` with a UD
/// test prints "warning: -cm1 set but not used in test ud_lat", and its
/// own UD path builds address handles from LIDs without a GRH, which no
/// RoCE device accepts (the kernel's `ib_create_ah` refuses an address
/// without a GRH on a RoCE port with EINVAL, rxe included). So `ud_lat`
/// cannot run on RoCE; the drop-in refuses its address handle as the
/// kernel does, with EINVAL and a message saying why, and both sides say
/// so and exit instead of hanging.
#[test]
#[ignore = "needs root"]
fn qperf_ud_lat_is_refused_as_on_every_roce_device() {
    rdmacm_prerequisites();
    let pair = Pair::create();
    let mut server = pair.exec(0, &["qperf"]).spawn().expect("starting qperf");
    pair.wait_listening(0, 19765, &mut server);
    let client = pair
        .exec(1, &["qperf", "-cm1", "-t", "2", &pair.ips[0], "ud_lat"])
        .spawn()
        .expect("starting the qperf client");
    let c = finish(client, LIMIT);
    let _ = server.kill();
    let s = server.wait_with_output().expect("collecting output");
    let ct = format!(
        "{}{}",
        String::from_utf8_lossy(&c.stdout),
        String::from_utf8_lossy(&c.stderr)
    );
    let st = format!(
        "{}{}",
        String::from_utf8_lossy(&s.stdout),
        String::from_utf8_lossy(&s.stderr)
    );
    assert!(!c.status.success(), "qperf ud_lat succeeded:\n{ct}");
    assert!(ct.contains("-cm1 set but not used in test ud_lat"), "{ct}");
    // Whichever side makes its address handle first reports: the client
    // its own failure, or the server's ("server: failed to ..."). qperf's
    // client reads the server's message from its non-blocking socket as
    // soon as the urgent byte before it arrives; when the message itself
    // is not there yet, it prints "server: " with nothing after it. The
    // server's own output has the message then.
    assert!(
        ct.contains("failed to create address handle: Invalid argument")
            || st.contains("failed to create address handle: Invalid argument"),
        "{ct}\n{st}"
    );
    assert!(
        ct.contains("the address has no GRH") || st.contains("the address has no GRH"),
        "{ct}\n{st}"
    );
}

/// fi_pingpong through libfabric 1.17's verbs provider: `-c` checks
/// every byte received; 200 round trips of 8 KiB (eight frames at MTU
/// 1024). FI_VERBS_IFACE names the veth, so the provider finds the
/// device by that interface's address (rdma_bind_addr setting
/// id->verbs) and lists no AF_IB addresses.
fn fi_pingpong(provider: &str, endpoint: &str) {
    let args = [
        "fi_pingpong",
        "-p",
        provider,
        "-e",
        endpoint,
        "-I",
        "200",
        "-S",
        "8192",
        "-c",
    ];
    let mut client = args.to_vec();
    client.push("SRV");
    let (s, c) = run_both(
        &args,
        &client,
        Ready::Tcp(47592),
        &[("FI_VERBS_IFACE", "IF")],
    );
    for (side, text) in [("server", &s), ("client", &c)] {
        let row = text.lines().any(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            w.len() > 3 && w[0] == "8k" && w[1] == "200" && w[2] == "=200"
        });
        assert!(
            row,
            "fi_pingpong {provider} {endpoint} {side}: no 8k row:\n{text}"
        );
    }
}

#[test]
#[ignore = "needs root"]
fn fi_pingpong_verbs_rxm_rdm() {
    fi_pingpong("verbs;ofi_rxm", "rdm");
}

#[test]
#[ignore = "needs root"]
fn fi_pingpong_verbs_msg() {
    fi_pingpong("verbs", "msg");
}

/// Namespaces of a [`Pair`] whose veths meet on a bridge `br0` in a third
/// namespace (returned, deleted on drop) instead of each other: what
/// crosses can be captured on the bridge's ports (the engines' own veths
/// hand RoCE to AF_XDP before any tap sees it).
struct Bridge(String);

impl Bridge {
    /// The bridge's port towards side `i` (a tap there sees both ways).
    fn port(&self, i: usize) -> String {
        format!("{}p{i}", self.0.trim_end_matches('m'))
    }
}

impl Drop for Bridge {
    fn drop(&mut self) {
        let _ = std::process::Command::new("ip")
            .args(["netns", "del", &self.0])
            .output();
    }
}

fn bridged_pair() -> (Pair, Bridge) {
    let pid = std::process::id() % 100_000;
    let k = 200 + (pid % 50);
    let pair = Pair {
        ns: [format!("rb{pid}a"), format!("rb{pid}b")],
        ifs: [format!("rb{pid}va"), format!("rb{pid}vb")],
        ips: [format!("10.55.{k}.1"), format!("10.55.{k}.2")],
    };
    let bridge = Bridge(format!("rb{pid}m"));
    for ns in [&pair.ns[0], &pair.ns[1], &bridge.0] {
        ip(&["netns", "add", ns]);
    }
    ip(&["-n", &bridge.0, "link", "add", "br0", "type", "bridge"]);
    ip(&["-n", &bridge.0, "link", "set", "br0", "up"]);
    for i in 0..2 {
        let port = bridge.port(i);
        ip(&[
            "link",
            "add",
            &pair.ifs[i],
            "netns",
            &pair.ns[i],
            "type",
            "veth",
            "peer",
            "name",
            &port,
            "netns",
            &bridge.0,
        ]);
        ip(&["-n", &bridge.0, "link", "set", &port, "master", "br0", "up"]);
        let addr = format!("{}/24", pair.ips[i]);
        ip(&["-n", &pair.ns[i], "addr", "add", &addr, "dev", &pair.ifs[i]]);
        ip(&["-n", &pair.ns[i], "link", "set", "lo", "up"]);
        ip(&["-n", &pair.ns[i], "link", "set", &pair.ifs[i], "up"]);
    }
    (pair, bridge)
}

/// The PSNs of an RC connection the CM made are the kernel's (cm.c): the
/// Starting PSN a side puts in its REQ or REP is the one it receives from
/// (`ib_send_cm_rep`: `rq_psn = REP.starting_psn`; `cm_req_handler`:
/// `sq_psn = REQ.starting_psn`), so the active side's first request
/// carries the REP's Starting PSN and the passive side's the REQ's. Two
/// drop-ins that both swapped them would talk to each other and to no
/// kernel: rping's frames, captured on a bridge between the two
/// namespaces, decoded by tshark.
#[test]
#[ignore = "needs root"]
fn rc_psns_follow_the_starting_psns_as_the_kernels_cm() {
    rdmacm_prerequisites();
    let (pair, bridge) = bridged_pair();
    let pcap = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("rping-psn-{}.pcap", std::process::id()));
    let mut tcpdump = std::process::Command::new("ip")
        .args([
            "netns",
            "exec",
            &bridge.0,
            "tcpdump",
            "-i",
            &bridge.port(0),
            // Each frame written as it comes (no ring buffer left unread
            // when tcpdump is stopped).
            "--immediate-mode",
            "-U",
            "-w",
        ])
        .arg(&pcap)
        .arg("udp port 4791")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("starting tcpdump (scripts/setup-deps.sh installs it)");
    // tcpdump says "listening on" once it captures.
    let mut err = tcpdump.stderr.take().expect("piped");
    let mut listening = [0u8; 256];
    let _ = std::io::Read::read(&mut err, &mut listening);
    let mut server = pair
        .exec(0, &["rping", "-s", "-a", "0.0.0.0", "-C", "3", "-v"])
        .spawn()
        .expect("starting rping");
    pair.wait_engine(0, &mut server, LISTEN_GRACE);
    let client = pair
        .exec(
            1,
            &["rping", "-c", "-a", &pair.ips[0], "-C", "3", "-v", "-V"],
        )
        .spawn()
        .expect("starting the client");
    let c = finish(client, LIMIT);
    let s = finish(server, LIMIT);
    std::thread::sleep(Duration::from_millis(300));
    // SIGTERM: tcpdump flushes and says what it captured.
    let _ = std::process::Command::new("kill")
        .arg(tcpdump.id().to_string())
        .status();
    let _ = tcpdump.wait();
    let mut said = String::new();
    let _ = std::io::Read::read_to_string(&mut err, &mut said);
    assert_ok("rping client", &c);
    assert_ok("rping server", &s);
    let fields = std::process::Command::new("tshark")
        .args(["-n", "-r"])
        .arg(&pcap)
        .args(["-Y", "infiniband", "-T", "fields", "-E", "occurrence=f"])
        .args([
            "-e",
            "ip.src",
            "-e",
            "infiniband.bth.opcode",
            "-e",
            "infiniband.bth.destqp",
        ])
        .args([
            "-e",
            "infiniband.bth.psn",
            "-e",
            "infiniband.cm.req.startpsn",
        ])
        .args(["-e", "infiniband.cm.rep.startpsn"])
        .output()
        .expect("running tshark (scripts/setup-deps.sh installs it)");
    let text = assert_ok("tshark", &fields);
    let num = |f: &str| u32::from_str_radix(f.trim_start_matches("0x"), 16).ok();
    let (mut req_psn, mut rep_psn) = (None, None);
    let (mut first_from_client, mut first_from_server) = (None, None);
    for line in text.lines() {
        let f: Vec<&str> = line.split('\t').collect();
        if f.len() < 6 {
            continue;
        }
        let opcode: u8 = f[1].parse().unwrap_or(0xff);
        if f[2] == "0x000001" {
            req_psn = req_psn.or(num(f[4]));
            rep_psn = rep_psn.or(num(f[5]));
            continue;
        }
        // RC requests: SEND, WRITE, READ request (IBA 9.2: 0x00-0x0c),
        // not the responses (0x0d-0x12).
        if opcode > 0x0c {
            continue;
        }
        let psn: u32 = f[3].parse().unwrap_or(u32::MAX);
        if f[0] == pair.ips[1] {
            first_from_client = first_from_client.or(Some(psn));
        } else if f[0] == pair.ips[0] {
            first_from_server = first_from_server.or(Some(psn));
        }
    }
    let (Some(req_psn), Some(rep_psn)) = (req_psn, rep_psn) else {
        panic!("no REQ/REP in {}: tcpdump: {said}\n{text}", pcap.display());
    };
    assert_eq!(
        first_from_client,
        Some(rep_psn),
        "the active side's first request: REQ PSN {req_psn:#x}, REP PSN {rep_psn:#x}\n{text}"
    );
    assert_eq!(
        first_from_server,
        Some(req_psn),
        "the passive side's first request: REQ PSN {req_psn:#x}, REP PSN {rep_psn:#x}\n{text}"
    );
}

#[test]
fn rping_pattern_is_rpings() {
    // From rping.c: ping 0 starts at 'A', ping 1 at 'B'; 64-byte buffer.
    let p0 = rping_data(0);
    assert_eq!(p0.len(), 63);
    assert!(p0.starts_with("rdma-ping-0: ABCDEFG"), "{p0}");
    assert!(rping_data(1).starts_with("rdma-ping-1: BCD"));
    // 'z' wraps to 'A'.
    assert!(rping_data(57).starts_with("rdma-ping-57: zABC"));
    assert!(rping_data(58).starts_with("rdma-ping-58: ABC"));
}
