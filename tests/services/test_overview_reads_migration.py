"""Migration 0013 keeps each latest recommendation's confidence in a column (read
from the stored explanation) and, on PostgreSQL, adds the overview's covering
indexes."""

from __future__ import annotations

import pytest
from django.db import connection

BEFORE = "0012_h14a_usage_floors"
AFTER = "0013_h16d_overview_reads"
INDEXES = {"rec_latest_numbers", "container_facts_columns", "workload_shown_columns"}


def _indexes() -> set[str]:
    with connection.cursor() as cursor:
        return {
            name
            for table in (
                "recommender_recommendation",
                "recommender_container",
                "recommender_workload",
            )
            for name in connection.introspection.get_constraints(cursor, table)
        }


@pytest.mark.django_db(transaction=True)
def test_latest_recommendations_get_their_confidence_and_postgres_the_indexes(
    migrate_to,
):
    apps = migrate_to(BEFORE)
    assert not INDEXES & _indexes()
    Cluster = apps.get_model("recommender", "Cluster")
    Workload = apps.get_model("recommender", "Workload")
    Container = apps.get_model("recommender", "Container")
    Recommendation = apps.get_model("recommender", "Recommendation")
    workload = Workload.objects.create(
        cluster=Cluster.objects.create(name="c"),
        kind="Deployment",
        namespace="ns",
        name="api",
    )
    ids = {}
    for name, confidence, latest in (
        ("days", 3.5, True),
        ("whole", 12, True),
        ("text", "lots", True),
        ("old", 2.0, False),
    ):
        container = Container.objects.create(workload=workload, name=name)
        rec = Recommendation.objects.create(
            container=container,
            explanation={"resources": {"cpu": {"confidence": confidence}}},
        )
        if latest:
            container.latest_recommendation = rec
            container.save()
        ids[name] = rec.pk

    apps = migrate_to(AFTER)
    rows = dict(
        apps.get_model("recommender", "Recommendation").objects.values_list(
            "pk", "confidence"
        )
    )
    assert rows[ids["days"]] == 3.5
    assert rows[ids["whole"]] == 12.0
    assert rows[ids["text"]] is None  # not a number: "unknown"
    assert rows[ids["old"]] is None  # not a latest row: never read
    expected = INDEXES if connection.vendor == "postgresql" else set()
    assert INDEXES & _indexes() == expected
