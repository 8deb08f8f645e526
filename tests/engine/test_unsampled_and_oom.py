"""No samples, no recommendation for that resource (the reason in the
explanation); how OOM kills bear on a memory target (``oom_effect``)."""

from __future__ import annotations

import numpy as np
import pytest

from recommender.engine.estimator import recommend
from recommender.engine.explanation import (
    NO_CPU_SAMPLES,
    NO_MEMORY_SAMPLES,
    NO_MEMORY_UPPER_BOUND,
)
from recommender.engine.oom import (
    OOM_ABOVE_TARGET,
    OOM_BELOW_TARGET,
    OOM_SETS_TARGET,
    oom_effect,
    oom_sample,
)
from recommender.engine.profiles import get_profile
from recommender.engine.resources import MAX_RESOURCE_AMOUNT

from .helpers import DAY, MI, constant_grid, new_set, oom

PROFILE = get_profile("vpa")
BOUNDS = ("target", "lower_bound", "upper_bound")


def three_rows():
    """Row 0: CPU and memory; row 1: memory only; row 2: CPU only (3 days)."""
    aggs = new_set(3)
    count = 3 * 1440
    constant_grid(aggs, 0, "a", 0.0, count, cpu=0.5, mem=500 * MI)
    constant_grid(aggs, 1, "b", 0.0, count, cpu=float("nan"), mem=200 * MI)
    constant_grid(aggs, 2, "c", 0.0, count, cpu=0.25, mem=float("nan"))
    return aggs


def both(aggs):
    kwargs = {"rows": [0, 1, 2], "profile": PROFILE, "containers_in_pod": [3, 3, 3]}
    return recommend(aggs, **kwargs), recommend(aggs, omit_unsampled=True, **kwargs)


def test_rows_with_samples_keep_upstreams_numbers():
    upstream, omitting = both(three_rows())
    assert omitting[0].target == upstream[0].target
    assert omitting[0].lower_bound == upstream[0].lower_bound
    assert omitting[0].upper_bound == upstream[0].upper_bound
    assert omitting[0].explanation_dict()["omitted"] == []
    # The arrays stay upstream's; the omitted values are listed separately.
    for resource in ("cpu", "memory"):
        for bound in BOUNDS:
            assert np.array_equal(
                omitting.values(resource, bound), upstream.values(resource, bound)
            )


def test_memory_without_cpu_samples_has_no_cpu_and_no_upper_bound():
    upstream, omitting = both(three_rows())
    # Upstream: CPU at the pod minimum share, memory upper bound at the 1e14 clamp.
    assert upstream[1].upper_bound.memory_bytes == MAX_RESOURCE_AMOUNT
    assert upstream[1].target.cpu_millicores == 8  # 25m / 3
    rec = omitting[1]
    for bound in (rec.target, rec.lower_bound, rec.upper_bound, rec.uncapped_target):
        assert bound.cpu_millicores is None
    assert rec.upper_bound.memory_bytes is None
    assert rec.target.memory_bytes == upstream[1].target.memory_bytes
    assert rec.lower_bound.memory_bytes == upstream[1].lower_bound.memory_bytes
    omitted = rec.explanation_dict()["omitted"]
    assert omitted == [
        {"resource": "cpu", "bounds": list(BOUNDS), "reason": NO_CPU_SAMPLES},
        {
            "resource": "memory",
            "bounds": ["upper_bound"],
            "reason": NO_MEMORY_UPPER_BOUND,
        },
    ]
    # The note "CPU values are the pod minimum" would now be false: not given.
    assert not any("CPU values" in n for n in rec.explanation_dict()["notes"])
    assert omitting.missing("cpu", "target").tolist() == [False, True, False]


def test_cpu_without_memory_samples_has_no_memory():
    upstream, omitting = both(three_rows())
    rec = omitting[2]
    assert rec.target.memory_bytes is None and rec.upper_bound.memory_bytes is None
    assert rec.target.cpu_millicores == upstream[2].target.cpu_millicores
    assert rec.upper_bound.cpu_millicores == upstream[2].upper_bound.cpu_millicores
    assert rec.explanation_dict()["omitted"] == [
        {"resource": "memory", "bounds": list(BOUNDS), "reason": NO_MEMORY_SAMPLES}
    ]


def test_scalar_and_array_explanations_agree():
    _, omitting = both(three_rows())
    dicts = omitting.explanation_dicts([0, 1, 2])
    for i in range(3):
        assert omitting[i].explanation.to_dict() == dicts[i]
        assert omitting[i].explanation_dict() == dicts[i]


def test_uncontrolled_resources_are_not_listed_as_omitted():
    aggs = three_rows()
    recs = recommend(
        aggs,
        rows=[1],
        profile=PROFILE,
        containers_in_pod=[1],
        controlled_resources=("memory",),
        omit_unsampled=True,
    )
    assert [o["resource"] for o in recs[0].explanation_dict()["omitted"]] == ["memory"]


def test_oom_sample_is_the_one_record_ooms_adds():
    aggs = new_set(1)
    oom(aggs, 0, "a", 100.0, 1024 * MI)
    expected = oom_sample(1024 * MI, ratio=1.2, min_bump_bytes=100 * MI)
    assert expected == int(1024 * MI * 1.2)  # 1.2x beats +100 MiB at 1 GiB
    assert aggs.series_oom_peak[0] == expected
    assert oom_sample(100 * MI, ratio=1.2, min_bump_bytes=100 * MI) == 200 * MI


def memory_target(aggs, row=0):
    recs = recommend(aggs, rows=[row], profile=PROFILE, containers_in_pod=[1])
    return recs[0].explanation_dict()["resources"]["memory"]["target"]


def effect_of(requests, target):
    return oom_effect(requests, ratio=1.2, min_bump_bytes=100 * MI, target=target)


def test_daily_kills_set_the_target():
    # The container: usage never above 900 MiB, an OOM kill at a 900 MiB
    # request every day; each day's peak becomes the kill's 1080 MiB sample.
    aggs = new_set(1)
    for day in range(8):
        constant_grid(aggs, 0, "a", day * DAY, 1440, cpu=0.5, mem=900 * MI)
        assert oom(aggs, 0, "a", day * DAY + 1439 * 60.0, 900 * MI).oom_accepted == 1
    target = memory_target(aggs)
    assert target["raw"] > 1080 * MI  # read at the kills' samples, not at usage
    effect = effect_of([900 * MI] * 8, target)
    assert effect["effect"] == OOM_SETS_TARGET
    assert effect["count"] == 8
    assert effect["sample_low_bytes"] == effect["sample_high_bytes"] == 1080 * MI


def test_kills_below_the_usage_peaks_do_not_set_it():
    aggs = new_set(1)
    constant_grid(aggs, 0, "a", 0.0, 3 * 1440, cpu=0.5, mem=3000 * MI)
    # Another pod, using 200 MiB, killed at a 256 MiB request: a 356 MiB sample.
    constant_grid(aggs, 0, "b", 0.0, 3 * 1440, cpu=0.5, mem=200 * MI)
    assert oom(aggs, 0, "b", 3 * DAY - 60.0, 256 * MI).oom_accepted == 1
    assert aggs.series_oom_peak.max() == 356 * MI
    assert effect_of([256 * MI], memory_target(aggs))["effect"] == OOM_BELOW_TARGET


def test_one_kill_among_many_peaks_lies_above_the_percentile():
    aggs = new_set(1)
    for pod in range(20):
        constant_grid(aggs, 0, f"p{pod}", 0.0, 3 * 1440, cpu=0.5, mem=500 * MI)
    assert oom(aggs, 0, "p0", 3 * DAY - 60.0, 1024 * MI).oom_accepted == 1
    assert aggs.series_oom_peak.max() == oom_sample(
        1024 * MI, ratio=1.2, min_bump_bytes=100 * MI
    )
    assert effect_of([1024 * MI], memory_target(aggs))["effect"] == OOM_ABOVE_TARGET


def test_no_kills_no_effect_and_unknown_target_no_comparison():
    assert effect_of([], {"raw": 1.0}) is None
    effect = effect_of([0, 512 * MI], None)
    assert effect["effect"] is None
    # No request known: the 100 MiB minimum bump dominates.
    assert effect["sample_low_bytes"] == 100 * MI
    assert effect["sample_high_bytes"] == int(512 * MI * 1.2)
    assert effect["largest_request_bytes"] == 512 * MI


@pytest.mark.parametrize("raw", [True, "1Gi"])
def test_a_malformed_raw_value_is_not_compared(raw):
    assert effect_of([MI], {"raw": raw})["effect"] is None
