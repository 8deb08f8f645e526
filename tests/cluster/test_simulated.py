"""The simulated cluster and its usage: deterministic, realistic, honest about time."""

from __future__ import annotations

import collections
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from recommender.cluster.simulated import (
    PATTERNS,
    SimulatedCluster,
    build_fleet,
)
from recommender.sources.simulated import SimulatedUsageSource

SEED = 20261121
NOW = datetime(2026, 11, 21, 12, 0, tzinfo=UTC)
NOW_S = NOW.timestamp()


@pytest.fixture(scope="module")
def fleet():
    return build_fleet(SEED, 120)


@pytest.fixture(scope="module")
def source(fleet):
    return SimulatedUsageSource(fleet=fleet)


def test_same_seed_builds_the_same_fleet_and_another_seed_does_not():
    first = build_fleet.__wrapped__(SEED, 120)
    second = build_fleet.__wrapped__(SEED, 120)
    other = build_fleet.__wrapped__(SEED + 1, 120)
    assert first == second
    assert first != other


def test_default_fleet_has_every_kind_sidecars_init_containers_and_patterns(fleet):
    kinds = collections.Counter(w.kind for w in fleet.workloads)
    assert len(fleet.workloads) >= 100
    assert set(kinds) == {"Deployment", "StatefulSet", "DaemonSet", "CronJob"}
    assert len({w.namespace for w in fleet.workloads}) >= 5
    assert len({(w.namespace, w.name) for w in fleet.workloads}) == len(fleet.workloads)
    containers = [c for w in fleet.workloads for c in w.containers]
    assert {c.kind for c in containers} == {"regular", "init", "sidecar"}
    assert {c.usage.pattern for c in containers if c.usage} == set(PATTERNS)
    assert all(c.usage is None for c in containers if c.kind == "init")
    assert sum(len(w.containers) > 1 for w in fleet.workloads) >= 20


def test_requests_are_mostly_far_too_high_some_too_low_some_missing(fleet):
    verdicts = collections.Counter()
    for workload in fleet.workloads:
        for c in workload.containers:
            if c.usage is None:
                continue
            if c.requests.cpu_millicores is None:
                verdicts["missing"] += 1
            elif c.requests.cpu_millicores >= 2 * c.usage.cpu_cores * 1000:
                verdicts["too high"] += 1
            elif c.requests.cpu_millicores < c.usage.cpu_cores * 1000:
                verdicts["too low"] += 1
    total = sum(verdicts.values())
    assert verdicts["too high"] > total / 2
    assert verdicts["missing"] > 0
    assert verdicts["too low"] > 0


def test_usage_is_a_pure_function_of_seed_series_and_time(fleet, source):
    start = NOW_S - 2 * 86400
    whole = source.fetch_usage(namespace=None, start_s=start, end_s=NOW_S, step_s=60)
    again = SimulatedUsageSource(fleet=build_fleet.__wrapped__(SEED, 120)).fetch_usage(
        namespace=None, start_s=start, end_s=NOW_S, step_s=60
    )
    assert whole.series == again.series
    np.testing.assert_array_equal(whole.cpu_cores, again.cpu_cores)
    np.testing.assert_array_equal(whole.memory_bytes, again.memory_bytes)
    # A later, overlapping window regenerates the shared minutes bit for bit.
    tail = source.fetch_usage(
        namespace=None, start_s=NOW_S - 3600, end_s=NOW_S, step_s=60
    )
    rows = {key: i for i, key in enumerate(whole.series)}
    for j, key in enumerate(tail.series):
        np.testing.assert_array_equal(
            tail.cpu_cores[j], whole.cpu_cores[rows[key], -60:]
        )
        np.testing.assert_array_equal(
            tail.memory_bytes[j], whole.memory_bytes[rows[key], -60:]
        )
    other = SimulatedUsageSource(
        fleet=build_fleet.__wrapped__(SEED + 1, 120)
    ).fetch_usage(namespace=None, start_s=NOW_S - 3600, end_s=NOW_S, step_s=60)
    assert other.series != tail.series or not np.array_equal(
        other.cpu_cores, tail.cpu_cores
    )


def test_grid_is_sixty_seconds_up_to_end_and_skips_init_containers(fleet, source):
    grid = source.fetch_usage(
        namespace="payments", start_s=NOW_S - 600, end_s=NOW_S + 30, step_s=60
    )
    assert grid.timestamp_s[-1] == NOW_S
    assert grid.timestamp_s[0] == NOW_S - 540
    assert np.all(np.diff(grid.timestamp_s) == 60)
    assert {key.namespace for key in grid.series} == {"payments"}
    init_names = {
        (w.namespace, c.name)
        for w in fleet.workloads
        for c in w.containers
        if c.kind == "init"
    }
    assert not {(k.namespace, k.container) for k in grid.series} & init_names
    alive = ~np.isnan(grid.cpu_cores)
    assert np.array_equal(alive, ~np.isnan(grid.memory_bytes))
    assert np.all(grid.cpu_cores[alive] > 0)
    assert np.all(grid.memory_bytes[alive] > 0)


def test_bad_window_is_rejected_naming_the_argument(source):
    with pytest.raises(ValueError, match="step_s"):
        source.fetch_usage(namespace=None, start_s=0, end_s=60, step_s=0)
    with pytest.raises(ValueError, match="end_s"):
        source.fetch_usage(namespace=None, start_s=120, end_s=60, step_s=60)


def test_long_lived_pods_keep_names_while_cronjob_pods_come_and_go(fleet):
    early = SimulatedCluster(name="sim", fleet=fleet, now=NOW).discover()
    later = SimulatedCluster(
        name="sim", fleet=fleet, now=NOW + timedelta(hours=30)
    ).discover()
    pods = {(w.kind, w.name): {p.name for p in w.pods} for w in early.workloads}
    pods_later = {(w.kind, w.name): {p.name for p in w.pods} for w in later.workloads}
    for (kind, name), names in pods.items():
        if kind == "CronJob":
            assert not names & pods_later[(kind, name)]
        else:
            assert names == pods_later[(kind, name)]
            assert names
    deployment = next(w for w in early.workloads if w.kind == "Deployment")
    assert all(p.name.startswith(deployment.name + "-") for p in deployment.pods)
    assert len(deployment.pods) == deployment.replicas
    # Across a day every CronJob has run at least once, each run with a fresh pod.
    source = SimulatedUsageSource(fleet=fleet)
    day = source.series_between(namespace=None, start_s=NOW_S - 86400, end_s=NOW_S)
    cron_pods = collections.defaultdict(set)
    for key, workload, *_ in day:
        if workload.kind == "CronJob":
            cron_pods[(workload.namespace, workload.name)].add(key.pod)
    assert len(cron_pods) == sum(w.kind == "CronJob" for w in fleet.workloads)
    assert all(len(p) >= 1 for p in cron_pods.values())


def test_oom_killed_containers_reach_their_limit_and_emit_kills_with_the_request(
    fleet, source
):
    kills = SimulatedCluster(name="sim", fleet=fleet, now=NOW).discover().oom_kills
    assert kills
    kill = kills[-1]
    workload = next(w for w in fleet.workloads if kill.pod in w.long_lived_pods())
    container = next(c for c in workload.containers if c.name == kill.container)
    assert container.usage.pattern == "oom"
    assert kill.memory_request_bytes == container.requests.memory_bytes
    killed_s = kill.occurred_at.timestamp()
    grid = source.fetch_usage(
        namespace=workload.namespace,
        start_s=killed_s - 600,
        end_s=killed_s + 600,
        step_s=60,
    )
    row = grid.series.index(
        next(
            k
            for k in grid.series
            if k.pod == kill.pod and k.container == kill.container
        )
    )
    before = grid.memory_bytes[row, grid.timestamp_s <= killed_s][-1]
    after = grid.memory_bytes[row, grid.timestamp_s > killed_s][0]
    assert before > 0.97 * container.limits.memory_bytes
    assert after < 0.8 * before


def test_a_namespace_adapter_sees_only_its_namespace(fleet):
    whole = SimulatedCluster(name="sim", fleet=fleet, now=NOW).discover()
    namespace = whole.workloads[0].namespace

    shard = SimulatedCluster(
        name="sim", fleet=fleet, now=NOW, namespace=namespace
    ).discover()

    assert shard.workloads == tuple(
        w for w in whole.workloads if w.namespace == namespace
    )
    assert 0 < len(shard.workloads) < len(whole.workloads)
    assert all(k.namespace == namespace for k in shard.oom_kills)
    assert {k for k in whole.oom_kills if k.namespace == namespace} == set(
        shard.oom_kills
    )


def test_workloads_carry_team_labels_and_daemon_sets_a_pod_per_node(fleet):
    from recommender.cluster.simulated import NODE_COUNT
    from recommender.cluster.simulated_labels import TEAM_LABEL, TEAMS

    snapshot = SimulatedCluster(name="sim", fleet=fleet, now=NOW).discover()

    teams = collections.Counter(w.labels.get(TEAM_LABEL) for w in snapshot.workloads)
    # Several teams, and a few workloads nobody labelled.
    assert len(set(teams) - {None}) >= 4
    assert 0 < teams[None] < len(snapshot.workloads) / 4
    for workload in snapshot.workloads:
        team = workload.labels.get(TEAM_LABEL)
        if workload.kind == "DaemonSet":
            assert team in ("platform", None)
            # status.desiredNumberScheduled: one pod on each node.
            assert workload.replicas == NODE_COUNT == len(workload.pods)
        elif team is not None:
            assert team == TEAMS[workload.namespace]
        # The selector still selects the pods (the team label is not in it).
        assert workload.selector == {"matchLabels": {"app": workload.name}}
    assert all(w.replicas is None for w in snapshot.workloads if w.kind == "CronJob")
