"""Migration 0032 fills each stored namespace's price mix from its workloads and its
count of workloads with a shortfall from its stored shortfalls and, on PostgreSQL,
adds the index the overview's OOM kills join their containers by."""

from __future__ import annotations

import pytest
from django.db import connection
from django.utils import timezone

BEFORE = "0031_savings_pod_requests"
AFTER = "0032_overview_stored_figures"


def _container_indexes() -> set[str]:
    with connection.cursor() as cursor:
        return set(
            connection.introspection.get_constraints(cursor, "recommender_container")
        )


@pytest.mark.django_db(transaction=True)
def test_stored_namespaces_get_their_price_mix_and_count_of_shortfalls(migrate_to):
    apps = migrate_to(BEFORE)
    assert "container_owner" not in _container_indexes()
    Cluster = apps.get_model("recommender", "Cluster")
    Workload = apps.get_model("recommender", "Workload")
    NamespaceTotals = apps.get_model("recommender", "NamespaceTotals")
    cluster = Cluster.objects.create(name="c", totals_at=timezone.now())
    for name, namespace, source, core, gib, active in (
        ("a", "ns", "table", 0.02, 0.004, True),
        ("b", "ns", "table", 0.05, None, True),
        ("c", "ns", "default", None, None, True),
        ("gone", "ns", "opencost", 9.0, 9.0, False),  # inactive: not counted
        ("d", "other", "opencost", 0.03, 0.002, True),
    ):
        Workload.objects.create(
            cluster=cluster,
            kind="Deployment",
            namespace=namespace,
            name=name,
            price_source=source,
            price_per_core_hour=core,
            price_per_gib_hour=gib,
            is_active=active,
        )
    for namespace, shortfalls in (
        ("ns", {"1": 20, "2": 35}),
        ("other", {}),
        ("empty", {}),
    ):
        NamespaceTotals.objects.create(
            cluster=cluster,
            namespace=namespace,
            computed_at=timezone.now(),
            shortfalls=shortfalls,
        )

    apps = migrate_to(AFTER)

    stored = dict(
        apps.get_model("recommender", "NamespaceTotals").objects.values_list(
            "namespace", "price_mix"
        )
    )
    assert stored == {
        "ns": [
            ["default", 1, None, None, None, None],
            ["table", 2, 0.02, 0.05, 0.004, 0.004],
        ],
        "other": [["opencost", 1, 0.03, 0.03, 0.002, 0.002]],
        "empty": [],
    }
    assert dict(
        apps.get_model("recommender", "NamespaceTotals").objects.values_list(
            "namespace", "workloads_short"
        )
    ) == {"ns": 2, "other": 0, "empty": 0}
    expected = {"container_owner"} if connection.vendor == "postgresql" else set()
    assert {"container_owner"} & _container_indexes() == expected
