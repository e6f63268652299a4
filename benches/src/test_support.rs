//! For the tests that measure over a veth pair (root only).

use engine::testbed::netns::{is_root, PairConfig, VethPair};

use crate::options::LINK_MTU;

/// A fresh veth pair in two network namespaces, as the harness makes it
/// (MTU [`LINK_MTU`], two queues per end). The tests that call it are
/// `#[ignore = "needs root"]`; run without root (with `--include-ignored`)
/// they fail here with a message instead of passing.
pub(crate) fn veth_pair() -> VethPair {
    assert!(
        is_root(),
        "this test needs root (network namespaces, XDP, AF_XDP): run it as root"
    );
    VethPair::create(&PairConfig {
        mtu: LINK_MTU,
        queues: 2,
    })
    .expect("creating the veth pair")
}
