#!/bin/bash
# interop/vm/install-qemu.sh - make sure this host can run the test VMs:
# qemu-system-x86_64, and $VM_CACHE/qemu.env saying which one (vmlib.sh
# reads it). build-image.sh runs it; it does nothing when qemu is there.
#
# Uses the distribution's qemu-system-x86 when apt can install it without
# removing anything. When it cannot (on some hosts a backported qemu-utils
# Breaks the release's qemu-system-common), it installs the libraries
# qemu-system-x86 links and its firmware (seabios) with apt, and unpacks
# qemu-system-x86, qemu-system-common (the TCG accelerator module) and
# qemu-system-data into $VM_CACHE/qemu. qemu finds its modules relative to
# its own binary; -L $QEMU_DATA gives it its data directory. Nothing is
# ever removed or downgraded.
#
#   VM_CACHE=/var/tmp/roce-xdp-vm   where the unpacked qemu and qemu.env go
set -euo pipefail

log() { printf '[install-qemu] %s\n' "$*" >&2; }

main() {
    local cache=${VM_CACHE:-/var/tmp/roce-xdp-vm} qemu= data= prefix deb deps
    prefix=$cache/qemu
    mkdir -p "$cache"
    export DEBIAN_FRONTEND=noninteractive
    if command -v qemu-system-x86_64 >/dev/null; then
        qemu=$(command -v qemu-system-x86_64)
    elif [ -x "$prefix/usr/bin/qemu-system-x86_64" ] &&
        compgen -G "$prefix/usr/lib/*/qemu/accel-tcg-x86_64.so" >/dev/null; then
        qemu=$prefix/usr/bin/qemu-system-x86_64 data=$prefix/usr/share/qemu
    else
        [ "$(id -u)" = 0 ] || { log "qemu is missing and installing it needs root"; exit 1; }
        apt-get update -qq
        # Simulate first: never let apt "solve" a conflict by removing a package.
        if ! apt-get install -s --no-install-recommends qemu-system-x86 2>/dev/null | grep -q '^Remv'; then
            log "apt-get install qemu-system-x86"
            apt-get install -y -qq --no-install-recommends qemu-system-x86 >/dev/null
            qemu=$(command -v qemu-system-x86_64)
        else
            log "apt would remove a package to install qemu-system-x86: unpacking it into $prefix"
            deps=$(apt-cache depends qemu-system-x86 |
                awk '$1 == "Depends:" && $2 !~ /^</ && $2 !~ /^qemu-/ {print $2}' | sort -u)
            log "apt-get install" $deps
            # shellcheck disable=SC2086 # one word per package
            apt-get install -y -qq --no-install-recommends $deps >/dev/null
            rm -rf "$prefix" "$cache/debs" && mkdir -p "$prefix" "$cache/debs"
            (cd "$cache/debs" && apt-get download -qq -o APT::Sandbox::User=root \
                qemu-system-x86 qemu-system-common qemu-system-data)
            for deb in "$cache"/debs/*.deb; do dpkg-deb -x "$deb" "$prefix"; done
            rm -rf "$cache/debs"
            # qemu-system-data's firmware links point at ../seabios (from
            # usr/share/qemu): give them the installed seabios.
            ln -sfn /usr/share/seabios "$prefix/usr/share/seabios"
            qemu=$prefix/usr/bin/qemu-system-x86_64 data=$prefix/usr/share/qemu
        fi
    fi
    # A TCG guest must start, not just --version: that loads the accelerator.
    if ! "$qemu" ${data:+-L "$data"} -accel tcg -machine none -display none -monitor none \
        -S -daemonize -pidfile "$cache/.qemu-check.pid" >/dev/null 2>"$cache/.qemu-check.err"; then
        log "qemu at $qemu cannot start a TCG machine: $(cat "$cache/.qemu-check.err")"
        exit 1
    fi
    kill "$(cat "$cache/.qemu-check.pid")" 2>/dev/null || true
    rm -f "$cache/.qemu-check.pid" "$cache/.qemu-check.err"
    printf 'QEMU=%s\nQEMU_DATA=%s\n' "$qemu" "$data" > "$cache/qemu.env"
    log "qemu: $qemu ($("$qemu" --version | head -1))"
}

main "$@"
