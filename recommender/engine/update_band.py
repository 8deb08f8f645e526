"""When requests are "the same" for the updater: upstream's ``resourceDiff`` (the
relative differences of CPU and memory requests, summed) below the updater's
``--min-change`` threshold (``pkg/updater/priority``). A rejected change holds while
the new requests stay within its band; so does a reverted one. Ints in (millicores,
bytes; None = unset), a bool out."""

from __future__ import annotations

from collections.abc import Mapping

from recommender.engine.resources import RESOURCE_NAMES

# Upstream's default --min-change (UpdaterConfig.min_change).
MIN_CHANGE = 0.1


def within_band(
    rejected: Mapping[str, int | None],
    planned: Mapping[str, int | None],
    *,
    min_change: float,
) -> bool:
    """Whether ``planned`` requests stay within a rejected change's band: their
    relative difference from the rejected requests, summed over resources as
    ``resourceDiff`` sums it, is below the updater's own ``min_change`` threshold."""
    diff = 0.0
    for resource in RESOURCE_NAMES:
        was, now = rejected.get(resource), planned.get(resource)
        if was is None and now is None:
            continue
        if was is None or now is None:
            return False
        diff += abs(now - was) / max(was, 1)
    return diff < min_change
