"""What the webhook will set on the next pod of a workload, and why (the workload page).

The preview runs the webhook's own decision (``decide_admission``) on a pod built from
the workload's pod template as discovery stored it (containers with their requests and
limits; native sidecars as ``initContainers`` with ``restartPolicy: Always``), owned by
the workload, against a snapshot holding only that workload and its namespace's
LimitRanges: the same capping, limits, LimitRange check and reasons as at admission.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from recommender.models import Container, Workload
from recommender.services.admission.decision import (
    PATCHED,
    AdmissionDecision,
    decide_admission,
)
from recommender.services.admission.snapshot import load_snapshot
from recommender.services.advice.pod_spec import resource_list


@dataclass(frozen=True)
class ContainerPreview:
    """One container: what will be set (empty when nothing) and why."""

    name: str
    will_set: str
    why: str


@dataclass(frozen=True)
class WebhookPreview:
    """The decision for the next pod, in words."""

    outcome: str
    summary: str
    containers: tuple[ContainerPreview, ...]

    @property
    def will_patch(self) -> bool:
        """True when the next pod gets new requests or limits."""
        return self.outcome == PATCHED


def _template_pod(workload: Workload) -> dict[str, Any]:
    containers: list[dict[str, Any]] = []
    init: list[dict[str, Any]] = []
    for row in workload.containers.order_by("position"):
        resources: dict[str, Any] = {}
        if requests := resource_list(row.requests):
            resources["requests"] = requests
        if limits := resource_list(row.limits):
            resources["limits"] = limits
        item: dict[str, Any] = {"name": row.name, "resources": resources}
        if row.kind == Container.Kind.REGULAR:
            containers.append(item)
        else:
            if row.kind == Container.Kind.SIDECAR:
                item["restartPolicy"] = "Always"
            init.append(item)
    spec: dict[str, Any] = {"containers": containers}
    if init:
        spec["initContainers"] = init
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": f"{workload.name}-",
            "namespace": workload.namespace,
            "ownerReferences": [
                {"kind": workload.kind, "name": workload.name, "controller": True}
            ],
        },
        "spec": spec,
    }


def webhook_preview(*, workload: Workload, now: datetime) -> WebhookPreview:
    """The webhook's decision for a new pod of ``workload`` made from its template."""
    snapshot = replace(
        load_snapshot(cluster=workload.cluster, only=workload), loaded_at=now
    )
    request = {
        "uid": "preview",
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "operation": "CREATE",
        "namespace": workload.namespace,
        "object": _template_pod(workload),
    }
    decision: AdmissionDecision = decide_admission(
        request=request, snapshot=snapshot, now=now
    )
    return WebhookPreview(
        outcome=decision.outcome,
        summary=decision.reason,
        containers=tuple(
            ContainerPreview(
                name=plan.name,
                will_set=plan.changes_text() if plan.is_changed else "",
                why=plan.reason + (f" ({'; '.join(plan.notes)})" if plan.notes else ""),
            )
            for plan in decision.containers
        ),
    )
