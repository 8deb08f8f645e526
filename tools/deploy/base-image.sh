#!/usr/bin/env bash
# Builds the stand-in for the Dockerfile's default base, python:3.11-slim-bookworm, from
# Debian's own packages (no public image registry is reachable here): debootstrap
# --variant=minbase bookworm plus python3.11 and its venv module, with `python` and
# `python3` on the PATH at /usr/local/bin as in the official image. The CA bundle that the
# machine's pip uses (`pip config list`: global.cert) is copied in and named in /etc/pip.conf
# so pip inside the build reaches the package index; it goes into this local image only,
# never into the Dockerfile.
#
# Usage: base-image.sh OUTPUT.tar   (a tarball for `docker import`)
set -euo pipefail
out="$1"
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
work="$(mktemp -d "${TMPDIR:-/tmp}/vpaweb-base.XXXXXX")"
trap 'rm -rf "$work"' EXIT
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

# Smaller image: no package caches, lists or docs.
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* \
    "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/var/log/*.log
tar --numeric-owner -C "$root" -cf "$out" .
