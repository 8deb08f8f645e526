"""``label_selector`` (the Kubernetes syntax) narrows the workload list, the export
and the rollups; a malformed one is a 400 in the one error shape naming it."""

from __future__ import annotations

import pytest

from tests.factories import make_cluster, make_workload

LABELS = {
    "pay-api": {"team": "payments", "tier": "web"},
    "pay-batch": {"team": "payments", "tier": "batch"},
    "shop": {"team": "shop", "env": "prod"},
}


@pytest.fixture
def labelled(db):
    cluster = make_cluster("prod")
    for name, labels in LABELS.items():
        workload = make_workload(cluster, name)
        workload.labels = labels
        workload.save(update_fields=["labels"])


@pytest.mark.parametrize(
    "selector, expected",
    [
        ("team=payments,tier!=batch", {"pay-api"}),
        ("team in (payments,shop)", {"pay-api", "pay-batch", "shop"}),
        ("!env", {"pay-api", "pay-batch"}),
        ("env", {"shop"}),
    ],
)
@pytest.mark.parametrize("ordering", ["", "-savings_monthly"])
def test_the_list_is_narrowed_by_the_selector(
    read_client, labelled, selector, expected, ordering
):
    answer = read_client.get(
        "/api/v1/workloads/",
        {"label_selector": selector, **({"ordering": ordering} if ordering else {})},
    )
    assert answer.status_code == 200
    assert {w["name"] for w in answer.json()["results"]} == expected
    assert answer.json()["count"] == len(expected)


def test_the_export_is_narrowed_by_the_selector(read_client, labelled):
    rows = read_client.get(
        "/api/v1/recommendations/export",
        {"format": "json", "label_selector": "team=payments", "limit": 10},
    ).json()["results"]
    assert {row["workload"] for row in rows} == {"pay-api", "pay-batch"}


def test_the_rollup_is_narrowed_by_the_selector(read_client, labelled):
    body = read_client.get(
        "/api/v1/rollups", {"by": "label", "key": "team", "label_selector": "tier"}
    ).json()
    assert {g["name"]: g["workloads"] for g in body["groups"]} == {"payments": 2}
    assert body["total"]["workloads"] == 2


@pytest.mark.parametrize(
    "path, query",
    [
        ("/api/v1/workloads/", {}),
        ("/api/v1/rollups", {"by": "kind"}),
        ("/api/v1/recommendations/export", {"format": "json"}),
    ],
)
def test_a_malformed_selector_is_a_400_naming_it(read_client, labelled, path, query):
    answer = read_client.get(path, {**query, "label_selector": "team in payments"})
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["code"] == "invalid"
    assert list(error["fields"]) == ["label_selector"]
    assert "team in payments" in error["fields"]["label_selector"][0]


def test_search_finds_namespace_slash_name(read_client, db):
    cluster = make_cluster("prod")
    make_workload(cluster, "billing", namespace="catalog")
    make_workload(cluster, "catalog", namespace="billing")
    found = read_client.get("/api/v1/workloads/", {"search": "catalog/billing"})
    assert [(w["namespace"], w["name"]) for w in found.json()["results"]] == [
        ("catalog", "billing")
    ]
