"""Why a recommendation has its values: each intermediate number of the estimator.

:class:`Explanation` and its parts hold scalars (one container). ``to_dict()`` is
JSON-safe: infinite multipliers become ``None`` with ``"infinite": true`` beside them,
so the UI can say "no history yet". ``recommend`` computes the numbers of R rows as
arrays (R,) in :class:`ExplainedRows`, which builds one row's :class:`Explanation` only
when it is asked for.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True)
class BoundExplanation:
    """One resource, one bound (target, lower or upper)."""

    source: str  # "percentile" or "peak"
    percentile: float | None  # the percentile read, None for the peak estimator
    raw: float  # histogram value read: cores or bytes (a bucket edge)
    base: int  # raw in millicores or bytes, truncated
    with_margin: int  # base + trunc(base * margin), memory: at least base + floor
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
    # What was left out for lack of samples (``recommend(omit_unsampled=True)``):
    # ``{"resource", "bounds", "reason"}`` entries.
    omitted: tuple[dict[str, Any], ...] = ()

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
            "omitted": [dict(o) for o in self.omitted],
        }


def _finite(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


@dataclass(frozen=True)
class BoundArrays:
    """One resource, one bound, for R rows: the fields of :class:`BoundExplanation`."""

    source: str
    percentile: float | None
    raw: np.ndarray  # float64 (R,)
    base: np.ndarray  # int64 (R,)
    with_margin: np.ndarray  # int64 (R,)
    multiplier: np.ndarray  # float64 (R,)
    after_confidence: np.ndarray  # int64 (R,)
    pod_minimum: np.ndarray  # int64 (R,)
    value: np.ndarray  # int64 (R,)


@dataclass(frozen=True)
class ResourceArrays:
    """One resource for R rows: the fields of :class:`ResourceExplanation`."""

    resource: str
    confidence_interval_s: float
    confidence: np.ndarray  # float64 (R,)
    lower_multiplier: np.ndarray  # float64 (R,)
    upper_multiplier: np.ndarray  # float64 (R,)
    target: BoundArrays
    lower_bound: BoundArrays
    upper_bound: BoundArrays


_NO_CPU_SAMPLES = (
    "no CPU samples yet: CPU values are the pod minimum and confidence is 0"
)
_NO_MEMORY_PEAKS = "no memory peaks stored yet: memory values are the pod minimum"
_BOUNDS = ("target", "lower_bound", "upper_bound")
_ALL = list(_BOUNDS)
# Why ``recommend(omit_unsampled=True)`` leaves a resource, or a bound, out.
NO_CPU_SAMPLES = (
    "no CPU samples, so no CPU recommendation (upstream VPA would give the pod "
    "minimum share for lack of data)"
)
NO_MEMORY_SAMPLES = (
    "no memory samples, so no memory recommendation (upstream VPA would give the pod "
    "minimum share for lack of data)"
)
NO_MEMORY_UPPER_BOUND = (
    "no memory upper bound: upstream's confidence counts CPU samples, and there are "
    "none, so its bound would be the 1e14-byte clamp (90.9 TiB), not a measurement"
)


@dataclass(frozen=True)
class ExplainedRows:
    """The explanations of R rows as arrays (R,); ``explanation(i)`` builds row i's."""

    profile: str
    margin_fraction: float
    containers_in_pod: np.ndarray  # int64 (R,)
    sample_count: np.ndarray  # int64 (R,)
    first_sample_s: np.ndarray  # float64 (R,), NaN = none
    last_sample_s: np.ndarray  # float64 (R,), NaN = none
    memory_peaks_weight: np.ndarray  # float64 (R,)
    resources: Mapping[str, ResourceArrays]  # the controlled resources only
    reason: str | None  # why there is no recommendation (the same for every row)
    is_memory_controlled: bool
    # (resource, bound) -> bool (R,): values left out for lack of samples.
    missing: Mapping[tuple[str, str], np.ndarray] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.sample_count)

    @functools.cached_property
    def _columns(self) -> dict[str, Any]:
        # Every array once as a Python list (tolist() gives the ints, floats and bools
        # that int()/float() of each element would, far faster), plus the JSON-safe
        # forms to_dict() uses: None for infinities, and the "infinite" flags.
        resources = {}
        for name, res in self.resources.items():
            bounds = {}
            for bound in _BOUNDS:
                arrays: BoundArrays = getattr(res, bound)
                bounds[bound] = {
                    "raw": arrays.raw.tolist(),
                    "base": arrays.base.tolist(),
                    "with_margin": arrays.with_margin.tolist(),
                    "multiplier": arrays.multiplier.tolist(),
                    "after_confidence": arrays.after_confidence.tolist(),
                    "pod_minimum": arrays.pod_minimum.tolist(),
                    "pod_minimum_applied": (
                        arrays.after_confidence < arrays.pod_minimum
                    ).tolist(),
                    "value": arrays.value.tolist(),
                    "raw_json": _finite_list(arrays.raw),
                    "multiplier_json": _finite_list(arrays.multiplier),
                    "multiplier_infinite": np.isinf(arrays.multiplier).tolist(),
                }
            resources[name] = {
                "confidence": res.confidence.tolist(),
                "lower_multiplier": res.lower_multiplier.tolist(),
                "upper_multiplier": res.upper_multiplier.tolist(),
                "confidence_json": _finite_list(res.confidence),
                "lower_multiplier_json": _finite_list(res.lower_multiplier),
                "upper_multiplier_json": _finite_list(res.upper_multiplier),
                "upper_multiplier_infinite": np.isinf(res.upper_multiplier).tolist(),
                "bounds": bounds,
            }
        return {
            "containers_in_pod": self.containers_in_pod.tolist(),
            "sample_count": self.sample_count.tolist(),
            "first_sample_s": self.first_sample_s.tolist(),
            "last_sample_s": self.last_sample_s.tolist(),
            "memory_peaks_weight": self.memory_peaks_weight.tolist(),
            "memory_peaks_weight_json": _finite_list(self.memory_peaks_weight),
            "resources": resources,
        }

    def _row(self, i: int) -> tuple[int, float, float, float, tuple[str, ...]]:
        """Sample count, first and last sample, memory weight and notes of row i."""
        c = self._columns
        count = c["sample_count"][i]
        weight = c["memory_peaks_weight"][i]
        omitted = {o["resource"] for o in self.omitted(i) if o["bounds"] == _ALL}
        notes: tuple[str, ...] = ()
        if self.reason is None and count == 0 and "cpu" not in omitted:
            notes += (_NO_CPU_SAMPLES,)
        if weight == 0 and self.is_memory_controlled and "memory" not in omitted:
            notes += (_NO_MEMORY_PEAKS,)
        return count, c["first_sample_s"][i], c["last_sample_s"][i], weight, notes

    def omitted(self, i: int) -> tuple[dict[str, Any], ...]:
        """What row ``i`` leaves out for lack of samples, and why."""
        out = []
        for resource in self.resources:
            bounds = [
                bound
                for bound in _BOUNDS
                if (mask := self.missing.get((resource, bound))) is not None
                and bool(mask[i])
            ]
            if not bounds:
                continue
            if bounds == list(_ALL):
                reason = NO_CPU_SAMPLES if resource == "cpu" else NO_MEMORY_SAMPLES
            else:
                reason = NO_MEMORY_UPPER_BOUND
            out.append({"resource": resource, "bounds": bounds, "reason": reason})
        return tuple(out)

    def explanation(self, i: int) -> Explanation:
        """The :class:`Explanation` of row ``i``."""
        c = self._columns
        count, first, last, weight, notes = self._row(i)
        resources = {}
        for name, res in c["resources"].items():
            bounds = {
                bound: BoundExplanation(
                    source=getattr(self.resources[name], bound).source,
                    percentile=getattr(self.resources[name], bound).percentile,
                    raw=b["raw"][i],
                    base=b["base"][i],
                    with_margin=b["with_margin"][i],
                    multiplier=b["multiplier"][i],
                    after_confidence=b["after_confidence"][i],
                    pod_minimum=b["pod_minimum"][i],
                    pod_minimum_applied=b["pod_minimum_applied"][i],
                    value=b["value"][i],
                )
                for bound, b in res["bounds"].items()
            }
            resources[name] = ResourceExplanation(
                resource=name,
                confidence=res["confidence"][i],
                confidence_interval_s=self.resources[name].confidence_interval_s,
                lower_multiplier=res["lower_multiplier"][i],
                upper_multiplier=res["upper_multiplier"][i],
                target=bounds["target"],
                lower_bound=bounds["lower_bound"],
                upper_bound=bounds["upper_bound"],
            )
        return Explanation(
            profile=self.profile,
            margin_fraction=self.margin_fraction,
            containers_in_pod=c["containers_in_pod"][i],
            sample_count=count,
            first_sample_s=None if math.isnan(first) else first,
            last_sample_s=None if math.isnan(last) else last,
            history_span_s=0.0 if math.isnan(first) else last - first,
            memory_peaks_weight=weight,
            resources=resources,
            reason=self.reason,
            notes=notes,
            omitted=self.omitted(i),
        )

    def subset(self, indices: Sequence[int]) -> ExplainedRows:
        """The rows ``indices`` only, in that order (row j is ``indices[j]``)."""
        idx = np.asarray(indices, dtype=np.int64).reshape(-1)

        def take_bound(b: BoundArrays) -> BoundArrays:
            return dataclasses.replace(
                b,
                raw=b.raw[idx],
                base=b.base[idx],
                with_margin=b.with_margin[idx],
                multiplier=b.multiplier[idx],
                after_confidence=b.after_confidence[idx],
                pod_minimum=b.pod_minimum[idx],
                value=b.value[idx],
            )

        return dataclasses.replace(
            self,
            containers_in_pod=self.containers_in_pod[idx],
            sample_count=self.sample_count[idx],
            first_sample_s=self.first_sample_s[idx],
            last_sample_s=self.last_sample_s[idx],
            memory_peaks_weight=self.memory_peaks_weight[idx],
            missing={key: mask[idx] for key, mask in self.missing.items()},
            resources={
                name: dataclasses.replace(
                    res,
                    confidence=res.confidence[idx],
                    lower_multiplier=res.lower_multiplier[idx],
                    upper_multiplier=res.upper_multiplier[idx],
                    target=take_bound(res.target),
                    lower_bound=take_bound(res.lower_bound),
                    upper_bound=take_bound(res.upper_bound),
                )
                for name, res in self.resources.items()
            },
        )

    def to_dicts(self, indices: Sequence[int]) -> list[dict[str, Any]]:
        """``to_dict(i)`` of each index, converting only those rows' numbers."""
        part = self.subset(indices)
        return [part.to_dict(j) for j in range(len(part))]

    def to_dict(self, i: int) -> dict[str, Any]:
        """``explanation(i).to_dict()``, built from the arrays without the objects."""
        c = self._columns
        count, first, last, _weight, notes = self._row(i)
        resources = {}
        for name, res in c["resources"].items():
            entry: dict[str, Any] = {
                "resource": name,
                "unit": "millicores" if name == "cpu" else "bytes",
                "confidence": res["confidence_json"][i],
                "confidence_interval_s": self.resources[name].confidence_interval_s,
                "lower_multiplier": res["lower_multiplier_json"][i],
                "upper_multiplier": res["upper_multiplier_json"][i],
                "upper_multiplier_infinite": res["upper_multiplier_infinite"][i],
            }
            for bound, b in res["bounds"].items():
                arrays = getattr(self.resources[name], bound)
                entry[bound] = {
                    "source": arrays.source,
                    "percentile": arrays.percentile,
                    "raw": b["raw_json"][i],
                    "base": b["base"][i],
                    "with_margin": b["with_margin"][i],
                    "multiplier": b["multiplier_json"][i],
                    "multiplier_infinite": b["multiplier_infinite"][i],
                    "after_confidence": b["after_confidence"][i],
                    "pod_minimum": b["pod_minimum"][i],
                    "pod_minimum_applied": b["pod_minimum_applied"][i],
                    "value": b["value"][i],
                }
            resources[name] = entry
        return {
            "profile": self.profile,
            "margin_fraction": self.margin_fraction,
            "containers_in_pod": c["containers_in_pod"][i],
            "sample_count": count,
            "first_sample_s": None if math.isnan(first) else first,
            "last_sample_s": None if math.isnan(last) else last,
            "history_span_s": 0.0 if math.isnan(first) else last - first,
            "memory_peaks_weight": c["memory_peaks_weight_json"][i],
            "resources": resources,
            "reason": self.reason,
            "notes": list(notes),
            "omitted": [dict(o) for o in self.omitted(i)],
        }


def _finite_list(values: np.ndarray) -> list[float | None]:
    """``values`` as Python floats, None where infinite or NaN (as ``_finite``)."""
    out: list[float | None] = values.tolist()
    for i in np.flatnonzero(~np.isfinite(values)).tolist():
        out[i] = None
    return out
