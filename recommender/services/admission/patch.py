"""The webhook's JSONPatch, in upstream's shapes, and the LimitRange check before it."""
# Shapes (upstream ``pkg/admission-controller/resource/pod/patch/resource_updates.go``),
# per container that gets
# a value, built from the exact object received:
#
# - ``add .../resources {}`` when the container has no ``resources`` key at all
#   (upstream adds it when requests and limits are both nil; we leave an existing
#   ``resources`` object alone so nothing else in it, e.g. ``claims``, is replaced);
# - ``add .../resources/requests {}`` (``limits {}``) when that map is absent;
# - ``add .../resources/requests/<res> "<quantity>"`` per resource (``add`` on an
#   existing member replaces it, RFC 6902 §4.1, as the recorded StatefulSet pod shows).
#
# Only amounts that differ from the pod's are written. Then vpaweb's annotations, the
# analogue of upstream's ``vpaUpdates`` / ``vpaObservedContainers`` under ``vpaweb.io/``
# (``add /metadata/annotations {}`` first when the pod has none). JSON Pointer escaping
# (``~`` → ``~0``, ``/`` → ``~1``) applies to every key, so ``vpaweb.io/updates`` is
# ``/metadata/annotations/vpaweb.io~1updates``.
#
# LimitRanger validates min, max and maxLimitRequestRatio *after* mutating webhooks and
# answers 403 (and the API server 422 for a request above its limit), even under
# ``failurePolicy: Ignore``; ``limit_range_violations`` finds what a patch would newly
# break so it is never sent.

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from recommender.engine.capping import LimitRangeItem
from recommender.engine.limit_ranger import (
    APP,
    INIT,
    SIDECAR,
    LimitedContainer,
    limit_ranger_problems,
)
from recommender.engine.resources import RESOURCE_NAMES, Resources
from recommender.errors import InvalidInput
from recommender.services.admission.pod import PodContainerRef
from recommender.services.advice.pod_spec import parse_resource_list, resource_list

# vpaweb's pod annotations (upstream: vpaUpdates, vpaObservedContainers).
UPDATES_ANNOTATION = "vpaweb.io/updates"
OBSERVED_ANNOTATION = "vpaweb.io/observed-containers"
# Annotation values are free text; keep them readable in `kubectl describe`.
MAX_ANNOTATION_CHARS = 4000


def escape_pointer(token: str) -> str:
    """One JSON Pointer reference token (RFC 6901): ``~`` → ``~0``, ``/`` → ``~1``."""
    return token.replace("~", "~0").replace("/", "~1")


def _merged(before: Resources, new: Resources) -> Resources:
    return Resources(
        new.cpu_millicores if new.cpu_millicores is not None else before.cpu_millicores,
        new.memory_bytes if new.memory_bytes is not None else before.memory_bytes,
    )


def _differing(before: Resources, new: Resources) -> Resources:
    """The amounts of ``new`` that are set and differ from ``before``."""
    result = Resources()
    for resource in RESOURCE_NAMES:
        value = new.get(resource)
        if value is not None and value != before.get(resource):
            result = result.with_amount(resource, value)
    return result


LEFT_AS_IS = "left as is: "


@dataclass(frozen=True)
class ContainerPlan:
    """What the webhook sets on one container of the pod, and why (or why nothing)."""

    name: str
    list_key: str
    index: int
    requests_before: Resources
    limits_before: Resources
    set_requests: Resources  # amounts written (only those that change)
    set_limits: Resources
    reason: str
    notes: tuple[str, ...] = ()  # capping and limit annotations, upstream's texts
    has_resources: bool = False
    has_requests: bool = False
    has_limits: bool = False

    @classmethod
    def unchanged(cls, container: PodContainerRef, reason: str) -> ContainerPlan:
        """A container the webhook leaves as it is (``reason`` may say so already,
        as the advice's does for resources an HPA scales on)."""
        return cls(
            name=container.name,
            list_key=container.list_key,
            index=container.index,
            requests_before=container.requests,
            limits_before=container.limits,
            set_requests=Resources(),
            set_limits=Resources(),
            reason=reason if reason.startswith(LEFT_AS_IS) else f"{LEFT_AS_IS}{reason}",
        )

    @classmethod
    def from_advice(
        cls,
        container: PodContainerRef,
        *,
        requests: Resources,
        limits: Resources,
        notes: tuple[str, ...],
        reason: str,
    ) -> ContainerPlan:
        """A container given new requests (and limits) by the advice."""
        resources = container.raw.get("resources")
        return cls(
            name=container.name,
            list_key=container.list_key,
            index=container.index,
            requests_before=container.requests,
            limits_before=container.limits,
            set_requests=_differing(container.requests, requests),
            set_limits=_differing(container.limits, limits),
            reason=reason,
            notes=notes,
            has_resources="resources" in container.raw,
            has_requests=isinstance(resources, Mapping) and "requests" in resources,
            has_limits=isinstance(resources, Mapping) and "limits" in resources,
        )

    @property
    def is_changed(self) -> bool:
        """True when the patch writes at least one amount into this container."""
        return not (self.set_requests.is_empty() and self.set_limits.is_empty())

    @property
    def requests_after(self) -> Resources:
        """The container's requests once patched."""
        return _merged(self.requests_before, self.set_requests)

    @property
    def limits_after(self) -> Resources:
        """The container's limits once patched."""
        return _merged(self.limits_before, self.set_limits)

    def changes_text(self) -> str:
        """``cpu request 100m -> 250m, memory limit unset -> 512Mi``."""
        parts = []
        for label, before, written in (
            ("request", self.requests_before, self.set_requests),
            ("limit", self.limits_before, self.set_limits),
        ):
            old, new = resource_list(before), resource_list(written)
            for resource, value in new.items():
                parts.append(
                    f"{resource} {label} {old.get(resource, 'unset')} -> {value}"
                )
        return ", ".join(parts)


def build_patch(
    obj: Mapping[str, Any],
    plans: Sequence[ContainerPlan],
    *,
    workload: str,
    mode: str,
) -> list[dict[str, Any]]:
    """The JSONPatch for ``obj`` (the pod as received) applying ``plans``."""
    ops: list[dict[str, Any]] = []
    metadata = obj.get("metadata")
    if not isinstance(metadata, Mapping) or not isinstance(
        metadata.get("annotations"), Mapping
    ):
        ops.append({"op": "add", "path": "/metadata/annotations", "value": {}})
    described: list[str] = []
    for plan in plans:
        if not plan.is_changed:
            continue
        base = f"/spec/{plan.list_key}/{plan.index}/resources"
        if not plan.has_resources:
            ops.append({"op": "add", "path": base, "value": {}})
        for key, written, present in (
            ("requests", plan.set_requests, plan.has_requests),
            ("limits", plan.set_limits, plan.has_limits),
        ):
            values = resource_list(written)
            if not values:
                continue
            if not present:
                ops.append({"op": "add", "path": f"{base}/{key}", "value": {}})
            for resource, quantity in values.items():
                ops.append(
                    {
                        "op": "add",
                        "path": f"{base}/{key}/{escape_pointer(resource)}",
                        "value": quantity,
                    }
                )
        notes = f" ({'; '.join(plan.notes)})" if plan.notes else ""
        where = "sidecar" if plan.list_key == "initContainers" else "container"
        described.append(
            f"{where} {plan.index} {plan.name}: {plan.changes_text()}{notes}"
        )
    text = (
        f"Pod resources updated by vpaweb from the latest recommendation of "
        f"{workload} (mode {mode}): {'; '.join(described)}"
    )
    if len(text) > MAX_ANNOTATION_CHARS:
        text = text[: MAX_ANNOTATION_CHARS - 3] + "..."
    annotations = "/metadata/annotations/"
    ops.append(
        {
            "op": "add",
            "path": annotations + escape_pointer(UPDATES_ANNOTATION),
            "value": text,
        }
    )
    ops.append(
        {
            "op": "add",
            "path": annotations + escape_pointer(OBSERVED_ANNOTATION),
            "value": ", ".join(p.name for p in plans if p.list_key == "containers"),
        }
    )
    return ops


def limited_containers(
    spec: object, plans: Sequence[ContainerPlan], *, after: bool
) -> list[LimitedContainer]:
    """Every container of the pod as LimitRanger sees it (plain init containers
    included: they count in the Pod item's totals), before or after the patch."""
    by_place = {(p.list_key, p.index): p for p in plans}
    found: list[LimitedContainer] = []
    if not isinstance(spec, Mapping):
        return found
    for key in ("initContainers", "containers"):
        items = spec.get(key)
        for index, item in enumerate(items if isinstance(items, list) else ()):
            if not isinstance(item, Mapping):
                continue
            kind = APP
            if key == "initContainers":
                kind = SIDECAR if item.get("restartPolicy") == "Always" else INIT
            plan = by_place.get((key, index))
            if plan is not None:
                requests = plan.requests_after if after else plan.requests_before
                limits = plan.limits_after if after else plan.limits_before
            else:
                resources = item.get("resources") or {}
                try:
                    requests = parse_resource_list(
                        resources.get("requests"), field="requests"
                    )
                    limits = parse_resource_list(
                        resources.get("limits"), field="limits"
                    )
                except (InvalidInput, AttributeError):
                    continue  # unreadable: the API server refuses the pod anyway
            found.append(
                LimitedContainer(
                    name=str(item.get("name", "")),
                    kind=kind,
                    requests=requests,
                    limits=limits,
                )
            )
    return found


def limit_range_violations(
    spec: object,
    plans: Sequence[ContainerPlan],
    limit_ranges: tuple[LimitRangeItem | None, LimitRangeItem | None],
) -> list[str]:
    """What the patched pod would break that the pod as received did not: every
    LimitRanger rule (``engine/limit_ranger.py``), so a patch never gets a pod
    refused that the API server would have admitted unpatched."""
    container_item, pod_item = limit_ranges
    before = limit_ranger_problems(
        limited_containers(spec, plans, after=False), container_item, pod_item
    )
    after = limit_ranger_problems(
        limited_containers(spec, plans, after=True), container_item, pod_item
    )
    return [message for key, message in after.items() if key not in before]
