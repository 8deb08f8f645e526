"""Usage of the simulated cluster: a pure function of (seed, series, time).

Every value is computed from a counter-free hash of (series, minute), so any window can
be regenerated identically, in any order, by any process, and the fleet "advances with
wall-clock time" simply because ``end_s`` moves. Arrays: axis 0 = series (one container
of one pod), axis 1 = time. Everything is vectorised over the whole grid: one numpy pass
per term, no Python loop per sample.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Collection
from functools import cached_property

import numpy as np

from recommender.cluster.simulated import (
    DAY_S,
    Fleet,
    SimContainer,
    SimWorkload,
    replica_phase,
    stable_hash,
)
from recommender.sources.base import SeriesKey, SourceBase, UsageGrid

# splitmix64 constants (Steele, Lea & Flood 2014): a fast, well-mixed 64-bit hash.
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_TWO_POW_32 = float(2**32)
# Bursts last this long: the burst draw is keyed on the block, not the minute.
BURST_BLOCK_S = 300
# cAdvisor's CFS periods: the kernel's default cfs_period_us of 100 ms.
CFS_PERIODS_PER_MINUTE = 600.0


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser, element-wise on uint64 (wrapping arithmetic)."""
    x = (x ^ (x >> np.uint64(30))) * _MIX1
    x = (x ^ (x >> np.uint64(27))) * _MIX2
    mixed: np.ndarray = x ^ (x >> np.uint64(31))
    return mixed


def _uniform_pair(
    series_key: np.ndarray, tick: np.ndarray, salt: int
) -> tuple[np.ndarray, np.ndarray]:
    """Two independent uniforms in [0, 1) per (series, tick), from one hash."""
    with np.errstate(over="ignore"):
        h = _mix(series_key ^ _mix(tick.astype(np.uint64) * _GOLDEN + np.uint64(salt)))
    low = (h & np.uint64(0xFFFFFFFF)).astype(np.float64) / _TWO_POW_32
    high = (h >> np.uint64(32)).astype(np.float64) / _TWO_POW_32
    return low, high


class SimulatedUsageSource(SourceBase):
    """UsageSource over a simulated ``Fleet``: history of usage and CFS counters, read
    by chosen workloads too; no OOM history (the simulated cluster's pod statuses
    report its kills) and no node costs."""

    keeps_history = True
    selects_workloads = True
    keeps_oom_history = False
    counts_throttling = True
    reads_cluster_series = False

    def __init__(self, *, fleet: Fleet) -> None:
        self.fleet = fleet

    def series_between(
        self,
        *,
        namespace: str | None,
        start_s: float,
        end_s: float,
        workloads: Collection[tuple[str, str, str]] | None = None,
    ) -> list[tuple[SeriesKey, SimWorkload, SimContainer, int, float, float]]:
        """Series alive in ``(start_s, end_s]`` and what each belongs to (of the
        ``workloads`` given by (namespace, kind, name) only, when given)."""
        found = []
        for workload in self._workloads(namespace, workloads):
            if workload.kind == "CronJob":
                pods = workload.runs_between(start_s, end_s)
            else:
                pods = [
                    (pod, -math.inf, math.inf) for pod in workload.long_lived_pods()
                ]
            for replica, (pod, alive_from, alive_until) in enumerate(pods):
                for container in workload.containers:
                    # Init containers ran to completion: no usage to report.
                    if container.usage is None:
                        continue
                    key = SeriesKey(workload.namespace, pod, container.name)
                    found.append(
                        (key, workload, container, replica, alive_from, alive_until)
                    )
        return found

    def _workloads(
        self,
        namespace: str | None,
        workloads: Collection[tuple[str, str, str]] | None,
    ) -> list[SimWorkload]:
        """The fleet's workloads of ``namespace`` (all: None) and among ``workloads``
        (when given), in the fleet's order; looked up, not a scan of the fleet for
        each chunk of a first contact."""
        if workloads is None:
            if namespace is None:
                return list(self.fleet.workloads)
            return list(self._by_namespace.get(namespace, ()))
        fleet = self.fleet.workloads
        positions = sorted(i for key in workloads for i in self._positions.get(key, ()))
        return [
            fleet[i]
            for i in positions
            if namespace is None or fleet[i].namespace == namespace
        ]

    @cached_property
    def _by_namespace(self) -> dict[str, list[SimWorkload]]:
        by_namespace: dict[str, list[SimWorkload]] = defaultdict(list)
        for workload in self.fleet.workloads:
            by_namespace[workload.namespace].append(workload)
        return by_namespace

    @cached_property
    def _positions(self) -> dict[tuple[str, str, str], list[int]]:
        positions: dict[tuple[str, str, str], list[int]] = defaultdict(list)
        for i, workload in enumerate(self.fleet.workloads):
            positions[(workload.namespace, workload.kind, workload.name)].append(i)
        return positions

    def fetch_usage(
        self, *, namespace: str | None, start_s: float, end_s: float, step_s: float
    ) -> UsageGrid:
        """Samples with timestamps in ``(start_s, end_s]`` on a ``step_s`` grid."""
        return self._fetch(
            namespace=namespace,
            workloads=None,
            start_s=start_s,
            end_s=end_s,
            step_s=step_s,
        )

    def fetch_workload_usage(
        self,
        *,
        workloads: Collection[tuple[str, str, str]],
        start_s: float,
        end_s: float,
        step_s: float,
    ) -> UsageGrid:
        """:meth:`fetch_usage` of the given workloads ((namespace, kind, name)) only:
        a first contact reads the fleet in chunks (services/refresh/chunking.py)."""
        return self._fetch(
            namespace=None,
            workloads=frozenset(workloads),
            start_s=start_s,
            end_s=end_s,
            step_s=step_s,
        )

    def _fetch(
        self,
        *,
        namespace: str | None,
        workloads: Collection[tuple[str, str, str]] | None,
        start_s: float,
        end_s: float,
        step_s: float,
    ) -> UsageGrid:
        if not step_s > 0:
            raise ValueError(f"step_s must be positive, not {step_s}")
        if not end_s >= start_s:
            raise ValueError(f"end_s ({end_s}) must not be before start_s ({start_s})")
        first = math.floor(start_s / step_s) + 1
        last = math.floor(end_s / step_s)
        timestamp_s = np.arange(first, last + 1, dtype=np.float64) * step_s
        series = self.series_between(
            namespace=namespace, start_s=start_s, end_s=end_s, workloads=workloads
        )
        if not series or timestamp_s.size == 0:
            shape = (len(series), timestamp_s.size)
            return UsageGrid(
                tuple(s[0] for s in series),
                timestamp_s,
                np.full(shape, np.nan),
                np.full(shape, np.nan),
            )
        cpu, memory, _ = self._generate(series, timestamp_s)
        return UsageGrid(tuple(s[0] for s in series), timestamp_s, cpu, memory)

    def fetch_throttling(
        self, *, namespace: str | None, start_s: float, end_s: float
    ) -> dict[SeriesKey, tuple[float, float]]:
        """(throttled CFS periods, CFS periods) per series in ``(start_s, end_s]``, as
        cAdvisor's counters would have grown: 600 periods of 100 ms per minute alive,
        all of a minute's periods throttled when its CPU demand exceeds the limit. Only
        containers with a CPU limit have periods (cAdvisor counts none without one)."""
        first = math.floor(start_s / 60.0) + 1
        last = math.floor(end_s / 60.0)
        t = np.arange(first, last + 1, dtype=np.float64) * 60.0
        series = self.series_between(namespace=namespace, start_s=start_s, end_s=end_s)
        if not series or not t.size:
            return {}
        cpu, _, throttled = self._generate(series, t)
        out = {}
        for i, (key, _, container, *_rest) in enumerate(series):
            if container.limits.cpu_millicores is None:
                continue
            alive = np.isfinite(cpu[i])
            if not alive.any():
                continue
            out[key] = (
                CFS_PERIODS_PER_MINUTE * float(np.count_nonzero(throttled[i] & alive)),
                CFS_PERIODS_PER_MINUTE * float(np.count_nonzero(alive)),
            )
        return out

    def _generate(
        self,
        series: list[tuple[SeriesKey, SimWorkload, SimContainer, int, float, float]],
        t: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """CPU cores and memory bytes, (S, T), NaN outside each pod's life, and where
        the CPU demand exceeded the limit (throttled), bool (S, T)."""
        count = len(series)
        p = {
            name: np.empty(count)
            for name in (
                "cpu",
                "cpu_amp",
                "cpu_noise",
                "burst_p",
                "burst_f",
                "mem",
                "mem_amp",
                "leak",
                "cycle",
                "phase",
                "cpu_limit",
                "mem_limit",
                "alive_from",
                "alive_until",
            )
        }
        series_key = np.empty(count, dtype=np.uint64)
        for i, (key, _, container, replica, alive_from, alive_until) in enumerate(
            series
        ):
            usage = container.usage
            assert usage is not None  # series_between skips init containers
            series_key[i] = stable_hash(
                self.fleet.seed, key.namespace, key.pod, key.container
            )
            # Replicas differ by up to ±10 %, stable per pod.
            spread = 0.9 + 0.2 * ((int(series_key[i]) >> 11) / 2**53)
            p["cpu"][i] = usage.cpu_cores * spread
            p["cpu_amp"][i] = usage.cpu_diurnal_amplitude
            p["cpu_noise"][i] = usage.cpu_noise
            p["burst_p"][i] = usage.cpu_burst_probability
            p["burst_f"][i] = usage.cpu_burst_factor
            p["mem"][i] = usage.memory_bytes * spread
            p["mem_amp"][i] = usage.memory_diurnal_amplitude
            p["leak"][i] = usage.memory_leak_bytes_per_s
            p["cycle"][i] = usage.memory_cycle_s or math.inf
            p["phase"][i] = replica_phase(usage, replica)
            p["cpu_limit"][i] = (container.limits.cpu_millicores or math.inf) / 1000
            p["mem_limit"][i] = container.limits.memory_bytes or math.inf
            p["alive_from"][i] = alive_from
            p["alive_until"][i] = alive_until

        # Work on the alive cells only, flattened: CronJob pods live minutes of a long
        # window.
        first_col = np.searchsorted(t, p["alive_from"], side="right")
        end_col = np.searchsorted(t, p["alive_until"], side="right")
        lengths = np.maximum(end_col - first_col, 0)
        row = np.repeat(np.arange(count), lengths)
        starts = np.repeat(np.cumsum(lengths) - lengths - first_col, lengths)
        column = np.arange(row.size) - starts
        cell_t = t[column]

        def at(name: str) -> np.ndarray:
            return p[name][row]

        cell_key = series_key[row]
        day_angle = 2 * math.pi * (cell_t - at("phase")) / DAY_S
        u1, u2 = _uniform_pair(cell_key, np.floor(cell_t / 60).astype(np.int64), salt=1)
        # u1 + u2 is triangular on [0, 2]: mean 1, sd 0.408; scale to a unit sd.
        cpu_z = (u1 + u2 - 1.0) * 2.449
        # The burst draw is one per series and block: drawn once per run of a
        # series' cells in one block (cells go by series, then time), then spread.
        cell_block = np.floor(cell_t / BURST_BLOCK_S).astype(np.int64)
        new_run = np.ones(row.size, dtype=bool)
        new_run[1:] = (row[1:] != row[:-1]) | (cell_block[1:] != cell_block[:-1])
        run_start = np.flatnonzero(new_run)
        run_of = np.cumsum(new_run) - 1
        burst_run, mem_run = _uniform_pair(
            cell_key[run_start], cell_block[run_start], salt=2
        )
        burst_u, mem_u = burst_run[run_of], mem_run[run_of]
        diurnal = np.sin(day_angle)
        cpu = at("cpu") * (1 + at("cpu_amp") * diurnal)
        cpu *= np.exp(at("cpu_noise") * cpu_z)
        cpu = np.where(burst_u < at("burst_p"), cpu * at("burst_f"), cpu)
        # CPU is throttled at its limit; usage never reads below one millicore.
        over_limit = cpu > at("cpu_limit")
        cpu = np.clip(cpu, 0.001, at("cpu_limit"))

        cycle = at("cycle")
        age_in_cycle = np.where(
            np.isfinite(cycle),
            np.mod(cell_t - at("phase"), np.where(np.isfinite(cycle), cycle, 1.0)),
            0.0,
        )
        memory = at("mem") * (1 + at("mem_amp") * diurnal) + at("leak") * age_in_cycle
        # Working-set jitter of ±2 %, held for a burst block (memory moves slower than
        # CPU).
        memory *= 1 + 0.04 * (mem_u - 0.5)
        # The working set cannot pass the limit: the kernel kills the container first.
        memory = np.minimum(memory, at("mem_limit"))

        cpu_grid = np.full((count, t.size), np.nan)
        memory_grid = np.full((count, t.size), np.nan)
        throttled_grid = np.zeros((count, t.size), dtype=bool)
        cpu_grid[row, column] = cpu
        memory_grid[row, column] = memory
        throttled_grid[row, column] = over_limit
        return cpu_grid, memory_grid, throttled_grid
