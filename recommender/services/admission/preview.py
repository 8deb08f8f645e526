"""What the webhook will set on the next pod of a workload, and why (the workload page).

The preview runs the webhook's own decision (``decide_admission``) on a pod built from
the workload's pod template as discovery stored it (containers with their requests and
limits; native sidecars as ``initContainers`` with ``restartPolicy: Always``), owned by
the workload, against a snapshot holding only that workload and its namespace's
LimitRanges: the same capping, limits, LimitRange check and reasons as at admission.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from recommender.models import Container, Policy, Workload
from recommender.services.admission.decision import (
    PATCHED,
    AdmissionDecision,
    decide_admission,
)
from recommender.services.admission.snapshot import (
    AdmissionSnapshot,
    WorkloadEntry,
)
from recommender.services.advice.advise import AdviceInputs
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


def _template_pod(
    workload: Workload, containers: Sequence[Container]
) -> dict[str, Any]:
    regular: list[dict[str, Any]] = []
    init: list[dict[str, Any]] = []
    for row in sorted(containers, key=lambda c: c.position):
        resources: dict[str, Any] = {}
        if requests := resource_list(row.requests):
            resources["requests"] = requests
        if limits := resource_list(row.limits):
            resources["limits"] = limits
        item: dict[str, Any] = {"name": row.name, "resources": resources}
        if row.kind == Container.Kind.REGULAR:
            regular.append(item)
        else:
            if row.kind == Container.Kind.SIDECAR:
                item["restartPolicy"] = "Always"
            init.append(item)
    spec: dict[str, Any] = {"containers": regular}
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


def webhook_preview(
    *,
    workload: Workload,
    policy: Policy | None,
    containers: Sequence[Container],
    inputs: AdviceInputs,
    now: datetime,
) -> WebhookPreview:
    """The webhook's decision for a new pod of ``workload`` made from its template.

    Everything comes from what the workload page already read (the workload, its
    policy, its containers and the advice inputs): no query of its own.
    """
    key = (workload.namespace, workload.kind, workload.name)
    entry = WorkloadEntry.of(workload, policy)
    if entry.is_actionable:
        entry = replace(entry, inputs=replace(inputs, coefficient=None))
    snapshot = AdmissionSnapshot(
        cluster_name="",
        loaded_at=now,
        workloads={key: entry},
        limit_ranges={workload.namespace: (inputs.container_range, inputs.pod_range)},
    )
    request = {
        "uid": "preview",
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "operation": "CREATE",
        "namespace": workload.namespace,
        "object": _template_pod(workload, containers),
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
