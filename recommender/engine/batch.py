"""Input batches of the aggregates (usage samples, OOM events) and ingestion counts.

Shapes: a batch names S series (``series_aggregate`` int64 (S,), ``series_keys`` (S,))
and holds n events (``series_index`` int64 (n,) into the series, ``timestamp_s``
float64 (n,) and the values (n,)). :meth:`SampleBatch.from_grid` also keeps the (S, T)
grid form, for which ingestion has a faster path. Constructors validate their arrays
and raise ``ValueError`` naming the argument.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np


def _as_array(
    value: Any, name: str, dtype: type[np.float64] | type[np.int64], ndim: int
) -> np.ndarray:
    try:
        arr: np.ndarray = np.asarray(value, dtype=dtype)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name}: {exc}") from None
    if arr.ndim != ndim:
        raise ValueError(f"{name}: expected {ndim} dimension(s), got shape {arr.shape}")
    return arr


@dataclass(frozen=True)
class SampleGrid:
    """The grid form of a :class:`SampleBatch`, kept for the fast ingestion path."""

    timestamp_s: np.ndarray  # (T,)
    cpu_cores: np.ndarray  # (S, T)
    memory_bytes: np.ndarray  # (S, T)


@dataclass(frozen=True)
class SampleBatch:
    """Usage samples for many series; NaN marks a missing CPU or memory value."""

    series_aggregate: np.ndarray  # int64 (S,)
    series_keys: Sequence[str]  # (S,)
    series_index: np.ndarray  # int64 (n,)
    timestamp_s: np.ndarray  # float64 (n,)
    cpu_cores: np.ndarray  # float64 (n,)
    memory_bytes: np.ndarray  # float64 (n,)
    grid: SampleGrid | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        sa = _as_array(self.series_aggregate, "series_aggregate", np.int64, 1)
        si = _as_array(self.series_index, "series_index", np.int64, 1)
        n = si.shape[0]
        object.__setattr__(self, "series_aggregate", sa)
        object.__setattr__(self, "series_index", si)
        for name in ("timestamp_s", "cpu_cores", "memory_bytes"):
            arr = _as_array(getattr(self, name), name, np.float64, 1)
            if arr.shape[0] != n:
                raise ValueError(
                    f"{name}: expected {n} values like series_index, got {arr.shape[0]}"
                )
            object.__setattr__(self, name, arr)
        if len(self.series_keys) != sa.shape[0]:
            raise ValueError(
                "series_keys: must have one key per series_aggregate entry"
            )
        if n and (si.min() < 0 or si.max() >= sa.shape[0]):
            raise ValueError("series_index: values must index series_aggregate")
        if n and not np.all(np.isfinite(self.timestamp_s)):
            raise ValueError("timestamp_s: must be finite")

    @classmethod
    def from_grid(
        cls,
        *,
        series_aggregate: Any,
        series_keys: Sequence[str],
        timestamp_s: Any,
        cpu_cores: Any,
        memory_bytes: Any,
    ) -> SampleBatch:
        """Build from a (S, T) grid of values at timestamps (T,), NaN for gaps."""
        ts = _as_array(timestamp_s, "timestamp_s", np.float64, 1)
        cpu = np.ascontiguousarray(_as_array(cpu_cores, "cpu_cores", np.float64, 2))
        mem = np.ascontiguousarray(
            _as_array(memory_bytes, "memory_bytes", np.float64, 2)
        )
        s = len(series_keys)
        if cpu.shape != (s, ts.shape[0]):
            raise ValueError(
                f"cpu_cores: expected shape {(s, ts.shape[0])}, got {cpu.shape}"
            )
        if mem.shape != cpu.shape:
            raise ValueError(
                f"memory_bytes: expected shape {cpu.shape}, got {mem.shape}"
            )
        return cls(
            series_aggregate=series_aggregate,
            series_keys=series_keys,
            series_index=np.repeat(np.arange(s, dtype=np.int64), ts.shape[0]),
            timestamp_s=np.tile(ts, s),
            cpu_cores=cpu.reshape(-1),
            memory_bytes=mem.reshape(-1),
            grid=SampleGrid(ts, cpu, mem),
        )


@dataclass(frozen=True)
class OomBatch:
    """OOM events: when, and the killed container's memory request (0 if none)."""

    series_aggregate: np.ndarray  # int64 (S,)
    series_keys: Sequence[str]
    series_index: np.ndarray  # int64 (n,)
    timestamp_s: np.ndarray  # float64 (n,)
    memory_request_bytes: np.ndarray  # float64 (n,)

    def __post_init__(self) -> None:
        sa = _as_array(self.series_aggregate, "series_aggregate", np.int64, 1)
        si = _as_array(self.series_index, "series_index", np.int64, 1)
        ts = _as_array(self.timestamp_s, "timestamp_s", np.float64, 1)
        req = _as_array(
            self.memory_request_bytes, "memory_request_bytes", np.float64, 1
        )
        if ts.shape != si.shape or req.shape != si.shape:
            raise ValueError(
                "timestamp_s: series_index, timestamp_s and memory_request_bytes"
                " must have one length"
            )
        if len(self.series_keys) != sa.shape[0]:
            raise ValueError(
                "series_keys: must have one key per series_aggregate entry"
            )
        if si.size and (si.min() < 0 or si.max() >= sa.shape[0]):
            raise ValueError("series_index: values must index series_aggregate")
        if not np.all(np.isfinite(ts)):
            raise ValueError("timestamp_s: must be finite")
        if np.any(~np.isfinite(req)) or np.any(req < 0):
            raise ValueError("memory_request_bytes: must be finite and >= 0")
        for name, arr in (
            ("series_aggregate", sa),
            ("series_index", si),
            ("timestamp_s", ts),
            ("memory_request_bytes", req),
        ):
            object.__setattr__(self, name, arr)


@dataclass(frozen=True)
class IngestStats:
    """Samples accepted and dropped (invalid, duplicate, out of order, too old)."""

    cpu_accepted: int = 0
    cpu_dropped: int = 0
    memory_accepted: int = 0
    memory_dropped: int = 0
    oom_accepted: int = 0
    oom_dropped: int = 0

    def __add__(self, other: IngestStats) -> IngestStats:
        return IngestStats(
            *(a + b for a, b in zip(_astuple(self), _astuple(other), strict=True))
        )


def _astuple(s: IngestStats) -> tuple[int, ...]:
    return (
        s.cpu_accepted,
        s.cpu_dropped,
        s.memory_accepted,
        s.memory_dropped,
        s.oom_accepted,
        s.oom_dropped,
    )
