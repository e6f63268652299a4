#!/bin/bash
# interop/perftest/run.sh - roce-xdp's perftest-named tools against Debian's
# stock perftest (ib_write_bw, ...) on Soft-RoCE (rxe) in one VM boot: the
# eight tools in both roles, -q 4, -a and -D 2 runs, and stock clients
# against `roce-xdp serve`; every run must exit 0 on both sides. Captures
# the traffic and checks it with tshark and an independent ICRC (Scapy).
#
#   sudo interop/perftest/run.sh        # exits non-zero on failure
#
# Environment knobs:
#   ROCE_XDP=path        roce-xdp binary (default: cargo build --release)
#   OUT=dir              logs + capture (default: mktemp)
#   MODE=native          XDP attach mode of the engine
#   CASES_ONLY=regex     run only the cases whose label matches ("serve" for
#                        the serve runs)
#   VM_SUITE, VM_CACHE, PYTHON as interop/run.sh
#   VM_NS [roce-xdp-pt], VM_BR [ptbr0], VM_SUBNET [10.98.0], ENG_NS [pt-eng],
#   VM_RUN: names of this run's namespaces, bridge, subnet and VM directory
#   (distinct from interop/run.sh's, so both can run at once).
#
# Topology: netns $VM_NS with bridge $VM_BR ($VM_SUBNET.1/24), vm1
# $VM_SUBNET.11 (rxe0, perftest 4.5 on bookworm), and the engine on veth
# pteng0 $VM_SUBNET.2 in netns $ENG_NS, bridged.
set -uo pipefail
# One { ... } group: bash parses the whole script before running it.
{

HERE=$(cd "$(dirname "$0")" && pwd)
INTEROP=$(dirname "$HERE")
REPO=$(dirname "$INTEROP")
# The same guest packages as interop/run.sh: the cached image is shared.
export VM_PACKAGES=${VM_PACKAGES:-"rdma-core ibverbs-utils ibverbs-providers perftest rdmacm-utils"}
export VM_CACHE=${VM_CACHE:-/var/tmp/roce-xdp-vm}
export VM_NS=${VM_NS:-roce-xdp-pt} VM_BR=${VM_BR:-ptbr0} VM_SUBNET=${VM_SUBNET:-10.98.0}
export VM_RUN=${VM_RUN:-$VM_CACHE/run-perftest}
ENG_NS=${ENG_NS:-pt-eng} ENG_IF=pteng0 BR_VETH=ptveth0
MODE=${MODE:-native}
CASES_ONLY=${CASES_ONLY:-.}
PORT=18515
VM_IP=$VM_SUBNET.11 ENG_IP=$VM_SUBNET.2
OUT=${OUT:-$(mktemp -d /tmp/roce-xdp-perftest.XXXXXX)}
mkdir -p "$OUT"
PCAP=$OUT/perftest.pcap
PY=${PYTHON:-python3}
T0=$(date +%s)

log() { printf '[perftest %3ss] %s\n' $(( $(date +%s) - T0 )) "$*"; }
die() { log "FAIL: $*"; exit 1; }

[ "$(id -u)" = 0 ] || die "needs root (network namespaces, XDP, qemu taps)"
for t in tcpdump tshark ip; do command -v $t >/dev/null || die "$t not installed (scripts/setup-deps.sh installs it)"; done
"$PY" -c 'import scapy.contrib.roce' 2>/dev/null || die "$PY has no scapy (scripts/setup-deps.sh installs it)"

"$INTEROP/vm/build-image.sh" > "$OUT/build-image.out" 2> "$OUT/build-image.log" ||
    { tail -20 "$OUT/build-image.log"; die "VM image build failed (log: $OUT/build-image.log)"; }
export VM_IMAGE
VM_IMAGE=$(tail -1 "$OUT/build-image.out")

if [ -z "${ROCE_XDP:-}" ]; then
    log "building roce-xdp (cargo build --release -p roce-xdp)"
    (cd "$REPO" && cargo build --release -q -p roce-xdp) > "$OUT/cargo.log" 2>&1 ||
        { tail -30 "$OUT/cargo.log"; die "cargo build failed"; }
    ROCE_XDP=${CARGO_TARGET_DIR:-$REPO/target}/release/roce-xdp
fi
[ -x "$ROCE_XDP" ] || die "no roce-xdp binary at $ROCE_XDP"

. "$INTEROP/vm/vmlib.sh"
BG_PIDS=()
cleanup() {
    local p
    for p in "${BG_PIDS[@]}"; do kill "$p" 2>/dev/null; done
    for p in "${BG_PIDS[@]}"; do wait "$p" 2>/dev/null; done
    vm_stop vm1 2>/dev/null
    ip netns del "$ENG_NS" 2>/dev/null
    vm_net_down
}
trap cleanup EXIT
trap 'exit 130' INT TERM

log "network: netns $VM_NS bridge $VM_BR, vm1 $VM_IP, engine $ENG_IP on $ENG_IF (netns $ENG_NS)"
mkdir -p "$VM_RUN"
ip netns del "$ENG_NS" 2>/dev/null
vm_net_up || die "could not create netns $VM_NS"
ip netns add "$ENG_NS"
ip -n "$VM_NS" link add $BR_VETH type veth peer name $ENG_IF netns "$ENG_NS"
ip -n "$VM_NS" link set $BR_VETH master "$VM_BR" up
ip -n "$ENG_NS" link set lo up
ip -n "$ENG_NS" addr add "$ENG_IP/24" dev $ENG_IF
ip -n "$ENG_NS" link set $ENG_IF up
VM_RXE=1 VM_MEM=512 vm_start 1 || die "qemu failed to start vm1"
vm_wait_ready vm1 400 || die "vm1 did not boot"
PERFTEST_VERSION=$(vm_exec vm1 20 'echo "perftest $(dpkg-query -W -f "\${Version}" perftest) (protocol $(ib_write_bw --version | sed -n "s/^Version: //p")), kernel $(uname -r)"')
log "vm1 up: $PERFTEST_VERSION"

ip netns exec "$VM_NS" tcpdump -i "$VM_BR" -s 0 -U -w "$PCAP" "udp port 4791 or tcp port $PORT" 2>"$OUT/tcpdump.log" &
BG_PIDS+=($!)
sleep 1

# Waits until something listens on $PORT: in the engine's netns, or in vm1.
eng_listening() {
    local i
    for i in $(seq 100); do
        ip netns exec "$ENG_NS" ss -Htln "sport = :$PORT" | grep -q . && return 0
        sleep 0.1
    done
    return 1
}
vm_port_listening() {
    vm_exec vm1 30 "for i in \$(seq 200); do ss -Htln 'sport = :$PORT' | grep -q . && exit 0; sleep 0.1; done; exit 1" >/dev/null
}

RESULTS=() RUNS=0 FAILED=0
verdict() {   # verdict LABEL ENGINE_RC STOCK_RC LOGBASE
    RUNS=$((RUNS + 1))
    if [ "$2" = 0 ] && [ "$3" = 0 ]; then
        RESULTS+=("PASS $1")
    else
        FAILED=$((FAILED + 1))
        RESULTS+=("FAIL $1 (roce-xdp exit $2, perftest exit $3; $4.*)")
        tail -3 "$4.engine" "$4.stock" | sed 's/^/    /'
    fi
    log "$1: roce-xdp $2, perftest $3"
}

# perftest samples the CPU clock against gettimeofday to turn cycles into
# time, and gives up ("Correlation coefficient r^2: ... < 0.9", "Can't
# produce a report", exit 1) when the samples scatter: under QEMU TCG on a
# loaded host they sometimes do (seen once in CI: serve <- ib_send_bw).
# That is the stock tool's clock, not the exchange or the transport: such
# a run is run once more, and the log says so.
stock_clock_gave_up() {   # stock_clock_gave_up FILE
    grep -q "Correlation coefficient r^2" "$1" && grep -q "Can't produce a report" "$1"
}

# case ROLE TOOL STOCK ARGS: ROLE engine-server (the stock tool is the
# client, in vm1) or engine-client (the stock tool is the server).
case_run() {
    local role=$1 tool=$2 stock=$3 args=$4 label base erc src pid id
    label="$role $tool $args"
    [[ $label =~ $CASES_ONLY ]] || return 0
    base=$OUT/$(echo "$label" | tr ' /' '__')
    local attempt
    for attempt in 1 2; do
    if [ "$role" = engine-server ]; then
        ip netns exec "$ENG_NS" timeout 120 "$ROCE_XDP" $tool --iface $ENG_IF --mode "$MODE" $args \
            > "$base.engine" 2>&1 &
        pid=$!
        eng_listening || log "$tool: the engine server did not listen"
        vm_exec vm1 120 "timeout 100 $stock -x \$(vm-gid) $args $ENG_IP" > "$base.stock" 2>&1
        src=$?
        wait $pid
        erc=$?
    else
        id=$(vm_spawn vm1 "timeout 100 $stock -x \$(vm-gid) $args")
        vm_port_listening || log "$stock: the stock server did not listen"
        ip netns exec "$ENG_NS" timeout 120 "$ROCE_XDP" $tool --mode "$MODE" $args $VM_IP \
            > "$base.engine" 2>&1
        erc=$?
        vm_wait vm1 "$id" 120 > "$base.stock" 2>&1
        src=$?
    fi
    if [ $attempt = 1 ] && [ $src != 0 ] && stock_clock_gave_up "$base.stock"; then
        log "$label: the stock tool's CPU clock sampling gave up (r^2 < 0.9): once more"
        continue
    fi
    break
    done
    verdict "$label" $erc $src "$base"
}

for role in engine-server engine-client; do
    case_run $role write-bw ib_write_bw "-s 4096 -n 200"
    case_run $role read-bw ib_read_bw "-s 4096 -n 200"
    case_run $role send-bw ib_send_bw "-s 4096 -n 200"
    case_run $role atomic-bw ib_atomic_bw "-n 200"
    case_run $role write-lat ib_write_lat "-s 2 -n 100"
    case_run $role read-lat ib_read_lat "-s 2 -n 100"
    case_run $role send-lat ib_send_lat "-s 2 -n 100"
    case_run $role atomic-lat ib_atomic_lat "-n 100"
    case_run $role write-bw ib_write_bw "-s 4096 -n 100 -q 4"
    case_run $role read-bw ib_read_bw "-s 4096 -D 2"
done

# Stock clients, one after the other, against one `roce-xdp serve`.
if [[ "serve" =~ $CASES_ONLY ]] || [ "$CASES_ONLY" = . ]; then
    ip netns exec "$ENG_NS" "$ROCE_XDP" serve --iface $ENG_IF --mode "$MODE" > "$OUT/serve.log" 2>&1 &
    SERVE_PID=$!
    BG_PIDS+=($SERVE_PID)
    eng_listening || log "serve did not listen"
    for t in "ib_write_bw -s 4096 -n 200" "ib_read_bw -s 4096 -n 200" "ib_send_bw -s 4096 -n 200" \
        "ib_atomic_bw -n 200" "ib_read_lat -s 2 -n 100" "ib_send_lat -s 2 -n 100" \
        "ib_atomic_lat -n 100" "ib_write_bw -s 4096 -n 100 -q 4"; do
        base=$OUT/serve_$(echo "$t" | tr ' ' '_')
        vm_exec vm1 120 "timeout 100 $t -x \$(vm-gid) $ENG_IP" > "$base.stock" 2>&1
        src=$?
        if [ $src != 0 ] && stock_clock_gave_up "$base.stock"; then
            log "serve <- $t: the stock tool's CPU clock sampling gave up (r^2 < 0.9): once more"
            vm_exec vm1 120 "timeout 100 $t -x \$(vm-gid) $ENG_IP" > "$base.stock" 2>&1
            src=$?
        fi
        kill -0 $SERVE_PID 2>/dev/null
        verdict "serve <- $t" $? $src "$base"
        cp "$OUT/serve.log" "$base.engine"
    done
    kill -INT $SERVE_PID
    wait $SERVE_PID
    verdict "serve: exit after SIGINT" $? 0 "$OUT/serve"
fi

sleep 1
kill "${BG_PIDS[0]}" 2>/dev/null   # tcpdump: flush the capture
wait "${BG_PIDS[0]}" 2>/dev/null

# -a (2 B to 8 MiB, as perftest's): a capture of its own, ~230 MB; tshark
# reads all of it, the ICRC check its first 5000 frames (every size up to
# 64 KiB and the start of the larger ones).
PCAP_ALL=$OUT/perftest-all-sizes.pcap
ip netns exec "$VM_NS" tcpdump -i "$VM_BR" -s 0 -U -w "$PCAP_ALL" "udp port 4791 or tcp port $PORT" 2>>"$OUT/tcpdump.log" &
TCPDUMP_ALL=$!
BG_PIDS+=($TCPDUMP_ALL)
sleep 1
for role in engine-server engine-client; do
    case_run $role write-bw ib_write_bw "-a -n 5"
done
sleep 1
kill $TCPDUMP_ALL 2>/dev/null
wait $TCPDUMP_ALL 2>/dev/null
editcap -r "$PCAP_ALL" "$OUT/all-sizes-head.pcap" 1-5000 2>>"$OUT/tcpdump.log"

# ------------------------------------------------------------------ capture
# Every UDP/4791 frame must decode as InfiniBand (a BTH), none malformed or
# with an expert item of severity warning (6291456) or above; both sides
# sent frames. tshark's CRTP dissector claims the 2-byte payload of
# write-lat's WRITEs (from rxe and the engine alike) and calls it
# malformed: it is off, as the RPC-over-RDMA heuristic (interop/README.md).
for p in "$PCAP" "$PCAP_ALL"; do
    [ -s "$p" ] || continue
    tshark -n -r "$p" --disable-heuristic rpcrdma_infiniband --disable-protocol crtp -Y 'udp.dstport == 4791' \
        -T fields -E occurrence=f -e ip.src -e infiniband.bth.opcode -e _ws.malformed \
        -e _ws.expert.severity 2>>"$OUT/tshark.err"
done > "$OUT/tshark.txt"
TOTAL=$(wc -l < "$OUT/tshark.txt")
NO_BTH=$(cut -f2 "$OUT/tshark.txt" | grep -c '^$')
BAD=$(awk -F'\t' '$3 != "" || $4 + 0 >= 6291456' "$OUT/tshark.txt" | wc -l)
FROM_ENG=$(grep -c "^$ENG_IP	" "$OUT/tshark.txt")
FROM_VM=$(grep -c "^$VM_IP	" "$OUT/tshark.txt")
TSHARK_OK=0
[ "$TOTAL" -gt 0 ] && [ "$NO_BTH" = 0 ] && [ "$BAD" = 0 ] && [ "$FROM_ENG" -gt 0 ] && [ "$FROM_VM" -gt 0 ] && TSHARK_OK=1
HEAD_PCAP=()
[ -s "$OUT/all-sizes-head.pcap" ] && HEAD_PCAP=("$OUT/all-sizes-head.pcap")
"$PY" "$INTEROP/icrc_check.py" --expect-src "$ENG_IP" --expect-src "$VM_IP" "$PCAP" "${HEAD_PCAP[@]}" > "$OUT/icrc.txt" 2>&1
ICRC_RC=$?

PASS=0
[ $FAILED = 0 ] && [ $TSHARK_OK = 1 ] && [ $ICRC_RC = 0 ] && PASS=1
{
    printf '\n=== roce-xdp perftest interop (%s, %s s) ===\n' "$(date -u +%FT%TZ)" $(( $(date +%s) - T0 ))
    printf 'peer: vm1 %s rxe0, %s; image %s\n' "$VM_IP" "$PERFTEST_VERSION" "$VM_IMAGE"
    printf 'engine: %s %s (XDP %s), %s\n' $ENG_IF "$ENG_IP" "$MODE" "$("$ROCE_XDP" --version 2>/dev/null)"
    printf '  %s\n' "${RESULTS[@]}"
    printf 'runs: %d/%d passed\n' $((RUNS - FAILED)) $RUNS
    printf 'tshark: %d RoCE frames, %d without a BTH, %d malformed/warning; from %s: %d, from %s: %d\n' \
        "$TOTAL" "$NO_BTH" "$BAD" "$ENG_IP" "$FROM_ENG" "$VM_IP" "$FROM_VM"
    grep -v '^/' "$OUT/icrc.txt" | sed 's/^/  /'
    printf 'logs and capture: %s\n' "$OUT"
} | tee "$OUT/summary.txt"
if [ $PASS = 1 ]; then echo "RESULT: PASS"; else
    echo "RESULT: FAIL (runs failed: $FAILED, tshark ok: $TSHARK_OK, icrc exit: $ICRC_RC)"; fi
[ $PASS = 1 ]
exit
}
