"""Synthetic cAdvisor and kube-state-metrics history as OpenMetrics, for promtool.

The history is a pure function of a list of ``SeriesSpec``, so the tests know every
raw sample Prometheus holds and can derive, independently of vpaweb's code, the usage
samples a query should return (``expected_usage``) and the OOM kills
(``expected_ooms``).

Samples are scraped once per ``scrape_s`` (60 s) at multiples of it, as Prometheus would
with an aligned scrape. Values are chosen so float arithmetic is exact:
CPU counter increments are multiples of 15/256 core-seconds (so differences of counter
values are exact) and memory is whole bytes. docs/prometheus.md ("Tests") has the
format's pitfalls.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

# CPU counter increments are multiples of this many core-seconds: exact in float64.
CPU_QUANTUM_S = 15 / 256
SCRAPE_S = 60
DAY_S = 86_400


@dataclass(frozen=True)
class SeriesSpec:
    """One container of one pod: when it ran, how it behaves, and whether it OOMs."""

    namespace: str
    workload: str
    pod: str
    container: str
    start_s: int  # first scrape
    end_s: int  # last scrape
    cpu_cores: float  # mean usage
    memory_bytes: int  # baseline working set
    cpu_request_cores: float
    memory_request_bytes: int
    oom_at_s: int | None = None  # the scrape that sees the restart after an OOM kill
    seed: int = 0

    def scrapes(self, scrape_s: int = SCRAPE_S) -> np.ndarray:
        """Scrape times (int64) from start to end inclusive."""
        return np.arange(self.start_s, self.end_s + 1, scrape_s, dtype=np.int64)


def cpu_increments(spec: SeriesSpec, times: np.ndarray) -> np.ndarray:
    """Core-seconds used in the scrape interval ending at each time (index 0 unused)."""
    rng = np.random.default_rng([spec.seed, 1])
    day_phase = 2 * math.pi * (times % DAY_S) / DAY_S
    cores = spec.cpu_cores * (1 + 0.4 * np.sin(day_phase + spec.seed))
    cores = cores * rng.lognormal(0.0, 0.25, len(times))
    quanta = np.maximum(np.rint(cores * SCRAPE_S / CPU_QUANTUM_S), 0)
    return quanta * CPU_QUANTUM_S


def cpu_counter(spec: SeriesSpec, times: np.ndarray) -> np.ndarray:
    """The cumulative counter; it restarts from 0 at the OOM restart."""
    increments = cpu_increments(spec, times)
    increments[0] = 7 * CPU_QUANTUM_S  # whatever the container used before we look
    if spec.oom_at_s is None:
        return np.cumsum(increments)
    reset = int(np.searchsorted(times, spec.oom_at_s))
    before = np.cumsum(increments[:reset])
    after = np.cumsum(increments[reset:])  # the new container's counter starts at 0
    return np.concatenate([before, after])


def memory_bytes(spec: SeriesSpec, times: np.ndarray) -> np.ndarray:
    """Working-set bytes: a daily wave with noise, climbing before an OOM."""
    rng = np.random.default_rng([spec.seed, 2])
    day_phase = 2 * math.pi * (times % DAY_S) / DAY_S
    wave = spec.memory_bytes * (1 + 0.1 * np.sin(day_phase + 2 * spec.seed))
    noise = rng.normal(0.0, 0.02 * spec.memory_bytes, len(times))
    values = wave + noise
    if spec.oom_at_s is not None:
        # The last 30 minutes before the kill climb towards twice the baseline.
        climb = (times > spec.oom_at_s - 1800) & (times < spec.oom_at_s)
        ramp = (times[climb] - (spec.oom_at_s - 1800)) / 1800
        values[climb] += spec.memory_bytes * ramp
    return np.maximum(np.rint(values), 1).astype(np.int64)


def restarts(spec: SeriesSpec, times: np.ndarray) -> np.ndarray:
    """kube-state-metrics' restart counter: 0, then 1 from the OOM restart on."""
    if spec.oom_at_s is None:
        return np.zeros(len(times), dtype=np.int64)
    return (times >= spec.oom_at_s).astype(np.int64)


# --- OpenMetrics ----------------------------------------------------------------------


def _labels(spec: SeriesSpec, extra: str = "") -> str:
    return (
        f'{{namespace="{spec.namespace}",pod="{spec.pod}",container="{spec.container}"'
        f"{extra}}}"
    )


def _lines(name: str, labels: str, times: np.ndarray, values: Iterable[str]) -> str:
    prefix = name + labels + " "
    return "".join(
        f"{prefix}{v} {t}\n" for t, v in zip(times.tolist(), values, strict=True)
    )


def family_text(family: str, spec: SeriesSpec, scrape_s: int = SCRAPE_S) -> str:
    """All samples of one series of ``family``, in increasing time (promtool drops the
    out-of-order ones silently)."""
    times = spec.scrapes(scrape_s)
    if family == "cpu":
        values = map(repr, cpu_counter(spec, times).tolist())
        return _lines("container_cpu_usage_seconds_total", _labels(spec), times, values)
    if family == "memory":
        values = map(str, memory_bytes(spec, times).tolist())
        return _lines(
            "container_memory_working_set_bytes", _labels(spec), times, values
        )
    if family == "restarts":
        values = map(str, restarts(spec, times).tolist())
        name = "kube_pod_container_status_restarts_total"
        return _lines(name, _labels(spec), times, values)
    if family == "oom_reason":
        if spec.oom_at_s is None:
            return ""
        after = times[times >= spec.oom_at_s]
        labels = _labels(spec, ',reason="OOMKilled"')
        name = "kube_pod_container_status_last_terminated_reason"
        return _lines(name, labels, after, ["1"] * len(after))
    if family == "requests":
        cpu = _labels(spec, ',resource="cpu",unit="core"')
        memory = _labels(spec, ',resource="memory",unit="byte"')
        name = "kube_pod_container_resource_requests"
        return _lines(
            name, cpu, times, [repr(spec.cpu_request_cores)] * len(times)
        ) + _lines(name, memory, times, [str(spec.memory_request_bytes)] * len(times))
    raise ValueError(f"unknown family {family!r}")


# OpenMetrics family name and type of each family, in file order.
FAMILIES = {
    "cpu": ("container_cpu_usage_seconds", "counter"),
    "memory": ("container_memory_working_set_bytes", "gauge"),
    "restarts": ("kube_pod_container_status_restarts", "counter"),
    "oom_reason": ("kube_pod_container_status_last_terminated_reason", "gauge"),
    "requests": ("kube_pod_container_resource_requests", "gauge"),
}


def openmetrics_chunks(
    specs: list[SeriesSpec], families: Iterable[str] = FAMILIES, extra: str = ""
) -> Iterator[str]:
    """The whole exposition in pieces: each family contiguous, then ``extra`` (more
    families, already exposition text), then ``# EOF``."""
    for family in families:
        name, kind = FAMILIES[family]
        yield f"# TYPE {name} {kind}\n"
        for spec in specs:
            yield family_text(family, spec)
    if extra:
        yield extra
    yield "# EOF\n"


def write_openmetrics(
    path: Path,
    specs: list[SeriesSpec],
    families: Iterable[str] = FAMILIES,
    extra: str = "",
) -> int:
    """Write the exposition; return its size in bytes."""
    size = 0
    with path.open("w", encoding="ascii") as handle:
        for chunk in openmetrics_chunks(specs, families, extra):
            handle.write(chunk)
            size += len(chunk)
    return size


# --- what queries must return ---------------------------------------------------------


@dataclass(frozen=True)
class UsageRow:
    """One usage sample as the offline ``recommend`` command reads it."""

    timestamp_s: int
    namespace: str
    workload: str
    pod: str
    container: str
    cpu_cores: float  # NaN when no CPU sample
    memory_bytes: float  # NaN when no memory sample


def expected_usage(
    specs: list[SeriesSpec], *, start_s: int, end_s: int, step_s: int = SCRAPE_S
) -> list[UsageRow]:
    """The samples on the step grid in ``(start_s, end_s]``, from the raw scrapes.

    CPU at grid time t is the counter's increase over [t - step, t] divided by the step
    (a reset adds back the value before it, as Prometheus' rate() does), present only
    when both scrapes exist. Memory at t is the peak of the scrapes in (t - step, t].
    """
    assert step_s == SCRAPE_S, "the expectation is derived for aligned 1-scrape steps"
    rows = []
    for spec in specs:
        times = spec.scrapes()
        counter = cpu_counter(spec, times)
        memory = memory_bytes(spec, times)
        for i, t in enumerate(times.tolist()):
            if not start_s < t <= end_s:
                continue
            cpu = math.nan
            if i > 0:
                increase = counter[i] - counter[i - 1]
                if counter[i] < counter[i - 1]:
                    increase += counter[i - 1]
                cpu = float(increase) / step_s
            rows.append(
                UsageRow(
                    t,
                    spec.namespace,
                    spec.workload,
                    spec.pod,
                    spec.container,
                    cpu,
                    float(memory[i]),
                )
            )
    rows.sort(key=lambda r: (r.timestamp_s, r.namespace, r.pod, r.container))
    return rows


@dataclass(frozen=True)
class OomRow:
    """One OOM kill as the offline ``recommend`` command reads it."""

    timestamp_s: int
    namespace: str
    workload: str
    pod: str
    container: str
    memory_request_bytes: int


def expected_ooms(specs: list[SeriesSpec], *, start_s: int, end_s: int) -> list[OomRow]:
    """The OOM kills in ``(start_s, end_s]``, at the scrape that saw the restart."""
    return [
        OomRow(
            spec.oom_at_s,
            spec.namespace,
            spec.workload,
            spec.pod,
            spec.container,
            spec.memory_request_bytes,
        )
        for spec in specs
        if spec.oom_at_s is not None and start_s < spec.oom_at_s <= end_s
    ]


# --- fleets ---------------------------------------------------------------------------


def small_fleet(*, end_s: int, days: int = 8) -> list[SeriesSpec]:
    """Six containers over ``days``: replicas, a sidecar, an OOM with a counter reset, a
    pod that vanishes halfway and its replacement."""
    assert end_s % SCRAPE_S == 0
    start = end_s - days * DAY_S
    half = start + (days * DAY_S // 2 // SCRAPE_S) * SCRAPE_S
    mib = 2**20
    return [
        SeriesSpec("shop", "web", "web-5f6d7-aaaaa", "app", start, end_s,
                   0.35, 300 * mib, 0.5, 512 * mib, seed=1),
        SeriesSpec("shop", "web", "web-5f6d7-bbbbb", "app", start, end_s,
                   0.30, 280 * mib, 0.5, 512 * mib, seed=2),
        SeriesSpec("shop", "web", "web-5f6d7-aaaaa", "proxy", start, end_s,
                   0.05, 60 * mib, 0.1, 128 * mib, seed=3),
        SeriesSpec("shop", "db", "db-0", "postgres", start, end_s,
                   1.2, 1200 * mib, 1.0, 1024 * mib,
                   oom_at_s=end_s - 2 * DAY_S + 37 * SCRAPE_S, seed=4),
        SeriesSpec("batch", "worker", "worker-6c8b9-xxxxx", "app", start, half,
                   0.8, 700 * mib, 1.0, 1024 * mib, seed=5),
        SeriesSpec("batch", "worker", "worker-6c8b9-yyyyy", "app", half + SCRAPE_S,
                   end_s, 0.9, 720 * mib, 1.0, 1024 * mib, seed=6),
    ]  # fmt: skip


def large_fleet(
    *, containers: int, end_s: int, days: int = 8, namespaces: int = 10
) -> list[SeriesSpec]:
    """``containers`` single-container pods over ``days`` in ``namespaces``; one in 50
    OOMs once."""
    start = end_s - days * DAY_S
    rng = np.random.default_rng(7)
    specs = []
    for i in range(containers):
        namespace = f"team-{i % namespaces:02d}"
        oom_at = None
        if i % 50 == 7:
            oom_at = (
                start + int(rng.integers(DAY_S, days * DAY_S) // SCRAPE_S) * SCRAPE_S
            )
        specs.append(
            SeriesSpec(
                namespace,
                f"svc-{i:04d}",
                f"svc-{i:04d}-7d4b9-{i:05d}",
                "app",
                start,
                end_s,
                float(rng.uniform(0.02, 2.0)),
                int(rng.uniform(50, 4000)) * 2**20,
                1.0,
                2**30,
                oom_at_s=oom_at,
                seed=1000 + i,
            )
        )
    return specs
