"""The workload page's usage chart reads only the hours the refresh stored: no usage
source is opened, so a cluster whose source is down still draws; a container with no
stored hour yet is left out of the usage (the chart says so) rather than failing."""

from __future__ import annotations

import json
import re
from datetime import timedelta

import pytest
from django.utils import timezone

from recommender.models import Cluster, UsageHour
from recommender.services import connections
from tests.factories import make_cluster, make_workload

pytestmark = pytest.mark.django_db


@pytest.fixture
def no_source(monkeypatch):
    """Any usage source opened fails the test (and a real one would fail too)."""

    def refuse(cluster: Cluster) -> object:
        raise AssertionError(f"the chart opened the usage source of {cluster.name}")

    monkeypatch.setattr(connections, "usage_source_for", refuse)


def chart_data(client, workload) -> dict:
    response = client.get(f"/workloads/{workload.pk}/charts", HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    body = response.content.decode()
    found = re.search(r'id="chart-data"[^>]*>(.*?)</script>', body, re.S)
    assert found, body
    return json.loads(found.group(1))


def test_a_cluster_whose_source_is_down_still_draws_its_stored_hours(
    viewer_client, no_source, settings, monkeypatch
):
    # A Kubernetes cluster with no metrics-server or Prometheus to read: its source
    # could only fail.
    settings.PROMETHEUS_URL = ""
    cluster = make_cluster("down", kind=Cluster.Kind.KUBERNETES, context="nowhere")
    workload = make_workload(cluster, "web", containers={"app": {}, "sidecar": {}})
    app = workload.containers.get(name="app")
    # The page reads the clock again: pinned, so an hour that turns between this read
    # and the page's cannot move the chart's end past `end`.
    now = timezone.now()
    monkeypatch.setattr(timezone, "now", lambda: now)
    end = now.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    UsageHour.objects.create(
        container=app,
        ends_at=end - timedelta(hours=2),
        cpu_max_cores=0.8,
        cpu_sum_cores=30.0,
        cpu_samples=60,
        memory_max_bytes=3e8,
        memory_sum_bytes=1.2e10,
        memory_samples=60,
    )

    data = chart_data(viewer_client, workload)

    usage = data["usage"]
    assert set(usage) == {"app"}  # the sidecar has no stored hour yet
    line = usage["app"]
    assert len(line["t"]) == 8 * 24  # hourly points over 8 days, ending at `end`
    assert line["t"][-1] == end.isoformat()
    at = line["t"].index((end - timedelta(hours=2)).isoformat())
    assert line["cpu_max"][at] == 0.8
    assert line["cpu_mean"][at] == pytest.approx(0.5)
    assert line["memory_max"][at] == 3e8
    assert line["memory_mean"][at] == pytest.approx(2e8)
    # Hours without a stored sample are gaps, not zeros.
    assert line["cpu_max"][at + 1] is None and line["memory_mean"][at - 1] is None
    assert set(data["containers"]) == {"app", "sidecar"}


def test_hours_older_than_the_chart_are_not_drawn(viewer_client, no_source):
    workload = make_workload(make_cluster("sim"), "web", containers={"app": {}})
    UsageHour.objects.create(
        container=workload.containers.get(),
        ends_at=timezone.now() - timedelta(days=8, hours=2),
        cpu_max_cores=1.0,
        cpu_sum_cores=1.0,
        cpu_samples=1,
    )

    assert chart_data(viewer_client, workload)["usage"] == {}
