"""Read endpoints: clusters, workloads (filters, search, pagination, natural key),
recommendations in the VPA status format, history, policies, changes and runs."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from recommender.models import Policy, RefreshRun, ResizeChange, Workload
from tests.factories import make_cluster, make_recommendation, make_workload

pytestmark = pytest.mark.django_db


def test_clusters_list_and_detail(read_client: Client, shop: Workload) -> None:
    listing = read_client.get("/api/v1/clusters/").json()
    assert listing["count"] == 1
    assert listing["results"][0]["name"] == "prod"
    assert listing["results"][0]["workload_count"] == 1
    assert read_client.get("/api/v1/clusters/prod/").json()["kind"] == "simulated"
    missing = read_client.get("/api/v1/clusters/nope/")
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "not_found"


def test_workload_shows_requests_limits_and_latest_recommendation(
    read_client: Client, shop: Workload
) -> None:
    data = read_client.get(f"/api/v1/workloads/{shop.pk}/").json()
    assert (data["cluster"], data["namespace"], data["kind"], data["name"]) == (
        "prod",
        "shop",
        "Deployment",
        "web",
    )
    # app is above its upper bound (over), sidecar has no recommendation: worst is over.
    assert data["mode"] == "Off" and data["status"] == "over"
    app, sidecar = data["containers"]
    assert app["requests"] == {"cpu": "1", "memory": "1Gi"}
    assert app["limits"] == {"cpu": "2", "memory": "2Gi"}
    assert app["recommendation"]["target"] == {"cpu": "587m", "memory": "250Mi"}
    assert sidecar["limits"] == {} and sidecar["recommendation"] is None


def test_workload_by_natural_key(read_client: Client, shop: Workload) -> None:
    url = "/api/v1/clusters/prod/namespaces/shop/workloads/Deployment/web"
    assert read_client.get(url).json()["id"] == shop.pk
    missing = read_client.get(
        "/api/v1/clusters/prod/namespaces/shop/workloads/Deployment/api"
    )
    assert missing.status_code == 404
    assert missing.json()["error"]["message"] == (
        "no workload shop/Deployment/api in cluster 'prod'"
    )


def test_unknown_workload_id_is_a_json_404(read_client: Client, shop: Workload) -> None:
    for url in (
        "/api/v1/workloads/999999/",
        "/api/v1/workloads/999999/recommendation",
        "/api/v1/workloads/999999/policy",
        "/api/v1/workloads/999999999999999999999999/",
    ):
        response = read_client.get(url)
        assert response.status_code == 404, url
        assert response.json()["error"]["code"] == "not_found"


@pytest.fixture
def fleet(shop: Workload) -> dict[str, Workload]:
    """Three more workloads across two clusters, modes and statuses."""
    staging = make_cluster("staging")
    db = make_workload(
        shop.cluster,
        "db",
        namespace="data",
        kind="StatefulSet",
        mode=Policy.Mode.INITIAL,
    )
    make_recommendation(db.containers.get())
    old = make_workload(shop.cluster, "old-batch", namespace="data", kind="CronJob")
    Workload.objects.filter(pk=old.pk).update(is_active=False)
    fresh = make_workload(staging, "web", namespace="shop")
    return {"web": shop, "db": db, "old": old, "fresh": fresh}


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("", {"web", "db", "old", "fresh"}),
        ("cluster=staging", {"fresh"}),
        ("namespace=data", {"db", "old"}),
        ("kind=StatefulSet", {"db"}),
        ("mode=Initial", {"db"}),
        ("mode=Off", {"web", "old", "fresh"}),
        # The dashboard's statuses; deleted workloads are is_active=false.
        ("status=over", {"web", "db"}),
        ("status=no-data", {"old", "fresh"}),
        ("status=no-data&is_active=true", {"fresh"}),
        ("status=under", set()),
        ("status=within", set()),
        ("is_active=false", {"old"}),
        ("search=bat", {"old"}),
        ("search=DATA", {"db", "old"}),
        ("cluster=prod&namespace=shop", {"web"}),
    ],
)
def test_workload_filters(
    read_client: Client, fleet: dict[str, Workload], query: str, expected: set[str]
) -> None:
    names = {w.pk: key for key, w in fleet.items()}
    results = read_client.get(f"/api/v1/workloads/?{query}").json()["results"]
    assert {names[r["id"]] for r in results} == expected


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("kind=Pod", "kind"),
        ("mode=Sometimes", "mode"),
        ("status=happy", "status"),
        ("status=recommended", "status"),
        ("is_active=maybe", "is_active"),
    ],
)
def test_bad_filter_values_name_the_parameter(
    read_client: Client, shop: Workload, query: str, field: str
) -> None:
    response = read_client.get(f"/api/v1/workloads/?{query}")
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid" and list(error["fields"]) == [field]


def test_workload_pagination(read_client: Client, fleet: dict[str, Workload]) -> None:
    first = read_client.get("/api/v1/workloads/?limit=3").json()
    assert first["count"] == 4 and len(first["results"]) == 3
    second = read_client.get(first["next"]).json()
    assert len(second["results"]) == 1 and second["next"] is None
    ids = [r["id"] for r in first["results"] + second["results"]]
    assert len(set(ids)) == 4


def test_workload_list_query_count_does_not_grow_with_rows(
    read_client: Client, fleet: dict[str, Workload], django_assert_max_num_queries: Any
) -> None:
    for index in range(20):
        workload = make_workload(
            fleet["web"].cluster, f"extra-{index}", namespace="bulk"
        )
        make_recommendation(workload.containers.get())
    # token lookup, its last use, count (per cluster), page ids (a page spanning
    # clusters: its first and last apart, those between in one query), page,
    # containers with their recommendations, their recent OOM kills
    with django_assert_max_num_queries(9):
        response = read_client.get("/api/v1/workloads/?limit=100")
    assert response.json()["count"] == 24


def test_recommendation_in_vpa_status_format(
    read_client: Client, shop: Workload
) -> None:
    for url in (
        f"/api/v1/workloads/{shop.pk}/recommendation",
        "/api/v1/clusters/prod/namespaces/shop/workloads/Deployment/web/recommendation",
    ):
        data = read_client.get(url).json()
        assert data["recommendation"] == {
            "containerRecommendations": [
                {
                    "containerName": "app",
                    "target": {"cpu": "587m", "memory": "250Mi"},
                    "lowerBound": {"cpu": "469m", "memory": "200Mi"},
                    "upperBound": {"cpu": "704m", "memory": "300Mi"},
                    "uncappedTarget": {"cpu": "587m", "memory": "250Mi"},
                }
            ]
        }
        assert data["explanations"][0]["explanation"] == {"samples": 1440}


def test_history_newest_first_and_by_container(
    read_client: Client, shop: Workload
) -> None:
    data = read_client.get(f"/api/v1/workloads/{shop.pk}/history").json()
    assert [r["target"]["cpu"] for r in data["results"]] == ["587m", "400m"]
    assert (
        read_client.get(
            f"/api/v1/workloads/{shop.pk}/history?container=sidecar"
        ).json()["count"]
        == 0
    )


def test_policy_read(read_client: Client, shop: Workload) -> None:
    data = read_client.get(f"/api/v1/workloads/{shop.pk}/policy").json()
    assert data["mode"] == "Off"
    assert "never writes" in data["mode_consequence"]


def _change(workload: Workload, **fields: Any) -> ResizeChange:
    return ResizeChange.objects.create(
        workload=workload,
        pod=fields.pop("pod", "web-1"),
        resources_before={
            "app": {"requests": {"cpu": 1000, "memory": 2**30}, "limits": {}}
        },
        resources_after={
            "app": {"requests": {"cpu": 587, "memory": 250 * 2**20}, "limits": {}}
        },
        **fields,
    )


def test_changes_list_filter_and_detail(
    read_client: Client, fleet: dict[str, Workload]
) -> None:
    proposed = _change(fleet["web"])
    _change(fleet["db"], status=ResizeChange.Status.REJECTED)
    listing = read_client.get("/api/v1/changes/?status=proposed").json()
    assert [c["id"] for c in listing["results"]] == [proposed.pk]
    assert (
        read_client.get(f"/api/v1/changes/?workload={fleet['db'].pk}").json()["count"]
        == 1
    )
    assert read_client.get("/api/v1/changes/?namespace=data").json()["count"] == 1
    detail = read_client.get(f"/api/v1/changes/{proposed.pk}/").json()
    assert detail["resources_after"] == {
        "app": {"requests": {"cpu": "587m", "memory": "250Mi"}, "limits": {}}
    }
    assert detail["workload"]["name"] == "web"


def test_runs_list_and_filters(read_client: Client, shop: Workload) -> None:
    now = timezone.now()
    done = RefreshRun.objects.create(
        cluster=shop.cluster,
        status=RefreshRun.Status.SUCCEEDED,
        started_at=now - timezone.timedelta(seconds=30),
        finished_at=now,
        counts={"workloads": 1},
    )
    RefreshRun.objects.create(
        cluster=shop.cluster, status=RefreshRun.Status.FAILED, error="boom"
    )
    listing = read_client.get("/api/v1/runs/?status=succeeded").json()
    assert [r["id"] for r in listing["results"]] == [done.pk]
    assert listing["results"][0]["duration_s"] == 30.0
    assert read_client.get("/api/v1/runs/?cluster=prod").json()["count"] == 2
    assert read_client.get(f"/api/v1/runs/{done.pk}/").json()["counts"] == {
        "workloads": 1
    }
