"""Engine benchmark: 1,000 containers x 8 days x 1-minute samples (CPU and memory).

Run: ``python -m benchmarks.bench_engine``. Prints ingest time and throughput,
recommendation times for 1,000 and 100,000 rows (and of their explanation dicts), and
state bytes per container. Targets on the 2-core build machine: ingest <= 0.9 s,
100,000 recommendations with their explanation path <= 0.3 s, state <= 8 KiB per
container.
"""

from __future__ import annotations

import os
import time

import numpy as np

from recommender.engine.aggregation import AggregateSet
from recommender.engine.batch import SampleBatch
from recommender.engine.estimator import recommend
from recommender.engine.profiles import get_profile

# BENCH_ENGINE_CONTAINERS and BENCH_ENGINE_DAYS change the size (the suite: tiny).
CONTAINERS = int(os.environ.get("BENCH_ENGINE_CONTAINERS", "1000"))
MINUTES = int(float(os.environ.get("BENCH_ENGINE_DAYS", "8")) * 24 * 60)
SEED = 20240611


def make_batch(rng: np.random.Generator) -> SampleBatch:
    """Grid of CPU (gamma, 0.05..2 cores) and memory (50 MiB..4 GiB) samples."""
    t0 = 1_700_000_000.0
    ts = t0 + 60.0 * np.arange(MINUTES)
    cpu_level = rng.uniform(0.05, 2.0, size=(CONTAINERS, 1))
    cpu = cpu_level * rng.gamma(4.0, 0.25, size=(CONTAINERS, MINUTES))
    mem_level = rng.uniform(50 * 2**20, 4 * 2**30, size=(CONTAINERS, 1))
    mem = np.floor(
        mem_level * (1.0 + 0.05 * rng.standard_normal((CONTAINERS, MINUTES)))
    )
    return SampleBatch.from_grid(
        series_aggregate=np.arange(CONTAINERS),
        series_keys=[f"pod-{i}" for i in range(CONTAINERS)],
        timestamp_s=ts,
        cpu_cores=cpu,
        memory_bytes=mem,
    )


def main() -> None:
    """Run the benchmark and print the figures."""
    profile = get_profile("vpa")
    rng = np.random.default_rng(SEED)
    t = time.perf_counter()
    batch = make_batch(rng)
    print(f"generate + from_grid: {time.perf_counter() - t:.3f} s")
    n = 2 * CONTAINERS * MINUTES
    aggs = AggregateSet.empty(profile, CONTAINERS)
    t = time.perf_counter()
    stats = aggs.add_samples(batch)
    ingest = time.perf_counter() - t
    print(
        f"ingest: {ingest:.3f} s for {n / 1e6:.2f} M samples"
        f" = {n / ingest / 1e6:.1f} M samples/s"
    )
    print(f"  {stats}")

    t = time.perf_counter()
    recs = recommend(
        aggs,
        rows=range(CONTAINERS),
        profile=profile,
        containers_in_pod=[1] * CONTAINERS,
    )
    print(
        f"recommend {CONTAINERS:,} rows: {time.perf_counter() - t:.3f} s"
        f" (first target {recs[0].target})"
    )

    big = AggregateSet.from_checkpoints(profile, aggs.to_checkpoints() * 100)
    # Wall time moves with the load of a shared machine; the process's CPU time
    # (user + system) much less, so both are printed, with the load average.
    print(f"load average (1 min) now: {os.getloadavg()[0]:.2f}")
    t, cpu = time.perf_counter(), time.process_time()
    recs = recommend(
        big, rows=range(len(big)), profile=profile, containers_in_pod=[1] * len(big)
    )
    estimate = time.perf_counter() - t
    estimate_cpu = time.process_time() - cpu
    print(
        f"recommend {len(big):,} rows (estimate, arrays): {estimate:.3f} s"
        f" (CPU {estimate_cpu:.3f} s)"
    )
    # What a refresh does next (recommender/services/refresh/cycle.py): the value
    # arrays of every row, and the explanation dicts of the rows whose values moved.
    t, cpu = time.perf_counter(), time.process_time()
    values = [
        recs.values(res, bound).tolist()  # type: ignore[union-attr]
        for res in ("cpu", "memory")
        for bound in ("target", "lower_bound", "upper_bound")
    ]
    changed = np.arange(0, len(recs), 100)  # 1% of the rows moved this cycle
    dicts = recs.explanation_dicts(changed.tolist())
    del values
    path = time.perf_counter() - t
    path_cpu = time.process_time() - cpu
    print(
        f"  + values and the explanation dicts of {len(dicts):,} changed rows:"
        f" {path:.3f} s (estimate + explanation path {estimate + path:.3f} s,"
        f" CPU {estimate_cpu + path_cpu:.3f} s; target <= 0.3 s)"
    )
    print(f"load average (1 min) now: {os.getloadavg()[0]:.2f}")
    t = time.perf_counter()
    dicts = recs.explanation_dicts(range(len(recs)))
    print(
        f"  explanation dicts of all {len(recs):,} (first contact):"
        f" {time.perf_counter() - t:.3f} s"
    )
    del dicts
    t = time.perf_counter()
    for rec in recs[:10_000]:
        rec.explanation.to_dict()
    print(
        "  ContainerRecommendation + explanation.to_dict() of 10,000:"
        f" {time.perf_counter() - t:.3f} s"
    )
    del recs

    t = time.perf_counter()
    blobs = aggs.to_checkpoints()
    print(f"to_checkpoints {CONTAINERS:,} rows: {time.perf_counter() - t:.3f} s")
    compact = sum(len(b) for b in blobs) / CONTAINERS
    arrays = [
        aggs.cpu.weight,
        aggs.cpu.total,
        aggs.cpu.min_bucket,
        aggs.cpu.max_bucket,
        aggs.cpu.reference_s,
        aggs.memory.weight,
        aggs.memory.total,
        aggs.memory.min_bucket,
        aggs.memory.max_bucket,
        aggs.memory.reference_s,
        aggs.first_sample_s,
        aggs.last_sample_s_,
        aggs.total_samples,
        aggs.creation_s,
        aggs.series_row,
        aggs.series_last_cpu_s,
        aggs.series_last_memory_s,
        aggs.series_window_end_s,
        aggs.series_memory_peak,
        aggs.series_oom_peak,
    ]
    in_memory = sum(a.nbytes for a in arrays) / CONTAINERS
    print(
        f"state per container: compact checkpoint {compact:.0f} B,"
        f" in-memory arrays {in_memory:.0f} B"
    )


if __name__ == "__main__":
    main()
