"""The Prometheus source against a tiny local server: queries, chunks, errors.

The real Prometheus is exercised in tests/integration/test_prometheus*.py; here a
scripted server plays answers a real one cannot be made to give on demand.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from recommender.errors import InvalidInput, SourceUnavailable
from recommender.sources.base import SeriesKey
from recommender.sources.prometheus import PrometheusConfig, PrometheusSource, grid
from tests.prometheus_support.fake import (
    FakePrometheus,
    hang,
    matrix,
    raw,
    reply,
    samples_responder,
)

T0 = 1_795_000_020.0  # a multiple of 60


@pytest.fixture
def fake():
    server = FakePrometheus().start()
    yield server
    server.stop()


def make_source(fake: FakePrometheus, **overrides) -> PrometheusSource:
    fields = {"url": fake.url, "retries": 2, "backoff_s": 0.0, "timeout_s": 2.0}
    fields.update(overrides)
    return PrometheusSource(PrometheusConfig(**fields), sleep=lambda s: None)


def series(values: list[tuple[float, str]], pod: str = "web-1", **labels: str) -> dict:
    return {
        "metric": {"namespace": "shop", "pod": pod, "container": "app", **labels},
        "values": [[t, v] for t, v in values],
    }


def test_grid_is_step_aligned_and_excludes_start():
    assert list(grid(T0, T0 + 180, 60)) == [T0 + 60, T0 + 120, T0 + 180]
    assert list(grid(T0 + 1, T0 + 119, 60)) == [T0 + 60]
    assert len(grid(T0, T0 + 59, 60)) == 0


def test_usage_is_computed_on_the_grid_from_stored_samples_with_gaps_as_nan(fake):
    # Counter scrapes at T0, T0+60 and T0+180 (the one at T0+120 is missing): a
    # rate needs two scrapes in [t - 60 s, t], so T0+120 and T0+180 are gaps.
    cpu = matrix([series([(T0, "100"), (T0 + 60, "115"), (T0 + 180, "145")])])
    # Gauge scrapes: the peak of (t - 60 s, t]; the one at T0 belongs to no interval.
    memory = matrix([series([(T0, "5e9"), (T0 + 60, "1e9"), (T0 + 120, "2000000000")])])
    fake.responders = [reply(200, cpu), reply(200, memory)]
    with make_source(fake, concurrency=1) as source:
        usage = source.fetch_usage(
            namespace="shop", start_s=T0, end_s=T0 + 180, step_s=60
        )
    assert usage.series == (SeriesKey("shop", "web-1", "app"),)
    assert list(usage.timestamp_s) == [T0 + 60, T0 + 120, T0 + 180]
    np.testing.assert_array_equal(usage.cpu_cores, [[0.25, np.nan, np.nan]])
    np.testing.assert_array_equal(usage.memory_bytes, [[1e9, 2e9, np.nan]])
    cpu_form, memory_form = (r.form for r in fake.requests)
    assert {r.path for r in fake.requests} == {"/api/v1/query"}
    assert cpu_form["time"] == memory_form["time"] == str(int(T0 + 180))
    # The windows reach back to T0 (rate) and T0 (peak); 1 ms more for Prometheus 3,
    # whose ranges exclude their left end.
    assert cpu_form["query"] == (
        "container_cpu_usage_seconds_total"
        '{pod!="", container!="", container!="POD", namespace="shop"}[180001ms]'
    )
    assert memory_form["query"] == (
        "container_memory_working_set_bytes"
        '{pod!="", container!="", container!="POD", namespace="shop"}[180001ms]'
    )


def test_a_counter_reset_in_a_window_counts_the_value_before_it(fake):
    # The container restarted between T0+60 and T0+120: its counter began again at 0.
    cpu = matrix([series([(T0, "100"), (T0 + 60, "160"), (T0 + 120, "30")])])
    fake.responders = [reply(200, cpu), reply(200, matrix([]))]
    with make_source(fake, concurrency=1) as source:
        usage = source.fetch_usage(
            namespace="shop", start_s=T0, end_s=T0 + 120, step_s=60
        )
    np.testing.assert_array_equal(usage.cpu_cores, [[1.0, 0.5]])


def test_series_of_one_container_are_combined_with_max_not_sum(fake):
    # cAdvisor exports the old cgroup next to the new one for a while.
    old = series([(T0, "0"), (T0 + 60, "30")], id="/old")
    new = series([(T0 + 60, "0"), (T0 + 120, "60")], id="/new")
    peaks = [
        series([(T0 + 60, "7"), (T0 + 120, "3")], id="/old"),
        series([(T0 + 60, "5"), (T0 + 120, "NaN")], id="/new"),
    ]
    fake.responders = [reply(200, matrix([old, new])), reply(200, matrix(peaks))]
    with make_source(fake, concurrency=1) as source:
        usage = source.fetch_usage(
            namespace="shop", start_s=T0, end_s=T0 + 120, step_s=60
        )
    assert usage.series == (SeriesKey("shop", "web-1", "app"),)
    np.testing.assert_array_equal(usage.cpu_cores, [[0.5, 1.0]])
    np.testing.assert_array_equal(usage.memory_bytes, [[7.0, 3.0]])


def test_custom_label_names_and_selectors_shape_the_queries(fake):
    fake.default = reply(200, matrix([]))
    config = {
        "namespace_label": "kubernetes_namespace",
        "pod_label": "pod_name",
        "container_label": "name",
        "cadvisor_selector": 'job="kubernetes-cadvisor"',
        "rate_window_s": 120,
    }
    with make_source(fake, **config) as source:
        query = source.cpu_query(namespace=None, step_s=60)
        source.fetch_usage(namespace=None, start_s=T0, end_s=T0 + 60, step_s=60)
    assert query == (
        "max by (kubernetes_namespace, pod_name, name) "
        '(rate(container_cpu_usage_seconds_total{pod_name!="", name!="", name!="POD", '
        'job="kubernetes-cadvisor"}[120000ms]))'
    )
    # The samples read for it: the rate window (120 s) back from the one grid time.
    assert (
        'container_cpu_usage_seconds_total{pod_name!="", name!="", name!="POD", '
        'job="kubernetes-cadvisor"}[120001ms]'
    ) in {r.form["query"] for r in fake.requests}


def grid_points(form: dict[str, str]) -> int:
    """Grid times a samples query covers (its range less the 60 s look-back)."""
    range_ms = int(form["query"].rsplit("[", 1)[1].removesuffix("ms]"))
    return (range_ms - 1) // 60_000


def test_long_ranges_are_chunked_and_reassembled(fake):
    # 8 days at 1 minute is 11,520 points: read in chunks of at most 11,000.
    def counter_at(t: float) -> float | None:
        # 1/256 core more every minute; a scrape missing every 2 hours.
        minutes = (t - T0) // 60
        return None if minutes % 120 == 60 else 15 * minutes * (minutes + 1) / 256

    fake.default = samples_responder({("shop", "web-1", "app"): counter_at})
    end = T0 + 8 * 86400
    # The fake builds 11,000 points per answer in Python: on a loaded machine that can
    # exceed the default 2 s, and a retry would add requests to the count below.
    with make_source(fake, concurrency=3, timeout_s=60.0) as source:
        usage = source.fetch_usage(namespace="shop", start_s=T0, end_s=end, step_s=60)
    assert usage.cpu_cores.shape == (1, 11_520)
    minutes = (usage.timestamp_s - T0) // 60
    expected = minutes / 512  # (c(m) - c(m - 1)) / 60 s
    # No rate where either scrape of the window is missing.
    expected[(minutes % 120 == 60) | (minutes % 120 == 61)] = np.nan
    np.testing.assert_array_equal(usage.cpu_cores[0], expected)
    assert sorted(grid_points(r.form) for r in fake.requests) == [
        520,
        520,
        11_000,
        11_000,
    ]
    assert source.stats.queries == 4  # two chunks each for CPU and memory


def test_a_smaller_point_limit_gives_more_chunks(fake):
    fake.default = samples_responder({("shop", "web-1", "app"): lambda t: (t - T0) * 2})
    with make_source(fake, max_points=100, concurrency=1) as source:
        usage = source.fetch_usage(
            namespace=None, start_s=T0, end_s=T0 + 6000, step_s=60
        )
    assert len(fake.requests) == 2
    np.testing.assert_array_equal(usage.cpu_cores, np.full((1, 100), 2.0))
    with make_source(fake, max_points=40, concurrency=1) as source:
        again = source.fetch_usage(
            namespace=None, start_s=T0, end_s=T0 + 6000, step_s=60
        )
    assert len(fake.requests) == 2 + 6
    np.testing.assert_array_equal(again.cpu_cores, usage.cpu_cores)
    np.testing.assert_array_equal(again.memory_bytes, usage.memory_bytes)


def test_series_seen_by_only_one_query_get_nan_rows_in_the_other(fake):
    fake.responders = [
        reply(200, matrix([series([(T0, "1"), (T0 + 60, "7")], pod="old-1")])),
        reply(200, matrix([series([(T0 + 60, "5")], pod="new-1")])),
    ]
    with make_source(fake, concurrency=1) as source:
        usage = source.fetch_usage(namespace=None, start_s=T0, end_s=T0 + 60, step_s=60)
    assert [key.pod for key in usage.series] == ["new-1", "old-1"]
    np.testing.assert_array_equal(usage.cpu_cores, [[np.nan], [0.1]])
    np.testing.assert_array_equal(usage.memory_bytes, [[5.0], [np.nan]])


def test_nan_and_infinite_values_become_gaps(fake):
    # "+Inf" is left to the json path by the fast decoder: both paths are exercised.
    counter = [(T0, "1"), (T0 + 60, "NaN"), (T0 + 120, "+Inf"), (T0 + 180, "2")]
    gauge = [(T0 + 60, "NaN"), (T0 + 120, "+Inf"), (T0 + 180, "-Inf")]
    fake.responders = [
        reply(200, matrix([series(counter)])),
        reply(200, matrix([series(gauge)])),
    ]
    with make_source(fake, concurrency=1) as source:
        usage = source.fetch_usage(
            namespace=None, start_s=T0, end_s=T0 + 180, step_s=60
        )
    assert usage.cpu_cores.shape == usage.memory_bytes.shape == (1, 3)
    assert np.isnan(usage.cpu_cores).all()
    assert np.isnan(usage.memory_bytes).all()


def test_an_empty_range_asks_nothing(fake):
    with make_source(fake) as source:
        usage = source.fetch_usage(namespace=None, start_s=T0, end_s=T0 + 30, step_s=60)
    assert usage.series == ()
    assert fake.requests == []


def vector(*metrics: dict[str, str]) -> dict:
    items = [{"metric": m, "value": [T0, "1"]} for m in metrics]
    return {"status": "success", "data": {"resultType": "vector", "result": items}}


def test_oom_kills_carry_the_memory_request_and_the_grid_time(fake):
    candidates = vector(
        {"namespace": "shop", "pod": "web-1", "container": "app"},
        {"namespace": "shop", "pod": "b-1.x", "container": "app"},
    )
    answer = matrix(
        [series([(T0 + 120, "536870912")]), series([(T0 + 60, "0")], "b-1.x")]
    )
    fake.responders = [reply(200, candidates), reply(200, answer)]
    with make_source(fake) as source:
        kills = source.fetch_oom_kills(
            namespace="shop", start_s=T0, end_s=T0 + 180, step_s=60
        )
    assert [
        (k.pod, k.occurred_at.timestamp(), k.memory_request_bytes) for k in kills
    ] == [
        ("b-1.x", T0 + 60, 0),
        ("web-1", T0 + 120, 536_870_912),
    ]
    first, second = (r.form["query"] for r in fake.requests)
    assert first == (
        "max by (namespace, pod, container) (max_over_time("
        'kube_pod_container_status_last_terminated_reason{pod!="", container!="", '
        'container!="POD", namespace="shop", reason="OOMKilled"}[180000ms]))'
    )
    assert fake.requests[0].form["time"] == str(int(T0 + 180))
    # Only the candidate pods' restart counters are read, their names regex-escaped.
    assert 'pod=~"b-1\\\\.x|web-1"' in second
    assert "kube_pod_container_status_restarts_total" in second
    assert 'resource="memory"' in second


def test_no_oom_candidates_means_a_single_cheap_query(fake):
    fake.responders = [reply(200, vector())]
    with make_source(fake) as source:
        kills = source.fetch_oom_kills(
            namespace=None, start_s=T0, end_s=T0 + 86_400, step_s=60
        )
    assert kills == ()
    assert len(fake.requests) == 1


def test_namespaces_come_from_an_instant_query(fake):
    answer = {
        "status": "success",
        "data": {
            "resultType": "vector",
            "result": [
                {"metric": {"namespace": "b"}, "value": [T0, "3"]},
                {"metric": {"namespace": "a"}, "value": [T0, "1"]},
            ],
        },
    }
    fake.responders = [reply(200, answer)]
    with make_source(fake) as source:
        assert source.fetch_namespaces(start_s=T0 - 3600, end_s=T0) == ["a", "b"]
    assert fake.requests[0].path == "/api/v1/query"


def test_bearer_token_is_sent(fake):
    fake.default = reply(200, matrix([]))
    with make_source(fake, bearer_token="s3cret") as source:
        source.fetch_usage(namespace=None, start_s=T0, end_s=T0 + 60, step_s=60)
    assert fake.requests[0].headers["authorization"] == "Bearer s3cret"


def test_basic_auth_is_sent(fake):
    fake.default = reply(200, matrix([]))
    with make_source(fake, username="vpa", password="pw") as source:
        source.fetch_usage(namespace=None, start_s=T0, end_s=T0 + 60, step_s=60)
    assert fake.requests[0].headers["authorization"] == "Basic dnBhOnB3"


def test_answers_are_asked_uncompressed_unless_gzip_is_set(fake):
    # gzip costs Prometheus more CPU than building the answer (docs/prometheus.md).
    fake.default = reply(200, matrix([]))
    with make_source(fake) as source:
        source.fetch_usage(namespace=None, start_s=T0, end_s=T0 + 60, step_s=60)
    with make_source(fake, gzip=True) as source:
        source.fetch_usage(namespace=None, start_s=T0, end_s=T0 + 60, step_s=60)
    encodings = [r.headers["accept-encoding"] for r in fake.requests]
    assert encodings == ["identity", "identity", "gzip", "gzip"]


# --- failures -------------------------------------------------------------------


def fetch(source: PrometheusSource) -> None:
    source.fetch_usage(namespace="shop", start_s=T0, end_s=T0 + 120, step_s=60)


def test_transient_failures_are_retried_with_backoff(fake):
    delays: list[float] = []
    fake.responders = [
        raw(503, b"Service Unavailable"),
        reply(502, {"status": "error", "error": "bad gateway"}),
    ]
    fake.default = reply(200, matrix([series([(T0, "1"), (T0 + 60, "31")])]))
    config = PrometheusConfig(url=fake.url, retries=3, backoff_s=0.1, concurrency=1)
    with PrometheusSource(config, sleep=delays.append) as source:
        usage = source.fetch_usage(
            namespace="shop", start_s=T0, end_s=T0 + 60, step_s=60
        )
    assert usage.cpu_cores[0, 0] == 0.5
    assert len(delays) == 2
    assert 0.05 <= delays[0] <= 0.1 and 0.1 <= delays[1] <= 0.2
    assert source.stats.retries == 2


def test_retries_give_up_with_the_last_problem(fake):
    fake.default = raw(503, b"overloaded")
    with (
        make_source(fake, retries=2) as source,
        pytest.raises(SourceUnavailable) as info,
    ):
        fetch(source)
    message = str(info.value)
    assert "HTTP 503" in message and "(after 3 attempts)" in message
    assert len(fake.requests) >= 3


def test_a_timeout_is_reported_as_such(fake):
    fake.default = hang(1.5)
    source = make_source(fake, timeout_s=0.3, retries=0)
    with pytest.raises(SourceUnavailable, match=r"timed out after 0\.3 s"):
        fetch(source)


def test_garbage_is_a_clear_error_and_not_retried(fake):
    fake.default = raw(200, b"<html>hello from a proxy</html>")
    source = make_source(fake, concurrency=1)
    with pytest.raises(SourceUnavailable, match=r"malformed JSON.*hello from a proxy"):
        fetch(source)
    assert len(fake.requests) == 1


def test_json_cut_off_mid_body_is_a_clear_error(fake):
    whole = json.dumps(matrix([series([(T0 + 60, "0.5"), (T0 + 120, "0.6")])])).encode()
    fake.default = raw(200, whole[: len(whole) // 2])
    source = make_source(fake, concurrency=1)
    with pytest.raises(SourceUnavailable, match="malformed JSON"):
        fetch(source)


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        (
            {"status": "success", "data": {"resultType": "vector", "result": []}},
            "vector",
        ),
        ({"status": "success", "data": {"resultType": "matrix"}}, "no result list"),
        (matrix([{"metric": {"namespace": "shop"}, "values": []}]), "KeyError"),
        (
            matrix(
                [
                    {
                        "metric": {"namespace": "shop", "pod": "p", "container": "c"},
                        "values": [[T0 + 60, "many"]],
                    }
                ]
            ),
            "ValueError",
        ),
        (
            matrix(
                [
                    {
                        "metric": {"namespace": "shop", "pod": "p", "container": "c"},
                        "values": "oops",
                    }
                ]
            ),
            "malformed series",
        ),
        (matrix([series([(T0 + 6000, "1")])]), "outside the asked range"),
        (matrix([series([(T0 - 61, "1")])]), "outside the asked range"),
        (
            matrix([series([(T0 + 60, "1"), (T0 + 60, "2")])]),
            "timestamps not increasing",
        ),
        (["not", "an", "object"], "no error message"),
    ],
)
def test_well_formed_json_of_the_wrong_shape_is_rejected(fake, answer, problem):
    fake.default = reply(200, answer)
    source = make_source(fake, concurrency=1)
    with pytest.raises(SourceUnavailable, match=problem):
        fetch(source)


def test_a_query_error_names_prometheus_message_and_is_not_retried(fake):
    error = {
        "status": "error",
        "errorType": "execution",
        "error": "query processing would load too many samples into memory",
    }
    fake.default = reply(422, error)
    source = make_source(fake, concurrency=1)
    with pytest.raises(SourceUnavailable) as info:
        fetch(source)
    assert "HTTP 422" in str(info.value)
    assert "too many samples" in str(info.value)
    assert len(fake.requests) == 1


def test_refused_credentials_say_which_settings_to_check(fake):
    fake.default = raw(401, b"Unauthorized")
    source = make_source(fake, bearer_token="wrong")
    with pytest.raises(SourceUnavailable, match="PROMETHEUS_BEARER_TOKEN"):
        fetch(source)


def test_an_unreachable_server_is_reported_with_its_url():
    config = PrometheusConfig(url="http://127.0.0.1:9", retries=1, backoff_s=0.0)
    source = PrometheusSource(config, sleep=lambda s: None)
    with pytest.raises(SourceUnavailable, match=r"127\.0\.0\.1:9 is unreachable"):
        fetch(source)


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"url": "prometheus:9090"}, "url"),
        ({"concurrency": 0}, "concurrency"),
        ({"max_points": 20_000}, "max_points"),
        ({"pod_label": "pod-name"}, "pod_label"),
        ({"username": "only-a-name"}, "username"),
        ({"timeout_s": 0}, "timeout_s"),
    ],
)
def test_bad_configuration_names_the_field(fields, field):
    with pytest.raises(InvalidInput) as info:
        PrometheusConfig(**{"url": "http://prometheus:9090", **fields})
    assert info.value.field == field


def test_grid_rejects_a_non_positive_step():
    with pytest.raises(InvalidInput, match="step"):
        grid(0, 60, 0)
    assert not math.isnan(grid(0, 60, 60)[0])
