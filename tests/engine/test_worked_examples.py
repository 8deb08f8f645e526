"""Worked examples of upstream's recommender model with default flags and one container
(derived, not upstream tests): the whole table; constant usage's target."""

import pytest

from recommender.engine.estimator import recommend
from recommender.engine.profiles import get_profile

from .helpers import MI, constant_grid, new_set, oom

T0 = 1_700_000_000.0


@pytest.mark.parametrize(
    ("samples", "oom_request", "target", "lower", "upper", "conf"),
    [
        (8 * 1440, None, (587, 628694953), (586, 628537795), (660, 707288644), 7.9993),
        (60, None, (587, 628694953), (559, 599094159), (14913, 15973114144), 0.04097),
        (1, None, (587, 628694953), (25, 262144000), (10**14, 10**14), 0.0),
        (
            60,
            600 * MI,
            (587, 920733364),
            (559, 877382550),
            (14913, 23392869705),
            0.04097,
        ),
    ],
)
def test_worked_example(samples, oom_request, target, lower, upper, conf):
    aggs = new_set()
    constant_grid(aggs, 0, "pod", T0, samples, cpu=0.5, mem=500 * MI)
    if oom_request is not None:
        oom(aggs, 0, "pod", T0 + 60.0 * (samples - 1), oom_request)
    rec = recommend(aggs, rows=[0], profile=get_profile("vpa"), containers_in_pod=[1])[
        0
    ]
    assert (rec.target.cpu_millicores, rec.target.memory_bytes) == target
    assert (rec.lower_bound.cpu_millicores, rec.lower_bound.memory_bytes) == lower
    assert (rec.upper_bound.cpu_millicores, rec.upper_bound.memory_bytes) == upper
    assert rec.explanation.resources["cpu"].confidence == pytest.approx(conf, abs=5e-5)


@pytest.mark.parametrize(
    ("millicores", "target"),
    [
        (10, 23),
        (50, 63),
        (100, 126),
        (250, 296),
        (1000, 1168),
        (2000, 2406),
        (4000, 4742),
    ],
)
def test_cpu_target_for_constant_usage(millicores, target):
    aggs = new_set()
    constant_grid(aggs, 0, "pod", T0, 60, cpu=millicores / 1000, mem=500 * MI)
    rec = recommend(aggs, rows=[0], profile=get_profile("vpa"), containers_in_pod=[1])[
        0
    ]
    # The table is margin(base), before the pod minimum (25m) floors it.
    assert rec.explanation.resources["cpu"].target.with_margin == target
    assert rec.target.cpu_millicores == max(target, 25)


@pytest.mark.parametrize(
    ("mib", "target"),
    [
        (64, 78221997),
        (128, 163378051),
        (256, 323522422),
        (1024, 1238659775),
        (4096, 4992073454),
    ],
)
def test_memory_target_for_constant_usage(mib, target):
    aggs = new_set()
    constant_grid(aggs, 0, "pod", T0, 60, cpu=0.5, mem=mib * MI)
    rec = recommend(aggs, rows=[0], profile=get_profile("vpa"), containers_in_pod=[1])[
        0
    ]
    assert rec.explanation.resources["memory"].target.with_margin == target
    assert rec.target.memory_bytes == max(target, 262144000)


def test_peak_memory_profile_uses_highest_peak():
    aggs = new_set()
    constant_grid(aggs, 0, "pod", T0, 60, cpu=0.5, mem=500 * MI)
    rec = recommend(
        aggs, rows=[0], profile=get_profile("peak-memory"), containers_in_pod=[1]
    )[0]
    # One peak: the highest bucket edge is the same as the p90 edge, so the target
    # matches.
    assert rec.target.memory_bytes == 628694953
    assert rec.explanation.resources["memory"].target.source == "peak"
