"""The engine's explanation in plain words, and graceful with what it doesn't know."""

from __future__ import annotations

from recommender.engine import AggregateSet, get_profile, recommend
from recommender.web.presenters import describe_explanation
from tests.web.conftest import engine_explanation


def test_real_explanation_reads_as_a_chain_of_steps():
    lines = dict(describe_explanation(engine_explanation()))

    assert lines["CPU target"].startswith("p90 of the decayed usage = ")
    assert "+15% margin" in lines["CPU target"]
    assert "confidence multiplier" in lines["CPU upper bound"]
    assert lines["Samples"] == "1,440"
    assert (
        lines["History span"].startswith("23.98 hours")
        or "hours" in lines["History span"]
    )
    assert "CPU confidence" in lines


def test_no_history_says_the_upper_bound_is_unbounded():
    profile = get_profile("vpa")
    (result,) = recommend(
        AggregateSet.empty(profile, 1), rows=[0], profile=profile, containers_in_pod=[1]
    )
    explanation = result.explanation.to_dict()

    lines = dict(describe_explanation(explanation))

    assert lines["Samples"] == "0"
    assert "and unbounded (upper)" in lines["CPU confidence"]
    assert (
        "unbounded confidence multiplier (no history yet)" in lines["CPU upper bound"]
    )


def test_a_reason_comes_first():
    lines = describe_explanation({"reason": "no samples in 8 days", "sample_count": 0})

    assert lines[0] == ("Why no recommendation", "no samples in 8 days")


def test_unknown_and_malformed_keys_degrade_without_failing():
    lines = describe_explanation(
        {
            "resources": "garbage",
            "caps": [
                {
                    "resource": "cpu",
                    "bound": "target",
                    "reason": "cpu capped to minAllowed",
                    "before": 10,
                    "after": 50,
                }
            ],
            "future_field": 1.5,
            "sample_count": "n/a",
        }
    )

    assert (
        "Policy caps applied",
        "target: cpu capped to minAllowed (10m → 50m)",
    ) in lines
    assert ("Future field", "1.5") in lines
    assert describe_explanation(None) == []
    assert describe_explanation({}) == []


def test_explanation_and_table_cells_use_the_same_humanizers():
    from recommender.engine import humanize_cpu, humanize_memory
    from recommender.web.templatetags.dashboard import cpu, memory

    lines = dict(
        describe_explanation(
            {
                "caps": [
                    {
                        "bound": "target",
                        "resource": "cpu",
                        "reason": "minAllowed",
                        "before": 587.9,
                        "after": 1500,
                    },
                    {
                        "bound": "target",
                        "resource": "memory",
                        "reason": "maxAllowed",
                        "before": 1.5 * 2**30,
                        "after": 300 * 2**20,
                    },
                ]
            }
        )
    )

    caps = lines["Policy caps applied"]
    # 587.9 millicores is 588m (rounded), not 587m (truncated).
    assert "(588m → 1.5 cores)" in caps
    assert "(1.5 GiB → 300 MiB)" in caps
    assert (cpu(587.9), memory(300 * 2**20)) == ("588m", "300 MiB")
    assert (cpu(587.9), memory(300 * 2**20)) == (
        humanize_cpu(587.9),
        humanize_memory(300 * 2**20),
    )


def test_overrides_read_as_profile_value_to_override():
    from recommender.web.presenters import describe_overrides

    assert describe_overrides(
        {
            "memory_target_percentile": {"profile": 0.9, "override": 0.99},
            "margin_fraction": {"profile": 0.15, "override": 0.05},
            "cpu_half_life_s": {"profile": 86400.0, "override": 43200.0},
            "pod_min_memory_bytes": {"profile": 262144000, "override": 2**27},
            "memory_estimator": {"profile": "percentile", "override": "peak"},
            "a_future_field": {"profile": 1, "override": 2},
        }
    ) == [
        "Memory target percentile p90 → p99",
        "Safety margin +15% → +5%",
        "CPU half-life 1 day → 12 hours",
        "Pod minimum memory 250 MiB → 128 MiB",
        "Memory estimator percentile → peak",
        "a_future_field 1 → 2",
    ]
    assert describe_overrides(None) == describe_overrides("junk") == []


def test_an_adaptive_memory_margin_is_said_as_applied():
    from tests.engine.test_adaptive_margin import _two_containers

    profile = get_profile("adaptive-margin")
    aggs = _two_containers(profile)
    steady, bursty = recommend(
        aggs, rows=[0, 1], profile=profile, containers_in_pod=[1, 1]
    )
    assert (
        "+12.5% adaptive margin"
        in dict(describe_explanation(steady.explanation_dict()))["Memory target"]
    )
    bursty_lines = dict(describe_explanation(bursty.explanation_dict()))
    assert "+25.0% adaptive margin" in bursty_lines["Memory target"]
    # CPU keeps the profile's margin, as upstream.
    assert "+15% margin" in bursty_lines["CPU target"]


def test_headrooms_smallest_margin_is_said_in_bytes():
    from tests.engine.helpers import DAY, MI, constant_grid, new_set

    profile = get_profile("headroom")
    aggs = new_set(2, profile)
    t0 = 1_700_000_000.0 // DAY * DAY
    constant_grid(aggs, 0, "small", t0, 600, cpu=0.5, mem=300 * MI)
    constant_grid(aggs, 1, "large", t0, 600, cpu=0.5, mem=4096 * MI)
    small, large = recommend(
        aggs, rows=[0, 1], profile=profile, containers_in_pod=[1, 1]
    )
    small_line = dict(describe_explanation(small.explanation_dict()))["Memory target"]
    # 12.5 % of about 315 MiB is less than 64 MiB: the floor, about +20 %.
    assert "+64 MiB margin (the smallest, 20.3%)" in small_line
    large_line = dict(describe_explanation(large.explanation_dict()))["Memory target"]
    assert "+12.5% margin" in large_line and "smallest" not in large_line
