#!/usr/bin/env bash
# Rebuilds the eBPF objects (ebpf/roce_steer.o, the engine's XDP program, and
# ebpf/testbed_rss.o, a test bed's tc program) from their sources in a
# temporary directory and checks that each is byte-identical to the committed
# object (CI).
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
status=0
for prog in roce_steer testbed_rss; do
cp "ebpf/$prog.c" "$tmp/"
(
    cd "$tmp"
    "$CLANG" -O2 -g -target bpf -mcpu=v3 \
        -I"/usr/include/$multiarch" \
        -ffile-prefix-map="$tmp"=ebpf \
        -fdebug-compilation-dir=ebpf \
        -c "$prog.c" -o "$prog.o"
)

if [ "${1:-}" = "--update" ]; then
    cp "$tmp/$prog.o" "$repo/ebpf/$prog.o"
    echo "check-ebpf: updated ebpf/$prog.o ($("$CLANG" --version | head -1))"
    continue
fi

if cmp -s "$tmp/$prog.o" "ebpf/$prog.o"; then
    echo "check-ebpf: ebpf/$prog.o matches its source"
else
    echo "check-ebpf: ebpf/$prog.o differs from a rebuild of ebpf/$prog.c" >&2
    echo "  (built with $("$CLANG" --version | head -1)); run scripts/check-ebpf.sh --update and commit" >&2
    status=1
fi
done
exit $status
