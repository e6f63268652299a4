#!/usr/bin/env bash
# The demo from README.md: two engines in network namespaces joined by veth,
# an RDMA WRITE transfer between them, every byte verified.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup-deps.sh
cargo build --release -p roce-xdp
exec target/release/roce-xdp loopback "$@"
