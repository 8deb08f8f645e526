"""Read-only views of one aggregate's histogram, for charts."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .histogram import HistogramBatch


@dataclass(frozen=True)
class HistogramView:
    """One histogram for charts: lower edges (B,), weights (B,) decayed to now."""

    bucket_start: np.ndarray
    weight: np.ndarray
    _row: HistogramBatch = field(repr=False, compare=False)

    def percentile(self, p: float) -> float:
        """Upstream ``Percentile(p)`` of this histogram."""
        return float(self._row.percentile(np.array([0]), p)[0])


def histogram_view(hist: HistogramBatch, row: int, now_s: float) -> HistogramView:
    """Row ``row`` of ``hist`` with weights decayed relative to ``now_s``."""
    one = hist.take([row])
    ref = one.reference_s[0]
    # Weights are stored relative to the reference; 2**((ref - now) / half-life)
    # rescales them so that they sum to the total as seen at now_s.
    scale = (
        1.0
        if math.isnan(ref)
        else 2.0 ** ((ref - now_s) / float(hist.half_life_s or 1.0))
    )
    weight = one.weight[0] * scale
    weight.setflags(write=False)
    return HistogramView(hist.options.bucket_start, weight, one)
