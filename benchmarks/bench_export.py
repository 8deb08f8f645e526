"""The recommendation export at 100,000 containers under the production server.

DATABASE_URL=postgres://.../scratch python -m benchmarks export"""
# The DATABASE_URL database must be a scratch one (PostgreSQL): the bench deletes every
# cluster in it first. It writes a fleet of BENCH_EXPORT_CONTAINERS containers (default
# 100,000; the simulation's mix, about 1.5 a workload, in 200 namespaces), each with a
# latest recommendation carrying a real refresh's explanation, stores the totals a
# refresh would (``namespace_totals.store``; a fleet of the same size an earlier run
# wrote is used again; every column the bench does not generate at its model's default,
# ``rows.insert_select``), then starts gunicorn with the production
# configuration (vpaweb/gunicorn_conf.py: sync workers, GUNICORN_TIMEOUT, the request
# deadline below it) and one worker, and asks it for the whole export as CSV, JSON and
# YAML, and for one namespace's. Prints per request the status, time to the first
# byte, total time and bytes, and the worker's peak RSS (VmHWM of the whole process,
# what ``time -v`` reports as its maximum resident set) after it, with the load.

from __future__ import annotations

import http.client
import os
import signal
import socket
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from benchmarks.bench_retention import real_row, setup_scratch_postgres

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
CONTAINERS_PER_WORKLOAD = 1835 / 1200  # the simulated fleet's mix
ROOT = Path(__file__).resolve().parents[1]


def _fleet(containers: int) -> int:
    """The cluster, its workloads, containers and their latest recommendations,
    written by the server; returns the workload count."""
    from django.db import connection

    from benchmarks.rows import insert_select
    from recommender.models import (
        Cluster,
        Container,
        Policy,
        Recommendation,
        Workload,
    )
    from recommender.services.readmodels import namespace_totals

    existing = Cluster.objects.filter(name="export-bench").first()
    if existing is not None and existing.workloads.count() == round(
        containers / CONTAINERS_PER_WORKLOAD
    ):
        return existing.workloads.count()  # an earlier run's fleet, as it was written
    Cluster.objects.all().delete()
    explanation, confidence = real_row()
    cluster = Cluster.objects.create(name="export-bench", kind="simulated")
    workloads = max(1, round(containers / CONTAINERS_PER_WORKLOAD))
    insert_select(
        Workload,
        {
            "cluster_id": "%s",
            "kind": "'Deployment'",
            "namespace": "'ns-' || (i %% 200)",
            "name": "'w-' || i",
            "replicas": "3",
            "is_active": "true",
            "first_seen_at": "%s",
            "last_seen_at": "%s",
        },
        "FROM generate_series(0, %s - 1) i",
        [cluster.pk, NOW, NOW, workloads],
    )
    insert_select(
        Policy,
        {"workload_id": "id", "updated_at": "%s"},
        "FROM recommender_workload WHERE cluster_id = %s",
        [NOW, cluster.pk],
    )
    insert_select(
        Container,
        {
            "workload_id": "w.id",
            "name": "'c' || k",
            "kind": "'regular'",
            "position": "k",
            "request_cpu_millicores": "500",
            "request_memory_bytes": "536870912",
            "limit_cpu_millicores": "1000",
            "limit_memory_bytes": "1073741824",
        },
        "FROM (SELECT id, row_number() OVER (ORDER BY id) - 1 AS n "
        "FROM recommender_workload WHERE cluster_id = %s) w "
        "CROSS JOIN generate_series(0, 1) k WHERE k = 0 OR w.n < %s - %s",
        [cluster.pk, containers, workloads],
    )
    insert_select(
        Recommendation,
        {
            "container_id": "c.id",
            "created_at": "%s",
            "profile": "'vpa'",
            "target_cpu_millicores": "t.cpu",
            "target_memory_bytes": "t.mem",
            "lower_cpu_millicores": "t.cpu * 8 / 10",
            "lower_memory_bytes": "t.mem * 8 / 10",
            "upper_cpu_millicores": "t.cpu * 2",
            "upper_memory_bytes": "t.mem * 2",
            "uncapped_cpu_millicores": "t.cpu",
            "uncapped_memory_bytes": "t.mem",
            "explanation": "%s::jsonb",
            "floor_cpu_millicores": "t.cpu * 7 / 10",
            "floor_memory_bytes": "t.mem * 7 / 10",
            "confidence": "%s",
        },
        "FROM recommender_container c "
        "JOIN recommender_workload w ON w.id = c.workload_id AND w.cluster_id = %s "
        "CROSS JOIN LATERAL (SELECT 10 + (random() * 900 + c.id * 0)::bigint "
        "AS cpu, 16777216 + (random() * 1e9 + c.id * 0)::bigint AS mem) t",
        [NOW, explanation, confidence, cluster.pk],
    )
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE recommender_container c SET latest_recommendation_id = r.id "
            "FROM recommender_recommendation r WHERE r.container_id = c.id"
        )
        cursor.execute("VACUUM ANALYZE")
    namespace_totals.store(cluster=cluster, now=NOW)
    return workloads


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _peak_rss_mib(pid: int) -> float:
    """VmHWM: the process's peak resident set (all of it, shared pages included)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _worker_pid(master: int) -> int:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        children = Path(f"/proc/{master}/task/{master}/children").read_text().split()
        if children:
            return int(children[0])
        time.sleep(0.2)
    raise SystemExit("gunicorn started no worker")


def _get(port: int, path: str, key: str) -> tuple[int, float, float, int]:
    """Status, seconds to the first body byte, seconds in all, body bytes."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    started = time.perf_counter()
    connection.request("GET", path, headers={"Authorization": f"Bearer {key}"})
    response = connection.getresponse()
    first = response.read(1)
    ttfb = time.perf_counter() - started
    size = len(first)
    try:
        while chunk := response.read(1 << 16):
            size += len(chunk)
    except (http.client.IncompleteRead, ConnectionError) as exc:
        print(f"  the answer broke off after {size} bytes: {exc!r}")
    total = time.perf_counter() - started
    connection.close()
    return response.status, ttfb, total, size


def main() -> None:
    """Write the fleet, serve it with gunicorn, time the exports."""
    if not setup_scratch_postgres("export"):
        return
    from django.utils import timezone

    from recommender.services.access.tokens import create_token

    containers = int(os.environ.get("BENCH_EXPORT_CONTAINERS", "100000"))
    tick = time.perf_counter()
    workloads = _fleet(containers)
    print(
        f"{workloads} workloads, {containers} containers written in "
        f"{time.perf_counter() - tick:.0f} s",
        flush=True,
    )
    _, key = create_token(
        name=f"bench-export-{os.getpid()}",
        scope="read",
        created_by=None,
        now=timezone.now(),
    )
    port = _free_port()
    env = {
        **os.environ,
        "GUNICORN_BIND": f"127.0.0.1:{port}",
        "WEB_CONCURRENCY": "1",
        "ALLOWED_HOSTS": "127.0.0.1",
        "LOG_LEVEL": "warning",
    }
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gunicorn",
            "-c",
            str(ROOT / "vpaweb" / "gunicorn_conf.py"),
            "vpaweb.wsgi:application",
        ],
        cwd=ROOT,
        env=env,
        start_new_session=True,
    )
    try:
        worker = _worker_pid(server.pid)
        print(
            f"gunicorn (vpaweb/gunicorn_conf.py, 1 sync worker, timeout "
            f"{env.get('GUNICORN_TIMEOUT', '30')} s, request deadline "
            f"{env.get('VPAWEB_REQUEST_DEADLINE_S', 'timeout - 5 s')}); worker "
            f"peak RSS at start {_peak_rss_mib(worker):.0f} MiB",
            flush=True,
        )
        print(
            f"{'export':<28} {'status':>6} {'first byte s':>12} {'total s':>8} "
            f"{'MB':>7} {'worker peak MiB':>15} {'load':>5}",
            flush=True,
        )
        for label, path in [
            ("csv, one namespace", "?format=csv&namespace=ns-7"),
            ("csv", "?format=csv"),
            ("json", "?format=json"),
            ("yaml", "?format=yaml"),
            ("json page (limit 1000)", "?format=json&limit=1000&offset=5000"),
        ]:
            status, ttfb, total, size = _get(
                port, f"/api/v1/recommendations/export{path}", key
            )
            try:
                peak = f"{_peak_rss_mib(worker):.0f}"
            except FileNotFoundError:
                peak = "nan"
            if peak == "nan":  # the worker was killed (gunicorn's timeout)
                peak = "killed"
                time.sleep(2)
                worker = _worker_pid(server.pid)
            print(
                f"{label:<28} {status:>6} {ttfb:>12.2f} {total:>8.1f} "
                f"{size / 1e6:>7.1f} {peak:>15} {os.getloadavg()[0]:>5.2f}",
                flush=True,
            )
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=60)
