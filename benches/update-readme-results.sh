#!/usr/bin/env bash
# Runs the full end-to-end benchmark once and pastes its generated Markdown
# into the top-level README's "## Results" section (between the
# results:begin/end markers), with the plot in benches/results/.
# Needs root.
#
#   benches/update-readme-results.sh [roce-xdp bench flags]   # run, then paste
#   benches/update-readme-results.sh --from DIR               # paste DIR (a finished --out DIR)
#
# BENCH_COMMIT names the commit measured (default: this checkout's HEAD).
set -euo pipefail
cd "$(dirname "$0")/.."
out=benches/results
if [ "${1:-}" = "--from" ]; then
    src=$2
    mkdir -p "$out"
    for f in results.md results.json goodput.svg; do
        cp "$src/$f" "$out/$f"
    done
else
    # The drop-in libibverbs first: the stock-perftest rows run perftest's
    # binaries against it (`roce-xdp exec`); without it a fresh checkout
    # reports those rows as not measured.
    cargo build --release -q -p roce-xdp-ibverbs
    cargo run --release -q -p roce-xdp -- bench --out "$out" "$@"
fi
commit=${BENCH_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
# The Markdown names the plot relative to its own directory.
body=$(printf 'Measured at commit `%s` by `benches/update-readme-results.sh` (full run of `roce-xdp bench`).\n\n' "$commit";
       sed "s#](goodput.svg)#]($out/goodput.svg)#" "$out/results.md")
python3 - "$body" <<'PY'
import re, sys
body = sys.argv[1]
readme = open("README.md").read()
begin, end = "<!-- results:begin -->", "<!-- results:end -->"
section = f"{begin}\n{body}\n{end}"
if begin in readme:
    readme = re.sub(re.escape(begin) + ".*?" + re.escape(end), lambda _: section, readme, flags=re.S)
else:
    readme = readme.rstrip("\n") + "\n\n## Results\n\n" + section + "\n"
open("README.md", "w").write(readme)
PY
echo "README.md: Results section updated from $out/results.md (commit $commit)"
