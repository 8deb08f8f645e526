"""How much a policy change would raise a workload's targets, before it is saved.

A typo in a policy (a margin of ``15`` meaning 15 %, a ``minAllowed`` of ``40`` cores)
can multiply requests. :func:`large_increases` projects each container's current target
under the new policy and lists those that would more than double
(:data:`LARGE_INCREASE_FACTOR`); ``policies.update_policy`` refuses such a change unless
the caller confirms it (the API's ``confirm_large_increase``, the dashboard's confirm
step)."""
# The projection uses what a changed policy does to a stored recommendation without
# re-reading histograms: the safety margin scales the uncapped target by ``(1 + new
# margin) / (1 + old margin)``, and the container policies' ``minAllowed`` /
# ``maxAllowed`` clamp it. A new percentile is bounded to ``[0, 1]`` and is not
# projected (that needs the histograms; the next refresh shows its effect).

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from recommender.engine import get_profile
from recommender.engine.capping import MODE_OFF, ContainerPolicy
from recommender.engine.quantity import format_cpu, format_memory_readable
from recommender.engine.resources import CPU, RESOURCE_NAMES
from recommender.models import Policy, Recommendation, Workload
from recommender.services.policy.validation import parse_container_policies

# A change that would raise any container's target by more than this factor needs an
# explicit confirmation (docs/api.md, docs/dashboard.md).
LARGE_INCREASE_FACTOR = 2.0


@dataclass(frozen=True)
class LargeIncrease:
    """One container resource whose target the change would more than double."""

    container: str
    resource: str
    current: int
    projected: int

    @property
    def factor(self) -> float:
        """How many times the current target the projected one is."""
        return self.projected / self.current

    def describe(self) -> str:
        """``app cpu 350m → 2 (5.7×)``."""
        fmt = format_cpu if self.resource == CPU else format_memory_readable
        return (
            f"{self.container} {self.resource} {fmt(self.current)} → "
            f"{fmt(self.projected)} ({self.factor:.1f}×)"
        )


def _margin(profile_name: str, overrides: dict[str, Any]) -> float | None:
    try:
        return float(
            get_profile(profile_name).with_overrides(**overrides).margin_fraction
        )
    except (ValueError, TypeError):
        return None


def _parsed(policies: list[dict[str, Any]]) -> dict[str, ContainerPolicy]:
    return {p.container_name: p for p in parse_container_policies(policies)}


def large_increases(
    *, workload: Workload, policy: Policy, clean: dict[str, Any]
) -> list[LargeIncrease]:
    """Container targets that ``clean`` (validated changes) would more than double."""
    old_profile = policy.profile
    new_profile = clean.get("profile", old_profile)
    old_margin = _margin(old_profile, policy.profile_overrides or {})
    new_margin = _margin(
        new_profile, clean.get("profile_overrides", policy.profile_overrides or {})
    )
    scale = (
        1.0
        if old_margin is None or new_margin is None
        else (1.0 + new_margin) / (1.0 + old_margin)
    )
    by_name = _parsed(clean.get("container_policies", policy.container_policies or []))
    latest = {
        rec.container.name: rec
        for rec in Recommendation.objects.filter(container__workload=workload)
        .latest_per_container()
        .select_related("container")
    }
    found = []
    for name in sorted(latest):
        rec = latest[name]
        entry = by_name.get(name) or by_name.get("*")
        if entry is not None and entry.mode == MODE_OFF:
            continue  # vpaweb leaves this container's requests alone
        for resource in RESOURCE_NAMES:
            current = rec.target.get(resource)
            uncapped = (
                rec.uncapped_cpu_millicores
                if resource == CPU
                else rec.uncapped_memory_bytes
            )
            if current is None or current <= 0:
                continue
            projected = float(uncapped if uncapped is not None else current) * scale
            low = None if entry is None else entry.min_allowed.get(resource)
            high = None if entry is None else entry.max_allowed.get(resource)
            if high is not None:
                projected = min(projected, high)
            if low is not None:
                projected = max(projected, low)
            if projected > current * LARGE_INCREASE_FACTOR:
                found.append(LargeIncrease(name, resource, current, round(projected)))
    return found
