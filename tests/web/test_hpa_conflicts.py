"""HPA conflicts, as discovery stores them, on the workload page, the workload list
and the API (imported VPA policies: test_vpa_ownership)."""

from __future__ import annotations

from django.urls import reverse

from recommender.models import Workload
from tests.factories import make_cluster, make_workload
from tests.web.conftest import client_for

CONFLICT = [{"name": "web-hpa", "resources": ["cpu"]}]


def conflicted(db_cluster=None):
    cluster = db_cluster or make_cluster()
    fighting = make_workload(cluster, "web")
    Workload.objects.filter(pk=fighting.pk).update(hpa_conflicts=CONFLICT)
    calm = make_workload(cluster, "db")
    return fighting, calm


def test_the_workload_page_explains_an_hpa_conflict(viewer):
    fighting, calm = conflicted()
    client = client_for(viewer)

    page = client.get(reverse("workload", args=[fighting.pk])).content.decode()
    other = client.get(reverse("workload", args=[calm.pk])).content.decode()

    assert 'data-testid="hpa-conflict-badge"' in page
    assert (
        "HorizontalPodAutoscaler <strong>web-hpa</strong> scales this workload on cpu"
        in page
    )
    assert "hpa-conflict" not in other


def test_the_workload_list_marks_workloads_with_an_hpa_conflict(viewer):
    conflicted()

    page = client_for(viewer).get(reverse("workloads")).content.decode()

    assert page.count('data-testid="hpa-conflict-badge"') == 1
    assert "An HPA scales it on cpu, which its policy controls" in page


def test_the_api_lists_a_workloads_hpa_conflicts(viewer):
    fighting, _ = conflicted()
    client = client_for(viewer)

    detail = client.get(f"/api/v1/workloads/{fighting.pk}/").json()
    listed = client.get("/api/v1/workloads/").json()

    assert detail["hpa_conflicts"] == CONFLICT
    by_name = {w["name"]: w["hpa_conflicts"] for w in listed["results"]}
    assert by_name == {"web": CONFLICT, "db": []}
