"""The metrics-server usage source against the fake API server (PodMetrics)."""

from __future__ import annotations

import copy
from datetime import UTC, datetime

import numpy as np
import pytest

from recommender.errors import SourceUnavailable
from recommender.sources.base import SeriesKey
from recommender.sources.metrics_server import CACHE_S, MetricsServerSource
from tests.k8s_fake.plugin import FAST, api_server, kubeconfig
from tests.k8s_fake.server import load_fixtures

__all__ = ["api_server", "kubeconfig"]  # fixtures, for pytest

STEP_S = 60.0
KI = 1024
MI = 2**20


def at(hour: int, minute: int, second: int = 0) -> float:
    return datetime(2026, 11, 20, hour, minute, second, tzinfo=UTC).timestamp()


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def source(kubeconfig, clock):
    source = MetricsServerSource(
        cluster_name="fake",
        context="fake",
        kubeconfig=str(kubeconfig),
        settings=FAST,
        clock=clock,
    )
    yield source
    source.close()


def test_the_current_sample_of_each_container_in_one_column(source):
    grid = source.fetch_usage(
        namespace=None, start_s=at(9, 59), end_s=at(10, 1), step_s=STEP_S
    )

    # Scraped at 10:00:05 and 10:00:17: both in the step ending 10:01.
    assert grid.timestamp_s.tolist() == [at(10, 1)]
    rows = {key: i for i, key in enumerate(grid.series)}
    assert set(rows) == {
        SeriesKey("shop", "web-7d9f8b6c5d-x2k4p", "app"),
        SeriesKey("shop", "web-7d9f8b6c5d-x2k4p", "log-shipper"),
        SeriesKey("shop", "web-7d9f8b6c5d-q8m2z", "app"),
        SeriesKey("shop", "web-7d9f8b6c5d-q8m2z", "log-shipper"),
        SeriesKey("shop", "db-0", "postgres"),
        SeriesKey("monitoring", "node-exporter-k7tq2", "exporter"),
        SeriesKey("monitoring", "node-exporter-m3wz8", "exporter"),
        SeriesKey("shop", "old-frontend-2xq8t", "nginx"),
    }
    app = rows[SeriesKey("shop", "web-7d9f8b6c5d-x2k4p", "app")]
    # 212345678n is 213m as MilliValue() rounds up; memory is exact.
    assert grid.cpu_cores[app, 0] == 0.213
    assert grid.memory_bytes[app, 0] == 301234 * KI
    # Each sample keeps its own time, for the caller's exactly-once check.
    assert grid.observed_at_s is not None
    assert grid.observed_at_s[app] == at(10, 0, 5)
    assert grid.observed_at_s[rows[SeriesKey("shop", "db-0", "postgres")]] == at(
        10, 0, 17
    )
    nginx = rows[SeriesKey("shop", "old-frontend-2xq8t", "nginx")]
    assert (grid.cpu_cores[nginx, 0], grid.memory_bytes[nginx, 0]) == (0.001, 12 * MI)


def test_plain_init_containers_are_dropped_and_sidecars_kept(source):
    grid = source.fetch_usage(
        namespace="shop", start_s=at(9, 59), end_s=at(10, 1), step_s=STEP_S
    )

    containers = {(k.pod, k.container) for k in grid.series}
    # The Pending pod's running "migrate" init container gives no sample.
    assert not any(pod == "web-7d9f8b6c5d-z9n3k" for pod, _ in containers)
    assert ("web-7d9f8b6c5d-q8m2z", "log-shipper") in containers


def test_samples_since_the_last_boundary_land_on_the_window_end(source, clock):
    # A refresh at about 10:00:30: its window ends at the 10:00 boundary.
    first = source.fetch_usage(
        namespace=None, start_s=at(9, 50), end_s=at(10, 0), step_s=STEP_S
    )
    clock.now += CACHE_S + 1
    second = source.fetch_usage(
        namespace=None, start_s=at(10, 0), end_s=at(10, 1), step_s=STEP_S
    )

    # legacy-cache was scraped at 09:58:05 (step ending 09:59); the others at
    # 10:00:05 and 10:00:17, after the boundary: on 10:00, not left for later.
    legacy = SeriesKey("shop", "legacy-cache-9gq7w", "memcached")
    assert first.timestamp_s.tolist() == [at(9, 59), at(10, 0)]
    row = first.series.index(legacy)
    assert np.isnan(first.cpu_cores[row, 1])
    assert first.cpu_cores[row, 0] == 0.003
    assert len(first.series) == 9  # eight containers and legacy-cache
    # Not scraped again: the next window offers the same samples with the same
    # times (legacy-cache's step is before it), so the caller can skip them.
    assert legacy not in second.series
    assert second.observed_at_s is not None and first.observed_at_s is not None
    again = dict(zip(second.series, second.observed_at_s.tolist(), strict=True))
    before = dict(zip(first.series, first.observed_at_s.tolist(), strict=True))
    assert again == {key: t for key, t in before.items() if key != legacy}


def test_pods_scraped_across_a_step_boundary_give_two_columns(api_server, source):
    late = copy.deepcopy(
        next(o for o in load_fixtures("podmetrics") if o["metadata"]["name"] == "db-0")
    )
    api_server.remove("PodMetrics", "shop", "db-0")
    late["timestamp"] = "2026-11-20T10:01:02Z"
    api_server.add(late)

    grid = source.fetch_usage(
        namespace=None, start_s=at(9, 59), end_s=at(10, 2), step_s=STEP_S
    )

    assert grid.timestamp_s.tolist() == [at(10, 1), at(10, 2)]
    db = grid.series.index(SeriesKey("shop", "db-0", "postgres"))
    assert np.isnan(grid.cpu_cores[db, 0])
    assert grid.cpu_cores[db, 1] == 0.412
    assert np.isnan(grid.memory_bytes).sum() == len(grid.series)


def test_the_chunks_of_one_pass_share_one_read(api_server, source, clock):
    for day in range(3):
        source.fetch_usage(
            namespace=None,
            start_s=at(10, 0) - (3 - day) * 86400,
            end_s=at(10, 0) - (2 - day) * 86400,
            step_s=STEP_S,
        )
    assert list_starts(api_server) == 1

    clock.now += CACHE_S
    source.fetch_usage(namespace=None, start_s=at(9, 0), end_s=at(10, 0), step_s=STEP_S)
    assert list_starts(api_server) == 2


def list_starts(api_server) -> int:
    """PodMetrics lists begun (first pages: 8 items at 3 a page take 3 requests)."""
    pages = api_server.gets("/apis/metrics.k8s.io/v1beta1/pods")
    return sum("continue" not in page.query for page in pages)


def test_a_namespace_reads_only_that_namespace(api_server, source):
    grid = source.fetch_usage(
        namespace="monitoring", start_s=at(9, 59), end_s=at(10, 1), step_s=STEP_S
    )

    assert {k.namespace for k in grid.series} == {"monitoring"}
    assert api_server.gets("/apis/metrics.k8s.io/v1beta1/namespaces/monitoring/pods")
    assert all("/namespaces/monitoring/" in r.path for r in api_server.requests)


def test_without_metrics_server_the_error_says_so(api_server, source):
    api_server.unserve("metrics.k8s.io")

    with pytest.raises(SourceUnavailable) as caught:
        source.fetch_usage(
            namespace=None, start_s=at(9, 59), end_s=at(10, 1), step_s=STEP_S
        )

    assert caught.value.message == (
        "cluster 'fake': metrics.k8s.io/v1beta1 is not served: is metrics-server "
        "installed?"
    )


def test_a_bad_window_is_refused(source):
    with pytest.raises(ValueError, match="end_s"):
        source.fetch_usage(namespace=None, start_s=10.0, end_s=10.0, step_s=STEP_S)
    with pytest.raises(ValueError, match="step_s"):
        source.fetch_usage(namespace=None, start_s=0.0, end_s=10.0, step_s=0.0)


def test_a_malformed_usage_skips_only_that_container(api_server, source):
    broken = copy.deepcopy(
        next(o for o in load_fixtures("podmetrics") if o["metadata"]["name"] == "db-0")
    )
    api_server.remove("PodMetrics", "shop", "db-0")
    broken["containers"][0]["usage"]["memory"] = "a lot"
    api_server.add(broken)

    grid = source.fetch_usage(
        namespace=None, start_s=at(9, 59), end_s=at(10, 1), step_s=STEP_S
    )

    assert SeriesKey("shop", "db-0", "postgres") not in grid.series
    assert len(grid.series) == 7
