"""Realized savings: what the changes vpaweb applied save, beside the potential ones."""
# A resize change records, when it is verified, the requests it removed from its pod
# (``ResizeChange.requests_removed``, set by ``actuation.apply``). From then on it saves
# that amount every month, at the workload's own prices (``Prices.at``: its nodes',
# else the list prices, as its potential savings), for as long as it holds: it stops
# when the workload is deleted (no longer active) or changed back. Whether it holds is
# read from its own pod while discovery still sees it (``WorkloadPod.containers``:
# the pod's requests, within ``POD_LIVE`` of the workload's latest seen pod), so one
# pod of six resized in place counts that pod's share; once the pod is gone, from the
# container's current request (the template's, as the live pods carry it): back at
# or above what the change lowered it from. The potential savings
# (``models/provisioning.py``) count the live pods' mean request
# (``Container.pods_request_*``), so a resized pod's share is counted here only.

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from datetime import timedelta
from typing import Any

from recommender.models import Container, ResizeChange, WorkloadPod
from recommender.services.readmodels.provisioning import Prices

# ResizeChange JSON keys -> Container request fields.
_REQUESTS = (("cpu", "request_cpu_millicores"), ("memory", "request_memory_bytes"))
# A pod seen this long before its workload's latest seen pod is gone (discovery
# rewrites an unchanged pod's last sight hourly: pods.TOUCH_EVERY).
POD_LIVE = timedelta(hours=2)


def _pod_requests(containers: dict[str, Any]) -> dict[str, dict[str, int | None]]:
    """A pod's stored containers (``WorkloadPod.containers``) as current requests."""
    return {
        name: {
            field: ((values or {}).get("requests") or {}).get(resource)
            for resource, field in _REQUESTS
        }
        for name, values in containers.items()
    }


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


def live_pod_requests(
    workload_id: int,
) -> dict[str, list[tuple[int | None, int | None, int]]]:
    """Per container, the requests the workload's live pods carry (those seen within
    ``POD_LIVE`` of its latest seen pod), as (cpu millicores, memory bytes, pods),
    most pods first; only the containers whose pods differ (a pod resized in place:
    the page shows them beside the container's request). One query."""
    rows = list(
        WorkloadPod.objects.filter(workload_id=workload_id).values_list(
            "containers", "last_seen_at"
        )
    )
    if not rows:
        return {}
    latest = max(seen for _, seen in rows)
    counts: dict[str, dict[tuple[int | None, int | None], int]] = defaultdict(dict)
    for containers, seen in rows:
        if seen < latest - POD_LIVE:
            continue
        for name, values in _pod_requests(containers or {}).items():
            key = (values["request_cpu_millicores"], values["request_memory_bytes"])
            counts[name][key] = counts[name].get(key, 0) + 1
    return {
        name: sorted(
            ((cpu, memory, n) for (cpu, memory), n in found.items()),
            key=lambda row: (-row[2], row[0] or 0, row[1] or 0),
        )
        for name, found in counts.items()
        if len(found) > 1
    }


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
            "workload_id",
            "pod",
            "resources_before",
            "resources_after",
            "requests_removed",
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
    # The changed pods as discovery last stored them, and each workload's latest
    # sight of a pod (a pod seen much earlier is gone).
    pods: dict[tuple[int, str], tuple[Any, Any]] = {}
    latest: dict[int, Any] = {}
    for workload_id, name, containers, seen in WorkloadPod.objects.filter(
        workload_id__in={row[0] for row in rows}
    ).values_list("workload_id", "name", "containers", "last_seen_at"):
        latest[workload_id] = max(seen, latest.get(workload_id, seen))
        pods[(workload_id, name)] = (containers, seen)
    out: dict[int, float] = defaultdict(float)
    for workload_id, pod, before, after, removed in rows:
        if not removed:
            continue
        held = current[workload_id]
        stored = pods.get((workload_id, pod))
        if stored is not None and stored[1] >= latest[workload_id] - POD_LIVE:
            held = _pod_requests(stored[0] or {})
        if _changed_back(before, after, held):
            continue
        out[workload_id] += own.get(workload_id, prices).monthly(
            cpu_millicores=removed.get("cpu_millicores", 0),
            memory_bytes=removed.get("memory_bytes", 0),
        )
    return dict(out)
