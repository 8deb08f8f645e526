"""The throttled share of CFS periods of a window's containers, read with its usage.

Read only when some row's profile has ``throttling_boost`` > 0 and the source counts
CFS periods (``UsageSource.counts_throttling``: Prometheus with cAdvisor, the simulated
cluster): the counters' increases over the last ``THROTTLING_WINDOW_S`` before the
window's end, summed over the pods of each container (a workload's container is one
engine aggregate), kept on the row (``Row.throttling``) for the recommend step.
"""

from __future__ import annotations

from collections.abc import Mapping

from recommender.errors import SourceUnavailable, VpawebError
from recommender.services.refresh.ingest import Window
from recommender.sources.base import SeriesKey, UsageSource

# "Stays above the threshold": the ratio over the last six hours, not one scrape.
THROTTLING_WINDOW_S = 6 * 3600.0

Counts = Mapping[SeriesKey, tuple[float, float]]


def read_counts(
    source: UsageSource, *, namespace: str | None, start_s: float, end_s: float
) -> Counts | None:
    """(throttled periods, periods) per series, or None when the source has none."""
    if not source.counts_throttling:
        return None
    try:
        return source.fetch_throttling(
            namespace=namespace, start_s=start_s, end_s=end_s
        )
    except VpawebError:
        raise
    except (OSError, ValueError) as exc:
        raise SourceUnavailable(f"CPU throttling counters failed: {exc}") from exc


def attach_throttling(window: Window, source: UsageSource) -> None:
    """Give each row whose profile boosts on throttling its (throttled periods,
    periods); no query is made without such rows, and rows stay without counts when
    the source has none."""
    wanted = [
        row
        for group in window.groups.values()
        for row in group.rows
        if row.profile.throttling_boost > 0
    ]
    if not wanted:
        return
    counts = read_counts(
        source,
        namespace=window.discovery.namespace,
        start_s=window.end_s - THROTTLING_WINDOW_S,
        end_s=window.end_s,
    )
    if not counts:
        return
    wanted_ids = {id(row) for row in wanted}
    for key, (throttled, periods) in counts.items():
        row = window.row_of(key.namespace, key.pod, key.container)
        if row is None or id(row) not in wanted_ids:
            continue
        before = row.throttling or (0.0, 0.0)
        row.throttling = (before[0] + throttled, before[1] + periods)
