"""GET /metrics/recommendations at 100,000 containers: the scrape's time and series.

DATABASE_URL=postgres://.../scratch python -m benchmarks metrics_scrape"""
# The DATABASE_URL database must be a scratch one (PostgreSQL): the fleet is the export
# benchmark's (bench_export._fleet: BENCH_EXPORT_CONTAINERS containers, default 100,000,
# in 200 namespaces, each with a latest recommendation; reused when an earlier run
# wrote one of that size). Each bound is asked for three times through Django's test
# client (the view, the token check, the queries and the text); prints the best and
# the worst time, the series and the bytes, with the load.

from __future__ import annotations

import os
import time

from benchmarks.bench_export import _fleet
from benchmarks.bench_retention import setup_scratch_postgres

TOKEN = "bench-metrics-token"


def main() -> None:
    """Write (or reuse) the fleet, then time each bound's scrape."""
    if not setup_scratch_postgres("metrics_scrape"):
        return
    from django.conf import settings
    from django.test import Client

    containers = int(os.environ.get("BENCH_EXPORT_CONTAINERS", "100000"))
    tick = time.perf_counter()
    workloads = _fleet(containers)
    print(
        f"{workloads} workloads, {containers} containers ready in "
        f"{time.perf_counter() - tick:.0f} s",
        flush=True,
    )
    settings.METRICS_TOKEN = TOKEN
    settings.ALLOWED_HOSTS = ["testserver"]
    client = Client()
    print(
        f"{'query':<28} {'best s':>7} {'worst s':>8} {'series':>9} {'MB':>6} "
        f"{'load':>5}",
        flush=True,
    )
    for query in ("", "?top=10000", "?namespace=ns-7", "?top=100000"):
        times = []
        for _ in range(3):
            started = time.perf_counter()
            response = client.get(
                f"/metrics/recommendations{query}",
                HTTP_AUTHORIZATION=f"Bearer {TOKEN}",
            )
            times.append(time.perf_counter() - started)
            assert response.status_code == 200, response.content[:200]
        body = response.content
        series = sum(1 for line in body.splitlines() if not line.startswith(b"#"))
        print(
            f"{query or '(default: top 1000)':<28} {min(times):>7.2f} "
            f"{max(times):>8.2f} {series:>9} {len(body) / 1e6:>6.1f} "
            f"{os.getloadavg()[0]:>5.2f}",
            flush=True,
        )
