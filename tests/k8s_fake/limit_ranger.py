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

A pod is admitted against the LimitRanges of its namespace that exist when it is
added, as on a real server, where a LimitRange created later changes no running pod.

``validate_pod`` is LimitRanger's validation, which runs *after* mutating webhooks
(``admission/apiserver-admission-plugin-order.json``; plugin/pkg/admission/limitranger
``PodValidateLimitFunc`` for the rules). It works on the JSON as the API server holds
it, with its own quantity arithmetic (nothing of vpaweb's), so tests can judge
vpaweb's patches against it. Its messages are the recorded ones:

- ``tests/fixtures/k8s-wire/limitranger/ratio-refusal.audit.json``: 403, ``pods
  "<name>" is forbidden: cpu max limit to request ratio per Container is 3500m, but
  provided ratio is 3.846154``;
- ``tests/fixtures/k8s-wire/admission/d2-limitrange-max-violated-by-webhook-patch
  .create.json``: 403, ``maximum cpu usage per Container is 1, but limit is 2``.

Rules per resource of each item: ``min`` wants a request at least min (and a limit,
if any, too); ``max`` wants a limit at most max (and a request, if any, too);
``maxLimitRequestRatio`` wants a non-zero request and limit with limit ÷ request
(float64, x 1000) at most the ratio's MilliValue. Container items judge containers and
init containers; Pod items the pod's totals (``podRequests``/``podLimits``: containers
and native sidecars summed, at least each plain init container plus the sidecars
before it). A request above its limit is the API server's 422, not LimitRanger's.
"""

from __future__ import annotations

import copy
import math
import re
from fractions import Fraction
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


# --- validation (after the webhooks) --------------------------------------------------

_SUFFIXES = {
    "": Fraction(1),
    "m": Fraction(1, 1000),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
    "Ki": Fraction(2**10),
    "Mi": Fraction(2**20),
    "Gi": Fraction(2**30),
    "Ti": Fraction(2**40),
    "Pi": Fraction(2**50),
    "Ei": Fraction(2**60),
}
_QUANTITY = re.compile(r"^([+-]?[0-9.]+)([eE][+-]?[0-9]+)?([a-zA-Z]*)$")
# resource.MaxMilliValue: above it, quantities compare by Value() instead.
_MAX_MILLI = (2**63 - 1) // 1000


def quantity(text: Any) -> Fraction:
    """A Kubernetes quantity as an exact number."""
    match = _QUANTITY.match(str(text))
    if match is None or match.group(3) not in _SUFFIXES:
        raise ValueError(f"not a quantity: {text!r}")
    value = Fraction(match.group(1)) * _SUFFIXES[match.group(3)]
    if match.group(2):
        value *= Fraction(10) ** int(match.group(2)[1:])
    return value


def _value(q: Fraction) -> int:
    return math.ceil(q)  # Quantity.Value() rounds up


def _milli(q: Fraction) -> int:
    return math.ceil(q * 1000)  # Quantity.MilliValue() rounds up


def _observed(
    req: Fraction | None, lim: Fraction | None, enforced: Fraction
) -> tuple[int, int, int]:
    """``requestLimitEnforcedValues``: MilliValues unless one would overflow."""
    values = [req or Fraction(0), lim or Fraction(0), enforced]
    if all(_value(v) <= _MAX_MILLI for v in values):
        return _milli(values[0]), _milli(values[1]), _milli(values[2])
    return _value(values[0]), _value(values[1]), _value(values[2])


def _check(
    kind: str,
    requests: dict[str, Fraction],
    limits: dict[str, Fraction],
    item: Obj,
) -> list[str]:
    errors = []
    for resource, text in (item.get("min") or {}).items():
        enforced = quantity(text)
        req, lim = requests.get(resource), limits.get(resource)
        r, limit, e = _observed(req, lim, enforced)
        if req is None:
            errors.append(
                f"minimum {resource} usage per {kind} is {text}.  "
                "No request is specified"
            )
        elif r < e:
            errors.append(
                f"minimum {resource} usage per {kind} is {text}, but request is {req}"
            )
        elif lim is not None and limit < e:
            errors.append(
                f"minimum {resource} usage per {kind} is {text}, but limit is {lim}"
            )
    for resource, text in (item.get("max") or {}).items():
        enforced = quantity(text)
        req, lim = requests.get(resource), limits.get(resource)
        r, limit, e = _observed(req, lim, enforced)
        if lim is None:
            errors.append(
                f"maximum {resource} usage per {kind} is {text}.  No limit is specified"
            )
        elif limit > e:
            errors.append(
                f"maximum {resource} usage per {kind} is {text}, but limit is {lim}"
            )
        elif req is not None and r > e:
            errors.append(
                f"maximum {resource} usage per {kind} is {text}, but request is {req}"
            )
    for resource, text in (item.get("maxLimitRequestRatio") or {}).items():
        enforced = quantity(text)
        req, lim = requests.get(resource), limits.get(resource)
        r, limit, _ = _observed(req, lim, enforced)
        if req is None or r == 0:
            errors.append(
                f"{resource} max limit to request ratio per {kind} is {text}, but no "
                "request is specified or request is 0"
            )
            continue
        if lim is None or limit == 0:
            errors.append(
                f"{resource} max limit to request ratio per {kind} is {text}, but no "
                "limit is specified or limit is 0"
            )
            continue
        observed = float(limit) / float(r)
        shown = observed
        allowed = float(_value(enforced))
        if _value(enforced) <= _MAX_MILLI:
            observed *= 1000
            allowed = float(_milli(enforced))
        if observed > allowed:
            errors.append(
                f"{resource} max limit to request ratio per {kind} is {text}, but "
                f"provided ratio is {shown:f}"
            )
    return errors


def _amounts(container: Obj, field: str) -> dict[str, Fraction]:
    resources = container.get("resources") or {}
    return {k: quantity(v) for k, v in (resources.get(field) or {}).items()}


def _pod_total(spec: Obj, field: str) -> dict[str, Fraction]:
    """``podRequests`` / ``podLimits`` (no overhead, no resize status)."""
    total: dict[str, Fraction] = {}
    for container in spec.get("containers") or []:
        for k, v in _amounts(container, field).items():
            total[k] = total.get(k, Fraction(0)) + v
    sidecars: dict[str, Fraction] = {}
    init_peak: dict[str, Fraction] = {}
    for container in spec.get("initContainers") or []:
        own = _amounts(container, field)
        if container.get("restartPolicy") == "Always":
            for k, v in own.items():
                total[k] = total.get(k, Fraction(0)) + v
                sidecars[k] = sidecars.get(k, Fraction(0)) + v
            running = dict(sidecars)
        else:
            running = dict(own)
            for k, v in sidecars.items():
                running[k] = running.get(k, Fraction(0)) + v
        for k, v in running.items():
            if k not in init_peak or v > init_peak[k]:
                init_peak[k] = v
    for k, v in init_peak.items():
        if k not in total or v > total[k]:
            total[k] = v
    return total


def validate_pod(pod: Obj, limit_ranges: list[Obj]) -> list[str]:
    """LimitRanger's refusals of ``pod`` (empty: admitted), in its words."""
    spec = pod.get("spec") or {}
    errors: list[str] = []
    for limit_range in limit_ranges:
        for item in (limit_range.get("spec") or {}).get("limits") or []:
            if item.get("type") == "Container":
                for key in ("containers", "initContainers"):
                    for container in spec.get(key) or []:
                        errors += _check(
                            "Container",
                            _amounts(container, "requests"),
                            _amounts(container, "limits"),
                            item,
                        )
            elif item.get("type") == "Pod":
                errors += _check(
                    "Pod",
                    _pod_total(spec, "requests"),
                    _pod_total(spec, "limits"),
                    item,
                )
    return errors


def forbidden(pod: Obj, errors: list[str]) -> Obj:
    """The 403 Status LimitRanger's refusal gets (the recorded shape)."""
    name = (pod.get("metadata") or {}).get("name", "")
    message = errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": f'pods "{name}" is forbidden: {message}',
        "reason": "Forbidden",
        "details": {"name": name, "kind": "pods"},
        "code": 403,
    }
