"""rate() and max_over_time() on a grid from stored samples, worked by hand.

Bit-for-bit agreement with Prometheus itself is checked against a real server in
tests/integration/test_prometheus_source.py; here are the cases one can follow on paper.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from recommender.sources.base import SeriesKey
from recommender.sources.windows import (
    Samples,
    duration_seconds,
    max_by_container,
    peak_on_grid,
    rate_on_grid,
)

A = SeriesKey("shop", "web-1", "app")
B = SeriesKey("shop", "web-2", "app")


def samples(*series: tuple[SeriesKey, list[tuple[float, float]]]) -> Samples:
    """Samples from (key, [(seconds, value), ...]) pairs."""
    return Samples.concat(
        [key for key, _ in series],
        [
            np.array([t * 1000 for t, _ in points], dtype=np.int64)
            for _, points in series
        ],
        [np.array([v for _, v in points], dtype=float) for _, points in series],
    )


def rate_at(points: list[tuple[float, float]], *, t: float, window: float) -> float:
    grid_ms = np.array([t * 1000], dtype=np.int64)
    out = rate_on_grid(
        samples((A, points)), grid_ms=grid_ms, window_ms=int(window * 1000)
    )
    return float(out[0, 0])


def test_scrapes_on_both_window_ends_need_no_extrapolation():
    assert rate_at([(0, 100), (60, 130)], t=60, window=60) == 0.5


def test_scrapes_near_the_ends_are_extrapolated_to_them():
    # 30 s sampled, 10 s to the start and 20 s to the end (both under 1.1 x 30 s):
    # the increase of 30 is stretched over the whole 60 s window.
    assert rate_at([(70, 10), (100, 40)], t=120, window=60) == 1.0


def test_a_counter_is_not_extrapolated_below_zero():
    # At this slope the counter was 0 five seconds before the first scrape.
    rate = rate_at([(70, 5), (100, 35)], t=120, window=60)
    assert rate == pytest.approx(30 * (30 + 5 + 20) / 30 / 60)


def test_a_far_end_is_extrapolated_by_half_a_scrape_interval_only():
    # Last scrape 50 s before the end, scrapes every 10 s: 5 s more, not 50.
    rate = rate_at([(0, 0), (10, 1)], t=60, window=60)
    assert rate == pytest.approx(1 * (10 + 0 + 5) / 10 / 60)


def test_fewer_than_two_scrapes_in_a_window_is_no_rate():
    assert math.isnan(rate_at([(0, 1), (120, 3)], t=60, window=60))
    assert math.isnan(rate_at([], t=60, window=60))


def test_a_counter_reset_adds_back_the_value_before_it():
    # 100 -> 160 (+60), restart, 0 -> 30 (+30): 90 over 120 s.
    assert rate_at([(0, 100), (60, 160), (120, 30)], t=120, window=120) == 0.75


def test_a_lower_first_value_of_the_next_series_is_not_a_reset():
    points = samples((A, [(0, 500), (60, 560)]), (B, [(0, 1), (60, 7)]))
    grid_ms = np.array([60_000], dtype=np.int64)
    out = rate_on_grid(points, grid_ms=grid_ms, window_ms=60_000)
    np.testing.assert_array_equal(out, [[1.0], [0.1]])


def test_windows_on_a_grid_include_their_left_end():
    counter = samples((A, [(0, 0), (60, 60), (120, 180), (180, 360)]))
    grid_ms = np.array([60_000, 120_000, 180_000, 240_000], dtype=np.int64)
    out = rate_on_grid(counter, grid_ms=grid_ms, window_ms=60_000)
    np.testing.assert_array_equal(out, [[1.0, 2.0, 3.0, np.nan]])


def test_peaks_are_of_the_scrapes_after_the_previous_grid_time():
    gauge = samples((A, [(0, 9), (20, 1), (60, 4), (100, 8), (110, np.nan), (240, 2)]))
    grid_ms = np.array([60_000, 120_000, 180_000, 240_000], dtype=np.int64)
    out = peak_on_grid(gauge, grid_ms=grid_ms, step_ms=60_000)
    # (0, 60]: 1, 4; (60, 120]: 8 and a NaN (ignored); (120, 180]: none; (180, 240]: 2.
    np.testing.assert_array_equal(out, [[4.0, 8.0, np.nan, 2.0]])


def test_peaks_of_several_series_stay_apart():
    gauges = samples((A, [(30, 5)]), (B, [(30, 7), (90, 1)]))
    grid_ms = np.array([60_000, 120_000], dtype=np.int64)
    out = peak_on_grid(gauges, grid_ms=grid_ms, step_ms=60_000)
    np.testing.assert_array_equal(out, [[5.0, np.nan], [7.0, 1.0]])


def test_series_of_one_container_combine_with_a_nan_ignoring_max():
    values = np.array([[1.0, np.nan, np.nan], [3.0, 2.0, np.nan], [0.5, 0.5, 0.5]])
    keys, out = max_by_container((B, B, A), values)
    assert keys == (A, B)
    np.testing.assert_array_equal(out, [[0.5, 0.5, 0.5], [3.0, 2.0, np.nan]])


def test_durations_convert_as_go_does():
    assert duration_seconds(60_000) == 60.0
    assert duration_seconds(90_500) == 90.5
