"""A refresh after an operator's profile override recommends with it: its targets are
the engine's for the overridden profile, and the stored explanation says which fields
were overridden."""

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
OVERRIDES = {
    "cpu_target_percentile": 0.95,
    "memory_target_percentile": 0.99,
    # The band must hold the target: upstream's memory upper bound reads p95.
    "memory_upper_percentile": 0.99,
}


@pytest.fixture(autouse=True)
def small_fleet(settings):
    settings.SIMULATION_SEED = 11
    settings.SIMULATION_WORKLOADS = 4
    settings.SIMULATION_HISTORY_DAYS = 2


def latest(cluster: Cluster) -> dict[tuple[str, str], Container]:
    return {
        (c.workload.name, c.name): c
        for c in Container.objects.filter(
            workload__cluster=cluster, latest_recommendation__isnull=False
        ).select_related("workload", "latest_recommendation", "checkpoint")
    }


def engine_targets(container: Container, profile_name: str) -> tuple[int, int]:
    """The engine's targets from the container's checkpoint, with the given profile."""
    profile = get_profile("vpa").with_overrides(**OVERRIDES)
    if profile_name == "vpa":
        profile = get_profile("vpa")
    aggregates = AggregateSet.from_checkpoints(
        profile, [bytes(container.checkpoint.state)]
    )
    in_pod = container.workload.containers.exclude(kind="init").count()
    (result,) = recommend(
        aggregates, rows=[0], profile=profile, containers_in_pod=[in_pod]
    )
    return result.target.cpu_millicores, result.target.memory_bytes


def test_a_refresh_after_an_override_recommends_with_it(db):
    operator = make_user("olga", Role.OPERATOR)
    cluster = Cluster.objects.create(name="edited", kind=Cluster.Kind.SIMULATED)
    refresh_cluster(cluster_id=cluster.pk, now=NOW)
    before = {k: c.latest_recommendation for k, c in latest(cluster).items()}
    assert before
    for policy in Policy.objects.filter(workload__cluster=cluster):
        update_policy(
            workload_id=policy.workload_id,
            changes={"profile_overrides": OVERRIDES},
            actor=operator,
            now=NOW,
        )
    refresh_cluster(cluster_id=cluster.pk, now=LATER)
    after = latest(cluster)

    assert after.keys() == before.keys()
    moved = set()
    for key, container in after.items():
        rec = container.latest_recommendation
        assert (rec.target_cpu_millicores, rec.target_memory_bytes) == engine_targets(
            container, "overridden"
        ), key
        if rec.pk != before[key].pk:
            moved.add(key)
    # A row is stored only when a value moves (docs/refresh.md); at least one target
    # moved from the p90-based to the p95-based value.
    assert moved
    for key in moved:
        rec = after[key].latest_recommendation
        p90_cpu, _ = engine_targets(after[key], "vpa")
        assert rec.target_cpu_millicores > p90_cpu
        assert rec.created_at == LATER
        assert rec.explanation["resources"]["cpu"]["target"]["percentile"] == 0.95
        assert rec.profile == "vpa"
        assert rec.explanation["profile_overrides"] == {
            "cpu_target_percentile": {"profile": 0.9, "override": 0.95},
            "memory_target_percentile": {"profile": 0.9, "override": 0.99},
            "memory_upper_percentile": {"profile": 0.95, "override": 0.99},
        }
