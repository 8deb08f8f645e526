"""Proportional limits (getProportionalResourceLimit) and requests + limits for a
container (recommendation_provider.go)."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from recommender.engine.limits import (
    MAX_INT64,
    ContainerResources,
    check_resources,
    is_valid_resources,
    proportional_limit,
    requests_and_limits_for_container,
)
from recommender.engine.resources import NO_RESOURCES, Resources

MI = 2**20
INT64_ANNOTATION = "failed to keep limit to request ratio; capping limit to int64"


# limit_and_request_scaling_test.go :: TestGetProportionalResourceLimit
@pytest.mark.parametrize(
    ("limit", "original_request", "new", "default", "expected", "annotation"),
    [
        (2000, 1000, 10000, None, 20000, None),
        (None, 1000, 10000, 2000, 20000, None),  # default limit instead of a limit
        (0, 1000, 10000, 2000, 20000, None),  # a zero limit also takes the default
        (
            None,
            1000,
            10000,
            None,
            None,
            "cpu: limit NOT set since originalLimit is nil or 0",
        ),
        (2000, None, 10000, None, 10000, None),  # no request: limit = new request
        (
            2000,
            1000,
            0,
            None,
            None,
            "cpu: limit NOT set since recommendedRequest is nil or 0",
        ),
        (
            2000,
            1000,
            None,
            None,
            None,
            "cpu: limit NOT set since recommendedRequest is nil or 0",
        ),
        (1000, 1000, 10000, None, 10000, None),  # limit == request
        (2000, 1500, 1000, None, 1333, None),  # 1.333 cores, floored in milli
        (
            10**13,
            1,
            10**13,
            None,
            MAX_INT64,
            f"cpu: {INT64_ANNOTATION}",
        ),  # 10G, 1m, 10G
    ],
)
def test_cpu_proportional_limit_matches_upstream(
    limit, original_request, new, default, expected, annotation
):
    assert proportional_limit("cpu", limit, original_request, new, default) == (
        expected,
        annotation,
    )


def test_memory_proportional_limit_floors_whole_bytes():
    assert proportional_limit("memory", 200, 150, 100, None) == (133, None)
    assert proportional_limit("memory", 1000 * MI, 100 * MI, 2**60, None) == (
        MAX_INT64,
        f"memory: {INT64_ANNOTATION}",
    )


def test_proportional_limit_rejects_bad_arguments():
    with pytest.raises(
        ValueError, match="resource must be 'cpu' or 'memory', not 'gpu'"
    ):
        proportional_limit("gpu", 1, 1, 1, None)
    with pytest.raises(ValueError, match="original_request must be between 0"):
        proportional_limit("cpu", 1, -1, 1, None)
    with pytest.raises(
        ValueError, match=r"new_request must be an int or None, not 1\.5"
    ):
        proportional_limit("cpu", 1, 1, 1.5, None)


def _container(requests=NO_RESOURCES, limits=NO_RESOURCES):
    return ContainerResources("container1", requests=requests, limits=limits)


# recommendation_provider_test.go :: TestUpdateResourceRequests
def test_limits_keep_the_double_limit_ratio():
    container = _container(Resources(1000, 100 * MI), Resources(2000, 200 * MI))
    new = requests_and_limits_for_container(container, Resources(2000, 200 * MI))
    assert new.requests == Resources(2000, 200 * MI)
    assert new.limits == Resources(4000, 400 * MI)
    assert new.annotations == ()


def test_limits_scale_one_to_ten_megabytes():
    container = _container(Resources(1000, 10**6), Resources(10_000, 10**7))
    new = requests_and_limits_for_container(container, Resources(2000, 2 * 10**6))
    assert new.limits == Resources(20_000, 2 * 10**7)


def test_requests_only_leaves_limits_untouched():
    container = _container(Resources(1000, 100 * MI), Resources(2000, 200 * MI))
    new = requests_and_limits_for_container(
        container, Resources(2000, 200 * MI), controlled_values="RequestsOnly"
    )
    assert new.requests == Resources(2000, 200 * MI)
    assert new.limits == Resources()


def test_limit_over_int64_is_capped_with_two_annotations():
    # Upstream uses a 1Ei target; 1Ei CPU overflows int64 millicores: use 2**60 m.
    container = _container(Resources(1000, 100 * MI), Resources(10_000, 1000 * MI))
    new = requests_and_limits_for_container(container, Resources(2**60, 2**60))
    assert new.limits == Resources(MAX_INT64, MAX_INT64)
    assert new.annotations == (
        f"cpu: {INT64_ANNOTATION}",
        f"memory: {INT64_ANNOTATION}",
    )


def test_limit_range_default_is_the_fallback_limit():
    container = _container(Resources(2000, 100 * MI))
    new = requests_and_limits_for_container(
        container, Resources(2000, 200 * MI), default_limit=Resources(2000, 100 * MI)
    )
    assert new.limits == Resources(2000, 200 * MI)


def test_limits_without_requests_follow_the_new_request():
    container = _container(limits=Resources(2000, 200 * MI))
    new = requests_and_limits_for_container(container, Resources(2000, 200 * MI))
    assert new.limits == Resources(2000, 200 * MI)


def test_no_limits_means_no_limits_and_no_annotation():
    new = requests_and_limits_for_container(_container(), Resources(2000, 200 * MI))
    assert new.limits == Resources()
    assert new.annotations == ()


def test_one_missing_limit_keeps_its_annotation():
    container = _container(Resources(1000, 100 * MI), Resources(cpu_millicores=2000))
    new = requests_and_limits_for_container(container, Resources(2000, 200 * MI))
    assert new.limits == Resources(cpu_millicores=4000)
    assert new.annotations == ("memory: limit NOT set since originalLimit is nil or 0",)


def test_requests_and_limits_rejects_unknown_controlled_values():
    with pytest.raises(ValueError, match="controlled_values must be one of"):
        requests_and_limits_for_container(
            _container(), Resources(), controlled_values="All"
        )
    with pytest.raises(ValueError, match=r"target.cpu_millicores"):
        requests_and_limits_for_container(_container(), Resources(cpu_millicores=-5))


positive = st.integers(min_value=1, max_value=10**9)


@given(positive, positive, positive)
def test_proportional_limit_keeps_the_ratio_within_rounding(limit, request, new):
    result, annotation = proportional_limit("memory", limit, request, new, None)
    assert annotation is None
    if request == limit:
        assert result == new
    else:
        # floor(limit * new / request): off by less than one unit from the exact ratio.
        assert result * request <= limit * new < (result + 1) * request


_AMOUNTS = st.one_of(
    st.none(),
    st.integers(min_value=-(2**64), max_value=2**64),
    st.booleans(),
    st.floats(allow_nan=False),
)


@given(cpu=_AMOUNTS, memory=_AMOUNTS)
def test_is_valid_resources_accepts_exactly_what_check_resources_accepts(cpu, memory):
    value = Resources(cpu, memory)
    try:
        check_resources("value", value)
    except ValueError:
        accepted = False
    else:
        accepted = True
    assert is_valid_resources(value) is accepted
    assert is_valid_resources((cpu, memory)) is False
