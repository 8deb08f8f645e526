"""Migration 0006 adds the one-open-change-per-pod constraint; open duplicates
already stored are closed first (the newest stays open), so it never fails on them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

BEFORE = "0005_h9a_pods_and_applied_resources"
AFTER = "0006_h9b_policy_ownership_open_changes"
T0 = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)


@pytest.mark.django_db(transaction=True)
def test_older_open_duplicates_are_closed_before_the_constraint(migrate_to):
    apps = migrate_to(BEFORE)
    Cluster = apps.get_model("recommender", "Cluster")
    Workload = apps.get_model("recommender", "Workload")
    ResizeChange = apps.get_model("recommender", "ResizeChange")
    cluster = Cluster.objects.create(name="c")
    workload = Workload.objects.create(
        cluster=cluster, kind="Deployment", namespace="ns", name="api"
    )

    def change(pod, status, minutes):
        return ResizeChange.objects.create(
            workload=workload,
            pod=pod,
            status=status,
            created_at=T0 + timedelta(minutes=minutes),
        ).pk

    oldest = change("api-1", "proposed", 0)
    older = change("api-1", "approved", 1)
    newest = change("api-1", "proposed", 2)
    done = change("api-1", "applied", 3)
    other = change("api-2", "approved", 0)

    apps = migrate_to(AFTER)
    rows = {
        r.pk: (r.status, r.error)
        for r in apps.get_model("recommender", "ResizeChange").objects.all()
    }
    superseded = f"superseded by change {newest} (one open change per pod)"
    assert rows == {
        oldest: ("rejected", f"superseded by change {older} (one open change per pod)"),
        older: ("rejected", superseded),
        newest: ("proposed", ""),
        done: ("applied", ""),
        other: ("approved", ""),
    }
