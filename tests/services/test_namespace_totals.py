"""The namespaces' totals the refresh stores (services/readmodels/namespace_totals.py):
the overview read from them is the overview computed as the page loads; a shard
replaces only its namespace's row; a refresh stores them, a failed one too."""

from __future__ import annotations

import dataclasses
import logging
from datetime import UTC, datetime, timedelta

import pytest
from django.db.models import Count, Max, Min
from django.utils import timezone

from recommender.errors import SourceUnavailable
from recommender.models import Cluster, Container, NamespaceTotals, Workload
from recommender.services.dashboard.overview import Overview, fleet_overview
from recommender.services.operations.runs import Phases
from recommender.services.readmodels import namespace_savings, namespace_totals, upkeep
from recommender.services.readmodels.provisioning import PriceMix, Prices
from recommender.services.refresh.cycle import refresh_cluster
from recommender.sources.simulated import SimulatedUsageSource
from tests.factories import make_cluster, make_workload
from tests.services.test_provisioning_parity import PRICES, on_and_off, varied_fleet

pytestmark = pytest.mark.django_db

LIMITS = (1, 3, 10, 500)


def _values(overview: Overview) -> dict:
    """What the overview shows, comparable (savings rounded)."""

    def totals(t):
        return {**dataclasses.asdict(t), "savings": round(t.savings, 6)}

    return {
        "fleet": totals(overview.fleet),
        "by_cluster": [totals(t) for t in overview.by_cluster],
        "by_namespace": [totals(t) for t in overview.by_namespace],
        "at_risk_count": overview.at_risk_count,
        "at_risk": [
            (w.pk, w.recent_ooms, w.shortfall, w.risk, round(w.savings, 6))
            for w in overview.at_risk
        ],
        "missing_requests_count": overview.missing_requests_count,
        "recent_oom_count": overview.recent_oom_count,
        "recent_ooms": [kill.pk for kill in overview.recent_ooms],
        "no_recommendation_count": overview.no_recommendation_count,
        "no_recommendation": [
            (row["container"].pk, row["reason"]) for row in overview.no_recommendation
        ],
        "confidence": overview.confidence,
        "workload_count": overview.workload_count,
        "price_mix": overview.price_mix,
    }


def _price_mix_of_the_shown_workloads() -> list[PriceMix]:
    """The price mix summed over every shown workload in one grouped query."""
    mix = []
    for row in (
        Workload.objects.shown()
        .order_by()
        .values("price_source")
        .annotate(
            n=Count("pk"),
            core_low=Min("price_per_core_hour"),
            core_high=Max("price_per_core_hour"),
            gib_low=Min("price_per_gib_hour"),
            gib_high=Max("price_per_gib_hour"),
        )
    ):
        low = PRICES.at(row["core_low"], row["gib_low"])
        high = PRICES.at(row["core_high"], row["gib_high"])
        mix.append(
            PriceMix(
                source=row["price_source"] or "default",
                workloads=row["n"],
                core_hour=(low.per_core_hour, high.per_core_hour),
                gib_hour=(low.per_gib_hour, high.per_gib_hour),
            )
        )
    assert len(mix) == 3  # default, table and opencost
    return sorted(mix, key=lambda m: (-m.workloads, m.source))


def _stored(cluster: Cluster) -> dict[str, dict]:
    return {
        row.namespace: {
            "workloads": row.workloads,
            "containers": row.containers,
            "requested_cpu_millicores": row.requested_cpu_millicores,
            "shortfalls": row.shortfalls,
        }
        for row in NamespaceTotals.objects.filter(cluster=cluster)
    }


def _facts_as_stored(cluster: Cluster, now: datetime) -> list:
    return [
        dataclasses.asdict(f)
        for f in namespace_totals.compute(clusters={cluster.pk: cluster.name}, now=now)
    ]


def _facts_read(cluster: Cluster, now: datetime) -> list:
    return [
        dataclasses.asdict(f)
        for f in namespace_totals.read(now=now)
        if f.cluster_id == cluster.pk
    ]


def test_the_overview_from_stored_totals_is_the_one_computed_as_it_loads():
    now = timezone.now()
    cluster, off = on_and_off()
    varied_fleet(now, cluster_of=lambda index: off if index % 11 == 0 else cluster)
    # Several namespaces; one whose only workload has no container vpaweb recommends
    # for (it counts as a workload, not as a namespace with containers).
    Workload.objects.filter(cluster=cluster, name__endswith="1").update(
        namespace="team-b"
    )
    lone = make_workload(
        cluster, "migrate", namespace="jobs", containers={"init": {}}, replicas=1
    )
    Container.objects.filter(workload=lone).update(kind=Container.Kind.INIT)
    # Some workloads priced by their nodes, at prices of their own (the price mix).
    for index, pk in enumerate(
        Workload.objects.order_by("pk").values_list("pk", flat=True)[::3]
    ):
        Workload.objects.filter(pk=pk).update(
            price_source=("table", "opencost")[index % 2],
            price_per_core_hour=0.02 + index / 100,
            price_per_gib_hour=None if index == 2 else 0.003 + index / 1000,
        )
    # A third cluster whose totals are never stored: computed as the page loads.
    other = make_cluster("other")
    make_workload(other, "api", containers={"app": {"request_cpu_millicores": 10}})
    computed = {
        limit: _values(fleet_overview(now=now, prices=PRICES, limit=limit))
        for limit in LIMITS
    }
    assert not NamespaceTotals.objects.exists()
    assert computed[10]["price_mix"] == _price_mix_of_the_shown_workloads()
    assert {t["namespace"] for t in computed[10]["by_namespace"]} == {
        "default",
        "team-b",
    }

    for c in (cluster, off):
        assert namespace_totals.store(cluster=c, now=now) > 0
    assert set(
        NamespaceTotals.objects.filter(cluster=cluster).values_list(
            "namespace", flat=True
        )
    ) == {"default", "team-b", "jobs"}
    assert not Cluster.objects.filter(pk__in=[cluster.pk, off.pk], totals_at=None)
    for limit in LIMITS:
        assert (
            _values(fleet_overview(now=now, prices=PRICES, limit=limit))
            == (computed[limit])
        )
    assert _facts_read(cluster, now) == _facts_as_stored(cluster, now)

    # The page reads the stored rows: a change shows once the totals are stored.
    Container.objects.filter(workload__cluster=cluster).update(request_cpu_millicores=7)
    assert (
        _values(fleet_overview(now=now, prices=PRICES))["fleet"]
        == (computed[10]["fleet"])
    )
    namespace_totals.store(cluster=cluster, now=now)
    changed = _values(fleet_overview(now=now, prices=PRICES))
    assert changed["fleet"] != computed[10]["fleet"]
    Cluster.objects.update(totals_at=None)
    assert _values(fleet_overview(now=now, prices=PRICES)) == changed


def test_every_cluster_stored_at_the_list_prices_ranks_at_risk_rows_as_computed():
    # Every enabled cluster stored at the list prices: the stored group sums serve,
    # and the namespaces' savings read the OOM-killed workloads' one by one, which
    # the at-risk rows then rank by instead of asking for them again.
    now = timezone.now()
    prices = Prices.from_settings()
    cluster, off = on_and_off()
    varied_fleet(
        now,
        cluster_of=lambda index: off if index % 11 == 0 else cluster,
        namespace_of=lambda index: ("default", "team-b")[index % 2],
    )
    computed = {
        limit: _values(fleet_overview(now=now, prices=prices, limit=limit))
        for limit in LIMITS
    }
    assert computed[500]["at_risk_count"] > 3

    namespace_totals.store(cluster=cluster, now=now)

    read = namespace_savings.savings(prices=prices, now=now)
    assert read.workloads  # the OOM-killed workloads' own savings
    for limit in LIMITS:
        assert (
            _values(fleet_overview(now=now, prices=prices, limit=limit))
            == (computed[limit])
        )


def test_a_shard_replaces_its_namespace_and_leaves_the_others():
    now = timezone.now()
    cluster = make_cluster("on")
    for namespace in ("a", "b"):
        make_workload(cluster, "web", namespace=namespace)
    # The first rows of a cluster are all of them, even when a shard asks.
    assert namespace_totals.store(cluster=cluster, now=now, namespace="a") == 2
    first = Cluster.objects.get(pk=cluster.pk).totals_at
    assert first is not None
    before = _stored(cluster)
    Container.objects.filter(workload__cluster=cluster).update(request_cpu_millicores=1)

    later = now + timedelta(minutes=1)
    assert namespace_totals.store(cluster=cluster, now=later, namespace="b") == 1
    after = _stored(cluster)
    assert after["a"] == before["a"]
    assert after["b"]["requested_cpu_millicores"] == 3  # 3 replicas of 1m
    assert before["b"]["requested_cpu_millicores"] == 1500
    # Only a whole pass says every namespace is stored as of its time.
    assert Cluster.objects.get(pk=cluster.pk).totals_at == first

    # A namespace whose workloads are all gone loses its row, in a shard or whole.
    Workload.objects.filter(cluster=cluster, namespace="b").update(is_active=False)
    assert namespace_totals.store(cluster=cluster, now=later, namespace="b") == 0
    assert set(_stored(cluster)) == {"a"}
    Workload.objects.filter(cluster=cluster, namespace="a").update(is_active=False)
    assert namespace_totals.store(cluster=cluster, now=later) == 0
    assert _stored(cluster) == {}
    assert Cluster.objects.get(pk=cluster.pk).totals_at == later


def test_totals_of_a_cluster_deleted_meanwhile_are_not_stored():
    cluster = make_cluster("gone")
    make_workload(cluster)
    Cluster.objects.filter(pk=cluster.pk).delete()
    assert namespace_totals.store(cluster=cluster, now=timezone.now()) == 0
    assert (
        namespace_totals.store(cluster=cluster, now=timezone.now(), namespace="default")
        == 0
    )
    assert not NamespaceTotals.objects.exists()


NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)


@pytest.fixture
def simulated(settings):
    settings.SIMULATION_SEED = 7
    settings.SIMULATION_WORKLOADS = 12
    settings.SIMULATION_HISTORY_DAYS = 1.0
    return Cluster.objects.create(name="sim", kind=Cluster.Kind.SIMULATED)


def test_a_refresh_stores_the_totals_and_a_failed_one_does_too(
    simulated, settings, monkeypatch
):
    run = refresh_cluster(cluster_id=simulated.pk, now=NOW)
    assert run.status == "succeeded" and "totals_s" in run.timings
    assert Cluster.objects.get(pk=simulated.pk).totals_at == NOW
    stored = _facts_read(simulated, NOW)
    assert sum(f["containers"] for f in stored) == run.counts["containers"] > 0
    assert stored == _facts_as_stored(simulated, NOW)

    # Discovery commits (fewer workloads now), then the source fails: the totals
    # say what is stored, and the failure is the run's.
    settings.SIMULATION_WORKLOADS = 8

    def down(self, **kwargs):
        raise SourceUnavailable("metrics backend down")

    monkeypatch.setattr(SimulatedUsageSource, "fetch_usage", down)
    later = NOW + timedelta(minutes=1)
    with pytest.raises(SourceUnavailable):
        refresh_cluster(cluster_id=simulated.pk, now=later)
    after = _facts_read(simulated, later)
    assert after == _facts_as_stored(simulated, later)
    assert sum(f["workloads"] for f in after) == 8
    assert sum(f["workloads"] for f in stored) == 12


def test_a_failure_to_store_the_totals_never_hides_the_refreshs_own(
    simulated, monkeypatch, caplog
):
    def broken(**kwargs):
        raise RuntimeError("totals table locked")

    monkeypatch.setattr(namespace_totals, "store", broken)
    with (
        caplog.at_level(logging.ERROR, logger=upkeep.logger.name),
        pytest.raises(ValueError, match="the refresh's own"),
        upkeep.kept_current(simulated, now=NOW, namespace=None, phases=Phases()),
    ):
        raise ValueError("the refresh's own")
    assert "the namespaces' totals were not stored" in caplog.text
    # After a successful block, a failure to store is the run's failure.
    with pytest.raises(RuntimeError, match="totals table locked"):
        refresh_cluster(cluster_id=simulated.pk, now=NOW)
    assert simulated.runs.get().error.startswith("totals failed: ")


def test_the_namespaces_read_are_the_shown_workloads_once_stored():
    # The list's namespace choices: those of the shown workloads (active, of an
    # enabled cluster), from the stored rows of a cluster that has them.
    now = timezone.now()
    cluster, off = on_and_off()
    varied_fleet(now, cluster_of=lambda index: off if index % 11 == 0 else cluster)
    Workload.objects.filter(cluster=cluster, name__endswith="1").update(
        namespace="team-b"
    )
    gone = make_workload(cluster, "gone", namespace="only-inactive")
    Workload.objects.filter(pk=gone.pk).update(is_active=False)
    make_workload(off, "hidden", namespace="of-a-disabled-cluster")
    other = make_cluster("other")
    make_workload(other, "api", namespace="never-stored")

    def shown() -> list[str]:
        return list(
            Workload.objects.shown()
            .order_by("namespace")
            .values_list("namespace", flat=True)
            .distinct()
        )

    computed = namespace_totals.namespaces()
    assert computed == shown() == ["default", "never-stored", "team-b"]
    namespace_totals.store(cluster=cluster, now=now)
    assert namespace_totals.namespaces() == computed

    # Read from the stored rows: a namespace shows once the refresh stores it.
    make_workload(cluster, "new", namespace="new")
    assert namespace_totals.namespaces() == computed
    namespace_totals.store(cluster=cluster, now=now)
    assert namespace_totals.namespaces() == shown()
