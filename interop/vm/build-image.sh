#!/bin/bash
# interop/vm/build-image.sh - build (or find in the cache) a small Debian VM
# image for roce-xdp's test beds, and make sure qemu is there to boot it.
#
#   interop/vm/build-image.sh [--suite S] [--kernel stock|backports] [--packages "P..."]
#                             [--force] [--print-dir]
#
# Prints the image directory as the last line of stdout (progress goes to
# stderr), so callers do:   VM_IMAGE=$(interop/vm/build-image.sh)
#
# The image (in $VM_CACHE/images/<suite>-<key>/):
#   vmlinuz, initrd.img   the suite's stock Debian kernel and a small initrd
#                         (virtio-pci, virtio-blk, ext4: what mounting / needs)
#   rootfs.img            raw ext4, booted with snapshot=on (read-only for
#                         qemu, so any number of VMs share one image)
#   manifest              suite, kernel, packages and versions, build time
# The guest's PID 1 is interop/vm/guest/init (kernel command line, network,
# rxe, 9p shares, the command agent: see there and vmlib.sh).
#
# Inputs (flags override the environment):
#   VM_SUITE=bookworm     Debian suite: bookworm (kernel 6.1) or trixie
#                         (kernel 6.12)
#   VM_KERNEL=stock       stock: the suite's kernel; backports: the kernel of
#                         <suite>-backports (trixie's: >= 6.13, whose
#                         virtio_net does AF_XDP zero-copy; 6.12's has only
#                         the receive half and does not offer it), the rest
#                         from the suite
#   VM_PACKAGES="..."     guest packages on top of the base set (kernel, kmod,
#                         iproute2, iputils-ping, procps, ethtool), e.g.
#                         "rdma-core ibverbs-utils ibverbs-providers perftest"
#   VM_CACHE=/var/tmp/roce-xdp-vm   per-machine cache, outside the repository
#   VM_MIRROR=URL         Debian mirror (default: the one this host's apt uses)
#   VM_KEEP_IMAGES=3      older images beyond this many are deleted
#
# Cache key: the first 16 hex digits of a SHA-256 over this script, every
# file under interop/vm/guest/, the suite and the sorted package list. Any
# change to the builder, the guest files or the inputs gives a new key, hence
# a fresh build; an unchanged one finds its image and returns in a second.
# --print-dir prints where the image would be, without building.
#
# Host side (Debian/Ubuntu, root): installs mmdebstrap and e2fsprogs, and
# qemu with interop/vm/install-qemu.sh (not part of the cache key: it
# changes the host, not the image).
#
# Time (measured on a 2-core machine, see interop/README.md): about 3 minutes
# from scratch, most of it mmdebstrap downloading and unpacking packages.
set -euo pipefail
# Everything below is functions; the last line runs main. Bash has then
# parsed the whole script before running any of it, so editing or checking
# out this file while a build runs cannot break that build.

HERE=$(cd "$(dirname "$0")" && pwd)
BASE_PACKAGES="kmod iproute2 iputils-ping procps ethtool"   # + the kernel (KERNEL_PACKAGE)

log() { printf '[build-image %3ss] %s\n' $SECONDS "$*" >&2; }

parse_args() {
    SUITE=${VM_SUITE:-bookworm}
    KERNEL=${VM_KERNEL:-stock}
    PACKAGES=${VM_PACKAGES:-}
    CACHE=${VM_CACHE:-/var/tmp/roce-xdp-vm}
    KEEP=${VM_KEEP_IMAGES:-3}
    FORCE=0 PRINT_ONLY=0
    while [ $# -gt 0 ]; do
        case $1 in
            --suite) SUITE=$2; shift 2 ;;
            --kernel) KERNEL=$2; shift 2 ;;
            --packages) PACKAGES=$2; shift 2 ;;
            --force) FORCE=1; shift ;;
            --print-dir) PRINT_ONLY=1; shift ;;
            -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
            *) echo "build-image.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
        esac
    done
    case $SUITE in
        bookworm | trixie) ;;
        *) echo "build-image.sh: suite '$SUITE' is not tested here; use bookworm or trixie" >&2; exit 2 ;;
    esac
    SOURCE_SUITES=("$SUITE")
    case $KERNEL in
        stock) KERNEL_PACKAGE=linux-image-amd64 ;;
        # apt's pkg/release: the kernel from backports, its dependencies
        # from wherever they are (the suite, unless only backports has them).
        # initramfs-tools by name: the backports kernel only recommends it.
        backports) KERNEL_PACKAGE="linux-image-amd64/$SUITE-backports initramfs-tools"
            SOURCE_SUITES+=("$SUITE-backports") ;;
        *) echo "build-image.sh: --kernel must be stock or backports (got '$KERNEL')" >&2; exit 2 ;;
    esac
    # shellcheck disable=SC2086 # word splitting of the package lists is intended
    ALL_PACKAGES=$(printf '%s\n' $KERNEL_PACKAGE $BASE_PACKAGES $PACKAGES | sort -u | paste -sd, -)
}

cache_key() {
    {
        echo "suite=$SUITE"
        echo "packages=$ALL_PACKAGES"
        echo "sources=${SOURCE_SUITES[*]}"
        sha256sum < "$HERE/build-image.sh"
        (cd "$HERE" && find guest -type f | LC_ALL=C sort | xargs sha256sum)
    } | sha256sum | cut -c1-16
}

# ------------------------------------------------------------------ host tools
apt_ready=0
apt_install() {   # apt_install PKG... : install what is missing, quietly
    local missing=() p
    for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
    [ ${#missing[@]} = 0 ] && return 0
    [ $apt_ready = 1 ] || { apt-get update -qq; apt_ready=1; }
    log "apt-get install ${missing[*]}"
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# ------------------------------------------------------------------ root fs
WORK=
cleanup() {
    [ -n "$WORK" ] || return 0
    # mmdebstrap unmounts what it mounted in the guest root (proc, sys, dev)
    # itself; never delete through a mount that is still there.
    if grep -q " $WORK/" /proc/mounts; then
        log "mounts left under $WORK: not deleting it"
        return 0
    fi
    rm -rf --one-file-system "$WORK"
}

build_image() {
    local mirror root kver size_mb
    mirror=${VM_MIRROR:-$(apt-get indextargets --format '$(REPO_URI) $(RELEASE)' 2>/dev/null |
        awk '$2 == "bookworm" && $1 !~ /security/ {print $1; exit}')}
    mirror=${mirror:-http://deb.debian.org/debian}
    mirror=${mirror%/}
    WORK=$CACHE/images/.build-$SUITE-$KEY-$$
    trap cleanup EXIT
    rm -rf "$WORK" && mkdir -p "$WORK"
    root=$WORK/root
    local sources=() s
    for s in "${SOURCE_SUITES[@]}"; do sources+=("deb $mirror $s main"); done
    log "mmdebstrap $SUITE from $mirror (${sources[*]}): ${ALL_PACKAGES//,/ }"
    # minbase + the packages; documentation, man pages and locales are left
    # out (the kernel's modules are most of what remains). The setup hook
    # makes the kernel's postinst build a small initrd (MODULES=list, see
    # below) instead of Debian's default one with most modules, which is
    # ~35 MB and slow to build and to unpack under TCG.
    mmdebstrap --variant=minbase --mode=root --quiet \
        --include="$ALL_PACKAGES" \
        --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
        --dpkgopt='path-include=/usr/share/doc/*/copyright' --dpkgopt='path-exclude=/usr/share/locale/*' \
        --setup-hook='mkdir -p "$1/etc/initramfs-tools/conf.d" && echo MODULES=list > "$1/etc/initramfs-tools/conf.d/roce-xdp-vm"' \
        "$SUITE" "$root" "${sources[@]}" >&2
    kver=$(ls "$root/lib/modules" | sort -V | tail -1)

    # The guest's own files: PID 1 and its helpers.
    install -m 755 "$HERE/guest/init" "$root/sbin/roce-xdp-vm-init"
    install -m 755 "$HERE/guest/vm-gid" "$root/usr/local/bin/vm-gid"
    echo vm > "$root/etc/hostname"

    # The initrd only has to mount / : virtio-pci, virtio-blk, ext4 (and
    # crc32c_generic where the kernel has it as a module: newer kernels
    # have the CRC code built in). A module that is neither a module nor
    # built into this kernel is left out (update-initramfs fails on it).
    local m
    : > "$root/etc/initramfs-tools/modules"
    for m in virtio_pci virtio_blk ext4 crc32c_generic; do
        if find "$root/lib/modules/$kver" -name "$m.ko*" | grep -q . ||
            grep -q "/$m.ko\$" "$root/lib/modules/$kver/modules.builtin" 2>/dev/null; then
            echo "$m" >> "$root/etc/initramfs-tools/modules"
        else
            log "kernel $kver has no module $m: not in the initrd list"
        fi
    done
    chroot "$root" update-initramfs -u -k "$kver" > "$WORK/initramfs.log" 2>&1 ||
        { tail -20 "$WORK/initramfs.log" >&2; log "update-initramfs failed in the guest root"; exit 1; }

    mkdir -p "$WORK/out"
    cp "$root/boot/vmlinuz-$kver" "$WORK/out/vmlinuz"
    cp "$root/boot/initrd.img-$kver" "$WORK/out/initrd.img"
    {
        echo "suite $SUITE"
        echo "kernel $kver ($KERNEL)"
        echo "key $KEY"
        echo "built $(date -u +%FT%TZ) in ${SECONDS}s"
        echo "mirror $mirror"
        echo "packages:"
        chroot "$root" dpkg-query -W -f '  ${Package} ${Version}\n'
    } > "$WORK/out/manifest.tmp"
    rm -rf "$root/boot"/initrd.img-* "$root/var/cache/apt"/*.bin "$root/var/lib/apt/lists"/*_Packages
    size_mb=$(( $(du -sm "$root" | cut -f1) * 5 / 4 + 64 ))
    mkfs.ext4 -q -F -L roce-xdp-vm -d "$root" "$WORK/out/rootfs.img" "${size_mb}M" >&2
    mv "$WORK/out/manifest.tmp" "$WORK/out/manifest"
    rm -rf "$IMAGE"
    mv "$WORK/out" "$IMAGE"
    log "built $IMAGE (kernel $kver, rootfs $size_mb MiB)"
}

prune() {   # keep the $KEEP most recently used images; older keys are dead builders
    local old
    ls -1dt "$CACHE"/images/*-*/ 2>/dev/null | tail -n +$((KEEP + 1)) | while read -r old; do
        log "removing old image $old"
        rm -rf --one-file-system "$old"
    done
}

main() {
    parse_args "$@"
    KEY=$(cache_key)
    IMAGE=$CACHE/images/$SUITE-$KEY
    if [ $PRINT_ONLY = 1 ]; then
        echo "$IMAGE"
        return 0
    fi
    [ "$(id -u)" = 0 ] || { echo "build-image.sh: needs root (apt, chroot, mkfs)" >&2; exit 1; }
    mkdir -p "$CACHE/images"
    export DEBIAN_FRONTEND=noninteractive
    apt_install mmdebstrap e2fsprogs
    "$HERE/install-qemu.sh"
    if [ $FORCE = 0 ] && [ -e "$IMAGE/manifest" ]; then
        touch "$IMAGE"   # most recently used: kept by prune
        log "cached image $IMAGE"
    else
        build_image
        prune
    fi
    echo "$IMAGE"
}

main "$@"
