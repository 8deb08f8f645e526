"""One price per workload everywhere: with nodes of different prices, the overview's
namespace, cluster and fleet savings are the list's per-workload savings summed, and
realized savings are priced at the workload's own prices too."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from recommender.models import Container, ResizeChange, Workload
from recommender.services.dashboard.overview import fleet_overview
from recommender.services.readmodels import namespace_totals
from recommender.services.readmodels.provisioning import Prices, risk_rules
from recommender.services.readmodels.realized import realized_savings
from recommender.services.readmodels.rollups import rollup
from recommender.services.readmodels.savings_trend import record_snapshot, savings_trend
from recommender.services.readmodels.workload_totals import with_facts
from tests.factories import make_cluster, make_recommendation, make_workload

pytestmark = pytest.mark.django_db
NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
PRICES = Prices(per_core_hour=0.03, per_gib_hour=0.004)
MIB = 2**20


@pytest.fixture
def priced_fleet():
    """shop/web on spot nodes (a third of the list prices), shop/api on large
    nodes (three times), data/db at the list prices; each recommended below its
    requests."""
    cluster = make_cluster("prod")
    for name, namespace, factor in (
        ("web", "shop", 1 / 3),
        ("api", "shop", 3.0),
        ("db", "data", None),
    ):
        workload = make_workload(cluster, name, namespace=namespace)
        make_recommendation(workload.containers.get(), cpu_millicores=200)
        if factor is not None:
            Workload.objects.filter(pk=workload.pk).update(
                price_per_core_hour=PRICES.per_core_hour * factor,
                price_per_gib_hour=PRICES.per_gib_hour * factor,
                price_source="opencost",
            )
    return cluster


def listed_savings() -> dict[tuple[str, str], float]:
    rows = with_facts(
        Workload.objects.shown(), prices=PRICES, rules=risk_rules(NOW)
    ).values_list("namespace", "name", "savings")
    return {(namespace, name): savings for namespace, name, savings in rows}


@pytest.mark.parametrize("stored", [False, True], ids=["computed", "stored"])
def test_the_overviews_savings_are_the_lists_summed(priced_fleet, stored):
    if stored:
        namespace_totals.store(cluster=priced_fleet, now=NOW)
    listed = listed_savings()
    # Different prices make different savings for the same excess.
    assert listed[("shop", "api")] == pytest.approx(9 * listed[("shop", "web")])

    overview = fleet_overview(now=NOW, prices=PRICES)

    assert overview.fleet.savings == pytest.approx(sum(listed.values()))
    by_namespace = {t.namespace: t.savings for t in overview.by_namespace}
    assert by_namespace == {
        "shop": pytest.approx(listed[("shop", "web")] + listed[("shop", "api")]),
        "data": pytest.approx(listed[("data", "db")]),
    }
    (prod,) = overview.by_cluster
    assert prod.savings == pytest.approx(overview.fleet.savings)
    # The rollups say the same.
    total = rollup(by="namespace", now=NOW, prices=PRICES).total
    assert total.savings == pytest.approx(overview.fleet.savings)
    # So does the savings trend's point.
    record_snapshot(cluster=priced_fleet, now=NOW, prices=PRICES)
    (point,) = savings_trend(now=NOW, days=1).points
    assert point.savings_monthly == pytest.approx(overview.fleet.savings)
    # At the list prices the total would differ.
    flat = PRICES.monthly(
        cpu_millicores=overview.fleet.covered_requested_cpu_millicores
        - overview.fleet.recommended_cpu_millicores,
        memory_bytes=overview.fleet.covered_requested_memory_bytes
        - overview.fleet.recommended_memory_bytes,
    )
    assert overview.fleet.savings != pytest.approx(flat)


def test_realized_savings_use_the_workloads_own_prices(priced_fleet):
    removed = {"cpu_millicores": 300, "memory_bytes": 212 * MIB}
    for name in ("web", "db"):
        # The change holds: the pods run at what it set.
        Container.objects.filter(workload__name=name).update(request_cpu_millicores=200)
        ResizeChange.objects.create(
            workload=Workload.objects.get(name=name),
            pod=f"{name}-1",
            status=ResizeChange.Status.APPLIED,
            verified_at=NOW,
            resources_before={"app": {"requests": {"cpu": 500}}},
            resources_after={"app": {"requests": {"cpu": 200}}},
            requests_removed=removed,
        )
    web, db = (Workload.objects.get(name=name) for name in ("web", "db"))

    realized = realized_savings(prices=PRICES)

    assert realized[web.pk] == pytest.approx(PRICES.of(web).monthly(**removed))
    assert realized[db.pk] == pytest.approx(PRICES.monthly(**removed))
    assert realized[web.pk] == pytest.approx(realized[db.pk] / 3)
