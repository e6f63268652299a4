# interop/vm/vmlib.sh - boot and drive roce-xdp test VMs (source it from bash).
#
#   VM_IMAGE=$(interop/vm/build-image.sh --packages "rdma-core ibverbs-utils")
#   . interop/vm/vmlib.sh
#   vm_net_up                        # netns $VM_NS, bridge $VM_BR, host 10.99.0.1/24
#   VM_RXE=1 vm_start 1              # vm1: 10.99.0.11, tap vmtap1 on the bridge
#   vm_wait_ready vm1 240
#   vm_copy vm1 ./my-binary          # -> /share/my-binary in the guest
#   vm_exec vm1 30 'ibv_devinfo -d rxe0'         # prints guest output, returns its rc
#   id=$(vm_spawn vm1 'ibv_rc_pingpong -g 1')    # a background job in the guest
#   vm_wait vm1 "$id" 60
#   vm_stop_all; vm_net_down
#
# The network (everything inside network namespace $VM_NS, which vm_net_up
# creates and vm_net_down deletes; nothing touches the host's own links):
#   bridge $VM_BR with $VM_SUBNET.1/24; VM n gets tap vmtapN on the bridge,
#   MAC 52:54:00:99:00:NN (NN = n in two hex digits) and $VM_SUBNET.(10+n)/24.
#   Put an engine on the bridge with a veth pair: one end a port of $VM_BR,
#   the other (in a namespace of its own) carries the engine's address and XDP.
#
# Per VM, read by vm_start (environment; defaults in brackets):
#   VM_MEM [256]        MiB of guest memory
#   VM_SMP [1]          virtual CPUs (TCG runs one host thread per vCPU)
#   VM_QUEUES [1]       virtio-net queue pairs: > 1 makes a multi-queue tap and
#                       NIC and the guest enables them all (ethtool -L)
#   VM_MTU []           the guest NIC's MTU (default: the kernel's, 1500)
#   VM_NIC_OPTS []      more virtio-net-pci properties, comma-separated, e.g.
#                       "iommu_platform=on,rss=on" (interop/zero-copy/run.sh)
#   VM_RXE [0]          1: the guest creates Soft-RoCE rxe0 on its NIC
#   VM_HOST_DIR []      a host directory shared read-only, at /host in the guest
#   VM_APPEND []        extra kernel command line
# Global: VM_IMAGE (required: a directory from build-image.sh), VM_CACHE
# [/var/tmp/roce-xdp-vm] (qemu.env: which qemu), VM_RUN [$VM_CACHE/run]
# (per-VM run directories), VM_NS [roce-xdp-vm], VM_BR [vmbr0],
# VM_SUBNET [10.99.0], VM_ACCEL [kvm if the CPU has vmx/svm and /dev/kvm
# is writable, else tcg].
#
# How a VM is driven: its run directory $VM_RUN/vmN is the guest's /share
# (virtio-9p). The guest's PID 1 (interop/vm/guest/init) writes /share/ready
# when it is set up, runs each cmd/<id>.sh it finds (output in <id>.out, exit
# code in <id>.rc) and powers off when cmd/POWEROFF appears. Serial console:
# $VM_RUN/vmN/console.log; a root shell on it:
#   socat -,raw,echo=0 UNIX-CONNECT:$VM_RUN/vmN/serial.sock

VM_CACHE=${VM_CACHE:-/var/tmp/roce-xdp-vm}
VM_RUN=${VM_RUN:-$VM_CACHE/run}
VM_NS=${VM_NS:-roce-xdp-vm}
VM_BR=${VM_BR:-vmbr0}
VM_SUBNET=${VM_SUBNET:-10.99.0}
if [ -z "${QEMU:-}" ] && [ -e "$VM_CACHE/qemu.env" ]; then
    . "$VM_CACHE/qemu.env"
fi
QEMU=${QEMU:-qemu-system-x86_64}
if [ -z "${VM_ACCEL:-}" ]; then
    # A /dev/kvm without vmx/svm (e.g. a PVM host) cannot run a stock
    # Debian kernel: it hangs right after "Probing EDD". Use TCG there.
    if [ -w /dev/kvm ] && grep -qwE 'vmx|svm' /proc/cpuinfo; then VM_ACCEL=kvm; else VM_ACCEL=tcg; fi
fi

vm_ip() { echo "$VM_SUBNET.$((10 + $1))"; }   # vm_ip N
vm_dir() { echo "$VM_RUN/$1"; }               # vm_dir vmN

vm_net_up() {   # vm_net_up: the namespace and its bridge (taps come with vm_start)
    ip netns del "$VM_NS" 2>/dev/null
    ip netns add "$VM_NS" || return 1
    ip -n "$VM_NS" link set lo up
    ip -n "$VM_NS" link add "$VM_BR" type bridge
    ip -n "$VM_NS" addr add "$VM_SUBNET.1/24" dev "$VM_BR"
    ip -n "$VM_NS" link set "$VM_BR" up
}
vm_net_down() { ip netns del "$VM_NS" 2>/dev/null; return 0; }

vm_start() {   # vm_start N: boot vmN in the background (qemu -daemonize)
    local n=$1 d mac cmdline accel queues=${VM_QUEUES:-1} netopts devopts
    [ -n "${VM_IMAGE:-}" ] && [ -e "$VM_IMAGE/rootfs.img" ] ||
        { echo "vm_start: VM_IMAGE must name a directory from interop/vm/build-image.sh" >&2; return 1; }
    d=$(vm_dir "vm$n")
    rm -rf "$d" && mkdir -p "$d/cmd"
    mac=$(printf '52:54:00:99:00:%02x' "$n")
    ip -n "$VM_NS" link del "vmtap$n" 2>/dev/null
    if [ "$queues" -gt 1 ]; then
        ip -n "$VM_NS" tuntap add dev "vmtap$n" mode tap multi_queue || return 1
        netopts=",queues=$queues"
        devopts=",mq=on,vectors=$((2 * queues + 2))"
    else
        ip -n "$VM_NS" tuntap add dev "vmtap$n" mode tap || return 1
        netopts= devopts=
    fi
    ip -n "$VM_NS" link set "vmtap$n" master "$VM_BR" up
    cmdline="console=ttyS0 root=/dev/vda rw init=/sbin/roce-xdp-vm-init panic=1 loglevel=4"
    cmdline+=" vm.name=vm$n vm.ip=$(vm_ip "$n")/24 vm.queues=$queues vm.rxe=${VM_RXE:-0}"
    [ -n "${VM_MTU:-}" ] && cmdline+=" vm.mtu=$VM_MTU"
    local share=(-fsdev "local,id=ctl,path=$d,security_model=none"
        -device virtio-9p-pci,fsdev=ctl,mount_tag=ctl)
    if [ -n "${VM_HOST_DIR:-}" ]; then
        share+=(-fsdev "local,id=host,path=$VM_HOST_DIR,security_model=none,readonly=on"
            -device virtio-9p-pci,fsdev=host,mount_tag=host)
        cmdline+=" vm.host=1"
    fi
    [ -n "${VM_APPEND:-}" ] && cmdline+=" $VM_APPEND"
    if [ "$VM_ACCEL" = kvm ]; then
        accel=(-accel kvm -cpu host)
    else
        # tb-size bounds TCG's translation cache (default 1 GiB: ~1.4 GiB RSS).
        accel=(-accel tcg,tb-size=128 -cpu max)
    fi
    local datadir=()
    [ -n "${QEMU_DATA:-}" ] && datadir=(-L "$QEMU_DATA")
    # snapshot=on: the guest's writes go to a throw-away overlay, so the
    # image stays pristine and shared. qemu runs inside $VM_NS to open the tap.
    # romfile=: no iPXE option ROM (the kernel is booted directly).
    TMPDIR=$d ip netns exec "$VM_NS" "$QEMU" "${datadir[@]}" "${accel[@]}" \
        -machine q35 -m "${VM_MEM:-256}" -smp "${VM_SMP:-1}" \
        -kernel "$VM_IMAGE/vmlinuz" -initrd "$VM_IMAGE/initrd.img" -append "$cmdline" \
        -drive "file=$VM_IMAGE/rootfs.img,if=virtio,format=raw,snapshot=on" \
        -netdev "tap,id=net0,ifname=vmtap$n,script=no,downscript=no$netopts" \
        -device "virtio-net-pci,netdev=net0,mac=$mac,romfile=$devopts${VM_NIC_OPTS:+,$VM_NIC_OPTS}" \
        "${share[@]}" \
        -chardev "socket,id=ser0,path=$d/serial.sock,server=on,wait=off,logfile=$d/console.log" \
        -serial chardev:ser0 -display none -monitor none -no-reboot \
        -pidfile "$d/qemu.pid" -daemonize
}

vm_wait_ready() {   # vm_wait_ready vmN TIMEOUT_S: until the guest is set up
    local d t=0
    d=$(vm_dir "$1")
    until [ -e "$d/ready" ]; do
        if [ $t -ge $(($2 * 2)) ] || ! vm_running "$1"; then
            echo "$1 did not become ready in $2 s; console:" >&2
            tail -20 "$d/console.log" >&2
            return 1
        fi
        sleep 0.5
        t=$((t + 1))
    done
}
# vm_boot N TIMEOUT_S: vm_start N, then vm_wait_ready; a guest whose
# kernel panicked while booting (its console says "Kernel panic") is
# booted again, up to VM_BOOT_ATTEMPTS times in all (default 3), each
# failed console kept as /tmp/vmN-console.failed-K.XXXXXX (the path is
# printed). Under TCG the guest kernel has been seen to die at boot on
# an int3 in its own code patching (a trap taken while another vCPU
# rewrote the instruction: "Oops: int3", "Kernel panic - not syncing:
# Fatal exception in interrupt"; CI of 2026-12-04, the zero-copy bed's
# second boot), nothing to do with what the test then checks. Any other
# failure is returned at once. The variables vm_start reads apply as
# for vm_start (VM_QUEUES=4 vm_boot 1 300).
vm_boot() {
    local n=$1 timeout=$2 k=1 d kept
    d=$(vm_dir "vm$n")
    while :; do
        vm_start "$n" || return 1
        vm_wait_ready "vm$n" "$timeout" && return 0
        grep -q "Kernel panic" "$d/console.log" 2>/dev/null || return 1
        [ "$k" -lt "${VM_BOOT_ATTEMPTS:-3}" ] || return 1
        vm_stop "vm$n"
        kept=$(mktemp "/tmp/vm$n-console.failed-$k.XXXXXX")
        cp "$d/console.log" "$kept"
        echo "vm$n: its kernel panicked while booting (attempt $k; console kept in $kept): booting it again" >&2
        k=$((k + 1))
    done
}
vm_running() {   # vm_running vmN: its qemu is alive
    local pid
    pid=$(cat "$(vm_dir "$1")/qemu.pid" 2>/dev/null) || return 1
    grep -qa qemu-system "/proc/$pid/cmdline" 2>/dev/null
}
vm_spawn() {   # vm_spawn vmN 'command': start a guest job, echo its id
    local d id
    d=$(vm_dir "$1")/cmd
    id=j$(date +%s%N)
    printf '%s\n' "$2" > "$d/.$id" && mv "$d/.$id" "$d/$id.sh"   # the agent sees it whole
    echo "$id"
}
vm_wait() {   # vm_wait vmN ID TIMEOUT_S: print the job's output, return its exit code (124: timeout)
    local d t=0
    d=$(vm_dir "$1")/cmd
    until [ -e "$d/$2.rc" ]; do
        if [ $t -ge $(($3 * 5)) ]; then
            echo "[vm_wait: no exit code after $3 s]"
            cat "$d/$2.out" 2>/dev/null
            return 124
        fi
        sleep 0.2
        t=$((t + 1))
    done
    cat "$d/$2.out"
    return "$(cat "$d/$2.rc")"
}
vm_exec() {   # vm_exec vmN TIMEOUT_S 'command': run and wait
    local id
    id=$(vm_spawn "$1" "$3")
    vm_wait "$1" "$id" "$2"
}
vm_copy() {   # vm_copy vmN FILE [NAME]: copy a host file to /share/NAME in the guest
    cp "$2" "$(vm_dir "$1")/${3:-$(basename "$2")}"
}
vm_stop() {   # vm_stop vmN: power off through the agent, kill qemu after 5 s
    local d pid t=0
    d=$(vm_dir "$1")
    pid=$(cat "$d/qemu.pid" 2>/dev/null) || return 0
    touch "$d/cmd/POWEROFF" 2>/dev/null
    while vm_running "$1" && [ $t -lt 50 ]; do
        sleep 0.1
        t=$((t + 1))
    done
    vm_running "$1" && kill "$pid"   # only if that pid is still our qemu
    rm -f "$d/qemu.pid"
}
# A VM can break under TCG while a test runs, nothing to do with what the
# test checks (interop/README.md lists what was seen: a virtio_net TX queue
# stalled, rxe oopsed, eth0 went silent with the kernel running on). For a
# test that then wants to run the failed run again on a fresh boot:
#
# vm_fault vmN NETNS: prints why vmN is broken; returns 1 when nothing
# shows it is. Broken: its qemu exited; its console or its kernel log
# (dmesg through the agent) shows a panic, BUG:, an oops, NETDEV WATCHDOG
# or a stall; its agent does not answer in 20 s; or it does not answer
# ping from network namespace NETNS (the test's own, on the same bridge).
vm_fault() {
    local vm=$1 ns=$2 l rc ip faults='Kernel panic|BUG: |Oops|NETDEV WATCHDOG|transmit queue [0-9]+ timed out|soft lockup|blocked for more than|self-detected stall'
    ip=$(vm_ip "${vm#vm}")
    vm_running "$vm" || { echo "its qemu exited"; return 0; }
    l=$(grep -a -m1 -E "$faults" "$(vm_dir "$vm")/console.log" 2>/dev/null | tr -d '\r')
    [ -n "$l" ] && { echo "its console: ${l#*] }"; return 0; }
    l=$(vm_exec "$vm" 20 "dmesg | grep -m1 -E '$faults'")
    rc=$?
    [ $rc = 124 ] && { echo "its agent did not answer in 20 s"; return 0; }
    l=$(printf '%s' "$l" | tr -d '\r')
    [ -n "$l" ] && { echo "its kernel log: ${l#*] }"; return 0; }
    ip netns exec "$ns" ping -q -c 3 -i 0.5 -W 2 "$ip" > /dev/null 2>&1 ||
        { echo "it no longer answered ping from namespace $ns (its kernel and agent running)"; return 0; }
    return 1
}
# vm_again_after_fault vmN NETNS LABEL LOG...: after run LABEL failed. When
# vmN broke (vm_fault), keeps its kernel log and console
# ($OUT/vmN-fault-K.dmesg, .console) and the run's logs (LOG.first-run),
# boots it again with the caller's function $VM_REBOOT (called with vmN)
# and returns 0: run it again. Returns 1 when the failure stands: vmN is
# fine, or this run was already run again (RERUN_NOTE set), or vmN broke
# more than VM_FAULT_REBOOTS [2] times or did not come back (then
# VM_BROKEN says why). The caller's globals: OUT, VM_REBOOT, VM_FAULTS (an
# array, a line per fault added), RERUN_NOTE (set on return 0, for the
# run's result line; the caller clears it once recorded), VM_BROKEN.
vm_again_after_fault() {
    local vm=$1 ns=$2 label=$3 why k f msg
    shift 3
    [ -z "${RERUN_NOTE:-}" ] || return 1
    why=$(vm_fault "$vm" "$ns") || return 1
    for f in "$@"; do mv -f "$f" "$f.first-run" 2>/dev/null; done
    k=$((${#VM_FAULTS[@]} + 1))
    vm_exec "$vm" 20 dmesg > "$OUT/$vm-fault-$k.dmesg" 2>&1
    cp "$(vm_dir "$vm")/console.log" "$OUT/$vm-fault-$k.console" 2>/dev/null
    VM_FAULTS+=("during $label: $vm: $why (kept: $OUT/$vm-fault-$k.dmesg, .console)")
    if [ "$k" -gt "${VM_FAULT_REBOOTS:-2}" ]; then
        VM_BROKEN="$vm: $why, after ${VM_FAULT_REBOOTS:-2} reboots already"
    else
        msg="$label: $vm broke ($why; kernel log and console kept in $OUT/$vm-fault-$k.*): booting it again to run this once more"
        if declare -F log > /dev/null; then log "$msg"; else echo "$msg" >&2; fi
        vm_stop "$vm"
        if "$VM_REBOOT" "$vm"; then
            RERUN_NOTE="run again on a fresh boot of $vm: the first run failed when $vm broke ($why; its logs: *.first-run)"
            return 0
        fi
        VM_BROKEN="$vm: $why; booting it again failed"
    fi
    return 1
}
vm_stop_all() {   # vm_stop_all: every VM with a run directory here
    local d
    for d in "$VM_RUN"/vm*; do
        [ -e "$d/qemu.pid" ] && vm_stop "${d##*/}"
    done
    return 0
}
