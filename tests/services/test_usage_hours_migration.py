"""Migration 0022 adds the usage hours table: one row per container and hour (the
upsert's conflict target), an index for retention's prune by time; and goes back."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest
from django.db import connection

from recommender.engine.usage_hours import HourlyUsage
from recommender.models import UsageHour
from recommender.models.bulk import add_usage_hours

BEFORE = "0021_h27a_workload_amounts"
AFTER = "0022_usage_hours"
TABLE = "recommender_usagehour"


def _tables() -> set[str]:
    with connection.cursor() as cursor:
        return set(connection.introspection.table_names(cursor))


def _one(container_id: int, cpu: float) -> HourlyUsage:
    return HourlyUsage(
        np.array([container_id]),
        np.array([datetime(2026, 11, 21, 13, tzinfo=UTC).timestamp()]),
        np.array([cpu]),
        np.array([cpu]),
        np.array([1]),
        np.array([np.nan]),
        np.array([0.0]),
        np.array([0]),
    )


@pytest.mark.django_db(transaction=True)
def test_the_usage_hours_table_comes_and_goes_with_its_migration(migrate_to):
    migrate_to(BEFORE)
    assert TABLE not in _tables()

    apps = migrate_to(AFTER)

    assert TABLE in _tables()
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, TABLE)
    assert constraints["usage_hour_once"]["unique"]
    assert constraints["usage_hour_once"]["columns"] == ["container_id", "ends_at"]
    assert constraints["usage_hour_time"]["columns"] == ["ends_at"]
    Cluster = apps.get_model("recommender", "Cluster")
    Workload = apps.get_model("recommender", "Workload")
    Container = apps.get_model("recommender", "Container")
    container = Container.objects.create(
        workload=Workload.objects.create(
            cluster=Cluster.objects.create(name="c"),
            kind="Deployment",
            namespace="ns",
            name="api",
        ),
        name="app",
    )
    # Two adds of one hour merge into its one row (the conflict target holds).
    add_usage_hours(_one(container.pk, 0.5))
    add_usage_hours(_one(container.pk, 0.25))
    (row,) = UsageHour.objects.all()
    assert (row.cpu_max_cores, row.cpu_sum_cores, row.cpu_samples) == (0.5, 0.75, 2)
    assert row.memory_max_bytes is None and row.memory_samples == 0

    migrate_to(BEFORE)
    assert TABLE not in _tables()
