"""The CPU throttling rule (engine/throttling.py) and its profile fields."""

from __future__ import annotations

import pytest

from recommender.engine.profiles import PROFILES, get_profile
from recommender.engine.throttling import boost_cpu, throttling_ratio

BOOSTING = get_profile("vpa").with_overrides(
    throttling_boost=0.3, throttling_threshold=0.2
)


def test_every_named_profile_has_the_rule_off():
    assert all(p.throttling_boost == 0 for p in PROFILES.values())
    assert (
        boost_cpu(
            profile=PROFILES["vpa"],
            target_millicores=500,
            upper_millicores=900,
            throttled_periods=590.0,
            periods=600.0,
        )
        is None
    )


def test_a_ratio_above_the_threshold_raises_the_target_by_the_boost_truncated():
    boost = boost_cpu(
        profile=BOOSTING,
        target_millicores=333,
        upper_millicores=400,
        throttled_periods=300.0,
        periods=1000.0,
    )
    assert boost is not None
    # 333 + trunc(333 * 0.3) = 333 + 99; the upper bound is lifted to hold it.
    assert (boost.target_after, boost.upper_after) == (432, 432)
    assert boost.ratio == 0.3
    assert boost.note == (
        "CPU target raised 30% because the container was throttled in 30% of periods"
        " (threshold 20%)"
    )
    assert boost.to_dict()["note"] == boost.note


def test_the_upper_bound_is_kept_when_it_already_holds_the_new_target():
    boost = boost_cpu(
        profile=BOOSTING,
        target_millicores=100,
        upper_millicores=500,
        throttled_periods=1.0,
        periods=2.0,
    )
    assert boost is not None
    assert (boost.target_after, boost.upper_before, boost.upper_after) == (
        130,
        500,
        500,
    )


@pytest.mark.parametrize(
    ("throttled", "periods"),
    [(200.0, 1000.0), (199.0, 1000.0), (0.0, 0.0), (5.0, float("nan"))],
)
def test_no_boost_at_or_below_the_threshold_or_without_periods(throttled, periods):
    assert (
        boost_cpu(
            profile=BOOSTING,
            target_millicores=100,
            upper_millicores=200,
            throttled_periods=throttled,
            periods=periods,
        )
        is None
    )


def test_ratio_is_clamped_to_one_and_needs_periods():
    assert throttling_ratio(12.0, 10.0) == 1.0
    assert throttling_ratio(1.0, 0.0) is None
    assert throttling_ratio(float("inf"), 10.0) is None


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("throttling_boost", -0.1),
        ("throttling_boost", float("inf")),
        ("throttling_threshold", 1.0),
        ("throttling_threshold", -0.01),
        ("memory_margin_spread", -1.0),
        ("memory_margin_max", float("nan")),
    ],
)
def test_bad_values_are_named(field, value):
    with pytest.raises(ValueError, match=f"^{field}:"):
        get_profile("vpa").with_overrides(**{field: value})


def test_adaptive_margin_base_above_its_max_is_refused():
    with pytest.raises(ValueError, match=r"^memory_margin_base:"):
        get_profile("vpa").with_overrides(memory_margin_base=0.5, memory_margin_max=0.2)
