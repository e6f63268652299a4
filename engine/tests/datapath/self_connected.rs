//! Two QPs of one engine connected to each other through the engine's own
//! address (its IP as the destination GID, its own MAC from
//! `resolve_mac`), as on rxe or a NIC: the engine delivers the frames to
//! itself, never to the wire. RDMA WRITE, READ, SEND (with and without
//! immediate) and both atomics, every byte and every completion checked,
//! on a run-to-completion queue and on a two-queue `Device` whose QPs
//! start on different queues; next to a QP talking to a real peer, whose
//! traffic is unchanged. A veth pair in namespaces this test creates
//! carries the sockets (the peer end sees nothing of the self-connected
//! traffic). Needs root.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use engine::driver::{InlineConfig, RunToCompletion};
use engine::endpoint::{ConnectOptions, RemoteQp};
use engine::rc::{Access, Mtu, RecvWr, SendOp, SendWr, WcOpcode, WcStatus, WorkCompletion};
use engine::stats::queue_counters;
use engine::testbed::netns::{PairConfig, Side, VethPair};
use engine::verbs::{Device, MemoryRegion, QpCaps, QueuePair};

use crate::support::{device_config, require_root, veth_pair};

/// Bytes of each QP's region: four quarters, for the WRITEs, the READs,
/// the SENDs and the atomics.
const REGION: usize = 2 << 20;
const QUARTER: usize = REGION / 4;

fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| ((i * 31 + seed as usize * 7) % 251) as u8 ^ seed)
        .collect()
}

/// Two QPs, `x` and `y`, connected to each other, each with a region,
/// whichever engine holds them.
trait SelfConnected {
    fn qpn(&self, which: Qp) -> u32;
    fn mem(&self, which: Qp) -> &MemoryRegion;
    fn post_send(&mut self, which: Qp, wr: SendWr);
    fn post_recv(&mut self, which: Qp, wr: RecvWr);
    /// Runs the engine(s) as the owner does and takes completions.
    fn poll(&mut self, out: &mut [WorkCompletion]) -> usize;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Qp {
    X,
    Y,
}

/// A completion the workload waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Expected {
    wr_id: u64,
    qpn: u32,
    opcode: WcOpcode,
    byte_len: u32,
    imm: Option<u32>,
}

/// Polls until exactly the `expected` completions have come (no other, each
/// successful and as expected); the send-side ones of each QP in the order
/// listed (RC completes in order).
fn await_completions(e: &mut impl SelfConnected, expected: &[Expected]) {
    let by_id: HashMap<u64, Expected> = expected.iter().map(|x| (x.wr_id, *x)).collect();
    assert_eq!(by_id.len(), expected.len(), "unique wr_ids");
    let mut got = Vec::new();
    let mut wcs = vec![WorkCompletion::default(); 32];
    let start = Instant::now();
    while got.len() < expected.len() {
        let n = e.poll(&mut wcs);
        for wc in &wcs[..n] {
            assert_eq!(wc.status, WcStatus::Success, "{wc:?}");
            let want = by_id
                .get(&wc.wr_id)
                .unwrap_or_else(|| panic!("unexpected completion {wc:?}"));
            let seen = Expected {
                wr_id: wc.wr_id,
                qpn: wc.qpn,
                opcode: wc.opcode,
                byte_len: wc.byte_len,
                imm: wc.imm,
            };
            assert_eq!(&seen, want);
            got.push(wc.wr_id);
        }
        if n == 0 {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "completions after 10 s: {got:x?} of {expected:x?}"
            );
            std::thread::yield_now();
        }
    }
    // Nothing more comes.
    for _ in 0..100 {
        assert_eq!(e.poll(&mut wcs), 0, "{:?}", &wcs[..1]);
    }
    let sends = |qpn: u32, ids: &mut dyn Iterator<Item = u64>| -> Vec<u64> {
        ids.filter(|id| {
            let x = by_id[id];
            x.qpn == qpn && x.opcode != WcOpcode::Recv
        })
        .collect()
    };
    for qp in [Qp::X, Qp::Y] {
        let qpn = e.qpn(qp);
        assert_eq!(
            sends(qpn, &mut got.iter().copied()),
            sends(qpn, &mut expected.iter().map(|x| x.wr_id)),
            "send completions of QP {qpn:#x} in posting order"
        );
    }
}

/// What [`exercise`] moved: bytes of payload (at least what the frames
/// that looped carried) and packets (at least as many frames).
#[derive(Debug, Clone, Copy, Default)]
struct Moved {
    payload: u64,
    packets: u64,
}

/// Packets of a `len`-byte message at PMTU 4096.
fn packets(len: usize) -> u64 {
    len.div_ceil(4096).max(1) as u64
}

/// `(offset, length)` of messages of `sizes` laid end to end from `start`
/// with one untouched byte between them.
fn end_to_end(start: usize, sizes: &[usize]) -> Vec<(usize, usize)> {
    let mut off = start;
    sizes
        .iter()
        .map(|&len| {
            let span = (off, len);
            off += len + 1;
            span
        })
        .collect()
}

/// Posts x's RDMA `op` (WRITE or READ) of `len` bytes between its region
/// and y's, at offset `off` in both; returns the completion it makes.
fn post_rdma(
    e: &mut impl SelfConnected,
    op: SendOp,
    wr_id: u64,
    (off, len): (usize, usize),
) -> Expected {
    let my = e.mem(Qp::Y);
    let wr = SendWr {
        remote_addr: my.addr() + off as u64,
        rkey: my.rkey,
        ..SendWr::new(wr_id, op, e.mem(Qp::X).sge(off, len as u32))
    };
    e.post_send(Qp::X, wr);
    Expected {
        wr_id,
        qpn: e.qpn(Qp::X),
        opcode: if op == SendOp::Read {
            WcOpcode::Read
        } else {
            WcOpcode::Write
        },
        byte_len: len as u32,
        imm: None,
    }
}

/// WRITE, READ, SEND (and SEND with immediate) and both atomics between
/// `x` and `y`, every byte and completion checked.
fn exercise(e: &mut impl SelfConnected) -> Moved {
    let (qx, qy) = (e.qpn(Qp::X), e.qpn(Qp::Y));
    let mut moved = Moved::default();

    // 1. x WRITEs messages around the PMTU, and multi-packet ones, into y's
    //    region.
    let spans = end_to_end(0, &[1, 63, 4096, 4097, 65_539, 300_001]);
    let src = pattern(1, QUARTER);
    assert!(e.mem(Qp::X).write(0, &src));
    let mut expected = Vec::new();
    for (i, &(off, len)) in spans.iter().enumerate() {
        expected.push(post_rdma(e, SendOp::Write, 0x100 + i as u64, (off, len)));
        moved.payload += len as u64;
        moved.packets += packets(len);
    }
    await_completions(e, &expected);
    let mut got = vec![0u8; QUARTER];
    assert!(e.mem(Qp::Y).read(0, &mut got));
    let mut written = vec![false; QUARTER];
    for &(o, l) in &spans {
        assert!(got[o..o + l] == src[o..o + l], "WRITE of {l} B at {o}");
        written[o..o + l].iter_mut().for_each(|w| *w = true);
    }
    for (i, w) in written.iter().enumerate() {
        assert!(*w || got[i] == 0, "byte {i} outside every WRITE changed");
    }

    // 2. x READs from y's second quarter into its own.
    let remote = pattern(2, QUARTER);
    assert!(e.mem(Qp::Y).write(QUARTER, &remote));
    let spans = end_to_end(QUARTER, &[1, 4096, 4097, 100_003]);
    let mut expected = Vec::new();
    for (i, &(off, len)) in spans.iter().enumerate() {
        expected.push(post_rdma(e, SendOp::Read, 0x200 + i as u64, (off, len)));
        moved.payload += len as u64;
        moved.packets += 1 + packets(len);
    }
    await_completions(e, &expected);
    assert!(e.mem(Qp::X).read(QUARTER, &mut got));
    for &(o, l) in &spans {
        let r = o - QUARTER;
        assert!(got[r..r + l] == remote[r..r + l], "READ of {l} B at {o}");
    }

    // 3. y SENDs into receives x posted (one with immediate data).
    let base = 2 * QUARTER;
    let slot = 32 << 10;
    let sends = [
        (1usize, None),
        (4096, Some(0xfeed_0001)),
        (4097, None),
        (20_000, None),
    ];
    for i in 0..sends.len() {
        let sge = e.mem(Qp::X).sge(base + i * slot, slot as u32);
        e.post_recv(
            Qp::X,
            RecvWr {
                wr_id: 0x300 + i as u64,
                sge,
            },
        );
    }
    let data = pattern(3, QUARTER);
    assert!(e.mem(Qp::Y).write(base, &data));
    let mut expected = Vec::new();
    for (i, &(len, imm)) in sends.iter().enumerate() {
        let op = if imm.is_some() {
            SendOp::SendWithImm
        } else {
            SendOp::Send
        };
        let wr = SendWr {
            imm: imm.unwrap_or(0),
            ..SendWr::new(
                0x400 + i as u64,
                op,
                e.mem(Qp::Y).sge(base + i * slot, len as u32),
            )
        };
        e.post_send(Qp::Y, wr);
        expected.push(Expected {
            wr_id: 0x400 + i as u64,
            qpn: qy,
            opcode: WcOpcode::Send,
            byte_len: len as u32,
            imm: None,
        });
        expected.push(Expected {
            wr_id: 0x300 + i as u64,
            qpn: qx,
            opcode: WcOpcode::Recv,
            byte_len: len as u32,
            imm,
        });
        moved.payload += len as u64;
        moved.packets += packets(len);
    }
    await_completions(e, &expected);
    for (i, &(len, _)) in sends.iter().enumerate() {
        let mut got = vec![0u8; slot];
        assert!(e.mem(Qp::X).read(base + i * slot, &mut got));
        let sent = &data[i * slot..i * slot + len];
        assert!(got[..len] == *sent, "SEND {i} of {len} B");
        assert!(got[len..].iter().all(|&b| b == 0), "past SEND {i}");
    }

    // 4. x's atomics on a word of y's region: fetch-and-add, then a
    //    compare-and-swap that matches and one that does not.
    let word = 3 * QUARTER;
    assert!(e.mem(Qp::Y).write(word, &41u64.to_le_bytes()));
    let swapped = 0xfeed_f00d_0000_0001u64;
    let atomics = [
        (SendOp::FetchAdd, 1u64, 0u64, 41u64),
        (SendOp::CompareSwap, 42, swapped, 42),
        (SendOp::CompareSwap, 7, 5, swapped),
    ];
    let mut expected = Vec::new();
    for (i, &(op, compare_add, swap, _)) in atomics.iter().enumerate() {
        let my = e.mem(Qp::Y);
        let wr = SendWr {
            remote_addr: my.addr() + word as u64,
            rkey: my.rkey,
            compare_add,
            swap,
            ..SendWr::new(0x500 + i as u64, op, e.mem(Qp::X).sge(word + 8 * i, 8))
        };
        e.post_send(Qp::X, wr);
        expected.push(Expected {
            wr_id: 0x500 + i as u64,
            qpn: qx,
            opcode: if op == SendOp::FetchAdd {
                WcOpcode::FetchAdd
            } else {
                WcOpcode::CompareSwap
            },
            byte_len: 8,
            imm: None,
        });
        moved.payload += 8;
        moved.packets += 2;
    }
    await_completions(e, &expected);
    let mut w = [0u8; 8];
    for (i, &(.., original)) in atomics.iter().enumerate() {
        assert!(e.mem(Qp::X).read(word + 8 * i, &mut w));
        assert_eq!(u64::from_le_bytes(w), original, "atomic {i}'s original");
    }
    assert!(e.mem(Qp::Y).read(word, &mut w));
    assert_eq!(u64::from_le_bytes(w), swapped, "the word after the atomics");
    moved
}

/// The QPs grant every remote right their WRITEs, READs and atomics
/// need (a QP's access flags are checked on every request).
fn connect_options(sq_psn: u32) -> ConnectOptions {
    ConnectOptions {
        path_mtu: Mtu::Mtu4096,
        sq_psn,
        access: Access::ALL,
        ..Default::default()
    }
}

fn inline_config(side: &Side) -> InlineConfig {
    let mut c = InlineConfig::new(&side.ifname);
    c.netns = Some(side.netns.clone());
    c
}

/// Two QPs of one [`RunToCompletion`], connected to each other.
struct Inline {
    q: RunToCompletion,
    qpns: [u32; 2],
    mems: [MemoryRegion; 2],
}

impl Inline {
    fn open(side: &Side) -> Inline {
        let mut q = RunToCompletion::open(inline_config(side)).unwrap();
        // Our own address resolves to our own MAC: no ARP for it (the
        // kernel's neighbour table never learns a local address).
        let mac = q.resolve_mac(q.ip()).expect("our own address resolves");
        assert_eq!(mac, q.mac());
        let qpns = [(); 2].map(|_| q.create_qp(QpCaps::default()).unwrap());
        let mems = [(); 2].map(|_| q.register_memory(REGION, Access::ALL).unwrap());
        let psns = [0x100, 0x900];
        for (me, peer) in [(0, 1), (1, 0)] {
            let remote = RemoteQp {
                qpn: qpns[peer],
                psn: psns[peer],
                mac,
                ip: q.ip(),
            };
            q.connect(qpns[me], remote, connect_options(psns[me]))
                .unwrap();
        }
        Inline { q, qpns, mems }
    }
}

impl SelfConnected for Inline {
    fn qpn(&self, which: Qp) -> u32 {
        self.qpns[which as usize]
    }
    fn mem(&self, which: Qp) -> &MemoryRegion {
        &self.mems[which as usize]
    }
    fn post_send(&mut self, which: Qp, wr: SendWr) {
        self.q.post_send(self.qpns[which as usize], wr).unwrap();
    }
    fn post_recv(&mut self, which: Qp, wr: RecvWr) {
        self.q.post_recv(self.qpns[which as usize], wr).unwrap();
    }
    fn poll(&mut self, out: &mut [WorkCompletion]) -> usize {
        self.q.poll_cq(out)
    }
}

/// The counters `roce-xdp stats` shows for `s`, by name.
fn shown(s: &engine::driver::QueueStats) -> HashMap<String, u64> {
    queue_counters(s).into_iter().collect()
}

#[test]
#[ignore = "needs root"]
fn run_to_completion_qps_connected_through_their_own_address() {
    let pair = veth_pair();
    let mut e = Inline::open(&pair.a);
    let moved = exercise(&mut e);
    let s = e.q.stats();
    eprintln!(
        "moved {moved:?}: looped back {} frames, {} bytes",
        s.loopback_frames, s.loopback_bytes
    );
    // Every frame looped back inside the engine: none left the socket,
    // none came in through it.
    assert_eq!(s.socket.tx_packets, 0, "{:?}", s.socket);
    assert_eq!(s.socket.rx_packets, 0, "{:?}", s.socket);
    // Every data packet (requests, READ responses, atomic answers) and
    // the ACKs, each with its headers (at least 58 bytes: Ethernet, IPv4,
    // UDP, BTH, ICRC).
    assert!(s.loopback_frames > moved.packets, "{s:?}");
    assert!(s.loopback_bytes >= moved.payload + 58 * s.loopback_frames);
    assert_eq!(s.transport.retransmitted_packets, 0);
    assert_eq!(s.transport.dropped_unknown_qp, 0);
    let shown = shown(&s);
    assert_eq!(shown["loopback_frames"], s.loopback_frames);
    assert_eq!(shown["loopback_bytes"], s.loopback_bytes);
    // Nothing left behind: with the completions taken, the queue may
    // sleep (looped frames wake nobody, so any completion of theirs not
    // yet taken would have made it stay awake).
    // (A stale timer may fall due right after a poll: a few tries.)
    let sleeps = (0..10).any(|_| {
        assert_eq!(e.q.poll_cq(&mut [WorkCompletion::default(); 4]), 0);
        e.q.idle_for(Duration::from_millis(30)).is_some()
    });
    assert!(sleeps, "the queue never had nothing to do");
}

/// A RoCE peer on the other end of the veth: one QP of `b` connected to
/// `peer_qpn` of `a`, through the kernel's neighbour table.
fn connect_to_peer(a: &mut RunToCompletion, b: &mut RunToCompletion) -> (u32, u32) {
    let mac_b = a.resolve_mac(b.ip()).unwrap();
    let mac_a = b.resolve_mac(a.ip()).unwrap();
    assert_ne!(mac_a, mac_b);
    let qa = a.create_qp(QpCaps::default()).unwrap();
    let qb = b.create_qp(QpCaps::default()).unwrap();
    let remote = |qpn, psn, mac, ip| RemoteQp { qpn, psn, mac, ip };
    a.connect(qa, remote(qb, 0x700, mac_b, b.ip()), connect_options(0x300))
        .unwrap();
    b.connect(qb, remote(qa, 0x300, mac_a, a.ip()), connect_options(0x700))
        .unwrap();
    (qa, qb)
}

#[test]
#[ignore = "needs root"]
fn traffic_to_a_peer_leaves_as_before_next_to_self_connected_qps() {
    let pair = veth_pair();
    let mut e = Inline::open(&pair.a);
    let mut b = RunToCompletion::open(inline_config(&pair.b)).unwrap();
    let (qa, _) = connect_to_peer(&mut e.q, &mut b);
    let mb = b.register_memory(REGION, Access::ALL).unwrap();
    // a WRITEs to b while its own two QPs run their workload; b's queue is
    // polled between a's polls.
    const LEN: usize = 256 << 10;
    let data = pattern(9, LEN);
    let ma = e.q.register_memory(LEN, Access::ALL).unwrap();
    assert!(ma.write(0, &data));
    let wr = SendWr {
        remote_addr: mb.addr(),
        rkey: mb.rkey,
        ..SendWr::new(0x900, SendOp::Write, ma.sge(0, LEN as u32))
    };
    e.q.post_send(qa, wr).unwrap();
    struct WithPeer<'a> {
        e: &'a mut Inline,
        b: &'a mut RunToCompletion,
        peer_done: bool,
    }
    impl SelfConnected for WithPeer<'_> {
        fn qpn(&self, which: Qp) -> u32 {
            self.e.qpn(which)
        }
        fn mem(&self, which: Qp) -> &MemoryRegion {
            self.e.mem(which)
        }
        fn post_send(&mut self, which: Qp, wr: SendWr) {
            self.e.post_send(which, wr)
        }
        fn post_recv(&mut self, which: Qp, wr: RecvWr) {
            self.e.post_recv(which, wr)
        }
        fn poll(&mut self, out: &mut [WorkCompletion]) -> usize {
            assert_eq!(self.b.poll_cq(out), 0, "a WRITE completes nothing at b");
            let n = self.e.poll(out);
            // The peer WRITE's completion is taken out of the workload's.
            let (peer, own): (Vec<WorkCompletion>, Vec<WorkCompletion>) =
                out[..n].iter().partition(|wc| wc.wr_id == 0x900);
            for wc in peer {
                assert_eq!(wc.status, WcStatus::Success, "{wc:?}");
                self.peer_done = true;
            }
            out[..own.len()].copy_from_slice(&own);
            own.len()
        }
    }
    let mut w = WithPeer {
        e: &mut e,
        b: &mut b,
        peer_done: false,
    };
    let moved = exercise(&mut w);
    let start = Instant::now();
    let mut wcs = vec![WorkCompletion::default(); 16];
    while !w.peer_done {
        assert_eq!(w.poll(&mut wcs), 0);
        assert!(start.elapsed() < Duration::from_secs(10), "no peer WRITE");
    }
    let mut got = vec![0u8; LEN];
    assert!(mb.read(0, &mut got));
    assert!(got == data, "the peer WRITE landed byte for byte");

    let (sa, sb) = (e.q.stats(), b.stats());
    eprintln!(
        "moved {moved:?}; a: looped {} frames, sent {} to b; b received {}",
        sa.loopback_frames, sa.socket.tx_packets, sb.socket.rx_packets
    );
    assert!(sa.loopback_frames >= moved.packets, "{sa:?}");
    assert_eq!(sb.loopback_frames, 0);
    // What a put on the wire was the peer traffic alone (64 WRITE
    // packets), all of it RoCE for b's QP, and b got every frame of it.
    assert!(sa.socket.tx_packets >= packets(LEN), "{:?}", sa.socket);
    assert_eq!(sb.socket.rx_packets, sa.socket.tx_packets);
    assert_eq!(sb.transport.dropped_unknown_qp, 0);
    // b's ACKs came back to a through the socket.
    assert!(sa.socket.rx_packets > 0, "{:?}", sa.socket);
    for s in [&sa, &sb] {
        assert_eq!(s.transport.retransmitted_packets, 0, "{s:?}");
    }
}

/// Two QPs of a [`Device`], created on different queues, connected to
/// each other.
struct OnDevice {
    dev: Device,
    qps: [QueuePair; 2],
    mems: [MemoryRegion; 2],
}

impl SelfConnected for OnDevice {
    fn qpn(&self, which: Qp) -> u32 {
        self.qps[which as usize].qpn()
    }
    fn mem(&self, which: Qp) -> &MemoryRegion {
        &self.mems[which as usize]
    }
    fn post_send(&mut self, which: Qp, wr: SendWr) {
        self.qps[which as usize].post_send(wr).unwrap();
    }
    fn post_recv(&mut self, which: Qp, wr: RecvWr) {
        self.qps[which as usize].post_recv(wr).unwrap();
    }
    fn poll(&mut self, out: &mut [WorkCompletion]) -> usize {
        // Each QP's completions come to the queue of its application.
        let n = self.dev.poll_cq(0, out);
        for wc in &out[..n] {
            assert_eq!(wc.qpn, self.qpn(Qp::X), "on queue 0: {wc:?}");
        }
        let m = self.dev.poll_cq(1, &mut out[n..]);
        for wc in &out[n..n + m] {
            assert_eq!(wc.qpn, self.qpn(Qp::Y), "on queue 1: {wc:?}");
        }
        n + m
    }
}

#[test]
#[ignore = "needs root"]
fn device_qps_on_two_queues_connected_through_their_own_address() {
    let _exclusive = require_root();
    let pair = VethPair::create(&PairConfig {
        mtu: 4500,
        queues: 2,
    })
    .expect("creating the veth pair");
    let mut cfg = device_config(&pair.a);
    cfg.queues = 2;
    let dev = Device::open(cfg).expect("opening the 2-queue device");
    let mac = dev.resolve_mac(dev.ip()).expect("our own address resolves");
    assert_eq!(mac, dev.mac());
    let qps = [0, 1].map(|q| dev.create_qp(q, QpCaps::default()).unwrap());
    let mems = [0, 1].map(|q| dev.register_memory(q, REGION, Access::ALL).unwrap());
    let psns = [0x100, 0x900];
    for (me, peer) in [(0, 1), (1, 0)] {
        let remote = RemoteQp {
            qpn: qps[peer].qpn(),
            psn: psns[peer],
            mac,
            ip: dev.ip(),
        };
        qps[me].connect(remote, connect_options(psns[me])).unwrap();
    }
    assert_eq!(
        qps.each_ref().map(|q| q.home_queue()),
        [Some(0), Some(1)],
        "each QP starts on its application's queue"
    );
    let mut e = OnDevice { dev, qps, mems };
    let first = exercise(&mut e);
    // The first frames x's queue looped back were for y, on the other
    // queue: handed over there, and y moved to the queue its frames are
    // looped back on. From then on both live on one queue.
    let homes = e.qps.each_ref().map(|q| q.home_queue());
    assert_eq!(homes[0], homes[1], "the two QPs live on one queue");
    let after_first = snapshot(&e.dev);
    eprintln!("moved {first:?}; homes {homes:?}; per queue {after_first:?}");
    assert!(after_first.handoffs >= 1, "{after_first:?}");
    assert_eq!(after_first.migrations, 1, "{after_first:?}");
    assert!(after_first.looped >= first.packets, "{after_first:?}");
    // Again: every frame loops back on the QPs' queue, none takes a detour.
    let again = exercise(&mut e);
    let end = snapshot(&e.dev);
    eprintln!("then {again:?}; per queue {end:?}");
    assert_eq!(e.qps.each_ref().map(|q| q.home_queue()), homes);
    let home = homes[0].expect("a live QP") as usize;
    assert!(end.per_queue[home] >= after_first.per_queue[home] + again.packets);
    assert_eq!(
        (end.handoffs, end.migrations),
        (after_first.handoffs, after_first.migrations)
    );
    assert_eq!((end.wire_tx, end.wire_rx), (0, 0), "nothing on the wire");
    let total = e.dev.total_stats();
    assert_eq!(shown(&total)["loopback_frames"], total.loopback_frames);
    assert_eq!(total.loopback_frames, end.looped);
    let OnDevice { dev, qps, .. } = e;
    for qp in qps {
        qp.destroy().unwrap();
    }
    let last = dev.close();
    eprintln!(
        "retransmitted {}, handoffs dropped {}",
        last.transport.retransmitted_packets, last.rx_handoff_dropped
    );
    assert_eq!(last.transport.dropped_unknown_qp, 0);
}

/// A device's loopback and hand-off counters, per queue and summed.
#[derive(Debug)]
#[allow(dead_code)] // read through Debug
struct Counts {
    per_queue: Vec<u64>,
    looped: u64,
    handoffs: u64,
    migrations: u64,
    wire_tx: u64,
    wire_rx: u64,
}

fn snapshot(dev: &Device) -> Counts {
    std::thread::sleep(Duration::from_millis(30)); // a fresh stats snapshot
    let s: Vec<_> = (0..dev.queues()).map(|q| dev.stats(q).unwrap()).collect();
    let sum = |f: fn(&engine::driver::QueueStats) -> u64| s.iter().map(f).sum();
    Counts {
        per_queue: s.iter().map(|s| s.loopback_frames).collect(),
        looped: sum(|s| s.loopback_frames),
        handoffs: sum(|s| s.rx_handoff),
        migrations: sum(|s| s.qp_migrations),
        wire_tx: sum(|s| s.socket.tx_packets),
        wire_rx: sum(|s| s.socket.rx_packets),
    }
}
