//! `serve` as a long-running daemon: sessions that end in every
//! way leave the server's QP and region counts where they started, and
//! the per-client caps refuse with a reason. The clients speak perftest's
//! exchange over TCP from the client namespace (`engine::oob::perftest`),
//! so the server creates, connects and destroys real QPs and regions,
//! a thousand times in seconds; no RDMA traffic is needed for that.

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use engine::oob::perftest as pt;
use engine::oob::Gid;

use crate::support::*;

/// How a fake client's session ends.
#[derive(Debug, Clone, Copy, PartialEq)]
enum End {
    /// perftest's bandwidth ending: barrier, results, barrier, `done`.
    Clean,
    /// Gone after the QPs connected (closed without a word: a crash).
    Crash,
    /// Gone with unread data: the kernel answers with a TCP reset.
    Reset,
    /// Gone in the middle of the key exchange.
    MidExchange,
}

fn xchg(s: &mut TcpStream, mine: &[u8]) -> std::io::Result<Vec<u8>> {
    s.write_all(mine)?;
    let mut theirs = vec![0u8; mine.len()];
    s.read_exact(&mut theirs)?;
    Ok(theirs)
}

/// One perftest client with `qps` QPs; returns the server's first key
/// (or what it sent in its place).
fn client(server: SocketAddr, ip: IpAddr, qps: usize, end: End) -> std::io::Result<Vec<u8>> {
    let mut s = TcpStream::connect_timeout(&server, Duration::from_secs(5))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    let v = xchg(&mut s, &pt::encode_version(pt::VERSION))?;
    if v.starts_with(b"refused") {
        let mut rest = String::new();
        let _ = s.read_to_string(&mut rest);
        return Ok([v, rest.into_bytes()].concat());
    }
    xchg(&mut s, &pt::encode_u32(pt::CYCLE_BUFFER))?;
    xchg(&mut s, &pt::encode_u32(pt::CACHE_LINE))?;
    xchg(&mut s, &pt::encode_mtu(1024))?;
    let key = |i: usize| pt::Key {
        lid: 0,
        out_reads: 1,
        qpn: 0x200 + i as u32,
        psn: 0x1000 + i as u32,
        rkey: 0x1234,
        vaddr: 0x7000_0000,
        gid: Gid::from_ip(ip),
        srqn: 0,
    };
    let mut first = Vec::new();
    for i in 0..qps {
        let k = xchg(&mut s, &key(i).encode())?;
        if i == 0 {
            first = k.clone();
        }
        if k.starts_with(b"refused") {
            return Ok(k);
        }
        if end == End::MidExchange && i + 1 == qps.div_ceil(2) {
            return Ok(first);
        }
    }
    for i in 0..qps {
        xchg(&mut s, &key(i).encode())?;
    }
    xchg(&mut s, &key(0).encode())?;
    match end {
        End::Clean => {
            xchg(&mut s, &key(0).encode())?;
            for f in pt::BwReport::default().encode() {
                xchg(&mut s, &f)?;
            }
            xchg(&mut s, &key(0).encode())?;
            s.write_all(pt::DONE)?;
        }
        End::Reset => {
            // The server's answer stays unread: closing sends a reset.
            s.write_all(&key(0).encode())?;
            std::thread::sleep(Duration::from_millis(5));
        }
        End::Crash | End::MidExchange => {}
    }
    Ok(first)
}

/// The "in use" figures of serve's last session line.
fn in_use(log: &str) -> Option<String> {
    log.lines()
        .rev()
        .find_map(|l| l.split("in use: ").nth(1).map(str::to_string))
}

#[test]
#[ignore = "needs root"]
fn thousand_clients_and_fifty_killed_leave_no_qps_or_regions() {
    require_root();
    let _g = serial();
    let net = Net::new(1500);
    let b = &net.pair.b;
    let mut serve = net.server(&[
        "serve",
        "--iface",
        &b.ifname,
        "--region",
        "64K",
        "--max-qps-per-client",
        "4",
        "--max-clients",
        "3",
        "--timeout",
        "2",
    ]);
    // Its log, read as it comes (a full pipe would stop the server).
    let mut stdout = serve.stdout.take().expect("piped stdout");
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stdout.read_to_string(&mut s);
        s
    });
    net.wait_listening(18515);
    net.wait_engine();
    let server: SocketAddr = format!("{}:18515", net.server_ip()).parse().unwrap();
    let a = net.pair.a.clone();
    let ip = IpAddr::V4(a.ipv4);
    let t0 = Instant::now();
    let worker = std::thread::spawn(move || {
        a.enter().expect("entering the client namespace");
        // 1,000 sequential clients of 4 QPs: 4,000 QPs created and
        // destroyed (more than an engine holds at once would leak).
        for i in 0..1000 {
            let k = client(server, ip, 4, End::Clean).unwrap_or_else(|e| panic!("client {i}: {e}"));
            assert!(
                pt::Key::parse(&k).is_ok(),
                "client {i}: {:?}",
                String::from_utf8_lossy(&k)
            );
        }
        // 50 that vanish: crashes, resets, mid-exchange.
        for i in 0..50 {
            let end = [End::Crash, End::Reset, End::MidExchange][i % 3];
            let _ = client(server, ip, 3, end);
        }
        // Caps: a 5th QP is refused with the reason.
        let k = client(server, ip, 5, End::Clean).unwrap();
        let k = String::from_utf8_lossy(&k).to_string();
        assert!(
            k.contains("refused") && k.contains("--max-qps-per-client"),
            "{k}"
        );
        // A 4th client while three stall: refused in the version's slot;
        // the stalled ones time out (--timeout 2).
        let stalled: Vec<TcpStream> = (0..3)
            .map(|_| TcpStream::connect(server).unwrap())
            .collect();
        std::thread::sleep(Duration::from_millis(300));
        let v = client(server, ip, 1, End::Clean).unwrap();
        let v = String::from_utf8_lossy(&v).to_string();
        assert!(
            v.starts_with("refused") && v.contains("--max-clients"),
            "{v}"
        );
        std::thread::sleep(Duration::from_secs(3));
        drop(stalled);
        // And a client after all of it is served.
        let k = client(server, ip, 4, End::Clean).unwrap();
        assert!(pt::Key::parse(&k).is_ok());
    });
    let clients = worker.join();
    let elapsed = t0.elapsed();
    std::thread::sleep(Duration::from_millis(500));
    let pid = serve.id().to_string();
    assert!(std::process::Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .unwrap()
        .success());
    let out = wait_output(serve, Duration::from_secs(30));
    let log = reader.join().expect("the log");
    if clients.is_err() {
        let tail: Vec<&str> = log.lines().rev().take(20).collect();
        panic!(
            "the clients failed; serve's log ends:\n{}\n{}",
            tail.join("\n"),
            text(&out.stderr)
        );
    }
    assert!(out.status.success(), "{}\n{log}", text(&out.stderr));
    assert!(!text(&out.stderr).contains("panicked"));
    assert_eq!(in_use(&log).as_deref(), Some("0 QPs, 0 regions"), "{log}");
    assert!(log.contains("refused: 3 clients are connected"), "{log}");
    assert!(log.contains("stalled"), "{log}");
    let done = log
        .lines()
        .filter(|l| l.contains(": done (4 QP(s)"))
        .count();
    assert_eq!(done, 1001, "{log}");
    eprintln!("1,000 + 50 + cap clients in {:.1} s", elapsed.as_secs_f64());
}
