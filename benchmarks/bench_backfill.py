"""Back-fill 1,000 containers x 8 days at 1 minute from a real Prometheus.

`python -m benchmarks backfill` (env: BENCH_CONTAINERS, default 1000; BENCH_DAYS, 8).

The TSDB is generated once into var/bench/prometheus-<containers>x<days>d/ and reused:
OpenMetrics for cAdvisor CPU and memory of every container (kube-state-metrics series
only for the containers that OOM, see docs/prometheus.md), loaded by promtool with
192 h blocks. Printed, separately: the time to read every sample through the source
the way the back-fill service asks (one day per call, per namespace shard) with the
query count, then the time of the engine ingesting those grids
(``SampleBatch.from_grid`` + ``AggregateSet.add_samples``, one aggregate per container,
day by day as the back-fill feeds them), and their sum. Database work (rows,
checkpoint writes) is not included.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

BASE = Path(__file__).resolve().parent.parent


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
    prometheus, specs, data = _prepare(containers, days, end_s)

    from tests.prometheus_support.server import PrometheusServer

    server = PrometheusServer(prometheus, data).start()
    try:
        _bench_source(server.url, specs, end_s, days)
    finally:
        server.stop()


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
