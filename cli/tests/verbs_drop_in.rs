//! Debian's own verbs binaries (ibverbs-utils, perftest, and the programs
//! of pyverbs, libfabric, UCX, Open MPI, librdmacm and qperf loading with
//! every symbol bound) and C programs of ours (`verbs_drop_in_errors.c`,
//! `verbs_provider.c`) on the engine through the drop-in libibverbs, under
//! `roce-xdp exec`, between two network namespaces joined by veth.
//! Needs root, the packages scripts/setup-deps.sh installs, and the
//! drop-in built (`cargo build --release -p roce-xdp-ibverbs`, which
//! `cargo test --workspace` does).

mod drop_in;

use drop_in::*;
use std::path::Path;
use std::process::{Command, Stdio};

/// `verbs_provider CHECK` under exec on one side of a fresh pair: it
/// prints "ok" and exits 0 when every assertion of the check holds.
fn provider_check(check: &str) -> String {
    prerequisites();
    let exe = compile_c("tests/verbs_provider.c");
    let pair = Pair::create();
    let out = finish(
        pair.exec(0, &[exe.to_str().unwrap(), check])
            .spawn()
            .unwrap(),
        LIMIT,
    );
    let text = assert_ok(&format!("verbs_provider {check}"), &out);
    assert!(text.contains("ok"), "{text}");
    text
}

/// Two QPs of the one device connected to each other: WRITE, READ,
/// SEND with immediate and fetch-and-add inside the engine, every byte
/// checked; nothing asks ARP for the engine's own address, and the
/// frames are counted as looped back.
#[test]
#[ignore = "needs root"]
fn two_qps_of_one_device_reach_each_other() {
    let text = provider_check("loopback");
    assert!(!text.contains("cannot resolve"), "{text}");
}

/// The QP's remote access flags are enforced on incoming requests.
#[test]
#[ignore = "needs root"]
fn a_qp_refuses_what_its_access_flags_do_not_grant() {
    provider_check("access");
}

/// Argument checks with rxe's errnos, ibv_rereg_mr, the device's
/// attributes and the string helpers; sends whose SGEs name no region, a
/// region of another PD or bytes past their region are posted and fail
/// when they run (RC and UD), receives whose SGEs do (or name a region
/// without LOCAL_WRITE) are posted and fail when a message reaches them
/// (RC, SRQ, UD), a UD send through an address handle of another PD is
/// posted and fails, as rxe.
#[test]
#[ignore = "needs root"]
fn verbs_check_their_arguments_as_rxe() {
    provider_check("checks");
}

/// Wrong, destroyed and NULL handles get errors, never a crash; an lkey of
/// another PD gets an error completion.
#[test]
#[ignore = "needs root"]
fn bad_handles_and_foreign_keys_get_errors() {
    provider_check("bad-input");
}

/// Memory windows of type 1 and 2: bound, written and read through
/// their R_Keys, closed by LOCAL_INV, SEND_WITH_INV, a zero-length bind
/// and ibv_dealloc_mw, with an access refused after each.
#[test]
#[ignore = "needs root"]
fn memory_windows_open_and_close_a_region_to_remote_access() {
    provider_check("windows");
}

/// Scatter/gather lists and inline data as rxe has them: the caps it
/// grants, SEND, WRITE and READ with lists of up to 32 entries checked
/// byte for byte, inline SEND and WRITE from unregistered buffers reused
/// at once, a zero-SGE WRITE_WITH_IMM into a zero-SGE receive, and
/// rxe's EINVALs and error completions.
#[test]
#[ignore = "needs root"]
fn scatter_gather_lists_and_inline_data() {
    provider_check("sgl");
}

/// Programs of every Debian package that links libibverbs start under
/// exec with every symbol bound at load (`LD_BIND_NOW=1`): the loader
/// finds each symbol and version in the drop-in, and those that list
/// devices find roce-xdp0.
#[test]
#[ignore = "needs root"]
fn debian_verbs_programs_load_with_every_symbol_bound() {
    prerequisites();
    let pair = Pair::create();
    let pyverbs = "import pyverbs.device as d, pyverbs.pd, pyverbs.mr, pyverbs.qp, pyverbs.cq, \
                   pyverbs.cmid; print([x.name.decode() for x in d.get_device_list()])";
    let cases: &[(&[&str], Option<&str>)] = &[
        (&["ibv_devices"], Some("roce-xdp0")),
        (&["/usr/bin/python3", "-c", pyverbs], Some("roce-xdp0")),
        (&["ucx_info", "-d"], Some("roce-xdp0")),
        (&["fi_info", "-l"], Some("verbs")),
        (&["ompi_info"], Some("Open MPI")),
        (&["ib_write_bw", "-h"], None),
        (&["ib_send_lat", "-h"], None),
        (&["qperf", "--help"], None),
        (&["rping", "-h"], None),
    ];
    for (args, want) in cases {
        let mut cmd = pair.exec(0, args);
        cmd.env("LD_BIND_NOW", "1");
        let out = finish(cmd.spawn().unwrap(), LIMIT);
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        for bad in [
            "symbol lookup error",
            "undefined symbol",
            "version `IBVERBS",
        ] {
            assert!(!text.contains(bad), "{}: {bad}:\n{text}", args.join(" "));
        }
        if let Some(w) = want {
            assert!(text.contains(w), "{} lacks {w:?}:\n{text}", args.join(" "));
        }
    }
}

/// Server (no address) on side 0, client (side 0's address) on side 1,
/// the same arguments otherwise; both must exit 0.
fn client_server(args: &[&str]) -> (String, String) {
    prerequisites();
    let pair = Pair::create();
    let mut server = pair.exec(0, args).spawn().expect("starting the server");
    pair.wait_listening(0, 18515, &mut server);
    let mut cargs = args.to_vec();
    cargs.push(&pair.ips[0]);
    let client = pair.exec(1, &cargs).spawn().expect("starting the client");
    let c = finish(client, LIMIT);
    let s = finish(server, LIMIT);
    let ct = assert_ok(&format!("client {}", args.join(" ")), &c);
    let st = assert_ok(&format!("server {}", args.join(" ")), &s);
    (st, ct)
}

#[test]
#[ignore = "needs root"]
fn ibv_devices_and_ibv_devinfo_show_an_active_roce_v2_port() {
    prerequisites();
    let pair = Pair::create();
    let list = finish(pair.exec(0, &["ibv_devices"]).spawn().unwrap(), LIMIT);
    assert!(assert_ok("ibv_devices", &list).contains("roce-xdp0"));
    let info = finish(pair.exec(0, &["ibv_devinfo", "-v"]).spawn().unwrap(), LIMIT);
    let info = assert_ok("ibv_devinfo -v", &info);
    for want in [
        "hca_id:\troce-xdp0",
        "state:\t\t\tPORT_ACTIVE (4)",
        "link_layer:\t\tEthernet",
        "active_mtu:\t\t1024 (3)",
        &format!("GID[  1]:\t\t::ffff:{}, RoCE v2", pair.ips[0]),
    ] {
        assert!(info.contains(want), "ibv_devinfo lacks {want:?}:\n{info}");
    }
}

#[test]
#[ignore = "needs root"]
fn no_device_with_the_reason_without_an_interface_or_privileges() {
    prerequisites();
    // The drop-in used without the wrapper, pointed at no interface.
    let so_dir = Path::new(env!("CARGO_BIN_EXE_roce-xdp")).with_file_name("roce-xdp-ibverbs");
    let pair = Pair::create();
    // Make sure the drop-in is linked (exec links it on first use).
    let _ = finish(pair.exec(0, &["true"]).spawn().unwrap(), LIMIT);
    let out = Command::new("ip")
        .args(["netns", "exec", &pair.ns[0], "ibv_devices"])
        .env("LD_LIBRARY_PATH", &so_dir)
        .env("ROCE_XDP_IFACE", "vb-missing")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("roce-xdp: no device: "), "{err}");
    assert!(err.contains("vb-missing"), "{err}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("roce-xdp0"));
    // Without privileges (nobody): no device, and what is missing.
    let out = Command::new("ip")
        .args(["netns", "exec", &pair.ns[0], "setpriv", "--reuid", "65534"])
        .args(["--regid", "65534", "--clear-groups", "ibv_devices"])
        .env("LD_LIBRARY_PATH", &so_dir)
        .env("ROCE_XDP_IFACE", &pair.ifs[0])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("roce-xdp: no device: "), "{err}");
    assert!(err.contains("CAP_BPF and CAP_NET_ADMIN"), "{err}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("roce-xdp0"));
}

#[test]
#[ignore = "needs root"]
fn ibv_rc_pingpong_polling() {
    // -c: each side checks the bytes it received (rc_pingpong prints
    // "invalid data in page N" for a page that does not hold them).
    let (s, c) = client_server(&["ibv_rc_pingpong", "-c", "-g", "1", "-n", "200"]);
    assert!(
        s.contains("200 iters in") && c.contains("200 iters in"),
        "{s}\n{c}"
    );
    assert!(
        !(s.contains("invalid data") || c.contains("invalid data")),
        "{s}\n{c}"
    );
}

#[test]
#[ignore = "needs root"]
fn ibv_rc_pingpong_event_mode() {
    // -c: each side checks the bytes it received (rc_pingpong prints
    // "invalid data in page N" for a page that does not hold them).
    let (s, c) = client_server(&["ibv_rc_pingpong", "-c", "-e", "-g", "1", "-n", "200"]);
    assert!(
        s.contains("200 iters in") && c.contains("200 iters in"),
        "{s}\n{c}"
    );
    assert!(
        !(s.contains("invalid data") || c.contains("invalid data")),
        "{s}\n{c}"
    );
}

/// A perftest tool, both sides under exec, GID index 1.
fn perftest(tool: &str, extra: &[&str]) {
    let mut args = vec![tool, "-x", "1", "-n", "100"];
    args.extend_from_slice(extra);
    let (s, c) = client_server(&args);
    assert!(c.contains("#bytes"), "{tool}: no result table:\n{c}\n{s}");
}

#[test]
#[ignore = "needs root"]
fn ib_write_bw() {
    perftest("ib_write_bw", &[]);
}

#[test]
#[ignore = "needs root"]
fn ib_send_bw() {
    perftest("ib_send_bw", &[]);
}

#[test]
#[ignore = "needs root"]
fn ib_read_bw() {
    perftest("ib_read_bw", &[]);
}

#[test]
#[ignore = "needs root"]
fn ib_write_lat() {
    perftest("ib_write_lat", &[]);
}

#[test]
#[ignore = "needs root"]
fn ib_send_lat() {
    perftest("ib_send_lat", &[]);
}

#[test]
#[ignore = "needs root"]
fn ib_read_lat() {
    perftest("ib_read_lat", &[]);
}

#[test]
#[ignore = "needs root"]
fn ib_atomic_bw() {
    perftest("ib_atomic_bw", &[]);
}

#[test]
#[ignore = "needs root"]
fn ib_atomic_lat() {
    perftest("ib_atomic_lat", &[]);
}

#[test]
#[ignore = "needs root"]
fn a_second_program_on_the_same_queue_gets_no_device_and_the_reason() {
    prerequisites();
    let pair = Pair::create();
    // The first program holds the queue while it waits for a client.
    let mut first = pair
        .exec(0, &["ibv_rc_pingpong", "-g", "1"])
        .spawn()
        .expect("starting the first program");
    pair.wait_listening(0, 18515, &mut first);
    let second = finish(pair.exec(0, &["ibv_devices"]).spawn().unwrap(), LIMIT);
    let _ = first.kill();
    let _ = first.wait();
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(
        err.contains("in use by another roce-xdp engine"),
        "second program: {err}"
    );
    assert!(!String::from_utf8_lossy(&second.stdout).contains("roce-xdp0"));
}

#[test]
#[ignore = "needs root"]
fn unsupported_verbs_and_qp_errors_as_a_verbs_program_sees_them() {
    prerequisites();
    let exe = compile_c("tests/verbs_drop_in_errors.c");
    let pair = Pair::create();
    // The peer has an address (ARP answers) but no engine: nothing acks.
    let out = finish(
        pair.exec(0, &[exe.to_str().unwrap(), &pair.ips[1]])
            .spawn()
            .unwrap(),
        LIMIT,
    );
    let text = assert_ok("verbs_drop_in_errors", &out);
    assert!(text.contains("ok"), "{text}");
    let lines = String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter(|l| l.contains("ibv_import_pd"))
        .count();
    assert_eq!(lines, 1, "the unsupported verb is named once:\n{text}");
}

/// `roce-xdp stats --iface IF` answers for a program under exec, as for
/// the CLI's own engines: its queue's transport counters and the
/// drop-in's own (how often the program polled, what the progress thread
/// did), with the program's pid.
#[test]
#[ignore = "needs root"]
fn roce_xdp_stats_sees_a_program_under_exec() {
    prerequisites();
    let pair = Pair::create();
    // A server that waits for a client which never comes: the engine is
    // open, idle, for as long as the test looks at it.
    let mut server = pair
        .exec(0, &["ibv_rc_pingpong", "-g", "1"])
        .spawn()
        .expect("starting ibv_rc_pingpong");
    pair.wait_listening(0, 18515, &mut server);
    let stats = Command::new("ip")
        .args(["netns", "exec", &pair.ns[0], env!("CARGO_BIN_EXE_roce-xdp")])
        .args(["stats", "--iface", &pair.ifs[0], "--json"])
        .output()
        .expect("running roce-xdp stats");
    let _ = server.kill();
    let _ = server.wait();
    let text = assert_ok("roce-xdp stats", &stats);
    let doc: serde_json::Value = serde_json::from_str(&text).expect("stats --json is JSON");
    assert_eq!(doc["pid"].as_u64(), Some(u64::from(server.id())), "{text}");
    for counter in [
        "rcvd_pkts",
        "verbs_poll_cq_calls",
        "progress_thread_loops",
        "progress_thread_sleeps",
    ] {
        assert!(
            text.contains(&format!("\"{counter}\"")),
            "no {counter}: {text}"
        );
    }
}

/// On an interface with more RX queues than the program's and no way to
/// steer RoCE to it (veth has no ntuple filters), the program gets no
/// device and the reason, as the CLI's tools refuse; `--force` starts
/// anyway with a warning; a queue other than 0 cannot be steered to.
#[test]
#[ignore = "needs root"]
fn uncovered_queues_are_refused_unless_forced() {
    prerequisites();
    let pair = Pair::with_queues(2);
    let run = |extra: &[&str]| {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &pair.ns[0], env!("CARGO_BIN_EXE_roce-xdp")])
            .args(["exec", "--iface", &pair.ifs[0]])
            .args(extra)
            .args(["--", "ibv_devices"]);
        let out = c.output().expect("running exec");
        (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (out, err) = run(&[]);
    assert!(!out.contains("roce-xdp0"), "{out}");
    assert!(
        err.contains("has 2 RX queues but only queue 0 is served") && err.contains("--force"),
        "{err}"
    );
    let (out, err) = run(&["--force"]);
    assert!(out.contains("roce-xdp0"), "{out}\n{err}");
    assert!(err.contains("warning: forced (--force)"), "{err}");
    let (out, err) = run(&["--queues", "1"]);
    assert!(!out.contains("roce-xdp0"), "{out}");
    assert!(err.contains("serves queue 1 alone"), "{err}");
}

/// The transfer-engine pattern (benches/programs/threaded_rdma_bw.c):
/// four threads post batches of RDMA READs (WRITEs) on QPs of their own
/// or shared, another polls the CQ they share; the READ client checks the
/// bytes it read. Both sides exit 0 and the client moved batches (its
/// speed is the benchmark's business: benches/src/verbs_drop_in.rs).
#[test]
#[ignore = "needs root"]
fn posting_threads_and_a_polling_thread() {
    prerequisites();
    let exe = compile_c("../benches/programs/threaded_rdma_bw.c");
    let exe = exe.to_str().unwrap();
    let runs: [&[&str]; 3] = [
        &["-o", "read", "-c", "-w", "spin"],
        &["-o", "read", "-c", "-w", "block", "-q", "2"],
        &["-o", "write", "-s", "4096", "-w", "yield"],
    ];
    for args in runs {
        let pair = Pair::create();
        let mut server_args = vec![exe];
        server_args.extend_from_slice(args);
        let mut server = pair.exec(0, &server_args).spawn().unwrap();
        pair.wait_listening(0, 18597, &mut server);
        let mut client_args = server_args.clone();
        client_args.extend(["-D", "1", &pair.ips[0]]);
        let c = finish(pair.exec(1, &client_args).spawn().unwrap(), LIMIT);
        let s = finish(server, LIMIT);
        let text = assert_ok(&format!("client {}", args.join(" ")), &c);
        assert_ok(&format!("server {}", args.join(" ")), &s);
        let json = text
            .lines()
            .find(|l| l.starts_with('{'))
            .unwrap_or_else(|| panic!("no JSON line:\n{text}"));
        let doc: serde_json::Value = serde_json::from_str(json).expect(json);
        assert!(doc["batches"].as_u64() > Some(0), "{text}");
    }
}

/// `verbs_extended CHECK` under exec on one side of a fresh pair: it
/// prints "ok" and exits 0 when every assertion of the check holds.
fn extended_check(check: &str) {
    prerequisites();
    let exe = compile_c("tests/verbs_extended.c");
    let pair = Pair::create();
    let out = finish(
        pair.exec(0, &[exe.to_str().unwrap(), check])
            .spawn()
            .unwrap(),
        LIMIT,
    );
    let text = assert_ok(&format!("verbs_extended {check}"), &out);
    assert!(text.contains("ok"), "{text}");
    // What the checks of a narrower post path say they checked instead.
    eprint!("{}", String::from_utf8_lossy(&out.stdout));
}

/// QPs of ibv_create_qp_ex post SEND, SEND_WITH_IMM, WRITE,
/// WRITE_WITH_IMM, READ, CMP_SWP, FETCH_ADD and ATOMIC_WRITE through ibv_wr_* (one at a
/// time and in a batch); CQs of ibv_create_cq_ex are polled through
/// ibv_start_poll/ibv_next_poll/ibv_end_poll and read with
/// ibv_wc_read_*, and serve ibv_poll_cq and a completion channel; every
/// byte checked; ibv_wr_abort posts nothing.
#[test]
#[ignore = "needs root"]
fn extended_qps_and_cqs_move_and_complete_every_operation() {
    extended_check("traffic");
}

/// The extended verbs refuse what rxe refuses, with its errnos, and a
/// builder the QP was not created with, a NULL or destroyed QP, an
/// overfull batch get an errno, never a crash.
#[test]
#[ignore = "needs root"]
fn extended_verbs_refuse_as_rxe() {
    extended_check("refusals");
}

/// ibv_wr_set_inline_data and ibv_wr_set_inline_data_list: the data is
/// taken at the call, sent from no registered region (on a device whose
/// post path has no inline data copied at post time, max_sge 1: refused
/// with EINVAL at ibv_wr_complete, and the program says so).
#[test]
#[ignore = "needs root"]
fn extended_qps_send_inline_data() {
    extended_check("inline");
}

/// ibv_wr_set_sge_list gathers several SGEs into a SEND and a WRITE (on
/// a device of max_sge 1: the QP of three SGEs is refused, and the
/// program says so).
#[test]
#[ignore = "needs root"]
fn extended_qps_gather_an_sge_list() {
    extended_check("sge-list");
}

/// rdma-core's own example on the extended API: `-N` creates its QPs with
/// ibv_create_qp_ex and posts through ibv_wr_send/ibv_wr_set_sge.
#[test]
#[ignore = "needs root"]
fn ibv_rc_pingpong_new_send_api() {
    let (s, c) = client_server(&["ibv_rc_pingpong", "-N", "-c", "-g", "1", "-n", "200"]);
    assert!(
        s.contains("200 iters in") && c.contains("200 iters in"),
        "{s}\n{c}"
    );
    assert!(
        !(s.contains("invalid data") || c.contains("invalid data")),
        "{s}\n{c}"
    );
}

/// UD QPs and address handles on the device's own GID (loopback):
/// `verbs_provider ud` checks the caps, transitions, SEND and
/// SEND_WITH_IMM with the GRH area byte for byte, src_qp, wc_flags,
/// byte_len, `ibv_create_ah_from_wc` answering back, the extended API,
/// and the bad inputs; while it holds, the engine's counters show the
/// datagram with a wrong Q_Key dropped and the send longer than the MTU
/// completed without a packet.
#[test]
#[ignore = "needs root"]
fn ud_qps_and_address_handles_on_the_devices_own_gid() {
    use std::io::{BufRead, BufReader};
    prerequisites();
    let exe = compile_c("tests/verbs_provider.c");
    let pair = Pair::create();
    let mut child = pair
        .exec(0, &[exe.to_str().unwrap(), "ud"])
        .env("UD_HOLD", "1")
        .stdin(Stdio::piped())
        .spawn()
        .expect("starting verbs_provider ud");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.next().and_then(Result::ok);
    if first.as_deref() != Some("hold") {
        let out = child.wait_with_output().unwrap();
        panic!(
            "verbs_provider ud did not reach its hold ({first:?}):\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let stats = Command::new("ip")
        .args(["netns", "exec", &pair.ns[0], env!("CARGO_BIN_EXE_roce-xdp")])
        .args(["stats", "--iface", &pair.ifs[0], "--json"])
        .output()
        .expect("running roce-xdp stats");
    drop(child.stdin.take());
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    let out = finish(child, LIMIT);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "verbs_provider ud failed:\n{err}");
    assert_eq!(rest, ["ok"], "{err}");
    let text = assert_ok("roce-xdp stats", &stats);
    let doc: serde_json::Value = serde_json::from_str(&text).expect("stats --json is JSON");
    let counters = &doc["queues"][0]["counters"];
    assert_eq!(counters["dropped_bad_qkey"].as_u64(), Some(1), "{text}");
    assert_eq!(counters["ud_send_too_long"].as_u64(), Some(2), "{text}");
    // Loopback: nothing asked ARP for the device's own address.
    assert!(!err.contains("cannot resolve"), "{err}");
}

/// Debian's `ibv_ud_pingpong` between the two namespaces: the server on
/// one side, the client on the other, then the other way round, in a few
/// sizes up to the port's MTU (1024 on a 1500-byte veth), polling and
/// with completion events; `-c` checks the bytes received.
#[test]
#[ignore = "needs root"]
fn ibv_ud_pingpong_both_directions_and_sizes() {
    prerequisites();
    let pair = Pair::create();
    for (server, size, events) in [(0, "1", false), (1, "512", true), (0, "1024", true)]
        .into_iter()
        .chain([(1, "1024", false), (1, "64", false)])
    {
        let mut args = vec!["ibv_ud_pingpong", "-c", "-g", "1", "-n", "200", "-s", size];
        if events {
            args.push("-e");
        }
        let mut s = pair
            .exec(server, &args)
            .spawn()
            .expect("starting the server");
        pair.wait_listening(server, 18515, &mut s);
        let mut cargs = args.clone();
        cargs.push(&pair.ips[server]);
        let c = finish(
            pair.exec(1 - server, &cargs)
                .spawn()
                .expect("starting the client"),
            LIMIT,
        );
        let s = finish(s, LIMIT);
        let what = format!("ibv_ud_pingpong -s {size} (server on side {server})");
        let ct = assert_ok(&format!("client {what}"), &c);
        let st = assert_ok(&format!("server {what}"), &s);
        assert!(
            st.contains("200 iters in") && ct.contains("200 iters in"),
            "{what}:\n{st}\n{ct}"
        );
        assert!(
            !(st.contains("invalid data") || ct.contains("invalid data")),
            "{what}:\n{st}\n{ct}"
        );
    }
}

/// A size above the port's MTU is refused by `ibv_ud_pingpong` itself
/// (it reads the port's active MTU), as on rxe.
#[test]
#[ignore = "needs root"]
fn ibv_ud_pingpong_refuses_a_size_above_the_mtu() {
    prerequisites();
    let pair = Pair::create();
    let out = finish(
        pair.exec(0, &["ibv_ud_pingpong", "-g", "1", "-s", "2048"])
            .spawn()
            .unwrap(),
        LIMIT,
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("larger than port MTU (1024)"), "{err}");
}

/// A shared receive queue through the drop-in: two QPs receive through
/// one SRQ (bytes and completions checked), the limit event arrives
/// through `ibv_get_async_event` once, receives of SGE lists up to rxe's
/// 27 scatter in order, a QP of an SRQ moved to error raises
/// `IBV_EVENT_QP_LAST_WQE_REACHED` once, and rxe's errnos for the SRQ verbs,
/// a post to a QP of the SRQ, a destroy while QPs use it and bad handles.
#[test]
#[ignore = "needs root"]
fn a_shared_receive_queue_serves_two_qps_and_raises_its_limit_event() {
    provider_check("srq");
}

/// Debian's `ibv_srq_pingpong`, both sides under exec: `QPS` QPs whose
/// receives come from one SRQ of `rx_depth` 64, messages of `size`
/// bytes (one packet, four packets at MTU 1024, ten), data checked (`-c`:
/// the client prints "invalid data in page N" for a page that does not
/// hold its bytes).
fn srq_pingpong(size: &str, qps: &str, extra: &[&str]) {
    let mut args = vec![
        "ibv_srq_pingpong",
        "-c",
        "-g",
        "1",
        "-n",
        "400",
        "-r",
        "64",
        "-s",
        size,
        "-q",
        qps,
    ];
    args.extend_from_slice(extra);
    let (s, c) = client_server(&args);
    let what = args.join(" ");
    assert!(
        s.contains("400 iters in") && c.contains("400 iters in"),
        "{what}:\n{s}\n{c}"
    );
    assert!(
        !(s.contains("invalid data") || c.contains("invalid data")),
        "{what}:\n{s}\n{c}"
    );
}

#[test]
#[ignore = "needs root"]
fn ibv_srq_pingpong_four_qps_several_sizes() {
    for size in ["1", "4096", "10000"] {
        srq_pingpong(size, "4", &[]);
    }
}

#[test]
#[ignore = "needs root"]
fn ibv_srq_pingpong_sixteen_qps_event_mode() {
    srq_pingpong("2048", "16", &["-e"]);
}

/// rdma-core's UC example (`IBV_QPT_UC`: UC's modify masks, SENDs that
/// complete as they leave, receives that complete as messages land) in
/// both directions (each side sends and receives every iteration), one
/// packet (64 bytes), a path MTU's worth, and 16 packets a message; each
/// side checks the bytes it received (`-c`).
#[test]
#[ignore = "needs root"]
fn ibv_uc_pingpong_sizes_and_event_mode() {
    for (size, events) in [
        ("64", false),
        ("1024", false),
        ("16384", false),
        ("4096", true),
    ] {
        let mut args = vec!["ibv_uc_pingpong", "-c", "-g", "1", "-n", "200", "-s", size];
        if events {
            args.push("-e");
        }
        let (s, c) = client_server(&args);
        assert!(
            s.contains("200 iters in") && c.contains("200 iters in"),
            "size {size}:\n{s}\n{c}"
        );
        let bytes = format!("{} bytes in", 2 * 200 * size.parse::<u64>().unwrap());
        assert!(
            s.contains(&bytes) && c.contains(&bytes),
            "size {size}:\n{s}\n{c}"
        );
        assert!(
            !(s.contains("invalid data") || c.contains("invalid data")),
            "size {size}:\n{s}\n{c}"
        );
    }
}

/// UC's refusals and its completions as a verbs program sees them
/// (`verbs_uc.c`): RC's modify masks and READ, atomics and SEND with
/// invalidate refused with EINVAL; a SEND and a WRITE with immediate
/// complete successfully with no peer engine to answer them.
#[test]
#[ignore = "needs root"]
fn uc_qps_refuse_what_uc_has_not_and_complete_sends_as_they_leave() {
    prerequisites();
    let exe = compile_c("tests/verbs_uc.c");
    let pair = Pair::create();
    let out = finish(
        pair.exec(0, &[exe.to_str().unwrap(), &pair.ips[1]])
            .spawn()
            .unwrap(),
        LIMIT,
    );
    let text = assert_ok("verbs_uc", &out);
    assert!(text.contains("ok"), "{text}");
}

#[test]
#[ignore = "needs root"]
fn two_contexts_of_one_device_have_their_own_async_events() {
    provider_check("contexts");
}
