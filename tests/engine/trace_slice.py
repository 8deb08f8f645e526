"""The real trace slice of the engine tests, and upstream's hourly answers for it.

``tests/fixtures/traces/bitbrains_slice.csv.gz``: six Bitbrains VMs x 4 days, copied
unchanged from ``benchmarks/data/bitbrains_rnd.csv.gz``.
"""

from __future__ import annotations

import csv
import gzip
from collections import defaultdict
from pathlib import Path

from tests.engine import reference as ref

SLICE = Path(__file__).parent.parent / "fixtures" / "traces" / "bitbrains_slice.csv.gz"

Samples = dict[str, list[tuple[float, float, float]]]


def read_slice() -> Samples:
    """container -> [(timestamp_s, cpu_cores, memory_bytes)] in file (time) order."""
    out: Samples = defaultdict(list)
    with gzip.open(SLICE, "rt", newline="") as handle:
        for row in csv.DictReader(handle):
            out[row["container_id"]].append(
                (
                    float(row["timestamp_s"]),
                    float(row["cpu_cores"]),
                    float(row["memory_bytes"]),
                )
            )
    return dict(out)


def go_cpu_amount(cores: float) -> int:
    """model/types.go CPUAmountFromCores, written out: int64(cores * 1000)."""
    return int(cores * 1000.0)


def reference_hourly(
    data: Samples, moments: list[float], profile: dict[str, object] | None = None
) -> dict[str, list[tuple[dict[str, tuple[int, int, int]], int]]]:
    """Upstream, one sample at a time in its integer units: per container and moment,
    the recommendation from the samples before the moment and how many there were
    (``profile["mem_hl"]``: the memory half-life in seconds, default 24 h)."""
    out = {}
    mem_hl = float((profile or {}).get("mem_hl", 86400.0))  # type: ignore[arg-type]
    for name, samples in data.items():
        agg = ref.Aggregate(mem_hl=mem_hl)
        container = ref.Container(agg)
        k = 0
        recs = []
        for moment in moments:
            while k < len(samples) and samples[k][0] < moment:
                t, cores, memory = samples[k]
                container.add_cpu(t, go_cpu_amount(cores) / 1000.0)
                container.add_memory(t, float(int(memory)))
                k += 1
            recs.append((ref.recommend(agg, profile=profile), k))
        out[name] = recs
    return out
