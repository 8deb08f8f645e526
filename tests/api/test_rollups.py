"""GET /api/v1/rollups and /api/v1/savings-trend, and a failing cluster in
/api/v1/clusters/."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from recommender.models import RefreshRun, SavingsSnapshot, Workload
from recommender.services.readmodels.provisioning import Prices
from recommender.services.readmodels.rollups import rollup
from tests.factories import make_cluster, make_recommendation, make_workload

MI = 2**20


@pytest.fixture
def teams(db):
    cluster = make_cluster("prod")
    for name, team in (
        ("web", "shop"),
        ("api", "shop"),
        ("ledger", "pay"),
        ("x", None),
    ):
        workload = make_workload(cluster, name, namespace=f"ns-{name}")
        if team:
            Workload.objects.filter(pk=workload.pk).update(
                labels={"app": name, "team": team}
            )
        make_recommendation(workload.containers.get())
    return cluster


def test_rollup_by_team(read_client, teams):
    answer = read_client.get("/api/v1/rollups?by=label&key=team")

    assert answer.status_code == 200
    body = answer.json()
    assert (body["by"], body["key"], body["cluster"]) == ("label", "team", "")
    groups = {g["name"]: g for g in body["groups"]}
    assert {name: g["workloads"] for name, g in groups.items()} == {
        "shop": 2,
        "pay": 1,
        "": 1,
    }
    expected = rollup(
        by="label", key="team", now=timezone.now(), prices=Prices.from_settings()
    )
    assert groups["shop"]["savings_monthly"] == round(
        next(g for g in expected.groups if g.name == "shop").savings, 2
    )
    assert groups["shop"]["statuses"] == {
        "under": 0,
        "over": 2,
        "missing": 0,
        "no-data": 0,
        "within": 0,
    }
    assert body["total"]["workloads"] == 4
    assert body["total"]["requested_cpu_millicores"] == 4 * 3 * 500


def test_rollup_by_namespace_names_the_cluster(read_client, teams):
    body = read_client.get("/api/v1/rollups?by=namespace&cluster=prod").json()
    assert {(g["cluster"], g["name"]) for g in body["groups"]} == {
        ("prod", "ns-web"),
        ("prod", "ns-api"),
        ("prod", "ns-ledger"),
        ("prod", "ns-x"),
    }


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("by=team", "by"),
        ("", "by"),
        ("by=", "by"),
        ("by=label&by=kind", "by"),
        ("by=label&key=a%20b", "key"),
    ],
)
def test_unknown_groupings_are_a_400_in_the_error_shape(read_client, db, query, field):
    answer = read_client.get(f"/api/v1/rollups?{query}")

    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["code"] == "invalid"
    assert error["message"]
    assert set(error["fields"]) == {field}


def test_savings_trend(read_client, teams):
    now = timezone.now().replace(minute=0, second=0, microsecond=0)
    for hours, savings in ((2, 30.0), (1, 20.0), (0, 10.0)):
        SavingsSnapshot.objects.create(
            cluster=teams,
            namespace="ns-web",
            taken_at=now - timedelta(hours=hours),
            savings_monthly=savings,
            workloads=1,
        )

    body = read_client.get("/api/v1/savings-trend?days=2").json()

    assert (body["days"], body["resolution"]) == (2, "hour")
    assert [p["savings_monthly"] for p in body["points"]] == [30.0, 20.0, 10.0]
    assert read_client.get("/api/v1/savings-trend?days=0").status_code == 400
    assert read_client.get("/api/v1/savings-trend?days=x").status_code == 400
    assert read_client.get("/api/v1/savings-trend?cluster=nope").json()["points"] == []


def test_a_failing_cluster_says_so_until_a_refresh_succeeds(read_client, teams):
    started = timezone.now() - timedelta(minutes=5)
    RefreshRun.objects.create(
        cluster=teams,
        status=RefreshRun.Status.FAILED,
        started_at=started,
        error="cannot list pods: HTTP 403 Forbidden",
    )

    cluster = read_client.get("/api/v1/clusters/prod/").json()

    failure = cluster["refresh_failure"]
    assert failure["error"] == "cannot list pods: HTTP 403 Forbidden"
    assert failure["failed_runs"] == 1
    assert failure["last_succeeded_at"] is None
    assert failure["since"].startswith(started.isoformat()[:19])
    assert cluster["namespace_selector"] == ""

    RefreshRun.objects.create(
        cluster=teams, status=RefreshRun.Status.SUCCEEDED, started_at=timezone.now()
    )
    assert read_client.get("/api/v1/clusters/prod/").json()["refresh_failure"] is None


def test_rollups_need_a_token(client, teams):
    assert client.get("/api/v1/rollups?by=cluster").status_code in (401, 403)


def test_groupings_other_than_label_have_no_key(read_client, teams):
    body = read_client.get("/api/v1/rollups?by=kind&key=team").json()
    assert (body["by"], body["key"]) == ("kind", "")
    assert [g["name"] for g in body["groups"]] == ["Deployment"]
