"""Hourly usage of a grid: per key and hour the peak, sum and count of the samples of
every series of the key; parts of an hour merge to what one grid gives."""

from __future__ import annotations

import numpy as np
import pytest

from recommender.engine.usage_hours import HourlyUsage, hourly_usage, merged

NAN = np.nan
# Minutes 3540 s to 3720 s: the last two minutes of the first hour, two of the second.
T = np.array([3540.0, 3600.0, 3660.0, 3720.0])


def grid(keys, cpu, memory) -> HourlyUsage:
    return hourly_usage(
        series_key=np.array(keys),
        timestamp_s=T,
        cpu_cores=np.array(cpu, dtype=float),
        memory_bytes=np.array(memory, dtype=float),
    )


def test_each_key_and_hour_gets_peak_sum_and_count_of_all_its_series():
    usage = grid(
        [7, 3, 7],
        [[1.0, 2.0, NAN, 4.0], [0.5, NAN, NAN, NAN], [3.0, NAN, 1.0, NAN]],
        [[10, 20, 30, NAN], [5, 5, NAN, NAN], [NAN, NAN, NAN, NAN]],
    )
    rows = {
        (k, e): (cm, cs, cn, mm, ms, mn)
        for k, e, cm, cs, cn, mm, ms, mn in zip(
            usage.key.tolist(),
            usage.ends_s.tolist(),
            usage.cpu_max.tolist(),
            usage.cpu_sum.tolist(),
            usage.cpu_count.tolist(),
            usage.memory_max.tolist(),
            usage.memory_sum.tolist(),
            usage.memory_count.tolist(),
            strict=True,
        )
    }
    # Key 3's second hour has no sample at all: no entry.
    assert rows.keys() == {(3, 3600.0), (7, 3600.0), (7, 7200.0)}
    assert rows[(7, 3600.0)] == (3.0, 6.0, 3, 20.0, 30.0, 2)
    assert rows[(7, 7200.0)] == (4.0, 5.0, 2, 30.0, 30.0, 1)
    assert rows[(3, 3600.0)] == (0.5, 0.5, 1, 5.0, 10.0, 2)


def test_a_grid_split_anywhere_merges_to_the_whole():
    rng = np.random.default_rng(3)
    cpu = rng.random((5, 4))
    cpu[rng.random((5, 4)) < 0.3] = NAN
    memory = rng.random((5, 4)) * 1e9
    keys = [1, 2, 1, 3, 2]
    whole = merged([grid(keys, cpu, memory)])
    for cut in (1, 2, 3):
        parts = [
            hourly_usage(
                series_key=np.array(keys),
                timestamp_s=T[s],
                cpu_cores=cpu[:, s],
                memory_bytes=memory[:, s],
            )
            for s in (slice(0, cut), slice(cut, None))
        ]
        split = merged(parts)
        np.testing.assert_array_equal(split.key, whole.key)
        np.testing.assert_array_equal(split.ends_s, whole.ends_s)
        np.testing.assert_array_equal(split.cpu_max, whole.cpu_max)
        np.testing.assert_array_equal(split.cpu_count, whole.cpu_count)
        np.testing.assert_allclose(split.memory_sum, whole.memory_sum, rtol=1e-12)


def test_a_grid_of_the_wrong_shape_is_refused():
    with pytest.raises(ValueError, match="cpu_cores"):
        hourly_usage(
            series_key=np.array([1]),
            timestamp_s=T,
            cpu_cores=np.zeros((1, 3)),
            memory_bytes=np.zeros((1, 4)),
        )
