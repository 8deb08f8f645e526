"""The API's workload list sorts, pages and filters by risk, waste and missing
requests as the dashboard does."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from recommender.models import OomKill
from tests.factories import make_cluster, make_recommendation, make_workload

pytestmark = pytest.mark.django_db
MI = 2**20


@pytest.fixture
def fleet(db: Any) -> None:
    """Ten workloads: savings grow with the index; w2 and w7 OOM-killed (w7 twice),
    w4 short of memory, w5 without a memory request."""
    cluster = make_cluster("prod")
    for index in range(10):
        containers = {
            "app": {
                "request_cpu_millicores": 300 + 100 * index,
                "request_memory_bytes": 60 * MI if index == 4 else 300 * MI,
            }
        }
        if index == 5:
            del containers["app"]["request_memory_bytes"]
        workload = make_workload(cluster, f"w{index}", containers=containers)
        container = workload.containers.get()
        make_recommendation(container)  # 250m / 300 MiB
        for kill in range({2: 1, 7: 2}.get(index, 0)):
            OomKill.objects.create(
                container=container,
                pod=f"p{kill}",
                occurred_at=timezone.now() - timedelta(hours=1 + kill),
            )


def _names(client: Client, query: str) -> list[str]:
    response = client.get(f"/api/v1/workloads/?{query}")
    assert response.status_code == 200, response.content
    return [w["name"] for w in response.json()["results"]]


def test_biggest_savings_first_and_paged(read_client: Client, fleet: None) -> None:
    body = read_client.get("/api/v1/workloads/?ordering=-savings_monthly").json()
    savings = [w["savings_monthly"] for w in body["results"]]

    assert savings == sorted(savings, reverse=True)
    # w5's missing memory request counts as 0 against a 300 MiB target.
    assert [w["name"] for w in body["results"]][:3] == ["w9", "w8", "w7"]
    # A key given again is ignored: the first direction stands.
    assert _names(read_client, "ordering=-savings_monthly,savings_monthly") == [
        w["name"] for w in body["results"]
    ]
    first = _names(read_client, "ordering=-savings_monthly&limit=4")
    second = _names(read_client, "ordering=-savings_monthly&limit=4&offset=4")
    assert first + second == [w["name"] for w in body["results"]][:8]


def test_riskiest_first(read_client: Client, fleet: None) -> None:
    names = _names(read_client, "at_risk=true&ordering=-risk,-savings_monthly")

    assert names == ["w7", "w2", "w4"]
    listed = {
        w["name"]: w
        for w in read_client.get("/api/v1/workloads/?ordering=name").json()["results"]
    }
    assert listed["w7"]["risk"] == 2000 and listed["w7"]["recent_ooms"] == 2
    assert listed["w4"]["shortfall_percent"] == 75 and listed["w4"]["risk"] == 75
    # At risk and wasteful at once; the headline says at risk.
    assert listed["w7"]["at_risk"] and listed["w7"]["wasteful"]
    assert listed["w7"]["status"] == "under"
    assert listed["w5"]["missing_requests"] and not listed["w5"]["at_risk"]


def test_fact_filters(read_client: Client, fleet: None) -> None:
    assert _names(read_client, "missing_requests=true") == ["w5"]
    assert _names(read_client, "at_risk=true&wasteful=false&ordering=name") == []
    # Every one requests more CPU than its target, even those at risk.
    assert len(_names(read_client, "wasteful=true")) == 10
    assert _names(read_client, "wasteful=false") == []
    assert _names(read_client, "status=under&ordering=name") == ["w2", "w4", "w7"]


def test_ordering_is_documented_in_the_schema(read_client: Client, db: Any) -> None:
    schema = read_client.get("/api/v1/schema/?format=json").json()
    parameters = {
        p["name"]: p for p in schema["paths"]["/api/v1/workloads/"]["get"]["parameters"]
    }

    assert {"ordering", "at_risk", "wasteful", "missing_requests"} <= set(parameters)
    for key in ("savings_monthly", "risk", "recent_ooms", "name"):
        assert key in parameters["ordering"]["description"]
    status = parameters["status"]["schema"]
    assert "missing" in str(status)


def test_the_default_order_pages_as_one_sorted_query(
    read_client: Client, db: Any
) -> None:
    # Counted and paged cluster by cluster: every window of every size is the slice
    # of the one ordering (cluster name, namespace, kind, name, id), inactive
    # workloads included, filters applied.
    from recommender.models import Workload

    for name, size in {"c": 5, "a": 2, "e": 1, "b": 1, "d": 7}.items():
        cluster = make_cluster(name)
        for i in range(size):
            make_workload(cluster, f"w-{(i * 3) % size}", namespace=f"ns-{i % 2}")
    Workload.objects.filter(name="w-1").update(is_active=False)
    expected = list(
        Workload.objects.order_by(
            "cluster__name", "namespace", "kind", "name", "pk"
        ).values_list("name", "cluster__name")
    )

    def listed(query: str) -> tuple[int, list[tuple[str, str]]]:
        body = read_client.get(f"/api/v1/workloads/?{query}").json()
        return body["count"], [(w["name"], w["cluster"]) for w in body["results"]]

    for limit in (1, 2, 3, 5, 16, 100):
        for offset in range(0, len(expected) + 2):
            assert listed(f"limit={limit}&offset={offset}") == (
                len(expected),
                expected[offset : offset + limit],
            ), (limit, offset)
    active = [row for row in expected if row[0] != "w-1"]
    assert listed("is_active=true&limit=4&offset=3") == (len(active), active[3:7])
