"""Profile.with_overrides: a ValueError naming the field for each kind of bad value."""

from __future__ import annotations

import math

import pytest

from recommender.engine import PROFILES, get_profile


@pytest.mark.parametrize(
    ("fields", "name"),
    [
        ({"cpu_target_percentile": 1.5}, "cpu_target_percentile"),
        ({"memory_lower_percentile": "0.5"}, "memory_lower_percentile"),
        ({"memory_upper_percentile": True}, "memory_upper_percentile"),
        ({"memory_estimator": "median"}, "memory_estimator"),
        ({"margin_fraction": -0.1}, "margin_fraction"),
        ({"margin_fraction": math.inf}, "margin_fraction"),
        ({"margin_fraction": math.nan}, "margin_fraction"),
        ({"cpu_half_life_s": 0.0}, "cpu_half_life_s"),
        ({"memory_window_s": -1}, "memory_window_s"),
        ({"memory_window_count": 0}, "memory_window_count"),
        ({"memory_window_count": 8.0}, "memory_window_count"),
        ({"oom_bump_ratio": 0.5}, "oom_bump_ratio"),
        ({"percentile": 0.9}, "percentile"),
    ],
)
def test_a_bad_override_names_its_field(fields, name):
    with pytest.raises(ValueError, match=f"^{name}: "):
        get_profile("vpa").with_overrides(**fields)


def test_overrides_change_only_the_named_fields():
    base = get_profile("p95-cpu-p99-memory")
    changed = base.with_overrides(
        cpu_target_percentile=0.99, cpu_upper_percentile=0.99, margin_fraction=0
    )

    assert (changed.name, changed.cpu_target_percentile, changed.margin_fraction) == (
        "p95-cpu-p99-memory",
        0.99,
        0,
    )
    assert changed.memory_target_percentile == base.memory_target_percentile == 0.99


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (
            {"memory_target_percentile": 0.99},
            "memory_upper_percentile: must be at least",
        ),
        ({"cpu_lower_percentile": 0.95}, "cpu_lower_percentile: must be at most"),
        ({"cpu_upper_percentile": 0.8}, "cpu_upper_percentile: must be at least"),
    ],
)
def test_every_band_must_hold_its_target(fields, message):
    with pytest.raises(ValueError, match=message):
        get_profile("vpa").with_overrides(**fields)


def test_every_shipped_profile_has_bands_that_hold_their_targets():
    for profile in PROFILES.values():
        for resource in ("cpu", "memory"):
            lower, target, upper = (
                getattr(profile, f"{resource}_{bound}_percentile")
                for bound in ("lower", "target", "upper")
            )
            assert lower <= target <= upper, (profile.name, resource)


def test_recurring_peaks_differs_from_upstream_only_where_docs_replay_md_says():
    vpa = get_profile("vpa").to_dict()
    tuned = get_profile("recurring-peaks").to_dict()
    differing = {k: tuned[k] for k in tuned if tuned[k] != vpa[k]}
    assert differing == {
        "name": "recurring-peaks",
        "memory_target_percentile": 0.8,
        "memory_half_life_s": 4 * 86400.0,
        "margin_fraction": 0.125,
    }
