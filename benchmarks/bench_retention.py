"""Retention: the database size over simulated days at 12,000 workloads, to the plateau.

DATABASE_URL=postgres://.../scratch python -m benchmarks retention"""
# The DATABASE_URL database must be a scratch one (PostgreSQL): the bench deletes every
# cluster in it first. A fleet of BENCH_RETENTION_WORKLOADS workloads (default 12,000;
# the simulation's mix, about 1.5 containers each) is written directly, then each
# simulated hour of BENCH_RETENTION_DAYS days (default: the recommendations' retention
# and 3 days more, 93 with the default settings) adds the history a fleet of
# that size writes in an hour, and the hourly prune run
# (services/operations/retention.py, the settings in force) follows it:
#
# - recommendation rows: 0.65 % of the containers a minute (what a settled fleet's
#   refresh cycles store), each with the explanation of a real refresh's row;
# - refresh runs: one per namespace shard a minute (BENCH_RETENTION_SHARDS, 20);
# - the webhook's admission counters: three outcomes a minute;
# - OOM kills (0.5 % of the containers a day) and audit events (500 a day).
#
# Each simulated day ends with a VACUUM ANALYZE of the tables (what autovacuum does;
# the output says whether the server's is on), then prints the database size, the
# recommendation table's rows and size, and how long that day's prune runs took in
# all (and the longest). With the defaults the recommendation history stops growing
# by a day's detail once it is 14 days old (thinned to a row per container and day)
# and every other history is flat by day 30; the recommendation table stops growing
# once its oldest rows go (day 91 with the defaults); the closing line projects that
# plateau.

from __future__ import annotations

import json
import os
import random
import time
from datetime import UTC, datetime, timedelta

NOW = datetime(2026, 11, 21, 0, 0, tzinfo=UTC)
CONTAINERS_PER_WORKLOAD = 1835 / 1200  # the simulated fleet's mix
CHANGE_PER_MINUTE = 0.0065  # of the containers: a settled fleet
OOM_PER_DAY = 0.005  # of the containers
AUDIT_PER_DAY = 500
INSERT_BATCH = 5000


def setup_scratch_postgres(bench: str) -> bool:
    """Django on the DATABASE_URL scratch PostgreSQL database, migrated, with the
    app's logging at warnings (a line per run would bury the figures); False (and
    a line saying so) without a PostgreSQL DATABASE_URL."""
    os.environ.setdefault("SECRET_KEY", "bench-only")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "vpaweb.settings")
    if not os.environ.get("DATABASE_URL", "").startswith("postgres"):
        print(f"{bench}: skipped, it needs DATABASE_URL of a scratch PostgreSQL db")
        return False
    import logging

    import django

    django.setup()
    logging.getLogger("recommender").setLevel(logging.WARNING)
    from django.core.management import call_command

    call_command("migrate", verbosity=0, interactive=False)
    return True


def real_row() -> tuple[str, float | None]:
    """The explanation (as JSON) and confidence of a row a real refresh stored (a
    small simulated cluster)."""
    from django.test import override_settings

    from recommender.models import Cluster, Recommendation
    from recommender.services.refresh.cycle import refresh_cluster

    with override_settings(SIMULATION_WORKLOADS=2, SIMULATION_HISTORY_DAYS=1.0):
        sample = Cluster.objects.create(name="retention-sample", kind="simulated")
        refresh_cluster(cluster_id=sample.pk, now=NOW)
    row = Recommendation.objects.filter(container__workload__cluster=sample).first()
    assert row is not None
    found = (json.dumps(row.explanation), row.confidence)
    sample.delete()
    return found


def _fleet(workloads: int) -> tuple[int, list[int]]:
    """The cluster, its workloads and containers, written directly; container ids."""
    from recommender.models import Cluster, Container, Workload

    cluster = Cluster.objects.create(
        name="retention-bench", kind="simulated", is_enabled=False
    )
    Workload.objects.bulk_create(
        [
            Workload(
                cluster=cluster,
                kind="Deployment",
                namespace=f"ns-{i % 200}",
                name=f"w-{i}",
                first_seen_at=NOW,
                last_seen_at=NOW,
            )
            for i in range(workloads)
        ],
        batch_size=INSERT_BATCH,
    )
    ids = list(Workload.objects.filter(cluster=cluster).values_list("pk", flat=True))
    total = round(workloads * CONTAINERS_PER_WORKLOAD)
    containers = [
        Container(workload_id=ids[i % len(ids)], name=f"c{i // len(ids)}")
        for i in range(total)
    ]
    Container.objects.bulk_create(containers, batch_size=INSERT_BATCH)
    return cluster.pk, list(
        Container.objects.filter(workload__cluster=cluster).values_list("pk", flat=True)
    )


def _hour(
    start: datetime, cluster_id: int, template: tuple[str, float | None], shards: int
) -> None:
    """Write one hour of history starting at ``start``, generated by the server
    (a statement per history: the bench measures the database, not Python)."""
    from benchmarks.rows import insert_select
    from recommender.models import AdmissionCount, Recommendation, RefreshRun

    # 0.65 % of the containers a minute, at random minutes of the hour, each row with
    # the real row's explanation and its kept columns.
    insert_select(
        Recommendation,
        {
            "container_id": "c.id",
            "created_at": "%s + m * interval '1 minute'",
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
        "FROM recommender_container c JOIN recommender_workload w "
        "ON w.id = c.workload_id AND w.cluster_id = %s "
        "CROSS JOIN generate_series(0, 59) m "
        "CROSS JOIN LATERAL (SELECT 10 + (random() * 4000)::bigint AS cpu, "
        "16777216 + (random() * 4e9)::bigint AS mem) t "
        "WHERE random() < %s",
        [start, *template, cluster_id, CHANGE_PER_MINUTE],
    )
    insert_select(
        RefreshRun,
        {
            "kind": "'refresh'",
            "shard": "'ns-' || s",
            "status": "'succeeded'",
            "started_at": "%s + m * interval '1 minute'",
            "finished_at": "%s + m * interval '1 minute' + interval '3 seconds'",
            "progress": "1.0",
            "counts": '\'{"containers": 900, "samples": 1000}\'::jsonb',
            "timings": '\'{"discover_s": 0.4, "ingest_s": 1.1, '
            '"total_s": 3.0}\'::jsonb',
        },
        "FROM generate_series(0, 59) m CROSS JOIN generate_series(1, %s) s",
        [start, start, shards],
    )
    insert_select(
        AdmissionCount,
        {
            "cluster_name": "'retention-bench'",
            "minute": "%s + m * interval '1 minute'",
            "outcome": "o",
            "count": "1 + (random() * 50)::int",
        },
        "FROM generate_series(0, 59) m CROSS JOIN unnest(%s::text[]) o",
        [start, ["patched", "left_alone", "failed_open"]],
    )


def _day_extras(day: datetime, containers: list[int], rng: random.Random) -> None:
    """A day's OOM kills and audit events, and each container's latest pointer."""
    from django.db import connection

    from recommender.models import AuditEvent, OomKill

    OomKill.objects.bulk_create(
        [
            OomKill(
                container_id=container_id,
                pod=f"p-{container_id}-{day:%j}",
                occurred_at=day + timedelta(seconds=rng.randrange(86400)),
            )
            for container_id in rng.sample(
                containers, max(1, round(len(containers) * OOM_PER_DAY))
            )
        ],
        batch_size=INSERT_BATCH,
    )
    AuditEvent.objects.bulk_create(
        [
            AuditEvent(
                action="change.propose",
                created_at=day + timedelta(seconds=rng.randrange(86400)),
                message="proposed a resize",
                after={"cpu": 100, "memory": 2**28},
            )
            for _ in range(AUDIT_PER_DAY)
        ]
    )
    # What the refresh keeps: each container's newest row is its latest.
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE recommender_container c SET latest_recommendation_id = r.id "
            "FROM (SELECT DISTINCT ON (container_id) container_id, id "
            "FROM recommender_recommendation WHERE created_at >= %s "
            "ORDER BY container_id, created_at DESC, id DESC) r "
            "WHERE c.id = r.container_id",
            [day],
        )


def _sizes() -> tuple[int, int, int]:
    """Database bytes, recommendation rows (estimate) and bytes."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_database_size(current_database())")
        database = cursor.fetchone()[0]
        cursor.execute(
            "SELECT reltuples::bigint, pg_total_relation_size(oid) FROM pg_class "
            "WHERE relname = 'recommender_recommendation'"
        )
        rows, table = cursor.fetchone()
    return database, rows, table


def main() -> None:
    """Simulate the days, printing a line per day."""
    if not setup_scratch_postgres("retention"):
        return
    from django.conf import settings
    from django.db import connection

    from recommender.models import AdmissionCount, AuditEvent, Cluster, RefreshRun
    from recommender.services.operations.retention import prune_history

    workloads = int(os.environ.get("BENCH_RETENTION_WORKLOADS", "12000"))
    # By default past the longest retention, by a few days: the plateau.
    days = int(
        os.environ.get(
            "BENCH_RETENTION_DAYS", str(settings.RETENTION_RECOMMENDATION_DAYS + 3)
        )
    )
    shards = int(os.environ.get("BENCH_RETENTION_SHARDS", "20"))
    rng = random.Random(7)
    for model in (Cluster, RefreshRun, AdmissionCount, AuditEvent):
        model.objects.all().delete()
    with connection.cursor() as cursor:
        cursor.execute("SHOW autovacuum")
        autovacuum = cursor.fetchone()[0]
        cursor.execute("VACUUM")
    template = real_row()
    cluster_id, containers = _fleet(workloads)
    print(
        f"{workloads} workloads, {len(containers)} containers; "
        f"{round(len(containers) * CHANGE_PER_MINUTE) * 1440} recommendation rows "
        f"a day; {shards} refresh runs a minute; retention: recommendations "
        f"{settings.RETENTION_RECOMMENDATION_DAYS} d (daily after "
        f"{settings.RETENTION_RECOMMENDATION_DETAIL_DAYS} d), runs "
        f"{settings.RETENTION_RUN_DAYS} d, admission counters "
        f"{settings.RETENTION_ADMISSION_COUNT_DAYS} d, OOM kills "
        f"{settings.RETENTION_OOM_KILL_DAYS} d; server autovacuum {autovacuum} "
        f"(VACUUM ANALYZE after each day); load at start {os.getloadavg()[0]:.2f}",
        flush=True,
    )
    print(
        f"{'day':>4} {'database MB':>12} {'rec rows':>10} {'rec MB':>8} "
        f"{'prune s':>8} {'max run s':>9} {'thinned':>8} {'runs gone':>9} {'load':>5}",
        flush=True,
    )
    start = NOW - timedelta(days=days)
    thinned_per_day: list[int] = []
    for day in range(days):
        day_start = start + timedelta(days=day)
        prune_s, longest, thinned, runs_gone = 0.0, 0.0, 0, 0
        for hour in range(24):
            at = day_start + timedelta(hours=hour)
            _hour(at, cluster_id, template, shards)
            if hour == 23:
                _day_extras(day_start, containers, rng)
            tick = time.perf_counter()
            run = prune_history(now=at + timedelta(hours=1))
            took = time.perf_counter() - tick
            prune_s, longest = prune_s + took, max(longest, took)
            thinned += int(run.counts.get("recommendations_thinned", 0))
            runs_gone += int(run.counts.get("runs", 0))
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE")
        database, rows, table = _sizes()
        thinned_per_day.append(thinned)
        print(
            f"{day + 1:>4} {database / 2**20:>12.0f} {rows:>10} {table / 2**20:>8.0f} "
            f"{prune_s:>8.1f} {longest:>9.2f} {thinned:>8} {runs_gone:>9} "
            f"{os.getloadavg()[0]:>5.2f}",
            flush=True,
        )
    detail = settings.RETENTION_RECOMMENDATION_DETAIL_DAYS
    keep = settings.RETENTION_RECOMMENDATION_DAYS
    per_day = round(len(containers) * CHANGE_PER_MINUTE) * 1440
    kept_per_day = per_day - (thinned_per_day[-1] if days > detail else 0)
    print(
        f"plateau of the recommendation table at {keep} days: about "
        f"{detail * per_day + (keep - detail) * kept_per_day} rows ({detail} days of "
        f"{per_day} and {keep - detail} of {kept_per_day} a day)"
    )
