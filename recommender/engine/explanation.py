"""Why a recommendation has its values: each intermediate number of the estimator.

Scalars only (one container). ``to_dict()`` is JSON-safe: infinite multipliers become
``None`` with ``"infinite": true`` beside them, so the UI can say "no history yet".
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class BoundExplanation:
    """One resource, one bound (target, lower or upper)."""

    source: str  # "percentile" or "peak"
    percentile: float | None  # the percentile read, None for the peak estimator
    raw: float  # histogram value read: cores or bytes (a bucket edge)
    base: int  # raw in millicores or bytes, truncated
    with_margin: int  # base + trunc(base * margin)
    multiplier: float  # confidence multiplier (1.0 for the target)
    after_confidence: int
    pod_minimum: int
    pod_minimum_applied: bool
    value: int

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dict."""
        return {
            "source": self.source,
            "percentile": self.percentile,
            "raw": _finite(self.raw),
            "base": self.base,
            "with_margin": self.with_margin,
            "multiplier": _finite(self.multiplier),
            "multiplier_infinite": math.isinf(self.multiplier),
            "after_confidence": self.after_confidence,
            "pod_minimum": self.pod_minimum,
            "pod_minimum_applied": self.pod_minimum_applied,
            "value": self.value,
        }


@dataclass(frozen=True)
class ResourceExplanation:
    """One resource: confidence and its two multipliers, then the three bounds."""

    resource: str  # "cpu" (millicores) or "memory" (bytes)
    confidence: float  # min(history span, sample count) in confidence intervals
    confidence_interval_s: float
    lower_multiplier: float  # (1 + 0.001/conf) ** -2
    upper_multiplier: float  # (1 + 1/conf) ** 1
    target: BoundExplanation
    lower_bound: BoundExplanation
    upper_bound: BoundExplanation

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dict."""
        return {
            "resource": self.resource,
            "unit": "millicores" if self.resource == "cpu" else "bytes",
            "confidence": _finite(self.confidence),
            "confidence_interval_s": self.confidence_interval_s,
            "lower_multiplier": _finite(self.lower_multiplier),
            "upper_multiplier": _finite(self.upper_multiplier),
            "upper_multiplier_infinite": math.isinf(self.upper_multiplier),
            "target": self.target.to_dict(),
            "lower_bound": self.lower_bound.to_dict(),
            "upper_bound": self.upper_bound.to_dict(),
        }


@dataclass(frozen=True)
class Explanation:
    """Everything behind one container's recommendation, or why there is none."""

    profile: str
    margin_fraction: float
    containers_in_pod: int
    sample_count: int
    first_sample_s: float | None
    last_sample_s: float | None
    history_span_s: float
    memory_peaks_weight: float  # decayed weight of stored memory peaks (0 = none)
    resources: dict[str, ResourceExplanation] = field(default_factory=dict)
    reason: str | None = None
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dict for the API and the UI."""
        return {
            "profile": self.profile,
            "margin_fraction": self.margin_fraction,
            "containers_in_pod": self.containers_in_pod,
            "sample_count": self.sample_count,
            "first_sample_s": self.first_sample_s,
            "last_sample_s": self.last_sample_s,
            "history_span_s": self.history_span_s,
            "memory_peaks_weight": _finite(self.memory_peaks_weight),
            "resources": {name: r.to_dict() for name, r in self.resources.items()},
            "reason": self.reason,
            "notes": list(self.notes),
        }


def _finite(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None
