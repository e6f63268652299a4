#!/usr/bin/env bash
# Installs the system packages roce-xdp's demo and tests need (Debian/Ubuntu).
# Idempotent: does nothing when everything is already present.
set -euo pipefail

need_apt=()
command -v ip >/dev/null || need_apt+=(iproute2)
command -v clang >/dev/null || need_apt+=(clang)
[ -e /usr/include/bpf/bpf_helpers.h ] || need_apt+=(libbpf-dev)
command -v tshark >/dev/null || need_apt+=(tshark)
command -v tcpdump >/dev/null || need_apt+=(tcpdump)
command -v ping >/dev/null || need_apt+=(iputils-ping)
command -v setpriv >/dev/null || need_apt+=(util-linux)
# The verbs software the drop-in libibverbs is tested with (it must load
# and resolve every symbol against it): pyverbs, librdmacm's tools, qperf,
# libfabric, UCX, Open MPI; through the drop-in librdmacm: rdmacm-utils'
# examples, perftest -R, qperf -cm1, libfabric's verbs provider.
command -v ucx_info >/dev/null || need_apt+=(ucx-utils)
[ -d /usr/lib/python3/dist-packages/pyverbs ] || need_apt+=(python3-pyverbs)
command -v rping >/dev/null || need_apt+=(rdmacm-utils)
# librdmacm's headers: the drop-in librdmacm's struct layouts are checked
# against rdma/rdma_cma.h, and C tests of the CM compile with them.
[ -e /usr/include/rdma/rdma_cma.h ] || need_apt+=(librdmacm-dev)
command -v qperf >/dev/null || need_apt+=(qperf)
command -v fi_info >/dev/null || need_apt+=(libfabric-bin)
command -v ompi_info >/dev/null || need_apt+=(openmpi-bin)
command -v mpicc >/dev/null || need_apt+=(libopenmpi-dev)
command -v ib_write_bw >/dev/null && command -v ibv_rc_pingpong >/dev/null && [ -e /usr/include/infiniband/verbs.h ] || need_apt+=(ibverbs-utils perftest libibverbs-dev)

if [ ${#need_apt[@]} -gt 0 ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "setup-deps: missing packages ${need_apt[*]}; run as root (or sudo) to install them" >&2
        exit 2
    fi
    echo "setup-deps: installing ${need_apt[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

if ! python3 -c 'import scapy.contrib.roce' 2>/dev/null; then
    echo "setup-deps: installing scapy (PyPI)" >&2
    python3 -m pip install -q scapy
fi
