"""Each workload's stored rollup amounts (WorkloadAmounts,
services/readmodels/label_rollups.py): the rollups read them once every enabled cluster
has them, and give, for every grouping and label key, what computing every container
as the page loads gives, also after changes and deletions."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.models import F
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from recommender.models import (
    Cluster,
    Container,
    GroupTotals,
    RefreshRun,
    Workload,
    WorkloadAmounts,
    WorkloadTotals,
)
from recommender.services.readmodels import (
    group_totals,
    label_rollups,
    workload_totals,
)
from recommender.services.readmodels.namespace_savings import namespace_savings
from recommender.services.readmodels.provisioning import Prices, risk_rules
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


def _group_rows(cluster=None) -> list[tuple]:
    rows = GroupTotals.objects.order_by("cluster_id", "namespace", "kind", "label")
    if cluster is not None:
        rows = rows.filter(cluster=cluster)
    return [
        (r.cluster_id, r.namespace, r.kind, r.label, r.workloads, round(r.savings, 6))
        for r in rows
    ]


def test_the_stored_group_sums_stand_for_the_workloads_without_a_stored_kill(
    fleet,  # noqa: F811
    settings,
    monkeypatch,
):
    now = fleet
    _labelled()
    _store_all(now)
    unkilled = Workload.objects.filter(
        is_active=True, totals__latest_oom_at__isnull=True
    )
    assert 0 < unkilled.count() < Workload.objects.filter(is_active=True).count()
    assert sum(GroupTotals.objects.values_list("workloads", flat=True)) == (
        unkilled.count()
    )
    assert {r.label for r in GroupTotals.objects.all()} == {"web", "data", "ops", ""}
    assert group_totals.is_usable(prices=PRICES, key="team")
    assert group_totals.is_usable(prices=PRICES, key=None)
    assert not group_totals.is_usable(prices=PRICES, key="app.kubernetes.io/part-of")
    other = Prices(per_core_hour=PRICES.per_core_hour * 2, per_gib_hour=1.0)
    assert not group_totals.is_usable(prices=other, key=None)

    # The rollups read them: a workload's stored amounts edited by hand show in a
    # rollup by another label key (summed as it loads), not in one the groups serve.
    def containers(by, key):
        return rollup(by=by, key=key, now=now, prices=PRICES).total.containers

    before = containers("namespace", "")
    assert containers("label", "app.kubernetes.io/part-of") == before
    first = unkilled.filter(cluster__name="a").order_by("pk").first()
    WorkloadAmounts.objects.filter(workload=first).update(
        containers=F("containers") + 1000
    )

    assert containers("label", "app.kubernetes.io/part-of") == before + 1000
    for by, key in GROUPINGS[:4]:
        assert containers(by, key) == before

    # At other list prices (a changed setting, until the next refresh) the rollups
    # sum every workload as they load, at those prices: as computed.
    WorkloadAmounts.objects.filter(workload=first).update(
        containers=F("containers") - 1000
    )
    settings.PRICE_PER_CORE_HOUR = PRICES.per_core_hour * 2
    _store_all(now)
    assert not group_totals.is_usable(prices=PRICES, key=None)
    _check_same(now, monkeypatch)


def test_a_shard_replaces_only_its_namespaces_group_sums(fleet):  # noqa: F811
    _labelled()
    _store_all(fleet)
    cluster = Cluster.objects.get(name="a")
    whole = _group_rows(cluster)
    assert len({namespace for _, namespace, *_ in whole}) > 1
    Workload.objects.filter(cluster=cluster, namespace="one").update(labels={})

    rules = risk_rules(fleet)
    group_totals.store(cluster_id=cluster.pk, rules=rules, namespace="one")

    after = _group_rows(cluster)
    assert [r for r in after if r[1] != "one"] == [r for r in whole if r[1] != "one"]
    assert {r[3] for r in after if r[1] == "one"} == {""}
    assert sum(r[4] for r in after) == sum(r[4] for r in whole)


def test_the_namespaces_savings_of_stored_clusters_compute_no_workload_as_they_load(
    fleet,  # noqa: F811
):
    """Every enabled cluster stored: the savings come from the stored rows alone; the
    query for clusters never stored (every workload's savings computed as the page
    loads, tens of milliseconds to build) is not issued."""
    now = fleet
    _store_all(now)
    with CaptureQueriesContext(connection) as queries:
        namespace_savings(prices=PRICES, now=now)
    assert not [
        q["sql"]
        for q in queries.captured_queries
        if '"totals_at" IS NULL' in q["sql"] and "recommender_workload" in q["sql"]
    ]


def test_the_namespaces_savings_from_the_group_sums_are_the_workloads_summed(
    fleet,  # noqa: F811
    monkeypatch,
):
    now = fleet
    _labelled()
    _store_all(now)
    assert group_totals.is_usable(prices=PRICES, key=None)

    def savings(*, groups: bool) -> dict:
        with monkeypatch.context() as patched:
            if not groups:
                patched.setattr(group_totals, "is_usable", lambda **kw: False)
            found = namespace_savings(prices=PRICES, now=now)
        return {key: round(value, 6) for key, value in found.items()}

    from_groups = savings(groups=True)
    assert from_groups == savings(groups=False)
    assert len([value for value in from_groups.values() if value]) == 4

    # Read from the groups: a workload's stored parts edited by hand (no kill) show
    # only when summed per workload.
    unkilled = WorkloadTotals.objects.filter(
        latest_oom_at__isnull=True, workload__cluster__name="a"
    ).order_by("workload_id")[0]
    WorkloadTotals.objects.filter(pk=unkilled.pk).update(
        excess_cpu_millicores=F("excess_cpu_millicores") + 10_000
    )
    assert savings(groups=True) == from_groups
    assert savings(groups=False) != from_groups
