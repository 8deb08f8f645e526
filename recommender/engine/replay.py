"""Replay: what a profile would have recommended over recorded usage, hour by hour."""
# A :class:`Trace` holds C containers (engine aggregates) with S series (pods) and n
# samples, flat: ``series_index`` int64 (n,), ``timestamp_s`` / ``cpu_cores`` /
# ``memory_bytes`` float64 (n,) (NaN = no signal), ``series_container`` int64 (S,); and
# k OOM kills (``oom_*`` arrays (k,)). :func:`replay` feeds the samples through
# :func:`~recommender.engine.feed.feed` in time order and recomputes every container's
# recommendation at the moments ``T0 + j * every_s`` (``T0`` = the first sample's time
# rounded down to ``every_s``) from the samples *before* each moment. The result, a
# :class:`Timeline`, holds (J + 1, C) arrays of targets and bounds, row 0 being "no
# recommendation yet" (NaN); a sample at time t is judged against row ``floor((t - T0) /
# every_s)``, the recommendation in force when it was taken.
#
# Containers are vectorised: one :class:`AggregateSet` per histogram key, one
# ``recommendation_arrays`` call per moment and profile. The metrics live in
# ``replay_scores.py``.

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .aggregation import AggregateSet
from .batch import OomBatch, SampleBatch
from .estimator import recommendation_arrays
from .feed import feed
from .profiles import Profile
from .resources import CPU, MEMORY

# The Autopilot paper's and upstream's cadence: one recommendation per hour of trace.
DEFAULT_EVERY_S = 3600.0
# Skip the first day of each container: the recommendation has not settled yet.
DEFAULT_WARMUP_S = 86400.0
BOUNDS = ("target", "lower", "upper")


def _float_array(value: object, name: str, n: int | None = None) -> np.ndarray:
    arr = np.asarray(value, dtype=np.float64)
    if arr.ndim != 1 or (n is not None and arr.shape[0] != n):
        raise ValueError(f"{name}: expected one value per sample, got {arr.shape}")
    return arr


@dataclass(frozen=True)
class Trace:
    """Usage of C containers (see the module docstring for the arrays)."""

    container_ids: Sequence[str]  # (C,)
    series_container: np.ndarray  # int64 (S,)
    series_keys: Sequence[str]  # (S,)
    series_index: np.ndarray  # int64 (n,)
    timestamp_s: np.ndarray  # float64 (n,)
    cpu_cores: np.ndarray  # float64 (n,)
    memory_bytes: np.ndarray  # float64 (n,)
    containers_in_pod: np.ndarray | None = None  # int64 (C,), default 1
    oom_series_index: np.ndarray = field(
        default_factory=lambda: np.zeros(0, dtype=np.int64)
    )
    oom_timestamp_s: np.ndarray = field(default_factory=lambda: np.zeros(0))
    oom_memory_request_bytes: np.ndarray = field(default_factory=lambda: np.zeros(0))

    def __post_init__(self) -> None:
        c = len(self.container_ids)
        sc = np.asarray(self.series_container, dtype=np.int64)
        if sc.ndim != 1 or len(self.series_keys) != sc.shape[0]:
            raise ValueError("series_keys: must have one key per series_container")
        if sc.size and (sc.min() < 0 or sc.max() >= c):
            raise ValueError("series_container: values must index container_ids")
        si = np.asarray(self.series_index, dtype=np.int64)
        if si.ndim != 1:
            raise ValueError("series_index: expected one dimension")
        if si.size and (si.min() < 0 or si.max() >= sc.shape[0]):
            raise ValueError("series_index: values must index series_container")
        n = si.shape[0]
        ts = _float_array(self.timestamp_s, "timestamp_s", n)
        if not np.all(np.isfinite(ts)):
            raise ValueError("timestamp_s: must be finite")
        cip = (
            np.ones(c, dtype=np.int64)
            if self.containers_in_pod is None
            else np.asarray(self.containers_in_pod, dtype=np.int64)
        )
        if cip.shape != (c,) or (c and cip.min() < 1):
            raise ValueError("containers_in_pod: one value >= 1 per container")
        oi = np.asarray(self.oom_series_index, dtype=np.int64)
        if oi.size and (oi.min() < 0 or oi.max() >= sc.shape[0]):
            raise ValueError("oom_series_index: values must index series_container")
        k = oi.shape[0]
        for name, value in (
            ("series_container", sc),
            ("series_index", si),
            ("timestamp_s", ts),
            ("cpu_cores", _float_array(self.cpu_cores, "cpu_cores", n)),
            ("memory_bytes", _float_array(self.memory_bytes, "memory_bytes", n)),
            ("containers_in_pod", cip),
            ("oom_series_index", oi),
            (
                "oom_timestamp_s",
                _float_array(self.oom_timestamp_s, "oom_timestamp_s", k),
            ),
            (
                "oom_memory_request_bytes",
                _float_array(
                    self.oom_memory_request_bytes, "oom_memory_request_bytes", k
                ),
            ),
        ):
            object.__setattr__(self, name, value)

    @property
    def container_index(self) -> np.ndarray:
        """The container of every sample, int64 (n,)."""
        out: np.ndarray = self.series_container[self.series_index]
        return out

    def first_sample_s(self) -> np.ndarray:
        """Each container's first sample time (NaN for a container without samples)."""
        out = np.full(len(self.container_ids), np.inf)
        np.minimum.at(out, self.container_index, self.timestamp_s)
        return np.where(np.isinf(out), np.nan, out)


@dataclass(frozen=True)
class Timeline:
    """One profile's recommendations over a trace: arrays (J + 1, C), row 0 = none.

    ``values[(resource, bound)]``: CPU in millicores, memory in bytes, float64 (NaN
    where no recommendation was in force).
    """

    profile: Profile
    start_s: float  # T0
    every_s: float
    values: dict[tuple[str, str], np.ndarray]

    @property
    def moments_s(self) -> np.ndarray:
        """The recompute moments (J,): row j was computed at ``moments_s[j - 1]``."""
        rows = next(iter(self.values.values())).shape[0]
        return self.start_s + self.every_s * np.arange(1, rows)

    def row_of(self, timestamp_s: np.ndarray) -> np.ndarray:
        """The row in force at each time (0 = before the first recompute)."""
        rows = next(iter(self.values.values())).shape[0]
        j = np.floor((timestamp_s - self.start_s) / self.every_s).astype(np.int64)
        return np.clip(j, 0, rows - 1)


Progress = Callable[[int, int], None]


def replay(
    trace: Trace,
    profiles: Sequence[Profile],
    *,
    every_s: float = DEFAULT_EVERY_S,
    progress: Progress | None = None,
) -> list[Timeline]:
    """Each profile's hourly (``every_s``) recommendations over the trace."""
    if not (every_s > 0 and math.isfinite(every_s)):
        raise ValueError(
            f"every_s: must be a positive number of seconds, not {every_s}"
        )
    if not profiles:
        raise ValueError("profiles: at least one profile is needed")
    for p in profiles:
        if not isinstance(p, Profile):
            raise ValueError("profiles: must be Profile objects")
    c = len(trace.container_ids)
    ts = trace.timestamp_s
    if ts.size == 0:
        raise ValueError("trace: has no samples")
    start_s = math.floor(float(ts.min()) / every_s) * every_s
    n_moments = math.floor((float(ts.max()) - start_s) / every_s)
    # Stable time order: the samples of one time keep the trace's order.
    order = np.argsort(ts, kind="stable")
    sorted_ts = ts[order]
    oom_order = np.argsort(trace.oom_timestamp_s, kind="stable")
    oom_ts = trace.oom_timestamp_s[oom_order]
    groups: dict[tuple[float, float, float], list[int]] = {}
    for i, p in enumerate(profiles):
        groups.setdefault(p.histogram_key, []).append(i)
    aggregates = {
        key: AggregateSet.empty(profiles[members[0]], c)
        for key, members in groups.items()
    }
    values = [
        {
            (res, bound): np.full((n_moments + 1, c), np.nan)
            for res in (CPU, MEMORY)
            for bound in BOUNDS
        }
        for _ in profiles
    ]
    all_rows = np.arange(c, dtype=np.int64)
    rows = all_rows.tolist()
    cip = np.asarray(trace.containers_in_pod).tolist()
    series_keys = list(trace.series_keys)
    done = oom_done = 0
    for j in range(1, n_moments + 1):
        moment = start_s + j * every_s
        upto = int(np.searchsorted(sorted_ts, moment, side="left"))
        oom_upto = int(np.searchsorted(oom_ts, moment, side="left"))
        pick = order[done:upto]
        samples = SampleBatch(
            series_aggregate=trace.series_container,
            series_keys=series_keys,
            series_index=trace.series_index[pick],
            timestamp_s=ts[pick],
            cpu_cores=trace.cpu_cores[pick],
            memory_bytes=trace.memory_bytes[pick],
        )
        ooms = None
        if oom_upto > oom_done:
            opick = oom_order[oom_done:oom_upto]
            ooms = OomBatch(
                series_aggregate=trace.series_container,
                series_keys=series_keys,
                series_index=trace.oom_series_index[opick],
                timestamp_s=trace.oom_timestamp_s[opick],
                memory_request_bytes=trace.oom_memory_request_bytes[opick],
            )
        done, oom_done = upto, oom_upto
        for key, members in groups.items():
            agg = aggregates[key]
            feed(agg, samples, ooms)
            # Upstream recommends nothing for a container without samples.
            has_data = (agg.total_samples > 0) | ~agg.memory.is_empty(all_rows)
            # The group's profiles read the same histograms: a percentile once.
            read: dict[Any, np.ndarray] = {}
            for i in members:
                chains = recommendation_arrays(
                    agg,
                    rows=rows,
                    profile=profiles[i],
                    containers_in_pod=cip,
                    percentiles=read,
                )
                for res in (CPU, MEMORY):
                    chain = chains[res]
                    out = values[i]
                    for bound, arrays in zip(
                        BOUNDS,
                        (chain.target, chain.lower_bound, chain.upper_bound),
                        strict=True,
                    ):
                        out[res, bound][j] = np.where(has_data, arrays.value, np.nan)
        if progress is not None:
            progress(j, n_moments)
    return [
        Timeline(profile=p, start_s=start_s, every_s=every_s, values=values[i])
        for i, p in enumerate(profiles)
    ]
