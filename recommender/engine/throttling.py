"""CPU throttling awareness: raise the CPU target of a container its limit throttles."""
# cAdvisor counts the CFS periods in which a container had runnable tasks
# (``container_cpu_cfs_periods_total``) and those in which its CPU quota ran out
# (``container_cpu_cfs_throttled_periods_total``). Usage cannot read above a limit, so
# the CPU histogram of a container throttled in many periods under-reads what it needs,
# and upstream's estimator, which sees only usage, keeps recommending too little. A
# profile with ``throttling_boost`` > 0 raises the CPU target of a container whose
# throttled share of periods over the recent window exceeds ``throttling_threshold`` by
# that fraction (Go's ``ScaleResource`` truncation, as the margin), and lifts the upper
# bound to the new target so that the band still holds it. The lower bound is left
# alone. ``throttling_boost`` = 0 (every named profile, ``vpa`` included) turns the rule
# off.

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from .profiles import Profile


@dataclass(frozen=True)
class ThrottlingBoost:
    """One container's boost: the ratio seen, the rule, the CPU values before/after."""

    ratio: float  # throttled periods / periods over the window, in [0, 1]
    periods: float  # CFS periods counted over the window
    threshold: float
    boost: float
    target_before: int  # millicores
    target_after: int
    upper_before: int
    upper_after: int

    @property
    def note(self) -> str:
        """The sentence the explanation shows."""
        raised = 100.0 * (self.target_after - self.target_before)
        share = raised / self.target_before if self.target_before else 0.0
        return (
            f"CPU target raised {share:.0f}% because the container was throttled in"
            f" {100.0 * self.ratio:.0f}% of periods"
            f" (threshold {100.0 * self.threshold:g}%)"
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dict, stored with the explanation under ``throttling``."""
        return {
            "ratio": self.ratio,
            "periods": self.periods,
            "threshold": self.threshold,
            "boost": self.boost,
            "target_before": self.target_before,
            "target_after": self.target_after,
            "upper_before": self.upper_before,
            "upper_after": self.upper_after,
            "note": self.note,
        }


def throttling_ratio(throttled_periods: float, periods: float) -> float | None:
    """Throttled share of periods; None without periods (no limit, or no data)."""
    if not (periods > 0 and math.isfinite(periods)) or not math.isfinite(
        throttled_periods
    ):
        return None
    return min(max(throttled_periods / periods, 0.0), 1.0)


def boost_cpu(
    *,
    profile: Profile,
    target_millicores: int,
    upper_millicores: int,
    throttled_periods: float,
    periods: float,
) -> ThrottlingBoost | None:
    """The boost of one container, or None when the rule does not apply (off, no
    periods counted, or a ratio at or below the threshold)."""
    if profile.throttling_boost <= 0:
        return None
    ratio = throttling_ratio(throttled_periods, periods)
    if ratio is None or ratio <= profile.throttling_threshold:
        return None
    after = target_millicores + math.trunc(target_millicores * profile.throttling_boost)
    return ThrottlingBoost(
        ratio=ratio,
        periods=float(periods),
        threshold=profile.throttling_threshold,
        boost=profile.throttling_boost,
        target_before=target_millicores,
        target_after=after,
        upper_before=upper_millicores,
        upper_after=max(upper_millicores, after),
    )
