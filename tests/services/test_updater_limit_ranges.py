"""The updater's resize follows the namespace's LimitRange like the webhook's patch:
the same capping and ratio rule (engine/limits.py), and no change LimitRanger would
refuse (it validates ``pods/resize`` too)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from recommender.cluster.base import ContainerSpec, PodInfo
from recommender.engine.capping import LimitRangeItem
from recommender.engine.resources import Resources
from recommender.services.actuation import decision
from recommender.services.advice.advise import capped_recommendations, new_resources
from recommender.services.policy.validation import parse_container_policies
from tests.services.test_updater_decision import rec

NOW = datetime(2026, 11, 24, 6, 0, tzinfo=UTC)
MI = 2**20
REQUESTS_ONLY = parse_container_policies(
    [{"containerName": "*", "controlledValues": "RequestsOnly"}]
)


def pod_with(*containers: ContainerSpec) -> PodInfo:
    return PodInfo(
        namespace="batch",
        name="light-0",
        phase="Running",
        containers=containers,
        start_time=NOW - timedelta(hours=24),
        owner_kind="StatefulSet",
        owner_name="light",
    )


def resize_of(pod, latest, policies, ranges):
    capped, _ = capped_recommendations(pod, latest, policies, ranges)
    before, after = new_resources(pod, capped, policies, ranges[0])
    return before, after, decision.limit_range_refusals(pod, before, after, ranges)


def test_a_requests_only_resize_keeps_the_limit_to_request_ratio():
    """The recorded refusal's numbers: limit 300m, ratio 3.5, recommendation 78m."""
    ranges = (
        LimitRangeItem(
            type="Container",
            max=Resources(500, 512 * MI),
            default=Resources(300, 256 * MI),
            max_limit_request_ratio=Resources(3500, None),
        ),
        None,
    )
    pod = pod_with(
        ContainerSpec(
            "app", requests=Resources(100, 128 * MI), limits=Resources(300, 256 * MI)
        )
    )
    _, after, refusals = resize_of(pod, rec(78, 128 * MI), REQUESTS_ONLY, ranges)
    assert after["app"]["requests"]["cpu"] == 86  # 300m / 3.5 = 85.7m, rounded up
    assert after["app"]["limits"]["cpu"] == 300
    assert refusals == []


def test_a_resize_the_pod_limit_range_would_refuse_is_not_proposed():
    """A Pod item's ratio over the pod's totals: lowering the requests under the
    unchanged limits breaks it; no compliant resize exists, so nothing is proposed."""
    ranges = (None, LimitRangeItem(type="Pod", max_limit_request_ratio=Resources(2000)))
    pod = pod_with(
        ContainerSpec("app", requests=Resources(500, None), limits=Resources(800)),
    )
    before, after, refusals = resize_of(pod, rec(200, 64 * MI), REQUESTS_ONLY, ranges)
    assert after != before
    assert refusals == [
        "pod: cpu max limit to request ratio per Pod is 2, but provided ratio is "
        "4.000000"
    ]
