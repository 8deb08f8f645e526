"""The smallest memory margin in bytes (memory_margin_min_bytes > 0) and the
``headroom`` profile; off (every other profile) it is upstream's margin."""

from __future__ import annotations

import math

import numpy as np
import pytest

from recommender.engine.estimator import recommend
from recommender.engine.profiles import PROFILES, get_profile
from tests.engine.helpers import DAY, MI, constant_grid, new_set


def _bucket_upper_edge(value: float) -> float:
    """Upstream's memory histogram by hand: buckets start at 1e7 * (1.05**i - 1) / 0.05
    bytes; a percentile reads the upper edge of the bucket that holds the value."""
    i = 0
    while 1e7 * (1.05 ** (i + 1) - 1) / 0.05 <= value:
        i += 1
    return 1e7 * (1.05 ** (i + 1) - 1) / 0.05


def _targets(profile, peaks):
    """Three days of one constant memory peak per row; the memory targets."""
    aggs = new_set(len(peaks), profile)
    t0 = 1_700_000_000.0 // DAY * DAY
    for row, peak in enumerate(peaks):
        for day in range(3):
            constant_grid(aggs, row, "p", t0 + day * DAY, 60, cpu=0.5, mem=peak)
    recs = recommend(
        aggs,
        rows=range(len(peaks)),
        profile=profile,
        containers_in_pod=[1] * len(peaks),
    )
    return [r.target.memory_bytes for r in recs]


def test_only_headroom_sets_a_margin_floor_and_vpa_stays_upstream():
    assert get_profile("vpa").memory_margin_min_bytes == 0
    assert get_profile("vpa").pod_min_memory_bytes == 250 * MI
    others = {n for n, p in PROFILES.items() if p.memory_margin_min_bytes}
    assert others == {"headroom"}
    h = get_profile("headroom")
    assert (h.memory_margin_min_bytes, h.pod_min_memory_bytes) == (64 * MI, 128 * MI)
    assert (h.memory_target_percentile, h.memory_half_life_s) == (0.8, 4 * DAY)
    assert h.margin_fraction == 0.125


@pytest.mark.parametrize(
    "peak_mib",
    [40, 100, 300, 480, 500, 2048],
)
def test_the_margin_is_the_larger_of_the_fraction_and_the_floor(peak_mib):
    profile = get_profile("headroom")
    (target,) = _targets(profile, [peak_mib * MI])
    base = math.trunc(_bucket_upper_edge(peak_mib * MI))
    expected = max(base + max(math.trunc(base * 0.125), 64 * MI), 128 * MI)
    assert target == expected
    # The three regimes, by hand: the pod minimum, the 64 MiB floor, 12.5 %.
    regime = (
        "pod minimum"
        if expected == 128 * MI
        else "floor"
        if expected == base + 64 * MI
        else "fraction"
    )
    assert (
        regime
        == {
            40: "pod minimum",
            100: "floor",
            300: "floor",
            480: "floor",
            500: "fraction",
            2048: "fraction",
        }[peak_mib]
    )


def test_the_floor_applies_to_both_bounds_and_not_to_cpu():
    floor = get_profile("vpa").with_overrides(memory_margin_min_bytes=64 * MI)
    vpa = get_profile("vpa")
    aggs = new_set(1, vpa)
    constant_grid(
        aggs, 0, "p", 1_700_000_000.0 // DAY * DAY, 600, cpu=0.5, mem=300 * MI
    )
    (plain,) = recommend(aggs, rows=[0], profile=vpa, containers_in_pod=[1])
    (floored,) = recommend(aggs, rows=[0], profile=floor, containers_in_pod=[1])
    assert floored.target.cpu_millicores == plain.target.cpu_millicores
    assert floored.upper_bound.cpu_millicores == plain.upper_bound.cpu_millicores
    chain = floored.explanation.resources["memory"]
    for bound in (chain.target, chain.lower_bound, chain.upper_bound):
        assert bound.with_margin == bound.base + 64 * MI
    # 15 % of about 300 MiB is less than 64 MiB: every memory value is higher.
    assert floored.target.memory_bytes > plain.target.memory_bytes
    assert floored.lower_bound.memory_bytes > plain.lower_bound.memory_bytes
    assert floored.upper_bound.memory_bytes > plain.upper_bound.memory_bytes


@pytest.mark.parametrize("bad", [-1, 1.5, True, float("nan"), "64Mi"])
def test_a_bad_floor_is_refused_naming_the_field(bad):
    with pytest.raises(ValueError, match="memory_margin_min_bytes"):
        get_profile("vpa").with_overrides(memory_margin_min_bytes=bad)


def test_the_floor_reads_no_more_percentiles():
    # Same histogram read as upstream: the floor needs no other state.
    profile = get_profile("headroom")
    aggs = new_set(1, profile)
    constant_grid(aggs, 0, "p", 1_700_000_000.0 // DAY * DAY, 60, cpu=0.5, mem=100 * MI)
    (rec,) = recommend(aggs, rows=[0], profile=profile, containers_in_pod=[1])
    raw = aggs.memory.percentiles(np.array([0]), [0.8])[0, 0]
    assert rec.explanation.resources["memory"].target.raw == raw
