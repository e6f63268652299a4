//! Setup shared by the datapath tests over a veth pair in namespaces the
//! test creates.

use engine::io::FrameAccounting;
use engine::testbed::netns::{is_root, PairConfig, Side, VethPair};
use engine::verbs::DeviceConfig;

/// Fails the calling test, saying why, unless the process runs as root.
/// Every test that calls it is `#[ignore = "needs root"]`: a run without
/// root reports it as ignored, and asking for it there (`--ignored`,
/// `--include-ignored`) fails it with this message instead of passing a
/// test that did not run.
pub fn require_root() {
    assert!(
        is_root(),
        "this test needs root (network namespaces, XDP, AF_XDP): \
         run it as root, e.g. `sudo -E cargo test --release -- --include-ignored`"
    );
}

/// A fresh veth pair with one queue per side and an MTU with room for
/// 4096-byte RoCE payloads (plus a VLAN tag); needs root
/// ([`require_root`]).
pub fn veth_pair() -> VethPair {
    require_root();
    VethPair::create(&PairConfig {
        mtu: 4500,
        queues: 1,
    })
    .expect("creating the veth pair")
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
