"""Savings, replicas and status in the API's workloads and the export, as on the
dashboard; unknown filter values refused in the one error shape."""

from __future__ import annotations

import json

import pytest
from django.test import Client
from django.utils import timezone

from recommender.models import Workload
from recommender.services.dashboard.workload_insight import workload_insight
from recommender.services.readmodels.provisioning import Prices


def test_workload_has_the_dashboards_savings_replicas_and_status(
    read_client: Client, shop: Workload
) -> None:
    data = read_client.get(f"/api/v1/workloads/{shop.pk}/").json()
    page = workload_insight(
        workload_id=shop.pk, now=timezone.now(), prices=Prices.from_settings()
    )
    assert data["savings_monthly"] == round(page.savings, 2)
    assert data["savings_monthly"] > 0  # 1 core / 1Gi → 587m / 250Mi, 3 replicas
    assert (data["replicas"], data["status"]) == (3, "over")
    listed = read_client.get("/api/v1/workloads/").json()["results"]
    assert listed[0]["savings_monthly"] == data["savings_monthly"]


def test_export_rows_have_replicas_status_and_savings(
    read_client: Client, shop: Workload
) -> None:
    rows = json.loads(
        read_client.get("/api/v1/recommendations/export?format=json").getvalue()
    )
    by_container = {row["container"]: row for row in rows}
    page = workload_insight(
        workload_id=shop.pk, now=timezone.now(), prices=Prices.from_settings()
    )
    savings = {item.container.name: round(item.savings, 2) for item in page.containers}
    assert by_container["app"]["status"] == "over"
    assert by_container["sidecar"]["status"] == "no-data"
    assert {name: row["savings_monthly"] for name, row in by_container.items()} == (
        savings
    )
    assert {row["replicas"] for row in rows} == {3}
    csv_text = read_client.get("/api/v1/recommendations/export?format=csv").getvalue()
    assert b"replicas,status,savings_monthly" in csv_text.splitlines()[0]


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("status=nodata", "status"),
        ("status=at-risk", "status"),
        ("mode=Inplace", "mode"),
        ("at_risk=maybe", "at_risk"),
        ("wasteful=lots", "wasteful"),
        ("missing_requests=2", "missing_requests"),
        ("ordering=-cost", "ordering"),
        ("ordering=savings", "ordering"),
        ("ordering=-name-", "ordering"),
        ("ordering=name,", "ordering"),
    ],
)
def test_unknown_filter_values_are_refused_naming_them(
    read_client: Client, shop: Workload, query: str, field: str
) -> None:
    response = read_client.get(f"/api/v1/workloads/?{query}")
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid" and list(error["fields"]) == [field]
