#!/usr/bin/env bash
# CI entry for the rxe interop test: installs the host packages interop/run.sh
# needs for its RDMA WRITE/READ runs (gcc, libibverbs-dev), builds the rxe VM
# image if it is missing (about 3 minutes, once per machine), then runs every
# direction and size of interop/run.sh against Linux Soft-RoCE in a VM.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! { [ -e /usr/include/infiniband/verbs.h ] && command -v gcc >/dev/null; }; then
    echo "interop/ci.sh: installing gcc libibverbs-dev" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq gcc libibverbs-dev >/dev/null
fi
cargo build --release -p roce-xdp
ROCE_XDP="${CARGO_TARGET_DIR:-$PWD/target}/release/roce-xdp" exec interop/run.sh
