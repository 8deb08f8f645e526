"""Hourly usage of containers, for the workload page's chart: per (key, hour) the peak,
sum and count of the one-minute samples of all the key's series (a container's pods).

``HourlyUsage`` holds n entries: key int64 (n,) (the caller's id, a container's),
ends_s float64 (n,) (the hour's end: it covers samples at times in (ends_s - 3600,
ends_s]), cpu_max/memory_max float64 (NaN: no sample), cpu_sum/memory_sum float64,
cpu_count/memory_count int64. Sums and counts add and peaks take the larger, so parts
of an hour read in different windows merge (``merged``) to what one read would give.
``hourly_usage`` takes a grid: axis 0 = series, axis 1 = time, NaN = no sample.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

HOUR_S = 3600.0


@dataclass(frozen=True)
class HourlyUsage:
    """Usage per (key, hour), one entry per pair; see the module docstring."""

    key: np.ndarray
    ends_s: np.ndarray
    cpu_max: np.ndarray
    cpu_sum: np.ndarray
    cpu_count: np.ndarray
    memory_max: np.ndarray
    memory_sum: np.ndarray
    memory_count: np.ndarray

    @classmethod
    def empty(cls) -> HourlyUsage:
        """No entries."""
        floats, ints = np.zeros(0), np.zeros(0, dtype=np.int64)
        return cls(ints, floats, floats, floats, ints, floats, floats, ints)

    def __len__(self) -> int:
        return int(self.key.size)

    def select(self, mask: np.ndarray) -> HourlyUsage:
        """The entries where ``mask`` (bool (n,)) is true."""
        return HourlyUsage(*(getattr(self, name)[mask] for name in _FIELDS))

    def of_keys(self, keys: Sequence[int] | np.ndarray) -> HourlyUsage:
        """The entries of these keys."""
        return self.select(np.isin(self.key, np.asarray(keys, dtype=np.int64)))


_FIELDS = (
    "key",
    "ends_s",
    "cpu_max",
    "cpu_sum",
    "cpu_count",
    "memory_max",
    "memory_sum",
    "memory_count",
)


def hour_end_s(timestamp_s: np.ndarray) -> np.ndarray:
    """The end of the hour each time falls in: (end - 3600, end]."""
    return np.ceil(np.asarray(timestamp_s, dtype=np.float64) / HOUR_S) * HOUR_S


def hourly_usage(
    *,
    series_key: np.ndarray,
    timestamp_s: np.ndarray,
    cpu_cores: np.ndarray,
    memory_bytes: np.ndarray,
) -> HourlyUsage:
    """Usage per (key, hour) of a grid: ``series_key`` int64 (S,) names each series'
    key, ``timestamp_s`` (T,) increasing, values (S, T) with NaN for no sample. Only
    pairs with at least one sample get an entry."""
    series_key = np.asarray(series_key, dtype=np.int64)
    timestamp_s = np.asarray(timestamp_s, dtype=np.float64)
    shape = (series_key.size, timestamp_s.size)
    if cpu_cores.shape != shape or memory_bytes.shape != shape:
        raise ValueError(
            f"cpu_cores {cpu_cores.shape} and memory_bytes {memory_bytes.shape} must "
            f"be (series, time) = {shape}"
        )
    if not series_key.size or not timestamp_s.size:
        return HourlyUsage.empty()
    ends = hour_end_s(timestamp_s)
    if np.any(np.diff(ends) < 0):
        raise ValueError("timestamp_s must be increasing")
    # Columns of one hour are contiguous: reduce each run of them, then the rows of
    # one key (series sorted by key).
    cols = np.concatenate(([0], np.flatnonzero(np.diff(ends)) + 1))
    order = np.argsort(series_key, kind="stable")
    keys = series_key[order]
    rows = np.concatenate(([0], np.flatnonzero(np.diff(keys)) + 1))
    reduced = {}
    for name, values in (("cpu", cpu_cores), ("memory", memory_bytes)):
        values = np.asarray(values, dtype=np.float64)[order]
        missing = np.isnan(values)
        peak = np.fmax.reduceat(np.fmax.reduceat(values, cols, axis=1), rows, axis=0)
        total = np.add.reduceat(
            np.add.reduceat(np.where(missing, 0.0, values), cols, axis=1), rows, axis=0
        )
        count = np.add.reduceat(
            np.add.reduceat((~missing).astype(np.int64), cols, axis=1), rows, axis=0
        )
        reduced[name] = (peak, total, count)
    has = (reduced["cpu"][2] > 0) | (reduced["memory"][2] > 0)  # (K, H)
    k_index, h_index = np.nonzero(has)
    return HourlyUsage(
        key=keys[rows][k_index],
        ends_s=ends[cols][h_index],
        cpu_max=reduced["cpu"][0][has],
        cpu_sum=reduced["cpu"][1][has],
        cpu_count=reduced["cpu"][2][has],
        memory_max=reduced["memory"][0][has],
        memory_sum=reduced["memory"][1][has],
        memory_count=reduced["memory"][2][has],
    )


def merged(parts: Sequence[HourlyUsage]) -> HourlyUsage:
    """The parts as one, an entry per (key, hour): sums and counts added, the larger
    peak kept. Entries come out sorted by key, then hour."""
    parts = [p for p in parts if len(p)]
    if not parts:
        return HourlyUsage.empty()
    whole = HourlyUsage(
        *(np.concatenate([getattr(p, name) for p in parts]) for name in _FIELDS)
    )
    order = np.lexsort((whole.ends_s, whole.key))
    key, ends = whole.key[order], whole.ends_s[order]
    new = np.ones(key.size, dtype=bool)
    new[1:] = (key[1:] != key[:-1]) | (ends[1:] != ends[:-1])
    starts = np.flatnonzero(new)

    def reduce(name: str, ufunc: np.ufunc) -> np.ndarray:
        values: np.ndarray = ufunc.reduceat(getattr(whole, name)[order], starts)
        return values

    return HourlyUsage(
        key=key[starts],
        ends_s=ends[starts],
        cpu_max=reduce("cpu_max", np.fmax),
        cpu_sum=reduce("cpu_sum", np.add),
        cpu_count=reduce("cpu_count", np.add),
        memory_max=reduce("memory_max", np.fmax),
        memory_sum=reduce("memory_sum", np.add),
        memory_count=reduce("memory_count", np.add),
    )
