#!/usr/bin/env bash
# The test command from README.md: installs what the tests need, then runs
# every test of the workspace. Tests that need root (network namespaces,
# XDP, AF_XDP) are `#[ignore = "needs root"]`: as root they run too
# (`--include-ignored`); without root they are listed as ignored, never
# reported as passed.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup-deps.sh
# The drop-in libibverbs' archive (`roce-xdp exec` links it; its tests
# run Debian's verbs binaries on it): `cargo test` builds no staticlib.
cargo build --release -p roce-xdp-ibverbs -p roce-xdp-rdmacm
if [ "$(id -u)" -eq 0 ]; then
    cargo test --workspace --release "$@" -- --include-ignored
else
    echo "test.sh: not root: the tests that need root are ignored (run as root to include them)" >&2
    cargo test --workspace --release "$@"
fi
