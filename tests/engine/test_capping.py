"""Capping to VPA policies and LimitRanges (ApplyVPAPolicy and
cappingRecommendationProcessor.Apply), upstream capping_test.go."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from recommender.engine.capping import (
    Cap,
    CappedRecommendation,
    ContainerPolicy,
    ContainerResources,
    LimitRangeItem,
    apply_vpa_policy,
    cap_for_pod,
    combine_limit_ranges,
    select_container_policy,
)
from recommender.engine.resources import NO_RESOURCES, Resources

MI = 2**20
GI = 2**30


def _rec(target, lower=NO_RESOURCES, upper=NO_RESOURCES, uncapped=None):
    return CappedRecommendation(
        target=target,
        lower_bound=lower,
        upper_bound=upper,
        uncapped_target=target if uncapped is None else uncapped,
    )


# TestApplyVPAPolicy (utils/vpa/capping_test.go), its table.
TABLE_REC = _rec(Resources(42, 42 * MI), Resources(31, 31 * MI), Resources(53, 53 * MI))


def test_vpa_min_allowed_raises_target_and_lower_not_uncapped():
    policy = ContainerPolicy("c", min_allowed=Resources(50, 50 * MI))
    capped = apply_vpa_policy(TABLE_REC, policy)
    assert capped.target == Resources(50, 50 * MI)
    assert capped.lower_bound == Resources(50, 50 * MI)
    assert capped.upper_bound == Resources(53, 53 * MI)
    assert capped.uncapped_target == Resources(42, 42 * MI)
    assert (
        Cap("cpu", "target", "cpu capped to minAllowed", 42, 50, False) in capped.caps
    )


def test_vpa_max_allowed_lowers_target_and_upper():
    policy = ContainerPolicy("c", max_allowed=Resources(40, 40 * MI))
    capped = apply_vpa_policy(TABLE_REC, policy)
    assert capped.target == Resources(40, 40 * MI)
    assert capped.lower_bound == Resources(31, 31 * MI)
    assert capped.upper_bound == Resources(40, 40 * MI)
    assert capped.uncapped_target == Resources(42, 42 * MI)


def test_global_max_applies_without_a_policy():
    capped = apply_vpa_policy(TABLE_REC, None, global_max=Resources(40, 40 * MI))
    assert capped.target == Resources(40, 40 * MI)
    assert capped.lower_bound == Resources(31, 31 * MI)
    assert capped.upper_bound == Resources(40, 40 * MI)
    assert capped.uncapped_target == Resources(42, 42 * MI)


def test_min_allowed_with_global_max():
    policy = ContainerPolicy("c", min_allowed=Resources(35, 35 * MI))
    capped = apply_vpa_policy(TABLE_REC, policy, global_max=Resources(50, 50 * MI))
    assert capped.target == Resources(42, 42 * MI)
    assert capped.lower_bound == Resources(35, 35 * MI)
    assert capped.upper_bound == Resources(50, 50 * MI)


def test_vpa_max_beats_global_max_where_both_exist():
    policy = ContainerPolicy("c", max_allowed=Resources(cpu_millicores=40))
    capped = apply_vpa_policy(TABLE_REC, policy, global_max=Resources(30, 30 * MI))
    assert capped.target == Resources(40, 30 * MI)


def test_zero_or_missing_bounds_are_ignored():
    policy = ContainerPolicy(
        "c", min_allowed=Resources(0, None), max_allowed=Resources(0)
    )
    capped = apply_vpa_policy(TABLE_REC, policy)
    assert capped.target == TABLE_REC.target
    assert capped.caps == ()


def test_absent_resources_stay_absent():
    rec = _rec(Resources(memory_bytes=10))
    policy = ContainerPolicy("c", min_allowed=Resources(100, 100))
    assert apply_vpa_policy(rec, policy).target == Resources(memory_bytes=100)


def test_exact_name_beats_default_policy_without_merging():
    star = ContainerPolicy("*", min_allowed=Resources(100, 100))
    named = ContainerPolicy("app", max_allowed=Resources(10))
    assert select_container_policy([star, named], "app") is named
    assert select_container_policy([star, named], "sidecar") is star
    assert select_container_policy([named], "sidecar") is None


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (
            {"min_allowed": Resources(500), "max_allowed": Resources(400)},
            "max_allowed cpu",
        ),
        ({"mode": "Auto!"}, "mode must be one of"),
        ({"controlled_values": "Everything"}, "controlled_values must be one of"),
        (
            {"mode": "Off", "controlled_values": "RequestsAndLimits"},
            "scaling mode is off",
        ),
        ({"controlled_resources": ("cpu", "gpu")}, "controlled_resources"),
        ({"min_allowed": Resources(-1)}, "min_allowed.cpu_millicores"),
        ({"container_name": ""}, "container_name"),
    ],
)
def test_bad_container_policy_raises_naming_the_field(fields, message):
    with pytest.raises(ValueError, match=message):
        ContainerPolicy(**{"container_name": "c", **fields})


def test_mode_off_without_explicit_controlled_values_is_valid():
    policy = ContainerPolicy("c", mode="Off")
    assert policy.effective_controlled_values == "RequestsAndLimits"
    assert ContainerPolicy("c", mode="Off", controlled_values="RequestsOnly")


# TestRecommendationToLimitCapping (#47): limits cpu 30 / memory 70000.
LIMIT_REC = _rec(Resources(20_000, 80_000), upper=Resources(100_000, 90_000))


def test_requests_only_caps_to_the_container_limit():
    container = ContainerResources(
        "ctr", requests=NO_RESOURCES, limits=Resources(30_000, 70_000)
    )
    policy = ContainerPolicy("ctr", controlled_values="RequestsOnly")
    capped = cap_for_pod({"ctr": LIMIT_REC}, [container], policies=[policy])["ctr"]
    assert capped.target == Resources(20_000, 70_000)
    assert capped.upper_bound == Resources(30_000, 70_000)
    assert capped.annotations() == ["memory capped to container limit"]


def test_requests_and_limits_does_not_cap_to_the_container_limit():
    container = ContainerResources("ctr", limits=Resources(30_000, 70_000))
    policy = ContainerPolicy("ctr", controlled_values="RequestsAndLimits")
    capped = cap_for_pod({"ctr": LIMIT_REC}, [container], policies=[policy])["ctr"]
    assert capped.target == Resources(20_000, 80_000)
    assert capped.upper_bound == Resources(100_000, 90_000)
    assert capped.annotations() == []


def test_requests_only_uses_the_limits_it_is_given_from_status():
    # The caller picks status limits (2.5 cores / 60000) over the spec's.
    container = ContainerResources("ctr", limits=Resources(2500, 60_000))
    policy = ContainerPolicy("ctr", controlled_values="RequestsOnly")
    capped = cap_for_pod({"ctr": LIMIT_REC}, [container], policies=[policy])["ctr"]
    assert capped.target == Resources(2500, 60_000)
    assert capped.upper_bound == Resources(2500, 60_000)


def test_recommendation_capped_to_min_max_policy():
    # TestRecommendationCappedToMinMaxPolicy (#48)
    rec = _rec(Resources(300, 50_000), Resources(200, 43_000), Resources(500, 55_000))
    policy = ContainerPolicy(
        "ctr", min_allowed=Resources(400, 40_000), max_allowed=Resources(450, 45_000)
    )
    capped = cap_for_pod({"ctr": rec}, [ContainerResources("ctr")], policies=[policy])[
        "ctr"
    ]
    assert capped.target == Resources(400, 45_000)
    assert capped.lower_bound == Resources(400, 43_000)
    assert capped.upper_bound == Resources(450, 45_000)
    assert capped.annotations() == [
        "cpu capped to minAllowed",
        "memory capped to maxAllowed",
    ]


def test_recommendations_for_containers_not_in_the_pod_are_dropped():
    rec = _rec(Resources(300, 300))
    result = cap_for_pod(
        {"gone": rec, "ctr": rec}, [ContainerResources("ctr")], policies=[]
    )
    assert list(result) == ["ctr"]


def test_no_recommendation_and_no_policy_gives_nothing():
    assert cap_for_pod({}, [ContainerResources("ctr", requests=Resources(1))]) == {}


def test_container_limit_range_caps_to_max_and_min():
    # TestApplyCapsToLimitRange (#50)
    limit_range = LimitRangeItem(
        "Container",
        max=Resources(cpu_millicores=1000),
        min=Resources(memory_bytes=500 * 10**6),
    )
    container = ContainerResources(
        "ctr", requests=Resources(1000, 10**9), limits=Resources(1000, 10**9)
    )
    rec = _rec(Resources(2000, 200 * 10**6))
    capped = cap_for_pod({"ctr": rec}, [container], container_limit_range=limit_range)[
        "ctr"
    ]
    assert capped.target == Resources(1000, 500_000_000)
    assert capped.annotations() == [
        "cpu capped to fit Max in container LimitRange",
        "memory capped to fit Min in container LimitRange",
    ]


def _pod(resources_by_name):
    return [
        ContainerResources(name, requests=res, limits=res)
        for name, res in resources_by_name.items()
    ]


def test_pod_limit_range_max_splits_cpu_proportionally():
    # TestApplyPodLimitRange (#50): req = lim = 1 cpu each, pod max 1 cpu.
    pod = _pod(
        {"a": Resources(cpu_millicores=1000), "b": Resources(cpu_millicores=1000)}
    )
    recs = {n: _rec(Resources(cpu_millicores=1000)) for n in ("a", "b")}
    lr = LimitRangeItem("Pod", max=Resources(cpu_millicores=1000))
    result = cap_for_pod(recs, pod, pod_limit_range=lr)
    assert [r.target for r in result.values()] == [Resources(cpu_millicores=500)] * 2


def test_pod_limit_range_min_raises_memory_proportionally():
    pod = _pod({"a": Resources(memory_bytes=1), "b": Resources(memory_bytes=1)})
    recs = {n: _rec(Resources(memory_bytes=10**9)) for n in ("a", "b")}
    lr = LimitRangeItem("Pod", min=Resources(memory_bytes=4 * 10**9))
    result = cap_for_pod(recs, pod, pod_limit_range=lr)
    assert [r.target for r in result.values()] == [
        Resources(memory_bytes=2 * 10**9)
    ] * 2


@pytest.mark.parametrize(
    ("limit_range", "expected"),
    [
        # TestCapPodMemoryWithUnderByteSplit (#50): the floor is visible.
        (LimitRangeItem("Pod", max=Resources(memory_bytes=GI)), [357913941, 715827882]),
        (
            LimitRangeItem("Pod", min=Resources(memory_bytes=4 * GI)),
            [1431655765, 2863311530],
        ),
    ],
)
def test_pod_limit_range_memory_split_floors_bytes(limit_range, expected):
    pod = _pod(
        {
            "a": Resources(memory_bytes=50 * 10**6),
            "b": Resources(memory_bytes=50 * 10**6),
        }
    )
    recs = {
        "a": _rec(Resources(memory_bytes=GI)),
        "b": _rec(Resources(memory_bytes=2 * GI)),
    }
    result = cap_for_pod(recs, pod, pod_limit_range=limit_range)
    assert [r.target.memory_bytes for r in result.values()] == expected


def test_pod_limit_range_min_rounds_cpu_up_in_millicores():
    pod = _pod({n: Resources(cpu_millicores=100) for n in ("a", "b", "c")})
    recs = {n: _rec(Resources(cpu_millicores=100)) for n in ("a", "b", "c")}
    lr = LimitRangeItem("Pod", min=Resources(cpu_millicores=1000))
    result = cap_for_pod(recs, pod, pod_limit_range=lr)
    assert [r.target.cpu_millicores for r in result.values()] == [334, 334, 334]


def test_pod_limit_range_counts_containers_without_recommendation():
    # "b" has no recommendation: its requests join the sums and come back as a target.
    pod = _pod(
        {"a": Resources(cpu_millicores=1000), "b": Resources(cpu_millicores=1000)}
    )
    lr = LimitRangeItem("Pod", max=Resources(cpu_millicores=1000))
    result = cap_for_pod(
        {"a": _rec(Resources(cpu_millicores=1000))}, pod, pod_limit_range=lr
    )
    assert result["a"].target == Resources(cpu_millicores=500)
    assert result["b"].target == Resources(cpu_millicores=500)


def test_combine_limit_ranges_takes_lowest_max_highest_min_last_default():
    items = [
        LimitRangeItem(
            "Container", max=Resources(2000, 4 * GI), default=Resources(500)
        ),
        LimitRangeItem("Container", max=Resources(1000), min=Resources(10, 10)),
        LimitRangeItem(
            "Container", min=Resources(20), default=Resources(memory_bytes=GI)
        ),
        LimitRangeItem("Pod", max=Resources(1)),
    ]
    combined = combine_limit_ranges(items, "Container")
    assert combined == LimitRangeItem(
        "Container",
        max=Resources(1000, 4 * GI),
        min=Resources(20, 10),
        default=Resources(memory_bytes=GI),
    )
    assert combine_limit_ranges(items[:3], "Pod") is None


def test_bad_limit_range_inputs_raise():
    with pytest.raises(ValueError, match="type must be one of"):
        LimitRangeItem("Node")
    with pytest.raises(ValueError, match="pod_limit_range"):
        cap_for_pod({}, [], pod_limit_range=LimitRangeItem("Container"))
    with pytest.raises(ValueError, match="recommendations must be a mapping"):
        cap_for_pod([], [])


amount = st.integers(min_value=0, max_value=10**15)
maybe = st.none() | amount


@given(maybe, maybe, maybe, maybe, maybe, maybe)
def test_policy_capping_stays_within_min_and_max(
    cpu, mem, min_cpu, max_cpu, min_mem, max_mem
):
    if None not in (min_cpu, max_cpu) and min_cpu > max_cpu:
        min_cpu, max_cpu = max_cpu, min_cpu
    if None not in (min_mem, max_mem) and min_mem > max_mem:
        min_mem, max_mem = max_mem, min_mem
    policy = ContainerPolicy(
        "c",
        min_allowed=Resources(min_cpu, min_mem),
        max_allowed=Resources(max_cpu, max_mem),
    )
    rec = _rec(Resources(cpu, mem))
    for capped in (
        apply_vpa_policy(rec, policy),
        cap_for_pod({"c": rec}, [ContainerResources("c")], policies=[policy])["c"],
    ):
        for value, low, high in (
            (capped.target.cpu_millicores, min_cpu, max_cpu),
            (capped.target.memory_bytes, min_mem, max_mem),
        ):
            if value is None:
                continue
            if low:
                assert value >= low
            if high:
                assert value <= high
    assert capped.target.cpu_millicores is None or cpu is not None


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (_rec(Resources(42), lower=Resources(-1)), r"rec\.lower\.cpu_millicores"),
        (_rec(Resources(42), upper=Resources(1, 1.5)), r"rec\.upper\.memory_bytes"),
        (_rec(Resources(42), uncapped=Resources(True)), r"rec\.uncapped_target\.cpu"),
        (_rec("42m"), r"rec\.target must be a Resources"),
    ],
)
def test_a_bad_bound_is_refused_naming_it(bad, message):
    with pytest.raises(ValueError, match=message):
        apply_vpa_policy(bad, None)
