"""The charts' usage source is opened and always closed by the service, and any failure
of it is a clear chart error, never a 500 (review finding 6)."""

from __future__ import annotations

import html
from typing import Any

import pytest

from recommender.models import Cluster
from recommender.services.dashboard import workload_insight
from tests.factories import make_cluster, make_workload
from tests.k8s_fake.plugin import api_server, kubeconfig

__all__ = ["api_server", "kubeconfig"]  # fixtures, for pytest

pytestmark = pytest.mark.django_db


@pytest.fixture
def opened(monkeypatch) -> list[Any]:
    """Every usage source the service opens (the real ones), with its close calls."""
    sources: list[Any] = []
    real = workload_insight.usage_source_for

    def recording(cluster: Cluster) -> Any:
        source = real(cluster)
        source.closed = 0
        close = getattr(source, "close", None)

        def counted_close() -> None:
            source.closed += 1
            if close is not None:
                close()

        source.close = counted_close
        sources.append(source)
        return source

    monkeypatch.setattr(workload_insight, "usage_source_for", recording)
    return sources


def charts(client, workload) -> str:
    response = client.get(f"/workloads/{workload.pk}/charts", HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    return response.content.decode()


def test_metrics_server_missing_is_a_chart_error_and_the_source_is_closed(
    viewer_client,
    opened,
    api_server,
    kubeconfig,
    monkeypatch,
    settings,
):
    settings.PROMETHEUS_URL = ""
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    api_server.unserve("metrics.k8s.io")
    cluster = make_cluster("fake", kind=Cluster.Kind.KUBERNETES, context="fake")
    workload = make_workload(cluster, "web", namespace="shop")

    body = charts(viewer_client, workload)

    assert "Usage history unavailable: cluster &#x27;fake&#x27;" in body
    assert "metrics-server installed?" in body
    assert [source.closed for source in opened] == [1]


def test_a_working_source_is_closed_too(viewer_client, opened, settings):
    settings.SIMULATION_WORKLOADS = 6
    workload = make_workload(make_cluster("sim"), "web")

    body = charts(viewer_client, workload)

    assert "Usage history unavailable" not in body
    assert [source.closed for source in opened] == [1]


class BrokenSource:
    """A usage source failing below its own error handling, as a library might."""

    def __init__(self, error: Exception) -> None:
        self.error = error
        self.closed = 0

    def fetch_usage(self, **_: Any) -> Any:
        raise self.error

    def close(self) -> None:
        self.closed += 1


@pytest.mark.parametrize(
    "error",
    [
        ConnectionResetError(104, "Connection reset by peer"),
        ValueError("end_s must be after start_s"),
    ],
)
def test_bare_os_and_value_errors_become_a_chart_error_not_a_500(
    viewer_client, monkeypatch, error
):
    source = BrokenSource(error)
    monkeypatch.setattr(workload_insight, "usage_source_for", lambda cluster: source)
    workload = make_workload(make_cluster("prod"), "web")

    body = charts(viewer_client, workload)

    assert (
        f"Usage history unavailable: usage source of cluster 'prod' failed: {error}"
        in html.unescape(body)
    )
    assert source.closed == 1
