"""The live engine with ``headroom`` and its smallest memory margin: a refresh after a
policy switches to it stores the engine's recommendation from the container's own
checkpoint (no state beyond upstream's histograms), with the margin floor applied."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from recommender.engine import AggregateSet, get_profile, recommend
from recommender.models import Cluster, Container, Policy
from recommender.roles import Role
from recommender.services.policy.changes import update_policy
from recommender.services.refresh.cycle import refresh_cluster
from tests.factories import make_user

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
LATER = NOW + timedelta(minutes=1)
MI = 1024 * 1024
# Large enough to bind on every simulated container whose base is below 8 GiB.
FLOOR = 1024 * MI


@pytest.fixture(autouse=True)
def small_fleet(settings):
    settings.SIMULATION_SEED = 11
    settings.SIMULATION_WORKLOADS = 4
    settings.SIMULATION_HISTORY_DAYS = 2


def test_a_refresh_under_headroom_recommends_from_the_checkpoint_with_the_floor(db):
    operator = make_user("olga", Role.OPERATOR)
    cluster = Cluster.objects.create(name="small", kind=Cluster.Kind.SIMULATED)
    refresh_cluster(cluster_id=cluster.pk, now=NOW)
    for policy in Policy.objects.filter(workload__cluster=cluster):
        update_policy(
            workload_id=policy.workload_id,
            changes={
                "profile": "headroom",
                "profile_overrides": {"memory_margin_min_bytes": FLOOR},
            },
            actor=operator,
            now=NOW,
        )
    refresh_cluster(cluster_id=cluster.pk, now=LATER)
    profile = get_profile("headroom").with_overrides(memory_margin_min_bytes=FLOOR)
    containers = Container.objects.filter(
        workload__cluster=cluster, latest_recommendation__isnull=False
    ).select_related("workload", "latest_recommendation", "checkpoint")
    floored = 0
    for container in containers:
        rec = container.latest_recommendation
        assert rec.profile == "headroom"
        aggregates = AggregateSet.from_checkpoints(
            profile, [bytes(container.checkpoint.state)]
        )
        in_pod = container.workload.containers.exclude(kind="init").count()
        (expected,) = recommend(
            aggregates, rows=[0], profile=profile, containers_in_pod=[in_pod]
        )
        assert rec.target_memory_bytes == expected.target.memory_bytes
        assert rec.target_cpu_millicores == expected.target.cpu_millicores
        target = rec.explanation["resources"]["memory"]["target"]
        if target["base"] < 8 * FLOOR:
            assert target["with_margin"] == target["base"] + FLOOR
            floored += 1
        assert rec.explanation["profile_overrides"] == {
            "memory_margin_min_bytes": {"profile": 64 * MI, "override": FLOOR}
        }
    assert floored > 0
