"""A grid of memory samples crossing several memory windows, fed to series that have
windows open already (and OOM peaks): the same state as the same samples fed flat."""

import dataclasses

import numpy as np
import pytest

from recommender.engine.aggregation import AggregateSet
from recommender.engine.batch import OomBatch, SampleBatch
from recommender.engine.profiles import get_profile

T0 = 1_700_000_000.0


def _feed(aggs: AggregateSet, batch: SampleBatch, *, flat: bool) -> None:
    if flat:
        batch = dataclasses.replace(batch, grid=None)
    aggs.add_samples(batch)


@pytest.mark.parametrize("seed", range(12))
def test_a_grid_across_memory_windows_equals_the_flat_path(seed):
    rng = np.random.default_rng(seed)
    # Windows of 10 minutes, so an hour of minutes crosses six of them.
    profile = dataclasses.replace(get_profile("vpa"), memory_window_s=600.0)
    n_series, rows = 9, 4
    aggregate = [i % rows for i in range(n_series)]
    keys = [f"pod-{i}" for i in range(n_series)]

    def grid(start_s: float, columns: int) -> SampleBatch:
        mem = rng.choice([np.nan, 0.0, 1e8, 2e8, 3e8, 5e8], size=(n_series, columns))
        # Series that start and stop within the grid, as CronJob pods do.
        for i in range(n_series):
            lo, hi = sorted(rng.integers(0, columns + 1, size=2))
            if rng.random() < 0.5:
                mem[i, :lo] = np.nan
                mem[i, hi:] = np.nan
        return SampleBatch.from_grid(
            series_aggregate=aggregate,
            series_keys=keys,
            timestamp_s=start_s + 60.0 * np.arange(columns),
            cpu_cores=np.full((n_series, columns), 0.25),
            memory_bytes=mem,
        )

    first = grid(T0, 17)
    kills = OomBatch(
        series_aggregate=aggregate,
        series_keys=keys,
        series_index=np.array([1, 4, 7]),
        timestamp_s=np.array([T0 + 60 * 17, T0 + 60 * 17, T0 + 60 * 18]),
        memory_request_bytes=np.array([4e8, 1e8, 6e8]),
    )
    second = grid(T0 + 60 * 19, 61)
    fed = {}
    for flat in (False, True):
        aggs = AggregateSet.empty(profile, rows)
        _feed(aggs, first, flat=flat)
        aggs.record_ooms(kills)
        _feed(aggs, second, flat=flat)
        fed[flat] = aggs
    grid_fed, flat_fed = fed[False], fed[True]
    np.testing.assert_array_equal(grid_fed.memory.weight, flat_fed.memory.weight)
    np.testing.assert_array_equal(grid_fed.memory.total, flat_fed.memory.total)
    for name in (
        "series_last_memory_s",
        "series_window_end_s",
        "series_memory_peak",
        "series_oom_peak",
    ):
        np.testing.assert_array_equal(
            getattr(grid_fed, name), getattr(flat_fed, name), err_msg=name
        )
