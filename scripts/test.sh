#!/usr/bin/env bash
# The test command from README.md: installs what the tests need, then runs
# every test of the workspace (some need root for network namespaces).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup-deps.sh
cargo test --workspace --release "$@"
