"""What a usage source returns: samples on a time grid, a row per pod container.

The grid shape is what the engine ingests fastest (``SampleBatch.from_grid``). Times are
Unix seconds; CPU is in cores (a rate over the step), memory in working-set bytes; NaN
marks a gap.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np


@dataclass(frozen=True)
class SeriesKey:
    """One container of one pod."""

    namespace: str
    pod: str
    container: str


@dataclass(frozen=True)
class UsageGrid:
    """Usage of S series on T timestamps (axis 0 = series, axis 1 = time)."""

    series: tuple[SeriesKey, ...]
    timestamp_s: np.ndarray  # float64 (T,), increasing
    cpu_cores: np.ndarray  # float64 (S, T), NaN = no sample
    memory_bytes: np.ndarray  # float64 (S, T), NaN = no sample
    # Live sources only (metrics-server): when each series' one sample was taken, (S,).
    # The caller feeds a sample only if no earlier cycle could have seen it.
    observed_at_s: np.ndarray | None = None

    @classmethod
    def empty(cls) -> UsageGrid:
        """A grid with no series and no timestamps."""
        return cls((), np.zeros(0), np.zeros((0, 0)), np.zeros((0, 0)))

    def __post_init__(self) -> None:
        shape = (len(self.series), len(self.timestamp_s))
        for name in ("cpu_cores", "memory_bytes"):
            if getattr(self, name).shape != shape:
                raise ValueError(
                    f"{name} has shape {getattr(self, name).shape}, expected {shape}"
                )
        observed = self.observed_at_s
        if observed is not None and observed.shape != (len(self.series),):
            raise ValueError(
                f"observed_at_s has shape {observed.shape}, expected "
                f"({len(self.series)},)"
            )


class UsageSource(Protocol):
    """Reads container usage for a cluster."""

    def fetch_usage(
        self, *, namespace: str | None, start_s: float, end_s: float, step_s: float
    ) -> UsageGrid:
        """Samples with timestamps in ``(start_s, end_s]`` on a ``step_s`` grid."""
        ...
