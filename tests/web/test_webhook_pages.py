"""The dashboard shows what the webhook does: per workload, and overview counts."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from recommender.models import AdmissionCount, Container
from tests.factories import make_cluster, make_recommendation, make_workload

MI = 2**20
pytestmark = pytest.mark.django_db


def test_workload_page_says_what_the_next_pod_gets_and_why(viewer_client):
    workload = make_workload(
        make_cluster("c1"),
        "api",
        mode="Initial",
        containers={
            "app": {"request_cpu_millicores": 500, "limit_cpu_millicores": 1000},
            "side": {"request_cpu_millicores": 50},
        },
    )
    make_recommendation(
        Container.objects.get(workload=workload, name="app"),
        cpu_millicores=250,
        memory_bytes=300 * MI,
    )
    page = viewer_client.get(f"/workloads/{workload.pk}/").content.decode()
    assert "New pods get the values below (mode Initial)" in page
    # limit keeps its 2:1 ratio to the request (upstream's proportional limit)
    assert "cpu request 500m -&gt; 250m, memory request unset -&gt; 300Mi" in page
    assert "cpu limit 1 -&gt; 500m" in page
    assert "has no recommendation for it yet" in page  # side


def test_workload_page_of_an_off_workload_says_pods_are_left_alone(viewer_client):
    workload = make_workload(make_cluster("c1"), "api")
    page = viewer_client.get(f"/workloads/{workload.pk}/").content.decode()
    assert "New pods are created as submitted" in page
    assert "its mode is Off" in page


def test_overview_counts_patched_left_alone_failed_open(viewer_client):
    make_workload(make_cluster("c1"), "api")
    now = timezone.now().replace(second=0, microsecond=0)
    for minute, outcome, count in (
        (now, "patched", 3),
        (now - timedelta(minutes=5), "failed_open", 1),
        (now - timedelta(hours=3), "left_alone", 7),
        (now - timedelta(days=2), "patched", 100),  # older than a day
    ):
        AdmissionCount.objects.create(
            cluster_name="c1", minute=minute, outcome=outcome, count=count
        )
    response = viewer_client.get("/")
    admission = response.context["admission"]
    assert (admission["hour"].patched, admission["hour"].left_alone) == (3, 0)
    assert admission["hour"].failed_open == 1
    assert (admission["day"].patched, admission["day"].left_alone) == (3, 7)
    assert 'data-testid="admission-counts"' in response.content.decode()
