"""A pod spec as callers send it, read into engine values, and engine values back.

The RecommendationQuery (``recommendation_query.py``) and the manifest right-sizing
(``rightsize.py``) both read a caller's pod: its containers and native sidecars with
their requests and limits as engine ``Resources`` (errors name the path of the bad
part), and the workload owning it. ``resource_list`` writes ``Resources`` back as a
Kubernetes ResourceList; ``readable_pod_resources`` rounds what is about to be written
up to readable quantities without crossing a LimitRange maximum.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from recommender.engine.capping import LimitRangeItem
from recommender.engine.limits import ContainerResources
from recommender.engine.quantity import (
    parse_cpu_millicores,
    parse_memory_bytes,
    readable_memory_bytes,
)
from recommender.engine.quantity import resource_list as resource_list
from recommender.engine.resources import CPU, MEMORY, RESOURCE_NAMES, Resources
from recommender.errors import InvalidInput
from recommender.models import Workload


def parse_quantity(resource: str, raw: object, *, field: str) -> int:
    """A manifest's quantity (text, or a YAML/JSON number) in millicores or bytes."""
    if isinstance(raw, bool) or not isinstance(raw, str | int | float):
        raise InvalidInput(
            f"{field}: {raw!r} is not a quantity; "
            "use a string such as '500m' or '256Mi'",
            field=field,
        )
    if isinstance(raw, float) and not math.isfinite(raw):
        raise InvalidInput(f"{field}: {raw!r} is not a finite quantity", field=field)
    text = raw if isinstance(raw, str) else str(raw)
    try:
        return (
            parse_cpu_millicores(text) if resource == CPU else parse_memory_bytes(text)
        )
    except ValueError as exc:
        raise InvalidInput(f"{field}: {exc}", field=field) from None


def parse_resource_list(raw: object, *, field: str) -> Resources:
    """CPU and memory of a ResourceList; other resources (GPUs, storage) are ignored."""
    if raw is None:
        return Resources()
    if not isinstance(raw, Mapping):
        raise InvalidInput(
            f"{field} must be a mapping of resource to quantity", field=field
        )
    amounts = Resources()
    for resource in RESOURCE_NAMES:
        if resource in raw and raw[resource] is not None:
            value = parse_quantity(resource, raw[resource], field=f"{field}.{resource}")
            amounts = amounts.with_amount(resource, value)
    return amounts


@dataclass(frozen=True)
class PodContainer:
    """One container of a pod spec as sent by the caller."""

    name: str
    requests: Resources
    limits: Resources
    field: str  # its path in the input, for error messages
    is_init: bool = False

    def as_engine(self) -> ContainerResources:
        """The engine's view of the container's current requests and limits."""
        return ContainerResources(
            name=self.name, requests=self.requests, limits=self.limits
        )


def parse_pod_containers(pod_spec: object, *, field: str) -> list[PodContainer]:
    """A pod spec's containers and native sidecars; plain init containers are skipped.

    Raises InvalidInput naming the path of the first malformed part.
    """
    if not isinstance(pod_spec, Mapping):
        raise InvalidInput(f"{field} must be a pod spec (a mapping)", field=field)
    if "containers" not in pod_spec:
        raise InvalidInput(
            f"{field}.containers is required", field=f"{field}.containers"
        )
    containers: list[PodContainer] = []
    seen: set[str] = set()
    for key, is_init in (("containers", False), ("initContainers", True)):
        items = pod_spec.get(key)
        if items is None:
            continue
        if not isinstance(items, list):
            raise InvalidInput(f"{field}.{key} must be a list", field=f"{field}.{key}")
        for index, item in enumerate(items):
            path = f"{field}.{key}[{index}]"
            if not isinstance(item, Mapping):
                raise InvalidInput(
                    f"{path} must be a container (a mapping)", field=path
                )
            name = item.get("name")
            if not isinstance(name, str) or not name:
                raise InvalidInput(f"{path}.name is required", field=f"{path}.name")
            if name in seen:
                raise InvalidInput(
                    f"{path}.name {name!r} is used by two containers",
                    field=f"{path}.name",
                )
            seen.add(name)
            resources = item.get("resources") or {}
            if not isinstance(resources, Mapping):
                raise InvalidInput(
                    f"{path}.resources must be a mapping", field=f"{path}.resources"
                )
            container = PodContainer(
                name=name,
                requests=parse_resource_list(
                    resources.get("requests"), field=f"{path}.resources.requests"
                ),
                limits=parse_resource_list(
                    resources.get("limits"), field=f"{path}.resources.limits"
                ),
                field=path,
                is_init=is_init,
            )
            # Only native sidecars (restartPolicy Always) run beside the app: sized.
            if is_init and item.get("restartPolicy") != "Always":
                continue
            containers.append(container)
    return containers


def owner_of_pod(metadata: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """The workload owning a pod: its controller owner, or a ReplicaSet's Deployment."""
    refs = metadata.get("ownerReferences")
    if not isinstance(refs, list):
        return None, None
    for ref in refs:
        if not isinstance(ref, Mapping) or not ref.get("controller"):
            continue
        kind, name = ref.get("kind"), ref.get("name")
        if not isinstance(kind, str) or not isinstance(name, str):
            return None, None
        labels = metadata.get("labels")
        template_hash = (
            labels.get("pod-template-hash") if isinstance(labels, Mapping) else None
        )
        # A Deployment's ReplicaSet is "<deployment>-<pod-template-hash>".
        if kind == "ReplicaSet" and isinstance(template_hash, str):
            suffix = f"-{template_hash}"
            if name.endswith(suffix) and len(name) > len(suffix):
                return Workload.Kind.DEPLOYMENT, name[: -len(suffix)]
        return kind, name
    return None, None


# (the container as it is now, requests to write, limits to write): None amounts are
# left as they are.
PodWrite = tuple["PodContainer", Resources, Resources]


def readable_pod_resources(
    rows: Sequence[PodWrite],
    *,
    container_range: LimitRangeItem | None = None,
    pod_range: LimitRangeItem | None = None,
) -> list[tuple[Resources, Resources]]:
    """The requests and limits of ``rows`` as a person or kubectl should read them:
    memory rounded up by ``readable_memory_bytes`` ("729Mi", never below the exact
    amount). The API server enforces LimitRange maximums, so an amount whose rounding
    would cross one stays exact: a container's request or limit above the Container
    item's max, or the pod's sum of requests or of limits (written amounts, else the
    current ones) above the Pod item's max. CPU is whole millicores already."""
    container_max = (
        None if container_range is None else container_range.max.memory_bytes
    )
    exact = [(requests, limits) for _, requests, limits in rows]
    out = [
        (_readable(requests, container_max), _readable(limits, container_max))
        for requests, limits in exact
    ]
    pod_max = None if pod_range is None else pod_range.max.memory_bytes
    if pod_max:
        current = [(c.requests, c.limits) for c, _, _ in rows]
        for side in (0, 1):
            if (
                _pod_memory(out, current, side)
                > pod_max
                >= _pod_memory(exact, current, side)
            ):
                return exact
    return out


def _readable(amounts: Resources, maximum: int | None) -> Resources:
    exact = amounts.memory_bytes
    if exact is None:
        return amounts
    readable = readable_memory_bytes(exact)
    if maximum is not None and readable > maximum >= exact:
        return amounts  # rounding up would cross the LimitRange max
    return amounts.with_amount(MEMORY, readable)


def _pod_memory(
    written: Sequence[tuple[Resources, Resources]],
    current: Sequence[tuple[Resources, Resources]],
    side: int,
) -> int:
    """The pod's memory requests (side 0) or limits (side 1): written, else current."""
    total = 0
    for new, now in zip(written, current, strict=True):
        amount = new[side].memory_bytes
        if amount is None:
            amount = now[side].memory_bytes
        total += amount or 0
    return total


# The fields of a core/v1 Container (Kubernetes 1.36) and of its ResourceRequirements:
# anything else in a manifest is a typo the API server would refuse.
CONTAINER_FIELDS = frozenset(
    {
        "name", "image", "command", "args", "workingDir", "ports", "envFrom", "env",
        "resources", "resizePolicy", "restartPolicy", "restartPolicyRules",
        "volumeMounts", "volumeDevices", "livenessProbe", "readinessProbe",
        "startupProbe", "lifecycle", "terminationMessagePath",
        "terminationMessagePolicy", "imagePullPolicy", "securityContext", "stdin",
        "stdinOnce", "tty",
    }
)  # fmt: skip
RESOURCES_FIELDS = frozenset({"requests", "limits", "claims"})


def unknown_field_notes(item: Mapping[str, Any]) -> list[str]:
    """A note per field of a container (or of its ``resources``) that Kubernetes does
    not know, with the known field it most resembles."""
    notes = []
    resources = item.get("resources")
    for prefix, fields, known in (
        ("", item, CONTAINER_FIELDS),
        (
            "resources.",
            resources if isinstance(resources, Mapping) else {},
            RESOURCES_FIELDS,
        ),
    ):
        for name in fields:
            if name in known:
                continue
            close = difflib.get_close_matches(str(name), known, n=1)
            hint = f" (did you mean {prefix}{close[0]}?)" if close else ""
            notes.append(
                f"unknown container field {prefix}{name}{hint}: kept as sent, but the "
                "API server will refuse it; vpaweb read only the fields it knows"
            )
    return notes
