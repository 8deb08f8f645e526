"""A refresh under a profile with ``throttling_boost`` raises the CPU target of the
containers the simulated cluster throttled above the threshold, and says so in the
stored explanation; the others (and the vpa profile) are left as the engine made them.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest

from recommender.cluster.simulated import build_fleet
from recommender.engine import AggregateSet, get_profile, recommend
from recommender.models import Cluster, Container, Policy
from recommender.roles import Role
from recommender.services.policy.changes import update_policy
from recommender.services.refresh.cycle import refresh_cluster
from recommender.services.refresh.throttling import THROTTLING_WINDOW_S
from recommender.sources.simulated import SimulatedUsageSource
from tests.factories import make_user

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
LATER = NOW + timedelta(minutes=1)
SEED, WORKLOADS = 2, 4  # a fleet with a DaemonSet container throttled at its limit
OVERRIDES = {"throttling_boost": 0.5, "throttling_threshold": 0.1}


@pytest.fixture(autouse=True)
def small_fleet(settings):
    settings.SIMULATION_SEED = SEED
    settings.SIMULATION_WORKLOADS = WORKLOADS
    settings.SIMULATION_HISTORY_DAYS = 2


def expected_ratios(end_s: float) -> dict[tuple[str, str], float]:
    """Throttled share per (workload, container), pods summed, from the source."""
    fleet = build_fleet(SEED, WORKLOADS)
    counts = SimulatedUsageSource(fleet=fleet).fetch_throttling(
        namespace=None, start_s=end_s - THROTTLING_WINDOW_S, end_s=end_s
    )
    owner = {pod: w.name for w in fleet.workloads for pod in w.long_lived_pods()}
    sums: dict[tuple[str, str], list[float]] = {}
    for key, (throttled, periods) in counts.items():
        if key.pod in owner:
            pair = sums.setdefault((owner[key.pod], key.container), [0.0, 0.0])
            pair[0] += throttled
            pair[1] += periods
    return {k: t / p for k, (t, p) in sums.items()}


def engine_cpu_target(container: Container, profile) -> int:
    aggregates = AggregateSet.from_checkpoints(
        profile, [bytes(container.checkpoint.state)]
    )
    in_pod = container.workload.containers.exclude(kind="init").count()
    (result,) = recommend(
        aggregates, rows=[0], profile=profile, containers_in_pod=[in_pod]
    )
    return result.target.cpu_millicores


def test_throttled_containers_get_the_boost_and_the_explanation_says_why(db):
    operator = make_user("olga", Role.OPERATOR)
    cluster = Cluster.objects.create(name="hot", kind=Cluster.Kind.SIMULATED)
    refresh_cluster(cluster_id=cluster.pk, now=NOW)
    assert not any(
        "throttling" in c.latest_recommendation.explanation
        for c in Container.objects.filter(latest_recommendation__isnull=False)
    ), "the vpa profile never boosts"
    for policy in Policy.objects.filter(workload__cluster=cluster):
        update_policy(
            workload_id=policy.workload_id,
            changes={"profile_overrides": OVERRIDES},
            actor=operator,
            now=NOW,
        )
    refresh_cluster(cluster_id=cluster.pk, now=LATER)
    ratios = expected_ratios(LATER.timestamp())
    hot = {k for k, r in ratios.items() if r > OVERRIDES["throttling_threshold"]}
    assert hot, "the fleet has a container throttled above the threshold"
    profile = get_profile("vpa").with_overrides(**OVERRIDES)
    boosted = set()
    for c in Container.objects.filter(
        workload__cluster=cluster, latest_recommendation__isnull=False
    ).select_related("workload", "latest_recommendation", "checkpoint"):
        key = (c.workload.name, c.name)
        rec = c.latest_recommendation
        explained = rec.explanation.get("throttling")
        engine = engine_cpu_target(c, profile)
        if explained is None:
            assert key not in hot
            assert rec.uncapped_cpu_millicores == engine, key
            continue
        boosted.add(key)
        assert math.isclose(explained["ratio"], ratios[key], rel_tol=1e-12)
        assert explained["target_before"] == engine
        assert explained["target_after"] == engine + math.trunc(engine * 0.5)
        assert rec.uncapped_cpu_millicores == explained["target_after"]
        assert explained["note"] in rec.explanation["notes"]
        assert explained["note"].startswith("CPU target raised 50% because the")
    assert boosted == hot
