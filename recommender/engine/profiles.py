"""Recommendation profiles: upstream VPA's flags as data, plus vpaweb's named variants.

A :class:`Profile` is a frozen bundle of scalars (no arrays). ``PROFILES["vpa"]`` equals
upstream VPA 1.8.0's defaults (recommender/config/config.go,
model/aggregations_config.go).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

# recommender/config/config.go: --target-cpu-percentile and friends.
TARGET_PERCENTILE = 0.9  # --target-cpu-percentile, --target-memory-percentile
LOWER_BOUND_PERCENTILE = 0.5  # --recommendation-lower-bound-{cpu,memory}-percentile
UPPER_BOUND_PERCENTILE = 0.95  # --recommendation-upper-bound-{cpu,memory}-percentile
SAFETY_MARGIN_FRACTION = 0.15  # config.go: --recommendation-margin-fraction
HALF_LIFE_S = (
    86400.0  # aggregations_config.go: DefaultCPU/MemoryHistogramDecayHalfLife (24h)
)
MEMORY_AGGREGATION_INTERVAL_S = (
    86400.0  # aggregations_config.go: DefaultMemoryAggregationInterval
)
MEMORY_AGGREGATION_INTERVAL_COUNT = 8  # aggregations_config.go: ...IntervalCount
CONFIDENCE_INTERVAL_S = 86400.0  # config.go: --confidence-interval-cpu / -memory (24h)
POD_MIN_CPU_MILLICORES = 25  # config.go: --pod-recommendation-min-cpu-millicores
POD_MIN_MEMORY_BYTES = (
    250 * 1024 * 1024
)  # config.go: --pod-recommendation-min-memory-mb (MiB)
OOM_BUMP_UP_RATIO = 1.2  # aggregations_config.go: DefaultOOMBumpUpRatio
OOM_MIN_BUMP_UP_BYTES = 100 * 1024 * 1024  # aggregations_config.go: DefaultOOMMinBumpUp

# vpaweb: a container throttled in more than a quarter of its CFS periods is starved.
THROTTLING_THRESHOLD = 0.25

MEMORY_ESTIMATORS = ("percentile", "peak")
DEFAULT_PROFILE = "vpa"


@dataclass(frozen=True)
class Profile:
    """Every knob of the recommendation model; defaults are upstream's."""

    name: str
    cpu_target_percentile: float = TARGET_PERCENTILE
    cpu_lower_percentile: float = LOWER_BOUND_PERCENTILE
    cpu_upper_percentile: float = UPPER_BOUND_PERCENTILE
    memory_target_percentile: float = TARGET_PERCENTILE
    memory_lower_percentile: float = LOWER_BOUND_PERCENTILE
    memory_upper_percentile: float = UPPER_BOUND_PERCENTILE
    memory_estimator: str = "percentile"  # or "peak": highest stored peak
    margin_fraction: float = SAFETY_MARGIN_FRACTION
    cpu_half_life_s: float = HALF_LIFE_S
    memory_half_life_s: float = HALF_LIFE_S
    memory_window_s: float = MEMORY_AGGREGATION_INTERVAL_S
    memory_window_count: int = MEMORY_AGGREGATION_INTERVAL_COUNT
    confidence_interval_cpu_s: float = CONFIDENCE_INTERVAL_S
    confidence_interval_memory_s: float = CONFIDENCE_INTERVAL_S
    pod_min_cpu_millicores: int = POD_MIN_CPU_MILLICORES
    pod_min_memory_bytes: int = POD_MIN_MEMORY_BYTES
    oom_bump_ratio: float = OOM_BUMP_UP_RATIO
    oom_min_bump_bytes: int = OOM_MIN_BUMP_UP_BYTES
    # vpaweb's adaptive memory margin (0 = off, upstream's margin_fraction): the memory
    # values get margin min(memory_margin_base + memory_margin_spread * spread,
    # memory_margin_max), spread = highest stored peak / median peak - 1.
    memory_margin_spread: float = 0.0
    memory_margin_base: float = SAFETY_MARGIN_FRACTION
    memory_margin_max: float = 1.0
    # vpaweb's smallest memory margin in bytes (0 = off, upstream): every memory value
    # gets base + max(trunc(base * margin), memory_margin_min_bytes), so that a small
    # container's margin is not a few MiB.
    memory_margin_min_bytes: int = 0
    # vpaweb's CPU throttling rule (engine/throttling.py; 0 = off): raise the CPU target
    # by this fraction when the throttled share of CFS periods exceeds the threshold.
    throttling_boost: float = 0.0
    throttling_threshold: float = THROTTLING_THRESHOLD

    def __post_init__(self) -> None:
        _validate(self)

    @property
    def histogram_key(self) -> tuple[float, float, float]:
        """Profiles with equal keys can share one AggregateSet (same histograms)."""
        return (self.cpu_half_life_s, self.memory_half_life_s, self.memory_window_s)

    @property
    def memory_history_s(self) -> float:
        """Upstream's aggregation window: interval * count (8 days by default)."""
        return self.memory_window_s * self.memory_window_count

    def with_overrides(self, **fields: Any) -> Profile:
        """A copy with fields changed; ValueError naming an unknown or invalid field."""
        known = {f.name for f in dataclasses.fields(self)}
        for key in fields:
            if key not in known:
                raise ValueError(f"{key}: unknown profile field")
        return dataclasses.replace(self, **fields)

    def to_dict(self) -> dict[str, Any]:
        """All fields as plain JSON-friendly values."""
        return dataclasses.asdict(self)


def _validate(p: Profile) -> None:
    if not isinstance(p.name, str) or not p.name:
        raise ValueError("name: must be a non-empty string")
    for field in (
        "cpu_target_percentile",
        "cpu_lower_percentile",
        "cpu_upper_percentile",
        "memory_target_percentile",
        "memory_lower_percentile",
        "memory_upper_percentile",
    ):
        value = getattr(p, field)
        if not _is_number(value) or not 0.0 <= value <= 1.0:
            raise ValueError(f"{field}: must be a number in [0, 1], not {value!r}")
    if p.memory_estimator not in MEMORY_ESTIMATORS:
        raise ValueError(
            f"memory_estimator: must be one of {MEMORY_ESTIMATORS},"
            f" not {p.memory_estimator!r}"
        )
    # Finite too: an infinite margin would make every recommendation the maximum.
    if not _is_number(p.margin_fraction) or not (
        p.margin_fraction >= 0 and math.isfinite(p.margin_fraction)
    ):
        raise ValueError(
            f"margin_fraction: must be a finite number >= 0, not {p.margin_fraction!r}"
        )
    for field in (
        "memory_margin_spread",
        "memory_margin_base",
        "memory_margin_max",
        "throttling_boost",
    ):
        value = getattr(p, field)
        if not _is_number(value) or not (value >= 0 and math.isfinite(value)):
            raise ValueError(f"{field}: must be a finite number >= 0, not {value!r}")
    if not _is_number(p.throttling_threshold) or not (
        0.0 <= p.throttling_threshold < 1.0
    ):
        raise ValueError(
            "throttling_threshold: must be a number in [0, 1),"
            f" not {p.throttling_threshold!r}"
        )
    if p.memory_margin_base > p.memory_margin_max:
        raise ValueError(
            "memory_margin_base: must be at most memory_margin_max"
            f" ({p.memory_margin_max}), not {p.memory_margin_base!r}"
        )
    for field in (
        "cpu_half_life_s",
        "memory_half_life_s",
        "memory_window_s",
        "confidence_interval_cpu_s",
        "confidence_interval_memory_s",
    ):
        value = getattr(p, field)
        if not _is_number(value) or not (value > 0 and math.isfinite(value)):
            raise ValueError(
                f"{field}: must be a positive number of seconds, not {value!r}"
            )
    for field in (
        "memory_window_count",
        "pod_min_cpu_millicores",
        "pod_min_memory_bytes",
        "oom_min_bump_bytes",
        "memory_margin_min_bytes",
    ):
        value = getattr(p, field)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{field}: must be a non-negative integer, not {value!r}")
    if p.memory_window_count < 1:
        raise ValueError(
            f"memory_window_count: must be >= 1, not {p.memory_window_count!r}"
        )
    if not _is_number(p.oom_bump_ratio) or not (
        p.oom_bump_ratio >= 1.0 and math.isfinite(p.oom_bump_ratio)
    ):
        raise ValueError(f"oom_bump_ratio: must be >= 1, not {p.oom_bump_ratio!r}")
    # A band that does not contain its target is no band: lower <= target <= upper.
    for resource in ("cpu", "memory"):
        lower, target, upper = (
            getattr(p, f"{resource}_{bound}_percentile")
            for bound in ("lower", "target", "upper")
        )
        if lower > target:
            raise ValueError(
                f"{resource}_lower_percentile: must be at most"
                f" {resource}_target_percentile ({target}), not {lower!r}"
            )
        if upper < target:
            raise ValueError(
                f"{resource}_upper_percentile: must be at least"
                f" {resource}_target_percentile ({target}), not {upper!r}"
            )


def _is_number(value: object) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and not math.isnan(value)
    )


PROFILES: Mapping[str, Profile] = MappingProxyType(
    {
        "vpa": Profile(name="vpa"),
        # vivo's platform choice: CPU p95 and memory p99 targets, the rest upstream but
        # the memory upper bound, raised to p99 so that the band holds the target.
        "p95-cpu-p99-memory": Profile(
            name="p95-cpu-p99-memory",
            cpu_target_percentile=0.95,
            memory_target_percentile=0.99,
            memory_upper_percentile=0.99,
        ),
        # Memory sized to the highest stored daily peak plus the margin; CPU p95.
        "peak-memory": Profile(
            name="peak-memory", cpu_target_percentile=0.95, memory_estimator="peak"
        ),
        # Tuned by replaying real traces (docs/replay.md): memory peaks remembered
        # longer (4-day half-life) but read at p80, so that a level seen on several
        # days is kept and one lone spike is not; margin 12.5 %. Fewer memory overrun
        # days than upstream's defaults at no more memory slack on Bitbrains and
        # Google 2011 (tuned on half of the containers, checked on the other half).
        "recurring-peaks": Profile(
            name="recurring-peaks",
            memory_target_percentile=0.8,
            memory_half_life_s=4 * 86400.0,
            margin_fraction=0.125,
        ),
        # Tuned by replaying real traces (docs/replay.md): p70 of daily memory peaks
        # remembered longer (8-day half-life), plus a margin that grows with how much
        # those peaks vary (12.5 % + a quarter of highest / median peak - 1, at most
        # 25 %). Fewer memory overrun days and less memory slack (mean and median)
        # than upstream's defaults on Bitbrains and Google 2011, tuned on half of the
        # containers and checked on the other half. CPU as upstream.
        "adaptive-margin": Profile(
            name="adaptive-margin",
            memory_target_percentile=0.7,
            memory_half_life_s=8 * 86400.0,
            memory_margin_spread=0.25,
            memory_margin_base=0.125,
            memory_margin_max=0.25,
        ),
        # Tuned by replaying real traces (docs/replay.md): recurring-peaks' memory
        # target (p80 of daily peaks, 4-day half-life, +12.5 %) with a margin of at
        # least 64 MiB and a pod minimum of 128 MiB instead of 250 MiB, so that small
        # containers get a headroom in bytes rather than a flat floor. CPU: upstream's
        # percentiles with the 12.5 % margin, as recurring-peaks.
        "headroom": Profile(
            name="headroom",
            memory_target_percentile=0.8,
            memory_half_life_s=4 * 86400.0,
            margin_fraction=0.125,
            memory_margin_min_bytes=64 * 1024 * 1024,
            pod_min_memory_bytes=128 * 1024 * 1024,
        ),
    }
)


def get_profile(name: str) -> Profile:
    """The named profile; ValueError quoting an unknown name."""
    try:
        return PROFILES[name]
    except (KeyError, TypeError):
        raise ValueError(
            f"name: unknown profile {name!r}; known: {', '.join(PROFILES)}"
        ) from None
