"""engine/replay.py + replay_scores.py against a slow, independent reference.

The reference feeds each container one sample at a time into the one-sample-at-a-time
port of upstream (tests/engine/reference.py) in upstream's integer units, recomputes at
every hour, and scores each container-day with plain Python (sorted lists, loops), from
the definitions in docs/replay.md. The trace is a real slice of Bitbrains
(tests/fixtures/traces/bitbrains_slice.csv.gz, six VMs x 4 days).
"""

from __future__ import annotations

import math
import statistics

import numpy as np
import pytest

from recommender.engine import get_profile
from recommender.engine.replay import Trace, replay
from recommender.engine.replay_scores import (
    day_groups,
    score_hindsight,
    score_limits,
    score_timeline,
    summarise,
)
from tests.engine.trace_slice import read_slice, reference_hourly

HOUR = 3600.0
DAY = 86400.0
WARMUP = 86400.0


def python_percentile(values: list[float], q: float) -> float:
    """Linear interpolation between order statistics (numpy's default), by hand."""
    v = sorted(values)
    pos = (len(v) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(v) - 1)
    t = pos - lo
    if t >= 0.5:
        return v[hi] - (v[hi] - v[lo]) * (1 - t)
    return v[lo] + (v[hi] - v[lo]) * t


def to_trace(data: dict[str, list[tuple[float, float, float]]]) -> Trace:
    names = sorted(data)
    flat = [(i, t, c, m) for i, n in enumerate(names) for t, c, m in data[n]]
    return Trace(
        container_ids=names,
        series_container=np.arange(len(names)),
        series_keys=names,
        series_index=[e[0] for e in flat],
        timestamp_s=[e[1] for e in flat],
        cpu_cores=[e[2] for e in flat],
        memory_bytes=[e[3] for e in flat],
    )


def reference_replay(
    data: dict[str, list[tuple[float, float, float]]],
    profile: dict[str, object] | None = None,
) -> dict[str, list[tuple[float, dict[str, tuple[int, int, int]] | None]]]:
    """container -> [(moment, recommendation or None before any sample)] per hour."""
    t0 = math.floor(min(s[0][0] for s in data.values()) / HOUR) * HOUR
    t_end = max(s[-1][0] for s in data.values())
    moments = []
    m = t0 + HOUR
    while m <= t_end:
        moments.append(m)
        m += HOUR
    hourly = reference_hourly(data, moments, profile)
    return {
        name: [
            (moment, rec if fed else None)
            for moment, (rec, fed) in zip(moments, recs, strict=True)
        ]
        for name, recs in hourly.items()
    }


def reference_days(
    data: dict[str, list[tuple[float, float, float]]],
    recs: dict[str, list[tuple[float, dict[str, tuple[int, int, int]] | None]]],
) -> list[dict[str, float]]:
    """Every scored container-day's metrics, by the docs' definitions."""
    days = []
    for name, samples in sorted(data.items()):
        first = samples[0][0]
        history = recs[name]
        per_day: dict[int, list[tuple[float, float, float, tuple]]] = {}
        for t, cores, memory in samples:
            in_force = None
            for moment, rec in history:
                if moment <= t:
                    in_force = rec
            if in_force is None or t < first + WARMUP:
                continue
            per_day.setdefault(int(t // DAY), []).append((t, cores, memory, in_force))
        for day, rows in sorted(per_day.items()):
            if len(rows) < 144:
                continue
            mem_t = [r[3]["memory"][0] for r in rows]
            cpu_t = [r[3]["cpu"][0] / 1000.0 for r in rows]
            mem_avg = sum(mem_t) / len(mem_t)
            cpu_avg = sum(cpu_t) / len(cpu_t)
            mem_p95 = python_percentile([r[2] for r in rows], 95)
            cpu_p95 = python_percentile([r[1] for r in rows], 95)
            changes = big = mem_changes = 0
            previous = None
            for moment, rec in history:
                if rec is not None and previous is not None and moment // DAY == day:
                    cpu_a, cpu_b = previous["cpu"][0], rec["cpu"][0]
                    mem_a, mem_b = previous["memory"][0], rec["memory"][0]
                    changes += cpu_a != cpu_b or mem_a != mem_b
                    big += (
                        abs(cpu_b - cpu_a) >= 0.1 * cpu_a
                        or abs(mem_b - mem_a) >= 0.1 * mem_a
                    )
                    mem_changes += mem_a != mem_b
                previous = rec
            days.append(
                {
                    "memory_slack": (mem_avg - mem_p95) / mem_avg,
                    "cpu_slack": (cpu_avg - cpu_p95) / cpu_avg,
                    "over": any(r[2] > r[3]["memory"][0] for r in rows),
                    "over_upper": any(r[2] > r[3]["memory"][2] for r in rows),
                    "over_1_2": any(r[2] > 1.2 * r[3]["memory"][0] for r in rows),
                    "cpu_above": sum(r[1] > r[3]["cpu"][0] / 1000.0 for r in rows)
                    / len(rows),
                    "changes": changes,
                    "big": big,
                    "mem_changes": mem_changes,
                }
            )
    return days


@pytest.fixture(scope="module")
def data() -> dict[str, list[tuple[float, float, float]]]:
    return read_slice()


@pytest.fixture(scope="module")
def vpa_run(data):
    trace = to_trace(data)
    (timeline,) = replay(trace, [get_profile("vpa")], every_s=HOUR)
    days = day_groups(trace, warmup_s=WARMUP, start_s=timeline.start_s + HOUR)
    return trace, timeline, days


def test_every_hourly_recommendation_is_upstreams(data, vpa_run):
    trace, timeline, _ = vpa_run
    expected = reference_replay(data)
    for c, name in enumerate(trace.container_ids):
        for j, (moment, rec) in enumerate(expected[name], start=1):
            assert timeline.moments_s[j - 1] == moment
            got = tuple(
                timeline.values[res, bound][j, c]
                for res in ("cpu", "memory")
                for bound in ("target", "lower", "upper")
            )
            if rec is None:
                assert all(math.isnan(v) for v in got)
            else:
                assert got == (*rec["cpu"], *rec["memory"]), (name, moment)


def test_the_metrics_equal_the_slow_reference(data, vpa_run):
    trace, timeline, days = vpa_run
    expected = reference_days(data, reference_replay(data))
    scores = score_timeline(trace, timeline, days)
    assert scores.day.size == len(expected) == 18
    assert scores.memory_slack.tolist() == pytest.approx(
        [d["memory_slack"] for d in expected], rel=1e-12
    )
    assert scores.cpu_slack.tolist() == pytest.approx(
        [d["cpu_slack"] for d in expected], rel=1e-12
    )
    assert scores.memory_over_target.tolist() == [d["over"] for d in expected]
    assert scores.memory_over_upper.tolist() == [d["over_upper"] for d in expected]
    assert scores.memory_over_factor.tolist() == [d["over_1_2"] for d in expected]
    assert scores.cpu_above_share.tolist() == pytest.approx(
        [d["cpu_above"] for d in expected], rel=1e-12
    )
    assert scores.changes.tolist() == [d["changes"] for d in expected]
    assert scores.big_changes.tolist() == [d["big"] for d in expected]
    assert scores.memory_changes.tolist() == [d["mem_changes"] for d in expected]
    row = summarise(scores)
    assert row["container_days"] == 18
    assert row["memory_slack_mean"] == pytest.approx(
        statistics.fmean(d["memory_slack"] for d in expected), rel=1e-12
    )
    assert row["memory_slack_median"] == pytest.approx(
        statistics.median(d["memory_slack"] for d in expected), rel=1e-12
    )
    assert row["memory_overrun_days_pct"] == pytest.approx(
        100.0 * sum(d["over"] for d in expected) / 18
    )
    assert row["changes_per_day_p99"] == pytest.approx(
        python_percentile([d["changes"] for d in expected], 99)
    )
    assert row["days_without_memory_change_pct"] == pytest.approx(
        100.0 * sum(d["mem_changes"] == 0 for d in expected) / 18
    )
    # The slice is not trivial: some days overrun, some change, some do not.
    assert 0 < sum(d["over"] for d in expected) < 18
    assert 0 < sum(d["mem_changes"] == 0 for d in expected) < 18


def test_a_profile_with_overrides_replays_as_the_reference_with_them(data):
    trace = to_trace({k: v for k, v in data.items() if k.endswith(("233", "030"))})
    profile = get_profile("vpa").with_overrides(
        memory_target_percentile=0.95, margin_fraction=0.05
    )
    (timeline,) = replay(trace, [profile], every_s=HOUR)
    expected = reference_replay(
        {k: data[k] for k in trace.container_ids},
        profile={"memory": (0.95, 0.5, 0.95), "margin": 0.05},
    )
    for c, name in enumerate(trace.container_ids):
        for j, (_moment, rec) in enumerate(expected[name], start=1):
            if rec is not None:
                assert timeline.values["memory", "target"][j, c] == rec["memory"][0]
                assert timeline.values["cpu", "upper"][j, c] == rec["cpu"][2]


def test_headroom_replays_as_the_reference_with_its_settings(data):
    # Every hour of the six real VMs, every bound: p80 of daily memory peaks with a
    # 4-day half-life, margin max(12.5 %, 64 MiB), pod minimum 128 MiB; CPU upstream's
    # percentiles with the 12.5 % margin (the reference: one sample at a time).
    profile = get_profile("headroom")
    trace = to_trace(data)
    (timeline,) = replay(trace, [profile], every_s=HOUR)
    mi = 1024 * 1024
    expected = reference_replay(
        data,
        profile={
            "memory": (0.8, 0.5, 0.95),
            "margin": 0.125,
            "min_margin_mem": 64 * mi,
            "min_mem": 128 * mi,
            "mem_hl": 4 * 86400.0,
        },
    )
    floor_binds = pod_min_binds = fraction_binds = 0
    for c, name in enumerate(trace.container_ids):
        for j, (_moment, rec) in enumerate(expected[name], start=1):
            got = tuple(
                timeline.values[res, bound][j, c]
                for res in ("cpu", "memory")
                for bound in ("target", "lower", "upper")
            )
            if rec is None:
                assert all(math.isnan(v) for v in got)
                continue
            assert got == (*rec["cpu"], *rec["memory"]), (name, j)
            target = rec["memory"][0]
            pod_min_binds += target == 128 * mi
            # Above the pod minimum, the target is base + margin: the margin is
            # 64 MiB exactly (the floor) or 12.5 % of base (more than 64 MiB).
            fraction_binds += target > 128 * mi and target - 64 * mi > 512 * mi
            floor_binds += 128 * mi < target < (512 + 64) * mi
    # The slice exercises each rule: the pod minimum, the 64 MiB floor (bases below
    # 512 MiB) and the 12.5 % margin.
    assert min(floor_binds, pod_min_binds, fraction_binds) >= 10


def test_limits_and_hindsight_baselines(data, vpa_run):
    trace, _, days = vpa_run
    cpu_limit = np.array([1.0, 2.0, np.nan, 4.0, 8.0, 16.0])
    memory_limit = np.array([4e9, 8e9, np.nan, 2e9, 1.6e10, 3.2e10])
    manual = score_limits(
        trace, cpu_limit_cores=cpu_limit, memory_limit_bytes=memory_limit, days=days
    )
    best = score_hindsight(trace, days)
    expected_slack = []
    for c, g in zip(manual.container.tolist(), range(days.size), strict=True):
        pick = days.idx[days.group == g]
        usage = trace.memory_bytes[pick].tolist()
        if math.isnan(memory_limit[c]):
            assert math.isnan(manual.memory_slack[g])
        else:
            p95 = python_percentile(usage, 95)
            assert manual.memory_slack[g] == pytest.approx(
                (memory_limit[c] - p95) / memory_limit[c], rel=1e-12
            )
            assert manual.memory_over_target[g] == (max(usage) > memory_limit[c])
        peak = max(usage)
        expected_slack.append((peak - python_percentile(usage, 95)) / peak)
        assert not best.memory_over_target[g]
    assert best.memory_slack.tolist() == pytest.approx(expected_slack, rel=1e-12)
    assert math.isnan(summarise(best)["changes_per_day_p50"])


def test_bad_arguments_name_the_argument(data):
    trace = to_trace(data)
    with pytest.raises(ValueError, match="every_s"):
        replay(trace, [get_profile("vpa")], every_s=0.0)
    with pytest.raises(ValueError, match="profiles"):
        replay(trace, [])
    with pytest.raises(ValueError, match="warmup_s"):
        day_groups(trace, warmup_s=-1.0, start_s=0.0)
    with pytest.raises(ValueError, match="series_index"):
        Trace(
            container_ids=["a"],
            series_container=[0],
            series_keys=["a"],
            series_index=[1],
            timestamp_s=[0.0],
            cpu_cores=[0.0],
            memory_bytes=[0.0],
        )


def test_profiles_of_one_histogram_read_a_shared_percentile_once(data, monkeypatch):
    """Replayed together, profiles of the same histograms give what each gives alone,
    and the percentiles both read (vpa and a larger margin) are read once a moment."""
    from recommender.engine.histogram import HistogramBatch

    trace = to_trace({k: v for k, v in data.items() if k.endswith(("233", "030"))})
    vpa = get_profile("vpa")
    margin = vpa.with_overrides(margin_fraction=0.4, name="margin")
    other = vpa.with_overrides(memory_target_percentile=0.95, name="p95")
    alone = [replay(trace, [p], every_s=HOUR)[0] for p in (vpa, margin, other)]
    reads = []
    read = HistogramBatch.percentiles

    def counted(self, rows, ps):
        reads.append(tuple(ps))
        return read(self, rows, ps)

    monkeypatch.setattr(HistogramBatch, "percentiles", counted)
    together = replay(trace, [vpa, margin, other], every_s=HOUR)

    for one, both in zip(alone, together, strict=True):
        assert one.values.keys() == both.values.keys()
        for key, values in one.values.items():
            np.testing.assert_array_equal(values, both.values[key])
    moments = together[0].values["cpu", "target"].shape[0] - 1
    # CPU read once for all three; memory once for vpa and margin, once for p95.
    assert len(reads) == 3 * moments
