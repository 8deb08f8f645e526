"""engine.hpa: the HPA target that scales at the same usage after a request change."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from recommender.engine.hpa import (
    AVERAGE_VALUE,
    MAX_ROUNDING_ERROR,
    UTILIZATION,
    HpaTarget,
    adjusted_target,
    desired_replicas,
)

MIB = 2**20


def test_lower_request_raises_the_utilization_target_in_proportion() -> None:
    target = HpaTarget(UTILIZATION, average_utilization=70)

    adjusted = adjusted_target(
        resource="cpu", target=target, old_request=500, new_request=250
    )

    assert adjusted == HpaTarget(UTILIZATION, average_utilization=140)


@pytest.mark.parametrize(
    ("percent", "old", "new"),
    list(
        itertools.product(
            (10, 50, 70, 80, 95, 150), (100, 250, 1000, 3500), (90, 173, 600, 2400)
        )
    ),
)
def test_the_adjusted_hpa_scales_out_at_the_same_usage_per_pod(
    percent: int, old: int, new: int
) -> None:
    before = HpaTarget(UTILIZATION, average_utilization=percent)

    after = adjusted_target(
        resource="cpu", target=before, old_request=old, new_request=new
    )

    # The HPA scales out when usage / request x 100 > averageUtilization: the usage
    # per pod at which that happens is the same, to the rounding of a whole percent.
    then, now = before.trigger_amount(old), after.trigger_amount(new)
    if after.type == UTILIZATION:
        assert abs(now - then) <= min(0.5 * new / 100, MAX_ROUNDING_ERROR * then)
    else:
        assert after.average_value == round(then)


def test_a_target_below_one_percent_becomes_the_equal_average_value() -> None:
    # 2 % of 100Mi, the request raised to 1Gi: 0.195 %, which rounds to 0.
    target = HpaTarget(UTILIZATION, average_utilization=2)

    adjusted = adjusted_target(
        resource="memory", target=target, old_request=100 * MIB, new_request=1024 * MIB
    )

    assert adjusted.type == AVERAGE_VALUE
    assert adjusted.average_value == round(0.02 * 100 * MIB)


def test_a_whole_percent_too_coarse_for_the_trigger_becomes_an_average_value() -> None:
    # 3 % x 300 / 700 = 1.29 %: 1 % would scale out 22 % early.
    target = HpaTarget(UTILIZATION, average_utilization=3)

    adjusted = adjusted_target(
        resource="cpu", target=target, old_request=300, new_request=700
    )

    assert adjusted == HpaTarget(AVERAGE_VALUE, average_value=9)


def test_an_average_value_target_does_not_depend_on_the_request() -> None:
    target = HpaTarget(AVERAGE_VALUE, average_value=400 * MIB)

    assert (
        adjusted_target(
            resource="memory", target=target, old_request=MIB, new_request=2 * MIB
        )
        is target
    )


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"resource": "gpu"}, "resource"),
        ({"old_request": 0}, "old_request"),
        ({"new_request": -5}, "new_request"),
        ({"new_request": 1.5}, "new_request"),
        ({"target": HpaTarget(UTILIZATION, average_utilization=0)}, "target"),
        ({"target": HpaTarget("Value")}, "target"),
    ],
)
def test_bad_input_names_the_argument(kwargs: dict, named: str) -> None:
    arguments = {
        "resource": "cpu",
        "target": HpaTarget(UTILIZATION, average_utilization=70),
        "old_request": 500,
        "new_request": 250,
        **kwargs,
    }
    with pytest.raises(ValueError, match=named):
        adjusted_target(**arguments)


def _desired(replicas, usage, request, target=100, lo=1, hi=None):
    return desired_replicas(
        replicas=np.array(replicas, dtype=float),
        usage=np.array(usage, dtype=float),
        request=np.array(request, dtype=float),
        target_utilization=target,
        min_replicas=lo,
        max_replicas=hi,
    ).tolist()


def test_desired_replicas_follow_upstreams_formula_by_hand() -> None:
    # 4 pods using 600m in all at 100m each: 150 % against a 50 % target, ratio 3,
    # ceil(4 x 3) = 12; a max of 10 caps it.
    assert _desired([4], [600], [100], target=50) == [12.0]
    assert _desired([4], [600], [100], target=50, hi=10) == [10.0]
    # 105 % against 100 %: within the 0.1 tolerance, the 4 stay.
    assert _desired([4], [420], [100]) == [4.0]
    # 111 %: ceil(4 x 1.11) = ceil(4.44) = 5.
    assert _desired([4], [444], [100]) == [5.0]
    # 50 %: ceil(4 x 0.5) = 2; a min of 3 holds it at 3.
    assert _desired([4], [200], [100]) == [2.0]
    assert _desired([4], [200], [100], lo=3) == [3.0]
    # 3 pods using 450m at 100m: ratio 1.5, 4.5 -> 5. One pod using 490m at 100m
    # against 70 %: 490 / 70 = 7 exactly (float noise must not make it 8).
    assert _desired([3], [450], [100]) == [5.0]
    assert _desired([1], [490], [100], target=70) == [7.0]
    # The same usage at a halved request doubles the utilization: 2 pods -> 4.
    assert _desired([2, 2], [200, 200], [100, 50]) == [2.0, 4.0]
    # No pods, or no request: unknown.
    assert all(math.isnan(v) for v in _desired([0, 2], [100, 100], [100, np.nan]))
