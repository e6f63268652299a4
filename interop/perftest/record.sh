#!/bin/bash
# interop/perftest/record.sh - records stock perftest sessions (both ends
# stock, in one rxe VM) for the exchange's unit tests:
# interop/perftest/transcripts/NAME.txt, one line per TCP read of a relay
# on the host between the two: "c HEX" client -> server, "s HEX" back.
#
#   sudo interop/perftest/record.sh write_bw "ib_write_bw -s 4096 -n 5" [more NAME CMD pairs]
#
# The server listens in the VM on 18516; the client connects to the relay
# on the bridge's host address (18515), which forwards to it. Their RoCE
# traffic goes over rxe within the VM. Knobs as run.sh (VM_NS, VM_BR,
# VM_SUBNET, VM_RUN, VM_CACHE, VM_SUITE); OUT: where the transcripts go.
set -uo pipefail
{
HERE=$(cd "$(dirname "$0")" && pwd)
INTEROP=$(dirname "$HERE")
export VM_PACKAGES=${VM_PACKAGES:-"rdma-core ibverbs-utils ibverbs-providers perftest rdmacm-utils"}
export VM_CACHE=${VM_CACHE:-/var/tmp/roce-xdp-vm}
export VM_NS=${VM_NS:-roce-xdp-pt} VM_BR=${VM_BR:-ptbr0} VM_SUBNET=${VM_SUBNET:-10.98.0}
export VM_RUN=${VM_RUN:-$VM_CACHE/run-perftest}
OUT=${OUT:-$HERE/transcripts}
[ "$(id -u)" = 0 ] || { echo "needs root" >&2; exit 1; }
export VM_IMAGE
VM_IMAGE=$("$INTEROP/vm/build-image.sh" 2>/dev/null | tail -1) || { echo "image build failed" >&2; exit 1; }
. "$INTEROP/vm/vmlib.sh"
trap 'vm_stop vm1; vm_net_down' EXIT
mkdir -p "$VM_RUN" "$OUT"
vm_net_up && VM_RXE=1 VM_MEM=512 vm_boot 1 400 || exit 1
vm_exec vm1 20 'dpkg-query -W perftest; ib_write_bw --version'
while [ $# -ge 2 ]; do
    name=$1 cmd=$2
    shift 2
    ip netns exec "$VM_NS" python3 "$HERE/relay.py" 18515 "$(vm_ip 1)" 18516 "$OUT/$name.txt" &
    relay=$!
    id=$(vm_spawn vm1 "timeout 60 $cmd -x \$(vm-gid) -p 18516")
    sleep 1.5
    vm_exec vm1 90 "timeout 60 $cmd -x \$(vm-gid) -p 18515 $VM_SUBNET.1" > /dev/null; c=$?
    vm_wait vm1 "$id" 60 > /dev/null; s=$?
    wait $relay
    echo "$name: client exit $c, server exit $s, $(wc -l < "$OUT/$name.txt") reads"
done
}
