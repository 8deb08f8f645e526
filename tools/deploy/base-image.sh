#!/usr/bin/env bash
# Builds, from Debian's own packages (no public image registry is reachable here), the
# root filesystems of the images make test-deploy needs:
#   BASE.tar      stands in for python:3.11-slim-bookworm, the Dockerfile's default base:
#                 debootstrap --variant=minbase bookworm with python3.11 and its venv
#                 module, `python` and `python3` in /usr/local/bin as in the official
#                 image. The CA bundle the machine's pip uses (`pip config list`:
#                 global.cert) is copied in and named in /etc/pip.conf so pip inside the
#                 build reaches the package index: this local image only, never the
#                 Dockerfile.
#   SERVICES.tar  the same plus Debian's postgresql-15 and redis-server, imported twice by
#                 test-deploy.sh as the stand-ins postgres:15-bookworm and redis:7-bookworm
#                 (with tools/deploy/standins/postgres-entrypoint.sh).
#
# Usage: base-image.sh base BASE.tar
#        base-image.sh services BASE.tar SERVICES.tar   (from the base's tarball)
set -euo pipefail
what="$1"
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
here="$(cd "$(dirname "$0")" && pwd)"
work="$(mktemp -d "${TMPDIR:-/tmp}/vpaweb-base.XXXXXX")"
trap 'rm -rf "$work"' EXIT

slim() {
    rm -rf "$1"/var/cache/apt/archives/*.deb "$1"/var/lib/apt/lists/* \
        "$1"/usr/share/doc/* "$1"/usr/share/man/* "$1"/var/log/*.log
}

if [ "$what" = base ]; then
    root="$work/rootfs"
    debootstrap --variant=minbase \
        --include=python3,python3-venv,ca-certificates,passwd \
        bookworm "$root" "$mirror" >"$work/debootstrap.log" 2>&1 || {
        tail -n 30 "$work/debootstrap.log" >&2
        exit 1
    }
    ln -sf /usr/bin/python3 "$root/usr/local/bin/python3"
    ln -sf /usr/bin/python3 "$root/usr/local/bin/python"
    cert="$(pip config list 2>/dev/null | sed -n "s/^global\.cert='\(.*\)'$/\1/p" | head -n 1)"
    if [ -n "$cert" ] && [ -f "$cert" ]; then
        cp "$cert" "$root/etc/ssl/certs/pip-ca-bundle.crt"
        printf '[global]\ncert = /etc/ssl/certs/pip-ca-bundle.crt\n' >"$root/etc/pip.conf"
    fi
    slim "$root"
    tar --numeric-owner -C "$root" -cf "$2" .
    exit 0
fi

# services: the base plus the two servers installed in a chroot (policy-rc.d: no
# service is started), with the stand-ins' entry points.
services="$work/services"
mkdir -p "$services"
tar --numeric-owner -C "$services" -xf "$2"
cp /etc/resolv.conf "$services/etc/resolv.conf"
printf '#!/bin/sh\nexit 101\n' >"$services/usr/sbin/policy-rc.d"
chmod +x "$services/usr/sbin/policy-rc.d"
mkdir -p "$services/etc/postgresql-common"
printf 'create_main_cluster = false\n' >"$services/etc/postgresql-common/createcluster.conf"
chroot "$services" sh -c 'apt-get update -q && DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -q --no-install-recommends -o Dpkg::Options::=--force-confold \
    postgresql-15 redis-server' >"$work/services.log" 2>&1 || {
    tail -n 30 "$work/services.log" >&2
    exit 1
}
rm -f "$services/usr/sbin/policy-rc.d"
install -m 0755 "$here/standins/postgres-entrypoint.sh" "$services/usr/local/bin/postgres-entrypoint.sh"
install -m 0755 "$here/standins/redis-entrypoint.sh" "$services/usr/local/bin/redis-entrypoint.sh"
mkdir -p "$services/var/lib/postgresql/data" "$services/var/run/postgresql" "$services/data"
chroot "$services" chown -R postgres:postgres /var/lib/postgresql /var/run/postgresql
chroot "$services" chown redis:redis /data
slim "$services"
tar --numeric-owner -C "$services" -cf "$3" .
