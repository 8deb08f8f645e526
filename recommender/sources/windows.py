"""PromQL's ``rate()`` and ``max_over_time()`` evaluated on a grid from stored samples.

The Prometheus source reads the stored samples of a range (a range-vector instant
query, which Prometheus answers without per-step evaluation) and computes the grid
values here, exactly as Prometheus 2.x evaluates them (below): ``rate``,
``max_over_time`` and ``max by`` over a container's series."""
# Prometheus 2.x evaluates:
#
# - ``rate(counter[w])`` at each grid time t: the samples in [t - w, t] (both ends
#   included), counter resets added back, extrapolated towards the window's ends as
#   ``extrapolatedRate`` in promql/functions.go does (same float operations in the same
#   order, so the results are bit for bit those of Prometheus 2.42);
# - ``max_over_time(gauge[step - 1ms])``: the peak of the samples in (t - step, t];
# - ``max by (namespace, pod, container)`` over the series of one container: NaN only
#   where every series is NaN or absent.
#
# Shapes: ``Samples`` holds S series concatenated (series i is
# ``[offsets[i], offsets[i + 1])``, timestamps strictly increasing within a series);
# grids are T times in int64 milliseconds; results are float64 (S, T) with NaN where a
# window has too few samples.

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from recommender.sources.base import SeriesKey


@dataclass(frozen=True)
class Samples:
    """Stored samples of S series, concatenated in series order."""

    series: tuple[SeriesKey, ...]  # (S,), a container may appear more than once
    offsets: np.ndarray  # int64 (S + 1,)
    timestamp_ms: np.ndarray  # int64 (n,), strictly increasing within a series
    values: np.ndarray  # float64 (n,)

    @classmethod
    def concat(
        cls,
        series: list[SeriesKey],
        timestamps_ms: list[np.ndarray],
        values: list[np.ndarray],
    ) -> Samples:
        """Join per-series arrays."""
        lengths = np.array([len(v) for v in values], dtype=np.int64)
        offsets = np.zeros(len(values) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        if values:
            stamps = np.concatenate(timestamps_ms).astype(np.int64, copy=False)
            numbers = np.concatenate(values).astype(np.float64, copy=False)
        else:
            stamps, numbers = np.zeros(0, np.int64), np.zeros(0)
        return cls(tuple(series), offsets, stamps, numbers)


def _bounds(
    samples: Samples, grid_ms: np.ndarray, lookback_ms: int, *, left_closed: bool
) -> tuple[np.ndarray, np.ndarray]:
    """(lo, hi), each (S, T): the flat sample indices of each window
    ``[t - lookback, t]`` (or ``(t - lookback, t]``) of each series."""
    count = len(samples.series)
    lengths = np.diff(samples.offsets)
    rows = np.repeat(np.arange(count, dtype=np.int64), lengths)
    stamps = samples.timestamp_ms
    # One sorted key for all series: row * stride + time since base.
    base = int(grid_ms[0]) - lookback_ms
    top = int(grid_ms[-1])
    if len(stamps):
        base = min(base, int(stamps.min()))
        top = max(top, int(stamps.max()))
    stride = top - base + 1
    keys = rows * stride + (stamps - base)
    row_base = (np.arange(count, dtype=np.int64) * stride)[:, None]
    hi = np.searchsorted(keys, row_base + (grid_ms - base)[None, :], side="right")
    lo = np.searchsorted(
        keys,
        row_base + (grid_ms - lookback_ms - base)[None, :],
        side="left" if left_closed else "right",
    )
    return lo, hi


def duration_seconds(duration_ms: int) -> float:
    """Go's ``time.Duration.Seconds()`` of a whole-millisecond duration."""
    return float(duration_ms // 1000) + float(duration_ms % 1000 * 1_000_000) / 1e9


def rate_on_grid(
    samples: Samples, *, grid_ms: np.ndarray, window_ms: int
) -> np.ndarray:
    """``rate(counter[window])`` of each series at each grid time, (S, T)."""
    out = np.full((len(samples.series), len(grid_ms)), np.nan)
    if not len(samples.series) or not len(grid_ms):
        return out
    lo, hi = _bounds(samples, grid_ms, window_ms, left_closed=True)
    count = hi - lo
    ok = count >= 2  # Prometheus drops a window with fewer than two samples
    first, last, n = lo[ok], hi[ok] - 1, count[ok]
    end_ms = np.broadcast_to(grid_ms[None, :], ok.shape)[ok]
    stamps, values = samples.timestamp_ms, samples.values

    result = values[last] - values[first]
    # Counter resets: add back the value before each drop, in order, as Prometheus
    # does; only the (rare) windows holding a reset take the slow path.
    drops = np.zeros(len(values), dtype=bool)
    drops[1:] = values[1:] < values[:-1]
    starts = samples.offsets[:-1]
    drops[starts[starts < len(values)]] = False  # a new series is not a reset
    drops_upto = np.cumsum(drops)
    for k in np.flatnonzero(drops_upto[last] != drops_upto[first]).tolist():
        total = float(result[k])
        for i in range(int(first[k]) + 1, int(last[k]) + 1):
            if drops[i]:
                total += float(values[i - 1])
        result[k] = total

    duration_to_start = (stamps[first] - (end_ms - window_ms)).astype(np.float64) / 1000
    duration_to_end = (end_ms - stamps[last]).astype(np.float64) / 1000
    sampled = (stamps[last] - stamps[first]).astype(np.float64) / 1000
    average = sampled / (n - 1).astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        # A counter cannot go below zero: do not extrapolate past its zero point.
        to_zero = sampled * (values[first] / result)
    use_zero = (result > 0) & (values[first] >= 0) & (to_zero < duration_to_start)
    duration_to_start = np.where(use_zero, to_zero, duration_to_start)
    threshold = average * 1.1
    interval = sampled + np.where(
        duration_to_start < threshold, duration_to_start, average / 2
    )
    interval = interval + np.where(
        duration_to_end < threshold, duration_to_end, average / 2
    )
    factor = interval / sampled
    factor = factor / duration_seconds(window_ms)
    out[ok] = result * factor
    return out


def peak_on_grid(samples: Samples, *, grid_ms: np.ndarray, step_ms: int) -> np.ndarray:
    """The largest sample of each series in each ``(t - step, t]``, (S, T)."""
    out = np.full((len(samples.series), len(grid_ms)), np.nan)
    if not len(samples.series) or not len(grid_ms):
        return out
    lo, hi = _bounds(samples, grid_ms, step_ms, left_closed=False)
    filled = hi > lo
    if not filled.any():
        return out
    # reduceat over [lo, hi) pairs; the NaN pad keeps every index in bounds.
    edges = np.stack([lo[filled], hi[filled]], axis=1).ravel()
    padded = np.append(samples.values, np.nan)
    out[filled] = np.fmax.reduceat(padded, edges)[::2]
    return out


def max_by_container(
    series: tuple[SeriesKey, ...], values: np.ndarray
) -> tuple[tuple[SeriesKey, ...], np.ndarray]:
    """One row per container, sorted: the NaN-ignoring max of its series' rows."""
    keys = tuple(sorted(set(series), key=lambda k: (k.namespace, k.pod, k.container)))
    position = {key: row for row, key in enumerate(keys)}
    target = np.array([position[key] for key in series], dtype=np.int64)
    out = np.full((len(keys), values.shape[1]), np.nan)
    if len(keys) == len(series):
        out[target] = values
    else:
        # cAdvisor exports an old cgroup next to the new one for a while: max, not sum.
        for row, key_row in enumerate(target.tolist()):
            out[key_row] = np.fmax(out[key_row], values[row])
    return keys, out
