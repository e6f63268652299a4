#!/usr/bin/env bash
# Runs the full end-to-end benchmark once, keeps its generated results in
# benches/results/ (results.md, results.json, goodput.svg), and writes a
# summary of where each target stands, generated from results.json, into
# the top-level README's "## Results" section (between the
# results:begin/end markers), linking to benches/results/results.md.
# Needs root.
#
#   benches/update-readme-results.sh [roce-xdp bench flags]   # run, then summarise
#   benches/update-readme-results.sh --from DIR               # summarise DIR (a finished --out DIR)
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
python3 - "$out/results.json" "$commit" "$out/results.md" <<'PY'
import json, re, sys

# The bounds of the targets the report shows without a ratio row of
# `ratios[]`: as `benches/src/report/tool_rows.rs` (P50_TARGET,
# P99_TARGET, IDLE_TARGET) and `drop_in_rows.rs` (GOODPUT_TARGET,
# LATENCY_TARGET) define them, and the many-QP rows' (benches/README.md,
# "Per-packet cost with many QPs"; the report gives their ratios only).
P50_TARGET, P99_TARGET, IDLE_TARGET = 1.2, 2.0, 0.01
GOODPUT_TARGET, LATENCY_TARGET = 0.9, 1.2
QP_SCALE_TARGET, SIM_TARGET = 1.2, 2.0

path, commit, md = sys.argv[1:4]
r = json.load(open(path))
rows = []  # (target, measured, bound, met)


def yes(met):
    return "n/a" if met is None else ("yes" if met else "NO")


def verdicts(mets):
    """One word when all agree, else one per figure."""
    words = [yes(m) for m in mets]
    return words[0] if len(set(words)) == 1 else ", ".join(words)


def size(b):
    return f"{b // 1024} KiB" if b >= 1024 and b % 1024 == 0 else f"{b} B"


# The ratio rows, as the report judged them.
for ratio in r.get("ratios", []):
    name = ratio["name"].replace(" [paired median]", "")
    name = re.sub(r" \[(.*)\]$", r" (\1)", name)
    value = ratio.get("value")
    met = yes(ratio.get("met"))
    if ratio.get("met") is not None and ratio.get("ci95_decides") is False:
        met += " (within noise)"
    rows.append((name, "n/a" if value is None else f"{value:.3f}", ratio["target"], met))

# The latency tools (run-to-completion, their default), each its median run.
tools = [t for t in r.get("tools", {}).get("tools", []) if not t["threaded"] and t.get("floor")]
if tools:
    def rtt(t, us):
        return 2.0 * us if t["reports_half_round_trip"] else us
    p50 = [rtt(t, t["t_typical_us"]) / t["floor"]["p50_us"] for t in tools]
    p99 = [rtt(t, t["p99_us"]) / t["floor"]["p99_us"] for t in tools]
    names = ", ".join(t["tool"] for t in tools)
    rows.append((f"latency tools / AF_XDP echo floor, 64 B, p50 round trip: {names}",
                 ", ".join(f"{x:.2f}" for x in p50), f"<= {P50_TARGET:g}",
                 verdicts([x <= P50_TARGET for x in p50])))
    rows.append((f"the same, p99", ", ".join(f"{x:.2f}" for x in p99), f"<= {P99_TARGET:g}",
                 verdicts([x <= P99_TARGET for x in p99])))
else:
    rows.append(("latency tools / AF_XDP echo floor, 64 B", "n/a", f"p50 <= {P50_TARGET:g}, p99 <= {P99_TARGET:g}", "n/a"))

# Stock perftest under `roce-xdp exec` against the engine's own tools.
drop = r.get("verbs_drop_in", {}).get("targets", [])
if drop:
    what = ", ".join(f"{t['stock']} {size(t['message_bytes'])}" for t in drop)
    figs = ", ".join("n/a" if t.get("ratio") is None else f"{t['ratio']:.2f}" for t in drop)
    bounds = [f"<= {LATENCY_TARGET:g}" if t["latency"] else f">= {GOODPUT_TARGET:g}" for t in drop]
    mets = [None if t.get("ratio") is None else
            (t["ratio"] <= LATENCY_TARGET if t["latency"] else t["ratio"] >= GOODPUT_TARGET) for t in drop]
    bound = bounds[0] if len(set(bounds)) == 1 else ", ".join(bounds)
    rows.append((f"stock perftest under `roce-xdp exec` / the engine's tool: {what}", figs, bound, verdicts(mets)))
else:
    rows.append(("stock perftest under `roce-xdp exec` / the engine's tool", "n/a",
                 f"goodput >= {GOODPUT_TARGET:g}, latency <= {LATENCY_TARGET:g}", "n/a"))

# UCX's ucx_perftest under `roce-xdp exec` against the engine's own tools
# (each row carries its bound: `target_ratio`, as `ucx_rows.rs` sets it).
ucx = r.get("ucx", {}).get("targets", [])
if ucx and any(t.get("pairs") for t in ucx):
    what = ", ".join(f"{t['stock']} {size(t['message_bytes'])}" for t in ucx)
    figs = ", ".join("n/a" if t.get("ratio") is None else f"{t['ratio']:.2f}" for t in ucx)
    bound = ", ".join(f"{'<=' if t['latency'] else '>='} {t['target_ratio']:g}" for t in ucx)
    mets = [None if t.get("ratio") is None else
            (t["ratio"] <= t["target_ratio"] if t["latency"] else t["ratio"] >= t["target_ratio"])
            for t in ucx]
    rows.append((f"UCX `ucx_perftest` under `roce-xdp exec` / the engine's tool: {what}", figs, bound,
                 verdicts(mets)))
else:
    rows.append(("UCX `ucx_perftest` under `roce-xdp exec` / the engine's tool", "n/a",
                 "put_bw >= 0.9, tag_lat <= 1.3", "n/a"))

# Idle cost.
idle = r.get("tools", {}).get("idle")
keys = ["device_cpu_per_queue", "serve_cpu_per_queue", "serve_connected_cpu_per_queue"]
if idle and any(idle.get(k) is not None for k in keys):
    vals = [idle.get(k) for k in keys]
    rows.append(("idle CPU s per s per queue: an open `Device`, `serve` before and after a client",
                 ", ".join("n/a" if v is None else f"{v:.5f}" for v in vals), f"<= {IDLE_TARGET:g}",
                 verdicts([None if v is None else v <= IDLE_TARGET for v in vals])))
else:
    rows.append(("idle CPU s per s per queue", "n/a", f"<= {IDLE_TARGET:g}", "n/a"))

# Per-packet cost with many QPs, against one QP.
qs = r.get("qp_scale", [])
proto = [q for q in qs if q["path"] != "sim"]
if proto:
    top = max(q["qps"] for q in proto)
    shuffled = [q for q in proto if q["qps"] == top and q["order"] == "shuffled"
                and q["path"] in ("responder", "requester")]
    within = sorted({q["qps"] for q in proto
                     if all(p["ratio"] <= QP_SCALE_TARGET for p in proto if p["qps"] <= q["qps"])})
    met = "yes" if within and within[-1] == top else "NO"
    if met == "NO" and within and within[-1] > 1:
        met += f" (met up to {within[-1]:,} QPs)"
    rows.append((f"per packet, {top:,} active QPs / 1 QP, shuffled order: "
                 + ", ".join(q["path"] for q in shuffled),
                 ", ".join(f"{q['ratio']:.2f}" for q in shuffled), f"<= {QP_SCALE_TARGET:g}", met))
sim = [q for q in qs if q["path"] == "sim"]
if sim:
    s = max(sim, key=lambda q: q["qps"])
    rows.append((f"`roce-xdp sim` per message, {s['qps']:,} QPs / 1 QP", f"{s['ratio']:.2f}",
                 f"<= {SIM_TARGET:g}", yes(s["ratio"] <= SIM_TARGET)))
if not qs:
    rows.append(("per packet with many QPs / 1 QP", "n/a", f"<= {QP_SCALE_TARGET:g}", "n/a"))

m = r["machine"]
kind = "quick run" if r["setup"].get("quick") else "full run"
lines = [
    f"Measured at commit `{commit}` by `benches/update-readme-results.sh` ({kind} of "
    f"`roce-xdp bench`, {m['date_utc']}; {m['cpu_model']}, {m['cores']} cores, kernel {m['kernel']}). "
    f"Every table, the notes and the plot: [`{md}`]({md}).",
    "",
    "| target | measured | bound | met? |",
    "| --- | ---: | ---: | --- |",
]
lines += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows]
if r.get("missing"):
    lines += ["", f"Not measured in this run: {len(r['missing'])} figure(s), listed in [`{md}`]({md})."]
body = "\n".join(lines)

readme = open("README.md").read()
begin, end = "<!-- results:begin -->", "<!-- results:end -->"
section = f"{begin}\n{body}\n{end}"
if begin in readme:
    readme = re.sub(re.escape(begin) + ".*?" + re.escape(end), lambda _: section, readme, flags=re.S)
else:
    readme = readme.rstrip("\n") + "\n\n## Results\n\n" + section + "\n"
open("README.md", "w").write(readme)
PY
echo "README.md: Results summary updated from $out/results.json (commit $commit)"
