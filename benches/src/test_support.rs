//! For the tests that measure over a veth pair (root only).

use engine::testbed::netns::{is_root, PairConfig, VethPair};

use crate::options::LINK_MTU;

/// A fresh veth pair in two network namespaces, as the harness makes it
/// (MTU [`LINK_MTU`], two queues per end), or `None` after saying on
/// stderr that `test` is skipped when the process is not root (network
/// namespaces, XDP and AF_XDP need it).
pub(crate) fn veth_pair_or_skip(test: &str) -> Option<VethPair> {
    if !is_root() {
        eprintln!("skipping {test}: needs root (network namespaces, XDP, AF_XDP)");
        return None;
    }
    Some(
        VethPair::create(&PairConfig {
            mtu: LINK_MTU,
            queues: 2,
        })
        .expect("creating the veth pair"),
    )
}
