"""Migration 0012 keeps each latest recommendation's usage floors (the lower bounds
without the pod minimum's share) in columns, read from the stored explanations."""

from __future__ import annotations

import pytest

BEFORE = "0011_h14d_rollups_trend_optin"
AFTER = "0012_h14a_usage_floors"
MI = 2**20


@pytest.mark.django_db(transaction=True)
def test_latest_recommendations_get_their_floors(migrate_to):
    apps = migrate_to(BEFORE)
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
    pod_minimum = {  # the engine's shape: memory raised to the pod minimum's share
        "resources": {
            "cpu": {"lower_bound": {"after_confidence": 108}},
            "memory": {"lower_bound": {"after_confidence": 23 * MI}},
        }
    }
    ids = {}
    for name, explanation in (("sidecar", pod_minimum), ("app", {}), ("old", None)):
        container = Container.objects.create(workload=workload, name=name)
        rec = Recommendation.objects.create(
            container=container,
            lower_cpu_millicores=108,
            lower_memory_bytes=125 * MI,
            explanation=explanation or {},
        )
        if explanation is not None:
            container.latest_recommendation = rec
            container.save()
        ids[name] = rec.pk

    apps = migrate_to(AFTER)
    rows = {
        r.pk: (r.floor_cpu_millicores, r.floor_memory_bytes)
        for r in apps.get_model("recommender", "Recommendation").objects.all()
    }
    assert rows[ids["sidecar"]] == (108, 23 * MI)
    assert rows[ids["app"]] == (108, 125 * MI)
    assert rows[ids["old"]] == (None, None)  # not a latest row: reads as the bound
