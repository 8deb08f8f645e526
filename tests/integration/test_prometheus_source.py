"""The Prometheus source against a real Prometheus loaded with 8 days of history.

The expected values are derived from the raw samples the generator wrote
(tests/prometheus_support/openmetrics.py), not from vpaweb's code.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from recommender.errors import SourceUnavailable
from recommender.sources.base import SeriesKey
from recommender.sources.prometheus import PrometheusConfig, PrometheusSource
from tests.prometheus_support.fixtures import prometheus_with_history
from tests.prometheus_support.openmetrics import expected_ooms, expected_usage

pytestmark = pytest.mark.integration
__all__ = ["prometheus_with_history"]  # the fixture, imported for pytest

STEP = 60


def source_for(loaded, **overrides) -> PrometheusSource:
    return PrometheusSource(PrometheusConfig(url=loaded.url, **overrides))


def expected_grid(loaded, *, start_s: int, end_s: int, namespace: str | None = None):
    rows = expected_usage(loaded.specs, start_s=start_s, end_s=end_s)
    if namespace is not None:
        rows = [row for row in rows if row.namespace == namespace]
    keys = sorted({SeriesKey(r.namespace, r.pod, r.container) for r in rows},
                  key=lambda k: (k.namespace, k.pod, k.container))  # fmt: skip
    times = np.arange(start_s + STEP, end_s + 1, STEP, dtype=float)
    cpu = np.full((len(keys), len(times)), np.nan)
    memory = np.full((len(keys), len(times)), np.nan)
    index = {key: i for i, key in enumerate(keys)}
    for row in rows:
        i = index[SeriesKey(row.namespace, row.pod, row.container)]
        j = (row.timestamp_s - start_s) // STEP - 1
        cpu[i, j] = row.cpu_cores
        memory[i, j] = row.memory_bytes
    return tuple(keys), times, cpu, memory


def test_eight_days_at_one_minute_match_the_raw_samples_exactly(
    prometheus_with_history,
):
    loaded = prometheus_with_history
    with source_for(loaded, concurrency=2) as source:
        usage = source.fetch_usage(
            namespace=None, start_s=loaded.start_s, end_s=loaded.end_s, step_s=STEP
        )
        queries = source.stats.queries
    keys, times, cpu, memory = expected_grid(
        loaded, start_s=loaded.start_s, end_s=loaded.end_s
    )
    assert usage.series == keys
    assert len(usage.series) == 6
    np.testing.assert_array_equal(usage.timestamp_s, times)
    assert len(times) == 8 * 1440  # more than one query may return: chunked
    assert queries == 4
    # Exact equality: rate() over aligned scrapes divides the same exact increments.
    np.testing.assert_array_equal(usage.cpu_cores, cpu)
    np.testing.assert_array_equal(usage.memory_bytes, memory)


@pytest.mark.parametrize(
    ("step_s", "rate_window_s", "offset_s"),
    [
        (60, 60, 0),  # the back-fill's grid: windows tile, no extrapolation
        (60, 150, 0),  # overlapping windows of 3 scrapes, extrapolated
        (90, 60, 30),  # windows holding 1 or 2 scrapes, extrapolated to the ends
        (300, 60, 0),  # 5 scrapes per window; peaks of 5 scrapes
        (45, 60, 15),  # a step shorter than the scrape interval
    ],
)
def test_usage_equals_prometheus_own_evaluation_of_the_promql_exactly(
    prometheus_with_history, step_s, rate_window_s, offset_s
):
    # fetch_usage computes rate() and max_over_time() itself from stored samples;
    # Prometheus' own evaluation of the documented PromQL on the same grid must give
    # the same numbers bit for bit: over the OOM restart (a counter reset), the pod
    # that vanished and its successor, and the start of the history.
    loaded = prometheus_with_history
    (db,) = [s for s in loaded.specs if s.oom_at_s is not None]
    old, new = (s for s in loaded.specs if s.workload == "worker")
    windows = [
        (db.oom_at_s - 3 * 3600, db.oom_at_s + 3 * 3600),
        (old.end_s - 3 * 3600, new.start_s + 3 * 3600),
        (loaded.start_s - 3600, loaded.start_s + 3 * 3600),
    ]
    with source_for(loaded, rate_window_s=rate_window_s) as source:
        for start_s, end_s in windows:
            start_s += offset_s
            usage = source.fetch_usage(
                namespace=None, start_s=start_s, end_s=end_s, step_s=step_s
            )
            cpu, memory = (
                source.query_range(query, times=usage.timestamp_s, step_s=step_s)
                for query in (
                    source.cpu_query(namespace=None, step_s=step_s),
                    source.memory_query(namespace=None, step_s=step_s),
                )
            )
            assert len(usage.series) >= 3
            for matrix, got in ((cpu, usage.cpu_cores), (memory, usage.memory_bytes)):
                assert set(matrix.series) <= set(usage.series)
                expected = np.full_like(got, np.nan)
                for row, key in enumerate(matrix.series):
                    expected[usage.series.index(key)] = matrix.values[row]
                assert np.isfinite(expected).sum() > 100
                np.testing.assert_array_equal(got, expected)


def test_the_counter_reset_at_an_oom_restart_is_not_a_negative_rate(
    prometheus_with_history,
):
    loaded = prometheus_with_history
    (db,) = [s for s in loaded.specs if s.oom_at_s is not None]
    with source_for(loaded) as source:
        usage = source.fetch_usage(
            namespace="shop",
            start_s=db.oom_at_s - 180,
            end_s=db.oom_at_s + 120,
            step_s=STEP,
        )
    row = usage.series.index(SeriesKey("shop", "db-0", "postgres"))
    assert np.all(usage.cpu_cores[row] > 0)
    assert np.all(usage.cpu_cores[row] < 5)


def test_the_vanished_pod_is_nan_after_it_ended_and_its_successor_before(
    prometheus_with_history,
):
    loaded = prometheus_with_history
    old, new = (s for s in loaded.specs if s.workload == "worker")
    with source_for(loaded) as source:
        usage = source.fetch_usage(
            namespace="batch",
            start_s=old.end_s - 300,
            end_s=new.start_s + 300,
            step_s=STEP,
        )
    old_row = usage.series.index(SeriesKey("batch", old.pod, "app"))
    new_row = usage.series.index(SeriesKey("batch", new.pod, "app"))
    ended = usage.timestamp_s > old.end_s
    assert np.isnan(usage.memory_bytes[old_row, ended]).all()
    assert not np.isnan(usage.memory_bytes[old_row, ~ended]).any()
    assert np.isnan(usage.memory_bytes[new_row, ~ended]).all()
    # The successor's first minute has memory but no rate yet (one scrape only).
    first = int(np.argmax(ended))
    assert math.isnan(usage.cpu_cores[new_row, first])
    assert usage.memory_bytes[new_row, first] > 0


def test_incremental_reads_from_a_watermark_join_up_with_the_backfill(
    prometheus_with_history,
):
    loaded = prometheus_with_history
    watermark = loaded.end_s - 3 * 86_400 + 17 * STEP
    with source_for(loaded, concurrency=1) as source:
        whole = source.fetch_usage(
            namespace="shop", start_s=loaded.start_s, end_s=loaded.end_s, step_s=STEP
        )
        before = source.fetch_usage(
            namespace="shop", start_s=loaded.start_s, end_s=watermark, step_s=STEP
        )
        after = source.fetch_usage(
            namespace="shop", start_s=watermark, end_s=loaded.end_s, step_s=STEP
        )
    assert before.series == after.series == whole.series
    assert before.timestamp_s[-1] == watermark
    assert after.timestamp_s[0] == watermark + STEP
    np.testing.assert_array_equal(
        np.concatenate([before.cpu_cores, after.cpu_cores], axis=1), whole.cpu_cores
    )
    np.testing.assert_array_equal(
        np.concatenate([before.memory_bytes, after.memory_bytes], axis=1),
        whole.memory_bytes,
    )


def test_oom_kills_come_from_kube_state_metrics_with_the_request(
    prometheus_with_history,
):
    loaded = prometheus_with_history
    with source_for(loaded) as source:
        kills = source.fetch_oom_kills(
            namespace=None, start_s=loaded.start_s, end_s=loaded.end_s, step_s=STEP
        )
    expected = expected_ooms(loaded.specs, start_s=loaded.start_s, end_s=loaded.end_s)
    assert len(expected) == 1
    assert [
        (
            k.namespace,
            k.pod,
            k.container,
            k.occurred_at.timestamp(),
            k.memory_request_bytes,
        )
        for k in kills
    ] == [
        (o.namespace, o.pod, o.container, o.timestamp_s, o.memory_request_bytes)
        for o in expected
    ]


def test_namespaces_are_the_shards(prometheus_with_history):
    loaded = prometheus_with_history
    with source_for(loaded) as source:
        names = source.fetch_namespaces(start_s=loaded.start_s, end_s=loaded.end_s)
    assert names == ["batch", "shop"]


def test_a_query_over_the_point_limit_is_refused_by_prometheus_itself(
    prometheus_with_history,
):
    # The chunking is needed: unchunked, the same query fails with Prometheus' error.
    loaded = prometheus_with_history
    with source_for(loaded) as source:
        times = np.arange(loaded.start_s + STEP, loaded.end_s + 1, STEP, dtype=float)
        with pytest.raises(SourceUnavailable, match="11,000 points"):
            source.query_range(
                source.cpu_query(namespace=None, step_s=STEP), times=times, step_s=STEP
            )


def test_a_stopped_prometheus_is_reported_and_a_restarted_one_answers_again(
    prometheus_with_history,
):
    loaded = prometheus_with_history
    source = source_for(loaded, retries=1, backoff_s=0.01, timeout_s=2)
    loaded.server.stop()
    try:
        with pytest.raises(SourceUnavailable, match=r"unreachable.*after 2 attempts"):
            source.fetch_usage(
                namespace=None,
                start_s=loaded.end_s - 600,
                end_s=loaded.end_s,
                step_s=STEP,
            )
    finally:
        loaded.server.start()
    usage = source.fetch_usage(
        namespace=None, start_s=loaded.end_s - 600, end_s=loaded.end_s, step_s=STEP
    )
    assert usage.cpu_cores.shape == (5, 10)
