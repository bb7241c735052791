#!/usr/bin/env bash
# rootfs.sh - the Debian 12 tree the system test boots with systemd-nspawn:
# debootstrapped once into a cache (PAGID_ROOTFS_CACHE, /var/cache/pagid-ci)
# and reused by later runs on the same machine. Prints the tree's path.
#
#   tests/system/rootfs.sh [EXTRA_PACKAGE...]
#
# The tree is keyed by the package list below: change the list and a new
# tree is made. EXTRA_PACKAGE names (the .deb's Depends) are installed into
# the cached tree when missing, so the guest can install pagid offline.
set -euo pipefail

CACHE=${PAGID_ROOTFS_CACHE:-/var/cache/pagid-ci}
MIRROR=${PAGID_DEBIAN_MIRROR:-http://deb.debian.org/debian}
SUITE=bookworm
BASE_PACKAGES=systemd,systemd-sysv,dbus,procps,curl,logrotate,python3,ca-certificates,
BASE_PACKAGES+=libev4,libyaml-0-2,libhttp-parser2.9,libnettle8,zlib1g,libsystemd0,libhiredis0.14,
BASE_PACKAGES+=perl,libperl5.36,libfuture-perl,libfuture-io-perl,libfuture-asyncawait-perl

key=$(printf '%s %s %s' "$SUITE" "$MIRROR" "$BASE_PACKAGES" | sha256sum | cut -c1-12)
tree=$CACHE/$SUITE-$key
mkdir -p "$CACHE"

exec 9>"$CACHE/.lock"
flock -w 1200 9 || { echo "rootfs.sh: $CACHE is locked by another run" >&2; exit 1; }

if [ ! -x "$tree/usr/lib/systemd/systemd" ]; then
    command -v debootstrap >/dev/null || { echo "rootfs.sh: debootstrap is not installed" >&2; exit 1; }
    rm -rf "$tree.tmp"
    echo "rootfs.sh: debootstrap $SUITE into $tree (once per machine)" >&2
    debootstrap --variant=minbase --include="$BASE_PACKAGES" "$SUITE" "$tree.tmp" "$MIRROR" \
        >"$CACHE/debootstrap-$key.log" 2>&1 || {
        tail -n 20 "$CACHE/debootstrap-$key.log" >&2
        exit 1
    }
    # Boot quietly and fast: no getty on the console, a fixed machine id.
    chroot "$tree.tmp" systemctl mask console-getty.service getty@tty1.service \
        systemd-networkd-wait-online.service >/dev/null 2>&1 || true
    chroot "$tree.tmp" apt-get clean
    mv "$tree.tmp" "$tree"
fi

# Installed packages and what they provide (systemd provides systemd-sysusers).
have=$(chroot "$tree" dpkg-query -W -f='${db:Status-Abbrev} ${Package}, ${Provides}\n' |
    sed -n 's/^ii  *//p' | tr ',' '\n' | sed 's/^ *//; s/ .*//' | sort -u)
missing=()
for p in "$@"; do
    grep -qxF "$p" <<<"$have" || missing+=("$p")
done
if ((${#missing[@]})); then
    echo "rootfs.sh: adding ${missing[*]} to $tree" >&2
    cp /etc/resolv.conf "$tree/etc/resolv.conf" 2>/dev/null || true
    chroot "$tree" apt-get update -q >/dev/null &&
        DEBIAN_FRONTEND=noninteractive chroot "$tree" apt-get install -y -q \
            --no-install-recommends "${missing[@]}" >/dev/null </dev/null || {
        echo "rootfs.sh: could not install ${missing[*]}" >&2
        exit 1
    }
    chroot "$tree" apt-get clean
fi
echo "$tree"
