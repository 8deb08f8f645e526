"""Upstream's estimator chain (logic/estimator.go, logic/recommender.go) over rows.

``recommend`` reads percentiles of R aggregate rows at once (arrays (R,)), applies the
margin, the confidence multipliers, the 1e14 clamp and the pod minimum with Go's
truncation at every step, and returns them as arrays (:class:`Recommendations`): a
sequence whose :class:`ContainerRecommendation` of a row is built only when it is read.
The rows' explanations stay arrays (:class:`ExplainedRows`) until one is read.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

import numpy as np
import numpy.typing as npt

from .aggregation import AggregateSet
from .explanation import BoundArrays, ExplainedRows, Explanation, ResourceArrays
from .gomath import go_pow
from .profiles import Profile
from .resources import CPU, MAX_RESOURCE_AMOUNT, MEMORY, RESOURCE_NAMES, Resources

# logic/recommender.go: the upper bound is multiplied by (1 + 1/confidence) ** 1.
UPPER_CONFIDENCE_MULTIPLIER = 1.0
UPPER_CONFIDENCE_EXPONENT = 1.0
# logic/recommender.go: the lower bound is multiplied by (1 + 0.001/confidence) ** -2.
LOWER_CONFIDENCE_MULTIPLIER = 0.001
LOWER_CONFIDENCE_EXPONENT = -2.0


@dataclass(frozen=True, eq=False)
class ContainerRecommendation:
    """Target and bounds of one container (CPU millicores, memory bytes)."""

    target: Resources
    lower_bound: Resources
    upper_bound: Resources
    uncapped_target: Resources
    # Row ``_index`` of the explanations computed for the whole call (see explanation).
    _explained: ExplainedRows = field(repr=False)
    _index: int = field(repr=False)

    @functools.cached_property
    def explanation(self) -> Explanation:
        """Every number behind the values (built on first access, then kept)."""
        return self._explained.explanation(self._index)

    def explanation_dict(self) -> dict[str, Any]:
        """``explanation.to_dict()``, built straight from the shared arrays (faster)."""
        return self._explained.to_dict(self._index)

    def __eq__(self, other: object) -> bool:
        # Defining __eq__ leaves the class unhashable, as before (the explanation
        # holds a dict).
        if not isinstance(other, ContainerRecommendation):
            return NotImplemented
        return (
            self.target == other.target
            and self.lower_bound == other.lower_bound
            and self.upper_bound == other.upper_bound
            and self.uncapped_target == other.uncapped_target
            and self.explanation == other.explanation
        )


def resource_amounts_from_float(x: npt.ArrayLike) -> npt.NDArray[np.int64]:
    """Go ``resourceAmountFromFloat``: <0 -> 0, >1e14 -> 1e14, else trunc; NaN -> 0."""
    # np.minimum keeps NaN and np.fmax drops it (fmax(NaN, 0) = 0); the cast to int64
    # truncates what is left, which lies in [0, 1e14]. Three passes over the values
    # instead of the seven of the where() chain it replaced (hot at 100,000 rows).
    out = np.minimum(np.asarray(x, dtype=np.float64), float(MAX_RESOURCE_AMOUNT))
    return np.asarray(np.fmax(out, 0.0)).astype(np.int64)


def resource_amount_from_float(x: float) -> int:
    """Scalar :func:`resource_amounts_from_float` (upstream model/types.go)."""
    return int(resource_amounts_from_float(np.array([x]))[0])


def scale_resources(
    amount: npt.ArrayLike, factor: np.ndarray | float
) -> npt.NDArray[np.int64]:
    """Go ``ScaleResource``: ``resourceAmountFromFloat(amount * factor)``, 0*Inf=0."""
    with np.errstate(invalid="ignore"):
        return resource_amounts_from_float(
            np.asarray(amount, dtype=np.float64) * factor
        )


def cpu_amount_from_cores(cores: float) -> int:
    """Go ``CPUAmountFromCores``: millicores, truncated and clamped."""
    return resource_amount_from_float(cores * 1000.0)


def with_margin(
    amount: npt.ArrayLike, margin_fraction: float | np.ndarray
) -> npt.NDArray[np.int64]:
    """Upstream marginEstimator: ``x + ScaleResource(x, margin)``."""
    values = np.asarray(amount, dtype=np.int64)
    return values + scale_resources(values, margin_fraction)


def memory_margins(
    profile: Profile, peak_raw: np.ndarray, median_raw: np.ndarray
) -> np.ndarray:
    """vpaweb's adaptive memory margin per row (``memory_margin_spread`` > 0): the base
    margin plus ``memory_margin_spread`` times the spread of the stored daily peaks
    (highest / median - 1, 0 without peaks), at most ``memory_margin_max``."""
    peak = np.asarray(peak_raw, dtype=np.float64)
    median = np.maximum(np.asarray(median_raw, dtype=np.float64), 1.0)
    spread = np.where(peak > median, peak / median - 1.0, 0.0)
    return np.minimum(
        profile.memory_margin_base + profile.memory_margin_spread * spread,
        profile.memory_margin_max,
    )


def go_minutes(duration_s: float) -> float:
    """Go ``Duration.Minutes()`` of a duration given in seconds."""
    ns = round(duration_s * 1e9)
    minutes, rem = divmod(ns, 60 * 10**9)
    return float(minutes) + float(rem) / (60 * 1e9)


def confidences(
    first_s: np.ndarray, last_s: np.ndarray, count: np.ndarray, interval_s: float
) -> np.ndarray:
    """Upstream ``getConfidence``: min(history span, samples) in intervals."""
    span = np.nan_to_num(
        np.asarray(last_s, dtype=np.float64) - np.asarray(first_s, dtype=np.float64),
        nan=0.0,
    )
    lifespan = span / interval_s
    samples = np.asarray(count, dtype=np.float64) / go_minutes(interval_s)
    return np.minimum(lifespan, samples)


def confidence_multipliers(
    multiplier: float, exponent: float, confidence: np.ndarray
) -> np.ndarray:
    """Go ``math.Pow(1 + multiplier/confidence, exponent)`` (Inf when conf = 0)."""
    conf = np.asarray(confidence, dtype=np.float64)
    with np.errstate(divide="ignore"):
        x = 1.0 + multiplier / conf
    if exponent == 1.0:
        return x
    if exponent == -2.0:  # Go's Pow loop gives exactly 1/(x*x) here (docs/engine.md)
        with np.errstate(over="ignore"):
            return 1.0 / (x * x)
    return np.array([go_pow(float(v), exponent) for v in x.ravel()]).reshape(x.shape)


def _int_array(values: Sequence[int]) -> np.ndarray:
    """int64 (R,) of ``values``; a ``range`` without a Python loop over it."""
    if isinstance(values, range):
        return np.arange(values.start, values.stop, values.step, dtype=np.int64)
    return np.asarray(values, dtype=np.int64).reshape(-1)


def _check_rows(
    aggregates: AggregateSet, rows: Sequence[int], containers_in_pod: Sequence[int]
) -> tuple[np.ndarray, np.ndarray]:
    r = _int_array(rows)
    n = _int_array(containers_in_pod)
    if r.size and (r.min() < 0 or r.max() >= len(aggregates)):
        raise ValueError(f"rows: must be in [0, {len(aggregates)})")
    if n.shape != r.shape:
        raise ValueError("containers_in_pod: must have one entry per row")
    if n.size and n.min() < 1:
        raise ValueError("containers_in_pod: every entry must be >= 1")
    return r, n


def recommend(
    aggregates: AggregateSet,
    *,
    rows: Sequence[int],
    profile: Profile,
    containers_in_pod: Sequence[int],
    controlled_resources: Sequence[str] = RESOURCE_NAMES,
    omit_unsampled: bool = False,
) -> Recommendations:
    """Upstream's recommendation (``pkg/recommender/logic/recommender.go``) per row;
    pod minimum split over containers_in_pod.

    Upstream recommends the pod minimum for a resource without samples, and a memory
    upper bound of 1e14 bytes when there are no CPU samples (its confidence counts
    CPU samples only). With ``omit_unsampled`` those values are left out instead
    (None in the rows, listed with the reason in the explanation's ``omitted``):
    CPU without CPU samples, memory without memory samples, the memory upper bound
    without CPU samples. Every other value is upstream's either way.
    """
    if not isinstance(aggregates, AggregateSet):
        raise ValueError("aggregates: must be an AggregateSet")
    if not isinstance(profile, Profile):
        raise ValueError("profile: must be a Profile")
    if profile.histogram_key != aggregates.profile.histogram_key:
        raise ValueError(
            "profile: its histogram settings differ from the aggregates' profile"
        )
    controlled = tuple(controlled_resources)
    for res in controlled:
        if res not in RESOURCE_NAMES:
            raise ValueError(f"controlled_resources: unknown resource {res!r}")
    r, n = _check_rows(aggregates, rows, containers_in_pod)
    first = aggregates.first_sample_s[r]
    last = aggregates.last_sample_s_[r]
    count = aggregates.total_samples[r]
    chains = _chains(aggregates, r, n, profile)
    missing: dict[tuple[str, str], np.ndarray] = {}
    if omit_unsampled:
        no_cpu = count == 0
        no_memory = aggregates.memory.is_empty(r)
        for res in controlled:
            for bound in _BOUNDS:
                mask = no_cpu if res == CPU else no_memory
                if res == MEMORY and bound == "upper_bound":
                    mask = no_memory | no_cpu
                if mask.any():
                    missing[res, bound] = mask
    explained = ExplainedRows(
        profile=profile.name,
        margin_fraction=profile.margin_fraction,
        containers_in_pod=n,
        sample_count=count,
        first_sample_s=first,
        last_sample_s=last,
        memory_peaks_weight=aggregates.memory.total[r],
        resources={res: chains[res] for res in controlled},
        reason=(
            None
            if controlled
            else "no controlled resources:"
            " the container policy controls neither cpu nor memory"
        ),
        is_memory_controlled=MEMORY in controlled,
        missing=missing,
    )
    return Recommendations(
        {
            (res, bound): getattr(chains[res], bound).value
            for res in controlled
            for bound in _BOUNDS
        },
        explained,
        missing,
    )


_BOUNDS = ("target", "lower_bound", "upper_bound")


class Recommendations(Sequence[ContainerRecommendation]):
    """The R recommendations of one ``recommend`` call, kept as arrays (R,).

    A sequence of :class:`ContainerRecommendation`: each is built when it is read, so
    a caller that needs the numbers of many rows reads :meth:`values` (int64 arrays)
    and :meth:`explanation_dicts` of the rows it keeps instead.
    """

    def __init__(
        self,
        values: Mapping[tuple[str, str], np.ndarray],
        explained: ExplainedRows,
        missing: Mapping[tuple[str, str], np.ndarray] | None = None,
    ) -> None:
        self._values = dict(values)
        self._explained = explained
        self._missing = dict(missing or {})
        self._lists: dict[tuple[str, str], list[int | None]] | None = None

    def __len__(self) -> int:
        return len(self._explained)

    @overload
    def __getitem__(self, index: int) -> ContainerRecommendation: ...

    @overload
    def __getitem__(self, index: slice) -> list[ContainerRecommendation]: ...

    def __getitem__(
        self, index: int | slice
    ) -> ContainerRecommendation | list[ContainerRecommendation]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        i = range(len(self))[index]  # IndexError and negative indices as a list's
        if self._lists is None:
            self._lists = {key: self._value_list(*key) for key in self._values}
        lists = self._lists

        def bound(name: str) -> Resources:
            cpu = lists.get((CPU, name))
            memory = lists.get((MEMORY, name))
            return Resources(
                None if cpu is None else cpu[i], None if memory is None else memory[i]
            )

        target = bound("target")
        return ContainerRecommendation(
            target,
            bound("lower_bound"),
            bound("upper_bound"),
            target,
            self._explained,
            i,
        )

    def __eq__(self, other: object) -> bool:
        # Equal to a list, a tuple or another Recommendations of equal rows.
        if not isinstance(other, Recommendations | list | tuple):
            return NotImplemented
        return len(self) == len(other) and list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]

    def values(self, resource: str, bound: str) -> np.ndarray | None:
        """int64 (R,) of one resource and bound (``target``, ``lower_bound``,
        ``upper_bound``); None when the resource is not controlled."""
        if resource not in RESOURCE_NAMES or bound not in _BOUNDS:
            raise ValueError(f"no values for resource {resource!r}, bound {bound!r}")
        return self._values.get((resource, bound))

    def missing(self, resource: str, bound: str) -> np.ndarray | None:
        """bool (R,): the rows whose value of this resource and bound was left out
        for lack of samples (``recommend(omit_unsampled=True)``); None: no row."""
        return self._missing.get((resource, bound))

    def value_list(self, resource: str, bound: str) -> list[int | None] | None:
        """:meth:`values` as Python ints, None where :meth:`missing` (or None when
        the resource is not controlled)."""
        if self.values(resource, bound) is None:
            return None
        return self._value_list(resource, bound)

    def _value_list(self, resource: str, bound: str) -> list[int | None]:
        out: list[int | None] = self._values[resource, bound].tolist()
        mask = self.missing(resource, bound)
        if mask is not None:
            for i in np.flatnonzero(mask).tolist():
                out[i] = None
        return out

    def explanation_dicts(self, indices: Sequence[int]) -> list[dict[str, Any]]:
        """``self[i].explanation_dict()`` of each index, built for those rows only."""
        return self._explained.to_dicts(indices)


def recommendation_arrays(
    aggregates: AggregateSet,
    *,
    rows: Sequence[int],
    profile: Profile,
    containers_in_pod: Sequence[int],
    percentiles: dict[Any, np.ndarray] | None = None,
) -> dict[str, ResourceArrays]:
    """:func:`recommend`'s numbers as arrays (R,) per resource, without row objects.

    For callers that need many rows many times (replay); the caller checks that the
    profile matches the aggregates' histograms. ``percentiles``: a dict the caller
    keeps while the aggregates and rows stay the same, where the histograms'
    percentiles read are kept and read again (profiles of one histogram reading the
    same percentiles read them once).
    """
    r, n = _check_rows(aggregates, rows, containers_in_pod)
    return _chains(aggregates, r, n, profile, percentiles)


def _chains(
    aggregates: AggregateSet,
    r: np.ndarray,
    n: np.ndarray,
    profile: Profile,
    percentiles: dict[Any, np.ndarray] | None = None,
) -> dict[str, ResourceArrays]:
    first = aggregates.first_sample_s[r]
    last = aggregates.last_sample_s_[r]
    count = aggregates.total_samples[r]
    fraction = 1.0 / n.astype(np.float64)
    pod_min_cpu = scale_resources(
        np.int64(cpu_amount_from_cores(profile.pod_min_cpu_millicores * 0.001)),
        fraction,
    )
    pod_min_mem = scale_resources(np.int64(profile.pod_min_memory_bytes), fraction)
    return {
        CPU: _resource_chain(
            aggregates, r, profile, CPU, first, last, count, pod_min_cpu, percentiles
        ),
        MEMORY: _resource_chain(
            aggregates, r, profile, MEMORY, first, last, count, pod_min_mem, percentiles
        ),
    }


def _resource_chain(
    aggregates: AggregateSet,
    rows: np.ndarray,
    profile: Profile,
    resource: str,
    first: np.ndarray,
    last: np.ndarray,
    count: np.ndarray,
    pod_min: np.ndarray,
    percentiles: dict[Any, np.ndarray] | None = None,
) -> ResourceArrays:
    """Upstream's estimator chain of one resource for all rows, every step kept."""
    if resource == CPU:
        hist = aggregates.cpu
        interval = profile.confidence_interval_cpu_s
        pcts = (
            profile.cpu_target_percentile,
            profile.cpu_lower_percentile,
            profile.cpu_upper_percentile,
        )
        peak = (False, False, False)
        to_amount = 1000.0  # CPUAmountFromCores
    else:
        hist = aggregates.memory
        interval = profile.confidence_interval_memory_s
        pcts = (
            profile.memory_target_percentile,
            profile.memory_lower_percentile,
            profile.memory_upper_percentile,
        )
        is_peak = profile.memory_estimator == "peak"
        peak = (is_peak, False, is_peak)
        to_amount = 1.0  # MemoryAmountFromBytes
    conf = confidences(first, last, count, interval)
    lower_mult = confidence_multipliers(
        LOWER_CONFIDENCE_MULTIPLIER, LOWER_CONFIDENCE_EXPONENT, conf
    )
    upper_mult = confidence_multipliers(
        UPPER_CONFIDENCE_MULTIPLIER, UPPER_CONFIDENCE_EXPONENT, conf
    )
    # The peak estimator reads the highest stored peak: the percentile p = 1.
    read_ps = [1.0 if use_peak else p for p, use_peak in zip(pcts, peak, strict=True)]
    margin_fraction: float | np.ndarray = profile.margin_fraction
    adaptive = resource == MEMORY and profile.memory_margin_spread > 0
    # The adaptive memory margin reads the highest and the median stored peak too.
    ps = [*read_ps, 1.0, 0.5] if adaptive else read_ps
    key = (resource, tuple(ps))
    raws = None if percentiles is None else percentiles.get(key)
    if raws is None:
        raws = hist.percentiles(rows, ps)
        if percentiles is not None:
            percentiles[key] = raws
    if adaptive:
        margin_fraction = memory_margins(profile, raws[3], raws[4])
        raws = raws[:3]
    pod_mins = np.broadcast_to(pod_min, rows.shape)
    bounds = []
    for name, p, use_peak, mult, raw in zip(
        ("target", "lower", "upper"),
        pcts,
        peak,
        (np.ones(rows.size), lower_mult, upper_mult),
        raws,
        strict=True,
    ):
        base = resource_amounts_from_float(raw * to_amount)
        margin = with_margin(base, margin_fraction)
        if resource == MEMORY and profile.memory_margin_min_bytes > 0:
            # vpaweb: the margin is at least memory_margin_min_bytes.
            margin = np.maximum(margin, base + profile.memory_margin_min_bytes)
        after = margin if name == "target" else scale_resources(margin, mult)
        bounds.append(
            BoundArrays(
                source="peak" if use_peak else "percentile",
                percentile=None if use_peak else p,
                raw=raw,
                base=base,
                with_margin=margin,
                multiplier=mult,
                after_confidence=after,
                pod_minimum=pod_mins,
                value=np.maximum(after, pod_min),
            )
        )
    return ResourceArrays(
        resource=resource,
        confidence_interval_s=interval,
        confidence=conf,
        lower_multiplier=lower_mult,
        upper_multiplier=upper_mult,
        target=bounds[0],
        lower_bound=bounds[1],
        upper_bound=bounds[2],
    )
