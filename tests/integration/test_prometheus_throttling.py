"""CFS throttling counters read from a real Prometheus (sources/prometheus_throttling).

The history is written here as OpenMetrics (counters every minute for 8 hours) and
loaded with promtool, as tests/prometheus_support does for usage; the expected counts
are the counters' own differences over the window.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import pytest

from recommender.sources.base import SeriesKey
from recommender.sources.prometheus import PrometheusConfig, PrometheusSource
from recommender.sources.prometheus_throttling import fetch_throttling
from tests.conftest import service_missing
from tests.prometheus_support.server import (
    PrometheusServer,
    create_blocks,
    ensure_installed,
)

pytestmark = pytest.mark.integration

END_S = 1_794_960_000
HOURS = 8
WINDOW_S = 6 * 3600
# (namespace, pod, container): periods per minute, throttled periods per minute.
SERIES = {
    ("shop", "api-1", "app"): (600, 240),  # 40 % throttled
    ("shop", "api-2", "app"): (600, 30),  # 5 %
    ("jobs", "batch-1", "main"): (300, 0),  # runs half the time, never throttled
}


def _counter(name: str, increments: dict, times: list[int]) -> list[str]:
    lines = [f"# TYPE {name} counter"]
    for (ns, pod, container), step in increments.items():
        labels = f'namespace="{ns}",pod="{pod}",container="{container}"'
        lines += [
            f"{name}_total{{{labels}}} {step * i} {t}" for i, t in enumerate(times)
        ]
    return lines


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory) -> Iterator[PrometheusServer]:
    binaries = ensure_installed()
    if binaries is None:
        service_missing("prometheus and promtool (Debian package 'prometheus')")
    binary, promtool = binaries
    work = tmp_path_factory.mktemp("throttling")
    times = list(range(END_S - HOURS * 3600, END_S + 1, 60))
    text = [
        *_counter(
            "container_cpu_cfs_periods",
            {k: v[0] for k, v in SERIES.items()},
            times,
        ),
        *_counter(
            "container_cpu_cfs_throttled_periods",
            {k: v[1] for k, v in SERIES.items()},
            times,
        ),
        # A container without a CPU limit: usage, but no CFS counters.
        "# TYPE container_cpu_usage_seconds counter",
        *[
            f'container_cpu_usage_seconds_total{{namespace="shop",pod="web-1",'
            f'container="app"}} {i} {t}'
            for i, t in enumerate(times)
        ],
        "# EOF",
    ]
    exposition = work / "cfs.om"
    exposition.write_text("\n".join(text) + "\n")
    create_blocks(promtool, exposition, work / "data")
    server = PrometheusServer(binary, work / "data").start()
    try:
        yield server
    finally:
        server.stop()


def test_counts_per_container_are_the_counters_increase_over_the_window(prometheus):
    with PrometheusSource(PrometheusConfig(url=prometheus.url)) as source:
        counts = fetch_throttling(
            source, namespace=None, start_s=END_S - WINDOW_S, end_s=END_S
        )
    assert set(counts) == {SeriesKey(*key) for key in SERIES}
    minutes = WINDOW_S // 60
    for key, (periods, throttled) in SERIES.items():
        got_throttled, got_periods = counts[SeriesKey(*key)]
        assert math.isclose(got_periods, periods * minutes, rel_tol=1e-9), key
        assert math.isclose(got_throttled, throttled * minutes, rel_tol=1e-9), key


def test_a_namespace_narrows_the_answer(prometheus):
    with PrometheusSource(PrometheusConfig(url=prometheus.url)) as source:
        counts = fetch_throttling(
            source, namespace="jobs", start_s=END_S - WINDOW_S, end_s=END_S
        )
    assert set(counts) == {SeriesKey("jobs", "batch-1", "main")}
    assert counts[SeriesKey("jobs", "batch-1", "main")][0] == 0.0
