#!/usr/bin/env bash
# make test-deploy: builds vpaweb's image, starts docker-compose.yml for real, checks it
# from outside (tools/deploy/check_stack.py) and tears everything down.
#
# Runs its own Docker engine (Debian's docker.io, installed when missing) with its data,
# exec root, socket and pidfile under a temporary directory and the vfs storage driver,
# so it needs root and touches no other engine. No public image registry is reachable, so:
#   * python:3.11-slim-bookworm (the Dockerfile's default base) is built locally with
#     debootstrap (tools/deploy/base-image.sh) and cached in $VPAWEB_DEPLOY_CACHE;
#   * postgres:15-bookworm and redis:7-bookworm, the images docker-compose.yml names, are
#     stand-ins built from Debian's packages (tools/deploy/standins/README.md), honouring
#     the official images' environment contract; cached the same way.
# The engine and the temporary directory are removed on every exit, failure included.
set -euo pipefail
cd "$(dirname "$0")/../.."
repo="$PWD"
PY="${PY:-$repo/.venv/bin/python}"
cache="${VPAWEB_DEPLOY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/vpaweb-deploy}"
started_at=$(date +%s)

log() { printf '[test-deploy %4ss] %s\n' "$(($(date +%s) - started_at))" "$*"; }

# --- tools --------------------------------------------------------------------------
missing=()
command -v dockerd >/dev/null || missing+=(docker.io)
command -v debootstrap >/dev/null || missing+=(debootstrap)
command -v docker-compose >/dev/null || missing+=(docker-compose)
command -v iptables >/dev/null || missing+=(iptables)
if [ ${#missing[@]} -gt 0 ]; then
    log "installing ${missing[*]} from Debian"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q >/dev/null
    # Do not let the package start a system-wide engine: this test runs its own.
    printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d.vpaweb
    chmod +x /usr/sbin/policy-rc.d.vpaweb
    if [ ! -e /usr/sbin/policy-rc.d ]; then
        mv /usr/sbin/policy-rc.d.vpaweb /usr/sbin/policy-rc.d
        remove_policy=1
    else
        rm /usr/sbin/policy-rc.d.vpaweb
        remove_policy=0
    fi
    apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
    [ "$remove_policy" = 1 ] && rm -f /usr/sbin/policy-rc.d
fi
# Debian's client matches its engine (20.10); another `docker` earlier on PATH may not.
DOCKER=/usr/bin/docker
[ -x "$DOCKER" ] || DOCKER="$(command -v docker)"

# --- our own engine -----------------------------------------------------------------
# One run at a time on a machine: engines of their own would still share the docker0
# bridge and its iptables rules.
exec 9>/tmp/vpaweb-test-deploy.lock
if ! flock -n 9; then
    log "another make test-deploy is running: waiting for it"
    flock 9
fi
tmp="$(mktemp -d /tmp/vpaweb-deploy.XXXXXX)"
sock="$tmp/docker.sock"
export DOCKER_HOST="unix://$sock"
project="vpawebtest$$"
dockerd_pid=""

cleanup() {
    status=$?
    set +e
    if [ -n "${services_pid:-}" ] && kill -0 "$services_pid" 2>/dev/null; then
        kill "$services_pid"; wait "$services_pid" 2>/dev/null
    fi
    if [ -n "$dockerd_pid" ] && kill -0 "$dockerd_pid" 2>/dev/null; then
        if [ "$status" != 0 ] && [ -f "$tmp/compose-ready" ]; then
            log "logs of the stack (last 60 lines per service):"
            docker-compose -p "$project" logs --no-color --tail 60 2>&1 | tail -n 400
        fi
        docker-compose -p "$project" down -v --remove-orphans >/dev/null 2>&1
        kill "$dockerd_pid"
        for _ in $(seq 1 30); do kill -0 "$dockerd_pid" 2>/dev/null || break; sleep 1; done
        kill -9 "$dockerd_pid" 2>/dev/null
        wait "$dockerd_pid" 2>/dev/null
    fi
    if [ "$status" != 0 ] && [ -f "$tmp/dockerd.log" ]; then
        log "dockerd log (last 20 lines):"; tail -n 20 "$tmp/dockerd.log"
    fi
    # Mounts the engine may have left (container netns, shm) before removing its files.
    grep " $tmp/" /proc/mounts | cut -d' ' -f2 | sort -r | xargs -r -n1 umount -l 2>/dev/null
    rm -rf "$tmp"
    log "cleaned up (exit $status)"
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# vfs copies every layer in full for each build step and container: in memory that is
# several times faster than on disk, and the teardown is one umount instead of deleting
# gigabytes of files (over 12 GB at the peak with the eight services of the stack).
mkdir -p "$tmp/data"
if mount -t tmpfs -o size="${VPAWEB_DEPLOY_TMPFS_SIZE:-20g}",mode=0700 vpaweb-deploy "$tmp/data"; then
    log "engine data in a tmpfs (${VPAWEB_DEPLOY_TMPFS_SIZE:-20g} at most)"
fi
log "starting dockerd (vfs, under $tmp)"
dockerd --data-root "$tmp/data" --exec-root "$tmp/exec" --host "$DOCKER_HOST" \
    --pidfile "$tmp/dockerd.pid" --storage-driver vfs \
    >"$tmp/dockerd.log" 2>&1 &
dockerd_pid=$!
for _ in $(seq 1 60); do
    "$DOCKER" version >/dev/null 2>&1 && break
    kill -0 "$dockerd_pid" 2>/dev/null || { log "dockerd exited"; exit 1; }
    sleep 1
done
"$DOCKER" version --format 'engine {{.Server.Version}}, client {{.Client.Version}}'

# --- images -------------------------------------------------------------------------
mkdir -p "$cache"
cert="$(pip config list 2>/dev/null | sed -n "s/^global\.cert='\(.*\)'$/\1/p" | head -n 1)"
key="$(cat tools/deploy/base-image.sh tools/deploy/standins/* ${cert:+"$cert"} | sha256sum | cut -c1-16)"
base_tar="$cache/base-$key.tar"
services_tar="$cache/services-$key.tar"
if [ ! -f "$base_tar" ]; then
    log "building the base image with debootstrap (cached in $cache)"
    rm -f "$cache"/base-*.tar "$cache"/services-*.tar
    tools/deploy/base-image.sh base "$base_tar.part"
    mv "$base_tar.part" "$base_tar"
fi
services_pid=""
if [ ! -f "$services_tar" ]; then
    # Meanwhile the vpaweb image builds: the stand-ins need only the base's tarball.
    log "building the postgres/redis stand-ins in the background"
    ( tools/deploy/base-image.sh services "$base_tar" "$services_tar.part" \
        && mv "$services_tar.part" "$services_tar" ) >"$tmp/services.log" 2>&1 &
    services_pid=$!
fi
log "importing python:3.11-slim-bookworm"
path_env='ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'
"$DOCKER" import --change "$path_env" --change 'ENV LANG=C.UTF-8' \
    --change 'CMD ["python3"]' "$base_tar" python:3.11-slim-bookworm >/dev/null

log "building the vpaweb image (Dockerfile unchanged, default base)"
DOCKER_BUILDKIT=1 "$DOCKER" build --progress=plain -t vpaweb:local . >"$tmp/build.log" 2>&1 || {
    tail -n 40 "$tmp/build.log"; exit 1; }
log "image built: $("$DOCKER" image inspect vpaweb:local --format '{{.Size}}' | awk '{printf "%.0f MB", $1/1e6}')"
user="$("$DOCKER" image inspect vpaweb:local --format '{{.Config.User}}')"
[ "$user" = "10001:10001" ] || { log "image runs as '$user', not 10001:10001"; exit 1; }

if [ -n "$services_pid" ]; then
    wait "$services_pid" || { cat "$tmp/services.log"; exit 1; }
fi
log "importing the stand-ins postgres:15-bookworm and redis:7-bookworm"
"$DOCKER" import \
    --change 'ENV PATH=/usr/lib/postgresql/15/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV PGDATA=/var/lib/postgresql/data' --change 'ENV LANG=C.UTF-8' \
    --change 'VOLUME /var/lib/postgresql/data' --change 'EXPOSE 5432' \
    --change 'ENTRYPOINT ["/usr/local/bin/postgres-entrypoint.sh"]' \
    --change 'CMD ["postgres"]' "$services_tar" postgres:15-bookworm >/dev/null
"$DOCKER" import --change "$path_env" --change 'USER redis' --change 'WORKDIR /data' \
    --change 'EXPOSE 6379' --change 'ENTRYPOINT ["/usr/local/bin/redis-entrypoint.sh"]' \
    --change 'CMD ["redis-server"]' "$services_tar" redis:7-bookworm >/dev/null

# --- the stack ----------------------------------------------------------------------
port="$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
password="$("$PY" -c 'import secrets; print(secrets.token_urlsafe(18))')"
"$PY" -c 'import secrets; print(secrets.token_urlsafe(24))' >"$tmp/metrics-token"
workloads=40
cat >"$tmp/test.env" <<ENV
SECRET_KEY=$("$PY" -c 'import secrets; print(secrets.token_urlsafe(50))')
POSTGRES_USER=vpaweb
POSTGRES_PASSWORD=$password
POSTGRES_DB=vpaweb
DATABASE_URL=postgres://vpaweb:$password@postgres:5432/vpaweb
REDIS_URL=redis://redis:6379/0
ALLOWED_HOSTS=127.0.0.1,localhost,web
LOG_LEVEL=INFO
SECURE_SSL_REDIRECT=false
SESSION_COOKIE_SECURE=false
CSRF_COOKIE_SECURE=false
SECURE_HSTS_SECONDS=0
VPAWEB_SIMULATION_WORKLOADS=$workloads
VPAWEB_SIMULATION_HISTORY_DAYS=2
VPAWEB_REFRESH_INTERVAL_S=15
ENV
export VPAWEB_ENV_FILE="$tmp/test.env" VPAWEB_METRICS_TOKEN_FILE="$tmp/metrics-token"
export VPAWEB_PORT="$port" VPAWEB_IMAGE=vpaweb:local
# The webhook profile too (webhook-certs, webhook), for every docker-compose call below.
export COMPOSE_PROFILES=webhook

docker-compose -p "$project" config -q
touch "$tmp/compose-ready"
log "docker-compose up (postgres, redis, migrate, web, worker, beat, webhook-certs, webhook) on 127.0.0.1:$port"
docker-compose -p "$project" up -d --no-build
web="$(docker-compose -p "$project" ps -q web)"
for _ in $(seq 1 90); do
    health="$("$DOCKER" inspect --format '{{.State.Health.Status}}' "$web")"
    [ "$health" = healthy ] && break
    [ "$health" = unhealthy ] && { log "web is unhealthy"; exit 1; }
    sleep 2
done
[ "$health" = healthy ] || { log "web not healthy in 180 s ($health)"; exit 1; }
log "web is healthy"
migrate="$(docker-compose -p "$project" ps -q migrate)"
[ "$("$DOCKER" inspect --format '{{.State.ExitCode}}' "$migrate")" = 0 ]

# The final image has no compiler (checked in the running web container: with vfs a
# `docker run` of its own would copy the whole image once more).
if docker-compose -p "$project" exec -T web sh -c 'command -v gcc cc g++ make'; then
    log "the final image has a compiler"; exit 1
fi
admin="$(docker-compose -p "$project" exec -T web cat /var/lib/vpaweb/demo-admin-password.txt | tr -d '\r\n')"
"$PY" tools/deploy/check_stack.py "http://127.0.0.1:$port" "$admin" "$(cat "$tmp/metrics-token")" "$workloads"

# Through Redis: the worker received and ran the beat's refresh tasks.
worker_log="$(docker-compose -p "$project" logs --no-color worker)"
grep -q "recommender.tasks.refresh_all_clusters\[.*\] succeeded" <<<"$worker_log" || {
    log "the worker's log shows no succeeded refresh_all_clusters task"; exit 1; }
grep -q "Task recommender.tasks.refresh_cluster\[.*\] succeeded" <<<"$worker_log" || {
    log "the worker's log shows no succeeded refresh_cluster task"; exit 1; }
grep -Eq "Connected to redis://(:\*\*@)?redis:6379/0" <<<"$worker_log" || {
    log "the worker is not connected to Redis"; exit 1; }
worker="$(docker-compose -p "$project" ps -q worker)"
for _ in $(seq 1 30); do
    health="$("$DOCKER" inspect --format '{{.State.Health.Status}}' "$worker")"
    [ "$health" = healthy ] && break
    sleep 2
done
[ "$health" = healthy ] || { log "worker health: $health"; exit 1; }
worker_metrics="$(docker-compose -p "$project" exec -T web python3 -c \
    'import urllib.request; print(urllib.request.urlopen("http://worker:9808/metrics", timeout=10).read().decode())')"
grep -E '^vpaweb_refresh_runs_total\{kind="refresh",outcome="succeeded"\} [1-9]' <<<"$worker_metrics" || {
    log "the worker's metrics port shows no succeeded refresh run:"; head -c 3000 <<<"$worker_metrics"; exit 1; }
log "worker is healthy, ran the refresh through Redis and counts it on its metrics port"

# The admission webhook: a recorded kube-apiserver AdmissionReview over TLS from the web
# container to https://webhook:8443, trusting only the CA `webhook certs` made.
webhook="$(docker-compose -p "$project" ps -q webhook)"
for _ in $(seq 1 60); do
    health="$("$DOCKER" inspect --format '{{.State.Health.Status}}' "$webhook")"
    [ "$health" = healthy ] && break
    [ "$health" = unhealthy ] && break
    sleep 2
done
[ "$health" = healthy ] || { log "webhook health: $health"; exit 1; }
certs="$(docker-compose -p "$project" ps -q webhook-certs)"
[ "$("$DOCKER" inspect --format '{{.State.ExitCode}}' "$certs")" = 0 ]
ca="$(docker-compose -p "$project" exec -T webhook cat /var/lib/vpaweb-webhook/ca.crt)"
docker-compose -p "$project" exec -T web python3 -c "$(cat tools/deploy/check_webhook.py)" \
    webhook "$ca" "$(cat "$tmp/metrics-token")" \
    <tools/deploy/a-replicaset-pod.admissionreview.json
log "webhook is healthy and answered the recorded AdmissionReview over TLS"

log "docker-compose down"
docker-compose -p "$project" down -v --remove-orphans >/dev/null 2>&1
log "passed"
