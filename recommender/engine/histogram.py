"""Upstream VPA histograms (plain and decaying), vectorised over many histograms.

A :class:`HistogramBatch` holds N histograms that share one :class:`HistogramOptions`:

- ``weight``      float64 (N, B): axis 0 = histogram (aggregate row), axis 1 = bucket;
- ``total``       float64 (N,): upstream ``totalWeight``;
- ``min_bucket``  int64 (N,), ``max_bucket`` int64 (N,): upstream's epsilon bookkeeping;
- ``reference_s`` float64 (N,): decaying histograms only, the reference time in Unix
  seconds, NaN while unset (upstream: Go's zero time)."""
# Every operation reproduces upstream's float operations in upstream's order
# (util/histogram.go, util/decaying_histogram.go, util/histogram_options.go), so results
# are bit-identical with a one-operation-at-a-time port (tests/engine/reference.py).

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from .gomath import go_exp2, go_exp2_array, go_round
from .histogram_options import (
    HistogramOptions,
    exponential_options,
    linear_options,
)

# Re-exported: the options are part of this module's interface.
__all__ = [
    "HistogramBatch",
    "HistogramOptions",
    "decay_factor_scalar",
    "exponential_options",
    "go_time_round_s",
    "linear_options",
]

# util/histogram.go: MaxCheckpointWeight, the largest bucket weight stored in a
# checkpoint.
MAX_CHECKPOINT_WEIGHT = 10000
# util/decaying_histogram.go: maxDecayExponent; the reference moves when 2**exponent
# passes it.
MAX_DECAY_EXPONENT = 100
# Seconds from Go's zero time (0001-01-01T00:00:00Z) to the Unix epoch: 719162 days.
GO_ZERO_TIME_TO_UNIX_S = 62135596800
# percentiles(): band widths are grouped in steps of this many buckets, and each
# group is walked this many rows at a time (a block of 2,048 x 64 floats = 1 MiB).
_WIDTH_STEP = 16
_CHUNK_ROWS = 2048


def go_time_round_s(t_s: np.ndarray | float, step_s: float) -> np.ndarray:
    """Go ``Time.Round(step)`` on Unix seconds (multiples counted from Go's zero)."""
    x = np.asarray(t_s, dtype=np.float64) + GO_ZERO_TIME_TO_UNIX_S
    r = np.mod(x, step_s)
    rounded = np.where(r + r < step_s, x - r, x + (step_s - r))
    return rounded - GO_ZERO_TIME_TO_UNIX_S


class HistogramBatch:
    """N histograms with the same options (decaying when ``half_life_s`` is set)."""

    def __init__(
        self, options: HistogramOptions, size: int, half_life_s: float | None = None
    ):
        if size < 0:
            raise ValueError(f"size must be >= 0, not {size!r}")
        if half_life_s is not None and not half_life_s > 0:
            raise ValueError(f"half_life_s must be positive, not {half_life_s!r}")
        b = options.num_buckets
        self.options = options
        self.half_life_s = half_life_s
        self.weight = np.zeros((size, b))
        self.total = np.zeros(size)
        self.min_bucket = np.full(size, b - 1, dtype=np.int64)
        self.max_bucket = np.zeros(size, dtype=np.int64)
        self.reference_s = np.full(size, np.nan)

    def __len__(self) -> int:
        return len(self.total)

    # ----------------------------------------------------------------- structure
    def append_empty(self, count: int) -> None:
        """Add ``count`` empty histograms at the end."""
        other = HistogramBatch(self.options, count, self.half_life_s)
        self.extend(other)

    def extend(self, other: HistogramBatch) -> None:
        """Append the rows of ``other`` (same options) at the end."""
        if other.options is not self.options or other.half_life_s != self.half_life_s:
            raise ValueError("other must have the same options and half-life")
        self.weight = np.concatenate([self.weight, other.weight])
        self.total = np.concatenate([self.total, other.total])
        self.min_bucket = np.concatenate([self.min_bucket, other.min_bucket])
        self.max_bucket = np.concatenate([self.max_bucket, other.max_bucket])
        self.reference_s = np.concatenate([self.reference_s, other.reference_s])

    def take(self, rows: np.ndarray | list[int]) -> HistogramBatch:
        """A deep copy of the given rows, in that order."""
        rows = np.asarray(rows, dtype=np.int64)
        out = HistogramBatch(self.options, 0, self.half_life_s)
        out.weight = self.weight[rows].copy()
        out.total = self.total[rows].copy()
        out.min_bucket = self.min_bucket[rows].copy()
        out.max_bucket = self.max_bucket[rows].copy()
        out.reference_s = self.reference_s[rows].copy()
        return out

    # ----------------------------------------------------------------- bounds
    def recompute_bounds(self, rows: np.ndarray) -> None:
        """Upstream ``updateMinAndMaxBucket``: min/max inwards past buckets < eps."""
        rows = np.asarray(rows, dtype=np.int64)
        if rows.size == 0:
            return
        b = self.options.num_buckets
        ok = self.weight[rows] >= self.options.epsilon
        idx = np.arange(b)
        mn = self.min_bucket[rows]
        mx = self.max_bucket[rows]
        cand_min = ok & (idx >= mn[:, None])
        has = cand_min.any(axis=1)
        self.min_bucket[rows] = np.where(has, cand_min.argmax(axis=1), b - 1)
        cand_max = ok & (idx <= mx[:, None])
        has = cand_max.any(axis=1)
        last = b - 1 - cand_max[:, ::-1].argmax(axis=1)
        self.max_bucket[rows] = np.where(has, last, 0)

    def is_empty(self, rows: npt.ArrayLike | None = None) -> np.ndarray:
        """Upstream ``IsEmpty``: the weight at ``min_bucket`` is below epsilon."""
        r = np.arange(len(self)) if rows is None else np.asarray(rows, dtype=np.int64)
        return self.weight[r, self.min_bucket[r]] < self.options.epsilon

    # ----------------------------------------------------------------- plain ops
    def add_cells(
        self,
        rows: np.ndarray,
        buckets: np.ndarray,
        weights: np.ndarray,
        *,
        touched: np.ndarray | None = None,
        values_are_buckets: bool = True,
    ) -> None:
        """Sequence of upstream ``AddSample`` (already-decayed weights) in C order.

        ``rows``, ``buckets`` and ``weights`` broadcast together (e.g. rows (S, 1) with
        buckets (S, T)). Sums are formed with ``np.bincount`` after the current weights,
        so every bucket and total receives its additions one by one in that order,
        exactly like the Go loop. ``touched`` (sorted distinct rows) saves a pass when
        the caller knows it. With ``values_are_buckets=False``, ``buckets`` holds values
        to bucket in place.
        """
        rows = np.asarray(rows, dtype=np.int64)
        buckets = np.asarray(
            buckets, dtype=np.int64 if values_are_buckets else np.float64
        )
        weights = np.asarray(weights, dtype=np.float64)
        shape = np.broadcast_shapes(rows.shape, buckets.shape, weights.shape)
        n = math.prod(shape)
        if n == 0:
            return
        if weights.size and weights.min() < 0:
            raise ValueError("weights must be non-negative")
        if touched is None:
            touched = np.nonzero(np.bincount(rows.ravel(), minlength=len(self)))[0]
        b = self.options.num_buckets
        k = touched.size
        lut = np.zeros(len(self), dtype=np.int64)
        lut[touched] = np.arange(k)
        local = lut[rows]
        before = self.weight[touched]
        n_cells = k * b
        idx = np.empty(n_cells + n, dtype=np.int64)
        idx[:n_cells] = np.arange(n_cells)
        cells = idx[n_cells:].reshape(shape)
        w = np.empty(n_cells + n)
        if values_are_buckets:
            np.copyto(cells, buckets)
        else:
            vals = np.broadcast_to(buckets, shape)
            self.options.find_bucket(
                vals, out=cells, scratch=w[n_cells:].reshape(shape)
            )
        cells += local * b
        w[:n_cells] = before.ravel()
        np.copyto(w[n_cells:].reshape(shape), weights)
        after = np.bincount(idx, weights=w, minlength=n_cells).reshape(k, b)
        tidx = idx[
            n_cells - k :
        ]  # reuse the buffers: k totals, then one entry per sample
        tidx[:k] = np.arange(k)
        np.copyto(tidx[k:].reshape(shape), local)
        w[n_cells - k : n_cells] = self.total[touched]
        total = np.bincount(tidx, weights=w[n_cells - k :], minlength=k)
        self._commit_adds(touched, before, after, total)

    def _commit_adds(
        self,
        touched: np.ndarray,
        before: np.ndarray,
        after: np.ndarray,
        total: np.ndarray,
    ) -> None:
        # A bucket that received an addition and ends at or above epsilon widens the
        # bounds; "received" is detected as a changed weight (an absorbed addition to a
        # bucket below epsilon cannot move the bounds, and buckets outside the bounds
        # stay below epsilon).
        b = self.options.num_buckets
        moved = (after != before) & (after >= self.options.epsilon)
        has = moved.any(axis=1)
        first = np.where(has, moved.argmax(axis=1), b - 1)
        last = np.where(has, b - 1 - moved[:, ::-1].argmax(axis=1), 0)
        self.weight[touched] = after
        self.total[touched] = total
        self.min_bucket[touched] = np.minimum(self.min_bucket[touched], first)
        self.max_bucket[touched] = np.maximum(self.max_bucket[touched], last)

    def add_step(
        self, rows: np.ndarray, buckets: np.ndarray, weights: np.ndarray
    ) -> None:
        """One ``AddSample`` on each of the given distinct rows."""
        if rows.size == 0:
            return
        cur = self.weight[rows, buckets] + weights
        self.weight[rows, buckets] = cur
        self.total[rows] = self.total[rows] + weights
        eps = self.options.epsilon
        mn = self.min_bucket[rows]
        mx = self.max_bucket[rows]
        self.min_bucket[rows] = np.where((buckets < mn) & (cur >= eps), buckets, mn)
        self.max_bucket[rows] = np.where((buckets > mx) & (cur >= eps), buckets, mx)

    def subtract_step(
        self, rows: np.ndarray, buckets: np.ndarray, weights: np.ndarray
    ) -> None:
        """One ``SubtractSample`` on each of the given distinct rows."""
        if rows.size == 0:
            return
        eps = self.options.epsilon
        tot = self.total[rows] - weights
        self.total[rows] = np.where(tot < eps, 0.0, tot)
        cur = self.weight[rows, buckets] - weights
        self.weight[rows, buckets] = np.where(cur < eps, 0.0, cur)
        # updateMinAndMaxBucket moves a bound only past a bucket below epsilon: a row
        # whose min and max buckets both still hold epsilon keeps its bounds as they
        # are (most subtractions take a peak off a bucket inside the bounds).
        moves = (self.weight[rows, self.min_bucket[rows]] < eps) | (
            self.weight[rows, self.max_bucket[rows]] < eps
        )
        if moves.any():
            self.recompute_bounds(rows[moves])

    def scale(self, rows: np.ndarray, factors: np.ndarray) -> None:
        """Upstream ``scale``: multiply weights in [min, max] and total; fix bounds."""
        rows = np.asarray(rows, dtype=np.int64)
        factors = np.broadcast_to(np.asarray(factors, dtype=np.float64), rows.shape)
        if np.any(factors < 0):
            raise ValueError("factors must be non-negative")
        idx = np.arange(self.options.num_buckets)
        inside = (idx >= self.min_bucket[rows, None]) & (
            idx <= self.max_bucket[rows, None]
        )
        w = self.weight[rows]
        self.weight[rows] = np.where(inside, w * factors[:, None], w)
        self.total[rows] = self.total[rows] * factors
        self.recompute_bounds(rows)

    # ----------------------------------------------------------------- decay
    def shift_reference(self, rows: np.ndarray, new_reference_s: np.ndarray) -> None:
        """Upstream ``shiftReferenceTimestamp`` of distinct rows (unset: just set)."""
        rows = np.asarray(rows, dtype=np.int64)
        hl = self._half_life()
        new_ref = go_time_round_s(new_reference_s, hl)
        old = self.reference_s[rows]
        was_set = ~np.isnan(old)
        if was_set.any():
            k = np.floor((old[was_set] - new_ref[was_set]) / hl + 0.5)
            self.scale(rows[was_set], np.ldexp(1.0, k.astype(np.int64)))
        self.reference_s[rows] = new_ref

    def decay_factors(self, rows: np.ndarray, times_s: np.ndarray) -> np.ndarray:
        """Upstream ``decayFactor`` of distinct rows (may shift references first)."""
        rows = np.asarray(rows, dtype=np.int64)
        times_s = np.asarray(times_s, dtype=np.float64)
        hl = self._half_life()
        ref = self.reference_s[rows]
        stale = np.isnan(ref) | (times_s > ref + hl * MAX_DECAY_EXPONENT)
        if stale.any():
            self.shift_reference(rows[stale], times_s[stale])
            ref = self.reference_s[rows]
        return go_exp2_array((times_s - ref) / hl)

    def settled_decay_factors(
        self, rows: np.ndarray, times_s: np.ndarray
    ) -> np.ndarray | None:
        """``decay_factors`` of each (row, time) pair, rows repeated allowed, when
        none of them would shift its row's reference (so the factors do not depend
        on the order they are asked in); None when one would."""
        hl = self._half_life()
        ref = self.reference_s[rows]
        if (np.isnan(ref) | (times_s > ref + hl * MAX_DECAY_EXPONENT)).any():
            return None
        return go_exp2_array((times_s - ref) / hl)

    def _half_life(self) -> float:
        if self.half_life_s is None:
            raise ValueError(
                "this histogram batch does not decay (half_life_s is None)"
            )
        return self.half_life_s

    def prepare_rows(self, rows: np.ndarray, first_times_s: np.ndarray) -> None:
        """Shift references as a first addition at ``first_times_s`` would."""
        hl = self._half_life()
        ref = self.reference_s[rows]
        stale = np.isnan(ref) | (first_times_s > ref + hl * MAX_DECAY_EXPONENT)
        if stale.any():
            self.shift_reference(rows[stale], first_times_s[stale])

    def add_decaying(
        self,
        rows: np.ndarray,
        values: np.ndarray,
        weight: float,
        time_index: np.ndarray,
        distinct_times_s: np.ndarray,
        *,
        touched: np.ndarray,
        touched_first_s: np.ndarray,
    ) -> None:
        """Decaying ``AddSample(value, weight, time)`` of samples in broadcast C order.

        ``rows``, ``values`` and ``time_index`` (into ``distinct_times_s`` (T,))
        broadcast together; ``touched`` are the distinct rows (sorted) and
        ``touched_first_s`` the time of each one's first sample, where upstream would
        move an unset or stale reference. Each decay factor is computed once per
        (reference, time). No row may cross its ``maxDecayExponent`` threshold after its
        first sample (the caller splits long batches).
        """
        if touched.size == 0:
            return
        hl = self._half_life()
        self.prepare_rows(touched, touched_first_s)
        limit = self.reference_s[touched] + hl * MAX_DECAY_EXPONENT
        # Rare: a reference must move mid-batch.
        if distinct_times_s.max() > limit.min():
            shape = np.broadcast_shapes(
                np.shape(rows), np.shape(values), np.shape(time_index)
            )
            r = np.broadcast_to(rows, shape).ravel()
            v = np.broadcast_to(values, shape).ravel()
            ti = np.broadcast_to(time_index, shape).ravel()
            t = distinct_times_s[ti]
            crossing = t > self.reference_s[r] + hl * MAX_DECAY_EXPONENT
            if crossing.any():
                p = int(crossing.argmax())
                for lo, hi in ((0, p), (p, r.size)):
                    if hi > lo:
                        part, first = np.unique(r[lo:hi], return_index=True)
                        self.add_decaying(
                            r[lo:hi],
                            v[lo:hi],
                            weight,
                            ti[lo:hi],
                            distinct_times_s,
                            touched=part,
                            touched_first_s=t[lo:hi][first],
                        )
                return
        refs, group = np.unique(self.reference_s[touched], return_inverse=True)
        table = weight * go_exp2_array((distinct_times_s[None, :] - refs[:, None]) / hl)
        if refs.size == 1:
            w = table[0][time_index]
        else:
            lut = np.zeros(len(self), dtype=np.int64)
            lut[touched] = group.ravel()
            w = table[lut[rows], time_index]
        self.add_cells(rows, values, w, touched=touched, values_are_buckets=False)

    # ----------------------------------------------------------------- reading
    def percentile(self, rows: np.ndarray, p: float) -> np.ndarray:
        """Upstream ``Percentile(p)`` of each row: upper edge of the bucket reached."""
        return self.percentiles(rows, (p,))[0, :]

    def percentiles(self, rows: np.ndarray, ps: Sequence[float]) -> np.ndarray:
        """Upstream ``Percentile(p)`` of each row for each p: array (len(ps), R).

        Upstream walks from ``min_bucket`` while ``bucket < max_bucket``, adding weights
        to a running sum until it reaches ``p * total``. The running sums are formed
        once for all ps, over each row's band [min, max) only, with the same additions
        in the same order (``np.cumsum`` is sequential), so every float is upstream's.
        """
        rows = np.asarray(rows, dtype=np.int64).reshape(-1)
        for p in ps:
            if math.isnan(p):
                raise ValueError("p must be a number")
        b = self.options.num_buckets
        low = self.min_bucket[rows]
        high = self.max_bucket[rows]
        empty = self.weight[rows, low] < self.options.epsilon  # is_empty(rows)
        band = np.where(empty, 0, np.maximum(high - low, 0))
        thresholds = np.multiply.outer(
            np.asarray(ps, dtype=np.float64), self.total[rows]
        )
        passed = np.zeros((len(ps), rows.size), dtype=np.int64)
        # Rows go in classes of similar band width (the next multiple of
        # _WIDTH_STEP), so the running sums of a class fill a (rows, width) block with
        # little padding; a class is walked _CHUNK_ROWS rows at a time, so the blocks
        # stay small (in cache, reused by the allocator) whatever the number of rows.
        width_class = -(-band // _WIDTH_STEP)
        # Windows of the flattened weights: one row's band is a contiguous slice.
        flat_weight = np.ascontiguousarray(self.weight).reshape(-1)
        for cls in np.flatnonzero(np.bincount(width_class)[1:]).tolist():
            in_class = np.flatnonzero(width_class == cls + 1)
            width = int(band[in_class].max())
            windows = np.lib.stride_tricks.sliding_window_view(flat_weight, width)
            columns = np.arange(width)
            for c0 in range(0, in_class.size, _CHUNK_ROWS):
                members = in_class[c0 : c0 + _CHUNK_ROWS]
                # A window starts at the row's min_bucket, or earlier when that would
                # run past the last bucket; the buckets before the band (``lead``) are
                # zeroed, so the running sums are the band's own additions, in
                # upstream's order.
                m_low = low[members]
                start = np.minimum(m_low, b - width)
                lead = m_low - start
                running = windows[rows[members] * b + start]  # a copy, (members, width)
                leading = np.flatnonzero(lead)
                if leading.size:
                    running[leading] *= columns >= lead[leading, None]
                np.cumsum(running, axis=1, out=running)
                for i in range(len(ps)):
                    threshold = thresholds[i, members]
                    # Buckets passed before the sum reaches the threshold: the sums are
                    # non-decreasing (weights are >= 0), so that is the first bucket at
                    # or over it; the lead's zeros pass a positive threshold. What lies
                    # after the band never matters: the count is capped at the band
                    # below.
                    reached = running >= threshold[:, None]
                    none = np.where(np.isnan(threshold), 0, width)  # x < NaN: never
                    first = np.where(reached[:, -1], reached.argmax(axis=1), none)
                    passed[i, members] = first - np.where(threshold > 0, lead, 0)
        starts = self.options.bucket_start
        out = np.empty((len(ps), rows.size))
        for i in range(len(ps)):
            # Running out of band stops at max_bucket, as upstream.
            bucket = low + np.minimum(passed[i], band)
            value = np.where(
                bucket < b - 1, starts[np.minimum(bucket + 1, b - 1)], starts[bucket]
            )
            out[i] = np.where(empty, 0.0, value)
        return out

    def merge_row(self, row: int, other: HistogramBatch, other_row: int) -> None:
        """Upstream ``Merge``: add ``other[other_row]`` into ``self[row]``."""
        if other.options is not self.options:
            raise ValueError("other must use the same options object")
        if self.half_life_s != other.half_life_s:
            raise ValueError("other must have the same half-life")
        if self.half_life_s is not None:
            mine, theirs = self.reference_s[row], other.reference_s[other_row]
            if not math.isnan(theirs) and (math.isnan(mine) or mine < theirs):
                self.shift_reference(np.array([row]), np.array([theirs]))
            elif not math.isnan(mine) and (math.isnan(theirs) or theirs < mine):
                other.shift_reference(np.array([other_row]), np.array([mine]))
        lo, hi = int(other.min_bucket[other_row]), int(other.max_bucket[other_row])
        if lo <= hi:
            self.weight[row, lo : hi + 1] += other.weight[other_row, lo : hi + 1]
        self.total[row] += other.total[other_row]
        self.min_bucket[row] = min(self.min_bucket[row], lo)
        self.max_bucket[row] = max(self.max_bucket[row], hi)

    # ----------------------------------------------------------------- v3 checkpoints
    def save_v3(self, row: int) -> dict[str, Any]:
        """Upstream ``SaveToChekpoint``: total, bucket weights and reference."""
        lo, hi = int(self.min_bucket[row]), int(self.max_bucket[row])
        w = self.weight[row]
        biggest = 0.0
        for b in range(lo, hi + 1):
            if w[b] > biggest:
                biggest = float(w[b])
        ratio = MAX_CHECKPOINT_WEIGHT / biggest if biggest else math.inf
        buckets: dict[str, int] = {}
        for b in range(lo, hi + 1):
            q = go_round(float(w[b]) * ratio) if biggest else 0
            q &= 0xFFFFFFFF  # Go's uint32 conversion
            if q > 0:
                buckets[str(b)] = q
        out: dict[str, Any] = {
            "totalWeight": float(self.total[row]),
            "bucketWeights": buckets,
        }
        if self.half_life_s is not None:
            ref = self.reference_s[row]
            out["referenceTimestamp"] = None if math.isnan(ref) else float(ref)
        return out

    def load_v3(self, row: int, checkpoint: dict[str, Any] | None) -> None:
        """Upstream ``LoadFromCheckpoint``: add the weights into ``self[row]``."""
        if checkpoint is None:
            raise ValueError("checkpoint must not be None")
        total = float(checkpoint.get("totalWeight", 0.0))
        if total < 0:
            raise ValueError(f"checkpoint totalWeight must be >= 0, not {total!r}")
        items: list[tuple[int, int]] = []
        for key, q in (checkpoint.get("bucketWeights") or {}).items():
            b = int(key)
            if b >= self.options.num_buckets:
                raise ValueError(
                    f"checkpoint bucket {b} exceeds {self.options.num_buckets} buckets"
                )
            if b < 0:
                raise ValueError(f"checkpoint has a negative bucket {b}")
            if not 0 <= int(q) <= 0xFFFFFFFF:
                raise ValueError(f"checkpoint bucket {b} weight {q!r} is not a uint32")
            items.append((b, int(q)))
        q_sum = sum(q for _, q in items)
        if q_sum > 0:
            ratio = total / float(q_sum)
            for b, q in items:
                self.min_bucket[row] = min(self.min_bucket[row], b)
                self.max_bucket[row] = max(self.max_bucket[row], b)
                self.weight[row, b] += float(q) * ratio
            self.total[row] += total
            self.recompute_bounds(np.array([row]))
        if self.half_life_s is not None and "referenceTimestamp" in checkpoint:
            ref = checkpoint["referenceTimestamp"]
            self.reference_s[row] = np.nan if ref is None else float(ref)


def decay_factor_scalar(reference_s: float, time_s: float, half_life_s: float) -> float:
    """``2**((time - reference)/half_life)`` with Go's Exp2 (no reference shift)."""
    return go_exp2((time_s - reference_s) / half_life_s)
