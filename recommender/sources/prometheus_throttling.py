"""cAdvisor's CFS throttling counters from Prometheus, per container.

``container_cpu_cfs_periods_total`` counts the 100 ms CFS periods in which a container
with a CPU limit had runnable tasks, ``container_cpu_cfs_throttled_periods_total`` those
in which its quota ran out. Their increases over a window give the throttled share of
periods that ``engine/throttling.py`` judges. A container without a CPU limit has no
such series, and so no ratio.
"""

from __future__ import annotations

import math

from recommender.errors import SourceUnavailable
from recommender.sources.base import SeriesKey
from recommender.sources.prometheus import PrometheusSource, _duration, _format_time
from recommender.sources.prometheus_answers import result_list, short

PERIODS_METRIC = "container_cpu_cfs_periods_total"
THROTTLED_METRIC = "container_cpu_cfs_throttled_periods_total"


def throttling_query(
    source: PrometheusSource, metric: str, *, namespace: str | None, range_s: float
) -> str:
    """PromQL of a CFS counter's increase per container over ``range_s``."""
    selector = source._selector(
        namespace=namespace, extra=source.config.cadvisor_selector, matcher=""
    )
    return f"max {source._by()} (increase({metric}{selector}[{_duration(range_s)}]))"


def fetch_throttling(
    source: PrometheusSource, *, namespace: str | None, start_s: float, end_s: float
) -> dict[SeriesKey, tuple[float, float]]:
    """(throttled periods, periods) per container over ``(start_s, end_s]``; only
    containers with both counters (a CPU limit) are present."""
    range_s = end_s - start_s
    if not range_s > 0:
        return {}
    counts = [
        _vector(
            source,
            throttling_query(source, m, namespace=namespace, range_s=range_s),
            end_s,
        )
        for m in (THROTTLED_METRIC, PERIODS_METRIC)
    ]
    throttled, periods = counts
    return {
        key: (throttled[key], periods[key])
        for key in periods
        if key in throttled and periods[key] > 0
    }


def _vector(
    source: PrometheusSource, query: str, at_s: float
) -> dict[SeriesKey, float]:
    body = source._post(
        "query", {"query": query, "time": _format_time(at_s)}, query=query
    )
    c = source.config
    out: dict[SeriesKey, float] = {}
    for item in result_list(body, query=query, result_type="vector"):
        metric = item.get("metric") if isinstance(item, dict) else None
        value = item.get("value") if isinstance(item, dict) else None
        if (
            not isinstance(metric, dict)
            or not isinstance(value, list)
            or len(value) != 2
        ):
            raise SourceUnavailable(
                f"Prometheus answered an item without metric or value to {short(query)}"
            )
        try:
            number = float(value[1])
        except (TypeError, ValueError):
            raise SourceUnavailable(
                f"Prometheus answered a value that is not a number to {short(query)}"
            ) from None
        if not math.isfinite(number):
            continue
        key = SeriesKey(
            str(metric.get(c.namespace_label, "")),
            str(metric.get(c.pod_label, "")),
            str(metric.get(c.container_label, "")),
        )
        out[key] = number
    return out
