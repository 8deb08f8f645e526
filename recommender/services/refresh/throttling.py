"""The throttled share of CFS periods of the containers of a window, where needed.

Read only when some row's profile has ``throttling_boost`` > 0 and the source counts
CFS periods (Prometheus with cAdvisor, the simulated cluster): the counters' increases
over the last ``THROTTLING_WINDOW_S`` before the window's end, summed over the pods of
each container (a workload's container is one engine aggregate).
"""

from __future__ import annotations

from collections.abc import Mapping

from recommender.errors import SourceUnavailable, VpawebError
from recommender.services.refresh.ingest import Window
from recommender.sources.base import SeriesKey, UsageSource
from recommender.sources.prometheus import PrometheusSource
from recommender.sources.prometheus_throttling import fetch_throttling

# "Stays above the threshold": the ratio over the last six hours, not one scrape.
THROTTLING_WINDOW_S = 6 * 3600.0

Counts = Mapping[SeriesKey, tuple[float, float]]


def read_counts(
    source: UsageSource, *, namespace: str | None, start_s: float, end_s: float
) -> Counts | None:
    """(throttled periods, periods) per series, or None when the source has none."""
    try:
        if isinstance(source, PrometheusSource):
            return fetch_throttling(
                source, namespace=namespace, start_s=start_s, end_s=end_s
            )
        fetch = getattr(source, "fetch_throttling", None)
        if fetch is None:
            return None
        counts: Counts = fetch(namespace=namespace, start_s=start_s, end_s=end_s)
        return counts
    except VpawebError:
        raise
    except (OSError, ValueError) as exc:
        raise SourceUnavailable(f"CPU throttling counters failed: {exc}") from exc


def throttling_by_row(
    window: Window, source: UsageSource
) -> dict[int, tuple[float, float]]:
    """(throttled periods, periods) per row (``id(row)``) of the rows whose profile
    boosts on throttling; empty without such rows (no query is made) or counters."""
    wanted = [
        row
        for group in window.groups.values()
        for row in group.rows
        if row.profile.throttling_boost > 0
    ]
    if not wanted:
        return {}
    counts = read_counts(
        source,
        namespace=window.discovery.namespace,
        start_s=window.end_s - THROTTLING_WINDOW_S,
        end_s=window.end_s,
    )
    if not counts:
        return {}
    wanted_ids = {id(row) for row in wanted}
    out: dict[int, tuple[float, float]] = {}
    for key, (throttled, periods) in counts.items():
        row = window.row_of(key.namespace, key.pod, key.container)
        if row is None or id(row) not in wanted_ids:
            continue
        before = out.get(id(row), (0.0, 0.0))
        out[id(row)] = (before[0] + throttled, before[1] + periods)
    return out
