"""Upstream util/histogram_options.go: bucketing schemes (linear, exponential).

A :class:`HistogramOptions` maps values to bucket indices (``find_bucket`` works on
float64 arrays of any shape) and holds the bucket starts (B,), computed with Go's
integer ``Pow`` so that they equal upstream's to the last bit.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from .gomath import go_log, go_log_array, go_pow_int

# How close (in bucket units) a log quotient must be to an integer to be re-checked with
# Go's Log.
_NEAR_INTEGER = 1e-9


@dataclass(frozen=True, eq=False)
class HistogramOptions:
    """A bucketing scheme (upstream HistogramOptions), compared by identity as in Go."""

    kind: str
    num_buckets: int
    epsilon: float
    max_value: float
    bucket_size: float  # linear: bucket size; exponential: first bucket size
    ratio: float  # exponential only; 0.0 for linear
    ratio_minus_one: float  # computed at run time as upstream does (1.05 - 1 != 0.05)
    log_ratio: float  # Go math.Log(ratio)
    bucket_start: np.ndarray  # float64 (B,), lower edges

    def find_bucket(
        self,
        values: np.ndarray,
        *,
        out: np.ndarray | None = None,
        scratch: np.ndarray | None = None,
    ) -> np.ndarray:
        """Bucket index (int64) of each value, as upstream ``FindBucket`` (any shape).

        ``out`` (int64) and ``scratch`` (float64) of the values' shape avoid large fresh
        allocations, which cost more than the arithmetic on big batches.
        """
        v = np.asarray(values, dtype=np.float64)
        b_max = float(self.num_buckets - 1)
        q = np.empty(v.shape) if scratch is None else scratch
        b = np.empty(v.shape, dtype=np.int64) if out is None else out
        with np.errstate(invalid="ignore", divide="ignore"):
            if self.kind == "linear":
                np.divide(v, self.bucket_size, out=q)
            else:
                # Go: int(Log(value*(ratio-1)/first + 1) / Log(ratio)), evaluated left
                # to right.
                np.multiply(v, self.ratio_minus_one, out=q)
                q /= self.bucket_size
                q += 1
                np.log(q, out=q)
                q /= self.log_ratio
            np.fmax(q, 0.0, out=q)  # negative (and NaN) values land in bucket 0
            np.minimum(q, b_max, out=q)
            np.copyto(b, q, casting="unsafe")  # Go's int(): truncation toward zero
            if self.kind == "linear":
                return b
            q -= b  # fractional part, in place
        near = q < _NEAR_INTEGER
        near |= q > 1 - _NEAR_INTEGER
        idx = np.flatnonzero(near)
        # Only near an integer can Go's Log and numpy's log disagree on the integer.
        if idx.size:
            flat_v = v.reshape(-1)[idx]
            arg = flat_v * self.ratio_minus_one / self.bucket_size + 1
            with np.errstate(invalid="ignore", divide="ignore"):
                exact = go_log_array(np.maximum(arg, 0.0)) / self.log_ratio
            exact = np.minimum(np.fmax(exact, 0.0), b_max)
            exact[flat_v < self.bucket_size] = 0.0
            b.reshape(-1)[idx] = exact.astype(np.int64)
        return b

    def find_bucket_scalar(self, value: float) -> int:
        """Exact scalar ``FindBucket`` using Go's Log throughout."""
        b_max = self.num_buckets - 1
        if self.kind == "linear":
            q = value / self.bucket_size
            if not q >= 0:
                return 0
            return b_max if q >= b_max + 1 else int(q)
        if value < self.bucket_size:
            return 0
        q = go_log(value * self.ratio_minus_one / self.bucket_size + 1) / self.log_ratio
        return b_max if q >= b_max else int(q)


@functools.lru_cache(maxsize=64)
def linear_options(
    max_value: float, bucket_size: float, epsilon: float
) -> HistogramOptions:
    """Upstream ``NewLinearHistogramOptions``; equal arguments give the same object."""
    if not max_value > 0:
        raise ValueError(f"max_value must be positive, not {max_value!r}")
    if not bucket_size > 0:
        raise ValueError(f"bucket_size must be positive, not {bucket_size!r}")
    if not epsilon > 0:
        raise ValueError(f"epsilon must be positive, not {epsilon!r}")
    n = math.ceil(max_value / bucket_size) + 1
    starts = np.array([float(i) * bucket_size for i in range(n)])
    starts.setflags(write=False)
    return HistogramOptions(
        "linear", n, epsilon, max_value, bucket_size, 0.0, 0.0, 0.0, starts
    )


@functools.lru_cache(maxsize=64)
def exponential_options(
    max_value: float, first_bucket_size: float, ratio: float, epsilon: float
) -> HistogramOptions:
    """Upstream ``NewExponentialHistogramOptions``; starts use Go's integer Pow."""
    if not max_value > 0:
        raise ValueError(f"max_value must be positive, not {max_value!r}")
    if not first_bucket_size > 0:
        raise ValueError(
            f"first_bucket_size must be positive, not {first_bucket_size!r}"
        )
    if not epsilon > 0:
        raise ValueError(f"epsilon must be positive, not {epsilon!r}")
    if not ratio > 1:
        raise ValueError(f"ratio must be greater than 1, not {ratio!r}")
    r1 = ratio - 1
    log_ratio = go_log(ratio)
    n = math.ceil(go_log(max_value * r1 / first_bucket_size + 1) / log_ratio) + 1
    starts = [0.0] + [
        first_bucket_size * (go_pow_int(ratio, i) - 1) / r1 for i in range(1, n)
    ]
    arr = np.array(starts)
    arr.setflags(write=False)
    return HistogramOptions(
        "exponential",
        n,
        epsilon,
        max_value,
        first_bucket_size,
        ratio,
        r1,
        log_ratio,
        arr,
    )
