//! Setup shared by the datapath tests over a veth pair
//! in namespaces the test creates.

// Each test binary uses its own subset.
#![allow(dead_code)]

use engine::testbed::netns::{is_root, PairConfig, Side, VethPair};
use engine::verbs::DeviceConfig;

/// A fresh veth pair with one queue per side and an MTU with room for
/// 4096-byte RoCE payloads (plus a VLAN tag), or `None`, after saying
/// why, when not running as root.
pub fn veth_pair() -> Option<VethPair> {
    if !is_root() {
        eprintln!("skipping: needs root (network namespaces, XDP, AF_XDP)");
        return None;
    }
    Some(
        VethPair::create(&PairConfig {
            mtu: 4500,
            queues: 1,
        })
        .expect("creating the veth pair"),
    )
}

/// A device on `side`'s interface, in its namespace, multi-buffer on (for
/// the 4096-byte PMTU).
pub fn device_config(side: &Side) -> DeviceConfig {
    let mut c = DeviceConfig::new(&side.ifname);
    c.netns = Some(side.netns.clone());
    c.multi_buffer = true;
    c
}
