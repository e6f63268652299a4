#!/usr/bin/env bash
# Runs the full end-to-end benchmark once and pastes its generated Markdown
# into the top-level README's "## Results" section (between the
# results:begin/end markers), with the plot in benches/results/.
# Needs root. Usage: benches/update-readme-results.sh [extra roce-xdp bench flags]
set -euo pipefail
cd "$(dirname "$0")/.."
out=benches/results
cargo run --release -q -p roce-xdp -- bench --out "$out" "$@"
# The Markdown names the plot relative to its own directory; the README
# lives two levels up.
body=$(sed "s#](goodput.svg)#]($out/goodput.svg)#" "$out/results.md")
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
echo "README.md: Results section updated from $out/results.md"
