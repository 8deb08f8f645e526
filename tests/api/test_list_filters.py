"""List filters are one declarative map (``queries.LookupFilterSerializer``): each
query parameter narrows the list by its lookup, and a bad value is a 400 in the one
error shape naming the parameter."""

from __future__ import annotations

import pytest
from rest_framework import serializers

from recommender.api.queries import LookupFilterSerializer
from recommender.models import RefreshRun, ResizeChange
from tests.factories import make_cluster, make_workload


@pytest.fixture
def runs(db):
    prod, staging = make_cluster("prod"), make_cluster("staging")
    made = {
        "prod-refresh-ok": (prod, "refresh", "succeeded"),
        "prod-backfill-failed": (prod, "backfill", "failed"),
        "staging-backfill-ok": (staging, "backfill", "succeeded"),
    }
    return {
        name: RefreshRun.objects.create(cluster=cluster, kind=kind, status=status).pk
        for name, (cluster, kind, status) in made.items()
    }


@pytest.mark.parametrize(
    "query, expected",
    [
        ("", {"prod-refresh-ok", "prod-backfill-failed", "staging-backfill-ok"}),
        ("cluster=prod", {"prod-refresh-ok", "prod-backfill-failed"}),
        ("kind=backfill", {"prod-backfill-failed", "staging-backfill-ok"}),
        ("kind=backfill&status=succeeded", {"staging-backfill-ok"}),
        ("cluster=prod&kind=backfill&status=failed", {"prod-backfill-failed"}),
        ("cluster=nowhere", set()),
    ],
)
def test_the_run_list_is_narrowed_by_each_parameter(read_client, runs, query, expected):
    answer = read_client.get(f"/api/v1/runs/?{query}").json()
    assert {r["id"] for r in answer["results"]} == {runs[name] for name in expected}


def test_the_change_list_is_narrowed_by_each_parameter(read_client, db):
    prod = make_cluster("prod")
    web = make_workload(prod, "web", namespace="shop")
    db_ = make_workload(prod, "db", namespace="data")
    other = make_workload(make_cluster("staging"), "web", namespace="shop")
    proposed = ResizeChange.objects.create(workload=web, pod="web-1").pk
    applied = ResizeChange.objects.create(
        workload=db_, pod="db-0", status=ResizeChange.Status.APPLIED
    ).pk
    elsewhere = ResizeChange.objects.create(workload=other, pod="web-2").pk

    def listed(query: str) -> set[int]:
        answer = read_client.get(f"/api/v1/changes/?{query}").json()
        return {c["id"] for c in answer["results"]}

    assert listed("") == {proposed, applied, elsewhere}
    assert listed("cluster=prod") == {proposed, applied}
    assert listed("namespace=shop&cluster=prod") == {proposed}
    assert listed("status=applied") == {applied}
    assert listed(f"workload={other.pk}") == {elsewhere}


@pytest.mark.parametrize(
    "url, parameter",
    [
        ("/api/v1/runs/?kind=nope", "kind"),
        ("/api/v1/runs/?status=", "status"),
        ("/api/v1/runs/?cluster=a&cluster=b", "cluster"),
        ("/api/v1/changes/?workload=x", "workload"),
        ("/api/v1/changes/?status=maybe", "status"),
    ],
)
def test_a_bad_filter_is_a_400_naming_the_parameter(read_client, db, url, parameter):
    response = read_client.get(url)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid"
    assert set(error["fields"]) == {parameter}


def test_a_parameter_without_a_lookup_is_refused_where_it_is_declared():
    with pytest.raises(TypeError, match="need one lookup each"):

        class Unmapped(LookupFilterSerializer):
            cluster = serializers.CharField(required=False)
            kind = serializers.CharField(required=False)
            lookups = {"cluster": "cluster__name"}
