"""Each workload's stored facts (WorkloadTotals, readmodels/workload_totals.py):
the lists filtered or sorted by a fact read them once every enabled cluster has them,
and give what computing every container as the page loads gives."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from recommender.api.queries import FACT_ORDERING, filter_workloads
from recommender.models import (
    Cluster,
    Container,
    NamespaceTotals,
    RefreshRun,
    Workload,
    WorkloadTotals,
)
from recommender.roles import Role
from recommender.services.dashboard.insights import WorkloadFilters, list_workloads
from recommender.services.readmodels import (
    label_rollups,
    namespace_totals,
    workload_totals,
)
from recommender.services.refresh.cycle import refresh_cluster
from tests.factories import make_cluster, make_user, make_workload
from tests.services.test_provisioning_parity import PRICES, _rules, varied_fleet

pytestmark = pytest.mark.django_db

FACTS = (
    "status",
    "savings",
    "recent_ooms",
    "shortfall",
    "risk",
    "missing_count",
    "no_data_count",
)


@pytest.fixture
def fleet(settings):
    """Two enabled clusters (two namespaces each) and a disabled one: every request
    and recommendation shape, sidecars, init containers (short and OOM-killed, never
    counted), recent and old OOM kills, replicas unknown or 0, inactive workloads and
    one without containers. Returns the time the kills are recent at."""
    settings.PRICE_PER_CORE_HOUR = PRICES.per_core_hour
    settings.PRICE_PER_GIB_HOUR = PRICES.per_gib_hour
    now = timezone.now()
    clusters = [make_cluster("a"), make_cluster("b"), make_cluster("off")]
    Cluster.objects.filter(name="off").update(is_enabled=False)
    varied_fleet(
        now,
        cluster_of=lambda index: clusters[index % 3],
        namespace_of=lambda index: ("one", "two")[index % 2],
    )
    make_workload(clusters[0], "empty", containers={})
    return now


def _store_all(now) -> None:
    for cluster in Cluster.objects.all():
        namespace_totals.store(cluster=cluster, now=now)


def _facts(queryset) -> dict[int, tuple]:
    return {
        pk: (status, round(savings, 6), *rest)
        for pk, status, savings, *rest in queryset.values_list("pk", *FACTS)
    }


def _stored(now):
    return Workload.objects.with_stored_provisioning(prices=PRICES, rules=_rules(now))


def _live(now):
    return Workload.objects.with_provisioning(prices=PRICES, rules=_rules(now))


def test_the_stored_facts_are_the_computed_ones_for_every_workload(fleet):
    now = fleet

    _store_all(now)

    workloads = Workload.objects.filter(cluster__is_enabled=True)
    stored = _facts(_stored(now).filter(pk__in=workloads))
    live = _facts(_live(now).filter(pk__in=workloads))
    assert stored == live
    assert len(stored) == workloads.count() > 100
    # The fleet has every status, OOM-killed workloads and shortfalls.
    assert {f[0] for f in live.values()} == {
        "under",
        "over",
        "missing",
        "no-data",
        "within",
    }
    assert {f[2] for f in live.values()} >= {0, 1, 2, 3}
    assert len({f[3] for f in live.values()}) > 1
    # Every workload of the stored clusters has its row, inactive ones included.
    assert WorkloadTotals.objects.count() == Workload.objects.count()


def test_lists_sorted_or_filtered_by_each_fact_give_the_same_rows_in_order(fleet):
    now = fleet
    live = {}
    filters = [
        {"ordering": [sign + key]} for key in FACT_ORDERING for sign in ("", "-")
    ]
    filters += [
        {"status": status, "ordering": ["-savings_monthly"]}
        for status in ("under", "over", "missing", "no-data", "within")
    ]
    filters += [
        {fact: value, "ordering": ["-risk", "name"]}
        for fact in ("at_risk", "wasteful", "missing_requests")
        for value in (True, False)
    ]
    for f in filters:
        live[str(f)] = list(
            filter_workloads(_live(now), f).values_list("pk", flat=True)
        )

    _store_all(now)

    for f in filters:
        stored = list(filter_workloads(_stored(now), f).values_list("pk", flat=True))
        assert stored == live[str(f)], f
    assert all(live.values())
    assert len({len(ids) for ids in live.values()}) > 3


def _pages(**filters) -> list[tuple]:
    """Pages of 25 of the dashboard list (and some past its ends) as (number, count,
    rows), each the slice of the whole list it stands for."""

    def page_of(number, size):
        page = list_workloads(
            filters=WorkloadFilters(**filters),
            page=number,
            page_size=size,
            now=timezone.now(),
            prices=PRICES,
        )
        rows = [(w.pk, w.status, w.risk, round(w.savings, 6)) for w in page]
        return page.number, page.paginator.count, rows

    _, count, whole = page_of(1, 200)
    last = -(-count // 25)
    pages = [page_of(number, 25) for number in (1, 2, 3, 4, 9999, 0, "x")]
    assert len(whole) == count < 200
    for number, page_count, rows in pages:
        assert page_count == count
        assert rows == whole[(number - 1) * 25 : number * 25]
    assert [number for number, *_ in pages] == [min(n, last) for n in (1, 2, 3, 4)] + [
        last,
        last,
        1,
    ]
    return pages


@pytest.mark.parametrize(
    "filters",
    [
        {"sort": "risk"},
        {"sort": "savings"},
        {"at_risk": "true", "sort": "savings"},
        {"at_risk": "true", "sort": "risk"},
        {"status": "over", "sort": "savings"},
        {"missing_requests": "false", "wasteful": "true", "sort": "name"},
        {"status": "within", "cluster": "b"},
    ],
)
def test_the_dashboard_list_pages_the_same_from_stored_facts(fleet, filters):
    live = _pages(**filters)

    _store_all(fleet)

    assert workload_totals.is_complete()
    assert _pages(**filters) == live
    assert live[0][1] > 0


def test_the_api_list_answers_the_same_from_stored_facts(fleet):
    client = Client()
    client.force_login(make_user("vera", Role.VIEWER))
    urls = [
        "/api/v1/workloads/?ordering=-risk,-savings_monthly&limit=40",
        "/api/v1/workloads/?ordering=shortfall_percent&limit=40&offset=20",
        "/api/v1/workloads/?at_risk=true&ordering=-recent_ooms&limit=15",
        "/api/v1/workloads/?status=over&ordering=-savings_monthly",
        "/api/v1/workloads/?missing_requests=true&is_active=false",
    ]
    live = [client.get(url).json() for url in urls]

    _store_all(fleet)

    assert [client.get(url).json() for url in urls] == live
    assert all(answer["results"] for answer in live)


def test_lists_compute_live_while_an_enabled_cluster_has_no_stored_facts(fleet):
    now = fleet
    _store_all(now)
    # A stored row that says what the containers do not: the lists read it only
    # while every enabled cluster has its rows.
    calm = Workload.objects.filter(cluster__name="a", is_active=True)
    calm = _live(now).filter(pk__in=calm).at_risk(False).values_list("pk", flat=True)
    planted = calm.first()
    WorkloadTotals.objects.filter(pk=planted).update(shortfall=55)

    def at_risk() -> set[int]:
        page = list_workloads(
            filters=WorkloadFilters(at_risk="true"),
            page_size=200,
            now=now,
            prices=PRICES,
        )
        return {w.pk for w in page}

    assert planted in at_risk()
    Cluster.objects.filter(name="b").update(totals_at=None)
    assert not workload_totals.is_complete()
    assert planted not in at_risk()
    # A disabled cluster without stored facts is never listed: it does not count.
    Cluster.objects.filter(name="b").update(totals_at=now)
    Cluster.objects.filter(name="off").update(totals_at=None)
    assert workload_totals.is_complete()
    assert planted in at_risk()


def test_a_store_rewrites_only_the_rows_that_changed(fleet):
    now = fleet
    cluster = Cluster.objects.get(name="a")
    assert workload_totals.store(cluster_id=cluster.pk, now=now) > 40
    assert workload_totals.store(cluster_id=cluster.pk, now=now) == 0
    container = Container.objects.filter(
        workload__cluster=cluster,
        name="app",
        request_cpu_millicores=150,
        latest_recommendation__target_cpu_millicores=100,
    ).first()
    Container.objects.filter(pk=container.pk).update(request_cpu_millicores=300)
    before = WorkloadTotals.objects.get(pk=container.workload_id)

    assert workload_totals.store(cluster_id=cluster.pk, now=now) == 1

    after = WorkloadTotals.objects.get(pk=container.workload_id)
    # The app's target is 100m: its excess goes from 50m to 200m.
    assert after.excess_cpu_millicores == before.excess_cpu_millicores + 150
    assert _facts(_stored(now).filter(cluster=cluster)) == _facts(
        _live(now).filter(cluster=cluster)
    )


def test_a_shard_store_updates_only_its_namespace(fleet):
    now = fleet
    cluster = Cluster.objects.get(name="a")
    namespace_totals.store(cluster=cluster, now=now)
    apps = Container.objects.filter(workload__cluster=cluster, name="app")
    Container.objects.filter(pk__in=apps).update(request_cpu_millicores=999)
    rows = WorkloadTotals.objects.filter(workload__cluster=cluster)
    other_before = _facts(_stored(now).filter(cluster=cluster, namespace="two"))

    namespace_totals.store(cluster=cluster, now=now, namespace="one")

    mine = _stored(now).filter(cluster=cluster, namespace="one")
    assert _facts(mine) == _facts(_live(now).filter(cluster=cluster, namespace="one"))
    assert _facts(_stored(now).filter(cluster=cluster, namespace="two")) == (
        other_before
    )
    assert _facts(_live(now).filter(cluster=cluster, namespace="two")) != other_before
    assert rows.filter(workload__namespace="two").count() > 0
    # The other clusters' rows are never touched.
    assert not WorkloadTotals.objects.exclude(workload__cluster=cluster).exists()


def test_a_cluster_never_stored_stores_every_namespace_even_for_a_shard(fleet):
    cluster = Cluster.objects.get(name="a")

    namespace_totals.store(cluster=cluster, now=fleet, namespace="one")

    assert WorkloadTotals.objects.filter(workload__cluster=cluster).count() == (
        Workload.objects.filter(cluster=cluster).count()
    )
    assert Cluster.objects.get(pk=cluster.pk).totals_at == fleet


def test_storing_nothing_for_an_unknown_cluster_or_namespace(fleet):
    assert workload_totals.store(cluster_id=10**9, now=fleet) == 0
    cluster = Cluster.objects.get(name="a")
    assert workload_totals.store(cluster_id=cluster.pk, now=fleet, namespace="x") == 0
    assert not WorkloadTotals.objects.exists()
    # A cluster deleted meanwhile: nothing stored.
    assert (
        namespace_totals.store(cluster=Cluster(pk=10**9, name="gone"), now=fleet) == 0
    )
    assert not WorkloadTotals.objects.exists()


def test_a_failed_workload_store_keeps_the_namespace_totals_unwritten(
    fleet, monkeypatch
):
    cluster = Cluster.objects.get(name="a")

    def broken(**kwargs):
        raise RuntimeError("database gone")

    monkeypatch.setattr(label_rollups, "compute_with_parts", broken)
    with pytest.raises(RuntimeError, match="database gone"):
        namespace_totals.store(cluster=cluster, now=fleet)

    assert Cluster.objects.get(pk=cluster.pk).totals_at is None
    assert not NamespaceTotals.objects.exists()
    assert not WorkloadTotals.objects.exists()
    assert not workload_totals.is_complete()


def test_a_refresh_stores_every_workloads_facts(settings, db):
    settings.SIMULATION_SEED = 7
    settings.SIMULATION_WORKLOADS = 24
    settings.SIMULATION_HISTORY_DAYS = 1.0
    cluster = Cluster.objects.create(name="sim", kind=Cluster.Kind.SIMULATED)
    now = timezone.now()

    run = refresh_cluster(cluster_id=cluster.pk, now=now)

    assert run.status == RefreshRun.Status.SUCCEEDED, run.error
    workloads = Workload.objects.filter(cluster=cluster)
    assert WorkloadTotals.objects.filter(workload__in=workloads).count() == 24
    assert _facts(_stored(now).filter(cluster=cluster)) == _facts(
        _live(now).filter(cluster=cluster)
    )
    assert WorkloadTotals.objects.filter(latest_oom_at__isnull=False).exists()
    assert workload_totals.is_complete()


@pytest.mark.parametrize("number", [1, 2])
def test_a_page_filtered_by_a_fact_is_counted_in_the_query_that_reads_it(
    fleet, number, django_assert_num_queries
):
    _store_all(fleet)

    # whether every cluster has stored facts, the page's ids with the number of rows,
    # the rows, their containers, their recent OOM kills
    with django_assert_num_queries(5):
        page = list_workloads(
            filters=WorkloadFilters(at_risk="true", sort="savings"),
            page=number,
            page_size=10,
            now=fleet,
            prices=PRICES,
        )

    assert page.number == number
    assert page.paginator.count > 20
    assert len(page) == 10


def test_the_latest_kills_of_chosen_workloads_filter_the_workloads_in_a_subquery(
    fleet,
):
    """A store of the workloads a refresh changed reads their latest kills with the
    ids on the workloads, in a subquery, within the scope: on the containers' column
    they went into the container index's condition, which a plan misled by statistics
    that predate a first contact's inserts probed once per id for each workload of
    the namespace (8.4 s for a shard of 8,000 workloads). The same kills either way."""
    cluster = Cluster.objects.get(name="a")
    everything = workload_totals.latest_kills(cluster_ids=[cluster.pk], namespace="one")
    chosen = sorted(Workload.objects.values_list("pk", flat=True))  # both namespaces
    assert len(everything) > 1

    with CaptureQueriesContext(connection) as queries:
        got = workload_totals.latest_kills(
            cluster_ids=[cluster.pk], namespace="one", workload_ids=chosen[1:]
        )

    assert got == {pk: at for pk, at in everything.items() if pk in chosen[1:]}
    (statement,) = [q["sql"] for q in queries.captured_queries]
    assert '"recommender_container"."workload_id" IN (SELECT' in statement, statement
    assert f'"recommender_container"."workload_id" IN ({chosen[1]}' not in statement
