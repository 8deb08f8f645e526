"""One updater cycle over 10,000 pods in 2,000 workloads.

python -m benchmarks.bench_updater    (or: make bench BENCH=updater)"""
# Seeds a scratch database (SQLite in a temporary VPAWEB_VAR_DIR, or, with DATABASE_URL,
# a scratch PostgreSQL database dropped afterwards) with BENCH_WORKLOADS workloads
# (default 2,000) of one or two containers and BENCH_PODS_PER_WORKLOAD pods each
# (default 5), modes mixed (40 % Recreate, 40 % InPlaceOrRecreate, 20 % Off), and
# recommendations such that 30 % of the pods are outside their recommended bounds. Then
# times ``run_cycle`` with the cluster's pods given as a discovery snapshot (discovery
# itself is the refresh's cost, measured by the back-fill benchmark):
#
# - the first cycle, which decides every pod and writes the proposals (one change and
#   one audit event per pod needing a change);
# - a second cycle, where every proposal is kept (the steady state);
#
# with the query count of each, at full size and at a fifth of the pods, to show the
# count does not grow with the pods. Target: 2 s per cycle.

from __future__ import annotations

import os
import shutil
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from benchmarks.bench_backfill import _scratch_database

TARGET_S = 2.0
MI = 2**20
NOW = datetime(2026, 11, 24, 6, 0, tzinfo=UTC)


def _seed(cluster, workload_count: int):
    """Workloads, policies, containers and recommendations; returns the workloads."""
    from recommender.models import Container, Policy, Recommendation, Workload

    modes = ["Recreate", "InPlaceOrRecreate", "Recreate", "InPlaceOrRecreate", "Off"]
    workloads = Workload.objects.bulk_create(
        [
            Workload(
                cluster=cluster,
                kind="Deployment",
                namespace=f"team-{i % 40}",
                name=f"service-{i:05d}",
                replicas=5,
            )
            for i in range(workload_count)
        ],
        batch_size=2000,
    )
    Policy.objects.bulk_create(
        [Policy(workload=w, mode=modes[i % 5]) for i, w in enumerate(workloads)],
        batch_size=2000,
    )
    containers = Container.objects.bulk_create(
        [
            Container(
                workload=w,
                name=name,
                position=position,
                request_cpu_millicores=500,
                request_memory_bytes=512 * MI,
            )
            for i, w in enumerate(workloads)
            for position, name in enumerate(["app", "sidecar"][: 1 + i % 2])
        ],
        batch_size=2000,
    )
    recommendations = []
    for c in containers:
        index = int(c.workload.name.split("-")[1])
        # 30 % of the workloads (i % 10 in 0..2, never an Off one) are far off.
        cpu = 200 if index % 10 < 3 else 480
        recommendations.append(
            Recommendation(
                container=c,
                created_at=NOW - timedelta(hours=1),
                target_cpu_millicores=cpu,
                target_memory_bytes=500 * MI,
                lower_cpu_millicores=int(cpu * 0.8),
                lower_memory_bytes=400 * MI,
                upper_cpu_millicores=int(cpu * 1.2),
                upper_memory_bytes=600 * MI,
                uncapped_cpu_millicores=cpu,
                uncapped_memory_bytes=500 * MI,
                # 8 days of history: past VPAWEB_MIN_HISTORY_HOURS, so acted on
                # (bulk_create skips the save() that derives it from an explanation).
                confidence=8.0,
            )
        )
    recommendations = Recommendation.objects.bulk_create(
        recommendations, batch_size=2000
    )
    for c, rec in zip(containers, recommendations, strict=True):
        c.latest_recommendation = rec
    Container.objects.bulk_update(
        containers, ["latest_recommendation"], batch_size=2000
    )
    return workloads


def _snapshot(workloads, pods_per_workload: int):
    """The pods discovery would report: young-enough pods, 500m / 512Mi each."""
    from recommender.cluster.base import (
        ClusterSnapshot,
        ContainerSpec,
        PodInfo,
        WorkloadInfo,
    )
    from recommender.engine.resources import Resources

    infos = []
    for i, w in enumerate(workloads):
        names = ["app", "sidecar"][: 1 + i % 2]
        specs = tuple(
            ContainerSpec(n, requests=Resources(500, 512 * MI)) for n in names
        )
        rs = f"{w.name}-6b9c8d7f5"
        pods = tuple(
            PodInfo(
                namespace=w.namespace,
                name=f"{rs}-p{j}",
                phase="Running",
                containers=specs,
                start_time=NOW - timedelta(hours=2),
                uid=f"{w.name}-{j}",
                owner_kind="ReplicaSet",
                owner_name=rs,
            )
            for j in range(pods_per_workload)
        )
        infos.append(
            WorkloadInfo(
                kind="Deployment",
                namespace=w.namespace,
                name=w.name,
                containers=specs,
                replicas=pods_per_workload,
                pods=pods,
            )
        )
    return ClusterSnapshot(workloads=tuple(infos))


def _cycle(cluster, snapshot, now):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from recommender.services.actuation.cycle import run_cycle

    with CaptureQueriesContext(connection) as queries:
        started = time.perf_counter()
        report = run_cycle(cluster, now=now, snapshot=snapshot, holder="bench")
        elapsed = time.perf_counter() - started
    return report, elapsed, len(queries.captured_queries)


def _run(database: str, workload_count: int, pods_per_workload: int) -> None:
    import django

    django.setup()
    from django.core.management import call_command

    # Imported before timing: a worker has its modules loaded when a cycle starts.
    import recommender.services.actuation.cycle  # noqa: F401
    from recommender.models import Cluster, ResizeChange

    call_command("migrate", verbosity=0, interactive=False)
    print(f"database: {database}")
    for fraction in (5, 1):
        count = workload_count // fraction
        cluster = Cluster.objects.create(
            name=f"bench-{fraction}", kind="simulated", actuation_allowed=True
        )
        workloads = _seed(cluster, count)
        snapshot = _snapshot(workloads, pods_per_workload)
        pods = count * pods_per_workload
        first, first_s, first_q = _cycle(cluster, snapshot, NOW)
        second, second_s, second_q = _cycle(
            cluster, snapshot, NOW + timedelta(minutes=1)
        )
        stored = ResizeChange.objects.filter(workload__cluster=cluster).count()
        print(
            f"{pods:>6} pods / {count:>5} workloads: first cycle {first_s:.2f} s, "
            f"{first_q} queries, {first.proposed} proposals ({stored} stored, "
            f"{100 * first.proposed / pods:.0f} % of pods); steady cycle "
            f"{second_s:.2f} s, {second_q} queries, {second.proposed} new"
        )
        if fraction == 1:
            worst = max(first_s, second_s)
            verdict = "within" if worst <= TARGET_S else "OVER"
            print(f"slowest cycle {worst:.2f} s: {verdict} the {TARGET_S:g} s target")


def main() -> None:
    os.environ.setdefault("SECRET_KEY", "bench-only")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "vpaweb.settings")
    workload_count = int(os.environ.get("BENCH_WORKLOADS", "2000"))
    pods_per_workload = int(os.environ.get("BENCH_PODS_PER_WORKLOAD", "5"))
    scratch = Path(tempfile.mkdtemp(prefix="vpaweb-bench-updater-"))
    try:
        with _scratch_database(scratch) as database:
            _run(database, workload_count, pods_per_workload)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
