"""Server time of the dashboard's heavy pages with 10,000 workloads.

python -m benchmarks.bench_dashboard    (or: python -m benchmarks dashboard)"""
# Seeds a throw-away database (SQLite in a temporary VPAWEB_VAR_DIR, or PostgreSQL when
# DATABASE_URL is set; the tables are created by migrate) with BENCH_WORKLOADS workloads
# (default 10,000) of one to three containers, a recommendation history, OOM kills and
# refresh runs, then times each page through Django's test client, logged in as a
# viewer: the full request/response cycle (middleware, session, queries, template),
# without a network. Prints the median and the slowest of BENCH_REPEAT runs (default 7)
# after one warm-up, and the query count. Target: 200 ms.

from __future__ import annotations

import os
import statistics
import tempfile
import time
from datetime import datetime, timedelta

TARGET_MS = 200.0


def _setup_django() -> None:
    os.environ.setdefault("SECRET_KEY", "bench-only")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "vpaweb.settings")
    if not os.environ.get("DATABASE_URL"):
        # A private SQLite file: never the developer's var/db.sqlite3.
        os.environ["VPAWEB_VAR_DIR"] = tempfile.mkdtemp(prefix="vpaweb-bench-")
    os.environ.setdefault("ALLOWED_HOSTS", "testserver")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0, interactive=False)


def _seed(workload_count: int) -> int:
    """Bulk-insert the fleet; return the id of a workload with three containers."""
    from django.utils import timezone

    from recommender.models import (
        Cluster,
        Container,
        OomKill,
        Policy,
        Recommendation,
        RefreshRun,
        Workload,
    )

    now = timezone.now()
    mi = 2**20
    # An earlier run's fleet on the same database goes first (the names are fixed).
    Cluster.objects.filter(name__in=[f"bench-{i}" for i in range(3)]).delete()
    clusters = [
        Cluster.objects.create(name=f"bench-{i}", kind="simulated") for i in range(3)
    ]
    kinds = ["Deployment", "StatefulSet", "DaemonSet", "CronJob"]
    workloads = Workload.objects.bulk_create(
        [
            Workload(
                cluster=clusters[i % 3],
                kind=kinds[i % 4],
                namespace=f"team-{i % 40}",
                name=f"service-{i:05d}",
                replicas=1 + i % 5,
                # Nine in ten carry a team label (the rollup by label).
                labels={"team": f"team-{i % 12}"} if i % 10 else {},
            )
            for i in range(workload_count)
        ],
        batch_size=2000,
    )
    modes = ["Off"] * 8 + ["Initial", "Recreate"]
    Policy.objects.bulk_create(
        [Policy(workload=w, mode=modes[i % 10]) for i, w in enumerate(workloads)],
        batch_size=2000,
    )
    containers = []
    for i, w in enumerate(workloads):
        for position in range(1 + i % 3):
            containers.append(
                Container(
                    workload=w,
                    name=["app", "sidecar", "proxy"][position],
                    position=position,
                    request_cpu_millicores=100 + (i * 37) % 2000,
                    request_memory_bytes=(64 + (i * 53) % 4000) * mi,
                    limit_cpu_millicores=2 * (100 + (i * 37) % 2000),
                    limit_memory_bytes=2 * (64 + (i * 53) % 4000) * mi,
                )
            )
    containers = Container.objects.bulk_create(containers, batch_size=2000)
    recommendations = []
    for j, c in enumerate(containers):
        if j % 11 == 0:
            continue  # no recommendation yet
        for age_days in (3, 1):
            factor = (0.3, 0.8, 1.1, 1.6)[(j + age_days) % 4]
            cpu = max(25, int(c.request_cpu_millicores * factor))
            memory = max(mi, int(c.request_memory_bytes * factor))
            recommendations.append(
                Recommendation(
                    container=c,
                    created_at=now - timedelta(days=age_days),
                    target_cpu_millicores=cpu,
                    target_memory_bytes=memory,
                    lower_cpu_millicores=int(cpu * 0.8),
                    lower_memory_bytes=int(memory * 0.8),
                    upper_cpu_millicores=int(cpu * 1.3),
                    upper_memory_bytes=int(memory * 1.3),
                    uncapped_cpu_millicores=cpu,
                    uncapped_memory_bytes=memory,
                    explanation={
                        "resources": {"cpu": {"confidence": 1 + j % 9}},
                        "sample_count": 1000 + j,
                    },
                )
            )
    for rec in recommendations:
        rec.fill_explanation_columns()  # as the refresh does: bulk_create skips save()
    recommendations = Recommendation.objects.bulk_create(
        recommendations, batch_size=2000
    )
    latest = {}
    for rec in recommendations:
        latest[rec.container_id] = rec  # the second (newer) row of each container wins
    for c in containers:
        c.latest_recommendation = latest.get(c.pk)
    Container.objects.bulk_update(
        containers, ["latest_recommendation"], batch_size=2000
    )
    OomKill.objects.bulk_create(
        [
            OomKill(
                container=c, pod=f"pod-{j}", occurred_at=now - timedelta(hours=j % 200)
            )
            for j, c in enumerate(containers[::50])
        ]
    )
    RefreshRun.objects.bulk_create(
        [
            RefreshRun(
                cluster=clusters[i % 3],
                status="succeeded",
                started_at=now - timedelta(minutes=i),
                finished_at=now - timedelta(minutes=i) + timedelta(seconds=5),
            )
            for i in range(20)
        ]
    )
    detail = next(w for i, w in enumerate(workloads) if i % 3 == 2)
    _seed_charts(detail, now)
    return detail.pk


def _seed_charts(workload: object, now: datetime) -> None:
    """What the refresh stores for the workload page's charts, for one workload:
    each container's checkpoint (8 days of one-minute samples) and its 192 usage
    hours, written as the refresh writes them."""
    import numpy as np

    from recommender.engine.aggregation import AggregateSet, SampleBatch
    from recommender.engine.profiles import get_profile
    from recommender.engine.usage_hours import hourly_usage
    from recommender.models import Checkpoint, Container
    from recommender.models.bulk import add_usage_hours
    from recommender.services.refresh.ingest import key_text

    profile = get_profile("vpa")
    times = now.timestamp() - np.arange(8 * 1440)[::-1] * 60.0
    for number, container in enumerate(Container.objects.filter(workload=workload)):
        rng = np.random.default_rng(number)
        # Two pods, a daily cycle and noise around 0.3 cores and 200 MiB.
        daily = 1 + 0.5 * np.sin(times / 86400.0 * 2 * np.pi)
        cpu = 0.3 * daily * rng.uniform(0.7, 1.3, (2, times.size))
        memory = 2e8 * daily * rng.uniform(0.9, 1.1, (2, times.size))
        aggregates = AggregateSet.empty(profile, 1)
        aggregates.add_samples(
            SampleBatch.from_grid(
                series_aggregate=np.array([0, 0]),
                series_keys=["pod-a", "pod-b"],
                timestamp_s=times,
                cpu_cores=cpu,
                memory_bytes=memory,
            )
        )
        Checkpoint.objects.create(
            container=container,
            histogram_key=key_text(profile),
            state=aggregates.to_checkpoints()[0],
            last_sample_at=now,
            sample_count=int(aggregates.sample_count()[0]),
        )
        add_usage_hours(
            hourly_usage(
                series_key=np.array([container.pk, container.pk]),
                timestamp_s=times,
                cpu_cores=cpu,
                memory_bytes=memory,
            )
        )


def _time(client, path: str, repeat: int) -> tuple[float, float, int]:
    from django.db import connection

    queries: list[str] = []

    def count(execute, sql, params, many, context):  # type: ignore[no-untyped-def]
        queries.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(count):
        response = client.get(path)  # warm-up (and query count)
    if response.status_code != 200:
        raise SystemExit(f"GET {path} answered {response.status_code}")
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        client.get(path)
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples), max(samples), len(queries)


def main() -> None:
    """Seed, then print the server time of the list, overview and a detail page."""
    count = int(os.environ.get("BENCH_WORKLOADS", "10000"))
    repeat = int(os.environ.get("BENCH_REPEAT", "7"))
    _setup_django()
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client, override_settings

    from recommender.models import Container
    from recommender.roles import Role, grant_role

    started = time.perf_counter()
    detail_id = _seed(count)
    if connection.vendor == "postgresql":
        # Fresh statistics, as autovacuum keeps them in production; plans depend on
        # them.
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
    seeded_s = time.perf_counter() - started
    get_user_model().objects.filter(username="bench-viewer").delete()  # a rerun's
    user = get_user_model().objects.create_user(
        "bench-viewer", password="bench-only-pw"
    )
    grant_role(user, Role.VIEWER)
    client = Client()
    client.force_login(user)
    print(
        f"database: {connection.vendor}; {count:,} workloads, "
        f"{Container.objects.count():,} containers, seeded in {seeded_s:.1f} s"
    )
    pages = [
        ("workloads list (page 1, by name)", "/workloads/"),
        (
            "workloads list (wasteful, by savings)",
            "/workloads/?status=over&sort=savings",
        ),
        ("workloads list (at risk, by risk)", "/workloads/?at_risk=true&sort=risk"),
        ("workloads list (search, by risk)", "/workloads/?q=service-01&sort=risk"),
        ("workloads list (page 100)", "/workloads/?page=100"),
        ("overview", "/"),
        ("rollups by team label", "/rollups/?by=label&key=team"),
        ("rollups by namespace", "/rollups/?by=namespace"),
        ("workload page (3 containers)", f"/workloads/{detail_id}/"),
    ]
    print(
        f"{'page':48} {'median ms':>10} {'max ms':>8} {'queries':>8}  "
        f"target {TARGET_MS:.0f} ms"
    )
    # Pages render without a collectstatic run: plain static names, as the tests do
    # (and bench_scale).
    plain_static = {
        "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
        "staticfiles": {
            "BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"
        },
    }
    for label, path in pages:
        with override_settings(STORAGES=plain_static, WHITENOISE_USE_FINDERS=True):
            median, slowest, queries = _time(client, path, repeat)
        verdict = "ok" if median <= TARGET_MS else "SLOW"
        print(
            f"{label:48} {median:10.1f} {slowest:8.1f} {queries:8d}  {verdict}",
            flush=True,
        )
    if connection.vendor == "postgresql":
        print(
            "note: the seeded rows stay in the DATABASE_URL database: use a scratch one"
        )


if __name__ == "__main__":
    main()
