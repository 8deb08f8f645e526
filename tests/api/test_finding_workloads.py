"""Finding workloads: a label selector in the Kubernetes syntax and a search by
namespace/name, in the API and the dashboard's list; "Sort by name" sorts by name."""

from __future__ import annotations

import pytest

from recommender.models import Workload
from tests.factories import make_cluster, make_workload


@pytest.fixture
def fleet(db):
    cluster = make_cluster("prod")
    labels = {
        "billing": {"team": "payments", "tier": "web"},
        "ledger": {"team": "payments", "tier": "batch"},
        "search": {"team": "discovery"},
        "zeta": {},
    }
    for name, extra in labels.items():
        workload = make_workload(
            cluster, name, namespace="catalog" if name != "zeta" else "alpha"
        )
        Workload.objects.filter(pk=workload.pk).update(labels={"app": name, **extra})


def names(response) -> list[str]:
    assert response.status_code == 200, response.content
    return sorted(w["name"] for w in response.json()["results"])


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("team=payments", ["billing", "ledger"]),
        ("team=payments,tier!=batch", ["billing"]),
        ("team in (payments,discovery)", ["billing", "ledger", "search"]),
        ("team notin (payments)", ["search", "zeta"]),
        ("!team", ["zeta"]),
        ("tier", ["billing", "ledger"]),
    ],
)
def test_the_label_selector_filter_speaks_the_kubernetes_syntax(
    read_client, fleet, selector, expected
):
    response = read_client.get("/api/v1/workloads/", {"label_selector": selector})

    assert names(response) == expected


def test_a_bad_label_selector_is_a_400_naming_it(read_client, fleet):
    response = read_client.get("/api/v1/workloads/", {"label_selector": "team in (a"})

    assert response.status_code == 400
    assert "label_selector" in response.json()["error"]["fields"]


def test_search_finds_a_workload_by_namespace_slash_name(read_client, fleet):
    response = read_client.get("/api/v1/workloads/", {"search": "catalog/bill"})

    assert names(response) == ["billing"]
