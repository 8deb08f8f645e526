"""The updater's pure decisions against upstream's rules (``pkg/updater/priority/`` and
``pkg/updater/restriction/``) and upstream's own restriction tests
(pods_eviction_restriction_test.go)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from recommender.cluster.base import ContainerSpec, PodCondition, PodInfo, Termination
from recommender.engine.capping import CappedRecommendation
from recommender.engine.resources import Resources
from recommender.services.actuation import decision

NOW = datetime(2026, 11, 24, 6, 0, tzinfo=UTC)
MI = 2**20
CONFIG = decision.UpdaterConfig()


def make_pod(
    name="p",
    *,
    cpu=500,
    memory=512 * MI,
    age_h=24.0,
    phase="Running",
    annotations=None,
    terminations=(),
    conditions=(),
):
    return PodInfo(
        namespace="shop",
        name=name,
        phase=phase,
        containers=(ContainerSpec("app", requests=Resources(cpu, memory)),),
        start_time=NOW - timedelta(hours=age_h),
        owner_kind="ReplicationController",
        owner_name="rc",
        annotations=annotations or {},
        last_terminations=tuple(terminations),
        conditions=tuple(conditions),
    )


def rec(cpu, memory, *, spread=0.2):
    target = Resources(cpu, memory)
    return {
        "app": CappedRecommendation(
            target=target,
            lower_bound=Resources(int(cpu * (1 - spread)), int(memory * (1 - spread))),
            upper_bound=Resources(int(cpu * (1 + spread)), int(memory * (1 + spread))),
            uncapped_target=target,
        )
    }


def priority(pod, capped):
    return decision.pod_priority(
        pod, capped, now=NOW, evict_after_oom_s=CONFIG.evict_after_oom_s
    )


def test_resource_diff_sums_relative_differences_across_resources():
    p = priority(make_pod(cpu=500, memory=400 * MI), rec(250, 600 * MI))
    assert p.resource_diff == pytest.approx(0.5 + 0.5)
    assert p.scale_up  # memory goes up
    assert p.outside_range


def test_inside_the_bounds_needs_12_hours_and_a_ten_percent_change():
    capped = rec(480, 512 * MI, spread=0.5)  # 500m within the bounds; diff 0.04
    young = make_pod(age_h=11.9)
    p = priority(young, capped)
    assert not p.outside_range and p.resource_diff == pytest.approx(0.04)
    assert not decision.admit(p, young, now=NOW, config=CONFIG)
    old = make_pod(age_h=12.1)
    assert not decision.admit(priority(old, capped), old, now=NOW, config=CONFIG)
    bigger = rec(400, 512 * MI, spread=0.5)  # diff 0.2
    assert decision.admit(priority(old, bigger), old, now=NOW, config=CONFIG)
    assert not decision.admit(priority(young, bigger), young, now=NOW, config=CONFIG)


def test_outside_the_bounds_is_admitted_at_any_age():
    young = make_pod(age_h=0.1)
    assert decision.admit(
        priority(young, rec(250, 300 * MI)), young, now=NOW, config=CONFIG
    )


def test_quick_oom_admits_a_young_pod_unless_nothing_would_change():
    oom = Termination(
        "app", "OOMKilled", NOW - timedelta(minutes=9), NOW - timedelta(minutes=1)
    )
    pod = make_pod(age_h=0.5, terminations=[oom])
    inside = rec(520, 540 * MI, spread=0.5)
    p = priority(pod, inside)
    assert p.quick_oom and not p.outside_range
    assert decision.admit(p, pod, now=NOW, config=CONFIG)
    assert "OOM-killed 8 min after it started" in decision.describe(p, pod, now=NOW)
    same = rec(500, 512 * MI, spread=0.5)
    assert not decision.admit(priority(pod, same), pod, now=NOW, config=CONFIG)
    slow = Termination(
        "app", "OOMKilled", NOW - timedelta(minutes=30), NOW - timedelta(minutes=1)
    )
    assert not priority(make_pod(terminations=[slow]), inside).quick_oom


def test_scale_ups_come_first_then_the_larger_difference():
    small_up = priority(make_pod(cpu=500), rec(550, 512 * MI))
    big_down = priority(make_pod(cpu=500), rec(100, 512 * MI))
    small_down = priority(make_pod(cpu=500), rec(400, 512 * MI))
    ordered = sorted([small_down, big_down, small_up], key=lambda p: p.sort_key())
    assert ordered == [small_up, big_down, small_down]
    assert small_up.rank > big_down.rank > small_down.rank


def test_observed_containers_annotation_limits_what_counts():
    pod = make_pod(annotations={"vpaObservedContainers": "sidecar"})
    assert priority(pod, rec(250, 300 * MI)).resource_diff == 0.0


@pytest.mark.parametrize(
    ("requirement", "target_cpu", "admitted"),
    [
        ("TargetHigherThanRequests", 600, True),
        ("TargetHigherThanRequests", 400, False),
        ("TargetLowerThanRequests", 400, True),
    ],
)
def test_eviction_requirements(requirement, target_cpu, admitted):
    requirements = [{"resources": ["cpu"], "changeRequirement": requirement}]
    pod = make_pod(cpu=500)
    assert (
        decision.eviction_requirements_pass(
            requirements, pod, rec(target_cpu, 512 * MI)
        )
        is admitted
    )
    assert decision.eviction_requirements_pass([], pod, rec(target_cpu, 512 * MI))


def _group(replicas, *, tolerance, min_replicas=2, live=None):
    pods = [make_pod(f"p{i}") for i in range(live if live is not None else replicas)]
    return pods, decision.build_group(
        pods,
        owner_kind="ReplicationController",
        replicas=replicas,
        min_replicas=min_replicas,
        tolerance_fraction=tolerance,
    )


def _evictions(pods, group):
    count = 0
    for pod in pods:
        if group.can_evict(pod):
            group.record(pod, in_place=False)
            count += 1
    return count


def test_upstream_restriction_cases():
    # 5 replicas and 5 live pods, minReplicas 10: none evictable (group left out).
    _, group = _group(5, tolerance=0.5, min_replicas=10)
    assert group is None
    # Tolerance 0.8 (4 pods): the first 4 evictions succeed, the 5th fails.
    pods, group = _group(5, tolerance=0.8)
    assert _evictions(pods, group) == 4
    # Tolerance 0.1 (0 pods): exactly one eviction.
    pods, group = _group(5, tolerance=0.1)
    assert _evictions(pods, group) == 1


def test_pending_pods_can_always_be_evicted_and_unknown_owners_count_zero():
    pods, group = _group(3, tolerance=0.0)
    assert _evictions(pods, group) == 1
    assert group.can_evict(make_pod("pending", phase="Pending"))
    quirk = decision.build_group(
        [make_pod("a"), make_pod("b")],
        owner_kind="SomethingElse",
        replicas=None,
        min_replicas=2,
        tolerance_fraction=0.5,
    )
    assert quirk is not None and quirk.configured == 0 and quirk.disruptable()


def condition(kind, reason):
    return PodCondition(kind, "True", reason)


@pytest.mark.parametrize(
    ("conditions", "pending_since", "in_progress_since", "action"),
    [
        ((), None, None, "done"),
        ((condition("PodResizePending", "Infeasible"),), None, None, "evict"),
        ((condition("PodResizePending", "Deferred"),), None, None, "wait"),
        ((condition("PodResizePending", "Deferred"),), 4, None, "wait"),
        ((condition("PodResizePending", "Deferred"),), 6, None, "evict"),
        ((condition("PodResizeInProgress", ""),), None, 59, "wait"),
        ((condition("PodResizeInProgress", ""),), None, 61, "evict"),
        ((condition("PodResizeInProgress", "Error"),), None, None, "evict"),
        ((condition("PodResizePending", "Whatever"),), None, None, "evict"),
    ],
)
def test_in_place_fallbacks(conditions, pending_since, in_progress_since, action):
    pod = make_pod(conditions=conditions)
    progress = decision.in_place_progress(
        pod,
        now=NOW,
        pending_since=NOW - timedelta(minutes=pending_since) if pending_since else None,
        in_progress_since=NOW - timedelta(minutes=in_progress_since)
        if in_progress_since
        else None,
        config=CONFIG,
    )
    assert progress.action == action


def test_an_unscheduled_pod_is_left_out_as_upstream_lister_does():
    waiting = PodCondition("PodScheduled", "False", "Unschedulable", "0/3 nodes")
    assert decision.unscheduled(make_pod(phase="Pending", conditions=[waiting]))
    assert not decision.unscheduled(make_pod(phase="Pending"))
    scheduled = PodCondition("PodScheduled", "True")
    assert not decision.unscheduled(make_pod(conditions=[scheduled]))


def test_below_min_replicas_says_why_the_updater_never_disrupts():
    assert decision.below_min_replicas(1, 2) == (
        "1 replica: below min_replicas 2; the updater never disrupts it"
    )
    assert decision.below_min_replicas(2, 2) is None
    assert decision.below_min_replicas(None, 2) is None
