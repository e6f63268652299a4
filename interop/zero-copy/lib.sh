# interop/zero-copy/lib.sh - the zero-copy test bed shared by run.sh and
# bench.sh (source it from bash). See docs/zero-copy.md.
#
# Topology (everything in namespaces this creates and deletes):
#   netns $VM_NS (zc-vm): bridge $VM_BR (zcbr0) $VM_SUBNET.1/24 (10.96.0.1),
#     tap vmtap1 (multi-queue when the NIC is) -> vm1 $VM_SUBNET.11: Debian
#     trixie with the trixie-backports kernel, virtio-net (modern only:
#     disable-legacy=on) with VIRTIO_F_ACCESS_PLATFORM (iommu_platform=on:
#     the rings get a DMA device, which virtio_net's AF_XDP zero-copy
#     needs). zc_boot N boots it with N queue pairs, all enabled: the host's
#     tun driver spreads the flows over the tap's queues by flow hash.
#     ZC_RSS=1 adds rss=on (QEMU's software RSS; see docs/zero-copy.md for
#     why it is off by default). The guest runs roce-xdp from the host,
#     shared read-only at /host.
#   netns $ZC_ENG_NS (zc-eng): veth $ZC_ENG_IF (zceng0) $VM_SUBNET.2/24,
#     its peer $ZC_BR_VETH (zcveth0) a port of the bridge: the host's
#     roce-xdp (copy mode: veth has no zero-copy), the peer of the guest's.
#
# Knobs (environment): ZC_QUEUES [4] queue pairs of the multi-queue NIC,
# VM_SMP [2], VM_MEM [1024] MiB, ZC_NIC_OPTS [disable-legacy=on,iommu_platform=on]
# (virtio-net-pci properties), ZC_RSS [0], VM_KERNEL [backports] (stock = trixie's 6.12,
# whose virtio_net does not offer zero-copy: a negative check), ROCE_XDP
# (the binary; default: cargo build --release -p roce-xdp), OUT (logs),
# VM_CACHE, VM_RUN [$VM_CACHE/run-zero-copy], VM_NS, VM_BR, VM_SUBNET.

ZC_HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ZC_REPO=$(dirname "$(dirname "$ZC_HERE")")
export VM_CACHE=${VM_CACHE:-/var/tmp/roce-xdp-vm}
export VM_RUN=${VM_RUN:-$VM_CACHE/run-zero-copy}
export VM_NS=${VM_NS:-zc-vm} VM_BR=${VM_BR:-zcbr0} VM_SUBNET=${VM_SUBNET:-10.96.0}
export VM_SUITE=trixie VM_KERNEL=${VM_KERNEL:-backports} VM_PACKAGES=${VM_PACKAGES:-}
ZC_QUEUES=${ZC_QUEUES:-4}
ZC_NIC_OPTS=${ZC_NIC_OPTS:-disable-legacy=on,iommu_platform=on}
[ "${ZC_RSS:-0}" = 1 ] && ZC_NIC_OPTS+=",rss=on"
ZC_ENG_NS=zc-eng ZC_ENG_IF=zceng0 ZC_BR_VETH=zcveth0
ZC_ENG_IP=$VM_SUBNET.2 ZC_VM_IP=$VM_SUBNET.11
ZC_PORT=18515
OUT=${OUT:-$(mktemp -d /tmp/roce-xdp-zero-copy.XXXXXX)}
mkdir -p "$OUT"
ZC_T0=$(date +%s)
ZC_SERVE_JOB=
ZC_HOSTDIR=

zc_log() { printf '[zero-copy %3ss] %s\n' $(($(date +%s) - ZC_T0)) "$*"; }
zc_die() { zc_log "FAIL: $*"; exit 1; }

# zc_json FILE EXPR: print a Python expression over the JSON document `d`
# (a missing file or key prints nothing and returns 1).
zc_json() {
    python3 - "$1" "$2" <<'EOF' 2>/dev/null
import json, sys
try:
    d = json.load(open(sys.argv[1]))
    v = eval(sys.argv[2], {"d": d})
except Exception:
    sys.exit(1)
print(json.dumps(v) if isinstance(v, (dict, list)) else v)
EOF
}

zc_cleanup() {
    local d
    [ -n "$ZC_SERVE_JOB" ] && zc_serve_stop >/dev/null 2>&1
    vm_stop vm1 2>/dev/null
    ip netns del "$ZC_ENG_NS" 2>/dev/null
    vm_net_down
    [ -n "$ZC_HOSTDIR" ] && rm -rf "$ZC_HOSTDIR"
    d=$(vm_dir vm1 2>/dev/null) && [ -d "$d" ] && cp "$d/console.log" "$OUT/console.log" 2>/dev/null
    return 0
}

# zc_setup: image, binary, network (zc_boot starts the VM).
zc_setup() {
    [ "$(id -u)" = 0 ] || zc_die "needs root (network namespaces, XDP, qemu taps)"
    command -v python3 >/dev/null || zc_die "python3 is needed (JSON checks)"
    zc_log "VM image: trixie, kernel from ${VM_KERNEL} (interop/vm/build-image.sh; built once, then cached)"
    "$ZC_REPO/interop/vm/build-image.sh" --suite trixie --kernel "$VM_KERNEL" \
        > "$OUT/build-image.out" 2> "$OUT/build-image.log" ||
        { tail -20 "$OUT/build-image.log"; zc_die "VM image build failed (log: $OUT/build-image.log)"; }
    export VM_IMAGE
    VM_IMAGE=$(tail -1 "$OUT/build-image.out")
    grep -q 'built /' "$OUT/build-image.log" && zc_log "$(grep 'built /' "$OUT/build-image.log" | sed 's/^\[[^]]*\] //')"
    if [ -z "${ROCE_XDP:-}" ]; then
        zc_log "building roce-xdp (cargo build --release -p roce-xdp)"
        (cd "$ZC_REPO" && cargo build --release -q -p roce-xdp) > "$OUT/cargo.log" 2>&1 ||
            { tail -30 "$OUT/cargo.log"; zc_die "cargo build failed"; }
        ROCE_XDP=${CARGO_TARGET_DIR:-$ZC_REPO/target}/release/roce-xdp
    fi
    [ -x "$ROCE_XDP" ] || zc_die "no roce-xdp binary at $ROCE_XDP"
    # The guest runs the same binary (static but for glibc; trixie's is newer).
    ZC_HOSTDIR=$(mktemp -d /tmp/roce-xdp-zc-host.XXXXXX)
    cp "$ROCE_XDP" "$ZC_HOSTDIR/roce-xdp"

    . "$ZC_REPO/interop/vm/vmlib.sh"
    trap zc_cleanup EXIT
    trap 'exit 130' INT TERM
    mkdir -p "$VM_RUN"
    ip netns del "$ZC_ENG_NS" 2>/dev/null
    vm_net_up || zc_die "could not create netns $VM_NS"
    ip netns add "$ZC_ENG_NS" || zc_die "could not create netns $ZC_ENG_NS"
    ip -n "$VM_NS" link add "$ZC_BR_VETH" type veth peer name "$ZC_ENG_IF" netns "$ZC_ENG_NS"
    ip -n "$VM_NS" link set "$ZC_BR_VETH" master "$VM_BR" up
    ip -n "$ZC_ENG_NS" link set lo up
    ip -n "$ZC_ENG_NS" addr add "$ZC_ENG_IP/24" dev "$ZC_ENG_IF"
    ip -n "$ZC_ENG_NS" link set "$ZC_ENG_IF" up
    zc_log "network: netns $VM_NS bridge $VM_BR, vm1 $ZC_VM_IP, host engine $ZC_ENG_IF $ZC_ENG_IP in netns $ZC_ENG_NS"
}

# zc_boot N: boot vm1 with an N-queue-pair NIC, every queue enabled; sets
# ZC_NIC (the guest's NIC). With all queues enabled virtio_net has no queue
# pairs to spare for XDP_TX when XDP attaches (it says "XDP request ...
# queues but max is N ... locked tx mode"): had it some, it would enable
# them, and the host's tun would deliver flows to them too, queues with no
# AF_XDP socket (measured with `ethtool -L combined 1` on a 4-queue NIC).
zc_boot() {
    ZC_BOOT_QUEUES=$1
    VM_QUEUES=$1 VM_SMP=${VM_SMP:-2} VM_MEM=${VM_MEM:-1024} VM_NIC_OPTS=$ZC_NIC_OPTS \
        VM_HOST_DIR=$ZC_HOSTDIR vm_boot 1 300 || zc_die "vm1 did not boot"
    zc_log "vm1 up ($(cat "$(vm_dir vm1)/ready"))"
    ZC_NIC=$(sed -n 's/.* nic=\([^ ]*\).*/\1/p' "$(vm_dir vm1)/ready")
    [ -n "$ZC_NIC" ] && [ "$ZC_NIC" != none ] || zc_die "the guest has no NIC"
    # xsk_diag: `ss --xdp` shows the kernel's own view of each AF_XDP socket.
    vm_exec vm1 30 "modprobe xsk_diag 2>/dev/null; ping -c2 -W5 $ZC_ENG_IP >/dev/null" >/dev/null ||
        zc_die "vm1 cannot reach the host engine's address $ZC_ENG_IP"
}

zc_halt() {   # zc_halt: power vm1 off (the network stays)
    [ -n "$ZC_SERVE_JOB" ] && zc_serve_stop >/dev/null 2>&1
    cp "$(vm_dir vm1)/console.log" "$OUT/console-${ZC_BOOT_QUEUES:-x}q.log" 2>/dev/null
    vm_stop vm1
}

# zc_guest_facts: what the guest's kernel and NIC offer, into $OUT/guest-facts.txt.
zc_guest_facts() {
    local f=$OUT/guest-facts-${ZC_BOOT_QUEUES}q.txt
    vm_exec vm1 60 "
        echo \"kernel \$(uname -r)\"
        ethtool -i $ZC_NIC | sed -n 's/^driver: /driver /p'
        f=\$(cat /sys/class/net/$ZC_NIC/device/features)
        bit() { echo \"\${f:\$1:1}\"; }
        echo \"virtio features: ACCESS_PLATFORM(33)=\$(bit 33) RING_RESET(40)=\$(bit 40) MQ(22)=\$(bit 22) RSS(60)=\$(bit 60) CTRL_GUEST_OFFLOADS(2)=\$(bit 2) MRG_RXBUF(15)=\$(bit 15)\"
        echo \"channels: \$(ethtool -l $ZC_NIC | awk '/^Current/ {c=1} c && /^Combined/ {print \$2; exit}') combined of \$(ethtool -l $ZC_NIC | awk '/^Combined/ {print \$2; exit}') max\"
        echo \"mtu \$(cat /sys/class/net/$ZC_NIC/mtu)\"
        echo \"ethtool -x: \$(ethtool -x $ZC_NIC 2>&1 | grep -v '^\$' | head -1)\"
    " > "$f" 2>&1
    cp "$f" "$OUT/guest-facts.txt"
}

# zc_rss_equal N: spread RSS over queues 0..N-1 (N=1: every flow to queue 0).
zc_rss_equal() {
    vm_exec vm1 30 "ethtool -X $ZC_NIC equal $1 && ethtool -x $ZC_NIC" > "$OUT/rss-equal-$1.txt" 2>&1
}

# zc_serve_start NAME ARGS...: `roce-xdp serve` in the guest; waits until it
# listens. Its output: $OUT/NAME.serve.log (after zc_serve_stop).
zc_serve_start() {
    local name=$1 i
    shift
    ZC_SERVE_NAME=$name
    vm_exec vm1 10 "rm -f /tmp/serve.pid" >/dev/null
    # No `timeout` wrapper: GNU timeout passes a SIGINT on to the command
    # and to its own process group, and a second SIGINT makes serve exit
    # at once (130) without its final counters. The VM bounds it.
    ZC_SERVE_JOB=$(vm_spawn vm1 "echo \$\$ > /tmp/serve.pid; exec /host/roce-xdp serve --iface $ZC_NIC --mode native $*")
    # Ready when it printed its last start-up line (serve listens on TCP
    # before it opens the datapath).
    for i in $(seq 240); do
        grep -q 'stop with Ctrl-C' "$(vm_dir vm1)/cmd/$ZC_SERVE_JOB.out" 2>/dev/null && return 0
        [ -e "$(vm_dir vm1)/cmd/$ZC_SERVE_JOB.rc" ] && break
        sleep 0.5
    done
    zc_serve_stop > /dev/null
    return 1
}

# zc_serve_stop: SIGINT to the guest's serve (by its pid), wait, save its log.
zc_serve_stop() {
    local rc=0
    [ -n "$ZC_SERVE_JOB" ] || return 0
    vm_exec vm1 10 'p=$(cat /tmp/serve.pid 2>/dev/null) && kill -INT "$p" 2>/dev/null; true' >/dev/null
    vm_wait vm1 "$ZC_SERVE_JOB" 60 > "$OUT/$ZC_SERVE_NAME.serve.log" 2>&1 || rc=$?
    ZC_SERVE_JOB=
    return $rc
}

# zc_stats NAME: the guest's `roce-xdp stats --json` into $OUT/NAME.stats.json;
# also the kernel's view (`ss --xdp`) and the NIC's per-queue counters.
zc_stats() {
    local d
    d=$(vm_dir vm1)
    vm_exec vm1 30 "/host/roce-xdp stats --iface $ZC_NIC --json > /share/$1.stats.json" > "$OUT/$1.stats.err" 2>&1
    cp "$d/$1.stats.json" "$OUT/$1.stats.json" 2>/dev/null
    vm_exec vm1 30 "ss --xdp -a -e -m 2>&1; echo; ethtool -S $ZC_NIC | grep -E '^ *(rx[0-9]+_xdp_(packets|redirects)|tx[0-9]+_(packets|kicks|timeouts|xdp_tx)):'" \
        > "$OUT/$1.kernel.txt" 2>&1
}

# zc_client LOG TOOL ARGS...: a tool of the host's roce-xdp in netns zc-eng.
zc_client() {
    local log=$1
    shift
    timeout 300 ip netns exec "$ZC_ENG_NS" "$ROCE_XDP" "$@" > "$log" 2> "${log%.json}.err"
}

# zc_zero_copy_per_queue FILE: "q0=True q1=True ..." from a stats document.
zc_zero_copy_per_queue() {
    zc_json "$1" '" ".join("q%d=%s" % (q["queue"], q.get("zero_copy")) for q in d["queues"])'
}
