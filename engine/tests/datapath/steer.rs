//! The XDP program's steering decisions, observed end to end over a veth
//! pair in namespaces this test creates: hand-built frames are sent from
//! an AF_XDP socket in namespace `a`; in namespace `b` the program must
//! redirect exactly the RoCE v2 frames (UDP 4791 over IPv4/IPv6, with or
//! without an 802.1Q tag) to the AF_XDP socket and pass everything else to
//! the kernel. Also: ping and TCP keep working while the program is
//! attached, and a SIGKILLed process leaves no XDP program behind.

use std::io::{Read, Write};
use std::process::Command;
use std::time::{Duration, Instant};

use engine::io::{XskConfig, XskSocket};
use engine::nic::{AttachMode, SteerProgram};
use engine::testbed::netns::{PairConfig, VethPair};

use crate::support::{attach_queue0, require_root, send_all};

#[derive(Clone, Copy)]
struct FrameSpec {
    vlan: bool,
    ipv6: bool,
    proto: u8,
    dport: u16,
    /// IPv4 flags/fragment-offset word.
    frag: u16,
    ihl: u8,
    /// Cut the frame after this many bytes (0 = whole frame).
    truncate: usize,
}

const ROCE4: FrameSpec = FrameSpec {
    vlan: false,
    ipv6: false,
    proto: 17,
    dport: 4791,
    frag: 0x4000,
    ihl: 5,
    truncate: 0,
};

fn build(spec: FrameSpec, dst_mac: [u8; 6], src_mac: [u8; 6]) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&dst_mac);
    f.extend_from_slice(&src_mac);
    if spec.vlan {
        f.extend_from_slice(&[0x81, 0x00, 0x00, 0x05]);
    }
    let payload = 64usize;
    if spec.ipv6 {
        f.extend_from_slice(&[0x86, 0xdd]);
        f.extend_from_slice(&[0x60, 0, 0, 0]);
        f.extend_from_slice(&((8 + payload) as u16).to_be_bytes());
        f.extend_from_slice(&[spec.proto, 64]);
        f.extend_from_slice(&"fd00:47::1".parse::<std::net::Ipv6Addr>().unwrap().octets());
        f.extend_from_slice(&"fd00:47::2".parse::<std::net::Ipv6Addr>().unwrap().octets());
    } else {
        f.extend_from_slice(&[0x08, 0x00]);
        let hl = spec.ihl.max(5) as usize * 4;
        let total = (hl + 8 + payload) as u16;
        f.push(0x40 | spec.ihl);
        f.push(0);
        f.extend_from_slice(&total.to_be_bytes());
        f.extend_from_slice(&[0, 1]);
        f.extend_from_slice(&spec.frag.to_be_bytes());
        f.extend_from_slice(&[64, spec.proto, 0, 0, 10, 47, 0, 1, 10, 47, 0, 2]);
        f.resize(f.len() + hl - 20, 1); // options (NOPs), if any
    }
    f.extend_from_slice(&49152u16.to_be_bytes());
    f.extend_from_slice(&spec.dport.to_be_bytes());
    f.extend_from_slice(&((8 + payload) as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend(std::iter::repeat_n(0xab, payload));
    if spec.truncate > 0 {
        f.truncate(spec.truncate);
    }
    f
}

#[test]
#[ignore = "needs root"]
fn steers_roce_and_passes_everything_else() {
    let _exclusive = require_root();
    let pair = VethPair::create(&PairConfig::default()).unwrap();
    let cases: Vec<(&str, FrameSpec, bool)> = vec![
        ("roce ipv4", ROCE4, true),
        (
            "roce ipv6",
            FrameSpec {
                ipv6: true,
                ..ROCE4
            },
            true,
        ),
        (
            "roce vlan ipv4",
            FrameSpec {
                vlan: true,
                ..ROCE4
            },
            true,
        ),
        (
            "roce vlan ipv6",
            FrameSpec {
                vlan: true,
                ipv6: true,
                ..ROCE4
            },
            true,
        ),
        (
            "roce ipv4 with options",
            FrameSpec { ihl: 6, ..ROCE4 },
            true,
        ),
        (
            "other udp",
            FrameSpec {
                dport: 4792,
                ..ROCE4
            },
            false,
        ),
        ("tcp to 4791", FrameSpec { proto: 6, ..ROCE4 }, false),
        (
            "ipv6 tcp",
            FrameSpec {
                proto: 6,
                ipv6: true,
                ..ROCE4
            },
            false,
        ),
        (
            "first fragment (MF)",
            FrameSpec {
                frag: 0x2000,
                ..ROCE4
            },
            false,
        ),
        (
            "later fragment",
            FrameSpec {
                frag: 0x0010,
                ..ROCE4
            },
            false,
        ),
        ("ihl < 5", FrameSpec { ihl: 4, ..ROCE4 }, false),
        (
            "truncated udp",
            FrameSpec {
                truncate: 14 + 20 + 4,
                ..ROCE4
            },
            false,
        ),
        (
            "truncated ipv6",
            FrameSpec {
                ipv6: true,
                truncate: 14 + 30,
                ..ROCE4
            },
            false,
        ),
        (
            "truncated vlan",
            FrameSpec {
                vlan: true,
                truncate: 16,
                ..ROCE4
            },
            false,
        ),
    ];
    let expected_roce = cases.iter().filter(|c| c.2).count() as u64;
    let expected_pass = cases.len() as u64 - expected_roce;
    let (a, b) = (pair.a.clone(), pair.b.clone());
    let frames: Vec<Vec<u8>> = cases.iter().map(|c| build(c.1, b.mac, a.mac)).collect();

    let receiver = std::thread::spawn(move || {
        b.enter().unwrap();
        let (prog, mut sock) = attach_queue0(&b);
        let before = prog.counters().unwrap();
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let sender = std::thread::spawn(move || {
            a.enter().unwrap();
            send_all(&a, &frames);
            rx.recv().ok();
        });
        let mut got = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(2);
        while Instant::now() < deadline {
            sock.recv(64, |p| got.push(p.to_vec()));
        }
        tx.send(()).ok();
        sender.join().unwrap();
        let after = prog.counters().unwrap();
        (got, before, after)
    });
    let (got, before, after) = receiver.join().unwrap();
    let expected: Vec<Vec<u8>> = cases
        .iter()
        .zip(build_all(&cases, &pair))
        .filter(|(c, _)| c.2)
        .map(|(_, f)| f)
        .collect();
    assert_eq!(
        got, expected,
        "exactly the RoCE frames reach the socket, byte for byte"
    );
    assert_eq!(after.redirected - before.redirected, expected_roce);
    // The kernel may send its own frames (IPv6 ND, MLD) while we run: at least ours pass.
    assert!(
        after.passed - before.passed >= expected_pass,
        "{before:?} -> {after:?}"
    );
    assert_eq!(after.no_socket, 0);
}

fn build_all(cases: &[(&str, FrameSpec, bool)], pair: &VethPair) -> Vec<Vec<u8>> {
    cases
        .iter()
        .map(|c| build(c.1, pair.b.mac, pair.a.mac))
        .collect()
}

#[test]
#[ignore = "needs root"]
fn ping_and_tcp_work_while_attached() {
    let _exclusive = require_root();
    let pair = VethPair::create(&PairConfig::default()).unwrap();
    let b = pair.b.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let holder = std::thread::spawn(move || {
        b.enter().unwrap();
        let (prog, _sock) = attach_queue0(&b);
        // A TCP server in b.
        let listener = std::net::TcpListener::bind((b.ipv4, 18515)).unwrap();
        tx.send(()).unwrap();
        let (mut conn, _) = listener.accept().unwrap();
        let mut buf = [0u8; 5];
        conn.read_exact(&mut buf).unwrap();
        conn.write_all(&buf).unwrap();
        done_rx.recv().ok();
        prog.counters().unwrap()
    });
    rx.recv().unwrap();
    for target in [pair.b.ipv4.to_string(), pair.b.ipv6.to_string()] {
        let out = pair
            .a
            .command("ping")
            .args(["-c", "2", "-i", "0.2", "-W", "2", &target])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "ping {target}: {}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
    let a = pair.a.clone();
    let b_ip = pair.b.ipv4;
    std::thread::spawn(move || {
        a.enter().unwrap();
        let mut c =
            std::net::TcpStream::connect_timeout(&(b_ip, 18515).into(), Duration::from_secs(3))
                .unwrap();
        c.write_all(b"hello").unwrap();
        let mut buf = [0u8; 5];
        c.read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"hello");
    })
    .join()
    .unwrap();
    done_tx.send(()).unwrap();
    let counters = holder.join().unwrap();
    assert!(counters.passed > 0);
    assert_eq!(counters.redirected, 0);
}

/// The child half of [`sigkill_leaves_no_xdp_program`], which runs this
/// test binary again with `ROCE_XDP_KILL_CHILD=netns,ifname,mode` to
/// attach the program as a running engine does and wait to be killed.
fn attach_and_wait_to_be_killed(spec: &str) {
    let (ns, ifname, mode) = {
        let v: Vec<&str> = spec.split(',').collect();
        (v[0].to_string(), v[1].to_string(), v[2].to_string())
    };
    engine::nic::enter_netns(&ns).unwrap();
    let mode = if mode == "generic" {
        AttachMode::Generic
    } else {
        AttachMode::Native
    };
    // A running engine's state: program attached, socket bound and in the XSKMAP.
    let mut prog = SteerProgram::attach(&ifname, mode, false).unwrap();
    let sock = XskSocket::open(&XskConfig::new(&ifname, 0)).unwrap();
    prog.register_socket(0, &sock).unwrap();
    println!("ATTACHED");
    std::io::stdout().flush().unwrap();
    std::thread::sleep(Duration::from_secs(60));
}

#[test]
#[ignore = "needs root"]
fn sigkill_leaves_no_xdp_program() {
    let _exclusive = require_root();
    if let Ok(spec) = std::env::var("ROCE_XDP_KILL_CHILD") {
        return attach_and_wait_to_be_killed(&spec);
    }
    // This test's name in the harness: the module path without the crate.
    let module = module_path!().split_once("::").map_or("", |(_, m)| m);
    let this_test = format!("{module}::sigkill_leaves_no_xdp_program");
    let pair = VethPair::create(&PairConfig::default()).unwrap();
    for mode in ["native", "generic"] {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                &this_test,
                "--include-ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(
                "ROCE_XDP_KILL_CHILD",
                format!("{},{},{mode}", pair.b.netns, pair.b.ifname),
            )
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut out = child.stdout.take().unwrap();
        let mut seen = String::new();
        let mut buf = [0u8; 256];
        while !seen.contains("ATTACHED") {
            let n = out.read(&mut buf).unwrap();
            assert!(n > 0, "child exited before attaching: {seen}");
            seen.push_str(&String::from_utf8_lossy(&buf[..n]));
        }
        let link = pair
            .b
            .run_ip(&["link", "show", "dev", &pair.b.ifname])
            .unwrap();
        assert!(
            link.contains("xdp"),
            "{mode}: program attached while the child runs: {link}"
        );
        // SIGKILL: no destructor runs.
        sigkill(child.id());
        child.wait().unwrap();
        // The link fd is released with the process; the kernel detaches.
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let link = pair
                .b
                .run_ip(&["link", "show", "dev", &pair.b.ifname])
                .unwrap();
            if !link.contains("xdp") {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{mode}: XDP program still attached after SIGKILL: {link}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

fn sigkill(pid: u32) {
    let st = Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .unwrap();
    assert!(st.success());
}

fn ipv4_checksum(hdr: &[u8]) -> u16 {
    let mut sum = 0u32;
    for c in hdr.chunks(2) {
        sum += u16::from_be_bytes([c[0], c[1]]) as u32;
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// The CE-marking impairment sets ECN to CE (IPv4 TOS with the header
/// checksum fixed incrementally; IPv6 traffic class) and only on
/// ECN-capable frames.
#[test]
#[ignore = "needs root"]
fn ce_marking_rewrites_ecn_and_fixes_the_checksum() {
    let _exclusive = require_root();
    let pair = VethPair::create(&PairConfig::default()).unwrap();
    let (a, b) = (pair.a.clone(), pair.b.clone());
    let mut v4_ect0 = build(ROCE4, b.mac, a.mac);
    v4_ect0[15] = 0x68 | 0b10; // DSCP 26, ECT(0)
    let c = ipv4_checksum(&v4_ect0[14..34]);
    v4_ect0[24..26].copy_from_slice(&c.to_be_bytes());
    let mut v4_not_ect = v4_ect0.clone();
    v4_not_ect[15] = 0x68;
    v4_not_ect[24..26].copy_from_slice(&[0, 0]);
    let c = ipv4_checksum(&v4_not_ect[14..34]);
    v4_not_ect[24..26].copy_from_slice(&c.to_be_bytes());
    let mut v6_ect1 = build(
        FrameSpec {
            ipv6: true,
            ..ROCE4
        },
        b.mac,
        a.mac,
    );
    v6_ect1[14] = 0x66; // version 6, traffic class high nibble 6
    v6_ect1[15] = 0x90; // traffic class low nibble 9 (..01 = ECT(1)), flow label 0
    let sent = vec![v4_ect0.clone(), v4_not_ect.clone(), v6_ect1.clone()];

    let got = std::thread::spawn(move || {
        b.enter().unwrap();
        let mut prog = SteerProgram::attach(&b.ifname, AttachMode::Native, false).unwrap();
        prog.set_impairment(engine::nic::Impairment {
            drop_ppm: 0,
            ce_ppm: 1_000_000,
        })
        .unwrap();
        let mut sock = XskSocket::open(&XskConfig::new(&b.ifname, 0)).unwrap();
        prog.register_socket(0, &sock).unwrap();
        std::thread::spawn(move || {
            a.enter().unwrap();
            send_all(&a, &sent);
        })
        .join()
        .unwrap();
        let mut got = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(2);
        while got.len() < 3 && Instant::now() < deadline {
            sock.recv(8, |p| got.push(p.to_vec()));
        }
        (got, prog.counters().unwrap())
    })
    .join()
    .unwrap();
    let (got, counters) = got;
    assert_eq!(got.len(), 3);
    assert_eq!(counters.ce_marked, 2);
    // IPv4 ECT(0) -> CE, checksum still valid, nothing else changed.
    assert_eq!(got[0][15], 0x68 | 0b11);
    assert_eq!(
        ipv4_checksum(&got[0][14..34]),
        0,
        "header checksum verifies"
    );
    assert_eq!(got[0][34..], v4_ect0[34..]);
    // Not ECN-capable: untouched.
    assert_eq!(got[1], v4_not_ect);
    // IPv6 ECT(1) -> CE: traffic class low bits (byte 15 bits 5..4).
    assert_eq!(got[2][15], 0xb0);
    assert_eq!(got[2][14], 0x66);
}
