"""engine/feed.py: upstream's units and upstream's order, checked against the slow port.

The trace slice (``tests/fixtures/traces/bitbrains_slice.csv.gz``) is six Bitbrains
VMs x 4 days of ``benchmarks/data/bitbrains_rnd.csv.gz``, unchanged.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from recommender.engine import AggregateSet, OomBatch, SampleBatch, get_profile
from recommender.engine.estimator import recommend
from recommender.engine.feed import (
    cores_from_millicores,
    feed,
    quantised_cpu_cores,
    quantised_memory_bytes,
)
from tests.engine import reference as ref
from tests.engine.trace_slice import go_cpu_amount, read_slice, reference_hourly

HOUR = 3600.0


def test_cpu_is_truncated_to_whole_millicores_as_upstream_prometheus_history_does():
    values = np.array([0.0, 0.0019999, 0.009, 1.2345678, 3.27, 8.258, np.nan, -1.0])
    expected = [
        go_cpu_amount(v) / 1000.0 if v >= 0 else (0.0 if v < 0 else math.nan)
        for v in values.tolist()
    ]
    got = quantised_cpu_cores(values)
    assert got[:6].tolist() == expected[:6]
    assert math.isnan(got[6]) and got[7] == 0.0
    assert quantised_memory_bytes(np.array([1.9, 4169138176.0])).tolist() == [
        1.0,
        4169138176.0,
    ]


def test_metrics_server_millicores_survive_the_truncation_unchanged():
    millicores = np.arange(0, 2_000_000, dtype=np.float64)
    # The naive m / 1000 would lose a millicore on ~1 % of these values.
    assert np.any(np.trunc(millicores / 1000.0 * 1000.0) != millicores)
    assert np.array_equal(
        quantised_cpu_cores(cores_from_millicores(millicores)), millicores / 1000.0
    )


def _engine_replay(
    trace: dict[str, list[tuple[float, float, float]]], *, quantise: bool
) -> dict[float, list[tuple[int | None, ...]]]:
    """Hourly recommendations of every VM, fed hour by hour."""
    profile = get_profile("vpa")
    names = sorted(trace)
    aggregates = AggregateSet.empty(profile, len(names))
    series = np.arange(len(names), dtype=np.int64)
    flat = [(t, i, c, m) for i, n in enumerate(names) for t, c, m in trace[n]]
    flat.sort(key=lambda e: (e[0], e[1]))
    ts = np.array([e[0] for e in flat])
    idx = np.array([e[1] for e in flat], dtype=np.int64)
    cpu = np.array([e[2] for e in flat])
    mem = np.array([e[3] for e in flat])
    start = math.floor(ts.min() / HOUR) * HOUR
    out = {}
    done = 0
    for moment in np.arange(start + HOUR, ts.max() + HOUR, HOUR):
        upto = int(np.searchsorted(ts, moment, side="left"))  # samples before it
        batch = SampleBatch(
            series_aggregate=series,
            series_keys=["vm"] * len(names),
            series_index=idx[done:upto],
            timestamp_s=ts[done:upto],
            cpu_cores=cpu[done:upto],
            memory_bytes=mem[done:upto],
        )
        if quantise:
            feed(aggregates, batch)
        else:
            aggregates.add_samples(batch)
        done = upto
        recs = recommend(
            aggregates,
            rows=range(len(names)),
            profile=profile,
            containers_in_pod=[1] * len(names),
        )
        out[float(moment)] = [
            (
                r.target.cpu_millicores,
                r.lower_bound.cpu_millicores,
                r.upper_bound.cpu_millicores,
                r.target.memory_bytes,
                r.lower_bound.memory_bytes,
                r.upper_bound.memory_bytes,
            )
            for r in recs
        ]
    return out


def _reference_replay(
    trace: dict[str, list[tuple[float, float, float]]], moments: list[float]
) -> dict[float, list[tuple[int | None, ...]]]:
    """Upstream's hourly numbers, by moment, in the engine's container order."""
    hourly = reference_hourly(trace, moments)
    return {
        m: [
            (*hourly[n][j][0]["cpu"], *hourly[n][j][0]["memory"]) for n in sorted(trace)
        ]
        for j, m in enumerate(moments)
    }


@pytest.fixture(scope="module")
def trace() -> dict[str, list[tuple[float, float, float]]]:
    return read_slice()


def test_vpa_profile_equals_upstream_every_hour_on_a_real_trace_slice(trace):
    engine = _engine_replay(trace, quantise=True)
    expected = _reference_replay(trace, list(engine))
    assert len(engine) >= 96
    mismatches = [
        (moment, i)
        for moment, recs in engine.items()
        for i, rec in enumerate(recs)
        if tuple(rec) != tuple(expected[moment][i])
    ]
    assert mismatches == []


def test_fractional_cores_would_not_equal_upstream_on_the_same_slice(trace):
    # What the quantisation fixes: without it some hourly CPU integers differ.
    engine = _engine_replay(trace, quantise=False)
    expected = _reference_replay(trace, list(engine))
    differing = sum(
        rec[:3] != tuple(expected[moment][i][:3])
        for moment, recs in engine.items()
        for i, rec in enumerate(recs)
    )
    assert differing > 0


def test_ooms_go_after_the_samples_at_or_before_their_time(trace):
    # One VM, samples as one flat batch and kills in the middle: the same state as the
    # reference fed event by event (usage first at equal times).
    name = "rnd_2013-8_vm233"
    samples = trace[name][:600]
    kill_times = [samples[100][0], samples[100][0] + 1.0, samples[400][0]]
    aggregates = AggregateSet.empty(get_profile("vpa"), 1)
    feed(
        aggregates,
        SampleBatch(
            series_aggregate=[0],
            series_keys=["p"],
            series_index=np.zeros(len(samples), dtype=np.int64),
            timestamp_s=[s[0] for s in samples],
            cpu_cores=[s[1] for s in samples],
            memory_bytes=[s[2] for s in samples],
        ),
        OomBatch(
            series_aggregate=[0],
            series_keys=["p"],
            series_index=np.zeros(3, dtype=np.int64),
            timestamp_s=kill_times,
            memory_request_bytes=[0.0, 0.0, 5e8],
        ),
    )
    agg = ref.Aggregate()
    container = ref.Container(agg)
    events = [(t, 0, c, m, 0.0) for t, c, m in samples] + [
        (t, 1, 0.0, 0.0, req)
        for t, req in zip(kill_times, [0.0, 0.0, 5e8], strict=True)
    ]
    for t, kind, cores, memory, request in sorted(events, key=lambda e: e[:2]):
        if kind == 0:
            container.add_cpu(t, go_cpu_amount(cores) / 1000.0)
            container.add_memory(t, float(int(memory)))
        else:
            container.record_oom(t, request)
    assert aggregates.memory.weight[0].tolist() == agg.mem.w
    assert aggregates.cpu.weight[0].tolist() == agg.cpu.w
    assert aggregates.memory.total[0] == agg.mem.total
