"""What a usage source returns: samples on a time grid, a row per pod container.

The grid shape is what the engine ingests fastest (``SampleBatch.from_grid``). Times are
Unix seconds; CPU is in cores (a rate over the step), memory in working-set bytes; NaN
marks a gap.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from recommender.cluster.base import OomKill


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
    """Reads container usage for a cluster, and declares what else it can read.

    Every capability is declared here: a caller asks the flag, never the type. A source
    without a capability still has its method, which answers "nothing" (an empty
    answer), so a caller that ignores the flag stays correct.
    """

    # Answers for past times again (Prometheus, the simulation); metrics-server gives
    # only the current sample, which must be stored in the cycle that read it.
    keeps_history: bool
    # ``fetch_workload_usage`` reads only the chosen workloads (a first contact in
    # chunks); else it would read whole namespaces again, chunk after chunk.
    selects_workloads: bool
    # ``fetch_oom_kills`` reports the kills of the past (kube-state-metrics' series).
    keeps_oom_history: bool
    # Usage may reach it after the minutes it belongs to (Prometheus: a new workload's
    # first scrapes, a remote write behind): a container met with no sample yet waits
    # for its history (``plan.HISTORY_WAIT_S``).
    history_arrives_late: bool
    # ``fetch_throttling`` reports cAdvisor's CFS counters.
    counts_throttling: bool
    # ``instant_samples`` reads the cluster's state series (kube-state-metrics' nodes
    # and pods, OpenCost's node costs).
    reads_cluster_series: bool

    def fetch_usage(
        self, *, namespace: str | None, start_s: float, end_s: float, step_s: float
    ) -> UsageGrid:
        """Samples with timestamps in ``(start_s, end_s]`` on a ``step_s`` grid."""
        ...

    def fetch_workload_usage(
        self,
        *,
        workloads: Collection[tuple[str, str, str]],
        start_s: float,
        end_s: float,
        step_s: float,
    ) -> UsageGrid:
        """:meth:`fetch_usage` of the workloads ((namespace, kind, name)) only; with
        ``selects_workloads`` false, of every namespace (the caller filters)."""
        ...

    def fetch_oom_kills(
        self, *, namespace: str | None, start_s: float, end_s: float, step_s: float
    ) -> Sequence[OomKill]:
        """OOM kills seen in ``(start_s, end_s]``, at the grid time that saw them;
        none without ``keeps_oom_history``."""
        ...

    def has_oom_series(self, *, at_s: float) -> bool:
        """Whether the series OOM kills are found in reached the source in the hour
        before ``at_s`` (false without ``keeps_oom_history``)."""
        ...

    def fetch_throttling(
        self, *, namespace: str | None, start_s: float, end_s: float
    ) -> Mapping[SeriesKey, tuple[float, float]]:
        """(throttled CFS periods, CFS periods) per series over ``(start_s, end_s]``;
        empty without ``counts_throttling``."""
        ...

    def fetch_node_costs(self, *, at_s: float) -> list[tuple[dict[str, str], float]]:
        """OpenCost's node cost series at ``at_s`` (labels, value); empty when the
        source has none."""
        ...

    def instant_samples(
        self, names: Sequence[str], *, at_s: float
    ) -> list[tuple[dict[str, str], float]]:
        """Every series of the metrics ``names`` at ``at_s`` (labels, ``__name__``
        among them, and value); empty without ``reads_cluster_series``."""
        ...

    def close(self) -> None:
        """Release connections (nothing to do for a source without any)."""
        ...


class SourceBase:
    """What a source answers for a capability it lacks: the flags false, the methods
    empty. A source subclasses it, declares its flags and implements what it has."""

    keeps_history = False
    selects_workloads = False
    keeps_oom_history = False
    history_arrives_late = False
    counts_throttling = False
    reads_cluster_series = False

    def fetch_usage(
        self, *, namespace: str | None, start_s: float, end_s: float, step_s: float
    ) -> UsageGrid:
        """Every source reads usage."""
        raise NotImplementedError

    def fetch_workload_usage(
        self,
        *,
        workloads: Collection[tuple[str, str, str]],
        start_s: float,
        end_s: float,
        step_s: float,
    ) -> UsageGrid:
        """Without ``selects_workloads``: every namespace's usage."""
        return self.fetch_usage(
            namespace=None, start_s=start_s, end_s=end_s, step_s=step_s
        )

    def fetch_oom_kills(
        self, *, namespace: str | None, start_s: float, end_s: float, step_s: float
    ) -> Sequence[OomKill]:
        """Without ``keeps_oom_history``: none."""
        return ()

    def has_oom_series(self, *, at_s: float) -> bool:
        """Without ``keeps_oom_history``: false."""
        return False

    def fetch_throttling(
        self, *, namespace: str | None, start_s: float, end_s: float
    ) -> Mapping[SeriesKey, tuple[float, float]]:
        """Without ``counts_throttling``: none."""
        return {}

    def fetch_node_costs(self, *, at_s: float) -> list[tuple[dict[str, str], float]]:
        """No OpenCost series."""
        return []

    def instant_samples(
        self, names: Sequence[str], *, at_s: float
    ) -> list[tuple[dict[str, str], float]]:
        """Without ``reads_cluster_series``: none."""
        return []

    def close(self) -> None:
        """Nothing to release."""
