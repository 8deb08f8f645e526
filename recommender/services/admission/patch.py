"""The webhook's JSONPatch, in upstream's shapes, and the LimitRange check before it.

Shapes (VPA-ALGORITHM.md §7.2, ``patch/resource_updates.go``), per container that gets
a value, built from the exact object received:

- ``add .../resources {}`` when the container has no ``resources`` key at all (upstream
  adds it when requests and limits are both nil; we leave an existing ``resources``
  object alone so nothing else in it, e.g. ``claims``, is replaced);
- ``add .../resources/requests {}`` (``limits {}``) when that map is absent;
- ``add .../resources/requests/<res> "<quantity>"`` per resource (``add`` on an
  existing member replaces it, RFC 6902 §4.1, as the recorded StatefulSet pod shows).

Only amounts that differ from the pod's are written. Then vpaweb's annotations, the
analogue of upstream's ``vpaUpdates`` / ``vpaObservedContainers`` under ``vpaweb.io/``
(``add /metadata/annotations {}`` first when the pod has none). JSON Pointer escaping
(``~`` → ``~0``, ``/`` → ``~1``) applies to every key, so ``vpaweb.io/updates`` is
``/metadata/annotations/vpaweb.io~1updates``.

LimitRanger validates min/max *after* mutating webhooks and answers 403 (and the API
server 422 for a request above its limit), even under ``failurePolicy: Ignore``;
``limit_range_violations`` finds what a patch would newly break so it is never sent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from recommender.engine.capping import LimitRangeItem
from recommender.engine.resources import CPU, RESOURCE_NAMES, Resources
from recommender.services.advice.pod_spec import resource_list

if TYPE_CHECKING:
    from recommender.services.admission.decision import PodContainerRef

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
        """A container the webhook leaves as it is."""
        return cls(
            name=container.name,
            list_key=container.list_key,
            index=container.index,
            requests_before=container.requests,
            limits_before=container.limits,
            set_requests=Resources(),
            set_limits=Resources(),
            reason=f"left as is: {reason}",
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


def _container_problems(
    name: str,
    requests: Resources,
    limits: Resources,
    item: LimitRangeItem | None,
) -> dict[tuple[str, str, str], str]:
    """(container, resource, rule) -> message for what the API server would refuse."""
    found: dict[tuple[str, str, str], str] = {}
    for resource in RESOURCE_NAMES:
        request, limit = requests.get(resource), limits.get(resource)

        def text(amount: int, resource: str = resource) -> str:
            return resource_list(Resources().with_amount(resource, amount))[resource]

        if request is not None and limit is not None and request > limit:
            found[(name, resource, "request<=limit")] = (
                f"{name}: {resource} request {text(request)} above its limit "
                f"{text(limit)}"
            )
        if item is None:
            continue
        low, high = item.min.get(resource), item.max.get(resource)
        for label, value in (("request", request), ("limit", limit)):
            if value is not None and low is not None and value < low:
                found[(name, resource, f"min-{label}")] = (
                    f"{name}: {resource} {label} {text(value)} below the minimum "
                    f"{text(low)}"
                )
            if value is not None and high is not None and value > high:
                found[(name, resource, f"max-{label}")] = (
                    f"{name}: {resource} {label} {text(value)} above the maximum "
                    f"{text(high)}"
                )
    return found


def _pod_problems(
    plans: Sequence[ContainerPlan], item: LimitRangeItem | None, *, after: bool
) -> dict[tuple[str, str, str], str]:
    found: dict[tuple[str, str, str], str] = {}
    if item is None:
        return found
    for resource in RESOURCE_NAMES:
        requests = [
            (p.requests_after if after else p.requests_before).get(resource)
            for p in plans
        ]
        limits = [
            (p.limits_after if after else p.limits_before).get(resource) for p in plans
        ]
        unit = "m" if resource == CPU else " bytes"
        low, high = item.min.get(resource), item.max.get(resource)
        total_request = sum(v for v in requests if v is not None)
        if low is not None and total_request < low:
            found[("pod", resource, "min")] = (
                f"pod {resource} requests {total_request}{unit} below the Pod minimum "
                f"{low}{unit}"
            )
        known = [v for v in limits if v is not None]
        # A container without a limit makes the pod's total unbounded: not ours.
        if high is not None and len(known) == len(limits) and sum(known) > high:
            found[("pod", resource, "max")] = (
                f"pod {resource} limits above the Pod maximum {high}{unit}"
            )
    return found


def limit_range_violations(
    plans: Sequence[ContainerPlan],
    limit_ranges: tuple[LimitRangeItem | None, LimitRangeItem | None],
) -> list[str]:
    """What the patched pod would break that the pod as received did not."""
    container_item, pod_item = limit_ranges
    before: dict[tuple[str, str, str], str] = {}
    after: dict[tuple[str, str, str], str] = {}
    for plan in plans:
        before.update(
            _container_problems(
                plan.name, plan.requests_before, plan.limits_before, container_item
            )
        )
        after.update(
            _container_problems(
                plan.name, plan.requests_after, plan.limits_after, container_item
            )
        )
    before.update(_pod_problems(plans, pod_item, after=False))
    after.update(_pod_problems(plans, pod_item, after=True))
    return [message for key, message in after.items() if key not in before]
