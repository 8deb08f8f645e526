"""Back-fill 1,000 containers x 8 days at 1 minute from a real Prometheus.

`python -m benchmarks backfill` (env: BENCH_CONTAINERS, default 1000; BENCH_DAYS, 8)."""
# The TSDB is generated once into var/bench/prometheus-<containers>x<days>d/ and reused:
# OpenMetrics for cAdvisor CPU and memory of every container (kube-state-metrics series
# only for the containers that OOM, see docs/prometheus.md), loaded by promtool with 192
# h blocks. Printed, separately: the time to read every sample through the source the
# way the back-fill service asks (one day per call, per namespace shard) with the query
# count, then the time of the engine ingesting those grids (``SampleBatch.from_grid`` +
# ``AggregateSet.add_samples``, one aggregate per container, day by day as the back-fill
# feeds them), and their sum (no database).
#
# Then the whole service: a Kubernetes ``Cluster`` row discovered through the official
# client from the project's fake API server (``tests/k8s_fake``, on 127.0.0.1 with a
# generated kubeconfig) serving exactly the fleet's workloads and pods
# (``tests/prometheus_support/k8s_objects.py``), ``PROMETHEUS_URL`` at the real
# Prometheus, and ``backfill_cluster`` timed end to end against a scratch database:
# SQLite in a temporary VPAWEB_VAR_DIR, or, when DATABASE_URL is set, a scratch
# PostgreSQL database created next to the one it names and dropped afterwards. Migration
# and seeding are timed separately. Printed: total time, Prometheus query count, samples
# ingested, checkpoint writes, recommendations stored, the run's phase timings, and the
# coverage (every container must end with a recommendation, else the benchmark fails).
# Target: 60 s.

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

BASE = Path(__file__).resolve().parent.parent
TARGET_S = 60.0


def _prepare(containers: int, days: int, end_s: int):
    from tests.prometheus_support.openmetrics import large_fleet, write_openmetrics
    from tests.prometheus_support.server import create_blocks, ensure_installed

    binaries = ensure_installed()
    if binaries is None:
        raise SystemExit("prometheus/promtool missing and not installable")
    prometheus, promtool = binaries
    specs = large_fleet(containers=containers, end_s=end_s, days=days)
    work = BASE / "var" / "bench" / f"prometheus-{containers}x{days}d"
    data = work / "data"
    if not (work / "READY").exists():
        work.mkdir(parents=True, exist_ok=True)
        exposition = work / "history.om"
        tick = time.perf_counter()
        usage = write_openmetrics(exposition, specs, ["cpu", "memory"])
        with_oom = [s for s in specs if s.oom_at_s is not None]
        # KSM series of the OOM-killed containers only (the rest would only be index
        # entries for the two-step OOM query); appended as their own families.
        tail = work / "ksm.om"
        write_openmetrics(tail, with_oom, ["restarts", "oom_reason", "requests"])
        with exposition.open("r+b") as handle:
            handle.seek(-len(b"# EOF\n"), os.SEEK_END)
            handle.truncate()
            handle.write(tail.read_bytes())
        tail.unlink()
        print(f"generated {usage / 1e9:.2f} GB OpenMetrics in "
              f"{time.perf_counter() - tick:.1f} s", flush=True)  # fmt: skip
        tick = time.perf_counter()
        create_blocks(promtool, exposition, data)
        print(
            f"promtool created blocks in {time.perf_counter() - tick:.1f} s", flush=True
        )
        exposition.unlink()
        (work / "READY").write_text("ok\n")
    return prometheus, specs, data


def main() -> None:
    """Print the back-fill figures."""
    containers = int(os.environ.get("BENCH_CONTAINERS", "1000"))
    days = int(os.environ.get("BENCH_DAYS", "8"))
    end_s = 1_794_960_000
    os.environ.setdefault("SECRET_KEY", "bench-only")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "vpaweb.settings")
    # The service's INFO lines (one per run) would interleave with the figures.
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    prometheus, specs, data = _prepare(containers, days, end_s)

    from tests.k8s_fake.server import FakeApiServer, write_kubeconfig
    from tests.prometheus_support.k8s_objects import objects_for
    from tests.prometheus_support.server import PrometheusServer

    scratch = Path(tempfile.mkdtemp(prefix="vpaweb-bench-backfill-"))
    server = PrometheusServer(prometheus, data).start()
    api = FakeApiServer(objects_for(specs, live_at_s=end_s)).start()
    try:
        # Settings are read once, at django.setup(): everything the service reads from
        # the environment is set before anything touches them.
        os.environ["PROMETHEUS_URL"] = server.url
        os.environ["KUBECONFIG"] = str(
            write_kubeconfig(scratch / "kubeconfig", {"bench": api}, current="bench")
        )
        _bench_source(server.url, specs, end_s, days)
        with _scratch_database(scratch) as database:
            _bench_service(specs, end_s, days, database, api)
    finally:
        api.stop()
        server.stop()
        shutil.rmtree(scratch, ignore_errors=True)


def _bench_source(url: str, specs, end_s: int, days: int) -> None:
    import numpy as np

    from recommender.engine.aggregation import AggregateSet
    from recommender.engine.batch import SampleBatch
    from recommender.engine.profiles import get_profile
    from recommender.sources.prometheus import PrometheusConfig, PrometheusSource

    start_s = end_s - days * 86_400
    namespaces = sorted({s.namespace for s in specs})
    concurrency = int(os.environ.get("PROMETHEUS_CONCURRENCY", "4"))
    source = PrometheusSource(PrometheusConfig(url=url, concurrency=concurrency))
    profile = get_profile("vpa")
    read_s = ingest_s = 0.0
    samples = accepted = 0
    # One day per call, as the back-fill service asks, shard by shard; each day's grid
    # is ingested before the next is read, so the two timers never overlap.
    for namespace in namespaces:
        pods = sorted(s.pod for s in specs if s.namespace == namespace)
        row_of = {pod: row for row, pod in enumerate(pods)}
        aggregates = AggregateSet.empty(profile, len(pods), created_s=start_s)
        edge = start_s
        while edge < end_s:
            tick = time.perf_counter()
            grid = source.fetch_usage(
                namespace=namespace, start_s=edge, end_s=edge + 86_400, step_s=60
            )
            read_s += time.perf_counter() - tick
            samples += int((grid.cpu_cores == grid.cpu_cores).sum())
            samples += int((grid.memory_bytes == grid.memory_bytes).sum())
            tick = time.perf_counter()
            batch = SampleBatch.from_grid(
                series_aggregate=np.array(
                    [row_of[key.pod] for key in grid.series], dtype=np.int64
                ),
                series_keys=[key.pod for key in grid.series],
                timestamp_s=grid.timestamp_s,
                cpu_cores=grid.cpu_cores,
                memory_bytes=grid.memory_bytes,
            )
            stats = aggregates.add_samples(batch)
            ingest_s += time.perf_counter() - tick
            accepted += stats.cpu_accepted + stats.memory_accepted
            edge += 86_400
        tick = time.perf_counter()
        source.fetch_oom_kills(
            namespace=namespace, start_s=start_s, end_s=end_s, step_s=60
        )
        read_s += time.perf_counter() - tick
    print(
        f"source back-fill: {len(specs)} containers x {days} d at 60 s: "
        f"{samples:,} samples in {read_s:.1f} s "
        f"({samples / read_s / 1e6:.2f} M samples/s), "
        f"{source.stats.queries} Prometheus queries "
        f"(concurrency {concurrency}, {len(namespaces)} namespace shards)",
        flush=True,
    )
    print(
        f"engine ingest of those grids (from_grid + add_samples, day by day): "
        f"{accepted:,} samples accepted in {ingest_s:.1f} s "
        f"({accepted / ingest_s / 1e6:.2f} M samples/s)",
        flush=True,
    )
    print(
        f"back-fill read + ingest (no database): {read_s + ingest_s:.1f} s",
        flush=True,
    )


@contextmanager
def _scratch_database(scratch: Path) -> Iterator[str]:
    """Point the settings at a throw-away database; yield how to name it.

    SQLite: a file in ``scratch`` (never the developer's var/db.sqlite3). PostgreSQL
    (DATABASE_URL set): a new database on that server, dropped afterwards, so the one
    DATABASE_URL names is left as it was.
    """
    url = os.environ.get("DATABASE_URL", "")
    if not url:
        os.environ["VPAWEB_VAR_DIR"] = str(scratch)
        yield f"sqlite (scratch file {scratch / 'db.sqlite3'})"
        return
    import psycopg

    parts = urlsplit(url)
    name = f"vpaweb_bench_backfill_{os.getpid()}"
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
        admin.execute(f'CREATE DATABASE "{name}"')
    os.environ["DATABASE_URL"] = urlunsplit(parts._replace(path=f"/{name}"))
    try:
        yield f"postgresql (scratch database {name} on {parts.hostname}:{parts.port})"
    finally:
        from django.db import connections

        connections.close_all()
        os.environ["DATABASE_URL"] = url
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _bench_service(specs, end_s: int, days: int, database: str, api) -> None:
    """Time ``backfill_cluster`` end to end on a fresh database; check coverage."""
    import django

    tick = time.perf_counter()
    django.setup()
    from django.core.management import call_command
    from django.db.models import Sum

    call_command("migrate", verbosity=0, interactive=False)
    migrate_s = time.perf_counter() - tick

    from datetime import UTC, datetime

    from recommender.models import (
        Checkpoint,
        Cluster,
        Container,
        OomKill,
        Recommendation,
        Workload,
    )
    from recommender.services.connections import usage_source_for
    from recommender.services.refresh.backfill import backfill_cluster

    tick = time.perf_counter()
    cluster = Cluster.objects.create(
        name="bench", kind=Cluster.Kind.KUBERNETES, context="bench"
    )
    seed_s = time.perf_counter() - tick
    print(
        f"full service: database {database}; migrate {migrate_s:.1f} s, "
        f"seed {seed_s:.2f} s (not timed below)",
        flush=True,
    )
    # The source the service would build for this row (PROMETHEUS_URL, settings),
    # passed in only so its query count can be read; the adapter is the service's own.
    source = usage_source_for(cluster)
    api.requests.clear()
    tick = time.perf_counter()
    try:
        run = backfill_cluster(
            cluster_id=cluster.pk,
            now=datetime.fromtimestamp(end_s, tz=UTC),
            days=days,
            source=source,
        )
    finally:
        source.close()
    total_s = time.perf_counter() - tick

    counts = run.counts
    containers = Container.objects.filter(workload__cluster=cluster)
    covered = containers.filter(latest_recommendation__isnull=False).count()
    total = containers.count()
    written = Checkpoint.objects.aggregate(n=Sum("version"))["n"] or 0
    print(
        f"full back-fill_cluster: {len(specs)} containers x {days} d at 60 s in "
        f"{total_s:.1f} s (target {TARGET_S:.0f} s: "
        f"{'ok' if total_s <= TARGET_S else 'MISSED'}), run {run.status}",
        flush=True,
    )
    print(
        f"  {source.stats.queries} Prometheus queries, "
        f"{len(api.requests)} Kubernetes API requests; "
        f"{counts.get('samples', 0):,} samples ingested in "
        f"{counts.get('steps_done', 0)} committed steps; "
        f"{written:,} checkpoint writes; "
        f"{Recommendation.objects.count():,} recommendations stored; "
        f"{OomKill.objects.count()} OOM kills stored",
        flush=True,
    )
    timings = {k: v for k, v in (run.timings or {}).items() if k != "total_s"}
    if timings:
        phases = ", ".join(
            f"{k.removesuffix('_s')} {v:.1f} s" for k, v in timings.items()
        )
        print(f"  phases: {phases} (run total {run.timings['total_s']:.1f} s)")
    else:
        print(f"  phases: the run stores only its total ({run.timings})")
    print(
        f"  coverage: {covered}/{total} containers have a recommendation "
        f"({Workload.objects.filter(cluster=cluster).count()} workloads discovered, "
        f"{len(specs)} series in the TSDB)",
        flush=True,
    )
    if run.status != "succeeded" or total != len(specs) or covered != total:
        raise SystemExit(
            f"full back-fill incomplete: run {run.status} ({run.error or 'no error'}), "
            f"{total} containers discovered for {len(specs)} series, {covered} with a "
            "recommendation"
        )
