"""HPA-aware advice: the HorizontalPodAutoscaler change that keeps a workload scaling
as before once its requests change, and the resources vpaweb leaves to the HPA.

A cpu/memory ``Utilization`` target is a share of the request (``engine.hpa``): moving
the request moves the usage at which the HPA scales. Every caller that shows or writes
a recommendation of such a workload gives the adjusted target beside it: the workload
page and the API (``adjustments_for_workload``), ``/rightsize`` (an HPA document in the
same manifest stream is rewritten, ``rightsize_hpa_documents``) and
``recommendation-query`` (``adjustments``)."""
# Actuation follows upstream VPA's rule instead ("do not use both on the same
# resource"): the updater and the admission webhook change only the resources no HPA of
# the workload scales on (``hpa_held_resources``).

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from recommender.cluster.kube_objects import hpa_of
from recommender.engine.hpa import (
    AVERAGE_VALUE,
    UTILIZATION,
    HpaTarget,
    adjusted_target,
)
from recommender.engine.quantity import (
    format_cpu,
    format_memory_readable,
    parse_cpu_millicores,
    parse_memory_bytes,
)
from recommender.engine.resources import CPU, RESOURCE_NAMES, Resources
from recommender.errors import InvalidInput
from recommender.services.advice.pod_spec import PodContainer

HPA_KIND = "HorizontalPodAutoscaler"
# Why the updater and the webhook leave a resource alone (upstream's rule).
HELD_REASON = (
    "an HPA scales this workload on {resources}: vpaweb leaves {them} to the HPA "
    "(upstream VPA's rule: never both on one resource); apply the recommendation "
    "with the HPA change shown beside it"
)


def _format(resource: str, amount: int) -> str:
    # Kubernetes units a person reads: memory rounded up to KiB, MiB or GiB (an
    # 80 % trigger of 2Gi is "1639Mi", never "1717986918").
    return format_cpu(amount) if resource == CPU else format_memory_readable(amount)


def hpa_held_resources(
    hpa_conflicts: Iterable[Mapping[str, Any]], container: str
) -> frozenset[str]:
    """Resources of ``container`` that an HPA of its workload scales on (the stored
    ``Workload.hpa_conflicts``): the updater and the webhook leave them alone."""
    held: set[str] = set()
    for hpa in hpa_conflicts or ():
        metrics = hpa.get("metrics")
        if metrics is None:  # stored before the targets were read: the whole pod
            held.update(hpa.get("resources") or ())
            continue
        for metric in metrics:
            if metric.get("container") in ("", None, container):
                held.add(str(metric.get("resource")))
    return frozenset(held & set(RESOURCE_NAMES))


def held_reason(resources: Iterable[str]) -> str:
    """The reason shown for resources left to the HPA."""
    names = sorted(resources)
    return HELD_REASON.format(
        resources=" and ".join(names), them="it" if len(names) == 1 else "them"
    )


def _target_json(resource: str, target: HpaTarget) -> dict[str, Any]:
    """A MetricTarget as autoscaling/v2 writes it."""
    if target.type == UTILIZATION:
        return {"type": UTILIZATION, "averageUtilization": target.average_utilization}
    assert target.average_value is not None
    return {
        "type": AVERAGE_VALUE,
        "averageValue": _format(resource, target.average_value),
    }


def _pod_request(
    requests: Mapping[str, Resources], resource: str, container: str
) -> tuple[int | None, str | None]:
    """The request the HPA divides by: the container's, or the pod's sum; None and
    the container without one (the HPA controller then reports an error)."""
    names = [container] if container else sorted(requests)
    total = 0
    for name in names:
        amount = requests[name].get(resource) if name in requests else None
        if amount is None:
            return None, name
        total += amount
    return total, None


def adjustments(
    hpas: Iterable[Mapping[str, Any]],
    *,
    before: Mapping[str, Resources],
    after: Mapping[str, Resources],
) -> list[dict[str, Any]]:
    """The HPA change per cpu/memory Utilization metric of ``hpas`` (stored
    ``hpa_conflicts`` entries or ``hpa_of`` summaries, with ``metrics`` or
    ``resource_metrics``), for containers moving from ``before`` to ``after`` requests
    (``after`` may leave a container or resource out: unchanged).

    Each entry: ``{"hpa", "resource", "container", "before", "after", "changed",
    "scales_out_at", "reason"}``; ``before``/``after`` are MetricTargets as
    autoscaling/v2 writes them (``after`` None when it cannot be computed).
    """
    new = {
        name: Resources(
            *(
                after[name].get(r)
                if name in after and after[name].get(r) is not None
                else current.get(r)
                for r in RESOURCE_NAMES
            )
        )
        for name, current in before.items()
    }
    out = []
    for hpa in hpas:
        metrics = hpa.get("metrics", hpa.get("resource_metrics")) or ()
        for metric in metrics:
            resource = metric.get("resource")
            utilization = metric.get("average_utilization")
            if (
                resource not in RESOURCE_NAMES
                or metric.get("target_type") != UTILIZATION
                or not isinstance(utilization, int)
                or utilization < 1
            ):
                continue
            container = str(metric.get("container") or "")
            target = HpaTarget(UTILIZATION, average_utilization=utilization)
            old, missing = _pod_request(before, resource, container)
            entry: dict[str, Any] = {
                "hpa": hpa.get("name"),
                "resource": resource,
                "container": container,
                "before": _target_json(resource, target),
            }
            updated, _ = _pod_request(new, resource, container)
            if old is None or updated is None or old <= 0 or updated <= 0:
                entry.update(
                    after=None,
                    changed=False,
                    scales_out_at=None,
                    reason=(
                        f"container {missing} has no {resource} request: the HPA "
                        "cannot compute its utilization"
                    ),
                )
                out.append(entry)
                continue
            result = adjusted_target(
                resource=resource, target=target, old_request=old, new_request=updated
            )
            trigger = round(target.trigger_amount(old))
            scope = f"container {container}" if container else "the pod"
            entry.update(
                after=_target_json(resource, result),
                changed=result != target,
                scales_out_at=_format(resource, max(1, trigger)),
                reason=(
                    f"{resource} request of {scope} {_format(resource, old)} -> "
                    f"{_format(resource, updated)}: "
                    + (
                        f"averageUtilization {utilization} -> "
                        f"{result.average_utilization} keeps the HPA scaling out at "
                        f"{_format(resource, max(1, trigger))} per pod"
                        if result.type == UTILIZATION
                        else (
                            f"averageUtilization {utilization} would become "
                            f"{utilization * old / updated:.2f}, outside what a whole "
                            "percent of at least 1 states within 5 %: the same "
                            "trigger as averageValue "
                            f"{_format(resource, result.average_value or 1)} per pod"
                        )
                    )
                ),
            )
            out.append(entry)
    return out


def adjustments_for_workload(
    hpa_conflicts: Iterable[Mapping[str, Any]],
    *,
    before: Mapping[str, Resources],
    after: Mapping[str, Resources],
) -> list[dict[str, Any]]:
    """``adjustments`` for a stored workload (its ``hpa_conflicts``)."""
    return adjustments(
        [h for h in hpa_conflicts or () if h.get("metrics")], before=before, after=after
    )


def trigger_warnings(
    summary: Mapping[str, Any],
    *,
    requests: Mapping[str, Resources],
    limits: Mapping[str, Resources],
) -> list[str]:
    """A warning per cpu/memory metric of an HPA (an ``hpa_of`` summary, its targets
    as they will be) whose trigger per pod sits above the limit of what it measures,
    for pods with ``requests`` and ``limits`` (by container name): usage never gets
    there (CPU is throttled at the limit, memory is OOM-killed), so the HPA never
    scales out on that metric. A measured container without a limit has no ceiling."""
    out = []
    for metric in summary.get("resource_metrics") or ():
        resource = metric.get("resource")
        if resource not in RESOURCE_NAMES:
            continue
        container = str(metric.get("container") or "")
        utilization = metric.get("average_utilization")
        if (
            metric.get("target_type") == UTILIZATION
            and isinstance(utilization, int)
            and utilization >= 1
        ):
            request, _ = _pod_request(requests, resource, container)
            if request is None:
                continue
            trigger = utilization * request / 100.0
            target = f"averageUtilization {utilization}"
        elif metric.get("target_type") == AVERAGE_VALUE and metric.get("average_value"):
            trigger = float(metric["average_value"])
            target = f"averageValue {_format(resource, int(trigger))}"
        else:
            continue
        ceiling, _ = _pod_request(limits, resource, container)
        if ceiling is None or trigger <= ceiling:
            continue
        scope = f"container {container}" if container else "the pod"
        index = metric.get("index")
        where = f"spec.metrics[{index}]" if index is not None else "a metric"
        out.append(
            f"HPA {summary.get('name')}: {where} "
            f"({resource} {target}) scales out at "
            f"{_format(resource, math.ceil(trigger))} per pod, above the {resource} "
            f"limit of {scope} ({_format(resource, ceiling)}): usage never gets there "
            + (
                "(CPU is throttled at its limit)"
                if resource == CPU
                else "(a container is OOM-killed at its limit)"
            )
            + f", so the HPA never scales out on {resource}"
        )
    return out


def adjusted_hpas(
    hpa_conflicts: Iterable[Mapping[str, Any]], changes: Iterable[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """A workload's stored HPAs (``hpa_conflicts``) with their targets as the
    ``adjustments`` entries ``changes`` rewrite them, as ``trigger_warnings`` reads
    them."""
    moved = {
        (c["hpa"], c["resource"], c["container"]): c["after"]
        for c in changes
        if c.get("changed") and c.get("after")
    }
    out = []
    for hpa in hpa_conflicts or ():
        metrics = []
        for metric in hpa.get("metrics") or ():
            key = (
                hpa.get("name"),
                metric.get("resource"),
                metric.get("container") or "",
            )
            after = moved.get(key)
            metric = dict(metric)
            if after is not None and after["type"] == UTILIZATION:
                metric.update(
                    target_type=UTILIZATION,
                    average_utilization=after["averageUtilization"],
                    average_value=None,
                )
            elif after is not None:
                parse = (
                    parse_cpu_millicores
                    if metric.get("resource") == CPU
                    else parse_memory_bytes
                )
                metric.update(
                    target_type=AVERAGE_VALUE,
                    average_utilization=None,
                    average_value=parse(after["averageValue"]),
                )
            metrics.append(metric)
        out.append({"name": hpa.get("name"), "resource_metrics": metrics})
    return out


# --- /rightsize: HPA documents of the same manifest stream ---------------------------


def hpa_target_key(document: Mapping[str, Any], namespace: str) -> tuple[str, str, str]:
    """(namespace, kind, name) of the workload an HPA document scales."""
    ref = (document.get("spec") or {}).get("scaleTargetRef") or {}
    return (namespace, str(ref.get("kind", "")), str(ref.get("name", "")))


def rightsize_hpa_document(
    document: dict[str, Any],
    *,
    path: str,
    before: Mapping[str, Resources],
    after: Mapping[str, Resources],
) -> list[dict[str, Any]]:
    """Rewrite the cpu/memory Utilization targets of an HPA manifest for pods moving
    from ``before`` to ``after`` requests (in place); the change entries.

    Raises InvalidInput naming the field of a malformed metric.
    """
    spec = document.get("spec")
    if not isinstance(spec, dict) or not isinstance(spec.get("metrics", []), list):
        raise InvalidInput(f"{path}.spec.metrics must be a list", field=f"{path}.spec")
    try:
        summary = hpa_of(document)
    except ValueError as error:
        raise InvalidInput(str(error), field=f"{path}.spec.metrics") from None
    entries = adjustments([summary], before=before, after=after)
    by_metric = iter(
        m
        for m in summary["resource_metrics"]
        if m["resource"] in RESOURCE_NAMES
        and m["target_type"] == UTILIZATION
        and isinstance(m["average_utilization"], int)
        and m["average_utilization"] >= 1
    )
    changes = []
    for entry, metric in zip(entries, by_metric, strict=True):
        if not entry["changed"] or entry["after"] is None:
            continue
        raw = spec["metrics"][metric["index"]]
        key = "resource" if raw.get("type") == "Resource" else "containerResource"
        source = raw[key]
        source["target"] = dict(entry["after"])
        changes.append(
            {
                "field": f"spec.metrics[{metric['index']}].target",
                "before": entry["before"],
                "after": entry["after"],
                "reason": entry["reason"],
            }
        )
    return changes


def requests_of(
    containers: Sequence[PodContainer], chosen: Mapping[str, Resources] | None = None
) -> dict[str, Resources]:
    """Requests by container name of the containers an HPA measures (containers and
    native sidecars: ``parse_pod_containers`` leaves plain init containers out),
    ``chosen`` overriding."""
    return {c.name: (chosen or {}).get(c.name, c.requests) for c in containers}
