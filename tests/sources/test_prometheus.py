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
    grid_responder,
    hang,
    matrix,
    raw,
    reply,
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


def series(values: list[tuple[float, str]], pod: str = "web-1") -> dict:
    return {
        "metric": {"namespace": "shop", "pod": pod, "container": "app"},
        "values": [[t, v] for t, v in values],
    }


def test_grid_is_step_aligned_and_excludes_start():
    assert list(grid(T0, T0 + 180, 60)) == [T0 + 60, T0 + 120, T0 + 180]
    assert list(grid(T0 + 1, T0 + 119, 60)) == [T0 + 60]
    assert len(grid(T0, T0 + 59, 60)) == 0


def test_usage_is_parsed_onto_the_grid_with_gaps_as_nan(fake):
    cpu = matrix([series([(T0 + 60, "0.25"), (T0 + 180, "0.5")])])
    memory = matrix([series([(T0 + 60, "1e9"), (T0 + 120, "2000000000")])])
    fake.responders = [reply(200, cpu), reply(200, memory)]
    with make_source(fake, concurrency=1) as source:
        usage = source.fetch_usage(
            namespace="shop", start_s=T0, end_s=T0 + 180, step_s=60
        )
    assert usage.series == (SeriesKey("shop", "web-1", "app"),)
    assert list(usage.timestamp_s) == [T0 + 60, T0 + 120, T0 + 180]
    np.testing.assert_array_equal(usage.cpu_cores, [[0.25, np.nan, 0.5]])
    np.testing.assert_array_equal(usage.memory_bytes, [[1e9, 2e9, np.nan]])
    cpu_form, memory_form = (r.form for r in fake.requests)
    assert cpu_form["start"] == str(int(T0 + 60))
    assert cpu_form["end"] == str(int(T0 + 180))
    assert cpu_form["step"] == "60"
    assert cpu_form["query"] == (
        "max by (namespace, pod, container) (rate(container_cpu_usage_seconds_total"
        '{pod!="", container!="", container!="POD", namespace="shop"}[60000ms]))'
    )
    assert memory_form["query"].startswith(
        "max by (namespace, pod, container) (max_over_time("
        "container_memory_working_set_bytes{"
    )


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
    assert {r.form["query"] for r in fake.requests} >= {query}


def test_long_ranges_are_chunked_under_the_point_limit_and_reassembled(fake):
    # 8 days at 1 minute is 11,520 points: more than Prometheus allows in one query.
    def cpu_at(t: float) -> float | None:
        return None if (t - T0) % 7200 == 0 else (t - T0) / 1e6

    fake.default = grid_responder({("shop", "web-1", "app"): cpu_at})
    end = T0 + 8 * 86400
    with make_source(fake, concurrency=3) as source:
        usage = source.fetch_usage(namespace="shop", start_s=T0, end_s=end, step_s=60)
    assert usage.cpu_cores.shape == (1, 11_520)
    expected = np.array([cpu_at(t) for t in usage.timestamp_s], dtype=float)
    np.testing.assert_array_equal(usage.cpu_cores[0], expected)
    points = [
        (float(r.form["end"]) - float(r.form["start"])) / 60 + 1 for r in fake.requests
    ]
    assert max(points) <= 11_000
    assert len(fake.requests) == 4  # two chunks each for CPU and memory
    assert source.stats.queries == 4


def test_a_smaller_point_limit_gives_more_chunks(fake):
    fake.default = grid_responder(
        {("shop", "web-1", "app"): lambda t: 1.0}, max_points=100
    )
    with make_source(fake, max_points=100, concurrency=1) as source:
        usage = source.fetch_usage(
            namespace=None, start_s=T0, end_s=T0 + 6000, step_s=60
        )
    assert len(fake.requests) == 2
    np.testing.assert_array_equal(usage.cpu_cores, np.ones((1, 100)))


def test_series_seen_by_only_one_query_get_nan_rows_in_the_other(fake):
    fake.responders = [
        reply(200, matrix([series([(T0 + 60, "0.1")], pod="old-1")])),
        reply(200, matrix([series([(T0 + 60, "5")], pod="new-1")])),
    ]
    with make_source(fake, concurrency=1) as source:
        usage = source.fetch_usage(namespace=None, start_s=T0, end_s=T0 + 60, step_s=60)
    assert [key.pod for key in usage.series] == ["new-1", "old-1"]
    np.testing.assert_array_equal(usage.cpu_cores, [[np.nan], [0.1]])
    np.testing.assert_array_equal(usage.memory_bytes, [[5.0], [np.nan]])


def test_nan_and_infinite_values_become_gaps(fake):
    fake.responders = [
        reply(200, matrix([series([(T0 + 60, "NaN"), (T0 + 120, "+Inf")])])),
        reply(200, matrix([])),
    ]
    with make_source(fake, concurrency=1) as source:
        usage = source.fetch_usage(
            namespace=None, start_s=T0, end_s=T0 + 120, step_s=60
        )
    assert np.isnan(usage.cpu_cores).all()


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
    fake.default = reply(200, matrix([series([(T0 + 60, "0.5")])]))
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
