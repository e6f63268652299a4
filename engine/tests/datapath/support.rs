//! Setup shared by the datapath tests over a veth pair in namespaces the
//! test creates.

use std::ops::Deref;
use std::sync::{Mutex, MutexGuard};

use std::net::IpAddr;

use engine::endpoint::{ConnectOptions, RemoteQp};
use engine::io::FrameAccounting;
use engine::testbed::netns::{is_root, PairConfig, Side, VethPair};
use engine::verbs::{Device, DeviceConfig, QueuePair};

/// Serialises the tests of this binary: see [`Exclusive`].
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Held by a running datapath test, so that the tests of this binary run
/// one at a time, whatever `--test-threads` says. Several of them bound
/// what they observe in time (a thread parked before a completion, no
/// ACK timeout in a ping-pong, a busy queue reported within its wait);
/// sharing the two cores of a small machine with a lossy transfer of
/// another test breaks those bounds. On two cores, serialising costs
/// little: the cores are busy either way.
#[must_use = "the test runs alone only while this is held"]
pub struct Exclusive {
    _guard: MutexGuard<'static, ()>,
}

/// Fails the calling test, saying why, unless the process runs as root;
/// then waits for the other tests of this binary ([`Exclusive`]). Every
/// test that calls it is `#[ignore = "needs root"]`: a run without root
/// reports it as ignored, and asking for it there (`--ignored`,
/// `--include-ignored`) fails it with this message instead of passing a
/// test that did not run.
pub fn require_root() -> Exclusive {
    assert!(
        is_root(),
        "this test needs root (network namespaces, XDP, AF_XDP): \
         run it as root, e.g. `sudo -E cargo test --release -- --include-ignored`"
    );
    // A test that failed while holding it poisoned it; the next may run.
    let guard = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    Exclusive { _guard: guard }
}

/// A veth pair held with the binary's [`Exclusive`] lock (the pair goes
/// first when dropped); derefs to the [`VethPair`].
pub struct Pair {
    pair: VethPair,
    _exclusive: Exclusive,
}

impl Deref for Pair {
    type Target = VethPair;

    fn deref(&self) -> &VethPair {
        &self.pair
    }
}

/// A fresh veth pair with one queue per side and an MTU with room for
/// 4096-byte RoCE payloads (plus a VLAN tag); needs root
/// ([`require_root`]).
pub fn veth_pair() -> Pair {
    let exclusive = require_root();
    let pair = VethPair::create(&PairConfig {
        mtu: 4500,
        queues: 1,
    })
    .expect("creating the veth pair");
    Pair {
        pair,
        _exclusive: exclusive,
    }
}

/// Asserts that a socket's UMEM frames are all accounted for (each free,
/// in the fill or RX ring, or in the TX or completion ring) and that the
/// kernel returned no address it had not been given.
pub fn frames_conserved(acc: FrameAccounting) {
    assert_eq!(acc.bad_returns, 0);
    assert_eq!(
        acc.free_rx + acc.in_fill_or_rx + acc.free_tx + acc.in_tx_or_completion,
        acc.total
    );
}

/// A device on `side`'s interface, in its namespace, multi-buffer on (for
/// the 4096-byte PMTU).
pub fn device_config(side: &Side) -> DeviceConfig {
    let mut c = DeviceConfig::new(&side.ifname);
    c.netns = Some(side.netns.clone());
    c.multi_buffer = true;
    c
}

/// Connects `qa` (of `dev_a`, first PSN `psn_a`) and `qb` (of `dev_b`,
/// first PSN `psn_b`) to each other with `opts`, each learning the
/// other's MAC from the kernel's neighbour table.
pub fn connect_qps(
    (dev_a, qa, psn_a): (&Device, &QueuePair, u32),
    (dev_b, qb, psn_b): (&Device, &QueuePair, u32),
    opts: ConnectOptions,
) {
    let (ip_a, ip_b): (IpAddr, IpAddr) = (dev_a.ip(), dev_b.ip());
    let remote = |qp: &QueuePair, psn, mac, ip| RemoteQp {
        qpn: qp.qpn(),
        psn,
        mac,
        ip,
    };
    let mac_b = dev_a.resolve_mac(ip_b).unwrap();
    let mac_a = dev_b.resolve_mac(ip_a).unwrap();
    let sq = |sq_psn| ConnectOptions { sq_psn, ..opts };
    qa.connect(remote(qb, psn_b, mac_b, ip_b), sq(psn_a))
        .unwrap();
    qb.connect(remote(qa, psn_a, mac_a, ip_a), sq(psn_b))
        .unwrap();
}

/// The steering program attached (native mode) to `side`'s veth end and
/// queue 0's socket registered with it. Call it from a thread that
/// entered `side`'s namespace; both stay attached while held.
pub fn attach_queue0(side: &Side) -> (engine::nic::SteerProgram, engine::io::XskSocket) {
    let mut prog =
        engine::nic::SteerProgram::attach(&side.ifname, engine::nic::AttachMode::Native, false)
            .unwrap();
    let sock = engine::io::XskSocket::open(&engine::io::XskConfig::new(&side.ifname, 0)).unwrap();
    prog.register_socket(0, &sock).unwrap();
    (prog, sock)
}

/// Sends `frames` from queue 0 of `side` (a socket of its own, no
/// program needed to send) and waits until the kernel completed them.
/// Call it from a thread that entered `side`'s namespace.
pub fn send_all<F: AsRef<[u8]>>(side: &Side, frames: &[F]) {
    let mut s = engine::io::XskSocket::open(&engine::io::XskConfig::new(&side.ifname, 0)).unwrap();
    for f in frames {
        assert!(s.send(f.as_ref()), "room for every frame");
    }
    flush_until_completed(&mut s);
}

/// Publishes the queued TX frames and waits (up to 5 s) until the kernel
/// has completed every frame in flight.
pub fn flush_until_completed(sock: &mut engine::io::XskSocket) {
    sock.flush().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while sock.tx_in_flight() > 0 && std::time::Instant::now() < deadline {
        sock.complete();
        let _ = sock.flush();
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// Writes an Ethernet/IPv4/UDP frame to port 4791 of `len` bytes into
/// `buf` (payload byte i = i as u8 ^ tag); returns `len`.
pub fn write_frame(
    buf: &mut [u8],
    src: &engine::testbed::netns::Side,
    dst: &engine::testbed::netns::Side,
    len: usize,
    tag: u8,
) -> usize {
    engine::testbed::floor::write_udp_frame(buf, src, dst, 4791, len);
    for (i, b) in buf[42..len].iter_mut().enumerate() {
        *b = i as u8 ^ tag;
    }
    len
}
