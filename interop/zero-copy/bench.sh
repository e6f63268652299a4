#!/bin/bash
# interop/zero-copy/bench.sh - zero-copy against copy mode on the VM's
# virtio-net driver, paired in one run: the guest's `roce-xdp serve
# --queues 0` is restarted with --zero-copy on and off in alternating order
# (on/off, off/on, ...) ROUNDS times; each time the host's roce-xdp runs
# the bandwidth tools against it for DURATION seconds. Prints a table and
# a JSON document (also $OUT/bench.json): the goodput of every run, the
# ratio zero-copy / copy of each round and their median per tool.
#
#   sudo interop/zero-copy/bench.sh
#
# Caveat: the guest is emulated (QEMU TCG, no KVM): the emulation sets the
# absolute speed, and the ratio says how much of the guest's per-packet
# work zero-copy removes under that emulation, not what a real NIC gains.
# The guest's NIC has one queue pair, so every QP works whatever the state
# of the device-wide QP table.
#
# Knobs: ROUNDS [5] DURATION [4] TOOLS ["write-bw read-bw"] BSIZE [65536]
# BQPS [2] MTU [1024], and those of lib.sh (VM_SMP [2], ROCE_XDP, OUT, ...).
set -uo pipefail
{
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
ROUNDS=${ROUNDS:-5} DURATION=${DURATION:-4} TOOLS=${TOOLS:-"write-bw read-bw"}
BSIZE=${BSIZE:-65536} BQPS=${BQPS:-2} MTU=${MTU:-1024}
ROWS=$OUT/bench-rows.tsv
: > "$ROWS"
FAILED=0

zc_setup
zc_boot 1
zc_guest_facts
GUEST_KERNEL=$(sed -n 's/^kernel //p' "$OUT/guest-facts.txt")

for r in $(seq "$ROUNDS"); do
    if [ $((r % 2)) = 1 ]; then order="on off"; else order="off on"; fi
    for mode in $order; do
        name=bench-r$r-$mode
        zc_serve_start "$name" --queues 0 --zero-copy "$mode" -m "$MTU" ||
            zc_die "round $r: serve --zero-copy $mode did not start ($OUT/$name.serve.log)"
        zc_stats "$name"
        zc=$(zc_json "$OUT/$name.stats.json" 'd["queues"][0]["zero_copy"]')
        want=$([ "$mode" = on ] && echo True || echo False)
        [ "$zc" = "$want" ] || zc_die "round $r: --zero-copy $mode but stats says zero_copy ${zc:-?}"
        for tool in $TOOLS; do
            log=$OUT/$name.$tool.json
            if zc_client "$log" "$tool" --iface "$ZC_ENG_IF" --mode native -q "$BQPS" -s "$BSIZE" \
                -D "$DURATION" -m "$MTU" --json "$ZC_VM_IP"; then
                g=$(zc_json "$log" '"%.6f" % d["results"][0]["bw_avg_gbps"]')
                n=$(zc_json "$log" 'd["results"][0]["iterations"]')
            else
                g= n=
                FAILED=$((FAILED + 1))
                zc_log "round $r $mode $tool failed ($OUT/$name.$tool.err)"
            fi
            printf '%s\t%s\t%s\t%s\t%s\n' "$r" "$mode" "$tool" "${g:-nan}" "${n:-0}" >> "$ROWS"
            zc_log "round $r, zero-copy $mode, $tool -q $BQPS -s $BSIZE -D $DURATION: ${g:-failed} Gb/s (${n:-0} messages)"
        done
        zc_serve_stop >/dev/null
    done
done

zc_halt
python3 - "$ROWS" "$OUT/bench.json" "$GUEST_KERNEL" 1 "${VM_SMP:-2}" "$BSIZE" "$BQPS" "$DURATION" "$MTU" <<'EOF'
import json, statistics, sys
rows_path, out_path, kernel, queues, smp, size, qps, duration, mtu = sys.argv[1:]
runs = []
for line in open(rows_path):
    r, mode, tool, g, n = line.rstrip("\n").split("\t")
    runs.append({"round": int(r), "zero_copy": mode == "on", "tool": tool,
                 "gbps": float(g), "messages": int(n)})
tools = sorted({x["tool"] for x in runs}, key=lambda t: [x["tool"] for x in runs].index(t))
summary = {}
print(f"{'tool':<10} {'round':>5} {'zero-copy Gb/s':>15} {'copy Gb/s':>12} {'ratio':>8}")
for t in tools:
    ratios = []
    for r in sorted({x["round"] for x in runs}):
        zc = [x["gbps"] for x in runs if x["tool"] == t and x["round"] == r and x["zero_copy"]]
        cp = [x["gbps"] for x in runs if x["tool"] == t and x["round"] == r and not x["zero_copy"]]
        if zc and cp and zc[0] == zc[0] and cp[0] == cp[0] and cp[0] > 0:
            ratio = zc[0] / cp[0]
            ratios.append(ratio)
            print(f"{t:<10} {r:>5} {zc[0]:>15.4f} {cp[0]:>12.4f} {ratio:>8.3f}")
    zcs = [x["gbps"] for x in runs if x["tool"] == t and x["zero_copy"]]
    cps = [x["gbps"] for x in runs if x["tool"] == t and not x["zero_copy"]]
    summary[t] = {
        "median_ratio": statistics.median(ratios) if ratios else None,
        "ratios": [round(x, 4) for x in ratios],
        "median_gbps_zero_copy": statistics.median(zcs) if zcs else None,
        "median_gbps_copy": statistics.median(cps) if cps else None,
    }
    m = summary[t]["median_ratio"]
    print(f"{t:<10} {'median':>5} {summary[t]['median_gbps_zero_copy'] or 0:>15.4f} "
          f"{summary[t]['median_gbps_copy'] or 0:>12.4f} {(m or float('nan')):>8.3f}")
doc = {
    "what": "roce-xdp serve in a QEMU TCG guest on virtio-net, zero-copy vs copy mode, paired rounds",
    "caveat": "TCG emulation sets the absolute speed; the ratio is the guest-side gain under emulation",
    "guest_kernel": kernel, "nic_queues": int(queues), "vcpus": int(smp),
    "size": int(size), "qps": int(qps), "duration_s": float(duration), "mtu": int(mtu),
    "runs": runs, "summary": summary,
}
json.dump(doc, open(out_path, "w"), indent=1)
print(json.dumps({"summary": summary}))
EOF
echo "JSON: $OUT/bench.json; logs: $OUT"
[ $FAILED = 0 ] || { echo "RESULT: FAIL ($FAILED runs failed)"; exit 1; }
echo "RESULT: PASS"
exit 0
}
