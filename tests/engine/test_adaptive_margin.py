"""The adaptive memory margin (memory_margin_spread > 0): steady peaks get the base
margin, varying peaks up to the largest one; off (vpa) it is upstream's margin."""

from __future__ import annotations

import math

import numpy as np

from recommender.engine.estimator import recommend
from recommender.engine.profiles import get_profile
from tests.engine.helpers import DAY, MI, constant_grid, new_set

GI = 1024 * MI


def _two_containers(profile):
    """Row 0: the same 1 GiB peak every day; row 1: 1 GiB, then 3 GiB on day 4."""
    aggs = new_set(2, profile)
    t0 = 1_700_000_000.0 // DAY * DAY
    for day in range(4):
        constant_grid(aggs, 0, "a", t0 + day * DAY, 60, cpu=0.5, mem=1 * GI)
        mem = 3 * GI if day == 3 else 1 * GI
        constant_grid(aggs, 1, "b", t0 + day * DAY, 60, cpu=0.5, mem=mem)
    return aggs


def _targets(profile):
    aggs = _two_containers(profile)
    recs = recommend(aggs, rows=[0, 1], profile=profile, containers_in_pod=[1, 1])
    raw = aggs.memory.percentiles(np.array([0, 1]), [profile.memory_target_percentile])
    bases = [math.trunc(float(v)) for v in raw[0]]
    return [r.target.memory_bytes for r in recs], bases


def test_steady_peaks_get_the_base_margin_and_varying_ones_the_largest():
    profile = get_profile("adaptive-margin")
    assert (profile.memory_margin_base, profile.memory_margin_max) == (0.125, 0.25)
    targets, bases = _targets(profile)
    # Row 0: highest peak = median peak, spread 0: +12.5 %.
    assert targets[0] == bases[0] + math.trunc(bases[0] * 0.125)
    # Row 1: the highest peak is about 3x the median, spread about 2:
    # 0.125 + 0.25 * 2 is capped at 0.25.
    assert targets[1] == bases[1] + math.trunc(bases[1] * 0.25)


def test_a_spread_below_the_cap_is_scaled():
    profile = get_profile("adaptive-margin").with_overrides(memory_margin_max=5.0)
    aggs = _two_containers(profile)
    peak, median, p = aggs.memory.percentiles(
        np.array([1]), [1.0, 0.5, profile.memory_target_percentile]
    )
    spread = float(peak[0]) / float(median[0]) - 1
    assert 1.5 < spread < 2.5
    (rec,) = recommend(aggs, rows=[1], profile=profile, containers_in_pod=[1])
    base = math.trunc(float(p[0]))
    margin = 0.125 + 0.25 * spread
    assert rec.target.memory_bytes == base + math.trunc(base * margin)


def test_off_it_is_upstreams_margin_and_cpu_never_changes():
    vpa = get_profile("vpa")
    assert vpa.memory_margin_spread == 0
    targets, bases = _targets(vpa)
    assert targets == [b + math.trunc(b * 0.15) for b in bases]
    adaptive = get_profile("adaptive-margin")
    cpu = [
        r.target.cpu_millicores
        for r in recommend(
            _two_containers(vpa), rows=[0, 1], profile=vpa, containers_in_pod=[1, 1]
        )
    ]
    cpu_adaptive = [
        r.target.cpu_millicores
        for r in recommend(
            _two_containers(adaptive),
            rows=[0, 1],
            profile=adaptive,
            containers_in_pod=[1, 1],
        )
    ]
    assert cpu == cpu_adaptive
