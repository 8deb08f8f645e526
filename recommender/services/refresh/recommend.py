"""The recommend step of a refresh window: the engine's estimate for every fed
container, capped by its policy, and the rule for when a new Recommendation row is worth
storing (``is_significant_change``)."""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from recommender.engine.capping import (
    MODE_OFF,
    Cap,
    CappedRecommendation,
    apply_vpa_policy,
    caps_nothing,
)
from recommender.engine.estimator import Recommendations, recommend
from recommender.engine.profiles import Profile
from recommender.engine.resources import CPU, MEMORY, RESOURCE_NAMES, Resources
from recommender.engine.throttling import ThrottlingBoost, boost_cpu
from recommender.services.policy.validation import overridden_fields
from recommender.services.refresh.ingest import Row, Window

logger = logging.getLogger(__name__)

# A new Recommendation row is stored when a target changes at all, or a bound moves by
# at least this fraction. The bounds drift a little every minute as confidence grows
# (upstream's (1 + 1/conf) multiplier); storing each drift would write a row per
# container per minute and bury the history the dashboard draws.
BOUND_CHANGE_FRACTION = 0.01


def recommend_window(window: Window) -> None:
    """Engine recommendations, capped by each container's policy; a row's CFS counts
    (``Row.throttling``, read with the usage: ``services/refresh/throttling.py``)
    boost the CPU target of a throttled container whose profile asks. Only a row
    whose values moved from its latest stored ones (``is_significant_change``) gets
    its ``Row.recommendation``: the store writes those, and a steady cycle's other
    rows (most of them) build nothing more."""
    for group in window.groups.values():
        assert group.aggregates is not None
        # Rows of one profile and one set of controlled resources go in one call.
        # A Profile is a frozen bundle of scalars: equal profiles are one key.
        batches: dict[tuple[Profile, tuple[str, ...]], list[Row]] = defaultdict(list)
        for row in group.rows:
            policy = row.container_policy
            if policy is not None and policy.mode == MODE_OFF:
                continue  # upstream gives a container with mode Off no recommendation
            if group.aggregates.total_samples[row.index] == 0:
                # No usage, no recommendation (upstream's estimator would give the
                # pod minimums): the container shows "no data".
                window.counts["containers_without_samples"] += 1
                continue
            controlled = (
                policy.controlled_resources if policy else tuple(RESOURCE_NAMES)
            )
            batches[(row.profile, controlled)].append(row)
        for (_, controlled), rows in batches.items():
            # The policy's overrides, kept with the explanation so the dashboard shows
            # which fields differed from the named profile when this was computed.
            overrides = overridden_fields(rows[0].profile)
            results = recommend(
                group.aggregates,
                rows=[r.index for r in rows],
                profile=rows[0].profile,
                containers_in_pod=[r.containers_in_pod for r in rows],
                controlled_resources=controlled,
                # A resource without samples gets no recommendation (with the reason
                # in the explanation), not upstream's pod minimum.
                omit_unsampled=True,
            )
            columns = {
                # Python ints, None where left out for lack of samples (a whole
                # column None: the resource is not controlled).
                (res, bound): results.value_list(res, bound)
                for res in RESOURCE_NAMES
                for bound in ("target", "lower_bound", "upper_bound")
            }
            # Each row's eight values in Recommendation.values_tuple() order, the
            # target again for the uncapped one: what values_of gives where nothing
            # is boosted or capped (most rows), read without building the objects.
            uncapped = list(
                zip(
                    *(_column(columns, *key, len(rows)) for key in _VALUE_COLUMNS),
                    strict=True,
                )
            )
            for i, row in enumerate(rows):
                values = uncapped[i]
                boost = None
                counts = row.throttling
                if counts is not None and values[0] is not None:
                    boost = boost_cpu(
                        profile=row.profile,
                        target_millicores=values[0],
                        upper_millicores=values[4] or 0,
                        throttled_periods=counts[0],
                        periods=counts[1],
                    )
                caps: Sequence[Cap] = ()
                if boost is not None or not caps_nothing(row.container_policy):
                    target = Resources(values[0], values[1])
                    upper = Resources(values[4], values[5])
                    if boost is not None:
                        target = Resources(boost.target_after, target.memory_bytes)
                        upper = Resources(boost.upper_after, upper.memory_bytes)
                        window.counts["containers_throttling_boosted"] += 1
                    capped = apply_vpa_policy(
                        _Uncapped(target, Resources(values[2], values[3]), upper),
                        row.container_policy,
                    )
                    values, caps = values_of(capped), capped.caps
                if not is_significant_change(row.container.latest_values, values):
                    continue  # the stored recommendation stands
                row.recommendation = {
                    "values": values,
                    # Built only for the rows whose values are stored (_store).
                    "explanation": _PendingExplanation(
                        results, i, caps, overrides, boost
                    ),
                }


# The engine's value column of each of Recommendation.values_tuple()'s eight values
# (uncapped: the target before any cap).
_VALUE_COLUMNS = (
    (CPU, "target"),
    (MEMORY, "target"),
    (CPU, "lower_bound"),
    (MEMORY, "lower_bound"),
    (CPU, "upper_bound"),
    (MEMORY, "upper_bound"),
    (CPU, "target"),
    (MEMORY, "target"),
)


def _column(
    columns: Mapping[tuple[str, str], list[int | None] | None],
    resource: str,
    bound: str,
    rows: int,
) -> list[int | None]:
    """One resource's values of a bound, row by row (None for every row where the
    resource is not controlled)."""
    column = columns[resource, bound]
    return [None] * rows if column is None else column


@dataclass(frozen=True)
class _Uncapped:
    """The engine's values of one row, as apply_vpa_policy reads them."""

    target: Resources
    lower_bound: Resources
    upper_bound: Resources

    @property
    def uncapped_target(self) -> Resources:
        return self.target


@dataclass(frozen=True)
class _PendingExplanation:
    """Row ``index`` of a recommend() call's explanation, with the caps and overrides;
    turned into the stored dict only for a row that gets a Recommendation row."""

    results: Recommendations
    index: int
    caps: Sequence[Cap]
    overrides: Mapping[str, Any] | list[str] | None
    throttling: ThrottlingBoost | None = None


def build_explanations(pending: Sequence[_PendingExplanation]) -> list[dict[str, Any]]:
    """The explanation dicts of ``pending``, one array pass per recommend() call."""
    out: list[dict[str, Any] | None] = [None] * len(pending)
    by_call: dict[int, list[int]] = defaultdict(list)
    for position, item in enumerate(pending):
        by_call[id(item.results)].append(position)
    for positions in by_call.values():
        results = pending[positions[0]].results
        dicts = results.explanation_dicts([pending[p].index for p in positions])
        for position, explanation in zip(positions, dicts, strict=True):
            item = pending[position]
            explanation["caps"] = [
                {
                    "resource": c.resource,
                    "bound": c.bound,
                    "reason": c.reason,
                    "before": c.before,
                    "after": c.after,
                }
                for c in item.caps
            ]
            if item.overrides:
                explanation["profile_overrides"] = item.overrides
            if item.throttling is not None:
                explanation["throttling"] = item.throttling.to_dict()
                explanation["notes"] = [
                    *explanation.get("notes", []),
                    item.throttling.note,
                ]
            out[position] = explanation
    return [explanation for explanation in out if explanation is not None]


def values_of(capped: CappedRecommendation) -> tuple[int | None, ...]:
    """The eight amounts of a capped recommendation, in
    Recommendation.values_tuple() order."""
    target, lower = capped.target, capped.lower_bound
    upper, uncapped = capped.upper_bound, capped.uncapped_target
    return (
        target.cpu_millicores,
        target.memory_bytes,
        lower.cpu_millicores,
        lower.memory_bytes,
        upper.cpu_millicores,
        upper.memory_bytes,
        uncapped.cpu_millicores,
        uncapped.memory_bytes,
    )


def is_significant_change(
    before: tuple[int | None, ...] | None, new: tuple[int | None, ...]
) -> bool:
    """True when ``new`` deserves a Recommendation row of its own; ``before``: the
    latest one's ``Recommendation.values_tuple()`` (None: there is none)."""
    if before is None:
        return True
    for i, (a, b) in enumerate(zip(before, new, strict=True)):
        if a == b:
            continue
        if a is None or b is None:
            return True
        is_bound = 2 <= i <= 5  # lower and upper bounds
        if not is_bound or abs(b - a) >= BOUND_CHANGE_FRACTION * max(abs(a), 1):
            return True
    return False


# --- storing --------------------------------------------------------------------------
