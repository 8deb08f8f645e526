"""Each workload's stored rollup amounts (WorkloadAmounts,
services/readmodels/label_rollups.py): the rollups read them once every enabled cluster
has them, and give, for every grouping and label key, what computing every container
as the page loads gives, also after changes and deletions."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from recommender.models import (
    Cluster,
    Container,
    RefreshRun,
    Workload,
    WorkloadAmounts,
)
from recommender.services.readmodels import label_rollups, workload_totals
from recommender.services.readmodels.provisioning import risk_rules
from recommender.services.readmodels.rollups import rollup
from recommender.services.refresh.cycle import refresh_cluster
from tests.factories import make_workload
from tests.services.test_provisioning_parity import PRICES
from tests.services.test_workload_totals import _store_all, fleet  # noqa: F401

pytestmark = pytest.mark.django_db

GROUPINGS = (
    ("cluster", ""),
    ("namespace", ""),
    ("kind", ""),
    ("label", "team"),
    ("label", "app.kubernetes.io/part-of"),
)


def _labelled() -> None:
    """Teams on most workloads (a few without), another key on some."""
    for index, workload in enumerate(Workload.objects.order_by("pk")):
        labels = (
            {} if index % 5 == 0 else {"team": ("web", "data", "ops")[index // 3 % 3]}
        )
        if index % 4 == 0:
            labels["app.kubernetes.io/part-of"] = f"suite-{index % 2}"
        workload.labels = labels
        workload.save(update_fields=["labels"])


def _rollups(now, monkeypatch, *, stored: bool) -> dict:
    """Every grouping's rollup (of the fleet and of cluster a), as the API gives it."""
    with monkeypatch.context() as patched:
        if not stored:
            patched.setattr(workload_totals, "is_complete", lambda: False)
        out = {}
        for by, key in GROUPINGS:
            for cluster in ("", "a"):
                result = rollup(by=by, key=key, cluster=cluster, now=now, prices=PRICES)
                out[(by, key, cluster)] = (
                    [group.as_dict() for group in result.groups],
                    result.total.as_dict(),
                )
        return out


def _check_same(now, monkeypatch) -> dict:
    assert workload_totals.is_complete()
    stored = _rollups(now, monkeypatch, stored=True)
    computed = _rollups(now, monkeypatch, stored=False)
    assert stored == computed
    return stored


def test_stored_rollups_are_the_computed_ones_after_changes_and_deletions(
    fleet,  # noqa: F811
    monkeypatch,
):
    now = fleet
    _labelled()
    _store_all(now)

    first = _check_same(now, monkeypatch)
    # The fleet is varied: several groups with containers, savings and statuses.
    groups, total = first[("label", "team", "")]
    assert {g["name"] for g in groups} == {"web", "data", "ops", ""}
    assert total["containers"] > 100 and total["savings_monthly"] != 0
    assert len([s for s, n in total["statuses"].items() if n]) == 5
    # Some workloads have recent OOM kills (counted apart from the database's sums).
    rules = risk_rules(now)
    workloads = label_rollups.with_amounts(
        Workload.objects.shown(), prices=PRICES, rules=rules, stored=True
    )
    assert len(label_rollups.killed_rows(workloads, ["kind"], rules)) > 3

    # Requests raised, a container and a workload deleted, a workload added,
    # replicas changed, a label moved: stored again, as the next refresh does.
    a = Cluster.objects.get(name="a")
    apps = Container.objects.filter(workload__cluster=a, name="app")
    Container.objects.filter(pk__in=apps[:5]).update(request_cpu_millicores=777)
    Container.objects.filter(pk=apps[6].pk).delete()
    Workload.objects.filter(pk=apps[7].workload_id).delete()
    Workload.objects.filter(cluster=a).exclude(replicas=None).update(replicas=3)
    newcomer = make_workload(a, "newcomer", namespace="one")
    newcomer.labels = {"team": "new"}
    newcomer.save(update_fields=["labels"])
    moved = Workload.objects.filter(cluster=a, labels__team="web").first()
    moved.labels = {"team": "data"}
    moved.save(update_fields=["labels"])
    _store_all(now)

    second = _check_same(now, monkeypatch)
    assert second != first
    assert "new" in {g["name"] for g in second[("label", "team", "")][0]}
    assert WorkloadAmounts.objects.count() == Workload.objects.count()


def test_a_rollup_from_stored_amounts_joins_no_container(
    fleet,  # noqa: F811
):
    _labelled()
    _store_all(fleet)

    with CaptureQueriesContext(connection) as queries:
        rollup(by="label", key="team", now=fleet, prices=PRICES)

    sql = " ".join(q["sql"] for q in queries.captured_queries)
    assert '"recommender_workloadamounts"' in sql
    # Only realized_savings reads containers, and only of workloads with a change.
    assert "recommender_recommendation" not in sql


def test_a_store_rewrites_only_the_rows_that_changed(fleet):  # noqa: F811
    cluster = Cluster.objects.get(name="a")
    assert label_rollups.store(cluster_id=cluster.pk) > 40
    assert label_rollups.store(cluster_id=cluster.pk) == 0
    container = Container.objects.filter(workload__cluster=cluster, name="app").first()
    Container.objects.filter(pk=container.pk).update(request_memory_bytes=12345)

    assert label_rollups.store(cluster_id=cluster.pk) == 1
    # A shard's store touches only its namespace.
    Container.objects.filter(workload__cluster=cluster).update(
        request_cpu_millicores=4321
    )
    rows = WorkloadAmounts.objects.filter(workload__cluster=cluster)
    two = set(rows.filter(workload__namespace="two").values_list())

    assert label_rollups.store(cluster_id=cluster.pk, namespace="one") > 10

    assert set(rows.filter(workload__namespace="two").values_list()) == two
    assert label_rollups.store(cluster_id=cluster.pk, namespace="one") == 0
    assert label_rollups.store(cluster_id=cluster.pk, namespace="two") > 10


def test_a_refresh_stores_every_workloads_amounts(settings, db):
    settings.SIMULATION_SEED = 7
    settings.SIMULATION_WORKLOADS = 24
    settings.SIMULATION_HISTORY_DAYS = 1.0
    cluster = Cluster.objects.create(name="sim", kind=Cluster.Kind.SIMULATED)

    run = refresh_cluster(cluster_id=cluster.pk, now=timezone.now())

    assert run.status == RefreshRun.Status.SUCCEEDED, run.error
    assert WorkloadAmounts.objects.filter(workload__cluster=cluster).count() == 24
    assert label_rollups.store(cluster_id=cluster.pk) == 0
