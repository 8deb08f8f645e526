"""The savings trend: hourly snapshots written by the refresh cycle, thinned to one a
day by the expiry run, summed into hourly or daily points."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from recommender.models import Cluster, SavingsSnapshot
from recommender.services.readmodels import savings_trend as savings_trend_module
from recommender.services.readmodels.provisioning import Prices
from recommender.services.readmodels.rollups import rollup
from recommender.services.readmodels.savings_trend import (
    record_snapshot,
    savings_trend,
    thin_snapshots,
)
from recommender.services.refresh.cycle import refresh_cluster
from recommender.services.refresh.expiry import expire_idle_aggregates
from tests.factories import make_cluster, make_recommendation, make_workload

MI = 2**20
NOW = datetime(2026, 11, 21, 12, 34, tzinfo=UTC)
PRICES = Prices(per_core_hour=0.03, per_gib_hour=0.004)


@pytest.fixture
def two_namespaces(db):
    cluster = make_cluster("prod")
    for name, namespace in (("web", "shop"), ("api", "shop"), ("db", "data")):
        workload = make_workload(cluster, name, namespace=namespace)
        make_recommendation(workload.containers.get())
    return cluster


def test_one_snapshot_per_namespace_and_hour(two_namespaces):
    cluster = two_namespaces

    assert record_snapshot(cluster=cluster, now=NOW, prices=PRICES) == 2
    # Later in the same hour: nothing new, even if the numbers moved.
    assert (
        record_snapshot(cluster=cluster, now=NOW + timedelta(minutes=20), prices=PRICES)
        == 0
    )
    assert (
        record_snapshot(cluster=cluster, now=NOW + timedelta(hours=1), prices=PRICES)
        == 2
    )

    rows = SavingsSnapshot.objects.filter(taken_at=NOW.replace(minute=0))
    by_namespace = rollup(by="namespace", now=NOW, prices=PRICES)
    assert sorted((r.namespace, r.workloads) for r in rows) == [
        ("data", 1),
        ("shop", 2),
    ]
    assert sum(r.savings_monthly for r in rows) == pytest.approx(
        by_namespace.total.savings
    )
    assert sum(r.recommended_cpu_millicores for r in rows) == (
        by_namespace.total.recommended_cpu_millicores
    )


def test_a_process_asks_no_more_in_an_hour_whose_rows_it_saw_committed(
    two_namespaces,
    monkeypatch,
    django_capture_on_commit_callbacks,
    django_assert_num_queries,
):
    cluster = two_namespaces
    later = NOW + timedelta(minutes=20)
    # Written, not committed yet: a later refresh looks for them.
    with django_capture_on_commit_callbacks(execute=False):
        assert record_snapshot(cluster=cluster, now=NOW, prices=PRICES) == 2
    with (
        django_assert_num_queries(1),
        django_capture_on_commit_callbacks(execute=True),
    ):
        assert record_snapshot(cluster=cluster, now=later, prices=PRICES) == 0
    # Found committed: asked no more within the hour.
    with django_assert_num_queries(0):
        assert record_snapshot(cluster=cluster, now=later, prices=PRICES) == 0
    # Another process, which wrote nothing and saw nothing, looks for them.
    monkeypatch.setattr(savings_trend_module, "_TAKEN", {})
    with django_assert_num_queries(1):
        assert record_snapshot(cluster=cluster, now=later, prices=PRICES) == 0
    # The next hour: written.
    assert (
        record_snapshot(cluster=cluster, now=NOW + timedelta(hours=1), prices=PRICES)
        == 2
    )


def _snapshot(cluster, at, savings, namespace="shop"):
    SavingsSnapshot.objects.create(
        cluster=cluster, namespace=namespace, taken_at=at, savings_monthly=savings
    )


def test_hourly_points_sum_namespaces_and_clusters(db):
    a, b = make_cluster("a"), make_cluster("b")
    hour = NOW.replace(minute=0)
    for step in range(3):
        at = hour - timedelta(hours=step)
        _snapshot(a, at, 10.0 + step, "shop")
        _snapshot(a, at, 1.0, "data")
        _snapshot(b, at, 100.0)

    trend = savings_trend(now=NOW, days=1)

    assert trend.resolution == "hour"
    assert [(p.at, p.savings_monthly) for p in trend.points] == [
        (hour - timedelta(hours=2), 113.0),
        (hour - timedelta(hours=1), 112.0),
        (hour, 111.0),
    ]
    only_a = savings_trend(now=NOW, days=1, cluster="a", namespace="shop")
    assert [p.savings_monthly for p in only_a.points] == [12.0, 11.0, 10.0]


def test_daily_points_take_each_clusters_last_snapshot_of_the_day(db, settings):
    settings.SAVINGS_TREND_HOURLY_DAYS = 3
    a, b = make_cluster("a"), make_cluster("b")
    day = NOW.replace(hour=0, minute=0)
    _snapshot(a, day + timedelta(hours=1), 5.0)
    _snapshot(a, day + timedelta(hours=9), 7.0)
    _snapshot(b, day + timedelta(hours=8), 20.0)
    _snapshot(a, day - timedelta(hours=1), 3.0)

    trend = savings_trend(now=NOW, days=30)

    assert trend.resolution == "day"
    assert [(p.at, p.savings_monthly) for p in trend.points] == [
        (day - timedelta(days=1), 3.0),
        (day, 27.0),
    ]


def test_disabled_clusters_are_left_out(db):
    cluster = make_cluster("gone", is_enabled=False)
    _snapshot(cluster, NOW.replace(minute=0), 5.0)
    assert savings_trend(now=NOW, days=1).points == []


def test_thinning_keeps_the_last_of_each_old_day_and_drops_the_oldest(
    db, settings, django_assert_max_num_queries
):
    settings.SAVINGS_TREND_HOURLY_DAYS = 2
    settings.SAVINGS_TREND_DAYS = 10
    cluster = make_cluster("a")
    start = NOW.replace(hour=0, minute=0) - timedelta(days=12)
    hours = [start + timedelta(hours=h) for h in range(0, 13 * 24, 6)]
    for at in hours:
        _snapshot(cluster, at, 1.0, "shop")
        _snapshot(cluster, at, 1.0, "data")

    counts = thin_snapshots(now=NOW)

    kept = sorted(set(SavingsSnapshot.objects.values_list("taken_at", flat=True)))
    cutoff = NOW.replace(minute=0) - timedelta(days=2)
    old = [at for at in kept if at < cutoff]
    recent = [at for at in kept if at >= cutoff]
    assert old[0] >= NOW - timedelta(days=10)
    # One hour per old day, the day's last (18:00), for both namespaces.
    assert len({at.date() for at in old}) == len(old)
    assert all(at.hour == 18 or at.date() == cutoff.date() for at in old)
    assert recent == [at for at in hours if at >= cutoff]
    assert SavingsSnapshot.objects.filter(taken_at__in=old).count() == 2 * len(old)
    dropped = sum(1 for at in hours if at < NOW - timedelta(days=10)) * 2
    assert counts["snapshots_dropped"] == dropped
    assert counts["snapshots_thinned"] == 2 * len(hours) - dropped - 2 * len(kept)
    # A second pass has nothing left to do, and no statement per old day: the
    # retention delete, the list of old hours, a savepoint and its release.
    with django_assert_max_num_queries(4):
        second = thin_snapshots(now=NOW)
    assert second == {"snapshots_dropped": 0, "snapshots_thinned": 0}


def test_the_refresh_cycle_writes_the_hours_snapshot(db, settings):
    settings.SIMULATION_SEED = 7
    settings.SIMULATION_WORKLOADS = 12
    settings.SIMULATION_HISTORY_DAYS = 1.0
    cluster = Cluster.objects.create(name="sim", kind=Cluster.Kind.SIMULATED)

    refresh_cluster(cluster_id=cluster.pk, now=NOW)
    first = SavingsSnapshot.objects.count()
    refresh_cluster(cluster_id=cluster.pk, now=NOW + timedelta(minutes=1))

    assert first > 0
    assert SavingsSnapshot.objects.count() == first
    assert set(SavingsSnapshot.objects.values_list("taken_at", flat=True)) == {
        NOW.replace(minute=0)
    }
    point = savings_trend(now=NOW, days=1).points[-1]
    assert point.workloads == 12


def test_the_expiry_run_thins_the_trend(db, settings):
    settings.SAVINGS_TREND_DAYS = 1
    cluster = make_cluster("a")
    _snapshot(cluster, NOW - timedelta(days=3), 1.0)

    run = expire_idle_aggregates(now=NOW)

    assert run.counts["snapshots_dropped"] == 1
    assert not SavingsSnapshot.objects.exists()
