#!/usr/bin/env bash
# Rebuilds ebpf/roce_steer.o from ebpf/roce_steer.c in a temporary directory
# and checks that it is byte-identical to the committed object (CI).
#   scripts/check-ebpf.sh           check (exit 1 if the objects differ)
#   scripts/check-ebpf.sh --update  rebuild and overwrite the committed object
# The build is reproducible: the source is compiled from a copy whose path is
# mapped to "ebpf/" (-ffile-prefix-map), so debug info and BTF line info do
# not depend on where the checkout lives. Needs clang and libbpf-dev.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD

CLANG=${CLANG:-clang}
command -v "$CLANG" >/dev/null || { echo "check-ebpf: clang not found (apt-get install clang libbpf-dev)" >&2; exit 2; }
[ -e /usr/include/bpf/bpf_helpers.h ] || { echo "check-ebpf: libbpf headers not found (apt-get install libbpf-dev)" >&2; exit 2; }

multiarch=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp ebpf/roce_steer.c "$tmp/"
(
    cd "$tmp"
    "$CLANG" -O2 -g -target bpf -mcpu=v3 \
        -I"/usr/include/$multiarch" \
        -ffile-prefix-map="$tmp"=ebpf \
        -fdebug-compilation-dir=ebpf \
        -c roce_steer.c -o roce_steer.o
)

if [ "${1:-}" = "--update" ]; then
    cp "$tmp/roce_steer.o" "$repo/ebpf/roce_steer.o"
    echo "check-ebpf: updated ebpf/roce_steer.o ($("$CLANG" --version | head -1))"
    exit 0
fi

if cmp -s "$tmp/roce_steer.o" ebpf/roce_steer.o; then
    echo "check-ebpf: ebpf/roce_steer.o matches its source"
else
    echo "check-ebpf: ebpf/roce_steer.o differs from a rebuild of ebpf/roce_steer.c" >&2
    echo "  (built with $("$CLANG" --version | head -1)); run scripts/check-ebpf.sh --update and commit" >&2
    exit 1
fi
