"""The requests a reverted resize change holds a workload to: per workload and
container, the reverted change's requests (the band) and its ``resources_before`` (what
new pods get instead). Written by actuation's revert, read by the webhook's snapshot and
the updater's proposals."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from recommender.models import ResizeChange


def reverted_requests(
    rows: Iterable[tuple[int, dict[str, Any], dict[str, Any]]],
) -> dict[int, dict[str, tuple[dict[str, int], dict[str, Any]]]]:
    """Per workload and container, the band a revert holds (the reverted change's
    requests) and what it gives instead (its ``resources_before``), the latest revert
    winning: from (workload id, resources_before, resources_after) oldest first."""
    found: dict[int, dict[str, tuple[dict[str, int], dict[str, Any]]]] = {}
    for workload_id, before, after in rows:
        for name, values in (after or {}).items():
            previous = (before or {}).get(name)
            if previous:
                found.setdefault(workload_id, {})[name] = (
                    values.get("requests") or {},
                    previous,
                )
    return found


def reverts_of(
    workload_ids: Iterable[int],
) -> dict[int, dict[str, tuple[dict[str, int], dict[str, Any]]]]:
    """``reverted_requests`` of these workloads (one query)."""
    rows = (
        ResizeChange.objects.filter(
            workload_id__in=list(workload_ids), reverted_at__isnull=False
        )
        .order_by("reverted_at", "pk")
        .values_list("workload_id", "resources_before", "resources_after")
    )
    return reverted_requests(rows)
