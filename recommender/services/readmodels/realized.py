"""Realized savings: what the changes vpaweb applied save, beside the potential ones."""
# A resize change records, when it is verified, the requests it removed from its pod
# (``ResizeChange.requests_removed``, set by ``actuation.apply``). From then on it saves
# that amount every month, at the workload's own prices (``Prices.at``: its nodes',
# else the list prices, as its potential savings), for as long as it holds: it stops
# when the workload is deleted (no longer active) or changed back (a container's
# current request, as discovery reads the live pods, is back at or above what the
# change lowered it from). The potential savings (``models/provisioning.py``) are
# counted from the current requests, so a change that holds moves its amount from
# potential to realized.

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from recommender.models import Container, ResizeChange
from recommender.services.readmodels.provisioning import Prices

# ResizeChange JSON keys -> Container request fields.
_REQUESTS = (("cpu", "request_cpu_millicores"), ("memory", "request_memory_bytes"))


def _changed_back(
    change_before: dict[str, Any],
    change_after: dict[str, Any],
    current: dict[str, dict[str, int | None]],
) -> bool:
    """Whether a container the change lowered requests, now, at least what it had."""
    for name, values in change_after.items():
        new = values.get("requests") or {}
        old = (change_before.get(name) or {}).get("requests") or {}
        now = current.get(name)
        if now is None:
            continue  # a container gone from the template: nothing to compare
        for resource, field in _REQUESTS:
            lowered = (
                new.get(resource) is not None
                and old.get(resource) is not None
                and new[resource] < old[resource]
            )
            amount = now.get(field)
            if lowered and amount is not None and amount >= old[resource]:
                return True
    return False


def change_savings(
    before: dict[str, Any], after: dict[str, Any], *, prices: Prices
) -> float:
    """What moving one pod's container from ``before`` to ``after`` requests
    (``ResizeChange.resources_*`` entries) saves a month at ``prices``: the
    resources the change sets, a missing request counting as 0 (negative: adds)."""
    old = before.get("requests") or {}
    new = after.get("requests") or {}
    removed = {
        resource: (old.get(resource) or 0) - new[resource]
        for resource, _ in _REQUESTS
        if new.get(resource) is not None
    }
    return prices.monthly(
        cpu_millicores=removed.get("cpu", 0), memory_bytes=removed.get("memory", 0)
    )


def realized_savings(
    *, prices: Prices, workload_ids: Iterable[int] | None = None
) -> dict[int, float]:
    """Monthly realized savings per active workload (of ``workload_ids`` if given)
    with a verified change that holds; two queries."""
    changes = ResizeChange.objects.filter(
        status=ResizeChange.Status.APPLIED,
        verified_at__isnull=False,
        workload__is_active=True,
    )
    if workload_ids is not None:
        changes = changes.filter(workload_id__in=list(workload_ids))
    rows = list(
        changes.order_by().values_list(
            "workload_id", "resources_before", "resources_after", "requests_removed"
        )
    )
    if not rows:
        return {}
    current: dict[int, dict[str, dict[str, int | None]]] = defaultdict(dict)
    own: dict[int, Prices] = {}
    for workload_id, name, cpu, memory, core, gib in Container.objects.filter(
        workload_id__in={row[0] for row in rows}
    ).values_list(
        "workload_id",
        "name",
        "request_cpu_millicores",
        "request_memory_bytes",
        "workload__price_per_core_hour",
        "workload__price_per_gib_hour",
    ):
        own[workload_id] = prices.at(core, gib)
        current[workload_id][name] = {
            "request_cpu_millicores": cpu,
            "request_memory_bytes": memory,
        }
    out: dict[int, float] = defaultdict(float)
    for workload_id, before, after, removed in rows:
        if not removed or _changed_back(before, after, current[workload_id]):
            continue
        out[workload_id] += own.get(workload_id, prices).monthly(
            cpu_millicores=removed.get("cpu_millicores", 0),
            memory_bytes=removed.get("memory_bytes", 0),
        )
    return dict(out)
