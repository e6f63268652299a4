#!/usr/bin/env bash
# CI entry for the rxe interop test: installs what interop/run.sh needs on
# the host (scripts/setup-deps.sh: tshark, tcpdump, scapy, ibverbs-utils,
# perftest; gcc and libibverbs-dev for interop/peer/rdma_target.c and for
# linking the drop-in), builds the CLI and the drop-in, then runs
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
# roce-xdp-ibverbs and roce-xdp-rdmacm: the drop-in libibverbs and
# librdmacm `roce-xdp exec` loads (perftest/run.sh runs Debian's binaries,
# librdmacm's consumers among them, under exec against rxe).
cargo build --release -p roce-xdp -p roce-xdp-ibverbs -p roce-xdp-rdmacm
export ROCE_XDP="${CARGO_TARGET_DIR:-$PWD/target}/release/roce-xdp"
interop/run.sh
# The perftest-named tools and serve against Debian's stock perftest, and
# Debian's ibv_rc_pingpong and perftest under `roce-xdp exec` against the
# same binaries on rxe (same VM image, one more boot).
interop/perftest/run.sh
