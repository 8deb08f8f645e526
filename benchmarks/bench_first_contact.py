"""First contact spread over Celery workers: one simulated cluster's first contact with
1 and with 4 worker processes, on PostgreSQL and Redis.

    DATABASE_URL=postgres://.../scratch REDIS_URL=redis://.../N \\
        python -m benchmarks first_contact"""
# The database must be a scratch one (the bench deletes every cluster in it), and the
# Redis database one no other worker uses (the worker consumes its ``celery`` queue).
# Each run starts from that database vacuumed and analysed (``VACUUM ANALYZE`` after
# the delete), as a fresh one would be.
# Per worker count (BENCH_FC_WORKERS, default "1,4"), a ``celery worker --concurrency
# N`` (prefork: N processes) is started, a simulated cluster of BENCH_FC_CONTAINERS
# containers (default 12,000; about 1.5 containers a workload) with BENCH_FC_HISTORY_H
# hours of history (default 24) is created, and its refresh task is queued, as beat's
# fan-out would: the whole-cluster pass stores discovery and queues one task per
# namespace for the first contact (docs/refresh.md, "First contact in parallel").
# Prints, per count: the time from the whole-cluster run's start to the last shard's end
# (the runs' own timestamps, so the workers' start-up is not counted), to the first
# shard's start (the serial part), the whole pass's time, each shard's time, and the
# load average (1 min) at the start and end. Target at 100,000 containers: <= 120 s
# with 4 processes.

from __future__ import annotations

import os
import subprocess
import sys
import time
from typing import Any

NOW = "2026-11-21T12:00:00+00:00"
CONTAINERS_PER_WORKLOAD = 1835 / 1200  # the simulated fleet's mix


def _setup() -> None:
    os.environ.setdefault("SECRET_KEY", "bench-only")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "vpaweb.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0, interactive=False)


def _start_worker(processes: int, env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "vpaweb",
            "worker",
            "--concurrency",
            str(processes),
            "--queues",
            "celery",
            "--loglevel",
            "WARNING",
            "--without-heartbeat",
            "--without-gossip",
            "--without-mingle",
        ],
        env={**os.environ, **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )


def run(processes: int, containers: int, history_h: float) -> dict[str, Any]:
    """One first contact with ``processes`` worker processes: its figures."""
    from celery.result import AsyncResult
    from django.db import connection

    from recommender.models import Cluster, RefreshRun
    from recommender.tasks import refresh_cluster

    workloads = max(1, round(containers / CONTAINERS_PER_WORKLOAD))
    Cluster.objects.all().delete()
    # As a fresh database: without the rows the delete leaves dead (a server with
    # autovacuum off keeps them, and its planner without statistics scans them).
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")
    cluster = Cluster.objects.create(
        name=f"first-contact-{processes}", kind="simulated"
    )
    worker = _start_worker(
        processes,
        {
            "VPAWEB_SIMULATION_WORKLOADS": str(workloads),
            "VPAWEB_SIMULATION_HISTORY_DAYS": str(history_h / 24),
        },
    )
    load = [os.getloadavg()[0]]
    try:
        whole = refresh_cluster.delay(cluster.pk, NOW).get(timeout=3600)
        shards = [
            AsyncResult(task_id).get(timeout=7200)
            for _, task_id in whole["first_contact_shards"]
        ]
    finally:
        load.append(os.getloadavg()[0])
        worker.terminate()
        worker.wait(timeout=120)
    if whole["status"] != "succeeded" or any(
        s["status"] != "succeeded" for s in shards
    ):
        raise SystemExit("a refresh failed")
    runs = list(RefreshRun.objects.filter(cluster=cluster).order_by("started_at"))
    began = runs[0].started_at
    ended = max(run.finished_at for run in runs if run.finished_at)
    return {
        "processes": processes,
        "containers": sum(r.counts.get("containers", 0) for r in runs),
        "wall_s": (ended - began).total_seconds(),
        "whole_s": (runs[0].finished_at - began).total_seconds(),
        # The serial part: until the first shard task started.
        "serial_s": min(
            ((r.started_at - began).total_seconds() for r in runs if r.shard),
            default=0.0,
        ),
        "shards": [
            (r.shard, (r.finished_at - r.started_at).total_seconds())
            for r in runs
            if r.shard
        ],
        "load": load,
    }


def main() -> None:
    """Each worker count in turn; then the table."""
    if not os.environ.get("DATABASE_URL", "").startswith("postgres") or not (
        os.environ.get("REDIS_URL")
    ):
        print(
            "first_contact: skipped, it needs DATABASE_URL (PostgreSQL) and REDIS_URL"
        )
        return
    _setup()
    containers = int(os.environ.get("BENCH_FC_CONTAINERS", "12000"))
    history_h = float(os.environ.get("BENCH_FC_HISTORY_H", "24"))
    counts = [int(n) for n in os.environ.get("BENCH_FC_WORKERS", "1,4").split(",")]
    rows = []
    for processes in counts:
        print(f"--- {processes} worker process(es)", flush=True)
        started = time.perf_counter()
        row = run(processes, containers, history_h)
        print(
            f"{processes} process(es): {row['wall_s']:.1f} s (bench wall"
            f" {time.perf_counter() - started:.1f} s); shards: "
            + ", ".join(f"{ns} {s:.1f} s" for ns, s in row["shards"]),
            flush=True,
        )
        rows.append(row)
    print(
        "| worker processes | containers | history | first contact"
        " | first shard started after | whole-cluster pass | longest shard"
        " | load (1 min) start / end |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['processes']} | {r['containers']:,} | {history_h:g} h"
            f" | {r['wall_s']:.1f} s | {r['serial_s']:.1f} s | {r['whole_s']:.1f} s"
            f" | {max((s for _, s in r['shards']), default=0.0):.1f} s"
            f" | {r['load'][0]:.1f} / {r['load'][1]:.1f} |"
        )


if __name__ == "__main__":
    main()
