#!/usr/bin/env bash
# CI entry for the rxe interop test: installs what interop/run.sh needs on
# the host (scripts/setup-deps.sh: tshark, tcpdump, scapy; gcc and
# libibverbs-dev for interop/peer/rdma_target.c), builds the CLI, then runs
# every direction and size of interop/run.sh against Linux Soft-RoCE in a VM.
# run.sh builds the VM image when the per-machine cache has none for the
# builder's current inputs (interop/vm/build-image.sh, about 3 minutes).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup-deps.sh
if ! { [ -e /usr/include/infiniband/verbs.h ] && command -v gcc >/dev/null; }; then
    echo "interop/ci.sh: installing gcc libibverbs-dev" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq gcc libibverbs-dev >/dev/null
fi
cargo build --release -p roce-xdp
export ROCE_XDP="${CARGO_TARGET_DIR:-$PWD/target}/release/roce-xdp"
interop/run.sh
# The perftest-named tools and serve against Debian's stock perftest
# (same VM image, one more boot).
interop/perftest/run.sh
