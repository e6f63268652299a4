#!/bin/bash
# interop/run.sh - roce-xdp pingpong against stock ibv_rc_pingpong on Linux
# Soft-RoCE (rxe), both directions, several sizes; captures the traffic and
# checks it with tshark and an independent ICRC (Scapy).
#
#   sudo interop/run.sh                 # defaults below; exits non-zero on failure
#
# Environment knobs:
#   SIZES="1 100 1024 1025 4096 8192 65536"  message sizes (bytes)
#   ITERS=10                  ping-pong iterations per run (-n)
#   MTU=1024                  path MTU (-m)
#   MODE=native               XDP attach mode for the engine (native|generic|auto)
#   LOSS_SIZES="4096 65536"   sizes also run with the engine dropping LOSS_RATE
#   LOSS_RATE=0.05            of its received RoCE frames (go-back-N; "" = skip)
#   RDMA_OPS="write read"     RDMA WRITE / READ runs: roce-xdp interop rdma-client against
#   RDMA_SIZES="4096 65536"   interop/peer/rdma_target (ours, libibverbs) on rxe,
#                             ITERS requests of each size, bytes verified both ends
#   RDMA_LOSS_SIZES=65536     sizes also run with the engine dropping LOSS_RATE
#                             ("" = skip); RDMA runs need gcc + libibverbs-dev here
#   RDMA_DIRS="engine-client engine-target"   engine-target: roce-xdp interop rdma-target,
#                             rdma_target -c on rxe WRITEs / READs the engine's buffer
#   PEER=engine               engine | vm: "vm" puts a second rxe VM where the
#                             engine would be (self-test of this harness)
#   ROCE_XDP=path             roce-xdp binary (default: cargo build --release)
#   OUT=dir                   where logs and the capture go (default: mktemp)
#   VM_SUITE=bookworm         the rxe VM's Debian suite (interop/vm/build-image.sh)
#   VM_CACHE=/var/tmp/roce-xdp-vm   where the VM image is cached (built here
#                             when missing or when the builder changed, ~3 min)
#   PYTHON=python3            a Python with scapy (scripts/setup-deps.sh installs it)
#
# Topology (all inside namespaces this script creates and deletes):
#   netns roce-xdp-vm: bridge vmbr0 10.99.0.1/24, tap vmtap1 -> vm1 10.99.0.11 (rxe0)
#                  veth prveth0 (bridge port) <-> eng0 in netns pr-eng,
#                  10.99.0.2/24, XDP + AF_XDP: the engine.
#   (PEER=vm: vm2 10.99.0.12 on vmtap2 instead of the engine.)
set -uo pipefail
# The whole script is one { ... } group: bash parses it completely before
# running any of it, so editing or checking out this file during a run
# cannot change the run.
{

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(dirname "$HERE")
# The guest packages of the rxe peer: the kernel's Soft-RoCE needs
# ibverbs-providers (librxe) in user space; rdma-core, ibverbs-utils
# (ibv_rc_pingpong, ibv_devinfo), perftest and rdmacm-utils are the stock tools.
export VM_PACKAGES=${VM_PACKAGES:-"rdma-core ibverbs-utils ibverbs-providers perftest rdmacm-utils"}
export VM_CACHE=${VM_CACHE:-/var/tmp/roce-xdp-vm}
SIZES=${SIZES:-"1 100 1024 1025 4096 8192 65536"}
ITERS=${ITERS:-10}
MTU=${MTU:-1024}
MODE=${MODE:-native}
LOSS_SIZES=${LOSS_SIZES:-"4096 65536"}
LOSS_RATE=${LOSS_RATE:-0.05}
PEER=${PEER:-engine}
RDMA_OPS=${RDMA_OPS-"write read"}
RDMA_SIZES=${RDMA_SIZES-"4096 65536"}
RDMA_LOSS_SIZES=${RDMA_LOSS_SIZES-65536}
RDMA_DIRS=${RDMA_DIRS-"engine-client engine-target"}
[ "$PEER" = engine ] || RDMA_OPS=
PORT=18515
VM_IP=10.99.0.11
ENG_NS=pr-eng ENG_IF=eng0 BR_VETH=prveth0
if [ "$PEER" = vm ]; then ENG_IP=10.99.0.12; else ENG_IP=10.99.0.2; fi
OUT=${OUT:-$(mktemp -d /tmp/roce-xdp-interop.XXXXXX)}
mkdir -p "$OUT"
PCAP=$OUT/interop.pcap
T0=$(date +%s)

log() { printf '[interop %3ss] %s\n' $(( $(date +%s) - T0 )) "$*"; }
die() { log "FAIL: $*"; exit 1; }

[ "$(id -u)" = 0 ] || die "needs root (network namespaces, XDP, qemu taps)"
for t in tcpdump tshark ip; do command -v $t >/dev/null || die "$t not installed (scripts/setup-deps.sh installs it)"; done
PY=${PYTHON:-python3}
"$PY" -c 'import scapy.contrib.roce' 2>/dev/null || die "$PY has no scapy (scripts/setup-deps.sh installs it)"

# ------------------------------------------------------------------ image
# build-image.sh returns at once when the cache holds an image for its
# current inputs; otherwise it builds one (~3 min).
"$HERE/vm/build-image.sh" > "$OUT/build-image.out" 2> "$OUT/build-image.log" ||
    { tail -20 "$OUT/build-image.log"; die "VM image build failed (log: $OUT/build-image.log)"; }
export VM_IMAGE
VM_IMAGE=$(tail -1 "$OUT/build-image.out")
grep -q 'built /' "$OUT/build-image.log" && log "built the rxe VM image: $(grep 'built /' "$OUT/build-image.log" | sed 's/^\[[^]]*\] //')"

# ------------------------------------------------------------------ engine binary
if [ "$PEER" = engine ]; then
    if [ -z "${ROCE_XDP:-}" ]; then
        log "building roce-xdp (cargo build --release -p roce-xdp)"
        (cd "$REPO" && cargo build --release -q -p roce-xdp) > "$OUT/cargo.log" 2>&1 ||
            { tail -30 "$OUT/cargo.log"; die "cargo build failed"; }
        ROCE_XDP=${CARGO_TARGET_DIR:-$REPO/target}/release/roce-xdp
    fi
    [ -x "$ROCE_XDP" ] || die "no roce-xdp binary at $ROCE_XDP"
fi

# ------------------------------------------------------------------ RDMA target
# interop/peer/rdma_target.c: built here (same Debian release as the VM, whose
# image has libibverbs but no compiler), run in the VM from its 9p share.
if [ -n "$RDMA_OPS" ]; then
    [ -e /usr/include/infiniband/verbs.h ] && command -v gcc >/dev/null ||
        die "RDMA runs need gcc and libibverbs-dev on this host (apt-get install gcc libibverbs-dev), or RDMA_OPS=\"\""
    gcc -O2 -Wall -o "$OUT/rdma_target" "$HERE/peer/rdma_target.c" -libverbs > "$OUT/gcc.log" 2>&1 ||
        { cat "$OUT/gcc.log"; die "building interop/peer/rdma_target.c failed"; }
fi

# ------------------------------------------------------------------ teardown
. "$HERE/vm/vmlib.sh"
NS=$VM_NS BR=$VM_BR
BG_PIDS=()
cleanup() {
    local p
    for p in "${BG_PIDS[@]}"; do kill "$p" 2>/dev/null; done
    for p in "${BG_PIDS[@]}"; do wait "$p" 2>/dev/null; done
    vm_stop vm1 2>/dev/null
    [ "$PEER" = vm ] && vm_stop vm2 2>/dev/null
    ip netns del $ENG_NS 2>/dev/null
    vm_net_down
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ------------------------------------------------------------------ network + VMs
log "network: netns $NS bridge $BR, vm1 $VM_IP, ${PEER} $ENG_IP"
ip netns del $ENG_NS 2>/dev/null
vm_net_up || die "could not create netns $NS"
if [ "$PEER" = engine ]; then
    ip netns add $ENG_NS
    ip -n $NS link add $BR_VETH type veth peer name $ENG_IF netns $ENG_NS
    ip -n $NS link set $BR_VETH master $BR up
    ip -n $ENG_NS link set lo up
    ip -n $ENG_NS addr add $ENG_IP/24 dev $ENG_IF
    ip -n $ENG_NS link set $ENG_IF up
fi
# vm_up vmN: boots it (vm1 gets rdma_target in its share, /share/rdma_target).
vm_up() {
    VM_RXE=1 vm_boot "${1#vm}" 240 || return 1
    [ "$1" = vm1 ] && [ -n "$RDMA_OPS" ] && vm_copy vm1 "$OUT/rdma_target"
    return 0
}
vm_up vm1 || die "vm1 did not boot"
[ "$PEER" = vm ] && { vm_up vm2 || die "vm2 did not boot"; }
log "vm1 up ($(cat "$(vm_dir vm1)/ready"))"
RXE_VERSION=$(vm_exec vm1 20 'echo "kernel $(uname -r), rdma-core $(dpkg-query -W -f "\${Version}" rdma-core)"')

ip netns exec $NS tcpdump -i $BR -s 0 -U -w "$PCAP" "udp port 4791 or tcp port $PORT" 2>"$OUT/tcpdump.log" &
BG_PIDS+=($!)
sleep 1

# ------------------------------------------------------------------ one case
vm_listening() {   # vm_listening vmN: wait until ibv_rc_pingpong listens there
    vm_exec "$1" 20 "for i in \$(seq 100); do ss -Htln 'sport = :$PORT' | grep -q . && exit 0; sleep 0.1; done; exit 1" >/dev/null
}
eng_listening() {
    local i
    for i in $(seq 100); do
        ip netns exec $ENG_NS ss -Htln "sport = :$PORT" | grep -q . && return 0
        sleep 0.1
    done
    return 1
}
# check_output FILE SIZE: the two rc_pingpong result lines, with the right byte count
check_output() {
    grep -q "^$(( $2 * ITERS * 2 )) bytes in [0-9.]* seconds = [0-9.]* Mbit/sec$" "$1" &&
        grep -q "^$ITERS iters in [0-9.]* seconds = [0-9.]* usec/iter$" "$1"
}
PP_OPTS="-g 1 -m $MTU -n $ITERS"
ENG_OPTS="--iface $ENG_IF --mode $MODE --log-level ${ENG_LOG:-info}"
RESULTS=()
RUNS=0 FAILED=0
# A VM that breaks under a run (interop/README.md; vm_again_after_fault in
# vmlib.sh): its kernel log and console are kept, it is booted again and
# the run is run once more on the fresh boot, which its result line says
# (RERUN_NOTE); the summary lists every such fault. Past
# VM_FAULT_REBOOTS reboots (default 2) a failure stands.
VM_FAULTS=() RERUN_NOTE= VM_BROKEN= VM_REBOOT=vm_up
# again_after_vm_fault LABEL LOG...: for whichever VM broke (vm1, or vm2
# with PEER=vm).
again_after_vm_fault() {
    [ -z "$VM_BROKEN" ] || return 1
    vm_again_after_fault vm1 "$NS" "$@" && return 0
    [ "$PEER" = vm ] && [ -z "$RERUN_NOTE" ] && [ -z "$VM_BROKEN" ] && vm_again_after_fault vm2 "$NS" "$@" && return 0
    [ -z "$VM_BROKEN" ] || log "$VM_BROKEN: no more reboots; a failed run stands"
    return 1
}
# The "engine side" of a case: roce-xdp in netns pr-eng (or, with PEER=vm,
# ibv_rc_pingpong on vm2). eng_start ARGS... -> background; eng_wait -> rc.
ENG_JOB= ENG_EXTRA=
eng_start() {   # eng_start LOGFILE [SERVER]
    if [ "$PEER" = vm ]; then
        ENG_JOB=$(vm_spawn vm2 "timeout 90 ibv_rc_pingpong $PP_OPTS -s $size ${2:-}")
    else
        timeout 90 ip netns exec $ENG_NS "$ROCE_XDP" pingpong $ENG_OPTS $ENG_EXTRA $PP_OPTS -s $size ${2:-} > "$1" 2>&1 &
        ENG_JOB=$!
        BG_PIDS+=($ENG_JOB)
    fi
}
eng_wait() {   # eng_wait LOGFILE -> exit code of the engine side
    if [ "$PEER" = vm ]; then vm_wait vm2 "$ENG_JOB" 150 > "$1" 2>&1; else wait "$ENG_JOB"; fi
}
eng_listening_any() {
    if [ "$PEER" = vm ]; then vm_listening vm2; else eng_listening; fi
}
# ibv_rc_pingpong on rxe retries forever (retry_cnt 7): when one side failed,
# end the other (our own VM, our own process) instead of waiting it out.
vm_abort() { vm_exec "$1" 10 'pkill -x ibv_rc_pingpong; pkill -x rdma_target' >/dev/null 2>&1; }

run_case() {   # run_case DIRECTION SIZE [DROP_RATE] ; DIRECTION = engine-client | engine-server
    local dir=$1 size=$2 drop=${3:-} base="$OUT/$1-$2${3:+-drop$3}" id erc=0 vrc=0
    ENG_EXTRA=${drop:+--drop-rate $drop}
    local vm_pp="timeout 90 ibv_rc_pingpong $PP_OPTS -s $size"
    local verdict
    while :; do
        erc=0 vrc=0
        : > "$base.engine.log"; : > "$base.rxe.log"
        if [ "$dir" = engine-client ]; then
            # rxe on vm1 serves; the engine connects.
            id=$(vm_spawn vm1 "$vm_pp")
            if vm_listening vm1; then
                eng_start "$base.engine.log" $VM_IP
                eng_wait "$base.engine.log" || erc=$?
            else
                erc=98
            fi
            [ $erc = 0 ] || vm_abort vm1
            vm_wait vm1 "$id" 150 > "$base.rxe.log" 2>&1 || vrc=$?
        else
            # the engine serves; rxe on vm1 connects.
            eng_start "$base.engine.log"
            if eng_listening_any; then
                id=$(vm_spawn vm1 "$vm_pp $ENG_IP")
                eng_wait "$base.engine.log" || erc=$?
                [ $erc = 0 ] || vm_abort vm1
                vm_wait vm1 "$id" 150 > "$base.rxe.log" 2>&1 || vrc=$?
            else
                erc=98
                [ "$PEER" = vm ] && vm_abort vm2
                eng_wait "$base.engine.log"
            fi
        fi
        verdict=PASS
        { [ $erc = 0 ] && [ $vrc = 0 ] && check_output "$base.engine.log" $size && check_output "$base.rxe.log" $size; } || verdict=FAIL
        [ $verdict = FAIL ] && again_after_vm_fault "$dir size $size${drop:+ drop $drop}" "$base.engine.log" "$base.rxe.log" && continue
        break
    done
    local eline vline
    eline=$(grep -h 'usec/iter' "$base.engine.log" 2>/dev/null | head -1)
    vline=$(grep -h 'usec/iter' "$base.rxe.log" 2>/dev/null | head -1)
    RESULTS+=("$(printf '%-4s %-13s size %6s x %s%s: %s (exit %s) | rxe: %s (exit %s)%s' \
        $verdict $dir $size $ITERS "${drop:+ drop $drop}" "${eline:-no result}" $erc "${vline:-no result}" $vrc "${RERUN_NOTE:+; $RERUN_NOTE}")")
    RERUN_NOTE=
    log "${RESULTS[-1]}"
    RUNS=$((RUNS + 1))
    if [ -n "$drop" ]; then
        RESULTS+=("$(grep -h '^roce-xdp: ' "$base.engine.log" | sed 's/^roce-xdp: /       /')")
    fi
    if [ $verdict = FAIL ]; then
        FAILED=$((FAILED + 1))
        sed 's/^/    engine| /' "$base.engine.log" | tail -8
        sed 's/^/    rxe   | /' "$base.rxe.log" | tail -8
    fi
}

for size in $SIZES; do
    run_case engine-client $size
    run_case engine-server $size
done
# Go-back-N: the engine's XDP program drops a fraction of the RoCE frames it
# receives (the XDP test impairment); rxe and the engine must recover.
if [ "$PEER" = engine ]; then
    for size in $LOSS_SIZES; do
        run_case engine-client $size $LOSS_RATE
        run_case engine-server $size $LOSS_RATE
    done
fi

# RDMA WRITE / READ: the engine (roce-xdp interop rdma-client) WRITEs into or READs
# from rdma_target's buffer on rxe, ITERS requests of SIZE bytes; both ends
# check every byte. engine-target: the other way round (roce-xdp
# interop rdma-target; rdma_target -c on rxe is the requester). With a drop rate, the engine's XDP program drops that
# fraction of the RoCE frames it receives (ACKs, READ responses) for the
# whole transfer: the exchange ends with a TCP handshake, so no side exits
# while the other still waits for an ACK.
rdma_case() {   # rdma_case DIRECTION OP SIZE [DROP_RATE]; DIRECTION = engine-client | engine-target
    local dir=$1 op=$2 size=$3 drop=${4:-} base="$OUT/rdma-$1-$2-$3${4:+-drop$4}" id erc=0 vrc=0 job
    local bytes=$(( size * ITERS )) tgt=rdma_target
    local verdict
    while :; do
        erc=0 vrc=0
        : > "$base.engine.log"; : > "$base.rxe.log"
        if [ $dir = engine-client ]; then
            id=$(vm_spawn vm1 "timeout 90 /share/rdma_target -o $op -s $size -n $ITERS -m $MTU -g 1")
            if vm_listening vm1; then
                timeout 90 ip netns exec $ENG_NS "$ROCE_XDP" interop rdma-client $ENG_OPTS -o $op -s $size -n $ITERS -m $MTU \
                    ${drop:+--drop-rate $drop} $VM_IP > "$base.engine.log" 2>&1 || erc=$?
            else
                erc=98
            fi
            [ $erc = 0 ] || vm_abort vm1
            vm_wait vm1 "$id" 150 > "$base.rxe.log" 2>&1 || vrc=$?
        else
            timeout 90 ip netns exec $ENG_NS "$ROCE_XDP" interop rdma-target $ENG_OPTS -o $op -s $size -n $ITERS -m $MTU \
                ${drop:+--drop-rate $drop} > "$base.engine.log" 2>&1 &
            job=$!
            BG_PIDS+=($job)
            if eng_listening; then
                id=$(vm_spawn vm1 "timeout 90 /share/rdma_target -c $ENG_IP -o $op -s $size -n $ITERS -m $MTU -g 1")
                vm_wait vm1 "$id" 150 > "$base.rxe.log" 2>&1 || vrc=$?
                [ $vrc = 0 ] || kill $job 2>/dev/null
            else
                vrc=98
            fi
            wait $job || erc=$?
        fi
        verdict=PASS
        if [ $dir = engine-client ]; then
            { grep -q '^target: ok' "$base.engine.log" && grep -q "target $bytes bytes: ok $bytes\$" "$base.rxe.log"; } || verdict=FAIL
            [ $op = read ] && { grep -q "^READ: verified $bytes bytes" "$base.engine.log" || verdict=FAIL; }
        else
            { grep -q "target $bytes bytes: ok $bytes\$" "$base.engine.log" && grep -q "^peer: ok $bytes\$" "$base.rxe.log"; } || verdict=FAIL
            [ $op = read ] && { grep -q "^READ: verified $bytes bytes" "$base.rxe.log" || verdict=FAIL; }
        fi
        { [ $erc = 0 ] && [ $vrc = 0 ]; } || verdict=FAIL
        [ $verdict = FAIL ] && again_after_vm_fault "rdma $dir $op size $size${drop:+ drop $drop}" "$base.engine.log" "$base.rxe.log" && continue
        break
    done
    local rate tline
    rate=$(grep -h 'Mbit/sec' "$base.engine.log" "$base.rxe.log" 2>/dev/null | head -1)
    tline=$(grep -ho 'target [0-9]* bytes: .*' "$base.engine.log" "$base.rxe.log" | head -1)
    RESULTS+=("$(printf '%-4s %-13s %-5s size %6s x %s%s: %s | %s (exit engine %s, rxe %s)%s' \
        $verdict $dir $op $size $ITERS "${drop:+ drop $drop}" "${rate:-no result}" "${tline:-no verdict}" $erc $vrc "${RERUN_NOTE:+; $RERUN_NOTE}")")
    RERUN_NOTE=
    log "${RESULTS[-1]}"
    RUNS=$((RUNS + 1))
    [ -n "$drop" ] && RESULTS+=("$(grep -h '^roce-xdp: ' "$base.engine.log" | sed 's/^roce-xdp: /       /')")
    if [ $verdict = FAIL ]; then
        FAILED=$((FAILED + 1))
        sed 's/^/    engine| /' "$base.engine.log" | tail -8
        sed 's/^/    rxe   | /' "$base.rxe.log" | tail -8
    fi
}
for dir in $RDMA_DIRS; do
    for op in $RDMA_OPS; do
        for size in $RDMA_SIZES; do rdma_case $dir $op $size; done
        [ -n "$LOSS_RATE" ] && for size in $RDMA_LOSS_SIZES; do rdma_case $dir $op $size $LOSS_RATE; done
    done
done

sleep 1
kill "${BG_PIDS[0]}" 2>/dev/null; wait "${BG_PIDS[0]}" 2>/dev/null
# The runs are over: power the VMs off now, so that their emulation does
# not compete with tshark and Scapy for the CPU (cleanup does it again,
# harmlessly).
vm_stop vm1
[ "$PEER" = vm ] && vm_stop vm2

# ------------------------------------------------------------------ checks
log "capture: $PCAP ($(du -h "$PCAP" | cut -f1))"
# One tshark pass: one line per RoCE frame (UDP dst port 4791) with the
# source, the BTH opcode (empty if not decoded as InfiniBand), and whether
# tshark flagged it malformed or raised an expert item >= warning; without
# the heuristics that misread application data (interop/tshark-roce.sh).
. "$HERE/tshark-roce.sh"
TSHARK_ARGS=(-n -r "$PCAP" "${TSHARK_ROCE[@]}")
tshark "${TSHARK_ARGS[@]}" -Y 'udp.dstport == 4791' -T fields -E occurrence=f \
    -e ip.src -e infiniband.bth.opcode -e _ws.malformed -e _ws.expert.severity \
    > "$OUT/tshark-frames.txt" 2>"$OUT/tshark.err"
read -r N_ROCE N_IB N_BAD N_FROM_ENG N_FROM_VM < <(awk -F'\t' -v e=$ENG_IP -v v=$VM_IP '
    { n++ }
    $2 != "" { ib++; if ($1 == e) fe++; if ($1 == v) fv++ }
    $3 != "" || ($4 != "" && $4 + 0 >= 6291456) { bad++ }
    END { printf "%d %d %d %d %d\n", n, ib, bad, fe, fv }' "$OUT/tshark-frames.txt")
TSHARK_OK=1
{ [ "$N_ROCE" -gt 0 ] && [ "$N_IB" = "$N_ROCE" ] && [ "$N_BAD" = 0 ] && [ "$N_FROM_ENG" -gt 0 ] && [ "$N_FROM_VM" -gt 0 ]; } || TSHARK_OK=0
[ $TSHARK_OK = 1 ] || tshark "${TSHARK_ARGS[@]}" -q -z "expert,warn,udp.dstport == 4791" > "$OUT/tshark-expert.txt" 2>/dev/null
OPCODES=$(awk -F'\t' '$2 != "" {c[$1 " op" $2]++} END{for (k in c) print k "=" c[k]}' "$OUT/tshark-frames.txt" |
    sort -V | paste -sd, | sed 's/,/, /g')

"$PY" "$HERE/icrc_check.py" --expect-src $ENG_IP --expect-src $VM_IP "$PCAP" > "$OUT/icrc.txt" 2>&1
ICRC_RC=$?

# ------------------------------------------------------------------ summary
echo
echo "=== roce-xdp interop summary ($(date -u +%FT%TZ), $(( $(date +%s) - T0 )) s) ==="
echo "peer: Soft-RoCE rxe0 on vm1 $VM_IP ($RXE_VERSION), ibv_rc_pingpong -g 1 -m $MTU -n $ITERS"
echo "      VM image $VM_IMAGE (interop/vm/build-image.sh, $(sed -n 's/^built //p' "$VM_IMAGE/manifest"))"
[ -n "$RDMA_OPS" ] && echo "      and interop/peer/rdma_target [-c $ENG_IP] -g 1 -m $MTU -n $ITERS (RDMA WRITE/READ target or requester)"
if [ "$PEER" = vm ]; then
    echo "other side: vm2 $ENG_IP running ibv_rc_pingpong (PEER=vm harness self-test, not the engine)"
else
    echo "other side: roce-xdp pingpong / interop rdma-client / interop rdma-target on $ENG_IF $ENG_IP (XDP $MODE), $($ROCE_XDP --version 2>/dev/null)"
fi
for r in "${RESULTS[@]}"; do echo "  $r"; done
echo "runs: $(( RUNS - FAILED ))/$RUNS passed"
[ ${#VM_FAULTS[@]} = 0 ] || printf 'a VM broke %d time(s) and was booted again (its runs were run again):\n' ${#VM_FAULTS[@]}
[ ${#VM_FAULTS[@]} = 0 ] || printf '  %s\n' "${VM_FAULTS[@]}"
echo "tshark $(tshark --version 2>/dev/null | head -1 | awk '{print $3}'): $N_ROCE RoCE frames, $N_IB decoded as InfiniBand (BTH), $N_BAD malformed/expert>=warning; from $ENG_IP: $N_FROM_ENG, from $VM_IP: $N_FROM_VM"
[ -s "$OUT/tshark-expert.txt" ] && grep -v '^$' "$OUT/tshark-expert.txt" | sed 's/^/  tshark expert| /'
echo "  opcodes: $OPCODES"
sed 's/^/  /' "$OUT/icrc.txt" | grep -v '^  /'
echo "logs and capture: $OUT"
if [ $FAILED = 0 ] && [ $TSHARK_OK = 1 ] && [ $ICRC_RC = 0 ]; then
    echo "RESULT: PASS"
    exit 0
fi
echo "RESULT: FAIL (runs failed: $FAILED, tshark ok: $TSHARK_OK, icrc exit: $ICRC_RC)"
exit 1
}
