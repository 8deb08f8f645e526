"""Statuses that tell the truth: risk, waste and missing requests are
separate facts; a sidecar below its share of the pod minimum is not at risk; a missing
request is "missing", not risk; OOM kills are risk; a workload can be wasteful and at
risk; the savings sort lists the biggest savings and the risk sort puts real risk first.

Recommendations come from the real engine (``recommend`` with two containers in the pod,
so the pod minimum's per-container share applies as upstream applies it).
"""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pytest
from django.utils import timezone

from recommender.engine import AggregateSet, SampleBatch, get_profile, recommend
from recommender.models import (
    Container,
    OomKill,
    ProvisioningStatus,
    Recommendation,
    Workload,
)
from recommender.services.dashboard.insights import WorkloadFilters, list_workloads
from recommender.services.dashboard.overview import fleet_overview
from recommender.services.dashboard.workload_insight import workload_insight
from recommender.services.readmodels.provisioning import Prices
from tests.factories import make_cluster, make_recommendation, make_workload

pytestmark = pytest.mark.django_db

MI = 2**20
PRICES = Prices(per_core_hour=0.04, per_gib_hour=0.005)


def engine_recommend(
    container: Container, *, cores: float, memory: float, containers_in_pod: int
) -> Recommendation:
    """Feed the real engine 8 days of steady usage and store what it recommends."""
    profile = get_profile("vpa")
    aggregates = AggregateSet.empty(profile, 1)
    times = 1.7e9 + np.arange(8 * 24 * 12) * 300.0
    aggregates.add_samples(
        SampleBatch.from_grid(
            series_aggregate=np.array([0]),
            series_keys=["pod-a"],
            timestamp_s=times,
            cpu_cores=np.full((1, times.size), cores),
            memory_bytes=np.full((1, times.size), memory),
        )
    )
    (result,) = recommend(
        aggregates, rows=[0], profile=profile, containers_in_pod=[containers_in_pod]
    )
    rec = Recommendation.objects.create(
        container=container,
        target_cpu_millicores=result.target.cpu_millicores,
        target_memory_bytes=result.target.memory_bytes,
        lower_cpu_millicores=result.lower_bound.cpu_millicores,
        lower_memory_bytes=result.lower_bound.memory_bytes,
        upper_cpu_millicores=result.upper_bound.cpu_millicores,
        upper_memory_bytes=result.upper_bound.memory_bytes,
        uncapped_cpu_millicores=result.uncapped_target.cpu_millicores,
        uncapped_memory_bytes=result.uncapped_target.memory_bytes,
        explanation=result.explanation_dict(),
    )
    container.latest_recommendation = rec
    container.save(update_fields=["latest_recommendation"])
    return rec


def feeds_worker(cluster, name="feeds-worker", *, log_shipper_memory=64 * MI):
    """The issue's catalog/feeds-worker: a big app requesting far more than it uses,
    and a log-shipping sidecar requesting 64Mi while using about 20 MB."""
    workload = make_workload(
        cluster,
        name,
        namespace="catalog",
        replicas=2,
        containers={
            "app": {
                "request_cpu_millicores": 1250,
                "request_memory_bytes": 7 * 1024 * MI,
            },
            "log-shipper": {
                "request_cpu_millicores": 20,
                "request_memory_bytes": log_shipper_memory,
            },
        },
    )
    engine_recommend(
        workload.containers.get(name="app"),
        cores=0.3,
        memory=1.2e9,
        containers_in_pod=2,
    )
    engine_recommend(
        workload.containers.get(name="log-shipper"),
        cores=0.005,
        memory=2e7,
        containers_in_pod=2,
    )
    return workload


def _page(**filters):
    return list_workloads(
        filters=WorkloadFilters(**filters), now=timezone.now(), prices=PRICES
    )


def _insight(workload):
    return workload_insight(workload_id=workload.pk, now=timezone.now(), prices=PRICES)


def test_a_sidecar_below_its_share_of_the_pod_minimum_is_not_at_risk():
    workload = feeds_worker(make_cluster())
    sidecar = workload.containers.get(name="log-shipper")
    rec = sidecar.latest_recommendation
    # The engine raised the sidecar's memory lower bound to its 125 MiB share of the
    # pod minimum, above the 64Mi it requests: the old rule said "under-provisioned".
    assert rec.lower_memory_bytes >= 125 * MI > sidecar.request_memory_bytes
    assert rec.explanation["resources"]["memory"]["lower_bound"]["pod_minimum_applied"]

    insight = _insight(workload)
    row = _page()[0]

    facts = {item.container.name: item.facts for item in insight.containers}
    assert not facts["log-shipper"].at_risk
    assert facts["log-shipper"].shortfall_percent == 0
    assert not insight.facts.at_risk
    assert insight.facts.wasteful and insight.facts.savings > 50
    assert insight.status == row.status == ProvisioningStatus.OVER
    assert row.risk == 0
    assert list(_page(at_risk="true")) == []
    assert [w.name for w in _page(wasteful="true")] == ["feeds-worker"]


def test_a_request_far_below_the_usage_floor_is_at_risk():
    # The same sidecar requesting 8Mi: below what it really uses, not only below the
    # pod minimum's share.
    workload = feeds_worker(make_cluster(), log_shipper_memory=8 * MI)

    insight = _insight(workload)
    row = _page()[0]

    sidecar = next(i for i in insight.containers if i.container.name == "log-shipper")
    assert sidecar.facts.at_risk and sidecar.facts.shortfall_percent >= 50
    # Wasteful (the app) and at risk (the sidecar) at once.
    assert insight.facts.at_risk and insight.facts.wasteful
    assert row.risk == row.shortfall == insight.facts.shortfall_percent
    assert row.savings > 0
    assert row.status == ProvisioningStatus.UNDER
    assert [w.name for w in _page(at_risk="true")] == ["feeds-worker"]
    assert [w.name for w in _page(wasteful="true")] == ["feeds-worker"]
    assert [w.name for w in _page(at_risk="true", wasteful="false")] == []


def test_a_missing_request_is_missing_not_risk():
    cluster = make_cluster()
    workload = make_workload(
        cluster, "no-memory", containers={"app": {"request_cpu_millicores": 250}}
    )
    make_recommendation(workload.containers.get())  # target 250m / 300 MiB

    insight = _insight(workload)
    row = _page()[0]

    assert insight.facts.missing_requests and not insight.facts.at_risk
    assert row.status == insight.status == ProvisioningStatus.MISSING
    assert row.risk == 0 and row.missing_count == 1
    assert [w.name for w in _page(missing_requests="true")] == ["no-memory"]
    assert list(_page(at_risk="true")) == []


def test_recent_oom_kills_are_risk_and_old_ones_are_not():
    cluster = make_cluster()
    killed = make_workload(cluster, "killed")
    old = make_workload(cluster, "killed-long-ago")
    for workload, age in ((killed, timedelta(hours=3)), (old, timedelta(days=8))):
        container = workload.containers.get()
        # Requests 500m / 512 MiB, well above the target: wasteful too.
        make_recommendation(container)
        OomKill.objects.create(
            container=container, pod="p-1", occurred_at=timezone.now() - age
        )

    rows = {w.name: w for w in _page()}

    assert rows["killed"].recent_ooms == 1 and rows["killed"].risk == 1000
    assert rows["killed"].status == ProvisioningStatus.UNDER
    assert rows["killed"].savings > 0  # at risk and wasteful
    assert rows["killed-long-ago"].risk == 0
    assert rows["killed-long-ago"].status == ProvisioningStatus.OVER
    assert _insight(killed).facts.at_risk


def _fleet_of_savings_and_risks():
    """Workloads with known savings and risks; several at risk AND wasteful."""
    cluster = make_cluster()
    expected_savings = {}
    for index in range(14):
        # Requests from 300m to 1600m against a 250m target: savings grow with index;
        # every third one is also short of memory, every fourth one OOM-killed.
        memory = 100 * MI if index % 3 == 0 else 300 * MI
        workload = make_workload(
            cluster,
            f"w{index:02d}",
            replicas=1 + index % 3,
            containers={
                "app": {
                    "request_cpu_millicores": 300 + 100 * index,
                    "request_memory_bytes": memory,
                }
            },
        )
        container = workload.containers.get()
        make_recommendation(container)  # 250m / 300 MiB, lower 200m / 240 MiB
        for kill in range(index % 4 == 0 and index // 4):
            OomKill.objects.create(
                container=container,
                pod=f"p-{kill}",
                occurred_at=timezone.now() - timedelta(hours=kill + 1),
            )
        expected_savings[workload.name] = (1 + index % 3) * PRICES.monthly(
            cpu_millicores=300 + 100 * index - 250, memory_bytes=memory - 300 * MI
        )
    return expected_savings


def test_the_savings_sort_lists_the_biggest_savings_first():
    expected = _fleet_of_savings_and_risks()

    top = list(
        list_workloads(
            filters=WorkloadFilters(sort="savings"),
            page_size=10,
            now=timezone.now(),
            prices=PRICES,
        )
    )

    biggest = sorted(expected, key=lambda name: -expected[name])[:10]
    assert [w.name for w in top] == biggest
    assert [w.savings for w in top] == pytest.approx(
        [expected[name] for name in biggest]
    )
    # Some of the biggest savings are also at risk: they are listed all the same.
    assert any(w.risk > 0 for w in top)


def test_the_risk_sort_puts_oom_kills_first_then_the_largest_shortfall():
    _fleet_of_savings_and_risks()
    # One more with a larger shortfall (memory 60 MiB vs a 240 MiB floor) and no kill.
    short = make_workload(
        Workload.objects.first().cluster,
        "very-short",
        containers={
            "app": {"request_cpu_millicores": 250, "request_memory_bytes": 60 * MI}
        },
    )
    make_recommendation(short.containers.get())

    rows = list(_page(sort="risk", at_risk="true"))

    names = [w.name for w in rows]
    # OOM kills first (most first: w12 has 3, w08 2, w04 1), then shortfalls, largest
    # first (very-short 75 %, then the 58 % ones by savings).
    assert names[:4] == ["w12", "w08", "w04", "very-short"]
    assert [w.recent_ooms for w in rows[:3]] == [3, 2, 1]
    assert [w.shortfall for w in rows[3:]] == sorted(
        (w.shortfall for w in rows[3:]), reverse=True
    )
    assert all(w.risk > 0 for w in rows)
    assert {w.name for w in rows} == {"w00", "w03", "w04", "w06", "w08", "w09"} | {
        "w12",
        "very-short",
    }
    # The overview's at-risk panel uses the same order.
    overview = fleet_overview(now=timezone.now(), prices=PRICES, limit=4)
    assert [w.name for w in overview.at_risk] == names[:4]
    assert overview.at_risk_count == len(rows)
