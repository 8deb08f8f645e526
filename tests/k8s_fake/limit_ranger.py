"""What kube-apiserver does to a pod and a LimitRange before storing them, for the fake
API server: defaulting, then the LimitRanger admission plugin's defaulting.

Copied from the real server's answers in tests/fixtures/k8s-wire/admission/:

- ``b2-limits-only-pod.create.json``: a container with limits and no requests gets
  requests equal to its limits (Pod defaulting, before admission), no annotation;
- ``d-limitrange-pod.*`` (LimitRange ``defaults`` in ``d-limitrange.sent.yaml``): a
  container with no resources gets the Container item's ``defaultRequest`` as
  requests and its ``default`` as limits, and the pod the annotation
  ``kubernetes.io/limit-ranger: LimitRanger plugin set: cpu, memory request for
  container app; cpu, memory limit for container app``.

The LimitRange's own defaulting (``SetDefaults_LimitRangeItem``, Container items only):
a resource with a ``max`` and no ``default`` gets ``default = max``; one with a
``default`` and no ``defaultRequest`` gets ``defaultRequest = default``; one with a
``min`` and still no ``defaultRequest`` gets ``defaultRequest = min``.

Only defaulting is modelled (LimitRanger's validation runs on writes, which this
read-only server does not take); a pod is admitted against the LimitRanges of its
namespace that exist when it is added, as on a real server, where a LimitRange
created later changes no running pod.
"""

from __future__ import annotations

import copy
from typing import Any

ANNOTATION = "kubernetes.io/limit-ranger"
PREFIX = "LimitRanger plugin set: "

Obj = dict[str, Any]


def default_limit_range(limit_range: Obj) -> Obj:
    """The LimitRange as the API server stores it (Container items defaulted)."""
    stored = copy.deepcopy(limit_range)
    for item in (stored.get("spec") or {}).get("limits") or []:
        if item.get("type") != "Container":
            continue
        default = item.setdefault("default", {})
        default_request = item.setdefault("defaultRequest", {})
        for resource, value in (item.get("max") or {}).items():
            default.setdefault(resource, value)
        for resource, value in default.items():
            default_request.setdefault(resource, value)
        for resource, value in (item.get("min") or {}).items():
            default_request.setdefault(resource, value)
        if not default:
            del item["default"]
        if not default_request:
            del item["defaultRequest"]
    return stored


def _default_requests_to_limits(container: Obj) -> None:
    """Pod defaulting: a resource with a limit and no request requests its limit."""
    resources = container.get("resources")
    if not isinstance(resources, dict) or not resources.get("limits"):
        return
    requests = resources.setdefault("requests", {})
    for resource, value in resources["limits"].items():
        requests.setdefault(resource, value)


def _merge(container: Obj, item: Obj, prefix: str) -> list[str]:
    """``mergeContainerResources``: fill what is missing; the annotation parts."""
    resources = container.setdefault("resources", {})
    set_requests: list[str] = []
    set_limits: list[str] = []
    for field, source, named in (
        ("limits", item.get("default") or {}, set_limits),
        ("requests", item.get("defaultRequest") or {}, set_requests),
    ):
        for resource, value in source.items():
            current = resources.get(field) or {}
            if resource not in current:
                resources.setdefault(field, {})[resource] = value
                named.append(resource)
    if not resources:
        del container["resources"]
    parts = []
    if set_requests:
        parts.append(
            f"{', '.join(sorted(set_requests))} request for {prefix} "
            f"{container['name']}"
        )
    if set_limits:
        parts.append(
            f"{', '.join(sorted(set_limits))} limit for {prefix} {container['name']}"
        )
    return parts


def admit_pod(pod: Obj, limit_ranges: list[Obj]) -> Obj:
    """The pod as the API server stores it, given its namespace's LimitRanges."""
    stored = copy.deepcopy(pod)
    spec = stored.get("spec") or {}
    groups = (
        ("initContainers", "init container"),
        ("containers", "container"),
    )
    for key, _ in groups:
        for container in spec.get(key) or []:
            _default_requests_to_limits(container)
    for limit_range in limit_ranges:
        items = [
            i
            for i in (limit_range.get("spec") or {}).get("limits") or []
            if i.get("type") == "Container"
        ]
        if not items:
            continue
        # defaultContainerResourceRequirements: the Container item's defaults (the
        # last such item of the LimitRange wins, resource by resource).
        item: Obj = {"default": {}, "defaultRequest": {}}
        for each in items:
            item["default"].update(each.get("default") or {})
            item["defaultRequest"].update(each.get("defaultRequest") or {})
        parts: list[str] = []
        # mergePodResourceRequirements: containers, then init containers.
        for key, prefix in reversed(groups):
            for container in spec.get(key) or []:
                parts.extend(_merge(container, item, prefix))
        if parts:
            annotations = stored.setdefault("metadata", {}).setdefault(
                "annotations", {}
            )
            annotations[ANNOTATION] = PREFIX + "; ".join(parts)
    return stored
