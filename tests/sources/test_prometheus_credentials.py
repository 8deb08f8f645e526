"""Credentials in PROMETHEUS_URL never reach a message, a log line or a run row."""

from __future__ import annotations

import logging
from datetime import UTC, datetime

import pytest

from recommender.errors import InvalidInput, SourceUnavailable
from recommender.models import Cluster, RefreshRun
from recommender.services.refresh.backfill import backfill_cluster
from recommender.sources.prometheus import PrometheusConfig, PrometheusSource
from tests.prometheus_support.fake import FakePrometheus, matrix, raw, reply

T0 = 1_795_000_020.0
SECRET = "pa55-w0rd"


@pytest.fixture
def fake():
    server = FakePrometheus().start()
    yield server
    server.stop()


def with_userinfo(url: str) -> str:
    return url.replace("http://", f"http://vpa:{SECRET}@")


def make_source(url: str) -> PrometheusSource:
    config = PrometheusConfig(url=url, retries=1, backoff_s=0.0, timeout_s=2.0)
    return PrometheusSource(config, sleep=lambda s: None)


def fetch(source: PrometheusSource) -> None:
    source.fetch_usage(namespace=None, start_s=T0, end_s=T0 + 120, step_s=60)


def test_userinfo_in_the_url_is_still_sent_as_basic_auth(fake):
    fake.default = reply(200, matrix([]))
    with make_source(with_userinfo(fake.url)) as source:
        fetch(source)
    assert fake.requests[0].headers["authorization"].startswith("Basic ")


@pytest.mark.parametrize("status", [401, 503])
def test_a_failing_server_is_named_without_the_password(fake, caplog, status):
    fake.default = raw(status, b"nope")
    caplog.set_level(logging.DEBUG)
    with (
        make_source(with_userinfo(fake.url)) as source,
        pytest.raises(SourceUnavailable) as info,
    ):
        fetch(source)
    host = fake.url.removeprefix("http://")
    assert f"Prometheus at http://{host}" in info.value.message
    assert SECRET not in info.value.message
    assert SECRET not in caplog.text


def test_an_unreachable_server_is_named_without_the_password(caplog):
    caplog.set_level(logging.DEBUG)
    with (
        make_source(with_userinfo("http://127.0.0.1:9")) as source,
        pytest.raises(SourceUnavailable) as info,
    ):
        fetch(source)
    assert "127.0.0.1:9 is unreachable" in info.value.message
    assert SECRET not in info.value.message
    assert SECRET not in caplog.text


@pytest.mark.parametrize(
    "fields",
    [{"username": "other", "password": "x"}, {"bearer_token": "tok"}],
)
def test_userinfo_and_credential_settings_together_are_refused(fields):
    with pytest.raises(InvalidInput) as info:
        PrometheusConfig(url=with_userinfo("http://prometheus:9090"), **fields)
    assert info.value.field == "url"
    assert "PROMETHEUS_URL" in info.value.message
    assert SECRET not in info.value.message


def test_a_bad_url_is_named_without_the_password():
    with pytest.raises(InvalidInput) as info:
        PrometheusConfig(url=f"ftp://vpa:{SECRET}@prometheus:9090")
    assert info.value.field == "url"
    assert "ftp://prometheus:9090" in info.value.message
    assert SECRET not in info.value.message


@pytest.mark.django_db
def test_the_failed_run_row_holds_no_password(fake, settings, caplog):
    settings.SIMULATION_SEED = 7
    settings.SIMULATION_WORKLOADS = 3
    caplog.set_level(logging.DEBUG)
    fake.default = raw(503, b"overloaded")
    cluster = Cluster.objects.create(name="sim-cred", kind=Cluster.Kind.SIMULATED)
    with (
        make_source(with_userinfo(fake.url)) as source,
        pytest.raises(SourceUnavailable),
    ):
        backfill_cluster(
            cluster_id=cluster.pk,
            now=datetime(2026, 11, 21, 12, 0, tzinfo=UTC),
            days=1,
            source=source,
        )
    run = RefreshRun.objects.get(cluster=cluster)
    assert run.status == RefreshRun.Status.FAILED
    assert "HTTP 503" in run.error
    assert SECRET not in run.error
    assert SECRET not in caplog.text
