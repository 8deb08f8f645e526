"""When a pod counts as startup-boosted and when its boost ends (``pod_boost``)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from recommender.cluster.base import ContainerSpec, PodCondition, PodInfo
from recommender.engine.resources import Resources
from recommender.services.actuation.boost import pod_boost

START = datetime(2026, 12, 6, 6, 0, tzinfo=UTC)
RECORD = {
    "vpaweb.io/startup-boost": json.dumps(
        {"duration_s": 60, "containers": {"app": {"requests": {"cpu": "250m"}}}}
    )
}


def pod(cpu: int, *, spec_cpu: int | None = None, conditions=()) -> PodInfo:
    return PodInfo(
        namespace="shop",
        name="api-1",
        phase="Running",
        containers=(ContainerSpec("app", requests=Resources(cpu, None)),),
        spec_containers=()
        if spec_cpu is None
        else (ContainerSpec("app", requests=Resources(spec_cpu, None)),),
        start_time=START,
        annotations=RECORD,
        conditions=tuple(conditions),
    )


def test_a_boost_ends_the_duration_after_ready() -> None:
    ready = PodCondition("Ready", "True", last_transition=START + timedelta(seconds=30))
    boost = pod_boost(pod(500, conditions=[ready]))
    assert boost is not None and boost.ends_at == START + timedelta(seconds=90)
    assert boost.containers[0].requests == Resources(250, None)
    not_ready = PodCondition("Ready", "False", last_transition=START)
    boost = pod_boost(pod(500, conditions=[not_ready]))
    assert boost is not None and boost.ends_at is None


def test_without_reported_conditions_running_since_start_is_ready() -> None:
    boost = pod_boost(pod(500))
    assert boost is not None and boost.ends_at == START + timedelta(seconds=60)


def test_a_shrink_taken_but_not_actuated_is_still_boosted_and_sends_nothing() -> None:
    boost = pod_boost(pod(500, spec_cpu=250))
    assert boost is not None and boost.containers == ()
    assert pod_boost(pod(250, spec_cpu=250)) is None
    plain = PodInfo(namespace="shop", name="api-2", phase="Running", containers=())
    assert pod_boost(plain) is None
