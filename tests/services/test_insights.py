"""insights: status classification, savings, fleet totals and the list, in SQL."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.db.models.signals import post_init
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from recommender.models import (
    Container,
    NamespaceTotals,
    OomKill,
    ProvisioningStatus,
    RefreshRun,
    Workload,
)
from recommender.services.dashboard import workload_insight as workload_insight_module
from recommender.services.dashboard.insights import WorkloadFilters, list_workloads
from recommender.services.dashboard.overview import fleet_overview
from recommender.services.dashboard.workload_insight import workload_insight
from recommender.services.readmodels import namespace_totals
from recommender.services.readmodels.provisioning import Prices
from tests.factories import make_cluster, make_recommendation, make_workload

MI = 2**20
PRICES = Prices(per_core_hour=0.04, per_gib_hour=0.005)


def _workload(cluster, name, *, cpu, memory, rec=None, replicas=2, **kw):
    workload = make_workload(
        cluster,
        name,
        replicas=replicas,
        containers={
            "app": {"request_cpu_millicores": cpu, "request_memory_bytes": memory}
        },
        **kw,
    )
    if rec is not None:
        make_recommendation(
            workload.containers.get(), cpu_millicores=rec[0], memory_bytes=rec[1]
        )
    return workload


@pytest.fixture
def fleet(db):
    prod, dev = make_cluster("prod"), make_cluster("dev")
    return {
        "over": _workload(prod, "over", cpu=500, memory=512 * MI, rec=(250, 300 * MI)),
        "under": _workload(
            prod, "under", cpu=100, memory=300 * MI, rec=(250, 300 * MI)
        ),
        "within": _workload(
            dev,
            "within",
            cpu=250,
            memory=300 * MI,
            rec=(250, 300 * MI),
            namespace="team",
        ),
        "nodata": _workload(dev, "nodata", cpu=None, memory=None, namespace="team"),
    }


def _page(page_size=50, page=1, **filters):
    return list_workloads(
        filters=WorkloadFilters(**filters),
        page=page,
        now=timezone.now(),
        prices=PRICES,
        page_size=page_size,
    )


def test_status_follows_the_bounds(fleet):
    statuses = {w.name: w.status for w in _page()}

    assert statuses == {
        "over": ProvisioningStatus.OVER,
        "under": ProvisioningStatus.UNDER,
        "within": ProvisioningStatus.WITHIN,
        # No request and no recommendation: the missing request is the headline.
        "nodata": ProvisioningStatus.MISSING,
    }


def test_savings_are_replicas_times_difference_times_monthly_price(fleet):
    savings = {w.name: w.savings for w in _page()}

    per_m = 0.04 * 730 / 1000
    per_b = 0.005 * 730 / 2**30
    assert savings["over"] == pytest.approx(2 * (250 * per_m + 212 * MI * per_b))
    assert savings["under"] == pytest.approx(2 * (-150 * per_m))
    assert savings["within"] == 0
    assert savings["nodata"] == 0


def test_filters_search_and_sorts(fleet):
    assert [w.name for w in _page(status="under")] == ["under"]
    assert [w.name for w in _page(cluster="dev")] == ["nodata", "within"]
    assert [w.name for w in _page(q="DAT")] == ["nodata"]
    assert _page(sort="savings")[0].name == "over"
    assert _page(sort="risk")[0].name == "under"
    # Unknown values are ignored rather than matching nothing.
    assert len(_page(status="bogus", sort="bogus")) == 4


def test_the_count_is_of_the_rows_the_filters_leave(fleet):
    for i in range(3):
        _workload(fleet["over"].cluster, f"short-{i}", cpu=10, memory=MI, rec=(100, MI))

    # Sorted by a fact, unfiltered: all of them (counted without the facts).
    assert _page(sort="risk", page_size=2).paginator.count == 7
    assert _page(sort="savings", page_size=2).paginator.count == 7
    # Narrowed by a fact: the rows that have it.
    assert _page(sort="risk", at_risk="true", page_size=2).paginator.count == 4
    assert _page(at_risk="false", page_size=2).paginator.count == 3
    assert _page(status="over", sort="risk", page_size=2).paginator.count == 1


def test_recent_oom_kills_raise_risk(fleet):
    container = fleet["within"].containers.get()
    OomKill.objects.create(container=container, pod="p-1", occurred_at=timezone.now())
    OomKill.objects.create(
        container=container, pod="p-2", occurred_at=timezone.now() - timedelta(days=30)
    )

    rows = {w.name: w for w in _page(sort="risk")}

    assert rows["within"].recent_ooms == 1
    # Real risk first: the OOM-killed workload, then the 50 % shortfall.
    assert [w.name for w in _page(sort="risk")][:2] == ["within", "under"]


def test_list_page_costs_a_fixed_number_of_queries(
    fleet, django_assert_max_num_queries
):
    for i in range(20):
        _workload(fleet["over"].cluster, f"more-{i}", cpu=500, memory=MI, rec=(100, MI))
    # Small clusters between the two: a page spans four.
    for c in range(5):
        _workload(make_cluster(f"mid-{c}"), "one", cpu=500, memory=MI)

    # The count per cluster, the page's ids (from its first cluster, those between
    # and its last), its rows, their containers and their recent OOM kills (the
    # facts are computed in Python from those), whatever the clusters spanned.
    with django_assert_max_num_queries(7):
        page = _page()
        rows = [
            (
                w.policy.mode,
                w.cluster.name,
                [c.latest_recommendation for c in w.containers.all()],
            )
            for w in page
        ]

    assert len(rows) == 29


def test_the_list_in_name_order_pages_as_one_sorted_query(db):
    # Pages are read cluster by cluster: each is the slice of the one ordering,
    # whether it lies in one cluster, spans two or several, or lies past the end.
    sizes = {"c": 7, "a": 3, "e": 1, "b": 1, "d": 12}
    for name, size in sizes.items():
        cluster = make_cluster(name)
        for i in range(size):
            _workload(cluster, f"w-{(i * 5) % size:02d}", cpu=100, memory=MI)
            if i % 4 == 0:
                _workload(cluster, f"w-{i:02d}", cpu=1, memory=MI, namespace="zz")
    gone = make_workload(make_cluster("f"), "gone")
    Workload.objects.filter(pk=gone.pk).update(is_active=False)
    expected = list(
        Workload.objects.shown()
        .order_by("cluster__name", "namespace", "kind", "name", "pk")
        .values_list("pk", flat=True)
    )
    assert len(expected) == 24 + 8

    for page_size in (1, 2, 3, 5, 11, 50):
        listed = []
        pages = -(-len(expected) // page_size)
        for number in range(1, pages + 1):
            page = _page(page_size=page_size, page=number)
            assert page.paginator.count == len(expected)
            assert page.paginator.num_pages == pages
            listed.extend(w.pk for w in page)
        assert listed == expected, page_size
    # Past the end: the last page.
    assert [w.pk for w in _page(page_size=5, page=99)] == expected[-2:]
    assert [w.pk for w in _page(page_size=5, cluster="d")] == [
        pk for pk in expected if Workload.objects.get(pk=pk).cluster.name == "d"
    ][:5]


def test_fleet_totals_count_replicas_and_only_covered_containers_in_savings(fleet):
    RefreshRun.objects.create(status=RefreshRun.Status.RUNNING)

    overview = fleet_overview(now=timezone.now(), prices=PRICES)

    fleet_totals = overview.fleet
    assert fleet_totals.containers == 4
    assert fleet_totals.covered == 3
    assert fleet_totals.requested_cpu_millicores == 2 * (500 + 100 + 250)
    assert fleet_totals.recommended_cpu_millicores == 2 * 750
    assert fleet_totals.savings == pytest.approx(
        PRICES.monthly(cpu_millicores=2 * 100, memory_bytes=2 * 212 * MI)
    )
    assert [t.cluster for t in overview.by_cluster] == ["dev", "prod"]
    assert overview.at_risk_count == 1
    assert [w.name for w in overview.at_risk] == ["under"]
    assert overview.missing_requests_count == 1
    assert overview.no_recommendation_count == 1
    assert "No usage samples yet" in overview.no_recommendation[0]["reason"]
    assert overview.is_refreshing


@pytest.mark.parametrize("stored", [False, True])
def test_the_overview_loads_only_the_at_risk_rows_it_shows(db, stored):
    # Thirty workloads tie on the risk score (one shortfall percent, as a fleet of
    # like workloads does): the tie-break reads their savings in one query, and
    # only the three rows shown are loaded with their containers.
    cluster = make_cluster("prod")
    for i in range(30):
        _workload(
            cluster, f"short-{i:02d}", cpu=100, memory=(2 + i) * MI, rec=(200, MI)
        )
    if stored:
        namespace_totals.store(cluster=cluster, now=timezone.now())
    loaded = []

    def count(sender, instance, **kwargs):
        loaded.append(instance)

    post_init.connect(count, sender=Container)
    try:
        overview = fleet_overview(now=timezone.now(), prices=PRICES, limit=3)
    finally:
        post_init.disconnect(count, sender=Container)

    assert overview.at_risk_count == 30
    # Equal risk: the largest savings first (the most memory above its target).
    assert [w.name for w in overview.at_risk] == ["short-29", "short-28", "short-27"]
    assert len(loaded) == 3


@pytest.mark.parametrize("stored", [False, True])
def test_containers_without_data_are_listed_in_name_order(db, monkeypatch, stored):
    # Each namespace keeps its first ones (FIRST_WITHOUT_DATA); the list shows the
    # fleet's first, at most that many, computed as the page loads or stored.
    monkeypatch.setattr(namespace_totals, "FIRST_WITHOUT_DATA", 3)
    cluster = make_cluster("prod")
    for namespace, name in (
        ("b", "zeta"),
        ("a", "mid"),
        ("b", "alpha"),
        ("a", "x"),
        ("a", "y"),
        ("a", "b"),
    ):
        _workload(cluster, name, cpu=100, memory=MI, namespace=namespace)
    _workload(cluster, "fed", cpu=100, memory=MI, rec=(100, MI), namespace="a")
    if stored:
        namespace_totals.store(cluster=cluster, now=timezone.now())
        assert [
            [workload for workload, *_ in row.first_without_data]
            for row in NamespaceTotals.objects.order_by("namespace")
        ] == [["b", "mid", "x"], ["alpha", "zeta"]]

    shown = {}
    for limit in (2, 10):
        overview = fleet_overview(now=timezone.now(), prices=PRICES, limit=limit)
        assert overview.no_recommendation_count == 6
        shown[limit] = [
            (r["container"].workload.namespace, r["container"].workload.name)
            for r in overview.no_recommendation
        ]
    assert shown[2] == [("a", "b"), ("a", "mid")]
    # Not ("b", "alpha"), the 4th kept: ("a", "y") comes before it.
    assert shown[10] == [("a", "b"), ("a", "mid"), ("a", "x")]


def test_no_container_without_data_costs_no_query_for_the_list(db):
    # The totals name the first ones: with one, that container is loaded; with
    # none, nothing.
    cluster = make_cluster("prod")
    _workload(cluster, "fed", cpu=100, memory=MI, rec=(100, MI))
    counted = []
    for _ in range(2):
        with CaptureQueriesContext(connection) as queries:
            overview = fleet_overview(now=timezone.now(), prices=PRICES)
        counted.append((overview.no_recommendation_count, len(queries)))
        _workload(cluster, f"new{len(counted)}", cpu=100, memory=MI)
    (none, without), (one, with_one) = counted
    assert (none, one) == (0, 1)
    assert without == with_one - 1


def test_workload_insight_builds_a_patch_with_proportional_limits(fleet):
    workload = fleet["over"]
    Container.objects.filter(workload=workload).update(
        limit_cpu_millicores=1000, limit_memory_bytes=1024 * MI
    )

    insight = workload_insight(
        workload_id=workload.pk, now=timezone.now(), prices=PRICES
    )

    (item,) = insight.containers
    assert item.new_requests == {"cpu": 250, "memory": 300 * MI}
    assert item.new_limits == {"cpu": 500, "memory": 600 * MI}
    assert insight.kubectl_patch == (
        "kubectl --namespace default patch deployment over --type strategic --patch "
        """'{"spec":{"template":{"spec":{"containers":[{"name":"app","resources":"""
        """{"requests":{"cpu":"250m","memory":"300Mi"},"limits":{"cpu":"500m","""
        """"memory":"600Mi"}}}]}}}}'"""
    )
    assert "cpu: 250m" in insight.resources_yaml
    assert "memory: 600Mi" in insight.resources_yaml


def test_workload_without_recommendation_has_no_patch(fleet):
    insight = workload_insight(
        workload_id=fleet["nodata"].pk, now=timezone.now(), prices=PRICES
    )

    assert insight.kubectl_patch == ""
    assert insight.status == ProvisioningStatus.MISSING
    assert insight.containers[0].no_data_reason


def test_confidence_bands_count_latest_recommendations(fleet):
    explanations = {
        "over": {"resources": {"cpu": {"confidence": 0.5}}},
        "under": {"resources": {"cpu": {"confidence": 3.0}}},
        "within": {"resources": {"cpu": {"confidence": 12}}},
    }
    for name, explanation in explanations.items():
        rec = fleet[name].containers.get().latest_recommendation
        rec.explanation = explanation
        rec.save()  # keeps Recommendation.confidence, which the bands read

    overview = fleet_overview(now=timezone.now(), prices=PRICES)

    assert overview.confidence == {"low": 1, "medium": 1, "high": 1, "unknown": 0}


def test_malformed_confidence_is_unknown(fleet):
    rec = fleet["over"].containers.get().latest_recommendation
    rec.explanation = {"resources": {"cpu": {"confidence": "lots"}}}
    rec.save()

    overview = fleet_overview(now=timezone.now(), prices=PRICES)

    # The malformed one; the others carry the factory's 8 days.
    assert overview.confidence["unknown"] == 1


def test_the_history_limit_applies_per_container(db, monkeypatch):
    monkeypatch.setattr(workload_insight_module, "HISTORY_LIMIT", 5)
    workload = make_workload(make_cluster(), "busy", containers={"app": {}, "log": {}})
    app, log = workload.containers.order_by("position")
    start = timezone.now() - timedelta(days=2)
    # The quiet container's rows are all older than the busy one's newest 12.
    for hour in range(3):
        make_recommendation(log, cpu_millicores=100 + hour, created_at=start)
    for hour in range(12):
        make_recommendation(
            app, cpu_millicores=200 + hour, created_at=start + timedelta(hours=hour + 1)
        )

    insight = workload_insight(
        workload_id=workload.pk, now=timezone.now(), prices=PRICES
    )

    by_name = {item.container.name: item.history for item in insight.containers}
    # Each container its own newest 5, oldest first.
    assert [r.target_cpu_millicores for r in by_name["app"]] == [
        207,
        208,
        209,
        210,
        211,
    ]
    assert [r.target_cpu_millicores for r in by_name["log"]] == [100, 101, 102]
