"""The read models follow what a refresh changed (readmodels/changes.py): a store
recomputes the workloads the refresh's writers noted and their namespaces' and
groups' rows, stores what recomputing every workload stores, and the first store
of each hour recomputes everything."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection

from recommender.models import (
    Cluster,
    Container,
    GroupTotals,
    NamespaceTotals,
    RefreshRun,
    Workload,
    WorkloadAmounts,
    WorkloadTotals,
)
from recommender.services.readmodels import changes, namespace_totals
from recommender.services.refresh.cycle import refresh_cluster
from tests.factories import make_cluster, make_workload

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


def _stored(cluster: Cluster) -> dict[str, list[tuple]]:
    """Every stored read-model row of ``cluster`` (but the row ids)."""
    of_workloads = {"workload__cluster": cluster}

    def rows(model, fields, **where) -> list[tuple]:
        return sorted(model.objects.filter(**where).values_list(*fields), key=repr)

    def columns(model, *skip: str) -> list[str]:
        return [f.attname for f in model._meta.concrete_fields if f.attname not in skip]

    return {
        "workloads": rows(WorkloadTotals, columns(WorkloadTotals), **of_workloads),
        "amounts": rows(
            WorkloadAmounts, columns(WorkloadAmounts, "id"), **of_workloads
        ),
        "namespaces": rows(
            NamespaceTotals, columns(NamespaceTotals, "id"), cluster=cluster
        ),
        "groups": rows(GroupTotals, columns(GroupTotals, "id"), cluster=cluster),
    }


def test_cycles_that_recompute_what_they_changed_store_what_a_full_store_does(
    settings, monkeypatch
):
    settings.SIMULATION_SEED = 7
    settings.SIMULATION_WORKLOADS = 24
    settings.SIMULATION_HISTORY_DAYS = 0.25
    cluster = Cluster.objects.create(name="sim", kind=Cluster.Kind.SIMULATED)
    recomputed: list[int | None] = []
    store = namespace_totals.store

    def spied(**kwargs):  # type: ignore[no-untyped-def]
        changed = kwargs.get("changed")
        recomputed.append(None if changed is None else len(changed))
        return store(**kwargs)

    monkeypatch.setattr(namespace_totals, "store", spied)
    moved = 0
    for minute in range(6):
        run = refresh_cluster(
            cluster_id=cluster.pk, now=NOW + timedelta(minutes=minute)
        )
        assert run.status == RefreshRun.Status.SUCCEEDED, run.error
        if minute:
            moved += run.counts["recommendations_changed"]
    # After the first, each store recomputed only what its cycle changed.
    later = recomputed[1:]
    assert all(n is not None and n < 24 for n in later) and sum(later) > 0, later
    assert moved > 0
    incremental = _stored(cluster)

    store(cluster=cluster, now=NOW + timedelta(minutes=5))

    assert _stored(cluster) == incremental


@pytest.fixture
def two_namespaces():
    """A cluster with three workloads in namespace "one" and two in "two", stored."""
    cluster = make_cluster("a")
    for index in range(5):
        make_workload(cluster, f"w{index}", namespace="one" if index < 3 else "two")
    namespace_totals.store(cluster=cluster, now=NOW)
    return cluster


def _requested(cluster: Cluster) -> dict[str, int]:
    return dict(
        NamespaceTotals.objects.filter(cluster=cluster).values_list(
            "namespace", "requested_cpu_millicores"
        )
    )


def test_a_store_recomputes_the_noted_workloads_and_the_next_hour_everything(
    two_namespaces,
):
    cluster = two_namespaces
    before = _requested(cluster)
    noted = Workload.objects.get(name="w0")
    unnoted = Workload.objects.get(name="w4")
    Container.objects.filter(workload__in=[noted, unnoted]).update(
        request_cpu_millicores=900
    )

    namespace_totals.store(
        cluster=cluster, now=NOW + timedelta(minutes=1), changed={noted.pk}
    )

    # 3 replicas x 400 more millicores in "one"; "two" as it was.
    assert _requested(cluster) == {"one": before["one"] + 1200, "two": before["two"]}
    amounts = dict(
        WorkloadAmounts.objects.values_list("workload_id", "requested_cpu_millicores")
    )
    assert amounts[noted.pk] == 2700
    assert amounts[unnoted.pk] == 1500

    # The first store of the next hour recomputes every workload: the change
    # nothing noted (an edit in the Django admin) shows then.
    namespace_totals.store(cluster=cluster, now=NOW + timedelta(hours=1), changed=set())

    assert _requested(cluster) == {
        "one": before["one"] + 1200,
        "two": before["two"] + 1200,
    }
    incremental = _stored(cluster)
    namespace_totals.store(cluster=cluster, now=NOW + timedelta(hours=1))
    assert _stored(cluster) == incremental


def test_a_processs_first_store_of_a_cluster_recomputes_everything(
    two_namespaces, monkeypatch
):
    """A restarted process (new list prices, label key or currency in its settings)
    recomputes every workload at its first store of the cluster, within the hour
    too; its next store recomputes only what was noted."""
    cluster = two_namespaces
    before = _requested(cluster)
    Container.objects.filter(workload__name="w4").update(request_cpu_millicores=900)
    monkeypatch.setattr(namespace_totals, "_STORED_IN_FULL", set())  # a restart

    namespace_totals.store(
        cluster=cluster, now=NOW + timedelta(minutes=1), changed=set()
    )

    assert _requested(cluster) == {"one": before["one"], "two": before["two"] + 1200}
    Container.objects.filter(workload__name="w3").update(request_cpu_millicores=900)
    namespace_totals.store(
        cluster=cluster, now=NOW + timedelta(minutes=2), changed=set()
    )
    assert _requested(cluster) == {"one": before["one"], "two": before["two"] + 1200}


def _statements(
    cluster: Cluster, changed: set[int], minute: int
) -> list[tuple[str, list[Any]]]:
    """The statements of a store, each with its parameters (PostgreSQL binds a JSON
    document's on the server: bulk.document_cursor)."""
    statements: list[tuple[str, list[Any]]] = []

    def record(execute, sql, params, many, context):  # type: ignore[no-untyped-def]
        if "SAVEPOINT" not in sql:
            statements.append((sql, list(params or ())))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(record):
        namespace_totals.store(
            cluster=cluster, now=NOW + timedelta(minutes=minute), changed=changed
        )
    return statements


def test_a_stores_statements_follow_what_changed_not_the_fleet():
    small, large = make_cluster("small"), make_cluster("large")
    for cluster, workloads in ((small, 2), (large, 20)):
        for index in range(workloads):
            make_workload(cluster, f"w{index}", namespace=f"ns{index % 2}")
        namespace_totals.store(cluster=cluster, now=NOW)
    # Recomputing every workload when one changed: its rows rewritten.
    Container.objects.filter(workload__cluster=large, workload__name="w0").update(
        request_cpu_millicores=900
    )
    everything = _statements(large, None, 1)  # type: ignore[arg-type]

    # Nothing changed: the cluster's row, taken in turn, and nothing else.
    assert len(_statements(small, set(), 2)) == len(_statements(large, set(), 2)) == 1
    one = Workload.objects.filter(cluster=small).first()
    other = Workload.objects.filter(cluster=large).first()
    # One changed workload: as many statements at either size, no more than the
    # recomputation of every workload (as many on PostgreSQL, where a delete and an
    # insert are one statement), the group sums replaced in its namespace only.
    scoped = _statements(large, {other.pk}, 3)
    assert len(_statements(small, {one.pk}, 3)) == len(scoped) <= len(everything)
    replaced = [s for s in scoped if 'DELETE FROM "recommender_grouptotals"' in s[0]]
    assert len(replaced) == 1 and _in_namespaces(*replaced[0]) == [other.namespace]
    assert not any(_in_namespaces(*s) == [other.namespace] for s in everything)


def _in_namespaces(sql: str, params: list[Any]) -> list[str]:
    """The namespaces (of make_workload's ns0 and ns1) a statement filters on with
    ``namespace IN (...)``, as its parameters give them."""
    if '"namespace" IN (' not in sql:
        return []
    return [p for p in params if p in ("ns0", "ns1")]


def test_a_note_outside_a_collection_is_dropped():
    changes.note([1, 2])
    with changes.collected() as noted:
        changes.note([3])
        changes.note(pk for pk in (4, 3))
    changes.note([5])

    assert noted == {3, 4}
